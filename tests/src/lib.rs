//! Shared harness of the QEMU integration tests.
//!
//! `cargo xtask test` builds the Images once and passes them in `XTASK_*` variables; a plain
//! `cargo test -p tests` builds them itself (same toolchain discovery as the xtask).

use abi::report::{parse_line, ParsedRecord};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;
use xtask::build::Images;
use xtask::launch::Launch;
use xtask::machine::{Machine, Size};
use xtask::supervise::{self, Outcome};

pub use xtask::launch::Launch as Config;

pub mod kvm;

/// Longest a single boot may take before the test fails (TCG, up to 8 CPUs and 4 GiB).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

struct Env {
    qemu: PathBuf,
    images: Images,
}

fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| {
        let var = |k: &str| std::env::var_os(k).map(PathBuf::from);
        if let (Some(q), Some(h), Some(k), Some(he), Some(ke)) = (
            var("XTASK_QEMU"),
            var("XTASK_HYPERVISOR_IMG"),
            var("XTASK_KERNEL_IMG"),
            var("XTASK_HYPERVISOR_ELF"),
            var("XTASK_KERNEL_ELF"),
        ) {
            return Env { qemu: q, images: Images { hypervisor: h, kernel: k, hypervisor_elf: he, kernel_elf: ke } };
        }
        let tc = xtask::provision::toolchain::find().expect("a toolchain for aarch64-unknown-none");
        let images = xtask::build::build(&tc, &[]).expect("building the Images");
        Env { qemu: xtask::provision::system::qemu().expect("qemu-system-aarch64"), images }
    })
}

/// The QEMU binary the tests run on `virt`.
pub fn qemu_binary() -> &'static std::path::Path {
    &env().qemu
}

/// The QEMU for machine `m`: the system one when it is new enough for the model; else the one
/// `cargo xtask test` provisioned for the board models (`XTASK_QEMU_BOARDS`, or why it could
/// not: `XTASK_QEMU_BOARDS_ERROR`), else provisioned here (`xtask::provision::qemu_pkg`). A
/// board test that cannot get its QEMU fails and says why.
pub fn qemu_for(m: &Machine) -> PathBuf {
    static SYSTEM: OnceLock<xtask::provision::qemu_pkg::Version> = OnceLock::new();
    let system =
        SYSTEM.get_or_init(|| xtask::provision::qemu_pkg::version_of(&env().qemu).expect("the system QEMU's version"));
    if m.model().min_qemu <= *system {
        return env().qemu.clone();
    }
    board_models_qemu()
}

/// The QEMU the board models run on (new enough for every board; `virt` runs on it too).
pub fn board_models_qemu() -> PathBuf {
    static Q: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let q = Q.get_or_init(|| {
        if let Some(p) = std::env::var_os("XTASK_QEMU_BOARDS") {
            return Ok(PathBuf::from(p));
        }
        if let Ok(e) = std::env::var("XTASK_QEMU_BOARDS_ERROR") {
            return Err(e);
        }
        xtask::provision::qemu_pkg::qemu_at_least(board_qemu_version()).map_err(|e| format!("{e:#}"))
    });
    q.clone().unwrap_or_else(|e| panic!("no QEMU for the board models: {e}"))
}

/// The QEMU version every board model runs on (the newest any board needs).
pub fn board_qemu_version() -> xtask::provision::qemu_pkg::Version {
    xtask::machine::newest_min_qemu()
}

/// `cfg` with its board's DTB fetched (once per process: the fetch is not safe to run twice
/// at the same time).
pub fn with_dtb(mut cfg: Launch) -> Launch {
    static FETCH: std::sync::Mutex<()> = std::sync::Mutex::new(());
    if cfg.model().debian_dtb().is_some() && cfg.dtb.is_none() {
        let _g = FETCH.lock().unwrap_or_else(|p| p.into_inner());
        cfg.resolve_dtb().unwrap_or_else(|e| panic!("--board {}: {e:#}", cfg.machine));
    }
    cfg
}

/// The Images under test.
pub fn images() -> &'static Images {
    &env().images
}

/// What a boot produced.
pub struct Run {
    pub cfg: Launch,
    pub outcome: Outcome,
    pub records: Vec<ParsedRecord>,
}

impl Run {
    /// Records of one kind.
    pub fn records(&self, kind: &str) -> Vec<&ParsedRecord> {
        self.records.iter().filter(|r| r.kind == kind).collect()
    }

    /// The one record of `kind`; fails the test if there is not exactly one.
    pub fn record(&self, kind: &str) -> &ParsedRecord {
        let r = self.records(kind);
        assert_eq!(r.len(), 1, "expected one {kind:?} record\n{}", self.dump());
        r[0]
    }

    /// Fails unless the output contains `needle`.
    pub fn expect_output(&self, needle: &str) {
        assert!(self.outcome.output.contains(needle), "output lacks {needle:?}\n{}", self.dump());
    }

    /// The run's verdict (a row of the exit-code table), as `cargo xtask run` gives it.
    pub fn verdict(&self) -> xtask::error::Verdict {
        xtask::supervise::judge(&self.outcome)
    }

    /// Fails unless the run's verdict is `code` (judged like `cargo xtask run` does: the run's
    /// final line, never QEMU's status alone) and the run printed at most one final line.
    pub fn expect_exit(&self, code: i32) {
        assert!(!self.outcome.timed_out, "timed out after {:?}\n{}", BOOT_TIMEOUT, self.dump());
        let finals = xtask::supervise::Watch::scan(&self.outcome.output, self.outcome.judging).finals;
        assert!(finals.len() <= 1, "one final line per run, not {finals:?}\n{}", self.dump());
        let v = self.verdict();
        assert_eq!(
            v.code as i32,
            code,
            "expected exit {code} ({}), got {v}\n{}",
            abi::exit::describe(code),
            self.dump()
        );
    }

    /// The configuration and the whole output, for failure messages.
    pub fn dump(&self) -> String {
        format!("--- {} ---\n{}--- end ---", self.cfg.describe(), self.outcome.output)
    }
}

/// A scratch directory for files a test makes (under `target/`).
pub fn scratch_dir() -> PathBuf {
    let d = xtask::workspace_root().join("target/test-scratch");
    std::fs::create_dir_all(&d).expect("creating target/test-scratch");
    d
}

/// Whether `cargo xtask test --long` runs this (the wide configuration matrix).
pub fn long() -> bool {
    std::env::var("XTASK_LONG").is_ok_and(|v| v == "1")
}

/// Boots once with `cfg`, or returns why the xtask refused the configuration (QEMU not started).
pub fn try_boot(cfg: Launch) -> Result<Run, String> {
    try_boot_with(cfg, &[])
}

/// [`boot`] with `extra` QEMU arguments after the usual ones (e.g. `-dtb FILE`).
pub fn boot_with(cfg: Launch, extra: &[String]) -> Run {
    try_boot_with(cfg, extra).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why}"))
}

/// Boots `cfg` with QEMU's `-append` replaced by `words` and the run's key (a command line no
/// `Launch` would make: words the xtask itself refuses, given to the hypervisor by hand).
pub fn boot_with_append(cfg: Launch, words: &str) -> Run {
    let qemu = qemu_for(cfg.machine);
    try_boot_args(&qemu, cfg, |args, judging| {
        let i = args.iter().position(|a| a == "-append").expect("-append") + 1;
        args[i] = match judging {
            supervise::Judging::Keyed(k) => format!("{words} {}={k:#x}", hypcore::options::KEY),
            _ => words.to_string(),
        };
    })
    .unwrap_or_else(|why| panic!("the xtask refused the configuration: {why}"))
}

/// [`try_boot`] with `extra` QEMU arguments after the usual ones.
pub fn try_boot_with(cfg: Launch, extra: &[String]) -> Result<Run, String> {
    try_boot_edited(cfg, |args| args.extend_from_slice(extra))
}

/// [`boot`] with the QEMU arguments `cfg` gives changed by `edit` first (another `-kernel`, a
/// `-device loader`, more words in `-append`: keep the run's key there, `hyp.key=`).
pub fn boot_edited(cfg: Launch, edit: impl FnOnce(&mut Vec<String>)) -> Run {
    try_boot_edited(cfg, edit).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why}"))
}

/// [`boot_edited`], or why the xtask refused the configuration (QEMU not started).
pub fn try_boot_edited(cfg: Launch, edit: impl FnOnce(&mut Vec<String>)) -> Result<Run, String> {
    let qemu = qemu_for(cfg.machine);
    try_boot_edited_on(&qemu, cfg, edit)
}

/// [`boot_edited`] on the QEMU binary `qemu` (e.g. [`board_models_qemu`] for `virt` too).
pub fn boot_edited_on(qemu: &std::path::Path, cfg: Launch, edit: impl FnOnce(&mut Vec<String>)) -> Run {
    try_boot_edited_on(qemu, cfg, edit).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why}"))
}

/// [`boot_edited_on`], or why the xtask refused the configuration (QEMU not started).
pub fn try_boot_edited_on(
    qemu: &std::path::Path,
    cfg: Launch,
    edit: impl FnOnce(&mut Vec<String>),
) -> Result<Run, String> {
    try_boot_args(qemu, cfg, |args, _| edit(args))
}

/// Boots `cfg` on `qemu`, `edit` changing the arguments (knowing whose word judges the run)
/// before QEMU starts.
fn try_boot_args(
    qemu: &std::path::Path,
    cfg: Launch,
    edit: impl FnOnce(&mut Vec<String>, supervise::Judging),
) -> Result<Run, String> {
    let e = env();
    let cfg = with_dtb(cfg);
    cfg.validate().map_err(|r| r.0)?;
    let version = xtask::provision::qemu_pkg::version_of(qemu).map_err(|e| format!("{e:#}"))?;
    let r = cfg.resolve(&e.images, version).map_err(|e| format!("{e:#}"))?;
    let mut args = r.args;
    edit(&mut args, r.judging);
    let outcome =
        supervise::run_on(qemu, cfg.accel, &args, r.judging, BOOT_TIMEOUT, None, |_| {}).expect("running QEMU");
    let mut records = Vec::new();
    for line in outcome.output.lines() {
        if let Some(r) = parse_line(line) {
            match r {
                Ok(r) => records.push(r),
                Err(err) => panic!("malformed report line {line:?}: {err}\n{}", outcome.output),
            }
        }
    }
    Ok(Run { cfg, outcome, records })
}

/// Boots `cfg` (with a QMP socket) until a console line satisfies `until`, then hands the run's
/// QMP session and its console so far to `f`, and stops QEMU. Fails the test when no such line
/// comes within [`BOOT_TIMEOUT`] or QEMU ends first.
pub fn boot_until<T>(cfg: &Launch, until: impl Fn(&str) -> bool, f: impl FnOnce(&mut xtask::qmp::Qmp, &str) -> T) -> T {
    boot_until_on(&qemu_for(cfg.machine), cfg, until, f)
}

/// [`boot_until`] on the QEMU binary `qemu`.
pub fn boot_until_on<T>(
    qemu: &std::path::Path,
    cfg: &Launch,
    until: impl Fn(&str) -> bool,
    f: impl FnOnce(&mut xtask::qmp::Qmp, &str) -> T,
) -> T {
    use std::io::BufRead;
    let e = env();
    cfg.validate().unwrap_or_else(|why| panic!("the xtask refused the configuration: {why}"));
    let mut args = cfg.args(&e.images).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why:#}"));
    let sock = xtask::qmp::socket_path();
    args.extend(xtask::qmp::qemu_args(&sock));
    let mut child = std::process::Command::new(qemu)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("starting QEMU");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + BOOT_TIMEOUT;
    let mut console = String::new();
    let found = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let line = line.replace('\r', "");
                console.push_str(&line);
                console.push('\n');
                if until(&line) {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    let result = found.then(|| {
        let mut q = xtask::qmp::Qmp::connect(&sock, Duration::from_secs(10)).expect("QMP");
        let r = f(&mut q, &console);
        let _ = q.execute("quit", serde_json::json!({}));
        r
    });
    let _ = child.kill();
    let _ = child.wait();
    let _ = reader.join();
    let _ = std::fs::remove_file(&sock);
    result.unwrap_or_else(|| panic!("--- {} ---\nno awaited line within {BOOT_TIMEOUT:?}\n{console}", cfg.describe()))
}

/// The xtask binary: `XTASK_BIN` (set by `cargo xtask test`), else built here with cargo (a plain
/// `cargo test` on a fresh clone).
pub fn xtask_bin() -> PathBuf {
    if let Some(b) = std::env::var_os("XTASK_BIN") {
        return PathBuf::from(b);
    }
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let st = std::process::Command::new(cargo)
                .args(["build", "--quiet", "--package", "xtask"])
                .current_dir(xtask::workspace_root())
                .status()
                .expect("running cargo build -p xtask");
            assert!(st.success(), "cargo build -p xtask failed");
            xtask::workspace_root().join("target/debug/xtask")
        })
        .clone()
}

/// Runs the xtask binary itself (`XTASK_BIN`, set by `cargo xtask test`; else through cargo)
/// with `args`; returns its exit code and everything it printed.
pub fn xtask_cli(args: &[&str]) -> (i32, String) {
    let mut cmd = match std::env::var_os("XTASK_BIN") {
        Some(bin) => std::process::Command::new(bin),
        None => {
            let mut c = std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
            c.args(["run", "--quiet", "--package", "xtask", "--"]);
            c
        }
    };
    cmd.current_dir(xtask::workspace_root()).args(args).stdin(std::process::Stdio::null());
    // The nested run must not see the outer run's images as given (it builds its own).
    for v in ["XTASK_QEMU", "XTASK_HYPERVISOR_IMG", "XTASK_KERNEL_IMG", "XTASK_HYPERVISOR_ELF", "XTASK_KERNEL_ELF"] {
        cmd.env_remove(v);
    }
    let out = cmd.output().expect("running the xtask");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// Boots once with `cfg` and collects the output and its report records. A malformed record
/// fails the test: the format is part of what is tested.
pub fn boot(cfg: Launch) -> Run {
    try_boot(cfg).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why}"))
}

/// The DTB QEMU writes for `cfg`'s machine (`-M virt,…,dumpdtb=FILE`).
pub fn qemu_dtb(cfg: &Launch) -> Vec<u8> {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("pgtlab-virt-{}-{seq}.dtb", std::process::id()));
    let mem = cfg.mem.map_or(1 << 30, Size::bytes);
    let mut args = cfg.machine_args(mem, cfg.model().min_qemu);
    let m = args.iter().position(|a| a == "-M").expect("-M") + 1;
    args[m] = format!("{},dumpdtb={}", args[m], file.display());
    let out = std::process::Command::new(&env().qemu).args(&args).arg("-nographic").output().expect("running QEMU");
    assert!(out.status.success(), "QEMU {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let dtb = std::fs::read(&file).expect("the dumped DTB");
    let _ = std::fs::remove_file(&file);
    dtb
}

/// Debian's arm64 Linux with the busybox initramfs (`xtask::linux`), fetched and built once per
/// test process. `Err` with the reason when it cannot be had (no apt, no registry): the Linux
/// tests then fail with that message.
pub fn linux_guest() -> Result<xtask::linux::LinuxGuest, String> {
    static LINUX: OnceLock<Result<xtask::linux::LinuxGuest, String>> = OnceLock::new();
    prepared_linux(&LINUX, xtask::linux::Flavour::Cloud)
}

/// Debian's backports Linux (the kernel the board models need) with the busybox initramfs,
/// fetched and built once per test process.
pub fn linux_guest_backports() -> Result<xtask::linux::LinuxGuest, String> {
    static LINUX: OnceLock<Result<xtask::linux::LinuxGuest, String>> = OnceLock::new();
    prepared_linux(&LINUX, xtask::linux::Flavour::Backports)
}

fn prepared_linux(
    once: &OnceLock<Result<xtask::linux::LinuxGuest, String>>,
    flavour: xtask::linux::Flavour,
) -> Result<xtask::linux::LinuxGuest, String> {
    once.get_or_init(|| {
        let extra = xtask::linux::extra_programs().map_err(|e| format!("{e:#}"))?;
        xtask::linux::prepare(flavour, &extra).map_err(|e| format!("{e:#}"))
    })
    .clone()
}

/// A configuration booting Debian's backports Linux on `board` (its console, quiet, the
/// `pgtlab_*` words for its init) on the hypervisor.
pub fn board_linux_config(board: &'static Machine, init_args: &str) -> Launch {
    let l = linux_guest_backports().unwrap_or_else(|e| panic!("the Linux guest is not available: {e}"));
    Launch {
        guest: Some(xtask::launch::Guest {
            kernel: l.kernel,
            initrd: Some(l.initramfs),
            append: format!("{} quiet {init_args}", xtask::linux::default_append(board)).trim().to_string(),
        }),
        ..Launch::for_machine(board)
    }
}

/// A configuration booting Debian's Linux (quiet kernel, `pgtlab_*` words for its init) on the
/// hypervisor; fails the test with the reason when the Linux guest cannot be fetched.
pub fn linux_config(init_args: &str, f: impl FnOnce(&mut Launch)) -> Launch {
    let l = linux_guest().unwrap_or_else(|e| panic!("the Linux guest is not available: {e}"));
    let mut c = Launch {
        guest: Some(xtask::launch::Guest {
            kernel: l.kernel,
            initrd: Some(l.initramfs),
            append: format!("{} quiet {init_args}", xtask::linux::DEFAULT_APPEND).trim().to_string(),
        }),
        ..Launch::default()
    };
    f(&mut c);
    c
}

/// Boots once with `cfg` and the instruction-counting QEMU plugin (`xtask/plugin`), and returns
/// the run with the plugin's counts. `name` names the plugin's output file.
pub fn boot_counting(mut cfg: Launch, name: &str) -> (Run, xtask::plugin::Counts) {
    let e = env();
    let lib = xtask::plugin::build(&qemu_for(cfg.machine)).expect("building the instruction-counting plugin");
    let dir = xtask::workspace_root().join("target/plugin");
    let out = dir.join(format!("{name}.jsonl"));
    let _ = std::fs::remove_file(&out);
    let el2 = (!cfg.no_hypervisor).then(|| xtask::plugin::el2_range(&e.images, cfg.model()).expect("hypervisor Image"));
    cfg.plugin = Some(xtask::plugin::qemu_arg(&lib, &out, el2, cfg.model()));
    let run = boot(cfg);
    let counts = xtask::plugin::read(&out).unwrap_or_else(|err| panic!("plugin output: {err:#}\n{}", run.dump()));
    (run, counts)
}

/// A configuration with the defaults of `cargo xtask run` changed by `f`.
pub fn config(f: impl FnOnce(&mut Launch)) -> Launch {
    let mut c = Launch::default();
    f(&mut c);
    c
}

/// A `--mem` size like `512M` or `4G`.
pub fn mem(m: &str) -> Size {
    Size::parse(m).expect("memory size")
}

/// The machine called `name` (a row of `xtask::machine::MACHINES`).
pub fn machine(name: &str) -> &'static Machine {
    xtask::machine::find(name).unwrap_or_else(|| panic!("no machine {name}"))
}

#[cfg(test)]
mod judging {
    //! The harness is part of the judging: each helper must fail on a missing line or record
    //! even when the run exited 0.
    use super::*;
    use std::panic::catch_unwind;

    fn run(code: Option<i32>, output: &str) -> Run {
        let records = output.lines().filter_map(parse_line).map(|r| r.unwrap()).collect();
        Run {
            cfg: Launch::default(),
            outcome: Outcome {
                code,
                limit: BOOT_TIMEOUT,
                output: output.to_string(),
                console_lines: output.lines().count(),
                elapsed: Duration::from_secs(1),
                ..Outcome::default()
            },
            records,
        }
    }

    #[test]
    fn expect_output_fails_on_a_missing_line_even_with_exit_0() {
        let r = run(Some(0), "kernel: all done, powering off\n@@exit 0 (success)\n");
        r.expect_output("all done");
        assert!(catch_unwind(|| r.expect_output("kernel: 4 of 4 CPUs online")).is_err());
    }

    #[test]
    fn record_fails_unless_exactly_one_even_with_exit_0() {
        let r = run(Some(0), "@@report {\"kind\":\"hyp_boot\",\"cpus\":4}\n@@report {\"kind\":\"banner\",\"cpu\":0}\n@@report {\"kind\":\"banner\",\"cpu\":1}\n");
        assert_eq!(r.record("hyp_boot").u64("cpus"), Some(4));
        assert!(catch_unwind(|| r.record("guest_fault")).is_err(), "missing record");
        assert!(catch_unwind(|| r.record("banner")).is_err(), "two records");
    }

    #[test]
    fn expect_exit_fails_on_another_code_a_timeout_a_signal_or_two_final_lines() {
        run(Some(0), "x\n@@exit 0 (success)\n").expect_exit(0);
        assert!(catch_unwind(|| run(Some(0), "x\n@@exit 0 (success)\n").expect_exit(2)).is_err());
        assert!(catch_unwind(|| run(Some(0), "kernel: PANIC\n@@exit 2 (guest panic)\n").expect_exit(0)).is_err());
        // QEMU exiting 0 without the final line is not success.
        assert!(catch_unwind(|| run(Some(0), "x\n").expect_exit(0)).is_err());
        let mut t = run(None, "x\n@@exit 0 (success)\n");
        t.outcome.timed_out = true;
        assert!(catch_unwind(|| t.expect_exit(0)).is_err());
        // QEMU stopping on SIGTERM exits 0: not success.
        let mut s = run(Some(0), "x\n@@exit 0 (success)\n");
        s.outcome.qemu_messages.push("qemu-system-aarch64: terminating on signal 15 from pid 1".into());
        assert!(catch_unwind(|| s.expect_exit(0)).is_err());
        // Two final lines contradict each other, even when the last is the expected one.
        assert!(catch_unwind(|| run(Some(0), "@@exit 1 (guest failure)\n@@exit 0 (success)\n").expect_exit(0)).is_err());
    }
}
