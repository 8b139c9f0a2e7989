//! The CPU models the machines run: QEMU's AArch64 models this project boots on (EL2 and EL1
//! in AArch64), refused with the list of usable ones otherwise.

use crate::error::Refused;

/// AArch64 CPU models of QEMU's `virt` board that run this project (EL2 and EL1 in AArch64),
/// with what sets them apart. `host` (KVM only) is not among them.
pub const CPUS: &[(&str, &str)] = &[
    ("max", "every feature QEMU emulates; FEAT_BBM level 2, allow-listed for BBML2"),
    ("cortex-a76", "the Raspberry Pi 5 core; no FEAT_BBM"),
    ("cortex-a72", "Raspberry Pi 4 core; no FEAT_BBM"),
    ("cortex-a57", "ARMv8.0; no FEAT_BBM"),
    ("cortex-a53", "ARMv8.0 in-order; no FEAT_BBM"),
    ("cortex-a35", "ARMv8.0 small core; no FEAT_BBM"),
    ("neoverse-n1", "ARMv8.2 server core; no FEAT_BBM"),
    ("a64fx", "Fujitsu A64FX, SVE; no FEAT_BBM"),
];

/// CPU models whose QEMU model advertises the GICv3 system registers whatever GIC the machine
/// has (`ID_AA64PFR0_EL1.GIC` = 1 is a fixed value of the model; for the others QEMU reports
/// the field only with a GICv3): with a GICv2 every access to those registers is undefined, as
/// an entry that follows the ID registers (Linux's `el2_setup.h`, this project's) makes one.
const GICV3_ONLY: &[&str] = &["a64fx"];

/// `Ok` unless QEMU's model of `cpu` cannot run with GIC version `gic` ([`GICV3_ONLY`]).
pub fn check_cpu_gic(cpu: &str, gic: u8) -> Result<(), Refused> {
    if gic == 2 && GICV3_ONLY.contains(&cpu) {
        return Err(Refused(format!(
            "--cpu {cpu} with --gic 2: QEMU's {cpu} model says it has the GICv3 system registers \
             (ID_AA64PFR0_EL1.GIC = 1) even beside a GICv2, where using them is an undefined \
             instruction; run it with --gic 3"
        )));
    }
    Ok(())
}

/// QEMU's ARM CPU models that have no AArch64 at all (QEMU 7.2's list): refused with their
/// own message rather than as unknown.
const AARCH32_ONLY: &[&str] = &[
    "arm1026",
    "arm1136",
    "arm1136-r2",
    "arm1176",
    "arm11mpcore",
    "arm926",
    "arm946",
    "cortex-a15",
    "cortex-a7",
    "cortex-a8",
    "cortex-a9",
    "cortex-m0",
    "cortex-m3",
    "cortex-m33",
    "cortex-m4",
    "cortex-m55",
    "cortex-m7",
    "cortex-r5",
    "cortex-r5f",
    "pxa250",
    "pxa255",
    "pxa260",
    "pxa261",
    "pxa262",
    "pxa270",
    "pxa270-a0",
    "pxa270-a1",
    "pxa270-b0",
    "pxa270-b1",
    "pxa270-c0",
    "pxa270-c5",
    "sa1100",
    "sa1110",
    "ti925t",
];

/// The usable CPU models, one per line, for messages.
pub fn cpu_list() -> String {
    CPUS.iter().map(|(n, d)| format!("  {n:<12} {d}")).collect::<Vec<_>>().join("\n")
}

/// `Ok` for a CPU model this project runs on; else a message with the usable ones.
pub fn check_cpu(cpu: &str) -> Result<(), Refused> {
    if CPUS.iter().any(|(n, _)| *n == cpu) {
        return Ok(());
    }
    let why = if AARCH32_ONLY.contains(&cpu) {
        format!("--cpu {cpu} is an AArch32-only CPU: the hypervisor and the kernel are AArch64 (EL2 and EL1)")
    } else if cpu == "host" {
        "--cpu host is KVM's: on an arm64 Linux host with /dev/kvm give --accel kvm (it implies --cpu host)".to_string()
    } else {
        format!("--cpu {cpu:?} is not a CPU model this project runs on")
    };
    Err(Refused(format!("{why}. Usable CPU models:\n{}", cpu_list())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_models_aarch32_only_ones_are_refused_with_the_usable_list() {
        for (c, _) in CPUS {
            assert_eq!(check_cpu(c), Ok(()));
        }
        let e = check_cpu("cortex-a15").unwrap_err().0;
        assert!(e.starts_with("--cpu cortex-a15 is an AArch32-only CPU"), "{e}");
        assert!(e.contains("cortex-a76") && e.contains("neoverse-n1") && e.contains("a64fx"), "{e}");
        assert!(check_cpu("foo").unwrap_err().0.contains("is not a CPU model this project runs on"));
        assert!(check_cpu("host").unwrap_err().0.contains("--accel kvm"));
        assert!(CPUS.iter().all(|(c, _)| !AARCH32_ONLY.contains(c)));
    }

    #[test]
    fn a64fx_runs_with_a_gicv3_only() {
        let e = check_cpu_gic("a64fx", 2).unwrap_err().0;
        assert!(e.contains("--gic 3") && e.contains("ID_AA64PFR0_EL1.GIC"), "{e}");
        assert_eq!(check_cpu_gic("a64fx", 3), Ok(()));
        for (c, _) in CPUS.iter().filter(|(c, _)| !GICV3_ONLY.contains(c)) {
            assert_eq!(check_cpu_gic(c, 2), Ok(()), "{c}");
        }
        assert!(GICV3_ONLY.iter().all(|c| CPUS.iter().any(|(n, _)| n == c)));
    }
}
