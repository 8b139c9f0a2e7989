//! Real boot firmware from Debian's packages, for booting the hypervisor the way a board does:
//! EDK2 (`qemu-efi-aarch64`'s `QEMU_EFI.fd`, UEFI for QEMU `virt`) and U-Boot
//! (`u-boot-qemu`'s `qemu_arm64` build), each given to QEMU as `-bios`; and TF-A's BL31
//! (`arm-trusted-firmware`) for a Pi's card (`config.txt` `armstub=`, `crate::flash`).
//!
//! Fetched like the Linux guest (`crate::provision::debian::Apt`, the machine's own apt
//! sources: EDK2 and U-Boot through the Linux guest's state, `Apt::machine_arm64`; TF-A from the newest suites,
//! [`crate::provision::debian::NEWEST_SUITES`], through the package lists the KVM host model
//! keeps (`cloud_kernel::shared_dir`): Debian 13's 2.12.1 still has no BL31 for the Pi 5) and
//! unpacked file by file with `dpkg-deb`: nothing is installed on the system. Each
//! file is cached with a `.source` file naming its package.

use crate::provision::cloud_kernel;
use crate::provision::debian::{cache_dir, extract, Apt, NEWEST_SUITES};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// One firmware file: the package it comes from, the member inside it, the cached name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirmwareFile {
    /// The Debian package.
    pub package: &'static str,
    /// The suite it is taken from.
    pub suite: Suite,
    /// Its path inside the package (a `dpkg-deb` member, wildcards allowed).
    pub member: &'static str,
    /// The file's name under [`dir`].
    pub name: &'static str,
}

/// Where a firmware package comes from (the machine's own apt sources either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// The machine's own suites (Debian 12's EDK2 and U-Boot run on its QEMU 7.2).
    Machine,
    /// The first of [`NEWEST_SUITES`] whose package holds the file (TF-A: Debian 12's 2.8 and
    /// Debian 13's 2.12.1 build BL31 for `rpi4`, sid's and trixie-backports' also for `rpi5`).
    Newest,
}

/// EDK2 for QEMU `virt` (AArch64), a `-bios` image.
pub const EDK2_VIRT: FirmwareFile = FirmwareFile {
    package: "qemu-efi-aarch64",
    suite: Suite::Machine,
    member: "./usr/share/qemu-efi-aarch64/QEMU_EFI.fd",
    name: "QEMU_EFI.fd",
};

/// U-Boot for QEMU `virt` (`qemu_arm64_defconfig`), a `-bios` image.
pub const UBOOT_VIRT: FirmwareFile = FirmwareFile {
    package: "u-boot-qemu",
    suite: Suite::Machine,
    member: "./usr/lib/u-boot/qemu_arm64/u-boot.bin",
    name: "u-boot-qemu_arm64.bin",
};

/// TF-A's BL31 for `platform` (`rpi4`, `rpi5`, `imx8mp`): on a Pi, the armstub that gives the
/// board PSCI from EL3.
pub fn bl31(platform: &'static str) -> FirmwareFile {
    let (member, name) = match platform {
        "rpi4" => ("./usr/lib/arm-trusted-firmware/rpi4/bl31.bin", "bl31-rpi4.bin"),
        "rpi5" => ("./usr/lib/arm-trusted-firmware/rpi5/bl31.bin", "bl31-rpi5.bin"),
        "imx8mp" => ("./usr/lib/arm-trusted-firmware/imx8mp/bl31.bin", "bl31-imx8mp.bin"),
        _ => ("", ""),
    };
    FirmwareFile { package: "arm-trusted-firmware", suite: Suite::Newest, member, name }
}

/// Where the firmware files are cached.
pub fn dir() -> PathBuf {
    cache_dir().join("firmware")
}

/// `file`, fetched and unpacked once (later calls find it cached).
pub fn get(file: FirmwareFile) -> Result<PathBuf> {
    anyhow::ensure!(!file.member.is_empty(), "no firmware file is known for this platform");
    // One fetch at a time (tests ask from several threads); the second finds the file cached.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    // The newest suites' files are kept apart from the machine's: one name, one package's file.
    let d = match file.suite {
        Suite::Machine => dir(),
        Suite::Newest => dir().join("newest"),
    };
    let cached = d.join(file.name);
    if cached.is_file() {
        return Ok(cached);
    }
    std::fs::create_dir_all(&d)?;
    match file.suite {
        Suite::Machine => fetch_from(&Apt::machine_arm64()?, file, &d, &cached),
        Suite::Newest => {
            let mut tried = Vec::new();
            for (name, suites) in NEWEST_SUITES {
                // The package lists the KVM host model and the newest Linux guest read too.
                let apt = cloud_kernel::apt(&cloud_kernel::shared_dir(), name, suites)?;
                match fetch_from(&apt, file, &d, &cached) {
                    Ok(p) => return Ok(p),
                    Err(e) => tried.push(format!("{name}: {e:#}")),
                }
            }
            anyhow::bail!("{} from {}: not in any suite tried ({})", file.member, file.package, tried.join("; "))
        }
    }
}

/// `file` from `apt`'s package into `cached` (its `.source` beside it).
fn fetch_from(apt: &Apt, file: FirmwareFile, d: &Path, cached: &Path) -> Result<PathBuf> {
    eprintln!(
        "xtask: fetching {} from {} ({}) with the machine's apt sources",
        file.name,
        file.package,
        apt.suite_name()
    );
    let deb = apt.fetch(file.package, false)?;
    extract(&deb, file.member, cached).with_context(|| format!("unpacking {} from {}", file.member, deb.display()))?;
    let version = deb.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_string();
    std::fs::write(d.join(format!("{}.source", file.name)), format!("{version} ({})\n", apt.suite_name()))?;
    Ok(cached.to_path_buf())
}

/// What a cached firmware file came from (its `.source` line), for messages.
pub fn source_of(path: &Path) -> String {
    let src = path.with_file_name(format!("{}.source", path.file_name().and_then(|n| n.to_str()).unwrap_or("")));
    std::fs::read_to_string(src).map(|s| s.trim().to_string()).unwrap_or_else(|_| "unknown package".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn firmware_files_have_distinct_names_under_downloads() {
        let files = [EDK2_VIRT, UBOOT_VIRT, bl31("rpi4"), bl31("rpi5"), bl31("imx8mp")];
        for (i, f) in files.iter().enumerate() {
            assert!(!f.member.is_empty() && f.member.starts_with("./"), "{f:?}");
            assert!(files[i + 1..].iter().all(|o| o.name != f.name), "{f:?}");
        }
        assert!(dir().starts_with(cache_dir()));
        assert!(get(bl31("pi3")).is_err(), "an unknown platform is refused before any download");
    }
}
