//! Peer comparison on the host: the same workload through this library and through
//! `aarch64-paging` (a dev-dependency of this benchmark only). `cargo xtask bench pgtable` runs
//! it and prints the tables (time, and instructions counted by callgrind); by hand:
//! `cargo bench -p pgtable --bench peer` prints the raw `@@report` records.
//!
//! Workload (EL1&0 stage 1, ASID 1, live table): identity map 4 GiB in 4 KiB pages, 10,000
//! random 4 KiB permission changes (RW <-> RO, each a real change), unmap the 4 GiB.
//!
//! Fairness: both sides pay the same for what the benchmark itself counts.
//! - TLBIs: one thread-local plain add per TLBI on both sides (this library through a
//!   [`TlbMaintenance`] that only counts, the peer through its regime's `invalidate_va`).
//!   Barriers are free on both sides on the host (the peer's are `cfg(target_arch = "aarch64")`).
//! - Tables: both allocate 4 KiB frames from the global allocator with O(1) bookkeeping (the
//!   peer's allocator wrapper keeps no list); table pages and changed descriptors are found after
//!   each phase, untimed, by walking the hardware tables of both from their roots.
//! - This library keeps its own `Stats` as part of its normal work; that cost is its own.
//!
//! Modes: no argument (or `--bench`): every configuration REPEAT times, interleaved; one record
//! per configuration and phase with the median time and the spread. `--once CONFIG`: one run of
//! one configuration with each phase in its own never-inlined function (`phase_map`,
//! `phase_protect`, `phase_unmap`) so that callgrind can count each phase's instructions.

use std::cell::Cell;
use std::collections::HashMap;
use std::time::Instant;

use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress, VirtualAddress};
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{Constraints as PeerConstraints, MemoryRegion, TranslationRegime, VaRange};
use aarch64_paging::Mapping;

use pgtable::{
    Attributes, Barrier, Constraints, HeapFrames, PageTable, Perms, PhysAddr, Regime, TlbFeatures, TlbMaintenance,
    Tlbi, VaHalf, VirtAddr, PAGE_SIZE,
};

const BASE: u64 = 1 << 32;
const SIZE: u64 = 4 << 30;
const PAGES: u64 = SIZE / PAGE_SIZE;
const CHANGES: usize = 10_000;
const ASID: u16 = 1;
const REPEAT: usize = 5;

thread_local! {
    /// TLBIs issued, by either library (a plain add, the same on both sides).
    static TLBIS: Cell<u64> = const { Cell::new(0) };
}

fn count_tlbi() {
    TLBIS.with(|c| c.set(c.get() + 1));
}

fn tlbis() -> u64 {
    TLBIS.with(Cell::get)
}

/// Random page indices and the permission each change sets (deterministic xorshift).
fn changes() -> Vec<(u64, bool)> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut writable = vec![true; PAGES as usize];
    (0..CHANGES)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let page = x % PAGES;
            let w = &mut writable[page as usize];
            *w = !*w;
            (page, *w)
        })
        .collect()
}

/// One library under test, live from the end of `map`.
trait Lib {
    fn map(&mut self);
    fn protect(&mut self, work: &[(u64, bool)]);
    fn unmap(&mut self);
    /// Physical (= virtual, on the host) address of the root table.
    fn root(&self) -> u64;
}

// ----- this library -----

/// TLB maintenance that only counts TLBIs (the same plain add as the peer's).
struct CountOnly {
    range: bool,
}

impl TlbMaintenance for CountOnly {
    fn tlbi(&mut self, _op: Tlbi) {
        count_tlbi();
    }
    fn dsb(&mut self, _barrier: Barrier) {}
    fn isb(&mut self) {}
    fn features(&self) -> TlbFeatures {
        TlbFeatures { range: self.range }
    }
}

struct Ours {
    pt: PageTable<HeapFrames>,
    tlb: CountOnly,
    constraints: Constraints,
}

impl Ours {
    fn new(constraints: Constraints, bbml2: bool, range: bool) -> Self {
        let regime = Regime::El1 { asid: ASID, half: VaHalf::Lower };
        let pt = PageTable::with_config(regime, pgtable::Config { bbml2 }, HeapFrames::new()).expect("root");
        Ours { pt, tlb: CountOnly { range }, constraints }
    }
}

impl Lib for Ours {
    fn map(&mut self) {
        let attrs = Attributes::normal(Perms::RW);
        self.pt
            .map(&mut self.tlb, VirtAddr::new(BASE), SIZE, PhysAddr::new(BASE), attrs, self.constraints)
            .expect("map");
        self.pt.set_live(&mut self.tlb);
    }
    fn protect(&mut self, work: &[(u64, bool)]) {
        for &(page, writable) in work {
            let perms = if writable { Perms::RW } else { Perms::RO };
            self.pt.protect(&mut self.tlb, VirtAddr::new(BASE + page * PAGE_SIZE), PAGE_SIZE, perms).expect("protect");
        }
    }
    fn unmap(&mut self) {
        self.pt.unmap(&mut self.tlb, VirtAddr::new(BASE), SIZE).expect("unmap");
    }
    fn root(&self) -> u64 {
        self.pt.root().as_u64()
    }
}

// ----- aarch64-paging -----

/// EL1&0 regime whose TLB invalidation counts instead of executing (one call = one TLBI VAAE1IS
/// on the target).
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
struct CountingEl1;

impl TranslationRegime for CountingEl1 {
    type Attributes = El1Attributes;
    type Asid = usize;
    type VaRange = VaRange;

    fn invalidate_va(_va: VirtualAddress) {
        count_tlbi();
    }

    unsafe fn activate(_root: PhysicalAddress, _asid: usize, _range: VaRange) -> usize {
        0
    }

    unsafe fn deactivate(_previous: usize, _asid: usize, _range: VaRange) {}
}

type PeerMapping = Mapping<IdTranslation<El1Attributes>, CountingEl1>;

struct Peer {
    m: PeerMapping,
}

impl Peer {
    fn new() -> Self {
        let m = PeerMapping::with_asid_and_va_range(
            IdTranslation::<El1Attributes>::default(),
            ASID as usize,
            0,
            CountingEl1,
            VaRange::Lower,
        );
        Peer { m }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        // It refuses to be dropped while marked active.
        self.m.mark_inactive();
    }
}

impl Lib for Peer {
    fn map(&mut self) {
        let normal = El1Attributes::ATTRIBUTE_INDEX_1
            | El1Attributes::INNER_SHAREABLE
            | El1Attributes::VALID
            | El1Attributes::ACCESSED
            | El1Attributes::NON_GLOBAL
            | El1Attributes::UXN
            | El1Attributes::PXN;
        let region = MemoryRegion::new(BASE as usize, (BASE + SIZE) as usize);
        self.m
            .map_range(&region, PhysicalAddress(BASE as usize), normal, PeerConstraints::NO_BLOCK_MAPPINGS)
            .expect("peer map");
        self.m.mark_active();
    }
    fn protect(&mut self, work: &[(u64, bool)]) {
        for &(page, writable) in work {
            let va = (BASE + page * PAGE_SIZE) as usize;
            let r = MemoryRegion::new(va, va + PAGE_SIZE as usize);
            let (set, clear) = if writable {
                (El1Attributes::empty(), El1Attributes::READ_ONLY)
            } else {
                (El1Attributes::READ_ONLY, El1Attributes::empty())
            };
            self.m.modify_range(&r, &|_, d| d.modify_flags(set, clear)).expect("peer modify");
        }
    }
    fn unmap(&mut self) {
        // Flags without VALID unmap, and free every subtable the range covers whole (with the
        // TLB maintenance for it first, as the table is live).
        let region = MemoryRegion::new(BASE as usize, (BASE + SIZE) as usize);
        self.m
            .map_range(&region, PhysicalAddress(BASE as usize), El1Attributes::empty(), PeerConstraints::empty())
            .expect("peer unmap");
    }
    fn root(&self) -> u64 {
        self.m.root_address().0 as u64
    }
}

// ----- measuring -----

/// Every table reachable from `root` (level 0, 512 entries: both libraries' EL1&0 lower-half
/// root), with a copy of its entries. Untimed.
fn tables(root: u64) -> HashMap<u64, Box<[u64; 512]>> {
    fn visit(pa: u64, level: usize, out: &mut HashMap<u64, Box<[u64; 512]>>) {
        let mut copy = Box::new([0u64; 512]);
        // SAFETY: `pa` is a live 4 KiB table of the library under test (host memory, identity:
        // the address is the pointer), and nothing writes it while we copy.
        unsafe { std::ptr::copy_nonoverlapping(pa as *const u64, copy.as_mut_ptr(), 512) };
        for &d in copy.iter() {
            // A table descriptor: valid, type 1, below level 3.
            if level < 3 && d & 0b11 == 0b11 {
                visit(d & 0x0000_ffff_ffff_f000, level + 1, out);
            }
        }
        out.insert(pa, copy);
    }
    let mut out = HashMap::new();
    visit(root, 0, &mut out);
    out
}

/// Descriptors that differ between two snapshots (a freed table counts its non-zero entries): a
/// lower bound on the writes, as rewriting a descriptor with its own value is invisible.
fn changed(before: &HashMap<u64, Box<[u64; 512]>>, after: &HashMap<u64, Box<[u64; 512]>>) -> u64 {
    let zero = [0u64; 512];
    let in_after: u64 = after
        .iter()
        .map(|(pa, t)| {
            let old: &[u64; 512] = before.get(pa).map(|b| &**b).unwrap_or(&zero);
            t.iter().zip(old.iter()).filter(|(a, b)| a != b).count() as u64
        })
        .sum();
    let freed: u64 = before
        .iter()
        .filter(|(pa, _)| !after.contains_key(pa))
        .map(|(_, t)| t.iter().filter(|&&d| d != 0).count() as u64)
        .sum();
    in_after + freed
}

/// What one phase did (identical in every run) and how long it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counts {
    tlbis: u64,
    writes: u64,
    table_pages: u64,
}

#[inline(never)]
fn phase_map(l: &mut dyn Lib) {
    l.map();
}

#[inline(never)]
fn phase_protect(l: &mut dyn Lib, work: &[(u64, bool)]) {
    l.protect(work);
}

#[inline(never)]
fn phase_unmap(l: &mut dyn Lib) {
    l.unmap();
}

const PHASES: [(&str, u64); 3] = [("map", PAGES), ("protect", CHANGES as u64), ("unmap", PAGES)];

/// Runs the three phases; returns each phase's counts and nanoseconds.
fn run(l: &mut dyn Lib, work: &[(u64, bool)]) -> [(Counts, u64); 3] {
    let mut out = [(Counts { tlbis: 0, writes: 0, table_pages: 0 }, 0); 3];
    let mut before = tables(l.root());
    for (p, slot) in out.iter_mut().enumerate() {
        let n0 = tlbis();
        let t0 = Instant::now();
        match p {
            0 => phase_map(l),
            1 => phase_protect(l, work),
            _ => phase_unmap(l),
        }
        let ns = t0.elapsed().as_nanos() as u64;
        let n = tlbis() - n0;
        let after = tables(l.root());
        *slot = (Counts { tlbis: n, writes: changed(&before, &after), table_pages: after.len() as u64 }, ns);
        before = after;
    }
    out
}

type Make = fn() -> Box<dyn Lib>;

/// (id, description, constructor); the first is this library page-mapped like the peer, the
/// last the peer.
const CONFIGS: [(&str, &str, Make); 5] = [
    ("pgtable-pages", "pgtable, pages", || Box::new(Ours::new(Constraints::PAGES_ONLY, false, false))),
    ("pgtable-pages-range", "pgtable, pages + TLBI range", || {
        Box::new(Ours::new(Constraints::PAGES_ONLY, false, true))
    }),
    ("pgtable-bbml2", "pgtable, blocks+cont, BBML2", || Box::new(Ours::new(Constraints::NONE, true, false))),
    ("pgtable-bbm", "pgtable, blocks+cont, BBM", || Box::new(Ours::new(Constraints::NONE, false, false))),
    ("aarch64-paging", "aarch64-paging 0.12, pages", || Box::new(Peer::new())),
];

fn record(id: &str, about: &str, phase: usize, c: Counts) -> abi::report::Record {
    let mut r = abi::report::Record::new("peer");
    r.str("config", id)
        .str("library", about)
        .str("phase", PHASES[phase].0)
        .u64("entries", PHASES[phase].1)
        .u64("tlbis", c.tlbis)
        .u64("desc_writes", c.writes)
        .u64("table_pages", c.table_pages);
    r
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let work = changes();
    if let Some(i) = args.iter().position(|a| a == "--once") {
        let Some((id, about, make)) = args.get(i + 1).and_then(|id| CONFIGS.iter().find(|c| c.0 == id)) else {
            let ids: Vec<&str> = CONFIGS.iter().map(|c| c.0).collect();
            eprintln!("peer: --once needs one of {ids:?}");
            std::process::exit(2);
        };
        let mut l = make();
        for (p, (c, _)) in run(&mut *l, &work).into_iter().enumerate() {
            println!("{}", record(id, about, p, c));
        }
        return;
    }
    // `cargo bench` passes `--bench`; anything else is ignored. Interleaved: each round runs
    // every configuration once; the first round also warms the heap.
    let mut samples: Vec<Vec<[(Counts, u64); 3]>> = vec![Vec::new(); CONFIGS.len()];
    for _ in 0..REPEAT {
        for (i, (_, _, make)) in CONFIGS.iter().enumerate() {
            let mut l = make();
            samples[i].push(run(&mut *l, &work));
        }
    }
    for ((id, about, _), runs) in CONFIGS.iter().zip(samples) {
        for p in 0..PHASES.len() {
            let counts = runs[0][p].0;
            // Deterministic workload: counts must agree across runs, or the figures mean nothing.
            if let Some(other) = runs.iter().find(|r| r[p].0 != counts) {
                eprintln!("peer: {id} {}: counts differ between runs: {counts:?} vs {:?}", PHASES[p].0, other[p].0);
                std::process::exit(1);
            }
            let mut ns: Vec<u64> = runs.iter().map(|r| r[p].1).collect();
            ns.sort_unstable();
            let mut r = record(id, about, p, counts);
            r.u64("n", ns.len() as u64)
                .u64("median_ns", ns[ns.len() / 2])
                .u64("min_ns", ns[0])
                .u64("max_ns", ns[ns.len() - 1]);
            println!("{r}");
        }
    }
}
