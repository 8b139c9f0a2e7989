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

/// A figure of the project's speed goals: one number per machine (or setting), read from the
/// saved `--icount` runs (the host benchmark: its callgrind counts), against its goal.
pub struct FigureGoal {
    pub figure: &'static str,
    /// The saved run it comes from: `target/bench/FILE`.
    pub file: &'static str,
    /// The goal: at most this ([`FigureGoal::at_least`]: at least this).
    pub goal: f64,
    pub at_least: bool,
    pub unit: &'static str,
    /// Ours, per machine or setting, from the saved rows.
    pub read: fn(&Saved) -> Vec<(String, f64)>,
}

impl FigureGoal {
    /// Whether `v` meets the goal.
    pub fn met(&self, v: f64) -> bool {
        if self.at_least {
            v >= self.goal
        } else {
            v <= self.goal
        }
    }
    /// `v` as a share of the goal, 1.0 being the goal and below it met (for an "at least"
    /// goal, the goal over `v`).
    pub fn share(&self, v: f64) -> f64 {
        if self.at_least {
            if v > 0.0 {
                self.goal / v
            } else {
                f64::INFINITY
            }
        } else {
            v / self.goal
        }
    }
}

/// The `median_insns` of the EL0 benchmark's row `case` on each machine, divided by `per`.
fn el0(rows: &Saved, case: &str, per: f64) -> Vec<(String, f64)> {
    rows.iter()
        .filter(|o| s(o, "case") == Some(case))
        .filter_map(|o| Some((s(o, "machine")?.to_string(), f(o, "median_insns")? / per)))
        .collect()
}

/// Instructions per final PTE of the stage-2 split with SKIP_LEVEL3 (the hypervisor's walker):
/// the whole operation's count over the slot's 4 KiB pages, per scenario and backing.
fn split_per_pte(rows: &Saved, scenario: &str) -> Vec<(String, f64)> {
    rows.iter()
        .filter(|o| s(o, "walker") == Some("skip_level3") && s(o, "scenario") == Some(scenario))
        .filter(|o| matches!(s(o, "backing"), Some("2M" | "1G")))
        .filter_map(|o| {
            let ptes = f(o, "slot_gib")? * 262_144.0;
            Some((format!("{} {} backing", s(o, "machine")?, s(o, "backing")?), f(o, "insns")? / ptes))
        })
        .collect()
}

/// The speed goals, each figure against its goal (`bench summary` prints them in one table and
/// one plot, `target/bench/goals.svg`).
pub const FIGURE_GOALS: &[FigureGoal] = &[
    FigureGoal {
        figure: "mprotect NONE->RW 512 pages, per page",
        file: "mprotect-icount.jsonl",
        goal: 4.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "NONE->RW 512 pages, flush elision", 512.0),
    },
    FigureGoal {
        figure: "mprotect RO->RW 512 pages, per page",
        file: "mprotect-icount.jsonl",
        goal: 4.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "RO->RW 512 pages, lazy_relax", 512.0),
    },
    FigureGoal {
        figure: "mprotect RW->NONE 512 pages, per page",
        file: "mprotect-icount.jsonl",
        goal: 4.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "RW->NONE 512 pages, flush elision", 512.0),
    },
    FigureGoal {
        figure: "page fault (first touch), whole",
        file: "mprotect-icount.jsonl",
        goal: 350.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "page fault (untouched anonymous page), pgtlab", 1.0),
    },
    FigureGoal {
        figure: "getcpu (null system call)",
        file: "mprotect-icount.jsonl",
        goal: 60.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "getcpu (null system call), pgtlab", 1.0),
    },
    FigureGoal {
        figure: "sched_yield round trip",
        file: "mprotect-icount.jsonl",
        goal: 600.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "sched_yield round trip (2 tasks, 1 CPU), pgtlab", 1.0),
    },
    FigureGoal {
        figure: "stage-2 split enable, per final PTE",
        file: "split-icount.jsonl",
        goal: 1.0,
        at_least: false,
        unit: "instructions",
        read: |r| split_per_pte(r, "enable"),
    },
    FigureGoal {
        figure: "stage-2 split manual clear, per final PTE",
        file: "split-icount.jsonl",
        goal: 1.0,
        at_least: false,
        unit: "instructions",
        read: |r| split_per_pte(r, "manual-clear"),
    },
    FigureGoal {
        figure: "lib/pgtable one-page protect vs aarch64-paging, fewer instructions",
        file: "pgtable.jsonl",
        goal: 3.0,
        at_least: true,
        unit: "x",
        read: |r| {
            let protect = |config: &str| {
                r.iter()
                    .find(|o| s(o, "config") == Some(config) && s(o, "phase") == Some("protect"))
                    .and_then(|o| f(o, "insns"))
            };
            match (protect("aarch64-paging"), protect("pgtable-pages")) {
                (Some(peer), Some(ours)) if ours > 0.0 => vec![("host (callgrind)".into(), peer / ours)],
                _ => Vec::new(),
            }
        },
    },
    FigureGoal {
        figure: "contpte fold without TLBI (BBML2)",
        file: "contpte-icount.jsonl",
        goal: 300.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "convert (fold), no TLBI (BBML2)", 1.0),
    },
    FigureGoal {
        figure: "contpte unfold without TLBI (BBML2)",
        file: "contpte-icount.jsonl",
        goal: 300.0,
        at_least: false,
        unit: "instructions",
        read: |r| el0(r, "convert (unfold), no TLBI (BBML2)", 1.0),
    },
];

/// One measured row of [`FIGURE_GOALS`]: figure, machine, ours, the goal.
pub struct GoalRow {
    pub goal: &'static FigureGoal,
    pub machine: String,
    pub value: f64,
}

/// Every figure of [`FIGURE_GOALS`] the saved runs in `dir` hold, and the figures none does.
pub fn goal_rows(dir: &Path) -> Result<(Vec<GoalRow>, Vec<&'static str>)> {
    let mut rows = Vec::new();
    let mut missing = Vec::new();
    for g in FIGURE_GOALS {
        let saved = load(&dir.join(g.file))?;
        let mine = (g.read)(&saved);
        if mine.is_empty() {
            missing.push(g.figure);
        }
        rows.extend(mine.into_iter().map(|(machine, value)| GoalRow { goal: g, machine, value }));
    }
    Ok((rows, missing))
}

/// The table of every figure against its goal.
pub fn goal_table(rows: &[GoalRow], missing: &[&str]) -> String {
    let mut out =
        String::from("figure | machine | now | goal | share of goal | met\n--- | --- | --- | --- | --- | ---\n");
    for r in rows {
        let g = r.goal;
        let unit = if g.unit == "x" { "x".to_string() } else { format!(" {}", g.unit) };
        out += &format!(
            "{} | {} | {:.2}{unit} | {} {}{unit} | {:.2} | {}\n",
            g.figure,
            r.machine,
            r.value,
            if g.at_least { ">=" } else { "<=" },
            g.goal,
            g.share(r.value),
            if g.met(r.value) { "yes" } else { "no" }
        );
    }
    for m in missing {
        out += &format!("{m} | - | not run (no saved results) | - | - | -\n");
    }
    out
}

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
