//! Benchmark results beyond the tables: an SVG plot per benchmark run, the change against an
//! earlier run with a verdict per row, and the `bench all` summary of each mechanism against
//! its seed's published figure and its goal.
//!
//! A benchmark's rows (`target/bench/NAME[-icount].jsonl`, one JSON object per row) carry a
//! `machine`, a `case` and timing fields (`median_ns`, `p10_ns`, `p90_ns`, `spread`,
//! `median_insns`; the split benchmark `median_us`, `spread`, `insns`). Each row is one bar:
//! grouped by machine and workload, one colour per mechanism setting (the variant the row
//! measures), whiskers from p10 to p90 (or median ± spread/2 where only the spread is kept).
//! Under `--icount` the axis is instructions (exact, no whiskers); otherwise wall time.
//!
//! * [`rows`](mod@rows): a saved run's rows, read ([`Row`], [`Mode`]).
//! * [`draw`]: the SVG plot of a run.
//! * [`compare`](mod@compare): a run against an earlier one (`--compare`), a verdict per row.
//! * [`goals`]: the `bench all` summary, each mechanism against its seed and goal ([`GOALS`]).
//! * [`vs_linux`]: the EL0 benchmark against Linux ([`PEER_GOAL`]).

pub mod compare;
pub mod draw;
pub mod goals;
pub mod rows;
pub mod vs_linux;

pub use compare::{check_earlier, compare, verdict, Verdict};
pub use draw::{bench_svg, svg};
pub use goals::{summary, Goal, Measured, Saved, GOALS};
pub use rows::{group_setting, load, mode, row, rows, unit, Mode, Row};
pub use vs_linux::{peer_summary, PEER_GOAL};

use anyhow::{Context, Result};
use std::path::Path;

/// `cargo xtask bench WHICH [--icount] [--compare FILE]`: `all` runs every benchmark and prints
/// the summary against the seeds and goals; `summary` prints it from the saved runs (and redraws
/// their plots); any other
/// name runs that benchmark, then compares it with `compare` (an earlier `.jsonl`).
pub fn cli(which: &str, icount: bool, compare_with: Option<&Path>, peer: Option<crate::bench::Peer>) -> Result<()> {
    let dir = crate::workspace_root().join("target/bench");
    let here: Vec<&str> = crate::bench::GUEST_BENCHES.iter().map(|b| b.name).collect();
    match which {
        "all" => {
            for b in crate::bench::GUEST_BENCHES {
                crate::bench::run(b.name, icount, peer.filter(|_| b.peer))?;
            }
            crate::bench::run("pgtable", false, None)?;
        }
        "summary" => {
            // Redraw the plots of every saved run (they follow the code, the data stays).
            for b in &here {
                for icount in [false, true] {
                    let stem = if icount { format!("{b}-icount") } else { b.to_string() };
                    if let Ok(jsonl) = std::fs::read_to_string(dir.join(format!("{stem}.jsonl"))) {
                        let svg = bench_svg(&dir, b, &stem, &jsonl, mode(icount))?;
                        eprintln!("xtask: drew {}", svg.display());
                    }
                }
            }
        }
        _ => {
            let earlier = match compare_with {
                Some(p) => {
                    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                    // Refused before the benchmark runs: a comparison that cannot mean anything.
                    check_earlier(which, icount, &text)
                        .map_err(|why| crate::outcome::Refused(format!("--compare {}: {why}", p.display())))?;
                    Some(text)
                }
                None => None,
            };
            crate::bench::run(which, icount, peer)?;
            if let Some(old) = earlier {
                let stem = if icount { format!("{which}-icount") } else { which.to_string() };
                let new = std::fs::read_to_string(dir.join(format!("{stem}.jsonl")))?;
                let m = mode(icount);
                let table = compare(&rows(which, &old, m)?, &rows(which, &new, m)?);
                println!("== {which}: change against {} ==\n{table}", compare_with.unwrap().display());
                crate::write_file(&dir.join(format!("{stem}.compare.txt")), &table)?;
            }
            return Ok(());
        }
    }
    let mut t = summary(&dir, &here)?;
    println!("== mechanisms against their seeds and goals (saved runs in target/bench/) ==\n{t}");
    let p = peer_summary(&dir)?;
    println!("== the kernel against Linux (bench mprotect --peer linux; goal: every row <= {PEER_GOAL}x) ==\n{p}");
    t += &format!("\n## The kernel against Linux (goal: every row <= {PEER_GOAL}x Linux)\n\n{p}");
    crate::write_file(&dir.join("summary.md"), &t)?;
    Ok(())
}
