//! Why an operation failed, and where (cf. aarch64-paging's `MapError`): every error names the
//! argument, address, level or descriptor involved, so a caller's message can say what
//! conflicted. [`Error::kind`] gives the bare category for callers that translate errors into
//! their own codes.

use crate::attrs::Perms;
use crate::descriptor::Desc;

/// The category of an [`Error`], without its context.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An address or size is not aligned as it must be.
    Misaligned,
    /// A range leaves the regime's input space or the 48-bit output space.
    OutOfRange,
    /// A `VirtAddr` given to a stage-2 table or an `IntermPhysAddr` to a stage-1 table.
    WrongAddressKind,
    /// `map` found something already mapped in the range.
    AlreadyMapped,
    /// The frame allocator has no frame left.
    OutOfMemory,
    /// Attributes the regime cannot express.
    InvalidAttributes,
    /// A level argument outside what the operation supports.
    InvalidLevel,
}

/// Which argument of a call an address error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arg {
    /// The start of the input range.
    Start,
    /// The size of the range.
    Size,
    /// The end of the input range (start + size).
    End,
    /// The output (physical) address.
    Output,
    /// The end of the output range.
    OutputEnd,
}

impl Arg {
    const fn name(self) -> &'static str {
        match self {
            Arg::Start => "start",
            Arg::Size => "size",
            Arg::End => "end",
            Arg::Output => "output address",
            Arg::OutputEnd => "end of the output range",
        }
    }
}

/// Why an operation failed, with its context. Input addresses are the caller's (VA or IPA, not
/// offsets); `level` is the translation level of the entry concerned (0..=3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// `arg` (`value`) is not aligned to `align` bytes (4 KiB; an output to its leaf size).
    Misaligned {
        /// Which argument.
        arg: Arg,
        /// Its value.
        value: u64,
        /// The alignment it needs.
        align: u64,
    },
    /// `arg` (`value`) is past `limit`, the end of the regime's input space or of the 48-bit
    /// output space (or the range wraps around).
    OutOfRange {
        /// Which argument.
        arg: Arg,
        /// Its value (for a wrapping range, the start).
        value: u64,
        /// The first value not allowed (the regime's base for a start below it).
        limit: u64,
    },
    /// A table created for the wrong kind of input address ([`crate::PageTable::new`] with a
    /// regime chosen at run time): a stage-2 regime for a `PageTable<_, VirtAddr>` or a
    /// stage-1 regime for a `PageTable<_, IntermPhysAddr>`. (An operation cannot be given an
    /// address of the wrong kind: that is a compile error.)
    WrongAddressKind {
        /// Whether the regime given is a stage-2 one (it wants `IntermPhysAddr`).
        stage2: bool,
    },
    /// `map` found `found` (a mapping, PROT_NONE included) at `addr`, level `level`.
    AlreadyMapped {
        /// First input address of the entry in the way.
        addr: u64,
        /// Its level.
        level: usize,
        /// The descriptor found there.
        found: Desc,
    },
    /// The frame allocator had no frame for a table below the entry at `addr`, level `level`
    /// (for the root: the regime's base and its start level).
    OutOfMemory {
        /// First input address of the entry the table was for.
        addr: u64,
        /// That entry's level.
        level: usize,
    },
    /// `perms` (or software bits) the regime cannot express: `why` says which rule.
    InvalidAttributes {
        /// The permissions asked for.
        perms: Perms,
        /// The rule they break.
        why: &'static str,
    },
    /// `level` is not one the operation supports (`split` takes 2 or 3).
    InvalidLevel {
        /// The level given.
        level: usize,
    },
}

impl Error {
    /// The category, without context.
    pub const fn kind(&self) -> ErrorKind {
        match self {
            Error::Misaligned { .. } => ErrorKind::Misaligned,
            Error::OutOfRange { .. } => ErrorKind::OutOfRange,
            Error::WrongAddressKind { .. } => ErrorKind::WrongAddressKind,
            Error::AlreadyMapped { .. } => ErrorKind::AlreadyMapped,
            Error::OutOfMemory { .. } => ErrorKind::OutOfMemory,
            Error::InvalidAttributes { .. } => ErrorKind::InvalidAttributes,
            Error::InvalidLevel { .. } => ErrorKind::InvalidLevel,
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Error::Misaligned { arg, value, align } => {
                write!(f, "{} {value:#x} not aligned to {align:#x}", arg.name())
            }
            Error::OutOfRange { arg, value, limit } => {
                write!(f, "{} {value:#x} outside the address space (limit {limit:#x})", arg.name())
            }
            Error::WrongAddressKind { stage2: true } => {
                f.write_str("a stage-2 regime for a table of virtual addresses (stage 2 takes IPAs)")
            }
            Error::WrongAddressKind { stage2: false } => {
                f.write_str("a stage-1 regime for a table of IPAs (stage 1 takes virtual addresses)")
            }
            Error::AlreadyMapped { addr, level, found } => {
                write!(f, "{addr:#x} already mapped at level {level} (descriptor {:#018x})", found.bits())
            }
            Error::OutOfMemory { addr, level } => {
                write!(f, "out of page-table frames (table below {addr:#x}, level {level})")
            }
            Error::InvalidAttributes { perms, why } => write!(f, "permissions {perms:?} not expressible: {why}"),
            Error::InvalidLevel { level } => write!(f, "unsupported level {level}"),
        }
    }
}
