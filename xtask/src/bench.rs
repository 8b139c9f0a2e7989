//! `cargo xtask bench NAME`: host benchmarks (`pgtable`) and in-guest benchmarks.
//!
//! An in-guest benchmark boots the kernel with `bench=NAME` once per machine of its list (e.g.
//! `-cpu max`, which has BBML2, and `-cpu cortex-a76`, which has none), collects the `bench`
//! report records, prints one table per machine and one with the machines side by side, and
//! writes everything to `target/bench/NAME[-icount].{jsonl,txt}`. With `--icount` QEMU runs
//! `-icount shift=0`: instruction counts are then deterministic (and wall time is not real).

use crate::build::{self, Images};
use crate::outcome::{self, ExitWith, Verdict};
use crate::qemu::{self, QemuConfig};
use crate::report::{self, table};
use crate::{system, toolchain, workspace_root};
use abi::report::ParsedRecord;
use anyhow::{ensure, Context, Result};
use std::fmt::Write as _;
use std::time::Duration;

/// A machine a guest benchmark runs on.
#[derive(Debug, Clone, Copy)]
pub struct Machine {
    pub label: &'static str,
    pub cpu: &'static str,
    pub gic: u8,
    pub smp: u32,
    pub mem: &'static str,
}

/// QEMU `max`: FEAT_BBM level 2, allow-listed for BBML2.
pub const MAX: Machine = Machine { label: "max", cpu: "max", gic: 3, smp: 4, mem: "1G" };
/// The Raspberry Pi 5 core: no FEAT_BBM.
pub const A76: Machine = Machine { label: "a76", cpu: "cortex-a76", gic: 2, smp: 4, mem: "1G" };
/// `max` and `cortex-a76` with 512 MiB, 1 GiB and 4 GiB of RAM (linear-map table pages).
pub const MEM_MATRIX: &[Machine] = &[
    Machine { label: "max-512M", mem: "512M", ..MAX },
    Machine { label: "a76-512M", mem: "512M", ..A76 },
    Machine { label: "max-1G", ..MAX },
    Machine { label: "a76-1G", ..A76 },
    Machine { label: "max-4G", mem: "4G", ..MAX },
    Machine { label: "a76-4G", mem: "4G", ..A76 },
];

/// An in-guest benchmark.
#[derive(Debug, Clone, Copy)]
pub struct GuestBench {
    pub name: &'static str,
    pub about: &'static str,
    pub machines: &'static [Machine],
    /// Fields shown in the side-by-side table (all fields are in the per-machine tables).
    pub compare: &'static [&'static str],
    /// Per-boot time limit.
    pub timeout_s: u64,
}

/// Every in-guest benchmark, in the order of `abi::names::BENCHES` (the kernel's `bench=`
/// names; a test keeps them equal).
pub const GUEST_BENCHES: &[GuestBench] = &[
    GuestBench {
        name: "exits",
        about: "cost of a guest exit: null hypercall vs PSCI call forwarded to firmware",
        machines: &[MAX, A76],
        compare: &["median_ns", "median_insns", "vs_null"],
        timeout_s: 300,
    },
    GuestBench {
        name: "linear-map",
        about: "linear-map table pages with and without BBML2 vs the limit; set_memory_ro/rw storm",
        machines: MEM_MATRIX,
        compare: &["table_pages", "median_ns", "tlbi_per_call"],
        timeout_s: 600,
    },
    GuestBench {
        name: "contpte",
        about: "contpte convert (fold/unfold) and a one-page ro/rw workload, with and without the TLBI",
        machines: &[MAX, A76],
        compare: &["median_ns", "median_insns", "tlbi_per_op", "vs_with_tlbi_ns", "vs_with_tlbi_insns"],
        timeout_s: 600,
    },
    GuestBench {
        name: "split",
        about: "stage-2 eager split for dirty logging, 64 GiB memslot: baseline walker, SKIP_LEVEL3, summary bit",
        // One CPU, 4 GiB: the hypervisor's frame pool follows RAM (256 MiB), the slot pool is 1 GiB.
        machines: &[Machine { label: "max-4G", smp: 1, mem: "4G", ..MAX }],
        compare: &[
            "median_us",
            "split_us",
            "split_visits_l3",
            "insns",
            "ratio",
            "split_ratio",
            "insn_ratio",
            "split_ns_per_visit",
            "split_insns_per_visit",
            "ns_per_pte",
            "insns_per_pte",
        ],
        timeout_s: 3600,
    },
    GuestBench {
        name: "mprotect",
        about: "mprotect from EL0: NONE<->RW on 1/16/512 pages with and without flush elision, RO->RW with and without lazy relaxation (+ its faults)",
        // A broadcast TLBI costs more with more CPUs: 1 and 4 vCPUs of each core.
        machines: &[
            Machine { label: "max-1cpu", smp: 1, ..MAX },
            Machine { label: "max-4cpu", ..MAX },
            Machine { label: "a76-1cpu", smp: 1, ..A76 },
            Machine { label: "a76-4cpu", ..A76 },
        ],
        compare: &["median_ns", "median_insns", "tlbi_per_step", "ratio_ns", "ratio_insns"],
        timeout_s: 1200,
    },
    GuestBench {
        name: "percpu",
        about: "this_cpu_add/cmpxchg, context switch, counter storm, task create/exit, syscall workload: TPIDR_EL1 + preempt guard vs the per-CPU-root window, and the roots' memory",
        machines: &[
            Machine { label: "max-1cpu", smp: 1, ..MAX },
            Machine { label: "max-4cpu", ..MAX },
            Machine { label: "max-8cpu", smp: 8, ..MAX },
        ],
        compare: &["ns_per", "insns_per", "ratio_ns", "ratio_insns"],
        timeout_s: 1200,
    },
];

/// Boot arguments a guest benchmark needs besides `bench=NAME`: the memslot pool for `split`,
/// and one iteration under `--icount` (its counts are deterministic; several without).
pub fn extra_bootargs(name: &str, icount: bool) -> &'static str {
    match (name, icount) {
        ("split", true) => " hyp.slotpool=1G split.iters=1",
        ("split", false) => " hyp.slotpool=1G",
        _ => "",
    }
}

/// Host benchmarks.
pub const HOST_BENCHES: &[(&str, &str)] =
    &[("pgtable", "lib/pgtable against aarch64-paging: map 4 GiB, 10,000 random 4 KiB permission changes, unmap")];

/// Runs benchmark `which`.
pub fn run(which: &str, icount: bool) -> Result<()> {
    if which == "guest-boot" {
        return crate::guest_boot::run(icount);
    }
    if which == "pgtable" {
        return crate::peer::run();
    }
    let Some(b) = GUEST_BENCHES.iter().find(|b| b.name == which) else {
        let mut list = String::new();
        for (n, d) in HOST_BENCHES {
            let _ = writeln!(list, "  {n}: {d} (host)");
        }
        for b in GUEST_BENCHES {
            let _ = writeln!(list, "  {}: {} (in the guest)", b.name, b.about);
        }
        let _ = writeln!(list, "  guest-boot: Debian's Linux to its user-space marker, hypervisor vs plain QEMU");
        return Err(anyhow::Error::new(crate::outcome::Refused(format!(
            "unknown benchmark {which:?}; known:\n{list}"
        ))));
    };
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    let images = build::build(&tc, &[])?;
    run_guest(b, &qemu, &images, icount)
}

/// Boots `b` on each of its machines and prints and saves the tables.
pub fn run_guest(b: &GuestBench, qemu: &std::path::Path, images: &Images, icount: bool) -> Result<()> {
    let mode = if icount {
        "QEMU TCG with -icount shift=0 (instruction counts exact, time is virtual)"
    } else {
        "QEMU TCG (wall time)"
    };
    let mut per_machine: Vec<(&str, Vec<ParsedRecord>)> = Vec::new();
    let mut wall: Vec<(&str, u64)> = Vec::new();
    let mut jsonl = String::new();
    for m in b.machines {
        let cfg = QemuConfig {
            cpu: m.cpu.into(),
            gic: m.gic,
            smp: m.smp,
            mem: m.mem.into(),
            icount: icount.then_some(0),
            bootargs: format!("bench={}{}", b.name, extra_bootargs(b.name, icount)),
            ..QemuConfig::default()
        };
        eprintln!("xtask: bench {} on {} ({})", b.name, m.label, cfg.describe());
        let started = std::time::Instant::now();
        let out =
            qemu::run(qemu, &cfg, images, Duration::from_secs(b.timeout_s), Some(Duration::from_secs(60)), |l| {
                if !l.contains(abi::report::PREFIX) {
                    qemu::echo_stdout(l)
                }
            })?;
        // Only a run that ended cleanly counts, whatever records it printed before.
        let verdict = outcome::judge(&out);
        if !verdict.success() {
            return Err(anyhow::Error::new(ExitWith(Verdict::new(
                abi::exit::CHECK_FAILED,
                format!("benchmark {} on {} did not end cleanly: {verdict}", b.name, m.label),
            ))));
        }
        let (records, errors) = report::collect(&out.output);
        ensure!(errors.is_empty(), "malformed records: {errors:?}");
        let rows: Vec<ParsedRecord> =
            records.into_iter().filter(|r| r.kind == "bench" && r.str("bench") == Some(b.name)).collect();
        ensure!(!rows.is_empty(), "the guest printed no bench records for {}", b.name);
        if b.name == "split" {
            check_split(&rows, icount).with_context(|| format!("benchmark split on {}", m.label))?;
        }
        for r in &rows {
            let mut obj = r.fields.clone();
            obj.insert("machine".into(), m.label.into());
            obj.insert("icount".into(), icount.into());
            let _ = writeln!(jsonl, "{}", serde_json::Value::Object(obj));
        }
        per_machine.push((m.label, rows));
        wall.push((m.label, started.elapsed().as_secs()));
        eprintln!("xtask: bench {} on {} took {} s (wall)", b.name, m.label, started.elapsed().as_secs());
    }
    let mut text = format!("benchmark {} — {mode}\n", b.name);
    for ((label, rows), (_, secs)) in per_machine.iter().zip(&wall) {
        let refs: Vec<&ParsedRecord> = rows.iter().collect();
        let _ = write!(text, "\n== {label} (boot took {secs} s wall) ==\n{}", table(&refs));
    }
    if per_machine.len() > 1 {
        let _ = write!(text, "\n== side by side ==\n{}", side_by_side(&per_machine, b.compare));
    }
    println!("{text}");
    let dir = workspace_root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let stem = if icount { format!("{}-icount", b.name) } else { b.name.to_string() };
    crate::write_file(&dir.join(format!("{stem}.jsonl")), &jsonl)?;
    crate::write_file(&dir.join(format!("{stem}.txt")), &text)?;
    let svg = crate::plot::bench_svg(&dir, b.name, &stem, &jsonl, crate::plot::mode(icount))?;
    eprintln!("xtask: saved target/bench/{stem}.jsonl, .txt and {}", svg.display());
    Ok(())
}

/// One row per `case`, the `compare` fields of each machine next to each other.
pub fn side_by_side(per_machine: &[(&str, Vec<ParsedRecord>)], compare: &[&str]) -> String {
    let mut cases: Vec<String> = Vec::new();
    for (_, rows) in per_machine {
        for r in rows {
            let c = r.str("case").unwrap_or("").to_string();
            if !cases.contains(&c) {
                cases.push(c);
            }
        }
    }
    let mut header = vec!["case".to_string()];
    for (label, _) in per_machine {
        for f in compare {
            header.push(format!("{label}:{f}"));
        }
    }
    let mut rows = Vec::new();
    for c in &cases {
        let mut row = vec![c.clone()];
        for (_, recs) in per_machine {
            let r = recs.iter().find(|r| r.str("case") == Some(c.as_str()));
            for f in compare {
                row.push(
                    r.and_then(|r| r.get(f))
                        .map(|v| v.as_str().map(str::to_string).unwrap_or(v.to_string()))
                        .unwrap_or_default(),
                );
            }
        }
        rows.push(row);
    }
    report::aligned(&header, &rows, 1)
}

/// A split run counts only when it is complete: every scenario and backing with each of the
/// three walkers once, every row with a ratio against the baseline, and under `--icount` every
/// row with its instructions counted (a run that counted none measured nothing).
pub fn check_split(rows: &[ParsedRecord], icount: bool) -> Result<()> {
    for scenario in ["enable", "manual-clear"] {
        for backing in ["4K", "2M", "1G"] {
            for walker in ["baseline", "skip_level3", "summary"] {
                let found: Vec<&ParsedRecord> = rows
                    .iter()
                    .filter(|r| {
                        r.str("scenario") == Some(scenario)
                            && r.str("backing") == Some(backing)
                            && r.str("walker") == Some(walker)
                    })
                    .collect();
                ensure!(found.len() == 1, "{} rows for {scenario} {backing} {walker} (one expected)", found.len());
                let r = found[0];
                ensure!(r.f64("ratio").is_some(), "{scenario} {backing} {walker}: no ratio");
                if icount {
                    ensure!(
                        r.u64("insns").unwrap_or(0) > 0,
                        "{scenario} {backing} {walker}: no instructions counted under --icount"
                    );
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(insns: u64) -> Vec<ParsedRecord> {
        let mut out = String::new();
        for scenario in ["enable", "manual-clear"] {
            for backing in ["4K", "2M", "1G"] {
                for walker in ["baseline", "skip_level3", "summary"] {
                    out += &format!(
                        "@@report {{\"kind\":\"bench\",\"bench\":\"split\",\"scenario\":\"{scenario}\",\"backing\":\"{backing}\",\"walker\":\"{walker}\",\"insns\":{insns},\"ratio\":1.0}}\n"
                    );
                }
            }
        }
        report::collect(&out).0
    }

    #[test]
    fn the_guest_benchmarks_are_the_kernels() {
        let here: Vec<&str> = GUEST_BENCHES.iter().map(|b| b.name).collect();
        assert_eq!(here, abi::names::BENCHES);
    }

    #[test]
    fn an_incomplete_split_run_is_refused() {
        assert!(check_split(&rows(5), true).is_ok());
        let mut missing = rows(5);
        missing.retain(|r| !(r.str("backing") == Some("1G") && r.str("walker") == Some("summary")));
        let e = check_split(&missing, false).unwrap_err().to_string();
        assert!(e.contains("0 rows for enable 1G summary"), "{e}");
        let mut twice = rows(5);
        twice.push(twice[0].clone());
        assert!(check_split(&twice, false).unwrap_err().to_string().contains("2 rows for enable 4K baseline"));
    }

    #[test]
    fn a_split_run_without_instructions_is_refused_under_icount_only() {
        assert!(check_split(&rows(0), false).is_ok(), "without --icount QEMU counts none");
        let e = check_split(&rows(0), true).unwrap_err().to_string();
        assert!(e.contains("no instructions counted"), "{e}");
    }
}
