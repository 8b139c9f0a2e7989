//! `map_fresh_page`: a page fault's first touch of an anonymous page, whole, without an
//! operation context: the path from the root read once, the level-3 entry checked empty, and
//! only then a frame taken from the caller, its contents made visible, the entry written.

use crate::addr::{level_shift, InputAddress, PhysAddr, ENTRIES_PER_TABLE, PAGE_SHIFT, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints};
use crate::ctx::{leaf_decision, LeafDecision};
use crate::descriptor::{sw, Desc};
use crate::frame::FrameAlloc;
use crate::ops::map::summary_bits_to_clear;
use crate::table::{seeded_bug, PageTable};
use crate::tlb::{Barrier, TlbMaintenance};

/// What [`PageTable::map_fresh_page`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreshPage {
    /// The frame the caller's allocator gave now maps the page (its address).
    Mapped(PhysAddr),
    /// Something is there already (a page, a PROT_NONE marker, any non-empty entry): nothing
    /// was allocated or written.
    Occupied,
    /// The allocator gave no frame: nothing was written.
    NoFrame,
    /// Not this path's case, nothing allocated or written: an entry on the way is not a table
    /// (no level-3 table yet, or a block), a table on the way carries a summary bit the new
    /// page contradicts, the table's policy wants maintenance for a new entry (flush elision
    /// off), or the address is not a page of the table's range. [`PageTable::map`] does all
    /// of these.
    Declined,
}

/// A page descriptor of one table's regime with output 0, encoded once
/// ([`PageTable::page_leaf`]) for [`PageTable::map_fresh_leaf`]: a caller that maps page after
/// page with a few sets of attributes keeps one per set and skips the encoding and its
/// comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLeaf {
    desc: Desc,
    /// "No writable leaf below" summaries this page contradicts.
    clear: u64,
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// The page descriptor of `attrs` in this table's regime, for [`PageTable::map_fresh_leaf`].
    ///
    /// # Errors
    /// [`crate::Error::InvalidAttributes`]: `attrs` not expressible in the regime.
    pub fn page_leaf(&mut self, attrs: Attributes) -> Result<PageLeaf, crate::Error> {
        let desc = crate::descriptor::encode_leaf(self.regime(), PhysAddr::new(0), attrs, 3, false)?;
        Ok(PageLeaf { desc, clear: summary_bits_to_clear(attrs, Constraints::PAGES_ONLY) })
    }

    /// Maps one fresh page at `addr` with `attrs`, in the level-3 table that already holds
    /// its entry, with a zeroed frame from the table's allocator (`FrameAlloc::alloc_zeroed`):
    /// a demand-zero fault's page. The order, on a live table:
    ///
    /// 1. the path from the root to the level-3 entry is read (each entry once) and the entry
    ///    must be empty; the flush decision for empty -> page must need no maintenance
    ///    (`leaf_decision`: elided, as flush elision says for an invalid old entry). Nothing
    ///    is allocated before, so a page mapped meanwhile costs no frame;
    /// 2. the allocator gives the zeroed frame;
    /// 3. `DSB ISHST`: the frame's contents (its zeroing) are visible to every observer before
    ///    the descriptor is, so another CPU of the address space whose walk finds the new entry
    ///    reads zeros, never what the frame held before (the model checker reports a page
    ///    mapped before its contents were published);
    /// 4. the descriptor is written (invalid -> valid: no TLBI; no TLB can hold an invalid
    ///    entry);
    /// 5. `DSB ISHST`: the entry is visible to every walker before this returns, so the
    ///    faulting access does not fault again. No `ISB`: the caller returns to the access
    ///    through an exception return (a context synchronization event) and must not use the
    ///    new translation before one. [`PageTable::map`] ends with `DSB ISHST; ISB` instead.
    ///
    /// The caller holds whatever serializes operations on this table (the address space's
    /// lock): a concurrent unmap could otherwise free the level-3 table between 1 and 4.
    /// Counts one descriptor write and one elided flush; no walk, so no walk visits.
    pub fn map_fresh_page<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, addr: K, attrs: Attributes) -> FreshPage {
        match self.page_leaf(attrs) {
            Ok(leaf) => self.map_fresh_leaf(tlb, addr, leaf),
            Err(_) => FreshPage::Declined,
        }
    }

    /// [`PageTable::map_fresh_page`] with its attributes encoded already (`leaf`, from this
    /// table's [`PageTable::page_leaf`]).
    #[inline(always)]
    pub fn map_fresh_leaf<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, addr: K, leaf: PageLeaf) -> FreshPage {
        // The path's levels as constants: each level's shift and mask folds into its load.
        match self.regime().start_level() {
            0 => self.fresh_from::<0, T>(tlb, addr, leaf),
            _ => self.fresh_from::<1, T>(tlb, addr, leaf),
        }
    }

    /// [`PageTable::map_fresh_page`] of a table whose root is at level `START`.
    #[inline(always)]
    fn fresh_from<const START: usize, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        addr: K,
        leaf: PageLeaf,
    ) -> FreshPage {
        debug_assert_eq!(START, self.regime().start_level());
        let regime = self.regime();
        let raw = addr.raw();
        // Below the base the offset wraps past the span.
        let off = raw.wrapping_sub(regime.input_base());
        if !raw.is_multiple_of(PAGE_SIZE) || off >= regime.input_span() {
            return FreshPage::Declined;
        }
        let template = leaf.desc;
        let mut clear = leaf.clear;
        if seeded_bug!(self, KeepNoWritable) {
            clear &= !sw::TABLE_NO_WRITABLE;
        }
        let mut table = self.root();
        for level in START..=2 {
            let mut index = (off >> level_shift(level)) as usize;
            if level != START {
                index &= ENTRIES_PER_TABLE - 1;
            }
            let d = Desc(self.frames().read_desc(table, index));
            // A table descriptor (bits 1:0 = 0b11) without a summary bit to clear, in one test.
            if d.0 & (clear | 0b11) != 0b11 {
                return FreshPage::Declined;
            }
            debug_assert!(d.is_table(level));
            table = d.addr();
        }
        let i = ((off >> PAGE_SHIFT) as usize) & (ENTRIES_PER_TABLE - 1);
        let old = Desc(self.frames().read_desc(table, i));
        if !old.is_empty() {
            return FreshPage::Occupied;
        }
        #[cfg(any(test, feature = "seeded-bugs"))]
        let bug = self.mutation;
        #[cfg(not(any(test, feature = "seeded-bugs")))]
        let bug = ();
        let live = self.is_live();
        let decision = leaf_decision(regime, live, self.policy(), bug, old, template);
        if !matches!(decision, LeafDecision::Elided | LeafDecision::Nothing) {
            return FreshPage::Declined;
        }
        let unpublished = seeded_bug!(self, MapFreshUnpublished);
        let (frames, stats) = self.frames_and_stats();
        let Some(pa) = frames.alloc_zeroed(1) else {
            return FreshPage::NoFrame;
        };
        debug_assert!(pa.is_page_aligned(), "FrameAlloc gives page-aligned frames");
        if live && !unpublished {
            tlb.dsb(Barrier::IshSt);
        }
        frames.write_desc(table, i, template.with_addr(pa).0);
        stats.desc_writes += 1;
        if live {
            stats.flushes_elided += (decision == LeafDecision::Elided) as u64;
            tlb.dsb(Barrier::IshSt);
        }
        FreshPage::Mapped(pa)
    }
}
