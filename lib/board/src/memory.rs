//! RAM (`/memory` nodes) and what is kept out of it: `/reserved-memory` children and the
//! header's `/memreserve/` entries.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{missing_prop, BoardError};
use crate::node::{available, base_name, prop_is, regions};
use crate::tree::Tree;
use crate::{Board, Region};

/// One child of `/reserved-memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedMemory {
    /// Node path.
    pub path: String,
    /// Static regions from `reg` (empty for a dynamically placed `size` node).
    pub regions: Vec<Region>,
    /// `no-map`: must not be mapped at all.
    pub no_map: bool,
    /// `reusable`: the OS may use it until its owner claims it.
    pub reusable: bool,
    /// First `compatible` string, if any.
    pub compatible: Option<String>,
}

impl Board {
    /// Every range that must not be handed out as free RAM: `/memreserve/` entries and the
    /// static regions of `/reserved-memory` children.
    pub fn reserved_regions(&self) -> impl Iterator<Item = Region> + '_ {
        let rm = self.reserved_memory.iter().flat_map(|r| r.regions.iter().copied());
        self.mem_reserve.iter().copied().chain(rm)
    }

    /// The static regions of `/reserved-memory` children marked `no-map`: memory that must
    /// never be mapped at all (on the Pi 5, TF-A's below 0x80000), not merely left unallocated.
    pub fn no_map_regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.reserved_memory.iter().filter(|r| r.no_map).flat_map(|r| r.regions.iter().copied())
    }
}

pub(crate) fn is_memory_node(t: &Tree, i: usize) -> bool {
    t.nodes[i].parent() == Some(0)
        && (prop_is(t, i, "device_type", "memory")
            || (base_name(t.nodes[i].name) == "memory" && !t.has_prop(i, "device_type")))
}

pub(crate) fn parse_memory(t: &Tree) -> Result<Vec<Region>, BoardError> {
    let mut found = false;
    let mut out = Vec::new();
    for i in t.children(0) {
        if !is_memory_node(t, i) || !available(t, i) {
            continue;
        }
        found = true;
        let pairs = t.addr_size_pairs(i, "reg")?.ok_or_else(|| missing_prop(t.path(i), "reg"))?;
        out.extend(regions(t, i, pairs)?.into_iter().filter(|r| r.size != 0));
    }
    if !found {
        return Err(BoardError::MissingNode { node: String::from("/memory") });
    }
    out.sort();
    Ok(out)
}

pub(crate) fn parse_reserved(t: &Tree) -> Result<Vec<ReservedMemory>, BoardError> {
    let Some(rm) = t.find_path("/reserved-memory").filter(|&i| t.nodes[i].name == "reserved-memory") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    // A region whose node is not available reserves nothing (Linux: `fdt_scan_reserved_mem`).
    for c in t.children(rm).filter(|&c| available(t, c)) {
        let pairs = t.addr_size_pairs(c, "reg")?.unwrap_or_default();
        out.push(ReservedMemory {
            path: t.path(c).to_string(),
            regions: regions(t, c, pairs)?,
            no_map: t.has_prop(c, "no-map"),
            reusable: t.has_prop(c, "reusable"),
            compatible: t.prop_strs(c, "compatible").ok().flatten().and_then(|v| v.first().map(|s| s.to_string())),
        });
    }
    Ok(out)
}
