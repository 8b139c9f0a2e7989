//! Hypercall return codes, returned as `i64` in x0 (results, if any, in x1..x3).
//!
//! SMCCC-compatible: 0 is success and -1, -2, -3 have their SMCCC meanings (NOT_SUPPORTED,
//! NOT_REQUIRED, INVALID_PARAMETER), so the same codes serve the SMCCC arch calls the
//! hypervisor answers. The rest are this hypervisor's own.

use core::fmt;

/// Success.
pub const SUCCESS: i64 = 0;
/// Unknown function id, or a reserved call not implemented yet (SMCCC value, -1).
pub const NOT_SUPPORTED: i64 = -1;
/// SMCCC NOT_REQUIRED (-2): e.g. a firmware workaround this CPU does not need.
pub const NOT_REQUIRED: i64 = -2;
/// An argument is not acceptable (unknown flag, zero size...) (SMCCC value, -3).
pub const INVALID_PARAMETER: i64 = -3;
/// The guest may not do this (e.g. a buffer pointing into hypervisor memory).
pub const DENIED: i64 = -4;
/// An address range lies outside the guest's memory.
pub const OUT_OF_RANGE: i64 = -5;
/// An address or size is not aligned as required.
pub const MISALIGNED: i64 = -6;
/// The range overlaps an existing object (memslot).
pub const OVERLAP: i64 = -7;
/// The hypervisor ran out of memory for page tables or bookkeeping.
pub const NO_MEMORY: i64 = -8;
/// No such object (memslot id).
pub const NOT_FOUND: i64 = -9;
/// The object is in use (e.g. deleting a memslot while dirty logging is on).
pub const BUSY: i64 = -10;

/// A failed hypercall. `code()` is what travels in x0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i64)]
pub enum HypError {
    /// [`NOT_SUPPORTED`].
    NotSupported = NOT_SUPPORTED,
    /// [`NOT_REQUIRED`].
    NotRequired = NOT_REQUIRED,
    /// [`INVALID_PARAMETER`].
    InvalidParameter = INVALID_PARAMETER,
    /// [`DENIED`].
    Denied = DENIED,
    /// [`OUT_OF_RANGE`].
    OutOfRange = OUT_OF_RANGE,
    /// [`MISALIGNED`].
    Misaligned = MISALIGNED,
    /// [`OVERLAP`].
    Overlap = OVERLAP,
    /// [`NO_MEMORY`].
    NoMemory = NO_MEMORY,
    /// [`NOT_FOUND`].
    NotFound = NOT_FOUND,
    /// [`BUSY`].
    Busy = BUSY,
}

impl HypError {
    /// Every error, in code order (-1, -2, ...).
    pub const ALL: [HypError; 10] = [
        HypError::NotSupported,
        HypError::NotRequired,
        HypError::InvalidParameter,
        HypError::Denied,
        HypError::OutOfRange,
        HypError::Misaligned,
        HypError::Overlap,
        HypError::NoMemory,
        HypError::NotFound,
        HypError::Busy,
    ];

    /// The `i64` that travels in x0.
    pub const fn code(self) -> i64 {
        self as i64
    }

    /// x0 as the hypervisor writes it (two's complement).
    pub const fn to_x0(self) -> u64 {
        self as i64 as u64
    }

    /// Upper-case name, e.g. `"INVALID_PARAMETER"`.
    pub const fn name(self) -> &'static str {
        match self {
            HypError::NotSupported => "NOT_SUPPORTED",
            HypError::NotRequired => "NOT_REQUIRED",
            HypError::InvalidParameter => "INVALID_PARAMETER",
            HypError::Denied => "DENIED",
            HypError::OutOfRange => "OUT_OF_RANGE",
            HypError::Misaligned => "MISALIGNED",
            HypError::Overlap => "OVERLAP",
            HypError::NoMemory => "NO_MEMORY",
            HypError::NotFound => "NOT_FOUND",
            HypError::Busy => "BUSY",
        }
    }

    /// What went wrong, in words.
    pub const fn description(self) -> &'static str {
        match self {
            HypError::NotSupported => "call not supported",
            HypError::NotRequired => "not required",
            HypError::InvalidParameter => "invalid parameter",
            HypError::Denied => "denied",
            HypError::OutOfRange => "address range outside guest memory",
            HypError::Misaligned => "misaligned address or size",
            HypError::Overlap => "overlaps an existing object",
            HypError::NoMemory => "hypervisor out of memory",
            HypError::NotFound => "no such object",
            HypError::Busy => "object busy",
        }
    }
}

/// The code that is not an error (0 is success, not a `HypError`) or not known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnknownCode(pub i64);

impl TryFrom<i64> for HypError {
    type Error = UnknownCode;

    fn try_from(code: i64) -> Result<Self, UnknownCode> {
        HypError::ALL.iter().copied().find(|e| e.code() == code).ok_or(UnknownCode(code))
    }
}

impl fmt::Display for HypError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.name(), self.code(), self.description())
    }
}

impl fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown hypercall return code {}", self.0)
    }
}

/// Reads x0 after a hypercall: `Ok(())` for SUCCESS, `Err(Ok(e))` for a known error,
/// `Err(Err(code))` for anything else (including positive values).
pub fn check(x0: u64) -> Result<(), Result<HypError, UnknownCode>> {
    match x0 as i64 {
        SUCCESS => Ok(()),
        code => Err(HypError::try_from(code)),
    }
}

/// x0 for a handler's result: SUCCESS or the error code.
pub const fn to_x0(r: Result<(), HypError>) -> u64 {
    match r {
        Ok(()) => SUCCESS as u64,
        Err(e) => e.to_x0(),
    }
}

/// Name of a return code (`"UNKNOWN_ERROR"` when it is none of the above).
pub fn name(code: i64) -> &'static str {
    match code {
        SUCCESS => "SUCCESS",
        c => HypError::try_from(c).map(HypError::name).unwrap_or("UNKNOWN_ERROR"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn codes_round_trip_and_match_smccc() {
        assert_eq!(NOT_SUPPORTED, -1, "SMCCC_RET_NOT_SUPPORTED");
        assert_eq!(NOT_REQUIRED, -2, "SMCCC_RET_NOT_REQUIRED");
        assert_eq!(INVALID_PARAMETER, -3, "SMCCC_RET_INVALID_PARAMETER");
        for (i, e) in HypError::ALL.iter().enumerate() {
            assert_eq!(e.code(), -(i as i64) - 1, "dense, in order");
            assert_eq!(HypError::try_from(e.code()), Ok(*e));
            assert_eq!(check(e.to_x0()), Err(Ok(*e)));
            assert_eq!(name(e.code()), e.name());
        }
        assert_eq!(HypError::try_from(0), Err(UnknownCode(0)));
        assert_eq!(HypError::try_from(-11), Err(UnknownCode(-11)));
        assert_eq!(check(0), Ok(()));
        assert_eq!(check(5), Err(Err(UnknownCode(5))));
        assert_eq!(to_x0(Err(HypError::Denied)), (-4i64) as u64);
        assert_eq!(name(0), "SUCCESS");
        assert_eq!(name(-100), "UNKNOWN_ERROR");
    }

    #[test]
    fn display() {
        assert_eq!(HypError::OutOfRange.to_string(), "OUT_OF_RANGE (-5): address range outside guest memory");
        assert_eq!(UnknownCode(7).to_string(), "unknown hypercall return code 7");
    }
}
