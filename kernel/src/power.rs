//! Ending the run. Under the hypervisor: the exit hypercall with the status (the hypervisor
//! prints the final line). Without it the kernel prints the final line `@@exit CODE (meaning)`
//! itself, then on QEMU exits through semihosting (`qemu-exit`) with the status, and on a board
//! asks the firmware for PSCI SYSTEM_OFF.

use crate::smccc;
use core::sync::atomic::{AtomicU8, Ordering};
use qemu_exit::QEMUExit;

/// Who ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// This project's hypervisor (found through its SMCCC vendor UID).
    Hypervisor,
    /// Bare QEMU (`linux,dummy-virt`), no hypervisor.
    Qemu,
    /// Anything else: real firmware.
    Firmware,
}

static HOST: AtomicU8 = AtomicU8::new(2);

pub fn set_host(h: Host) {
    HOST.store(h as u8, Ordering::Relaxed);
}

pub fn host() -> Host {
    match HOST.load(Ordering::Relaxed) {
        0 => Host::Hypervisor,
        1 => Host::Qemu,
        _ => Host::Firmware,
    }
}

/// Ends the run with `status` (0 = success).
pub fn exit(status: u32) -> ! {
    if host() != Host::Hypervisor {
        rt::console::panic_print(format_args!("{}\n", abi::exit::FinalLine(status)));
    }
    rt::console::flush();
    match host() {
        Host::Hypervisor => {
            smccc::call(abi::hypercall::EXIT, status as u64, 0, 0);
        }
        Host::Qemu => qemu_exit::AArch64::new().exit(status),
        Host::Firmware => {
            smccc::call(abi::psci::SYSTEM_OFF, 0, 0, 0);
        }
    }
    loop {
        aarch64_cpu::asm::wfe();
    }
}
