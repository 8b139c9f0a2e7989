//! `cargo xtask doctor`: what this host has for the project: the cross toolchain, the linker,
//! the QEMU each machine model runs on (installing what is missing when root), what this host's
//! KVM offers and whether the KVM host model is provisioned.

use crate::launch::Qemu;
use crate::machine;
use crate::provision::{qemu_pkg, system, toolchain};
use anyhow::Result;

/// Prints the report.
pub fn run() -> Result<()> {
    let tc = toolchain::find()?;
    println!("cross toolchain: {}", tc.description);
    println!("  cargo {}  rustc {}", tc.cargo.display(), tc.rustc.display());
    println!("  std: {:?}", tc.std);
    match &tc.linker {
        Some(l) => println!("  linker: {}", l.display()),
        None => println!("  linker: the toolchain's rust-lld"),
    }
    let sys = system::qemu()?;
    let v = |q: &std::path::Path| {
        Qemu::at(q.to_path_buf()).map_or_else(|e| format!("version unknown: {e:#}"), |q| q.version.to_string())
    };
    println!("system qemu: {} ({})", sys.display(), v(&sys));
    for (m, q) in machine::with_qemu_models() {
        match qemu_pkg::qemu_at_least(q.min_qemu) {
            Ok(p) => println!("qemu for --board {m} (needs {}): {} ({})", q.min_qemu, p.display(), v(&p)),
            Err(e) => println!("qemu for --board {m} (needs {}): not available: {e:#}", q.min_qemu),
        }
    }
    for l in crate::provision::kvm::doctor_lines() {
        println!("{l}");
    }
    Ok(())
}
