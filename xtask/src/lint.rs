//! `cargo xtask lint`: clippy with warnings as errors, on the whole workspace for the host (all
//! targets, tests included: `cargo clippy --workspace --all-targets -- -D warnings`, where the
//! bare-metal binaries are host stubs) and on the bare-metal binaries for their targets (cross,
//! release profile, as they are built).
//! The lint set itself is `[workspace.lints]` in the top `Cargo.toml`; every crate opts in with
//! `[lints] workspace = true`. `cargo xtask test` runs this first.

use crate::provision::system::{apt_install, which};
use crate::provision::toolchain::CrossToolchain;
use crate::{build, workspace_root};
use anyhow::{ensure, Result};
use std::path::Path;
use std::process::Stdio;

/// PATH with `cargo`'s own directory first: `cargo clippy` runs the first `cargo-clippy` on PATH,
/// which must be the one of this cargo's toolchain (rustup's proxies come first otherwise).
fn path_for(cargo: &Path) -> std::ffi::OsString {
    let mut dirs: Vec<std::path::PathBuf> = cargo.parent().map(Path::to_path_buf).into_iter().collect();
    dirs.extend(std::env::var_os("PATH").iter().flat_map(std::env::split_paths));
    std::env::join_paths(dirs).unwrap_or_default()
}

/// Whether `cargo` can run `cargo clippy` with its own toolchain's clippy (`cargo-clippy` and
/// `clippy-driver` beside it, not a rustup proxy found later on PATH).
fn has_clippy(cargo: &Path) -> bool {
    let beside = |name: &str| cargo.parent().is_some_and(|d| d.join(name).is_file());
    beside("cargo-clippy")
        && beside("clippy-driver")
        && crate::provision::toolchain::clippy_of(cargo)
            .arg("--version")
            .env("PATH", path_for(cargo))
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
}

/// Debian's clippy for its `rustc-web` toolchain.
const DEBIAN_CLIPPY: &str = "rust-web-clippy";

/// Makes sure the cross toolchain's cargo has clippy (installing Debian's when that is the
/// toolchain and we are root).
fn cross_clippy(tc: &CrossToolchain) -> Result<()> {
    if has_clippy(&tc.cargo) {
        return Ok(());
    }
    if tc.cargo.starts_with("/usr/bin") {
        apt_install(&[DEBIAN_CLIPPY], "clippy for Debian's Rust toolchain")?;
        ensure!(has_clippy(&tc.cargo), "{DEBIAN_CLIPPY} was installed but `{} clippy` still fails", tc.cargo.display());
        return Ok(());
    }
    anyhow::bail!(
        "the toolchain that builds the binaries ({}) has no clippy: `rustup component add clippy`",
        tc.description
    )
}

/// Runs both lints; fails on the first warning.
pub fn run(tc: &CrossToolchain) -> Result<()> {
    // Host crates: the active toolchain's clippy, else Debian's (the same one the cross lint uses).
    let active = std::env::var_os("CARGO").map(std::path::PathBuf::from).or_else(|| which("cargo"));
    let host_cargo = match active {
        Some(c) if has_clippy(&c) => c,
        _ => {
            cross_clippy(tc)?;
            tc.cargo.clone()
        }
    };
    eprintln!("xtask: clippy on the host crates ({})", host_cargo.display());
    let mut c = crate::provision::toolchain::clippy_of(&host_cargo);
    c.current_dir(workspace_root()).env("PATH", path_for(&host_cargo));
    // `--workspace`: what a Rust developer runs first. The bare-metal binaries are stubs on the
    // host (their items are `#[cfg(target_os = "none")]`), linted for real below.
    c.args(["--quiet", "--workspace", "--all-targets", "--", "-D", "warnings"]);
    if host_cargo == tc.cargo && tc.cargo.starts_with("/usr/bin") {
        c.env("RUSTC", &tc.rustc).env_remove("RUSTUP_TOOLCHAIN");
    }
    let status = crate::signals::status(&mut c)?;
    if !status.success() {
        return Err(crate::error::check_failed("clippy found problems in the host crates (see above)"));
    }

    cross_clippy(tc)?;
    // The kernel embeds the EL0 programs (`user/`): build them first; they are linted with the
    // kernel's target.
    let el0 = build::build_el0_programs(tc)?;
    for target in [crate::provision::toolchain::HYP_TARGET, crate::provision::toolchain::TARGET] {
        let mut bins: Vec<&str> = build::BINARIES.iter().filter(|(_, t)| *t == target).map(|(b, _)| *b).collect();
        if target == crate::provision::toolchain::TARGET {
            bins.push("user");
        }
        eprintln!("xtask: clippy on {} ({target})", bins.join(", "));
        let mut c = tc.cargo("clippy", target);
        c.current_dir(workspace_root()).env("PATH", path_for(&tc.cargo)).args(["--quiet", "--release"]);
        c.env(build::USER_DIR_VAR, &el0);
        for b in &bins {
            c.args(["-p", b]);
        }
        c.arg("--target-dir").arg(build::cross_target_dir());
        c.args(["--", "-D", "warnings"]);
        let status = crate::signals::status(&mut c)?;
        if !status.success() {
            return Err(crate::error::check_failed(format!(
                "clippy found problems in {} (see above)",
                bins.join(", ")
            )));
        }
    }
    eprintln!("xtask: clippy on linux-user ({})", crate::provision::toolchain::TARGET);
    let mut c = build::user_cargo(tc, "clippy");
    c.env("PATH", path_for(&tc.cargo)).args(["--quiet", "--", "-D", "warnings"]);
    let status = crate::signals::status(&mut c)?;
    ensure!(status.success(), "clippy found problems in linux-user (see above)");
    Ok(())
}
