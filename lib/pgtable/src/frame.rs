//! The frame edge: where table pages come from and how descriptors are read and written.

use crate::addr::{PhysAddr, ENTRIES_PER_TABLE, PAGE_SIZE};

/// Supplier of page-table frames.
///
/// # Safety
///
/// Implementors guarantee that every frame returned by [`alloc_zeroed`](Self::alloc_zeroed) is
/// `pages * 4 KiB` bytes, aligned to that size, zeroed, used by nothing else until it is passed
/// back to [`free`](Self::free), and that [`phys_to_ptr`](Self::phys_to_ptr) returns a pointer
/// through which the whole frame can be read and written for as long as it is allocated. The
/// default `read_desc` / `write_desc` rely on this.
pub unsafe trait FrameAlloc {
    /// Allocates `pages` (1 or 2) contiguous zeroed 4 KiB frames aligned to `pages * 4 KiB`.
    /// Two pages are only asked for the concatenated stage-2 root.
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr>;

    /// Returns frames obtained from `alloc_zeroed(pages)`. The library calls this only once the
    /// frames are unreachable from any root and every TLB walk-cache entry for them has been
    /// invalidated (the invalidation completed by a DSB).
    fn free(&mut self, pa: PhysAddr, pages: usize);

    /// A pointer to the frame at `pa` (linear map, identity map, ...).
    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64;

    /// Reads descriptor `index` of the table at `table`.
    fn read_desc(&self, table: PhysAddr, index: usize) -> u64 {
        debug_assert!(index < 2 * ENTRIES_PER_TABLE);
        // SAFETY: `table` is a frame this allocator handed out (the library reads only tables it
        // allocated), `index` stays inside it (root tables have at most 1024 entries, others
        // 512), and the trait contract makes `phys_to_ptr` valid for the whole frame. Volatile:
        // the hardware walker and other CPUs observe this memory.
        unsafe { self.phys_to_ptr(table).add(index).read_volatile() }
    }

    /// Allocates one frame and writes all 512 of its descriptors, entry `i` = `first + i * step`:
    /// a level-3 table built before any walker can reach it (a split's new pages, a map's whole
    /// table). The frame need not be zeroed first, since every entry is written; the default
    /// takes a zeroed one anyway and fills it with [`fill_unlinked`]. An allocator whose frames
    /// cost a zeroing overrides it to skip that.
    fn alloc_filled(&mut self, first: u64, step: u64) -> Option<PhysAddr> {
        let t = self.alloc_zeroed(1)?;
        // SAFETY: `t` was just allocated (one whole frame, `phys_to_ptr` valid for all of it by
        // the trait contract) and is linked from no table yet.
        unsafe { fill_unlinked(self.phys_to_ptr(t), first, step) };
        Some(t)
    }

    /// The memory of the table at `table`, for the library's loops that read and write whole
    /// groups of descriptors with paired loads and stores (`crate::raw`): `Some` only from an
    /// allocator whose [`read_desc`](Self::read_desc) and [`write_desc`](Self::write_desc) are
    /// the plain accesses through [`phys_to_ptr`](Self::phys_to_ptr) (the defaults), since
    /// those loops bypass them. `None` (the default) keeps every access on those two: an
    /// allocator that observes them (the model checker's) says nothing here.
    fn direct(&self, table: PhysAddr) -> Option<*mut u64> {
        let _ = table;
        None
    }

    /// Writes descriptor `index` of the table at `table` (one single-copy-atomic 64-bit store).
    fn write_desc(&mut self, table: PhysAddr, index: usize, value: u64) {
        debug_assert!(index < 2 * ENTRIES_PER_TABLE);
        // SAFETY: as for `read_desc`; the library is the only writer of its tables, and an
        // aligned 64-bit volatile store is single-copy atomic, so a concurrent hardware walk sees
        // either the old or the new descriptor.
        unsafe { self.phys_to_ptr(table).add(index).write_volatile(value) }
    }
}

/// Writes entry `i` = `first + i * step` for all 512 entries of the table at `table`, with plain
/// stores. Where the binary allows vector registers ([`crate::vector`]): SVE's `INDEX` and one
/// `ADD` and `STR` per vector length of entries, or NEON's `ADD` per two entries and `ST1` per
/// eight (0.63 per entry). Otherwise, on aarch64: two running values advanced by `2 * step`, one post-indexed paired
/// store per pair, 64 entries per round (1.53 instructions per entry: an add each, half a
/// store, two per round; the compiler's best, sixteen at a time from a base and kept multiples,
/// took 1.7; a volatile store and its loop 5). Elsewhere (the host's tests) that portable loop.
///
/// # Safety
/// `table` points to a whole 4 KiB frame that nothing else reads or writes until the caller
/// publishes it: a table no root reaches yet, linked later behind a `DSB ISHST` (plain stores
/// are fine there because no hardware walker or other CPU can observe the frame before).
pub unsafe fn fill_unlinked(table: *mut u64, first: u64, step: u64) {
    #[cfg(target_arch = "aarch64")]
    {
        use crate::vector::{Path, SaveArea, FILL_REGS, SVE_FILL_REGS, Z_BYTES};
        match crate::vector::path() {
            Path::Scalar => {}
            Path::Q => {
                let mut save = SaveArea::<{ FILL_REGS * 16 }>::new();
                // SAFETY: the caller's whole frame, written entry by entry as below; the routine
                // restores the Q registers it uses from `save` (the mode: Q is the live state).
                return unsafe { crate::vector::__pgtable_vec_fill_q(table, first, step, save.ptr()) };
            }
            Path::Z { sve_fill: true } => {
                let mut save = SaveArea::<{ SVE_FILL_REGS * Z_BYTES }>::new();
                // SAFETY: as above, with whole Z registers saved (SVE untrapped here, the vector
                // length a power of two of at most `Z_BYTES`: the mode).
                return unsafe { crate::vector::__pgtable_vec_fill_sve(table, first, step, save.ptr()) };
            }
            Path::Z { sve_fill: false } => {
                let mut save = SaveArea::<{ FILL_REGS * Z_BYTES }>::new();
                // SAFETY: as above, NEON with whole Z registers saved.
                return unsafe { crate::vector::__pgtable_vec_fill_qz(table, first, step, save.ptr()) };
            }
        }
        const ROUND: usize = 64;
        // SAFETY: the caller gives us the whole frame, exclusively (see above): 512 entries of
        // 8 bytes from `table`, written in ENTRIES_PER_TABLE / ROUND rounds of ROUND / 2 paired
        // stores, each advancing `p` by 16; no other memory is touched.
        unsafe {
            core::arch::asm!(
                "2:",
                ".rept {pairs}",
                "stp {a}, {b}, [{p}], #16",
                "add {a}, {a}, {two}",
                "add {b}, {b}, {two}",
                ".endr",
                "subs {n}, {n}, #1",
                "b.ne 2b",
                pairs = const ROUND / 2,
                p = inout(reg) table => _,
                a = inout(reg) first => _,
                b = inout(reg) first.wrapping_add(step) => _,
                two = in(reg) step.wrapping_mul(2),
                n = inout(reg) ENTRIES_PER_TABLE / ROUND => _,
                options(nostack)
            )
        };
    }
    // SAFETY: as this function's own contract.
    #[cfg(not(target_arch = "aarch64"))]
    unsafe {
        portable_fill(table, first, step)
    };
}

/// [`fill_unlinked`] without assembly: its spec (`test=pgtable-groups` compares them on the
/// CPU, [`crate::raw::check_against_spec`]).
///
/// # Safety
/// As [`fill_unlinked`].
pub(crate) unsafe fn portable_fill(table: *mut u64, first: u64, step: u64) {
    // SAFETY: the caller gives us the whole frame, exclusively (see `fill_unlinked`).
    let entries = unsafe { core::slice::from_raw_parts_mut(table, ENTRIES_PER_TABLE) };
    const ROUND: usize = 16;
    let mut k = [0u64; ROUND];
    for (i, m) in k.iter_mut().enumerate() {
        *m = step.wrapping_mul(i as u64);
    }
    let next = step.wrapping_mul(ROUND as u64);
    let mut d = first;
    for round in entries.chunks_exact_mut(ROUND) {
        for (e, m) in round.iter_mut().zip(k) {
            *e = d.wrapping_add(m);
        }
        d = d.wrapping_add(next);
    }
}

// SAFETY: forwards every call to `A`, which upholds the contract.
unsafe impl<A: FrameAlloc + ?Sized> FrameAlloc for &mut A {
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        (**self).alloc_zeroed(pages)
    }
    fn free(&mut self, pa: PhysAddr, pages: usize) {
        (**self).free(pa, pages)
    }
    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64 {
        (**self).phys_to_ptr(pa)
    }
    fn read_desc(&self, table: PhysAddr, index: usize) -> u64 {
        (**self).read_desc(table, index)
    }
    fn write_desc(&mut self, table: PhysAddr, index: usize, value: u64) {
        (**self).write_desc(table, index, value)
    }
    fn alloc_filled(&mut self, first: u64, step: u64) -> Option<PhysAddr> {
        (**self).alloc_filled(first, step)
    }
    fn direct(&self, table: PhysAddr) -> Option<*mut u64> {
        (**self).direct(table)
    }
}

/// A frame allocator on the global heap, where a "physical address" is the frame's pointer.
/// For host tests and benchmarks (and any identity-mapped environment with a heap); counts
/// frames in use, and can be given a limit to exercise out-of-memory paths.
#[derive(Debug, Default)]
pub struct HeapFrames {
    /// Frames currently allocated.
    pub in_use: usize,
    /// Most frames allocated at once.
    pub peak: usize,
    /// Allocation fails once `in_use` would exceed this.
    pub limit: Option<usize>,
}

impl HeapFrames {
    /// An allocator without a limit.
    pub const fn new() -> Self {
        HeapFrames { in_use: 0, peak: 0, limit: None }
    }

    fn layout(pages: usize) -> core::alloc::Layout {
        let size = pages * PAGE_SIZE as usize;
        // Sizes are 4 KiB or 8 KiB, powers of two: always a valid layout.
        core::alloc::Layout::from_size_align(size, size).expect("valid frame layout")
    }
}

// SAFETY: frames come from the global allocator with size == alignment == pages * 4 KiB, zeroed,
// and the pointer is the address, so `phys_to_ptr` is valid for the whole allocation.
unsafe impl FrameAlloc for HeapFrames {
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        if let Some(limit) = self.limit {
            if self.in_use + pages > limit {
                return None;
            }
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc::alloc::alloc_zeroed(Self::layout(pages)) };
        if p.is_null() {
            return None;
        }
        self.in_use += pages;
        self.peak = self.peak.max(self.in_use);
        Some(PhysAddr::new(p as u64))
    }

    fn free(&mut self, pa: PhysAddr, pages: usize) {
        self.in_use -= pages;
        // SAFETY: `pa` came from `alloc_zeroed(pages)` with the same layout (library contract).
        unsafe { alloc::alloc::dealloc(pa.as_u64() as *mut u8, Self::layout(pages)) }
    }

    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64 {
        pa.as_u64() as *mut u64
    }

    fn direct(&self, table: PhysAddr) -> Option<*mut u64> {
        Some(self.phys_to_ptr(table))
    }
}
