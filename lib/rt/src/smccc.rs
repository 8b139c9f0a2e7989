//! The SMC Calling Convention's one instruction: `HVC #0` or `SMC #0` with x0..x7 in and
//! x0..x3 out, written once for both binaries (the hypervisor's calls to firmware, the
//! kernel's calls to the hypervisor or firmware, its SMCCC self-tests).

/// Which instruction reaches the callee.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conduit {
    /// `HVC #0`: to EL2.
    Hvc,
    /// `SMC #0`: to EL3 (or trapped to EL2 by HCR_EL2.TSC).
    Smc,
}

/// The one asm block, for `HVC #0` or `SMC #0`.
macro_rules! smccc_asm {
    ($insn:literal, $r:expr) => {{
        let r: [u64; 8] = $r;
        let (r0, r1, r2, r3);
        // SAFETY: an SMCCC call: x0-x17 may be clobbered, and nothing of ours changes except as
        // the function called documents (the caller's contract).
        unsafe {
            core::arch::asm!($insn,
                inout("x0") r[0] => r0, inout("x1") r[1] => r1, inout("x2") r[2] => r2, inout("x3") r[3] => r3,
                inout("x4") r[4] => _, inout("x5") r[5] => _, inout("x6") r[6] => _, inout("x7") r[7] => _,
                out("x8") _, out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x14") _, out("x15") _, out("x16") _, out("x17") _, options(nostack))
        };
        [r0, r1, r2, r3]
    }};
}

/// One SMCCC call through `conduit` with x0..x7 = `r` (x0 the function id); returns x0..x3.
/// x4..x17 may be clobbered (SMCCC v1.0). Touches no memory of its own, so it is usable with
/// the MMU off; the callee touches only what the called function documents.
#[inline(always)]
pub fn call(conduit: Conduit, r: [u64; 8]) -> [u64; 4] {
    match conduit {
        Conduit::Hvc => smccc_asm!("hvc #0", r),
        Conduit::Smc => smccc_asm!("smc #0", r),
    }
}

/// [`call`] with x1..x3 = `a1..a3` and x4..x7 zero.
#[inline(always)]
pub fn call4(conduit: Conduit, fid: u64, a1: u64, a2: u64, a3: u64) -> [u64; 4] {
    call(conduit, [fid, a1, a2, a3, 0, 0, 0, 0])
}
