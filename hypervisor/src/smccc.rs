//! SMC Calling Convention: the hypervisor's own calls to firmware (PSCI: QEMU's, or TF-A's on
//! the Pi 5).

/// Result registers x0..x3 of an SMCCC call.
pub type Ret = [u64; 4];

/// Issues `smc #0` with function id `fid` and arguments x1..x3.
pub fn smc(fid: u64, a1: u64, a2: u64, a3: u64) -> Ret {
    let (r0, r1, r2, r3);
    // SAFETY: an SMCCC call to EL3 firmware (QEMU's built-in PSCI under TCG, TF-A on the Pi 5);
    // per SMCCC v1.0 x0-x17 may be clobbered and no memory of ours is touched except as the call documents
    // (PSCI calls here pass only addresses and values).
    unsafe {
        core::arch::asm!(
            "smc #0",
            inout("x0") fid => r0,
            inout("x1") a1 => r1,
            inout("x2") a2 => r2,
            inout("x3") a3 => r3,
            out("x4") _, out("x5") _, out("x6") _, out("x7") _,
            out("x8") _, out("x9") _, out("x10") _, out("x11") _,
            out("x12") _, out("x13") _, out("x14") _, out("x15") _,
            out("x16") _, out("x17") _,
            options(nostack),
        );
    }
    [r0, r1, r2, r3]
}
