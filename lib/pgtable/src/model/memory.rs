//! The instrumented frame store.

use std::cell::RefCell;
use std::rc::Rc;

use super::state::Model;
use crate::addr::{PhysAddr, ENTRIES_PER_TABLE};
use crate::frame::FrameAlloc;

/// Frames living in the model; every read, write, allocation and free goes through it.
#[derive(Clone)]
pub struct ModelFrames {
    pub(crate) model: Rc<RefCell<Model>>,
    /// Allocation fails past this many frames in use.
    pub limit: Option<usize>,
}

// SAFETY: `phys_to_ptr` points into the model's boxed frame, which lives (allocated or freed)
// as long as the model; reads and writes are overridden and never use it.
unsafe impl FrameAlloc for ModelFrames {
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        let mut m = self.model.borrow_mut();
        if let Some(limit) = self.limit {
            if m.frames_in_use + pages > limit {
                return None;
            }
        }
        m.alloc(pages).map(PhysAddr::new)
    }
    fn free(&mut self, pa: PhysAddr, pages: usize) {
        self.model.borrow_mut().free(pa.as_u64(), pages)
    }
    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64 {
        let mut m = self.model.borrow_mut();
        match m.frames.get_mut(&pa.as_u64()) {
            Some(f) => f.data.as_mut_ptr(),
            None => core::ptr::null_mut(),
        }
    }
    fn read_desc(&self, table: PhysAddr, index: usize) -> u64 {
        self.model.borrow_mut().read(table.as_u64(), index)
    }
    fn write_desc(&mut self, table: PhysAddr, index: usize, value: u64) {
        self.model.borrow_mut().write(table.as_u64(), index, value)
    }
    /// Entry by entry through the model, so it records (and checks) every write.
    fn alloc_filled(&mut self, first: u64, step: u64) -> Option<PhysAddr> {
        let t = self.alloc_zeroed(1)?;
        for i in 0..ENTRIES_PER_TABLE {
            self.write_desc(t, i, first.wrapping_add(i as u64 * step));
        }
        Some(t)
    }
}
