//! What the KVM host model is made of, fetched once and kept under
//! `target/downloads/kvm-model/`: Debian's newest arm64 cloud kernel (its `Image`), and a tree
//! of Debian's arm64 `qemu-system-arm` with what it needs at run time and a static busybox,
//! packed as `base.cpio` (newc).
//!
//! Everything comes from the machine's own apt configuration (`super::debian::Apt`, a private
//! state per suite, packages of arm64), from the first suite of [`SUITES`] that has a cloud
//! kernel of at least [`MIN_KERNEL`] (nested virtualisation in KVM) and a `qemu-system-arm` of
//! at least [`MIN_QEMU`]: the kernel is the one [`super::cloud_kernel`] finds (the same rule
//! as the newest Linux guest's). QEMU's dependency closure is what `apt-get -s
//! install --no-install-recommends` would unpack ([`parse_simulation`]); each package is
//! unpacked with `dpkg -x` into one tree, and only what the QEMU binary loads (its ELF
//! `DT_NEEDED` closure and its dynamic loader, [`library_closure`]) goes into the initramfs:
//! no firmware, data files, modules or documentation (the inner QEMU runs `virt` with `-kernel`,
//! `-nographic` and `-nic none`, which need none of them).
//!
//! One provisioning at a time (a lock file: tests and other xtasks share `target/downloads`);
//! it ends by writing `manifest`, so a half-done one is started again.

use super::cloud_kernel;
use super::qemu_pkg::Version;
use crate::cpio::Archive;
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use super::cloud_kernel::{KERNEL_META, MIN_KERNEL, SUITES};
/// The oldest inner QEMU taken.
pub const MIN_QEMU: Version = Version(10, 0, 0);
/// The packages the initramfs is built from (with QEMU's dependencies).
pub const PACKAGES: [&str; 2] = ["qemu-system-arm", "busybox-static"];
/// The QEMU binary the model runs, inside the tree and the initramfs.
pub const QEMU_IN_TREE: &str = "usr/bin/qemu-system-aarch64";
/// Where the initramfs has it.
pub const QEMU_IN_INITRAMFS: &str = "bin/qemu-system-aarch64";
/// Where the tree's libraries are looked for (relative to its root), in order.
pub const LIBRARY_DIRS: [&str; 4] = ["usr/lib/aarch64-linux-gnu", "lib/aarch64-linux-gnu", "usr/lib", "lib"];
/// Where the initramfs has the libraries (the multiarch directory Debian's loader searches).
pub const LIBRARY_DIR_IN_INITRAMFS: &str = "lib/aarch64-linux-gnu";

/// The layout of `base.cpio` and the kernel: a manifest of another layout is provisioned again
/// (raise it when what provisioning keeps changes).
pub const LAYOUT: u32 = 2;

/// The model's files, under [`dir`].
pub fn dir() -> PathBuf {
    super::cloud_kernel::shared_dir()
}

/// One line for `cargo xtask doctor`: what is provisioned, or that it will be on first use.
pub fn state() -> String {
    match cached() {
        Some(p) => format!("provisioned: {}", p.manifest.describe()),
        None => format!("not provisioned yet (the first --accel kvm-model run fetches it into {})", dir().display()),
    }
}

/// What was provisioned (the `manifest` file, `key: value` lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The suite everything came from.
    pub suite: String,
    /// The package the kernel Image came from (`linux-binary-7.2.13+deb14-cloud-arm64_…`).
    pub kernel_package: String,
    /// The inner QEMU's Debian version.
    pub qemu_version: String,
    /// Packages downloaded for the tree.
    pub packages: usize,
    /// Bytes downloaded (all `.deb` files).
    pub download_bytes: u64,
    /// Bytes of `base.cpio`.
    pub base_bytes: u64,
    /// [`LAYOUT`] when provisioned.
    pub layout: u32,
}

impl Manifest {
    fn render(&self) -> String {
        format!(
            "suite: {}\nkernel: {}\nqemu: {}\npackages: {}\ndownload-bytes: {}\nbase-bytes: {}\nlayout: {}\n",
            self.suite,
            self.kernel_package,
            self.qemu_version,
            self.packages,
            self.download_bytes,
            self.base_bytes,
            self.layout
        )
    }

    /// Reads a manifest back.
    pub fn parse(text: &str) -> Option<Manifest> {
        let f: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once(": ")).collect();
        Some(Manifest {
            suite: f.get("suite")?.to_string(),
            kernel_package: f.get("kernel")?.to_string(),
            qemu_version: f.get("qemu")?.to_string(),
            packages: f.get("packages")?.parse().ok()?,
            download_bytes: f.get("download-bytes")?.parse().ok()?,
            base_bytes: f.get("base-bytes")?.parse().ok()?,
            layout: f.get("layout")?.parse().ok()?,
        })
    }

    /// One line for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} (kernel {}, QEMU {}; {} packages, {:.1} MB downloaded; base initramfs {:.1} MB)",
            self.suite,
            self.kernel_package,
            self.qemu_version,
            self.packages,
            self.download_bytes as f64 / 1e6,
            self.base_bytes as f64 / 1e6
        )
    }
}

/// The provisioned files.
#[derive(Debug, Clone)]
pub struct Provisioned {
    /// The outer Linux's Image.
    pub kernel: PathBuf,
    /// The initramfs part that does not change between runs (busybox, QEMU, its libraries).
    pub base: PathBuf,
    /// What they are.
    pub manifest: Manifest,
}

/// What is there already, without fetching anything.
pub fn cached() -> Option<Provisioned> {
    let d = dir();
    let manifest = Manifest::parse(&std::fs::read_to_string(d.join("manifest")).ok()?)?;
    if manifest.layout != LAYOUT {
        return None;
    }
    let (kernel, base) = (d.join("vmlinuz"), d.join("base.cpio"));
    (kernel.is_file() && base.is_file()).then_some(Provisioned { kernel, base, manifest })
}

/// An exclusive lock on a file, held while the value lives (`flock`).
struct Lock(std::fs::File);

impl Lock {
    fn take(path: &Path) -> Result<Lock> {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns; it blocks until the lock is free.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error()).with_context(|| format!("locking {}", path.display()));
        }
        Ok(Lock(f))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unlocking the descriptor this value owns.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// The model's files, provisioned now if they are not there yet (with a line per step).
pub fn provision() -> Result<Provisioned> {
    if let Some(p) = cached() {
        return Ok(p);
    }
    let d = dir();
    std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
    let _lock = Lock::take(&d.join(".lock"))?;
    if let Some(p) = cached() {
        return Ok(p);
    }
    for tool in ["apt-get", "apt-cache", "dpkg", "dpkg-deb", "tar"] {
        if super::system::which(tool).is_none() {
            bail!("{tool} not found: the KVM host model is built from Debian's arm64 packages");
        }
    }
    let t0 = std::time::Instant::now();
    let mut tried = Vec::new();
    for (suite, suites) in SUITES {
        match from_suite(&d, suite, suites) {
            Ok(p) => {
                eprintln!(
                    "xtask: KVM host model provisioned in {:.0} s under {}: {}",
                    t0.elapsed().as_secs_f64(),
                    d.display(),
                    p.manifest.describe()
                );
                return Ok(p);
            }
            Err(e) => {
                eprintln!("xtask: KVM host model: {suite}: {e:#}");
                tried.push(format!("{suite}: {e:#}"));
            }
        }
    }
    bail!("no suite of the machine's archive gives the KVM host model its kernel and QEMU ({})", tried.join("; "))
}

/// Everything from `suite`.
fn from_suite(d: &Path, suite: &str, suites: &[&str]) -> Result<Provisioned> {
    let apt = cloud_kernel::apt(d, suite, suites)?;
    let binary_pkg = cloud_kernel::in_suite(&apt, suite)?.binary_package;
    let plan = parse_simulation(&apt.simulate_install(&PACKAGES)?);
    let qemu = plan
        .iter()
        .find(|p| p.name == "qemu-system-arm")
        .with_context(|| format!("apt would not install qemu-system-arm from {suite}"))?;
    let qv = debian_upstream_version(&qemu.version).with_context(|| format!("QEMU version {:?}", qemu.version))?;
    ensure!(qv >= MIN_QEMU, "its qemu-system-arm is {qv}, older than {MIN_QEMU}");
    let qemu_version = qemu.version.clone();
    // Start from no .deb: those of an earlier, interrupted attempt may be of other versions.
    let debs = apt.debs_dir();
    let _ = std::fs::remove_dir_all(&debs);
    std::fs::create_dir_all(&debs)?;
    let mut specs: Vec<String> = plan.iter().map(|p| format!("{}={}", p.name, p.version)).collect();
    specs.push(binary_pkg.clone());
    apt.download_versions(&specs)?;
    let files: Vec<PathBuf> = std::fs::read_dir(&debs)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "deb"))
        .collect();
    let download_bytes = files.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    let is_kernel =
        |p: &Path| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{binary_pkg}_")));
    let kernel_deb = files.iter().find(|p| is_kernel(p)).with_context(|| format!("no {binary_pkg} .deb downloaded"))?;
    let kernel_package = kernel_deb.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // The kernel Image.
    let kernel = d.join("vmlinuz");
    let part = d.join("vmlinuz.part");
    cloud_kernel::extract_image(kernel_deb, &part)?;
    // The tree: every package but the kernel, unpacked.
    let tree = d.join("tree");
    let _ = std::fs::remove_dir_all(&tree);
    std::fs::create_dir_all(&tree)?;
    for deb in files.iter().filter(|p| !is_kernel(p)) {
        let st =
            std::process::Command::new("dpkg").arg("-x").arg(deb).arg(&tree).status().context("running dpkg -x")?;
        ensure!(st.success(), "dpkg -x {} failed ({st})", deb.display());
    }
    let cpio = base_initramfs(&tree)?;
    let base = d.join("base.cpio");
    crate::write_file(&base, &cpio)?;
    std::fs::rename(&part, &kernel)?;
    let manifest = Manifest {
        suite: suite.to_string(),
        kernel_package,
        qemu_version,
        packages: files.len() - 1,
        download_bytes,
        base_bytes: cpio.len() as u64,
        layout: LAYOUT,
    };
    crate::write_file(&d.join("manifest"), manifest.render())?;
    // Only the kernel and base.cpio are kept.
    let _ = std::fs::remove_dir_all(&tree);
    let _ = std::fs::remove_dir_all(&debs);
    Ok(Provisioned { kernel, base, manifest })
}

/// One package `apt-get -s install` would unpack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Its name.
    pub name: String,
    /// The version it would unpack.
    pub version: String,
}

/// The packages of `apt-get -s install` output: its `Inst NAME (VERSION ARCHIVE [ARCH])` lines
/// (`Inst NAME [OLD] (NEW …)` for an upgrade), in order.
pub fn parse_simulation(out: &str) -> Vec<Planned> {
    out.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Inst ")?;
            let (name, rest) = rest.split_once(' ')?;
            let rest = rest.trim_start();
            // An upgrade names the installed version first, in brackets.
            let rest = match rest.strip_prefix('[') {
                Some(r) => r.split_once(']')?.1.trim_start(),
                None => rest,
            };
            let version = rest.strip_prefix('(')?.split_whitespace().next()?;
            Some(Planned { name: name.to_string(), version: version.to_string() })
        })
        .collect()
}

/// The upstream version of a Debian version string: `1:11.1.3+ds-1` -> 11.1.3.
pub fn debian_upstream_version(v: &str) -> Option<Version> {
    let v = v.split_once(':').map_or(v, |(_, r)| r);
    let up = v.split(['+', '-', '~']).next()?;
    let mut n = up.split('.').map(|p| p.parse::<u32>());
    Some(Version(n.next()?.ok()?, n.next().unwrap_or(Ok(0)).ok()?, n.next().unwrap_or(Ok(0)).ok()?))
}

/// An ELF file's `DT_NEEDED` libraries and its program interpreter (`PT_INTERP`).
pub fn elf_needs(data: &[u8]) -> Result<(Vec<String>, Option<String>)> {
    use object::elf::{FileHeader64, DT_NEEDED, PT_INTERP};
    use object::read::elf::{Dyn, FileHeader, ProgramHeader};
    use object::Endianness;
    let h = FileHeader64::<Endianness>::parse(data).context("not a 64-bit ELF file")?;
    let e = h.endian()?;
    let mut interp = None;
    for ph in h.program_headers(e, data)? {
        if ph.p_type(e) == PT_INTERP {
            let bytes = ph.data(e, data).map_err(|_| anyhow::anyhow!("PT_INTERP out of bounds"))?;
            let s = bytes.split(|&b| b == 0).next().unwrap_or_default();
            interp = Some(String::from_utf8_lossy(s).into_owned());
        }
    }
    let sections = h.sections(e, data)?;
    let mut needed = Vec::new();
    if let Some((dyns, link)) = sections.dynamic(e, data)? {
        let strings = sections.strings(e, data, link)?;
        for d in dyns {
            if d.tag32(e) == Some(DT_NEEDED) {
                let name = d.string(e, strings).map_err(|_| anyhow::anyhow!("DT_NEEDED name out of bounds"))?;
                needed.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    Ok((needed, interp))
}

/// The libraries `start` loads, transitively: each `DT_NEEDED` name once, with the file
/// `find` resolves it to (`needs` reads a file's `DT_NEEDED` names). A name nothing resolves is
/// an error naming who needs it.
pub fn library_closure(
    start: &Path,
    mut needs: impl FnMut(&Path) -> Result<Vec<String>>,
    find: impl Fn(&str) -> Option<PathBuf>,
) -> Result<BTreeMap<String, PathBuf>> {
    let mut found = BTreeMap::new();
    let mut todo = vec![start.to_path_buf()];
    while let Some(f) = todo.pop() {
        for n in needs(&f)? {
            if found.contains_key(&n) {
                continue;
            }
            let p = find(&n).with_context(|| format!("{} needs {n}, which no package of the tree has", f.display()))?;
            todo.push(p.clone());
            found.insert(n, p);
        }
    }
    Ok(found)
}

/// `rel` inside the tree at `root`, its symbolic links followed inside the tree (an absolute
/// link target is taken from the tree's root, not the machine's).
fn resolve_in_tree(root: &Path, rel: &Path) -> Option<PathBuf> {
    let mut p = root.join(rel.strip_prefix("/").unwrap_or(rel));
    for _ in 0..16 {
        let m = std::fs::symlink_metadata(&p).ok()?;
        if !m.file_type().is_symlink() {
            return m.is_file().then_some(p);
        }
        let target = std::fs::read_link(&p).ok()?;
        p = if target.is_absolute() { root.join(target.strip_prefix("/").ok()?) } else { p.parent()?.join(target) };
    }
    None
}

/// `path` (absolute, as a program names it) in the tree, or under the tree's `usr/`: Debian's
/// packages put `/lib` and `/bin` files under `/usr`, where the merged `/usr` symbolic links
/// (made at installation, not in any package) lead a running system.
fn in_tree_or_usr(tree: &Path, path: &str) -> Option<PathBuf> {
    let rel = path.trim_start_matches('/');
    resolve_in_tree(tree, Path::new(rel)).or_else(|| resolve_in_tree(tree, &Path::new("usr").join(rel)))
}

/// The initramfs part built from the tree: busybox, the QEMU binary, its libraries and loader,
/// the directories `/init` needs and the console device.
pub fn base_initramfs(tree: &Path) -> Result<Vec<u8>> {
    let qemu_path = tree.join(QEMU_IN_TREE);
    let qemu = std::fs::read(&qemu_path).with_context(|| format!("the tree has no {QEMU_IN_TREE}"))?;
    let (_, interp) = elf_needs(&qemu)?;
    let interp = interp.context("qemu-system-aarch64 names no dynamic loader")?;
    let find = |name: &str| LIBRARY_DIRS.iter().find_map(|d| resolve_in_tree(tree, &Path::new(d).join(name)));
    let libs = library_closure(&qemu_path, |f| Ok(elf_needs(&std::fs::read(f)?)?.0), find)?;
    let loader = in_tree_or_usr(tree, &interp).with_context(|| format!("the tree has no {interp}"))?;
    let busybox = in_tree_or_usr(tree, "/bin/busybox").context("the tree has no busybox")?;
    let mut a = Archive::new();
    for dir in ["bin", "dev", "proc", "sys", "tmp", "lib", LIBRARY_DIR_IN_INITRAMFS] {
        a.dir(dir, 0o755)?;
    }
    a.char_dev("dev/console", 0o600, 5, 1)?;
    a.char_dev("dev/null", 0o666, 1, 3)?;
    a.file("bin/busybox", 0o755, &std::fs::read(&busybox)?)?;
    a.symlink("bin/sh", "busybox")?;
    a.file(QEMU_IN_INITRAMFS, 0o755, &qemu)?;
    let interp_rel = interp.trim_start_matches('/');
    if let Some((d, _)) = interp_rel.rsplit_once('/') {
        if !["lib", LIBRARY_DIR_IN_INITRAMFS].contains(&d) {
            bail!("the dynamic loader {interp} is outside /lib");
        }
    }
    a.file(interp_rel, 0o755, &std::fs::read(&loader)?)?;
    // The loader is a DT_NEEDED name too: once, where PT_INTERP says.
    let loader_name = Path::new(interp_rel).file_name().map(|n| n.to_string_lossy().into_owned());
    for (name, path) in libs.iter().filter(|(n, _)| Some(*n) != loader_name.as_ref()) {
        a.file(&format!("{LIBRARY_DIR_IN_INITRAMFS}/{name}"), 0o644, &std::fs::read(path)?)?;
    }
    Ok(a.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_install_lists_every_package_with_its_version() {
        let out = "Reading package lists...\nThe following NEW packages will be installed:\n  libc6 qemu-system-arm\n\
                   Inst gcc-16-base (16-20261010-1 Debian:unstable [arm64])\n\
                   Inst libc6 (2.42-2 Debian:unstable [arm64])\n\
                   Inst zlib1g [1:1.2.13] (1:1.3.dfsg+really1.3.2-4 Debian:unstable [arm64])\n\
                   Conf libc6 (2.42-2 Debian:unstable [arm64])\n\
                   Inst qemu-system-arm (1:11.1.3+ds-1 Debian:unstable [arm64])\n";
        let p = parse_simulation(out);
        let got: Vec<(&str, &str)> = p.iter().map(|x| (x.name.as_str(), x.version.as_str())).collect();
        assert_eq!(
            got,
            [
                ("gcc-16-base", "16-20261010-1"),
                ("libc6", "2.42-2"),
                ("zlib1g", "1:1.3.dfsg+really1.3.2-4"),
                ("qemu-system-arm", "1:11.1.3+ds-1"),
            ]
        );
        assert!(parse_simulation("Inst broken\nInst x y\n").is_empty());
    }

    #[test]
    fn debian_versions_give_qemu_s_own() {
        assert_eq!(debian_upstream_version("1:11.1.3+ds-1"), Some(Version(11, 1, 3)));
        assert_eq!(debian_upstream_version("1:10.0.2+ds-2+deb13u1~bpo12+1"), Some(Version(10, 0, 2)));
        assert_eq!(debian_upstream_version("9.2~rc1-1"), Some(Version(9, 2, 0)));
        assert!(debian_upstream_version("1:9.2.0-1").unwrap() < MIN_QEMU);
        assert_eq!(debian_upstream_version("x"), None);
    }

    #[test]
    fn the_library_closure_follows_every_library_once_and_names_a_missing_one() {
        let deps: BTreeMap<&str, Vec<&str>> = [
            ("/t/qemu", vec!["libglib.so", "libc.so"]),
            ("/t/libglib.so", vec!["libpcre.so", "libc.so"]),
            ("/t/libpcre.so", vec!["libc.so"]),
            ("/t/libc.so", vec!["ld.so"]),
            ("/t/ld.so", vec![]),
        ]
        .into_iter()
        .collect();
        let needs = |f: &Path| Ok(deps[f.to_str().unwrap()].iter().map(|s| s.to_string()).collect());
        let find = |n: &str| deps.contains_key(format!("/t/{n}").as_str()).then(|| PathBuf::from(format!("/t/{n}")));
        let c = library_closure(Path::new("/t/qemu"), needs, find).unwrap();
        assert_eq!(c.keys().map(String::as_str).collect::<Vec<_>>(), ["ld.so", "libc.so", "libglib.so", "libpcre.so"]);
        let lost = |n: &str| (n != "libpcre.so").then(|| PathBuf::from(format!("/t/{n}")));
        let e = library_closure(Path::new("/t/qemu"), needs, lost).unwrap_err().to_string();
        assert!(e.contains("/t/libglib.so needs libpcre.so"), "{e}");
    }

    #[test]
    fn links_are_followed_inside_the_tree_never_out_of_it() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("usr/lib/aarch64-linux-gnu")).unwrap();
        std::fs::write(r.join("usr/lib/aarch64-linux-gnu/libz.so.1.3"), b"z").unwrap();
        std::os::unix::fs::symlink("libz.so.1.3", r.join("usr/lib/aarch64-linux-gnu/libz.so.1")).unwrap();
        std::os::unix::fs::symlink("/usr/lib/aarch64-linux-gnu/libz.so.1", r.join("usr/lib/abs.so")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", r.join("usr/lib/out.so")).unwrap();
        let z = resolve_in_tree(r, Path::new("usr/lib/aarch64-linux-gnu/libz.so.1")).unwrap();
        assert_eq!(z, r.join("usr/lib/aarch64-linux-gnu/libz.so.1.3"));
        assert_eq!(resolve_in_tree(r, Path::new("/usr/lib/abs.so")).unwrap(), z);
        assert_eq!(resolve_in_tree(r, Path::new("usr/lib/out.so")), None, "the machine's /etc is not the tree's");
        assert_eq!(resolve_in_tree(r, Path::new("usr/lib/none.so")), None);
        // A program's /lib/ld-linux-aarch64.so.1 is the package's usr/lib one (merged /usr).
        std::fs::write(r.join("usr/lib/ld-linux-aarch64.so.1"), b"ld").unwrap();
        assert_eq!(in_tree_or_usr(r, "/lib/ld-linux-aarch64.so.1"), Some(r.join("usr/lib/ld-linux-aarch64.so.1")));
        assert_eq!(in_tree_or_usr(r, "/usr/lib/abs.so"), Some(z));
        assert_eq!(in_tree_or_usr(r, "/bin/none"), None);
    }

    #[test]
    fn manifests_read_back() {
        let m = Manifest {
            suite: "sid".into(),
            kernel_package: "linux-binary-7.2.13+deb14-cloud-arm64_7.2.13-1_arm64".into(),
            qemu_version: "1:11.1.3+ds-1".into(),
            packages: 73,
            download_bytes: 49_500_000,
            base_bytes: 81_000_000,
            layout: LAYOUT,
        };
        assert_eq!(Manifest::parse(&m.render()), Some(m.clone()));
        assert_eq!(Manifest::parse("suite: sid\n"), None);
        assert!(m.describe().contains("49.5 MB downloaded"));
    }

    #[test]
    fn elf_needs_reads_this_test_binary() {
        // The host test binary is a dynamic ELF with a loader and libc, like QEMU's.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let (needed, interp) = elf_needs(&me).unwrap();
        assert!(needed.iter().any(|n| n.starts_with("libc.so")), "{needed:?}");
        assert!(interp.is_some_and(|i| i.starts_with('/') && i.contains("ld-linux")));
        assert!(elf_needs(b"not an elf").is_err());
    }
}
