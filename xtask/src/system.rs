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

/// Installs Debian packages with one line saying so, or fails with the command to run.
pub fn apt_install(packages: &[&str], why: &str) -> Result<()> {
    if !is_root() || which("apt-get").is_none() {
        bail!("{why} is missing. Install it with:\n    {}", install_hint(packages));
    }
    eprintln!("xtask: installing {} with apt-get ({why} is missing)", packages.join(" "));
    let quiet = |c: &mut Command| {
        c.env("DEBIAN_FRONTEND", "noninteractive").stdin(Stdio::null()).stdout(Stdio::null());
    };
    let mut install = Command::new("apt-get");
    install.args(["install", "-y", "-q", "--no-install-recommends"]).args(packages);
    quiet(&mut install);
    if install.status().map(|s| s.success()).unwrap_or(false) {
        return Ok(());
    }
    // The package lists may be missing or stale on a fresh machine: refresh once and retry.
    let mut update = Command::new("apt-get");
    update.args(["update", "-q"]);
    quiet(&mut update);
    update.status().context("running apt-get update")?;
    let mut install = Command::new("apt-get");
    install.args(["install", "-y", "-q", "--no-install-recommends"]).args(packages);
    quiet(&mut install);
    let status = install.status().context("running apt-get install")?;
    if !status.success() {
        bail!(
            "apt-get install {} failed ({status}); install it by hand:\n    {}",
            packages.join(" "),
            install_hint(packages)
        );
    }
    Ok(())
}

/// `qemu-system-aarch64`, installing Debian's qemu-system-arm if needed.
pub fn qemu() -> Result<PathBuf> {
    if let Some(q) = which("qemu-system-aarch64") {
        return Ok(q);
    }
    apt_install(&["qemu-system-arm"], "qemu-system-aarch64")?;
    which("qemu-system-aarch64").context("qemu-system-arm was installed but qemu-system-aarch64 is not on PATH")
}
