//! Errors of DTB parsing and guest DTB generation.

use alloc::string::String;
use core::fmt;

/// Everything that can go wrong while turning a DTB into a [`crate::Board`] or writing a guest
/// DTB. Every variant says where (header, byte offset, node path, property) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoardError {
    /// The 40-byte FDT header is unusable (bad magic, unsupported version, inconsistent sizes).
    BadHeader {
        /// Which header field.
        field: &'static str,
        /// The value found there.
        value: u64,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The buffer is shorter than the header says the blob is.
    Truncated {
        /// Bytes the header (or the structure) requires.
        need: u64,
        /// Bytes available.
        have: u64,
    },
    /// The memory reservation block is malformed.
    BadMemReserve {
        /// Byte offset of the bad entry from the start of the blob.
        offset: u64,
        /// What is wrong.
        why: &'static str,
    },
    /// The structure block is not a well-formed token stream.
    BadStructure {
        /// Path of the node being read when the problem was found (`/` for the root).
        node: String,
        /// Byte offset of the offending token from the start of the blob.
        offset: u64,
        /// What is wrong.
        why: &'static str,
    },
    /// A node that must exist does not.
    MissingNode {
        /// Path (or description) of the missing node.
        node: String,
    },
    /// A property that must exist does not.
    MissingProperty {
        /// Path of the node.
        node: String,
        /// Name of the missing property.
        prop: &'static str,
    },
    /// A property exists but its value is unusable.
    BadProperty {
        /// Path of the node.
        node: String,
        /// Name of the property.
        prop: &'static str,
        /// What is wrong with the value.
        why: &'static str,
    },
    /// The guest description given to [`crate::guest_dtb`] is inconsistent with the host tree.
    BadGuestSpec {
        /// The node or item concerned.
        item: String,
        /// What is wrong.
        why: &'static str,
    },
    /// The FDT writer refused its input (name with a NUL, unbalanced nodes, >4 GiB blob).
    Write {
        /// What is wrong.
        why: &'static str,
    },
}

impl fmt::Display for BoardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BoardError::BadHeader { field, value, why } => {
                write!(f, "DTB header: {field} = {value:#x}: {why}")
            }
            BoardError::Truncated { need, have } => {
                write!(f, "DTB truncated: need {need} bytes, have {have}")
            }
            BoardError::BadMemReserve { offset, why } => {
                write!(f, "DTB memory reservation block at offset {offset:#x}: {why}")
            }
            BoardError::BadStructure { node, offset, why } => {
                write!(f, "DTB structure block at offset {offset:#x} (in node {node}): {why}")
            }
            BoardError::MissingNode { node } => write!(f, "DTB: missing node {node}"),
            BoardError::MissingProperty { node, prop } => {
                write!(f, "DTB: node {node}: missing property `{prop}`")
            }
            BoardError::BadProperty { node, prop, why } => {
                write!(f, "DTB: node {node}: property `{prop}`: {why}")
            }
            BoardError::BadGuestSpec { item, why } => write!(f, "guest DTB: {item}: {why}"),
            BoardError::Write { why } => write!(f, "FDT writer: {why}"),
        }
    }
}

impl core::error::Error for BoardError {}

pub(crate) fn bad_prop(node: impl Into<String>, prop: &'static str, why: &'static str) -> BoardError {
    BoardError::BadProperty { node: node.into(), prop, why }
}

pub(crate) fn missing_prop(node: impl Into<String>, prop: &'static str) -> BoardError {
    BoardError::MissingProperty { node: node.into(), prop }
}
