//! The Linux peers of `bench split` (`--peer linux,linux-newest`): KVM's own stage-2 split for
//! dirty logging, with the eager split on, measured by KVM's `dirty_log_perf_test`.
//!
//! Each peer is Debian's Linux (the same kernels as `bench mprotect`'s peers) booted alone at
//! EL2 on QEMU 10's `virt` with `-cpu max`, one CPU, [`PEER_MEM`] of RAM and 1 GiB huge pages
//! ([`APPEND`]): it has KVM (no hypervisor of ours below it, no nesting). Its `/init` runs
//! `/bin/pgtlab-dirtylog` ([`script`]), which runs the test ([`crate::provision::kvm_selftest`],
//! built from the peer's own kernel source) once per backing and scenario ([`RUNS`]): 1 vCPU,
//! two iterations (the test's least) that only read (`-w 0`: no write fault is timed or
//! needed; the guest wrote every page while populating, and with initially-set the first
//! clear covers the whole bitmap), a [`SLOT_GIB`] GiB memslot in the guest mode `PA-bits:40, VA-bits:48, 4K`,
//! the eager split's chunk [`CHUNK`] (the hypervisor's default). Under `--icount` QEMU counts
//! one nanosecond of the guest's clock per instruction, so the times the test prints are the
//! instructions the machine's one CPU ran in that interval.
//!
//! What a figure counts (from the test's own clock around one call): `enable` (the test's
//! `-g`: no manual protect) is "Enabling dirty logging time": `KVM_SET_USER_MEMORY_REGION2`
//! setting `KVM_MEM_LOG_DIRTY_PAGES` on a slot whose memory the guest wrote, i.e. KVM's
//! memslot update (a new memslot array, its dirty bitmap, SRCU synchronisation) plus
//! write-protecting and eagerly splitting the whole slot. `manual-clear` (manual protect with
//! initially-set) is "Iteration 1 clear dirty log time": one `KVM_CLEAR_DIRTY_LOG` over the
//! whole bitmap (every bit set: initially-set), which splits (eagerly, per chunk) and
//! write-protects every page. Per final PTE: the figure over the slot's 4 KiB pages.

use crate::bench::{Peer, PeerGuest};
use crate::launch::{Guest, Launch};
use crate::machine::Size;
use crate::provision::kvm_selftest::{self, CHUNK_LINE};
use anyhow::{bail, ensure, Context, Result};
use std::path::PathBuf;
use std::time::Duration;

/// The memslot's size (the test's `-b`, one vCPU).
pub const SLOT_GIB: u64 = 1;
/// The eager split's chunk: 1 GiB, the hypervisor's default.
pub const CHUNK: u64 = 1 << 30;
/// The peer machine's RAM: the slot twice (4 KiB pages or THP, and the reserved 1 GiB page)
/// and Linux.
pub const PEER_MEM: Size = Size::gib(3);
/// The peer's kernel words: quiet, and one 1 GiB huge page reserved at boot for the 1G runs.
pub const APPEND: &str = "quiet hugepagesz=1G hugepages=1";
/// The test's guest mode (the name it prints, and the one `-h` lists with its number).
pub const MODE: &str = "PA-bits:40,  VA-bits:48,  4K pages";
/// A whole peer boot's time limit: six runs, each populating its 1 GiB, under TCG.
pub const TIMEOUT: Duration = Duration::from_secs(3600);
/// What the peer machine calls itself in the rows.
pub const MACHINE: &str = "max-1cpu-3G-el2";

/// One run of the test: our backing's name, the test's `-s`, the scenario, the test's extra
/// flags and the line whose time is the figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub backing: &'static str,
    pub source: &'static str,
    pub scenario: &'static str,
    pub flags: &'static str,
    pub timed: &'static str,
}

/// Every run, in the order the script runs them: 4 KiB pages (nothing to split: the
/// write-protect alone, as ours' `4K-rw`), THP (2 MiB blocks), a 1 GiB hugetlb page (a 1 GiB
/// block).
pub const RUNS: [Run; 6] = [
    Run {
        backing: "4K-rw",
        source: "anonymous",
        scenario: "enable",
        flags: "-g",
        timed: "Enabling dirty logging time",
    },
    Run {
        backing: "4K-rw",
        source: "anonymous",
        scenario: "manual-clear",
        flags: "",
        timed: "Iteration 1 clear dirty log time",
    },
    Run {
        backing: "2M",
        source: "anonymous_thp",
        scenario: "enable",
        flags: "-g",
        timed: "Enabling dirty logging time",
    },
    Run {
        backing: "2M",
        source: "anonymous_thp",
        scenario: "manual-clear",
        flags: "",
        timed: "Iteration 1 clear dirty log time",
    },
    Run {
        backing: "1G",
        source: "anonymous_hugetlb_1gb",
        scenario: "enable",
        flags: "-g",
        timed: "Enabling dirty logging time",
    },
    Run {
        backing: "1G",
        source: "anonymous_hugetlb_1gb",
        scenario: "manual-clear",
        flags: "",
        timed: "Iteration 1 clear dirty log time",
    },
];

/// What the script prints around each run.
const BEGIN: &str = "pgtlab-dlpt: begin ";
const END: &str = "pgtlab-dlpt: end ";

/// `/bin/pgtlab-dirtylog`: finds the test's number of [`MODE`], then runs [`RUNS`], each
/// between a begin and an end line (with its status); fails when any run did.
pub fn script() -> String {
    let mut s = String::from(
        "#!/bin/busybox sh\n# The Linux peer of `cargo xtask bench split` (xtask/src/bench/dirty_log.rs).\nbb=/bin/busybox\nt=/bin/dirty_log_perf_test\n",
    );
    s += &format!("mode=$($t -h 2>&1 | $bb awk '/{MODE}/ {{ sub(\":\", \"\", $1); print $1; exit }}')\n");
    s += &format!(
        "if [ -z \"$mode\" ]; then echo \"pgtlab-dlpt: $t -h lists no guest mode '{MODE}'\"; exit 1; fi\nst=0\n"
    );
    for r in RUNS {
        let name = format!("{} {}", r.backing, r.scenario);
        s += &format!(
            "echo \"{BEGIN}{name}\"\n{}={CHUNK} $t -m $mode -v 1 -i 2 -w 0 -b {SLOT_GIB}G -s {} {}\ns=$?\necho \"{END}{name} status $s\"\n[ $s = 0 ] || st=1\n",
            kvm_selftest::CHUNK_ENV,
            r.source,
            r.flags
        );
    }
    s + "exit $st\n"
}

/// One run's figure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Figure {
    pub run: Run,
    /// The timed call, in the guest's nanoseconds (instructions under `--icount`).
    pub ns: u64,
}

/// `S.NNNNNNNNNs` (the test's `%ld.%.9lds`) in nanoseconds.
fn seconds(text: &str) -> Option<u64> {
    let (s, ns) = text.strip_suffix('s')?.split_once('.')?;
    if ns.len() != 9
        || !ns.bytes().all(|b| b.is_ascii_digit())
        || s.is_empty()
        || !s.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    s.parse::<u64>().ok()?.checked_mul(1_000_000_000)?.checked_add(ns.parse().ok()?)
}

/// The figures of every run in the peer's console `output`. Strict: each run must have its
/// begin and end lines once and in order, status 0, and between them exactly one line saying
/// the guest mode was [`MODE`], one saying the eager split's chunk was [`CHUNK`] (the patch's
/// line: the split was on), and one timed line with a well-formed time; anything else is an
/// error naming the run.
pub fn parse(output: &str) -> Result<Vec<Figure>> {
    let lines: Vec<&str> = output.lines().map(str::trim_end).collect();
    let mut out = Vec::new();
    let mut from = 0;
    for r in RUNS {
        let name = format!("{} {}", r.backing, r.scenario);
        let begin = format!("{BEGIN}{name}");
        let starts: Vec<usize> = (0..lines.len()).filter(|&i| lines[i] == begin).collect();
        ensure!(starts.len() == 1, "run {name}: {} lines {begin:?} (one expected)", starts.len());
        let b = starts[0];
        ensure!(b >= from, "run {name}: it began before the run ahead of it ended");
        let end_prefix = format!("{END}{name} status ");
        let e = (b..lines.len())
            .find(|&i| lines[i].starts_with(&end_prefix))
            .with_context(|| format!("run {name}: no end line (the peer stopped during it?)"))?;
        let status = &lines[e][end_prefix.len()..];
        ensure!(status == "0", "run {name}: the test ended with status {status}");
        let body = &lines[b + 1..e];
        let one = |what: &str, pred: &dyn Fn(&str) -> bool| -> Result<&str> {
            let hits: Vec<&&str> = body.iter().filter(|l| pred(l)).collect();
            match hits.as_slice() {
                [l] => Ok(l),
                _ => bail!("run {name}: {} lines {what} (one expected)", hits.len()),
            }
        };
        let mode = one("`Testing guest mode: ...`", &|l| l.starts_with("Testing guest mode: "))?;
        ensure!(mode == format!("Testing guest mode: {MODE}"), "run {name}: {mode:?}, not {MODE:?}");
        let chunk = one(&format!("{CHUNK_LINE:?}"), &|l| l.starts_with(CHUNK_LINE))?;
        ensure!(
            chunk[CHUNK_LINE.len()..] == CHUNK.to_string(),
            "run {name}: {chunk:?}: the eager split's chunk is not {CHUNK}"
        );
        let timed = format!("{}: ", r.timed);
        let line = one(&format!("`{}`", r.timed), &|l| l.starts_with(&timed))?;
        let ns = seconds(&line[timed.len()..]).with_context(|| format!("run {name}: malformed time in {line:?}"))?;
        ensure!(ns > 0, "run {name}: {line:?} measured nothing");
        out.push(Figure { run: r, ns });
        from = e;
    }
    Ok(out)
}

/// A peer prepared: its guest (kernel, the initramfs with the test and the script) and the
/// test's source.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub peer: PeerGuest,
    /// `linux-source-X.Y=VERSION`.
    pub source: String,
}

/// Builds (once) the test for `peer`'s kernel and writes its initramfs.
pub fn prepare(peer: Peer) -> Result<Prepared> {
    let dir = crate::provision::debian::cache_dir().join("dirty-log");
    std::fs::create_dir_all(&dir)?;
    // The kernel first: its package names the source version.
    let plain =
        crate::linux::prepare_with(peer.flavour(), &[], &dir.join(format!("initramfs-{}-plain.cpio", peer.name())))?;
    let stem = plain.package.as_str();
    let version = crate::provision::cloud_kernel::kernel_version(stem)
        .with_context(|| format!("no Linux version in the peer's package {stem:?}"))?;
    let deb_version =
        kvm_selftest::deb_version(stem).with_context(|| format!("no Debian version in the peer's package {stem:?}"))?;
    let built =
        kvm_selftest::dirty_log_perf_test(version, deb_version, &mut crate::linux::source_apts(peer.flavour()))?;
    let script_path = dir.join("pgtlab-dirtylog");
    crate::write_if_changed(&script_path, script().as_bytes())?;
    let extra: Vec<(String, PathBuf)> = vec![
        (format!("bin/{}", kvm_selftest::TEST), built.program.clone()),
        ("bin/pgtlab-dirtylog".into(), script_path),
    ];
    let l = crate::linux::prepare_with(peer.flavour(), &extra, &dir.join(format!("initramfs-{}.cpio", peer.name())))?;
    let _ = std::fs::remove_file(&plain.initramfs);
    let label = crate::bench::peer_label(peer, &l.package);
    eprintln!("xtask: peer {label}: {} with {} from {}", l.package, kvm_selftest::TEST, built.source);
    let guest = Guest {
        kernel: l.kernel,
        initrd: Some(l.initramfs),
        append: format!("{} {APPEND}", crate::linux::DEFAULT_APPEND),
    };
    Ok(Prepared { peer: PeerGuest { label, package: l.package, guest }, source: built.source })
}

/// The peer's QEMU run: Linux alone at EL2 on `virt` with `-cpu max`, one CPU, [`PEER_MEM`].
pub fn launch(p: &Prepared, icount: bool) -> Launch {
    Launch {
        cpu: "max".into(),
        gic: 3,
        smp: 1,
        mem: Some(PEER_MEM),
        icount: icount.then_some(0),
        kernel_at_el2: true,
        guest: Some(p.peer.guest.clone()),
        bootargs: "pgtlab_test=dirtylog".into(),
        ..Launch::default()
    }
}

/// Boots peer `p` and returns its figures.
pub fn measure(p: &Prepared, icount: bool, images: &crate::build::Images) -> Result<Vec<Figure>> {
    let qemu = crate::provision::qemu_pkg::qemu_at_least(crate::provision::qemu_pkg::Version(10, 0, 0))?;
    let cfg = launch(p, icount);
    let who = &p.peer.label;
    eprintln!("xtask: bench split, peer {who}: {} ({})", cfg.describe(), qemu.display());
    let out = crate::supervise::run(&qemu, &cfg, images, TIMEOUT, Some(Duration::from_secs(120)), |l| {
        crate::supervise::echo_stdout(l)
    })?;
    crate::supervise::require_success(&crate::supervise::judge(&out), &format!("bench split's peer {who}"))?;
    // The figures are the labelled Linux's: the kernel that ran says so.
    let (records, _) = crate::report::collect(&out.output);
    let kernel = crate::report::first(&records, "linux_guest").and_then(|r| r.str("kernel")).unwrap_or("").to_string();
    let version = who.strip_prefix("linux-").unwrap_or(who);
    ensure!(kernel.starts_with(&format!("{version}.")), "bench split's peer {who} ran Linux {kernel:?}");
    parse(&out.output).with_context(|| format!("bench split's peer {who}: its output"))
}

/// The JSON rows of one peer's figures.
pub fn rows(p: &Prepared, figures: &[Figure], icount: bool) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let pages = (SLOT_GIB << 30) / 4096;
    figures
        .iter()
        .map(|f| {
            let mut o = serde_json::Map::new();
            let per_pte = (f.ns as f64 / pages as f64 * 100.0).round() / 100.0;
            let (key, per) = if icount { ("insns", "insns_per_pte") } else { ("ns", "ns_per_pte") };
            for (k, v) in [
                ("kind", "bench".into()),
                ("bench", "split".into()),
                ("case", format!("{} {}", f.run.backing, f.run.scenario).into()),
                ("scenario", f.run.scenario.into()),
                ("backing", f.run.backing.into()),
                ("walker", "linux".into()),
                ("peer", p.peer.label.as_str().into()),
                ("peer_package", p.peer.package.as_str().into()),
                ("peer_source", p.source.as_str().into()),
                ("machine", MACHINE.into()),
                ("icount", icount.into()),
                ("test_backing", f.run.source.into()),
                ("timed", f.run.timed.into()),
                ("slot_gib", SLOT_GIB.into()),
                ("chunk_mib", (CHUNK >> 20).into()),
                ("pages", pages.into()),
                (key, f.ns.into()),
                (per, per_pte.into()),
            ] {
                o.insert(k.into(), v);
            }
            o
        })
        .collect()
}

type Row = serde_json::Map<String, serde_json::Value>;

/// The walker of ours set beside Linux: the hypervisor's default (`SkipLevel3`).
pub const OUR_WALKER: &str = "skip_level3";

/// The saved files of the peers' rows: `split-peers[-icount].{jsonl,txt}`, beside ours
/// (`split[-icount].*`, which the baseline, the goals and the plots read).
pub fn stem(icount: bool) -> &'static str {
    if icount {
        "split-peers-icount"
    } else {
        "split-peers"
    }
}

/// One table, a row per backing and scenario of [`RUNS`]: our whole operation per final PTE
/// (walker [`OUR_WALKER`]) and, for each Linux in `theirs` (in their order), its figure per
/// final PTE, our ratio to it and its whole operation on its [`SLOT_GIB`] GiB slot.
pub fn table(ours: &[Row], theirs: &[Row], icount: bool) -> String {
    let (unit, whole) = if icount { ("insns_per_pte", "insns") } else { ("ns_per_pte", "ns") };
    let mut peers: Vec<&str> = Vec::new();
    for r in theirs {
        if let Some(p) = r.get("peer").and_then(|v| v.as_str()) {
            if !peers.contains(&p) {
                peers.push(p);
            }
        }
    }
    let per = if icount { "insns/PTE" } else { "ns/PTE" };
    let mut header = vec!["scenario".to_string(), "backing".into(), format!("pgtlab {per}")];
    for p in &peers {
        header.extend([format!("{p} {per}"), format!("pgtlab/{p}"), format!("{p} whole ({whole}, {SLOT_GIB} GiB)")]);
    }
    let find = |rows: &[Row], run: &Run, extra: &dyn Fn(&Row) -> bool| -> Option<Row> {
        rows.iter()
            .find(|r| {
                r.get("scenario").and_then(|v| v.as_str()) == Some(run.scenario)
                    && r.get("backing").and_then(|v| v.as_str()) == Some(run.backing)
                    && extra(r)
            })
            .cloned()
    };
    let num = |r: &Option<Row>, k: &str| r.as_ref().and_then(|r| r.get(k)).and_then(|v| v.as_f64());
    let mut rows = Vec::new();
    for run in &RUNS {
        let o = find(ours, run, &|r| r.get("walker").and_then(|v| v.as_str()) == Some(OUR_WALKER));
        let ov = num(&o, unit);
        let mut row =
            vec![run.scenario.to_string(), run.backing.to_string(), ov.map_or("-".into(), |v| format!("{v:.2}"))];
        for p in &peers {
            let t = find(theirs, run, &|r| r.get("peer").and_then(|v| v.as_str()) == Some(*p));
            let tv = num(&t, unit);
            row.push(tv.map_or("-".into(), |v| format!("{v:.2}")));
            row.push(match (ov, tv) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.3}", a / b),
                _ => "-".into(),
            });
            row.push(num(&t, whole).map_or("-".into(), |v| format!("{v:.0}")));
        }
        rows.push(row);
    }
    crate::report::aligned(&header, &rows, 2)
}

/// What the table's columns count, printed under it.
pub fn legend(icount: bool) -> String {
    let unit = if icount {
        "instructions (-icount shift=0: the guest's clock counts one ns per instruction)"
    } else {
        "guest time"
    };
    format!(
        "pgtlab: bench split's whole timed operation per 4 KiB page of its 64 GiB slot, walker {OUR_WALKER} (the \
         hypervisor's default), chunk 1 GiB, the hypervisor under our kernel on max-4G. Linux: KVM's \
         {} on a {SLOT_GIB} GiB slot (4K-rw: 4 KiB pages, nothing to split; 2M: THP; 1G: a 1 GiB hugetlb page), Linux alone at EL2 with KVM on QEMU 10 \
         virt -cpu max, 1 CPU, {} RAM, eager split chunk {} MiB; enable = \"Enabling dirty logging time\" with -g \
         (the memslot update + write-protect + eager split of the slot), manual-clear = \"Iteration 1 clear dirty log \
         time\" (one KVM_CLEAR_DIRTY_LOG over the whole bitmap: eager split + write-protect), per 4 KiB page; \
         figures in {unit}; whole: the peer's figure for its slot.",
        kvm_selftest::TEST,
        PEER_MEM,
        CHUNK >> 20
    )
}

/// Boots each prepared peer, prints the table beside ours (read from the saved `split` run of
/// this mode) and saves the peers' rows and the table.
pub fn run(prepared: &[Prepared], icount: bool, images: &crate::build::Images) -> Result<()> {
    let dir = crate::workspace_root().join("target/bench");
    let ours = crate::plot::rows::load(&dir.join(format!("{}.jsonl", if icount { "split-icount" } else { "split" })))?;
    let mut theirs = Vec::new();
    for p in prepared {
        let figures = measure(p, icount, images)?;
        theirs.extend(rows(p, &figures, icount));
    }
    let mut jsonl = String::new();
    for r in &theirs {
        jsonl += &format!("{}\n", serde_json::Value::Object(r.clone()));
    }
    let mut text = String::from("== bench split: pgtlab against Linux KVM's eager split, per final PTE ==\n");
    for p in prepared {
        text += &format!("peer {}: {}, {} from {}\n", p.peer.label, p.peer.package, kvm_selftest::TEST, p.source);
    }
    text += &format!("{}\n{}\n", table(&ours, &theirs, icount), legend(icount));
    println!("{text}");
    let stem = stem(icount);
    crate::write_file(&dir.join(format!("{stem}.jsonl")), &jsonl)?;
    crate::write_file(&dir.join(format!("{stem}.txt")), &text)?;
    eprintln!("xtask: saved target/bench/{stem}.jsonl and .txt");
    Ok(())
}

/// `bench summary`'s table of the saved runs: per mode with a saved peers' run, [`table`].
pub fn summary(dir: &std::path::Path) -> Result<String> {
    let mut out = String::new();
    for icount in [true, false] {
        let theirs = crate::plot::rows::load(&dir.join(format!("{}.jsonl", stem(icount))))?;
        if theirs.is_empty() {
            continue;
        }
        let ours =
            crate::plot::rows::load(&dir.join(format!("{}.jsonl", if icount { "split-icount" } else { "split" })))?;
        let mode = if icount { "icount (instructions)" } else { "wall (time)" };
        out += &format!("{mode}:\n{}\n", table(&ours, &theirs, icount));
    }
    if out.is_empty() {
        return Ok("not run (no saved run of bench split --peer linux,linux-newest)\n".into());
    }
    Ok(out + &legend(true) + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A console as a peer prints it (the lines the parser reads, among others).
    fn console(times: &[&str]) -> String {
        let mut s = String::from("[    0.000000] Booting Linux\npgtlab-linux: user space reached\n");
        for (r, t) in RUNS.iter().zip(times) {
            s += &format!("{BEGIN}{} {}\n", r.backing, r.scenario);
            s += &format!("Test iterations: 1\nTesting guest mode: {MODE}\n{CHUNK_LINE}{CHUNK}\n");
            s += "Populate memory time: 2.000000001s\n";
            if r.scenario == "enable" {
                s += &format!("Enabling dirty logging time: {t}\n\nIteration 1 dirty memory time: 0.5s\n");
            } else {
                s += "Enabling dirty logging time: 0.000010000s\n\nIteration 1 dirty memory time: 0.500000000s\n";
                s += &format!("Iteration 1 get dirty log time: 0.000100000s\nIteration 1 clear dirty log time: {t}\n");
                s += "Iteration 2 dirty memory time: 0.400000000s\nIteration 2 clear dirty log time: 0.000200000s\n";
            }
            s += &format!("Disabling dirty logging time: 0.1s\n{END}{} {} status 0\n", r.backing, r.scenario);
        }
        s
    }

    const TIMES: [&str; 6] =
        ["0.050000000s", "0.060000000s", "0.183000000s", "0.112345678s", "1.000000000s", "0.000000007s"];

    #[test]
    fn the_peers_figures_are_read_from_its_output() {
        let f = parse(&console(&TIMES)).unwrap();
        let got: Vec<(&str, &str, u64)> = f.iter().map(|f| (f.run.backing, f.run.scenario, f.ns)).collect();
        assert_eq!(
            got,
            [
                ("4K-rw", "enable", 50_000_000),
                ("4K-rw", "manual-clear", 60_000_000),
                ("2M", "enable", 183_000_000),
                ("2M", "manual-clear", 112_345_678),
                ("1G", "enable", 1_000_000_000),
                ("1G", "manual-clear", 7)
            ]
        );
        assert_eq!(seconds("12.000000000s"), Some(12_000_000_000));
        for bad in ["0.18s", "0.183000000", "x.183000000s", ".183000000s", "0.1830000000s", "-1.000000000s"] {
            assert_eq!(seconds(bad), None, "{bad}");
        }
    }

    /// A missing or malformed line is an error naming the run, never a 0.
    #[test]
    fn a_missing_or_malformed_line_is_an_error() {
        let good = console(&TIMES);
        let cases: Vec<(String, &str)> = vec![
            (good.replace("0.183000000s", "0.183s"), "run 2M enable: malformed time"),
            (good.replace("Enabling dirty logging time: 0.183000000s\n", ""), "run 2M enable: 0 lines `Enabling"),
            (good.replacen(&format!("{CHUNK_LINE}{CHUNK}\n"), "", 1), "run 4K-rw enable: 0 lines \"pgtlab: eager"),
            (good.replacen(&format!("{CHUNK_LINE}{CHUNK}"), &format!("{CHUNK_LINE}2097152"), 1), "chunk is not"),
            (
                good.replace(&format!("{END}1G manual-clear status 0"), &format!("{END}1G manual-clear status 1")),
                "run 1G manual-clear: the test ended with status 1",
            ),
            (good.replace(&format!("{END}1G enable status 0\n"), ""), "run 1G enable: no end line"),
            (good.replace(&format!("{BEGIN}2M manual-clear\n"), ""), "run 2M manual-clear: 0 lines"),
            (
                good.replace(MODE, "PA-bits:48,  VA-bits:48,  4K pages"),
                "run 4K-rw enable: \"Testing guest mode: PA-bits:48",
            ),
            (
                good.replace(
                    "Iteration 1 clear dirty log time: 0.000000007s",
                    "Iteration 1 clear dirty log time: 0.000000000s",
                ),
                "measured nothing",
            ),
            (good.clone() + &format!("{BEGIN}2M enable\n"), "run 2M enable: 2 lines"),
            (String::new(), "run 4K-rw enable: 0 lines"),
        ];
        for (text, want) in cases {
            let e = format!("{:#}", parse(&text).unwrap_err());
            assert!(e.contains(want), "want {want:?}, got {e:?}");
        }
    }

    #[test]
    fn the_script_runs_every_backing_and_scenario_with_the_split_on() {
        let s = script();
        assert!(s.starts_with("#!/bin/busybox sh\n"));
        let runs: Vec<&str> = s.lines().filter(|l| l.contains("$t -m $mode")).collect();
        assert_eq!(runs.len(), RUNS.len());
        for (l, r) in runs.iter().zip(RUNS) {
            assert!(l.starts_with(&format!("{}={CHUNK} ", kvm_selftest::CHUNK_ENV)), "{l}");
            assert!(l.contains(&format!("-v 1 -i 2 -w 0 -b {SLOT_GIB}G -s {} {}", r.source, r.flags)), "{l}");
        }
        assert_eq!(
            runs.iter().filter(|l| l.trim_end().ends_with("-g")).count(),
            3,
            "the enables without manual protect"
        );
        assert!(s.contains("PA-bits:40,  VA-bits:48,  4K pages") && s.trim_end().ends_with("exit $st"));
    }

    #[test]
    fn rows_say_what_they_count() {
        let p = Prepared {
            peer: PeerGuest {
                label: "linux-7.2".into(),
                package: "linux-binary-7.2.13+deb14-cloud-arm64_7.2.13-1_arm64".into(),
                guest: Guest { kernel: "k".into(), initrd: None, append: String::new() },
            },
            source: "linux-source-7.2=7.2.13-1".into(),
        };
        let f = parse(&console(&TIMES)).unwrap();
        let r = rows(&p, &f, true);
        assert_eq!(r.len(), 6);
        assert_eq!(r[2]["insns"], 183_000_000u64);
        assert_eq!(r[2]["pages"], 262_144u64);
        assert_eq!(r[2]["insns_per_pte"], 698.09);
        assert_eq!((r[2]["peer"].as_str(), r[2]["backing"].as_str()), (Some("linux-7.2"), Some("2M")));
        assert!(r[2].get("ns").is_none());
        let w = rows(&p, &f, false);
        assert_eq!(w[3]["ns"], 112_345_678u64);
        assert!(w[3].get("insns").is_none());
    }
}
