//! A run on KVM (`--accel kvm`, `--accel kvm-model`): what its command line asks of KVM, and
//! the host's refusal when its KVM cannot give it. The command line itself is the launch's
//! (`crate::launch::Launch::machine_args`: `-accel kvm -cpu host`, the machine `virt`); only
//! what KVM offers is decided here, before QEMU starts.
//!
//! KVM runs the kernel on the host's cores (their caches, TLBs and PMU) and the hypervisor at a
//! virtual EL2 where the host's KVM offers one (FEAT_NV2 cores, Linux 6.16 or newer with
//! `kvm-arm.mode=nested`). A run that needs EL2 on a KVM without it is refused with the reason
//! ("run the kernel alone with --no-hypervisor"), never run without the hypervisor.

use crate::error::Refused;
use anyhow::Result;
use kvmprobe::Needs;

/// The value following `flag` in `args`.
pub fn arg_after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// What the run asks of KVM, read from its command line: EL2 when the machine has
/// `virtualization=on` (the hypervisor runs), `-smp`, `mte=on`.
pub fn needs(args: &[String]) -> Needs {
    let machine = arg_after(args, "-M").unwrap_or("");
    let opt = |o: &str| machine.split(',').any(|w| w == o);
    Needs {
        el2: opt("virtualization=on"),
        vcpus: arg_after(args, "-smp").and_then(|s| s.split(',').next()?.parse().ok()).unwrap_or(1),
        mte: opt("mte=on"),
    }
}

/// What this host's `/dev/kvm` offers; a host without one (not arm64 Linux, no `/dev/kvm`, no
/// access to it) is a usage error ([`Refused`]) with the reason, asked before anything is built.
pub fn host() -> Result<crate::provision::kvm::HostKvm> {
    crate::provision::kvm::probe().map_err(|e| Refused(format!("--accel kvm: {e:#}")).into())
}

/// Asks this host's `/dev/kvm` whether it can run `args` (printing what it offers); a usage
/// error ([`Refused`]) with the reason when it cannot.
pub fn check_host(args: &[String]) -> Result<()> {
    let k = host()?;
    for l in k.lines() {
        eprintln!("xtask: kvm: {l}");
    }
    if let Some(r) = k.offer.refusal(needs(args)) {
        return Err(Refused(r.to_string()).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn what_a_run_needs_is_read_from_its_command_line() {
        let hyp = v("-M virt,gic-version=3,virtualization=on -accel kvm -cpu host -smp 4 -m 1046M");
        assert_eq!(needs(&hyp), Needs { el2: true, vcpus: 4, mte: false });
        let alone = v("-M virt,gic-version=2,mte=on -accel kvm -cpu host -smp 2,sockets=1 -m 1024M");
        assert_eq!(needs(&alone), Needs { el2: false, vcpus: 2, mte: true });
        assert!(!needs(&v("-M virt,virtualization=off -smp 1")).el2, "virtualization=off is no EL2");
        assert_eq!(needs(&v("-M virt")).vcpus, 1, "QEMU's default is one CPU");
        assert_eq!(arg_after(&hyp, "-m"), Some("1046M"));
        assert_eq!(arg_after(&hyp, "-kernel"), None);
    }
}
