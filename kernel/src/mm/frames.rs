//! The physical frame allocator: a buddy allocator (`buddy_system_allocator::FrameAllocator`)
//! over the DTB's memory ranges minus what is already in use (the kernel image, the DTB, the
//! initrd, `/memreserve/` and `/reserved-memory`), in 4 KiB frames.
//!
//! The allocator starts once the MMU is on (the early tables of `mm::early` come from a static
//! pool): every frame is reached through the linear map.

use super::layout::LINEAR_BASE;
use alloc::vec::Vec;
use buddy_system_allocator::FrameAllocator;
use core::sync::atomic::{AtomicU64, Ordering};
use pgtable::{FrameAlloc, PhysAddr};
use spin::Mutex;

pub use abi::PAGE_SIZE as PAGE;

static FRAMES: Mutex<FrameAllocator<32>> = Mutex::new(FrameAllocator::new());
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

/// Allocates `pages` (a power of two) physically contiguous frames aligned to their size.
pub fn alloc(pages: usize) -> Option<u64> {
    let f = FRAMES.lock().alloc(pages)?;
    FREE_PAGES.fetch_sub(pages as u64, Ordering::Relaxed);
    Some(f as u64 * PAGE)
}

/// Returns frames from [`alloc`].
pub fn free(pa: u64, pages: usize) {
    FRAMES.lock().dealloc((pa / PAGE) as usize, pages);
    FREE_PAGES.fetch_add(pages as u64, Ordering::Relaxed);
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

// SAFETY: frames come from the buddy allocator, which hands each frame out once and aligns an
// n-frame block to n frames; `alloc_zeroed` zeroes them before use and `alloc_filled` writes
// every entry of its frame; `phys_to_ptr` returns the linear-map address, and the linear map
// covers all RAM read-write for the kernel's whole life.
unsafe impl FrameAlloc for KFrames {
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        let pa = alloc(pages)?;
        // SAFETY: the frames were just handed to us and are reachable at phys_to_virt(pa).
        unsafe { core::ptr::write_bytes(phys_to_virt(pa) as *mut u8, 0, pages * PAGE as usize) };
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
}
