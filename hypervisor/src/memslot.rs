//! Memslots and dirty logging on the guest's stage 2 (issue 4).
//!
//! A memslot is a guest IPA range outside guest RAM, backed by the hypervisor's *slot pool*
//! (`hyp.slotpool=SIZE`, reserved at boot and removed from guest RAM) mapped repeatedly: slot
//! byte `o` maps pool byte `o % pool size`, so a 64 GiB slot fits in a QEMU with 4 GiB of RAM.
//! The page-table pages are real. Backing: 4 KiB pages, 2 MiB blocks or 1 GiB blocks.
//!
//! Dirty logging (`lib/abi`'s hypercall module documents the calls and their errors):
//! * scenario 1, enable: write-protect the slot, then split every block eagerly, chunk by
//!   chunk, topping the page cache up before each chunk;
//! * scenario 2, manual-protect with initially-set: enable sets every dirty bit and changes no
//!   mapping; each clear write-protects and splits only the cleared pages, 64 pages at a time.
//!
//! A write to a protected page faults to EL2 ([`handle_write_fault`]): the page's dirty bit is
//! set, the page made writable with a local TLBI (other CPUs may keep the read-only entry and
//! take a spurious fault, handled the same way), and the guest resumes.
//!
//! Lock order: [`STATE`] before [`crate::mmu::STAGE2`].

use crate::mem::{Range, FRAMES, PAGE};
use crate::mmu::{HypFrames, STAGE2};
use abi::error::HypError;
use abi::hypercall::{self as hc, Counter, WalkerMode};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use pgtable::hw::HwTlb;
use pgtable::walker::{WalkFlags, WalkStats};
use pgtable::{
    Attributes, Barrier, Constraints, IntermPhysAddr, PageTable, Perms, PhysAddr, Shareability, TlbCounters,
    TlbFeatures, TlbMaintenance, Tlbi, TlbiOp,
};
use spin::{Mutex, Once};

const BLOCK_2M: u64 = 2 << 20;
const BLOCK_1G: u64 = 1 << 30;
/// The guest's VMID (`mmu::setup`).
const VMID: u16 = 1;
/// Default eager-split chunk: one 1 GiB region at a time.
const DEFAULT_CHUNK: u64 = BLOCK_1G;

/// The physical memory memslots map, and the hypervisor's own region (IPA = PA), which no
/// memslot and no guest buffer may touch.
struct Pool {
    base: u64,
    size: u64,
    hyp: Vec<Range>,
}

impl Pool {
    /// Whether `r` touches the hypervisor's memory (its regions or the slot pool).
    fn hypervisor_owns(&self, r: &Range) -> bool {
        self.hyp.iter().any(|h| !h.is_empty() && h.overlaps(r))
            || (self.size != 0 && r.overlaps(&Range::new(self.base, self.base + self.size)))
    }
}

static POOL: Once<Pool> = Once::new();

/// Records the slot pool (`size` 0: none) and the hypervisor's region. Called once at boot.
pub fn init(pool_base: u64, pool_size: u64, hyp: Vec<Range>) {
    POOL.call_once(|| Pool { base: pool_base, size: pool_size, hyp });
}

/// Frames from the hypervisor's frame pool (zeroed, identity mapped), freed on drop: the dirty
/// bitmap of a 64 GiB slot is 2 MiB, too large for the hypervisor's heap.
struct Bitmap {
    pa: u64,
    frames: usize,
    words: usize,
}

impl Bitmap {
    fn new(bits: u64) -> Option<Bitmap> {
        let words = bits.div_ceil(64) as usize;
        let frames = (words * 8).div_ceil(PAGE as usize).max(1);
        let frame = FRAMES.lock().alloc(frames)?;
        let pa = frame as u64 * PAGE;
        // SAFETY: the frames were just taken from the hypervisor's pool, which is mapped RW at
        // EL2 (identity) and used by nothing else.
        unsafe { core::ptr::write_bytes(pa as *mut u8, 0, frames * PAGE as usize) };
        Some(Bitmap { pa, frames, words })
    }
    fn words(&mut self) -> &mut [u64] {
        // SAFETY: `words` u64s inside frames this bitmap owns exclusively (see `new`).
        unsafe { core::slice::from_raw_parts_mut(self.pa as *mut u64, self.words) }
    }
}

impl Drop for Bitmap {
    fn drop(&mut self) {
        FRAMES.lock().dealloc((self.pa / PAGE) as usize, self.frames);
    }
}

struct Log {
    /// Manual-protect with initially-set (scenario 2): clears split eagerly.
    manual: bool,
    eager: bool,
    dirty: Bitmap,
}

struct Slot {
    id: u64,
    base: u64,
    size: u64,
    backing: u64,
    log: Option<Log>,
}

impl Slot {
    fn pages(&self) -> u64 {
        self.size / PAGE
    }
    fn range(&self) -> Range {
        Range::new(self.base, self.base + self.size)
    }
}

struct State {
    slots: Vec<Slot>,
    next_id: u64,
    mode: WalkerMode,
    chunk: u64,
}

static STATE: Mutex<State> =
    Mutex::new(State { slots: Vec::new(), next_id: 1, mode: WalkerMode::SkipLevel3, chunk: DEFAULT_CHUNK });

/// Counters kept here (the others come from stage 2's own statistics and `HwTlb`).
static SPLIT_VISITS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static WP_VISITS: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];
static DIRTY_FAULTS: AtomicU64 = AtomicU64::new(0);
static SPLIT_NS: AtomicU64 = AtomicU64::new(0);
static SPLIT_INSNS: AtomicU64 = AtomicU64::new(0);
static CACHE_TOPUPS: AtomicU64 = AtomicU64::new(0);
static SUMMARY_SKIPS: AtomicU64 = AtomicU64::new(0);
static TLB_BASE: Mutex<Option<TlbCounters>> = Mutex::new(None);

/// Whether stage-2 splits are checked leaf by leaf against the pool formula (`hyp.check-split`).
static CHECK_SPLIT: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

pub fn set_check_split(on: bool) {
    CHECK_SPLIT.store(on, Ordering::Relaxed);
}

fn add_visits(dst: &[AtomicU64; 4], before: &WalkStats, after: &WalkStats) {
    for (l, d) in dst.iter().enumerate() {
        d.fetch_add(after.at_level(l) - before.at_level(l), Ordering::Relaxed);
    }
}

type S2 = PageTable<HypFrames>;

fn ipa(a: u64) -> IntermPhysAddr {
    IntermPhysAddr::new(a)
}

fn map_err(e: pgtable::Error) -> HypError {
    match e {
        pgtable::Error::OutOfMemory => HypError::NoMemory,
        pgtable::Error::Misaligned => HypError::Misaligned,
        pgtable::Error::OutOfRange => HypError::OutOfRange,
        _ => HypError::InvalidParameter,
    }
}

/// TLB maintenance on this CPU only: the inner-shareable forms become local ones. For a
/// permission *relaxation* (read-only -> writable): another CPU that still holds the read-only
/// entry takes a spurious permission fault, which [`handle_write_fault`] absorbs.
struct LocalTlb(HwTlb);

impl TlbMaintenance for LocalTlb {
    fn tlbi(&mut self, op: Tlbi) {
        self.0.tlbi(Tlbi { sh: Shareability::Local, ..op })
    }
    fn dsb(&mut self, b: Barrier) {
        self.0.dsb(match b {
            Barrier::Ish => Barrier::Nsh,
            Barrier::IshSt => Barrier::NshSt,
            other => other,
        })
    }
    fn isb(&mut self) {
        self.0.isb()
    }
    fn features(&self) -> TlbFeatures {
        self.0.features()
    }
}

/// `ipa` as a memslot of `backing` maps it: the pool's frame.
fn pool_pa(pool: &Pool, backing_size: u64, slot_base: u64, ipa: u64) -> u64 {
    let usable = pool.size - pool.size % backing_size;
    pool.base + (ipa - slot_base) % usable
}

/// Checks a guest buffer `[addr, addr + len)` the hypervisor reads or writes.
fn guest_buffer(addr: u64, len: u64) -> Result<(), HypError> {
    if !addr.is_multiple_of(8) {
        return Err(HypError::Misaligned);
    }
    let end = addr.checked_add(len).ok_or(HypError::OutOfRange)?;
    let r = Range::new(addr, end);
    if let Some(p) = POOL.get() {
        if p.hypervisor_owns(&r) {
            return Err(HypError::Denied);
        }
    }
    if !crate::guest::is_guest_ram(addr, len) {
        return Err(HypError::OutOfRange);
    }
    Ok(())
}

fn slot_mut(st: &mut State, id: u64) -> Result<&mut Slot, HypError> {
    st.slots.iter_mut().find(|s| s.id == id).ok_or(HypError::NotFound)
}

/// MEMSLOT_CREATE.
pub fn create(base: u64, size: u64, flags: u64) -> Result<u64, HypError> {
    if flags & !hc::MEMSLOT_BACKING_MASK != 0 || size == 0 {
        return Err(HypError::InvalidParameter);
    }
    let backing = flags & hc::MEMSLOT_BACKING_MASK;
    let bsize = hc::backing_size(backing).ok_or(HypError::InvalidParameter)?;
    if !base.is_multiple_of(bsize) || !size.is_multiple_of(bsize) {
        return Err(HypError::Misaligned);
    }
    let end = base.checked_add(size).ok_or(HypError::OutOfRange)?;
    if end > 1 << pgtable::regime::IPA_BITS {
        return Err(HypError::OutOfRange);
    }
    let r = Range::new(base, end);
    let pool = POOL.get().ok_or(HypError::NoMemory)?;
    if pool.hypervisor_owns(&r) {
        return Err(HypError::Denied);
    }
    if crate::guest::ram().iter().any(|g| g.overlaps(&r)) {
        return Err(HypError::Overlap);
    }
    let mut st = STATE.lock();
    if st.slots.iter().any(|s| s.range().overlaps(&r)) {
        return Err(HypError::Overlap);
    }
    if st.slots.len() >= hc::MAX_MEMSLOTS || pool.size < bsize {
        return Err(HypError::NoMemory);
    }
    let mut guard = STAGE2.lock();
    let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
    // Anything already mapped there (a device) is an overlap.
    let mut busy = false;
    s2.walk(ipa(base), size, WalkFlags::LEAF, |e| {
        busy |= e.desc.is_mapping(e.level);
        Ok(())
    })
    .map_err(map_err)?;
    if busy {
        return Err(HypError::Overlap);
    }
    let mut tlb = HwTlb::detect();
    let attrs = Attributes::normal(Perms::RW);
    let (constraints, piece_cap) = match backing {
        hc::MEMSLOT_BACKING_4K => (Constraints::PAGES_ONLY, u64::MAX),
        // Pieces below 1 GiB can never form a 1 GiB block.
        hc::MEMSLOT_BACKING_2M => (Constraints { no_blocks: false, no_contiguous: true }, 512 << 20),
        _ => (Constraints { no_blocks: false, no_contiguous: true }, u64::MAX),
    };
    let usable = pool.size - pool.size % bsize;
    let mut o = 0;
    while o < size {
        let in_pool = o % usable;
        let len = (usable - in_pool).min(size - o).min(piece_cap);
        if let Err(e) = s2.map(&mut tlb, ipa(base + o), len, PhysAddr::new(pool.base + in_pool), attrs, constraints) {
            // Leave nothing behind.
            let _ = unmap(s2, &mut tlb, base, o + len);
            return Err(map_err(e));
        }
        o += len;
    }
    let id = st.next_id;
    st.next_id += 1;
    st.slots.push(Slot { id, base, size, backing, log: None });
    Ok(id)
}

/// MEMSLOT_DELETE.
pub fn delete(id: u64) -> Result<(), HypError> {
    let mut st = STATE.lock();
    let slot = slot_mut(&mut st, id)?;
    if slot.log.is_some() {
        return Err(HypError::Busy);
    }
    let (base, size) = (slot.base, slot.size);
    let mut guard = STAGE2.lock();
    let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
    unmap(s2, &mut HwTlb::detect(), base, size)?;
    st.slots.retain(|s| s.id != id);
    Ok(())
}

/// Unmaps `[base, base + size)` 1 GiB at a time: one `unmap` call gathers every table it frees
/// (and every removed table entry) in the hypervisor's heap until its flush, so a single call
/// over a 64 GiB slot of 4 KiB pages would need megabytes of it.
fn unmap(s2: &mut S2, tlb: &mut HwTlb, base: u64, size: u64) -> Result<(), HypError> {
    let mut a = base;
    while a < base + size {
        let next = ((a / BLOCK_1G + 1) * BLOCK_1G).min(base + size);
        s2.unmap(tlb, ipa(a), next - a).map_err(map_err)?;
        a = next;
    }
    Ok(())
}

/// Write-protects `[start, end)`, counting the walk's visits.
fn write_protect(s2: &mut S2, tlb: &mut HwTlb, start: u64, end: u64) -> Result<(), HypError> {
    let before = s2.stats().walk;
    let r = s2.protect(tlb, ipa(start), end - start, Perms::RO);
    add_visits(&WP_VISITS, &before, &s2.stats().walk);
    r.map_err(map_err)
}

fn now_ns() -> u64 {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    (CNTPCT_EL0.get() as u128 * 1_000_000_000 / CNTFRQ_EL0.get().max(1) as u128) as u64
}

/// PMU event counter 0 (instructions retired when the guest's benchmark programmed it).
fn pmu_insns() -> u64 {
    let v: u64;
    // SAFETY: reads PMEVCNTR0_EL0 (not in aarch64-cpu); EL2 may always read the PMU counters
    // (MDCR_EL2 only traps lower ELs). No side effects.
    unsafe { core::arch::asm!("mrs {}, pmevcntr0_el0", out(reg) v, options(nomem, nostack, preserves_flags)) };
    v
}

/// Page-table pages a split of `len` bytes may need: one per 1 GiB block (its level-2 table)
/// plus one per 2 MiB (the level-3 tables).
fn split_pages(len: u64) -> usize {
    (len.div_ceil(BLOCK_1G) + len.div_ceil(BLOCK_2M)) as usize
}

/// Splits every block of `[start, end)` to 4 KiB pages with the chosen walker, in `chunk`-sized
/// aligned pieces (0: one piece), topping the page cache up before each piece. The cache keeps
/// what is left over: the caller drains it when its whole operation is done.
/// `check` = (slot base, backing size) for `hyp.check-split`. [`WalkerMode::Summary`] turns on
/// `lib/pgtable`'s per-table summary bit: tables known to hold no block are not descended.
fn split_range(
    s2: &mut S2,
    tlb: &mut HwTlb,
    (start, end): (u64, u64),
    (mode, chunk): (WalkerMode, u64),
    check: Option<(u64, u64)>,
) -> Result<(), HypError> {
    let policy = s2.policy_mut();
    policy.split_skip_target_level = mode != WalkerMode::Baseline;
    policy.split_summary = mode == WalkerMode::Summary;
    let (t0, i0) = (now_ns(), pmu_insns());
    let before = s2.stats().walk;
    let mut a = start;
    let mut result = Ok(());
    while a < end {
        let next = a.checked_div(chunk).map_or(end, |q| ((q + 1) * chunk).min(end));
        CACHE_TOPUPS.fetch_add(1, Ordering::Relaxed);
        if !s2.frames_mut().top_up(split_pages(next - a)) {
            result = Err(HypError::NoMemory);
            break;
        }
        if let Err(e) = s2.split(tlb, ipa(a), next - a, 3, false) {
            result = Err(map_err(e));
            break;
        }
        a = next;
    }
    let after = s2.stats().walk;
    SUMMARY_SKIPS.fetch_add(after.skipped.iter().sum::<u64>() - before.skipped.iter().sum::<u64>(), Ordering::Relaxed);
    add_visits(&SPLIT_VISITS, &before, &s2.stats().walk);
    SPLIT_INSNS.fetch_add(pmu_insns().wrapping_sub(i0), Ordering::Relaxed);
    SPLIT_NS.fetch_add(now_ns() - t0, Ordering::Relaxed);
    result?;
    if let Some((slot_base, bsize)) = check.filter(|_| CHECK_SPLIT.load(Ordering::Relaxed)) {
        check_split(s2, start, end, slot_base, bsize);
    }
    Ok(())
}

/// `hyp.check-split`: every page of `[start, end)` is now a read-only 4 KiB page mapping
/// exactly the pool frame the memslot (at `slot_base`, backing unit `bsize`) mapped before the
/// split. A mismatch is a hypervisor bug: panic (the run ends with the report).
fn check_split(s2: &S2, start: u64, end: u64, slot_base: u64, bsize: u64) {
    let Some(pool) = POOL.get() else { return };
    let mut a = start;
    while a < end {
        let t = s2.translate(ipa(a)).unwrap_or_else(|| panic!("check-split: IPA {a:#x} unmapped after a split"));
        let want = pool_pa(pool, bsize, slot_base, a);
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

/// DIRTY_LOG_ENABLE.
pub fn enable(id: u64, flags: u64) -> Result<(), HypError> {
    if flags & !(hc::DIRTY_LOG_MANUAL_PROTECT | hc::DIRTY_LOG_EAGER_SPLIT) != 0 {
        return Err(HypError::InvalidParameter);
    }
    let mut st = STATE.lock();
    let (mode, chunk) = (st.mode, st.chunk);
    let slot = slot_mut(&mut st, id)?;
    if slot.log.is_some() {
        return Err(HypError::Busy);
    }
    let manual = flags & hc::DIRTY_LOG_MANUAL_PROTECT != 0;
    let eager = flags & hc::DIRTY_LOG_EAGER_SPLIT != 0;
    let mut dirty = Bitmap::new(slot.pages()).ok_or(HypError::NoMemory)?;
    let (start, end) = (slot.base, slot.base + slot.size);
    let bsize = hc::backing_size(slot.backing).unwrap_or(PAGE);
    if manual {
        // Initially-set: every page counts as dirty until the first clear protects it.
        let pages = slot.pages();
        for (w, word) in dirty.words().iter_mut().enumerate() {
            let left = pages - w as u64 * 64;
            *word = if left >= 64 { u64::MAX } else { (1u64 << left) - 1 };
        }
    } else {
        let mut guard = STAGE2.lock();
        let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
        let mut tlb = HwTlb::detect();
        write_protect(s2, &mut tlb, start, end)?;
        if eager {
            let r = split_range(s2, &mut tlb, (start, end), (mode, chunk), Some((start, bsize)));
            s2.frames_mut().drain();
            r?;
        }
    }
    slot.log = Some(Log { manual, eager, dirty });
    Ok(())
}

/// DIRTY_LOG_DISABLE: stops tracking; pages stay as they are (split, possibly read-only) and
/// become writable again on their next write fault, as in KVM.
pub fn disable(id: u64) -> Result<(), HypError> {
    let mut st = STATE.lock();
    let slot = slot_mut(&mut st, id)?;
    if slot.log.take().is_none() {
        return Err(HypError::InvalidParameter);
    }
    Ok(())
}

/// Clean + invalidate `[start, start + len)` to the point of coherency: the guest may access
/// its buffers with its MMU (and so its caches) off.
fn sync_guest_buffer(start: u64, len: u64) {
    rt::cache::clean_invalidate_to_poc(start, len);
}

/// DIRTY_LOG_GET: copies the bitmap (bit `i` = page `i`, 64-bit little-endian words).
pub fn get(id: u64, buf: u64, len: u64) -> Result<(), HypError> {
    let mut st = STATE.lock();
    let slot = slot_mut(&mut st, id)?;
    let pages = slot.pages();
    let log = slot.log.as_mut().ok_or(HypError::InvalidParameter)?;
    guest_buffer(buf, len)?;
    let need = pages.div_ceil(64) * 8;
    if len < need {
        return Err(HypError::InvalidParameter);
    }
    let words = log.dirty.words();
    // SAFETY: guest_buffer checked that [buf, buf + len) is guest RAM (mapped RW at EL2, never
    // the hypervisor's), 8-byte aligned, and `need <= len` bytes are written.
    unsafe { core::ptr::copy_nonoverlapping(words.as_ptr(), buf as *mut u64, words.len()) };
    sync_guest_buffer(buf, need);
    Ok(())
}

/// DIRTY_LOG_CLEAR.
pub fn clear(id: u64, mask: u64, arg: u64) -> Result<(), HypError> {
    let (first, count) = (arg & 0xffff_ffff, arg >> 32);
    let mut st = STATE.lock();
    let (mode, chunk) = (st.mode, st.chunk);
    let slot = slot_mut(&mut st, id)?;
    let (base, pages) = (slot.base, slot.pages());
    let bsize = hc::backing_size(slot.backing).unwrap_or(PAGE);
    let log = slot.log.as_mut().ok_or(HypError::InvalidParameter)?;
    if count == 0 {
        return Err(HypError::InvalidParameter);
    }
    if first % 64 != 0 {
        return Err(HypError::Misaligned);
    }
    if first + count > pages {
        return Err(HypError::OutOfRange);
    }
    if count % 64 != 0 && first + count != pages {
        return Err(HypError::Misaligned);
    }
    let mask_bytes = count.div_ceil(64) * 8;
    guest_buffer(mask, mask_bytes)?;
    sync_guest_buffer(mask, mask_bytes);
    let mut guard = STAGE2.lock();
    let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
    let mut tlb = HwTlb::detect();
    let r = clear_words(s2, &mut tlb, log, (base, bsize), (first, count), mask, (mode, chunk));
    s2.frames_mut().drain();
    r
}

/// The loop of [`clear`], over the mask's words.
fn clear_words(
    s2: &mut S2,
    tlb: &mut HwTlb,
    log: &mut Log,
    (base, bsize): (u64, u64),
    (first, count): (u64, u64),
    mask: u64,
    (mode, chunk): (WalkerMode, u64),
) -> Result<(), HypError> {
    let words = log.dirty.words();
    for w in 0..count.div_ceil(64) {
        // SAFETY: guest_buffer checked the whole mask lies in guest RAM, mapped at EL2; the
        // guest may change it concurrently, which only changes what is cleared.
        let mut m = unsafe { core::ptr::read_volatile((mask as *const u64).add(w as usize)) };
        let left = count - w * 64;
        if left < 64 {
            m &= (1u64 << left) - 1;
        }
        if m == 0 {
            continue;
        }
        let word = (first / 64 + w) as usize;
        words[word] &= !m;
        // As KVM: protect (and split) from the first to the last cleared page of the word. Split
        // first: `protect` would otherwise split the blocks at the range ends itself, one level
        // at a time, instead of the split walker (KVM's write-protect walk leaves blocks whole).
        let lo = base + (first + w * 64 + m.trailing_zeros() as u64) * PAGE;
        let hi = base + (first + w * 64 + 64 - m.leading_zeros() as u64) * PAGE;
        // As KVM: only with initially-set do clears split (otherwise enable already did).
        if log.manual && log.eager {
            split_range(s2, tlb, (lo, hi), (mode, chunk), None)?;
        }
        write_protect(s2, tlb, lo, hi)?;
        if log.manual && log.eager && CHECK_SPLIT.load(Ordering::Relaxed) {
            check_split(s2, lo, hi, base, bsize);
        }
    }
    Ok(())
}

/// WALKER_MODE.
pub fn walker_mode(mode: u64, chunk: u64) -> Result<(u64, u64), HypError> {
    let m = WalkerMode::try_from(mode).map_err(|_| HypError::InvalidParameter)?;
    if !chunk.is_multiple_of(BLOCK_2M) {
        return Err(HypError::Misaligned);
    }
    let mut st = STATE.lock();
    let prev = (st.mode as u64, st.chunk);
    st.mode = m;
    if chunk != 0 {
        st.chunk = chunk;
    }
    Ok(prev)
}

/// A guest write faulted on a stage-2 permission fault at `ipa`. Returns whether it was a write
/// to a protected memslot page (logging, or left protected by a disabled log), now handled (the
/// guest retries the write); `false` leaves it to the caller to report.
pub fn handle_write_fault(fault_ipa: u64) -> bool {
    let mut st = STATE.lock();
    let Some(slot) = st.slots.iter_mut().find(|s| s.range().contains(fault_ipa, 1)) else {
        return false;
    };
    let base = slot.base;
    // A slot whose log was disabled keeps its read-only pages until they are written: make them
    // writable then, without marking anything dirty (as KVM).
    let log = slot.log.as_mut();
    let page_ipa = fault_ipa & !(PAGE - 1);
    let page = (page_ipa - base) / PAGE;
    let mut guard = STAGE2.lock();
    let Some(s2) = guard.as_mut() else {
        return false;
    };
    let Some(t) = s2.translate(ipa(page_ipa)) else {
        return false;
    };
    DIRTY_FAULTS.fetch_add(1, Ordering::Relaxed);
    let mut local = LocalTlb(HwTlb::detect());
    if t.attrs.perms.contains(Perms::WRITE) {
        // Spurious: another CPU made the page writable; drop this CPU's read-only entry.
        local.tlbi(Tlbi {
            op: TlbiOp::Ipas2e1 { vmid: VMID, ipa: ipa(page_ipa) },
            leaf_only: true,
            sh: Shareability::Local,
        });
        local.dsb(Barrier::Nsh);
        local.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: Some(VMID) }, leaf_only: false, sh: Shareability::Local });
        local.dsb(Barrier::Nsh);
        local.isb();
    } else {
        if t.level < 3 {
            // A block still write-protected (logging without eager split): split it (break-
            // before-make, broadcast: every CPU may hold the block).
            let mut tlb = HwTlb::detect();
            if s2.frames_mut().top_up(split_pages(t.size)) {
                let _ = s2.split(&mut tlb, ipa(page_ipa), PAGE, 3, false);
            }
            s2.frames_mut().drain();
        }
        if s2.protect(&mut local, ipa(page_ipa), PAGE, Perms::RW).is_err() {
            return false;
        }
        local.isb();
    }
    if let Some(log) = log {
        log.dirty.words()[(page / 64) as usize] |= 1 << (page % 64);
    }
    true
}

/// A stage-2 translation fault at `fault_ipa`: inside a memslot, the entry may have been in the
/// middle of a break-before-make (a split by another CPU, which holds the stage-2 lock until
/// the new table is installed). Returns true when the IPA translates now (the guest retries);
/// false leaves the fault to be reported.
pub fn handle_translation_fault(fault_ipa: u64) -> bool {
    let st = STATE.lock();
    if !st.slots.iter().any(|s| s.range().contains(fault_ipa, 1)) {
        return false;
    }
    let guard = STAGE2.lock();
    guard.as_ref().is_some_and(|s2| s2.translate(ipa(fault_ipa & !(PAGE - 1))).is_some())
}

/// COUNTER_READ.
pub fn counter(id: u64) -> Result<u64, HypError> {
    let c = Counter::from_id(id).ok_or(HypError::InvalidParameter)?;
    let tlb = {
        let base = TLB_BASE.lock().unwrap_or_default();
        HwTlb::counters().since(&base)
    };
    let stats = STAGE2.lock().as_ref().map(|s| *s.stats()).unwrap_or_default();
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Ok(match c {
        Counter::SplitVisitsL0 => ld(&SPLIT_VISITS[0]),
        Counter::SplitVisitsL1 => ld(&SPLIT_VISITS[1]),
        Counter::SplitVisitsL2 => ld(&SPLIT_VISITS[2]),
        Counter::SplitVisitsL3 => ld(&SPLIT_VISITS[3]),
        Counter::ProtectVisitsL0 => ld(&WP_VISITS[0]),
        Counter::ProtectVisitsL1 => ld(&WP_VISITS[1]),
        Counter::ProtectVisitsL2 => ld(&WP_VISITS[2]),
        Counter::ProtectVisitsL3 => ld(&WP_VISITS[3]),
        Counter::Tlbi => tlb.tlbi_total(),
        Counter::Dsb => tlb.dsb_total(),
        Counter::Isb => tlb.isb,
        Counter::TablePages => stats.table_pages,
        Counter::TablesAllocated => stats.tables_allocated,
        Counter::BlocksSplit => stats.splits,
        Counter::DescWrites => stats.desc_writes,
        Counter::DirtyFaults => ld(&DIRTY_FAULTS),
        Counter::SplitNs => ld(&SPLIT_NS),
        Counter::SplitInsns => ld(&SPLIT_INSNS),
        Counter::CacheTopups => ld(&CACHE_TOPUPS),
        Counter::SummarySkips => ld(&SUMMARY_SKIPS),
    })
}

/// COUNTERS_RESET's share: zero the memslot counters, rebase the TLB counters, reset stage 2's
/// statistics (its table-page gauge stays).
pub fn reset_counters() {
    for a in SPLIT_VISITS.iter().chain(WP_VISITS.iter()) {
        a.store(0, Ordering::Relaxed);
    }
    for a in [&DIRTY_FAULTS, &SPLIT_NS, &SPLIT_INSNS, &CACHE_TOPUPS, &SUMMARY_SKIPS] {
        a.store(0, Ordering::Relaxed);
    }
    *TLB_BASE.lock() = Some(HwTlb::counters());
    if let Some(s2) = STAGE2.lock().as_mut() {
        s2.reset_stats();
    }
}

/// COUNTERS_REPORT's share: one `hyp_memslot` record.
pub fn report() {
    let mut r = abi::report::Record::new("hyp_memslot");
    for c in Counter::ALL {
        r.u64(c.name(), counter(c as u64).unwrap_or(0));
    }
    rt::println!("{r}");
}
