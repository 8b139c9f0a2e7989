//! Ending the run: on QEMU the status becomes QEMU's exit code (semihosting through
//! `qemu-exit`); on hardware PSCI SYSTEM_OFF.

use crate::smccc;
use core::sync::atomic::{AtomicBool, Ordering};
use qemu_exit::QEMUExit;

static ON_QEMU: AtomicBool = AtomicBool::new(false);

/// Called once the DTB says which machine this is.
pub fn set_on_qemu(on_qemu: bool) {
    ON_QEMU.store(on_qemu, Ordering::Relaxed);
}

/// Ends the run with `code` (0 = success). Never returns, on any CPU.
pub fn exit(code: u32) -> ! {
    crate::counters::report();
    rt::console::flush();
    if ON_QEMU.load(Ordering::Relaxed) {
        qemu_exit::AArch64::new().exit(code);
    }
    smccc::smc(abi::psci::SYSTEM_OFF, 0, 0, 0);
    loop {
        aarch64_cpu::asm::wfe();
    }
}
