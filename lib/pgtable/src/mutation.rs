//! Seeded bugs for the mutation tests: each variant makes the library skip one piece of
//! maintenance, and a test shows the model checker notices. Compiled only into the crate's own
//! tests or with the `seeded-bugs` feature (host test and model builds); the target build has
//! neither the enum nor the checks, see `table::seeded_bug!`.

/// A seeded bug, set on a table with [`crate::PageTable::seed_bug`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mutation {
    /// The library as written.
    #[default]
    None,
    /// Split a live block by writing the table over it directly even without BBML2.
    SkipBbmOnSplit,
    /// Elide the TLBI when a valid entry goes from read-write to read-only.
    ElideTlbiRwToRo,
    /// Elide the TLBI (keep the invalid write) when a valid entry's output address changes.
    ElideTlbiOaChange,
    /// Free an unlinked table right away instead of after its TLBI.
    FreeTableBeforeTlbi,
    /// Leave out the DSB that makes descriptor writes visible before a TLBI.
    NoDsbBeforeTlbi,
    /// Lazy relaxation also leaves restrictions of user pages unflushed (RW -> RO).
    LazyRelaxAnyPermission,
    /// `map` / `remap` / `protect` forget to clear a table's "no writable leaf below" summary
    /// when they install a writable leaf under it (a later write-protect then skips it).
    KeepNoWritable,
    /// Link a new table (zeroed or filled while unreachable) into a live table without the
    /// `DSB ISHST` that makes its contents visible first.
    LinkUnpublishedTable,
    /// `protect`'s run of like pages records none of them for the flush (the first page of a
    /// run, decided one by one, still is).
    ProtectRunUnflushed,
    /// `protect`'s run takes pages that differ from the first in their permission bits as its
    /// kind (a read-only page after a writable one gets the writable one's flip).
    ProtectRunWideKind,
    /// `unmap`'s loop over a level-3 table (whole tables, and the direct path of
    /// `unmap_pages_of`) clears pages without recording them for the flush.
    UnmapPagesUnflushed,
    /// The split of a run of level-2 blocks breaks only the first before linking them all.
    SplitRunBreaksFirst,
    /// A write-protecting split under BBML2 writes the blocks read-only in place but does not
    /// flush them before linking the read-only tables (a writable block stays cached).
    SplitReadOnlyUnflushed,
    /// `map_fresh_page` (a page fault's new page) writes the descriptor without the `DSB
    /// ISHST` that makes the frame's zeroing visible first.
    MapFreshUnpublished,
}

impl Mutation {
    /// Every seeded bug (all variants but `None`, in declaration order; a test keeps the list
    /// complete).
    pub const ALL: [Mutation; 14] = [
        Mutation::SkipBbmOnSplit,
        Mutation::ElideTlbiRwToRo,
        Mutation::ElideTlbiOaChange,
        Mutation::FreeTableBeforeTlbi,
        Mutation::NoDsbBeforeTlbi,
        Mutation::LazyRelaxAnyPermission,
        Mutation::KeepNoWritable,
        Mutation::LinkUnpublishedTable,
        Mutation::ProtectRunUnflushed,
        Mutation::ProtectRunWideKind,
        Mutation::UnmapPagesUnflushed,
        Mutation::SplitRunBreaksFirst,
        Mutation::SplitReadOnlyUnflushed,
        Mutation::MapFreshUnpublished,
    ];

    /// Whether the bug can only show with `Policy::lazy_relax` on a user (EL1&0 lower half)
    /// table: a run that hunts it must turn lazy relaxation on.
    pub const fn needs_lazy_relax(self) -> bool {
        matches!(self, Mutation::LazyRelaxAnyPermission)
    }

    /// Whether the bug shows only in `map_fresh_page` (a page fault's new page, its frame from
    /// the table's allocator): a run that hunts it must draw such maps (the property test's
    /// sequences with fresh pages; the others have none).
    pub const fn needs_fresh_pages(self) -> bool {
        matches!(self, Mutation::MapFreshUnpublished)
    }

    /// Whether the bug shows only in splits that write-protect (`SplitOpts::read_only`): a
    /// run that hunts it must draw them (the property test's sequences with read-only splits;
    /// the others have none).
    pub const fn needs_read_only_splits(self) -> bool {
        matches!(self, Mutation::SplitReadOnlyUnflushed)
    }

    /// Whether the bug shows only in runs of 2 MiB blocks (consecutive blocks of one level-2
    /// table, all in the range of a split): a run that hunts it must map and split such runs
    /// often (the property test's scale of 2 MiB units).
    pub const fn needs_block_runs(self) -> bool {
        matches!(self, Mutation::SplitRunBreaksFirst)
    }
}

#[cfg(test)]
mod tests {
    use super::Mutation;

    /// `ALL` holds every variant but `None`: a new variant does not compile here until it is
    /// given its place, and the test fails until `ALL` has it there.
    #[test]
    fn all_lists_every_seeded_bug() {
        fn position(m: Mutation) -> Option<usize> {
            match m {
                Mutation::None => None,
                Mutation::SkipBbmOnSplit => Some(0),
                Mutation::ElideTlbiRwToRo => Some(1),
                Mutation::ElideTlbiOaChange => Some(2),
                Mutation::FreeTableBeforeTlbi => Some(3),
                Mutation::NoDsbBeforeTlbi => Some(4),
                Mutation::LazyRelaxAnyPermission => Some(5),
                Mutation::KeepNoWritable => Some(6),
                Mutation::LinkUnpublishedTable => Some(7),
                Mutation::ProtectRunUnflushed => Some(8),
                Mutation::ProtectRunWideKind => Some(9),
                Mutation::UnmapPagesUnflushed => Some(10),
                Mutation::SplitRunBreaksFirst => Some(11),
                Mutation::SplitReadOnlyUnflushed => Some(12),
                Mutation::MapFreshUnpublished => Some(13),
            }
        }
        for (i, m) in Mutation::ALL.into_iter().enumerate() {
            assert_eq!(position(m), Some(i), "{m:?}");
        }
        assert_eq!(position(Mutation::MapFreshUnpublished).map(|p| p + 1), Some(Mutation::ALL.len()));
    }
}
