//! The hypervisor's own counters: guest exits by kind. Printed as a report record at the end.

use core::sync::atomic::{AtomicU64, Ordering};

/// Guest exits the hypervisor handled, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Exit {
    Hvc = 0,
    Smc,
    Psci,
    Hypercall,
    DataAbort,
    InstructionAbort,
    SysReg,
    Other,
}

const NAMES: [&str; 8] = ["hvc", "smc", "psci", "hypercall", "data_abort", "insn_abort", "sysreg", "other"];

static EXITS: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];

pub fn count(e: Exit) {
    EXITS[e as usize].fetch_add(1, Ordering::Relaxed);
}

/// Prints the `hyp_exits` record.
pub fn report() {
    let mut w = abi::report::Record::new("hyp_exits");
    for (i, name) in NAMES.iter().enumerate() {
        w.u64(name, EXITS[i].load(Ordering::Relaxed));
    }
    rt::println!("{}", w);
}

/// Zeroes every counter.
pub fn reset() {
    for c in &EXITS {
        c.store(0, Ordering::Relaxed);
    }
}
