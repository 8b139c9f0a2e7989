//! `cargo xtask bench guest-boot`: Debian's Linux booting to its user-space marker on the
//! hypervisor against the same kernel and initramfs on plain QEMU (no EL2, Linux entered at EL1
//! by QEMU itself), on the same machine, runs interleaved (hypervisor, plain, hypervisor, ...),
//! median and spread of each side, and their ratio. Goal: at most 1.3x plain QEMU.
//! `--board B` does the same on a board's QEMU model with the backports kernel (Linux alone
//! there is Linux on the model as the board's firmware would start it; goal 1.15x wall).
//!
//! Two clocks: the host's wall time from QEMU's start to the marker line (what a user waits),
//! and the guest's own uptime at the marker (`/proc/uptime`, which under `--icount` counts
//! instructions and so is exact and repeatable). The hypervisor side also gives the
//! hypervisor's own boot (its `hyp_boot` record's `boot_us`: the generic timer from the
//! machine's start to the guest's entry), the part of the wall gap that Linux never sees.

use crate::build::{self, Images};
use crate::launch::{Guest, Launch};
use crate::linux::{self, Flavour, MARKER};
use crate::machine::Machine;
use crate::provision::{system, toolchain};
use crate::supervise;
use crate::{report, workspace_root};
use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Boots per side and machine (`PGTLAB_GUEST_BOOT_RUNS` changes it).
const RUNS: usize = 5;

/// The machines: the Pi 5's core on one and four CPUs, and QEMU's `max`.
const MACHINES: &[(&str, &str, u8, u32)] =
    &[("a76-1cpu", "cortex-a76", 3, 1), ("a76-4cpu-gicv2", "cortex-a76", 2, 4), ("max-1cpu", "max", 3, 1)];

/// One boot's figures.
#[derive(Debug, Clone, Copy)]
struct Sample {
    wall_s: f64,
    uptime_s: f64,
    /// The hypervisor's own boot, seconds (`None` for Linux alone).
    hyp_boot_s: Option<f64>,
}

/// The hypervisor's own boot in seconds, from its `hyp_boot` record (`boot_us`), if the run
/// has one.
fn hyp_boot_s(records: &[abi::report::ParsedRecord]) -> Option<f64> {
    report::first(records, "hyp_boot").and_then(|r| r.f64("boot_us")).map(|us| us / 1e6)
}

fn boot(qemu_bin: &std::path::Path, cfg: &Launch, images: &Images) -> Result<Sample> {
    let t0 = Instant::now();
    let mut marker_at = None;
    // Linux alone on a board that offers it no power-off (the Pi 4: its watchdog driver needs
    // devices the model lacks) halts: the run ends at its linux_guest record instead.
    let stop_at_record = cfg.no_hypervisor && !cfg.model().linux.powers_off_alone;
    let version = crate::provision::qemu_pkg::version_of(qemu_bin)?;
    let r = cfg.resolve(images, version)?;
    let (out, stopped) = supervise::run_args_until(
        qemu_bin,
        &r.args,
        r.judging,
        Duration::from_secs(600),
        None,
        |l: &str| {
            if marker_at.is_none() && l.contains(MARKER) {
                marker_at = Some(t0.elapsed());
            }
        },
        |l| stop_at_record && l.contains("\"kind\":\"linux_guest\""),
    )?;
    let verdict = supervise::judge(&out);
    if !stopped {
        supervise::require_success(&verdict, &format!("the boot of {}", cfg.describe()))?;
    }
    let wall = marker_at.context("no marker line")?;
    let (records, _) = report::collect(&out.output);
    let uptime =
        report::first(&records, "linux_guest").and_then(|r| r.f64("uptime_s")).context("no linux_guest record")?;
    Ok(Sample { wall_s: wall.as_secs_f64(), uptime_s: uptime, hyp_boot_s: hyp_boot_s(&records) })
}

/// Median, minimum, maximum.
fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    let med = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    (med, v[0], v[n - 1])
}

/// `bench guest-boot --board B`: Debian's backports Linux (the board models' kernel) with the
/// board's console, under the hypervisor and alone, on the board's QEMU model.
pub fn run_board(board: &'static Machine, icount: bool) -> Result<()> {
    let tc = toolchain::find()?;
    let mut base = Launch::for_machine(board);
    base.resolve_dtb()?;
    let qemu_bin = base.qemu()?.path;
    let images = build::build(&tc, &[])?;
    let l = linux::prepare(Flavour::Backports, &linux::extra_programs()?)?;
    let guest = Guest {
        kernel: l.kernel.clone(),
        initrd: Some(l.initramfs.clone()),
        append: format!("{} quiet", linux::default_append(board)),
    };
    let base = Launch { icount: icount.then_some(0), guest: Some(guest), ..base };
    let label = format!("{board}-{}cpu", base.smp);
    compare_labelled(&[&label], &[base], &qemu_bin, &images, &l.package, icount, &format!("-{board}"))
}

/// Runs the benchmark.
pub fn run(icount: bool) -> Result<()> {
    let tc = toolchain::find()?;
    let qemu_bin = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let l = linux::prepare(Flavour::Cloud, &linux::extra_programs()?)?;
    let guest = Guest {
        kernel: l.kernel.clone(),
        initrd: Some(l.initramfs.clone()),
        append: format!("{} quiet", linux::DEFAULT_APPEND),
    };
    let cfgs: Vec<Launch> = MACHINES
        .iter()
        .map(|&(_, cpu, gic, smp)| Launch {
            cpu: cpu.into(),
            gic,
            smp,
            icount: icount.then_some(0),
            guest: Some(guest.clone()),
            ..Launch::default()
        })
        .collect();
    let labels: Vec<&str> = MACHINES.iter().map(|m| m.0).collect();
    compare_labelled(&labels, &cfgs, &qemu_bin, &images, &l.package, icount, "")
}

/// Each configuration booted `runs` times per side, interleaved (hypervisor, alone, ...).
fn compare_labelled(
    labels: &[&str],
    cfgs: &[Launch],
    qemu_bin: &std::path::Path,
    images: &Images,
    package: &str,
    icount: bool,
    suffix: &str,
) -> Result<()> {
    let runs = std::env::var("PGTLAB_GUEST_BOOT_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(RUNS).max(1);
    let mode = if icount {
        "QEMU TCG with -icount shift=0,sleep=off (guest uptime in instructions; an SMP guest's moves a few percent \
         with where timer deadlines fall)"
    } else {
        "QEMU TCG, wall time"
    };
    let mut text = format!(
        "benchmark guest-boot — {package} to its user-space marker, {runs} interleaved runs per side — {mode}, {}\n\n",
        qemu_bin.display()
    );
    let header =
        "machine          side        wall_median_s  wall_min  wall_max  spread  uptime_median_s  uptime_spread";
    let _ = writeln!(text, "{header}");
    let mut jsonl = String::new();
    let mut ratios = Vec::new();
    for (&label, base) in labels.iter().zip(cfgs) {
        let mut samples: [Vec<Sample>; 2] = [Vec::new(), Vec::new()];
        for i in 0..runs {
            for (side, plain) in [(0, false), (1, true)] {
                let cfg = Launch { no_hypervisor: plain, ..base.clone() };
                let s = boot(qemu_bin, &cfg, images)?;
                eprintln!(
                    "xtask: guest-boot {label} run {} {}: marker after {:.2} s wall, guest uptime {:.2} s{}",
                    i + 1,
                    if plain { "plain QEMU" } else { "hypervisor" },
                    s.wall_s,
                    s.uptime_s,
                    s.hyp_boot_s.map(|h| format!(", the hypervisor's own boot {h:.2} s")).unwrap_or_default()
                );
                let _ = writeln!(
                    jsonl,
                    "{}",
                    serde_json::json!({"bench": "guest-boot", "machine": label, "side": if plain {"plain"} else {"hypervisor"}, "run": i,
                        "wall_s": s.wall_s, "uptime_s": s.uptime_s, "hyp_boot_s": s.hyp_boot_s, "icount": icount})
                );
                samples[side].push(s);
            }
        }
        let mut med = [(0.0, 0.0); 2];
        for (side, name) in [(0, "hypervisor"), (1, "plain QEMU")] {
            let (wm, wmin, wmax) = stats(samples[side].iter().map(|s| s.wall_s).collect());
            let (um, umin, umax) = stats(samples[side].iter().map(|s| s.uptime_s).collect());
            med[side] = (wm, um);
            let _ = writeln!(
                text,
                "{label:<16} {name:<11} {wm:>13.2}  {wmin:>8.2}  {wmax:>8.2}  {:>5.0}%  {um:>15.2}  {:>12.0}%",
                100.0 * (wmax - wmin) / wm.max(1e-9),
                100.0 * (umax - umin) / um.max(1e-9),
            );
        }
        let (wr, ur) = (med[0].0 / med[1].0, med[0].1 / med[1].1);
        let hyp: Vec<f64> = samples[0].iter().filter_map(|s| s.hyp_boot_s).collect();
        if !hyp.is_empty() {
            let (hm, hmin, hmax) = stats(hyp);
            let _ = writeln!(
                text,
                "{label:<16} the hypervisor's own boot (before the guest's first instruction): median {hm:.2} s \
                 ({hmin:.2}-{hmax:.2}) of the {:.2} s wall gap",
                med[0].0 - med[1].0
            );
        }
        ratios.push((label, wr, ur));
        let _ = writeln!(jsonl, "{}", serde_json::json!({"machine": label, "wall_ratio": wr, "uptime_ratio": ur}));
    }
    let goal = if suffix.is_empty() { 1.3 } else { 1.15 };
    let _ = writeln!(text, "\nhypervisor / plain QEMU (medians; goal <= {goal:.2}x wall):");
    for (label, wr, ur) in &ratios {
        let verdict = if *wr <= goal { "meets the goal" } else { "ABOVE the goal" };
        let _ = writeln!(text, "  {label:<16} wall {wr:.2}x ({verdict}), guest uptime {ur:.2}x");
    }
    println!("{text}");
    let dir = workspace_root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let stem = format!("guest-boot{suffix}{}", if icount { "-icount" } else { "" });
    crate::write_file(&dir.join(format!("{stem}.jsonl")), jsonl)?;
    crate::write_file(&dir.join(format!("{stem}.txt")), &text)?;
    eprintln!("xtask: saved target/bench/{stem}.jsonl and .txt");
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hypervisors_own_boot_comes_from_its_record() {
        let out = "hyp: hello\n@@report {\"kind\":\"hyp_boot\",\"cpus\":4,\"boot_us\":3675603}\n\
                   @@report {\"kind\":\"linux_guest\",\"uptime_s\":4.53}\n";
        let (records, errors) = crate::report::collect(out);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(super::hyp_boot_s(&records), Some(3.675603));
        let (alone, _) = crate::report::collect("@@report {\"kind\":\"linux_guest\",\"uptime_s\":4.53}\n");
        assert_eq!(super::hyp_boot_s(&alone), None, "Linux alone has no hypervisor boot");
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(super::stats(vec![3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(super::stats(vec![4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
    }
}
