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

use anyhow::{Context, Result};
use plotters::prelude::*;
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

fn f(o: &Map<String, Value>, k: &str) -> Option<f64> {
    o.get(k).and_then(Value::as_f64)
}

fn s<'a>(o: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
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

/// Draws `rows` as grouped bars with whiskers into an SVG file. The axis is logarithmic (TCG's
/// tails are long, and ratios read as distances); groups are numbered on the axis and named in a
/// key below it.
pub fn svg(path: &Path, title: &str, axis: &str, rows: &[Row]) -> Result<()> {
    let mut groups: Vec<String> = Vec::new();
    let mut settings: Vec<String> = Vec::new();
    for r in rows {
        let g = format!("{}: {}", r.machine, r.group);
        if !groups.contains(&g) {
            groups.push(g);
        }
        if !settings.contains(&r.setting) {
            settings.push(r.setting.clone());
        }
    }
    anyhow::ensure!(!rows.is_empty(), "nothing to plot");
    let positive = |v: f64| if v > 0.0 { Some(v) } else { None };
    let ymax = rows.iter().map(|r| r.hi.unwrap_or(r.median).max(r.median)).fold(1.0f64, f64::max) * 4.0;
    let ymin = rows.iter().filter_map(|r| positive(r.lo.unwrap_or(r.median).min(r.median))).fold(ymax, f64::min) / 2.0;
    let ymin = ymin.max(ymax / 1e9).min(ymax / 10.0);
    let width = (groups.len() as u32 * (settings.len() as u32 * 22 + 24)).clamp(640, 2400) + 160;
    let key_h = 18 * groups.len() as u32 + 30;
    let height = 520 + key_h;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    let e = |x: &dyn std::fmt::Display| anyhow::anyhow!("drawing {}: {x}", path.display());
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (plot_area, key_area) = root.split_vertically(520);
    let n = groups.len() as f64;
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5f64..n - 0.5, (ymin..ymax).log_scale())
        .map_err(|x| e(&x))?;
    let label_of = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < groups.len() {
            format!("G{}", i as usize + 1)
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .y_labels(12)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc(format!("{axis} (log scale)"))
        .draw()
        .map_err(|x| e(&x))?;
    let k = settings.len() as f64;
    let bar = 0.8 / k;
    for (si, setting) in settings.iter().enumerate() {
        let colour = Palette99::pick(si).to_rgba();
        let mine: Vec<(f64, &Row)> = rows
            .iter()
            .filter(|r| &r.setting == setting)
            .filter_map(|r| {
                let g = groups.iter().position(|g| *g == format!("{}: {}", r.machine, r.group))?;
                Some((g as f64 - 0.4 + bar * si as f64, r))
            })
            .collect();
        chart
            .draw_series(
                mine.iter()
                    .map(|(x, r)| Rectangle::new([(*x, ymin), (*x + bar * 0.9, r.median.max(ymin))], colour.filled())),
            )
            .map_err(|x| e(&x))?
            .label(setting.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        chart
            .draw_series(mine.iter().filter_map(|(x, r)| {
                let (lo, hi) = (r.lo?.max(ymin), r.hi?.max(ymin));
                Some(ErrorBar::new_vertical(*x + bar * 0.45, lo, r.median.max(ymin), hi, BLACK.stroke_width(1), 6))
            }))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(|x| e(&x))?;
    let font = ("sans-serif", 13).into_font().color(&BLACK);
    key_area
        .draw(&Text::new("whiskers: p10 to p90 (none for exact counts)", (20, 4), font.clone()))
        .map_err(|x| e(&x))?;
    for (i, g) in groups.iter().enumerate() {
        key_area
            .draw(&Text::new(format!("G{} = {g}", i + 1), (20, 24 + 18 * i as i32), font.clone()))
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// The mode of a run.
pub fn mode(icount: bool) -> Mode {
    if icount {
        Mode::Icount
    } else {
        Mode::Wall
    }
}

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

/// The goal of every row of an EL0 benchmark against Linux: at most this many times Linux's
/// figure (instructions under `--icount`).
pub const PEER_GOAL: f64 = 0.25;

/// The EL0 benchmark's saved runs with a Linux side: per mode and machine, how many rows are
/// within [`PEER_GOAL`] and the worst; then every row's ratio per machine (instructions when
/// an `--icount` run was saved, else time).
pub fn peer_summary(dir: &Path) -> Result<String> {
    use abi::report::ParsedRecord;
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
            let ratios: Vec<(String, f64)> = crate::bench::peer_pairs(ours, theirs)
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
        detail +=
            &format!("\npgtlab / Linux per row, {mode}:\n{}", crate::bench::peer_side_by_side(&ours, &theirs, icount));
    }
    if !any {
        return Ok("not run (no saved run of bench mprotect --peer linux)\n".into());
    }
    Ok(out + &detail)
}

/// Draws the plot of a saved benchmark run; returns its path.
pub fn bench_svg(dir: &Path, bench: &str, stem: &str, jsonl: &str, mode: Mode) -> Result<std::path::PathBuf> {
    let rows = rows(bench, jsonl, mode)?;
    let path = dir.join(format!("{stem}.svg"));
    let title = format!("cargo xtask bench {bench}{}", if mode == Mode::Icount { " --icount" } else { "" });
    svg(&path, &title, &Mode::axis(mode, unit(bench, mode)), &rows)?;
    Ok(path)
}

/// The verdict on one row's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Better,
    Worse,
    WithinNoise,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// Lower is better. The noise band is half the larger relative p10-p90 spread of the two runs
/// (0 for exact counts: any change of an instruction count is real).
pub fn verdict(old: &Row, new: &Row) -> (f64, Verdict) {
    let change = if old.median == 0.0 { 0.0 } else { new.median / old.median - 1.0 };
    let noise = old.spread.max(new.spread) / 2.0;
    let v = if change < -noise && new.median < old.median {
        Verdict::Better
    } else if change > noise && new.median > old.median {
        Verdict::Worse
    } else {
        Verdict::WithinNoise
    };
    (change, v)
}

/// The comparison table of `new` against `old` (rows matched by machine, workload, setting).
pub fn compare(old: &[Row], new: &[Row]) -> String {
    let name = |r: &Row| format!("{}: {} / {}", r.machine, r.group, r.setting);
    let same = |a: &Row, b: &Row| a.machine == b.machine && a.group == b.group && a.setting == b.setting;
    let w = old.iter().chain(new).map(|r| name(r).len()).max().unwrap_or(10).max(27);
    let mut out = format!(
        "{:<w$} {:>14} {:>14} {:>9} {:>8}  verdict\n",
        "machine: workload / setting", "before", "now", "change", "noise"
    );
    for n in new {
        match old.iter().find(|o| same(o, n)) {
            Some(o) => {
                let (d, v) = verdict(o, n);
                out += &format!(
                    "{:<w$} {:>14.0} {:>14.0} {:>+8.1}% {:>7.1}%  {}\n",
                    name(n),
                    o.median,
                    n.median,
                    d * 100.0,
                    o.spread.max(n.spread) * 50.0,
                    v.name()
                );
            }
            None => out += &format!("{:<w$} {:>14} {:>14.0} {:>9} {:>8}  new row\n", name(n), "-", n.median, "", ""),
        }
    }
    for o in old.iter().filter(|o| !new.iter().any(|n| same(o, n))) {
        out += &format!("{:<w$} {:>14.0} {:>14}  (row gone)\n", name(o), o.median, "-");
    }
    out
}

/// Checks an earlier run's saved `.jsonl` before `--compare` uses it: every line a record of
/// benchmark `which` (its `bench` field), taken in the same mode as this run (`icount`: an
/// instruction count against a wall time would read as a thousand-fold change), and at least
/// one row to compare with. `Err` says what is wrong.
pub fn check_earlier(which: &str, icount: bool, text: &str) -> std::result::Result<(), String> {
    let mode_name = |i: bool| if i { "--icount (instructions)" } else { "wall-time" };
    let mut rows = 0;
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("line {} is not JSON: {e}", i + 1))?;
        let o = v.as_object().ok_or_else(|| format!("line {} is not a JSON object", i + 1))?;
        match s(o, "bench") {
            Some(b) if b == which => {}
            Some(b) => return Err(format!("line {} is a row of benchmark {b:?}, not {which:?}", i + 1)),
            None => return Err(format!("line {} is not a benchmark row (no \"bench\" field)", i + 1)),
        }
        match o.get("icount").and_then(Value::as_bool) {
            Some(was) if was != icount => {
                return Err(format!(
                    "a {} run cannot be compared with this {} run: run both the same way",
                    mode_name(was),
                    mode_name(icount)
                ))
            }
            None if which != "pgtable" => {
                return Err(format!("line {} does not say how it was measured (no \"icount\" field)", i + 1))
            }
            _ => {}
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(format!("no rows of benchmark {which:?}: nothing to compare with"));
    }
    Ok(())
}

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

    fn r(median: f64, spread: f64) -> Row {
        Row { machine: "max".into(), group: "g".into(), setting: "s".into(), median, lo: None, hi: None, spread }
    }

    #[test]
    fn verdicts_follow_the_spreads() {
        assert_eq!(verdict(&r(100.0, 0.2), &r(85.0, 0.1)).1, Verdict::Better);
        assert_eq!(verdict(&r(100.0, 0.2), &r(95.0, 0.1)).1, Verdict::WithinNoise);
        assert_eq!(verdict(&r(100.0, 0.2), &r(111.0, 0.0)).1, Verdict::Worse);
        assert_eq!(verdict(&r(100.0, 0.0), &r(101.0, 0.0)).1, Verdict::Worse, "exact counts: any change is real");
        assert_eq!(verdict(&r(100.0, 0.0), &r(100.0, 0.0)).1, Verdict::WithinNoise);
        let t = compare(&[r(100.0, 0.2)], &[r(85.0, 0.1), Row { group: "h".into(), ..r(1.0, 0.0) }]);
        assert!(t.contains("better") && t.contains("new row"), "{t}");
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

    #[test]
    fn a_plot_is_an_svg_with_a_bar_per_row_and_the_mode_on_its_axis() {
        let dir = std::env::temp_dir().join(format!("xtask-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jsonl = "{\"machine\":\"max\",\"case\":\"convert (fold), with TLBI\",\"median_ns\":1000,\"p10_ns\":900,\"p90_ns\":1300,\"spread\":0.4}\n\
                     {\"machine\":\"max\",\"case\":\"convert (fold), no TLBI (BBML2)\",\"median_ns\":300,\"p10_ns\":250,\"p90_ns\":400,\"spread\":0.5}\n";
        let p = bench_svg(&dir, "contpte", "contpte", jsonl, Mode::Wall).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50]);
        assert!(svg.contains("wall clock under QEMU TCG"));
        assert!(svg.contains("no TLBI (BBML2)") && svg.contains("with TLBI"), "legend");
        assert!(svg.contains("G1 = max: convert (fold)"), "key");
        assert!(svg.matches("<rect").count() >= 4, "a bar per row (and the legend and frame)");
        let p = bench_svg(&dir, "contpte", "contpte-icount", &jsonl.replace("median_ns", "median_insns"), Mode::Icount)
            .unwrap();
        assert!(std::fs::read_to_string(p).unwrap().contains("instructions, QEMU -icount"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
    fn a_comparison_that_cannot_mean_anything_is_refused() {
        let wall =
            "{\"bench\":\"mprotect\",\"machine\":\"max-1cpu\",\"case\":\"a\",\"median_ns\":10,\"icount\":false}\n";
        let icount = wall.replace("false", "true");
        assert_eq!(check_earlier("mprotect", false, wall), Ok(()));
        assert_eq!(check_earlier("mprotect", true, &icount), Ok(()));
        let e = check_earlier("mprotect", false, &icount).unwrap_err();
        assert!(e.contains("--icount") && e.contains("wall-time"), "{e}");
        assert!(check_earlier("mprotect", true, wall).is_err());
        assert!(check_earlier("mprotect", false, "").unwrap_err().contains("no rows"));
        assert!(check_earlier("mprotect", false, "\n\n").unwrap_err().contains("no rows"));
        assert!(check_earlier("split", false, wall).unwrap_err().contains("\"mprotect\", not \"split\""));
        assert!(check_earlier("mprotect", false, "{\"kind\":\"banner\"}\n")
            .unwrap_err()
            .contains("not a benchmark row"));
        assert!(check_earlier("mprotect", false, "not json\n").unwrap_err().contains("line 1 is not JSON"));
        let pgtable = "{\"bench\":\"pgtable\",\"phase\":\"map\",\"median_ns\":1}\n";
        assert_eq!(check_earlier("pgtable", false, pgtable), Ok(()), "the host benchmark has one mode");
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
