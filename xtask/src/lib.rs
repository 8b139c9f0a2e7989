//! The host side of the project, as a library so the integration tests in `tests/` boot QEMU
//! exactly the way `cargo xtask run` does. In layers, each using only the ones below it:
//!
//! 1. **Ground**: files ([`write_file`], [`workspace_root`]), one error style ([`error`]),
//!    child processes that end with the xtask ([`signals`]), [`cpio`], a QMP client ([`qmp`]).
//! 2. **[`provision`]**: what this machine has and what is fetched for it once: the cross
//!    toolchain, apt, Debian's arm64 packages, a QEMU new enough for the board models,
//!    firmware, what this host's KVM offers, the KVM host model's files.
//! 3. **[`machine`]**: the one table of machines (QEMU's `virt`, the board models, the boards
//!    QEMU has no model of), CPU models, `--mem` as a [`machine::Size`], accelerators.
//! 4. **Artifacts**: the Images ([`build`]), a `--guest` file identified ([`kernel_file`]),
//!    the instruction-counting plugin ([`plugin`]), `@@report` records ([`report`]).
//! 5. **[`launch`]**: a boot as a typed spec, checked once and turned once into QEMU's
//!    arguments, with the machine's RAM sized on the way.
//! 6. **[`supervise`]**: QEMU as a supervised process, its console watched, its outcome judged;
//!    run where the accelerator says: here (TCG, this host's KVM) or inside the KVM host model.
//! 7. **Commands**: [`run`], [`test`], [`lint`], [`bench`] (with [`plot`]), [`perf`],
//!    [`fuzz`], [`mutants`], [`flash`], [`chainboot`], [`doctor`]; [`linux`] prepares Debian's
//!    Linux as a guest for them.

pub mod bench;
pub mod build;
pub mod chainboot;
pub mod cpio;
pub mod doctor;
pub mod error;
pub mod flash;
pub mod fuzz;
pub mod kernel_file;
pub mod launch;
pub mod lint;
pub mod linux;
pub mod machine;
pub mod mutants;
pub mod perf;
pub mod plot;
pub mod plugin;
pub mod provision;
pub mod qmp;
pub mod report;
pub mod run;
pub mod signals;
pub mod supervise;
pub mod test;

use std::path::PathBuf;

/// Writes `data` to `path` unless the file already holds exactly that: through a temporary file
/// and a rename, so a QEMU (or another xtask) reading the file at the same time sees the old or
/// the new contents, never a truncated one, and an unchanged file keeps its modification time.
pub fn write_if_changed(path: &std::path::Path, data: &[u8]) -> anyhow::Result<()> {
    if std::fs::read(path).is_ok_and(|d| d == data) {
        return Ok(());
    }
    write_file(path, data)
}

/// Writes `data` to `path` whole or not at all: into a temporary file beside it, then a rename.
/// On any failure (a full disk included) the temporary file is removed, `path` keeps what it
/// held, and the error names `path`.
pub fn write_file(path: &std::path::Path, data: impl AsRef<[u8]>) -> anyhow::Result<()> {
    write_with(path, data.as_ref(), |tmp| Ok(Box::new(std::fs::File::create(tmp)?)))
}

/// [`write_file`] with the temporary file opened by `create` (tests hand in a writer that fails).
fn write_with(
    path: &std::path::Path,
    data: &[u8],
    create: impl FnOnce(&std::path::Path) -> std::io::Result<Box<dyn std::io::Write>>,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!(".{name}.tmp{}-{seq}", std::process::id()));
    let written = (|| {
        let mut f = create(&tmp)?;
        f.write_all(data)?;
        f.flush()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

/// The longest time limit any option takes, in seconds (a year): past it a deadline is no
/// longer a number a clock can hold, and no run needs it (`0` means none).
pub const MAX_TIMEOUT_S: u64 = 365 * 24 * 3600;

/// Parses a time limit in whole seconds (a clap value parser): `0` (none) to [`MAX_TIMEOUT_S`].
pub fn timeout_secs(s: &str) -> Result<u64, String> {
    let n: u64 = s.parse().map_err(|e| format!("{s:?} is not a number of seconds: {e}"))?;
    if n > MAX_TIMEOUT_S {
        return Err(format!("{n} s is more than a year ({MAX_TIMEOUT_S} s); 0 means no time limit"));
    }
    Ok(n)
}

/// The workspace root (parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace").to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::{write_if_changed, write_with};

    /// A writer that takes `room` bytes, then fails as a full disk does.
    struct Full {
        inner: std::fs::File,
        room: usize,
    }

    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            self.inner.write(&buf[..n])
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.inner.flush()
        }
    }

    #[test]
    fn a_full_disk_names_the_file_and_leaves_neither_half_a_file_nor_a_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exits.txt");
        let full = |tmp: &std::path::Path| -> std::io::Result<Box<dyn std::io::Write>> {
            Ok(Box::new(Full { inner: std::fs::File::create(tmp)?, room: 10 }))
        };
        let e = write_with(&path, &[b'x'; 100], full).unwrap_err();
        let msg = format!("{e:#}");
        assert!(msg.contains(&path.display().to_string()) && msg.contains("No space left on device"), "{msg}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert!(left.is_empty(), "nothing left behind: {left:?}");
        // A file that was there keeps what it held.
        std::fs::write(&path, b"before").unwrap();
        assert!(write_with(&path, &[b'x'; 100], full).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"before");
    }

    #[test]
    fn a_reader_never_sees_half_a_rewritten_file_and_an_unchanged_one_is_left_alone() {
        let dir = std::env::temp_dir().join(format!("xtask-wic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kernel.img");
        let (a, b) = (vec![0xaa_u8; 1 << 20], vec![0x55_u8; (1 << 20) + 4096]);
        write_if_changed(&path, &a).unwrap();
        let t0 = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        write_if_changed(&path, &a).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), t0, "same bytes: not rewritten");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (path, stop, a, b) = (path.clone(), stop.clone(), a.clone(), b.clone());
            std::thread::spawn(move || {
                let mut reads = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let got = std::fs::read(&path).unwrap();
                    assert!(got == a || got == b, "read {} bytes: half a file", got.len());
                    reads += 1;
                }
                reads
            })
        };
        for i in 0..300 {
            write_if_changed(&path, if i % 2 == 0 { &b } else { &a }).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let reads = reader.join().expect("the reader saw only whole files");
        assert!(reads > 0);
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 1, "no temporary file left behind: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
