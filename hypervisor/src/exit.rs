//! Ending the run. Every run ends with the final line `@@exit CODE (meaning)`
//! (`abi::exit::FinalLine`), then the firmware's PSCI SYSTEM_OFF (SYSTEM_RESET when the guest
//! asked for a reset): QEMU's own PSCI ends the QEMU process, TF-A powers a Pi 5 off. The code
//! travels only in that line, on QEMU as on a board: QEMU semihosting, which could carry it as
//! QEMU's exit status, would also give every guest the host's files and shell, so it is never on.
//!
//! Without PSCI firmware (the device tree has no `psci` node) there is nothing to call: the
//! hypervisor says so in one line after the final line and parks the CPU.

use crate::smccc;
use core::sync::atomic::{AtomicBool, Ordering};

/// Whether the device tree names PSCI firmware (read once the DTB is parsed; until then the run
/// cannot know, and parks after its final line).
static FIRMWARE_PSCI: AtomicBool = AtomicBool::new(false);
/// Set by the first CPU that ends the run; any other then only waits to be powered off.
static ENDING: AtomicBool = AtomicBool::new(false);

/// Called once the DTB says whether there is PSCI firmware to power off with.
pub fn set_firmware_psci(present: bool) {
    FIRMWARE_PSCI.store(present, Ordering::Relaxed);
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
/// QEMU (`-no-reboot`) the process ends.
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
    if !FIRMWARE_PSCI.load(Ordering::Relaxed) {
        rt::console::panic_print(format_args!("hyp: {}\n", abi::exit::NO_POWER_OFF));
        rt::console::flush();
        halt();
    }
    let (fid, name) = match power {
        Power::Off => (abi::psci::SYSTEM_OFF, "SYSTEM_OFF"),
        Power::Reset => (abi::psci::SYSTEM_RESET, "SYSTEM_RESET"),
    };
    let r = smccc::smc(fid, 0, 0, 0)[0] as i64;
    rt::console::panic_print(format_args!(
        "hyp: the firmware returned {r} from PSCI {name}: {}\n",
        abi::exit::NO_POWER_OFF
    ));
    halt()
}

fn halt() -> ! {
    loop {
        aarch64_cpu::asm::wfe();
    }
}
