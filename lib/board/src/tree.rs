//! A flat, path-indexed view of a checked tree, built on `fdt`'s node iterators.
//!
//! Only the panic-free parts of `fdt` are used (`Fdt::new`, `root`, `FdtNode::{name,
//! properties, children}`, `memory_reservations`) and only on blobs that passed
//! [`crate::validate::check`]. Property values are decoded here with checked arithmetic, each
//! failure turned into a [`BoardError`] naming the node and property.

use alloc::string::String;
use alloc::vec::Vec;

use fdt::node::FdtNode;
use fdt::Fdt;

use crate::error::{bad_prop, missing_prop, BoardError};

/// A property as the blob has it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prop<'a> {
    pub name: &'a str,
    pub value: &'a [u8],
}

pub(crate) struct Node<'b, 'a> {
    pub path: String,
    pub name: &'a str,
    pub fdt: FdtNode<'b, 'a>,
    /// Its properties in the blob's order, decoded once: `fdt` finds a property by decoding
    /// every one before it (its name looked up and checked as UTF-8 each time), and every
    /// look-up here would pay that again.
    pub props: Vec<Prop<'a>>,
    pub parent: Option<usize>,
    pub children: Vec<usize>,
}

/// All nodes in depth-first pre-order; index 0 is the root.
pub(crate) struct Tree<'b, 'a> {
    pub nodes: Vec<Node<'b, 'a>>,
}

/// `#address-cells` / `#size-cells` a node declares for its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cells {
    pub addr: u32,
    pub size: u32,
}

fn props_of<'a>(n: FdtNode<'_, 'a>) -> Vec<Prop<'a>> {
    n.properties().map(|p| Prop { name: p.name, value: p.value }).collect()
}

impl<'b, 'a> Tree<'b, 'a> {
    pub(crate) fn build(fdt: &'b Fdt<'a>) -> Result<Self, BoardError> {
        let mut nodes = Vec::new();
        let root = fdt.find_node("/").ok_or_else(|| BoardError::MissingNode { node: String::from("/") })?;
        nodes.push(Node {
            path: String::from("/"),
            name: "",
            fdt: root,
            props: props_of(root),
            parent: None,
            children: Vec::new(),
        });
        Self::add_children(&mut nodes, 0);
        Ok(Tree { nodes })
    }

    fn add_children(nodes: &mut Vec<Node<'b, 'a>>, parent: usize) {
        let pnode = nodes[parent].fdt;
        for child in pnode.children() {
            let mut path = nodes[parent].path.clone();
            if parent != 0 {
                path.push('/');
            }
            path.push_str(child.name);
            let idx = nodes.len();
            nodes.push(Node {
                path,
                name: child.name,
                fdt: child,
                props: props_of(child),
                parent: Some(parent),
                children: Vec::new(),
            });
            nodes[parent].children.push(idx);
            Self::add_children(nodes, idx);
        }
    }

    pub(crate) fn path(&self, i: usize) -> &str {
        &self.nodes[i].path
    }

    pub(crate) fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.nodes[i].children.iter().copied()
    }

    pub(crate) fn prop(&self, i: usize, name: &str) -> Option<&'a [u8]> {
        self.nodes[i].props.iter().find(|p| p.name == name).map(|p| p.value)
    }

    pub(crate) fn has_prop(&self, i: usize, name: &str) -> bool {
        self.prop(i, name).is_some()
    }

    /// A string property (one NUL-terminated UTF-8 string).
    pub(crate) fn prop_str(&self, i: usize, name: &'static str) -> Result<Option<&'a str>, BoardError> {
        let Some(v) = self.prop(i, name) else {
            return Ok(None);
        };
        match v.split_last() {
            Some((0, s)) if !s.contains(&0) => {
                core::str::from_utf8(s).map(Some).map_err(|_| bad_prop(self.path(i), name, "string is not UTF-8"))
            }
            _ => Err(bad_prop(self.path(i), name, "not a single NUL-terminated string")),
        }
    }

    /// A string-list property.
    pub(crate) fn prop_strs(&self, i: usize, name: &'static str) -> Result<Option<Vec<&'a str>>, BoardError> {
        let Some(v) = self.prop(i, name) else {
            return Ok(None);
        };
        let Some((0, body)) = v.split_last() else {
            return Err(bad_prop(self.path(i), name, "string list not NUL-terminated"));
        };
        body.split(|&b| b == 0)
            .map(|s| core::str::from_utf8(s).map_err(|_| bad_prop(self.path(i), name, "string is not UTF-8")))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Lenient check used for matching: does `compatible` list `what`?
    pub(crate) fn is_compatible(&self, i: usize, what: &[&str]) -> bool {
        self.prop(i, "compatible").is_some_and(|v| v.split(|&b| b == 0).any(|s| what.iter().any(|w| w.as_bytes() == s)))
    }

    pub(crate) fn prop_u32(&self, i: usize, name: &'static str) -> Result<Option<u32>, BoardError> {
        let Some(v) = self.prop(i, name) else {
            return Ok(None);
        };
        match <[u8; 4]>::try_from(v) {
            Ok(b) => Ok(Some(u32::from_be_bytes(b))),
            Err(_) => Err(bad_prop(self.path(i), name, "expected exactly one 32-bit cell")),
        }
    }

    /// A one- or two-cell number.
    pub(crate) fn prop_u32_or_u64(&self, i: usize, name: &'static str) -> Result<Option<u64>, BoardError> {
        let Some(v) = self.prop(i, name) else {
            return Ok(None);
        };
        match v.len() {
            4 | 8 => Ok(read_cells(v, (v.len() / 4) as u32)),
            _ => Err(bad_prop(self.path(i), name, "expected one or two 32-bit cells")),
        }
    }

    /// The cells node `i` declares for its children; both properties are required.
    pub(crate) fn cells(&self, i: usize) -> Result<Cells, BoardError> {
        let path = self.path(i);
        let addr = self.prop_u32(i, "#address-cells")?.ok_or_else(|| missing_prop(path, "#address-cells"))?;
        let size = self.prop_u32(i, "#size-cells")?.ok_or_else(|| missing_prop(path, "#size-cells"))?;
        Ok(Cells { addr, size })
    }

    /// Decodes `prop` of node `i` as (address, size) pairs using the parent's cells.
    pub(crate) fn addr_size_pairs(&self, i: usize, prop: &'static str) -> Result<Option<Vec<(u64, u64)>>, BoardError> {
        let Some(v) = self.prop(i, prop) else {
            return Ok(None);
        };
        let parent = self.nodes[i].parent.ok_or_else(|| bad_prop("/", prop, "the root node has no parent bus"))?;
        let cells = self.cells(parent)?;
        decode_pairs(v, cells).map(Some).map_err(|why| bad_prop(self.path(i), prop, why))
    }

    /// `reg` of node `i`, translated to CPU physical addresses through every ancestor's
    /// `ranges`. `Ok(None)` when the node has no `reg` or a bus on the way has no `ranges`
    /// (its children are not memory-mapped).
    pub(crate) fn reg_phys(&self, i: usize) -> Result<Option<Vec<(u64, u64)>>, BoardError> {
        let Some(pairs) = self.addr_size_pairs(i, "reg")? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(pairs.len());
        for (addr, size) in pairs {
            match self.translate(i, addr, size)? {
                Some(phys) => out.push((phys, size)),
                None => return Ok(None),
            }
        }
        Ok(Some(out))
    }

    /// `[addr, addr + size)` as node `i`'s `reg` would give it (an address on `i`'s parent
    /// bus), translated to a CPU physical address; `Ok(None)` when not reachable.
    pub(crate) fn translate(&self, i: usize, mut addr: u64, size: u64) -> Result<Option<u64>, BoardError> {
        let mut bus = self.nodes[i].parent;
        while let Some(b) = bus {
            let Some(up) = self.nodes[b].parent else {
                break;
            };
            let Some(ranges) = self.prop(b, "ranges") else {
                return Ok(None);
            };
            if !ranges.is_empty() {
                let child = self.cells(b)?;
                let parent = self.cells(up)?;
                let why = "entry needs more than 2 address or size cells, or length not a multiple of the entry size";
                let entries =
                    decode_ranges(ranges, child, parent).ok_or_else(|| bad_prop(self.path(b), "ranges", why))?;
                let hit = entries.iter().find(|(c, _, len)| addr >= *c && addr - c < *len && size <= len - (addr - c));
                let Some((c, p, _)) = hit else {
                    return Ok(None);
                };
                addr = (addr - c)
                    .checked_add(*p)
                    .ok_or_else(|| bad_prop(self.path(b), "ranges", "translated address wraps past 2^64"))?;
            }
            bus = Some(up);
        }
        Ok(Some(addr))
    }

    /// Finds a node by absolute path. A component without `@` matches a node name up to its
    /// `@` (the first such child), as in Linux's `of_find_node_by_path`.
    pub(crate) fn find_path(&self, path: &str) -> Option<usize> {
        let rest = path.strip_prefix('/')?;
        let mut cur = 0;
        for comp in rest.split('/').filter(|c| !c.is_empty()) {
            cur = self.children(cur).find(|&c| {
                let name = self.nodes[c].name;
                name == comp || (!comp.contains('@') && name.split('@').next() == Some(comp))
            })?;
        }
        Some(cur)
    }

    /// Resolves an alias (a property of `/aliases`) or an absolute path.
    pub(crate) fn resolve(&self, path_or_alias: &str) -> Result<Option<usize>, BoardError> {
        if path_or_alias.starts_with('/') {
            return Ok(self.find_path(path_or_alias));
        }
        let Some(aliases) = self.find_path("/aliases") else {
            return Ok(None);
        };
        let Some(target) = self.prop(aliases, path_or_alias) else {
            return Ok(None);
        };
        let target = match target.split_last() {
            Some((0, s)) => core::str::from_utf8(s).ok(),
            _ => None,
        };
        let Some(target) = target.filter(|t| t.starts_with('/')) else {
            return Err(BoardError::BadProperty {
                node: String::from("/aliases"),
                prop: "(alias)",
                why: "alias value is not an absolute path string",
            });
        };
        Ok(self.find_path(target))
    }

    pub(crate) fn by_phandle(&self, phandle: u32) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| {
            ["phandle", "linux,phandle"].iter().any(|n| {
                self.prop(i, n).and_then(|v| <[u8; 4]>::try_from(v).ok()).map(u32::from_be_bytes) == Some(phandle)
            })
        })
    }
}

/// Reads `n` (0..=2) big-endian cells from the start of `v`.
pub(crate) fn read_cells(v: &[u8], n: u32) -> Option<u64> {
    match n {
        0 => Some(0),
        1 => Some(u32::from_be_bytes(v.get(..4)?.try_into().ok()?).into()),
        2 => Some(u64::from_be_bytes(v.get(..8)?.try_into().ok()?)),
        _ => None,
    }
}

pub(crate) fn decode_pairs(v: &[u8], cells: Cells) -> Result<Vec<(u64, u64)>, &'static str> {
    if cells.addr > 2 || cells.size > 2 {
        return Err("more than 2 address or size cells do not fit in 64 bits");
    }
    let entry = ((cells.addr + cells.size) * 4) as usize;
    if entry == 0 {
        return Err("#address-cells and #size-cells of the parent are both 0");
    }
    if !v.len().is_multiple_of(entry) {
        return Err("length not a multiple of the cell size");
    }
    let a_len = (cells.addr * 4) as usize;
    Ok(v.chunks_exact(entry)
        .map(|e| {
            let a = read_cells(e, cells.addr).unwrap_or(0);
            let s = read_cells(&e[a_len..], cells.size).unwrap_or(0);
            (a, s)
        })
        .collect())
}

fn decode_ranges(v: &[u8], child: Cells, parent: Cells) -> Option<Vec<(u64, u64, u64)>> {
    if child.addr > 2 || parent.addr > 2 || child.size > 2 {
        return None;
    }
    let entry = ((child.addr + parent.addr + child.size) * 4) as usize;
    if entry == 0 || !v.len().is_multiple_of(entry) {
        return None;
    }
    let (ca, pa) = ((child.addr * 4) as usize, (parent.addr * 4) as usize);
    v.chunks_exact(entry)
        .map(|e| {
            Some((
                read_cells(e, child.addr)?,
                read_cells(&e[ca..], parent.addr)?,
                read_cells(&e[ca + pa..], child.size)?,
            ))
        })
        .collect()
}
