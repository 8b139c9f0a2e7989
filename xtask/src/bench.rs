//! `cargo xtask bench <name>`.

use crate::workspace_root;
use anyhow::{bail, ensure, Context, Result};
use std::process::Command;

/// Benchmarks this command knows.
pub const BENCHES: [(&str, &str); 1] =
    [("pgtable", "host: lib/pgtable against aarch64-paging (map 4 GiB, 10,000 4 KiB permission changes, unmap)")];

pub fn run(which: &str) -> Result<()> {
    match which {
        "pgtable" => {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let status = Command::new(cargo)
                .current_dir(workspace_root())
                .args(["bench", "-p", "pgtable", "--bench", "peer"])
                .status()
                .context("running cargo bench")?;
            ensure!(status.success(), "benchmark failed");
            Ok(())
        }
        other => {
            let list: Vec<String> = BENCHES.iter().map(|(n, d)| format!("  {n}: {d}")).collect();
            bail!("unknown benchmark {other:?}; known:\n{}", list.join("\n"))
        }
    }
}
