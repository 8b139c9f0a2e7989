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
//! * [`goals`]: the `bench all` summary, each mechanism against its seed and goal ([`GOALS`]),
//!   and every speed figure against its goal ([`FIGURE_GOALS`], one table and one plot).
//! * [`vs_linux`]: the EL0 benchmark against Linux ([`PEER_GOAL`]).

pub mod compare;
pub mod draw;
pub mod goals;
pub mod rows;
pub mod vs_linux;

pub use compare::{check_earlier, compare, host_of, verdict, Verdict};
pub use draw::{bench_svg, goals_svg, svg};
pub use goals::{goal_rows, goal_table, summary, FigureGoal, Goal, GoalRow, Measured, Saved, FIGURE_GOALS, GOALS};
pub use rows::{group_setting, load, mode, row, rows, unit, Mode, Row};
pub use vs_linux::{peer_pairs, peer_side_by_side, peer_summary, peer_table, split_sides, PeerRun, OURS, PEER_GOAL};
