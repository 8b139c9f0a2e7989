//! `perf.events=LIST`: PMU events and the project's own counters around a whole scenario (the
//! self-tests and benchmarks named on the command line), for `cargo xtask perf`.
//!
//! Boot arguments:
//! * `perf.events=NAME[:ELS],...`: events by name or number (`INST_RETIRED`, `0x2d`), each
//!   optionally filtered to exception levels (`:el1`, `:el1+el2`; default all). May be empty:
//!   the cycle counter and the own counters are always reported.
//! * `perf.scenario=NAME`: the label the records carry.
//! * `perf.walker=baseline|skip_level3|summary`: the hypervisor's split walker for the run.
//! * `perf.list`: the events of this CPU's tables, counted here or not, and why.
//!
//! Output, on CPU 0 (the CPU that runs the scenarios): one `perf_info` record (the PMU, the
//! mechanisms in force), then one `perf` record per counter: `source` `pmu` (with `value` null
//! and `why` for an event not counted here), or `own` (TLBI/DSB/ISB by source and EL, see
//! [`super::Barriers`]). The window is marked for the instruction-counting plugin.

use super::{driver, mark, now_ns, Barriers, LevelCounts};
use crate::{hyp, mm};
use abi::report::Record;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use kcore::options::PerfOptions;
use pmu::{ElFilter, Event, NotCounted};

/// Why the counting a boot asked for (`perf.*` words) could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PerfError {
    /// `perf.list` on a CPU without PMUv3.
    NoPmu,
    /// `perf.events`: the exception levels after `:` in `spec` are not understood.
    BadEls { spec: String },
    /// `perf.events`: no event `name` on this `core`.
    NoEvent { name: String, core: &'static str },
    /// `perf.walker`: the hypervisor refused the walker mode.
    Walker(abi::error::HypError),
}

impl fmt::Display for PerfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerfError::NoPmu => f.write_str("perf.list: this CPU has no PMUv3"),
            PerfError::BadEls { spec } => write!(f, "perf.events: {spec:?}: ELs are el0+el1+el2 or all"),
            PerfError::NoEvent { name, core } => {
                write!(f, "perf.events: no event {name:?} on {core} (see `perf list`)")
            }
            PerfError::Walker(e) => write!(f, "perf.walker: {e}"),
        }
    }
}

/// The boot reports errors as text.
impl From<PerfError> for String {
    fn from(e: PerfError) -> String {
        e.to_string()
    }
}

struct Wanted {
    spec: String,
    event: Event,
    filter: ElFilter,
    counter: Result<pmu::Counter, NotCounted>,
}

/// `perf.list`: one `perf_event` record per event of this core's tables (and any other
/// common event PMCEID advertises), with whether it is counted here and why not.
fn list() -> Result<(), PerfError> {
    let pmu = driver().ok_or(PerfError::NoPmu)?;
    let i = *pmu.info();
    let mut info = Record::new("perf_pmu");
    info.str("core", i.core.name())
        .u64("pmuver", i.pmuver as u64)
        .u64("counters", i.counters as u64)
        .bool("long_counters", i.long_events)
        .hex("pmceid0", i.pmceid[0])
        .hex("pmceid1", i.pmceid[1])
        .bool("emulated", i.emulated);
    rt::println!("{info}");
    for e in i.core.events() {
        let mut r = Record::new("perf_event");
        r.hex("number", e.number as u64).str("name", e.name).bool("tlb", e.tlb);
        match i.support(e.number) {
            Ok(()) => r.bool("counted", true).str("why", ""),
            Err(n) => r.bool("counted", false).str("why", n.why()),
        };
        r.str("about", e.about);
        rt::println!("{r}");
    }
    Ok(())
}

/// Runs `f`, counting around it when the command line asks for it; `f`'s error is returned as
/// it is (the scenario's report), the counting's own as [`PerfError`].
pub fn around<E: From<PerfError>>(o: &PerfOptions, f: impl FnOnce() -> Result<(), E>) -> Result<(), E> {
    if o.list {
        list()?;
    }
    let Some(list) = o.events.as_deref() else {
        return f();
    };
    let label = o.scenario.clone();
    let walker = o.walker;
    let pmu = driver();
    let mut wanted: Vec<Wanted> = Vec::new();
    for spec in list.split(',').filter(|s| !s.is_empty()) {
        let (name, els) = spec.split_once(':').unwrap_or((spec, "all"));
        let filter = ElFilter::parse(els).ok_or_else(|| PerfError::BadEls { spec: spec.to_string() })?;
        let core = pmu.as_ref().map_or(pmu::Core::Other, |p| p.info().core);
        let event =
            core.lookup(name).ok_or_else(|| PerfError::NoEvent { name: name.to_string(), core: core.name() })?;
        let counter = match &pmu {
            Some(p) => p.claim_high(event, filter).inspect(|c| super::arm_overflow(p, c)),
            None => Err(NotCounted::NoPmu),
        };
        wanted.push(Wanted { spec: spec.to_string(), event, filter, counter });
    }
    if let Some(w) = walker {
        hyp::walker_mode(w, 0).map_err(PerfError::Walker)?;
    }
    let read_all = |pmu: &Option<pmu::Pmu<'static, pmu::hw::SysRegs>>, wanted: &[Wanted]| -> Vec<u64> {
        wanted
            .iter()
            .map(|w| match (pmu, &w.counter) {
                (Some(p), Ok(c)) => p.read(c),
                _ => 0,
            })
            .collect()
    };
    let el2_0 = Barriers::el2_now();
    let v0 = read_all(&pmu, &wanted);
    let c0 = pmu.as_ref().map_or(0, |p| p.cycles());
    let t0 = now_ns();
    mark(true);
    let el1_0 = Barriers::el1_now();
    let r = f();
    let el1_1 = Barriers::el1_now();
    mark(false);
    let t1 = now_ns();
    let c1 = pmu.as_ref().map_or(0, |p| p.cycles());
    let v1 = read_all(&pmu, &wanted);
    let el2_1 = Barriers::el2_now();
    let own = Barriers { el1: el1_1, el2: el2_1 }.since(&Barriers { el1: el1_0, el2: el2_0 });
    let values: Vec<Result<u64, NotCounted>> = wanted
        .iter()
        .enumerate()
        .map(|(i, w)| match (&pmu, &w.counter) {
            (Some(_), Ok(_)) => Ok(v1[i] - v0[i]),
            (_, Err(e)) => Err(*e),
            (None, _) => Err(NotCounted::NoPmu),
        })
        .collect();
    if let Some(p) = &pmu {
        for w in wanted.iter_mut() {
            if let Ok(c) = w.counter {
                p.release(c);
            }
        }
    }
    r?;
    let mut info = Record::new("perf_info");
    info.str("scenario", &label).u64("cpu", super::cpu_index() as u64);
    match &pmu {
        Some(p) => {
            let i = p.info();
            info.str("core", i.core.name())
                .u64("pmuver", i.pmuver as u64)
                .u64("counters", i.counters as u64)
                .bool("long_counters", i.long_events)
                .bool("emulated", i.emulated);
        }
        None => {
            info.str("core", "no PMUv3");
        }
    }
    info.str("bbml2", if mm::bbml2_decision().enabled { "on" } else { "off" })
        .str("contpte", if mm::contpte() { "on" } else { "off" })
        .str("rodata", mm::info().rodata.as_str())
        .bool("hypervisor", own.el2.is_some());
    if let Some(w) = walker {
        info.str("walker", w.name());
    }
    rt::println!("{info}");
    let row = |counter: &str, el: &str, source: &str| {
        let mut r = Record::new("perf");
        r.str("scenario", &label).str("counter", counter).str("el", el).str("source", source);
        r
    };
    let mut r = row("ns", "-", "timer");
    r.u64("value", t1 - t0);
    rt::println!("{r}");
    let mut r = row("CPU_CYCLES", "el0+el1+el2", "pmu cycle counter");
    match &pmu {
        Some(_) => r.u64("value", c1.wrapping_sub(c0)),
        None => r.null("value").str("why", NotCounted::NoPmu.why()),
    };
    rt::println!("{r}");
    for (w, v) in wanted.iter().zip(&values) {
        let name = if w.event.name.is_empty() { w.spec.split(':').next().unwrap_or("") } else { w.event.name };
        let mut r = row(name, w.filter.name(), "pmu");
        r.hex("number", w.event.number as u64);
        match v {
            Ok(v) => r.u64("value", *v),
            Err(e) => r.null("value").str("why", e.why()),
        };
        rt::println!("{r}");
    }
    own_rows(&label, "el1", &own.el1);
    if let Some(el2) = &own.el2 {
        own_rows(&label, "el2", el2);
    }
    Ok(())
}

fn own_rows(label: &str, el: &str, c: &LevelCounts) {
    for (name, v) in [
        ("tlbi", c.tlbi),
        ("dsb", c.dsb()),
        ("isb", c.isb()),
        ("dsb_pgtable", c.dsb_pgtable),
        ("dsb_cache", c.dsb_cache),
        ("dsb_other", c.dsb_other),
        ("isb_pgtable", c.isb_pgtable),
        ("isb_cache", c.isb_cache),
        ("isb_pmu", c.isb_pmu),
        ("isb_other", c.isb_other),
    ] {
        let mut r = Record::new("perf");
        r.str("scenario", label).str("counter", name).str("el", el).str("source", "own").u64("value", v);
        rt::println!("{r}");
    }
}
