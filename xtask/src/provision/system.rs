//! System packages: found on PATH, else installed with apt-get when running as root, else an
//! error that gives the exact command to run.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Finds an executable on PATH (or an absolute path that exists).
pub fn which(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.is_absolute() {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|c| c.is_file())
}

/// Whether this process runs as root (and so may install packages).
pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

/// The command a user should run to install `packages`.
pub fn install_hint(packages: &[&str]) -> String {
    format!("sudo apt-get update && sudo apt-get install -y {}", packages.join(" "))
}

/// Installs Debian packages with one line saying so, or fails with the command to run. The
/// package lists are refreshed first (once per run): on a fresh machine they are missing, and
/// stale lists can offer an older toolchain.
pub fn apt_install(packages: &[&str], why: &str) -> Result<()> {
    static UPDATED: std::sync::Once = std::sync::Once::new();
    if !is_root() || which("apt-get").is_none() {
        bail!("{why} is missing. Install it with:\n    {}", install_hint(packages));
    }
    eprintln!("xtask: installing {} with apt-get ({why} is missing)", packages.join(" "));
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
    };
    UPDATED.call_once(|| {
        if !apt(&["update", "-q"]).map(|s| s.success()).unwrap_or(false) {
            eprintln!("xtask: warning: apt-get update failed; trying the install with the lists there are");
        }
    });
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend_from_slice(packages);
    let status = apt(&args).context("running apt-get install")?;
    if !status.success() {
        bail!(
            "apt-get install {} failed ({status}); install it by hand:\n    {}",
            packages.join(" "),
            install_hint(packages)
        );
    }
    Ok(())
}

/// Option ROM QEMU's `virt` board loads for its default virtio NIC (Debian's `ipxe-qemu`, only
/// a recommendation of qemu-system-arm): without it every boot fails with "failed to find
/// romfile efi-virtio.rom".
const VIRTIO_ROM: &str = "/usr/lib/ipxe/qemu/efi-virtio.rom";

/// `qemu-system-aarch64`, installing Debian's qemu-system-arm (and ipxe-qemu) if needed.
pub fn qemu() -> Result<PathBuf> {
    let q = match which("qemu-system-aarch64") {
        Some(q) => q,
        None => {
            apt_install(&["qemu-system-arm", "ipxe-qemu"], "qemu-system-aarch64")?;
            which("qemu-system-aarch64")
                .context("qemu-system-arm was installed but qemu-system-aarch64 is not on PATH")?
        }
    };
    // Only the Debian build looks there; a QEMU from elsewhere brings its own ROMs.
    if q.starts_with("/usr/bin") && !Path::new(VIRTIO_ROM).exists() {
        apt_install(&["ipxe-qemu"], "QEMU's virtio option ROM (efi-virtio.rom)")?;
    }
    Ok(q)
}
