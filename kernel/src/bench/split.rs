//! `bench=split`: the stage-2 eager split for dirty logging, baseline walker (visits level 3)
//! against SKIP_LEVEL3 and against SKIP_LEVEL3 with the per-region "may hold blocks" summary
//! (`WalkerMode::Summary`), interleaved in one boot, on a 64 GiB memslot (backed by the
//! hypervisor's slot pool mapped repeatedly: boot with `hyp.slotpool=1G` and `-m 4G`).
//!
//! * scenario 1: DIRTY_LOG_ENABLE with eager split (write-protect + split the whole slot);
//!   timed: the enable call.
//! * scenario 2: manual-protect with initially-set; timed: clearing the whole bitmap (each 64-page
//!   word protects and splits its pages), 1 GiB of mask per call.
//!
//! For each backing (already split 4 KiB write-protected by a warm-up, `4K-rw` freshly mapped
//! 4 KiB with every page writable, 2 MiB blocks, 1 GiB blocks) and walker, one row: time
//! of the timed calls (guest clock, median and spread), the hypervisor's own split-walk time,
//! walker visits by level (split walks, and level 3 of the write-protect walks), TLBIs, DSBs,
//! page-table pages, blocks split, instructions (meaningful with `--icount`), and the ratios
//! against the baseline; beside them the unit costs a ratio is read against: the split walk's
//! time and instructions per visit (`split_ns_per_visit`, `split_insns_per_visit`) and the whole
//! operation's per 4 KiB page of the slot, i.e. per final PTE (`ns_per_pte`, `insns_per_pte`,
//! and `insns_per_gib` to set beside KVM's figures). Blocks are restored between iterations by deleting and re-creating the
//! slot (untimed); the `4K` slot is kept (after one untimed warm-up run, its pages stay
//! write-protected, as after a first enable in KVM: a re-enable then skips its read-only
//! tables); the `4K-rw` slot is re-created before every run (untimed), so each enable
//! write-protects every PTE, as KVM's first enable after the guest wrote its memory.
//!
//! Options: `split.iters=N` (default 3; `cargo xtask bench split --icount` passes 1: counts are
//! deterministic), `split.gib=N` (slot size, default 64), `split.chunk=MIB` (eager-split chunk,
//! default the hypervisor's 1 GiB). Progress goes to the console: a line per timed run.

use crate::arch::power::Host;
use crate::perf::Pmu;
use crate::{arch::machine::KERNEL, hyp};
use abi::hypercall::{self as hc, Counter, WalkerMode};
use abi::stats::{ratio, Summary};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

const GIB: u64 = 1 << 30;
use crate::mm::frames::PAGE;
const WALKERS: [WalkerMode; 3] = [WalkerMode::Baseline, WalkerMode::SkipLevel3, WalkerMode::Summary];

fn e(what: &str) -> impl Fn(abi::error::HypError) -> String + '_ {
    move |err| format!("bench=split: {what}: {err}")
}

/// The samples of one (scenario, backing, walker).
#[derive(Default)]
struct Samples {
    ns: Vec<u64>,
    split_ns: Vec<u64>,
    insns: Vec<u64>,
    split_insns: Vec<u64>,
    /// Counters of the last iteration (deterministic: the same in every iteration).
    counters: Vec<(Counter, u64)>,
}

const REPORTED: [Counter; 13] = [
    Counter::SplitVisitsL0,
    Counter::SplitVisitsL1,
    Counter::SplitVisitsL2,
    Counter::SplitVisitsL3,
    Counter::ProtectVisitsL3,
    Counter::Tlbi,
    Counter::Dsb,
    Counter::TablePages,
    Counter::TablesAllocated,
    Counter::BlocksSplit,
    Counter::DescWrites,
    Counter::CacheTopups,
    Counter::SummarySkips,
];

struct Slot {
    id: Option<u64>,
    base: u64,
    size: u64,
    backing: u64,
    /// Re-created before every timed run even with 4 KiB backing: every page starts writable
    /// (the state KVM's enable meets after the guest wrote its memory).
    fresh: bool,
}

impl Slot {
    fn recreate(&mut self) -> Result<u64, String> {
        if let Some(id) = self.id.take() {
            hyp::memslot_delete(id).map_err(e("delete"))?;
        }
        let id = hyp::memslot_create(self.base, self.size, self.backing).map_err(e("create"))?;
        self.id = Some(id);
        Ok(id)
    }
}

/// One timed run; returns (guest ns, instructions).
fn once(pmu: &Pmu, slot: &mut Slot, scenario: u8, mask: &[u64]) -> Result<(u64, u64), String> {
    // Restore the starting state (untimed): blocks by re-creating, pages by re-creating once.
    let id = match (slot.id, slot.backing) {
        (Some(id), hc::MEMSLOT_BACKING_4K) if !slot.fresh => id,
        _ => slot.recreate()?,
    };
    let pages = slot.size / PAGE;
    let per_call = mask.len() as u64 * 64;
    if scenario == 2 {
        hyp::dirty_log_enable(id, hc::DIRTY_LOG_MANUAL_PROTECT | hc::DIRTY_LOG_EAGER_SPLIT).map_err(e("enable"))?;
    }
    hyp::counters_reset().map_err(e("reset"))?;
    let (ns, insns, r) = pmu.measure(|| {
        if scenario == 1 {
            hyp::dirty_log_enable(id, hc::DIRTY_LOG_EAGER_SPLIT).map_err(e("enable"))
        } else {
            let mut first = 0;
            while first < pages {
                let count = per_call.min(pages - first);
                hyp::dirty_log_clear(id, mask, first, count).map_err(e("clear"))?;
                first += count;
            }
            Ok(())
        }
    });
    r?;
    hyp::dirty_log_disable(id).map_err(e("disable"))?;
    Ok((ns, insns))
}

pub fn run(o: &kcore::options::BenchOptions) -> Result<(), String> {
    if KERNEL.get().unwrap().host != Host::Hypervisor {
        return Err("bench=split needs the hypervisor".into());
    }
    let iters = o.split_iters.unwrap_or(3).max(1) as usize;
    let size = o.split_gib.unwrap_or(64).max(1) * GIB;
    if let Some(mib) = o.split_chunk_mib {
        hyp::walker_mode(WalkerMode::SkipLevel3, mib << 20).map_err(e("chunk"))?;
    }
    let (_, chunk) = hyp::walker_mode(WalkerMode::SkipLevel3, 0).map_err(e("walker"))?;
    let base = crate::selftest::memslot::slot_window();
    rt::println!(
        "kernel: split: {} GiB memslot at {base:#x}, {iters} iterations per walker, chunk {} MiB",
        size / GIB,
        chunk >> 20
    );
    let pmu = Pmu::enable();
    // 1 GiB of mask per CLEAR call: 32 KiB.
    let mask = vec![u64::MAX; (GIB / PAGE / 64) as usize];
    for scenario in [1u8, 2] {
        // "4K": already split and write-protected by an untimed warm-up (a re-enable: its tables
        // say "no writable leaf below", the write-protect skips them); "4K-rw": re-created
        // before every run, every page writable (a first enable: every PTE is write-protected).
        for (backing, bname, fresh) in [
            (hc::MEMSLOT_BACKING_4K, "4K", false),
            (hc::MEMSLOT_BACKING_4K, "4K-rw", true),
            (hc::MEMSLOT_BACKING_2M, "2M", false),
            (hc::MEMSLOT_BACKING_1G, "1G", false),
        ] {
            let mut slot = Slot { id: None, base, size, backing, fresh };
            let mut samples: [Samples; 3] = Default::default();
            rt::println!(
                "kernel: split: scenario {scenario} ({}), {bname} backing: {} walkers x {iters}",
                if scenario == 1 { "enable" } else { "manual clear" },
                WALKERS.len()
            );
            if backing == hc::MEMSLOT_BACKING_4K && !fresh {
                // Warm-up (untimed): the first enable of an already-split slot write-protects
                // every page; later ones find them protected, as a re-enable in KVM does.
                once(&pmu, &mut slot, scenario, &mask)?;
            }
            for it in 0..iters {
                // Interleave, alternating which walker goes first.
                for k in 0..WALKERS.len() {
                    let w = (k + it) % WALKERS.len();
                    hyp::walker_mode(WALKERS[w], 0).map_err(e("walker"))?;
                    let (ns, insns) = once(&pmu, &mut slot, scenario, &mask)?;
                    rt::println!(
                        "kernel: split:   s{scenario} {bname} {} {}/{iters}: {} us, {} instructions",
                        WALKERS[w].name(),
                        it + 1,
                        ns / 1000,
                        insns
                    );
                    let s = &mut samples[w];
                    s.ns.push(ns);
                    s.insns.push(insns);
                    s.split_ns.push(hyp::counter(Counter::SplitNs).map_err(e("counter"))?);
                    s.split_insns.push(hyp::counter(Counter::SplitInsns).map_err(e("counter"))?);
                    s.counters.clear();
                    for c in REPORTED {
                        s.counters.push((c, hyp::counter(c).map_err(e("counter"))?));
                    }
                }
            }
            if let Some(id) = slot.id.take() {
                hyp::memslot_delete(id).map_err(e("delete"))?;
            }
            report(scenario, bname, size, &mut samples);
        }
    }
    hyp::walker_mode(WalkerMode::SkipLevel3, 0).map_err(e("walker"))?;
    Ok(())
}

fn report(scenario: u8, backing: &str, size: u64, samples: &mut [Samples; 3]) {
    let mut med = [(0u64, 0u64, 0u64, 0u64); 3];
    for (w, s) in samples.iter_mut().enumerate() {
        med[w] = (
            Summary::of(&mut s.ns).median,
            Summary::of(&mut s.split_ns).median,
            Summary::of(&mut s.insns).median,
            Summary::of(&mut s.split_insns).median,
        );
    }
    for (w, s) in samples.iter_mut().enumerate() {
        let t = Summary::of(&mut s.ns);
        let st = Summary::of(&mut s.split_ns);
        let mut r = abi::report::Record::new("bench");
        r.str("bench", "split")
            .str("case", &format!("s{scenario} {backing} {}", WALKERS[w].name()))
            .str("scenario", if scenario == 1 { "enable" } else { "manual-clear" })
            .str("backing", backing)
            .str("walker", WALKERS[w].name())
            .u64("slot_gib", size / GIB)
            .u64("n", t.n as u64)
            .u64("median_us", t.median / 1000)
            .f64("spread", t.spread(), 3)
            .u64("split_us", st.median / 1000)
            .f64("split_spread", st.spread(), 3);
        for (c, v) in &s.counters {
            r.u64(c.name(), *v);
        }
        r.u64("insns", med[w].2).u64("split_insns", med[w].3);
        r.f64("ratio", ratio(med[w].0, med[0].0), 3).f64("split_ratio", ratio(med[w].1, med[0].1), 3);
        // Without -icount QEMU counts no instructions: no ratio of zeros.
        if med[0].2 != 0 {
            r.f64("insn_ratio", ratio(med[w].2, med[0].2), 3);
        }
        // Unit costs beside the ratios (a field is left out where it would be 0/0: no visits, or
        // no instructions counted without -icount).
        let visits: u64 = s
            .counters
            .iter()
            .filter(|(c, _)| {
                matches!(
                    c,
                    Counter::SplitVisitsL0 | Counter::SplitVisitsL1 | Counter::SplitVisitsL2 | Counter::SplitVisitsL3
                )
            })
            .map(|(_, v)| v)
            .sum();
        let ptes = size / PAGE;
        let mut per = |name: &str, a: u64, b: u64, decimals: usize| {
            if a != 0 && b != 0 {
                r.f64(name, a as f64 / b as f64, decimals);
            }
        };
        per("split_ns_per_visit", med[w].1, visits, 1);
        per("split_insns_per_visit", med[w].3, visits, 1);
        per("ns_per_pte", med[w].0, ptes, 2);
        per("insns_per_pte", med[w].2, ptes, 1);
        per("insns_per_gib", med[w].2, size / GIB, 0);
        rt::println!("{r}");
    }
}
