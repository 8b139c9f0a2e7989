//! Dirty logging on memslots (`lib/abi`'s hypercall module documents the calls and errors):
//!
//! * scenario 1, enable: write-protect the slot, then split every block eagerly (`split`);
//! * scenario 2, manual-protect with initially-set: enable sets every dirty bit and changes no
//!   mapping; each clear write-protects and splits only the cleared pages, 64 pages at a time.
//!
//! A write to a protected page faults to EL2 ([`handle_write_fault`]): the page's dirty bit is
//! set, the page made writable with a local TLBI (other CPUs may keep the read-only entry and
//! take a spurious fault, handled the same way), and the guest resumes. The bitmap arithmetic
//! is `hypcore::dirty`'s.
//!
//! Lock order: `memslot::SLOTS` before `mmu::STAGE2`.

use crate::counters::DIRTY;
use crate::mem::{Range, PAGE};
use crate::memslot::{guest_buffer, ipa, SLOTS};
use crate::mmu::STAGE2;
use crate::slotlog::{Bitmap, Log};
use crate::split::{self, SlotMapping, WalkerOpts};
use abi::error::HypError;
use abi::hypercall as hc;
use core::sync::atomic::Ordering;
use hypcore::dirty::{self as bits, BufferStep, ClearRequest};
use pgtable::hw::HwTlb;
use pgtable::{Barrier, CrossingBlocks, Perms, Shareability, TlbFeatures, TlbMaintenance, Tlbi, TlbiOp};
use spin::Once;

pub use crate::split::set_check_split;

/// The guest's VMID (`mmu::setup`).
const VMID: u16 = 1;

/// DIRTY_LOG_ENABLE.
pub fn enable(id: u64, flags: u64) -> Result<(), HypError> {
    enable_slot(id, flags, false)
}

/// DIRTY_LOG_ENABLE on any slot (`internal`: the guest-RAM slot too, for the hypervisor's own
/// callers).
pub fn enable_slot(id: u64, flags: u64, internal: bool) -> Result<(), HypError> {
    if flags & !(hc::DIRTY_LOG_MANUAL_PROTECT | hc::DIRTY_LOG_EAGER_SPLIT) != 0 {
        return Err(HypError::InvalidParameter);
    }
    let opts = split::walker();
    let mut st = SLOTS.lock();
    let slot = if internal { st.get_any_mut(id)? } else { st.get_mut(id)? };
    if slot.log.is_some() {
        return Err(HypError::Busy);
    }
    let manual = flags & hc::DIRTY_LOG_MANUAL_PROTECT != 0;
    let eager = flags & hc::DIRTY_LOG_EAGER_SPLIT != 0;
    let mut dirty = Bitmap::new(slot.pages()).ok_or(HypError::NoMemory)?;
    if manual {
        // Initially-set: every page counts as dirty until the first clear protects it.
        bits::set_all(dirty.words(), slot.pages());
    } else {
        let mut guard = STAGE2.lock();
        let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
        let mut tlb = HwTlb::detect();
        if eager {
            // The split builds the blocks' pages read-only: no walk over the blocks to
            // write-protect them first. The write-protect after it takes what the split leaves
            // (pages already there, blocks crossing the slot's ends) and skips the new tables;
            // it runs even when the split failed, so the slot is protected whatever happens.
            let r = split::split_range(s2, &mut tlb, slot.range(), opts, true);
            let w = split::write_protect(s2, &mut tlb, slot.range(), CrossingBlocks::Split);
            s2.frames_mut().drain();
            r?;
            w?;
            split::check_split(s2, slot.range(), SlotMapping::of(slot));
        } else {
            split::write_protect(s2, &mut tlb, slot.range(), CrossingBlocks::Split)?;
        }
    }
    slot.log = Some(Log { manual, eager, dirty });
    Ok(())
}

/// DIRTY_LOG_DISABLE: stops tracking; pages stay as they are (split, possibly read-only) and
/// become writable again on their next write fault, as in KVM.
pub fn disable(id: u64) -> Result<(), HypError> {
    disable_slot(id, false)
}

/// DIRTY_LOG_DISABLE on any slot (see [`enable_slot`]).
pub fn disable_slot(id: u64, internal: bool) -> Result<(), HypError> {
    let mut st = SLOTS.lock();
    let slot = if internal { st.get_any_mut(id)? } else { st.get_mut(id)? };
    if slot.log.take().is_none() {
        return Err(HypError::InvalidParameter);
    }
    Ok(())
}

/// Clean + invalidate `[start, start + len)` to the point of coherency: the guest may access
/// its buffers with its MMU (and so its caches) off.
fn sync_guest_buffer(start: u64, len: u64) {
    rt::cache::clean_invalidate_to_poc(start, len);
}

/// DIRTY_LOG_GET: copies the bitmap (bit `i` = page `i`, 64-bit little-endian words).
pub fn get(id: u64, buf: u64, len: u64) -> Result<(), HypError> {
    let mut st = SLOTS.lock();
    let slot = st.get_mut(id)?;
    let pages = slot.pages();
    let log = slot.log.as_mut().ok_or(HypError::InvalidParameter)?;
    let need = bits::words_for(pages) * 8;
    let words = log.dirty.words();
    for step in bits::GET_STEPS {
        match step {
            BufferStep::Check => {
                guest_buffer(buf, len)?;
                if len < need {
                    return Err(HypError::InvalidParameter);
                }
            }
            // SAFETY: the check made sure [buf, buf + len) is guest RAM (mapped RW at EL2,
            // never the hypervisor's), 8-byte aligned, and `need <= len` bytes are written.
            BufferStep::Access => unsafe {
                core::ptr::copy_nonoverlapping(words.as_ptr(), buf as *mut u64, words.len())
            },
            BufferStep::CleanInvalidate => sync_guest_buffer(buf, need),
        }
    }
    Ok(())
}

/// DIRTY_LOG_CLEAR: `arg` = first page (bits 31:0) | page count << 32; `mask` = the guest
/// address of the mask words.
pub fn clear(id: u64, mask: u64, arg: u64) -> Result<(), HypError> {
    // The steps before the words are read (`clear_slot` reads them after `check`).
    let check = |req: &ClearRequest| {
        for step in bits::CLEAR_STEPS {
            match step {
                BufferStep::Check => guest_buffer(mask, req.mask_bytes())?,
                BufferStep::CleanInvalidate => sync_guest_buffer(mask, req.mask_bytes()),
                BufferStep::Access => break,
            }
        }
        Ok(())
    };
    // SAFETY: `check` made sure the whole mask lies in guest RAM, mapped at EL2; the guest may
    // change it concurrently, which only changes what is cleared.
    let word = |w: u64| unsafe { core::ptr::read_volatile((mask as *const u64).add(w as usize)) };
    clear_slot(id, false, (arg & 0xffff_ffff, arg >> 32), check, word)
}

/// A clear of `count` pages from `first` on slot `id` (`internal`: the guest-RAM slot may be
/// named), once `check` accepted the request; `word(w)` is mask word `w`.
fn clear_slot(
    id: u64,
    internal: bool,
    (first, count): (u64, u64),
    check: impl FnOnce(&ClearRequest) -> Result<(), HypError>,
    word: impl Fn(u64) -> u64,
) -> Result<(), HypError> {
    let opts = split::walker();
    let mut st = SLOTS.lock();
    let slot = if internal { st.get_any_mut(id)? } else { st.get_mut(id)? };
    let m = SlotMapping::of(slot);
    let pages = slot.pages();
    let log = slot.log.as_mut().ok_or(HypError::InvalidParameter)?;
    let req = ClearRequest::new(first, count, pages)?;
    check(&req)?;
    let mut guard = STAGE2.lock();
    let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
    let mut tlb = HwTlb::detect();
    let r = clear_words(s2, &mut tlb, log, m, &req, word, opts);
    s2.frames_mut().drain();
    r
}

/// The hypervisor's own dirty-log calls on any slot (the guest-RAM slot included), with the
/// bitmap and masks in its own memory.
pub mod internal {
    use super::*;

    /// Copies slot `id`'s dirty bitmap into `out` (resized to the bitmap's words); returns the
    /// number of dirty pages.
    pub fn get(id: u64, out: &mut alloc::vec::Vec<u64>) -> Result<u64, HypError> {
        let mut st = SLOTS.lock();
        let slot = st.get_any_mut(id)?;
        let log = slot.log.as_mut().ok_or(HypError::InvalidParameter)?;
        let words = log.dirty.words();
        out.clear();
        out.extend_from_slice(words);
        Ok(words.iter().map(|w| u64::from(w.count_ones())).sum())
    }

    /// DIRTY_LOG_CLEAR of `count` pages from `first` with the mask words `mask` (bit `i` of
    /// word `w` = page `first + 64 w + i`): clears those bits and write-protects (and, with
    /// manual protect and eager split, splits) those pages, flushed before it returns.
    pub fn clear(id: u64, first: u64, count: u64, mask: &[u64]) -> Result<(), HypError> {
        let check = |req: &ClearRequest| {
            if (mask.len() as u64) < req.mask_words() {
                return Err(HypError::InvalidParameter);
            }
            Ok(())
        };
        clear_slot(id, true, (first, count), check, |w| mask[w as usize])
    }

    /// Write-protects all of slot `id` (flushed everywhere before it returns) without touching
    /// its bitmap: from here every guest write to it faults.
    pub fn protect_all(id: u64) -> Result<(), HypError> {
        let mut st = SLOTS.lock();
        let slot = st.get_any_mut(id)?;
        let r = slot.range();
        let mut guard = STAGE2.lock();
        let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
        split::write_protect(s2, &mut HwTlb::detect(), r, CrossingBlocks::Split)
    }
}

/// The loop of [`clear`], over the mask's words.
fn clear_words(
    s2: &mut crate::memslot::S2,
    tlb: &mut HwTlb,
    log: &mut Log,
    slot: SlotMapping,
    req: &ClearRequest,
    mask: impl Fn(u64) -> u64,
    opts: WalkerOpts,
) -> Result<(), HypError> {
    // As KVM: only with initially-set do clears split (otherwise enable already did).
    let split_here = log.manual && log.eager;
    // As KVM: protect (and split) from the first to the last cleared page of each word. Words
    // whose spans touch go as one run (`hypcore::dirty::clear`): one walk and one flush instead
    // of one per 64 pages. Splitting too: the split builds the pages of the blocks inside the
    // run read-only at once (no write-protect walk over the blocks first, nor a clear of write
    // in each new page), then the write-protect takes the rest of the run (pages already there,
    // the inside part of blocks crossing its ends, which the split left writable: nothing
    // outside the run becomes read-only) and skips the new tables. It runs even when the split
    // failed (its bits are clear already): blocks left then are protected whole, which needs no
    // memory. Without the split, blocks crossing the ends are split one level.
    let protect = |lo: u64, hi: u64| -> Result<(), HypError> {
        let r = Range::new(slot.base + lo * PAGE, slot.base + hi * PAGE);
        if split_here {
            let s = split::split_range(s2, tlb, r, opts, true);
            split::write_protect(s2, tlb, r, CrossingBlocks::ProtectWhole)?;
            s?;
            split::check_split(s2, r, slot);
        } else {
            split::write_protect(s2, tlb, r, CrossingBlocks::Split)?;
        }
        Ok(())
    };
    // The words' bits cleared before their pages are protected, each word read once
    // (`hypcore::dirty::clear`).
    let words = log.dirty.words();
    bits::clear(req, mask, |i, b| words[i] &= !b, protect)
}

/// TLB maintenance on this CPU only: the inner-shareable forms become local ones. For a
/// permission *relaxation* (read-only -> writable): another CPU that still holds the read-only
/// entry takes a spurious permission fault, which [`handle_write_fault`] absorbs.
struct LocalTlb(HwTlb);

impl TlbMaintenance for LocalTlb {
    fn tlbi(&mut self, op: Tlbi) {
        self.0.tlbi(Tlbi { sh: Shareability::Local, ..op })
    }
    fn dsb(&mut self, b: Barrier) {
        self.0.dsb(match b {
            Barrier::Ish => Barrier::Nsh,
            Barrier::IshSt => Barrier::NshSt,
            other => other,
        })
    }
    fn isb(&mut self) {
        self.0.isb()
    }
    fn features(&self) -> TlbFeatures {
        self.0.features()
    }
}

/// Who may hold guest writes for a while (`migrate`'s stop-and-copy): asked first by
/// [`handle_write_fault`]. Installed by that user ([`set_hold`]) so that the mechanism does not
/// import its consumer.
static HOLD: Once<fn(u64) -> bool> = Once::new();

/// Installs `holding`: while it answers true for a faulting IPA, the write fault leaves the
/// page read-only (the guest retries).
pub fn set_hold(holding: fn(u64) -> bool) {
    HOLD.call_once(|| holding);
}

/// A guest write faulted on a stage-2 permission fault at `fault_ipa`. Returns whether it was a
/// write to a protected memslot page (logging, or left protected by a disabled log), now
/// handled (the guest retries the write); `false` leaves it to the caller to report.
pub fn handle_write_fault(fault_ipa: u64) -> bool {
    let mut st = SLOTS.lock();
    let Some(slot) = st.containing(fault_ipa) else {
        return false;
    };
    if HOLD.get().is_some_and(|holding| holding(fault_ipa)) {
        // The guest is stopped for the last copy: leave the page read-only; the write retries
        // and waits until the copy is over.
        return true;
    }
    let base = slot.base;
    let writable = SlotMapping::of(slot).writable();
    // A slot whose log was disabled keeps its read-only pages until they are written: make them
    // writable then, without marking anything dirty (as KVM).
    let log = slot.log.as_mut();
    let page_ipa = fault_ipa & !(PAGE - 1);
    let page = (page_ipa - base) / PAGE;
    let mut guard = STAGE2.lock();
    let Some(s2) = guard.as_mut() else {
        return false;
    };
    let Some(t) = s2.translate(ipa(page_ipa)) else {
        return false;
    };
    DIRTY.faults.fetch_add(1, Ordering::Relaxed);
    let mut local = LocalTlb(HwTlb::detect());
    if t.attrs.perms.contains(Perms::WRITE) {
        // Spurious: another CPU made the page writable; drop this CPU's read-only entry.
        local.tlbi(Tlbi {
            op: TlbiOp::Ipas2e1 { vmid: VMID, ipa: ipa(page_ipa) },
            leaf_only: true,
            sh: Shareability::Local,
        });
        local.dsb(Barrier::Nsh);
        local.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: Some(VMID) }, leaf_only: false, sh: Shareability::Local });
        local.dsb(Barrier::Nsh);
        local.isb();
    } else {
        if t.level < 3 {
            // A block still write-protected (logging without eager split): split it (break-
            // before-make, broadcast: every CPU may hold the block).
            let mut tlb = HwTlb::detect();
            if s2.frames_mut().top_up(split::pages_needed(t.size)) {
                let _ = s2.split(&mut tlb, ipa(page_ipa), PAGE, 3, false);
            }
            s2.frames_mut().drain();
        }
        if s2.protect(&mut local, ipa(page_ipa), PAGE, writable).is_err() {
            return false;
        }
        local.isb();
    }
    if let Some(log) = log {
        log.dirty.words()[(page / 64) as usize] |= 1 << (page % 64);
    }
    true
}

/// A stage-2 translation fault at `fault_ipa`: inside a memslot, the entry may have been in the
/// middle of a break-before-make (a split by another CPU, which holds the stage-2 lock until
/// the new table is installed). Returns true when the IPA translates now (the guest retries);
/// false leaves the fault to be reported.
pub fn handle_translation_fault(fault_ipa: u64) -> bool {
    let mut st = SLOTS.lock();
    if st.containing(fault_ipa).is_none() {
        return false;
    }
    let guard = STAGE2.lock();
    guard.as_ref().is_some_and(|s2| s2.translate(ipa(fault_ipa & !(PAGE - 1))).is_some())
}
