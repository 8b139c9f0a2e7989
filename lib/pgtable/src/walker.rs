//! The one depth-first walker (cf. Linux KVM `kvm_pgtable_walk`).
//!
//! Behaviour comes from [`WalkFlags`]: `LEAF` visits every non-table entry (valid or not),
//! `TABLE_PRE` / `TABLE_POST` visit table entries before / after their children, and
//! `skip_level(n)` never visits entries of level `n` (nor descends into tables holding them);
//! `SKIP_NO_BLOCKS` does not descend into tables whose summary bit says they hold no block.
//! After a callback that wrote a descriptor the entry is re-read (as KVM's walker does): a block
//! the callback replaced by a table is then descended, an entry it removed is not. A callback
//! that wrote nothing costs no second load.
//!
//! Per entry the walker does one load, the decision and the callback; visit counts are kept in
//! registers and added once per table. Level-3 tables (which hold no tables) are walked by a
//! tight loop of their own. A callback may also handle a whole subtree itself (e.g. a level-3
//! table as one loop over its 512 raw descriptors) and tell the walker not to descend
//! ([`WalkState::take_skip`]).

use crate::addr::{level_size, PhysAddr, ENTRIES_PER_TABLE, PAGE_SIZE};
use crate::descriptor::Desc;
use crate::frame::FrameAlloc;
use crate::regime::Regime;
use crate::Error;

/// Which entries a walk visits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WalkFlags(u16);

impl WalkFlags {
    /// Visit non-table entries (blocks, pages, invalid entries).
    pub const LEAF: WalkFlags = WalkFlags(1 << 0);
    /// Visit table entries before their children.
    pub const TABLE_PRE: WalkFlags = WalkFlags(1 << 1);
    /// Visit table entries after their children.
    pub const TABLE_POST: WalkFlags = WalkFlags(1 << 2);
    /// Do not descend into table entries whose summary says their subtree holds no block
    /// ([`crate::descriptor::sw::TABLE_NO_BLOCKS`]); they are counted in [`WalkStats::skipped`].
    pub const SKIP_NO_BLOCKS: WalkFlags = WalkFlags(1 << 3);

    /// Never visit entries at `level` (0..=3), nor descend into the tables that hold them.
    pub const fn skip_level(level: usize) -> WalkFlags {
        WalkFlags(1 << (4 + level))
    }
    /// Visit the non-table entries at `level` (0..=3) without calling the callback for them:
    /// each is loaded and counted, and the walk goes on (for a callback that ignores that level,
    /// e.g. a split's target level: no entry struct built, no call).
    pub const fn quiet_level(level: usize) -> WalkFlags {
        WalkFlags(1 << (8 + level))
    }
    /// Union.
    pub const fn with(self, other: WalkFlags) -> WalkFlags {
        WalkFlags(self.0 | other.0)
    }
    /// Whether all flags of `other` are set.
    pub const fn contains(self, other: WalkFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether entries of `level` are skipped.
    pub const fn skips(self, level: usize) -> bool {
        self.contains(WalkFlags::skip_level(level))
    }
    /// Whether leaves of `level` are visited without the callback.
    pub const fn quiet(self, level: usize) -> bool {
        self.contains(WalkFlags::quiet_level(level))
    }
}

impl core::ops::BitOr for WalkFlags {
    type Output = WalkFlags;
    fn bitor(self, rhs: WalkFlags) -> WalkFlags {
        self.with(rhs)
    }
}

/// Why a callback is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    /// A non-table entry.
    Leaf = 0,
    /// A table entry, before its children.
    TablePre = 1,
    /// A table entry, after its children.
    TablePost = 2,
}

/// Visits by level (0..=3) and kind ([`Visit`] as index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// `visits[level][kind]`.
    pub visits: [[u64; 3]; 4],
    /// Table entries at `level` not descended because of [`WalkFlags::SKIP_NO_BLOCKS`].
    pub skipped: [u64; 4],
}

impl WalkStats {
    /// Visits at one level, all kinds.
    pub fn at_level(&self, level: usize) -> u64 {
        self.visits[level].iter().sum()
    }
    /// All visits.
    pub fn total(&self) -> u64 {
        (0..4).map(|l| self.at_level(l)).sum()
    }
}

/// One visited entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Table holding the entry.
    pub table: PhysAddr,
    /// Index in that table.
    pub index: usize,
    /// Level of the entry.
    pub level: usize,
    /// Input offset of the first byte the entry covers (relative to the regime's base).
    pub off: u64,
    /// The descriptor when the callback was called.
    pub desc: Desc,
    /// Why it is visited.
    pub visit: Visit,
}

impl Entry {
    /// Bytes the entry covers.
    pub const fn size(&self) -> u64 {
        level_size(self.level)
    }
    /// One past the last input offset covered.
    pub const fn end(&self) -> u64 {
        self.off + self.size()
    }
    /// Whether the entry lies entirely inside `[start, end)`.
    pub const fn inside(&self, start: u64, end: u64) -> bool {
        self.off >= start && self.end() <= end
    }
}

/// What the walker walks: something that reads descriptors and keeps the visit counters. The
/// callback receives the same state mutably, so it can rewrite entries.
pub trait WalkState {
    /// Reads descriptor `index` of `table`.
    fn read(&self, table: PhysAddr, index: usize) -> Desc;
    /// The visit counters.
    fn walk_stats(&mut self) -> &mut WalkStats;
    /// A number that changes whenever a descriptor is written through this state (e.g. a write
    /// counter): the walker re-reads an entry after a callback only when it changed. A state
    /// whose callbacks may write must implement it; the default (nothing is ever written) suits
    /// read-only walks.
    fn writes(&self) -> u64 {
        0
    }
    /// Whether the callback just called asked the walker not to descend into the entry it
    /// visited (it handled the subtree itself); the request is consumed.
    fn take_skip(&mut self) -> bool {
        false
    }
}

/// A read-only [`WalkState`] over a frame allocator.
pub struct ReadOnly<'a, A: FrameAlloc + ?Sized> {
    /// Where the tables are.
    pub frames: &'a A,
    /// Visit counters.
    pub stats: WalkStats,
}

impl<A: FrameAlloc + ?Sized> WalkState for ReadOnly<'_, A> {
    fn read(&self, table: PhysAddr, index: usize) -> Desc {
        Desc(self.frames.read_desc(table, index))
    }
    fn walk_stats(&mut self) -> &mut WalkStats {
        &mut self.stats
    }
}

/// Walks input offsets `[start, end)` (relative to the regime's base) of the tables rooted at
/// `root`, calling `cb` for the entries `flags` selects.
pub fn walk<S, F>(
    state: &mut S,
    regime: Regime,
    root: PhysAddr,
    start: u64,
    end: u64,
    flags: WalkFlags,
    cb: &mut F,
) -> Result<(), Error>
where
    S: WalkState,
    F: FnMut(&mut S, &Entry) -> Result<(), Error>,
{
    if start >= end {
        return Ok(());
    }
    if end > regime.input_span() {
        let base = regime.input_base();
        return Err(Error::OutOfRange {
            arg: crate::error::Arg::End,
            value: base.wrapping_add(end),
            limit: base.wrapping_add(regime.input_span()),
        });
    }
    let w = Walker { flags, start, end };
    w.table(state, root, regime.start_level(), 0, regime.root_entries(), cb)
}

struct Walker {
    flags: WalkFlags,
    start: u64,
    end: u64,
}

impl Walker {
    fn table<S: WalkState, F>(
        &self,
        state: &mut S,
        table: PhysAddr,
        level: usize,
        base: u64,
        entries: usize,
        cb: &mut F,
    ) -> Result<(), Error>
    where
        F: FnMut(&mut S, &Entry) -> Result<(), Error>,
    {
        let size = level_size(level);
        let table_end = base + entries as u64 * size;
        let lo = self.start.max(base);
        let hi = self.end.min(table_end);
        if lo >= hi {
            return Ok(());
        }
        let first = ((lo - base) / size) as usize;
        let last = ((hi - 1 - base) / size) as usize;
        if level == 3 {
            return self.leaf_table(state, table, base, first, last, cb);
        }
        for index in first..=last {
            self.entry(state, table, index, level, base + index as u64 * size, cb)?;
        }
        Ok(())
    }

    /// Entries `first..=last` of a level-3 table: one load and the callback each, no re-read
    /// (a level-3 entry is never descended), visits counted once for the table.
    #[inline(always)]
    fn leaf_table<S: WalkState, F>(
        &self,
        state: &mut S,
        table: PhysAddr,
        base: u64,
        first: usize,
        last: usize,
        cb: &mut F,
    ) -> Result<(), Error>
    where
        F: FnMut(&mut S, &Entry) -> Result<(), Error>,
    {
        if !self.flags.contains(WalkFlags::LEAF) {
            return Ok(());
        }
        if self.flags.quiet(3) {
            // Visited, not called back: one load each (the decision is the flag's).
            for index in first..=last {
                // A volatile load: never elided, whatever becomes of the value.
                let _ = state.read(table, index);
            }
            state.walk_stats().visits[3][Visit::Leaf as usize] += (last + 1 - first) as u64;
            return Ok(());
        }
        let mut result = Ok(());
        let mut index = first;
        while index <= last {
            let desc = state.read(table, index);
            let e = Entry { table, index, level: 3, off: base + index as u64 * PAGE_SIZE, desc, visit: Visit::Leaf };
            if let Err(err) = cb(state, &e) {
                result = Err(err);
                index += 1;
                break;
            }
            index += 1;
        }
        state.walk_stats().visits[3][Visit::Leaf as usize] += (index - first) as u64;
        result
    }

    /// Calls `cb` for `e`; returns the entry as it is afterwards (re-read only when the callback
    /// wrote something) and whether the callback asked not to descend.
    #[inline(always)]
    fn visit<S: WalkState, F>(
        &self,
        state: &mut S,
        mut e: Entry,
        visit: Visit,
        cb: &mut F,
    ) -> Result<(Desc, bool), Error>
    where
        F: FnMut(&mut S, &Entry) -> Result<(), Error>,
    {
        e.visit = visit;
        state.walk_stats().visits[e.level][visit as usize] += 1;
        let w = state.writes();
        cb(state, &e)?;
        let skip = state.take_skip();
        if state.writes() == w {
            return Ok((e.desc, skip));
        }
        Ok((state.read(e.table, e.index), skip))
    }

    fn entry<S: WalkState, F>(
        &self,
        state: &mut S,
        table: PhysAddr,
        index: usize,
        level: usize,
        off: u64,
        cb: &mut F,
    ) -> Result<(), Error>
    where
        F: FnMut(&mut S, &Entry) -> Result<(), Error>,
    {
        let mut desc = state.read(table, index);
        let mut e = Entry { table, index, level, off, desc, visit: Visit::Leaf };
        if desc.is_table(level) && self.flags.contains(WalkFlags::TABLE_PRE) {
            let skip;
            (desc, skip) = self.visit(state, e, Visit::TablePre, cb)?;
            if skip {
                return Ok(());
            }
            e.desc = desc;
        }
        if !desc.is_table(level) {
            if self.flags.contains(WalkFlags::LEAF) && self.flags.quiet(level) {
                state.walk_stats().visits[level][Visit::Leaf as usize] += 1;
            } else if self.flags.contains(WalkFlags::LEAF) {
                let skip;
                (desc, skip) = self.visit(state, e, Visit::Leaf, cb)?;
                if skip {
                    return Ok(());
                }
                e.desc = desc;
            }
            if !desc.is_table(level) {
                return Ok(());
            }
        }
        if self.flags.skips(level + 1) {
            return Ok(());
        }
        if self.flags.contains(WalkFlags::SKIP_NO_BLOCKS) && desc.is_table_without_blocks(level) {
            state.walk_stats().skipped[level] += 1;
            return Ok(());
        }
        self.table(state, desc.addr(), level + 1, off, ENTRIES_PER_TABLE, cb)?;
        if self.flags.contains(WalkFlags::TABLE_POST) {
            let desc = state.read(table, index);
            if desc.is_table(level) {
                e.desc = desc;
                self.visit(state, e, Visit::TablePost, cb)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::{level_size, PAGE_SIZE};
    use crate::frame::HeapFrames;
    use std::vec::Vec;

    struct State {
        frames: HeapFrames,
        stats: WalkStats,
        log: Vec<(usize, Visit, u64)>,
        writes: u64,
    }

    impl WalkState for State {
        fn read(&self, table: PhysAddr, index: usize) -> Desc {
            Desc(self.frames.read_desc(table, index))
        }
        fn walk_stats(&mut self) -> &mut WalkStats {
            &mut self.stats
        }
        fn writes(&self) -> u64 {
            self.writes
        }
    }

    /// Root (level 0) -> L1 table -> one 2 MiB block at 0 and one L3 table at 2 MiB.
    fn build() -> (State, PhysAddr) {
        let mut frames = HeapFrames::new();
        let root = frames.alloc_zeroed(1).unwrap();
        let l1 = frames.alloc_zeroed(1).unwrap();
        let l2 = frames.alloc_zeroed(1).unwrap();
        let l3 = frames.alloc_zeroed(1).unwrap();
        frames.write_desc(root, 0, Desc::table(l1).0);
        frames.write_desc(l1, 0, Desc::table(l2).0);
        frames.write_desc(l2, 0, 0x4000_0000 | 0b01); // block
        frames.write_desc(l2, 1, Desc::table(l3).0);
        frames.write_desc(l3, 5, 0x5000_0000 | 0b11); // page
        (State { frames, stats: WalkStats::default(), log: Vec::new(), writes: 0 }, root)
    }

    #[test]
    fn flags_select_visits_in_depth_first_order() {
        let (mut s, root) = build();
        let flags = WalkFlags::LEAF | WalkFlags::TABLE_PRE | WalkFlags::TABLE_POST;
        walk(&mut s, Regime::El2, root, 0, 4 << 20, flags, &mut |s: &mut State, e: &Entry| {
            s.log.push((e.level, e.visit, e.off));
            Ok(())
        })
        .unwrap();
        let expect =
            [(0, Visit::TablePre, 0), (1, Visit::TablePre, 0), (2, Visit::Leaf, 0), (2, Visit::TablePre, 2 << 20)];
        assert_eq!(&s.log[..4], &expect);
        // 512 level-3 leaves, then the posts from the inside out.
        assert_eq!(s.log.iter().filter(|v| v.0 == 3).count(), 512);
        let tail: Vec<_> = s.log[s.log.len() - 3..].iter().map(|v| (v.0, v.1)).collect();
        assert_eq!(tail, [(2, Visit::TablePost), (1, Visit::TablePost), (0, Visit::TablePost)]);
        assert_eq!(s.stats.visits[3][Visit::Leaf as usize], 512);
        assert_eq!(s.stats.total(), s.log.len() as u64);
    }

    #[test]
    fn skip_level_and_reread_after_callback() {
        let (mut s, root) = build();
        // Replace the 2 MiB block by a table: the walker re-reads it and descends, but
        // skip_level(3) keeps it out of level 3 entirely.
        let flags = WalkFlags::LEAF | WalkFlags::skip_level(3);
        let mut replaced = false;
        walk(&mut s, Regime::El2, root, 0, 4 << 20, flags, &mut |s: &mut State, e: &Entry| {
            s.log.push((e.level, e.visit, e.off));
            if e.level == 2 && e.off == 0 && !replaced {
                let t = s.frames.alloc_zeroed(1).unwrap();
                s.frames.write_desc(e.table, e.index, Desc::table(t).0);
                s.writes += 1;
                replaced = true;
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(s.stats.at_level(3), 0);
        assert_eq!(s.log, [(2, Visit::Leaf, 0)]);
        // Without the skip, the new (empty) table is descended: 512 new level-3 visits, plus
        // the 512 of the existing table.
        let mut s2 = s;
        s2.stats = WalkStats::default();
        walk(&mut s2, Regime::El2, root, 0, 4 << 20, WalkFlags::LEAF, &mut |_, _| Ok(())).unwrap();
        assert_eq!(s2.stats.at_level(3), 1024);
        assert_eq!(level_size(3), PAGE_SIZE);
    }

    /// A state that counts descriptor loads.
    struct Counting {
        inner: State,
        loads: core::cell::Cell<u64>,
    }

    impl WalkState for Counting {
        fn read(&self, table: PhysAddr, index: usize) -> Desc {
            self.loads.set(self.loads.get() + 1);
            self.inner.read(table, index)
        }
        fn walk_stats(&mut self) -> &mut WalkStats {
            &mut self.inner.stats
        }
        fn writes(&self) -> u64 {
            self.inner.writes
        }
    }

    #[test]
    fn one_load_per_entry_unless_the_callback_wrote() {
        let (s, root) = build();
        let mut c = Counting { inner: s, loads: core::cell::Cell::new(0) };
        let flags = WalkFlags::LEAF | WalkFlags::TABLE_PRE;
        walk(&mut c, Regime::El2, root, 0, 4 << 20, flags, &mut |_: &mut Counting, _: &Entry| Ok(())).unwrap();
        // Root, L1, two L2 entries, 512 L3 entries: one load each, no re-read.
        assert_eq!(c.loads.get(), 1 + 1 + 2 + 512);
        assert_eq!(c.inner.stats.total(), 1 + 1 + 2 + 512);
        // A callback that writes makes the walker re-read that entry (and only that one).
        c.loads.set(0);
        walk(&mut c, Regime::El2, root, 0, 4 << 20, flags, &mut |c: &mut Counting, e: &Entry| {
            if e.level == 2 && e.index == 0 {
                c.inner.writes += 1; // as a real write would count itself
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(c.loads.get(), 1 + 1 + 2 + 512 + 1);
        // Quiet level 3: loaded and counted, never called back.
        c.loads.set(0);
        let mut calls = 0;
        let quiet = WalkFlags::LEAF | WalkFlags::quiet_level(3);
        walk(&mut c, Regime::El2, root, 0, 4 << 20, quiet, &mut |_: &mut Counting, e: &Entry| {
            assert!(e.level < 3);
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!((c.loads.get(), calls), (1 + 1 + 2 + 512, 1));
    }

    #[test]
    fn ranges_outside_the_regime_are_refused() {
        let (mut s, root) = build();
        let r = walk(&mut s, Regime::Stage2 { vmid: 1 }, root, 0, (1 << 40) + 1, WalkFlags::LEAF, &mut |_, _| Ok(()));
        assert_eq!(r.map_err(|e| e.kind()), Err(crate::ErrorKind::OutOfRange));
    }
}
