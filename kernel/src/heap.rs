//! The kernel heap (inside the image's BSS until the frame allocator of the memory work lands).

use buddy_system_allocator::LockedHeap;

const HEAP_SIZE: usize = 4 << 20;

#[repr(C, align(4096))]
struct HeapSpace([u8; HEAP_SIZE]);
static mut HEAP_SPACE: HeapSpace = HeapSpace([0; HEAP_SIZE]);

#[global_allocator]
static HEAP: LockedHeap<32> = LockedHeap::empty();

/// Call once on the boot CPU before anything allocates.
pub fn init() {
    // SAFETY: HEAP_SPACE is used only here, once, and handed to the allocator for good.
    unsafe { HEAP.lock().init(core::ptr::addr_of_mut!(HEAP_SPACE) as usize, HEAP_SIZE) };
}
