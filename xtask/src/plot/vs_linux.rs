//! The EL0 benchmark against Linux (`bench mprotect --peer linux`): the ratio of every row to
//! Linux's, judged against [`PEER_GOAL`].

use super::rows::{load, s};
use crate::report;
use abi::report::ParsedRecord;
use anyhow::Result;
use std::path::Path;

/// The goal of every row of an EL0 benchmark against Linux: at most this many times Linux's
/// figure (instructions under `--icount`).
pub const PEER_GOAL: f64 = 0.25;

/// The EL0 benchmark's saved runs with a Linux side: per mode and machine, how many rows are
/// within [`PEER_GOAL`] and the worst; then every row's ratio per machine (instructions when
/// an `--icount` run was saved, else time).
pub fn peer_summary(dir: &Path) -> Result<String> {
    let mut out = String::from("mode | machine | rows | within the goal | worst row | worst ratio | goal met\n--- | --- | --- | --- | --- | --- | ---\n");
    let mut detail = String::new();
    let mut any = false;
    for icount in [true, false] {
        let stem = if icount { "mprotect-icount" } else { "mprotect" };
        let saved = load(&dir.join(format!("{stem}.jsonl")))?;
        let mut per_side: [Vec<(String, Vec<ParsedRecord>)>; 2] = [Vec::new(), Vec::new()];
        for o in saved {
            let side = usize::from(s(&o, "peer") == Some("linux"));
            let m = s(&o, "machine").unwrap_or("").to_string();
            let rec = ParsedRecord { kind: "bench".into(), fields: o };
            match per_side[side].iter_mut().find(|(l, _)| *l == m) {
                Some((_, v)) => v.push(rec),
                None => per_side[side].push((m, vec![rec])),
            }
        }
        if per_side[1].is_empty() {
            continue;
        }
        any = true;
        let key = if icount { "median_insns" } else { "median_ns" };
        let mode = if icount { "icount (instructions)" } else { "wall (time)" };
        for (machine, ours) in &per_side[0] {
            let Some((_, theirs)) = per_side[1].iter().find(|(m, _)| m == machine) else { continue };
            let ratios: Vec<(String, f64)> = peer_pairs(ours, theirs)
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
            out += &format!("{mode} | {machine} | {} | {within} | {wn} | {wr} | {met}\n", ratios.len());
        }
        let ours: Vec<(&str, Vec<ParsedRecord>)> = per_side[0].iter().map(|(m, v)| (m.as_str(), v.clone())).collect();
        let theirs: Vec<(&str, Vec<ParsedRecord>)> = per_side[1].iter().map(|(m, v)| (m.as_str(), v.clone())).collect();
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

/// One machine: each row's figure on both sides, their ratio, and what each side's
/// measurement cost (subtracted from its figures).
pub fn peer_table(ours: &[ParsedRecord], theirs: &[ParsedRecord], icount: bool) -> String {
    let key = peer_key(icount);
    let unit = if icount { "insns" } else { "ns" };
    let over = if icount { "overhead_insns" } else { "overhead_ns" };
    let header: Vec<String> = vec![
        "row".into(),
        "pgtlab setting".into(),
        format!("pgtlab {unit}"),
        format!("linux {unit}"),
        "pgtlab/linux".into(),
        format!("pgtlab overhead {unit}"),
        format!("linux overhead {unit}"),
    ];
    let rows: Vec<Vec<String>> = peer_pairs(ours, theirs)
        .into_iter()
        .map(|(row, o, t)| {
            let (a, b) = (o.u64(key).unwrap_or(0), t.u64(key).unwrap_or(0));
            vec![
                row,
                o.str("variant").unwrap_or("").to_string(),
                a.to_string(),
                b.to_string(),
                if b == 0 { "-".into() } else { format!("{:.3}", a as f64 / b as f64) },
                o.u64(over).unwrap_or(0).to_string(),
                t.u64(over).unwrap_or(0).to_string(),
            ]
        })
        .collect();
    report::aligned(&header, &rows, 2)
}

/// Every machine: the pgtlab / Linux ratio of each row.
pub fn peer_side_by_side(
    ours: &[(&str, Vec<ParsedRecord>)],
    theirs: &[(&str, Vec<ParsedRecord>)],
    icount: bool,
) -> String {
    let key = peer_key(icount);
    let mut names: Vec<String> = Vec::new();
    let mut cols: Vec<(&str, Vec<(String, f64)>)> = Vec::new();
    for (label, o) in ours {
        let Some((_, t)) = theirs.iter().find(|(l, _)| l == label) else { continue };
        let mut col = Vec::new();
        for (row, a, b) in peer_pairs(o, t) {
            let (a, b) = (a.u64(key).unwrap_or(0), b.u64(key).unwrap_or(0));
            if b > 0 {
                col.push((row.clone(), a as f64 / b as f64));
            }
            if !names.contains(&row) {
                names.push(row);
            }
        }
        cols.push((label, col));
    }
    let mut header = vec!["row".to_string()];
    header.extend(cols.iter().map(|(l, _)| l.to_string()));
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
        assert!(t.contains("icount (instructions) | max | 1 | 1 | NONE->RW 1 pages | 0.250 | yes"), "{t}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
