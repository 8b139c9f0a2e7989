//! The hypervisor's own counters: guest exits by kind, and the dirty-logging counters that
//! `COUNTER_READ` returns and `COUNTERS_REPORT` prints. Page-table statistics come from stage
//! 2's own `Stats`, TLB maintenance from `HwTlb`'s counters (both rebased on `COUNTERS_RESET`).

use crate::mmu::STAGE2;
use abi::error::HypError;
use abi::hypercall::Counter;
use core::sync::atomic::{AtomicU64, Ordering};
use pgtable::hw::HwTlb;
use pgtable::walker::WalkStats;
use pgtable::TlbCounters;
use spin::Mutex;

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
    /// Stray guest accesses turned into a synchronous external abort in the guest.
    InjectedAbort,
}

const NAMES: [&str; 9] =
    ["hvc", "smc", "psci", "hypercall", "data_abort", "insn_abort", "sysreg", "other", "injected_abort"];

static EXITS: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];

/// Counts one exit.
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

/// Zeroes the exit counters.
pub fn reset() {
    for c in &EXITS {
        c.store(0, Ordering::Relaxed);
    }
}

/// Dirty logging's counters (memslots, splits, write faults).
pub struct DirtyLogCounters {
    /// Split-walker visits by level.
    pub split_visits: [AtomicU64; 4],
    /// Write-protect walk visits by level.
    pub protect_visits: [AtomicU64; 4],
    /// Stage-2 write faults taken on memslot pages.
    pub faults: AtomicU64,
    /// Time in eager splits (generic timer).
    pub split_ns: AtomicU64,
    /// Instructions in eager splits (the guest's INST_RETIRED counter, when it programmed one).
    pub split_insns: AtomicU64,
    /// Page-cache top-ups (one per split chunk).
    pub cache_topups: AtomicU64,
    /// Tables the summary walker did not descend.
    pub summary_skips: AtomicU64,
}

impl DirtyLogCounters {
    const fn new() -> Self {
        Self {
            split_visits: [const { AtomicU64::new(0) }; 4],
            protect_visits: [const { AtomicU64::new(0) }; 4],
            faults: AtomicU64::new(0),
            split_ns: AtomicU64::new(0),
            split_insns: AtomicU64::new(0),
            cache_topups: AtomicU64::new(0),
            summary_skips: AtomicU64::new(0),
        }
    }

    fn add(dst: &[AtomicU64; 4], before: &WalkStats, after: &WalkStats) {
        for (l, d) in dst.iter().enumerate() {
            d.fetch_add(after.at_level(l) - before.at_level(l), Ordering::Relaxed);
        }
    }
    /// Adds a split walk's visits (stage 2's walk statistics before and after).
    pub fn add_split_visits(&self, before: &WalkStats, after: &WalkStats) {
        Self::add(&self.split_visits, before, after);
    }
    /// Adds a write-protect walk's visits.
    pub fn add_protect_visits(&self, before: &WalkStats, after: &WalkStats) {
        Self::add(&self.protect_visits, before, after);
    }
}

/// The dirty-logging counters.
pub static DIRTY: DirtyLogCounters = DirtyLogCounters::new();

/// `HwTlb`'s counters at the last `COUNTERS_RESET`.
static TLB_BASE: Mutex<Option<TlbCounters>> = Mutex::new(None);

/// COUNTER_READ.
pub fn counter(id: u64) -> Result<u64, HypError> {
    let c = Counter::from_id(id).ok_or(HypError::InvalidParameter)?;
    let tlb = {
        let base = TLB_BASE.lock().unwrap_or_default();
        HwTlb::counters().since(&base)
    };
    let stats = STAGE2.lock().as_ref().map(|s| *s.stats()).unwrap_or_default();
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let d = &DIRTY;
    Ok(match c {
        Counter::SplitVisitsL0 => ld(&d.split_visits[0]),
        Counter::SplitVisitsL1 => ld(&d.split_visits[1]),
        Counter::SplitVisitsL2 => ld(&d.split_visits[2]),
        Counter::SplitVisitsL3 => ld(&d.split_visits[3]),
        Counter::ProtectVisitsL0 => ld(&d.protect_visits[0]),
        Counter::ProtectVisitsL1 => ld(&d.protect_visits[1]),
        Counter::ProtectVisitsL2 => ld(&d.protect_visits[2]),
        Counter::ProtectVisitsL3 => ld(&d.protect_visits[3]),
        Counter::Tlbi => tlb.tlbi_total(),
        Counter::Dsb => tlb.dsb_total(),
        Counter::Isb => tlb.isb,
        Counter::TablePages => stats.table_pages,
        Counter::TablesAllocated => stats.tables_allocated,
        Counter::BlocksSplit => stats.splits,
        Counter::DescWrites => stats.desc_writes,
        Counter::DirtyFaults => ld(&d.faults),
        Counter::SplitNs => ld(&d.split_ns),
        Counter::SplitInsns => ld(&d.split_insns),
        Counter::CacheTopups => ld(&d.cache_topups),
        Counter::SummarySkips => ld(&d.summary_skips),
        Counter::FramePoolPages => crate::mem::frame_pool_pages(),
    })
}

/// COUNTERS_RESET's share for dirty logging: zero its counters, rebase the TLB counters,
/// reset stage 2's statistics (its table-page gauge stays).
pub fn reset_dirty_log() {
    let d = &DIRTY;
    for a in d.split_visits.iter().chain(d.protect_visits.iter()) {
        a.store(0, Ordering::Relaxed);
    }
    for a in [&d.faults, &d.split_ns, &d.split_insns, &d.cache_topups, &d.summary_skips] {
        a.store(0, Ordering::Relaxed);
    }
    *TLB_BASE.lock() = Some(HwTlb::counters());
    if let Some(s2) = STAGE2.lock().as_mut() {
        s2.reset_stats();
    }
}

/// COUNTERS_REPORT's share for dirty logging: one `hyp_memslot` record.
pub fn report_dirty_log() {
    let mut r = abi::report::Record::new("hyp_memslot");
    for c in Counter::ALL {
        r.u64(c.name(), counter(c as u64).unwrap_or(0));
    }
    rt::println!("{r}");
}
