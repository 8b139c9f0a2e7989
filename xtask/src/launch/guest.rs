//! A guest other than the project's kernel (`cargo xtask run --guest …`): a kernel, its
//! initramfs and its command line. Under the hypervisor it travels as one guest bundle
//! (`abi::bundle`) in QEMU's `-initrd` slot, written under `target/guest/` before QEMU starts;
//! alone, QEMU boots it directly (`-kernel`, `-initrd`, `-append`).

use anyhow::{Context, Result};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

/// A guest kernel with its initramfs and command line (`cargo xtask run --guest …`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guest {
    /// An arm64 Image or a raw binary.
    pub kernel: PathBuf,
    /// The initramfs, if any.
    pub initrd: Option<PathBuf>,
    /// The guest's command line.
    pub append: String,
}

impl Guest {
    /// Where its bundle goes: named by what it holds (paths, sizes, modification times, command
    /// line), so runs in parallel with different guests never share a file.
    pub fn bundle_path(&self) -> PathBuf {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for p in std::iter::once(&self.kernel).chain(self.initrd.iter()) {
            p.hash(&mut h);
            if let Ok(m) = std::fs::metadata(p) {
                m.len().hash(&mut h);
                m.modified().ok().hash(&mut h);
            }
        }
        self.append.hash(&mut h);
        crate::workspace_root().join("target/guest").join(format!("bundle-{:016x}.img", h.finish()))
    }

    /// The length its bundle will have, from the files' sizes (nothing read or written).
    pub fn bundle_len(&self) -> Result<u64> {
        let len = |p: &std::path::Path| -> Result<u64> {
            Ok(std::fs::metadata(p).with_context(|| format!("{}", p.display()))?.len())
        };
        let initrd = match &self.initrd {
            Some(p) => len(p)?,
            None => 0,
        };
        Ok(abi::bundle::len(len(&self.kernel)?, initrd, self.append.len() as u64))
    }

    /// Writes the bundle (kernel, initramfs, command line) the hypervisor unpacks.
    pub fn write_bundle(&self) -> Result<PathBuf> {
        let path = self.bundle_path();
        if path.is_file() {
            return Ok(path);
        }
        let kernel = std::fs::read(&self.kernel)
            .with_context(|| format!("reading the guest kernel {}", self.kernel.display()))?;
        let initrd = match &self.initrd {
            Some(p) => Some(std::fs::read(p).with_context(|| format!("reading the guest initramfs {}", p.display()))?),
            None => None,
        };
        let append = (!self.append.is_empty()).then_some(self.append.as_str());
        let b =
            abi::bundle::write(&kernel, initrd.as_deref(), append).map_err(|e| anyhow::anyhow!("guest bundle: {e}"))?;
        std::fs::create_dir_all(path.parent().unwrap())?;
        crate::write_if_changed(&path, &b)?;
        Ok(path)
    }
}
