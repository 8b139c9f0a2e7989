//! The early scan: what a loader needs before it may write anything, read in one pass over the
//! structure block. [`MemFacts`] is RAM (`/memory` nodes), what is kept out of it
//! (`/memreserve/` entries, `/reserved-memory` children, the firmware's spin-table memory) and
//! what the boot loader loaded (the DTB itself, the initrd, `/chosen` modules), with the command
//! line; nothing else of the tree is decoded.
//!
//! [`Board::from_dtb`] reads the same facts with the full parse ([`Board::mem_facts`]). The
//! hypervisor scans first to choose where it lives and moves itself there before the full
//! parse runs once: code that runs before the move is translated (by an emulator) or fetched
//! twice, and under QEMU's TCG every translation it leaves in the memory the guest later
//! receives costs a flush of every vCPU's jump cache when that memory is written. So this scan
//! is kept small: no `fdt`, no node paths, no strings built.
//!
//! The contract, checked by `tests/scan.rs` on QEMU's trees, synthetic ones and thousands of
//! mutants: whenever both [`MemFacts::scan`] and [`Board::from_dtb`] succeed they give equal
//! facts. Where the scan fails (it is no stricter than it must be, but it does not report
//! errors well) its caller falls back to the full parse, which names the problem.

use alloc::string::String;
use alloc::vec::Vec;

use crate::node::{pair_regions, status_of, Status};
use crate::tree::{decode_pairs, str_value, u32_or_u64_value, u32_value, Cells};
use crate::validate::{be32, header, mem_reserve, FDT_BEGIN_NODE, FDT_END, FDT_END_NODE, FDT_NOP, FDT_PROP};
use crate::{Board, EnableMethod, Region};

/// RAM, what is kept out of it and what was loaded into it: what a loader must know before it
/// writes anything. Lists are in a canonical order (see each field), so two are comparable.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemFacts {
    /// Every `reg` entry of every available top-level memory node, zero sizes dropped, sorted.
    pub memory: Vec<Region>,
    /// The header's `/memreserve/` entries, in the blob's order.
    pub mem_reserve: Vec<Region>,
    /// The static regions of the available children of `/reserved-memory`, each with its
    /// `no-map`, in tree order.
    pub reserved: Vec<(Region, bool)>,
    /// The `cpu-release-addr` of every present spin-table CPU, in tree order.
    pub spin_release: Vec<u64>,
    /// `/chosen` `linux,initrd-start` / `-end`.
    pub initrd: Option<Region>,
    /// The `reg` of every `/chosen` module node (`multiboot,module`), sorted.
    pub modules: Vec<Region>,
    /// `/chosen` `bootargs`.
    pub bootargs: Option<String>,
}

impl MemFacts {
    /// Every range that must not be handed out as free RAM: `/memreserve/` entries and the
    /// static regions of `/reserved-memory` children ([`Board::reserved_regions`]).
    pub fn reserved_regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.mem_reserve.iter().copied().chain(self.reserved.iter().map(|(r, _)| *r))
    }

    /// The `no-map` regions ([`Board::no_map_regions`]).
    pub fn no_map_regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.reserved.iter().filter(|(_, no_map)| *no_map).map(|(r, _)| *r)
    }

    /// The firmware's spin-table memory ([`Board::spin_table_regions`]).
    pub fn spin_table_regions(&self) -> Vec<Region> {
        spin_table_regions(&self.mem_reserve, self.spin_release.iter().copied())
    }

    /// Reads the facts from a DTB (`dtb` may be longer than its `totalsize`). Never panics;
    /// an `Err` says in a few words what stopped the scan, not where.
    pub fn scan(dtb: &[u8]) -> Result<MemFacts, &'static str> {
        let h = header(dtb).map_err(|_| "bad header")?;
        let data = &dtb[..h.totalsize];
        let mem_reserve =
            mem_reserve(data, &h).map_err(|_| "bad /memreserve/ block")?.into_iter().map(|(b, s)| Region::new(b, s));
        let block = &data[h.off_dt_struct..h.off_dt_struct + h.size_dt_struct];
        let strings = &data[h.off_dt_strings..h.off_dt_strings + h.size_dt_strings];
        let mut s = Scan::default();
        s.facts.mem_reserve = mem_reserve.collect();
        s.walk(block, strings)?;
        if !s.memory_found {
            return Err("no memory node");
        }
        s.facts.memory.sort();
        s.facts.modules.sort();
        Ok(s.facts)
    }
}

impl Board {
    /// The [`MemFacts`] of this board, from the full parse: what [`MemFacts::scan`] gives
    /// for the same blob.
    pub fn mem_facts(&self) -> MemFacts {
        let mut modules: Vec<Region> = self.module_regions().collect();
        modules.sort();
        MemFacts {
            memory: self.memory.clone(),
            mem_reserve: self.mem_reserve.clone(),
            reserved: self.reserved_memory.iter().flat_map(|r| r.regions.iter().map(move |g| (*g, r.no_map))).collect(),
            spin_release: self
                .cpus
                .iter()
                .filter_map(|c| match c.enable_method {
                    Some(EnableMethod::SpinTable { release_addr: Some(a) }) => Some(a),
                    _ => None,
                })
                .collect(),
            initrd: self.initrd,
            modules,
            bootargs: self.bootargs.clone(),
        }
    }
}

/// For each spin-table `cpu-release-addr`, the `/memreserve/` entry that holds it widened to
/// whole pages (the firmware's spin loop lives there too: the Pi 4's page 0), else its 4 KiB
/// page; each region once, in the order first met.
pub(crate) fn spin_table_regions(mem_reserve: &[Region], release: impl Iterator<Item = u64>) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::new();
    for a in release {
        let r = match mem_reserve.iter().find(|r| r.contains(a)) {
            Some(r) => {
                let base = r.base & !0xfff;
                Region::new(base, (r.end().saturating_add(0xfff) & !0xfff) - base)
            }
            None => Region::new(a & !0xfff, 0x1000),
        };
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// What a node is to the scan. `Root` at depth 1, the root's children at depth 2, theirs at 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Kind {
    #[default]
    Other,
    Root,
    /// Another child of the root (any child of the root may be a memory node: decided at its
    /// end).
    TopLevel,
    /// The first root child whose name up to `@` is `reserved-memory`, if named exactly so.
    ReservedMemory,
    /// A child of that.
    Reserved,
    /// The first root child whose name up to `@` is `chosen`.
    Chosen,
    /// A child of `/chosen`.
    ChosenChild,
    /// The first root child whose name up to `@` is `cpus`, if named exactly so.
    Cpus,
    /// A child of that.
    CpusChild,
}

/// The properties the scan reads, by name: a node keeps the first of each (as the full parse's
/// look-ups find). A table and one loop, not a `match`: this code runs before the move, where
/// every distinct block costs (see the module's comment).
const PROPS: [&[u8]; 12] = [
    b"reg",
    b"status",
    b"device_type",
    b"#address-cells",
    b"#size-cells",
    b"no-map",
    b"compatible",
    b"enable-method",
    b"cpu-release-addr",
    b"bootargs",
    b"linux,initrd-start",
    b"linux,initrd-end",
];
const REG: usize = 0;
const STATUS: usize = 1;
const DEVICE_TYPE: usize = 2;
const ADDRESS_CELLS: usize = 3;
const SIZE_CELLS: usize = 4;
const NO_MAP: usize = 5;
const COMPATIBLE: usize = 6;
const ENABLE_METHOD: usize = 7;
const RELEASE_ADDR: usize = 8;
const BOOTARGS: usize = 9;
const INITRD_START: usize = 10;
const INITRD_END: usize = 11;

/// One open node: what it is and the values of its [`PROPS`].
#[derive(Default, Clone, Copy)]
struct Node<'a> {
    kind: Kind,
    name: &'a [u8],
    props: [Option<&'a [u8]>; PROPS.len()],
}

/// The open nodes the scan keeps (root, its child, that one's child); deeper ones are counted.
const KEPT: usize = 3;

#[derive(Default)]
struct Scan<'a> {
    facts: MemFacts,
    memory_found: bool,
    /// Whether the root child that decides `/reserved-memory`, `/chosen`, `/cpus` was met.
    seen_reserved: bool,
    seen_chosen: bool,
    seen_cpus: bool,
    open: [Node<'a>; KEPT],
}

fn base_name(name: &[u8]) -> &[u8] {
    name.split(|&b| b == b'@').next().unwrap_or(name)
}

/// A string property: `Ok(None)` when absent, `Err` when malformed (`Tree::prop_str`'s rule).
fn prop_str(v: Option<&[u8]>) -> Result<Option<&str>, &'static str> {
    v.map(str_value).transpose()
}

/// A one- or two-cell number (`Tree::prop_u32_or_u64`'s rule).
fn number(v: Option<&[u8]>) -> Result<Option<u64>, &'static str> {
    v.map(u32_or_u64_value).transpose()
}

/// The cells a node declares for its children; both required (`Tree::cells`' rule).
fn cells(n: &Node) -> Result<Cells, &'static str> {
    let one = |v: Option<&[u8]>| u32_value(v.ok_or("missing #address-cells or #size-cells")?);
    Ok(Cells { addr: one(n.props[ADDRESS_CELLS])?, size: one(n.props[SIZE_CELLS])? })
}

/// `reg` of a node under `parent`, as regions (a wrap is an error).
fn regions(reg: &[u8], parent: &Node) -> Result<Vec<Region>, &'static str> {
    pair_regions(decode_pairs(reg, cells(parent)?)?)
}

impl<'a> Scan<'a> {
    fn walk(&mut self, block: &'a [u8], strings: &'a [u8]) -> Result<(), &'static str> {
        let mut off = 0usize;
        let mut depth = 0usize;
        loop {
            let token = be32(block, off).ok_or("structure block ends without FDT_END")?;
            off += 4;
            match token {
                FDT_BEGIN_NODE => {
                    let rest = block.get(off..).ok_or("truncated node")?;
                    let len = rest.iter().position(|&b| b == 0).ok_or("node name not terminated")?;
                    let name = &rest[..len];
                    off = (off + len + 1).next_multiple_of(4);
                    depth += 1;
                    if depth <= KEPT {
                        let kind = self.kind_of(depth, name)?;
                        self.open[depth - 1] = Node { kind, name, props: [None; PROPS.len()] };
                    }
                }
                FDT_END_NODE => {
                    if depth == 0 {
                        return Err("unbalanced FDT_END_NODE");
                    }
                    if depth <= KEPT {
                        self.close(depth)?;
                    }
                    depth -= 1;
                }
                FDT_PROP => {
                    let len = be32(block, off).ok_or("truncated property")? as usize;
                    let name_off = be32(block, off + 4).ok_or("truncated property")? as usize;
                    let value = block.get(off + 8..(off + 8).checked_add(len).ok_or("bad length")?).ok_or("value")?;
                    off = (off + 8 + len).next_multiple_of(4);
                    if depth == 0 || depth > KEPT {
                        continue;
                    }
                    let rest = strings.get(name_off..).ok_or("property name outside the strings block")?;
                    let nlen = rest.iter().position(|&b| b == 0).ok_or("property name not terminated")?;
                    self.prop(depth, &rest[..nlen], value);
                }
                FDT_NOP => {}
                FDT_END if depth == 0 => return Ok(()),
                _ => return Err("bad token"),
            }
        }
    }

    /// Classifies a node opened at `depth` by its parent's kind and its name.
    fn kind_of(&mut self, depth: usize, name: &[u8]) -> Result<Kind, &'static str> {
        Ok(match depth {
            1 => Kind::Root,
            2 if self.open[0].kind == Kind::Root => {
                let base = base_name(name);
                if base == b"reserved-memory" && !self.seen_reserved {
                    self.seen_reserved = true;
                    if name == b"reserved-memory" {
                        Kind::ReservedMemory
                    } else {
                        Kind::TopLevel
                    }
                } else if base == b"chosen" && !self.seen_chosen {
                    self.seen_chosen = true;
                    Kind::Chosen
                } else if base == b"cpus" && !self.seen_cpus {
                    self.seen_cpus = true;
                    if name == b"cpus" {
                        Kind::Cpus
                    } else {
                        Kind::TopLevel
                    }
                } else {
                    Kind::TopLevel
                }
            }
            3 => match self.open[1].kind {
                Kind::ReservedMemory => Kind::Reserved,
                Kind::Chosen => Kind::ChosenChild,
                Kind::Cpus => Kind::CpusChild,
                _ => Kind::Other,
            },
            _ => Kind::Other,
        })
    }

    fn prop(&mut self, depth: usize, name: &[u8], value: &'a [u8]) {
        if let Some(i) = PROPS.iter().position(|p| *p == name) {
            let slot = &mut self.open[depth - 1].props[i];
            if slot.is_none() {
                *slot = Some(value);
            }
        }
    }

    /// The node at `depth` ends: all its properties are known (and its parent's).
    fn close(&mut self, depth: usize) -> Result<(), &'static str> {
        let n = self.open[depth - 1];
        // Any child of the root may be a memory node, whatever else it is.
        if depth == 2 {
            let is_memory = match n.props[DEVICE_TYPE] {
                Some(v) => v.strip_suffix(&[0]) == Some(b"memory"),
                None => base_name(n.name) == b"memory",
            };
            if is_memory && status_of(n.props[STATUS]).is_okay() {
                self.memory_found = true;
                let reg = n.props[REG].ok_or("memory node without reg")?;
                let r = regions(reg, &self.open[0])?;
                self.facts.memory.extend(r.into_iter().filter(|r| r.size != 0));
            }
        }
        match n.kind {
            Kind::Reserved if status_of(n.props[STATUS]).is_okay() => {
                if let Some(reg) = n.props[REG] {
                    let r = regions(reg, &self.open[1])?;
                    self.facts.reserved.extend(r.into_iter().map(|r| (r, n.props[NO_MAP].is_some())));
                }
            }
            Kind::Chosen => {
                self.facts.bootargs = prop_str(n.props[BOOTARGS])?.map(String::from);
                self.facts.initrd = match (number(n.props[INITRD_START])?, number(n.props[INITRD_END])?) {
                    (None, None) => None,
                    (Some(s), Some(e)) if e >= s => Some(Region::new(s, e - s)),
                    _ => return Err("bad linux,initrd-start / -end"),
                };
            }
            Kind::ChosenChild => {
                let module =
                    n.props[COMPATIBLE].is_some_and(|v| v.split(|&b| b == 0).any(|s| s == b"multiboot,module"));
                if module {
                    let pairs = decode_pairs(n.props[REG].ok_or("module without reg")?, cells(&self.open[1])?)?;
                    match pairs.as_slice() {
                        [(b, s)] if *s > 0 && b.checked_add(*s).is_some() => {
                            self.facts.modules.push(Region::new(*b, *s))
                        }
                        _ => return Err("a module's reg is not one non-empty pair"),
                    }
                }
            }
            Kind::CpusChild => {
                let is_cpu = match n.props[DEVICE_TYPE] {
                    Some(v) => v.strip_suffix(&[0]) == Some(b"cpu"),
                    None => base_name(n.name) == b"cpu",
                };
                // Present: there, or disabled with an enable-method (a spin-table one has).
                if is_cpu
                    && prop_str(n.props[ENABLE_METHOD])? == Some("spin-table")
                    && !matches!(status_of(n.props[STATUS]), Status::Other(_))
                {
                    if let Some(a) = number(n.props[RELEASE_ADDR])? {
                        self.facts.spin_release.push(a);
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }
}
