//! A QEMU new enough for a board model. The system one (`qemu-system-aarch64` on PATH, Debian
//! 12's 7.2) when its version suffices; otherwise `<codename>-backports`' `qemu-system-arm`,
//! `qemu-system-common` and `qemu-system-data` for the host's architecture, fetched with
//! `apt-get download` (private apt state, the machine's own archive: `crate::provision::debian::Apt`) and
//! unpacked with `dpkg -x` under `target/downloads/qemu/`. Nothing on the system changes: the
//! unpacked QEMU runs with the libraries already installed (those of 7.2). It is started
//! through a small wrapper script beside it that points QEMU at its own modules
//! (`QEMU_MODULE_DIR`) and data (`-L`), so every caller treats it as one executable path.

use crate::provision::debian::{cache_dir, Apt};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A QEMU version, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// The version in `qemu-system-aarch64 --version`'s first line ("QEMU emulator version
/// 10.0.2 (Debian 1:10.0.2+ds-…)").
pub fn parse_version(text: &str) -> Option<Version> {
    let rest = text.lines().next()?.split("version ").nth(1)?;
    let word = rest.split_whitespace().next()?;
    let mut n = word.split('.').map(|p| p.trim_end_matches(|c: char| !c.is_ascii_digit()).parse::<u32>());
    Some(Version(n.next()?.ok()?, n.next().unwrap_or(Ok(0)).ok()?, n.next().unwrap_or(Ok(0)).ok()?))
}

/// The version of the QEMU at `qemu` (runs it with `--version`).
pub fn version_of(qemu: &Path) -> Result<Version> {
    let out = Command::new(qemu).arg("--version").output().with_context(|| format!("running {}", qemu.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_version(&text).with_context(|| format!("{} --version said {:?}", qemu.display(), text.trim()))
}

/// The packages the backports QEMU is made of.
pub const PACKAGES: [&str; 3] = ["qemu-system-arm", "qemu-system-common", "qemu-system-data"];

/// Where the backports QEMU is unpacked (`root/`) and its wrapper (`qemu-system-aarch64`).
pub fn dir() -> PathBuf {
    cache_dir().join("qemu")
}

/// The wrapper script of the unpacked QEMU.
pub fn wrapper() -> PathBuf {
    dir().join("qemu-system-aarch64")
}

/// The host's Debian architecture (`dpkg --print-architecture`).
fn host_arch() -> Result<String> {
    let out = Command::new("dpkg").arg("--print-architecture").output().context("running dpkg --print-architecture")?;
    let a = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if a.is_empty() {
        bail!("dpkg --print-architecture printed nothing");
    }
    Ok(a)
}

/// The wrapper's text: QEMU's own modules and data, then the caller's arguments. `exec`, so a
/// signal to the wrapper's process is a signal to QEMU.
pub fn wrapper_script(root: &Path, arch_triplet: &str) -> String {
    let r = root.display();
    format!(
        "#!/bin/sh\n# QEMU from {PACKAGES:?} unpacked by `cargo xtask` (no system change); see xtask/src/qemu_pkg.rs\n\
         QEMU_MODULE_DIR='{r}/usr/lib/{arch_triplet}/qemu' exec '{r}/usr/bin/qemu-system-aarch64' -L '{r}/usr/share/qemu' \"$@\"\n"
    )
}

/// The root a wrapper's text runs the QEMU of ([`wrapper_script`]).
fn wrapper_root(text: &str) -> Option<&str> {
    text.split_once("exec '")?.1.split_once("/usr/bin/qemu-system-aarch64'").map(|(root, _)| root)
}

/// The backports QEMU, unpacked under [`dir`] once (with one line saying so); its wrapper.
pub fn backports_qemu() -> Result<PathBuf> {
    let w = wrapper();
    if w.is_file() {
        // A wrapper that names another root is from a target/ copied or moved from elsewhere
        // (it execs a QEMU that is not there): unpacked again here.
        let root = dir().join("root");
        // Worktrees share one downloads folder through symbolic links: each names the same
        // root by another path, which is still this root.
        let real = |p: &Path| std::fs::canonicalize(p).ok();
        let named = std::fs::read_to_string(&w).ok().and_then(|t| wrapper_root(&t).map(PathBuf::from));
        if named.is_some_and(|n| n == root || (real(&n).is_some() && real(&n) == real(&root))) {
            return Ok(w);
        }
        eprintln!("xtask: {} names another folder's QEMU (target/ was copied): unpacking again", w.display());
        std::fs::remove_file(&w)?;
    }
    for tool in ["dpkg", "apt-get"] {
        if crate::provision::system::which(tool).is_none() {
            bail!("{tool} not found: a QEMU new enough for the board models comes from Debian's backports packages");
        }
    }
    let d = dir();
    let arch = host_arch()?;
    let apt = Apt::backports(&d.join("apt"), &arch)?;
    let root = d.join("root");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    let mut names = Vec::new();
    for p in PACKAGES {
        let deb = apt.fetch(p, false)?;
        let st = Command::new("dpkg").arg("-x").arg(&deb).arg(&root).status().context("running dpkg -x")?;
        if !st.success() {
            bail!("dpkg -x {} failed ({st})", deb.display());
        }
        names.push(deb.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    }
    let bin = root.join("usr/bin/qemu-system-aarch64");
    if !bin.is_file() {
        bail!("the backports packages have no usr/bin/qemu-system-aarch64 ({names:?})");
    }
    let triplet = std::fs::read_dir(root.join("usr/lib"))
        .ok()
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.contains("-linux-"))
        .unwrap_or_else(|| format!("{arch}-linux-gnu"));
    let tmp = w.with_extension("part");
    std::fs::write(&tmp, wrapper_script(&root, &triplet))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))?;
    let v = version_of(&tmp).with_context(|| {
        format!("the unpacked QEMU does not run with this machine's libraries ({})", names.join(", "))
    })?;
    std::fs::rename(&tmp, &w)?;
    eprintln!(
        "xtask: QEMU {v} from {} unpacked under {} (dpkg -x; nothing installed on the system)",
        apt.suite_name(),
        d.display()
    );
    Ok(w)
}

/// A QEMU of at least `need`: the system one when new enough, else [`backports_qemu`] (checked
/// to be new enough). The error says what was found and what failed.
pub fn qemu_at_least(need: Version) -> Result<PathBuf> {
    let system = crate::provision::system::qemu()?;
    let have = version_of(&system)?;
    if have >= need {
        return Ok(system);
    }
    let q = backports_qemu().with_context(|| {
        format!("the system QEMU ({}) is {have} and this board needs QEMU {need} or newer", system.display())
    })?;
    let v = version_of(&q)?;
    if v < need {
        bail!("the system QEMU is {have} and backports' is {v}: this board needs QEMU {need} or newer");
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_from_qemu_banner_and_ordered() {
        let v =
            parse_version("QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\nCopyright").unwrap();
        assert_eq!(v, Version(10, 0, 2));
        assert_eq!(parse_version("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)"), Some(Version(7, 2, 22)));
        assert_eq!(parse_version("QEMU emulator version 9.1\n"), Some(Version(9, 1, 0)));
        assert_eq!(parse_version("something else"), None);
        assert!(Version(7, 2, 22) < Version(9, 0, 0) && Version(9, 1, 0) > Version(9, 0, 5));
        assert_eq!(Version(10, 0, 2).to_string(), "10.0.2");
    }

    #[test]
    fn the_wrapper_points_qemu_at_its_own_modules_and_data() {
        let s = wrapper_script(Path::new("/t/q/root"), "x86_64-linux-gnu");
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("QEMU_MODULE_DIR='/t/q/root/usr/lib/x86_64-linux-gnu/qemu' exec '/t/q/root/usr/bin/qemu-system-aarch64' -L '/t/q/root/usr/share/qemu' \"$@\""), "{s}");
        assert_eq!(wrapper_root(&s), Some("/t/q/root"));
        let odd = wrapper_script(Path::new("/srv/usr/bin/q/root"), "x86_64-linux-gnu");
        assert_eq!(wrapper_root(&odd), Some("/srv/usr/bin/q/root"));
        assert_eq!(wrapper_root("#!/bin/sh\nexec qemu\n"), None);
    }
}
