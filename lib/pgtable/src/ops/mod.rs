//! Operations on a [`crate::PageTable`], each a walk with a callback, plus the shared steps:
//! building a subtree off-line and installing it (break-before-make or BBML2 direct replace),
//! and converting a contiguous range (contpte fold / unfold).

mod contpte;
pub use contpte::Leaf;
mod direct;
mod fresh;
pub use fresh::{FreshPage, PageLeaf};
mod map;
mod protect;
mod remap;
mod split;
mod unmap;

use crate::addr::{level_size, PhysAddr, CONT_ENTRIES, ENTRIES_PER_TABLE};
use crate::ctx::Ctx;
use crate::descriptor::{
    cont_level, cont_size, grants_write, is_permission_only_change, needs_flush, sw, without_write, Desc,
    IGNORED_LEAF_BITS,
};
use crate::frame::FrameAlloc;
use crate::table::seeded_bug;
use crate::tlb::TlbMaintenance;
use crate::walker::Entry;
use crate::Error;

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// The leaf at `level` mapping `pa` with the attributes (and software bits) of `block`.
    fn child_leaf(block: Desc, level: usize, pa: PhysAddr, contiguous: bool) -> Desc {
        let mut bits = block.with_addr(pa).with_contiguous(contiguous).0;
        if level == 3 {
            bits |= 0b10;
        } else {
            bits &= !0b10;
        }
        Desc(bits)
    }

    /// Builds, in frames no walker can reach, the subtree that maps exactly what the leaf
    /// `block` at `level` (input offset `off`) maps, with leaves at `to_level` (contiguous where
    /// `contiguous`); `read_only`: [`Ctx::table_of`] for its inner tables.
    fn build_subtree(
        &mut self,
        block: Desc,
        level: usize,
        off: u64,
        to_level: usize,
        (contiguous, read_only): (bool, bool),
    ) -> Result<PhysAddr, Error> {
        let child = level + 1;
        let size = level_size(child);
        if child >= to_level {
            // Leaves only: the table is filled while unreachable, plain stores into a frame
            // that needs no zeroing (the output advances by `size`, everything else is the
            // block's).
            let first = Self::child_leaf(block, child, block.addr(), contiguous && cont_level(child)).0;
            let table = self.alloc_filled_table(off, level, first, size)?;
            self.gather.note_write();
            return Ok(table);
        }
        let table = self.alloc_table(off, level)?;
        for i in 0..ENTRIES_PER_TABLE {
            let pa = PhysAddr::new(block.addr().as_u64() + i as u64 * size);
            let inner = Self::child_leaf(block, child, pa, false);
            let d = match self.build_subtree(inner, child, off + i as u64 * size, to_level, (contiguous, read_only)) {
                Ok(t) => self.table_of(t, inner, read_only),
                Err(e) => {
                    self.free_unlinked(table, child);
                    return Err(e);
                }
            };
            self.write(table, i, d);
        }
        Ok(table)
    }

    /// The table descriptor linking `table`, a subtree built from the leaf `block`: with the
    /// "no writable leaf below" summary when `read_only` (a split that write-protects) and
    /// `block` grants no write (none of its leaves does). Only there: elsewhere (a split at the
    /// end of a `protect` range) the operation may go on to write writable leaves below.
    fn table_of(&self, table: PhysAddr, block: Desc, read_only: bool) -> Desc {
        let d = Desc::table(table);
        if read_only && !grants_write(self.regime, block) {
            Desc(d.0 | sw::TABLE_NO_WRITABLE)
        } else {
            d
        }
    }

    /// Replaces the leaf of `e` (currently `old`) by the linked subtree `table`, built from the
    /// leaf `block` (`old`, or `old` without write access).
    ///
    /// Not live: plain write. Old entry invalid (PROT_NONE): `DSB ISHST`, write. BBML2: `DSB
    /// ISHST` (subtree visible), then the table replaces the block directly, no TLBI: both map
    /// the same output with the same attributes (a block losing write access is write-protected
    /// and flushed first, [`Ctx::write_protect_before_split`]). Otherwise break-before-make:
    /// invalidate, `DSB ISHST`, TLBI, `DSB ISH`, then link.
    fn install_table(&mut self, e: &Entry, old: Desc, table: PhysAddr, block: Desc, read_only: bool) {
        let new = self.table_of(table, block, read_only);
        self.stats.splits += 1;
        if !self.live {
            self.write(e.table, e.index, new);
            return;
        }
        self.publish_new_table();
        if !(self.bbml2 || seeded_bug!(self, SkipBbmOnSplit)) {
            self.break_entries(e.table, e.index, e.level, e.off, &[old]);
        } else if block != old {
            self.write_protect_before_split(e.table, e.index, e.level, e.off, &[old]);
        }
        self.write(e.table, e.index, new);
    }

    /// Splits the leaf of `e` into a table down to `to_level`. A contiguous block is unfolded
    /// first (its range no longer holds once one member is split).
    pub(crate) fn split_entry(&mut self, e: &Entry, to_level: usize, contiguous: bool) -> Result<(), Error> {
        self.split_entry_as(e, to_level, contiguous, false)
    }

    /// [`Ctx::split_entry`], the new leaves without write access when `read_only`.
    pub(crate) fn split_entry_as(
        &mut self,
        e: &Entry,
        to_level: usize,
        contiguous: bool,
        read_only: bool,
    ) -> Result<(), Error> {
        let mut old = e.desc;
        if old.is_contiguous() {
            self.convert_group(e, false);
            old = self.read_desc(e.table, e.index);
        }
        let block = if read_only { without_write(self.regime, old) } else { old };
        let table = self.build_subtree(block, e.level, e.off, to_level, (contiguous, read_only))?;
        self.install_table(e, old, table, block, read_only);
        Ok(())
    }

    /// Splits one level down, as operations do at the ends of a range.
    pub(crate) fn split_one_level(&mut self, e: &Entry) -> Result<(), Error> {
        let cont = self.policy.split_contiguous;
        self.split_entry(e, e.level + 1, cont)
    }

    /// contpte convert: rewrites the 16 entries of the contiguous group holding `e` with the
    /// contiguous bit set (`fold`) or clear. Without BBML2: clear all 16, TLBI the range, write
    /// all 16. With BBML2 only the contiguous bit changes (same output, same attributes), which
    /// BBML2 allows without break-before-make: the 16 are rewritten in place, no TLBI, and the
    /// range is never unmapped (this matters for the kernel's live linear map, whose own tables
    /// and stacks may lie in the group; our tables never get hardware AF/dirty updates, so there
    /// is nothing to collect by clearing). Entries that are not mappings are left alone.
    /// A fold happens only when the 16 are foldable: all mappings, none contiguous yet,
    /// consecutive output aligned to the group, identical attributes (checked in the same pass
    /// that reads them). Returns whether anything was rewritten.
    pub(crate) fn convert_group(&mut self, e: &Entry, fold: bool) -> bool {
        let (table, level) = (e.table, e.level);
        let first = Self::group_start(e.index);
        let changed = if self.bbml2 || !self.live {
            // In place (only the contiguous bit changes: BBML2 needs no break-before-make, and
            // nothing caches a table that is not live): one pass, read, flip, write.
            let written = flip_group(self.frames, table, first, level, fold);
            // The write accounting of `Ctx::write`, once for the group.
            self.stats.desc_writes += written;
            if written != 0 {
                self.gather.note_write();
            }
            written != 0
        } else {
            if fold && !group_foldable(&*self.frames, table, first, level) {
                return false;
            }
            self.convert_group_bbm(e, first, fold)
        };
        if changed {
            if fold {
                self.stats.folds += 1;
            } else {
                self.stats.unfolds += 1;
            }
        }
        changed
    }

    /// [`Self::convert_group`] without BBML2 on a live table: break the valid members (one TLBI
    /// of the range), then write all 16.
    fn convert_group_bbm(&mut self, e: &Entry, first: usize, fold: bool) -> bool {
        let level = e.level;
        let mut old = [Desc::INVALID; CONT_ENTRIES];
        let mut changed = false;
        for (k, o) in old.iter_mut().enumerate() {
            let d = self.read_desc(e.table, first + k);
            changed |= d.is_mapping(level) && d.is_contiguous() != fold;
            *o = d;
        }
        if !changed {
            return false;
        }
        let broken = self.break_entries(e.table, first, level, Ctx::<A, T>::group_off(e), &old);
        for (k, &d) in old.iter().enumerate() {
            let n = if d.is_mapping(level) { d.with_contiguous(fold) } else { d };
            if n != d || (broken && d.is_valid()) {
                self.write(e.table, first + k, n);
            }
        }
        true
    }

    /// Rewrites all entries of the contiguous group holding `e` through `f` (the whole group lies
    /// inside the operation's range).
    ///
    /// Under BBML2, when every change is permission-only
    /// ([`crate::descriptor::is_permission_only_change`]: same output, memory type, contiguous bit
    /// and size) or needs no flush, the entries are rewritten in place and the group stays
    /// contiguous: each change is recorded in the gather (flush elision applies), whose one
    /// flush at the end of the operation covers the whole range (cf. Linux
    /// `contpte_wrprotect_ptes`). While the writes are in flight the members disagree only in
    /// permissions, a misprogramming of the contiguous bit whose outcome with BBML2 (no TLB
    /// conflict aborts; Arm ARM DDI 0487L.a RNGLXZ, RJQQTC) is the permissions of one of the
    /// entries, old or new: the transient state of any permission change before its flush.
    /// Without BBML2 the same misprogramming may raise a TLB conflict abort, so a valid entry
    /// that changes in a way that needs a flush gets break-before-make on the whole group
    /// (members of a contiguous range may not differ, even transiently).
    #[allow(clippy::needless_range_loop)]
    pub(crate) fn repaint_group(&mut self, e: &Entry, f: impl Fn(Desc) -> Desc) -> Result<(), Error> {
        let first = Self::group_start(e.index);
        let mut old = [Desc::INVALID; CONT_ENTRIES];
        for (k, o) in old.iter_mut().enumerate() {
            *o = self.read_desc(e.table, first + k);
        }
        let new = old.map(|d| if d.is_mapping(e.level) { f(d) } else { d });
        let (mut changed, mut permission_only) = (false, true);
        for (&o, &n) in old.iter().zip(new.iter()) {
            let flush = needs_flush(o, n);
            changed |= flush || (!self.policy.flush_elision && o != n && o.is_valid());
            permission_only &= !flush || is_permission_only_change(o, n);
        }
        let needs_maintenance = self.live && changed;
        let in_place = needs_maintenance && self.bbml2 && permission_only;
        if in_place {
            let off = Ctx::<A, T>::group_off(e);
            let size = level_size(e.level);
            for k in 0..CONT_ENTRIES {
                if new[k] != old[k] {
                    self.write(e.table, first + k, new[k]);
                    self.record_leaf_change(off + k as u64 * size, e.level, old[k], new[k]);
                }
            }
            return Ok(());
        }
        let broken = needs_maintenance && self.break_entries(e.table, first, e.level, Ctx::<A, T>::group_off(e), &old);
        for k in 0..CONT_ENTRIES {
            if new[k] != old[k] || (broken && old[k].is_valid()) {
                self.write(e.table, first + k, new[k]);
            }
        }
        Ok(())
    }

    /// Whether the contiguous group holding `e` lies inside `[start, end)`.
    pub(crate) fn group_inside(e: &Entry, start: u64, end: u64) -> bool {
        let g = Ctx::<A, T>::group_off(e);
        g >= start && g + cont_size(e.level) <= end
    }
}

/// Whether the 16 entries of `table` from `first` (the head of a group, at `level`, 2 or 3) can
/// be folded: all mappings, none contiguous yet, consecutive output aligned to the group,
/// identical attributes.
pub(crate) fn group_foldable<A: FrameAlloc + ?Sized>(frames: &A, table: PhysAddr, first: usize, level: usize) -> bool {
    if level == 3 {
        foldable_at::<A, 3>(frames, table, first)
    } else {
        foldable_at::<A, 2>(frames, table, first)
    }
}

#[inline(always)]
fn foldable_at<A: FrameAlloc + ?Sized, const LEVEL: usize>(frames: &A, table: PhysAddr, first: usize) -> bool {
    let mut group = [Desc::INVALID; CONT_ENTRIES];
    for (k, d) in group.iter_mut().enumerate() {
        *d = Desc(frames.read_desc(table, first + k));
    }
    foldable::<LEVEL>(&group)
}

/// Whether the 16 descriptors of a group at `LEVEL` can be folded. Member k must be the head
/// with output head + k * size: the same kind (valid leaf or PROT_NONE), attributes and
/// contiguous bit (clear); only software bits may differ. The head is a mapping, not contiguous,
/// its output aligned to the group.
#[inline(always)]
fn foldable<const LEVEL: usize>(group: &[Desc; CONT_ENTRIES]) -> bool {
    const SAME: u64 = !IGNORED_LEAF_BITS | sw::PROT_NONE;
    let head = group[0];
    if !head.is_mapping(LEVEL) || head.is_contiguous() || !head.addr().as_u64().is_multiple_of(cont_size(LEVEL)) {
        return false;
    }
    let (bits, mut out) = (head.with_addr(PhysAddr::new(0)).0, head.addr().as_u64());
    for d in &group[1..] {
        out += level_size(LEVEL);
        if (d.0 ^ (bits | out)) & SAME != 0 {
            return false;
        }
    }
    true
}

/// The in-place contpte convert of the group of `table` from `first` at `level` (2 or 3): sets
/// (`fold`, only if the 16 are foldable, see [`group_foldable`]) or clears the contiguous bit of
/// every mapping, no maintenance (for BBML2 or a table that is not live). A fold reads the 16
/// once (check), then writes them; an unfold is one pass of read / flip / write. Returns the
/// number of entries written.
pub(crate) fn flip_group<A: FrameAlloc + ?Sized>(
    frames: &mut A,
    table: PhysAddr,
    first: usize,
    level: usize,
    fold: bool,
) -> u64 {
    match (level, fold) {
        (3, true) => fold_at::<A, 3>(frames, table, first),
        (_, true) => fold_at::<A, 2>(frames, table, first),
        (3, false) => unfold_at::<A, 3>(frames, table, first),
        (_, false) => unfold_at::<A, 2>(frames, table, first),
    }
}

#[inline(always)]
fn fold_at<A: FrameAlloc + ?Sized, const LEVEL: usize>(frames: &mut A, table: PhysAddr, first: usize) -> u64 {
    if LEVEL == 3 {
        if let Some(base) = frames.direct(table) {
            // SAFETY: the 16 entries of the group from `first` (aligned to 16) of the level-3
            // table at `table`, whose memory `direct` gives for these accesses.
            if unsafe { crate::raw::fold16(base.add(first)) } {
                return CONT_ENTRIES as u64;
            }
        }
    }
    let mut group = [Desc::INVALID; CONT_ENTRIES];
    for (k, d) in group.iter_mut().enumerate() {
        *d = Desc(frames.read_desc(table, first + k));
    }
    if !foldable::<LEVEL>(&group) {
        return 0;
    }
    for (k, d) in group.iter().enumerate() {
        frames.write_desc(table, first + k, d.with_contiguous(true).0);
    }
    CONT_ENTRIES as u64
}

#[inline(always)]
fn unfold_at<A: FrameAlloc + ?Sized, const LEVEL: usize>(frames: &mut A, table: PhysAddr, first: usize) -> u64 {
    if LEVEL == 3 {
        if let Some(base) = frames.direct(table) {
            // SAFETY: as in `fold_at`.
            if unsafe { crate::raw::unfold16(base.add(first)) } {
                return CONT_ENTRIES as u64;
            }
        }
    }
    let mut written = 0;
    for k in 0..CONT_ENTRIES {
        let d = Desc(frames.read_desc(table, first + k));
        if d.is_contiguous() && d.is_mapping(LEVEL) {
            frames.write_desc(table, first + k, d.with_contiguous(false).0);
            written += 1;
        }
    }
    written
}

#[cfg(test)]
mod tests;
