//! `cargo xtask test`: clippy (`cargo xtask lint`), every crate's host unit tests, then the QEMU integration tests in
//! `tests/` against freshly built Images (one fresh QEMU per scenario).

use crate::{build, system, toolchain, workspace_root};
use anyhow::{ensure, Context, Result};
use std::process::Command;
use std::time::Instant;

/// Crates whose unit tests run on the host.
pub const HOST_CRATES: [&str; 7] = ["abi", "board", "chainboot", "hypcore", "pgtable", "rt", "xtask"];

fn host_cargo() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(workspace_root());
    c
}

/// Runs the whole suite.
pub fn run(long: bool, host_only: bool) -> Result<()> {
    let t0 = Instant::now();
    // Everything the tests need comes first: lib/board's host tests dump real DTBs from QEMU.
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    crate::lint::run(&tc)?;
    eprintln!("xtask: host unit tests ({})", HOST_CRATES.join(", "));
    let mut c = host_cargo();
    c.arg("test");
    for p in HOST_CRATES {
        c.args(["-p", p]);
    }
    let status = c.status().context("running cargo test")?;
    ensure!(status.success(), "host unit tests failed");
    if long {
        // 10^6 random page-table operation sequences through the model checker: optimised build.
        eprintln!("xtask: long page-table property tests (PGTABLE_LONG=1, release build; about 10 minutes)");
        let status = host_cargo()
            .args(["test", "--release", "-p", "pgtable"])
            .env("PGTABLE_LONG", "1")
            .status()
            .context("running cargo test --release -p pgtable")?;
        ensure!(status.success(), "long page-table property tests failed");
    }
    if host_only {
        return Ok(());
    }
    let images = build::build(&tc, &[])?;
    eprintln!("xtask: QEMU integration tests (tests/){}", if long { ", the long ones included" } else { "" });
    let mut c = host_cargo();
    c.args(["test", "--no-fail-fast", "-p", "tests"]);
    if long {
        // Slow scenarios (8 GiB, a host that stops half way) are #[ignore]d by default.
        c.args(["--", "--include-ignored"]);
    }
    let status = c
        .env("XTASK_QEMU", &qemu)
        .env("XTASK_HYPERVISOR_IMG", &images.hypervisor)
        .env("XTASK_KERNEL_IMG", &images.kernel)
        .env("XTASK_HYPERVISOR_ELF", &images.hypervisor_elf)
        .env("XTASK_KERNEL_ELF", &images.kernel_elf)
        .status()
        .context("running cargo test -p tests")?;
    ensure!(status.success(), "QEMU integration tests failed");
    eprintln!("xtask: all tests passed in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}
