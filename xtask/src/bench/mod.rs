//! `cargo xtask bench NAME`: host benchmarks (`pgtable`) and in-guest benchmarks.
//!
//! An in-guest benchmark boots the kernel with `bench=NAME` once per machine of its list (e.g.
//! `-cpu max`, which has BBML2, and `-cpu cortex-a76`, which has none), collects the `bench`
//! report records, prints one table per machine and one with the machines side by side, and
//! writes everything to `target/bench/NAME[-icount].{jsonl,txt}`. With `--icount` QEMU runs
//! `-icount shift=0`: instruction counts are then deterministic (and wall time is not real).
//!
//! With `--accel kvm` the same boots run on this arm64 host's cores ([`On`]): the host's CPU
//! takes every CPU model, so machines that differ only in theirs are one (`host`, `host-1cpu`,
//! ...); every row records the accelerator, the core (MIDR) the kernel ran on and the host
//! (its kernel, KVM's PMU), and the files are `NAME-kvm.*`, so runs on two hosts compare
//! (`--compare`) and TCG's figures stay apart.

use crate::build::{self, Images};
use crate::error::{ExitWith, Verdict};
use crate::launch::{Guest, Launch};
use crate::machine::Accel;
use crate::plot::{self, peer_side_by_side, peer_table};
use crate::provision::{system, toolchain};
use crate::report::{self, table};
use crate::supervise;
use crate::workspace_root;
use abi::report::ParsedRecord;
use anyhow::{ensure, Context, Result};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

pub mod baseline;
pub mod catalog;
pub mod dirty_log;
pub mod guest_boot;
pub mod pgtable;

pub use catalog::{extra_bootargs, GuestBench, Setup, EL0_ROUNDS, GUEST_BENCHES, HOST_BENCHES};

/// Another kernel a guest benchmark can be compared with (`--peer`): Debian's Linux running the
/// benchmark's Linux side (`linux-user/src/bench.rs`) as /init's child, under the hypervisor on
/// the same QEMU machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The newest cloud kernel of `<codename>-backports` (6.12 on Debian 12): `linux`.
    Linux,
    /// Debian's newest arm64 cloud kernel (7.x of sid, the KVM host model's): `linux-newest`.
    LinuxNewest,
}

impl Peer {
    /// Every peer: its `--peer` name and what it is.
    pub const ALL: [(&'static str, Peer, &'static str); 2] = [
        ("linux", Peer::Linux, "Debian's <codename>-backports cloud kernel, 6.12 on Debian 12"),
        ("linux-newest", Peer::LinuxNewest, "Debian's newest arm64 cloud kernel, 7.x of sid, the KVM host model's"),
    ];

    /// Its `--peer` name.
    pub fn name(self) -> &'static str {
        Peer::ALL.iter().find(|(_, p, _)| *p == self).map_or("?", |(n, _, _)| n)
    }

    /// The Debian kernel it boots.
    pub fn flavour(self) -> crate::linux::Flavour {
        match self {
            Peer::Linux => crate::linux::Flavour::CloudBackports,
            Peer::LinuxNewest => crate::linux::Flavour::CloudNewest,
        }
    }

    /// From `--peer NAMES`: one name or several, comma-separated (`linux,linux-newest`), each
    /// once.
    pub fn parse(s: &str) -> Result<Vec<Peer>> {
        let known = || Peer::ALL.iter().map(|(n, _, d)| format!("{n} ({d})")).collect::<Vec<_>>().join(", ");
        let refuse = |why: String| Err(anyhow::Error::new(crate::error::Refused(why)));
        let mut out = Vec::new();
        for name in s.split(',').map(str::trim) {
            let Some((_, p, _)) = Peer::ALL.iter().find(|(n, _, _)| *n == name) else {
                return refuse(format!(
                    "--peer {s}: unknown peer {name:?} (known: {}; several: comma-separated)",
                    known()
                ));
            };
            if out.contains(p) {
                return refuse(format!("--peer {s}: {name} twice"));
            }
            out.push(*p);
        }
        Ok(out)
    }
}

/// The label of a Linux peer's rows and columns: `linux-MAJOR.MINOR` of the Debian package its
/// kernel came from (`linux-6.12`, `linux-7.2`), or `linux-` and the peer's name when the
/// package's name carries no version.
pub fn peer_label(peer: Peer, package: &str) -> String {
    match crate::provision::cloud_kernel::kernel_version(package) {
        Some((major, minor)) => format!("linux-{major}.{minor}"),
        None => format!("linux-{}", peer.name()),
    }
}

/// A Linux peer ready to boot.
#[derive(Debug, Clone)]
pub struct PeerGuest {
    /// Its label (rows, columns): [`peer_label`].
    pub label: String,
    /// The Debian package its kernel came from.
    pub package: String,
    pub guest: Guest,
}

/// Refuses peers whose labels coincide (two peers of one Linux version): their rows could not
/// be told apart.
pub fn check_labels(peers: &[PeerGuest]) -> Result<(), crate::error::Refused> {
    for (i, a) in peers.iter().enumerate() {
        if let Some(b) = peers[i + 1..].iter().find(|b| b.label == a.label) {
            return Err(crate::error::Refused(format!(
                "--peer: {} and {} are both {} (one Linux version twice): give one of them",
                a.package, b.package, a.label
            )));
        }
    }
    Ok(())
}

/// Where the guest benchmarks run: the accelerator, with or without the hypervisor, and under
/// KVM the GIC it gives (under TCG each machine of a benchmark has its own).
#[derive(Debug, Clone, Copy)]
pub struct On {
    pub accel: &'static Accel,
    /// The kernel alone at EL1 (a host whose KVM offers no EL2: a Pi 5).
    pub no_hypervisor: bool,
    /// The GIC version under KVM (`None`: each machine's).
    pub gic: Option<u8>,
}

impl Default for On {
    fn default() -> Self {
        On { accel: crate::machine::accel::default(), no_hypervisor: false, gic: None }
    }
}

impl On {
    /// Refuses what cannot run: a GIC chosen under TCG (each machine has its own), `--icount`
    /// under KVM, benchmark `b` without the hypervisor when its rows measure the hypervisor.
    pub fn check(&self, b: &GuestBench, icount: bool) -> Result<(), crate::error::Refused> {
        use crate::error::Refused;
        if self.accel.tcg && self.gic.is_some() {
            return Err(Refused(
                "--gic: under TCG each machine of a benchmark has its own GIC; --gic chooses KVM's (--accel kvm)"
                    .into(),
            ));
        }
        self.accel.check(icount, false, false)?;
        if self.no_hypervisor && b.hypervisor {
            return Err(Refused(format!(
                "--no-hypervisor: bench {} measures the hypervisor (its rows are its exits or its stage 2); it runs \
                 only where the hypervisor does",
                b.name
            )));
        }
        Ok(())
    }

    /// The machines of a benchmark here, each with its label: as listed under TCG; under KVM
    /// the host's CPU takes every CPU model, so machines that differ only in theirs are one,
    /// labelled `host` in place of the CPU model's name (`max-1cpu` and `a76-1cpu`:
    /// `host-1cpu`).
    pub fn machines(&self, machines: &[Setup]) -> Vec<(String, Setup)> {
        if self.accel.tcg {
            return machines.iter().map(|m| (m.label.to_string(), *m)).collect();
        }
        let mut out: Vec<(String, Setup)> = Vec::new();
        for m in machines {
            // The label's first word names the CPU model (`max-1cpu`, `a76-4G`).
            let rest = m.label.find('-').map_or("", |i| &m.label[i..]);
            let label = format!("host{rest}");
            if !out.iter().any(|(l, _)| *l == label) {
                out.push((label, *m));
            }
        }
        out
    }

    /// How the figures were taken, for the tables' titles.
    pub fn mode(&self, icount: bool) -> String {
        let alone = if self.no_hypervisor { ", the kernel alone" } else { "" };
        match (self.accel.tcg, icount) {
            (true, true) => format!("QEMU TCG with -icount shift=0 (instruction counts exact, time is virtual){alone}"),
            (true, false) => format!("QEMU TCG (wall time){alone}"),
            (false, _) => format!("--accel {} (the host's cores: wall time, PMU counts){alone}", self.accel),
        }
    }

    /// The saved files' name: `NAME`, `-icount` under `--icount`, `-ACCEL` off TCG (so a KVM
    /// run never replaces the TCG figures the summary reads).
    pub fn stem(&self, name: &str, icount: bool) -> String {
        let mut s = name.to_string();
        if icount {
            s.push_str("-icount");
        }
        if !self.accel.tcg {
            s.push('-');
            s.push_str(self.accel.name);
        }
        s
    }
}

/// Runs benchmark `which` (beside `peers`) on TCG.
pub fn run(which: &str, icount: bool, peers: &[Peer]) -> Result<()> {
    run_on(which, icount, peers, On::default())
}

/// Runs benchmark `which` (beside `peers`) where `on` says.
pub fn run_on(which: &str, icount: bool, peers: &[Peer], on: On) -> Result<()> {
    if (which == "guest-boot" || which == "pgtable") && (!on.accel.tcg || on.no_hypervisor || on.gic.is_some()) {
        return crate::error::refuse(format!(
            "{which}: --accel, --no-hypervisor and --gic are for the in-guest benchmarks ({which} {})",
            if which == "pgtable" { "runs on this host" } else { "compares the hypervisor with plain QEMU on TCG" }
        ));
    }
    if which == "guest-boot" || which == "pgtable" {
        if !peers.is_empty() {
            return Err(anyhow::Error::new(crate::error::Refused(format!(
                "--peer: {which} has no peer side (only the EL0 benchmark mprotect has)"
            ))));
        }
        return if which == "pgtable" { crate::bench::pgtable::run() } else { crate::bench::guest_boot::run(icount) };
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
        return Err(anyhow::Error::new(crate::error::Refused(format!("unknown benchmark {which:?}; known:\n{list}"))));
    };
    if b.name == "split" && !peers.is_empty() {
        return run_split_with_peers(b, icount, peers, on);
    }
    if !peers.is_empty() && !b.peer {
        return Err(anyhow::Error::new(crate::error::Refused(format!(
            "--peer: {which} has no peer side (its rows measure the kernel's own mechanisms; only the EL0 \
             benchmark mprotect and split have one)"
        ))));
    }
    on.check(b, icount)?;
    if on.accel.runs == crate::machine::accel::Runs::Here && !on.accel.tcg {
        supervise::kvm::host()?;
    }
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let linux = peers.iter().map(|p| linux_guest(*p)).collect::<Result<Vec<_>>>()?;
    check_labels(&linux)?;
    run_guest(b, &qemu, &images, icount, &linux, on)
}

/// `bench split --peer ...`: ours as always, then each Linux peer's KVM eager split
/// ([`dirty_log`]: built and prepared first, so a peer that cannot be had fails before the long
/// runs), side by side per final PTE. The peers run on TCG: refused with another accelerator or
/// without the hypervisor.
fn run_split_with_peers(b: &GuestBench, icount: bool, peers: &[Peer], on: On) -> Result<()> {
    if !on.accel.tcg {
        return crate::error::refuse(format!(
            "--peer with --accel {}: split's Linux peers boot Linux at EL2 with KVM under QEMU TCG; compare on TCG",
            on.accel
        ));
    }
    on.check(b, icount)?;
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let prepared = peers.iter().map(|p| dirty_log::prepare(*p)).collect::<Result<Vec<_>>>()?;
    check_labels(&prepared.iter().map(|p| p.peer.clone()).collect::<Vec<_>>())?;
    run_guest(b, &qemu, &images, icount, &[], on)?;
    dirty_log::run(&prepared, icount, &images)
}

/// The host a run off TCG measured, one line for its rows: this host's kernel and KVM's PMU
/// under `--accel kvm`, the model's Linux under `kvm-model`.
fn host_line(accel: &Accel) -> Result<Option<String>> {
    use crate::machine::accel::Runs;
    if accel.tcg {
        return Ok(None);
    }
    Ok(Some(match accel.runs {
        Runs::Here => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            let k = crate::provision::kvm::probe()?;
            let pmus: Vec<String> = k.pmus.iter().map(|(dev, p)| format!("{dev} ({} events)", p.count)).collect();
            format!(
                "Linux {} with KVM; PMU: {}",
                release.trim(),
                if pmus.is_empty() { "none".into() } else { pmus.join(", ") }
            )
        }
        Runs::KvmModel => format!(
            "the KVM host model ({})",
            crate::provision::kvm_model::cached().map_or("not provisioned yet".into(), |p| p.manifest.describe())
        ),
    }))
}

/// A Linux side's guest: the peer's Debian cloud kernel, the busybox initramfs with the
/// benchmark program, quiet.
pub fn linux_guest(peer: Peer) -> Result<PeerGuest> {
    let l = crate::linux::prepare(peer.flavour(), &crate::linux::extra_programs()?)?;
    let label = peer_label(peer, &l.package);
    eprintln!("xtask: peer {label}: {} ({})", l.package, l.kernel.display());
    let guest = Guest {
        kernel: l.kernel,
        initrd: Some(l.initramfs),
        append: format!("{} quiet", crate::linux::DEFAULT_APPEND),
    };
    Ok(PeerGuest { label, package: l.package, guest })
}

/// Boots one side of benchmark `b` on machine `label` with `cfg`; returns its `bench` records
/// and the kernel's `banner` record of CPU 0 (the core it ran on; Linux prints none). `side` is
/// what the side's program calls itself in its records (`pgtlab`, `linux`), `who` names it in
/// messages (`linux-7.2`).
fn boot_side(
    b: &GuestBench,
    label: &str,
    side: &str,
    who: &str,
    cfg: &Launch,
    qemu: &std::path::Path,
    images: &Images,
) -> Result<(Vec<ParsedRecord>, Option<ParsedRecord>)> {
    eprintln!("xtask: bench {} on {label} ({who}: {})", b.name, cfg.describe());
    let out =
        supervise::run(qemu, cfg, images, Duration::from_secs(b.timeout_s), Some(Duration::from_secs(60)), |l| {
            if !l.contains(abi::report::PREFIX) {
                supervise::echo_stdout(l)
            }
        })?;
    // Only a run that ended cleanly counts, whatever records it printed before.
    supervise::require_success(&supervise::judge(&out), &format!("benchmark {} on {label} ({who})", b.name))?;
    let (records, errors) = report::collect(&out.output);
    ensure!(errors.is_empty(), "malformed records: {errors:?}");
    if side == "linux" {
        let status = report::first(&records, "linux_bench_exit").and_then(|r| r.u64("status"));
        if status != Some(0) {
            return Err(anyhow::Error::new(ExitWith(Verdict::new(
                abi::exit::CHECK_FAILED,
                format!("benchmark {} on {label} ({who}): the program ended with status {status:?}", b.name),
            ))));
        }
    }
    let banner = records.iter().find(|r| r.kind == "banner" && r.u64("cpu") == Some(0)).cloned();
    let rows: Vec<ParsedRecord> = records
        .into_iter()
        .filter(|r| r.kind == "bench" && r.str("bench") == Some(b.name))
        .filter(|r| r.str("peer").unwrap_or("pgtlab") == side)
        .collect();
    ensure!(!rows.is_empty(), "the {who} side printed no bench records for {}", b.name);
    Ok((rows, banner))
}

/// The QEMU run of bench `b` on machine `m`: its CPU model, GIC, vCPUs and memory, `-icount
/// shift=0` when `icount`, and the kernel words that start the bench; on `on`'s accelerator
/// (KVM: the host's CPU and `on`'s GIC), with or without the hypervisor.
pub(crate) fn machine_config(b: &GuestBench, m: &Setup, icount: bool, on: On) -> Launch {
    Launch {
        accel: on.accel,
        cpu: m.cpu.into(),
        gic: on.gic.filter(|_| !on.accel.tcg).unwrap_or(m.gic),
        smp: m.smp,
        mem: Some(m.mem),
        icount: icount.then_some(0),
        no_hypervisor: on.no_hypervisor,
        bootargs: format!("bench={}{}", b.name, extra_bootargs(b.name, icount)),
        ..Launch::default()
    }
}

/// The peer side of `ours`: the same machine (CPU model, vCPUs, memory, GIC, hypervisor,
/// icount), Linux as the guest, told to run the bench's programs.
pub fn peer_config(ours: &Launch, guest: &Guest) -> Launch {
    Launch {
        guest: Some(guest.clone()),
        bootargs: format!("pgtlab_test=bench pgtlab_bench_args=rounds={EL0_ROUNDS}"),
        ..ours.clone()
    }
}

/// Boots every run of the quick set ([`baseline::quick_runs`]) and returns its figures.
pub fn run_quick(qemu: &std::path::Path, images: &Images) -> Result<Vec<baseline::Figure>> {
    let mut out = Vec::new();
    for q in baseline::quick_runs() {
        let (records, _) = boot_side(q.bench, q.setup.label, "pgtlab", "pgtlab", &q.launch, qemu, images)?;
        out.extend(baseline::quick_figures(&q, &records));
    }
    Ok(out)
}

/// `cargo xtask bench check [--saved]`: every in-guest benchmark under `--icount` and the host
/// benchmark (or, with `saved`, what their last runs saved in target/bench/), each figure
/// against the committed baseline's `bench` set; fails naming every figure that rose beyond
/// the margin.
fn check_cli(saved: bool) -> Result<()> {
    let base = baseline::read(&baseline::path())?;
    if !saved {
        run_every_baselined()?;
    }
    let dir = workspace_root().join("target/bench");
    let measured = baseline::saved_figures(&dir)?;
    anyhow::ensure!(!measured.is_empty(), "no saved --icount runs in {} to check", dir.display());
    let report = baseline::check(&base, &measured, baseline::Run::Bench);
    let text = report.text();
    println!("== bench check: the --icount figures against {} ==\n{text}", baseline::FILE);
    crate::write_file(&dir.join("check.txt"), &text)?;
    if !report.ok() {
        let n = report.failures().count();
        return Err(crate::error::check_failed(format!(
            "bench check: {n} figures rose above the baseline (or are gone or new); see above and target/bench/check.txt"
        )));
    }
    Ok(())
}

/// Runs every benchmark the `bench` set of the baseline holds: each in-guest one under
/// `--icount`, the host one.
fn run_every_baselined() -> Result<()> {
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    let images = build::build(&tc, &[])?;
    for b in GUEST_BENCHES {
        run_guest(b, &qemu, &images, true, &[], On::default())?;
    }
    crate::bench::pgtable::run()
}

/// `cargo xtask bench baseline --update [--saved]`: measures the quick set and every benchmark
/// (or takes the saved runs for the latter), rewrites the baseline and prints every figure that
/// changed, saved as target/bench/baseline-diff.txt.
fn baseline_cli(update: bool, saved: bool) -> Result<()> {
    if !update {
        return crate::error::refuse(format!(
            "bench baseline: give --update to measure every figure again and rewrite {} (the change is              printed and saved as target/bench/baseline-diff.txt); bench check compares without writing",
            baseline::FILE
        ));
    }
    let path = baseline::path();
    let before = if path.exists() { baseline::read(&path)? } else { Vec::new() };
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let mut figures = run_quick(&qemu, &images)?;
    if !saved {
        for b in GUEST_BENCHES {
            run_guest(b, &qemu, &images, true, &[], On::default())?;
        }
        crate::bench::pgtable::run()?;
    }
    let dir = workspace_root().join("target/bench");
    figures.extend(baseline::saved_figures(&dir)?);
    let mut text = String::new();
    for run in [baseline::Run::Test, baseline::Run::Bench] {
        let changes = baseline::diff(&before, &figures, run, false);
        let _ = writeln!(text, "== {} set: {} figures changed ==", run.name(), changes.len());
        for c in &changes {
            let f = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            let _ = writeln!(text, "{}: {} -> {}", baseline::describe(&c.key), f(c.before), f(c.after));
        }
    }
    crate::write_file(&path, baseline::render(&figures))?;
    crate::write_file(&dir.join("baseline-diff.txt"), &text)?;
    println!(
        "{text}xtask: wrote {} ({} figures); the change is saved as target/bench/baseline-diff.txt",
        baseline::FILE,
        figures.len()
    );
    Ok(())
}

/// Boots `b` on each of its machines (and each Linux peer of `linux` on the same machine) and
/// prints and saves the tables. Each row's `peer` is its side's label (`pgtlab`, `linux-7.2`).
pub fn run_guest(
    b: &GuestBench,
    qemu: &std::path::Path,
    images: &Images,
    icount: bool,
    linux: &[PeerGuest],
    on: On,
) -> Result<()> {
    let mode = on.mode(icount);
    let host = host_line(on.accel)?;
    let machines = on.machines(b.machines);
    let mut per_machine: Vec<(&str, Vec<ParsedRecord>)> = Vec::new();
    let mut peers: Vec<plot::PeerRun> = Vec::new();
    let mut wall: Vec<(&str, u64)> = Vec::new();
    let mut jsonl = String::new();
    for (label, m) in &machines {
        let label = label.as_str();
        let cfg = machine_config(b, m, icount, on);
        let started = std::time::Instant::now();
        let (rows, banner) = boot_side(b, label, "pgtlab", "pgtlab", &cfg, qemu, images)?;
        if b.name == "split" {
            check_split(&rows, icount).with_context(|| format!("benchmark split on {label}"))?;
        }
        let mut sides = vec![(plot::OURS, None, rows)];
        for p in linux {
            let cfg = peer_config(&cfg, &p.guest);
            sides.push((p.label.as_str(), Some(p), boot_side(b, label, "linux", &p.label, &cfg, qemu, images)?.0));
        }
        for (side, p, rows) in &sides {
            for r in rows {
                let mut obj = r.fields.clone();
                obj.insert("machine".into(), label.into());
                obj.insert("icount".into(), icount.into());
                obj.insert("peer".into(), (*side).into());
                if let Some(p) = p {
                    obj.insert("peer_package".into(), p.package.as_str().into());
                }
                if let Some(h) = &host {
                    // Off TCG the figures are a real core's: which, and on which host.
                    obj.insert("accel".into(), on.accel.name.into());
                    obj.insert("host".into(), h.as_str().into());
                    if let Some(bn) = &banner {
                        for f in ["core", "midr"] {
                            if let Some(v) = bn.get(f) {
                                obj.insert(f.into(), v.clone());
                            }
                        }
                    }
                }
                let _ = writeln!(jsonl, "{}", serde_json::Value::Object(obj));
            }
        }
        let mut sides = sides.into_iter();
        per_machine.push((label, sides.next().map(|(_, _, r)| r).unwrap_or_default()));
        for (peer, _, rows) in sides {
            peers.push(plot::PeerRun { machine: label.to_string(), peer: peer.to_string(), rows });
        }
        wall.push((label, started.elapsed().as_secs()));
        eprintln!("xtask: bench {} on {label} took {} s (wall)", b.name, started.elapsed().as_secs());
    }
    let mut text = format!("benchmark {} — {mode}\n", b.name);
    if let Some(h) = &host {
        let _ = writeln!(text, "host: {h}");
    }
    for p in linux {
        let _ = writeln!(
            text,
            "peer {}: {}, the same workload (lib/el0bench) as /init's child, same machine",
            p.label, p.package
        );
    }
    for ((label, rows), (_, secs)) in per_machine.iter().zip(&wall) {
        let refs: Vec<&ParsedRecord> = rows.iter().collect();
        let _ = write!(text, "\n== {label} (boots took {secs} s wall) ==\n{}", table(&refs));
        let theirs: Vec<(&str, &[ParsedRecord])> =
            peers.iter().filter(|r| r.machine == *label).map(|r| (r.peer.as_str(), r.rows.as_slice())).collect();
        if !theirs.is_empty() {
            let _ = write!(text, "\n== {label}: pgtlab against Linux ==\n{}", peer_table(rows, &theirs, icount));
        }
    }
    if per_machine.len() > 1 {
        let _ = write!(text, "\n== side by side ==\n{}", side_by_side(&per_machine, b.compare));
    }
    if !peers.is_empty() {
        let _ = write!(
            text,
            "\n== pgtlab / Linux, {} ==\n{}",
            if icount { "instructions" } else { "time" },
            peer_side_by_side(&per_machine, &peers, icount)
        );
    }
    println!("{text}");
    let dir = workspace_root().join("target/bench");
    std::fs::create_dir_all(&dir)?;
    let stem = on.stem(b.name, icount);
    crate::write_file(&dir.join(format!("{stem}.jsonl")), &jsonl)?;
    crate::write_file(&dir.join(format!("{stem}.txt")), &text)?;
    let svg = crate::plot::draw::bench_svg(&dir, b.name, &stem, &jsonl, crate::plot::rows::mode(icount))?;
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
    use super::catalog::{A76, MAX};
    use super::*;
    use crate::plot::peer_pairs;

    /// Every bench's QEMU run is its machine's (CPU model, GIC, vCPUs, memory), `-icount` when
    /// asked, started by its own kernel word; the Linux peer runs on the same machine, the
    /// same way, with Linux as the guest told to run the bench.
    #[test]
    fn each_bench_runs_on_its_machine_and_the_peer_on_the_same() {
        let linux = Guest { kernel: "vmlinuz".into(), initrd: Some("initrd".into()), append: "quiet".into() };
        for b in GUEST_BENCHES {
            for m in b.machines {
                for icount in [false, true] {
                    let cfg = machine_config(b, m, icount, On::default());
                    let what = format!("{} on {} (icount {icount})", b.name, m.label);
                    assert_eq!(
                        (cfg.cpu.as_str(), cfg.gic, cfg.smp, cfg.mem),
                        (m.cpu, m.gic, m.smp, Some(m.mem)),
                        "{what}"
                    );
                    assert_eq!(cfg.icount, icount.then_some(0), "{what}");
                    assert!(cfg.bootargs.starts_with(&format!("bench={}", b.name)), "{what}: {}", cfg.bootargs);
                    assert!(cfg.guest.is_none() && !cfg.no_hypervisor, "{what}");
                    let peer = peer_config(&cfg, &linux);
                    assert_eq!(
                        (peer.cpu.as_str(), peer.gic, peer.smp, peer.mem, peer.icount),
                        (m.cpu, m.gic, m.smp, Some(m.mem), icount.then_some(0)),
                        "{what}: the peer's machine"
                    );
                    assert_eq!(peer.guest.as_ref(), Some(&linux), "{what}");
                    assert_eq!(
                        peer.bootargs,
                        format!("pgtlab_test=bench pgtlab_bench_args=rounds={EL0_ROUNDS}"),
                        "{what}"
                    );
                }
            }
        }
    }

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

    fn el0_rows(peer: &str, default_setting: &str, other: Option<&str>, insns: &[(&str, u64)]) -> Vec<ParsedRecord> {
        let mut out = String::new();
        for (row, n) in insns {
            let mut add = |variant: &str, default: bool, n: u64| {
                out += &format!(
                    "@@report {{\"kind\":\"bench\",\"bench\":\"mprotect\",\"case\":\"{row}, {variant}\",\"row\":\"{row}\",\"variant\":\"{variant}\",\"peer\":\"{peer}\",\"default\":{default},\"median_insns\":{n},\"median_ns\":{},\"overhead_insns\":7}}\n",
                    n * 2
                );
            };
            add(default_setting, true, *n);
            if let Some(o) = other {
                add(o, false, n * 10);
            }
        }
        report::collect(&out).0
    }

    #[test]
    fn peer_rows_pair_by_row_with_our_default_setting() {
        let ours = el0_rows(
            "pgtlab",
            "flush elision",
            Some("baseline"),
            &[("measurement overhead (empty region)", 7), ("NONE->RW 1 pages", 100), ("only ours", 5)],
        );
        let theirs =
            el0_rows("linux", "linux", None, &[("NONE->RW 1 pages", 400), ("measurement overhead (empty region)", 9)]);
        let pairs = peer_pairs(&ours, &theirs);
        assert_eq!(pairs.len(), 1, "the overhead row and rows of one side only are left out");
        assert_eq!(pairs[0].0, "NONE->RW 1 pages");
        assert_eq!(pairs[0].1.str("variant"), Some("flush elision"), "our default setting, not the baseline");
        let t = peer_table(&ours, &[("linux-6.12", &theirs)], true);
        let line = t.lines().find(|l| l.starts_with("NONE->RW")).unwrap();
        assert!(line.contains(" 100 ") && line.contains(" 400 ") && line.contains("0.250"), "{t}");
        let t = peer_table(&ours, &[("linux-6.12", &theirs)], false);
        assert!(t.lines().any(|l| l.contains(" 200 ") && l.contains(" 800 ")), "wall: times: {t}");
        let run = |peer: &str, rows: &[ParsedRecord]| plot::PeerRun {
            machine: "max".into(),
            peer: peer.into(),
            rows: rows.to_vec(),
        };
        let all = peer_side_by_side(&[("max", ours.clone())], &[run("linux-6.12", &theirs)], true);
        assert!(all.lines().next().unwrap().contains("max / linux-6.12"), "{all}");
        assert!(all.lines().any(|l| l.starts_with("NONE->RW 1 pages") && l.ends_with("0.250")), "{all}");
    }

    /// Two Linux peers: one column pair each (figure, ratio) and an overhead column each, a
    /// row shown when either measured it, `-` where one did not.
    #[test]
    fn the_peer_table_has_a_column_per_linux() {
        let ours = el0_rows("pgtlab", "flush elision", Some("baseline"), &[("NONE->RW 1 pages", 100), ("getcpu", 50)]);
        let old = el0_rows("linux", "linux", None, &[("NONE->RW 1 pages", 400), ("getcpu", 500)]);
        let new = el0_rows("linux", "linux", None, &[("NONE->RW 1 pages", 200)]);
        let t = peer_table(&ours, &[("linux-6.12", &old), ("linux-7.2", &new)], true);
        let header: Vec<&str> =
            t.lines().next().unwrap().split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(
            header,
            [
                "row",
                "pgtlab setting",
                "pgtlab insns",
                "linux-6.12 insns",
                "pgtlab/linux-6.12",
                "linux-7.2 insns",
                "pgtlab/linux-7.2",
                "pgtlab overhead insns",
                "linux-6.12 overhead insns",
                "linux-7.2 overhead insns"
            ],
            "{t}"
        );
        let cells = |start: &str| -> Vec<String> {
            let l = t.lines().find(|l| l.starts_with(start)).unwrap_or_else(|| panic!("no {start}: {t}"));
            l[start.len()..].split_whitespace().map(str::to_string).collect()
        };
        assert_eq!(
            cells("NONE->RW 1 pages"),
            ["flush", "elision", "100", "400", "0.250", "200", "0.500", "7", "7", "7"]
        );
        assert_eq!(cells("getcpu"), ["flush", "elision", "50", "500", "0.100", "-", "-", "7", "7", "-"]);
        let run = |peer: &str, rows: &[ParsedRecord]| plot::PeerRun {
            machine: "max".into(),
            peer: peer.into(),
            rows: rows.to_vec(),
        };
        let all = peer_side_by_side(&[("max", ours.clone())], &[run("linux-6.12", &old), run("linux-7.2", &new)], true);
        let line = all.lines().find(|l| l.starts_with("NONE->RW")).unwrap();
        assert!(line.split_whitespace().rev().take(2).eq(["0.500", "0.250"]), "6.12's column, then 7.2's: {all}");
        assert!(all.lines().find(|l| l.starts_with("getcpu")).unwrap().trim_end().ends_with('-'), "{all}");
    }

    #[test]
    fn a_peer_is_refused_where_there_is_none() {
        for b in ["exits", "pgtable", "guest-boot"] {
            let e = run(b, false, &[Peer::Linux]).unwrap_err();
            assert_eq!(crate::error::code_of(&e), abi::exit::USAGE, "{b}: {e:#}");
        }
        // split's peers boot Linux at EL2 under TCG: another accelerator is refused before
        // anything is built.
        let kvm = On { accel: crate::machine::accel::find("kvm").unwrap(), ..On::default() };
        let e = run_on("split", false, &[Peer::Linux], kvm).unwrap_err();
        assert_eq!(crate::error::code_of(&e), abi::exit::USAGE, "{e:#}");
        assert!(e.to_string().contains("compare on TCG"), "{e}");
    }

    /// `--peer` takes each known name once, alone or comma-separated; anything else is refused
    /// naming every peer.
    #[test]
    fn peer_names_parse_and_bad_ones_are_refused() {
        assert_eq!(Peer::parse("linux").unwrap(), [Peer::Linux]);
        assert_eq!(Peer::parse("linux-newest").unwrap(), [Peer::LinuxNewest]);
        assert_eq!(Peer::parse("linux,linux-newest").unwrap(), [Peer::Linux, Peer::LinuxNewest]);
        assert_eq!(Peer::parse("linux-newest, linux").unwrap(), [Peer::LinuxNewest, Peer::Linux]);
        for bad in ["bsd", "linux,bsd", "", "linux,", "linux-7", "Linux"] {
            let e = Peer::parse(bad).unwrap_err();
            assert_eq!(crate::error::code_of(&e), abi::exit::USAGE, "{bad:?}: {e:#}");
            let msg = e.to_string();
            assert!(msg.contains("known: linux (") && msg.contains("linux-newest ("), "{bad:?}: {msg}");
        }
        let e = Peer::parse("linux,linux").unwrap_err();
        assert_eq!(crate::error::code_of(&e), abi::exit::USAGE);
        assert!(e.to_string().contains("linux twice"), "{e}");
        for (name, p, _) in Peer::ALL {
            assert_eq!(p.name(), name);
        }
        assert_eq!(Peer::Linux.flavour(), crate::linux::Flavour::CloudBackports);
        assert_eq!(Peer::LinuxNewest.flavour(), crate::linux::Flavour::CloudNewest);
    }

    /// A Linux peer's label is its kernel's version, read from its package's name; two peers
    /// of one version are refused (their rows would mix).
    #[test]
    fn peers_are_labelled_by_their_kernel_version() {
        assert_eq!(
            peer_label(Peer::Linux, "linux-image-6.12.43+deb12-cloud-arm64_6.12.43-1~bpo12+1_arm64"),
            "linux-6.12"
        );
        assert_eq!(peer_label(Peer::LinuxNewest, "linux-binary-7.2.13+deb14-cloud-arm64_7.2.13-1_arm64"), "linux-7.2");
        assert_eq!(peer_label(Peer::LinuxNewest, "linux-binary-7.10.1-cloud-arm64"), "linux-7.10");
        assert_eq!(peer_label(Peer::LinuxNewest, ""), "linux-linux-newest", "no version: the peer's name");
        let g = |label: &str, package: &str| PeerGuest {
            label: label.into(),
            package: package.into(),
            guest: Guest { kernel: "k".into(), initrd: None, append: String::new() },
        };
        assert!(check_labels(&[g("linux-6.12", "a"), g("linux-7.2", "b")]).is_ok());
        let e = check_labels(&[g("linux-7.2", "a"), g("linux-7.2", "b")]).unwrap_err();
        assert!(e.0.contains("a and b are both linux-7.2"), "{}", e.0);
    }

    #[test]
    fn a_split_run_without_instructions_is_refused_under_icount_only() {
        assert!(check_split(&rows(0), false).is_ok(), "without --icount QEMU counts none");
        let e = check_split(&rows(0), true).unwrap_err().to_string();
        assert!(e.contains("no instructions counted"), "{e}");
    }

    /// What a label says about its machine, as (core, CPUs, RAM): its first part names the core
    /// (`max`, or `a76` for `cortex-a76`), a part `Ncpu` the CPU count, any other part the RAM.
    fn label_says(m: &Setup) -> Result<(bool, Option<u32>, Option<&'static str>), String> {
        let mut parts = m.label.split('-');
        let core = parts.next().unwrap_or("");
        let names_core = m.cpu == core || m.cpu.ends_with(&format!("-{core}"));
        let (mut smp, mut mem) = (None, None);
        for p in parts {
            match p.strip_suffix("cpu").map(str::parse::<u32>) {
                Some(Ok(n)) => smp = Some(n),
                Some(Err(_)) => return Err(format!("label {:?}: {p:?} is not a CPU count", m.label)),
                None => mem = Some(p),
            }
        }
        Ok((names_core, smp, mem))
    }

    /// A label is what the tables, the JSON rows (`machine`) and the plots call a machine, so it
    /// must say the truth about it, and, within one benchmark, name what sets its machines apart;
    /// a bare core name (`max`, `a76`) is that core's plain machine.
    #[test]
    fn each_machine_label_says_what_sets_the_machine_apart() {
        for b in GUEST_BENCHES {
            let varies = |f: fn(&Setup) -> String| b.machines.iter().any(|m| f(m) != f(&b.machines[0]));
            let (cpus_vary, mem_vary) = (varies(|m| m.smp.to_string()), varies(|m| m.mem.to_string()));
            for m in b.machines {
                let (core, smp, mem) = label_says(m).unwrap();
                let what = format!("bench {}, machine {:?}", b.name, m.label);
                assert!(core, "{what}: the label does not name the core {}", m.cpu);
                assert!(smp.is_none_or(|n| n == m.smp), "{what}: the label says {smp:?} CPUs, it has {}", m.smp);
                assert!(
                    mem.is_none_or(|r| r == m.mem.to_string()),
                    "{what}: the label says {mem:?} of RAM, it has {}",
                    m.mem
                );
                assert!(!cpus_vary || smp.is_some(), "{what}: its CPU count ({}) is not in the label", m.smp);
                assert!(!mem_vary || mem.is_some(), "{what}: its RAM ({}) is not in the label", m.mem);
                if let Some(plain) = [MAX, A76].iter().find(|p| p.label == m.label) {
                    let same = (m.cpu, m.gic, m.smp, m.mem) == (plain.cpu, plain.gic, plain.smp, plain.mem);
                    assert!(same, "{what}: a bare core name is that core's plain machine, this one is {m:?}");
                }
            }
        }
    }
}

/// `cargo xtask bench`'s flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which benchmark (an unknown name lists them), `all`, `summary`, `check` (the --icount
    /// figures against xtask/bench-baseline.jsonl) or `baseline` (with --update: rewrite it).
    pub which: String,
    /// Run QEMU with -icount shift=0: deterministic instruction counts.
    #[arg(long)]
    pub icount: bool,
    /// An earlier run's target/bench/NAME[-icount].jsonl: print the change per row with a
    /// verdict (better / worse / within noise). One benchmark at a time.
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Run the same workload on other kernels too and print them side by side: `linux`
    /// (Debian's 6.12 from backports), `linux-newest` (Debian's newest cloud kernel, 7.x of
    /// sid), or both: `linux,linux-newest`. mprotect: the EL0 workload on the same machine;
    /// split: KVM's dirty_log_perf_test with the eager split, Linux alone at EL2 (long).
    #[arg(long)]
    pub peer: Option<String>,
    /// `guest-boot` only: on this board's QEMU model (pi4, zcu102, imx8mp-evk).
    #[arg(long)]
    pub board: Option<String>,
    /// How QEMU runs the guest benchmarks: tcg (the default), kvm (this arm64 host's cores,
    /// real caches, TLBs and PMU; saved as NAME-kvm.*), kvm-model (the KVM host model: slow,
    /// for testing the path).
    #[arg(long, value_parser = crate::run::accel_arg)]
    pub accel: Option<&'static Accel>,
    /// The kernel alone at EL1, without the hypervisor (a host whose KVM offers no EL2, such
    /// as a Pi 5; benchmarks of the hypervisor itself refuse it).
    #[arg(long)]
    pub no_hypervisor: bool,
    /// The GIC version under KVM (default 3; 2 on a GICv2 host such as the Pi 5's GIC-400).
    #[arg(long, value_parser = clap::value_parser!(u8).range(2..=3))]
    pub gic: Option<u8>,
    /// `baseline` only: measure every figure again and rewrite xtask/bench-baseline.jsonl.
    #[arg(long)]
    pub update: bool,
    /// `check` and `baseline --update`: take the benchmarks' figures from their saved runs in
    /// target/bench/ instead of running them again.
    #[arg(long)]
    pub saved: bool,
}

/// `cargo xtask bench WHICH [--icount] [--compare FILE]`: `all` runs every benchmark and prints
/// the summary against the seeds and goals; `summary` prints it from the saved runs (and redraws
/// their plots); any other name runs that benchmark, then compares it with `--compare` (an
/// earlier `.jsonl`).
pub fn cli(a: Args) -> Result<()> {
    let which = a.which.as_str();
    let peers = a.peer.as_deref().map(Peer::parse).transpose()?.unwrap_or_default();
    let on =
        On { accel: a.accel.unwrap_or(crate::machine::accel::default()), no_hypervisor: a.no_hypervisor, gic: a.gic };
    if matches!(which, "summary" | "check" | "baseline") && (a.accel.is_some() || a.no_hypervisor || a.gic.is_some()) {
        return crate::error::refuse(format!(
            "bench {which} reads or measures the TCG figures (the seeds' goals, the --icount baseline); --accel, \
             --no-hypervisor and --gic choose how one benchmark runs: give a benchmark's name"
        ));
    }
    if let Some(b) = &a.board {
        if which != "guest-boot" {
            return crate::error::refuse(format!("--board {b}: only bench guest-boot takes a board"));
        }
        return guest_boot::run_board(crate::machine::with_qemu(b)?, a.icount);
    }
    if let (Some(p), "all" | "summary" | "check" | "baseline") = (&a.compare, which) {
        return crate::error::refuse(format!(
            "--compare {}: bench {which} compares nothing; give one benchmark (bench NAME --compare FILE)",
            p.display()
        ));
    }
    let dir = crate::workspace_root().join("target/bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    if (a.update || a.saved) && !matches!(which, "check" | "baseline") {
        return crate::error::refuse(format!(
            "--update and --saved belong to bench check and bench baseline, not bench {which}"
        ));
    }
    let here: Vec<&str> = GUEST_BENCHES.iter().map(|b| b.name).collect();
    match which {
        "check" => {
            if a.update {
                return crate::error::refuse("bench check never writes the baseline: bench baseline --update does");
            }
            return check_cli(a.saved);
        }
        "baseline" => return baseline_cli(a.update, a.saved),
        "all" => {
            for b in GUEST_BENCHES {
                if on.no_hypervisor && b.hypervisor {
                    eprintln!("xtask: bench {}: left out (--no-hypervisor: it measures the hypervisor)", b.name);
                    continue;
                }
                run_on(b.name, a.icount, if b.peer { &peers } else { &[] }, on)?;
            }
            if on.accel.tcg && !on.no_hypervisor {
                run("pgtable", false, &[])?;
            } else {
                // Off TCG the figures are the host's, not the seeds': no summary against them.
                return Ok(());
            }
        }
        "summary" => {
            // Redraw the plots of every saved run (they follow the code, the data stays).
            for b in &here {
                for icount in [false, true] {
                    let stem = if icount { format!("{b}-icount") } else { b.to_string() };
                    if let Ok(jsonl) = std::fs::read_to_string(dir.join(format!("{stem}.jsonl"))) {
                        let svg = plot::bench_svg(&dir, b, &stem, &jsonl, plot::mode(icount))?;
                        eprintln!("xtask: drew {}", svg.display());
                    }
                }
            }
        }
        _ => {
            let earlier = match &a.compare {
                Some(p) => {
                    crate::error::regular_file("--compare", p)?;
                    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                    // Refused before the benchmark runs: a comparison that cannot mean anything.
                    plot::check_earlier(which, a.icount, on.accel.name, &text)
                        .map_err(|why| crate::error::Refused(format!("--compare {}: {why}", p.display())))?;
                    Some((p, text))
                }
                None => None,
            };
            run_on(which, a.icount, &peers, on)?;
            if let Some((p, old)) = earlier {
                let stem = on.stem(which, a.icount);
                let new = std::fs::read_to_string(dir.join(format!("{stem}.jsonl")))?;
                let m = plot::mode(a.icount);
                let table = plot::compare(&plot::rows(which, &old, m)?, &plot::rows(which, &new, m)?);
                println!("== {which}: change against {} ==", p.display());
                // Two hosts' runs compare row by row; each side says which host it was.
                for (side, text) in [("before", &old), ("now", &new)] {
                    if let Some(h) = plot::host_of(text) {
                        println!("{side}: {h}");
                    }
                }
                println!("{table}");
                crate::write_file(&dir.join(format!("{stem}.compare.txt")), &table)?;
            }
            return Ok(());
        }
    }
    let (goal_rows, missing) = plot::goal_rows(&dir)?;
    let figures = plot::goal_table(&goal_rows, &missing);
    println!("== every figure against its goal (saved --icount runs and bench pgtable in target/bench/) ==\n{figures}");
    if !goal_rows.is_empty() {
        let bars: Vec<(String, f64, bool)> = goal_rows
            .iter()
            .map(|r| (format!("{}, {}", r.goal.figure, r.machine), r.goal.share(r.value), r.goal.met(r.value)))
            .collect();
        plot::goals_svg(&dir.join("goals.svg"), &bars)?;
        eprintln!("xtask: drew {}", dir.join("goals.svg").display());
    }
    let mut t =
        format!("## Every figure against its goal\n\n{figures}\n## Mechanisms against their seeds and goals\n\n");
    let mechanisms = plot::summary(&dir, &here)?;
    println!("== mechanisms against their seeds and goals (saved runs in target/bench/) ==\n{mechanisms}");
    t += &mechanisms;
    let p = plot::peer_summary(&dir)?;
    println!(
        "== the kernel against Linux (bench mprotect --peer linux,linux-newest; goal: every row <= {}x) ==\n{p}",
        plot::PEER_GOAL
    );
    t += &format!("\n## The kernel against Linux (goal: every row <= {}x Linux)\n\n{p}", plot::PEER_GOAL);
    let split = dirty_log::summary(&dir)?;
    println!(
        "== the hypervisor's split against Linux KVM's eager split (bench split --peer linux,linux-newest) ==\n{split}"
    );
    t += &format!("\n## The stage-2 split against Linux KVM's eager split\n\n{split}");
    crate::write_file(&dir.join("summary.md"), &t)?;
    Ok(())
}
