//! `bench=linear-map`: what the BBML2-aware linear map saves and costs.
//!
//! 1. **Table pages.** The linear map of this machine's RAM built two ways in scratch tables
//!    (never installed): PTE-only (what `rodata=full` needs without BBML2) and with 1 GiB /
//!    2 MiB blocks and contiguous ranges (BBML2), each against its limit (one table per level
//!    used, `pgtable::kmem::min_table_pages`).
//! 2. **A set_memory storm**: `set_memory_ro` then `set_memory_rw` on random single pages and
//!    random ranges (up to 2 MiB) of a 32 MiB region, interleaved across: the three scratch
//!    layouts made live (PTE-only; blocks+contiguous with BBML2: live splits without TLBI, as
//!    the kernel runs it; the same refolding contiguous ranges after each change; blocks
//!    without contiguous ranges; blocks without BBML2: splits with break-before-make) and the
//!    kernel's own linear map. Per call: time,
//!    instructions (under `--icount`), TLBIs, splits and table pages added. The scratch tables
//!    are not installed in a TTBR, so the BBML2 layout can be timed on any CPU; `kernel_uses`
//!    says which layout this CPU's kernel really runs.

use crate::mm::frames::{self, KFrames, PAGE};
use crate::mm::{self, setmem, SCRATCH_BASE};
use crate::perf::{now_ns, Pmu};
use abi::stats::{ratio, timing_fields, Summary};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use pgtable::hw::HwTlb;
use pgtable::kmem::{self, MemChange, Rodata};
use pgtable::{Attributes, Constraints, PageTable, Perms, PhysAddr, Regime, VaHalf, VirtAddr};

/// Random ro/rw pairs per variant.
const OPS: usize = 300;
/// The storm's region: 32 MiB, naturally aligned.
const REGION_PAGES: usize = 8192;

struct Variant {
    name: &'static str,
    bbml2: bool,
    /// Refold the ends of each changed range.
    fold: bool,
    constraints: Constraints,
    /// `None`: the kernel's own linear map.
    table: Option<PageTable<KFrames>>,
    kernel_uses: bool,
    ns: Vec<u64>,
    insns: Vec<u64>,
    tlbis: u64,
    splits: u64,
    pages_added: u64,
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

pub fn run() -> Result<(), String> {
    let info = mm::info();
    let bbml2_here = info.bbml2.enabled;
    let cont = mm::contpte();
    let ram: Vec<(u64, u64)> = info.ram.iter().map(|&(s, e)| ((s + PAGE - 1) & !(PAGE - 1), e & !(PAGE - 1))).collect();
    let mem_mib = ram.iter().map(|(s, e)| e - s).sum::<u64>() >> 20;
    let mut tlb = HwTlb::detect();
    let e = |x: pgtable::Error| format!("scratch table: {x}");

    // (name, BBML2 policy, constraints, contiguous subtrees on split, refold after each change,
    // kernel uses it, report its table pages). The kernel never refolds its linear map (as
    // Linux): the refolding variant shows what that would cost.
    let blocks = kmem::linear_map_constraints(true, Rodata::Full, cont);
    let blocks_nocont = kmem::linear_map_constraints(true, Rodata::Full, false);
    let layouts = [
        ("PTE-only (rodata=full, no BBML2)", false, Constraints::PAGES_ONLY, false, false, !bbml2_here, true),
        ("blocks+contiguous, BBML2 live splits", true, blocks, cont, false, bbml2_here, true),
        // The same layouts again (table pages not repeated): only the storm differs.
        ("blocks+contiguous, BBML2, refold after each change", true, blocks, cont, cont, false, false),
        ("blocks, BBML2 live splits, no contiguous ranges", true, blocks_nocont, false, false, false, false),
        ("blocks+contiguous, BBM splits (no BBML2)", false, blocks, cont, false, false, false),
    ];
    let mut variants: Vec<Variant> = Vec::new();
    for (name, bbml2, c, contpte, refold, uses, report) in layouts {
        let config = pgtable::Config { bbml2 };
        let mut pt =
            PageTable::with_config(Regime::El1 { asid: 0, half: VaHalf::Upper }, config, KFrames).map_err(e)?;
        pt.policy_mut().split_contiguous = contpte;
        let t0 = now_ns();
        for &(s, end) in &ram {
            pt.map(
                &mut tlb,
                VirtAddr::new(SCRATCH_BASE + s),
                end - s,
                PhysAddr::new(s),
                Attributes::normal(Perms::RW),
                c,
            )
            .map_err(e)?;
        }
        let build_ns = now_ns() - t0;
        let pages = pt.stats().table_pages;
        let limit = kmem::min_table_pages(&ram, !c.no_blocks);
        if report {
            let mut r = abi::report::Record::new("bench");
            r.str("bench", "linear-map")
                .str("case", &format!("table pages: {name}"))
                .u64("mem_mib", mem_mib)
                .u64("table_pages", pages)
                .u64("table_kib", pages * 4)
                .u64("limit", limit)
                .f64("vs_limit", ratio(pages, limit), 3)
                .f64("pct_of_ram", (pages * PAGE) as f64 * 100.0 / (mem_mib << 20) as f64, 4)
                .u64("build_ns", build_ns)
                .bool("kernel_uses", uses);
            rt::println!("{r}");
        }
        pt.reset_stats();
        pt.set_live(&mut tlb);
        variants.push(Variant {
            name,
            bbml2,
            fold: refold,
            constraints: c,
            table: Some(pt),
            kernel_uses: uses,
            ns: Vec::new(),
            insns: Vec::new(),
            tlbis: 0,
            splits: 0,
            pages_added: 0,
        });
    }
    variants.push(Variant {
        name: if bbml2_here { "kernel linear map (BBML2)" } else { "kernel linear map (PTE-only)" },
        bbml2: bbml2_here,
        fold: false,
        constraints: info.linear,
        table: None,
        kernel_uses: true,
        ns: Vec::new(),
        insns: Vec::new(),
        tlbis: 0,
        splits: 0,
        pages_added: 0,
    });

    // The storm.
    let region = frames::alloc(REGION_PAGES).ok_or("no 32 MiB block of frames for the storm")?;
    let pmu = Pmu::enable();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..OPS {
        let single = xorshift(&mut rng) % 10 < 7;
        let len = if single { 1 } else { 2 + xorshift(&mut rng) % 511 };
        let at = xorshift(&mut rng) % (REGION_PAGES as u64 - len);
        let pa = region + at * PAGE;
        for v in variants.iter_mut() {
            for c in [MemChange::Ro, MemChange::Rw] {
                let fold = v.fold;
                let (stats0, tlb0) = (stats_of(v), crate::mm::user::tlb_counters());
                let (ns, insns, r) = pmu.measure(|| match v.table.as_mut() {
                    Some(pt) => kmem::set_memory(pt, &mut tlb, VirtAddr::new(SCRATCH_BASE + pa), len * PAGE, c, fold)
                        .map_err(|x| format!("{}: {x}", v.name)),
                    None => setmem::change(mm::LINEAR_BASE + pa, len as usize, c).map_err(String::from),
                });
                r?;
                let (stats1, tlb1) = (stats_of(v), crate::mm::user::tlb_counters());
                v.ns.push(ns);
                v.insns.push(insns);
                v.tlbis += tlb1.since(&tlb0).tlbi_total();
                v.splits += stats1.0 - stats0.0;
                v.pages_added += stats1.1.saturating_sub(stats0.1);
            }
        }
    }
    frames::free(region, REGION_PAGES);
    let pte_median = Summary::of(&mut variants[0].ns.clone()).median;
    for v in variants.iter_mut() {
        let calls = v.ns.len() as u64;
        let t = Summary::of(&mut v.ns);
        let n = Summary::of(&mut v.insns);
        let mut r = abi::report::Record::new("bench");
        r.str("bench", "linear-map").str("case", &format!("storm: {}", v.name)).u64("mem_mib", mem_mib).u64("n", calls);
        timing_fields(&mut r, &t, &n)
            .f64("tlbi_per_call", v.tlbis as f64 / calls as f64, 3)
            .f64("splits_per_call", v.splits as f64 / calls as f64, 3)
            .u64("splits", v.splits)
            .u64("table_pages_added", v.pages_added)
            .bool("blocks", !v.constraints.no_blocks)
            .bool("bbml2", v.bbml2)
            .f64("vs_pte_only", ratio(t.median, pte_median), 3)
            .bool("kernel_uses", v.kernel_uses);
        rt::println!("{r}");
    }
    for v in variants.iter_mut() {
        if let Some(mut pt) = v.table.take() {
            // SAFETY: the scratch tables were never installed in a TTBR: no CPU walks them and
            // no TLB holds their entries (every change was also invalidated as if live).
            unsafe { pt.set_not_live() };
            pt.destroy().map_err(|_| "a scratch table could not be freed")?;
        }
    }
    Ok(())
}

/// (splits, table pages) of a variant's table.
fn stats_of(v: &Variant) -> (u64, u64) {
    match &v.table {
        Some(pt) => (pt.stats().splits, pt.stats().table_pages),
        None => mm::TABLES.lock().as_ref().map(|t| (t.kernel.stats().splits, t.kernel.stats().table_pages)).unwrap(),
    }
}
