//! What dirty logging keeps per memslot: the log's mode and its bitmap (in frames of the
//! hypervisor's pool). The slot registry (`memslot`) holds one per logging slot; `dirtylog`
//! reads and changes it. Apart from both so that the registry does not import the mechanism.

use crate::mem::{FRAMES, PAGE};
use hypcore::dirty as bits;

/// A dirty bitmap in frames of the hypervisor's pool (zeroed, identity mapped), freed on drop:
/// the bitmap of a 64 GiB slot is 2 MiB, too large for the hypervisor's heap.
pub struct Bitmap {
    pa: u64,
    frames: usize,
    words: usize,
}

impl Bitmap {
    /// A zeroed bitmap of `pages` bits (`None`: the pool has no room).
    pub fn new(pages: u64) -> Option<Bitmap> {
        let words = bits::words_for(pages) as usize;
        let frames = (words * 8).div_ceil(PAGE as usize).max(1);
        let frame = FRAMES.lock().alloc(frames)?;
        let pa = frame as u64 * PAGE;
        // SAFETY: the frames were just taken from the hypervisor's pool, which is mapped RW at
        // EL2 (identity) and used by nothing else.
        unsafe { core::ptr::write_bytes(pa as *mut u8, 0, frames * PAGE as usize) };
        Some(Bitmap { pa, frames, words })
    }
    /// The bitmap's words.
    pub fn words(&mut self) -> &mut [u64] {
        // SAFETY: `words` u64s inside frames this bitmap owns exclusively (see `new`).
        unsafe { core::slice::from_raw_parts_mut(self.pa as *mut u64, self.words) }
    }
}

impl Drop for Bitmap {
    fn drop(&mut self) {
        FRAMES.lock().dealloc((self.pa / PAGE) as usize, self.frames);
    }
}

/// Dirty logging on one slot.
pub struct Log {
    /// Manual-protect with initially-set (scenario 2): clears split eagerly.
    pub manual: bool,
    /// Eager splitting (at enable, or at each clear in scenario 2).
    pub eager: bool,
    /// One bit per page of the slot.
    pub dirty: Bitmap,
}
