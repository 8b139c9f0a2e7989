//! The guest's device tree: the host tree re-emitted with its memory, `/chosen`, reserved
//! regions, hidden devices and PSCI conduit changed. Nodes keep their order (the memory nodes
//! go where the host's first one was), so a guest's tree compares node by node with the
//! host's ([`crate::diff`]).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::error::BoardError;
use crate::memory::is_memory_node;
use crate::power::find_psci;
use crate::tree::{Cells, Tree};
use crate::writer::FdtWriter;
use crate::{validate, PsciMethod, Region};

/// What the guest's tree differs in from the host's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestSpec {
    /// Guest RAM (intermediate physical addresses). Replaces every top-level memory node with
    /// one `memory@<base>` node per range. Must be non-empty, non-overlapping, non-empty ranges.
    pub memory: Vec<Region>,
    /// `Some` replaces (or adds) `/chosen/bootargs`, `Some("")` removes it (as QEMU writes none
    /// for an empty command line); `None` keeps the host's.
    pub bootargs: Option<String>,
    /// `Some` writes `linux,initrd-start`/`-end` (as wide as the host's: QEMU 7.2 writes one
    /// cell, 10.0 the root's `#address-cells`; two cells without the host's, or when a value
    /// needs them); `None` removes them.
    pub initrd: Option<Region>,
    /// Extra `/reserved-memory` children (`guest-reserved@<base>`, `no-map`); the node is
    /// created (cells as the root's, empty `ranges`) when the host has none.
    pub reserved: Vec<Region>,
    /// Absolute node paths (exact, with unit addresses) removed with their subtrees. Each must
    /// exist. Phandle references to them elsewhere are left as they are.
    pub remove: Vec<String>,
    /// Absolute node paths that get `status = "disabled"`. Each must exist.
    pub disable: Vec<String>,
    /// `Some`: the guest starts and stops CPUs with PSCI through this conduit (the one the
    /// hypervisor traps), whatever the host does: the PSCI node's `method` is rewritten (a
    /// `/psci` node `arm,psci-1.0` is added when the host has none, e.g. the Pi 4) and every
    /// CPU's `enable-method` becomes `"psci"` (a spin-table's `cpu-release-addr` is dropped).
    pub psci_method: Option<PsciMethod>,
    /// CPUs (by MPIDR, as in their `reg`) left out of the guest's tree, with every reference
    /// to them ([`CPU_REFS`]): nodes naming one by `cpu` (`cpu-map` leaves, per-CPU trace units)
    /// go, `cpu-map` clusters left empty go, and lists of CPUs (`interrupt-affinity` with the
    /// matching `interrupts` entries, `cpus`, `affinity`, `cooling-device` entries) lose the
    /// removed ones (the node goes when none is left). Each must exist.
    pub remove_cpus: Vec<u64>,
    /// Device nodes added at the root (`<name>@<base>` with `compatible` and `reg`): devices
    /// the hypervisor emulates for the guest.
    pub extra_devices: Vec<ExtraDevice>,
    /// The tree of a machine without EL2, as QEMU gives a guest at EL1: the interrupt
    /// controller (the root's `interrupt-parent` GIC) loses its maintenance interrupt
    /// (`interrupts`) and the `reg` entries of its virtual interface control (GICH) and
    /// virtual CPU interface (GICV); the generic timer keeps its first four interrupts (QEMU
    /// 9.1+ adds the EL2 virtual timer's as a fifth when EL2 is there).
    pub hide_el2: bool,
}

/// A device node [`GuestSpec::extra_devices`] adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraDevice {
    /// Node name before the `@`.
    pub name: String,
    /// `compatible`.
    pub compatible: String,
    /// `reg` (one region, in the root's cells).
    pub reg: Region,
}

struct Ctx<'s> {
    spec: &'s GuestSpec,
    /// `/cpus`: with [`GuestSpec::psci_method`] its CPUs start by PSCI.
    cpus_node: Option<usize>,
    root_cells: Cells,
    /// With [`GuestSpec::hide_el2`]: the GIC node and how many of its `reg` entries stay.
    gic: Option<(usize, usize)>,
    /// With [`GuestSpec::hide_el2`]: the timer node and how many bytes of `interrupts` stay.
    timer: Option<(usize, usize)>,
    chosen: Option<usize>,
    reserved_node: Option<usize>,
    /// The host's first memory node (a child of the root).
    first_memory: Option<usize>,
    psci: Option<usize>,
    /// Bytes of the host's `linux,initrd-start`, if it has one.
    initrd_width: Option<usize>,
    removed: Vec<usize>,
    disabled: Vec<usize>,
    /// Properties rewritten to leave out removed CPUs.
    edits: Vec<Edit>,
}

/// A property rewritten: (node, property, new value).
type Edit = (usize, &'static str, Vec<u8>);

fn spec_err(item: String, why: &'static str) -> BoardError {
    BoardError::BadGuestSpec { item, why }
}

/// Writes the guest DTB for `host_dtb` (the host's blob, as given to
/// [`crate::Board::from_dtb`]) changed as `spec` says. Host `/memreserve/` entries are kept
/// when they overlap guest RAM and dropped otherwise.
pub fn guest_dtb(host_dtb: &[u8], spec: &GuestSpec) -> Result<Vec<u8>, BoardError> {
    let validate::Parsed { bytes, header, tree: t } = validate::parse(host_dtb)?;
    let rsv = validate::mem_reserve(bytes, &header)?;

    check_ranges("memory", &spec.memory, false)?;
    if spec.memory.is_empty() {
        return Err(spec_err(String::from("memory"), "no guest RAM given"));
    }
    check_ranges("reserved", &spec.reserved, true)?;
    if let Some(r) = spec.initrd {
        check_ranges("initrd", &[r], true)?;
    }
    let find = |p: &String| -> Result<usize, BoardError> {
        match t.find_exact(p) {
            Some(0) => Err(spec_err(p.clone(), "cannot remove or disable the root node")),
            Some(i) => Ok(i),
            None => Err(spec_err(p.clone(), "no such node in the host tree")),
        }
    };
    let mut removed = spec.remove.iter().map(find).collect::<Result<Vec<_>, _>>()?;
    // CPUs left out: by MPIDR, and CPU nodes removed by path (the hypervisor drops those a
    // board lists beyond what runs); every reference to either goes.
    let mut cpus = cpu_nodes(&t, &spec.remove_cpus)?;
    let cpus_node = t.find_path("/cpus");
    cpus.extend(removed.iter().copied().filter(|&i| {
        t.nodes[i].parent().is_some()
            && t.nodes[i].parent() == cpus_node
            && t.prop_str(i, "device_type") == Ok(Some("cpu"))
    }));
    let edits = drop_cpu_refs(&t, &cpus, &mut removed)?;
    // Only a tree that left CPUs out can have gained a dangling reference (checked below).
    let left_cpus_out = !cpus.is_empty();
    removed.extend(cpus);
    let disabled = spec.disable.iter().map(find).collect::<Result<Vec<_>, _>>()?;
    let psci = find_psci(&t);
    let top = |name: &str| t.children(0).find(|&c| t.nodes[c].name == name);
    let cpus_node = top("cpus");
    let (gic, timer) = if spec.hide_el2 { el2_nodes(&t)? } else { (None, None) };
    let ctx = Ctx {
        cpus_node,
        spec,
        root_cells: t.cells(0)?,
        gic,
        timer,
        chosen: top("chosen"),
        initrd_width: top("chosen").and_then(|c| t.prop(c, "linux,initrd-start")).map(|v| v.len()),
        reserved_node: top("reserved-memory"),
        first_memory: t.children(0).find(|&c| is_memory_node(&t, c)),
        psci,
        removed,
        disabled,
        edits,
    };

    // The guest's tree is about the host's: room for it up front, not grown a copy at a time.
    let mut w = FdtWriter::with_capacity(header.size_dt_struct + 1024, header.size_dt_strings + 256);
    w.set_boot_cpuid_phys(header.boot_cpuid_phys);
    for (base, size) in rsv {
        let r = Region::new(base, size);
        if spec.memory.iter().any(|m| m.overlaps(&r)) {
            w.add_mem_reserve(base, size)?;
        }
    }
    // The writer's offset of each host property name, as `FdtWriter::property_noted` notes it.
    let mut notes = alloc::vec![0u32; t.name_ids()];
    emit(&t, 0, &ctx, &mut w, &mut notes)?;
    let out = w.finish()?;
    // Parsing the output again costs as much as the host's tree: only where CPUs were left out.
    if let Some((node, prop)) = if left_cpus_out { dangling_cpu_refs(&out)?.into_iter().next() } else { None } {
        return Err(BoardError::BadProperty { node, prop, why: "still names a CPU the guest's tree left out" });
    }
    Ok(out)
}

/// The GIC (with the number of `reg` entries a machine without EL2 has: GICv2 distributor and
/// CPU interface; GICv3 distributor, redistributor regions and the legacy CPU interface) and
/// the timer (with the bytes of its first four interrupt specifiers).
#[allow(clippy::type_complexity)]
fn el2_nodes(t: &Tree) -> Result<(Option<(usize, usize)>, Option<(usize, usize)>), BoardError> {
    let gic = crate::gic::find_gic(t).map(|(i, v3)| -> Result<(usize, usize), BoardError> {
        let keep = if v3 { 2 + t.prop_u32(i, "#redistributor-regions")?.unwrap_or(1) as usize } else { 2 };
        Ok((i, keep))
    });
    let gic = gic.transpose()?;
    let timer = match crate::timer::find_timer(t) {
        Some(i) => {
            let cells = crate::gic::interrupt_parent(t, i).map_or(Ok(None), |p| t.prop_u32(p, "#interrupt-cells"))?;
            Some((i, 4 * 4 * cells.unwrap_or(3) as usize))
        }
        None => None,
    };
    Ok((gic, timer))
}

/// The CPU nodes under `/cpus` with these MPIDRs (each must exist).
fn cpu_nodes(t: &Tree, mpidrs: &[u64]) -> Result<Vec<usize>, BoardError> {
    let Some(cpus) = t.find_path("/cpus") else {
        return if mpidrs.is_empty() { Ok(Vec::new()) } else { Err(spec_err(String::from("/cpus"), "no such node")) };
    };
    mpidrs
        .iter()
        .map(|&m| {
            t.children(cpus)
                .find(|&c| t.addr_size_pairs(c, "reg").ok().flatten().and_then(|r| r.first().map(|x| x.0)) == Some(m))
                .ok_or_else(|| spec_err(format!("cpu {m:#x}"), "no CPU with this MPIDR in the host tree"))
        })
        .collect()
}

/// How a property refers to CPU nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuRef {
    /// One phandle: the node belongs to that CPU (a `cpu-map` leaf, a per-CPU trace unit).
    Owner,
    /// A list of phandles, one per CPU the node serves.
    List,
    /// A list of phandles paired one to one with the node's `interrupts` specifiers.
    Interrupts,
    /// Entries of a phandle and the target's `#cooling-cells` cells (2 when it has none).
    Cooling,
}

/// Every property of a device tree that names CPU nodes by phandle, and how: the guest's tree
/// keeps none that names a CPU it left out ([`GuestSpec::remove_cpus`]).
pub const CPU_REFS: &[(&str, CpuRef)] = &[
    ("cpu", CpuRef::Owner),
    ("cpus", CpuRef::List),
    ("affinity", CpuRef::List),
    ("interrupt-affinity", CpuRef::Interrupts),
    ("cooling-device", CpuRef::Cooling),
];

/// Nodes whose properties are paths or fixup tables, never phandles (`/__symbols__` has a
/// property named `cpus`: the path of `/cpus`).
const PATH_NODES: &[&str] = &["/__symbols__", "/aliases", "/__fixups__", "/__local_fixups__"];

fn holds_phandles(t: &Tree, i: usize) -> bool {
    // Node names hold no `/`: a path is one of these or under it when its first component is.
    !t.top_level(i).is_some_and(|top| PATH_NODES.iter().any(|p| p.strip_prefix('/') == Some(t.nodes[top].name)))
}

/// Whether node `i` lies under `/cpus/cpu-map` (is a cluster, socket or leaf of it).
fn under_cpu_map(t: &Tree, i: usize) -> bool {
    let mut chain = core::iter::successors(Some(i), |&c| t.nodes[c].parent()).filter(|&c| c != 0);
    let mut names = [""; 2];
    let mut depth = 0;
    for c in chain.by_ref() {
        names.rotate_left(1);
        names[1] = t.nodes[c].name;
        depth += 1;
    }
    // `names` ends with the top-level ancestor, the one before it next to last.
    depth >= 3 && names == ["cpu-map", "cpus"]
}

fn phandle_of(t: &Tree, i: usize) -> Option<u32> {
    crate::tree::PHANDLE_NAMES
        .iter()
        .find_map(|n| t.prop(i, n))
        .and_then(|v| <[u8; 4]>::try_from(v).ok())
        .map(u32::from_be_bytes)
}

fn words(v: &[u8]) -> impl Iterator<Item = u32> + '_ {
    v.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
}

/// The `(entry width in cells, phandle of each entry)` of a [`CpuRef`] property of node `i`.
fn cpu_ref_entries(t: &Tree, i: usize, name: &'static str, how: CpuRef) -> Result<(usize, Vec<u32>), BoardError> {
    let v = t.prop(i, name).unwrap_or(&[]);
    let bad = |why| crate::error::bad_prop(t.path(i), name, why);
    if !v.len().is_multiple_of(4) {
        return Err(bad("length not a multiple of 4"));
    }
    let cells: Vec<u32> = words(v).collect();
    if how != CpuRef::Cooling {
        return Ok((1, cells));
    }
    let mut out = Vec::new();
    let mut k = 0;
    let mut width = 0;
    while k < cells.len() {
        let target = t.by_phandle(cells[k]).ok_or_else(|| bad("names no node"))?;
        let w = 1 + t.prop_u32(target, "#cooling-cells")?.unwrap_or(2) as usize;
        if width != 0 && w != width {
            return Err(bad("entries of different widths"));
        }
        width = w;
        if k + w > cells.len() {
            return Err(bad("last entry cut short"));
        }
        out.push(cells[k]);
        k += w;
    }
    Ok((width.max(1), out))
}

/// Every reference to the CPU nodes `cpus` (about to be removed): nodes that belong to one of
/// them, and `cpu-map` clusters left with no entry, join `removed`; the returned edits rewrite
/// the lists that name one of them among others.
fn drop_cpu_refs(t: &Tree, cpus: &[usize], removed: &mut Vec<usize>) -> Result<Vec<Edit>, BoardError> {
    let gone: Vec<u32> = cpus.iter().filter_map(|&c| phandle_of(t, c)).collect();
    let mut edits = Vec::new();
    if gone.is_empty() {
        return Ok(edits);
    }
    for i in 0..t.nodes.len() {
        for &(name, how) in CPU_REFS {
            if t.prop(i, name).is_none() || cpus.contains(&i) || !holds_phandles(t, i) {
                continue;
            }
            let (width, refs) = cpu_ref_entries(t, i, name, how)?;
            let keep: Vec<bool> = refs.iter().map(|r| !gone.contains(r)).collect();
            if keep.iter().all(|&k| k) {
                continue;
            }
            if how == CpuRef::Owner || !keep.iter().any(|&k| k) {
                removed.push(i);
                continue;
            }
            let v = t.prop(i, name).unwrap_or(&[]);
            let kept = |v: &[u8], w: usize| -> Vec<u8> {
                v.chunks(w).zip(&keep).filter(|(_, &k)| k).flat_map(|(c, _)| c.iter().copied()).collect()
            };
            if how == CpuRef::Interrupts {
                let irq = t.prop(i, "interrupts").unwrap_or(&[]);
                let icells = crate::gic::interrupt_parent(t, i)
                    .map_or(Ok(None), |p| t.prop_u32(p, "#interrupt-cells"))?
                    .unwrap_or(3) as usize;
                if icells == 0 || irq.len() != refs.len() * 4 * icells {
                    return Err(crate::error::bad_prop(
                        t.path(i),
                        name,
                        "does not pair one CPU with each `interrupts` specifier",
                    ));
                }
                edits.push((i, "interrupts", kept(irq, 4 * icells)));
            }
            edits.push((i, name, kept(v, 4 * width)));
        }
    }
    // cpu-map clusters (and sockets) whose every entry went, deepest first.
    for i in (0..t.nodes.len()).rev() {
        if under_cpu_map(t, i)
            && t.has_children(i)
            && t.children(i).all(|c| removed.contains(&c))
            && !removed.contains(&i)
        {
            removed.push(i);
        }
    }
    Ok(edits)
}

/// The `(node path, property)` of every [`CPU_REFS`] property in `dtb` naming a node that is
/// not in the tree (the check [`guest_dtb`] makes of its own output, and the tests' oracle).
pub fn dangling_cpu_refs(dtb: &[u8]) -> Result<Vec<(String, &'static str)>, BoardError> {
    let t = validate::parse(dtb)?.tree;
    let mut out = Vec::new();
    for i in 0..t.nodes.len() {
        for &(name, how) in CPU_REFS {
            if t.prop(i, name).is_none() || !holds_phandles(&t, i) {
                continue;
            }
            let dangling = match cpu_ref_entries(&t, i, name, how) {
                Ok((_, refs)) => refs.iter().any(|&r| t.by_phandle(r).is_none()),
                Err(_) => true,
            };
            if dangling {
                out.push((t.path(i), name));
            }
        }
    }
    Ok(out)
}

fn check_ranges(what: &str, ranges: &[Region], allow_overlap: bool) -> Result<(), BoardError> {
    for (n, r) in ranges.iter().enumerate() {
        let item = || format!("{what} {:#x}+{:#x}", r.base, r.size);
        if r.size == 0 {
            return Err(spec_err(item(), "empty range"));
        }
        if r.base.checked_add(r.size).is_none() {
            return Err(spec_err(item(), "range wraps past 2^64"));
        }
        if !allow_overlap && ranges[..n].iter().any(|o| o.overlaps(r)) {
            return Err(spec_err(item(), "overlaps another range"));
        }
    }
    Ok(())
}

fn encode_reg(cells: Cells, regions: &[Region], what: &str) -> Result<Vec<u8>, BoardError> {
    let mut out = Vec::new();
    for r in regions {
        for (value, n) in [(r.base, cells.addr), (r.size, cells.size)] {
            match n {
                1 if value <= u64::from(u32::MAX) => out.extend_from_slice(&(value as u32).to_be_bytes()),
                2 => out.extend_from_slice(&value.to_be_bytes()),
                _ => {
                    return Err(spec_err(
                        format!("{what} {:#x}+{:#x}", r.base, r.size),
                        "does not fit the #address-cells/#size-cells of its parent",
                    ))
                }
            }
        }
    }
    Ok(out)
}

fn emit(t: &Tree, i: usize, cx: &Ctx, w: &mut FdtWriter, notes: &mut [u32]) -> Result<(), BoardError> {
    let spec = cx.spec;
    let node = &t.nodes[i];
    let is_chosen = cx.chosen == Some(i);
    let is_psci = cx.psci == Some(i) && spec.psci_method.is_some();
    let psci_cpu = spec.psci_method.is_some() && node.parent().is_some() && node.parent() == cx.cpus_node;
    let disable = cx.disabled.contains(&i);
    w.begin_node(node.name)?;
    let mut wrote_method = false;
    // /chosen's properties the spec replaces are written where the host has them (the same
    // order as QEMU's); the others after the host's.
    let mut chosen_written: Vec<&str> = Vec::new();
    for p in t.props(i) {
        if let Some((_, name, v)) = cx.edits.iter().find(|(n, name, _)| *n == i && *name == p.name) {
            w.property(name, v)?;
            continue;
        }
        if psci_cpu && p.name == "cpu-release-addr" {
            continue;
        }
        if is_chosen && CHOSEN_PROPS.contains(&p.name) {
            if chosen_prop(spec, cx.initrd_width, p.name, w)?.is_none() && p.name == "bootargs" {
                w.property(p.name, p.value)?;
            }
            chosen_written.push(p.name);
            continue;
        }
        if disable && p.name == "status" {
            continue;
        }
        if is_psci && p.name == "status" {
            // The hypervisor's PSCI is there, whatever the host's firmware is.
            continue;
        }
        if let Some((_, keep)) = cx.gic.filter(|(g, _)| *g == i) {
            match p.name {
                // The maintenance interrupt: a machine without EL2 has none.
                "interrupts" => continue,
                "reg" => {
                    let c = t.nodes[i].parent().map_or(Ok(cx.root_cells), |p| t.cells(p))?;
                    let pair = 4 * (c.addr + c.size) as usize;
                    w.property("reg", &p.value[..p.value.len().min(keep * pair)])?;
                    continue;
                }
                _ => {}
            }
        }
        if let Some((_, bytes)) = cx.timer.filter(|(tm, _)| *tm == i && p.name == "interrupts") {
            w.property("interrupts", &p.value[..p.value.len().min(bytes)])?;
            continue;
        }
        match (is_psci && p.name == "method", spec.psci_method) {
            (true, Some(m)) => {
                w.property_str("method", m.as_str())?;
                wrote_method = true;
            }
            _ if psci_cpu && p.name == "enable-method" => w.property_str("enable-method", "psci")?,
            _ => match notes.get_mut(usize::from(p.name_id)).filter(|_| p.name_id != 0) {
                Some(note) => w.property_noted(p.name, note, p.value)?,
                None => w.property(p.name, p.value)?,
            },
        }
    }
    if let (true, false, Some(m)) = (is_psci, wrote_method, spec.psci_method) {
        w.property_str("method", m.as_str())?;
    }
    if disable {
        w.property_str("status", "disabled")?;
    }
    if is_chosen {
        for name in CHOSEN_PROPS.iter().filter(|n| !chosen_written.contains(n)) {
            chosen_prop(spec, cx.initrd_width, name, w)?;
        }
    }
    // The guest's memory nodes go where the host's first one was (first if it had none).
    let first_memory = cx.first_memory;
    if i == 0 && first_memory.is_none() {
        memory_nodes(cx, w)?;
    }
    if i == 0 {
        if let (None, Some(m)) = (cx.psci, spec.psci_method) {
            // The host has no PSCI (spin-table CPUs, e.g. the Pi 4): the hypervisor's is the guest's.
            w.begin_node("psci")?;
            w.property("compatible", b"arm,psci-1.0\0arm,psci-0.2\0")?;
            w.property_str("method", m.as_str())?;
            w.end_node()?;
        }
        for d in &spec.extra_devices {
            w.begin_node(&format!("{}@{:x}", d.name, d.reg.base))?;
            w.property_str("compatible", &d.compatible)?;
            w.property("reg", &encode_reg(cx.root_cells, &[d.reg], "extra device")?)?;
            w.end_node()?;
        }
    }
    for c in t.children(i) {
        if Some(c) == first_memory {
            memory_nodes(cx, w)?;
        }
        if cx.removed.contains(&c) || is_memory_node(t, c) {
            continue;
        }
        emit(t, c, cx, w, notes)?;
    }
    if cx.reserved_node == Some(i) {
        let existing: Vec<&str> = t.children(i).map(|c| t.nodes[c].name).collect();
        reserved_children(spec, t.cells(i)?, &existing, w)?;
    }
    if i == 0 {
        let need_chosen = spec.bootargs.as_deref().is_some_and(|a| !a.is_empty()) || spec.initrd.is_some();
        if need_chosen && cx.chosen.is_none_or(|c| cx.removed.contains(&c)) {
            w.begin_node("chosen")?;
            for name in CHOSEN_PROPS {
                chosen_prop(spec, None, name, w)?;
            }
            w.end_node()?;
        }
        let have_rm = cx.reserved_node.is_some_and(|r| !cx.removed.contains(&r));
        if !spec.reserved.is_empty() && !have_rm {
            w.begin_node("reserved-memory")?;
            w.property_u32("#address-cells", cx.root_cells.addr)?;
            w.property_u32("#size-cells", cx.root_cells.size)?;
            w.property_empty("ranges")?;
            reserved_children(spec, cx.root_cells, &[], w)?;
            w.end_node()?;
        }
    }
    w.end_node()
}

fn memory_nodes(cx: &Ctx, w: &mut FdtWriter) -> Result<(), BoardError> {
    for m in &cx.spec.memory {
        w.begin_node(&format!("memory@{:x}", m.base))?;
        w.property("reg", &encode_reg(cx.root_cells, &[*m], "memory")?)?;
        w.property_str("device_type", "memory")?;
        w.end_node()?;
    }
    Ok(())
}

/// The `/chosen` properties a [`GuestSpec`] sets.
const CHOSEN_PROPS: [&str; 3] = ["bootargs", "linux,initrd-start", "linux,initrd-end"];

/// Writes `/chosen`'s `name` as `spec` says; `Ok(None)` when the spec leaves it to the host
/// (`bootargs: None`), `Ok(Some(()))` when it wrote it or decided it has none.
fn chosen_prop(
    spec: &GuestSpec,
    initrd_width: Option<usize>,
    name: &str,
    w: &mut FdtWriter,
) -> Result<Option<()>, BoardError> {
    match name {
        "bootargs" => {
            let Some(args) = spec.bootargs.as_deref() else { return Ok(None) };
            if args.contains('\0') {
                return Err(spec_err(String::from("bootargs"), "contains NUL"));
            }
            if !args.is_empty() {
                w.property_str("bootargs", args)?;
            }
        }
        _ => {
            let Some(r) = spec.initrd else { return Ok(Some(())) };
            let v = if name == "linux,initrd-start" { r.base } else { r.end() };
            if initrd_width == Some(4) && r.end() <= u64::from(u32::MAX) {
                w.property_u32(name, v as u32)?;
            } else {
                w.property_u64(name, v)?;
            }
        }
    }
    Ok(Some(()))
}

/// Writes the extra reserved regions, except those whose node (same name, so same base) the
/// host tree already has: a guest tree of a guest tree is the same tree.
fn reserved_children(spec: &GuestSpec, cells: Cells, existing: &[&str], w: &mut FdtWriter) -> Result<(), BoardError> {
    for r in &spec.reserved {
        let name = format!("guest-reserved@{:x}", r.base);
        if existing.contains(&name.as_str()) {
            continue;
        }
        w.begin_node(&name)?;
        w.property("reg", &encode_reg(cells, &[*r], "reserved")?)?;
        w.property_empty("no-map")?;
        w.end_node()?;
    }
    Ok(())
}
