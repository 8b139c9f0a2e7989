//! Direct paths: from the root straight to the level-3 table holding an input offset, for the
//! operations whose whole range lies inside one such table (an mprotect or munmap of a few
//! pages, a page fault's map of one page: the common calls of a kernel). The walker would visit
//! the same table entries on the way, one load each, and call back for each; here they are
//! read into a [`Path`] first, and the operation then gives them the visits the walker would
//! (the same callbacks, the same counts) and works on the level-3 table with one loop. When an
//! entry on the way is not a table (a hole, a block), there is no path and the operation walks.

use crate::addr::{level_shift, level_size, PhysAddr, ENTRIES_PER_TABLE};
use crate::ctx::Ctx;
use crate::frame::FrameAlloc;
use crate::tlb::TlbMaintenance;
use crate::walker::{Entry, Visit};

/// The table entries from the root down to the level-2 entry of a level-3 table, as loaded:
/// their descriptors (where each is follows from the root and the offset).
pub(crate) struct Path {
    descs: [crate::descriptor::Desc; 3],
    root: PhysAddr,
    start: usize,
    off: u64,
}

impl Path {
    /// Entry `level` of the path.
    #[inline(always)]
    fn entry(&self, level: usize) -> Entry {
        let i = level - self.start;
        let table = if i == 0 { self.root } else { self.descs[i - 1].addr() };
        Entry {
            table,
            index: index_at(level, self.start, self.off),
            level,
            off: self.off & !(level_size(level) - 1),
            desc: self.descs[i],
            visit: Visit::TablePre,
        }
    }
    /// The entries, root first (levels `start_level..=2`), as the walker's pre-visits see them.
    #[inline(always)]
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = Entry> + '_ {
        (self.start..=2).map(move |level| self.entry(level))
    }
    /// The level-2 entry (its descriptor links the level-3 table).
    #[inline(always)]
    pub fn leaf_table(&self) -> Entry {
        self.entry(2)
    }
}

/// The path from `root` (at level `start`) to the level-3 table holding input offset `off`, if
/// every entry on the way is a table. Reads each entry once and changes nothing.
#[inline(always)]
pub(crate) fn path_to_leaf_table<A: FrameAlloc + ?Sized>(
    frames: &A,
    start: usize,
    root: PhysAddr,
    off: u64,
) -> Option<Path> {
    let mut descs = [crate::descriptor::Desc::INVALID; 3];
    let mut table = root;
    // A `while` loop: a range's iterator costs more than the walk.
    let mut level = start;
    while level <= 2 {
        let desc = crate::descriptor::Desc(frames.read_desc(table, index_at(level, start, off)));
        if !desc.is_table(level) {
            return None;
        }
        descs[level - start] = desc;
        table = desc.addr();
        level += 1;
    }
    Some(Path { descs, root, start, off })
}

impl Path {
    /// The level-3 table the path leads to.
    #[inline(always)]
    pub fn leaf_table_addr(&self) -> PhysAddr {
        self.descs[2 - self.start].addr()
    }
    /// The table holding entry `level` of the path, and that entry.
    #[inline(always)]
    pub fn table_entry(&self, level: usize) -> (PhysAddr, crate::descriptor::Desc) {
        let i = level - self.start;
        (if i == 0 { self.root } else { self.descs[i - 1].addr() }, self.descs[i])
    }
}

/// Index of the entry for input offset `off` in its table at `level` (the root at `start`).
#[inline(always)]
pub(crate) fn index_at(level: usize, start: usize, off: u64) -> usize {
    let i = (off >> level_shift(level)) as usize;
    if level == start {
        i
    } else {
        i & (ENTRIES_PER_TABLE - 1)
    }
}

/// Whether `[s, e)` (non-empty) lies inside the span of one level-3 table.
pub(crate) const fn in_one_leaf_table(s: u64, e: u64) -> bool {
    s >> level_shift(2) == (e - 1) >> level_shift(2)
}

impl<A: FrameAlloc, T: TlbMaintenance + ?Sized> Ctx<'_, A, T> {
    /// The path from `root` to the level-3 table holding input offset `off`, if every entry on
    /// the way is a table. Reads each entry once and changes nothing.
    #[inline(always)]
    pub(crate) fn path_to_leaf_table(&self, root: PhysAddr, off: u64) -> Option<Path> {
        path_to_leaf_table(&*self.frames, self.regime.start_level(), root, off)
    }

    /// Counts a visit the walker would have made.
    #[inline]
    pub(crate) fn count_visit(&mut self, level: usize, visit: Visit) {
        self.stats.walk.visits[level][visit as usize] += 1;
    }

    /// Counts `n` visits the walker would have made.
    #[inline]
    pub(crate) fn count_visit_n(&mut self, level: usize, visit: Visit, n: u64) {
        self.stats.walk.visits[level][visit as usize] += n;
    }
}
