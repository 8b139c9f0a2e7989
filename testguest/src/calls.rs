//! How the test guest talks to what is below it: SMCCC calls through HVC or SMC (the PSCI
//! conduit its device tree names), and the end of the run. Below every mode (`guest` chooses
//! one; `view` and `forge` call down here), so no mode imports the dispatcher.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether the pgtlab hypervisor runs below (it then prints the run's final line).
pub(crate) static UNDER_HYPERVISOR: AtomicBool = AtomicBool::new(false);
/// PSCI conduit from the device tree: 0 none, 1 HVC, 2 SMC.
pub(crate) static PSCI: AtomicU64 = AtomicU64::new(0);

/// An SMCCC call through HVC or SMC; returns x0..x3.
pub(crate) fn smccc(smc: bool, fid: u64, a1: u64) -> [u64; 4] {
    let (r0, r1, r2, r3);
    // SAFETY: an SMCCC call: per SMCCC v1.0 x0-x17 may be clobbered, and the callee touches no
    // memory of ours.
    unsafe {
        if smc {
            core::arch::asm!("smc #0", inout("x0") fid => r0, inout("x1") a1 => r1, out("x2") r2, out("x3") r3,
                out("x4") _, out("x5") _, out("x6") _, out("x7") _, out("x8") _, out("x9") _, out("x10") _,
                out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _, out("x17") _,
                options(nostack));
        } else {
            core::arch::asm!("hvc #0", inout("x0") fid => r0, inout("x1") a1 => r1, out("x2") r2, out("x3") r3,
                out("x4") _, out("x5") _, out("x6") _, out("x7") _, out("x8") _, out("x9") _, out("x10") _,
                out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _, out("x17") _,
                options(nostack));
        }
    }
    [r0, r1, r2, r3]
}

/// Ends the run with `status`: the exit hypercall under the hypervisor (which prints the final
/// line), else the final line and PSCI SYSTEM_OFF (SYSTEM_RESET on a failure: alone, how the
/// machine ends is the verdict).
pub(crate) fn end(status: u32) -> ! {
    rt::console::flush();
    if UNDER_HYPERVISOR.load(Ordering::Relaxed) {
        smccc(false, abi::hypercall::EXIT, status.into());
    } else {
        rt::console::panic_print(format_args!("{}\n", abi::exit::FinalLine(status)));
        rt::console::flush();
        match PSCI.load(Ordering::Relaxed) {
            0 => {}
            c => {
                let fid = if status == 0 { abi::psci::SYSTEM_OFF } else { abi::psci::SYSTEM_RESET };
                smccc(c == 2, fid, 0);
            }
        }
        rt::console::panic_print(format_args!("testguest: {}\n", abi::exit::NO_POWER_OFF));
    }
    loop {
        aarch64_cpu::asm::wfe();
    }
}
