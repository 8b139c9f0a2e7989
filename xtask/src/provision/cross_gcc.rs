//! A C compiler for aarch64 Linux user programs (the KVM selftest the Linux peers of `bench
//! split` run, [`super::kvm_selftest`]): Debian's `gcc-aarch64-linux-gnu` and
//! `libc6-dev-arm64-cross` for the host's architecture, from the machine's own suites (its apt
//! sources, a private apt state), unpacked with `dpkg -x` under `target/downloads/cross-gcc/`.
//! Nothing is installed on the system.
//!
//! Which packages: what `apt-get -s install` of the two would unpack against the machine's own
//! list of installed packages ([`status_without_cross`]: with every cross package removed from
//! it, so the whole cross toolchain is always the unpacked one, never a system-wide copy that
//! happens to be there). A host library the compiler needs and the machine lacks (`libisl`,
//! `libmpc`, ...) is unpacked with it and found through `LD_LIBRARY_PATH` ([`Gcc::env`]).
//! Debian's cross gcc finds its `cc1`, `as`, `ld`, headers and C library relative to its own
//! executable, so the unpacked tree works where it lies.

use super::debian::{cache_dir, Apt};
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What is asked for (their dependencies come with them).
pub const PACKAGES: [&str; 2] = ["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"];
/// The tools' prefix (`CROSS_COMPILE`).
pub const PREFIX: &str = "aarch64-linux-gnu-";

/// The unpacked compiler.
#[derive(Debug, Clone)]
pub struct Gcc {
    /// The `dpkg -x` tree.
    pub root: PathBuf,
    /// What it was unpacked from (`NAME=VERSION` each).
    pub packages: Vec<String>,
}

impl Gcc {
    /// `CROSS_COMPILE` for a kernel-style Makefile: the tools' path and prefix.
    pub fn cross_compile(&self) -> String {
        format!("{}/usr/bin/{PREFIX}", self.root.display())
    }

    /// The environment the tools need: host libraries unpacked beside them, if any.
    pub fn env(&self) -> Vec<(String, String)> {
        let dirs: Vec<String> = std::fs::read_dir(self.root.join("usr/lib"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().ends_with("-linux-gnu")))
            .map(|p| p.display().to_string())
            .collect();
        if dirs.is_empty() {
            return Vec::new();
        }
        let mut v = dirs.join(":");
        if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
            v = format!("{v}:{}", old.to_string_lossy());
        }
        vec![("LD_LIBRARY_PATH".into(), v)]
    }
}

/// Where it lives.
pub fn dir() -> PathBuf {
    cache_dir().join("cross-gcc")
}

/// Whether a package is part of the cross toolchain (built for or targeting aarch64 Linux),
/// not a host library: `*-arm64-cross`, `*aarch64-linux-gnu*`.
pub fn is_cross(package: &str) -> bool {
    package.ends_with("-arm64-cross") || package.contains("aarch64-linux-gnu")
}

/// dpkg's status file `status` without the stanzas of cross packages ([`is_cross`]).
pub fn status_without_cross(status: &str) -> String {
    let mut out = String::new();
    for stanza in status.split("\n\n") {
        let name = stanza.lines().find_map(|l| l.strip_prefix("Package: ")).map(str::trim);
        if stanza.trim().is_empty() || name.is_some_and(is_cross) {
            continue;
        }
        out.push_str(stanza.trim_end_matches('\n'));
        out.push_str("\n\n");
    }
    out
}

/// `NAME=VERSION` of every package an `apt-get -s install` would unpack (its `Inst NAME
/// (VERSION ...)` lines), in its order.
pub fn planned(simulated: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for l in simulated.lines() {
        let Some(rest) = l.strip_prefix("Inst ") else { continue };
        let mut w = rest.split_whitespace();
        let name = w.next().context("an Inst line without a package")?;
        // `Inst NAME [OLD] (NEW SUITE [ARCH])`: the version is the first word in parentheses.
        let version =
            w.find_map(|x| x.strip_prefix('(')).with_context(|| format!("no version in the apt plan's line {l:?}"))?;
        out.push(format!("{name}={version}"));
    }
    ensure!(!out.is_empty(), "apt-get -s install planned no package ({})", simulated.lines().last().unwrap_or(""));
    Ok(out)
}

/// The unpacked compiler: once, then from the cache (`root/` with its `packages` list).
pub fn gcc() -> Result<Gcc> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let d = dir();
    let root = d.join("root");
    let done = d.join("packages");
    if let (Ok(list), true) = (std::fs::read_to_string(&done), root.join(format!("usr/bin/{PREFIX}gcc")).exists()) {
        return Ok(Gcc { root, packages: list.lines().map(String::from).collect() });
    }
    for tool in ["dpkg", "apt-get"] {
        if crate::provision::system::which(tool).is_none() {
            bail!("{tool} not found: the aarch64 C compiler comes from Debian's packages");
        }
    }
    let arch = host_arch()?;
    let apt_dir = d.join("apt");
    std::fs::create_dir_all(&apt_dir)?;
    let status = std::fs::read_to_string("/var/lib/dpkg/status").unwrap_or_default();
    crate::write_if_changed(&apt_dir.join("status"), status_without_cross(&status).as_bytes())?;
    let apt = Apt::machine_suites(&apt_dir, &arch)?;
    apt.ensure_lists()?;
    let plan = match apt.simulate_install(&PACKAGES).and_then(|s| planned(&s)) {
        Ok(p) => p,
        Err(first) => {
            eprintln!("xtask: {first:#}; refreshing the {arch} package lists and trying again");
            apt.update()?;
            planned(&apt.simulate_install(&PACKAGES)?)?
        }
    };
    eprintln!("xtask: the aarch64 C compiler: {} packages of the machine's suites, unpacked with dpkg -x", plan.len());
    for f in std::fs::read_dir(apt.debs_dir())?.flatten() {
        let _ = std::fs::remove_file(f.path());
    }
    apt.download_versions(&plan)?;
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    for f in std::fs::read_dir(apt.debs_dir())?.flatten() {
        let st = Command::new("dpkg").arg("-x").arg(f.path()).arg(&root).status().context("running dpkg -x")?;
        ensure!(st.success(), "dpkg -x {} failed ({st})", f.path().display());
        let _ = std::fs::remove_file(f.path());
    }
    let g = Gcc { root, packages: plan };
    check(&g)?;
    std::fs::write(&done, g.packages.join("\n") + "\n")?;
    Ok(g)
}

/// The compiler runs here and targets aarch64 Linux (`-dumpmachine`).
fn check(g: &Gcc) -> Result<()> {
    let gcc = format!("{}gcc", g.cross_compile());
    let out = Command::new(&gcc)
        .arg("-dumpmachine")
        .envs(g.env())
        .output()
        .with_context(|| format!("running {gcc} (unpacked from {})", g.packages.join(", ")))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_string();
    ensure!(
        out.status.success() && said == PREFIX.trim_end_matches('-'),
        "{gcc} -dumpmachine said {said:?} ({}): the unpacked compiler does not run here",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// The host's Debian architecture (`dpkg --print-architecture`).
fn host_arch() -> Result<String> {
    let out = Command::new("dpkg").arg("--print-architecture").output().context("running dpkg --print-architecture")?;
    let a = String::from_utf8_lossy(&out.stdout).trim().to_string();
    ensure!(!a.is_empty(), "dpkg --print-architecture printed nothing");
    Ok(a)
}

/// Whether `bytes` are a static aarch64 ELF executable: 64-bit AArch64, an executable (or
/// position-independent one), and no `PT_INTERP` program header (nothing to load it: the
/// peer's initramfs has no C library).
pub fn is_static_aarch64(bytes: &[u8]) -> Result<()> {
    use object::read::elf::{FileHeader, ProgramHeader};
    use object::{Object, ObjectKind};
    let file = object::File::parse(bytes).map_err(|e| anyhow::anyhow!("not an ELF file: {e}"))?;
    ensure!(file.architecture() == object::Architecture::Aarch64, "not an AArch64 ELF ({:?})", file.architecture());
    ensure!(
        matches!(file.kind(), ObjectKind::Executable | ObjectKind::Dynamic),
        "not an executable ({:?})",
        file.kind()
    );
    let header = object::elf::FileHeader64::<object::Endianness>::parse(bytes).map_err(|e| anyhow::anyhow!("{e}"))?;
    let endian = header.endian().map_err(|e| anyhow::anyhow!("{e}"))?;
    for p in header.program_headers(endian, bytes).map_err(|e| anyhow::anyhow!("its program headers: {e}"))? {
        ensure!(p.p_type(endian) != object::elf::PT_INTERP, "dynamically linked (PT_INTERP)");
    }
    Ok(())
}

/// [`is_static_aarch64`] of a file.
pub fn check_static_aarch64(path: &Path) -> Result<()> {
    let b = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    is_static_aarch64(&b).with_context(|| format!("{}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_packages_are_left_out_of_the_machines_status() {
        let status = "Package: libc6\nStatus: install ok installed\nVersion: 2.36\n\nPackage: gcc-12-aarch64-linux-gnu\nVersion: 12\n\nPackage: libc6-arm64-cross\nVersion: 2.36\n\nPackage: libisl23\nVersion: 0.25\n";
        let s = status_without_cross(status);
        assert!(s.contains("Package: libc6\n") && s.contains("Package: libisl23\n"), "{s}");
        assert!(!s.contains("aarch64") && !s.contains("arm64-cross"), "{s}");
        assert!(is_cross("binutils-aarch64-linux-gnu") && is_cross("linux-libc-dev-arm64-cross"));
        assert!(!is_cross("libmpc3") && !is_cross("gcc-12"));
    }

    #[test]
    fn the_plan_is_read_from_apts_inst_lines() {
        let sim = "NOTE: simulation\nInst binutils-aarch64-linux-gnu (2.40-2 Debian:12.15/oldstable [amd64])\nInst libc6-arm64-cross (2.36-8cross1 Debian:12.15/oldstable [all])\nInst libisl23 [0.24] (0.25-1.1 Debian:12 [amd64])\nConf libc6-arm64-cross (2.36-8cross1 Debian:12.15/oldstable [all])\n";
        assert_eq!(
            planned(sim).unwrap(),
            ["binutils-aarch64-linux-gnu=2.40-2", "libc6-arm64-cross=2.36-8cross1", "libisl23=0.25-1.1"]
        );
        assert!(planned("Reading package lists...\n").unwrap_err().to_string().contains("planned no package"));
        assert!(planned("Inst x\n").unwrap_err().to_string().contains("no version"));
    }

    fn elf(machine: u16, interp: bool) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 2 * 56];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[6] = 1;
        b[16..18].copy_from_slice(&2u16.to_le_bytes());
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&2u16.to_le_bytes());
        b[64..68].copy_from_slice(&1u32.to_le_bytes());
        b[120..124].copy_from_slice(&(if interp { 3u32 } else { 1 }).to_le_bytes());
        b
    }

    #[test]
    fn only_a_static_aarch64_executable_is_taken() {
        assert!(is_static_aarch64(&elf(183, false)).is_ok());
        assert!(is_static_aarch64(&elf(183, true)).unwrap_err().to_string().contains("PT_INTERP"));
        assert!(is_static_aarch64(&elf(62, false)).unwrap_err().to_string().contains("not an AArch64"));
        assert!(is_static_aarch64(b"#!/bin/sh\n").is_err());
    }
}
