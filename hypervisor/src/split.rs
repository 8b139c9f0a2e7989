//! The eager split of dirty logging: every block of a range becomes 4 KiB pages, chunk by
//! chunk, with the page cache topped up before each chunk (as KVM's
//! `kvm_mmu_split_huge_pages`), through `lib/pgtable`'s split walker.
//!
//! Which walker splits is a run-time switch (`WALKER_MODE`): the baseline visits every level-3
//! entry, SKIP_LEVEL3 never visits them, and the summary mode also skips tables whose
//! "no blocks below" bit is set. `hyp.check-split` checks every page after each split.

use crate::counters::DIRTY;
use crate::mem::{Range, BLOCK_1G, BLOCK_2M, PAGE};
use crate::memslot::{ipa, map_err, pool, S2};
use abi::error::HypError;
use abi::hypercall::WalkerMode;
use core::sync::atomic::{AtomicBool, Ordering};
use pgtable::hw::HwTlb;
use pgtable::{CrossingBlocks, Perms};
use spin::Mutex;

/// How splits are walked and chunked (`WALKER_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkerOpts {
    /// Which split walker.
    pub mode: WalkerMode,
    /// Bytes per chunk (a multiple of 2 MiB): the cache is topped up before each.
    pub chunk: u64,
}

/// Default: SKIP_LEVEL3, one 1 GiB region at a time.
static WALKER: Mutex<WalkerOpts> = Mutex::new(WalkerOpts { mode: WalkerMode::SkipLevel3, chunk: BLOCK_1G });

/// The current walker options.
pub fn walker() -> WalkerOpts {
    *WALKER.lock()
}

/// WALKER_MODE: sets the walker (and the chunk, unless 0); returns the previous (mode, chunk).
pub fn walker_mode(mode: u64, chunk: u64) -> Result<(u64, u64), HypError> {
    let m = WalkerMode::try_from(mode).map_err(|_| HypError::InvalidParameter)?;
    if !chunk.is_multiple_of(BLOCK_2M) {
        return Err(HypError::Misaligned);
    }
    let mut w = WALKER.lock();
    let prev = (w.mode as u64, w.chunk);
    w.mode = m;
    if chunk != 0 {
        w.chunk = chunk;
    }
    Ok(prev)
}

/// Whether splits are checked page by page against the slot pool (`hyp.check-split`).
static CHECK_SPLIT: AtomicBool = AtomicBool::new(false);

/// Turns `hyp.check-split` on or off.
pub fn set_check_split(on: bool) {
    CHECK_SPLIT.store(on, Ordering::Relaxed);
}

/// What `hyp.check-split` compares the pages of a split against: the memslot's mapping.
#[derive(Debug, Clone, Copy)]
pub struct SlotMapping {
    /// The slot's first IPA.
    pub base: u64,
    /// Its backing unit (4 KiB, 2 MiB or 1 GiB).
    pub backing_size: u64,
    /// The guest's RAM: IPA = PA (no slot pool).
    pub identity: bool,
}

impl SlotMapping {
    /// The mapping of `slot`.
    pub fn of(slot: &crate::memslot::Slot) -> SlotMapping {
        SlotMapping { base: slot.base, backing_size: slot.backing_size(), identity: slot.guest_ram }
    }
    /// Permissions of a page made writable again.
    pub fn writable(&self) -> Perms {
        if self.identity {
            Perms::RWX
        } else {
            Perms::RW
        }
    }
}

/// Page-table pages a split of `len` bytes may need: one per 1 GiB block (its level-2 table)
/// plus one per 2 MiB (the level-3 tables).
pub fn pages_needed(len: u64) -> usize {
    (len.div_ceil(BLOCK_1G) + len.div_ceil(BLOCK_2M)) as usize
}

/// Splits every block of `r` to 4 KiB pages with the chosen walker, in `opts.chunk`-sized
/// aligned pieces (0: one piece); `read_only`: the pages of blocks inside `r` are built without
/// write access (`pgtable::SplitOpts::read_only`: the caller write-protects the rest after). The
/// cache keeps what is left over: the caller drains it when its whole operation is done.
pub fn split_range(s2: &mut S2, tlb: &mut HwTlb, r: Range, opts: WalkerOpts, read_only: bool) -> Result<(), HypError> {
    // The walker mode goes with each call: nothing of it stays on the table (a later split on
    // the fault path takes the defaults, whatever a benchmark chose here).
    let split_opts = pgtable::SplitOpts {
        skip_target_level: opts.mode != WalkerMode::Baseline,
        summary: opts.mode == WalkerMode::Summary,
        read_only,
        ..pgtable::SplitOpts::to(3)
    };
    let (t0, i0) = (now_ns(), pmu_insns());
    let before = s2.stats().walk;
    let mut a = r.start;
    let mut result = Ok(());
    while a < r.end {
        let next = a.checked_div(opts.chunk).map_or(r.end, |q| ((q + 1) * opts.chunk).min(r.end));
        DIRTY.cache_topups.fetch_add(1, Ordering::Relaxed);
        if !s2.frames_mut().top_up(pages_needed(next - a)) {
            result = Err(HypError::NoMemory);
            break;
        }
        if let Err(e) = s2.split_with(tlb, ipa(a), next - a, split_opts) {
            result = Err(map_err(e));
            break;
        }
        a = next;
    }
    let after = s2.stats().walk;
    DIRTY
        .summary_skips
        .fetch_add(after.skipped.iter().sum::<u64>() - before.skipped.iter().sum::<u64>(), Ordering::Relaxed);
    DIRTY.add_split_visits(&before, &after);
    if let (Some(i0), Some(i1)) = (i0, pmu_insns()) {
        if i0.idx == i1.idx {
            DIRTY.split_insns.fetch_add(i1.since(&i0), Ordering::Relaxed);
        }
    }
    DIRTY.split_ns.fetch_add(now_ns() - t0, Ordering::Relaxed);
    result
}

/// Write-protects `r`: clears write access and keeps the rest (the guest's RAM stays
/// executable), as KVM's `kvm_pgtable_stage2_wrprotect`; tables already without a writable
/// page below are skipped whole; blocks crossing the ends of `r` are split or protected whole
/// (`crossing`). Counts the walk's visits.
pub fn write_protect(s2: &mut S2, tlb: &mut HwTlb, r: Range, crossing: CrossingBlocks) -> Result<(), HypError> {
    let before = s2.stats().walk;
    let res = s2.write_protect_with(tlb, ipa(r.start), r.len(), crossing);
    DIRTY.add_protect_visits(&before, &s2.stats().walk);
    res.map_err(map_err)
}

/// `hyp.check-split` (when on): every page of `r` is now a read-only 4 KiB page mapping exactly
/// the frame the slot mapped before the split (the pool's, or the same address for guest RAM). A mismatch is a hypervisor bug: panic
/// (the run ends with the report).
pub fn check_split(s2: &S2, r: Range, m: SlotMapping) {
    if !CHECK_SPLIT.load(Ordering::Relaxed) {
        return;
    }
    let pool = pool();
    let mut a = r.start;
    while a < r.end {
        let t = s2.translate(ipa(a)).unwrap_or_else(|| panic!("check-split: IPA {a:#x} unmapped after a split"));
        let want = match (m.identity, pool) {
            (true, _) => a,
            (false, Some(p)) => p.pa_of(m.backing_size, m.base, a),
            (false, None) => return,
        };
        assert!(
            t.level == 3 && t.phys.as_u64() == want && !t.attrs.perms.contains(Perms::WRITE),
            "check-split: IPA {a:#x} -> {:#x} level {} {:?}, want {want:#x} level 3 read-only",
            t.phys.as_u64(),
            t.level,
            t.attrs.perms
        );
        a += PAGE;
    }
}

fn now_ns() -> u64 {
    rt::counter_ns()
}

/// The guest's counter of instructions retired, wherever its PMU driver put it (`None` when
/// it counts none: the split's instruction count then stays 0, as without `-icount`).
fn pmu_insns() -> Option<pmu::RawCount> {
    pmu::observe(&pmu::hw::SysRegs, pmu::events::INST_RETIRED)
}
