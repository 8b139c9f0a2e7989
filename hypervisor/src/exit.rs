//! Ending the run. Every run ends with the final line `@@exit CODE (meaning) key=KEY`
//! (`abi::exit::KeyedFinalLine`, with the run's key from `hyp.key=`, read first thing so that
//! even a refused boot word ends with it; `abi::exit::FinalLine` when none was given); then the machine is switched off the way the board offers, decided
//! by its DTB alone ([`init`]). The code travels only in that line, on QEMU as on a board: QEMU
//! semihosting, which could carry it as QEMU's exit status, would also give every guest the
//! host's files and shell, so it is never on.
//!
//! * PSCI firmware (a PSCI node: QEMU's own PSCI on `virt`, the ZCU102 and i.MX 8M Plus
//!   models; TF-A on the Pi 5): PSCI SYSTEM_OFF, or SYSTEM_RESET when the guest asked for a
//!   reset (QEMU's ends the process, with `-no-reboot` for a reset);
//! * no PSCI, a Broadcom PM watchdog (the Pi 4): the watchdog's reset with the reset-status
//!   partition 63, which the Pi's firmware (and QEMU's model) takes as "halt", or partition 0
//!   for a reset (Linux's `bcm2835_wdt` does the same);
//! * nothing of these (or the power-off did not happen): the hypervisor says so in one line
//!   after the final line (`abi::exit::NO_POWER_OFF`: the xtask then ends QEMU) and parks.

use crate::smccc;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// How this board powers off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Method {
    /// PSCI firmware over SMC.
    Psci = 1,
    /// The Broadcom PM watchdog at [`PM_BASE`].
    PmWatchdog = 2,
    /// Nothing: say so and park.
    None = 3,
}

/// Until [`init`] ran the run cannot know: it parks after its final line.
static METHOD: AtomicU8 = AtomicU8::new(Method::None as u8);
static PM_BASE: AtomicU64 = AtomicU64::new(0);
/// Set by the first CPU that ends the run; any other then only waits to be powered off.
static ENDING: AtomicBool = AtomicBool::new(false);
/// The run's key (`hyp.key=`), valid once [`KEYED`] is set.
static KEY: AtomicU64 = AtomicU64::new(0);
static KEYED: AtomicBool = AtomicBool::new(false);

/// Takes the run's key (`hyp.key=`) from the boot loader's command line before anything else is
/// checked there, so that even a refused boot word ends with it (a malformed or repeated key is
/// left to the full parse, which refuses it, `crate::options`).
pub fn set_key_from(bootargs: &str) {
    let mut keys = bootargs.split_ascii_whitespace().filter_map(|w| w.strip_prefix("hyp.key="));
    if let (Some(k), None) = (keys.next(), keys.next()) {
        if let Ok(k) = bootargs::parse_uint(k) {
            KEY.store(k, Ordering::Relaxed);
            KEYED.store(true, Ordering::Release);
        }
    }
}

/// Called once the DTB says how this machine powers off.
pub fn init(board: &board::Board) {
    use hypcore::devices::PowerOff;
    let m = match PowerOff::of(board) {
        PowerOff::Psci => Method::Psci,
        PowerOff::PmWatchdog(pm) => {
            PM_BASE.store(pm.base, Ordering::Relaxed);
            Method::PmWatchdog
        }
        PowerOff::None => Method::None,
    };
    METHOD.store(m as u8, Ordering::Relaxed);
}

fn method() -> Method {
    match METHOD.load(Ordering::Relaxed) {
        1 => Method::Psci,
        2 => Method::PmWatchdog,
        _ => Method::None,
    }
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
    if KEYED.load(Ordering::Acquire) {
        let key = KEY.load(Ordering::Relaxed);
        rt::console::panic_print(format_args!("{}\n", abi::exit::KeyedFinalLine { code, key }));
    } else {
        rt::console::panic_print(format_args!("{}\n", abi::exit::FinalLine(code)));
    }
    rt::console::flush();
    match method() {
        Method::Psci => {
            let (fid, name) = match power {
                Power::Off => (abi::psci::SYSTEM_OFF, "SYSTEM_OFF"),
                Power::Reset => (abi::psci::SYSTEM_RESET, "SYSTEM_RESET"),
            };
            let r = smccc::smc(fid, 0, 0, 0)[0] as i64;
            rt::console::panic_print(format_args!(
                "hyp: the firmware returned {r} from PSCI {name}: {}\n",
                abi::exit::NO_POWER_OFF
            ));
        }
        Method::PmWatchdog => {
            pm_watchdog(PM_BASE.load(Ordering::Relaxed), power);
            rt::console::panic_print(format_args!(
                "hyp: the PM watchdog did not power off: {}\n",
                abi::exit::NO_POWER_OFF
            ));
        }
        Method::None => rt::console::panic_print(format_args!("hyp: {}\n", abi::exit::NO_POWER_OFF)),
    }
    rt::console::flush();
    halt()
}

/// The Broadcom PM block's registers (offsets in its "pm" region) and values, as the Pi's
/// firmware and Linux's `bcm2835_wdt.c` use them: every write carries the password in bits
/// 31:24; RSTS bits 0, 2, 4, 6, 8, 10 hold the partition to boot next (63 = halt).
mod pm {
    pub const RSTC: u64 = 0x1c;
    pub const RSTS: u64 = 0x20;
    pub const WDOG: u64 = 0x24;
    pub const PASSWORD: u32 = 0x5a00_0000;
    pub const RSTC_WRCFG_CLR: u32 = 0xffff_ffcf;
    pub const RSTC_WRCFG_FULL_RESET: u32 = 0x20;
    pub const RSTS_PARTITION_CLR: u32 = 0xffff_faaa;
    /// Partition 63 spread over the even bits.
    pub const RSTS_HALT: u32 = 0x555;
}

/// Powers off (or resets) through the PM watchdog at `base`: partition, a short timeout, a
/// full reset; returns if nothing happened within ~10^7 spins.
fn pm_watchdog(base: u64, power: Power) {
    use tock_registers::interfaces::{Readable, Writeable};
    use tock_registers::registers::ReadWrite;
    // SAFETY: `base` is the DTB's PM watchdog register block, mapped device RW at EL2 by
    // mmu::setup; the run is over, nothing else uses it now.
    let reg = |off: u64| unsafe { &*((base + off) as *const ReadWrite<u32>) };
    let partition = if power == Power::Off { pm::RSTS_HALT } else { 0 };
    let rsts = (reg(pm::RSTS).get() & pm::RSTS_PARTITION_CLR) | partition;
    reg(pm::RSTS).set(pm::PASSWORD | rsts);
    reg(pm::WDOG).set(pm::PASSWORD | 10);
    let rstc = (reg(pm::RSTC).get() & pm::RSTC_WRCFG_CLR) | pm::RSTC_WRCFG_FULL_RESET;
    reg(pm::RSTC).set(pm::PASSWORD | rstc);
    // The reset takes a few watchdog ticks.
    for _ in 0..10_000_000 {
        core::hint::spin_loop();
    }
}

fn halt() -> ! {
    loop {
        aarch64_cpu::asm::wfe();
    }
}
