//! Memory-mapped devices: nodes with a `reg` the CPU reaches, through buses' `ranges`, and
//! the windows of PCI host bridges.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{bad_prop, BoardError};
use crate::memory::is_memory_node;
use crate::node::{base_name, prop_is, regions, status, strings, Status};
use crate::tree::{self, Tree};
use crate::{Board, Region};

/// A memory-mapped device: any node with a `reg` the CPU can reach, at the top level or nested
/// under nodes whose `ranges` translate their children's addresses (buses, and devices with
/// sub-devices such as a GICv3's ITS or a GICv2m frame under the GIC node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Node path.
    pub path: String,
    /// `compatible` strings.
    pub compatible: Vec<String>,
    /// `reg`, translated to CPU physical addresses.
    pub regions: Vec<Region>,
    /// Address windows the device forwards to devices behind it: a PCI host bridge's `ranges`
    /// (I/O, 32-bit and 64-bit memory), in which the OS places the BARs of PCI devices. Empty
    /// for other devices.
    pub windows: Vec<Window>,
    /// `status`.
    pub status: Status,
}

/// What a PCI host bridge window carries (`ranges` entry, bits 25:24 of the child address's
/// first cell).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpace {
    /// Configuration space (code 0; rare in `ranges`).
    Config,
    /// I/O port space, memory-mapped on arm64 (code 1).
    Io,
    /// 32-bit memory space (code 2).
    Mem32,
    /// 64-bit memory space (code 3).
    Mem64,
}

/// One window of a PCI host bridge: CPU addresses `region` reach bus address `bus_address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// CPU physical addresses of the window.
    pub region: Region,
    /// Address on the PCI bus of the window's first byte.
    pub bus_address: u64,
    /// Address space.
    pub space: WindowSpace,
    /// Prefetchable memory (bit 30 of the first cell).
    pub prefetchable: bool,
}

impl Device {
    /// Whether any of its `compatible` strings is in `list`.
    pub fn is_compatible(&self, list: &[&str]) -> bool {
        self.compatible.iter().any(|c| list.contains(&c.as_str()))
    }
}

impl Board {
    /// The device whose node path is `path`.
    pub fn device(&self, path: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.path == path)
    }
}

const BUSES: &[&str] = &["simple-bus", "simple-mfd", "arm,amba-bus"];
const NOT_DEVICES: &[&str] = &[
    "memory",
    "reserved-memory",
    "cpus",
    "chosen",
    "aliases",
    "__symbols__",
    "__overrides__",
    "__fixups__",
    "__local_fixups__",
];

pub(crate) fn parse_devices(t: &Tree) -> Result<Vec<Device>, BoardError> {
    let mut out = Vec::new();
    for c in t.children(0) {
        if NOT_DEVICES.contains(&base_name(t.nodes[c].name)) || is_memory_node(t, c) {
            continue;
        }
        collect_devices(t, c, &mut out)?;
    }
    Ok(out)
}

fn collect_devices(t: &Tree, i: usize, out: &mut Vec<Device>) -> Result<(), BoardError> {
    let pci = is_pci_bridge(t, i);
    if t.has_prop(i, "reg") {
        if let Some(pairs) = t.reg_phys(i)? {
            out.push(Device {
                path: t.path(i).to_string(),
                compatible: strings(t.prop_strs(i, "compatible").ok().flatten()),
                regions: regions(t, i, pairs)?,
                windows: if pci { pci_windows(t, i)? } else { Vec::new() },
                status: status(t, i),
            });
        }
    }
    // Children are memory-mapped only where this node translates their addresses (`ranges`,
    // empty = identity). Children of a PCI bridge are PCI functions addressed in configuration
    // space (3 address cells): what the CPU reaches of them are the bridge's windows.
    if (t.has_prop(i, "ranges") || t.is_compatible(i, BUSES)) && !pci {
        for c in t.children(i) {
            collect_devices(t, c, out)?;
        }
    }
    Ok(())
}

/// A PCI host bridge: `device_type = "pci"` (or `"pciex"`), or 3 address cells for its
/// children (the PCI bus binding).
fn is_pci_bridge(t: &Tree, i: usize) -> bool {
    prop_is(t, i, "device_type", "pci")
        || prop_is(t, i, "device_type", "pciex")
        || t.prop_u32(i, "#address-cells").ok().flatten() == Some(3)
}

/// The windows of a PCI host bridge's `ranges`: (3-cell PCI address, parent address, size)
/// entries, the parent address translated on to the CPU. A window the CPU cannot reach (a
/// parent bus without a matching `ranges`) is left out.
fn pci_windows(t: &Tree, i: usize) -> Result<Vec<Window>, BoardError> {
    let Some(v) = t.prop(i, "ranges") else {
        return Ok(Vec::new());
    };
    let path = &t.path(i);
    let own = t.cells(i)?;
    let parent = t.nodes[i].parent().ok_or_else(|| bad_prop(path, "ranges", "the root cannot be a PCI bridge"))?;
    let up = t.cells(parent)?;
    if own.addr != 3 || own.size == 0 || own.size > 2 || up.addr == 0 || up.addr > 2 {
        return Err(bad_prop(
            path,
            "ranges",
            "a PCI bridge needs 3 address cells, 1-2 size cells and a 1-2 cell parent",
        ));
    }
    let entry = ((own.addr + up.addr + own.size) * 4) as usize;
    if !v.len().is_multiple_of(entry) {
        return Err(bad_prop(path, "ranges", "length not a multiple of the entry size"));
    }
    let mut out = Vec::new();
    for e in v.chunks_exact(entry) {
        let hi = tree::read_cells(e, 1).unwrap_or(0) as u32;
        let bus_address = tree::read_cells(&e[4..], 2).unwrap_or(0);
        let parent_addr = tree::read_cells(&e[12..], up.addr).unwrap_or(0);
        let size = tree::read_cells(&e[12 + up.addr as usize * 4..], own.size).unwrap_or(0);
        if size == 0 {
            continue;
        }
        if parent_addr.checked_add(size).is_none() {
            return Err(bad_prop(path, "ranges", "window wraps past 2^64"));
        }
        let Some(cpu) = t.translate(i, parent_addr, size)? else {
            continue;
        };
        let space = match (hi >> 24) & 3 {
            0 => WindowSpace::Config,
            1 => WindowSpace::Io,
            2 => WindowSpace::Mem32,
            _ => WindowSpace::Mem64,
        };
        out.push(Window { region: Region::new(cpu, size), bus_address, space, prefetchable: hi & (1 << 30) != 0 });
    }
    Ok(out)
}
