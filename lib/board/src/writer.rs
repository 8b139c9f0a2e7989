//! A small flattened-device-tree writer (version 17 blobs).
//!
//! Hand-written on purpose: `vm-fdt` 0.3 builds `no_std` + `alloc`, but it enforces the spec's
//! naming rules strictly (node names must start with a letter and be at most 31 characters
//! before the `@`, property names at most 31 characters) and real trees break them: the
//! Raspberry Pi 5 tree has a `__symbols__` node, which it refuses. Re-emitting a host tree must
//! not fail on those, so this writer checks only what makes the blob well-formed (no NUL in
//! names or `/` in node names, balanced nodes,
//! properties before child nodes, sizes within 32 bits, nesting depth).

use alloc::collections::BTreeMap;
use alloc::string::String;
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
    structs: Vec<u8>,
    strings: Vec<u8>,
    string_offsets: BTreeMap<String, u32>,
    /// One entry per open node: has it had a child node yet?
    open: Vec<bool>,
    root_done: bool,
    mem_reserve: Vec<(u64, u64)>,
    boot_cpuid_phys: u32,
}

fn werr(why: &'static str) -> BoardError {
    BoardError::Write { why }
}

impl FdtWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
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
        self.push_u32(FDT_BEGIN_NODE);
        self.structs.extend_from_slice(name.as_bytes());
        self.structs.push(0);
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
        match self.open.last() {
            None => return Err(werr("property outside any node")),
            Some(true) => return Err(werr("property after a child node")),
            Some(false) => {}
        }
        if name.is_empty() || name.contains('\0') {
            return Err(werr("property name is empty or contains NUL"));
        }
        let len = u32::try_from(value.len()).map_err(|_| werr("property value over 4 GiB"))?;
        let nameoff = match self.string_offsets.get(name) {
            Some(&off) => off,
            None => {
                let off = u32::try_from(self.strings.len()).map_err(|_| werr("strings block over 4 GiB"))?;
                self.strings.extend_from_slice(name.as_bytes());
                self.strings.push(0);
                self.string_offsets.insert(String::from(name), off);
                off
            }
        };
        self.push_u32(FDT_PROP);
        self.push_u32(len);
        self.push_u32(nameoff);
        self.structs.extend_from_slice(value);
        self.align();
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
        let off_rsv = HEADER_LEN;
        let rsv_len = (self.mem_reserve.len() + 1) * 16;
        let off_struct = off_rsv + rsv_len;
        let off_strings = off_struct + self.structs.len();
        let total = off_strings + self.strings.len();
        let fit = |x: usize| u32::try_from(x).map_err(|_| werr("blob over 4 GiB"));
        let mut out = Vec::with_capacity(total);
        for v in [
            FDT_MAGIC,
            fit(total)?,
            fit(off_struct)?,
            fit(off_strings)?,
            fit(off_rsv)?,
            17,
            16,
            self.boot_cpuid_phys,
            fit(self.strings.len())?,
            fit(self.structs.len())?,
        ] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        for (a, s) in self.mem_reserve.iter().chain([(0, 0)].iter()) {
            out.extend_from_slice(&a.to_be_bytes());
            out.extend_from_slice(&s.to_be_bytes());
        }
        out.extend_from_slice(&self.structs);
        out.extend_from_slice(&self.strings);
        Ok(out)
    }

    fn push_u32(&mut self, v: u32) {
        self.structs.extend_from_slice(&v.to_be_bytes());
    }

    fn align(&mut self) {
        while !self.structs.len().is_multiple_of(4) {
            self.structs.push(0);
        }
    }
}
