//! SMCCC calls through the conduit the device tree names for PSCI (HVC or SMC). Under the
//! hypervisor both trap to EL2; without it QEMU's firmware answers PSCI over HVC.

use core::sync::atomic::{AtomicU8, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conduit {
    Hvc,
    Smc,
}

static CONDUIT: AtomicU8 = AtomicU8::new(0);

pub fn set_conduit(c: Conduit) {
    CONDUIT.store(if c == Conduit::Smc { 1 } else { 0 }, Ordering::Relaxed);
}

pub fn conduit() -> Conduit {
    if CONDUIT.load(Ordering::Relaxed) == 1 {
        Conduit::Smc
    } else {
        Conduit::Hvc
    }
}

/// Calls `fid` with x1..x3 through the conduit; returns x0..x3.
pub fn call(fid: u64, a1: u64, a2: u64, a3: u64) -> [u64; 4] {
    call_via(conduit(), fid, a1, a2, a3)
}

/// Calls `fid` with x1..x3 through `conduit`; returns x0..x3. Reads no memory (usable with the
/// MMU off).
pub fn call_via(conduit: Conduit, fid: u64, a1: u64, a2: u64, a3: u64) -> [u64; 4] {
    let (r0, r1, r2, r3);
    match conduit {
        Conduit::Hvc => {
            // SAFETY: an SMCCC call; per SMCCC v1.0 x0-x17 may be clobbered, and the callee
            // touches no memory of ours except as the called function documents.
            unsafe {
                core::arch::asm!("hvc #0",
                inout("x0") fid => r0, inout("x1") a1 => r1, inout("x2") a2 => r2, inout("x3") a3 => r3,
                out("x4") _, out("x5") _, out("x6") _, out("x7") _, out("x8") _, out("x9") _,
                out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _,
                out("x16") _, out("x17") _, options(nostack))
            }
        }
        // SAFETY: as for the HVC arm: an SMCCC call that may clobber x0-x17 only.
        Conduit::Smc => unsafe {
            core::arch::asm!("smc #0",
                inout("x0") fid => r0, inout("x1") a1 => r1, inout("x2") a2 => r2, inout("x3") a3 => r3,
                out("x4") _, out("x5") _, out("x6") _, out("x7") _, out("x8") _, out("x9") _,
                out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _,
                out("x16") _, out("x17") _, options(nostack))
        },
    }
    [r0, r1, r2, r3]
}
