//! Event tables: the architectural common events every PMUv3 names (0x00-0x3F), and the
//! IMPLEMENTATION DEFINED events of the cores this project runs on, each found by name or number.
//!
//! Whether a CPU really counts an event is a separate question ([`crate::support`]): a common
//! event is counted when PMCEID0/1 says so; an IMPLEMENTATION DEFINED one when the core's table
//! lists it and the CPU is real silicon (QEMU TCG counts only what its PMCEID advertises).

/// One PMU event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The event number written to PMEVTYPER<n>_EL0.evtCount.
    pub number: u16,
    /// Upper-case mnemonic, e.g. `"L1D_TLB_REFILL"`.
    pub name: &'static str,
    /// What it counts, in one line.
    pub about: &'static str,
    /// A TLB or translation-table-walk event (the ones this project is about).
    pub tlb: bool,
}

const fn ev(number: u16, name: &'static str, about: &'static str) -> Event {
    Event { number, name, about, tlb: false }
}

const fn tlb(number: u16, name: &'static str, about: &'static str) -> Event {
    Event { number, name, about, tlb: true }
}

/// SW_INCR: counts writes to PMSWINC_EL0 (deterministic: used by the overflow self-test).
pub const SW_INCR: u16 = 0x00;
/// INST_RETIRED: instructions architecturally executed.
pub const INST_RETIRED: u16 = 0x08;
/// CPU_CYCLES: processor cycles (QEMU TCG: nanoseconds of virtual time at a nominal 1 GHz).
pub const CPU_CYCLES: u16 = 0x11;
/// CHAIN: counts the overflows of the even counter below (odd counters only).
pub const CHAIN: u16 = 0x1e;

/// The architectural and microarchitectural common events of PMUv3 (Arm ARM D17.11), whose
/// presence PMCEID0_EL0 / PMCEID1_EL0 advertise bit by bit.
pub const COMMON: &[Event] = &[
    ev(0x00, "SW_INCR", "writes to PMSWINC_EL0 (software increment)"),
    ev(0x01, "L1I_CACHE_REFILL", "level 1 instruction cache refills"),
    tlb(0x02, "L1I_TLB_REFILL", "level 1 instruction TLB refills"),
    ev(0x03, "L1D_CACHE_REFILL", "level 1 data cache refills"),
    ev(0x04, "L1D_CACHE", "level 1 data cache accesses"),
    tlb(0x05, "L1D_TLB_REFILL", "level 1 data TLB refills"),
    ev(0x06, "LD_RETIRED", "loads architecturally executed"),
    ev(0x07, "ST_RETIRED", "stores architecturally executed"),
    ev(0x08, "INST_RETIRED", "instructions architecturally executed"),
    ev(0x09, "EXC_TAKEN", "exceptions taken"),
    ev(0x0a, "EXC_RETURN", "exception returns architecturally executed"),
    ev(0x0b, "CID_WRITE_RETIRED", "writes to CONTEXTIDR architecturally executed"),
    ev(0x0c, "PC_WRITE_RETIRED", "software changes of the PC architecturally executed"),
    ev(0x0d, "BR_IMMED_RETIRED", "immediate branches architecturally executed"),
    ev(0x0e, "BR_RETURN_RETIRED", "function returns architecturally executed"),
    ev(0x0f, "UNALIGNED_LDST_RETIRED", "unaligned loads and stores architecturally executed"),
    ev(0x10, "BR_MIS_PRED", "branches mispredicted or not predicted, speculatively executed"),
    ev(0x11, "CPU_CYCLES", "cycles"),
    ev(0x12, "BR_PRED", "predictable branches speculatively executed"),
    ev(0x13, "MEM_ACCESS", "data memory accesses"),
    ev(0x14, "L1I_CACHE", "level 1 instruction cache accesses"),
    ev(0x15, "L1D_CACHE_WB", "level 1 data cache write-backs"),
    ev(0x16, "L2D_CACHE", "level 2 data cache accesses"),
    ev(0x17, "L2D_CACHE_REFILL", "level 2 data cache refills"),
    ev(0x18, "L2D_CACHE_WB", "level 2 data cache write-backs"),
    ev(0x19, "BUS_ACCESS", "bus accesses"),
    ev(0x1a, "MEMORY_ERROR", "local memory errors"),
    ev(0x1b, "INST_SPEC", "operations speculatively executed"),
    tlb(0x1c, "TTBR_WRITE_RETIRED", "writes to a TTBR architecturally executed"),
    ev(0x1d, "BUS_CYCLES", "bus cycles"),
    ev(0x1e, "CHAIN", "overflows of the even counter below (odd counters only)"),
    ev(0x1f, "L1D_CACHE_ALLOCATE", "level 1 data cache allocations without refill"),
    ev(0x20, "L2D_CACHE_ALLOCATE", "level 2 data cache allocations without refill"),
    ev(0x21, "BR_RETIRED", "branches architecturally executed"),
    ev(0x22, "BR_MIS_PRED_RETIRED", "mispredicted branches architecturally executed"),
    ev(0x23, "STALL_FRONTEND", "cycles with no operation issued: frontend"),
    ev(0x24, "STALL_BACKEND", "cycles with no operation issued: backend"),
    tlb(0x25, "L1D_TLB", "level 1 data TLB accesses"),
    tlb(0x26, "L1I_TLB", "level 1 instruction TLB accesses"),
    ev(0x27, "L2I_CACHE", "level 2 instruction cache accesses"),
    ev(0x28, "L2I_CACHE_REFILL", "level 2 instruction cache refills"),
    ev(0x29, "L3D_CACHE_ALLOCATE", "level 3 data cache allocations without refill"),
    ev(0x2a, "L3D_CACHE_REFILL", "level 3 data cache refills"),
    ev(0x2b, "L3D_CACHE", "level 3 data cache accesses"),
    ev(0x2c, "L3D_CACHE_WB", "level 3 data cache write-backs"),
    tlb(0x2d, "L2D_TLB_REFILL", "level 2 data or unified TLB refills"),
    tlb(0x2e, "L2I_TLB_REFILL", "level 2 instruction TLB refills"),
    tlb(0x2f, "L2D_TLB", "level 2 data or unified TLB accesses"),
    tlb(0x30, "L2I_TLB", "level 2 instruction TLB accesses"),
    ev(0x31, "REMOTE_ACCESS", "accesses to another socket"),
    ev(0x32, "LL_CACHE", "last-level cache accesses"),
    ev(0x33, "LL_CACHE_MISS", "last-level cache misses"),
    tlb(0x34, "DTLB_WALK", "data TLB accesses that caused a translation table walk"),
    tlb(0x35, "ITLB_WALK", "instruction TLB accesses that caused a translation table walk"),
    ev(0x36, "LL_CACHE_RD", "last-level cache reads"),
    ev(0x37, "LL_CACHE_MISS_RD", "last-level cache read misses"),
    ev(0x38, "REMOTE_ACCESS_RD", "reads from another socket"),
    ev(0x39, "L1D_CACHE_LMISS_RD", "level 1 data cache long-latency read misses"),
    ev(0x3a, "OP_RETIRED", "micro-operations architecturally executed"),
    ev(0x3b, "OP_SPEC", "micro-operations speculatively executed"),
    ev(0x3c, "STALL", "cycles with no operation sent for execution"),
    ev(0x3d, "STALL_SLOT_BACKEND", "issue slots not used: backend"),
    ev(0x3e, "STALL_SLOT_FRONTEND", "issue slots not used: frontend"),
    ev(0x3f, "STALL_SLOT", "issue slots not used"),
];

/// Cortex-A76's IMPLEMENTATION DEFINED events that matter here (TRM 100798, section C2.3:
/// the read/write splits of the cache and TLB events). 0xD4 and 0xD5 are named by the project's
/// design notes as A76 TLB events but appear neither in the TRM r3p0 event table nor in
/// libpfm4's A76 table: they are kept by number, marked unverified, and counted only on silicon.
pub const CORTEX_A76: &[Event] = &[
    ev(0x40, "L1D_CACHE_RD", "level 1 data cache accesses, read"),
    ev(0x41, "L1D_CACHE_WR", "level 1 data cache accesses, write"),
    ev(0x42, "L1D_CACHE_REFILL_RD", "level 1 data cache refills, read"),
    ev(0x43, "L1D_CACHE_REFILL_WR", "level 1 data cache refills, write"),
    ev(0x48, "L1D_CACHE_INVAL", "level 1 data cache invalidations"),
    tlb(0x4c, "L1D_TLB_REFILL_RD", "level 1 data TLB refills, read"),
    tlb(0x4d, "L1D_TLB_REFILL_WR", "level 1 data TLB refills, write"),
    tlb(0x4e, "L1D_TLB_RD", "level 1 data TLB accesses, read"),
    tlb(0x4f, "L1D_TLB_WR", "level 1 data TLB accesses, write"),
    ev(0x50, "L2D_CACHE_RD", "level 2 data cache accesses, read"),
    ev(0x51, "L2D_CACHE_WR", "level 2 data cache accesses, write"),
    tlb(0x5c, "L2D_TLB_REFILL_RD", "level 2 TLB refills, read"),
    tlb(0x5d, "L2D_TLB_REFILL_WR", "level 2 TLB refills, write"),
    tlb(0x5e, "L2D_TLB_RD", "level 2 TLB accesses, read"),
    tlb(0x5f, "L2D_TLB_WR", "level 2 TLB accesses, write"),
    ev(0x66, "MEM_ACCESS_RD", "data memory accesses, read"),
    ev(0x67, "MEM_ACCESS_WR", "data memory accesses, write"),
    tlb(0xd4, "A76_IMPDEF_0xD4", "TLB event named in DESIGN.md; unverified against the A76 TRM"),
    tlb(0xd5, "A76_IMPDEF_0xD5", "TLB event named in DESIGN.md; unverified against the A76 TRM"),
];

/// The cores with an event table of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Core {
    /// QEMU's `max` CPU (MIDR implementer 0: "software use").
    QemuMax,
    /// Arm Cortex-A76 (the Raspberry Pi 5's core).
    CortexA76,
    /// Any other core: common events only.
    Other,
}

impl Core {
    /// The core named by a MIDR_EL1 value.
    pub const fn from_midr(midr: u64) -> Core {
        let implementer = (midr >> 24) & 0xff;
        let part = (midr >> 4) & 0xfff;
        match (implementer, part) {
            (0x00, 0x051) => Core::QemuMax,
            (0x41, 0xd0b) => Core::CortexA76,
            _ => Core::Other,
        }
    }

    /// Name for tables.
    pub const fn name(self) -> &'static str {
        match self {
            Core::QemuMax => "QEMU max",
            Core::CortexA76 => "Cortex-A76",
            Core::Other => "other",
        }
    }

    /// The core's own (IMPLEMENTATION DEFINED) events.
    pub const fn own_events(self) -> &'static [Event] {
        match self {
            Core::CortexA76 => CORTEX_A76,
            Core::QemuMax | Core::Other => &[],
        }
    }

    /// Every event of this core's tables: the common ones, then its own.
    pub fn events(self) -> impl Iterator<Item = &'static Event> {
        COMMON.iter().chain(self.own_events().iter())
    }

    /// The event called `name` (case-insensitive) or numbered `name` (`0x2d`, `45`): from this
    /// core's tables first, then from any core's (so an A76 event asked for on another core is
    /// found, and [`crate::support`] says it is not counted there); a number no table names is
    /// an unnamed event.
    pub fn lookup(self, name: &str) -> Option<Event> {
        let everywhere = || COMMON.iter().chain(CORTEX_A76.iter());
        if let Some(e) = self.events().chain(everywhere()).find(|e| e.name.eq_ignore_ascii_case(name)) {
            return Some(*e);
        }
        let n = parse_number(name)?;
        if let Some(e) = self.events().chain(everywhere()).find(|e| e.number == n) {
            return Some(*e);
        }
        Some(Event { number: n, name: "", about: "unnamed event", tlb: false })
    }
}

fn parse_number(s: &str) -> Option<u16> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u16::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_table_is_dense_and_named_once() {
        for (i, e) in COMMON.iter().enumerate() {
            assert_eq!(e.number as usize, i, "{}", e.name);
        }
        let mut names: Vec<&str> = Core::CortexA76.events().map(|e| e.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "names are unique");
    }

    #[test]
    fn the_a76_tlb_events_the_design_names_are_in_its_table() {
        for n in [0x05u16, 0x2d, 0x34, 0x35, 0xd4, 0xd5] {
            let e = Core::CortexA76.events().find(|e| e.number == n).expect("listed");
            assert!(e.tlb, "{}", e.name);
        }
        assert!(
            !Core::QemuMax.own_events().iter().any(|e| e.number == 0xd4),
            "IMPLEMENTATION DEFINED: only the A76 has it"
        );
    }

    #[test]
    fn lookup_by_name_or_number() {
        assert_eq!(Core::from_midr(0x414f_d0b1), Core::CortexA76);
        assert_eq!(Core::from_midr(0x000f_0510), Core::QemuMax);
        assert_eq!(Core::from_midr(0x410f_d034), Core::Other);
        assert_eq!(Core::QemuMax.lookup("inst_retired").unwrap().number, 0x08);
        assert_eq!(Core::QemuMax.lookup("0x2D").unwrap().name, "L2D_TLB_REFILL");
        assert_eq!(Core::QemuMax.lookup("17").unwrap().name, "CPU_CYCLES");
        assert_eq!(Core::CortexA76.lookup("l2d_tlb_rd").unwrap().number, 0x5e);
        assert_eq!(Core::Other.lookup("0x4004").unwrap().name, "");
        assert!(Core::Other.lookup("NO_SUCH_EVENT").is_none());
        assert_eq!(Core::Other.lookup("0x77").unwrap().name, "");
        assert_eq!(Core::QemuMax.lookup("L2D_TLB_RD").unwrap().number, 0x5e);
    }
}
