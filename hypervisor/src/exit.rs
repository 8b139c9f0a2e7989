//! Ending the run. Every run ends with the final line `@@exit CODE (meaning)`
//! (`abi::exit::FinalLine`); then on QEMU the code becomes QEMU's exit status (semihosting
//! through `qemu-exit`), and on a board the firmware (TF-A on the Pi 5) gets PSCI SYSTEM_OFF, or
//! SYSTEM_RESET when the guest asked for a reset, so the board's console carries the code.
//! Which of the two is decided by the DTB alone (`linux,dummy-virt` is QEMU's board).

use crate::smccc;
use core::sync::atomic::{AtomicBool, Ordering};
use qemu_exit::QEMUExit;

static ON_QEMU: AtomicBool = AtomicBool::new(false);
/// Set by the first CPU that ends the run; any other then only waits to be powered off.
static ENDING: AtomicBool = AtomicBool::new(false);

/// Called once the DTB says which machine this is.
pub fn set_on_qemu(on_qemu: bool) {
    ON_QEMU.store(on_qemu, Ordering::Relaxed);
}

/// What the firmware is asked to do once the final line is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Power {
    Off,
    Reset,
}

/// Ends the run with `code` (0 = success). Never returns, on any CPU.
pub fn exit(code: u32) -> ! {
    finish(code, Power::Off)
}

/// Ends the run because the guest asked PSCI SYSTEM_RESET, with its own code
/// ([`abi::exit::GUEST_RESET`]: a reset is not a power-off; Linux resets after a panic): on a
/// board the firmware then resets it (back to what is on the card, e.g. the chainloader); on
/// QEMU the run ends.
pub fn reset() -> ! {
    finish(abi::exit::GUEST_RESET, Power::Reset)
}

fn finish(code: u32, power: Power) -> ! {
    if ENDING.swap(true, Ordering::AcqRel) {
        halt();
    }
    crate::counters::report();
    rt::console::panic_print(format_args!("{}\n", abi::exit::FinalLine(code)));
    rt::console::flush();
    if ON_QEMU.load(Ordering::Relaxed) {
        qemu_exit::AArch64::new().exit(code);
    }
    let (fid, name) = match power {
        Power::Off => (abi::psci::SYSTEM_OFF, "SYSTEM_OFF"),
        Power::Reset => (abi::psci::SYSTEM_RESET, "SYSTEM_RESET"),
    };
    let r = smccc::smc(fid, 0, 0, 0)[0] as i64;
    rt::console::panic_print(format_args!("hyp: the firmware returned {r} from PSCI {name}: halting\n"));
    halt()
}

fn halt() -> ! {
    loop {
        aarch64_cpu::asm::wfe();
    }
}
