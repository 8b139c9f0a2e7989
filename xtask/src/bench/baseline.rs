//! The committed baseline of the `--icount` figures, and the checks that fail when one rises.
//!
//! Under `-icount shift=0` an instruction count is exact: the same Images on the same QEMU
//! machine count the same instructions on every run, so any change of a figure is a change of
//! the code. [`FILE`] holds one line per figure (`run`, `bench`, `machine`, `case`, `field`,
//! `value`), in two sets:
//!
//! * `"run":"test"`: what `cargo xtask test` measures in a few seconds ([`quick_runs`]: the EL0
//!   rows of `bench mprotect` with [`QUICK_ROUNDS`] rounds on its four machines, and `bench
//!   contpte` on its two), checked by `tests/tests/bench_baseline.rs`;
//! * `"run":"bench"`: every figure of every in-guest benchmark as `cargo xtask bench NAME
//!   --icount` measures it, and the host benchmark's callgrind counts (`bench pgtable`),
//!   checked by `cargo xtask bench check`.
//!
//! A figure fails its check when it rises above its baseline by more than [`MARGIN_PCT`] per
//! cent and more than [`MARGIN_MIN`] instructions; the failure names the row, the figure
//! before and after. A figure that is gone, or new without a baseline, fails too (a check that
//! cannot compare says so). Falls pass and are listed: refresh the baseline to keep them.
//!
//! The counts depend on the build (the guest's compiler is fixed: Debian's rustc-web; the host
//! benchmark's is rustup's stable), so the baseline is refreshed deliberately, never by a
//! check: `cargo xtask bench baseline --update` measures both sets, rewrites [`FILE`] and
//! prints (and saves as `target/bench/baseline-diff.txt`) every figure that changed, before
//! and after; the file's own diff is what a reviewer reads in the commit.

use super::catalog::{GuestBench, Setup, GUEST_BENCHES};
use crate::launch::Launch;
use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The baseline, relative to the workspace root.
pub const FILE: &str = "xtask/bench-baseline.jsonl";
/// A figure may rise by this many per cent before its check fails ...
pub const MARGIN_PCT: f64 = 1.0;
/// ... and by at least this many instructions (a row of a few dozen instructions may take one
/// or two more without failing; beyond that it does).
pub const MARGIN_MIN: u64 = 2;
/// Rounds of the EL0 benchmark in the quick run (medians of 10 rounds equal those of 100 on
/// every row; of 5, one row moves by 0.01 %).
pub const QUICK_ROUNDS: u64 = 10;

/// Which set a figure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Run {
    /// The quick run of `cargo xtask test`.
    Test,
    /// The benchmarks as `cargo xtask bench NAME --icount` (and `bench pgtable`) run them.
    Bench,
}

impl Run {
    pub fn name(self) -> &'static str {
        match self {
            Run::Test => "test",
            Run::Bench => "bench",
        }
    }
    fn parse(s: &str) -> Option<Run> {
        match s {
            "test" => Some(Run::Test),
            "bench" => Some(Run::Bench),
            _ => None,
        }
    }
}

/// One figure: a field of a benchmark row on a machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    pub run: Run,
    pub bench: String,
    pub machine: String,
    pub case: String,
    pub field: String,
    pub value: u64,
}

/// What identifies a figure across runs.
pub type Key = (Run, String, String, String, String);

impl Figure {
    pub fn key(&self) -> Key {
        (self.run, self.bench.clone(), self.machine.clone(), self.case.clone(), self.field.clone())
    }
    fn json(&self) -> String {
        let mut o = Map::new();
        o.insert("run".into(), self.run.name().into());
        o.insert("bench".into(), self.bench.clone().into());
        o.insert("machine".into(), self.machine.clone().into());
        o.insert("case".into(), self.case.clone().into());
        o.insert("field".into(), self.field.clone().into());
        o.insert("value".into(), self.value.into());
        Value::Object(o).to_string()
    }
}

/// The name of a key for messages: `bench mprotect, max-1cpu, "NONE->RW 512 pages, flush
/// elision", median_insns (test)`.
pub fn describe(k: &Key) -> String {
    format!("bench {}, {}, {:?}, {} ({})", k.1, k.2, k.3, k.4, k.0.name())
}

/// The fields of each benchmark's rows that are figures: exact under `-icount` (instructions,
/// table pages), lower is better. Rows without the field (wall-time-only rows) have none.
pub const FIELDS: &[(&str, &[&str])] = &[
    ("exits", &["median_insns"]),
    ("linear-map", &["median_insns", "table_pages"]),
    ("contpte", &["median_insns"]),
    ("split", &["insns", "split_insns"]),
    ("mprotect", &["median_insns"]),
    ("percpu", &["median_insns"]),
    ("pgtable", &["insns"]),
];

fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f.round() as u64))
}

/// The figures of `rows` (saved rows or report records of benchmark `bench`) measured on
/// `machine` (`None`: each row's own `machine` field). The host benchmark's rows are named by
/// phase and library, on machine `host`; Linux's rows of a `--peer` run are not ours.
pub fn figures_of<'a>(
    run: Run,
    bench: &str,
    machine: Option<&str>,
    rows: impl IntoIterator<Item = &'a Map<String, Value>>,
) -> Vec<Figure> {
    let Some((_, fields)) = FIELDS.iter().find(|(b, _)| *b == bench) else { return Vec::new() };
    let mut out = Vec::new();
    for o in rows {
        let s = |k: &str| o.get(k).and_then(Value::as_str);
        if s("peer").is_some_and(|p| p != "pgtlab") {
            continue;
        }
        let (m, case) = if bench == "pgtable" {
            // Only this library's rows: the peer's counts are not the project's to keep.
            if !s("config").is_some_and(|c| c.starts_with("pgtable")) {
                continue;
            }
            ("host".to_string(), format!("{}: {}", s("phase").unwrap_or("?"), s("library").unwrap_or("?")))
        } else {
            let Some(m) = machine.or(s("machine")) else { continue };
            (m.to_string(), s("case").unwrap_or("").to_string())
        };
        for f in *fields {
            if let Some(v) = o.get(*f).and_then(as_u64) {
                out.push(Figure {
                    run,
                    bench: bench.into(),
                    machine: m.clone(),
                    case: case.clone(),
                    field: (*f).into(),
                    value: v,
                });
            }
        }
    }
    out
}

/// Parses a baseline file's text.
pub fn parse(text: &str) -> Result<Vec<Figure>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let ctx = || format!("line {}", i + 1);
        let v: Value = serde_json::from_str(line).with_context(ctx)?;
        let o = v.as_object().with_context(ctx)?;
        let s = |k: &str| {
            o.get(k).and_then(Value::as_str).map(str::to_string).with_context(|| format!("{}: no {k:?}", ctx()))
        };
        let run = s("run")?;
        let run = Run::parse(&run).with_context(|| format!("{}: run {run:?} is neither test nor bench", ctx()))?;
        let value = o.get("value").and_then(Value::as_u64).with_context(|| format!("{}: no \"value\"", ctx()))?;
        out.push(Figure {
            run,
            bench: s("bench")?,
            machine: s("machine")?,
            case: s("case")?,
            field: s("field")?,
            value,
        });
    }
    let mut seen = std::collections::HashSet::new();
    for f in &out {
        if !seen.insert(f.key()) {
            bail!("{} is in the baseline twice", describe(&f.key()));
        }
    }
    Ok(out)
}

/// The baseline file's text: one figure per line, sorted (a refresh changes only the lines of
/// the figures that changed).
pub fn render(figures: &[Figure]) -> String {
    let mut v: Vec<&Figure> = figures.iter().collect();
    v.sort_by_key(|f| f.key());
    v.iter().map(|f| f.json() + "\n").collect()
}

/// The committed baseline.
pub fn path() -> PathBuf {
    crate::workspace_root().join(FILE)
}

/// Reads the committed baseline.
pub fn read(p: &Path) -> Result<Vec<Figure>> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading the baseline {}", p.display()))?;
    parse(&text).with_context(|| format!("the baseline {}", p.display()))
}

/// A figure before and after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub key: Key,
    pub before: Option<u64>,
    pub after: Option<u64>,
}

impl Change {
    /// Whether it rose beyond the margin ([`MARGIN_PCT`] and [`MARGIN_MIN`]).
    pub fn rose(&self) -> bool {
        match (self.before, self.after) {
            (Some(b), Some(a)) => a > b && a - b > MARGIN_MIN && (a - b) as f64 > b as f64 * MARGIN_PCT / 100.0,
            _ => false,
        }
    }
    /// Its verdict in the check: a rise beyond the margin, a figure gone or new fail.
    pub fn fails(&self) -> bool {
        self.rose() || self.before.is_none() || self.after.is_none()
    }
    fn what(&self) -> String {
        match (self.before, self.after) {
            (Some(b), Some(a)) if self.rose() => {
                format!("rose from {b} to {a} ({:+.2} %, margin {MARGIN_PCT} %)", pct(b, a))
            }
            (Some(b), Some(a)) if a > b => format!("rose from {b} to {a} ({:+.2} %, within the margin)", pct(b, a)),
            (Some(b), Some(a)) => format!("fell from {b} to {a} ({:+.2} %)", pct(b, a)),
            (Some(b), None) => format!("was {b}, not measured now (row gone)"),
            (None, Some(a)) => format!("is {a}, with no baseline (new row: refresh the baseline)"),
            (None, None) => "-".into(),
        }
    }
}

fn pct(b: u64, a: u64) -> f64 {
    if b == 0 {
        return 0.0;
    }
    (a as f64 / b as f64 - 1.0) * 100.0
}

/// The changes from `before` to `after` among the figures of `run`, restricted to the
/// benchmarks `after` measured when `only_measured` (a check of some benchmarks says nothing
/// about the others). Unchanged figures are left out.
pub fn diff(before: &[Figure], after: &[Figure], run: Run, only_measured: bool) -> Vec<Change> {
    let benches: Vec<&str> = after.iter().filter(|f| f.run == run).map(|f| f.bench.as_str()).collect();
    let b: BTreeMap<Key, u64> = before
        .iter()
        .filter(|f| f.run == run && (!only_measured || benches.contains(&f.bench.as_str())))
        .map(|f| (f.key(), f.value))
        .collect();
    let a: BTreeMap<Key, u64> = after.iter().filter(|f| f.run == run).map(|f| (f.key(), f.value)).collect();
    let mut keys: Vec<&Key> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| Change { key: k.clone(), before: b.get(k).copied(), after: a.get(k).copied() })
        .filter(|c| c.before != c.after)
        .collect()
}

/// What a check found: every change, the failures first.
pub struct Report {
    pub changes: Vec<Change>,
    pub compared: usize,
}

impl Report {
    pub fn failures(&self) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(|c| c.fails())
    }
    pub fn ok(&self) -> bool {
        self.failures().next().is_none()
    }
    /// One line per change, failures first.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let fails: Vec<&Change> = self.failures().collect();
        for c in &fails {
            let _ = writeln!(out, "FAIL {}: {}", describe(&c.key), c.what());
        }
        for c in self.changes.iter().filter(|c| !c.fails()) {
            let _ = writeln!(out, "     {}: {}", describe(&c.key), c.what());
        }
        let _ = writeln!(
            out,
            "{} figures compared with {FILE}: {} failed (a rise above {MARGIN_PCT} % and {MARGIN_MIN} instructions, \
             a row gone or new), {} changed within it",
            self.compared,
            fails.len(),
            self.changes.len() - fails.len()
        );
        out
    }
}

/// Checks the figures `measured` (of set `run`) against the baseline `base`.
pub fn check(base: &[Figure], measured: &[Figure], run: Run) -> Report {
    let changes = diff(base, measured, run, true);
    let mut changes: Vec<Change> = changes;
    changes.sort_by_key(|c| !c.fails());
    Report { changes, compared: measured.iter().filter(|f| f.run == run).count() }
}

/// One boot of the quick set: a benchmark on one of its machines.
pub struct QuickRun {
    pub bench: &'static GuestBench,
    pub setup: Setup,
    /// The QEMU run (`-icount shift=0`).
    pub launch: Launch,
}

/// The quick set `cargo xtask test` runs: the EL0 benchmark with [`QUICK_ROUNDS`] rounds on
/// each of its machines, and the contpte benchmark on each of its own.
pub fn quick_runs() -> Vec<QuickRun> {
    let mut out = Vec::new();
    for name in ["mprotect", "contpte"] {
        let b = GUEST_BENCHES.iter().find(|b| b.name == name).expect("a catalogued benchmark");
        for m in b.machines {
            let mut launch = super::machine_config(b, m, true, super::On::default());
            if name == "mprotect" {
                launch.bootargs = format!("bench=mprotect mprotect.rounds={QUICK_ROUNDS}");
            }
            out.push(QuickRun { bench: b, setup: *m, launch });
        }
    }
    out
}

/// The figures of one quick boot, from its records.
pub fn quick_figures(q: &QuickRun, records: &[abi::report::ParsedRecord]) -> Vec<Figure> {
    let rows = records.iter().filter(|r| r.kind == "bench" && r.str("bench") == Some(q.bench.name)).map(|r| &r.fields);
    figures_of(Run::Test, q.bench.name, Some(q.setup.label), rows)
}

/// The figures of the saved runs in `dir` (`NAME-icount.jsonl` of every in-guest benchmark,
/// `pgtable.jsonl`): the `bench` set as `bench check --saved` compares it.
pub fn saved_figures(dir: &Path) -> Result<Vec<Figure>> {
    let mut out = Vec::new();
    for b in GUEST_BENCHES {
        let rows = crate::plot::load(&dir.join(format!("{}-icount.jsonl", b.name)))?;
        out.extend(figures_of(Run::Bench, b.name, None, &rows));
    }
    let rows = crate::plot::load(&dir.join("pgtable.jsonl"))?;
    out.extend(figures_of(Run::Bench, "pgtable", None, &rows));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(run: Run, case: &str, value: u64) -> Figure {
        Figure {
            run,
            bench: "mprotect".into(),
            machine: "max-1cpu".into(),
            case: case.into(),
            field: "median_insns".into(),
            value,
        }
    }

    #[test]
    fn a_rise_beyond_the_margin_fails_and_names_the_row_before_and_after() {
        let base = vec![fig(Run::Test, "NONE->RW 512 pages, flush elision", 4581), fig(Run::Test, "getcpu", 83)];
        // Within 1 % and within 2 instructions: passes.
        let ok = check(
            &base,
            &[fig(Run::Test, "NONE->RW 512 pages, flush elision", 4600), fig(Run::Test, "getcpu", 85)],
            Run::Test,
        );
        assert!(ok.ok(), "{}", ok.text());
        assert_eq!(ok.changes.len(), 2, "the changes within the margin are listed");
        let bad = check(
            &base,
            &[fig(Run::Test, "NONE->RW 512 pages, flush elision", 4700), fig(Run::Test, "getcpu", 86)],
            Run::Test,
        );
        let t = bad.text();
        assert!(!bad.ok());
        assert!(
            t.contains("FAIL bench mprotect, max-1cpu, \"NONE->RW 512 pages, flush elision\"")
                && t.contains("rose from 4581 to 4700"),
            "{t}"
        );
        assert!(
            t.contains("FAIL bench mprotect, max-1cpu, \"getcpu\", median_insns (test): rose from 83 to 86"),
            "3 > 2 instructions and 3.6 % > 1 %: {t}"
        );
        // A fall passes; an equal figure is no change.
        let better = check(
            &base,
            &[fig(Run::Test, "NONE->RW 512 pages, flush elision", 2000), fig(Run::Test, "getcpu", 83)],
            Run::Test,
        );
        assert!(better.ok() && better.changes.len() == 1 && better.text().contains("fell from 4581 to 2000"));
    }

    #[test]
    fn a_row_gone_or_new_fails_and_other_sets_and_benchmarks_are_not_compared() {
        let base = vec![fig(Run::Test, "a", 10), fig(Run::Bench, "b", 10)];
        let r = check(&base, &[fig(Run::Test, "c", 10)], Run::Test);
        let t = r.text();
        assert!(
            !r.ok() && t.contains("\"a\"") && t.contains("row gone") && t.contains("\"c\"") && t.contains("new row"),
            "{t}"
        );
        assert!(!t.contains("\"b\""), "the bench set is not the test set's business: {t}");
        let split = Figure { bench: "split".into(), ..fig(Run::Test, "s1", 5) };
        assert!(
            check(&base, std::slice::from_ref(&split), Run::Test).changes.iter().all(|c| c.key.1 == "split"),
            "only the benchmarks measured"
        );
        assert!(check(&[], &[], Run::Test).ok());
    }

    #[test]
    fn the_file_round_trips_sorted_and_refuses_duplicates_and_bad_lines() {
        let figs = vec![fig(Run::Test, "z", 1), fig(Run::Bench, "a", 2), fig(Run::Test, "a", 3)];
        let text = render(&figs);
        let back = parse(&text).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[0].case, "a");
        assert_eq!(back[0].run, Run::Test, "sorted by set, then benchmark, machine, case, field");
        assert_eq!(render(&back), text, "rendering is stable");
        assert!(parse(&(text.clone() + &text)).unwrap_err().to_string().contains("twice"));
        assert!(parse("{\"run\":\"x\"}").is_err());
        assert!(parse("{\"run\":\"test\",\"bench\":\"b\",\"machine\":\"m\",\"case\":\"c\",\"field\":\"f\"}")
            .unwrap_err()
            .to_string()
            .contains("value"));
        assert!(parse("not json").is_err());
    }

    #[test]
    fn figures_come_from_the_listed_fields_of_our_rows_only() {
        let rows: Vec<Map<String, Value>> = [
            serde_json::json!({"machine":"max-1cpu","case":"getcpu, pgtlab","peer":"pgtlab","median_insns":83,"median_ns":80}),
            serde_json::json!({"machine":"max-1cpu","case":"getcpu, linux","peer":"linux","median_insns":900}),
            serde_json::json!({"machine":"max-1cpu","case":"wall only","median_ns":80}),
        ]
        .iter()
        .map(|v| v.as_object().unwrap().clone())
        .collect();
        let f = figures_of(Run::Bench, "mprotect", None, &rows);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!((f[0].case.as_str(), f[0].value), ("getcpu, pgtlab", 83));
        let split = [serde_json::json!({"machine":"max-4G","case":"s1 2M skip_level3","insns":31469184,"split_insns":30407028,"median_us":3})
            .as_object()
            .unwrap()
            .clone()];
        assert_eq!(figures_of(Run::Bench, "split", None, &split).len(), 2);
        let pg = [
            serde_json::json!({"config":"pgtable-pages","library":"pgtable, pages","phase":"protect","insns":7231332}),
            serde_json::json!({"config":"aarch64-paging","library":"aarch64-paging 0.12, pages","phase":"protect","insns":14469878}),
        ]
        .map(|v| v.as_object().unwrap().clone());
        let f = figures_of(Run::Bench, "pgtable", None, &pg);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].machine.as_str(), f[0].case.as_str()), ("host", "protect: pgtable, pages"));
        assert!(figures_of(Run::Bench, "unknown", None, &rows).is_empty());
    }

    #[test]
    fn the_quick_set_is_the_el0_rows_and_contpte_on_their_machines_under_icount() {
        let q = quick_runs();
        let count = |n: &str| q.iter().filter(|r| r.bench.name == n).count();
        assert_eq!((count("mprotect"), count("contpte")), (4, 2));
        for r in &q {
            assert_eq!(r.launch.icount, Some(0), "{}", r.setup.label);
            assert!(r.launch.bootargs.starts_with(&format!("bench={}", r.bench.name)));
        }
        assert!(q.iter().any(|r| r.launch.bootargs.contains(&format!("mprotect.rounds={QUICK_ROUNDS}"))));
    }
}
