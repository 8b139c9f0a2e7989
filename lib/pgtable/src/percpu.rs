//! Per-CPU kernel roots (mechanism 5): one TTBR1 top-level table per CPU, every lower table
//! shared with the kernel's table, except a **window**: one top-level slot that leads, in CPU
//! `c`'s root, to a subtree of CPU `c`'s own that maps CPU `c`'s per-CPU area. `this_cpu` ops
//! then address the window's fixed VA with no offset register.
//!
//! [`PerCpuRoots`] owns the roots and the windows (each window a [`PageTable`] of its own that
//! is never installed: its top-level entry for the window slot is copied into its CPU's root).
//!
//! # Rules (checked by the model scenarios below)
//!
//! 1. Each CPU's TLB holds only translations of its own root: TTBR1_EL1.CnP stays 0 (CnP
//!    declares the tables common to every CPU, which these roots are not) and a hypervisor
//!    invalidates a vCPU's TLB entries when it moves the vCPU to another physical CPU. The
//!    window's entries are non-global ([`window_attrs`]): tagged with the ASID they were walked
//!    under, dropped by an ASID flush. (nG alone does not make them private: two CPUs running
//!    one address space share an ASID. Per-CPU TLBs do.)
//! 2. Every root slot but the window's equals the kernel table's: the same lower tables.
//! 3. A new top-level kernel entry is copied into every root ([`PerCpuRoots::sync`]) before any
//!    CPU may use it; invalid -> table needs no TLBI. A kernel top-level entry is never removed
//!    while the roots live: the tables below it are reachable from every root, and freeing them
//!    would leave the other roots pointing at freed memory. `sync` refuses such a change.
//! 4. Window pages are added with no TLBI (invalid -> valid). Changing one is break-before-make
//!    with the TLBI done on the window's own CPU: [`PerCpuRoots::unmap_window_page`] clears the
//!    entry and issues no TLBI (a broadcast would reach every CPU, and only the window's CPU can
//!    hold its entries, under any ASID: nG); the caller then invalidates that CPU's TLB
//!    locally (the kernel: a shootdown by IPI) before it maps the page again.

use alloc::vec::Vec;

use crate::addr::{PhysAddr, VirtAddr, ENTRIES_PER_TABLE, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::descriptor::Desc;
use crate::frame::FrameAlloc;
use crate::regime::{Regime, VaHalf};
use crate::tlb::{Barrier, TlbMaintenance};
use crate::{Error, PageTable};

/// Bytes one top-level (level 0) entry of a 48-bit table covers.
pub const SLOT_SIZE: u64 = 1 << 39;
/// Bytes of one window (one level-3 table's worth).
pub const WINDOW_SIZE: u64 = 2 << 20;

/// The top-level slot of upper-half address `va`.
pub const fn slot_of(va: u64) -> usize {
    ((va >> 39) & 511) as usize
}

/// What a window entry maps: normal memory, read-write, never executable, **non-global**.
pub fn window_attrs() -> Attributes {
    Attributes { global: Some(false), ..Attributes::normal(Perms::RW) }
}

/// Why a per-CPU root operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerCpuError {
    /// The page-table library's error.
    Table(Error),
    /// The window VA is not slot-aligned in the upper half, or its slot is in use in the kernel
    /// table.
    BadWindow,
    /// A window page outside the window, or a CPU without a root.
    OutOfRange,
    /// A kernel top-level entry went from valid to something else (rule 3): (slot, root's
    /// value, kernel's value).
    TopLevelRemoved(usize, u64, u64),
}

impl From<Error> for PerCpuError {
    fn from(e: Error) -> Self {
        PerCpuError::Table(e)
    }
}

impl core::fmt::Display for PerCpuError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PerCpuError::Table(e) => write!(f, "{e}"),
            PerCpuError::BadWindow => write!(f, "window VA not a free upper-half top-level slot"),
            PerCpuError::OutOfRange => write!(f, "window page or CPU out of range"),
            PerCpuError::TopLevelRemoved(i, was, now) => write!(
                f,
                "top-level kernel entry {i} was removed ({was:#x} -> {now:#x}) while per-CPU roots still lead to its tables"
            ),
        }
    }
}

/// Seeded bugs: the model scenarios' and the kernel's `percpu.seed=` (tests only; `None` in
/// normal use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seed {
    /// `sync` leaves root 1 alone.
    NoSyncRoot1,
    /// The window entries are global.
    WindowGlobal,
    /// CPU 1's window is linked into CPU 0's root too.
    WindowIntoRoot0,
}

/// The per-CPU roots and windows.
pub struct PerCpuRoots<A: FrameAlloc + Clone> {
    frames: A,
    kernel: PhysAddr,
    window_va: u64,
    roots: Vec<PhysAddr>,
    windows: Vec<PageTable<A>>,
    /// Top-level entries `sync` copied.
    pub synced: u64,
    /// A seeded bug (tests only).
    pub seed: Option<Seed>,
}

impl<A: FrameAlloc + Clone> PerCpuRoots<A> {
    /// A root per CPU (`cpus` of them), each a copy of `kernel`'s top level, with an empty
    /// window at `window_va` (a top-level slot `kernel` does not use).
    pub fn new(kernel: &PageTable<A>, cpus: usize, window_va: u64, frames: A) -> Result<Self, PerCpuError> {
        let regime = Regime::El1 { asid: 0, half: VaHalf::Upper };
        if kernel.regime() != regime || window_va & (SLOT_SIZE - 1) != 0 || window_va < 0xffff_0000_0000_0000 {
            return Err(PerCpuError::BadWindow);
        }
        let k = kernel.root();
        let mut f = frames;
        if Desc(f.read_desc(k, slot_of(window_va))).is_valid() {
            return Err(PerCpuError::BadWindow);
        }
        let mut r = PerCpuRoots {
            frames: f.clone(),
            kernel: k,
            window_va,
            roots: Vec::new(),
            windows: Vec::new(),
            synced: 0,
            seed: None,
        };
        for _ in 0..cpus {
            let root = f.alloc_zeroed(1).ok_or(Error::OutOfMemory { addr: 0xffff_0000_0000_0000, level: 0 })?;
            for i in 0..ENTRIES_PER_TABLE {
                let v = f.read_desc(k, i);
                if v != 0 {
                    f.write_desc(root, i, v);
                }
            }
            r.roots.push(root);
            r.windows.push(PageTable::new(regime, f.clone())?);
        }
        r.frames = f;
        Ok(r)
    }

    /// CPU `cpu`'s root (what its TTBR1_EL1 holds, with CnP 0).
    pub fn root(&self, cpu: usize) -> Option<PhysAddr> {
        self.roots.get(cpu).copied()
    }

    /// The kernel table's root.
    pub fn kernel_root(&self) -> PhysAddr {
        self.kernel
    }

    /// CPUs with a root.
    pub fn cpus(&self) -> usize {
        self.roots.len()
    }

    /// The window's VA.
    pub fn window_va(&self) -> u64 {
        self.window_va
    }

    /// Page-table pages the roots and windows hold (the memory cost of the mechanism).
    pub fn table_pages(&self) -> u64 {
        self.roots.len() as u64 + self.windows.iter().map(|w| w.stats().table_pages).sum::<u64>()
    }

    /// Maps page `page` of CPU `cpu`'s window onto `pa` (rule 4: only ever adds) and links the
    /// window into the CPU's root; a `DSB ISHST` makes it visible to the walkers.
    pub fn map_window_page<T: TlbMaintenance + ?Sized>(
        &mut self,
        cpu: usize,
        page: u64,
        pa: PhysAddr,
        tlb: &mut T,
    ) -> Result<(), PerCpuError> {
        if cpu >= self.roots.len() || page >= WINDOW_SIZE / PAGE_SIZE {
            return Err(PerCpuError::OutOfRange);
        }
        let mut attrs = window_attrs();
        if self.seed == Some(Seed::WindowGlobal) {
            attrs.global = Some(true);
        }
        let va = VirtAddr::new(self.window_va + page * PAGE_SIZE);
        self.windows[cpu].map(tlb, va, PAGE_SIZE, pa, attrs, Constraints::PAGES_ONLY)?;
        let slot = slot_of(self.window_va);
        let link = self.frames.read_desc(self.windows[cpu].root(), slot);
        let mut into = self.roots[cpu];
        if self.seed == Some(Seed::WindowIntoRoot0) && cpu == 1 {
            into = self.roots[0];
        }
        if self.frames.read_desc(into, slot) != link {
            self.frames.write_desc(into, slot, link);
        }
        tlb.dsb(Barrier::IshSt);
        Ok(())
    }

    /// Unmaps page `page` of CPU `cpu`'s window, with barriers but **no TLBI** (rule 4): CPU
    /// `cpu` may still hold the old translation until the caller has invalidated its TLB
    /// locally, which it must do before mapping the page again. Page 0 is refused, and a window
    /// whose page 0 is not mapped: page 0 keeps the window's tables (which the root's copied
    /// link leads to) from being freed when the last other page goes.
    pub fn unmap_window_page<T: TlbMaintenance + ?Sized>(
        &mut self,
        cpu: usize,
        page: u64,
        tlb: &mut T,
    ) -> Result<(), PerCpuError> {
        if cpu >= self.roots.len() || page == 0 || page >= WINDOW_SIZE / PAGE_SIZE {
            return Err(PerCpuError::OutOfRange);
        }
        if self.windows[cpu].translate(VirtAddr::new(self.window_va)).is_none() {
            return Err(PerCpuError::OutOfRange);
        }
        // The window tables are never live themselves (only their link in the root is walked),
        // so the table library issues no maintenance: the DSB makes the cleared entry visible
        // to the walkers before the caller's invalidation.
        let va = VirtAddr::new(self.window_va + page * PAGE_SIZE);
        self.windows[cpu].unmap(tlb, va, PAGE_SIZE)?;
        tlb.dsb(Barrier::IshSt);
        Ok(())
    }

    /// Copies into every root the top-level kernel entries covering `[va, va + len)` that differ
    /// (rule 3); returns how many it wrote. An entry the kernel removed is refused.
    pub fn sync<T: TlbMaintenance + ?Sized>(&mut self, va: u64, len: u64, tlb: &mut T) -> Result<u64, PerCpuError> {
        if va < 0xffff_0000_0000_0000 {
            return Ok(0);
        }
        let (first, last) = (slot_of(va), slot_of(va.saturating_add(len.max(1) - 1)));
        let window = slot_of(self.window_va);
        let mut n = 0;
        for (cpu, &root) in self.roots.iter().enumerate() {
            if self.seed == Some(Seed::NoSyncRoot1) && cpu == 1 {
                continue;
            }
            for i in (first..=last).filter(|&i| i != window) {
                let (k, mine) = (self.frames.read_desc(self.kernel, i), self.frames.read_desc(root, i));
                if k == mine {
                    continue;
                }
                if !Desc(k).is_valid() {
                    return Err(PerCpuError::TopLevelRemoved(i, mine, k));
                }
                self.frames.write_desc(root, i, k);
                n += 1;
            }
        }
        if n > 0 {
            tlb.dsb(Barrier::IshSt);
            self.synced += n;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod scenarios {
    //! Two CPUs, two roots, one shared kernel subtree, checked by a model: each CPU walks only
    //! its own root and caches what it walked (a TLB per CPU, entries tagged global or by ASID;
    //! or, for the CnP hazard, one TLB both CPUs hit). After every step each CPU's access to
    //! every interesting VA must give what the rules promise: the kernel table's translation,
    //! or, in the window, its own area. The kernel table itself runs under the model checker
    //! (`model::harness`), so its own operations are checked as always.

    use super::*;
    use crate::model::harness::Harness;
    use crate::model::memory::ModelFrames;
    use crate::model::recorder::ModelTlb;
    use std::collections::HashMap;
    use std::format;
    use std::string::String;
    use std::vec;

    const WINDOW: u64 = 0xffff_7f80_0000_0000;
    const IMAGE: u64 = 0xffff_0000_2000_0000;
    const LATE: u64 = 0xffff_7e80_0000_0000;

    /// (page VA, tag: None global, Some(asid)) -> (output page, which root it was walked from).
    type Tlb = HashMap<(u64, Option<u16>), (u64, usize)>;

    struct World {
        h: Harness,
        roots: PerCpuRoots<ModelFrames>,
        tlbs: [Tlb; 2],
        /// One TLB shared by both CPUs (CnP on / a vCPU moved without a flush).
        shared_tlb: bool,
        /// Each CPU's area pages.
        areas: [Vec<u64>; 2],
        violations: Vec<String>,
    }

    /// Maps one new model frame read-write at kernel address `va` in `h`'s table; returns it.
    fn map_kernel_page(h: &mut Harness, va: u64) -> u64 {
        let pa = h.model.borrow_mut().alloc(1).unwrap();
        h.pt.map(
            &mut h.tlb,
            VirtAddr::new(va),
            PAGE_SIZE,
            PhysAddr::new(pa),
            Attributes::normal(Perms::RW),
            Constraints::PAGES_ONLY,
        )
        .unwrap();
        pa
    }

    fn frames(h: &Harness) -> ModelFrames {
        ModelFrames { model: h.model.clone(), limit: None }
    }

    impl World {
        fn new(seed: Option<Seed>, shared_tlb: bool) -> World {
            let mut h = Harness::new(Regime::El1 { asid: 0, half: VaHalf::Upper }, false, false);
            map_kernel_page(&mut h, IMAGE);
            h.go_live();
            let f = frames(&h);
            let mut roots = PerCpuRoots::new(&h.pt, 2, WINDOW, f).unwrap();
            roots.seed = seed;
            let mut w = World {
                h,
                roots,
                tlbs: [Tlb::new(), Tlb::new()],
                shared_tlb,
                areas: [vec![], vec![]],
                violations: vec![],
            };
            w.grow();
            w
        }

        fn tlb(&mut self) -> ModelTlb {
            self.h.tlb.clone()
        }

        /// Every CPU's area gets one more page, mapped into its window.
        fn grow(&mut self) {
            let page = self.areas[0].len() as u64;
            for cpu in 0..2 {
                let pa = self.h.model.borrow_mut().alloc(1).unwrap();
                self.areas[cpu].push(pa);
                let mut t = self.tlb();
                self.roots.map_window_page(cpu, page, PhysAddr::new(pa), &mut t).unwrap();
            }
        }

        /// A walk of `root` for `va`: (output page, global).
        fn walk(&self, root: PhysAddr, va: u64) -> Option<(u64, bool)> {
            let f = frames(&self.h);
            let off = va - 0xffff_0000_0000_0000;
            let mut table = root;
            for level in 0..4 {
                let size = crate::addr::level_size(level);
                let d = Desc(f.read_desc(table, ((off / size) % 512) as usize));
                if d.is_table(level) {
                    table = d.addr();
                    continue;
                }
                if !d.is_valid() {
                    return None;
                }
                let allocated = self.h.model.borrow().frames.get(&table.as_u64()).map(|x| x.allocated);
                if allocated != Some(true) {
                    return None;
                }
                return Some((d.addr().as_u64() + (off & (size - 1) & !(PAGE_SIZE - 1)), d.0 & (1 << 11) == 0));
            }
            None
        }

        /// Whether every table on the way from `root` to `va` is allocated (a walk through a
        /// freed table is a use after free).
        fn walk_reaches_freed(&self, root: PhysAddr, va: u64) -> Option<u64> {
            let f = frames(&self.h);
            let off = va - 0xffff_0000_0000_0000;
            let mut table = root;
            for level in 0..4 {
                let size = crate::addr::level_size(level);
                let d = Desc(f.read_desc(table, ((off / size) % 512) as usize));
                if !d.is_table(level) {
                    return None;
                }
                table = d.addr();
                let ok = self.h.model.borrow().frames.get(&table.as_u64()).map(|x| x.allocated);
                if ok != Some(true) {
                    return Some(table.as_u64());
                }
            }
            None
        }

        /// CPU `cpu` touches `va` while TTBR0 holds `asid`: the TLB (its own, or the shared one)
        /// if it holds the page, else a walk of its own root, cached. Returns the output page.
        fn access(&mut self, cpu: usize, va: u64, asid: u16) -> Option<u64> {
            let page = va & !(PAGE_SIZE - 1);
            let tlbs: &[usize] = if self.shared_tlb { &[0, 1] } else { &[cpu][..] };
            for &t in tlbs {
                for tag in [None, Some(asid)] {
                    if let Some(&(out, _)) = self.tlbs[t].get(&(page, tag)) {
                        return Some(out);
                    }
                }
            }
            let (out, global) = self.walk(self.roots.root(cpu).unwrap(), page)?;
            let tag = if global { None } else { Some(asid) };
            self.tlbs[cpu].insert((page, tag), (out, cpu));
            Some(out)
        }

        /// What the rules promise CPU `cpu` sees at `va`.
        fn expected(&self, cpu: usize, va: u64) -> Option<u64> {
            if slot_of(va) == slot_of(WINDOW) {
                return self.areas[cpu].get(((va - WINDOW) / PAGE_SIZE) as usize).copied();
            }
            self.h.pt.translate(VirtAddr::new(va)).map(|t| t.phys.as_u64() & !(PAGE_SIZE - 1))
        }

        /// Both CPUs touch `vas` under `asid`; any wrong result is a violation. Also: every
        /// root's slots equal the kernel's (the window's excepted), and no root leads to a freed
        /// table.
        fn check(&mut self, step: &str, vas: &[u64], asid: u16) {
            for cpu in 0..2 {
                for &va in vas {
                    if let Some(freed) = self.walk_reaches_freed(self.roots.root(cpu).unwrap(), va) {
                        self.violations
                            .push(format!("{step}: CPU {cpu}'s root leads through freed table {freed:#x} for {va:#x}"));
                        continue;
                    }
                    let (got, want) = (self.access(cpu, va, asid), self.expected(cpu, va));
                    if got != want {
                        self.violations
                            .push(format!("{step}: CPU {cpu} at {va:#x} (ASID {asid}) got {got:x?}, want {want:x?}"));
                    }
                }
            }
            let f = frames(&self.h);
            for cpu in 0..2 {
                let root = self.roots.root(cpu).unwrap();
                for i in (0..512).filter(|&i| i != slot_of(WINDOW)) {
                    let (k, r) = (f.read_desc(self.roots.kernel_root(), i), f.read_desc(root, i));
                    if Desc(k).is_valid() && k != r {
                        self.violations
                            .push(format!("{step}: CPU {cpu}'s root slot {i} is {r:#x}, the kernel's {k:#x}"));
                    }
                }
            }
            if let Err(e) = self.h.check() {
                self.violations.push(format!("{step}: kernel table: {e}"));
            }
        }

        fn map_kernel(&mut self, va: u64) -> u64 {
            let pa = map_kernel_page(&mut self.h, va);
            let mut t = self.tlb();
            if let Err(e) = self.roots.sync(va, PAGE_SIZE, &mut t) {
                self.violations.push(format!("sync after mapping {va:#x}: {e}"));
            }
            pa
        }
    }

    /// The whole life: boot, accesses under two ASIDs, a late kernel mapping in a new slot, the
    /// window growing, a context switch. Returns the violations.
    fn life(seed: Option<Seed>, shared_tlb: bool) -> Vec<String> {
        let mut w = World::new(seed, shared_tlb);
        let vas = [IMAGE, WINDOW];
        w.check("boot", &vas, 1);
        w.check("other ASID", &vas, 2);
        w.map_kernel(LATE);
        w.check("late mapping", &[IMAGE, WINDOW, LATE], 1);
        w.grow();
        w.check("window grew", &[WINDOW, WINDOW + PAGE_SIZE, LATE], 2);
        w.violations
    }

    #[test]
    fn the_rules_hold_over_a_life() {
        let v = life(None, false);
        assert!(v.is_empty(), "{v:#?}");
    }

    #[test]
    fn a_root_sync_is_only_done_where_needed() {
        let mut w = World::new(None, false);
        let mut t = w.tlb();
        assert_eq!(w.roots.sync(IMAGE, PAGE_SIZE, &mut t), Ok(0), "an existing slot needs no copy");
        w.map_kernel(LATE);
        assert_eq!(w.roots.synced, 2, "the new slot, once per root");
        // Roots: 2 pages; windows: an unused top level + levels 1-3 each.
        assert_eq!(w.roots.table_pages(), 2 + 2 * 4);
    }

    #[test]
    fn seeded_missing_sync_in_one_root_is_caught() {
        let v = life(Some(Seed::NoSyncRoot1), false);
        assert!(v.iter().any(|m| m.contains("late mapping: CPU 1 at 0xffff7e8000000000")), "{v:#?}");
        assert!(v.iter().any(|m| m.contains("CPU 1's root slot 253")), "{v:#?}");
    }

    #[test]
    fn seeded_window_in_the_wrong_root_is_caught() {
        let v = life(Some(Seed::WindowIntoRoot0), false);
        assert!(v.iter().any(|m| m.contains("boot: CPU 0 at 0xffff7f8000000000")), "{v:#?}");
    }

    /// With a TLB both CPUs hit (CnP on, or a vCPU moved to another physical CPU without a
    /// flush) one CPU uses the other's window entry: rule 1. Non-global entries do not save
    /// it (both CPUs run under the same ASID); a global entry fails the same way.
    #[test]
    fn seeded_shared_tlb_hands_a_cpu_the_other_window() {
        for seed in [None, Some(Seed::WindowGlobal)] {
            let v = life(seed, true);
            assert!(v.iter().any(|m| m.contains("boot: CPU 1 at 0xffff7f8000000000")), "{seed:?}: {v:#?}");
        }
    }

    /// Rule 4's change of a window page: unmapped with barriers and no TLBI (each CPU may
    /// still hold its old entry), each CPU's own TLB invalidated (the kernel's shootdown by
    /// IPI), then mapped to a new frame: both CPUs see the new frame. Without the local
    /// invalidation (the kernel's seeded `shootdown-without-tlbi`) each reads its old frame.
    #[test]
    fn a_window_page_changes_through_each_cpus_own_invalidation() {
        for invalidate in [true, false] {
            let mut w = World::new(None, false);
            w.grow();
            let vas = [WINDOW, WINDOW + PAGE_SIZE];
            w.check("grown", &vas, 1);
            for cpu in 0..2 {
                let mut t = crate::tlb::CountingTlb::default();
                w.roots.unmap_window_page(cpu, 1, &mut t).unwrap();
                assert_eq!(t.counters.tlbi_total(), 0, "the window's CPU invalidates, nobody else");
                assert!(t.counters.dsb_total() > 0, "the cleared entry is made visible to the walkers");
            }
            if invalidate {
                w.tlbs = [Tlb::new(), Tlb::new()];
            }
            for cpu in 0..2 {
                let pa = w.h.model.borrow_mut().alloc(1).unwrap();
                w.areas[cpu][1] = pa;
                let mut t = w.tlb();
                w.roots.map_window_page(cpu, 1, PhysAddr::new(pa), &mut t).unwrap();
            }
            w.check("remapped", &vas, 1);
            if invalidate {
                assert!(w.violations.is_empty(), "{:#?}", w.violations);
            } else {
                for cpu in 0..2 {
                    let m = format!("remapped: CPU {cpu} at 0xffff7f8000001000");
                    assert!(w.violations.iter().any(|v| v.starts_with(&m)), "{:#?}", w.violations);
                }
            }
        }
    }

    /// Page 0 keeps the window's tables alive: it is never unmapped, and no page is unmapped
    /// from a window without it; pages and CPUs outside the window are refused.
    #[test]
    fn unmapping_a_window_page_refuses_page_0_and_out_of_range() {
        let mut w = World::new(None, false);
        w.grow();
        let mut t = crate::tlb::CountingTlb::default();
        assert_eq!(w.roots.unmap_window_page(0, 0, &mut t), Err(PerCpuError::OutOfRange));
        assert_eq!(w.roots.unmap_window_page(2, 1, &mut t), Err(PerCpuError::OutOfRange));
        assert_eq!(w.roots.unmap_window_page(0, WINDOW_SIZE / PAGE_SIZE, &mut t), Err(PerCpuError::OutOfRange));
        let mut bare = PerCpuRoots::new(&w.h.pt, 1, WINDOW, frames(&w.h)).unwrap();
        let pa = w.h.model.borrow_mut().alloc(1).unwrap();
        bare.map_window_page(0, 1, PhysAddr::new(pa), &mut t).unwrap();
        assert_eq!(bare.unmap_window_page(0, 1, &mut t), Err(PerCpuError::OutOfRange), "page 0 is not mapped");
        assert_eq!(w.roots.unmap_window_page(1, 1, &mut t), Ok(()));
        assert!(w.roots.windows[1].translate(VirtAddr::new(WINDOW + PAGE_SIZE)).is_none());
        assert!(w.roots.windows[1].translate(VirtAddr::new(WINDOW)).is_some(), "page 0 stays");
    }

    /// Rule 3's other half: a kernel top-level entry removed (its tables freed by the kernel
    /// table) while another root still leads to them. `sync` refuses it and the model sees the
    /// root reaching a freed table.
    #[test]
    fn a_removed_top_level_entry_is_refused_and_caught() {
        let mut w = World::new(None, false);
        w.map_kernel(LATE);
        w.check("late mapping", &[LATE], 1);
        // Drop the cached walks so only the tables matter, then unmap: the table library frees
        // the now-empty tables below slot 253 and clears the kernel's entry.
        w.tlbs = [Tlb::new(), Tlb::new()];
        let mut t = w.tlb();
        w.h.pt.unmap(&mut t, VirtAddr::new(LATE), PAGE_SIZE).unwrap();
        let r = w.roots.sync(LATE, PAGE_SIZE, &mut t);
        assert!(
            !Desc(frames(&w.h).read_desc(w.roots.kernel_root(), slot_of(LATE))).is_valid(),
            "unmap freed the tables"
        );
        assert!(matches!(r, Err(PerCpuError::TopLevelRemoved(253, _, 0))), "{r:?}");
        w.check("after the unmap", &[LATE], 1);
        assert!(w.violations.iter().any(|m| m.contains("leads through freed table")), "{:#?}", w.violations);
    }
}
