//! A heap that starts inside the image's BSS: usable before anything else is set up (with the
//! MMU off, before the device tree is read), and able to grow into RAM later. One
//! `buddy_system_allocator` heap over a static block of `N` bytes; each binary declares one as
//! its `#[global_allocator]`.

use buddy_system_allocator::{Heap, LockedHeap};
use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;

#[repr(C, align(4096))]
struct Space<const N: usize>([u8; N]);

/// A heap over `N` bytes of the image's BSS.
pub struct BssHeap<const N: usize> {
    space: UnsafeCell<Space<N>>,
    heap: LockedHeap<32>,
}

// SAFETY: the space is handed to the locked heap once (`init` / `reset`) and touched only
// through it afterwards.
unsafe impl<const N: usize> Sync for BssHeap<N> {}

impl<const N: usize> Default for BssHeap<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> BssHeap<N> {
    /// An empty heap (nothing can be allocated before [`BssHeap::init`]).
    pub const fn new() -> Self {
        BssHeap { space: UnsafeCell::new(Space([0; N])), heap: LockedHeap::empty() }
    }

    /// Hands the BSS block to the heap. Call once, on the boot CPU, before anything allocates.
    pub fn init(&self) {
        // SAFETY: the block belongs to this heap alone and is handed over once.
        unsafe { self.heap.lock().init(self.space.get() as usize, N) };
    }

    /// Starts the heap afresh over its BSS block as the running code reaches it now (after an
    /// image moved from its physical to its virtual address): every earlier allocation is
    /// forgotten.
    ///
    /// # Safety
    ///
    /// No object allocated before may be used (or freed) afterwards.
    pub unsafe fn reset(&self) {
        let mut h = self.heap.lock();
        *h = Heap::empty();
        // SAFETY: the block belongs to this heap alone; the caller guarantees nothing allocated
        // from it before is still in use.
        unsafe { h.init(self.space.get() as usize, N) };
    }

    /// Adds `[start, start + size)` to the heap.
    ///
    /// # Safety
    ///
    /// The range must be mapped read-write for every CPU for the binary's whole life and used
    /// by nothing else from now on.
    pub unsafe fn extend(&self, start: usize, size: usize) {
        // SAFETY: the caller hands over a mapped, otherwise unused region for good.
        unsafe { self.heap.lock().add_to_heap(start, start + size) };
    }
}

// SAFETY: every call goes to the locked buddy heap, which meets GlobalAlloc's contract.
unsafe impl<const N: usize> GlobalAlloc for BssHeap<N> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        unsafe { self.heap.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded: `ptr` came from `alloc` with `layout`.
        unsafe { self.heap.dealloc(ptr, layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_from_its_block_and_grows() {
        static H: BssHeap<65536> = BssHeap::new();
        H.init();
        let l = Layout::from_size_align(4096, 8).unwrap();
        // SAFETY: a valid layout; the pointers are checked and freed with it.
        unsafe {
            let a = H.alloc(l);
            let base = H.space.get() as usize;
            assert!((base..base + 65536).contains(&(a as usize)));
            H.dealloc(a, l);
            // Too big for the block until it grows.
            let big = Layout::from_size_align(1 << 20, 8).unwrap();
            assert!(H.alloc(big).is_null());
            let extra = std::vec![0u8; 4 << 20].leak();
            H.extend(extra.as_mut_ptr() as usize, extra.len());
            let b = H.alloc(big);
            assert!(!b.is_null());
            H.dealloc(b, big);
        }
    }
}
