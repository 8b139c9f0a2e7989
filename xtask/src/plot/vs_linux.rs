//! The EL0 benchmark against Linux (`bench mprotect --peer linux[,linux-newest]`): the ratio of
//! every row to each Linux peer's, judged against [`PEER_GOAL`].
//!
//! A saved row's `peer` names its side: `pgtlab`, or a Linux peer by its kernel's version
//! (`linux-6.12`, `linux-7.2`); a file saved before the peers were told apart calls its one
//! Linux side `linux` (Debian's backports kernel), and is read the same way.

use super::rows::{load, s};
use crate::report;
use abi::report::ParsedRecord;
use anyhow::Result;
use std::path::Path;

/// The goal of every row of an EL0 benchmark against Linux: at most this many times Linux's
/// figure (instructions under `--icount`).
pub const PEER_GOAL: f64 = 0.25;

/// The project's side's `peer` value in the rows; every other value is a Linux peer.
pub const OURS: &str = "pgtlab";

/// One Linux peer's rows on one machine.
#[derive(Debug, Clone)]
pub struct PeerRun {
    /// The machine's label.
    pub machine: String,
    /// The peer's label (`linux-7.2`).
    pub peer: String,
    pub rows: Vec<ParsedRecord>,
}

/// Saved rows split by side: ours per machine, and each Linux peer per machine (in the
/// order first seen).
pub fn split_sides(
    saved: Vec<serde_json::Map<String, serde_json::Value>>,
) -> (Vec<(String, Vec<ParsedRecord>)>, Vec<PeerRun>) {
    let mut ours: Vec<(String, Vec<ParsedRecord>)> = Vec::new();
    let mut theirs: Vec<PeerRun> = Vec::new();
    for o in saved {
        let m = s(&o, "machine").unwrap_or("").to_string();
        let side = s(&o, "peer").unwrap_or(OURS).to_string();
        let rec = ParsedRecord { kind: "bench".into(), fields: o };
        if side == OURS {
            match ours.iter_mut().find(|(l, _)| *l == m) {
                Some((_, v)) => v.push(rec),
                None => ours.push((m, vec![rec])),
            }
        } else {
            match theirs.iter_mut().find(|r| r.machine == m && r.peer == side) {
                Some(r) => r.rows.push(rec),
                None => theirs.push(PeerRun { machine: m, peer: side, rows: vec![rec] }),
            }
        }
    }
    (ours, theirs)
}

/// The Linux peers of `runs`, in the order first seen.
pub fn peer_names(runs: &[PeerRun]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in runs {
        if !names.contains(&r.peer) {
            names.push(r.peer.clone());
        }
    }
    names
}

/// The EL0 benchmark's saved runs with a Linux side: per mode, Linux peer and machine, how many
/// rows are within [`PEER_GOAL`] and the worst; then every row's ratio per machine and peer
/// (instructions when an `--icount` run was saved, else time).
pub fn peer_summary(dir: &Path) -> Result<String> {
    let mut out = String::from("mode | peer | machine | rows | within the goal | worst row | worst ratio | goal met\n--- | --- | --- | --- | --- | --- | --- | ---\n");
    let mut detail = String::new();
    let mut any = false;
    for icount in [true, false] {
        let stem = if icount { "mprotect-icount" } else { "mprotect" };
        let (ours, theirs) = split_sides(load(&dir.join(format!("{stem}.jsonl")))?);
        if theirs.is_empty() {
            continue;
        }
        any = true;
        let key = peer_key(icount);
        let mode = if icount { "icount (instructions)" } else { "wall (time)" };
        for peer in peer_names(&theirs) {
            for (machine, o) in &ours {
                let Some(t) = theirs.iter().find(|r| r.peer == peer && r.machine == *machine) else { continue };
                let ratios: Vec<(String, f64)> = peer_pairs(o, &t.rows)
                    .into_iter()
                    .filter_map(|(row, a, b)| {
                        let (a, b) = (a.u64(key)? as f64, b.u64(key)? as f64);
                        (b > 0.0).then(|| (row, a / b))
                    })
                    .collect();
                let within = ratios.iter().filter(|(_, r)| *r <= PEER_GOAL).count();
                let worst = ratios.iter().cloned().fold(None, |w: Option<(String, f64)>, (n, r)| match w {
                    Some((_, wr)) if wr >= r => w,
                    _ => Some((n, r)),
                });
                let (wn, wr) = worst.map_or(("-".to_string(), "-".to_string()), |(n, r)| (n, format!("{r:.3}")));
                let met = if ratios.is_empty() {
                    "-"
                } else if within == ratios.len() {
                    "yes"
                } else {
                    "no"
                };
                out += &format!("{mode} | {peer} | {machine} | {} | {within} | {wn} | {wr} | {met}\n", ratios.len());
            }
        }
        let ours: Vec<(&str, Vec<ParsedRecord>)> = ours.iter().map(|(m, v)| (m.as_str(), v.clone())).collect();
        detail += &format!("\npgtlab / Linux per row, {mode}:\n{}", peer_side_by_side(&ours, &theirs, icount));
    }
    if !any {
        return Ok("not run (no saved run of bench mprotect --peer linux)\n".into());
    }
    Ok(out + &detail)
}

/// The figure a peer comparison reads: instructions under `--icount`, else time.
fn peer_key(icount: bool) -> &'static str {
    if icount {
        "median_insns"
    } else {
        "median_ns"
    }
}

/// The rows both sides measured: (row, our default setting's record, theirs), in our order.
pub fn peer_pairs<'a>(
    ours: &'a [ParsedRecord],
    theirs: &'a [ParsedRecord],
) -> Vec<(String, &'a ParsedRecord, &'a ParsedRecord)> {
    let default = |r: &&ParsedRecord| r.fields.get("default").and_then(|v| v.as_bool()) == Some(true);
    ours.iter()
        .filter(default)
        .filter_map(|o| {
            let row = o.str("row")?;
            if row.starts_with("measurement overhead") {
                return None;
            }
            let t = theirs.iter().filter(default).find(|t| t.str("row") == Some(row))?;
            Some((row.to_string(), o, t))
        })
        .collect()
}

/// A ratio cell: `a / b` to three places, `-` without a figure to divide by.
fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.3}", a as f64 / b as f64)
    }
}

/// One machine: each row's figure on our side and on each Linux peer (`theirs`: label and
/// rows), the ratio to each, and what each side's measurement cost (subtracted from its
/// figures). A row is shown when at least one peer measured it.
pub fn peer_table(ours: &[ParsedRecord], theirs: &[(&str, &[ParsedRecord])], icount: bool) -> String {
    let key = peer_key(icount);
    let unit = if icount { "insns" } else { "ns" };
    let over = if icount { "overhead_insns" } else { "overhead_ns" };
    let mut header: Vec<String> = vec!["row".into(), "pgtlab setting".into(), format!("pgtlab {unit}")];
    for (peer, _) in theirs {
        header.push(format!("{peer} {unit}"));
        header.push(format!("pgtlab/{peer}"));
    }
    header.push(format!("pgtlab overhead {unit}"));
    for (peer, _) in theirs {
        header.push(format!("{peer} overhead {unit}"));
    }
    let pairs: Vec<Vec<(String, &ParsedRecord, &ParsedRecord)>> =
        theirs.iter().map(|(_, t)| peer_pairs(ours, t)).collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for o in ours {
        let Some(row) = o.str("row") else { continue };
        let found: Vec<Option<&ParsedRecord>> = pairs
            .iter()
            .map(|p| p.iter().find(|(r, mine, _)| r == row && std::ptr::eq(*mine, o)).map(|(_, _, t)| *t))
            .collect();
        if found.iter().all(Option::is_none) {
            continue;
        }
        let a = o.u64(key).unwrap_or(0);
        let mut cells = vec![row.to_string(), o.str("variant").unwrap_or("").to_string(), a.to_string()];
        for t in &found {
            match t {
                Some(t) => {
                    let b = t.u64(key).unwrap_or(0);
                    cells.push(b.to_string());
                    cells.push(ratio(a, b));
                }
                None => cells.extend(["-".to_string(), "-".to_string()]),
            }
        }
        cells.push(o.u64(over).unwrap_or(0).to_string());
        for t in &found {
            cells.push(t.map_or("-".into(), |t| t.u64(over).unwrap_or(0).to_string()));
        }
        rows.push(cells);
    }
    report::aligned(&header, &rows, 2)
}

/// Every machine and Linux peer: the pgtlab / Linux ratio of each row, a column per machine
/// and peer (`max-1cpu / linux-7.2`).
pub fn peer_side_by_side(ours: &[(&str, Vec<ParsedRecord>)], theirs: &[PeerRun], icount: bool) -> String {
    let key = peer_key(icount);
    let mut names: Vec<String> = Vec::new();
    let mut cols: Vec<(String, Vec<(String, f64)>)> = Vec::new();
    for peer in peer_names(theirs) {
        for (label, o) in ours {
            let Some(t) = theirs.iter().find(|r| r.peer == peer && r.machine == *label) else { continue };
            let mut col = Vec::new();
            for (row, a, b) in peer_pairs(o, &t.rows) {
                let (a, b) = (a.u64(key).unwrap_or(0), b.u64(key).unwrap_or(0));
                if b > 0 {
                    col.push((row.clone(), a as f64 / b as f64));
                }
                if !names.contains(&row) {
                    names.push(row);
                }
            }
            cols.push((format!("{label} / {peer}"), col));
        }
    }
    let mut header = vec!["row".to_string()];
    header.extend(cols.iter().map(|(l, _)| l.clone()));
    let rows: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            let mut r = vec![n.clone()];
            for (_, col) in &cols {
                r.push(col.iter().find(|(row, _)| row == n).map_or("-".into(), |(_, v)| format!("{v:.3}")));
            }
            r
        })
        .collect();
    report::aligned(&header, &rows, 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::rows::{rows, Mode};

    #[test]
    fn a_run_with_a_peer_has_a_bar_per_side() {
        let jsonl = "{\"machine\":\"max\",\"case\":\"NONE->RW 1 pages, flush elision\",\"row\":\"NONE->RW 1 pages\",\"peer\":\"pgtlab\",\"default\":true,\"median_insns\":100}\n\
                     {\"machine\":\"max\",\"case\":\"NONE->RW 1 pages, baseline\",\"row\":\"NONE->RW 1 pages\",\"peer\":\"pgtlab\",\"default\":false,\"median_insns\":150}\n\
                     {\"machine\":\"max\",\"case\":\"NONE->RW 1 pages, linux\",\"row\":\"NONE->RW 1 pages\",\"peer\":\"linux\",\"default\":true,\"median_insns\":400}\n";
        let r = rows("mprotect", jsonl, Mode::Icount).unwrap();
        let bars: Vec<(&str, &str, f64)> = r.iter().map(|r| (r.group.as_str(), r.setting.as_str(), r.median)).collect();
        assert_eq!(bars, [("NONE->RW 1 pages", "pgtlab", 100.0), ("NONE->RW 1 pages", "linux", 400.0)]);
        let without: String = jsonl.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(rows("mprotect", &without, Mode::Icount).unwrap().len(), 2, "no peer: every setting");
        let dir = std::env::temp_dir().join(format!("xtask-peer-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(peer_summary(&dir).unwrap().starts_with("not run"));
        std::fs::write(dir.join("mprotect-icount.jsonl"), jsonl).unwrap();
        let t = peer_summary(&dir).unwrap();
        // A file saved before the peers were labelled: its one Linux side is `linux`.
        assert!(t.contains("icount (instructions) | linux | max | 1 | 1 | NONE->RW 1 pages | 0.250 | yes"), "{t}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Both Linux peers of one run: a summary line per peer and machine, judged each on its
    /// own, and a ratio column per machine and peer.
    #[test]
    fn the_summary_has_each_linux_peer() {
        let line = |machine: &str, peer: &str, row: &str, insns: u64| {
            format!("{{\"machine\":\"{machine}\",\"case\":\"{row}, x\",\"row\":\"{row}\",\"peer\":\"{peer}\",\"default\":true,\"median_insns\":{insns}}}\n")
        };
        let mut jsonl = String::new();
        for m in ["max-1cpu", "a76-1cpu"] {
            jsonl += &line(m, "pgtlab", "getcpu", 100);
            jsonl += &line(m, "pgtlab", "NONE->RW 1 pages", 100);
            jsonl += &line(m, "linux-6.12", "getcpu", 1000);
            jsonl += &line(m, "linux-6.12", "NONE->RW 1 pages", 500);
            jsonl += &line(m, "linux-7.2", "getcpu", 1000);
            jsonl += &line(m, "linux-7.2", "NONE->RW 1 pages", 200);
        }
        let dir = std::env::temp_dir().join(format!("xtask-peer-summary-2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("mprotect-icount.jsonl"), &jsonl).unwrap();
        let t = peer_summary(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        for m in ["max-1cpu", "a76-1cpu"] {
            assert!(
                t.contains(&format!(
                    "icount (instructions) | linux-6.12 | {m} | 2 | 2 | NONE->RW 1 pages | 0.200 | yes"
                )),
                "{t}"
            );
            assert!(
                t.contains(&format!("icount (instructions) | linux-7.2 | {m} | 2 | 1 | NONE->RW 1 pages | 0.500 | no")),
                "{t}"
            );
        }
        let header = t.lines().find(|l| l.starts_with("row")).unwrap();
        let cols: Vec<&str> = header.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(
            cols,
            ["row", "max-1cpu / linux-6.12", "a76-1cpu / linux-6.12", "max-1cpu / linux-7.2", "a76-1cpu / linux-7.2"]
        );
    }
}
