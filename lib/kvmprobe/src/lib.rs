//! What an arm64 host's KVM offers this project, decoded from what `/dev/kvm` and sysfs answer.
//!
//! On an arm64 Linux host, QEMU `-accel kvm -cpu host` runs the kernel on the real cores, and,
//! when the host's KVM gives guests an EL2 (FEAT_NV2 cores, Linux 6.16 or newer booted with
//! `kvm-arm.mode=nested`), the hypervisor at a virtual EL2. Whether it does, and what else the
//! guest gets, is a question for `/dev/kvm`: `KVM_GET_API_VERSION`, then one
//! `KVM_CHECK_EXTENSION` per capability of [`Cap::ALL`] ([`Raw::collect`]), and the names under
//! `/sys/bus/event_source/devices/*/events` for the PMU ([`PmuEvents`]). The answers are
//! decoded here ([`decode`]), with no hardware, so the host tests state every rule; two callers
//! feed them in: the xtask on an arm64 host (`cargo xtask doctor`, the refusal before a
//! `--accel kvm` run) and `pgtlab-kvmprobe` (linux-user), which the KVM host model runs inside
//! its Linux before the inner QEMU.
//!
//! The capabilities, as KVM's API documentation states them (`Documentation/virt/kvm/api.rst`):
//! `KVM_CAP_ARM_EL2` (a vCPU may start at EL2, `KVM_ARM_VCPU_HAS_EL2`; without
//! `KVM_CAP_ARM_EL2_E2H0` its HCR_EL2.E2H is RES1: the guest's EL2 runs with E2H = 1 only),
//! `KVM_CAP_ARM_PMU_V3`, `KVM_CAP_ARM_SVE`, `KVM_CAP_ARM_MTE`, `KVM_CAP_ARM_VM_IPA_SIZE` (the
//! largest IPA a VM may ask for; 0: only the fixed 40 bits), `KVM_CAP_NR_VCPUS` (recommended
//! vCPUs per VM; absent: 4) and `KVM_CAP_MAX_VCPUS` (at most; absent: the recommended number).
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

use abi::report::Record;
use core::fmt::{self, Write};

/// `ioctl` on `/dev/kvm`: `_IO(KVMIO = 0xAE, 0x00)`, the API version.
pub const KVM_GET_API_VERSION: u64 = 0xAE00;
/// `ioctl` on `/dev/kvm`: `_IO(KVMIO, 0x03)`, whether (and how far) a capability is offered.
pub const KVM_CHECK_EXTENSION: u64 = 0xAE03;
/// The one KVM API version there is (a stable ABI since Linux 2.6.22).
pub const KVM_API_VERSION: i64 = 12;

/// `pgtlab-kvmprobe`'s exit statuses (the KVM host model's `/init` acts on them).
pub mod status {
    /// KVM offers what the run needs.
    pub const OFFERED: i32 = 0;
    /// No `/dev/kvm` (or it cannot be opened): no KVM at all.
    pub const NO_KVM: i32 = 2;
    /// KVM cannot run what was asked ([`crate::Refusal`], printed).
    pub const REFUSED: i32 = 3;
    /// KVM's answers cannot be decoded ([`crate::Error`], printed).
    pub const UNKNOWN_KVM: i32 = 4;
}

/// What `pgtlab-kvmprobe` prints in front of each of its lines.
pub const LINE_PREFIX: &str = "kvm-probe: ";

/// A KVM capability this project asks about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// `KVM_CAP_NR_VCPUS`: recommended vCPUs per VM.
    NrVcpus,
    /// `KVM_CAP_MAX_VCPUS`: most vCPUs per VM.
    MaxVcpus,
    /// `KVM_CAP_ARM_PMU_V3`: a PMUv3 for the guest.
    PmuV3,
    /// `KVM_CAP_ARM_VM_IPA_SIZE`: the largest IPA size a VM may ask for.
    VmIpaSize,
    /// `KVM_CAP_ARM_SVE`.
    Sve,
    /// `KVM_CAP_ARM_MTE`.
    Mte,
    /// `KVM_CAP_ARM_EL2`: a vCPU may start at EL2 (nested virtualisation).
    El2,
    /// `KVM_CAP_ARM_EL2_E2H0`: that EL2 may also run with HCR_EL2.E2H = 0.
    El2E2h0,
}

impl Cap {
    /// Every capability asked, in the order of [`Raw::caps`].
    pub const ALL: [Cap; 8] =
        [Cap::NrVcpus, Cap::MaxVcpus, Cap::PmuV3, Cap::VmIpaSize, Cap::Sve, Cap::Mte, Cap::El2, Cap::El2E2h0];

    /// Its number (`include/uapi/linux/kvm.h`).
    pub const fn number(self) -> u64 {
        match self {
            Cap::NrVcpus => 9,
            Cap::MaxVcpus => 66,
            Cap::PmuV3 => 126,
            Cap::VmIpaSize => 165,
            Cap::Sve => 170,
            Cap::Mte => 205,
            Cap::El2 => 240,
            Cap::El2E2h0 => 241,
        }
    }

    /// Its name in `kvm.h`.
    pub const fn name(self) -> &'static str {
        match self {
            Cap::NrVcpus => "KVM_CAP_NR_VCPUS",
            Cap::MaxVcpus => "KVM_CAP_MAX_VCPUS",
            Cap::PmuV3 => "KVM_CAP_ARM_PMU_V3",
            Cap::VmIpaSize => "KVM_CAP_ARM_VM_IPA_SIZE",
            Cap::Sve => "KVM_CAP_ARM_SVE",
            Cap::Mte => "KVM_CAP_ARM_MTE",
            Cap::El2 => "KVM_CAP_ARM_EL2",
            Cap::El2E2h0 => "KVM_CAP_ARM_EL2_E2H0",
        }
    }

    fn index(self) -> usize {
        Cap::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}

/// What `/dev/kvm` answered: the API version and one `KVM_CHECK_EXTENSION` result per
/// capability of [`Cap::ALL`] (a negative value is `-errno`: the question itself failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw {
    /// `KVM_GET_API_VERSION`.
    pub api_version: i64,
    /// `KVM_CHECK_EXTENSION`, in the order of [`Cap::ALL`].
    pub caps: [i64; Cap::ALL.len()],
}

impl Raw {
    /// Asks `/dev/kvm` everything, through `ioctl(request, argument) -> result or -errno`.
    pub fn collect(mut ioctl: impl FnMut(u64, u64) -> i64) -> Raw {
        let api_version = ioctl(KVM_GET_API_VERSION, 0);
        let mut caps = [0; Cap::ALL.len()];
        for (c, slot) in Cap::ALL.iter().zip(caps.iter_mut()) {
            *slot = ioctl(KVM_CHECK_EXTENSION, c.number());
        }
        Raw { api_version, caps }
    }

    /// The answer for `cap`.
    pub fn get(&self, cap: Cap) -> i64 {
        self.caps[cap.index()]
    }
}

/// How a guest's EL2 may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum El2 {
    /// No EL2 for guests: only the kernel alone at EL1 runs.
    None,
    /// EL2 with HCR_EL2.E2H RES1 only (a VHE or hVHE hypervisor).
    E2hRes1,
    /// EL2 with E2H = 1 or E2H = 0 (nVHE too).
    E2h0Too,
}

impl El2 {
    /// The word in the `kvm_probe` record.
    pub fn word(self) -> &'static str {
        match self {
            El2::None => "none",
            El2::E2hRes1 => "e2h-res1",
            El2::E2h0Too => "e2h0",
        }
    }
}

/// What the host's KVM offers a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// EL2 for guests (the hypervisor's), and how.
    pub el2: El2,
    /// A PMUv3 (the perf tests, the benchmarks' instruction counts).
    pub pmu: bool,
    /// SVE.
    pub sve: bool,
    /// MTE (`--mte`).
    pub mte: bool,
    /// The largest IPA size in bits a VM may have.
    pub ipa_bits: u32,
    /// vCPUs per VM KVM recommends.
    pub vcpus_recommended: u32,
    /// vCPUs per VM at most.
    pub vcpus_max: u32,
}

/// IPA bits of a VM when KVM cannot say more (`KVM_CAP_ARM_VM_IPA_SIZE` absent).
pub const DEFAULT_IPA_BITS: u32 = 40;
/// Recommended vCPUs per VM when `KVM_CAP_NR_VCPUS` is absent.
pub const DEFAULT_VCPUS: u32 = 4;

/// Why the answers cannot be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// `KVM_GET_API_VERSION` answered something other than [`KVM_API_VERSION`].
    ApiVersion(i64),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::ApiVersion(v) if *v < 0 => write!(f, "KVM_GET_API_VERSION failed (errno {})", -v),
            Error::ApiVersion(v) => {
                write!(f, "KVM API version {v}, not {KVM_API_VERSION}: not a KVM this project knows")
            }
        }
    }
}

/// A capability's answer as a count: 0 when absent or when the question failed.
fn count(v: i64) -> u32 {
    u32::try_from(v.max(0)).unwrap_or(u32::MAX)
}

/// Decodes `/dev/kvm`'s answers.
pub fn decode(raw: &Raw) -> Result<Offer, Error> {
    if raw.api_version != KVM_API_VERSION {
        return Err(Error::ApiVersion(raw.api_version));
    }
    let yes = |c: Cap| raw.get(c) > 0;
    let el2 = match (yes(Cap::El2), yes(Cap::El2E2h0)) {
        (false, _) => El2::None,
        (true, false) => El2::E2hRes1,
        (true, true) => El2::E2h0Too,
    };
    let ipa_bits = match count(raw.get(Cap::VmIpaSize)) {
        0 => DEFAULT_IPA_BITS,
        n => n,
    };
    let vcpus_recommended = match count(raw.get(Cap::NrVcpus)) {
        0 => DEFAULT_VCPUS,
        n => n,
    };
    let vcpus_max = match count(raw.get(Cap::MaxVcpus)) {
        0 => vcpus_recommended,
        n => n,
    };
    Ok(Offer {
        el2,
        pmu: yes(Cap::PmuV3),
        sve: yes(Cap::Sve),
        mte: yes(Cap::Mte),
        ipa_bits,
        vcpus_recommended,
        vcpus_max,
    })
}

/// What a run asks of KVM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// The hypervisor runs (at the guest's EL2): `-M virt,virtualization=on`.
    pub el2: bool,
    /// `-smp`.
    pub vcpus: u32,
    /// `-M virt,mte=on`.
    pub mte: bool,
}

/// Why a run cannot go on this host's KVM; its `Display` is the message the user reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The hypervisor needs an EL2 the host's KVM does not give.
    NoEl2,
    /// More vCPUs than KVM takes per VM (asked, most).
    TooManyVcpus(u32, u32),
    /// `--mte` without KVM_CAP_ARM_MTE.
    NoMte,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoEl2 => f.write_str(
                "this host's KVM offers no EL2 (KVM_CAP_ARM_EL2): run the kernel alone with --no-hypervisor \
                 (the hypervisor needs FEAT_NV2 cores and Linux 6.16 or newer booted with kvm-arm.mode=nested)",
            ),
            Refusal::TooManyVcpus(asked, max) => {
                write!(f, "--smp {asked}: this host's KVM takes at most {max} vCPUs per VM (KVM_CAP_MAX_VCPUS)")
            }
            Refusal::NoMte => f.write_str("--mte: this host's KVM offers no MTE (KVM_CAP_ARM_MTE)"),
        }
    }
}

impl Offer {
    /// Why this KVM cannot run what `needs` asks (the first reason), or `None`. Never a
    /// downgrade: a run that needs EL2 is refused, not run without the hypervisor.
    pub fn refusal(&self, needs: Needs) -> Option<Refusal> {
        if needs.el2 && self.el2 == El2::None {
            return Some(Refusal::NoEl2);
        }
        if needs.vcpus > self.vcpus_max {
            return Some(Refusal::TooManyVcpus(needs.vcpus, self.vcpus_max));
        }
        if needs.mte && !self.mte {
            return Some(Refusal::NoMte);
        }
        None
    }

    /// The offer in a few human lines (each ending with a newline).
    pub fn write_lines(&self, w: &mut dyn Write) -> fmt::Result {
        let el2 = match self.el2 {
            El2::None => "no (the kernel alone at EL1 only)",
            El2::E2hRes1 => "yes, HCR_EL2.E2H RES1 (no KVM_CAP_ARM_EL2_E2H0): the hypervisor must run with E2H = 1",
            El2::E2h0Too => "yes, with E2H = 1 or 0 (KVM_CAP_ARM_EL2_E2H0)",
        };
        writeln!(w, "EL2 for guests: {el2}")?;
        let yn = |b: bool| if b { "yes" } else { "no" };
        writeln!(
            w,
            "PMUv3: {}, SVE: {}, MTE: {}, IPA: {} bits, vCPUs per VM: {} recommended, {} at most",
            yn(self.pmu),
            yn(self.sve),
            yn(self.mte),
            self.ipa_bits,
            self.vcpus_recommended,
            self.vcpus_max
        )
    }

    /// The `kvm_probe` report record (with the first PMU's events, if any).
    pub fn record(&self, pmu: Option<&PmuEvents>) -> Record {
        let mut r = Record::new("kvm_probe");
        r.str("el2", self.el2.word())
            .bool("pmu", self.pmu)
            .bool("sve", self.sve)
            .bool("mte", self.mte)
            .u64("ipa_bits", self.ipa_bits.into())
            .u64("vcpus_recommended", self.vcpus_recommended.into())
            .u64("vcpus_max", self.vcpus_max.into());
        match pmu {
            Some(p) => {
                let mut have = [""; KEY_EVENTS.len()];
                let n = p.key_present(&mut have);
                r.u64("pmu_events", p.count.into()).strs("pmu_key_events", &have[..n]);
            }
            None => {
                r.u64("pmu_events", 0).strs("pmu_key_events", &[]);
            }
        }
        r
    }
}

/// The PMU events the project's perf tests and benchmarks lean on, by their sysfs names
/// (`/sys/bus/event_source/devices/<pmu>/events/<name>`): cycles, instructions, and the TLB
/// refills and walks (data and instruction).
pub const KEY_EVENTS: [&str; 6] =
    ["cpu_cycles", "inst_retired", "l1d_tlb_refill", "l1i_tlb_refill", "dtlb_walk", "itlb_walk"];

/// The events one PMU lists in sysfs: how many, and which of [`KEY_EVENTS`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PmuEvents {
    /// Events listed.
    pub count: u32,
    /// Per [`KEY_EVENTS`]: listed.
    pub key: [bool; KEY_EVENTS.len()],
}

impl PmuEvents {
    /// Counts one name of the `events` directory (`.` and `..` are not events).
    pub fn add(&mut self, name: &str) {
        if name.is_empty() || name == "." || name == ".." {
            return;
        }
        self.count += 1;
        if let Some(i) = KEY_EVENTS.iter().position(|k| *k == name) {
            self.key[i] = true;
        }
    }

    /// Fills `out` with the key events listed, in [`KEY_EVENTS`] order; returns how many.
    pub fn key_present<'a>(&self, out: &mut [&'a str; KEY_EVENTS.len()]) -> usize
    where
        'static: 'a,
    {
        let mut n = 0;
        for (k, have) in KEY_EVENTS.iter().zip(self.key) {
            if have {
                out[n] = k;
                n += 1;
            }
        }
        n
    }

    /// One line: `PMU NAME: N events; key events: a, b; missing: c`.
    pub fn write_line(&self, device: &str, w: &mut dyn Write) -> fmt::Result {
        write!(w, "PMU {device}: {} events; key events:", self.count)?;
        let mut missing = 0;
        for (k, have) in KEY_EVENTS.iter().zip(self.key) {
            if have {
                write!(w, " {k}")?;
            } else {
                missing += 1;
            }
        }
        if missing > 0 {
            w.write_str("; not listed:")?;
            for (k, have) in KEY_EVENTS.iter().zip(self.key) {
                if !have {
                    write!(w, " {k}")?;
                }
            }
        }
        writeln!(w)
    }
}

/// Whether a device under `/sys/bus/event_source/devices` is a CPU PMU (Linux's arm_pmu names
/// them `armv8_pmuv3[_N]`, or after the core: `armv8_cortex_a76`, `armv8_neoverse_n1`, ...;
/// Apple's are `apple_*_pmu`): the software, tracepoint and probe sources are not.
pub fn is_cpu_pmu(device: &str) -> bool {
    device.starts_with("armv8_")
        || device.starts_with("armv9_")
        || (device.starts_with("apple_") && device.ends_with("_pmu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A KVM answering `caps` (by capability) and API version 12; 0 for anything else.
    fn kvm(caps: &[(Cap, i64)]) -> impl FnMut(u64, u64) -> i64 + '_ {
        move |req, arg| match req {
            KVM_GET_API_VERSION => KVM_API_VERSION,
            KVM_CHECK_EXTENSION => caps.iter().find(|(c, _)| c.number() == arg).map_or(0, |(_, v)| *v),
            _ => -22,
        }
    }

    #[test]
    fn capability_numbers_are_kvm_h_s() {
        let n: Vec<(u64, &str)> = Cap::ALL.iter().map(|c| (c.number(), c.name())).collect();
        assert_eq!(
            n,
            [
                (9, "KVM_CAP_NR_VCPUS"),
                (66, "KVM_CAP_MAX_VCPUS"),
                (126, "KVM_CAP_ARM_PMU_V3"),
                (165, "KVM_CAP_ARM_VM_IPA_SIZE"),
                (170, "KVM_CAP_ARM_SVE"),
                (205, "KVM_CAP_ARM_MTE"),
                (240, "KVM_CAP_ARM_EL2"),
                (241, "KVM_CAP_ARM_EL2_E2H0"),
            ]
        );
        assert_eq!((KVM_GET_API_VERSION, KVM_CHECK_EXTENSION), (0xae00, 0xae03));
    }

    #[test]
    fn collect_asks_each_capability_by_its_number() {
        let mut asked = Vec::new();
        let raw = Raw::collect(|req, arg| {
            asked.push((req, arg));
            if req == KVM_GET_API_VERSION {
                12
            } else {
                arg as i64 * 10
            }
        });
        assert_eq!(asked[0], (KVM_GET_API_VERSION, 0));
        assert_eq!(asked.len(), 1 + Cap::ALL.len());
        for c in Cap::ALL {
            assert_eq!(raw.get(c), c.number() as i64 * 10, "{}", c.name());
        }
    }

    #[test]
    fn an_nv2_host_in_nested_mode() {
        // The KVM host model's answers: QEMU max under TCG, Linux 7.2, kvm-arm.mode=nested.
        let raw = Raw::collect(kvm(&[
            (Cap::El2, 1),
            (Cap::PmuV3, 1),
            (Cap::Sve, 1),
            (Cap::VmIpaSize, 52),
            (Cap::NrVcpus, 2),
            (Cap::MaxVcpus, 512),
        ]));
        let o = decode(&raw).unwrap();
        assert_eq!(o.el2, El2::E2hRes1);
        assert!(o.pmu && o.sve && !o.mte);
        assert_eq!((o.ipa_bits, o.vcpus_recommended, o.vcpus_max), (52, 2, 512));
        assert_eq!(o.refusal(Needs { el2: true, vcpus: 4, mte: false }), None);
        assert_eq!(o.refusal(Needs { el2: false, vcpus: 4, mte: true }), Some(Refusal::NoMte));
        let mut s = String::new();
        o.write_lines(&mut s).unwrap();
        assert!(s.contains("E2H RES1") && s.contains("must run with E2H = 1"), "{s}");
        assert!(s.contains("IPA: 52 bits") && s.contains("2 recommended, 512 at most"), "{s}");
    }

    #[test]
    fn a_host_without_nested_virtualisation_refuses_the_hypervisor_never_downgrades() {
        // A Pi 5 (Cortex-A76: no FEAT_NV2): KVM answers 0 for EL2 (and E2H0 means nothing then).
        let o = decode(&Raw::collect(kvm(&[(Cap::El2E2h0, 1), (Cap::PmuV3, 1), (Cap::NrVcpus, 4)]))).unwrap();
        assert_eq!(o.el2, El2::None);
        let r = o.refusal(Needs { el2: true, vcpus: 4, mte: false }).expect("refused");
        assert_eq!(r, Refusal::NoEl2);
        let msg = r.to_string();
        assert!(msg.starts_with("this host's KVM offers no EL2") && msg.contains("--no-hypervisor"), "{msg}");
        assert_eq!(o.refusal(Needs { el2: false, vcpus: 4, mte: false }), None, "the kernel alone runs");
        // A failed question is no offer.
        let o = decode(&Raw::collect(kvm(&[(Cap::El2, -22)]))).unwrap();
        assert_eq!(o.el2, El2::None);
        let both = decode(&Raw::collect(kvm(&[(Cap::El2, 1), (Cap::El2E2h0, 1)]))).unwrap();
        assert_eq!(both.el2, El2::E2h0Too);
        assert_eq!(both.el2.word(), "e2h0");
    }

    #[test]
    fn defaults_when_kvm_does_not_say_and_vcpu_limits() {
        let o = decode(&Raw::collect(kvm(&[]))).unwrap();
        assert_eq!((o.ipa_bits, o.vcpus_recommended, o.vcpus_max), (40, 4, 4));
        assert_eq!(o.refusal(Needs { el2: false, vcpus: 5, mte: false }), Some(Refusal::TooManyVcpus(5, 4)));
        assert_eq!(o.refusal(Needs { el2: false, vcpus: 4, mte: false }), None);
        let o = decode(&Raw::collect(kvm(&[(Cap::NrVcpus, 8)]))).unwrap();
        assert_eq!((o.vcpus_recommended, o.vcpus_max), (8, 8), "no MAX_VCPUS: the recommended number");
        assert!(Refusal::TooManyVcpus(9, 8).to_string().contains("at most 8 vCPUs"));
    }

    #[test]
    fn an_api_version_other_than_12_is_not_decoded() {
        let raw = Raw { api_version: 11, caps: [1; Cap::ALL.len()] };
        assert_eq!(decode(&raw), Err(Error::ApiVersion(11)));
        assert!(Error::ApiVersion(-13).to_string().contains("errno 13"));
    }

    #[test]
    fn pmu_events_count_names_and_find_the_key_ones() {
        let mut p = PmuEvents::default();
        for n in [".", "..", "cpu_cycles", "inst_retired", "l1d_tlb_refill", "br_mis_pred", ""] {
            p.add(n);
        }
        assert_eq!(p.count, 4);
        let mut have = [""; KEY_EVENTS.len()];
        let n = p.key_present(&mut have);
        assert_eq!(&have[..n], ["cpu_cycles", "inst_retired", "l1d_tlb_refill"]);
        let mut s = String::new();
        p.write_line("armv8_pmuv3_0", &mut s).unwrap();
        assert_eq!(
            s,
            "PMU armv8_pmuv3_0: 4 events; key events: cpu_cycles inst_retired l1d_tlb_refill; not listed: l1i_tlb_refill dtlb_walk itlb_walk\n"
        );
        assert!(is_cpu_pmu("armv8_pmuv3_0") && is_cpu_pmu("armv8_cortex_a76") && is_cpu_pmu("apple_avalanche_pmu"));
        assert!(!is_cpu_pmu("software") && !is_cpu_pmu("tracepoint") && !is_cpu_pmu("kprobe"));
    }

    #[test]
    fn the_record_reads_back() {
        let o = decode(&Raw::collect(kvm(&[(Cap::El2, 1), (Cap::PmuV3, 1), (Cap::MaxVcpus, 512)]))).unwrap();
        let mut p = PmuEvents::default();
        p.add("cpu_cycles");
        p.add("sw_incr");
        let line = format!("{}", o.record(Some(&p)));
        let r = abi::report::parse_line(&line).unwrap().unwrap();
        assert_eq!(r.kind, "kvm_probe");
        assert_eq!(r.str("el2"), Some("e2h-res1"));
        assert_eq!(r.u64("pmu_events"), Some(2));
        assert_eq!(r.u64("vcpus_max"), Some(512));
        assert_eq!(r.bool("pmu"), Some(true));
    }
}
