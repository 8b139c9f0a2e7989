//! How QEMU executes the guest: TCG (QEMU's translator, on any host), KVM (the host's own
//! arm64 cores, on an arm64 Linux host with /dev/kvm), or the KVM host model (a nested Linux
//! with KVM inside QEMU TCG, to run the KVM path on a host that is not arm64). One table of
//! rows, like the machines.

use crate::error::Refused;

/// An accelerator.
#[derive(Debug, PartialEq, Eq)]
pub struct Accel {
    /// `--accel NAME`.
    pub name: &'static str,
    /// What it is.
    pub description: &'static str,
    /// QEMU's arguments for it (empty: QEMU's default, TCG).
    pub qemu_args: &'static [&'static str],
    /// The CPU model it forces (`None`: `--cpu` / the machine's).
    pub cpu: Option<&'static str>,
    /// Where QEMU runs.
    pub runs: Runs,
    /// It is QEMU's translator: `-icount`, TCG plugins (`--count-insns`) and `-singlestep`
    /// work (they are TCG's).
    pub tcg: bool,
}

/// Where QEMU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// On this host.
    Here,
    /// Inside the KVM host model (its QEMU with `-accel kvm`, in a nested Linux in QEMU TCG).
    KvmModel,
}

/// The table: TCG first (the default).
pub static ACCELS: &[Accel] = &[
    Accel {
        name: "tcg",
        description: "QEMU's translator on any host (instructions exact under --icount; no caches or TLB timing)",
        qemu_args: &[],
        cpu: None,
        runs: Runs::Here,
        tcg: true,
    },
    Accel {
        name: "kvm",
        description: "the host's arm64 cores through KVM (real caches, TLBs and PMU events); the hypervisor needs \
                      a KVM that offers EL2 (nested virtualisation)",
        qemu_args: &["-accel", "kvm"],
        cpu: Some("host"),
        runs: Runs::Here,
        tcg: false,
    },
    Accel {
        name: "kvm-model",
        description: "KVM inside the KVM host model (Debian's newest arm64 Linux with nested KVM in QEMU TCG): \
                      tests the KVM path on any host; slow, not for figures",
        qemu_args: &["-accel", "kvm"],
        cpu: Some("host"),
        runs: Runs::KvmModel,
        tcg: false,
    },
];

/// The default: TCG.
pub fn default() -> &'static Accel {
    &ACCELS[0]
}

/// The accelerator named `s`, or a usage error listing them.
pub fn find(s: &str) -> Result<&'static Accel, Refused> {
    ACCELS.iter().find(|a| a.name == s).ok_or_else(|| {
        Refused(format!("--accel {s}: one of {}", ACCELS.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")))
    })
}

impl Accel {
    /// Refuses TCG-only options under another accelerator.
    pub fn check(&self, icount: bool, plugin: bool, singlestep: bool) -> Result<(), Refused> {
        if self.tcg {
            return Ok(());
        }
        let what = [(icount, "--icount"), (plugin, "--count-insns"), (singlestep, "--singlestep")]
            .into_iter()
            .find_map(|(on, w)| on.then_some(w));
        match what {
            Some(w) => Err(Refused(format!(
                "{w} is QEMU TCG's (instruction counting and translation blocks): --accel {} runs on real cores; \
                 drop {w} or use --accel tcg",
                self.name
            ))),
            None => Ok(()),
        }
    }
}

impl std::fmt::Display for Accel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_checks() {
        assert_eq!(default().name, "tcg");
        assert!(find("kvm").unwrap().cpu == Some("host"));
        assert!(find("hvf").unwrap_err().0.contains("tcg, kvm, kvm-model"));
        assert!(find("tcg").unwrap().check(true, true, true).is_ok());
        let e = find("kvm").unwrap().check(true, false, false).unwrap_err().0;
        assert!(e.contains("--icount") && e.contains("--accel tcg"), "{e}");
        assert!(find("kvm-model").unwrap().check(false, true, false).unwrap_err().0.contains("--count-insns"));
        assert!(find("kvm").unwrap().check(false, false, false).is_ok());
    }
}
