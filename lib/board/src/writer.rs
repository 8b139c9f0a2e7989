//! A small flattened-device-tree writer (version 17 blobs).
//!
//! Hand-written on purpose: `vm-fdt` 0.3 builds `no_std` + `alloc`, but it enforces the spec's
//! naming rules strictly (node names must start with a letter and be at most 31 characters
//! before the `@`, property names at most 31 characters) and real trees break them: the
//! Raspberry Pi 5 tree has a `__symbols__` node, which it refuses. Re-emitting a host tree must
//! not fail on those, so this writer checks only what makes the blob well-formed (no NUL in
//! names or `/` in node names, balanced nodes,
//! properties before child nodes, sizes within 32 bits, nesting depth).

use alloc::vec::Vec;

use crate::error::BoardError;
use crate::validate::{FDT_BEGIN_NODE, FDT_END, FDT_END_NODE, FDT_MAGIC, FDT_PROP, HEADER_LEN, MAX_DEPTH};

/// Builds a DTB node by node.
///
/// ```
/// let mut w = board::FdtWriter::new();
/// w.begin_node("").unwrap();
/// w.property_u32("#address-cells", 2).unwrap();
/// w.begin_node("chosen").unwrap();
/// w.property_str("bootargs", "console=ttyAMA0").unwrap();
/// w.end_node().unwrap();
/// w.end_node().unwrap();
/// let dtb = w.finish().unwrap();
/// assert_eq!(&dtb[..4], &[0xd0, 0x0d, 0xfe, 0xed]);
/// ```
#[derive(Debug, Default)]
pub struct FdtWriter {
    /// The blob as far as it is known: from the first node on, room for the header (written by
    /// [`FdtWriter::finish`]), the memory reservations added until then with their terminator,
    /// and the structure block so far; empty before. The blob is built in place: no copy of it
    /// at the end (a byte at a time on the bare-metal targets).
    buf: Vec<u8>,
    /// Where the structure block starts in `buf` (0 before the first node).
    struct_start: usize,
    /// Room `buf` gets at the first node.
    reserve: usize,
    strings: Vec<u8>,
    /// The names in `strings`, open-addressed by [`name_hash`]: `(hash, offset + 1)`, `(_, 0)`
    /// an empty slot; a power of two long (or empty), at most half full.
    names: Vec<(u32, u32)>,
    name_count: usize,
    /// One entry per open node: has it had a child node yet?
    open: Vec<bool>,
    root_done: bool,
    /// Memory reservations, in the order added; those added before the first node are in `buf`
    /// already.
    mem_reserve: Vec<(u64, u64)>,
    boot_cpuid_phys: u32,
}

fn werr(why: &'static str) -> BoardError {
    BoardError::Write { why }
}

/// FNV-1a: property names are short; equal names have equal hashes.
fn name_hash(name: &[u8]) -> u32 {
    name.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

impl FdtWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer with room for a structure block of `structs` bytes and a strings block
    /// of `strings` bytes (a re-emitted tree's are about its source's).
    pub fn with_capacity(structs: usize, strings: usize) -> Self {
        FdtWriter { reserve: structs, strings: Vec::with_capacity(strings), ..Self::default() }
    }

    /// The offset of `name` in the strings block, if it is there.
    fn find_name(&self, name: &[u8], hash: u32) -> Option<u32> {
        if self.names.is_empty() {
            return None;
        }
        let mask = self.names.len() - 1;
        let mut i = hash as usize & mask;
        loop {
            let (h, at) = self.names[i];
            if at == 0 {
                return None;
            }
            let off = (at - 1) as usize;
            if h == hash
                && self.strings.get(off..off + name.len()) == Some(name)
                && self.strings.get(off + name.len()) == Some(&0)
            {
                return Some(off as u32);
            }
            i = (i + 1) & mask;
        }
    }

    /// Records that `strings` holds a name hashing to `hash` at `off`.
    fn add_name(&mut self, hash: u32, off: u32) {
        if (self.name_count + 1) * 2 > self.names.len() {
            let room = (self.names.len() * 2).max(64);
            let old = core::mem::replace(&mut self.names, alloc::vec![(0, 0); room]);
            for (h, at) in old.into_iter().filter(|&(_, at)| at != 0) {
                self.place(h, at);
            }
        }
        self.place(hash, off + 1);
        self.name_count += 1;
    }

    fn place(&mut self, hash: u32, at: u32) {
        let mask = self.names.len() - 1;
        let mut i = hash as usize & mask;
        while self.names[i].1 != 0 {
            i = (i + 1) & mask;
        }
        self.names[i] = (hash, at);
    }

    /// Adds a `/memreserve/` entry (written in the order added).
    pub fn add_mem_reserve(&mut self, address: u64, size: u64) -> Result<(), BoardError> {
        if size == 0 {
            return Err(werr("memory reservation of size 0 would end the list"));
        }
        if address.checked_add(size).is_none() {
            return Err(werr("memory reservation wraps past 2^64"));
        }
        self.mem_reserve.push((address, size));
        Ok(())
    }

    /// Sets the header's `boot_cpuid_phys`.
    pub fn set_boot_cpuid_phys(&mut self, id: u32) {
        self.boot_cpuid_phys = id;
    }

    /// Opens a node. The first node is the root and must be named "".
    pub fn begin_node(&mut self, name: &str) -> Result<(), BoardError> {
        if self.root_done {
            return Err(werr("node after the root node was closed"));
        }
        if self.open.len() >= MAX_DEPTH {
            return Err(werr("nodes nested deeper than 32 levels"));
        }
        if name.contains('\0') || name.contains('/') {
            return Err(werr("node name contains NUL or '/'"));
        }
        match (self.open.last_mut(), name.is_empty()) {
            (None, false) => return Err(werr("root node name must be empty")),
            (Some(_), true) => return Err(werr("child node name is empty")),
            (Some(parent), false) => *parent = true,
            (None, true) => {}
        }
        if self.struct_start == 0 {
            // The first node: header, the reservations so far and their terminator go first.
            let mut buf = Vec::with_capacity(HEADER_LEN + 16 * (self.mem_reserve.len() + 1) + self.reserve);
            buf.resize(HEADER_LEN, 0);
            for (a, s) in self.mem_reserve.iter().chain(&[(0, 0)]) {
                buf.extend_from_slice(&a.to_be_bytes());
                buf.extend_from_slice(&s.to_be_bytes());
            }
            self.struct_start = buf.len();
            self.buf = buf;
        }
        self.push_u32(FDT_BEGIN_NODE);
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.align();
        self.open.push(false);
        Ok(())
    }

    /// Closes the innermost open node.
    pub fn end_node(&mut self) -> Result<(), BoardError> {
        if self.open.pop().is_none() {
            return Err(werr("end_node without an open node"));
        }
        self.push_u32(FDT_END_NODE);
        if self.open.is_empty() {
            self.root_done = true;
        }
        Ok(())
    }

    /// Adds a property with a raw value to the innermost open node.
    pub fn property(&mut self, name: &str, value: &[u8]) -> Result<(), BoardError> {
        self.property_allowed()?;
        let hash = name_hash(name.as_bytes());
        // A name found is one checked when it was added: not empty, no NUL.
        let found = self.find_name(name.as_bytes(), hash);
        if found.is_none() && (name.is_empty() || name.contains('\0')) {
            return Err(werr("property name is empty or contains NUL"));
        }
        let len = u32::try_from(value.len()).map_err(|_| werr("property value over 4 GiB"))?;
        let nameoff = match found {
            Some(off) => off,
            None => {
                let off = u32::try_from(self.strings.len()).map_err(|_| werr("strings block over 4 GiB"))?;
                self.strings.extend_from_slice(name.as_bytes());
                self.strings.push(0);
                self.add_name(hash, off);
                off
            }
        };
        self.push_prop(len, nameoff, value);
        Ok(())
    }

    /// A property may be added now: a node is open and has had no child node yet.
    fn property_allowed(&self) -> Result<(), BoardError> {
        match self.open.last() {
            None => Err(werr("property outside any node")),
            Some(true) => Err(werr("property after a child node")),
            Some(false) => Ok(()),
        }
    }

    fn push_prop(&mut self, len: u32, nameoff: u32, value: &[u8]) {
        let mut head = [0u8; 12];
        head[..4].copy_from_slice(&FDT_PROP.to_be_bytes());
        head[4..8].copy_from_slice(&len.to_be_bytes());
        head[8..].copy_from_slice(&nameoff.to_be_bytes());
        self.buf.extend_from_slice(&head);
        self.buf.extend_from_slice(value);
        self.align();
    }

    /// [`FdtWriter::property`] for a name `note` stands for: `*note` is 0 or the offset + 1
    /// this writer gave that name, set here the first time (a tree re-emitted names a few
    /// hundred properties thousands of times: each found once).
    pub(crate) fn property_noted(&mut self, name: &str, note: &mut u32, value: &[u8]) -> Result<(), BoardError> {
        if *note == 0 {
            self.property(name, value)?;
            // The name is the strings block's, found or added by `property`.
            *note = self.find_name(name.as_bytes(), name_hash(name.as_bytes())).map_or(0, |off| off + 1);
            return Ok(());
        }
        self.property_allowed()?;
        let len = u32::try_from(value.len()).map_err(|_| werr("property value over 4 GiB"))?;
        self.push_prop(len, *note - 1, value);
        Ok(())
    }

    /// An empty (boolean) property.
    pub fn property_empty(&mut self, name: &str) -> Result<(), BoardError> {
        self.property(name, &[])
    }

    /// A one-cell property.
    pub fn property_u32(&mut self, name: &str, value: u32) -> Result<(), BoardError> {
        self.property(name, &value.to_be_bytes())
    }

    /// A two-cell property.
    pub fn property_u64(&mut self, name: &str, value: u64) -> Result<(), BoardError> {
        self.property(name, &value.to_be_bytes())
    }

    /// A NUL-terminated string property.
    pub fn property_str(&mut self, name: &str, value: &str) -> Result<(), BoardError> {
        self.property_strs(name, &[value])
    }

    /// A string-list property (each string NUL-terminated).
    pub fn property_strs(&mut self, name: &str, values: &[&str]) -> Result<(), BoardError> {
        let mut bytes = Vec::new();
        for v in values {
            if v.contains('\0') {
                return Err(werr("string property value contains NUL"));
            }
            bytes.extend_from_slice(v.as_bytes());
            bytes.push(0);
        }
        self.property(name, &bytes)
    }

    /// Finishes the blob: header, memory reservations, structure block, strings block.
    pub fn finish(mut self) -> Result<Vec<u8>, BoardError> {
        if !self.root_done || !self.open.is_empty() {
            return Err(werr("root node missing or not closed"));
        }
        self.push_u32(FDT_END);
        let early = (self.struct_start - HEADER_LEN) / 16 - 1;
        if early < self.mem_reserve.len() {
            // Reservations added after the first node: in before the terminator.
            let late: Vec<u8> = self.mem_reserve[early..]
                .iter()
                .flat_map(|(a, s)| a.to_be_bytes().into_iter().chain(s.to_be_bytes()))
                .collect();
            let at = self.struct_start - 16;
            self.buf.splice(at..at, late);
            self.struct_start += 16 * (self.mem_reserve.len() - early);
        }
        let structs_len = self.buf.len() - self.struct_start;
        let off_struct = self.struct_start;
        let off_strings = off_struct + structs_len;
        let total = off_strings + self.strings.len();
        let fit = |x: usize| u32::try_from(x).map_err(|_| werr("blob over 4 GiB"));
        let header = [
            FDT_MAGIC,
            fit(total)?,
            fit(off_struct)?,
            fit(off_strings)?,
            HEADER_LEN as u32,
            17,
            16,
            self.boot_cpuid_phys,
            fit(self.strings.len())?,
            fit(structs_len)?,
        ];
        for (k, v) in header.iter().enumerate() {
            self.buf[4 * k..4 * k + 4].copy_from_slice(&v.to_be_bytes());
        }
        self.buf.extend_from_slice(&self.strings);
        Ok(self.buf)
    }

    fn push_u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }

    fn align(&mut self) {
        let pad = self.buf.len().wrapping_neg() & 3;
        self.buf.extend_from_slice(&[0u8; 3][..pad]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A name written through its note gives the blob `property` gives.
        #[test]
        fn noted_names_write_what_property_writes(picks in prop::collection::vec((0usize..40, any::<bool>()), 1..200)) {
            let names: Vec<alloc::string::String> = (0..40).map(|k| alloc::format!("p{}", k % 23 + k / 23 * 100)).collect();
            let mut plain = FdtWriter::new();
            let mut noted = FdtWriter::new();
            let mut notes = [0u32; 40];
            for w in [&mut plain, &mut noted] {
                w.begin_node("").unwrap();
                w.property_u32("#address-cells", 2).unwrap();
            }
            for (j, &(k, use_note)) in picks.iter().enumerate() {
                let value = (j as u32).to_be_bytes();
                plain.property(&names[k], &value[..j % 5]).unwrap();
                if use_note {
                    noted.property_noted(&names[k], &mut notes[k], &value[..j % 5]).unwrap();
                } else {
                    noted.property(&names[k], &value[..j % 5]).unwrap();
                }
            }
            for w in [&mut plain, &mut noted] {
                w.end_node().unwrap();
            }
            prop_assert_eq!(plain.finish().unwrap(), noted.finish().unwrap());
        }
    }
}
