//! A flat, index-linked view of a checked tree, built in the same walk that validates the blob
//! ([`crate::validate::parse`]).
//!
//! Each node's name and properties are decoded once, in that walk: nothing here re-reads the
//! token stream (the `fdt` crate, used before, re-decoded a node's whole subtree, every
//! property name checked as UTF-8 again, once per ancestor). Paths are built only when asked
//! for (errors, the paths [`crate::Board`] reports). Property values are decoded here with
//! checked arithmetic, each failure turned into a [`BoardError`] naming the node and property.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::{bad_prop, missing_prop, BoardError};

/// Deepest node nesting a tree holds and the walk accepts (the root is depth 1). Real trees
/// stay below 10.
pub const MAX_DEPTH: usize = 32;

/// A property as the blob has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Prop<'a> {
    pub name: &'a str,
    pub value: &'a [u8],
    /// The same for every property of this name (the offset of the strings block it came
    /// from), `1..Tree::name_ids()`; 0 when not known.
    pub name_id: u16,
}

/// The properties that give a node's phandle.
pub(crate) const PHANDLE_NAMES: [&str; 2] = ["phandle", "linux,phandle"];

/// No node: the end of a sibling list, the root's parent.
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone)]
pub(crate) struct Node<'a> {
    pub name: &'a str,
    /// Its properties, in the blob's order: `Tree::props[props.0..props.1]`.
    props: (u32, u32),
    parent: u32,
    first_child: u32,
    last_child: u32,
    next_sibling: u32,
}

impl Node<'_> {
    /// The parent's index; `None` for the root.
    pub(crate) fn parent(&self) -> Option<usize> {
        (self.parent != NONE).then_some(self.parent as usize)
    }
}

/// All nodes in depth-first pre-order; index 0 is the root.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree<'a> {
    pub nodes: Vec<Node<'a>>,
    props: Vec<Prop<'a>>,
    /// `(phandle, node)` for each node's first `phandle` and first `linux,phandle` property
    /// that is one cell, in node order: [`Tree::by_phandle`]'s index.
    phandles: Vec<(u32, u32)>,
    /// One more than the largest [`Prop::name_id`].
    name_ids: usize,
}

/// `#address-cells` / `#size-cells` a node declares for its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cells {
    pub addr: u32,
    pub size: u32,
}

impl<'a> Tree<'a> {
    /// A tree with room for about `nodes` nodes and `props` properties.
    pub(crate) fn with_capacity(nodes: usize, props: usize) -> Self {
        Tree { nodes: Vec::with_capacity(nodes), props: Vec::with_capacity(props), phandles: Vec::new(), name_ids: 1 }
    }

    /// Adds a node (the next in pre-order) under `parent` (`None`: the root) and returns its
    /// index. Its properties are the ones [`Tree::push_prop`] adds next.
    pub(crate) fn push_node(&mut self, name: &'a str, parent: Option<usize>) -> usize {
        let idx = self.nodes.len();
        let at = self.props.len() as u32;
        let parent = parent.map_or(NONE, |p| p as u32);
        self.nodes.push(Node {
            name,
            props: (at, at),
            parent,
            first_child: NONE,
            last_child: NONE,
            next_sibling: NONE,
        });
        if parent != NONE {
            let p = &mut self.nodes[parent as usize];
            let last = p.last_child;
            p.last_child = idx as u32;
            if last == NONE {
                p.first_child = idx as u32;
            } else {
                self.nodes[last as usize].next_sibling = idx as u32;
            }
        }
        idx
    }

    /// Adds a property to the node added last (properties come before child nodes);
    /// `phandle`: whether `name` is [`PHANDLE_NAMES`]' (the caller knows it per name);
    /// `name_id`: see [`Prop::name_id`].
    pub(crate) fn push_prop(&mut self, name: &'a str, value: &'a [u8], phandle: bool, name_id: u16) {
        let Some(node) = self.nodes.len().checked_sub(1) else {
            return;
        };
        // A look-up finds a node's first property of a name: only that one is indexed.
        if phandle && !self.props(node).iter().any(|p| p.name == name) {
            if let Ok(v) = <[u8; 4]>::try_from(value) {
                self.phandles.push((u32::from_be_bytes(v), node as u32));
            }
        }
        self.props.push(Prop { name, value, name_id });
        self.name_ids = self.name_ids.max(usize::from(name_id) + 1);
        self.nodes[node].props.1 = self.props.len() as u32;
    }

    /// One more than the largest [`Prop::name_id`].
    pub(crate) fn name_ids(&self) -> usize {
        self.name_ids
    }

    /// Node `i`'s properties in the blob's order.
    pub(crate) fn props(&self, i: usize) -> &[Prop<'a>] {
        let (a, b) = self.nodes[i].props;
        &self.props[a as usize..b as usize]
    }

    /// Node `i`'s absolute path (`/` for the root), built from its ancestors' names.
    pub(crate) fn path(&self, i: usize) -> String {
        let mut chain = [0usize; MAX_DEPTH];
        let mut depth = 0;
        let mut cur = i;
        while let Some(p) = self.nodes[cur].parent() {
            if depth < chain.len() {
                chain[depth] = cur;
            }
            depth += 1;
            cur = p;
        }
        if depth == 0 {
            return String::from("/");
        }
        let depth = depth.min(chain.len());
        let mut s = String::with_capacity(chain[..depth].iter().map(|&c| self.nodes[c].name.len() + 1).sum());
        for &c in chain[..depth].iter().rev() {
            s.push('/');
            s.push_str(self.nodes[c].name);
        }
        s
    }

    /// The first node in pre-order whose path is exactly `path`.
    pub(crate) fn find_exact(&self, path: &str) -> Option<usize> {
        if path == "/" {
            return Some(0);
        }
        let rest = path.strip_prefix('/')?;
        self.find_exact_under(0, rest)
    }

    /// The first node in pre-order under `i` at the relative path `rest` (components exact;
    /// siblings of one name are all tried, in order).
    fn find_exact_under(&self, i: usize, rest: &str) -> Option<usize> {
        let (comp, tail) = match rest.split_once('/') {
            Some((c, t)) => (c, Some(t)),
            None => (rest, None),
        };
        self.children(i).filter(|&c| self.nodes[c].name == comp).find_map(|c| match tail {
            None => Some(c),
            Some(t) => self.find_exact_under(c, t),
        })
    }

    /// The top-level node (a child of the root) node `i` is or lies under; `None` for the root.
    pub(crate) fn top_level(&self, mut i: usize) -> Option<usize> {
        loop {
            match self.nodes[i].parent() {
                None => return None,
                Some(0) => return Some(i),
                Some(p) => i = p,
            }
        }
    }

    pub(crate) fn children(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let first = self.nodes[i].first_child;
        core::iter::successors((first != NONE).then_some(first), move |&c| {
            let n = self.nodes[c as usize].next_sibling;
            (n != NONE).then_some(n)
        })
        .map(|c| c as usize)
    }

    pub(crate) fn has_children(&self, i: usize) -> bool {
        self.nodes[i].first_child != NONE
    }

    pub(crate) fn prop(&self, i: usize, name: &str) -> Option<&'a [u8]> {
        self.props(i).iter().find(|p| p.name == name).map(|p| p.value)
    }

    pub(crate) fn has_prop(&self, i: usize, name: &str) -> bool {
        self.prop(i, name).is_some()
    }

    /// A string property (one NUL-terminated UTF-8 string).
    pub(crate) fn prop_str(&self, i: usize, name: &'static str) -> Result<Option<&'a str>, BoardError> {
        self.prop(i, name).map(str_value).transpose().map_err(|why| bad_prop(self.path(i), name, why))
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
        self.prop(i, name).map(u32_value).transpose().map_err(|why| bad_prop(self.path(i), name, why))
    }

    /// A one- or two-cell number.
    pub(crate) fn prop_u32_or_u64(&self, i: usize, name: &'static str) -> Result<Option<u64>, BoardError> {
        self.prop(i, name).map(u32_or_u64_value).transpose().map_err(|why| bad_prop(self.path(i), name, why))
    }

    /// The cells node `i` declares for its children; both properties are required.
    pub(crate) fn cells(&self, i: usize) -> Result<Cells, BoardError> {
        let addr = self.prop_u32(i, "#address-cells")?.ok_or_else(|| missing_prop(self.path(i), "#address-cells"))?;
        let size = self.prop_u32(i, "#size-cells")?.ok_or_else(|| missing_prop(self.path(i), "#size-cells"))?;
        Ok(Cells { addr, size })
    }

    /// Decodes `prop` of node `i` as (address, size) pairs using the parent's cells.
    pub(crate) fn addr_size_pairs(&self, i: usize, prop: &'static str) -> Result<Option<Vec<(u64, u64)>>, BoardError> {
        let Some(v) = self.prop(i, prop) else {
            return Ok(None);
        };
        let parent = self.nodes[i].parent().ok_or_else(|| bad_prop("/", prop, "the root node has no parent bus"))?;
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
        let mut bus = self.nodes[i].parent();
        while let Some(b) = bus {
            let Some(up) = self.nodes[b].parent() else {
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

    /// The first node (in pre-order) whose `phandle` or `linux,phandle` is `phandle`.
    pub(crate) fn by_phandle(&self, phandle: u32) -> Option<usize> {
        self.phandles.iter().find(|&&(p, _)| p == phandle).map(|&(_, n)| n as usize)
    }
}

/// Reads `n` (0..=2) big-endian cells from the start of `v`.
/// A string property's value: one NUL-terminated UTF-8 string (the tree's and the early scan's
/// rule).
pub(crate) fn str_value(v: &[u8]) -> Result<&str, &'static str> {
    match v.split_last() {
        Some((0, s)) if !s.contains(&0) => core::str::from_utf8(s).map_err(|_| "string is not UTF-8"),
        _ => Err("not a single NUL-terminated string"),
    }
}

/// A property's value as exactly one 32-bit cell.
pub(crate) fn u32_value(v: &[u8]) -> Result<u32, &'static str> {
    <[u8; 4]>::try_from(v).map(u32::from_be_bytes).map_err(|_| "expected exactly one 32-bit cell")
}

/// A property's value as a one- or two-cell number.
pub(crate) fn u32_or_u64_value(v: &[u8]) -> Result<u64, &'static str> {
    match v.len() {
        4 | 8 => read_cells(v, (v.len() / 4) as u32).ok_or("expected one or two 32-bit cells"),
        _ => Err("expected one or two 32-bit cells"),
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FdtWriter;
    use proptest::prelude::*;

    /// What [`Tree::by_phandle`] answered before it had an index: every node's properties
    /// searched in order.
    fn linear(t: &Tree, phandle: u32) -> Option<usize> {
        (0..t.nodes.len()).find(|&i| {
            PHANDLE_NAMES.iter().any(|n| {
                t.prop(i, n).and_then(|v| <[u8; 4]>::try_from(v).ok()).map(u32::from_be_bytes) == Some(phandle)
            })
        })
    }

    proptest! {
        /// Nodes with no, one, both or repeated phandle properties, some not one cell long.
        #[test]
        fn phandle_index_is_the_linear_search(
            nodes in prop::collection::vec(prop::collection::vec((0usize..3, 0u32..6, 3usize..6), 0..5), 1..24)
        ) {
            let mut w = FdtWriter::new();
            w.begin_node("").unwrap();
            for (k, props) in nodes.iter().enumerate() {
                w.begin_node(&alloc::format!("n{k}")).unwrap();
                for (j, &(name, v, len)) in props.iter().enumerate() {
                    let mut value = alloc::vec![0u8; len];
                    value[..3].copy_from_slice(&v.to_be_bytes()[1..]);
                    let name = match name {
                        0 | 1 => PHANDLE_NAMES[name].into(),
                        _ => alloc::format!("other{j}"),
                    };
                    // A repeated name inside a node is malformed but possible: written raw.
                    w.property(&name, &value).unwrap();
                }
                w.end_node().unwrap();
            }
            w.end_node().unwrap();
            let dtb = w.finish().unwrap();
            let t = crate::validate::parse(&dtb).unwrap().tree;
            for ph in 0..7 {
                prop_assert_eq!(t.by_phandle(ph), linear(&t, ph), "phandle {}", ph);
            }
        }
    }
}
