//! `bench=contpte`: the cost of a contpte convert with and without its TLBI.
//!
//! 64 folded 64 KiB groups in the vmalloc area (one physically contiguous block, mapped with
//! contiguous ranges). Per group, interleaved between the variants, on the kernel's live TTBR1
//! table:
//!
//! * `convert (unfold)`: [`PageTable::leaf`] of the group's first page, then
//!   [`Leaf::convert_group`]: clear the 16 entries, TLBI the range only without BBML2, write the
//!   16 (the leaf found by one look-up, no walk of the range);
//! * `convert (fold)`: the same folding it again;
//! * `ro+rw one page`: `set_memory_ro` on one page of the folded group (unfold, then the page's
//!   own change) and `set_memory_rw` on it (the change, then the refold), the workload the seed
//!   measures;
//! * `ro+rw one page of an unfolded group, no refold`: the same with no convert at all (what
//!   `contpte=off` does), for scale.
//!
//! Variants: `with TLBI` (`Opts::FORCE_BBM` per call: the baseline) on every CPU; `no TLBI (BBML2)` only
//! where the kernel runs with BBML2 (on a CPU without it, skipping the TLBI would be a bug).
//!
//! Timing: [`Pmu::measure`] (the virtual counter read inside, the PMU outside). Before each
//! timed step, untimed, one look-up of the group's leaf: under TCG a TLBI that falls inside
//! the span QEMU tracks for large pages (the kernel's block mappings) flushes QEMU's whole
//! software TLB for that translation regime, so without it every step would pay, in its own
//! time, the refills caused by the TLBIs of the step before it (~0.7 us, more than the
//! no-TLBI convert itself). Each step still pays for its own TLBIs.
//!
//! [`PageTable::leaf`]: pgtable::PageTable::leaf
//! [`Leaf::convert_group`]: pgtable::Leaf::convert_group
//! [`Pmu::measure`]: crate::perf::Pmu::measure

use crate::mm::frames::PAGE;
use crate::mm::{self, Tables, TABLES};
use crate::perf::Pmu;
use abi::stats::{ratio, timing_fields, Summary};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use pgtable::kmem::{self, MemChange};
use pgtable::{Opts, VirtAddr};

const GROUPS: usize = 64;
const ROUNDS: usize = 40;
const GROUP: u64 = 16 * PAGE;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Unfold,
    Fold,
    RoRw,
    RoRwNoFold,
}

/// In this order: the unfold leaves the group unfolded for the no-fold workload, the fold
/// folds it again for the folded workload, which leaves it folded.
const STEPS: [(Step, &str); 4] = [
    (Step::Unfold, "convert (unfold)"),
    (Step::RoRwNoFold, "ro+rw one page of an unfolded group, no refold"),
    (Step::Fold, "convert (fold)"),
    (Step::RoRw, "ro+rw one page of a folded group + refold"),
];

#[derive(Default)]
struct Samples {
    ns: Vec<u64>,
    insns: Vec<u64>,
    tlbis: u64,
}

pub fn run() -> Result<(), String> {
    if !mm::contpte() {
        return Err("bench=contpte needs contpte=on".into());
    }
    let bbml2 = mm::info().bbml2.enabled;
    let variants: &[(bool, &str)] =
        if bbml2 { &[(false, "with TLBI"), (true, "no TLBI (BBML2)")] } else { &[(false, "with TLBI")] };
    let va = mm::vmalloc(GROUPS * 16, true)?;
    {
        let g = TABLES.lock();
        let t = g.as_ref().unwrap().kernel.translate(VirtAddr::new(va)).ok_or("vmalloc range not mapped")?;
        if !t.contiguous {
            return Err("the vmalloc range was not mapped folded".into());
        }
    }
    let pmu = Pmu::enable();
    let mut samples: Vec<Vec<Samples>> =
        variants.iter().map(|_| STEPS.iter().map(|_| Samples::default()).collect()).collect();
    for round in 0..ROUNDS {
        for grp in 0..GROUPS as u64 {
            let gva = va + grp * GROUP;
            let page = gva + ((grp + round as u64) % 16) * PAGE;
            for (vi, &(no_tlbi, _)) in variants.iter().enumerate() {
                for (si, &(step, _)) in STEPS.iter().enumerate() {
                    let mut g = TABLES.lock();
                    let Tables { kernel, tlb, .. } = g.as_mut().unwrap();
                    // The baseline forces break-before-make per call; the table keeps its BBML2.
                    let opts = if no_tlbi { Opts::DEFAULT } else { Opts::FORCE_BBM };
                    // Untimed: one look-up of the group's leaf, so QEMU's software TLB holds the
                    // table pages and this code again after the previous step's TLBI (module
                    // documentation).
                    let _warm = kernel.leaf(VirtAddr::new(gva)).map(|l| l.desc());
                    let c0 = crate::mm::user::tlb_counters();
                    let (ns, insns, r) = pmu.measure(|| match step {
                        // The convert straight from the leaf (as Linux holds the ptep): one look-up
                        // down the table, then the 16 entries; no walk of the range.
                        Step::Unfold | Step::Fold => kernel
                            .leaf(VirtAddr::new(gva))
                            .map(|mut leaf| leaf.convert_group(tlb, step == Step::Fold, opts))
                            .ok_or_else(|| format!("group {gva:#x} is not mapped")),
                        Step::RoRw | Step::RoRwNoFold => {
                            let fold = step == Step::RoRw;
                            let v = VirtAddr::new(page);
                            kmem::set_memory_with(kernel, tlb, v, PAGE, MemChange::Ro, fold, opts)
                                .and_then(|()| kmem::set_memory_with(kernel, tlb, v, PAGE, MemChange::Rw, fold, opts))
                                .map(|()| true)
                                .map_err(|e| format!("{e}"))
                        }
                    });
                    let c1 = crate::mm::user::tlb_counters();
                    drop(g);
                    match r {
                        Ok(true) => {}
                        Ok(false) => return Err(format!("step {si} on group {grp}: nothing converted")),
                        Err(e) => return Err(format!("step {si} on group {grp}: {e}")),
                    }
                    let s = &mut samples[vi][si];
                    s.ns.push(ns);
                    s.insns.push(insns);
                    s.tlbis += c1.since(&c0).tlbi_total();
                }
            }
        }
    }
    let medians: Vec<Vec<(u64, u64)>> = samples
        .iter_mut()
        .map(|v| {
            v.iter_mut()
                .map(|s| (Summary::of(&mut s.ns.clone()).median, Summary::of(&mut s.insns.clone()).median))
                .collect()
        })
        .collect();
    for (vi, &(_, vname)) in variants.iter().enumerate() {
        for (si, &(_, sname)) in STEPS.iter().enumerate() {
            let s = &mut samples[vi][si];
            let n = s.ns.len() as u64;
            let t = Summary::of(&mut s.ns);
            let ins = Summary::of(&mut s.insns);
            let (base_ns, base_insns) = medians[0][si];
            let mut r = abi::report::Record::new("bench");
            r.str("bench", "contpte").str("case", &format!("{sname}, {vname}")).u64("n", n);
            timing_fields(&mut r, &t, &ins)
                .f64("tlbi_per_op", s.tlbis as f64 / n as f64, 2)
                .f64("vs_with_tlbi_ns", ratio(t.median, base_ns), 3)
                .f64("vs_with_tlbi_insns", if base_insns == 0 { 0.0 } else { ratio(ins.median, base_insns) }, 3);
            rt::println!("{r}");
        }
    }
    Ok(())
}
