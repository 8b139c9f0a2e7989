//! The hypervisor's page tables, both built with `lib/pgtable`:
//!
//! * its own EL2 stage 1 (TTBR0_EL2, identity): text RX, read-only data R, data/BSS and the
//!   frame pool RW and never executable (W^X, and SCTLR_EL2.WXN enforces it), the console UART
//!   as device memory, and guest RAM RW+XN so the hypervisor can load the guest and read its
//!   buffers. Everything else, the address 0 page included, is unmapped.
//! * the guest's stage 2 (VTTBR_EL2, VMID 1, identity IPA = PA): all guest RAM as normal
//!   memory, and the device regions of the DTB (PCI host bridge windows included), except the
//!   GIC's hypervisor and virtual CPU interfaces, as device memory. The hypervisor's own region is not mapped: a guest access
//!   there takes a stage-2 fault that `trap` reports with the IPA.

use crate::guest;
use crate::mem::{Range, FRAMES, PAGE};
use aarch64_cpu::registers::*;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use board::Board;
use core::sync::atomic::Ordering;
use pgtable::hw::HwTlb;
use pgtable::{regime, Attributes, Constraints, FrameAlloc, InputAddress, IntermPhysAddr, PageTable, Perms, PhysAddr};
use spin::Mutex;

/// Page-table frames from the hypervisor's pool (identity mapped), with a page cache: single
/// frames taken ahead of time by [`HypFrames::top_up`] are handed out first, so a split walk
/// allocates without going to the buddy allocator (as KVM's memory caches). Cached frames are
/// not zeroed ahead: a frame is zeroed when it is handed out for a table that starts empty, and
/// not at all for a level-3 table the library fills whole (`alloc_filled`: every new table of
/// an eager split), nor when the cache is drained unused.
/// Frames are taken with the EL2 MMU off only while [`setup`] builds the first tables.
static MMU_ON: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Where the frames taken with the MMU off lie (one bound), which [`setup`] invalidates.
static TAKEN_MMU_OFF: Mutex<Option<Range>> = Mutex::new(None);

pub struct HypFrames {
    cache: Vec<u64>,
}

impl HypFrames {
    pub const fn new() -> Self {
        HypFrames { cache: Vec::new() }
    }

    fn take(pages: usize) -> Option<u64> {
        let pa = FRAMES.lock().alloc(pages).map(|frame| frame as u64 * PAGE)?;
        if !MMU_ON.load(Ordering::Relaxed) {
            let mut t = TAKEN_MMU_OFF.lock();
            *t = Some(hypcore::range::hull(*t, Range::new(pa, pa + pages as u64 * PAGE)));
        }
        Some(pa)
    }

    fn zero(pa: u64, pages: usize) {
        // SAFETY: the frames at `pa` are ours (just taken from the pool or the cache, handed to
        // nobody yet) and identity mapped at EL2.
        unsafe { core::ptr::write_bytes(pa as *mut u8, 0, pages * PAGE as usize) };
    }

    /// Fills the cache up to `pages` frames; false if the pool ran out (the frames taken so far
    /// stay cached). Takes them from the pool in blocks of up to 512 (one allocation each, the
    /// buddy allocator's search paid once per block, not per frame: a split of 1 GiB needs
    /// 513), smaller blocks where the pool has no larger free one.
    pub fn top_up(&mut self, pages: usize) -> bool {
        if self.cache.try_reserve(pages.saturating_sub(self.cache.len())).is_err() {
            return false;
        }
        let mut f = FRAMES.lock();
        let mut block = 512usize;
        while self.cache.len() < pages {
            let want = pages - self.cache.len();
            while block > want {
                block /= 2;
            }
            match f.alloc(block) {
                Some(frame) => {
                    let pa = frame as u64 * PAGE;
                    self.cache.extend((0..block as u64).map(|i| pa + i * PAGE));
                }
                None if block > 1 => block /= 2,
                None => return false,
            }
        }
        true
    }

    /// Returns every cached frame to the pool.
    pub fn drain(&mut self) {
        let mut f = FRAMES.lock();
        for pa in self.cache.drain(..) {
            f.dealloc((pa / PAGE) as usize, 1);
        }
    }

    /// One frame, from the cache first; its contents are whatever it held.
    fn take_one(&mut self) -> Option<u64> {
        self.cache.pop().or_else(|| Self::take(1))
    }
}

// SAFETY: frames come from the buddy allocator over the hypervisor's own pool, which nothing
// else uses (cached ones included: the cache owns them until handed out here); the buddy
// allocator aligns an n-frame block to n frames; `alloc_zeroed` zeroes what it hands out and
// `alloc_filled` writes every entry of its frame (the contract of both); frames are identity
// mapped at EL2, so `pa as *mut u64` reaches the whole frame.
unsafe impl FrameAlloc for HypFrames {
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        let pa = if pages == 1 { self.take_one()? } else { Self::take(pages)? };
        Self::zero(pa, pages);
        Some(PhysAddr::new(pa))
    }
    fn alloc_filled(&mut self, first: u64, step: u64) -> Option<PhysAddr> {
        let pa = self.take_one()?;
        // SAFETY: `pa` is a whole frame, ours alone and linked nowhere yet (see `take_one`).
        unsafe { pgtable::frame::fill_unlinked(pa as *mut u64, first, step) };
        Some(PhysAddr::new(pa))
    }
    fn free(&mut self, pa: PhysAddr, pages: usize) {
        FRAMES.lock().dealloc((pa.as_u64() / PAGE) as usize, pages);
    }
    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64 {
        pa.as_u64() as *mut u64
    }
    /// Descriptors are read and written only through `phys_to_ptr` (the defaults): the
    /// library's paired-access loops may take the same memory.
    fn direct(&self, table: PhysAddr) -> Option<*mut u64> {
        Some(self.phys_to_ptr(table))
    }
}

/// The guest's stage-2 table (memslots and dirty logging change it at run time).
pub static STAGE2: Mutex<Option<PageTable<HypFrames, IntermPhysAddr>>> = Mutex::new(None);
static EL2_TABLE: Mutex<Option<PageTable<HypFrames>>> = Mutex::new(None);

/// What a CPU needs to turn its EL2 MMU on. Written once by the boot CPU and cleaned to the
/// point of coherency, because secondary CPUs read it with their MMU (and caches) still off.
#[repr(C, align(64))]
struct MmuRegs(rt::mmu::MmuRegs);

static mut MMU_REGS: MmuRegs = MmuRegs(rt::mmu::MmuRegs { mair: 0, tcr: 0, ttbr0: 0, ttbr1: 0, wxn: true });

fn id_regs() -> (u64, u64) {
    (ID_AA64MMFR0_EL1.get(), ID_AA64MMFR1_EL1.get())
}

/// Identity-maps `[start, end)` (rounded out to pages) in `pt`, the EL2 table (input VAs) or
/// stage 2 (input IPAs).
fn map<K: InputAddress>(
    pt: &mut PageTable<HypFrames, K>,
    tlb: &mut HwTlb,
    what: &str,
    start: u64,
    end: u64,
    attrs: Attributes,
) -> Result<(), String> {
    let (s, e) = (start & !(PAGE - 1), (end + PAGE - 1) & !(PAGE - 1));
    let pa = PhysAddr::new(s);
    let r = pt.map(tlb, K::from_raw(s), e - s, pa, attrs, Constraints::NONE);
    r.map_err(|err| format!("mapping {what} [{s:#x}, {e:#x}): {err:?}"))
}

/// Builds both tables and turns the EL2 MMU on for the boot CPU. Returns (VTTBR_EL2, VTCR_EL2).
pub fn setup(board: &Board, plan: &hypcore::plan::MemoryPlan) -> Result<(u64, u64), String> {
    let (hyp, frames_hi) = (plan.hyp, plan.frames_high);
    let mut tlb = HwTlb::detect();
    let (mmfr0, mmfr1) = id_regs();
    let parange = pgtable::cpu::parange(mmfr0);
    let layout = rt::start::image_layout();

    // EL2 stage 1, in the regime EL2 runs in (E2H = 0: EL2; E2H = 1: EL2&0, another format).
    let mode = crate::el2mode::mode();
    let mut el2 = PageTable::new(rt::el2::regime(mode), HypFrames::new()).map_err(|e| format!("EL2 table: {e:?}"))?;
    let (start, text, ro, end) =
        (layout.start as u64, layout.text_end as u64, layout.rodata_end as u64, layout.end as u64);
    map(&mut el2, &mut tlb, "hypervisor text", start, text, Attributes::normal(Perms::RX))?;
    map(&mut el2, &mut tlb, "hypervisor rodata", text, ro, Attributes::normal(Perms::RO))?;
    map(&mut el2, &mut tlb, "hypervisor data", ro, end, Attributes::normal(Perms::RW))?;
    map(&mut el2, &mut tlb, "frame pool", end, hyp.end, Attributes::normal(Perms::RW))?;
    if !frames_hi.is_empty() {
        let rw = Attributes::normal(Perms::RW);
        map(&mut el2, &mut tlb, "frame pool (high)", frames_hi.start, frames_hi.end, rw)?;
    }
    if !plan.mirror.is_empty() {
        let rw = Attributes::normal(Perms::RW);
        map(&mut el2, &mut tlb, "second memory image", plan.mirror.start, plan.mirror.end, rw)?;
    }
    // Spare RAM (`hyp.guest-mem`) joins the frame pool after this: mapped now, used later.
    for r in &plan.spare {
        map(&mut el2, &mut tlb, "frame pool (spare)", r.start, r.end, Attributes::normal(Perms::RW))?;
    }
    if let Some(u) = &board.console {
        map(&mut el2, &mut tlb, "console UART", u.base, u.base + u.size.max(PAGE), Attributes::device(Perms::RW))?;
    }
    for r in guest::ram() {
        map(&mut el2, &mut tlb, "guest RAM", r.start, r.end, Attributes::normal(Perms::RW))?;
    }
    // Where the firmware's spin-table CPUs wait (release addresses written at CPU_ON) and the
    // board's power controller (`exit.rs`): the hypervisor's, never the guest's RAM.
    for r in board.spin_table_regions() {
        map(&mut el2, &mut tlb, "spin-table", r.base, r.end(), Attributes::normal(Perms::RW))?;
    }
    // The GICv2 through which CPUs the hypervisor holds are woken (`psci::park`).
    if let Some((d, c)) = hypcore::park::wake_gic(board) {
        let dev = Attributes::device(Perms::RW);
        map(&mut el2, &mut tlb, "GIC distributor", d.base, d.base + d.size.max(PAGE), dev)?;
        map(&mut el2, &mut tlb, "GIC CPU interface", c.base, c.base + c.size.max(PAGE), dev)?;
    }
    if let Some(r) = board.pm_watchdog() {
        map(&mut el2, &mut tlb, "PM watchdog", r.base, r.end(), Attributes::device(Perms::RW))?;
    }

    // Stage 2.
    let vmid16 = pgtable::cpu::has_vmid16(mmfr1);
    let vtcr = regime::vtcr_el2(parange, vmid16).ok_or("the CPU has fewer than 40 physical address bits")?;
    let mut s2 = PageTable::stage2(1, HypFrames::new()).map_err(|e| format!("stage 2: {e:?}"))?;
    for r in guest::ram() {
        map(&mut s2, &mut tlb, "guest RAM", r.start, r.end, Attributes::normal(Perms::RWX))?;
    }
    for (path, region) in hypcore::devices::guest_devices(board, hyp) {
        if region.end > 1 << regime::IPA_BITS {
            rt::println!(
                "hyp: warning: {path} [{:#x}, {:#x}) is beyond the 40-bit IPA space: not mapped",
                region.start,
                region.end
            );
            continue;
        }
        map(&mut s2, &mut tlb, &path, region.start, region.end, Attributes::device(Perms::RW))?;
    }
    el2.set_live(&mut tlb);
    s2.set_live(&mut tlb);
    let vttbr = regime::vttbr_el2(s2.root(), 1);

    // SAFETY: written once here, before any other CPU runs; read only by enable_on_this_cpu.
    unsafe {
        let regs = &mut *core::ptr::addr_of_mut!(MMU_REGS);
        regs.0 = rt::mmu::MmuRegs {
            mair: regime::MAIR,
            tcr: rt::el2::tcr(mode, parange),
            ttbr0: el2.root().as_u64(),
            ttbr1: 0,
            wxn: true,
        };
    }
    // Everything so far was written with the MMU off (straight to memory): drop any stale cache
    // lines over what was written (the image with its BSS, heap and stacks; the tables' frames)
    // before the first cacheable access, then make the values secondary CPUs read with their
    // MMU off visible at the point of coherency. Of the frame pools only the frames taken so far
    // (the tables) were written: the rest is first written cacheably, so a stale line there is
    // only overwritten, never read (the pools are RAM/16: 180 MiB, 2.9 million lines on a 3 GiB
    // board).
    let image = rt::start::image_layout();
    let taken = TAKEN_MMU_OFF.lock().take();
    MMU_ON.store(true, Ordering::Relaxed);
    // SAFETY: the boot CPU has run with its MMU off until now, so memory holds everything it
    // wrote to these ranges; no CPU has accessed them cacheably.
    unsafe {
        rt::cache::invalidate_to_poc(image.start as u64, (image.end - image.start) as u64);
        if let Some(t) = taken {
            rt::cache::invalidate_to_poc(t.start, t.len());
        }
    }
    *EL2_TABLE.lock() = Some(el2);
    *STAGE2.lock() = Some(s2);
    enable_on_this_cpu();
    crate::el2::clean_dcache_range(core::ptr::addr_of!(MMU_REGS) as u64, core::mem::size_of::<MmuRegs>() as u64);
    Ok((vttbr, vtcr))
}

/// `hyp.check-stage2`: nothing in `kept` (the hypervisor's region, frame pool, slot pool)
/// translates in the guest's stage 2. Walks the live table over each range (leaves only);
/// the error names the range and the first IPA that translates.
pub fn check_stage2(kept: &[(&'static str, Range)]) -> Result<u64, String> {
    let guard = STAGE2.lock();
    let s2 = guard.as_ref().ok_or("check-stage2: no stage 2 yet")?;
    let mut bytes = 0;
    for (what, r) in kept.iter().filter(|(_, r)| !r.is_empty()) {
        let mut found: Option<(u64, u64)> = None;
        s2.walk(pgtable::IntermPhysAddr::new(r.start), r.len(), pgtable::walker::WalkFlags::LEAF, |e| {
            if found.is_none() && e.desc.is_mapping(e.level) {
                found = Some((e.off, e.desc.addr().as_u64()));
            }
            Ok(())
        })
        .map_err(|e| format!("check-stage2: walking {what}: {e}"))?;
        if let Some((ipa, pa)) = found {
            return Err(format!(
                "check-stage2: the {what} [{:#x}, {:#x}) translates in stage 2: IPA {ipa:#x} -> PA {pa:#x}",
                r.start, r.end
            ));
        }
        bytes += r.len();
    }
    Ok(bytes)
}

/// Turns the EL2 MMU on for a CPU started by PSCI CPU_ON (MMU and caches off so far).
pub fn enable_secondary(cpu: usize) {
    // Its stack was written straight to memory; drop any line another CPU's speculation may
    // have brought into the caches before this CPU reads it cacheably.
    let (bottom, top) = rt::start::stack_bounds(cpu);
    // SAFETY: this CPU's stack was only written with its MMU off, by this CPU.
    unsafe { rt::cache::invalidate_to_poc(bottom as u64, (top - bottom) as u64) };
    enable_on_this_cpu();
}

/// Turns the EL2 MMU on for the calling CPU, with the tables the boot CPU built (W^X: WXN on).
fn enable_on_this_cpu() {
    // SAFETY: MMU_REGS was written and cleaned to the PoC by the boot CPU before any other CPU
    // was started; it is read-only from then on.
    let regs = unsafe { &*core::ptr::addr_of!(MMU_REGS) };
    rt::mmu::enable_el2(&regs.0, &mut HwTlb::detect());
}

/// Page-table pages used by stage 2.
pub fn stage2_table_pages() -> u64 {
    STAGE2.lock().as_ref().map(|s| s.stats().table_pages).unwrap_or(0)
}

/// Page-table pages used by the EL2 stage 1.
pub fn el2_table_pages() -> u64 {
    EL2_TABLE.lock().as_ref().map(|s| s.stats().table_pages).unwrap_or(0)
}
