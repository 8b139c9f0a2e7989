//! Runs on KVM: this arm64 host's (`--accel kvm`) or the KVM host model's
//! (`xtask::supervise::kvm_model`: the same command line inside Debian's arm64 Linux with KVM on
//! TCG). Which one is `XTASK_TEST_ACCEL` (`cargo xtask test --accel kvm|kvm-model`), the model
//! when unset: a machine that is not arm64 has no other KVM.

use crate::{env, with_dtb, Run};
use abi::report::parse_line;
use std::sync::OnceLock;
use std::time::Duration;
use xtask::launch::Launch;
use xtask::machine::accel::Runs;
use xtask::machine::Accel;
use xtask::supervise::kvm_model::KvmModel;

/// Longest one run may take: in the model, its Linux boots in seconds and the inner run is a
/// TCG run one level down (the hypervisor's boot alone took 11-24 s on two shared cores).
pub const MODEL_TIMEOUT: Duration = Duration::from_secs(480);

/// The accelerator the KVM tests run on: `XTASK_TEST_ACCEL`, else `kvm-model`. Anything but a
/// KVM row fails the test that asks.
pub fn accel() -> &'static Accel {
    let name = std::env::var("XTASK_TEST_ACCEL").unwrap_or_else(|_| "kvm-model".into());
    let a = xtask::machine::accel::find(&name).unwrap_or_else(|r| panic!("XTASK_TEST_ACCEL: {r}"));
    assert!(!a.tcg, "XTASK_TEST_ACCEL={name}: the KVM tests run on kvm or kvm-model");
    a
}

/// Whether the KVM tests run inside the model.
pub fn in_model() -> bool {
    accel().runs == Runs::KvmModel
}

/// The model, provisioned once per test process (downloads cached under
/// `target/downloads/kvm-model/`); a test that cannot have it fails with the reason.
pub fn model() -> &'static KvmModel {
    static M: OnceLock<Result<KvmModel, String>> = OnceLock::new();
    M.get_or_init(|| xtask::supervise::kvm_model::provision().map_err(|e| format!("{e:#}")))
        .as_ref()
        .unwrap_or_else(|e| panic!("no KVM host model: {e}"))
}

/// What this host's KVM offers (`--accel kvm` only), asked once.
pub fn host_offer() -> &'static kvmprobe::Offer {
    static K: OnceLock<Result<kvmprobe::Offer, String>> = OnceLock::new();
    K.get_or_init(|| xtask::provision::kvm::probe().map(|k| k.offer).map_err(|e| format!("{e:#}")))
        .as_ref()
        .unwrap_or_else(|e| panic!("no KVM on this host: {e}"))
}

/// A run on KVM.
pub struct KvmRun {
    /// The run, as any run (its outcome judged as any run's).
    pub run: Run,
    /// Every line as shown: in the model both consoles (its Linux, the probe, the inner run);
    /// on this host's KVM the run's output.
    pub transcript: String,
}

impl KvmRun {
    /// The transcript, for failure messages.
    pub fn dump(&self) -> String {
        format!("--- on --accel {}: {} ---\n{}--- end ---", accel(), self.run.cfg.describe(), self.transcript)
    }
}

/// Runs `cfg` on [`accel`] (inside `model` when that is the model's); `Err` with the error
/// when the run is refused (`code_of` of it says which code) or cannot start.
pub fn try_boot_in(model: Option<&KvmModel>, cfg: Launch) -> Result<KvmRun, (anyhow::Error, String)> {
    let e = env();
    let cfg = with_dtb(Launch { accel: accel(), ..cfg });
    let version = xtask::provision::qemu_pkg::version_of(&e.qemu).expect("QEMU's version");
    let r =
        cfg.resolve(&e.images, version).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why:#}"));
    let mut transcript = String::new();
    let mut echo = |l: &str| {
        // Captured by the test harness: shown for a failing test, or live with --nocapture.
        eprintln!("{l}");
        transcript.push_str(l);
        transcript.push('\n');
    };
    let out = match model {
        Some(m) => m.run(&r.args, r.judging, MODEL_TIMEOUT, None, &mut echo),
        None => xtask::supervise::run_on(&e.qemu, cfg.accel, &r.args, r.judging, MODEL_TIMEOUT, None, &mut echo),
    };
    let outcome = match out {
        Ok(o) => o,
        Err(err) => return Err((err, transcript)),
    };
    let mut records = Vec::new();
    for line in outcome.output.lines() {
        if let Some(r) = parse_line(line) {
            match r {
                Ok(r) => records.push(r),
                Err(err) => panic!("malformed report line {line:?}: {err}\n{transcript}"),
            }
        }
    }
    Ok(KvmRun { run: Run { cfg, outcome, records }, transcript })
}

/// [`try_boot_in`] the provisioned model or this host's KVM; a refusal fails the test.
pub fn boot(cfg: Launch) -> KvmRun {
    let m = in_model().then(model);
    try_boot_in(m, cfg).unwrap_or_else(|(e, t)| panic!("--accel {} refused the run: {e:#}\n{t}", accel()))
}

/// [`boot`] for a run of the hypervisor: on a host whose KVM offers no EL2 (a Pi 5) the run
/// must be refused, with the reason and the way that works, and `None` says it was.
pub fn boot_hypervisor(cfg: Launch) -> Option<KvmRun> {
    if !in_model() && host_offer().el2 == kvmprobe::El2::None {
        let (e, t) = match try_boot_in(None, cfg) {
            Err(x) => x,
            Ok(r) => panic!("a KVM without EL2 ran the hypervisor: {}", r.dump()),
        };
        assert_eq!(xtask::error::code_of(&e), abi::exit::USAGE, "{e:#}\n{t}");
        assert!(format!("{e:#}").contains("--no-hypervisor"), "{e:#}");
        eprintln!("this host's KVM offers no EL2: the hypervisor's run was refused, as it must be ({e:#})");
        return None;
    }
    Some(boot(cfg))
}

/// The `kvm_probe` record the model's probe printed (on the model's console).
pub fn probe_record(transcript: &str) -> Option<abi::report::ParsedRecord> {
    transcript.lines().filter_map(|l| parse_line(l)?.ok()).find(|r| r.kind == "kvm_probe")
}
