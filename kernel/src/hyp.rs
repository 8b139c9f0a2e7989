//! Typed wrappers of the hypervisor's memslot / dirty-logging calls (`abi::hypercall`), and the
//! two address helpers a guest driver needs whether its MMU is on or off: the IPA of a kernel
//! buffer, and a pointer to a memslot IPA.

use crate::arch::smccc::call;
use abi::error::HypError;
use abi::hypercall as hc;
use abi::PAGE_SIZE as PAGE;
use alloc::string::{String, ToString};
use core::fmt;

/// A hypercall's x0 as a result; any code that is not a known error is reported as such.
fn check(x0: u64) -> Result<(), HypError> {
    match abi::error::check(x0) {
        Ok(()) => Ok(()),
        Err(Ok(e)) => Err(e),
        // An unknown code is a hypervisor bug; treat it as the most generic failure.
        Err(Err(_)) => Err(HypError::NotSupported),
    }
}

/// Raw call returning x0 as `i64` (for the error-code tests).
pub fn raw(fid: u64, a1: u64, a2: u64, a3: u64) -> i64 {
    call(fid, a1, a2, a3)[0] as i64
}

pub fn memslot_create(base: u64, size: u64, backing: u64) -> Result<u64, HypError> {
    let r = call(hc::MEMSLOT_CREATE, base, size, backing);
    check(r[0]).map(|()| r[1])
}

pub fn memslot_delete(id: u64) -> Result<(), HypError> {
    check(call(hc::MEMSLOT_DELETE, id, 0, 0)[0])
}

pub fn dirty_log_enable(id: u64, flags: u64) -> Result<(), HypError> {
    check(call(hc::DIRTY_LOG_ENABLE, id, flags, 0)[0])
}

pub fn dirty_log_disable(id: u64) -> Result<(), HypError> {
    check(call(hc::DIRTY_LOG_DISABLE, id, 0, 0)[0])
}

/// Copies the dirty bitmap of slot `id` into `buf`.
pub fn dirty_log_get(id: u64, buf: &mut [u64]) -> Result<(), HypError> {
    let ipa = buffer_ipa(buf.as_ptr() as u64, buf.len() * 8).map_err(|_| HypError::InvalidParameter)?;
    let r = check(call(hc::DIRTY_LOG_GET, id, ipa, (buf.len() * 8) as u64)[0]);
    sync_buffer(buf.as_ptr() as u64, buf.len() * 8);
    r
}

/// Clears (re-protects) the pages of `mask` (bit `i` = page `first + i`), `count` pages.
pub fn dirty_log_clear(id: u64, mask: &[u64], first: u64, count: u64) -> Result<(), HypError> {
    let a = dirty_log_clear_args(id, mask, first, count)?;
    check(call(a[0], a[1], a[2], a[3])[0])
}

/// The registers x0-x3 of [`dirty_log_clear`]'s call (the mask made visible to the hypervisor),
/// for a caller that makes the call itself.
pub fn dirty_log_clear_args(id: u64, mask: &[u64], first: u64, count: u64) -> Result<[u64; 4], HypError> {
    sync_buffer(mask.as_ptr() as u64, mask.len() * 8);
    let ipa = buffer_ipa(mask.as_ptr() as u64, mask.len() * 8).map_err(|_| HypError::InvalidParameter)?;
    Ok([hc::DIRTY_LOG_CLEAR, id, ipa, first | count << 32])
}

/// Chooses the split walker and the eager-split chunk (0 keeps it); returns the previous ones.
pub fn walker_mode(mode: hc::WalkerMode, chunk: u64) -> Result<(u64, u64), HypError> {
    let r = call(hc::WALKER_MODE, mode as u64, chunk, 0);
    check(r[0]).map(|()| (r[1], r[2]))
}

pub fn counters_reset() -> Result<(), HypError> {
    check(call(hc::COUNTERS_RESET, 0, 0, 0)[0])
}

pub fn counter(c: hc::Counter) -> Result<u64, HypError> {
    let r = call(hc::COUNTER_READ, c as u64, 0, 0);
    check(r[0]).map(|()| r[1])
}

/// Whether this CPU's stage 1 is on (SCTLR_EL1.M).
pub fn mmu_on() -> bool {
    use aarch64_cpu::registers::{Readable, SCTLR_EL1};
    SCTLR_EL1.get() & 1 != 0
}

/// The IPA of kernel address `va`: itself with the MMU off, else what `AT S1E1R` says.
pub fn virt_to_phys(va: u64) -> Option<u64> {
    use aarch64_cpu::registers::{Readable, PAR_EL1};
    if !mmu_on() {
        return Some(va);
    }
    // SAFETY: `AT S1E1R` (no aarch64-cpu wrapper) only translates `va` with this CPU's stage 1
    // and writes PAR_EL1, which nothing else here relies on; the ISB makes the result visible.
    unsafe { core::arch::asm!("at s1e1r, {}", "isb", in(reg) va, options(nostack, preserves_flags)) };
    crate::arch::counters::count_other_isb();
    let par = PAR_EL1.get();
    (par & 1 == 0).then_some((par & 0x000f_ffff_ffff_f000) | (va & 0xfff))
}

/// Why a kernel buffer cannot be handed to the hypervisor ([`buffer_ipa`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferError {
    /// The buffer's first byte is not mapped.
    NotMapped { va: u64 },
    /// A later page of the buffer is not mapped.
    PageNotMapped { page: u64 },
    /// The buffer's pages are not physically consecutive.
    NotContiguous { va: u64, len: usize },
}

impl fmt::Display for BufferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BufferError::NotMapped { va } => write!(f, "buffer {va:#x} is not mapped"),
            BufferError::PageNotMapped { page } => write!(f, "buffer page {page:#x} is not mapped"),
            BufferError::NotContiguous { va, len } => write!(f, "buffer {va:#x} (+{len}) is not physically contiguous"),
        }
    }
}

/// The self-tests report errors as text.
impl From<BufferError> for String {
    fn from(e: BufferError) -> String {
        e.to_string()
    }
}

/// The IPA of a kernel buffer the hypervisor reads or writes: it must be physically contiguous.
pub fn buffer_ipa(va: u64, len: usize) -> Result<u64, BufferError> {
    let start = virt_to_phys(va).ok_or(BufferError::NotMapped { va })?;
    let mut page = va & !(PAGE - 1);
    while page < va + len as u64 {
        let pa = virt_to_phys(page.max(va)).ok_or(BufferError::PageNotMapped { page })?;
        if pa != start + (page.max(va) - va) {
            return Err(BufferError::NotContiguous { va, len });
        }
        page += PAGE;
    }
    Ok(start)
}

/// Cleans and invalidates a buffer to the point of coherency around a hypercall that reads or
/// writes it (the hypervisor does the same on its side), so either side may run uncached.
pub fn sync_buffer(va: u64, len: usize) {
    rt::cache::clean_invalidate_to_poc(va, len as u64);
}

/// A pointer through which the kernel reaches memslot IPA `ipa` (a page): the IPA itself with
/// the MMU off, else a fresh mapping of that page made by `mm`.
pub fn slot_ptr(ipa: u64) -> Result<*mut u64, crate::mm::MmError> {
    if !mmu_on() {
        return Ok(ipa as *mut u64);
    }
    crate::mm::map_phys_page(ipa).map(|va| va as *mut u64)
}
