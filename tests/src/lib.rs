//! Shared harness of the QEMU integration tests.
//!
//! `cargo xtask test` builds the Images once and passes them in `XTASK_*` variables; a plain
//! `cargo test -p tests` builds them itself (same toolchain discovery as the xtask).

use abi::report::{parse_line, ParsedRecord};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;
use xtask::build::Images;
use xtask::qemu::{self, Outcome, QemuConfig};

pub use xtask::qemu::QemuConfig as Config;

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
        let tc = xtask::toolchain::find().expect("a toolchain for aarch64-unknown-none");
        let images = xtask::build::build(&tc, &[]).expect("building the Images");
        Env { qemu: xtask::system::qemu().expect("qemu-system-aarch64"), images }
    })
}

/// The QEMU binary the tests run.
pub fn qemu_binary() -> &'static std::path::Path {
    &env().qemu
}

/// The Images under test.
pub fn images() -> &'static Images {
    &env().images
}

/// What a boot produced.
pub struct Run {
    pub cfg: QemuConfig,
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

    /// Fails unless QEMU exited with `code`.
    pub fn expect_exit(&self, code: i32) {
        assert!(!self.outcome.timed_out, "timed out after {:?}\n{}", BOOT_TIMEOUT, self.dump());
        assert_eq!(
            self.outcome.code,
            Some(code),
            "expected exit {code} ({}), got {:?}\n{}",
            abi::exit::describe(code),
            self.outcome.code,
            self.dump()
        );
    }

    /// The configuration and the whole output, for failure messages.
    pub fn dump(&self) -> String {
        format!("--- {} ---\n{}--- end ---", self.cfg.describe(), self.outcome.output)
    }
}

/// Boots once with `cfg` and collects the output and its report records. A malformed record
/// fails the test: the format is part of what is tested.
pub fn boot(cfg: QemuConfig) -> Run {
    boot_with(cfg, &[])
}

/// [`boot`] with `extra` QEMU arguments after the usual ones (e.g. `-dtb FILE`).
pub fn boot_with(cfg: QemuConfig, extra: &[String]) -> Run {
    let e = env();
    let mut args = cfg.args(&e.images);
    args.extend_from_slice(extra);
    let outcome = qemu::run_args(&e.qemu, &args, BOOT_TIMEOUT, |_| {}).expect("running QEMU");
    let mut records = Vec::new();
    for line in outcome.output.lines() {
        if let Some(r) = parse_line(line) {
            match r {
                Ok(r) => records.push(r),
                Err(err) => panic!("malformed report line {line:?}: {err}\n{}", outcome.output),
            }
        }
    }
    Run { cfg, outcome, records }
}

/// The DTB QEMU writes for `cfg`'s machine (`-M virt,…,dumpdtb=FILE`).
pub fn qemu_dtb(cfg: &QemuConfig) -> Vec<u8> {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("pgtlab-virt-{}-{seq}.dtb", std::process::id()));
    let mut args = cfg.machine_args();
    let m = args.iter().position(|a| a == "-M").expect("-M") + 1;
    args[m] = format!("{},dumpdtb={}", args[m], file.display());
    let out = std::process::Command::new(&env().qemu).args(&args).arg("-nographic").output().expect("running QEMU");
    assert!(out.status.success(), "QEMU {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let dtb = std::fs::read(&file).expect("the dumped DTB");
    let _ = std::fs::remove_file(&file);
    dtb
}

/// A configuration with the defaults of `cargo xtask run` changed by `f`.
pub fn config(f: impl FnOnce(&mut QemuConfig)) -> QemuConfig {
    let mut c = QemuConfig::default();
    f(&mut c);
    c
}

/// Bytes in a QEMU `-m` size like `512M` or `4G`.
pub fn mem_bytes(m: &str) -> u64 {
    let (num, unit) = m.split_at(m.len() - 1);
    let n: u64 = num.parse().expect("memory size");
    match unit {
        "M" => n << 20,
        "G" => n << 30,
        _ => panic!("memory unit in {m}"),
    }
}
