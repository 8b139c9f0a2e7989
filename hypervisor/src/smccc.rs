//! SMC Calling Convention: the hypervisor's own calls to firmware (PSCI: QEMU's, or TF-A's on
//! the Pi 5).

/// Result registers x0..x3 of an SMCCC call.
pub type Ret = [u64; 4];

/// Issues `smc #0` with function id `fid` and arguments x1..x3 (to EL3 firmware: QEMU's
/// built-in PSCI under TCG, TF-A on the Pi 5; PSCI calls here pass only addresses and values).
pub fn smc(fid: u64, a1: u64, a2: u64, a3: u64) -> Ret {
    rt::smccc::call4(rt::smccc::Conduit::Smc, fid, a1, a2, a3)
}
