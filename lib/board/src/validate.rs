//! Structural validation of a flattened device tree before `fdt` sees it.
//!
//! `fdt` 0.1.5 assumes a well-formed blob: it slices, unwraps and asserts on the token stream
//! (and mishandles `FDT_NOP` in some positions). Everything it relies on is checked here, so
//! that after [`check`] succeeds no call this crate makes into `fdt` can panic:
//!
//! - header: magic, version 17 layout, `totalsize` within the buffer, every block inside
//!   `totalsize`, alignment;
//! - memory reservation block: terminated by an all-zero entry inside the blob;
//! - structure block: one root node named "", every node name NUL-terminated UTF-8 without `/`,
//!   properties before child nodes, every property's value inside the block and its name offset
//!   pointing at a NUL-terminated UTF-8 string inside the strings block, balanced
//!   BEGIN_NODE/END_NODE, nesting at most [`MAX_DEPTH`], `FDT_END` after the root;
//! - `FDT_NOP` tokens are legal but `fdt` trips over them, so a blob that has any is copied
//!   without them.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::BoardError;

/// Magic number at offset 0 of every DTB.
pub const FDT_MAGIC: u32 = 0xd00d_feed;
/// Size of the version-17 header.
pub const HEADER_LEN: usize = 40;
/// Deepest node nesting accepted (the root is depth 1). Real trees stay below 10.
pub const MAX_DEPTH: usize = 32;
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

/// A blob that passed [`check`]: exactly `totalsize` bytes, no `FDT_NOP` tokens.
pub(crate) enum Checked<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl Checked<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Checked::Borrowed(b) => b,
            Checked::Owned(v) => v,
        }
    }
}

struct Level {
    path_len: usize,
    seen_child: bool,
}

/// Validates a whole blob (see the module documentation).
pub(crate) fn check(data: &[u8]) -> Result<Checked<'_>, BoardError> {
    let h = header(data)?;
    let data = &data[..h.totalsize];
    mem_reserve(data, &h)?;
    let strings = &data[h.off_dt_strings..h.off_dt_strings + h.size_dt_strings];
    let s_start = h.off_dt_struct;
    let s_end = h.off_dt_struct + h.size_dt_struct;

    let mut path = String::from("/");
    let mut levels: Vec<Level> = Vec::new();
    let mut root_done = false;
    let mut nops = 0usize;
    let mut pos = s_start;
    let err = |path: &str, pos: usize, why: &'static str| BoardError::BadStructure {
        node: String::from(if path.is_empty() { "/" } else { path }),
        offset: pos as u64,
        why,
    };
    loop {
        let Some(tag) = be32(&data[..s_end], pos) else {
            return Err(err(&path, pos, "structure block ends before FDT_END"));
        };
        match tag {
            FDT_NOP => {
                nops += 1;
                pos += 4;
            }
            FDT_BEGIN_NODE => {
                if root_done {
                    return Err(err(&path, pos, "second root node after the end of the first"));
                }
                if levels.len() >= MAX_DEPTH {
                    return Err(err(&path, pos, "nodes nested deeper than 32 levels"));
                }
                let name = cstr_at(&data[..s_end], pos + 4).map_err(|why| err(&path, pos, node_name_why(why)))?;
                if levels.is_empty() {
                    if !name.is_empty() {
                        return Err(err("/", pos, "root node name is not empty"));
                    }
                } else {
                    if name.is_empty() {
                        return Err(err(&path, pos, "child node with an empty name"));
                    }
                    if name.contains('/') {
                        return Err(err(&path, pos, "node name contains '/'"));
                    }
                }
                let parent_len = path.len();
                if let Some(parent) = levels.last_mut() {
                    parent.seen_child = true;
                    if parent_len > 1 {
                        path.push('/');
                    }
                    path.push_str(name);
                }
                levels.push(Level { path_len: parent_len, seen_child: false });
                pos = align4(pos + 4 + name.len() + 1);
            }
            FDT_PROP => {
                let Some(level) = levels.last() else {
                    return Err(err(&path, pos, "property outside any node"));
                };
                if level.seen_child {
                    return Err(err(&path, pos, "property after a child node"));
                }
                let (Some(len), Some(nameoff)) = (be32(&data[..s_end], pos + 4), be32(&data[..s_end], pos + 8)) else {
                    return Err(err(&path, pos, "property header runs past the structure block"));
                };
                let value_end = (pos + 12).checked_add(len as usize).filter(|&e| e <= s_end);
                let Some(value_end) = value_end else {
                    return Err(err(&path, pos, "property value runs past the structure block"));
                };
                match cstr_at(strings, nameoff as usize) {
                    Ok("") => return Err(err(&path, pos, "property with an empty name")),
                    Ok(_) => {}
                    Err(why) => return Err(err(&path, pos, prop_name_why(why))),
                }
                pos = align4(value_end);
            }
            FDT_END_NODE => {
                let Some(level) = levels.pop() else {
                    return Err(err(&path, pos, "FDT_END_NODE without a matching FDT_BEGIN_NODE"));
                };
                path.truncate(level.path_len);
                if levels.is_empty() {
                    root_done = true;
                }
                pos += 4;
            }
            FDT_END => {
                if !root_done {
                    return Err(err(&path, pos, "FDT_END before the root node is closed"));
                }
                break;
            }
            _ => return Err(err(&path, pos, "unknown token in the structure block")),
        }
    }
    if nops == 0 {
        return Ok(Checked::Borrowed(data));
    }
    Ok(Checked::Owned(strip_nops(data, &h, pos + 4)))
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

/// Copies a checked blob without its `FDT_NOP` tokens. `struct_end` is just past `FDT_END`.
fn strip_nops(data: &[u8], h: &Header, struct_end: usize) -> Vec<u8> {
    let mut structs = Vec::with_capacity(struct_end - h.off_dt_struct);
    let mut pos = h.off_dt_struct;
    while pos < struct_end {
        let tag = be32(data, pos).unwrap_or(FDT_END);
        let len = match tag {
            FDT_BEGIN_NODE => {
                let name_len = cstr_at(data, pos + 4).map(str::len).unwrap_or(0);
                align4(4 + name_len + 1)
            }
            FDT_PROP => align4(12 + be32(data, pos + 4).unwrap_or(0) as usize),
            _ => 4,
        };
        if tag != FDT_NOP {
            structs.extend_from_slice(&data[pos..pos + len]);
        }
        pos += len;
    }
    // Reservation entries including the terminator (validated above).
    let mut rsv_len = 16;
    while be64(data, h.off_mem_rsvmap + rsv_len - 16) != Some(0)
        || be64(data, h.off_mem_rsvmap + rsv_len - 8) != Some(0)
    {
        rsv_len += 16;
    }
    let strings = &data[h.off_dt_strings..h.off_dt_strings + h.size_dt_strings];
    let off_rsv = HEADER_LEN;
    let off_struct = off_rsv + rsv_len;
    let off_strings = off_struct + structs.len();
    let total = off_strings + strings.len();
    let mut out = Vec::with_capacity(total);
    for v in [
        FDT_MAGIC,
        total as u32,
        off_struct as u32,
        off_strings as u32,
        off_rsv as u32,
        17,
        16,
        h.boot_cpuid_phys,
        strings.len() as u32,
        structs.len() as u32,
    ] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    out.extend_from_slice(&data[h.off_mem_rsvmap..h.off_mem_rsvmap + rsv_len]);
    out.extend_from_slice(&structs);
    out.extend_from_slice(strings);
    out
}
