//! `cargo xtask bench pgtable`: lib/pgtable against the aarch64-paging crate on the host.
//!
//! Runs `lib/pgtable/benches/peer.rs` twice over: natively (every configuration 5 times,
//! interleaved: median time per phase) and, when valgrind is installed, once per configuration
//! and phase under callgrind with collection on only inside that phase's function (instructions
//! executed, exact and repeatable; page faults and the kernel's zeroing are not in them). Prints
//! per phase the counts, the time and the instructions per entry, then the ratios peer / pgtable
//! per phase and for the whole workload, and saves `target/bench/pgtable.{txt,jsonl}`.

use crate::report::{self, aligned};
use crate::workspace_root;
use abi::report::ParsedRecord;
use anyhow::{bail, ensure, Context, Result};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The phases the benchmark reports, in order.
pub const PHASES: [&str; 3] = ["map", "protect", "unmap"];
/// This library mapped in pages like the peer: the denominator of the ratios.
const OURS: &str = "pgtable-pages";
/// The peer.
const PEER: &str = "aarch64-paging";

/// One (configuration, phase) row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub config: String,
    pub library: String,
    pub phase: String,
    pub entries: u64,
    pub tlbis: u64,
    pub desc_writes: u64,
    pub table_pages: u64,
    pub median_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Instructions executed in the phase (callgrind), if counted.
    pub insns: Option<u64>,
}

fn field(r: &ParsedRecord, name: &str) -> Result<u64> {
    r.u64(name).with_context(|| format!("a peer record lacks {name:?}: {:?}", r.fields))
}

/// The rows of the timing run, checked: every configuration has every phase once, and both
/// sides of the comparison are there.
pub fn rows(records: &[ParsedRecord]) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in records.iter().filter(|r| r.kind == "peer") {
        let s = |n: &str| r.str(n).map(str::to_string).with_context(|| format!("a peer record lacks {n:?}"));
        rows.push(Row {
            config: s("config")?,
            library: s("library")?,
            phase: s("phase")?,
            entries: field(r, "entries")?,
            tlbis: field(r, "tlbis")?,
            desc_writes: field(r, "desc_writes")?,
            table_pages: field(r, "table_pages")?,
            median_ns: field(r, "median_ns")?,
            min_ns: field(r, "min_ns")?,
            max_ns: field(r, "max_ns")?,
            insns: None,
        });
    }
    let mut configs: Vec<&str> = Vec::new();
    for r in &rows {
        if !configs.contains(&r.config.as_str()) {
            configs.push(&r.config);
        }
    }
    for c in [OURS, PEER] {
        ensure!(configs.contains(&c), "the benchmark printed no rows for {c}");
    }
    for c in &configs {
        for p in PHASES {
            let n = rows.iter().filter(|r| r.config == *c && r.phase == p).count();
            ensure!(n == 1, "the benchmark printed {n} rows for {c} {p} (one expected)");
        }
    }
    Ok(rows)
}

/// `a / b` for a table: "-" when both are zero (nothing to compare), "N/0" when only `b` is.
pub fn ratio(a: f64, b: f64) -> String {
    if b == 0.0 {
        if a == 0.0 {
            "-".into()
        } else {
            format!("{a}/0")
        }
    } else {
        format!("{:.2}x", a / b)
    }
}

/// The instruction count in a callgrind output file (its `summary:` line).
pub fn callgrind_summary(text: &str) -> Result<u64> {
    let line =
        text.lines().find_map(|l| l.strip_prefix("summary:")).context("no summary line in callgrind's output")?;
    line.trim().parse().with_context(|| format!("callgrind summary {line:?}"))
}

/// The tables: one row per (phase, configuration), then the ratios peer / pgtable.
pub fn render(rows: &[Row]) -> Result<String> {
    let find = |c: &str, p: &str| rows.iter().find(|r| r.config == c && r.phase == p).context("missing row");
    let mut out = String::new();
    let header: Vec<String> = [
        "phase",
        "library",
        "entries",
        "TLBIs",
        "desc writes",
        "table pages",
        "time ms",
        "min-max ms",
        "insns",
        "insns/entry",
    ]
    .map(String::from)
    .to_vec();
    let ms = |ns: u64| format!("{:.2}", ns as f64 / 1e6);
    let mut table = Vec::new();
    for p in PHASES {
        for r in rows.iter().filter(|r| r.phase == p) {
            table.push(vec![
                p.to_string(),
                r.library.clone(),
                r.entries.to_string(),
                r.tlbis.to_string(),
                r.desc_writes.to_string(),
                r.table_pages.to_string(),
                ms(r.median_ns),
                format!("{}-{}", ms(r.min_ns), ms(r.max_ns)),
                r.insns.map_or("-".into(), |i| i.to_string()),
                r.insns.map_or("-".into(), |i| format!("{:.1}", i as f64 / r.entries.max(1) as f64)),
            ]);
        }
    }
    out += &aligned(&header, &table, 2);
    let _ = writeln!(out, "\nratio aarch64-paging / pgtable (both map 4 KiB pages; above 1: pgtable does less):");
    let header: Vec<String> =
        ["phase", "time", "insns", "TLBIs", "desc writes", "table pages"].map(String::from).to_vec();
    let mut table = Vec::new();
    for p in PHASES {
        let (o, q) = (find(OURS, p)?, find(PEER, p)?);
        let insns = match (q.insns, o.insns) {
            (Some(a), Some(b)) => ratio(a as f64, b as f64),
            _ => "-".into(),
        };
        table.push(vec![
            p.to_string(),
            ratio(q.median_ns as f64, o.median_ns as f64),
            insns,
            ratio(q.tlbis as f64, o.tlbis as f64),
            ratio(q.desc_writes as f64, o.desc_writes as f64),
            ratio(q.table_pages as f64, o.table_pages as f64),
        ]);
    }
    let sum = |c: &str, f: &dyn Fn(&Row) -> u64| rows.iter().filter(|r| r.config == c).map(f).sum::<u64>() as f64;
    let all_insns = |c: &str| rows.iter().filter(|r| r.config == c).map(|r| r.insns).sum::<Option<u64>>();
    table.push(vec![
        "whole".into(),
        ratio(sum(PEER, &|r| r.median_ns), sum(OURS, &|r| r.median_ns)),
        match (all_insns(PEER), all_insns(OURS)) {
            (Some(a), Some(b)) => ratio(a as f64, b as f64),
            _ => "-".into(),
        },
        ratio(sum(PEER, &|r| r.tlbis), sum(OURS, &|r| r.tlbis)),
        ratio(sum(PEER, &|r| r.desc_writes), sum(OURS, &|r| r.desc_writes)),
        "-".into(),
    ]);
    out += &aligned(&header, &table, 1);
    out += "\nnotes: time = median of 5 interleaved runs on the host (min-max beside it); insns = instructions\n\
            executed in the phase, counted by callgrind (exact, one run; user space only, so page faults\n\
            and the kernel's zeroing of fresh pages are not in them). TLBIs are what the target would issue\n\
            (none executes on the host); both libraries count them with the same plain add, and their\n\
            tables come from the same global allocator with O(1) bookkeeping. Table pages and descriptor\n\
            writes are read from the hardware tables after each phase, untimed, for both (writes: changed\n\
            descriptors, a lower bound). aarch64-paging cannot split a live block, so it maps 4 KiB pages;\n\
            its unmap (map_range with flags without VALID) frees every subtable the range covers whole,\n\
            after one TLBI per valid entry below it, and keeps the tables only partly covered.\n";
    Ok(out)
}

/// The benchmark's executable, built with the bench profile.
fn build() -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(workspace_root())
        .args(["bench", "-p", "pgtable", "--bench", "peer", "--no-run", "--message-format=json-render-diagnostics"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo bench --no-run")?;
    ensure!(out.status.success(), "building the peer benchmark failed");
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if v["reason"] == "compiler-artifact" && v["target"]["name"] == "peer" {
            if let Some(exe) = v["executable"].as_str() {
                return Ok(exe.into());
            }
        }
    }
    bail!("cargo built no executable for the peer benchmark")
}

fn valgrind() -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join("valgrind")).find(|p| p.is_file())
}

/// Instructions of `phase` of configuration `config`, and the counts that run printed.
fn count_instructions(valgrind: &Path, exe: &Path, dir: &Path, config: &str, phase: &str) -> Result<Row> {
    let file = dir.join(format!("callgrind.{config}.{phase}"));
    let out = Command::new(valgrind)
        .args(["--tool=callgrind", "--collect-atstart=no"])
        .arg(format!("--toggle-collect=peer::phase_{phase}"))
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(exe)
        .args(["--once", config])
        .output()
        .context("running valgrind")?;
    ensure!(
        out.status.success(),
        "callgrind run of {config} failed: {}",
        String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
    );
    let insns = callgrind_summary(&std::fs::read_to_string(&file).with_context(|| file.display().to_string())?)?;
    let (records, errors) = report::collect(&String::from_utf8_lossy(&out.stdout));
    ensure!(errors.is_empty(), "malformed records: {errors:?}");
    records
        .iter()
        .filter(|r| r.kind == "peer" && r.str("phase") == Some(phase))
        .map(|r| -> Result<Row> {
            Ok(Row {
                config: config.into(),
                library: String::new(),
                phase: phase.into(),
                entries: field(r, "entries")?,
                tlbis: field(r, "tlbis")?,
                desc_writes: field(r, "desc_writes")?,
                table_pages: field(r, "table_pages")?,
                median_ns: 0,
                min_ns: 0,
                max_ns: 0,
                insns: Some(insns),
            })
        })
        .next()
        .context("the callgrind run printed no record for its phase")?
}

/// Adds the instruction count of a callgrind run to its row, refusing a run that did other work
/// than the timing run.
pub fn add_instructions(rows: &mut [Row], once: &Row) -> Result<()> {
    let r = rows
        .iter_mut()
        .find(|r| r.config == once.config && r.phase == once.phase)
        .with_context(|| format!("no timing row for {} {}", once.config, once.phase))?;
    ensure!(
        (r.entries, r.tlbis, r.desc_writes, r.table_pages)
            == (once.entries, once.tlbis, once.desc_writes, once.table_pages),
        "{} {}: the callgrind run did other work than the timing run (entries, TLBIs, writes, table pages: {:?} vs {:?})",
        r.config,
        r.phase,
        (once.entries, once.tlbis, once.desc_writes, once.table_pages),
        (r.entries, r.tlbis, r.desc_writes, r.table_pages)
    );
    r.insns = once.insns;
    Ok(())
}

/// `cargo xtask bench pgtable`.
pub fn run() -> Result<()> {
    let exe = build()?;
    eprintln!("xtask: bench pgtable: timing run (5 interleaved rounds of every configuration)");
    let out = Command::new(&exe).arg("--bench").output().context("running the peer benchmark")?;
    ensure!(out.status.success(), "the peer benchmark failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    let (records, errors) = report::collect(&String::from_utf8_lossy(&out.stdout));
    ensure!(errors.is_empty(), "malformed records: {errors:?}");
    let mut rows = rows(&records)?;
    let dir = workspace_root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let mut configs: Vec<String> = Vec::new();
    for r in &rows {
        if !configs.contains(&r.config) {
            configs.push(r.config.clone());
        }
    }
    let mut text = String::from("benchmark pgtable — host, lib/pgtable against aarch64-paging 0.12\n\n");
    match valgrind() {
        Some(vg) => {
            let total = configs.len() * PHASES.len();
            let mut n = 0;
            for c in &configs {
                for p in PHASES {
                    n += 1;
                    eprintln!("xtask: bench pgtable: callgrind {n}/{total}: {c} {p}");
                    let once = count_instructions(&vg, &exe, &dir, c, p)?;
                    add_instructions(&mut rows, &once)?;
                }
            }
        }
        None => text += "(valgrind not found: no instruction counts; `apt-get install valgrind` adds them)\n\n",
    }
    text += &render(&rows)?;
    println!("{text}");
    let mut jsonl = String::new();
    for r in &rows {
        let v = serde_json::json!({
            "bench": "pgtable", "config": r.config, "library": r.library, "phase": r.phase,
            "entries": r.entries, "tlbis": r.tlbis, "desc_writes": r.desc_writes,
            "table_pages": r.table_pages, "median_ns": r.median_ns, "min_ns": r.min_ns,
            "max_ns": r.max_ns, "insns": r.insns,
        });
        let _ = writeln!(jsonl, "{v}");
    }
    crate::write_file(&dir.join("pgtable.jsonl"), jsonl)?;
    crate::write_file(&dir.join("pgtable.txt"), &text)?;
    eprintln!("xtask: saved target/bench/pgtable.jsonl and .txt");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(config: &str, phase: &str, tlbis: u64, ns: u64, insns: Option<u64>) -> Row {
        Row {
            config: config.into(),
            library: config.into(),
            phase: phase.into(),
            entries: 100,
            tlbis,
            desc_writes: 100,
            table_pages: 3,
            median_ns: ns,
            min_ns: ns,
            max_ns: ns,
            insns,
        }
    }

    fn both(insns: bool) -> Vec<Row> {
        let mut v = Vec::new();
        for p in PHASES {
            let tlbis = if p == "map" { 0 } else { 10 };
            v.push(row(OURS, p, tlbis, 1000, insns.then_some(500)));
            v.push(row(PEER, p, tlbis, 3000, insns.then_some(1000)));
        }
        v
    }

    #[test]
    fn nothing_over_nothing_is_a_dash_not_infinity() {
        assert_eq!(ratio(0.0, 0.0), "-");
        assert_eq!(ratio(5.0, 0.0), "5/0");
        assert_eq!(ratio(3.0, 2.0), "1.50x");
        let t = render(&both(true)).unwrap();
        assert!(!t.contains("inf") && !t.contains("NaN"), "{t}");
        // map issues no TLBI on either side: its TLBI ratio is "-".
        let map = t.lines().find(|l| l.starts_with("map ") && l.contains("3.00x")).expect(&t);
        assert!(map.split_whitespace().any(|c| c == "-"), "{map}");
        assert!(t.lines().any(|l| l.starts_with("whole") && l.contains("2.00x")), "{t}");
    }

    #[test]
    fn instructions_per_entry_and_without_valgrind() {
        let t = render(&both(true)).unwrap();
        let cells = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        let ours = t.lines().find(|l| l.starts_with("map") && l.contains("pgtable-pages")).expect(&t);
        assert_eq!(cells(ours)[8..], ["500", "5.0"], "{t}");
        let whole = t.lines().find(|l| l.starts_with("whole")).expect(&t);
        assert_eq!(cells(whole)[1..3], ["3.00x", "2.00x"], "{t}");
        let t = render(&both(false)).unwrap();
        let ours = t.lines().find(|l| l.starts_with("map") && l.contains("pgtable-pages")).expect(&t);
        assert_eq!(cells(ours)[8..], ["-", "-"], "{t}");
        let whole = t.lines().find(|l| l.starts_with("whole")).expect(&t);
        assert_eq!(cells(whole)[1..3], ["3.00x", "-"], "without instruction counts\n{t}");
    }

    fn record(config: &str, phase: &str) -> String {
        format!(
            "@@report {{\"kind\":\"peer\",\"config\":\"{config}\",\"library\":\"x\",\"phase\":\"{phase}\",\"entries\":1,\"tlbis\":0,\"desc_writes\":1,\"table_pages\":1,\"n\":5,\"median_ns\":1,\"min_ns\":1,\"max_ns\":1}}\n"
        )
    }

    #[test]
    fn a_run_missing_a_phase_or_a_side_is_refused() {
        let mut out = String::new();
        for c in [OURS, PEER] {
            for p in PHASES {
                out += &record(c, p);
            }
        }
        let (recs, _) = report::collect(&out);
        assert_eq!(rows(&recs).unwrap().len(), 6);
        let without_unmap: String =
            out.lines().filter(|l| !(l.contains(PEER) && l.contains("unmap"))).map(|l| l.to_string() + "\n").collect();
        let (recs, _) = report::collect(&without_unmap);
        let e = rows(&recs).unwrap_err().to_string();
        assert!(e.contains("0 rows for aarch64-paging unmap"), "{e}");
        let only_ours: String = out.lines().filter(|l| !l.contains(PEER)).map(|l| l.to_string() + "\n").collect();
        let (recs, _) = report::collect(&only_ours);
        assert!(rows(&recs).unwrap_err().to_string().contains("no rows for aarch64-paging"));
        let twice = out.clone() + &record(OURS, "map");
        let (recs, _) = report::collect(&twice);
        assert!(rows(&recs).unwrap_err().to_string().contains("2 rows for pgtable-pages map"));
    }

    #[test]
    fn a_callgrind_run_that_did_other_work_is_refused() {
        let mut rows = both(false);
        let mut once = row(OURS, "protect", 10, 0, Some(777));
        add_instructions(&mut rows, &once).unwrap();
        assert_eq!(rows.iter().find(|r| r.config == OURS && r.phase == "protect").unwrap().insns, Some(777));
        once.tlbis = 11;
        let e = add_instructions(&mut rows, &once).unwrap_err().to_string();
        assert!(e.contains("other work"), "{e}");
    }

    #[test]
    fn callgrind_summary_line() {
        let text = "version: 1\ncmd: peer --once x\nevents: Ir\nsummary: 207716335\ntotals: 207716335\n";
        assert_eq!(callgrind_summary(text).unwrap(), 207_716_335);
        assert!(callgrind_summary("events: Ir\n").is_err());
    }
}
