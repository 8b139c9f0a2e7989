//! SMCCC calls through the conduit the device tree names for PSCI (HVC or SMC). Under the
//! hypervisor both trap to EL2; without it QEMU's firmware answers PSCI over HVC.

use core::sync::atomic::{AtomicU8, Ordering};

pub use rt::smccc::Conduit;

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
#[inline(always)]
pub fn call_via(conduit: Conduit, fid: u64, a1: u64, a2: u64, a3: u64) -> [u64; 4] {
    rt::smccc::call4(conduit, fid, a1, a2, a3)
}
