//! The hypervisor's memory: a heap inside its own image (BSS), and a frame pool for page
//! tables just above the image, both inside the region the guest never sees.

use buddy_system_allocator::{FrameAllocator, LockedHeap};
use spin::Mutex;

/// Heap for the hypervisor's own data (DTB copies, board description, guest DTB).
const HEAP_SIZE: usize = 4 << 20;
/// Page-table frames (EL2 stage 1 and stage 2) below 2 GiB of RAM.
pub const FRAME_POOL_MIN: u64 = 16 << 20;
/// Largest default frame pool.
pub const FRAME_POOL_MAX_DEFAULT: u64 = 512 << 20;

/// The frame pool's size: `hyp.pool=` if given (at least [`FRAME_POOL_MIN`]), else 16 MiB
/// below 2 GiB of RAM and RAM / 16 (at most 512 MiB) from there: enough for the page tables of
/// a 64 GiB memslot of 4 KiB pages (~130 MiB) with 4 GiB of RAM.
pub fn frame_pool_size(ram_bytes: u64, requested: Option<u64>) -> u64 {
    let s = match requested {
        Some(r) => r.max(FRAME_POOL_MIN),
        None if ram_bytes < 2 << 30 => FRAME_POOL_MIN,
        None => (ram_bytes / 16).clamp(FRAME_POOL_MIN, FRAME_POOL_MAX_DEFAULT),
    };
    align_up(s, BLOCK_2M)
}
pub const PAGE: u64 = 4096;
pub const BLOCK_2M: u64 = 2 << 20;

#[repr(C, align(4096))]
struct HeapSpace([u8; HEAP_SIZE]);
static mut HEAP_SPACE: HeapSpace = HeapSpace([0; HEAP_SIZE]);

#[global_allocator]
static HEAP: LockedHeap<32> = LockedHeap::empty();

/// 4 KiB frames by frame number.
pub static FRAMES: Mutex<FrameAllocator<32>> = Mutex::new(FrameAllocator::new());

/// Makes the heap usable. Call once, on the boot CPU, before anything allocates.
pub fn init_heap() {
    // SAFETY: HEAP_SPACE is used only here, once, and handed to the allocator for good.
    unsafe {
        let start = core::ptr::addr_of_mut!(HEAP_SPACE) as usize;
        HEAP.lock().init(start, HEAP_SIZE);
    }
}

/// Hands `[start, end)` (page aligned, owned by the hypervisor, mapped) to the frame pool.
pub fn add_frames(start: u64, end: u64) {
    FRAMES.lock().add_frame((start / PAGE) as usize, (end / PAGE) as usize);
}

pub const fn align_up(v: u64, a: u64) -> u64 {
    (v + a - 1) & !(a - 1)
}

pub const fn align_down(v: u64, a: u64) -> u64 {
    v & !(a - 1)
}

/// `[start, end)` physical range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub start: u64,
    pub end: u64,
}

impl Range {
    pub const fn new(start: u64, end: u64) -> Self {
        Self { start, end }
    }
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.start && addr.checked_add(len).is_some_and(|e| e <= self.end)
    }
    pub fn overlaps(&self, o: &Range) -> bool {
        self.start < o.end && o.start < self.end
    }
}

/// `ranges` minus `hole`, keeping order.
pub fn subtract(ranges: &[Range], hole: Range) -> alloc::vec::Vec<Range> {
    let mut out = alloc::vec::Vec::new();
    for r in ranges {
        if !r.overlaps(&hole) {
            out.push(*r);
            continue;
        }
        if r.start < hole.start {
            out.push(Range::new(r.start, hole.start));
        }
        if hole.end < r.end {
            out.push(Range::new(hole.end, r.end));
        }
    }
    out
}

/// Takes `size` bytes, `align`ed, from the top of `ram` (avoiding `avoid`) and removes them from
/// `ram`. Returns the range taken.
pub fn reserve_top(ram: &mut alloc::vec::Vec<Range>, size: u64, align: u64, avoid: &[Range]) -> Option<Range> {
    let found = ram.iter().rev().find_map(|r| {
        let mut at = align_down(r.end.checked_sub(size)?, align);
        while at >= r.start {
            let cand = Range::new(at, at + size);
            if !avoid.iter().any(|a| a.overlaps(&cand)) {
                return Some(cand);
            }
            at = at.checked_sub(align)?;
        }
        None
    })?;
    let mut rest = subtract(ram, found);
    rest.retain(|r| !r.is_empty());
    *ram = rest;
    Some(found)
}
