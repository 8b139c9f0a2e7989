//! The KVM host model: the project run the way an arm64 Linux host with KVM runs it
//! (`--accel kvm`, [`super::kvm`]), on this machine, for testing that path where no arm64
//! machine exists. Not for speed: everything runs under TCG, one level down.
//!
//! The model is Debian's newest arm64 cloud Linux on QEMU 10's TCG (`-M
//! virt,virtualization=on,gic-version=3 -cpu max`, which emulates FEAT_NV2) booted with
//! `kvm-arm.mode=nested`, so its KVM gives guests an EL2; its initramfs holds Debian's arm64
//! QEMU ([`crate::provision::kvm_model`]), the project's Images of the run and an `/init` (`inner`) that runs
//! exactly the QEMU command line the xtask would run on an arm64 host with `--accel kvm`
//! (`-accel kvm -cpu host`, the same machine, RAM, images and command line) and powers the
//! model off when it ends. The inner console reaches this machine on the model's virtio
//! console, apart from the model's own Linux, and the run is judged on it alone (`judge`).
//!
//! The outer machine: as many vCPUs as the inner run has (each inner vCPU thread gets a vCPU
//! of its own in the model, so none waits for the model's scheduler to run a lock holder),
//! and RAM for the inner machine (its `-m`, the hypervisor's share included) plus twice the
//! initramfs (the loaded archive and its unpacked copy, until the kernel frees the first) plus
//! [`LINUX_OVERHEAD_MIB`] for the model's own Linux and the inner QEMU process.

pub mod inner;
pub mod judge;

use super::{Judging, Outcome};
use crate::error::Refused;
use crate::provision::kvm_model as provision;
use crate::provision::qemu_pkg::Version;
use anyhow::{Context, Result};
use std::path::PathBuf;
use std::time::Duration;

/// The QEMU the model runs on: FEAT_NV2 under TCG, virtio console (checked with 10.0.2).
pub const OUTER_QEMU: Version = Version(10, 0, 0);
/// RAM the model's Linux and the inner QEMU process take besides the inner machine's RAM and
/// the initramfs (measured with the kernel alone inside: the model's Linux uses about 45 MiB,
/// the inner QEMU process 73 MiB resident besides the guest RAM its guest touches).
pub const LINUX_OVERHEAD_MIB: u64 = 256;
/// The model's kernel command line, before the run's own words: its console on the serial
/// port (the outer QEMU's stderr), KVM with nested virtualisation, a reboot on panic (which
/// `-no-reboot` turns into the end of the outer QEMU), only warnings and worse on the console.
pub const OUTER_APPEND: &str = "console=ttyAMA0 kvm-arm.mode=nested panic=-1 quiet";

/// The provisioned model.
#[derive(Debug, Clone)]
pub struct KvmModel {
    /// The QEMU the model runs on (10.0 or newer).
    pub outer_qemu: PathBuf,
    /// The model's kernel Image.
    pub kernel: PathBuf,
    /// The initramfs part that never changes (busybox, QEMU, its libraries).
    pub base: PathBuf,
    /// `pgtlab-kvmprobe` (linux-user), built for this run.
    pub probe: PathBuf,
    /// What was provisioned.
    pub manifest: provision::Manifest,
    /// The model's kernel command line before the run's own words ([`OUTER_APPEND`]; a test
    /// changes it to model a host whose KVM gives no EL2, or no KVM at all).
    pub outer_append: String,
}

/// Provisions the model (once: downloads cached under `target/downloads/kvm-model/`), finds the
/// QEMU it runs on (`crate::provision::qemu_pkg`) and builds the probe.
pub fn provision() -> Result<KvmModel> {
    let p = provision::provision().context("provisioning the KVM host model")?;
    let outer_qemu =
        crate::provision::qemu_pkg::qemu_at_least(OUTER_QEMU).context("the QEMU the KVM host model runs on")?;
    let tc = crate::provision::toolchain::find()?;
    let probe = crate::build::linux_user(&tc)?
        .into_iter()
        .find(|(n, _)| *n == "pgtlab-kvmprobe")
        .map(|(_, p)| p)
        .context("linux-user built no pgtlab-kvmprobe")?;
    Ok(KvmModel {
        outer_qemu,
        kernel: p.kernel,
        base: p.base,
        probe,
        manifest: p.manifest,
        outer_append: OUTER_APPEND.to_string(),
    })
}

/// The outer machine for an inner command line and an initramfs of `initramfs_bytes`:
/// (vCPUs, MiB of RAM). See the module's documentation.
pub fn outer_machine(inner_args: &[String], initramfs_bytes: u64) -> Result<(u32, u64), String> {
    let m = super::kvm::arg_after(inner_args, "-m").ok_or("the inner command line has no -m")?;
    let inner_mib = crate::machine::Size::parse(m).map_err(|e| format!("the inner -m: {e}"))?.in_mib();
    let smp = super::kvm::needs(inner_args).vcpus.max(1);
    let initramfs_mib = initramfs_bytes.div_ceil(1 << 20);
    let mib = (inner_mib + 2 * initramfs_mib + LINUX_OVERHEAD_MIB).div_ceil(64) * 64;
    Ok((smp, mib))
}

/// The outer QEMU's arguments (without the QMP sockets [`super::run_args_until`] adds).
pub fn outer_args(kernel: &std::path::Path, initrd: &std::path::Path, smp: u32, mib: u64, append: &str) -> Vec<String> {
    let mut a: Vec<String> = [
        "-M",
        "virt,virtualization=on,gic-version=3",
        "-cpu",
        "max",
        "-smp",
        &smp.to_string(),
        "-m",
        &format!("{mib}M"),
        "-display",
        "none",
        "-monitor",
        "none",
        "-no-reboot",
        "-nic",
        "none",
        // The model's serial console (its Linux, /init, the probe): the outer QEMU's stderr.
        "-chardev",
        "file,id=model,path=/dev/stderr,append=on",
        "-serial",
        "chardev:model",
        // The inner run's console (/dev/hvc0 in the model): the outer QEMU's stdout.
        "-chardev",
        "stdio,id=inner",
        "-device",
        "virtio-serial-pci",
        "-device",
        "virtconsole,chardev=inner",
    ]
    .map(String::from)
    .into();
    a.extend(["-kernel".into(), kernel.display().to_string(), "-initrd".into(), initrd.display().to_string()]);
    a.extend(["-append".into(), append.to_string()]);
    a
}

/// How old a run's initramfs is when a later run removes it (its run was killed before it could):
/// QEMU has read it long before.
const STALE: Duration = Duration::from_secs(3600);

/// Removes the initramfs files under `dir` older than [`STALE`].
fn remove_stale(dir: &std::path::Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let old = e.metadata().ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok());
        if e.file_name().to_string_lossy().starts_with("initramfs-") && old.is_some_and(|a| a > STALE) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// A fresh token for a run's markers (`judge`): 16 hex digits from the kernel's random source.
fn token() -> Result<String> {
    let mut b = [0u8; 8];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl KvmModel {
    /// Runs `kvm_args` (a KVM command line, as `crate::launch::Launch::resolve` writes it for an
    /// arm64 host) inside the model and returns the inner run's outcome, to judge by `judging`
    /// as any run's; every line of both consoles goes through `echo` as it comes. A refusal (KVM
    /// cannot run what is asked, or the command line cannot run inside the model) is an error
    /// [`Refused`].
    pub fn run(
        &self,
        kvm_args: &[String],
        judging: Judging,
        timeout: Duration,
        progress: Option<Duration>,
        mut echo: impl FnMut(&str),
    ) -> Result<Outcome> {
        let refuse = |why: String| anyhow::Error::new(Refused(why));
        let carried = inner::carry(kvm_args).map_err(refuse)?;
        let needs = super::kvm::needs(kvm_args);
        let tag = judge::Tag::new(&token()?);
        let mut initrd = std::fs::read(&self.base).with_context(|| format!("reading {}", self.base.display()))?;
        initrd.extend(inner::run_part(&carried, &std::fs::read(&self.probe)?)?);
        let (smp, mib) = outer_machine(kvm_args, initrd.len() as u64).map_err(refuse)?;
        let dir = crate::workspace_root().join("target/kvm-model");
        std::fs::create_dir_all(&dir)?;
        remove_stale(&dir);
        let initrd_path = dir.join(format!("initramfs-{}.cpio", tag.token()));
        crate::write_file(&initrd_path, &initrd)?;
        let mut words = vec![format!("smp={}", needs.vcpus)];
        if needs.el2 {
            words.push("need-el2".into());
        }
        if needs.mte {
            words.push("mte".into());
        }
        let append =
            format!("{} kvm_model_token={} kvm_model_needs={}", self.outer_append, tag.token(), words.join(","));
        let args = outer_args(&self.kernel, &initrd_path, smp, mib, &append);
        eprintln!(
            "xtask: KVM host model: {} with {smp} vCPUs and {mib} MiB ({} for the inner machine), initramfs {:.1} MB",
            self.manifest.describe(),
            super::kvm::arg_after(kvm_args, "-m").unwrap_or("?"),
            initrd.len() as f64 / 1e6,
        );
        eprintln!("xtask: KVM host model: {} {}", self.outer_qemu.display(), args.join(" "));
        eprintln!("xtask: inside it: qemu-system-aarch64 {}", carried.args.join(" "));
        // The outer run is never judged itself: only its inner stream is (`judge`).
        let outer =
            super::run_args(&self.outer_qemu, &args, Judging::Unverified, timeout, progress, |l| echo(&tag.display(l)));
        let _ = std::fs::remove_file(&initrd_path);
        match judge::inner_outcome(&outer?, &tag, judging) {
            judge::Inner::Ran(o) => Ok(o),
            judge::Inner::Refused(why) => Err(refuse(why)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outer_machine_fits_the_inner_one() {
        let a: Vec<String> =
            "-M virt,virtualization=on -accel kvm -cpu host -smp 4 -m 1046M".split(' ').map(String::from).collect();
        // 1046 + 2 * 80 + 256 = 1462 -> 1472 (a multiple of 64).
        assert_eq!(outer_machine(&a, 80 << 20), Ok((4, 1472)));
        let one: Vec<String> = "-M virt -smp 1 -m 4096M".split(' ').map(String::from).collect();
        assert_eq!(outer_machine(&one, 1), Ok((1, 4096 + 2 + 256 + 62)));
        assert!(outer_machine(&a[..6], 1).unwrap_err().contains("no -m"));
    }

    #[test]
    fn the_outer_qemu_keeps_the_model_s_console_apart_from_the_inner_one() {
        let a = outer_args(std::path::Path::new("/k"), std::path::Path::new("/i"), 2, 1472, OUTER_APPEND);
        let s = a.join(" ");
        assert!(s.starts_with("-M virt,virtualization=on,gic-version=3 -cpu max -smp 2 -m 1472M"), "{s}");
        assert!(s.contains("-serial chardev:model") && s.contains("path=/dev/stderr"), "{s}");
        assert!(s.contains("-chardev stdio,id=inner") && s.contains("virtconsole,chardev=inner"), "{s}");
        assert!(!s.contains("semihosting") && !s.contains("-nographic"), "{s}");
        assert!(OUTER_APPEND.contains("kvm-arm.mode=nested") && OUTER_APPEND.contains("console=ttyAMA0"));
    }
}
