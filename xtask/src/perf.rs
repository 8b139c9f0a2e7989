//! `cargo xtask perf SCENARIO`: PMU events and the project's own counters around any self-test
//! or benchmark workload, once per mechanism setting, printed side by side with ratios and
//! saved under `target/perf/`. `cargo xtask perf list` shows the events of the chosen CPU.
//!
//! Each setting is its own boot (the kernel reports the mechanisms it really ran with in its
//! `perf_info` record, and a setting it did not apply is an error, never a silent column).
//! With `--count-insns` the instruction-counting plugin runs too, and its TLBI/DSB/ISB counts
//! for the same window (per EL and per vCPU) stand beside the project's own.

use crate::bench::{extra_bootargs, GUEST_BENCHES};
use crate::build::{self, Images};
use crate::launch::Launch;
use crate::machine::Size;
use crate::provision::{system, toolchain};
use crate::report::{self, table};
use crate::supervise;
use crate::{plugin, workspace_root};
use abi::report::ParsedRecord;
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// A mechanism switch `--mechanism NAME=VALUE` can set.
#[derive(Debug, Clone, Copy)]
pub struct Mechanism {
    pub name: &'static str,
    pub values: &'static [&'static str],
    /// The boot argument for a value.
    pub bootarg: fn(&str) -> String,
    /// The `perf_info` field the kernel reports it in, and the value it must show.
    pub reported: fn(&str) -> (&'static str, String),
    pub about: &'static str,
}

/// Every switch this command knows (a mechanism added to the kernel gets a row here and a
/// field in the kernel's `perf_info` record).
pub const MECHANISMS: &[Mechanism] = &[
    Mechanism {
        name: "bbml2",
        values: &["on", "off"],
        bootarg: |v| format!("bbml2={v}"),
        reported: |v| ("bbml2", v.to_string()),
        about: "BBML2-aware linear map and contpte without TLBI (on is refused on a core without BBM level 2)",
    },
    Mechanism {
        name: "contpte",
        values: &["on", "off"],
        bootarg: |v| format!("contpte={v}"),
        reported: |v| ("contpte", v.to_string()),
        about: "contiguous-bit folding of 16-page groups",
    },
    Mechanism {
        name: "rodata",
        values: &["full", "on", "off"],
        bootarg: |v| format!("rodata={v}"),
        reported: |v| ("rodata", v.to_string()),
        about: "linear-map permissions (full: aliases follow set_memory_*)",
    },
    Mechanism {
        name: "walker",
        values: &["baseline", "skip_level3", "summary"],
        bootarg: |v| format!("perf.walker={v}"),
        reported: |v| ("walker", v.to_string()),
        about: "the hypervisor's stage-2 split walker",
    },
    Mechanism {
        name: "skip_level3",
        values: &["on", "off"],
        bootarg: |v| format!("perf.walker={}", if v == "on" { "skip_level3" } else { "baseline" }),
        reported: |v| ("walker", if v == "on" { "skip_level3" } else { "baseline" }.to_string()),
        about: "the split walker's SKIP_LEVEL3 (off: the baseline walker)",
    },
];

/// A workload `perf` can run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub bootargs: String,
    pub mem: Size,
    pub smp: u32,
    pub timeout: Duration,
}

/// Kernel self-tests that make sense as a workload: (name, extra boot arguments, memory).
const SELFTESTS: &[(&str, &str, Size)] = &[
    ("boot", "", Size::gib(1)),
    ("mem-perms", "", Size::gib(1)),
    ("pmu", "", Size::gib(1)),
    ("bad-calls", "", Size::gib(1)),
    ("memslot-errors", " hyp.slotpool=64M", Size::gib(1)),
    ("memslot-nopool", "", Size::gib(1)),
    ("dirty-log", " hyp.slotpool=1G", Size::gib(3)),
];

/// The scenario called `name` on `cpu`: a self-test or an in-guest benchmark.
pub fn scenario(name: &str, cpu: &str) -> Result<Scenario> {
    if let Some((n, extra, mem)) = SELFTESTS.iter().find(|s| s.0 == name) {
        let test = if *n == "boot" { String::new() } else { format!("test={n}") };
        return Ok(Scenario {
            name: name.into(),
            bootargs: format!("{test}{extra}").trim().into(),
            mem: *mem,
            smp: 4,
            timeout: Duration::from_secs(300),
        });
    }
    if let Some(b) = GUEST_BENCHES.iter().find(|b| b.name == name) {
        let m =
            b.machines.iter().find(|m| m.cpu == cpu).or(b.machines.first()).context("benchmark without machines")?;
        return Ok(Scenario {
            name: name.into(),
            bootargs: format!("bench={}{}", b.name, extra_bootargs(b.name, false)),
            mem: m.mem,
            smp: m.smp,
            timeout: Duration::from_secs(b.timeout_s),
        });
    }
    let known: Vec<&str> = SELFTESTS.iter().map(|s| s.0).chain(GUEST_BENCHES.iter().map(|b| b.name)).collect();
    bail!("unknown scenario {name:?}; known: {}", known.join(", "))
}

/// The settings to run: the product of every named mechanism's values, in the order given.
pub fn settings(specs: &[String]) -> Result<Vec<Vec<(&'static Mechanism, String)>>> {
    let mut by_name: Vec<(&'static Mechanism, Vec<String>)> = Vec::new();
    for s in specs {
        let (name, value) = s.split_once('=').with_context(|| format!("--mechanism {s:?}: want NAME=VALUE"))?;
        let Some(m) = MECHANISMS.iter().find(|m| m.name == name) else {
            let known: Vec<&str> = MECHANISMS.iter().map(|m| m.name).collect();
            bail!("unknown mechanism {name:?}; known: {}", known.join(", "));
        };
        ensure!(m.values.contains(&value), "--mechanism {name}: {value:?} is not one of {}", m.values.join(", "));
        match by_name.iter_mut().find(|(k, _)| k.name == name) {
            Some((_, vs)) if vs.iter().any(|v| v == value) => {}
            Some((_, vs)) => vs.push(value.into()),
            None => by_name.push((m, vec![value.into()])),
        }
    }
    let mut out: Vec<Vec<(&'static Mechanism, String)>> = vec![Vec::new()];
    for (m, values) in by_name {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut p = prefix.clone();
                    p.push((m, v.clone()));
                    p
                })
            })
            .collect();
    }
    Ok(out)
}

fn setting_label(s: &[(&Mechanism, String)]) -> String {
    if s.is_empty() {
        "default".into()
    } else {
        s.iter().map(|(m, v)| format!("{}={v}", m.name)).collect::<Vec<_>>().join(",")
    }
}

/// What `perf` was asked for (`cargo xtask perf`'s flags).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// A self-test or benchmark workload (an unknown name lists them), or `list`: the events of
    /// the chosen CPU.
    pub scenario: String,
    /// Events by name or number, each optionally `:el0+el1+el2` (default every EL).
    #[arg(long, default_value = "INST_RETIRED")]
    pub events: String,
    /// NAME=VALUE, repeatable: one boot per combination (e.g. bbml2=on --mechanism bbml2=off).
    #[arg(long = "mechanism")]
    pub mechanisms: Vec<String>,
    /// QEMU CPU model (default max; under KVM the host's own, and --cpu is refused).
    #[arg(long)]
    pub cpu: Option<String>,
    /// GIC version.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(2..=3))]
    pub gic: u8,
    /// -icount shift=0 (instructions counted, exactly).
    #[arg(long)]
    pub icount: bool,
    /// Also count TLBI/DSB/ISB with the QEMU plugin, per EL and vCPU.
    #[arg(long)]
    pub count_insns: bool,
    /// More kernel boot arguments (e.g. split.gib=4).
    #[arg(long, default_value = "")]
    pub bootargs: String,
    /// How QEMU runs the guest: tcg (the default), kvm (this arm64 host's cores and their PMU:
    /// the events the host's KVM exposes are counted, the others said so), kvm-model.
    #[arg(long, value_parser = crate::run::accel_arg)]
    pub accel: Option<&'static crate::machine::Accel>,
    /// The kernel alone at EL1, without the hypervisor (a host whose KVM offers no EL2, such
    /// as a Pi 5).
    #[arg(long)]
    pub no_hypervisor: bool,
}

impl Args {
    /// The accelerator (TCG unless `--accel`).
    fn accel(&self) -> &'static crate::machine::Accel {
        self.accel.unwrap_or(crate::machine::accel::default())
    }

    /// `--cpu`, or QEMU's `max`.
    fn cpu(&self) -> &str {
        self.cpu.as_deref().unwrap_or("max")
    }

    /// The CPU's name in titles and file names: `--cpu` under TCG, `host` under KVM (which
    /// takes the host's).
    fn cpu_name(&self) -> &str {
        if self.accel().tcg {
            self.cpu()
        } else {
            "host"
        }
    }
}

/// `cargo xtask perf`.
pub fn cli(a: Args) -> Result<()> {
    a.accel().check(a.icount, a.count_insns, false)?;
    if let (Some(c), Some(forced)) = (&a.cpu, a.accel().cpu) {
        return crate::error::refuse(format!(
            "--cpu {c} with --accel {}: KVM runs the host's own CPU (-cpu {forced}); leave --cpu out",
            a.accel()
        ));
    }
    if a.accel().runs == crate::machine::accel::Runs::Here && !a.accel().tcg {
        supervise::kvm::host()?;
    }
    if a.scenario == "list" {
        return list(&a);
    }
    run(&a)
}

/// (counter, el, source) of a row.
pub type RowKey = (String, String, String);

/// One boot's results.
#[derive(Debug, Clone)]
pub struct SettingRun {
    pub label: String,
    pub info: ParsedRecord,
    /// Each row's value (`Err`: not counted here, and why).
    pub values: Vec<(RowKey, Result<u64, String>)>,
}

/// Reads a run's `perf_info` and `perf` records; checks every requested mechanism setting took.
pub fn collect_setting(
    label: &str,
    output: &str,
    setting: &[(&Mechanism, String)],
    plugin_counts: Option<&plugin::Counts>,
) -> Result<SettingRun> {
    let (records, errors) = report::collect(output);
    ensure!(errors.is_empty(), "malformed records: {errors:?}");
    let info = report::first(&records, "perf_info")
        .cloned()
        .context("the kernel printed no perf_info record (did the scenario finish?)")?;
    for (m, v) in setting {
        let (field, want) = (m.reported)(v);
        match info.str(field) {
            Some(got) if got == want => {}
            // The machine cannot do what was asked (e.g. bbml2=on on a core without FEAT_BBM
            // level 2): the request is refused, as a usage error, with what the kernel said.
            Some(got) => {
                let why = report::kernel_line_about(output, m.name).map(|l| format!(" ({l})")).unwrap_or_default();
                return Err(anyhow::Error::new(crate::error::Refused(format!(
                    "{label}: asked for {}={v}, but the kernel ran with {field}={got}{why}",
                    m.name
                ))));
            }
            None => bail!("{label}: the kernel does not report {field:?}: mechanism {} is not in this kernel", m.name),
        }
    }
    let mut values = Vec::new();
    for r in records.iter().filter(|r| r.kind == "perf") {
        let key = (
            r.str("counter").unwrap_or("?").to_string(),
            r.str("el").unwrap_or("-").to_string(),
            r.str("source").unwrap_or("?").to_string(),
        );
        let v = match r.u64("value") {
            Some(v) => Ok(v),
            None => Err(r.str("why").unwrap_or("not counted").to_string()),
        };
        values.push((key, v));
    }
    ensure!(!values.is_empty(), "{label}: no perf records");
    if let Some(c) = plugin_counts {
        ensure!(c.windows >= 1, "{label}: the plugin saw no marked window");
        for el in [1u8, 2] {
            let (t, d, i) = c.window_el(0, el);
            for (name, v) in [("tlbi", t), ("dsb", d), ("isb", i)] {
                values.push(((name.into(), format!("el{el}"), "plugin".into()), Ok(v)));
            }
        }
        for line in c.window(0) {
            for (name, v) in [("tlbi", line.tlbi), ("dsb", line.dsb), ("isb", line.isb), ("insns", line.insns)] {
                values.push(((name.into(), format!("el{} vcpu{}", line.el, line.vcpu), "plugin".into()), Ok(v)));
            }
        }
    }
    Ok(SettingRun { label: label.into(), info, values })
}

/// The side-by-side table: one row per counter, one column per setting, then each setting's
/// ratio to the first.
pub fn side_by_side(runs: &[SettingRun]) -> String {
    let mut keys: Vec<RowKey> = Vec::new();
    for r in runs {
        for (k, _) in &r.values {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    let mut header: Vec<String> = vec!["counter".into(), "el".into(), "source".into()];
    header.extend(runs.iter().map(|r| r.label.clone()));
    header.extend(runs.iter().skip(1).map(|r| format!("ratio {}", r.label)));
    let mut rows = Vec::new();
    let mut notes: BTreeMap<String, String> = BTreeMap::new();
    for k in &keys {
        let mut row = vec![k.0.clone(), k.1.clone(), k.2.clone()];
        let vals: Vec<Option<&Result<u64, String>>> =
            runs.iter().map(|r| r.values.iter().find(|(kk, _)| kk == k).map(|(_, v)| v)).collect();
        for v in &vals {
            row.push(match v {
                Some(Ok(v)) => v.to_string(),
                Some(Err(why)) => {
                    notes.insert(k.0.clone(), why.clone());
                    "not counted".into()
                }
                None => "-".into(),
            });
        }
        for v in vals.iter().skip(1) {
            row.push(match (vals[0], v) {
                (Some(Ok(0)), Some(Ok(0))) => "=".into(),
                (Some(Ok(0)), Some(Ok(_))) => "new".into(),
                (Some(Ok(b)), Some(Ok(x))) => format!("{:.3}", *x as f64 / *b as f64),
                _ => "-".into(),
            });
        }
        rows.push(row);
    }
    let mut out = report::aligned(&header, &rows, 3);
    for (counter, why) in notes {
        let _ = writeln!(out, "not counted: {counter}: {why}");
    }
    out
}

/// Runs `perf SCENARIO`.
pub fn run(a: &Args) -> Result<()> {
    // A scenario or mechanism the xtask does not know is a usage error (exit 64), not its own.
    let refused = |e: anyhow::Error| anyhow::Error::new(crate::error::Refused(format!("{e:#}")));
    let sc = scenario(&a.scenario, a.cpu()).map_err(refused)?;
    let sets = settings(&a.mechanisms).map_err(refused)?;
    let tc = toolchain::find()?;
    let qemu_bin = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let lib = if a.count_insns { Some(plugin::build(&qemu_bin)?) } else { None };
    let dir = workspace_root().join("target/perf");
    std::fs::create_dir_all(&dir)?;
    let accel = a.accel();
    let stem = format!(
        "{}-{}{}{}",
        a.scenario,
        a.cpu_name(),
        if a.icount { "-icount" } else { "" },
        if accel.tcg { String::new() } else { format!("-{accel}") }
    );
    let mut runs = Vec::new();
    let mut jsonl = String::new();
    for s in &sets {
        let label = setting_label(s);
        let mut bootargs = sc.bootargs.clone();
        for (m, v) in s {
            bootargs += &format!(" {}", (m.bootarg)(v));
        }
        bootargs += &format!(" perf.scenario={} perf.events={}", a.scenario, a.events);
        if !a.bootargs.is_empty() {
            bootargs += &format!(" {}", a.bootargs);
        }
        let out_file = dir.join(format!("{stem}-{}.plugin.jsonl", label.replace(['=', ','], "_")));
        let mut cfg = Launch {
            accel,
            cpu: a.cpu().into(),
            gic: a.gic,
            smp: sc.smp,
            mem: Some(sc.mem),
            icount: a.icount.then_some(0),
            no_hypervisor: a.no_hypervisor,
            bootargs: bootargs.trim().into(),
            ..Launch::default()
        };
        if let Some(lib) = &lib {
            let _ = std::fs::remove_file(&out_file);
            cfg.plugin =
                Some(plugin::qemu_arg(lib, &out_file, Some(plugin::el2_range(&images, cfg.model())?), cfg.model()));
        }
        eprintln!("xtask: perf {} [{label}] ({})", a.scenario, cfg.describe());
        let out = run_boot(&qemu_bin, &cfg, &images, sc.timeout)?;
        let counts = match &lib {
            Some(_) => Some(plugin::read(&out_file)?),
            None => None,
        };
        let r = collect_setting(&label, &out, s, counts.as_ref())?;
        for ((counter, el, source), v) in &r.values {
            let mut o = serde_json::Map::new();
            o.insert("scenario".into(), a.scenario.clone().into());
            o.insert("cpu".into(), a.cpu_name().into());
            o.insert("icount".into(), a.icount.into());
            if !accel.tcg {
                o.insert("accel".into(), accel.name.into());
            }
            o.insert("setting".into(), label.clone().into());
            o.insert("counter".into(), counter.clone().into());
            o.insert("el".into(), el.clone().into());
            o.insert("source".into(), source.clone().into());
            match v {
                Ok(v) => o.insert("value".into(), (*v).into()),
                Err(why) => o.insert("why".into(), why.clone().into()),
            };
            let _ = writeln!(jsonl, "{}", serde_json::Value::Object(o));
        }
        runs.push(r);
    }
    let info = &runs[0].info;
    let mut text = format!(
        "perf {} on {} ({}, PMUv3 version {}, {} counters{}), {}\n",
        a.scenario,
        a.cpu_name(),
        info.str("core").unwrap_or("?"),
        info.u64("pmuver").unwrap_or(0),
        info.u64("counters").unwrap_or(0),
        if info.bool("long_counters") == Some(true) { ", 64-bit" } else { ", 32-bit with overflow accounting" },
        match (accel.tcg, a.icount) {
            (true, true) => "QEMU TCG -icount shift=0 (instruction counts exact)".to_string(),
            (true, false) => "QEMU TCG (wall time)".to_string(),
            (false, _) => format!("--accel {accel} (the host's PMU through KVM)"),
        }
    );
    text += "counted on CPU 0 around the whole scenario; own = the project's counters (pgtable, cache, PMU driver)";
    if a.count_insns {
        text += "; plugin = executed instructions counted by QEMU (per EL, and per vCPU)";
    }
    text += "\n\n";
    text += &side_by_side(&runs);
    println!("{text}");
    crate::write_file(&dir.join(format!("{stem}.jsonl")), jsonl)?;
    crate::write_file(&dir.join(format!("{stem}.txt")), &text)?;
    eprintln!("xtask: saved target/perf/{stem}.jsonl and .txt");
    Ok(())
}

/// One boot; only a run that ended cleanly counts (the xtask's verdict, as for benchmarks).
fn run_boot(qemu_bin: &std::path::Path, cfg: &Launch, images: &Images, timeout: Duration) -> Result<String> {
    let out = supervise::run(qemu_bin, cfg, images, timeout, Some(Duration::from_secs(60)), |l| {
        if !l.contains(abi::report::PREFIX) {
            supervise::echo_stdout(l)
        }
    })?;
    supervise::require_success(&supervise::judge(&out), "the perf run")?;
    Ok(out.output)
}

/// `perf list`: the events of the CPU's tables (`--cpu`'s, or the host's under KVM), whether
/// counted here, and why not.
pub fn list(a: &Args) -> Result<()> {
    let (cpu, icount) = (a.cpu(), a.icount);
    let tc = toolchain::find()?;
    let qemu_bin = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let cfg = Launch {
        accel: a.accel(),
        cpu: cpu.into(),
        smp: 1,
        icount: icount.then_some(0),
        no_hypervisor: a.no_hypervisor,
        bootargs: "perf.list".into(),
        ..Launch::default()
    };
    let output = run_boot(&qemu_bin, &cfg, &images, Duration::from_secs(120))?;
    let (records, _) = report::collect(&output);
    let pmu: Vec<&ParsedRecord> = records.iter().filter(|r| r.kind == "perf_pmu").collect();
    let events: Vec<&ParsedRecord> = records.iter().filter(|r| r.kind == "perf_event").collect();
    ensure!(!pmu.is_empty() && !events.is_empty(), "the kernel listed no events");
    println!(
        "PMU of -cpu {}{}:\n{}\n{}",
        a.cpu_name(),
        if icount { " under -icount" } else { "" },
        table(&pmu),
        table(&events)
    );
    println!("Mechanisms for --mechanism NAME=VALUE:");
    for m in MECHANISMS {
        println!("  {}={}  {}", m.name, m.values.join("|"), m.about);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A command line the xtask composes: its `hyp.` words must pass the hypervisor's table, the
    /// rest the kernel's (with their rules between words).
    fn accepted(line: &str) {
        let (hyp, kernel): (Vec<&str>, Vec<&str>) = line.split_whitespace().partition(|w| w.starts_with("hyp."));
        bootargs::parse_words(hyp, &hypcore::options::TABLE).unwrap_or_else(|e| panic!("{line}: {e}"));
        kcore::options::Options::parse(&kernel.join(" ")).unwrap_or_else(|e| panic!("{line}: {e}"));
    }

    #[test]
    fn every_boot_word_the_xtask_writes_is_one_the_binaries_accept() {
        for m in MECHANISMS {
            for v in m.values {
                accepted(&(m.bootarg)(v));
            }
        }
        for (name, _, _) in SELFTESTS {
            accepted(&scenario(name, "max").unwrap().bootargs);
        }
        for b in crate::bench::GUEST_BENCHES {
            for icount in [false, true] {
                accepted(&scenario(b.name, "max").unwrap().bootargs);
                accepted(&format!("bench={}{}", b.name, crate::bench::extra_bootargs(b.name, icount)));
            }
        }
    }

    #[test]
    fn every_selftest_scenario_is_a_kernel_selftest() {
        for (name, _, _) in SELFTESTS.iter().filter(|s| s.0 != "boot") {
            assert!(abi::names::SELFTESTS.contains(name), "{name} is not in abi::names::SELFTESTS");
            assert!(!abi::names::SELFTESTS_ENDING_RUN.contains(name), "{name} ends the run: no scenario");
        }
    }

    #[test]
    fn settings_are_the_product_of_the_mechanisms() {
        let s = settings(&["bbml2=on".into(), "bbml2=off".into(), "contpte=off".into()]).unwrap();
        let labels: Vec<String> = s.iter().map(|x| setting_label(x)).collect();
        assert_eq!(labels, ["bbml2=on,contpte=off", "bbml2=off,contpte=off"]);
        assert_eq!(settings(&[]).unwrap().len(), 1);
        assert!(settings(&["nope=on".into()]).is_err());
        assert!(settings(&["bbml2=maybe".into()]).is_err());
        assert!(settings(&["bbml2".into()]).is_err());
        let w = settings(&["skip_level3=on".into()]).unwrap();
        assert_eq!((w[0][0].0.bootarg)("on"), "perf.walker=skip_level3");
    }

    #[test]
    fn scenarios_resolve_to_boot_arguments() {
        assert_eq!(scenario("mem-perms", "max").unwrap().bootargs, "test=mem-perms");
        assert_eq!(scenario("dirty-log", "max").unwrap().mem, Size::gib(3));
        let s = scenario("split", "max").unwrap();
        assert!(s.bootargs.contains("bench=split") && s.bootargs.contains("hyp.slotpool=1G"));
        assert!(scenario("no-such", "max").is_err());
    }

    fn out(bbml2: &str, tlbi: u64) -> String {
        format!(
            "@@report {{\"kind\":\"perf_info\",\"scenario\":\"x\",\"core\":\"QEMU max\",\"bbml2\":\"{bbml2}\",\"contpte\":\"on\"}}\n\
             @@report {{\"kind\":\"perf\",\"scenario\":\"x\",\"counter\":\"tlbi\",\"el\":\"el1\",\"source\":\"own\",\"value\":{tlbi}}}\n\
             @@report {{\"kind\":\"perf\",\"scenario\":\"x\",\"counter\":\"L1D_TLB_REFILL\",\"el\":\"all\",\"source\":\"pmu\",\"value\":null,\"why\":\"not implemented here\"}}\n"
        )
    }

    #[test]
    fn a_setting_the_kernel_did_not_apply_is_an_error() {
        let s = settings(&["bbml2=on".into()]).unwrap();
        assert!(collect_setting("bbml2=on", &out("on", 4), &s[0], None).is_ok());
        let refused =
            format!("kernel: bbml2=on refused: no FEAT_BBM (add bbml2_unsafe_override to force it)\n{}", out("off", 4));
        let e = collect_setting("bbml2=on", &refused, &s[0], None).unwrap_err();
        assert_eq!(crate::error::code_of(&e), abi::exit::USAGE, "the machine cannot do what was asked: a refusal");
        let e = e.to_string();
        assert!(e.contains("ran with bbml2=off") && e.contains("(kernel: bbml2=on refused: no FEAT_BBM"), "{e}");
        let w = settings(&["walker=summary".into()]).unwrap();
        let e = collect_setting("walker=summary", &out("on", 4), &w[0], None).unwrap_err().to_string();
        assert!(e.contains("not in this kernel"), "{e}");
    }

    #[test]
    fn table_has_ratios_and_honest_gaps() {
        let s = settings(&["bbml2=on".into(), "bbml2=off".into()]).unwrap();
        let a = collect_setting("bbml2=on", &out("on", 4), &s[0], None).unwrap();
        let b = collect_setting("bbml2=off", &out("off", 10), &s[1], None).unwrap();
        let t = side_by_side(&[a, b]);
        let tlbi = t.lines().find(|l| l.starts_with("tlbi")).unwrap();
        assert!(tlbi.ends_with("2.500"), "{t}");
        assert!(t.contains("not counted: L1D_TLB_REFILL: not implemented here"), "{t}");
    }
}
