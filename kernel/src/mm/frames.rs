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
//! search. [`alloc_zeroed`] clears a frame with `DC ZVA` where the CPU allows it (64 bytes per
//! instruction).

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
pub fn alloc(pages: usize) -> Option<u64> {
    if pages == 1 {
        return alloc_one();
    }
    let f = FRAMES.lock().alloc(pages)?;
    FREE_PAGES.fetch_sub(pages as u64, Ordering::Relaxed);
    Some(f as u64 * PAGE)
}

fn alloc_one() -> Option<u64> {
    let mut c = CACHE.lock();
    let pa = match c.pop() {
        Some(pa) => pa,
        None => {
            let mut b = FRAMES.lock();
            for _ in 0..CACHE_BATCH {
                match b.alloc(1) {
                    Some(f) => c.push(f as u64 * PAGE),
                    None => break,
                }
            }
            drop(b);
            c.pop()?
        }
    };
    FREE_PAGES.fetch_sub(1, Ordering::Relaxed);
    Some(pa)
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

/// Zeroes `pages` frames at linear-map address `va` (page aligned): `DC ZVA` blocks where
/// DCZID_EL0 allows them, else plain stores.
fn zero(va: u64, pages: usize) {
    let bytes = pages * PAGE as usize;
    let dczid: u64;
    // SAFETY: reads DCZID_EL0 (block size and whether DC ZVA is allowed); no memory touched.
    unsafe { core::arch::asm!("mrs {}, dczid_el0", out(reg) dczid, options(nomem, nostack, preserves_flags)) };
    let block = 4usize << (dczid & 0xf);
    if dczid & 0x10 != 0 || block < 64 || block * 8 > PAGE as usize {
        // SAFETY: the caller's frames, reached through the linear map.
        unsafe { core::ptr::write_bytes(va as *mut u8, 0, bytes) };
        return;
    }
    let end = va + bytes as u64;
    // A page in one round of 64-byte blocks (the common size); else rounds of 16 blocks where
    // a page holds whole rounds of them (blocks up to 256 bytes), else of 8.
    if block * 64 == PAGE as usize {
        zva_rounds::<64>(va, end, block as u64);
    } else if block * 16 <= PAGE as usize {
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

/// (free, total) frames.
pub fn counts() -> (u64, u64) {
    (FREE_PAGES.load(Ordering::Relaxed), TOTAL_PAGES.load(Ordering::Relaxed))
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
