//! The physical frame allocator: a buddy allocator (`buddy_system_allocator::FrameAllocator`)
//! over the DTB's memory ranges minus what is already in use (the kernel image, the DTB, the
//! initrd, `/memreserve/` and `/reserved-memory`), in 4 KiB frames.
//!
//! The allocator starts once the MMU is on (the early tables of `mm::early` come from a static
//! pool): every frame is reached through the linear map.
//!
//! Single frames (a user page, a page table) go through a cache in front of the buddy
//! allocator, as Linux's per-CPU page lists do: a stack of free frames linked through their
//! first word (reached through the linear map), refilled from the buddy allocator
//! [`CACHE_BATCH`] at a time and drained back past [`CACHE_HIGH`]. Taking or giving back a frame
//! is then a few loads and stores under one lock instead of the buddy allocator's free-list
//! search. With IRQs masked (every exception handler: a page fault's frame) a frame comes
//! from the running CPU's own short list without any lock, refilled from the shared cache. [`alloc_zeroed`] clears a frame with `DC ZVA` where the CPU allows it (DCZID_EL0's block
//! size per instruction).

use super::layout::LINEAR_BASE;
use alloc::vec::Vec;
use buddy_system_allocator::FrameAllocator;
use core::sync::atomic::{AtomicU64, Ordering};
use pgtable::{FrameAlloc, PhysAddr};
use spin::Mutex;

pub use abi::PAGE_SIZE as PAGE;

static FRAMES: Mutex<FrameAllocator<32>> = Mutex::new(FrameAllocator::new());
static CACHE: Mutex<FrameCache> = Mutex::new(FrameCache { head: 0, len: 0 });
/// Frames taken from the buddy allocator at once when the cache is empty.
const CACHE_BATCH: usize = 64;
/// Most frames the cache keeps (8 MiB); past it frees go back to the buddy allocator, half of
/// them at once. An mmap, touch and munmap of 2 MiB cycles through the cache alone.
const CACHE_HIGH: usize = 2048;

/// Free single frames, linked through their first word (0 ends the list).
struct FrameCache {
    head: u64,
    len: usize,
}

impl FrameCache {
    fn push(&mut self, pa: u64) {
        // SAFETY: a free frame nobody else uses, reached through the linear map.
        unsafe { (phys_to_virt(pa) as *mut u64).write(self.head) };
        self.head = pa;
        self.len += 1;
    }
    fn pop(&mut self) -> Option<u64> {
        if self.head == 0 {
            return None;
        }
        let pa = self.head;
        // SAFETY: the first word of a frame this cache holds: the next one's address.
        self.head = unsafe { (phys_to_virt(pa) as *const u64).read() };
        self.len -= 1;
        Some(pa)
    }
}
static FREE_PAGES: AtomicU64 = AtomicU64::new(0);
static TOTAL_PAGES: AtomicU64 = AtomicU64::new(0);

/// `[start, end)` physical ranges.
pub type Range = (u64, u64);

/// Feeds the allocator with `ram` minus `reserved` (both page-rounded outwards for reserved,
/// inwards for RAM).
pub fn init(ram: &[Range], reserved: &[Range]) {
    let mut fa = FRAMES.lock();
    let mut total = 0;
    for &(s, e) in ram {
        let (s, e) = ((s + PAGE - 1) & !(PAGE - 1), e & !(PAGE - 1));
        // Cut the RAM range at every reserved range.
        let mut pieces: Vec<Range> = alloc::vec![(s, e)];
        for &(rs, re) in reserved {
            let (rs, re) = (rs & !(PAGE - 1), (re + PAGE - 1) & !(PAGE - 1));
            pieces = pieces
                .into_iter()
                .flat_map(|(a, b)| {
                    if re <= a || rs >= b {
                        alloc::vec![(a, b)]
                    } else {
                        alloc::vec![(a, rs.max(a)), (re.min(b), b)]
                    }
                })
                .filter(|(a, b)| b > a)
                .collect();
        }
        for (a, b) in pieces {
            fa.add_frame((a / PAGE) as usize, (b / PAGE) as usize);
            total += (b - a) / PAGE;
        }
    }
    FREE_PAGES.store(total, Ordering::Relaxed);
    TOTAL_PAGES.store(total, Ordering::Relaxed);
}

/// Allocates `pages` (a power of two) physically contiguous frames aligned to their size
/// (contents undefined).
#[inline(always)]
pub fn alloc(pages: usize) -> Option<u64> {
    if pages == 1 {
        return alloc_one();
    }
    alloc_many(pages)
}

/// [`alloc`] of more than one frame: the buddy allocator's.
#[inline(never)]
fn alloc_many(pages: usize) -> Option<u64> {
    let f = FRAMES.lock().alloc(pages)?;
    FREE_PAGES.fetch_sub(pages as u64, Ordering::Relaxed);
    Some(f as u64 * PAGE)
}

/// Frames one CPU keeps for itself, linked through their first word like [`FrameCache`]'s:
/// taken only by that CPU with IRQs masked (nothing else runs there until it is done, and no
/// other CPU takes them), so without a lock; other CPUs only read `len` (for [`counts`]).
/// Filled [`CPU_BATCH`] at a time from the shared cache; frees go to the shared cache.
#[repr(align(64))]
struct CpuFrames {
    head: AtomicU64,
    len: AtomicU64,
}

static CPU_FRAMES: [CpuFrames; rt::MAX_CPUS] =
    [const { CpuFrames { head: AtomicU64::new(0), len: AtomicU64::new(0) } }; rt::MAX_CPUS];
/// Frames a CPU's own list takes from the shared cache at once.
const CPU_BATCH: usize = 16;

/// One frame: with IRQs masked (every exception handler, a page fault's among them) from this
/// CPU's own list, else from the shared cache under its lock.
#[inline(always)]
fn alloc_one() -> Option<u64> {
    if !crate::arch::sync::irqs_masked() {
        return alloc_shared();
    }
    let c = &CPU_FRAMES[crate::arch::cpu::this_cpu() % rt::MAX_CPUS];
    // Only this CPU changes its list, and nothing else runs on it until this returns (IRQs
    // masked): plain loads and stores.
    let head = c.head.load(Ordering::Relaxed);
    if head == 0 {
        return refill_cpu(c);
    }
    // SAFETY: the first word of a free frame on this CPU's list: the next one's address.
    c.head.store(unsafe { (phys_to_virt(head) as *const u64).read() }, Ordering::Relaxed);
    c.len.store(c.len.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
    Some(head)
}

/// This CPU's list `c` is empty: [`CPU_BATCH`] frames from the shared cache onto it, one of
/// them returned. IRQs are masked (the caller's rule).
#[cold]
#[inline(never)]
fn refill_cpu(c: &CpuFrames) -> Option<u64> {
    let mut shared = CACHE.lock();
    let mut n = 0;
    while n < CPU_BATCH {
        let pa = match shared.pop() {
            Some(pa) => pa,
            None => match refill(&mut shared) {
                Some(pa) => pa,
                None => break,
            },
        };
        // SAFETY: a free frame now this CPU's alone, reached through the linear map.
        unsafe { (phys_to_virt(pa) as *mut u64).write(c.head.load(Ordering::Relaxed)) };
        c.head.store(pa, Ordering::Relaxed);
        n += 1;
    }
    drop(shared);
    if n == 0 {
        return None;
    }
    // Frames on a CPU's list count as free through its `len`, not through FREE_PAGES.
    FREE_PAGES.fetch_sub(n as u64, Ordering::Relaxed);
    c.len.store(c.len.load(Ordering::Relaxed) + n as u64 - 1, Ordering::Relaxed);
    let head = c.head.load(Ordering::Relaxed);
    // SAFETY: as in `alloc_one`.
    c.head.store(unsafe { (phys_to_virt(head) as *const u64).read() }, Ordering::Relaxed);
    Some(head)
}

/// One frame from the shared cache (a pop under the lock).
#[inline(always)]
fn alloc_shared() -> Option<u64> {
    let mut c = CACHE.lock();
    let pa = match c.pop() {
        Some(pa) => pa,
        None => refill(&mut c)?,
    };
    drop(c);
    FREE_PAGES.fetch_sub(1, Ordering::Relaxed);
    Some(pa)
}

/// The cache is empty: [`CACHE_BATCH`] frames from the buddy allocator, one of them returned.
#[inline(never)]
fn refill(c: &mut FrameCache) -> Option<u64> {
    let mut b = FRAMES.lock();
    for _ in 0..CACHE_BATCH {
        match b.alloc(1) {
            Some(f) => c.push(f as u64 * PAGE),
            None => break,
        }
    }
    drop(b);
    c.pop()
}

/// Returns frames from [`alloc`].
pub fn free(pa: u64, pages: usize) {
    FREE_PAGES.fetch_add(pages as u64, Ordering::Relaxed);
    if pages == 1 {
        let mut c = CACHE.lock();
        if c.len < CACHE_HIGH {
            c.push(pa);
            return;
        }
        // Full: half of it goes back with this one.
        let mut b = FRAMES.lock();
        b.dealloc((pa / PAGE) as usize, 1);
        for _ in 0..CACHE_HIGH / 2 {
            if let Some(f) = c.pop() {
                b.dealloc((f / PAGE) as usize, 1);
            }
        }
        return;
    }
    FRAMES.lock().dealloc((pa / PAGE) as usize, pages);
}

/// DCZID_EL0: block size (bits 3:0, log2 of words) and DZP (bit 4, `DC ZVA` prohibited).
fn dczid() -> u64 {
    let dczid: u64;
    // SAFETY: reads DCZID_EL0 (block size and whether DC ZVA is allowed); no memory touched.
    unsafe { core::arch::asm!("mrs {}, dczid_el0", out(reg) dczid, options(nomem, nostack, preserves_flags)) };
    dczid
}

/// Each CPU as it starts: whether its DCZID_EL0 lets [`zero`] clear a page with 64-byte
/// `DC ZVA` blocks (DZP clear, BS = 4: 4 << 4 bytes), kept in its static page (a CPU's value
/// never changes once the kernel runs: HCR_EL2.TDZ is the hypervisor's, set before).
pub fn init_cpu() {
    crate::arch::cpu::this_area().zva64.store(dczid() & 0x1f == 4, Ordering::Relaxed);
}

/// Zeroes `pages` frames at linear-map address `va` (page aligned): `DC ZVA` in 64-byte blocks
/// where this CPU's [`init_cpu`] found them allowed, in one unrolled round per page; anything
/// else (other block sizes, not allowed, or before [`init_cpu`]) by [`zero_other`], from
/// DCZID_EL0 read there.
#[inline(always)]
fn zero(va: u64, pages: usize) {
    if !crate::arch::cpu::this_area().zva64.load(Ordering::Relaxed) {
        zero_other(va, pages, dczid());
        return;
    }
    for i in 0..pages as u64 {
        // SAFETY: zeroes the 64 naturally aligned 64-byte blocks of the caller's page at
        // `va + i * PAGE` (normal memory through the linear map); this CPU's DCZID_EL0 said
        // DC ZVA is allowed and zeroes 64 bytes (`init_cpu`).
        unsafe {
            core::arch::asm!(
                ".rept {n}",
                "dc zva, {p}",
                "add {p}, {p}, #64",
                ".endr",
                "dc zva, {p}",
                n = const PAGE / 64 - 1,
                p = inout(reg) va + i * PAGE => _,
                options(nostack, preserves_flags)
            )
        };
    }
}

/// [`zero`] for blocks other than 64 bytes, or where `DC ZVA` is not allowed (`dczid`:
/// DCZID_EL0's value).
#[cold]
#[inline(never)]
fn zero_other(va: u64, pages: usize, dczid: u64) {
    let bytes = pages * PAGE as usize;
    let block = 4usize << (dczid & 0xf);
    if dczid & 0x10 != 0 || block < 64 || block * 8 > PAGE as usize {
        // SAFETY: the caller's frames, reached through the linear map.
        unsafe { core::ptr::write_bytes(va as *mut u8, 0, bytes) };
        return;
    }
    let end = va + bytes as u64;
    // Rounds of 16 blocks where a page holds whole rounds of them (blocks up to 256 bytes),
    // else of 8.
    if block * 16 <= PAGE as usize {
        zva_rounds::<16>(va, end, block as u64);
    } else {
        zva_rounds::<8>(va, end, block as u64);
    }
}

/// `DC ZVA` from `p` to `end` in rounds of `N` blocks of `block` bytes.
#[inline(always)]
fn zva_rounds<const N: usize>(mut p: u64, end: u64, block: u64) {
    while p < end {
        // SAFETY: zeroes the naturally aligned blocks from `p` on inside the caller's frames
        // (normal memory through the linear map); `N` blocks of at least 64 bytes per round, a
        // page being a whole number of such rounds (`zero` chose `N`).
        unsafe {
            core::arch::asm!(
                ".rept {n}",
                "dc zva, {p}",
                "add {p}, {p}, {b}",
                ".endr",
                n = const N,
                p = inout(reg) p,
                b = in(reg) block,
                options(nostack, preserves_flags)
            )
        };
    }
}

/// (free, total) frames (free: the buddy allocator's, the shared cache's and every CPU's own
/// list's; read without stopping the others, so a snapshot of a moving count).
pub fn counts() -> (u64, u64) {
    let own: u64 = CPU_FRAMES.iter().map(|c| c.len.load(Ordering::Relaxed)).sum();
    (FREE_PAGES.load(Ordering::Relaxed) + own, TOTAL_PAGES.load(Ordering::Relaxed))
}

/// Where the kernel reaches physical address `pa`: its linear-map address.
pub fn phys_to_virt(pa: u64) -> u64 {
    LINEAR_BASE + pa
}

/// Page-table frames for `lib/pgtable`.
#[derive(Clone, Copy)]
pub struct KFrames;

// SAFETY: frames come from the buddy allocator (single ones through the cache, which holds each
// free frame once), which hands each frame out once and aligns an n-frame block to n frames;
// `alloc_zeroed` zeroes them before use and `alloc_filled` writes
// every entry of its frame; `phys_to_ptr` returns the linear-map address, and the linear map
// covers all RAM read-write for the kernel's whole life.
unsafe impl FrameAlloc for KFrames {
    #[inline(always)]
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        let pa = alloc(pages)?;
        zero(phys_to_virt(pa), pages);
        Some(PhysAddr::new(pa))
    }
    /// No zeroing: every entry is written (a split's or a map's whole level-3 table).
    fn alloc_filled(&mut self, first: u64, step: u64) -> Option<PhysAddr> {
        let pa = alloc(1)?;
        // SAFETY: the frame was just handed to us, whole, and is linked nowhere yet.
        unsafe { pgtable::frame::fill_unlinked(phys_to_virt(pa) as *mut u64, first, step) };
        Some(PhysAddr::new(pa))
    }
    fn free(&mut self, pa: PhysAddr, pages: usize) {
        free(pa.as_u64(), pages)
    }
    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64 {
        phys_to_virt(pa.as_u64()) as *mut u64
    }
    /// Descriptors are read and written only through `phys_to_ptr` (the defaults): the
    /// library's paired-access loops may take the same memory.
    fn direct(&self, table: PhysAddr) -> Option<*mut u64> {
        Some(self.phys_to_ptr(table))
    }
}
