//! `cargo xtask test`: clippy (`cargo xtask lint`), every crate's host unit tests (the short fuzz
//! runs among them), then the QEMU integration tests in `tests/` against freshly built Images (one
//! fresh QEMU per scenario). A failure anywhere ends with exit code `CHECK_FAILED`; a filter that
//! selects no test at all is a failure too (a run that tested nothing must not look green).

use crate::error::check_failed;
use crate::provision::{system, toolchain};
use crate::{build, workspace_root};
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The crate of the QEMU integration tests: the one workspace member the host unit-test step
/// leaves out (it runs after the Images are built).
pub const QEMU_TESTS_CRATE: &str = "tests";

/// `cargo xtask test`'s flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// Long runs too: 10^6-case page-table property tests, the wide configuration matrix.
    #[arg(long)]
    pub long: bool,
    /// Only the host unit tests.
    #[arg(long)]
    pub host_only: bool,
    /// Run `#[ignore]`d tests too.
    #[arg(long)]
    pub include_ignored: bool,
    /// Only tests whose name contains this (the lint is skipped).
    pub filter: Option<String>,
    /// K/N: run only the K-th of N equal shares of the tests (1 <= K <= N), for a CI matrix of N
    /// machines: every test runs in exactly one share; the lint runs in share 1, the long
    /// page-table property run (with --long) in share N.
    #[arg(long, value_parser = Partition::parse)]
    pub partition: Option<Partition>,
    /// Only the KVM tests (tests/tests/kvm.rs, all of them), on this accelerator: kvm (this
    /// arm64 host's KVM) or kvm-model (the KVM host model; its own tests too). Without it the
    /// suite runs the short KVM test in the model.
    #[arg(long, value_parser = crate::run::accel_arg)]
    pub accel: Option<&'static crate::machine::Accel>,
}

/// `--partition K/N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// Which share, from 1.
    pub k: usize,
    /// How many.
    pub n: usize,
}

impl Partition {
    /// `K/N` with 1 <= K <= N.
    pub fn parse(s: &str) -> std::result::Result<Partition, String> {
        let bad = || format!("--partition {s}: give K/N with 1 <= K <= N, e.g. 2/4");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (k, n): (usize, usize) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if k == 0 || n == 0 || k > n {
            return Err(bad());
        }
        Ok(Partition { k, n })
    }

    /// The share of `names` that is this partition's: sorted and without duplicates, every N-th
    /// from the K-th, so the shares are disjoint, cover every name and differ by one at most.
    pub fn select(&self, names: &[String]) -> Vec<String> {
        let mut all: Vec<&String> = names.iter().collect();
        all.sort();
        all.dedup();
        all.into_iter().enumerate().filter(|(i, _)| i % self.n == self.k - 1).map(|(_, n)| n.clone()).collect()
    }
}

/// `cargo xtask test`.
pub fn cli(a: Args) -> Result<()> {
    if a.filter.as_deref().is_some_and(|f| f.trim().is_empty()) {
        return crate::error::refuse(
            "an empty filter selects every test and skips the lint: leave it out, or name some tests",
        );
    }
    if let Some(acc) = a.accel {
        if acc.tcg {
            return crate::error::refuse(
                "--accel tcg: the whole suite runs on TCG already; --accel chooses where the KVM tests run (kvm or \
                 kvm-model)",
            );
        }
        if a.host_only || a.partition.is_some() || a.long {
            return crate::error::refuse(format!(
                "--accel {acc} runs the KVM tests, all of them, and nothing else: --host-only, --partition and --long \
                 do not apply"
            ));
        }
    }
    run(&TestOptions {
        long: a.long,
        host_only: a.host_only,
        filter: a.filter,
        include_ignored: a.include_ignored,
        partition: a.partition,
        accel: a.accel,
    })
}

/// What `cargo xtask test` runs.
#[derive(Debug, Clone, Default)]
pub struct TestOptions {
    /// Also the long runs: 10^6-case page-table property tests, the #[ignore]d QEMU tests.
    pub long: bool,
    /// Only the host unit tests.
    pub host_only: bool,
    /// Only tests whose name contains this (lint skipped).
    pub filter: Option<String>,
    /// Run `#[ignore]`d tests too (with a filter: the judging tests' failing-on-purpose test).
    pub include_ignored: bool,
    /// Only this share of the tests.
    pub partition: Option<Partition>,
    /// Only the KVM tests, on this accelerator (never TCG's row).
    pub accel: Option<&'static crate::machine::Accel>,
}

fn host_cargo() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    c.current_dir(workspace_root());
    c
}

/// Passed / failed counts from cargo test's "test result:" lines.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub passed: u64,
    pub failed: u64,
}

impl Tally {
    /// Adds one "test result: ok. 3 passed; 0 failed; …" line (other lines: nothing).
    pub fn add_line(&mut self, line: &str) {
        let Some(rest) = line.trim().strip_prefix("test result: ") else { return };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(what), Some(n)) = (words.next(), words.next()) else { continue };
            let Ok(n) = n.parse::<u64>() else { continue };
            match what {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                _ => {}
            }
        }
    }
}

/// Runs `cmd` (a cargo test), echoing its stdout and counting its results. Supervised
/// (`crate::signals`): a signal to the xtask ends cargo, its test binaries and their QEMUs, and
/// the xtask says so.
fn run_counted(mut cmd: Command, tally: &mut Tally) -> Result<bool> {
    cmd.stdout(Stdio::piped());
    let mut child = crate::signals::supervised(&mut cmd).context("running cargo test")?;
    let out = child.child.stdout.take().expect("piped");
    for line in BufReader::new(out).lines() {
        let line = line?;
        println!("{line}");
        tally.add_line(&line);
    }
    let status = child.wait()?;
    if let Some(sig) = crate::signals::caught() {
        return Err(anyhow::Error::new(crate::error::ExitWith(crate::error::Verdict::new(
            abi::exit::INTERRUPTED,
            format!("the xtask got {} and ended the tests", crate::signals::name(sig)),
        ))));
    }
    Ok(status.success())
}

/// The test that fails on purpose (the judging tests run it through `cargo xtask test`).
const FAILS_ON_PURPOSE: &str = "judged_fails_on_purpose";

/// Every test name `cargo <base> -- --list` knows (doc-tests included), compiling as needed.
fn list_tests(base: &[&str]) -> Result<Vec<String>> {
    let mut c = host_cargo();
    c.args(base).args(["--", "--list", "--format", "terse"]).stderr(Stdio::inherit());
    let out = c.output().with_context(|| format!("listing the tests of cargo {}", base.join(" ")))?;
    anyhow::ensure!(out.status.success(), "cargo {} -- --list failed", base.join(" "));
    Ok(test_names(&String::from_utf8_lossy(&out.stdout)))
}

/// The names in libtest's terse list (`NAME: test`).
fn test_names(list: &str) -> Vec<String> {
    list.lines().filter_map(|l| l.strip_suffix(": test")).map(str::to_string).collect()
}

/// The names `o`'s filter selects (all without one).
fn selected(names: &[String], o: &TestOptions) -> Vec<String> {
    names.iter().filter(|n| o.filter.as_deref().is_none_or(|f| n.contains(f))).cloned().collect()
}

/// Runs exactly `names` (each test binary runs those of them it has).
fn exact_args(cmd: &mut Command, names: &[String], ignored_too: bool) {
    cmd.args(["--", "--exact"]).args(names);
    if ignored_too {
        cmd.arg("--include-ignored");
    }
}

fn test_args(cmd: &mut Command, o: &TestOptions) {
    if o.filter.is_some() || o.include_ignored {
        cmd.arg("--");
        if let Some(f) = &o.filter {
            cmd.arg(f);
        }
        if o.include_ignored {
            cmd.arg("--include-ignored");
        }
    }
}

/// The QEMU integration tests' arguments after `cargo test -p tests`. The slow scenarios and the
/// rest of the configuration matrix are #[ignore]d by default: `--long` runs them, with a filter
/// too (`--long long_pi4` runs the long Pi 4 tests); the judging tests' failing-on-purpose test
/// stays out unless `--include-ignored` asks for it.
fn qemu_test_args(o: &TestOptions) -> Vec<String> {
    if !o.long || o.include_ignored {
        let mut c = Command::new("");
        test_args(&mut c, o);
        return c.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    }
    let mut v = vec!["--".to_string()];
    v.extend(o.filter.clone());
    v.extend(["--include-ignored", "--skip", FAILS_ON_PURPOSE].map(String::from));
    v
}

/// The KVM tests' binaries on `accel`: `kvm` (both accelerators), and the model's own.
fn kvm_test_binaries(accel: &crate::machine::Accel) -> Vec<&'static str> {
    match accel.runs {
        crate::machine::accel::Runs::Here => vec!["kvm"],
        crate::machine::accel::Runs::KvmModel => vec!["kvm", "kvm_model"],
    }
}

/// `--accel`: the KVM tests, every one of them (on real cores they take seconds), on `accel`.
fn run_kvm(o: &TestOptions, accel: &'static crate::machine::Accel) -> Result<()> {
    if accel.runs == crate::machine::accel::Runs::Here {
        crate::supervise::kvm::host()?;
    }
    let t0 = Instant::now();
    let mut tally = Tally::default();
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    let images = build::build(&tc, &[])?;
    eprintln!("xtask: the KVM tests on --accel {accel}");
    let mut c = host_cargo();
    c.args(["test", "--no-fail-fast", "-p", QEMU_TESTS_CRATE]);
    for t in kvm_test_binaries(accel) {
        c.args(["--test", t]);
    }
    c.env("XTASK_QEMU", &qemu)
        .env("XTASK_HYPERVISOR_IMG", &images.hypervisor)
        .env("XTASK_KERNEL_IMG", &images.kernel)
        .env("XTASK_HYPERVISOR_ELF", &images.hypervisor_elf)
        .env("XTASK_KERNEL_ELF", &images.kernel_elf)
        .env("XTASK_TEST_ACCEL", accel.name)
        .env("XTASK_LONG", "1");
    c.arg("--");
    c.args(o.filter.iter());
    c.arg("--include-ignored");
    if !run_counted(c, &mut tally)? {
        return Err(check_failed(format!("KVM tests failed ({} passed, {} failed)", tally.passed, tally.failed)));
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    if tally.passed == 0 {
        return Err(check_failed("no test ran (check the filter)"));
    }
    eprintln!("xtask: all KVM tests passed on --accel {accel} in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}

/// Runs the whole suite (or what `o` selects).
pub fn run(o: &TestOptions) -> Result<()> {
    if let Some(a) = o.accel {
        return run_kvm(o, a);
    }
    let t0 = Instant::now();
    let mut tally = Tally::default();
    // Everything the tests need comes first: lib/board's host tests dump real DTBs from QEMU.
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    if o.filter.is_some() {
        eprintln!("xtask: lint skipped (a filter was given)");
    } else if o.partition.is_some_and(|p| p.k != 1) {
        eprintln!("xtask: lint skipped (it runs in --partition 1/N)");
    } else {
        crate::lint::run(&tc)?;
    }
    let host_base = ["test", "--workspace", "--exclude", QEMU_TESTS_CRATE];
    // `cargo test --workspace` as a Rust developer runs it, the QEMU tests apart: the library
    // crates' unit and doc tests, the short fuzz runs, the xtask's; the bare-metal binaries
    // build as host stubs with no tests.
    eprintln!("xtask: host unit and doc tests (cargo test --workspace --exclude {QEMU_TESTS_CRATE})");
    let mut c = host_cargo();
    c.args(host_base);
    let host_share = match o.partition {
        Some(p) => Some(p.select(&selected(&list_tests(&host_base)?, o))),
        None => None,
    };
    match &host_share {
        Some(names) => exact_args(&mut c, names, o.include_ignored),
        None => test_args(&mut c, o),
    }
    if host_share.as_ref().is_some_and(Vec::is_empty) {
        eprintln!("xtask: no host test in this share");
    } else if !run_counted(c, &mut tally)? {
        return Err(check_failed(format!("host unit tests failed ({} passed, {} failed)", tally.passed, tally.failed)));
    }
    if o.long && o.partition.is_none_or(|p| p.k == p.n) {
        // 10^6 random page-table operation sequences through the model checker: optimised build.
        // A filter selects here too (`--long long_pi4` runs no page-table property).
        eprintln!(
            "xtask: long page-table property tests (PGTABLE_LONG=1, release build; about 45 minutes on two cores)"
        );
        let mut c = host_cargo();
        c.args(["test", "--release", "-p", "pgtable"]).env("PGTABLE_LONG", "1");
        test_args(&mut c, o);
        if !run_counted(c, &mut tally)? {
            return Err(check_failed("long page-table property tests failed"));
        }
    }
    if !o.host_only {
        let images = build::build(&tc, &[])?;
        eprintln!("xtask: QEMU integration tests (tests/){}", if o.long { ", the long ones included" } else { "" });
        let mut c = host_cargo();
        // The board models' QEMU and DTBs, provisioned once here (a fresh CI machine has
        // neither); when that fails the board tests fail with this reason.
        let need = crate::machine::newest_min_qemu();
        let boards = crate::provision::qemu_pkg::qemu_at_least(need).and_then(|q| {
            for (_, model) in crate::machine::with_qemu_models() {
                if let Some(d) = model.debian_dtb() {
                    crate::provision::debian::file_from_kernel_package(d)?;
                }
            }
            Ok(q)
        });
        match boards {
            Ok(q) => {
                eprintln!(
                    "xtask: board models run on {} (QEMU {})",
                    q.display(),
                    crate::provision::qemu_pkg::version_of(&q)?
                );
                c.env("XTASK_QEMU_BOARDS", q);
            }
            Err(e) => {
                eprintln!("xtask: warning: no QEMU or DTBs for the board models (their tests will fail): {e:#}");
                c.env("XTASK_QEMU_BOARDS_ERROR", format!("{e:#}"));
            }
        }
        c.args(["test", "--no-fail-fast", "-p", QEMU_TESTS_CRATE])
            .env("XTASK_QEMU", &qemu)
            .env("XTASK_HYPERVISOR_IMG", &images.hypervisor)
            .env("XTASK_KERNEL_IMG", &images.kernel)
            .env("XTASK_HYPERVISOR_ELF", &images.hypervisor_elf)
            .env("XTASK_KERNEL_ELF", &images.kernel_elf)
            .env("XTASK_LONG", if o.long { "1" } else { "0" });
        if let Ok(me) = std::env::current_exe() {
            c.env("XTASK_BIN", me);
        }
        let qemu_share = match o.partition {
            Some(p) => {
                let mut names = selected(&list_tests(&["test", "-p", QEMU_TESTS_CRATE])?, o);
                if !o.include_ignored {
                    names.retain(|n| n != FAILS_ON_PURPOSE);
                }
                Some(p.select(&names))
            }
            None => None,
        };
        match &qemu_share {
            Some(names) => exact_args(&mut c, names, o.long || o.include_ignored),
            None => {
                c.args(qemu_test_args(o));
            }
        }
        if qemu_share.as_ref().is_some_and(Vec::is_empty) {
            eprintln!("xtask: no QEMU test in this share");
        } else if !run_counted(c, &mut tally)? {
            return Err(check_failed(format!(
                "QEMU integration tests failed ({} passed, {} failed)",
                tally.passed, tally.failed
            )));
        }
    }
    println!("{} passed, {} failed", tally.passed, tally.failed);
    if tally.passed == 0 {
        return Err(check_failed("no test ran (check the filter)"));
    }
    eprintln!("xtask: all tests passed in {:.1} s", t0.elapsed().as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kvm_tests_are_the_kvm_binaries_and_the_model_s_own_only_in_the_model() {
        let find = |n| crate::machine::accel::find(n).unwrap();
        assert_eq!(kvm_test_binaries(find("kvm")), ["kvm"]);
        assert_eq!(kvm_test_binaries(find("kvm-model")), ["kvm", "kvm_model"]);
        let dir = crate::workspace_root().join("tests/tests");
        for t in kvm_test_binaries(find("kvm-model")) {
            assert!(dir.join(format!("{t}.rs")).is_file(), "tests/tests/{t}.rs");
        }
    }

    #[test]
    fn long_runs_the_ignored_qemu_tests_with_or_without_a_filter() {
        let o = |long, filter: Option<&str>, include_ignored| TestOptions {
            long,
            host_only: false,
            filter: filter.map(String::from),
            include_ignored,
            partition: None,
            accel: None,
        };
        let long_all = ["--", "--include-ignored", "--skip", "judged_fails_on_purpose"];
        assert_eq!(qemu_test_args(&o(true, None, false)), long_all);
        assert_eq!(
            qemu_test_args(&o(true, Some("long_pi4"), false)),
            ["--", "long_pi4", "--include-ignored", "--skip", "judged_fails_on_purpose"]
        );
        assert!(qemu_test_args(&o(false, None, false)).is_empty());
        assert_eq!(qemu_test_args(&o(false, Some("pi4"), false)), ["--", "pi4"]);
        assert_eq!(qemu_test_args(&o(false, Some("judged"), true)), ["--", "judged", "--include-ignored"]);
        assert_eq!(qemu_test_args(&o(true, Some("judged"), true)), ["--", "judged", "--include-ignored"]);
    }

    /// Every test runs in exactly one share, and the shares differ by one test at most.
    #[test]
    fn partitions_cover_every_test_once() {
        let list =
            "a::x: test\nb::y: test\nsrc/lib.rs - f (line 3): test\nz: benchmark\nb::y: test\nc: test\nd: test\n";
        let names = test_names(list);
        assert_eq!(names.len(), 6, "{names:?}");
        for n in 1..=5 {
            let shares: Vec<Vec<String>> = (1..=n).map(|k| Partition { k, n }.select(&names)).collect();
            let mut all: Vec<String> = shares.concat();
            all.sort();
            assert_eq!(all, ["a::x", "b::y", "c", "d", "src/lib.rs - f (line 3)"], "n = {n}");
            let (lo, hi) = (shares.iter().map(Vec::len).min().unwrap(), shares.iter().map(Vec::len).max().unwrap());
            assert!(hi - lo <= 1, "n = {n}: {shares:?}");
        }
        assert_eq!(Partition::parse("2/4"), Ok(Partition { k: 2, n: 4 }));
        for bad in ["0/4", "5/4", "4", "a/b", "1/0", ""] {
            assert!(Partition::parse(bad).is_err(), "{bad}");
        }
        let o = TestOptions { filter: Some("y".into()), ..TestOptions::default() };
        assert_eq!(selected(&names, &o), ["b::y", "b::y"]);
    }

    #[test]
    fn tally_counts_cargo_result_lines() {
        let mut t = Tally::default();
        t.add_line("test result: ok. 16 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.0s");
        t.add_line("test result: FAILED. 3 passed; 2 failed; 1 ignored; 0 measured; 9 filtered out; finished in 0s");
        t.add_line("test foo ... ok");
        t.add_line("3 passed");
        assert_eq!(t, Tally { passed: 19, failed: 2 });
    }
}
