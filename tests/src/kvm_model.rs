//! Runs inside the KVM host model (`xtask::supervise::kvm_model`): the project's QEMU command
//! line with `-accel kvm -cpu host` (`--accel kvm-model`), inside Debian's arm64 Linux with KVM
//! on TCG.

use crate::{env, with_dtb, Run};
use abi::report::parse_line;
use std::sync::OnceLock;
use std::time::Duration;
use xtask::launch::Launch;
use xtask::supervise::kvm_model::KvmModel;

/// Longest one model run may take: the model's Linux boots in seconds, the inner run is a TCG
/// run one level down (the hypervisor's boot alone took 11-24 s on two shared cores).
pub const MODEL_TIMEOUT: Duration = Duration::from_secs(480);

/// The model, provisioned once per test process (downloads cached under
/// `target/downloads/kvm-model/`); a test that cannot have it fails with the reason.
pub fn model() -> &'static KvmModel {
    static M: OnceLock<Result<KvmModel, String>> = OnceLock::new();
    M.get_or_init(|| xtask::supervise::kvm_model::provision().map_err(|e| format!("{e:#}")))
        .as_ref()
        .unwrap_or_else(|e| panic!("no KVM host model: {e}"))
}

/// A run inside the model.
pub struct ModelRun {
    /// The inner run, as any run (its outcome judged by its own final line).
    pub run: Run,
    /// Every line of both consoles as shown (the model's Linux, the probe, the inner run).
    pub transcript: String,
}

impl ModelRun {
    /// The transcript, for failure messages.
    pub fn dump(&self) -> String {
        format!("--- KVM host model: {} ---\n{}--- end ---", self.run.cfg.describe(), self.transcript)
    }
}

/// Runs `cfg` (its accelerator made `kvm-model`) inside `model`; `Err` with the error when the
/// run is refused (`code_of` of it says which code) or cannot start.
pub fn try_boot_in(model: &KvmModel, cfg: Launch) -> Result<ModelRun, (anyhow::Error, String)> {
    let e = env();
    let accel = xtask::machine::accel::find("kvm-model").expect("the kvm-model row");
    let cfg = with_dtb(Launch { accel, ..cfg });
    let version = xtask::provision::qemu_pkg::version_of(&e.qemu).expect("QEMU's version");
    let r =
        cfg.resolve(&e.images, version).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why:#}"));
    let mut transcript = String::new();
    let out = model.run(&r.args, r.judging, MODEL_TIMEOUT, None, |l| {
        // Captured by the test harness: shown for a failing test, or live with --nocapture.
        eprintln!("{l}");
        transcript.push_str(l);
        transcript.push('\n');
    });
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
    Ok(ModelRun { run: Run { cfg, outcome, records }, transcript })
}

/// [`try_boot_in`] the provisioned model; a refusal fails the test.
pub fn boot(cfg: Launch) -> ModelRun {
    try_boot_in(model(), cfg).unwrap_or_else(|(e, t)| panic!("the KVM host model refused the run: {e:#}\n{t}"))
}

/// The `kvm_probe` record the model's probe printed (on the model's console).
pub fn probe_record(transcript: &str) -> Option<abi::report::ParsedRecord> {
    transcript.lines().filter_map(|l| parse_line(l)?.ok()).find(|r| r.kind == "kvm_probe")
}
