//! Hypercall return codes (x0), SMCCC-compatible: negative is an error.

pub const SUCCESS: i64 = 0;
/// Unknown function id (the SMCCC value, -1).
pub const NOT_SUPPORTED: i64 = -1;
/// An argument is not acceptable (wrong flag, zero size...).
pub const INVALID_PARAMETER: i64 = -2;
/// The guest may not do this (e.g. a buffer pointing into hypervisor memory).
pub const DENIED: i64 = -3;
/// An address range lies outside the guest's memory.
pub const OUT_OF_RANGE: i64 = -4;
/// An address or size is not aligned as required.
pub const MISALIGNED: i64 = -5;
/// The range overlaps an existing object (memslot).
pub const OVERLAP: i64 = -6;
/// The hypervisor ran out of memory for page tables or bookkeeping.
pub const NO_MEMORY: i64 = -7;
/// No such object (memslot id).
pub const NOT_FOUND: i64 = -8;

/// Name of a return code.
pub fn name(code: i64) -> &'static str {
    match code {
        SUCCESS => "SUCCESS",
        NOT_SUPPORTED => "NOT_SUPPORTED",
        INVALID_PARAMETER => "INVALID_PARAMETER",
        DENIED => "DENIED",
        OUT_OF_RANGE => "OUT_OF_RANGE",
        MISALIGNED => "MISALIGNED",
        OVERLAP => "OVERLAP",
        NO_MEMORY => "NO_MEMORY",
        NOT_FOUND => "NOT_FOUND",
        _ => "UNKNOWN_ERROR",
    }
}
