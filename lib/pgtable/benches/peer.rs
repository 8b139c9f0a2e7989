//! Peer comparison on the host: the same workload through this library and through
//! `aarch64-paging` (a dev-dependency of this benchmark only).
//!
//! Workload (EL1&0 stage 1, ASID 1, live table): identity map 4 GiB, 10,000 random 4 KiB
//! permission changes (RW <-> RO, each a real change), unmap the 4 GiB. Reported per phase:
//! TLBIs issued, descriptor writes, table pages, wall time.
//!
//! Counting: this library through `CountingTlb` and its own `Stats`; `aarch64-paging` through a
//! translation regime whose `invalidate_va` counts (it issues one TLBI per call on the target),
//! an allocator wrapper counting table pages, and a snapshot diff of every table for descriptor
//! writes (a lower bound: rewriting a descriptor with its own value is invisible, hence `>=`).
//!
//! Run with `cargo bench -p pgtable --bench peer` (`cargo xtask bench pgtable`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress, VirtualAddress};
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{
    Constraints as PeerConstraints, MemoryRegion, PageTable as PeerTable, Translation, TranslationRegime, VaRange,
};
use aarch64_paging::Mapping;

use pgtable::{
    Attributes, Constraints, CountingTlb, HeapFrames, PageTable, Perms, PhysAddr, Regime, TlbCounters, TlbFeatures,
    VaHalf, VirtAddr, PAGE_SIZE,
};

const BASE: u64 = 1 << 32;
const SIZE: u64 = 4 << 30;
const PAGES: u64 = SIZE / PAGE_SIZE;
const CHANGES: usize = 10_000;
const ASID: u16 = 1;

/// One measured phase.
#[derive(Clone, Copy, Default)]
struct Phase {
    tlbis: u64,
    writes: u64,
    writes_lower_bound: bool,
    table_pages: u64,
    time: Duration,
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

// ----- this library -----

fn ours(constraints: Constraints, bbml2: bool, range: bool, work: &[(u64, bool)]) -> [Phase; 3] {
    let regime = Regime::El1 { asid: ASID, half: VaHalf::Lower };
    let mut pt = PageTable::with_config(regime, pgtable::Config { bbml2 }, HeapFrames::new()).expect("root");
    let mut tlb = CountingTlb { features: TlbFeatures { range }, ..Default::default() };
    let attrs = Attributes::normal(Perms::RW);
    let mut phases = [Phase::default(); 3];
    let measure = |pt: &PageTable<HeapFrames>, tlb: &CountingTlb, c0: TlbCounters, w0: u64, t0: Instant| Phase {
        tlbis: tlb.counters.since(&c0).tlbi_total(),
        writes: pt.stats().desc_writes - w0,
        writes_lower_bound: false,
        table_pages: pt.stats().table_pages,
        time: t0.elapsed(),
    };

    let (c0, w0, t0) = (tlb.counters, pt.stats().desc_writes, Instant::now());
    pt.map(&mut tlb, VirtAddr::new(BASE), SIZE, PhysAddr::new(BASE), attrs, constraints).expect("map");
    pt.set_live(&mut tlb);
    phases[0] = measure(&pt, &tlb, c0, w0, t0);

    let (c0, w0, t0) = (tlb.counters, pt.stats().desc_writes, Instant::now());
    for &(page, writable) in work {
        let perms = if writable { Perms::RW } else { Perms::RO };
        pt.protect(&mut tlb, VirtAddr::new(BASE + page * PAGE_SIZE), PAGE_SIZE, perms).expect("protect");
    }
    phases[1] = measure(&pt, &tlb, c0, w0, t0);

    let (c0, w0, t0) = (tlb.counters, pt.stats().desc_writes, Instant::now());
    pt.unmap(&mut tlb, VirtAddr::new(BASE), SIZE).expect("unmap");
    phases[2] = measure(&pt, &tlb, c0, w0, t0);
    phases
}

// ----- aarch64-paging -----

static PEER_TLBIS: AtomicU64 = AtomicU64::new(0);

/// EL1&0 regime whose TLB invalidation counts instead of executing (one call = one TLBI VAAE1IS
/// on the target).
#[derive(Copy, Clone, Debug, Eq, PartialEq)]
struct CountingEl1;

impl TranslationRegime for CountingEl1 {
    type Attributes = El1Attributes;
    type Asid = usize;
    type VaRange = VaRange;

    fn invalidate_va(_va: VirtualAddress) {
        PEER_TLBIS.fetch_add(1, Ordering::Relaxed);
    }

    unsafe fn activate(_root: PhysicalAddress, _asid: usize, _range: VaRange) -> usize {
        0
    }

    unsafe fn deactivate(_previous: usize, _asid: usize, _range: VaRange) {}
}

/// Identity translation that keeps track of its tables.
#[derive(Default)]
struct CountingTranslation {
    inner: IdTranslation<El1Attributes>,
    tables: Vec<usize>,
}

impl Translation<El1Attributes> for CountingTranslation {
    fn allocate_table(&mut self) -> (NonNull<PeerTable<El1Attributes>>, PhysicalAddress) {
        let (t, pa) = self.inner.allocate_table();
        self.tables.push(pa.0);
        (t, pa)
    }

    unsafe fn deallocate_table(&mut self, table: NonNull<PeerTable<El1Attributes>>) {
        let pa = table.as_ptr() as usize;
        self.tables.retain(|&t| t != pa);
        // SAFETY: forwarded from our caller, who passes a table `allocate_table` returned.
        unsafe { self.inner.deallocate_table(table) }
    }

    fn physical_to_virtual(&self, pa: PhysicalAddress) -> NonNull<PeerTable<El1Attributes>> {
        self.inner.physical_to_virtual(pa)
    }
}

type PeerMapping = Mapping<CountingTranslation, CountingEl1>;

/// Copies of every table, for counting changed descriptors.
fn snapshot(m: &PeerMapping) -> HashMap<usize, Box<[u64; 512]>> {
    let mut all: Vec<usize> = m.translation().tables.clone();
    all.push(m.root_address().0);
    all.into_iter()
        .map(|pa| {
            let mut copy = Box::new([0u64; 512]);
            // SAFETY: `pa` is a live 4 KiB table of this mapping (identity mapped heap memory)
            // and nothing writes it while we copy.
            unsafe { std::ptr::copy_nonoverlapping(pa as *const u64, copy.as_mut_ptr(), 512) };
            (pa, copy)
        })
        .collect()
}

fn changed(before: &HashMap<usize, Box<[u64; 512]>>, after: &HashMap<usize, Box<[u64; 512]>>) -> u64 {
    let zero = [0u64; 512];
    after
        .iter()
        .map(|(pa, t)| {
            let old: &[u64; 512] = before.get(pa).map(|b| &**b).unwrap_or(&zero);
            t.iter().zip(old.iter()).filter(|(a, b)| a != b).count() as u64
        })
        .sum::<u64>()
        + before
            .iter()
            .filter(|(pa, _)| !after.contains_key(pa))
            .map(|(_, t)| t.iter().filter(|&&d| d != 0).count() as u64)
            .sum::<u64>()
}

fn peer(work: &[(u64, bool)]) -> [Phase; 3] {
    let mut m = PeerMapping::with_asid_and_va_range(
        CountingTranslation::default(),
        ASID as usize,
        0,
        CountingEl1,
        VaRange::Lower,
    );
    let normal = El1Attributes::ATTRIBUTE_INDEX_1
        | El1Attributes::INNER_SHAREABLE
        | El1Attributes::VALID
        | El1Attributes::ACCESSED
        | El1Attributes::NON_GLOBAL
        | El1Attributes::UXN
        | El1Attributes::PXN;
    let region = MemoryRegion::new(BASE as usize, (BASE + SIZE) as usize);
    let pages = |m: &PeerMapping| m.translation().tables.len() as u64 + 1;
    let mut phases = [Phase::default(); 3];

    let s0 = snapshot(&m);
    let (n0, t0) = (PEER_TLBIS.load(Ordering::Relaxed), Instant::now());
    m.map_range(&region, PhysicalAddress(BASE as usize), normal, PeerConstraints::NO_BLOCK_MAPPINGS).expect("peer map");
    m.mark_active();
    let time = t0.elapsed();
    let s1 = snapshot(&m);
    phases[0] = Phase {
        tlbis: PEER_TLBIS.load(Ordering::Relaxed) - n0,
        writes: changed(&s0, &s1),
        writes_lower_bound: true,
        table_pages: pages(&m),
        time,
    };

    let (n0, t0) = (PEER_TLBIS.load(Ordering::Relaxed), Instant::now());
    for &(page, writable) in work {
        let va = (BASE + page * PAGE_SIZE) as usize;
        let r = MemoryRegion::new(va, va + PAGE_SIZE as usize);
        let (set, clear) = if writable {
            (El1Attributes::empty(), El1Attributes::READ_ONLY)
        } else {
            (El1Attributes::READ_ONLY, El1Attributes::empty())
        };
        m.modify_range(&r, &|_, d| d.modify_flags(set, clear)).expect("peer modify");
    }
    let time = t0.elapsed();
    let s2 = snapshot(&m);
    phases[1] = Phase {
        tlbis: PEER_TLBIS.load(Ordering::Relaxed) - n0,
        writes: changed(&s1, &s2),
        writes_lower_bound: true,
        table_pages: pages(&m),
        time,
    };

    let (n0, t0) = (PEER_TLBIS.load(Ordering::Relaxed), Instant::now());
    m.map_range(&region, PhysicalAddress(BASE as usize), El1Attributes::empty(), PeerConstraints::empty())
        .expect("peer unmap");
    let time = t0.elapsed();
    let s3 = snapshot(&m);
    phases[2] = Phase {
        tlbis: PEER_TLBIS.load(Ordering::Relaxed) - n0,
        writes: changed(&s2, &s3),
        writes_lower_bound: true,
        table_pages: pages(&m),
        time,
    };
    m.mark_inactive();
    phases
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is accepted and ignored.
    let work = changes();
    // Each configuration runs REPEAT times, interleaved; the median time of each phase is
    // reported (counts are identical from run to run). The first round also warms the heap.
    type Run = Box<dyn Fn(&[(u64, bool)]) -> [Phase; 3]>;
    let configs: Vec<(&str, Run)> = vec![
        ("pgtable, pages", Box::new(|w| ours(Constraints::PAGES_ONLY, false, false, w))),
        ("pgtable, pages + TLBI range", Box::new(|w| ours(Constraints::PAGES_ONLY, false, true, w))),
        ("pgtable, blocks+cont, BBML2", Box::new(|w| ours(Constraints::NONE, true, false, w))),
        ("pgtable, blocks+cont, BBM", Box::new(|w| ours(Constraints::NONE, false, false, w))),
        ("aarch64-paging 0.12, pages", Box::new(peer)),
    ];
    const REPEAT: usize = 5;
    let mut samples: Vec<Vec<[Phase; 3]>> = vec![Vec::new(); configs.len()];
    for _ in 0..REPEAT {
        for (i, (_, run)) in configs.iter().enumerate() {
            samples[i].push(run(&work));
        }
    }
    let runs: Vec<(&str, [Phase; 3])> = configs
        .iter()
        .zip(samples)
        .map(|((name, _), s)| {
            let mut med = s[0];
            for (p, m) in med.iter_mut().enumerate() {
                let mut times: Vec<Duration> = s.iter().map(|r| r[p].time).collect();
                times.sort();
                m.time = times[times.len() / 2];
            }
            (*name, med)
        })
        .collect();
    let names = ["map 4 GiB identity", "10,000 x 4 KiB protect", "unmap 4 GiB"];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<30} {:>9} {:>12} {:>11} {:>10}",
        "phase", "library", "TLBIs", "desc writes", "table pages", "time ms"
    );
    for (p, name) in names.iter().enumerate() {
        for (lib, phases) in &runs {
            let ph = phases[p];
            let writes = if ph.writes_lower_bound { format!(">={}", ph.writes) } else { ph.writes.to_string() };
            let _ = writeln!(
                out,
                "{:<24} {:<30} {:>9} {:>12} {:>11} {:>10.2}",
                name,
                lib,
                ph.tlbis,
                writes,
                ph.table_pages,
                ph.time.as_secs_f64() * 1e3
            );
        }
    }
    let ours_pages = runs[0].1;
    let peer = runs[runs.len() - 1].1;
    let _ = writeln!(out, "\nratio aarch64-paging / pgtable (both page-mapped, same workload):");
    let ratio = |a: f64, b: f64| if b == 0.0 { f64::INFINITY } else { a / b };
    for (p, name) in names.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:<24} TLBIs {:>8.1}x   time {:>6.2}x   table pages {:>5.2}x",
            name,
            ratio(peer[p].tlbis as f64, ours_pages[p].tlbis as f64),
            ratio(peer[p].time.as_secs_f64(), ours_pages[p].time.as_secs_f64()),
            ratio(peer[p].table_pages as f64, ours_pages[p].table_pages as f64),
        );
    }
    let total = |ph: &[Phase; 3]| ph.iter().map(|p| p.time).sum::<Duration>().as_secs_f64();
    let tlbis = |ph: &[Phase; 3]| ph.iter().map(|p| p.tlbis).sum::<u64>() as f64;
    let _ = writeln!(
        out,
        "  {:<24} TLBIs {:>8.1}x   time {:>6.2}x",
        "whole workload",
        ratio(tlbis(&peer), tlbis(&ours_pages)),
        ratio(total(&peer), total(&ours_pages))
    );
    let _ = writeln!(
        out,
        "\nnotes: median of 5 interleaved runs; host timings (no TLBI executes on the host; counts are what the target would issue).\n\
         aarch64-paging cannot split a live block, so its row maps 4 KiB pages; its descriptor\n\
         writes are changed descriptors (snapshot diff), a lower bound. It keeps empty tables\n\
         after unmap (compact_subtables is separate); pgtable frees them."
    );
    print!("{out}");
}
