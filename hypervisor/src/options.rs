//! Boot arguments: words starting with `hyp.` are the hypervisor's, the rest is the guest's
//! command line. `hypcore::options::WORDS` is every word the hypervisor accepts (add one there,
//! one line, and read it in [`parse`]; the xtask reads the same table); an unknown, duplicated
//! or malformed `hyp.` word stops the boot with a message naming it and the accepted ones
//! (`lib/bootargs`).

use alloc::string::String;
use alloc::vec::Vec;

pub use hypcore::options::{PlanWords, TABLE};

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub guest_bootargs: String,
    pub test_el2_fault: bool,
    /// `hyp.test=aarch32-*`: the A32 instruction the AArch32 test guest runs first.
    pub aarch32_test: Option<u32>,
    /// PSCI conduit for the guest's DTB; `None` keeps the host's.
    pub conduit: Option<board::PsciMethod>,
    /// Address the el2-fault test reads.
    pub fault_addr: u64,
    /// What the memory plan reads (`hyp.pool`, `hyp.slotpool`, `hyp.migrate`, `hyp.guest-mem`).
    pub plan: PlanWords,
    /// `hyp.pool=`.
    pub pool: Option<u64>,
    /// `hyp.slotpool=`.
    pub slotpool: Option<u64>,
    /// `hyp.check-split`.
    pub check_split: bool,
    /// `hyp.check-stage2`.
    pub check_stage2: bool,
    /// `hyp.on-fault=stop`: end the run on a stray guest access instead of injecting an abort.
    pub stop_on_fault: bool,
    /// `hyp.migrate`.
    pub migrate: bool,
    /// `hyp.cpus=N`: the guest gets the first N CPUs.
    pub cpus: Option<usize>,
    /// `hyp.e2h=1`: run EL2 with HCR_EL2.E2H = 1 where it could be 0.
    pub force_e2h: bool,
}

/// Splits the command line and checks the hypervisor's words; the message of an `Err` names
/// the word and lists the accepted ones.
/// Words a boot loader put before `bootargs::FIRMWARE_MARKER` are listed once and dropped.
pub fn try_parse(bootargs: &str) -> Result<Options, bootargs::Error> {
    let (firmware, ours) = bootargs::split_firmware(bootargs)?;
    if !firmware.is_empty() {
        rt::println!(
            "hyp: {} words before {:?} are the boot loader's, ignored: {}",
            firmware.len(),
            bootargs::FIRMWARE_MARKER,
            firmware.join(" ")
        );
    }
    let (mine, guest): (Vec<&str>, Vec<&str>) = ours.into_iter().partition(|w| w.starts_with("hyp."));
    let a = bootargs::parse_words(mine, &TABLE)?;
    Ok(Options {
        guest_bootargs: guest.join(" "),
        test_el2_fault: a.choice("hyp.test") == Some("el2-fault"),
        // A32: `ldr r0, [r1]` / `hvc #0`.
        aarch32_test: match a.choice("hyp.test") {
            Some("aarch32-abort") => Some(0xe591_0000),
            Some("aarch32-hvc") => Some(0xe140_0070),
            _ => None,
        },
        conduit: a
            .choice("hyp.conduit")
            .map(|c| if c == "hvc" { board::PsciMethod::Hvc } else { board::PsciMethod::Smc }),
        fault_addr: 0xdead_0000,
        plan: PlanWords::from_args(&a),
        pool: a.size("hyp.pool"),
        slotpool: a.size("hyp.slotpool"),
        check_split: a.flag("hyp.check-split"),
        check_stage2: a.flag("hyp.check-stage2"),
        stop_on_fault: a.choice("hyp.on-fault") == Some("stop"),
        migrate: a.flag("hyp.migrate"),
        cpus: a.uint("hyp.cpus").map(|n| n as usize),
        force_e2h: a.choice("hyp.e2h") == Some("1"),
    })
}

/// [`try_parse`], ending the boot (exit code `HYP_FAULT`) on a refused word.
pub fn parse(bootargs: &str) -> Options {
    match try_parse(bootargs) {
        Ok(o) => o,
        Err(e) => {
            rt::console::panic_print(format_args!("hyp: boot failed: {e}\n"));
            crate::exit::exit(abi::exit::HYP_FAULT)
        }
    }
}
