//! The model: table memory, reachability, per-CPU TLBs, pending maintenance, violations.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::string::String;
use std::vec::Vec;

use super::tlbmodel::{CpuTlb, Scope};
use crate::addr::{level_size, PhysAddr, CONT_ENTRIES, ENTRIES_PER_TABLE, PAGE_SIZE};
use crate::descriptor::{cont_size, decode_leaf, Desc};
use crate::regime::Regime;
use crate::tlb::{Barrier, Shareability, Tlbi, TlbiOp};

/// A fast hasher for the model's `u64`-keyed maps (frame and table addresses).
#[derive(Default, Clone, Copy)]
pub struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
    fn write_u64(&mut self, v: u64) {
        // Keys are page addresses (12 zero low bits): fold the high product bits back down so the
        // table index (low bits) varies.
        let x = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
        self.0 = x ^ (x >> 29);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// `HashMap` with [`AddrHasher`].
pub type AddrMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<AddrHasher>>;

/// Number of model CPUs (0 issues the operations; 1 only caches and is reached by IS ops).
pub const CPUS: usize = 2;

/// Where a cached entry came from: (table, index, descriptor value).
pub type Source = (u64, usize, u64);

/// What a TLB entry caches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cached {
    /// A leaf translation: `[start, start + size)` -> `out`. `combined`: a stage-1+2 entry of
    /// a guest (stage 2 only), which IPA-based TLBIs do not reach.
    Leaf { out: u64, desc: Desc, level: usize, contiguous_range: bool, combined: bool },
    /// A walk-cache entry: the table that translates `[start, start + size)` at `level + 1`.
    Walk { table: u64, level: usize },
}

/// One model TLB entry.
#[derive(Clone, Copy, Debug)]
pub struct TlbEntry {
    /// Input offset of the first byte.
    pub start: u64,
    /// Bytes covered.
    pub size: u64,
    /// Global (EL1&0 nG = 0).
    pub global: bool,
    /// What it caches.
    pub what: Cached,
    /// The descriptor it was read from.
    pub src: Source,
}

impl TlbEntry {
    fn overlaps(&self, s: u64, e: u64) -> bool {
        self.start < e && s < self.start + self.size
    }
}

/// A logged event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Write { table: u64, index: usize, old: u64, new: u64 },
    Dsb(Barrier),
    Isb,
    Tlbi(Tlbi),
    Alloc(u64, usize),
    Free(u64, usize),
}

struct PendingTlbi {
    op: Tlbi,
    /// Writes not yet visible when the TLBI was issued.
    stale: HashSet<Source, std::hash::BuildHasherDefault<AddrHasher>>,
}

/// Frame contents and state.
pub struct Frame {
    pub data: Box<[u64; ENTRIES_PER_TABLE]>,
    pub allocated: bool,
}

/// The whole model.
pub struct Model {
    pub regime: Regime,
    pub bbml2: bool,
    pub live: bool,
    pub root: Option<(u64, usize)>,
    pub frames: AddrMap<Frame>,
    next_frame: u64,
    /// Reachable tables: pa -> (level of its entries, input offset of entry 0).
    placement: AddrMap<(usize, u64)>,
    pub tlbs: [CpuTlb; CPUS],
    /// Descriptor writes not yet made visible to every walker by a DSB (old values).
    stale: Vec<Source>,
    /// Frames written while no table linked them (zeroed when allocated, or filled before
    /// being linked) since the last inner-shareable DSB: linking one into a live table would
    /// let another CPU's walker follow the link and read what the frame held before.
    unpublished: HashSet<u64, std::hash::BuildHasherDefault<AddrHasher>>,
    pending: Vec<PendingTlbi>,
    /// Contiguous groups a write left in a state only BBML2 tolerates, and only while the
    /// operation runs (members disagreeing on the contiguous bit, or all contiguous and
    /// disagreeing only in permissions): (table, first index, level). Each must agree again
    /// when the operation returns.
    unsettled: Vec<(u64, usize, usize)>,
    pub violations: Vec<String>,
    pub log: Vec<Event>,
    /// Keep the log (off for long property runs).
    pub keep_log: bool,
    pub frames_in_use: usize,
}

impl Model {
    pub fn new(regime: Regime) -> Self {
        Model {
            regime,
            bbml2: false,
            live: false,
            root: None,
            frames: AddrMap::default(),
            next_frame: 0x80_0000_0000,
            placement: AddrMap::default(),
            tlbs: [CpuTlb::default(), CpuTlb::default()],
            stale: Vec::new(),
            unpublished: HashSet::default(),
            pending: Vec::new(),
            unsettled: Vec::new(),
            violations: Vec::new(),
            log: Vec::new(),
            keep_log: true,
            frames_in_use: 0,
        }
    }

    fn event(&mut self, e: Event) {
        if self.keep_log {
            self.log.push(e);
        }
    }

    fn violation(&mut self, msg: String) {
        if self.violations.len() < 64 {
            self.violations.push(msg);
        }
    }

    // ----- frames -----

    pub fn alloc(&mut self, pages: usize) -> Option<u64> {
        let align = pages as u64 * PAGE_SIZE;
        let pa = (self.next_frame + align - 1) & !(align - 1);
        self.next_frame = pa + align;
        for p in 0..pages as u64 {
            self.frames.insert(pa + p * PAGE_SIZE, Frame { data: Box::new([0; ENTRIES_PER_TABLE]), allocated: true });
            // The allocator's zeroing is a write like any other.
            self.unpublished.insert(pa + p * PAGE_SIZE);
        }
        self.frames_in_use += pages;
        self.event(Event::Alloc(pa, pages));
        Some(pa)
    }

    pub fn set_root(&mut self, root: PhysAddr) {
        let pages = self.regime.root_pages();
        self.root = Some((root.as_u64(), pages));
        self.placement.insert(root.as_u64(), (self.regime.start_level(), 0));
    }

    fn slot(&self, table: u64, index: usize) -> (u64, usize) {
        // Root tables span two frames for stage 2.
        let page = table + (index / ENTRIES_PER_TABLE) as u64 * PAGE_SIZE;
        (page, index % ENTRIES_PER_TABLE)
    }

    pub fn read(&mut self, table: u64, index: usize) -> u64 {
        let (page, i) = self.slot(table, index);
        match self.frames.get(&page) {
            Some(f) if f.allocated => f.data[i],
            Some(f) => {
                let v = f.data[i];
                self.violation(format!("read of freed frame {page:#x}"));
                v
            }
            None => {
                self.violation(format!("read of unknown frame {page:#x}"));
                0
            }
        }
    }

    fn peek(&self, table: u64, index: usize) -> u64 {
        let (page, i) = self.slot(table, index);
        self.frames.get(&page).map(|f| f.data[i]).unwrap_or(0)
    }

    pub fn free(&mut self, pa: u64, pages: usize) {
        self.event(Event::Free(pa, pages));
        if self.live {
            if let Some(&(level, off)) = self.placement.get(&pa) {
                self.violation(format!("freed table {pa:#x} is still reachable (level {level}, input {off:#x})"));
            }
            for cpu in 0..CPUS {
                let cached = self.tlbs[cpu].iter().any(|e| matches!(e.what, Cached::Walk { table, .. } if table == pa));
                if cached {
                    self.violation(format!(
                        "freed table {pa:#x} is still in CPU {cpu}'s walk cache (no completed TLBI)"
                    ));
                    break;
                }
            }
            let linked_by_stale =
                self.stale.iter().any(|&(_, _, v)| Desc(v).is_valid() && Desc(v).addr().as_u64() == pa);
            if linked_by_stale {
                self.violation(format!(
                    "freed table {pa:#x} is still linked by a descriptor write not yet visible (no DSB)"
                ));
            }
        }
        for p in 0..pages as u64 {
            match self.frames.get_mut(&(pa + p * PAGE_SIZE)) {
                Some(f) if f.allocated => f.allocated = false,
                _ => self.violation(format!("double or bogus free of {pa:#x}")),
            }
        }
        self.frames_in_use -= pages;
        self.placement.remove(&pa);
    }

    // ----- translations -----

    fn is_global(&self, d: Desc) -> bool {
        matches!(self.regime, Regime::El1 { .. }) && d.0 & (1 << 11) == 0
    }

    /// Every translation a TLB may hold from descriptor `d` at (table, index) placed at
    /// (`level`, `off`), including those below a table descriptor.
    fn translations_of(&self, src: Source, level: usize, off: u64, out: &mut Vec<TlbEntry>) {
        let d = Desc(src.2);
        if !d.is_valid() {
            return;
        }
        let size = level_size(level);
        let global = self.is_global(d);
        if d.is_table(level) {
            out.push(TlbEntry {
                start: off,
                size,
                global: false,
                what: Cached::Walk { table: d.addr().as_u64(), level },
                src,
            });
            let child = d.addr().as_u64();
            if self.frames.get(&child).map(|f| f.allocated).unwrap_or(false) {
                for i in 0..ENTRIES_PER_TABLE {
                    let v = self.peek(child, i);
                    if Desc(v).is_valid() {
                        let csize = level_size(level + 1);
                        self.translations_of((child, i, v), level + 1, off + i as u64 * csize, out);
                    }
                }
            }
            return;
        }
        if !d.is_valid_leaf(level) {
            return;
        }
        let stage2 = self.regime.is_stage2();
        let combos: &[bool] = if stage2 { &[false, true] } else { &[false] };
        for &combined in combos {
            out.push(TlbEntry {
                start: off,
                size,
                global,
                what: Cached::Leaf { out: d.addr().as_u64(), desc: d, level, contiguous_range: false, combined },
                src,
            });
            if d.is_contiguous() {
                let g = cont_size(level);
                let gstart = off & !(g - 1);
                out.push(TlbEntry {
                    start: gstart,
                    size: g,
                    global,
                    what: Cached::Leaf {
                        out: d.addr().as_u64() - (off - gstart),
                        desc: d,
                        level,
                        contiguous_range: true,
                        combined,
                    },
                    src,
                });
            }
        }
    }

    /// The current (software) translation of input offset `off`: (output, descriptor, level).
    fn lookup(&self, off: u64) -> Option<(u64, Desc, usize)> {
        let (root, _) = self.root?;
        let mut table = root;
        let mut level = self.regime.start_level();
        let mut entries = self.regime.root_entries() as u64;
        loop {
            let size = level_size(level);
            let index = ((off / size) % entries) as usize;
            let d = Desc(self.peek(table, index));
            if d.is_table(level) {
                table = d.addr().as_u64();
                level += 1;
                entries = ENTRIES_PER_TABLE as u64;
                continue;
            }
            if !d.is_valid_leaf(level) {
                return None;
            }
            return Some((d.addr().as_u64() + (off & (size - 1)), d, level));
        }
    }

    // ----- writes -----

    pub fn write(&mut self, table: u64, index: usize, new: u64) {
        let old = self.read(table, index);
        self.event(Event::Write { table, index, old, new });
        let placed = self.placement.get(&table).copied();
        if let (true, Some((level, base))) = (self.live, placed) {
            let off = base + index as u64 * level_size(level);
            // Anything the old value translated may be cached by now, on every CPU.
            let mut olds = Vec::new();
            self.translations_of((table, index, old), level, off, &mut olds);
            for cpu in 0..CPUS {
                for e in &olds {
                    self.tlbs[cpu].insert(*e);
                }
            }
            self.check_bbm(table, index, level, off, Desc(old), Desc(new));
            if Desc(old).is_valid() || Desc(new).is_valid() {
                self.stale.push((table, index, old));
            }
            if Desc(new).is_table(level) && Desc(new).addr() != Desc(old).addr() {
                self.check_published(Desc(new).addr().as_u64(), level + 1, off);
            }
            if Desc(new).is_valid_leaf(level) && Desc(new).addr() != Desc(old).addr() {
                self.check_page_published(Desc(new).addr().as_u64(), level, off);
            }
        }
        if placed.is_none() {
            self.unpublished.insert(self.slot(table, index).0);
        }
        let (page, i) = self.slot(table, index);
        let freed = match self.frames.get_mut(&page) {
            Some(f) => {
                f.data[i] = new;
                Some(!f.allocated)
            }
            None => None,
        };
        match freed {
            Some(false) => {}
            Some(true) => self.violation(format!("write to freed frame {page:#x}")),
            None => self.violation(format!("write to unknown frame {page:#x}")),
        }
        if let Some((level, base)) = placed {
            let off = base + index as u64 * level_size(level);
            let (o, n) = (Desc(old), Desc(new));
            if o.is_table(level) && !(n.is_table(level) && n.addr() == o.addr()) {
                self.unplace(o.addr().as_u64());
            }
            if n.is_table(level) {
                self.place(n.addr().as_u64(), level + 1, off);
            }
            if self.live && level >= 2 {
                self.check_contiguous_group(table, index, level);
            }
        }
    }

    fn place(&mut self, table: u64, level: usize, off: u64) {
        self.placement.insert(table, (level, off));
        if level >= 3 {
            return;
        }
        for i in 0..ENTRIES_PER_TABLE {
            let d = Desc(self.peek(table, i));
            if d.is_table(level) {
                self.place(d.addr().as_u64(), level + 1, off + i as u64 * level_size(level));
            }
        }
    }

    fn unplace(&mut self, table: u64) {
        let Some((level, _)) = self.placement.remove(&table) else {
            return;
        };
        if level >= 3 {
            return;
        }
        for i in 0..ENTRIES_PER_TABLE {
            let d = Desc(self.peek(table, i));
            if d.is_table(level) {
                self.unplace(d.addr().as_u64());
            }
        }
    }

    /// The leaf attributes that must not change without break-before-make: memory type and
    /// shareability (MAIR index / MemAttr and SH), nG.
    fn bbm_attrs(d: Desc) -> u64 {
        d.0 & ((0xf << 2) | (0b11 << 8) | (1 << 11))
    }

    fn check_bbm(&mut self, table: u64, index: usize, level: usize, off: u64, old: Desc, new: Desc) {
        if !new.is_valid() {
            return;
        }
        // A table descriptor rewritten with the same next-level table, changing only bits the
        // hardware ignores in table descriptors (58:51, e.g. the split summary): every cached
        // walk through it stays right.
        const TABLE_IGNORED: u64 = 0xff << 51;
        if old.is_table(level) && new.is_table(level) && (old.0 ^ new.0) & !TABLE_IGNORED == 0 {
            return;
        }
        let size = level_size(level);
        let sample = |o: u64| -> Option<(u64, Desc, usize)> {
            if new.is_valid_leaf(level) {
                Some((new.addr().as_u64() + (o - off), new, level))
            } else {
                None
            }
        };
        let mut conflicts: Vec<String> = Vec::new();
        for cpu in 0..CPUS {
            for e in self.tlbs[cpu].overlapping(off, off + size) {
                if e.src == (table, index, new.0) {
                    continue;
                }
                match e.what {
                    Cached::Walk { table: t, level: wl } => {
                        // A cached walk through this slot to a table that the new value does
                        // not link any more.
                        let same = new.is_table(level) && new.addr().as_u64() == t && wl == level;
                        if wl >= level && !same && !self.bbml2 {
                            conflicts.push(format!(
                                "CPU {cpu} caches a walk via table {t:#x} over {:#x}+{:#x}",
                                e.start, e.size
                            ));
                        }
                    }
                    Cached::Leaf { out, desc, level: cl, .. } => {
                        // Compare at up to three points of the overlap.
                        let lo = e.start.max(off);
                        let hi = (e.start + e.size).min(off + size) - PAGE_SIZE;
                        let mid = (lo + (hi - lo) / 2) & !(PAGE_SIZE - 1);
                        for p in [lo, mid, hi] {
                            let cached_out = out + (p - e.start);
                            let now =
                                if new.is_table(level) { self.lookup_below(new, level, off, p) } else { sample(p) };
                            let Some((nout, nd, nlevel)) = now else {
                                continue;
                            };
                            if nout != cached_out || Self::bbm_attrs(nd) != Self::bbm_attrs(desc) {
                                conflicts.push(format!(
                                    "CPU {cpu} caches {:#x}+{:#x} -> {:#x} ({:?}) while the new entry maps {p:#x} -> {nout:#x} ({:?})",
                                    e.start, e.size, out, desc, nd
                                ));
                                break;
                            }
                            // Same level and the same contiguous bit: the same TLB entry shape (a
                            // per-page entry and a range entry both come from a contiguous leaf).
                            let size_change = nlevel != cl || desc.is_contiguous() != nd.is_contiguous();
                            if size_change && !self.bbml2 {
                                conflicts.push(format!(
                                    "CPU {cpu} caches {:#x}+{:#x} (level {cl}, cont {}) while the new entry at level {nlevel} (cont {}) maps it: block size / contiguous change without break-before-make",
                                    e.start, e.size, desc.is_contiguous(), nd.is_contiguous()
                                ));
                                break;
                            }
                        }
                    }
                }
            }
        }
        if !conflicts.is_empty() {
            let mut msg = format!(
                "break-before-make violated writing {:?} over {:?} at level {level} input {off:#x}: ",
                new, old
            );
            let _ = write!(msg, "{}", conflicts[0]);
            self.violation(msg);
        }
    }

    /// Translation of `p` through the (unlinked-so-far) subtree of table descriptor `d`.
    fn lookup_below(&self, d: Desc, level: usize, off: u64, p: u64) -> Option<(u64, Desc, usize)> {
        let mut table = d.addr().as_u64();
        let mut lvl = level + 1;
        let mut base = off;
        loop {
            let size = level_size(lvl);
            let i = ((p - base) / size) as usize;
            let c = Desc(self.peek(table, i));
            if c.is_table(lvl) {
                table = c.addr().as_u64();
                base += i as u64 * size;
                lvl += 1;
                continue;
            }
            if !c.is_valid_leaf(lvl) {
                return None;
            }
            return Some((c.addr().as_u64() + (p - base - i as u64 * size), c, lvl));
        }
    }

    /// Leaf bits holding access permissions (AP / S2AP 7:6, PXN / UXN / XN 54:53, the same in
    /// both stages): the only bits in which BBML2 lets the members of a contiguous range
    /// disagree, and only while an operation runs.
    const PERM_BITS: u64 = (0b11 << 6) | (0b11 << 53);

    /// How the valid members of the contiguous group of (table, index) at `level` agree:
    /// `None` when no valid member has the contiguous bit (not a contiguous range).
    fn group_state(&self, table: u64, index: usize, level: usize) -> Option<(GroupState, [Desc; CONT_ENTRIES])> {
        let first = index & !(CONT_ENTRIES - 1);
        let size = level_size(level);
        let mut group = [Desc::INVALID; CONT_ENTRIES];
        let (page, i0) = self.slot(table, first);
        let f = self.frames.get(&page)?;
        for (k, g) in group.iter_mut().enumerate() {
            *g = Desc(f.data[i0 + k]);
        }
        let valid = || group.iter().enumerate().filter(|(_, d)| d.is_valid_leaf(level));
        if !valid().any(|(_, d)| d.is_contiguous()) {
            return None;
        }
        let (k0, d0) = valid().next().map(|(k, &d)| (k, d))?;
        let base = d0.addr().as_u64().wrapping_sub(k0 as u64 * size);
        let outputs = base % cont_size(level) == 0 && valid().all(|(k, d)| d.addr().as_u64() == base + k as u64 * size);
        let all_cont = valid().all(|(_, d)| d.is_contiguous());
        let same_attrs = valid().all(|(_, d)| d.leaf_attr_bits() == d0.leaf_attr_bits());
        let same_but_perms = valid().all(|(_, d)| (d.leaf_attr_bits() ^ d0.leaf_attr_bits()) & !Self::PERM_BITS == 0);
        let state = if !outputs {
            GroupState::Misprogrammed
        } else if same_attrs && all_cont {
            GroupState::Consistent
        } else if same_attrs || (all_cont && same_but_perms) {
            // Members differ only in the contiguous bit (a BBML2 convert in progress), or all
            // contiguous and differing only in permissions (a BBML2 in-place permission change
            // of the whole range in progress).
            GroupState::Transient
        } else {
            GroupState::Misprogrammed
        };
        Some((state, group))
    }

    fn check_contiguous_group(&mut self, table: u64, index: usize, level: usize) {
        let first = index & !(CONT_ENTRIES - 1);
        let Some((state, group)) = self.group_state(table, index, level) else {
            return;
        };
        let ok = match state {
            GroupState::Consistent => true,
            // Under BBML2 a lookup in a range whose members disagree only so gives the values
            // of one of them (no TLB conflict abort): the same as a stale entry until the
            // operation's flush. Without BBML2 it may raise a TLB conflict abort.
            GroupState::Transient if self.bbml2 => {
                if !self.unsettled.contains(&(table, first, level)) {
                    self.unsettled.push((table, first, level));
                }
                true
            }
            _ => false,
        };
        if !ok {
            self.violation(format!(
                "misprogrammed contiguous range in table {table:#x} entries {first}..{}: {:?}",
                first + CONT_ENTRIES,
                group
            ));
        }
    }

    /// Groups left disagreeing when the operation returned.
    fn check_unsettled_groups(&mut self) {
        for (table, first, level) in std::mem::take(&mut self.unsettled) {
            // A table unlinked since then is no longer walked.
            if self.placement.get(&table).map(|&(l, _)| l) != Some(level) {
                continue;
            }
            if let Some((GroupState::Transient | GroupState::Misprogrammed, group)) =
                self.group_state(table, first, level)
            {
                self.violation(format!(
                    "contiguous range in table {table:#x} entries {first}..{} left with members that disagree at the end of the operation (partially rewritten): {:?}",
                    first + CONT_ENTRIES,
                    group
                ));
            }
        }
    }

    // ----- maintenance -----

    pub fn tlbi(&mut self, op: Tlbi) {
        self.event(Event::Tlbi(op));
        let stale = self.stale.iter().copied().collect();
        self.pending.push(PendingTlbi { op, stale });
    }

    pub fn isb(&mut self) {
        self.event(Event::Isb);
    }

    pub fn dsb(&mut self, b: Barrier) {
        self.event(Event::Dsb(b));
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let broadcast = p.op.sh == Shareability::InnerShareable;
            if !b.completes_maintenance() || (broadcast && !b.is_inner_shareable()) {
                self.pending.push(p);
                continue;
            }
            let cpus = if broadcast { 0..CPUS } else { 0..1 };
            for cpu in cpus {
                let regime = self.regime;
                // An entry read from a value whose overwrite was not yet visible when the TLBI
                // ran can be walked again right after it: it survives.
                self.tlbs[cpu].retain(op_range(regime, &p.op), scope(regime, &p.op), |e| {
                    p.stale.contains(&e.src) || !matches(regime, &p.op, e)
                });
            }
        }
        if b.is_inner_shareable() {
            self.stale.clear();
            self.unpublished.clear();
        }
    }

    /// A table about to be linked into a live table (`table`, its entries at `level`, input
    /// `off`): it and every table below it must have been written for the last time before an
    /// inner-shareable DSB (Linux: `dsb(ishst)` after clearing or filling a new table, before
    /// populating the entry that points to it).
    fn check_published(&mut self, table: u64, level: usize, off: u64) {
        if self.unpublished.contains(&table) {
            self.violation(format!(
                "table {table:#x} (level {level}, input {off:#x}) linked into a live table before its contents \
                 were made visible (no DSB ISHST since it was zeroed or filled)"
            ));
            return;
        }
        if level >= 3 {
            return;
        }
        for i in 0..ENTRIES_PER_TABLE {
            let d = Desc(self.peek(table, i));
            if d.is_table(level) {
                self.check_published(d.addr().as_u64(), level + 1, off + i as u64 * level_size(level));
            }
        }
    }

    /// A page (or the first page of a block) about to be mapped by a live table's leaf at
    /// `level`, input `off`: a frame allocated (zeroed) or written while unreachable must have
    /// been written for the last time before an inner-shareable DSB, or another CPU whose walk
    /// finds the new leaf could read what the frame held before (Linux: the `smp_wmb()` of
    /// `__folio_mark_uptodate` before `set_pte_at` in a demand-zero fault).
    fn check_page_published(&mut self, pa: u64, level: usize, off: u64) {
        if self.unpublished.contains(&pa) {
            self.violation(format!(
                "page {pa:#x} mapped by a live leaf (level {level}, input {off:#x}) before its contents were \
                 made visible (no DSB ISHST since it was zeroed or written)"
            ));
        }
    }

    /// Whether some valid leaf below `table` (at `level`) grants write access (`writable`) or
    /// is a block (not `writable`).
    fn subtree_has(&self, table: u64, level: usize, writable: bool) -> bool {
        (0..ENTRIES_PER_TABLE).any(|i| {
            let d = Desc(self.peek(table, i));
            if d.is_table(level) {
                return self.subtree_has(d.addr().as_u64(), level + 1, writable);
            }
            if writable {
                d.is_valid_leaf(level) && decode_leaf(self.regime, d).perms.contains(crate::Perms::WRITE)
            } else {
                level < 3 && d.is_mapping(level)
            }
        })
    }

    /// The table summary bits say the truth: no writable leaf below a table descriptor with
    /// "no writable" (a write-protect skips it), no block below one with "no blocks" (a split
    /// skips it).
    fn check_summaries(&mut self) {
        let mut msgs = Vec::new();
        let mut tables: Vec<(u64, usize, u64)> = self.placement.iter().map(|(&t, &(l, b))| (t, l, b)).collect();
        tables.sort_unstable();
        for (table, level, base) in tables {
            if level >= 3 {
                continue;
            }
            for i in 0..ENTRIES_PER_TABLE {
                let d = Desc(self.peek(table, i));
                if !d.is_table(level) {
                    continue;
                }
                let off = base + i as u64 * level_size(level);
                let child = d.addr().as_u64();
                if d.is_table_without_writable(level) && self.subtree_has(child, level + 1, true) {
                    msgs.push(format!(
                        "stale summary: table entry {off:#x} (level {level}) says no writable leaf below, but one is"
                    ));
                }
                if d.is_table_without_blocks(level) && self.subtree_has(child, level + 1, false) {
                    msgs.push(format!(
                        "stale summary: table entry {off:#x} (level {level}) says no block below, but one is"
                    ));
                }
            }
        }
        for m in msgs.into_iter().take(4) {
            self.violation(m);
        }
    }

    /// The checks that hold once an operation has returned.
    pub fn check_quiescent(&mut self) {
        self.check_unsettled_groups();
        self.check_summaries();
        // A new valid entry whose write no DSB made visible yet: the caller's next access
        // through it (the faulting one a page fault retries) may walk the old, empty entry.
        let unseen = self.stale.iter().filter(|&&(t, i, _)| Desc(self.peek(t, i)).is_valid()).count();
        if self.live && unseen != 0 {
            self.violation(format!(
                "{unseen} valid descriptor write(s) not made visible to the walkers by a DSB at the end of the operation"
            ));
        }
        if !self.pending.is_empty() {
            self.violation(format!(
                "{} TLBI(s) not completed by a DSB at the end of the operation",
                self.pending.len()
            ));
        }
        let mut msgs = Vec::new();
        for cpu in 0..CPUS {
            for e in self.tlbs[cpu].iter() {
                match e.what {
                    Cached::Walk { table, level } => {
                        let ok = self.placement.get(&table) == Some(&(level + 1, e.start));
                        if !ok {
                            msgs.push(format!(
                                "CPU {cpu}: stale walk-cache entry {:#x}+{:#x} -> table {table:#x} (unlinked)",
                                e.start, e.size
                            ));
                        }
                    }
                    Cached::Leaf { out, desc, .. } => {
                        let last = e.start + e.size - PAGE_SIZE;
                        let mid = (e.start + e.size / 2) & !(PAGE_SIZE - 1);
                        for p in [e.start, mid, last] {
                            let cached_out = out + (p - e.start);
                            let problem = match self.lookup(p) {
                                None => Some("the tables map nothing there".to_string()),
                                Some((nout, nd, _)) => {
                                    let cp = decode_leaf(self.regime, desc).perms;
                                    let np = decode_leaf(self.regime, nd).perms;
                                    if nout != cached_out {
                                        Some(format!("the tables map it to {nout:#x}"))
                                    } else if !np.contains(cp) {
                                        Some(format!("the tables grant only {np:?}, the TLB {cp:?}"))
                                    } else if Self::bbm_attrs(nd) != Self::bbm_attrs(desc) {
                                        Some("the memory attributes differ".to_string())
                                    } else {
                                        None
                                    }
                                }
                            };
                            if let Some(why) = problem {
                                msgs.push(format!(
                                    "CPU {cpu}: stale TLB entry {:#x}+{:#x} -> {out:#x} {:?}: {why}",
                                    e.start,
                                    e.size,
                                    decode_leaf(self.regime, desc).perms
                                ));
                                break;
                            }
                        }
                    }
                }
            }
        }
        for m in msgs.into_iter().take(4) {
            self.violation(m);
        }
    }
}

/// How the members of a contiguous range agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupState {
    /// Every valid member contiguous, consecutive aligned outputs, identical attributes.
    Consistent,
    /// Consecutive aligned outputs, but the members disagree on the contiguous bit (identical
    /// attributes), or all are contiguous and differ only in permissions: tolerated under BBML2
    /// while an operation runs.
    Transient,
    /// Anything else (other outputs, memory type, shareability, access flag, nG).
    Misprogrammed,
}

/// Input offsets a TLBI by address reaches (`None`: the whole context).
fn op_range(regime: Regime, op: &Tlbi) -> Option<(u64, u64)> {
    let base = regime.input_base();
    let off = |a: u64| a.wrapping_sub(base);
    match op.op {
        TlbiOp::Vae1 { va, .. } | TlbiOp::Vaae1 { va } | TlbiOp::Vae2 { va } => {
            Some((off(va.as_u64()), off(va.as_u64()) + 1))
        }
        TlbiOp::Ipas2e1 { ipa, .. } => Some((ipa.as_u64(), ipa.as_u64() + 1)),
        TlbiOp::Rvae1 { base, range, .. } | TlbiOp::Rvaae1 { base, range } | TlbiOp::Rvae2 { base, range } => {
            Some((off(base.as_u64()), off(base.as_u64()) + range.bytes()))
        }
        TlbiOp::Ripas2e1 { base, range, .. } => Some((base.as_u64(), base.as_u64() + range.bytes())),
        _ => None,
    }
}

/// Whether TLBI `op` removes entry `e` of a table of `regime`.
/// Which entries [`matches`] can hold for under `op`: under stage 2, `TLBI VMALLE1` removes
/// only combined stage 1+2 leaves, so its sweep need not look at the rest (checked against
/// [`matches`] by `scope_agrees_with_matches`).
fn scope(regime: Regime, op: &Tlbi) -> Scope {
    match (regime, op.op) {
        (Regime::Stage2 { .. }, TlbiOp::Vmalle1 { vmid: Some(_) }) => Scope::CombinedOnly,
        _ => Scope::All,
    }
}

fn matches(regime: Regime, op: &Tlbi, e: &TlbEntry) -> bool {
    let base = regime.input_base();
    let is_walk = matches!(e.what, Cached::Walk { .. });
    if is_walk && op.leaf_only && !op.is_whole_context() {
        return false;
    }
    let combined = matches!(e.what, Cached::Leaf { combined: true, .. });
    let covers = |addr: u64| {
        let off = addr.wrapping_sub(base);
        e.overlaps(off, off + 1)
    };
    let covers_range = |b: u64, bytes: u64| {
        let off = b.wrapping_sub(base);
        e.overlaps(off, off + bytes)
    };
    match (regime, op.op) {
        (Regime::El1 { asid: a, .. }, TlbiOp::Vae1 { asid, va }) => (e.global || asid == a) && covers(va.as_u64()),
        (Regime::El1 { .. }, TlbiOp::Vaae1 { va }) => covers(va.as_u64()),
        (Regime::El1 { asid: a, .. }, TlbiOp::Rvae1 { asid, base, range }) => {
            (e.global || asid == a) && covers_range(base.as_u64(), range.bytes())
        }
        (Regime::El1 { .. }, TlbiOp::Rvaae1 { base, range }) => covers_range(base.as_u64(), range.bytes()),
        (Regime::El1 { asid: a, .. }, TlbiOp::Aside1 { asid }) => !e.global && asid == a,
        (Regime::El1 { .. }, TlbiOp::Vmalle1 { vmid: None }) => true,
        (Regime::El2 | Regime::El20, TlbiOp::Vae2 { va }) => covers(va.as_u64()),
        (Regime::El2 | Regime::El20, TlbiOp::Rvae2 { base, range }) => covers_range(base.as_u64(), range.bytes()),
        (Regime::El2 | Regime::El20, TlbiOp::Alle2) => true,
        (Regime::Stage2 { vmid: v }, TlbiOp::Ipas2e1 { vmid, ipa }) => !combined && vmid == v && covers(ipa.as_u64()),
        (Regime::Stage2 { vmid: v }, TlbiOp::Ripas2e1 { vmid, base, range }) => {
            !combined && vmid == v && covers_range(base.as_u64(), range.bytes())
        }
        (Regime::Stage2 { vmid: v }, TlbiOp::Vmalle1 { vmid: Some(vmid) }) => combined && vmid == v,
        (Regime::Stage2 { vmid: v }, TlbiOp::Vmalls12e1 { vmid }) => vmid == v,
        _ => false,
    }
}

#[cfg(test)]
mod summary_tests {
    use crate::addr::{PhysAddr, VirtAddr};
    use crate::attrs::{Attributes, Constraints, Perms};
    use crate::model::harness::Harness;
    use crate::regime::Regime;

    /// The checker sees a block under a table entry that says "no block below" (what a split
    /// that trusted the bit would skip). Written by hand: no operation of the library leaves
    /// one, so only this test shows the check is not blind.
    #[test]
    fn a_block_below_a_no_blocks_table_is_reported() {
        let mut h: Harness = Harness::new(Regime::El2, false, false);
        let rw = Attributes::normal(Perms::RW);
        // Pages only below 1 GiB: the level-1 entry's new table says "no block below".
        h.pt.map(&mut h.tlb, VirtAddr::new(0), 4 << 20, PhysAddr::new(0x4000_0000), rw, Constraints::NO_BLOCKS)
            .unwrap();
        h.check().expect("clean before the hand-written block");
        {
            let mut m = h.model.borrow_mut();
            let l2 = m.placement.iter().find(|(_, &(level, _))| level == 2).map(|(&t, _)| t).expect("level-2 table");
            // Entry 1 (2-4 MiB) becomes a valid 2 MiB block (valid, block type, AF).
            let (page, i) = m.slot(l2, 1);
            m.frames.get_mut(&page).expect("frame").data[i] = 0x4020_0000 | 0b01 | 1 << 10;
        }
        let report = h.check().expect_err("a block below a no-blocks table");
        assert!(report.contains("says no block below"), "{report}");
        assert!(!report.contains("no writable leaf"), "{report}");
    }
}

#[cfg(test)]
mod scope_tests {
    use super::{matches, scope, Cached, Desc, Scope, TlbEntry};
    use crate::addr::{IntermPhysAddr, VirtAddr};
    use crate::regime::{Regime, VaHalf};
    use crate::tlb::{Shareability, Tlbi, TlbiOp, TlbiRange};
    use std::vec::Vec;

    /// A combined-only sweep looks at combined stage 1+2 leaves alone: every other entry must be
    /// one that [`matches`] never removes under that operation, in every regime.
    #[test]
    fn scope_agrees_with_matches() {
        let range = TlbiRange { scale: 0, num: 0 };
        let (va, ipa) = (VirtAddr::new(0), IntermPhysAddr::new(0));
        let ops = [
            TlbiOp::Vae1 { asid: 1, va },
            TlbiOp::Vaae1 { va },
            TlbiOp::Rvae1 { asid: 1, base: va, range },
            TlbiOp::Rvaae1 { base: va, range },
            TlbiOp::Aside1 { asid: 1 },
            TlbiOp::Vmalle1 { vmid: None },
            TlbiOp::Vmalle1 { vmid: Some(2) },
            TlbiOp::Vmalle1 { vmid: Some(3) },
            TlbiOp::Vae2 { va },
            TlbiOp::Rvae2 { base: va, range },
            TlbiOp::Alle2,
            TlbiOp::Ipas2e1 { vmid: 2, ipa },
            TlbiOp::Ripas2e1 { vmid: 2, base: ipa, range },
            TlbiOp::Vmalls12e1 { vmid: 2 },
        ];
        let regimes = [Regime::El2, Regime::El1 { asid: 1, half: VaHalf::Lower }, Regime::Stage2 { vmid: 2 }];
        let mut entries = Vec::new();
        for global in [false, true] {
            let what = |combined| Cached::Leaf { out: 0, desc: Desc(0), level: 3, contiguous_range: false, combined };
            for w in [what(false), what(true), Cached::Walk { table: 0x1000, level: 2 }] {
                entries.push(TlbEntry { start: 0, size: 1 << 12, global, what: w, src: (0x2000, 0, 0) });
            }
        }
        let mut combined_only = 0;
        for regime in regimes {
            for op in ops {
                for leaf_only in [false, true] {
                    let t = Tlbi { op, leaf_only, sh: Shareability::InnerShareable };
                    if scope(regime, &t) != Scope::CombinedOnly {
                        continue;
                    }
                    combined_only += 1;
                    for e in entries.iter().filter(|e| !matches!(e.what, Cached::Leaf { combined: true, .. })) {
                        assert!(!matches(regime, &t, e), "{regime:?} {t:?} removes {e:?}, which its sweep skips");
                    }
                }
            }
        }
        assert_eq!(combined_only, 4, "VMALLE1 with a VMID under stage 2, leaf-only or not");
    }
}
