//! A heap that starts inside the image: usable before anything else is set up (with the MMU
//! off, before the device tree is read), and able to grow into RAM later. One
//! `buddy_system_allocator` heap ([`BssHeap`]) over a static block ([`HeapSpace`]); each binary
//! declares one of each, the heap as its `#[global_allocator]`.
//!
//! The block lives in `.bss.rt_uninit` (`lib/rt/link.ld`: the start of the BSS, which the entry
//! code does not clear): a heap needs no zeroed memory, and clearing MiBs with the MMU off, as
//! the entry code must, was a third of the hypervisor's boot. Hence `MaybeUninit`: nothing reads
//! the block before the heap hands a piece of it out.

use buddy_system_allocator::{Heap, LockedHeap};
use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::mem::MaybeUninit;

/// `N` bytes for a heap, page aligned. Declare it with [`heap_space!`](crate::heap_space),
/// which puts it where the entry code leaves memory as it finds it.
#[repr(C, align(4096))]
pub struct HeapSpace<const N: usize>(UnsafeCell<MaybeUninit<[u8; N]>>);

// SAFETY: the block is handed to one heap (`BssHeap::init` / `reset`) and touched only through
// it afterwards.
unsafe impl<const N: usize> Sync for HeapSpace<N> {}

impl<const N: usize> Default for HeapSpace<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> HeapSpace<N> {
    /// A block (its contents whatever the memory holds).
    pub const fn new() -> Self {
        HeapSpace(UnsafeCell::new(MaybeUninit::uninit()))
    }

    /// Its first byte, as the running code reaches it now.
    pub fn base(&self) -> usize {
        self.0.get() as usize
    }
}

/// Declares `static NAME: HeapSpace<N>` in `.bss.rt_uninit` (`lib/rt/link.ld`: the part of the
/// BSS the entry code does not clear); the one place that names the section.
#[macro_export]
macro_rules! heap_space {
    ($(#[$m:meta])* $vis:vis static $name:ident: $n:expr) => {
        $(#[$m])*
        #[link_section = ".bss.rt_uninit.heap"]
        $vis static $name: $crate::heap::HeapSpace<{ $n }> = $crate::heap::HeapSpace::new();
    };
}

/// A buddy heap, empty until [`BssHeap::init`] hands it a [`HeapSpace`].
pub struct BssHeap {
    heap: LockedHeap<32>,
}

impl Default for BssHeap {
    fn default() -> Self {
        Self::new()
    }
}

impl BssHeap {
    /// An empty heap (nothing can be allocated before [`BssHeap::init`]).
    pub const fn new() -> Self {
        BssHeap { heap: LockedHeap::empty() }
    }

    /// Hands `space` to the heap. Call once, on the boot CPU, before anything allocates.
    pub fn init<const N: usize>(&self, space: &'static HeapSpace<N>) {
        // SAFETY: the block belongs to this heap alone (the caller's static, given once) and
        // is handed over once.
        unsafe { self.heap.lock().init(space.base(), N) };
    }

    /// Starts the heap afresh over `space` as the running code reaches it now (after an image
    /// moved from its physical to its virtual address): every earlier allocation is forgotten.
    ///
    /// # Safety
    ///
    /// No object allocated before may be used (or freed) afterwards; `space` is the block
    /// [`BssHeap::init`] took.
    pub unsafe fn reset<const N: usize>(&self, space: &'static HeapSpace<N>) {
        let mut h = self.heap.lock();
        *h = Heap::empty();
        // SAFETY: the block belongs to this heap alone; the caller guarantees nothing allocated
        // from it before is still in use.
        unsafe { h.init(space.base(), N) };
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
unsafe impl GlobalAlloc for BssHeap {
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
        crate::heap_space!(static SPACE: 65536);
        static H: BssHeap = BssHeap::new();
        H.init(&SPACE);
        let l = Layout::from_size_align(4096, 8).unwrap();
        // SAFETY: a valid layout; the pointers are checked and freed with it.
        unsafe {
            let a = H.alloc(l);
            let base = SPACE.base();
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
