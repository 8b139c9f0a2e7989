//! The interrupt controller (GICv2/GICv3) and the GIC interrupt specifiers of other nodes.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{bad_prop, missing_prop, BoardError};
use crate::node::{available, required_reg};
use crate::tree::Tree;
use crate::Region;

/// GIC architecture version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GicVersion {
    /// GICv2 (`arm,cortex-a15-gic`, `arm,gic-400`, ...).
    V2,
    /// GICv3 (`arm,gic-v3`).
    V3,
}

/// The interrupt controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gic {
    /// Node path, e.g. `/intc@8000000`.
    pub path: String,
    /// Architecture version.
    pub version: GicVersion,
    /// The `compatible` string that matched.
    pub compatible: String,
    /// GICD.
    pub distributor: Region,
    /// GICR regions (v3 only; empty for v2).
    pub redistributors: Vec<Region>,
    /// GICC (required for v2, optional legacy interface for v3).
    pub cpu_interface: Option<Region>,
    /// GICH (virtual interface control), when the hardware has virtualization extensions.
    pub hyp_interface: Option<Region>,
    /// GICV (virtual CPU interface).
    pub vcpu_interface: Option<Region>,
}

const GIC_V2: &[&str] = &["arm,cortex-a15-gic", "arm,gic-400", "arm,cortex-a9-gic", "arm,cortex-a7-gic"];
const GIC_V3: &[&str] = &["arm,gic-v3"];

/// The interrupt controller: the root's `interrupt-parent` if it is an available GIC, else the
/// first available GIC; and whether it is a GICv3.
pub(crate) fn find_gic(t: &Tree) -> Option<(usize, bool)> {
    let is_gic = |i: usize| (t.is_compatible(i, GIC_V2) || t.is_compatible(i, GIC_V3)) && available(t, i);
    let preferred = t
        .prop(0, "interrupt-parent")
        .and_then(|v| <[u8; 4]>::try_from(v).ok())
        .and_then(|p| t.by_phandle(u32::from_be_bytes(p)))
        .filter(|&i| is_gic(i));
    let i = preferred.or_else(|| (0..t.nodes.len()).find(|&i| is_gic(i)))?;
    Some((i, t.is_compatible(i, GIC_V3)))
}

pub(crate) fn parse_gic(t: &Tree) -> Result<Option<Gic>, BoardError> {
    let Some((i, v3)) = find_gic(t) else {
        return Ok(None);
    };
    let compat = t.prop_strs(i, "compatible")?.unwrap_or_default();
    let list = if v3 { GIC_V3 } else { GIC_V2 };
    let compatible = compat.iter().find(|c| list.contains(c)).map(|s| s.to_string()).unwrap_or_default();
    let regs = required_reg(t, i)?;
    let path = &t.path(i);
    let gic = if v3 {
        let n = t.prop_u32(i, "#redistributor-regions")?.unwrap_or(1) as usize;
        if n == 0 {
            return Err(bad_prop(path, "#redistributor-regions", "must be at least 1"));
        }
        if regs.len() < 1 + n {
            return Err(bad_prop(path, "reg", "fewer entries than 1 distributor + #redistributor-regions"));
        }
        Gic {
            path: path.to_string(),
            version: GicVersion::V3,
            compatible,
            distributor: regs[0],
            redistributors: regs[1..1 + n].to_vec(),
            cpu_interface: regs.get(1 + n).copied(),
            hyp_interface: regs.get(2 + n).copied(),
            vcpu_interface: regs.get(3 + n).copied(),
        }
    } else {
        if regs.len() < 2 {
            return Err(bad_prop(path, "reg", "GICv2 needs distributor and CPU interface entries"));
        }
        Gic {
            path: path.to_string(),
            version: GicVersion::V2,
            compatible,
            distributor: regs[0],
            redistributors: Vec::new(),
            cpu_interface: Some(regs[1]),
            hyp_interface: regs.get(2).copied(),
            vcpu_interface: regs.get(3).copied(),
        }
    };
    Ok(Some(gic))
}

/// The interrupt controller node of node `i` (its own or an ancestor's `interrupt-parent`).
pub(crate) fn interrupt_parent(t: &Tree, mut i: usize) -> Option<usize> {
    loop {
        if let Some(p) = t.prop(i, "interrupt-parent").and_then(|v| <[u8; 4]>::try_from(v).ok()) {
            return t.by_phandle(u32::from_be_bytes(p));
        }
        i = t.nodes[i].parent()?;
    }
}

/// GIC interrupt ids of node `i`'s `interrupts`: each specifier is `<type number flags>` (plus
/// a PPI partition cell on some GICv3 trees), type 0 = SPI (INTID 32 + number), 1 = PPI
/// (INTID 16 + number).
pub(crate) fn gic_interrupts(t: &Tree, i: usize) -> Result<Vec<u32>, BoardError> {
    let path = &t.path(i);
    let Some(v) = t.prop(i, "interrupts") else {
        return Err(missing_prop(path, "interrupts"));
    };
    let parent = interrupt_parent(t, i).ok_or_else(|| bad_prop(path, "interrupts", "no interrupt-parent"))?;
    let is_gic = t.is_compatible(parent, GIC_V2) || t.is_compatible(parent, GIC_V3);
    if !is_gic {
        return Err(bad_prop(path, "interrupts", "the interrupt parent is not a GIC"));
    }
    let cells = t.prop_u32(parent, "#interrupt-cells")?.unwrap_or(3) as usize;
    if !(3..=4).contains(&cells) {
        return Err(bad_prop(t.path(parent), "#interrupt-cells", "a GIC takes 3 or 4 cells"));
    }
    if v.len() % (4 * cells) != 0 {
        return Err(bad_prop(path, "interrupts", "not a whole number of interrupt specifiers"));
    }
    let cell = |k: usize| u32::from_be_bytes([v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]]);
    let mut out = Vec::new();
    for spec in 0..v.len() / (4 * cells) {
        let (kind, number) = (cell(spec * cells), cell(spec * cells + 1));
        let intid = match kind {
            0 if number < 988 => 32 + number,
            1 if number < 16 => 16 + number,
            _ => return Err(bad_prop(path, "interrupts", "neither an SPI nor a PPI in range")),
        };
        out.push(intid);
    }
    Ok(out)
}
