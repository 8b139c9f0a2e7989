//! The kernel heap: a buddy allocator (`buddy_system_allocator::LockedHeap`) that starts with a
//! 4 MiB block inside the image's BSS (not cleared at entry: `rt::heap`; usable with the MMU
//! off, before the DTB is parsed) and grows into RAM from the frame allocator once the MMU is
//! on (`mm::init`).
//!
//! The boot CPU uses the heap twice: with the MMU off at the image's physical address (to read
//! the device tree and build the early tables, `mm::early`), and from the image's virtual
//! address on. Nothing allocated in the first phase survives it (its pointers would name
//! physical addresses that are not mapped later): [`reset`] starts the heap afresh at the
//! block's virtual address.

/// Bytes of the boot block.
const HEAP_SIZE: usize = 4 << 20;

rt::heap_space!(
    /// The heap's first block: not cleared at entry (`rt::heap`).
    static HEAP_SPACE: HEAP_SIZE
);

#[global_allocator]
static HEAP: rt::heap::BssHeap = rt::heap::BssHeap::new();

/// Call once on the boot CPU before anything allocates.
pub fn init() {
    HEAP.init(&HEAP_SPACE);
}

/// Starts the heap afresh over its boot block, as the running code reaches it now (the image's
/// virtual address): every earlier allocation is forgotten.
///
/// # Safety
///
/// No object allocated before may be used (or freed) afterwards.
pub unsafe fn reset() {
    // SAFETY: the caller's contract.
    unsafe { HEAP.reset(&HEAP_SPACE) }
}

/// Adds `[start, start + size)` to the heap.
///
/// # Safety
///
/// The range must be mapped read-write for every CPU for the kernel's whole life and used by
/// nothing else from now on.
pub unsafe fn extend(start: usize, size: usize) {
    // SAFETY: the caller's contract.
    unsafe { HEAP.extend(start, size) }
}
