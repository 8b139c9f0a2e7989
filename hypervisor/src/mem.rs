//! The hypervisor's own memory: a heap inside its image (BSS) and the page-table frame pool
//! (its pieces are decided by `hypcore::plan` at boot and handed over with [`add_frames`]).
//! Physical ranges and their arithmetic are `hypcore::range`'s.

use buddy_system_allocator::{FrameAllocator, LockedHeap};
use spin::Mutex;

pub use hypcore::range::{align_up, Range};
pub use hypcore::{BLOCK_1G, BLOCK_2M, PAGE};

/// Heap for the hypervisor's own data (DTB copies, board description, guest DTB).
const HEAP_SIZE: usize = 4 << 20;

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

/// Pages handed to the frame pool.
static POOL_PAGES: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Hands `r` (page aligned, owned by the hypervisor, mapped) to the frame pool.
pub fn add_frames(r: Range) {
    if !r.is_empty() {
        FRAMES.lock().add_frame((r.start / PAGE) as usize, (r.end / PAGE) as usize);
        POOL_PAGES.fetch_add(r.len() / PAGE, core::sync::atomic::Ordering::Relaxed);
    }
}

/// Pages in the frame pool (COUNTER_READ `FramePoolPages`).
pub fn frame_pool_pages() -> u64 {
    POOL_PAGES.load(core::sync::atomic::Ordering::Relaxed)
}
