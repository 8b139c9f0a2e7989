//! The `bench all` summary: each mechanism of the project against its seed's published figure
//! and its goal, read from the saved runs.

use super::rows::{f, load, s};
use anyhow::Result;
use serde_json::{Map, Value};
use std::path::Path;

/// Saved rows of one benchmark run.
pub type Saved = [Map<String, Value>];

/// Our figure, and whether it meets the goal (`None`: cannot tell from what was run).
pub type Measured = Option<(String, Option<bool>)>;

/// A mechanism of the project, its seed's figure and its goal, and how to read ours.
pub struct Goal {
    pub mechanism: &'static str,
    pub bench: &'static str,
    pub seed: &'static str,
    pub goal: &'static str,
    /// From the saved wall and icount runs (either may be missing): ours, and whether the goal
    /// is met (`None`: cannot tell from what was run).
    pub measure: fn(&Saved, &Saved) -> Measured,
}

fn find<'a>(rows: &'a [Map<String, Value>], machine: &str, case: &str) -> Option<&'a Map<String, Value>> {
    rows.iter().find(|o| s(o, "machine") == Some(machine) && s(o, "case") == Some(case))
}

/// The split goal from `bench split` (icount when saved, else wall): the worst SKIP_LEVEL3 ratio
/// of the six cases (enable and manual clear on `4K`, `2M` and `1G` backing). The
/// `4K-rw` case (every PTE writable, KVM's first enable) is shown beside it, not judged: its
/// cost is the write-protect of every page, which no split walker can skip.
fn split_measure(wall: &Saved, icount: &Saved) -> Measured {
    let rows = if icount.is_empty() { wall } else { icount };
    let worst = |rw: bool| {
        rows.iter()
            .filter(|o| s(o, "walker") == Some("skip_level3") && (s(o, "backing") == Some("4K-rw")) == rw)
            .filter_map(|o| f(o, "ratio"))
            .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))))
    };
    let six = worst(false)?;
    let mut text = format!("worst ratio {six:.3} ({})", if icount.is_empty() { "wall" } else { "icount" });
    if let Some(rw) = worst(true) {
        text += &format!("; 4K-rw {rw:.3}");
    }
    Some((text, Some(six <= 0.50)))
}

/// The flush-elision goal from `bench mprotect`: every "NONE->RW ..., flush elision" row issues
/// no TLBI, and the worst time ratio (wall; icount when no wall run was saved) of those rows and
/// of the "RO->RW + touch ..., lazy_relax" rows (the lazy relaxation with its spurious faults).
fn mprotect_measure(wall: &Saved, icount: &Saved) -> Measured {
    let (rows, mode, key) =
        if wall.is_empty() { (icount, "icount", "ratio_insns") } else { (wall, "wall", "ratio_ns") };
    let worst = |prefix: &str, suffix: &str| -> Option<(f64, f64)> {
        rows.iter()
            .filter(|o| s(o, "case").is_some_and(|c| c.starts_with(prefix) && c.ends_with(suffix)))
            .map(|o| Some((f(o, key)?, f(o, "tlbi_per_step")?)))
            .try_fold(None, |a: Option<(f64, f64)>, r| {
                let (r, t) = r?;
                Some(Some(a.map_or((r, t), |(ar, at)| (ar.max(r), at.max(t)))))
            })?
    };
    let (elide, tlbis) = worst("NONE->RW ", ", flush elision")?;
    let lazy = worst("RO->RW + touch ", ", lazy_relax").map(|(r, _)| r);
    let mut text = format!("NONE->RW worst ratio {elide:.3}, {tlbis:.1} TLBIs/step");
    if let Some(l) = lazy {
        text += &format!("; lazy RO->RW+touch worst {l:.3}");
    }
    text += &format!(" ({mode})");
    let met = tlbis == 0.0 && elide <= 0.80 && lazy.is_none_or(|l| l <= 0.60);
    Some((text, Some(met)))
}

/// A goal made of figures that must each stay at or below a limit: (figure, limit, its text).
/// Nothing measured: `None`. The texts of those measured; met when all are measured and within
/// their limits, missed as soon as one measured figure is over, otherwise cannot tell.
fn within_limits(figures: &[(Option<f64>, f64, Option<String>)]) -> Measured {
    if figures.iter().all(|(v, ..)| v.is_none()) {
        return None;
    }
    let text: Vec<&str> = figures.iter().filter_map(|(_, _, t)| t.as_deref()).collect();
    let over = figures.iter().any(|(v, limit, _)| v.is_some_and(|v| v > *limit));
    let all = figures.iter().all(|(v, ..)| v.is_some());
    let met = if over { Some(false) } else { all.then_some(true) };
    Some((text.join(", "), met))
}

/// The mechanisms with their seeds (DESIGN.md section 3) and goals (the issues).
pub const GOALS: &[Goal] = &[
    Goal {
        mechanism: "flush elision (pte_needs_flush)",
        bench: "mprotect",
        seed: "NONE->RW 3.2 -> 2.85 us (-12.3%)",
        goal: "NONE->RW: 0 TLBIs, ratio <= 0.80; lazy RO->RW (+ touch) <= 0.60",
        measure: mprotect_measure,
    },
    Goal {
        mechanism: "stage-2 split walker (SKIP_LEVEL3)",
        bench: "split",
        seed: "-35.5/-11.9/-14.5% (enable), -26.4/-12.1/-13.9% (clear)",
        goal: "worst whole-op ratio of the six <= 0.50",
        measure: split_measure,
    },
    Goal {
        mechanism: "BBML2-aware linear map",
        bench: "linear-map",
        seed: "~0.2% of RAM in page tables saved; kernel TLB MPKI -28.5%",
        goal: "block layout at its table-page limit (vs_limit 1.0)",
        measure: |wall, icount| {
            let rows = if wall.is_empty() { icount } else { wall };
            let pte = find(rows, "max-4G", "table pages: PTE-only (rodata=full, no BBML2)")?;
            let blk = find(rows, "max-4G", "table pages: blocks+contiguous, BBML2 live splits")?;
            let saved = f(pte, "pct_of_ram")? - f(blk, "pct_of_ram")?;
            let vs = f(blk, "vs_limit")?;
            Some((format!("saves {saved:.3}% of RAM (4 GiB), blocks at {vs:.2}x the limit"), Some(vs <= 1.0)))
        },
    },
    Goal {
        mechanism: "contpte",
        bench: "contpte",
        seed: "-80% cost of the convert",
        goal: "no-TLBI/with-TLBI <= 0.15 (wall, max); <= 400 instructions",
        measure: |wall, icount| {
            let case = |step: &str| format!("convert ({step}), no TLBI (BBML2)");
            let ratio = ["unfold", "fold"]
                .iter()
                .filter_map(|st| f(find(wall, "max", &case(st))?, "vs_with_tlbi_ns"))
                .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))));
            let insns = ["unfold", "fold"]
                .iter()
                .filter_map(|st| f(find(icount, "max", &case(st))?, "median_insns"))
                .fold(None, |a: Option<f64>, r| Some(a.map_or(r, |a| a.max(r))));
            within_limits(&[
                (ratio, 0.15, ratio.map(|r| format!("ratio {r:.3} (wall)"))),
                (insns, 400.0, insns.map(|i| format!("{i:.0} instructions"))),
            ])
        },
    },
    Goal {
        mechanism: "per-CPU kernel page tables",
        bench: "percpu",
        seed: "13-18% less system time (kernel build, 160 cores)",
        goal: "this_cpu_add <= 0.5x instructions; context switch <= +5%",
        measure: |wall, icount| {
            let ratio = |rows: &Saved, case: &str, k: &str| f(find(rows, "max-4cpu", case)?, k);
            let add = ratio(icount, "this_cpu_add, window", "ratio_insns");
            let switch = ratio(wall, "context switch, window", "ratio_ns");
            within_limits(&[
                (add, 0.5, add.map(|a| format!("this_cpu_add {a:.3}x instructions"))),
                (switch, 1.05, switch.map(|c| format!("context switch {c:.3}x (wall)"))),
            ])
        },
    },
    Goal {
        mechanism: "guest exits (cost of the hypervisor)",
        bench: "exits",
        seed: "-",
        goal: "-",
        measure: |wall, icount| {
            let w = find(wall, "max", "null hypercall").and_then(|o| f(o, "median_ns"));
            let i = find(icount, "max", "null hypercall").and_then(|o| f(o, "median_insns"));
            if w.is_none() && i.is_none() {
                return None;
            }
            Some((
                format!(
                    "null hypercall {}{}",
                    w.map_or(String::new(), |w| format!("{w:.0} ns ")),
                    i.map_or(String::new(), |i| format!("{i:.0} instructions"))
                ),
                None,
            ))
        },
    },
];

/// The summary table from the saved runs in `dir` (`NAME.jsonl` wall, `NAME-icount.jsonl`).
pub fn summary(dir: &Path, benches_here: &[&str]) -> Result<String> {
    let mut out = String::from(
        "mechanism | benchmark | seed (published) | goal | ours | goal met\n--- | --- | --- | --- | --- | ---\n",
    );
    for g in GOALS {
        let wall = load(&dir.join(format!("{}.jsonl", g.bench)))?;
        let icount = load(&dir.join(format!("{}-icount.jsonl", g.bench)))?;
        let (ours, met) = if !benches_here.contains(&g.bench) {
            ("no benchmark yet".to_string(), "-".to_string())
        } else {
            match (g.measure)(&wall, &icount) {
                None => ("not run (no saved results)".into(), "-".into()),
                Some((t, None)) => (t, "cannot tell".into()),
                Some((t, Some(true))) => (t, "yes".into()),
                Some((t, Some(false))) => (t, "no".into()),
            }
        };
        out += &format!("{} | {} | {} | {} | {ours} | {met}\n", g.mechanism, g.bench, g.seed, g.goal);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn figures_within_limits() {
        let t = |v: Option<f64>| v.map(|v| format!("{v}"));
        let goal = |a: Option<f64>, b: Option<f64>| within_limits(&[(a, 0.5, t(a)), (b, 1.05, t(b))]);
        assert_eq!(goal(None, None), None);
        assert_eq!(goal(Some(0.2), Some(1.0)), Some(("0.2, 1".into(), Some(true))));
        assert_eq!(goal(Some(0.2), Some(1.1)).unwrap().1, Some(false));
        assert_eq!(goal(Some(0.6), None), Some(("0.6".into(), Some(false))));
        assert_eq!(goal(None, Some(1.0)), Some(("1".into(), None)));
    }

    #[test]
    fn the_flush_elision_goal_reads_the_mprotect_rows() {
        let row = |case: &str, ratio: f64, tlbi: f64| {
            obj(serde_json::json!({"machine":"max-1cpu","case":case,"ratio_ns":ratio,"tlbi_per_step":tlbi}))
        };
        let good = vec![
            row("NONE->RW 1 pages, baseline (flush everything)", 1.0, 1.0),
            row("NONE->RW 1 pages, flush elision", 0.7, 0.0),
            row("NONE->RW 512 pages, flush elision", 0.79, 0.0),
            row("RO->RW + touch 1 pages, lazy_relax", 0.5, 0.0),
        ];
        let (text, met) = mprotect_measure(&good, &[]).unwrap();
        assert_eq!(met, Some(true), "{text}");
        assert!(text.contains("worst ratio 0.790") && text.contains("(wall)"), "{text}");
        let mut flushed = good.clone();
        flushed.push(row("NONE->RW 16 pages, flush elision", 0.5, 1.0));
        assert_eq!(mprotect_measure(&flushed, &[]).unwrap().1, Some(false));
        let mut slow_lazy = good.clone();
        slow_lazy.push(row("RO->RW + touch 16 pages, lazy_relax", 0.61, 0.0));
        assert_eq!(mprotect_measure(&slow_lazy, &[]).unwrap().1, Some(false));
        assert_eq!(mprotect_measure(&[], &[]), None);
    }

    #[test]
    fn the_split_goal_judges_the_six_cases_and_shows_4k_rw_beside() {
        let row = |backing: &str, walker: &str, ratio: f64| {
            obj(serde_json::json!({"machine":"max-4G","backing":backing,"walker":walker,"ratio":ratio}))
        };
        let mut rows = vec![
            row("2M", "baseline", 1.0),
            row("2M", "skip_level3", 0.47),
            row("1G", "skip_level3", 0.35),
            row("4K-rw", "skip_level3", 0.72),
        ];
        let (text, met) = split_measure(&[], &rows).unwrap();
        assert_eq!(met, Some(true), "{text}");
        assert_eq!(text, "worst ratio 0.470 (icount); 4K-rw 0.720");
        rows.push(row("4K", "skip_level3", 0.51));
        let (text, met) = split_measure(&rows, &[]).unwrap();
        assert_eq!((text.as_str(), met), ("worst ratio 0.510 (wall); 4K-rw 0.720", Some(false)));
        assert_eq!(split_measure(&[row("4K-rw", "skip_level3", 0.3)], &[]), None, "none of the six: no verdict");
    }

    #[test]
    fn the_summary_reads_saved_runs_and_says_what_is_missing() {
        let dir = std::env::temp_dir().join(format!("xtask-summary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("split-icount.jsonl"),
            "{\"machine\":\"max-4G\",\"walker\":\"skip_level3\",\"ratio\":0.6}\n{\"machine\":\"max-4G\",\"walker\":\"skip_level3\",\"ratio\":0.4}\n",
        )
        .unwrap();
        let t = summary(&dir, &["split", "contpte"]).unwrap();
        let split = t.lines().find(|l| l.contains("| split |")).unwrap();
        assert!(split.contains("worst ratio 0.600 (icount)") && split.ends_with("| no"), "{split}");
        assert!(t.lines().find(|l| l.contains("| mprotect |")).unwrap().contains("no benchmark yet"));
        assert!(t.lines().find(|l| l.contains("| contpte |")).unwrap().contains("not run"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
