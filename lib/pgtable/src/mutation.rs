//! Seeded bugs for the mutation tests (compiled into test builds only): each variant makes the
//! library skip one piece of maintenance, and a test shows the model checker notices.

use crate::table::MutationId;

/// A seeded bug, set on a table with `PageTable::mutation` in tests.
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
}

impl Mutation {
    /// All seeded bugs.
    pub const ALL: [Mutation; 5] = [
        Mutation::SkipBbmOnSplit,
        Mutation::ElideTlbiRwToRo,
        Mutation::ElideTlbiOaChange,
        Mutation::FreeTableBeforeTlbi,
        Mutation::NoDsbBeforeTlbi,
    ];

    pub(crate) fn id(self) -> Option<MutationId> {
        match self {
            Mutation::None => None,
            Mutation::SkipBbmOnSplit => Some(MutationId::SkipBbmOnSplit),
            Mutation::ElideTlbiRwToRo => Some(MutationId::ElideTlbiRwToRo),
            Mutation::ElideTlbiOaChange => Some(MutationId::ElideTlbiOaChange),
            Mutation::FreeTableBeforeTlbi => Some(MutationId::FreeTableBeforeTlbi),
            Mutation::NoDsbBeforeTlbi => Some(MutationId::NoDsbBeforeTlbi),
            Mutation::LazyRelaxAnyPermission => Some(MutationId::LazyRelaxAnyPermission),
        }
    }
}
