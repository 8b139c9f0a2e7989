//! Structural validation of a flattened device tree, and its [`Tree`] built in the same walk
//! ([`parse`]). Nothing reads the blob before it is checked here, so no input can make this
//! crate index out of bounds or loop:
//!
//! - header: magic, version 17 layout, `totalsize` within the buffer, every block inside
//!   `totalsize`, alignment;
//! - memory reservation block: terminated by an all-zero entry inside the blob;
//! - structure block: one root node named "", every node name NUL-terminated UTF-8 without `/`,
//!   properties before child nodes, every property's value inside the block and its name offset
//!   pointing at a NUL-terminated UTF-8 string inside the strings block, balanced
//!   BEGIN_NODE/END_NODE, nesting at most [`MAX_DEPTH`], `FDT_END` after the root;
//! - `FDT_NOP` tokens are legal anywhere between tokens and skipped.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::BoardError;
use crate::tree::{Tree, PHANDLE_NAMES};

/// Magic number at offset 0 of every DTB.
pub const FDT_MAGIC: u32 = 0xd00d_feed;
/// Size of the version-17 header.
pub const HEADER_LEN: usize = 40;
pub use crate::tree::MAX_DEPTH;
/// Largest blob accepted by [`crate::dtb_at`] (Linux arm64 caps the DTB at 2 MiB too).
pub const MAX_DTB_SIZE: usize = 2 << 20;

pub(crate) const FDT_BEGIN_NODE: u32 = 1;
pub(crate) const FDT_END_NODE: u32 = 2;
pub(crate) const FDT_PROP: u32 = 3;
pub(crate) const FDT_NOP: u32 = 4;
pub(crate) const FDT_END: u32 = 9;

pub(crate) fn be32(data: &[u8], off: usize) -> Option<u32> {
    let b = data.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

pub(crate) fn be64(data: &[u8], off: usize) -> Option<u64> {
    let hi = be32(data, off)?;
    let lo = be32(data, off.checked_add(4)?)?;
    Some((u64::from(hi) << 32) | u64::from(lo))
}

/// The header fields this crate uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Header {
    pub totalsize: usize,
    pub off_dt_struct: usize,
    pub off_dt_strings: usize,
    pub off_mem_rsvmap: usize,
    pub boot_cpuid_phys: u32,
    pub size_dt_strings: usize,
    pub size_dt_struct: usize,
}

fn bad_header(field: &'static str, value: u64, why: &'static str) -> BoardError {
    BoardError::BadHeader { field, value, why }
}

/// Reads the magic and `totalsize` fields of a DTB header.
///
/// `header` needs only the first 8 bytes. Returns the size of the whole blob in bytes.
pub fn total_size(header: &[u8]) -> Result<usize, BoardError> {
    let (Some(magic), Some(size)) = (be32(header, 0), be32(header, 4)) else {
        return Err(BoardError::Truncated { need: 8, have: header.len() as u64 });
    };
    if magic != FDT_MAGIC {
        return Err(bad_header("magic", magic.into(), "not 0xd00dfeed: this is not a DTB"));
    }
    if (size as usize) < HEADER_LEN {
        return Err(bad_header("totalsize", size.into(), "smaller than the 40-byte header"));
    }
    Ok(size as usize)
}

fn block_end(field: &'static str, off: usize, size: usize, totalsize: usize) -> Result<usize, BoardError> {
    let end = off.checked_add(size).filter(|&e| e <= totalsize);
    end.ok_or_else(|| bad_header(field, off as u64, "block extends past totalsize"))
}

pub(crate) fn header(data: &[u8]) -> Result<Header, BoardError> {
    let have = data.len() as u64;
    if data.len() < HEADER_LEN {
        if data.len() >= 4 && be32(data, 0) != Some(FDT_MAGIC) {
            let magic = be32(data, 0).unwrap_or(0);
            return Err(bad_header("magic", magic.into(), "not 0xd00dfeed: this is not a DTB"));
        }
        return Err(BoardError::Truncated { need: HEADER_LEN as u64, have });
    }
    let totalsize = total_size(data)?;
    if totalsize > data.len() {
        return Err(BoardError::Truncated { need: totalsize as u64, have });
    }
    let field = |i: usize| be32(data, i * 4).unwrap_or(0);
    let version = field(5);
    let last_comp = field(6);
    if version < 17 {
        return Err(bad_header("version", version.into(), "versions before 17 are not supported"));
    }
    if last_comp > 17 {
        return Err(bad_header(
            "last_comp_version",
            last_comp.into(),
            "blob is not backwards compatible with version 17",
        ));
    }
    let h = Header {
        totalsize,
        off_dt_struct: field(2) as usize,
        off_dt_strings: field(3) as usize,
        off_mem_rsvmap: field(4) as usize,
        boot_cpuid_phys: field(7),
        size_dt_strings: field(8) as usize,
        size_dt_struct: field(9) as usize,
    };
    if h.off_mem_rsvmap < HEADER_LEN || !h.off_mem_rsvmap.is_multiple_of(8) {
        return Err(bad_header(
            "off_mem_rsvmap",
            h.off_mem_rsvmap as u64,
            "must be 8-byte aligned and after the header",
        ));
    }
    if h.off_dt_struct < HEADER_LEN || !h.off_dt_struct.is_multiple_of(4) {
        return Err(bad_header("off_dt_struct", h.off_dt_struct as u64, "must be 4-byte aligned and after the header"));
    }
    if !h.size_dt_struct.is_multiple_of(4) {
        return Err(bad_header("size_dt_struct", h.size_dt_struct as u64, "not a multiple of 4"));
    }
    if h.off_dt_strings < HEADER_LEN {
        return Err(bad_header("off_dt_strings", h.off_dt_strings as u64, "points into the header"));
    }
    block_end("off_dt_struct", h.off_dt_struct, h.size_dt_struct, totalsize)?;
    block_end("off_dt_strings", h.off_dt_strings, h.size_dt_strings, totalsize)?;
    Ok(h)
}

/// Memory reservation entries (address, size), checked.
pub(crate) fn mem_reserve(data: &[u8], h: &Header) -> Result<Vec<(u64, u64)>, BoardError> {
    let mut out = Vec::new();
    let mut off = h.off_mem_rsvmap;
    loop {
        let entry_end = off.checked_add(16).filter(|&e| e <= h.totalsize);
        let (Some(_), Some(addr), Some(size)) = (entry_end, be64(data, off), be64(data, off + 8)) else {
            return Err(BoardError::BadMemReserve {
                offset: off as u64,
                why: "not terminated by an all-zero entry before totalsize",
            });
        };
        if addr == 0 && size == 0 {
            return Ok(out);
        }
        if addr.checked_add(size).is_none() {
            return Err(BoardError::BadMemReserve { offset: off as u64, why: "region wraps past 2^64" });
        }
        out.push((addr, size));
        off += 16;
    }
}

/// The bytes of a blob its blocks use (header, memory reservations up to their terminator,
/// structure and strings blocks): `totalsize` less the free space at its end (QEMU pads its
/// DTB to 1 MiB around a few KiB). Copying these and setting `totalsize` to the length gives
/// an equal tree.
pub fn used_len(data: &[u8]) -> Result<usize, BoardError> {
    let h = header(data)?;
    let rsv_end = h.off_mem_rsvmap + 16 * (mem_reserve(data, &h)?.len() + 1);
    Ok([rsv_end, h.off_dt_struct + h.size_dt_struct, h.off_dt_strings + h.size_dt_strings]
        .into_iter()
        .max()
        .unwrap_or(HEADER_LEN)
        .max(HEADER_LEN))
}

/// NUL-terminated UTF-8 string starting at `off` inside `block`.
pub(crate) fn cstr_at(block: &[u8], off: usize) -> Result<&str, &'static str> {
    let rest = block.get(off..).filter(|r| !r.is_empty()).ok_or("offset outside its block")?;
    let len = rest.iter().position(|&b| b == 0).ok_or("string not NUL-terminated inside its block")?;
    core::str::from_utf8(&rest[..len]).map_err(|_| "string is not UTF-8")
}

/// A blob that passed [`parse`]: its header and its tree.
pub(crate) struct Parsed<'a> {
    /// Exactly `totalsize` bytes.
    pub bytes: &'a [u8],
    pub header: Header,
    pub tree: Tree<'a>,
}

/// Largest strings block whose names [`Names`] remembers (real trees' are a few KiB).
const NAME_INDEX_MAX: usize = 64 << 10;

/// The property names of a strings block, each offset checked (NUL-terminated, UTF-8) once:
/// a tree names a few hundred properties thousands of times.
struct Names<'a> {
    strings: &'a [u8],
    /// Per offset of the strings block: 1 + the index in `names` of the string there, 0 while
    /// unchecked. Empty (nothing remembered) for a strings block over [`NAME_INDEX_MAX`].
    slot: Vec<u16>,
    /// Each name, whether it gives a node's phandle ([`PHANDLE_NAMES`]), and its
    /// [`crate::tree::Prop::name_id`] (1 + its index here).
    names: Vec<(&'a str, bool, u16)>,
}

impl<'a> Names<'a> {
    fn new(strings: &'a [u8]) -> Self {
        let slot = if strings.len() <= NAME_INDEX_MAX { alloc::vec![0; strings.len()] } else { Vec::new() };
        Names { strings, slot, names: Vec::new() }
    }

    /// The name at `off`: [`cstr_at`]'s answer, checked only the first time; whether it
    /// gives a node's phandle; its id (0 for a name not remembered).
    fn at(&mut self, off: usize) -> Result<(&'a str, bool, u16), &'static str> {
        if let Some(&k) = self.slot.get(off) {
            if k != 0 {
                return Ok(self.names[usize::from(k) - 1]);
            }
        }
        let name = cstr_at(self.strings, off)?;
        let mut entry = (name, PHANDLE_NAMES.contains(&name), 0);
        // At most one name per offset, so fewer names than `slot` entries (<= 64 Ki).
        if off < self.slot.len() && self.names.len() < usize::from(u16::MAX) {
            entry.2 = self.names.len() as u16 + 1;
            self.names.push(entry);
            self.slot[off] = entry.2;
        }
        Ok(entry)
    }
}

/// Validates a whole blob (see the module documentation) and builds its [`Tree`] in the same
/// walk. `data` may be longer than the blob's `totalsize`.
pub(crate) fn parse(data: &[u8]) -> Result<Parsed<'_>, BoardError> {
    let h = header(data)?;
    let data = &data[..h.totalsize];
    mem_reserve(data, &h)?;
    let strings = &data[h.off_dt_strings..h.off_dt_strings + h.size_dt_strings];
    let s_start = h.off_dt_struct;
    let s_end = h.off_dt_struct + h.size_dt_struct;
    let block = &data[..s_end];
    let mut names = Names::new(strings);

    // Room for a typical tree's nodes and properties up front (a board's: a node per ~170
    // bytes of the structure block, a property per ~30), bounded for a hostile blob.
    let mut tree = Tree::with_capacity((h.size_dt_struct / 128).min(1024), (h.size_dt_struct / 24).min(8192));
    // Open nodes, innermost last: (index in `tree`, has it had a child node yet?).
    let mut levels: Vec<(usize, bool)> = Vec::with_capacity(MAX_DEPTH);
    let mut root_done = false;
    let mut pos = s_start;
    let err = |tree: &Tree, levels: &[(usize, bool)], pos: usize, why: &'static str| BoardError::BadStructure {
        node: levels.last().map_or_else(|| String::from("/"), |&(i, _)| tree.path(i)),
        offset: pos as u64,
        why,
    };
    loop {
        let Some(tag) = be32(block, pos) else {
            return Err(err(&tree, &levels, pos, "structure block ends before FDT_END"));
        };
        match tag {
            FDT_NOP => pos += 4,
            FDT_BEGIN_NODE => {
                if root_done {
                    return Err(err(&tree, &levels, pos, "second root node after the end of the first"));
                }
                if levels.len() >= MAX_DEPTH {
                    return Err(err(&tree, &levels, pos, "nodes nested deeper than 32 levels"));
                }
                let name = cstr_at(block, pos + 4).map_err(|why| err(&tree, &levels, pos, node_name_why(why)))?;
                if levels.is_empty() {
                    if !name.is_empty() {
                        return Err(err(&tree, &[], pos, "root node name is not empty"));
                    }
                } else {
                    if name.is_empty() {
                        return Err(err(&tree, &levels, pos, "child node with an empty name"));
                    }
                    if name.contains('/') {
                        return Err(err(&tree, &levels, pos, "node name contains '/'"));
                    }
                }
                let parent = levels.last_mut().map(|(p, seen_child)| {
                    *seen_child = true;
                    *p
                });
                levels.push((tree.push_node(name, parent), false));
                pos = align4(pos + 4 + name.len() + 1);
            }
            FDT_PROP => {
                let Some(&(_, seen_child)) = levels.last() else {
                    return Err(err(&tree, &levels, pos, "property outside any node"));
                };
                if seen_child {
                    return Err(err(&tree, &levels, pos, "property after a child node"));
                }
                let (Some(len), Some(nameoff)) = (be32(block, pos + 4), be32(block, pos + 8)) else {
                    return Err(err(&tree, &levels, pos, "property header runs past the structure block"));
                };
                let value_end = (pos + 12).checked_add(len as usize).filter(|&e| e <= s_end);
                let Some(value_end) = value_end else {
                    return Err(err(&tree, &levels, pos, "property value runs past the structure block"));
                };
                let (name, phandle, id) = match names.at(nameoff as usize) {
                    Ok(("", _, _)) => return Err(err(&tree, &levels, pos, "property with an empty name")),
                    Ok(entry) => entry,
                    Err(why) => return Err(err(&tree, &levels, pos, prop_name_why(why))),
                };
                tree.push_prop(name, &block[pos + 12..value_end], phandle, id);
                pos = align4(value_end);
            }
            FDT_END_NODE => {
                if levels.pop().is_none() {
                    return Err(err(&tree, &levels, pos, "FDT_END_NODE without a matching FDT_BEGIN_NODE"));
                }
                if levels.is_empty() {
                    root_done = true;
                }
                pos += 4;
            }
            FDT_END => {
                if !root_done {
                    return Err(err(&tree, &levels, pos, "FDT_END before the root node is closed"));
                }
                break;
            }
            _ => return Err(err(&tree, &levels, pos, "unknown token in the structure block")),
        }
    }
    Ok(Parsed { bytes: data, header: h, tree })
}

fn node_name_why(why: &'static str) -> &'static str {
    match why {
        "string is not UTF-8" => "node name is not UTF-8",
        _ => "node name not NUL-terminated inside the structure block",
    }
}

fn prop_name_why(why: &'static str) -> &'static str {
    match why {
        "offset outside its block" => "property name offset outside the strings block",
        "string is not UTF-8" => "property name is not UTF-8",
        _ => "property name not NUL-terminated inside the strings block",
    }
}

fn align4(x: usize) -> usize {
    (x + 3) & !3
}
