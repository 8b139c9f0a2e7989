//! A benchmark's saved rows, read: one [`Row`] per bar, in the figures of a [`Mode`].

use anyhow::{Context, Result};
use serde_json::{Map, Value};
use std::path::Path;

/// One measured row, reduced to what plots and comparisons need.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub machine: String,
    /// The workload (bars of one group are compared with each other).
    pub group: String,
    /// The mechanism setting (one colour each).
    pub setting: String,
    pub median: f64,
    /// Whisker ends (none for exact counts).
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Relative spread (p90 - p10) / median; 0 for exact counts.
    pub spread: f64,
}

/// What a benchmark's figures are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Wall time under QEMU TCG.
    Wall,
    /// Instructions under `-icount shift=0` (exact).
    Icount,
}

impl Mode {
    /// The axis name, with its mode.
    pub fn axis(self, unit: &str) -> String {
        match self {
            Mode::Wall => format!("median time ({unit}), wall clock under QEMU TCG"),
            Mode::Icount => "median instructions, QEMU -icount shift=0 (exact)".into(),
        }
    }
}

/// The mode of a run.
pub fn mode(icount: bool) -> Mode {
    if icount {
        Mode::Icount
    } else {
        Mode::Wall
    }
}

pub(super) fn f(o: &Map<String, Value>, k: &str) -> Option<f64> {
    o.get(k).and_then(Value::as_f64)
}

pub(super) fn s<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    o.get(k).and_then(Value::as_str)
}

/// (workload, mechanism setting) of a row of benchmark `bench`.
pub fn group_setting(bench: &str, o: &Map<String, Value>) -> (String, String) {
    let case = s(o, "case").unwrap_or("").to_string();
    match bench {
        "split" => (
            format!("s{} {}", if s(o, "scenario") == Some("enable") { 1 } else { 2 }, s(o, "backing").unwrap_or("?")),
            s(o, "walker").unwrap_or("?").to_string(),
        ),
        "linear-map" => match case.split_once(": ") {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (case.clone(), case),
        },
        "exits" => (case.clone(), case),
        _ => match case.rsplit_once(", ") {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (case.clone(), "-".into()),
        },
    }
}

/// The plotted unit of benchmark `bench` in `mode`.
pub fn unit(bench: &str, mode: Mode) -> &'static str {
    match (mode, bench) {
        (Mode::Icount, _) => "instructions",
        (Mode::Wall, "split") => "us",
        (Mode::Wall, _) => "ns",
    }
}

/// The row of a benchmark record, if it has the figures of `mode`.
pub fn row(bench: &str, o: &Map<String, Value>, mode: Mode) -> Option<Row> {
    let (group, setting) = group_setting(bench, o);
    let machine = s(o, "machine").unwrap_or("").to_string();
    let (median, lo, hi, spread) = match mode {
        Mode::Icount => {
            let m = f(o, "median_insns").or_else(|| f(o, "insns"))?;
            (m, None, None, 0.0)
        }
        Mode::Wall => {
            if let Some(m) = f(o, "median_ns") {
                (m, f(o, "p10_ns"), f(o, "p90_ns"), f(o, "spread").unwrap_or(0.0))
            } else {
                let m = f(o, "median_us")?;
                let sp = f(o, "spread").unwrap_or(0.0);
                (m, Some(m * (1.0 - sp / 2.0)), Some(m * (1.0 + sp / 2.0)), sp)
            }
        }
    };
    Some(Row { machine, group, setting, median, lo, hi, spread })
}

/// Every plottable row of a saved `.jsonl`. A run with a peer (rows of `"peer":"linux"`) is
/// plotted as a bar per side: each side's default setting of each row, coloured by side (the
/// project's mechanism settings are in the run without `--peer`).
pub fn rows(bench: &str, jsonl: &str, mode: Mode) -> Result<Vec<Row>> {
    let mut objs = Vec::new();
    for (i, line) in jsonl.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).with_context(|| format!("line {}", i + 1))?;
        objs.push(v.as_object().with_context(|| format!("line {}: not an object", i + 1))?.clone());
    }
    let with_peer = objs.iter().any(|o| s(o, "peer").is_some_and(|p| p != "pgtlab"));
    let mut out = Vec::new();
    for o in &objs {
        if with_peer {
            if o.get("default").and_then(Value::as_bool) == Some(false) {
                continue;
            }
            if let (Some(r), Some(side)) = (row(bench, o, mode), s(o, "peer")) {
                let group = s(o, "row").map_or(r.group.clone(), str::to_string);
                out.push(Row { group, setting: side.to_string(), ..r });
            }
        } else if let Some(r) = row(bench, o, mode) {
            out.push(r);
        }
    }
    Ok(out)
}

/// Parses a saved `.jsonl` into objects (missing file: empty).
pub fn load(path: &Path) -> Result<Vec<Map<String, Value>>> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(Vec::new()) };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .with_context(|| format!("{}", path.display()))?
                .as_object()
                .cloned()
                .context("not an object")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn rows_know_their_workload_and_setting() {
        let c = obj(
            serde_json::json!({"machine":"max","case":"convert (unfold), no TLBI (BBML2)","median_ns":100,"p10_ns":90,"p90_ns":130,"spread":0.4,"median_insns":3000}),
        );
        let w = row("contpte", &c, Mode::Wall).unwrap();
        assert_eq!((w.group.as_str(), w.setting.as_str()), ("convert (unfold)", "no TLBI (BBML2)"));
        assert_eq!((w.lo, w.hi), (Some(90.0), Some(130.0)));
        let i = row("contpte", &c, Mode::Icount).unwrap();
        assert_eq!((i.median, i.lo, i.spread), (3000.0, None, 0.0));
        let sp = obj(
            serde_json::json!({"machine":"max-4G","case":"s1 2M summary","scenario":"enable","backing":"2M","walker":"summary","median_us":200,"spread":0.1,"insns":5}),
        );
        let s = row("split", &sp, Mode::Wall).unwrap();
        assert_eq!((s.group.as_str(), s.setting.as_str(), s.lo), ("s1 2M", "summary", Some(190.0)));
        let tp = obj(serde_json::json!({"machine":"max-1G","case":"table pages: PTE-only","table_pages":3}));
        assert!(row("linear-map", &tp, Mode::Wall).is_none(), "no timing: not a bar");
    }
}
