//! `--accel kvm`: the project on an arm64 Linux host's KVM instead of QEMU's TCG, and the
//! same command line inside the KVM host model (`--accel kvm-model`, [`crate::kvm_model`]).
//!
//! On such a host QEMU runs with `-accel kvm -cpu host`: the kernel on the real cores (their
//! caches, TLBs and PMU), and the hypervisor at a virtual EL2 where the host's KVM offers one
//! (FEAT_NV2 cores, Linux 6.16 or newer with `kvm-arm.mode=nested`). The argument list is the
//! one [`crate::qemu::QemuConfig::args`] writes for TCG, turned by [`accel_kvm`]: `-cpu MODEL`
//! becomes `-cpu host` and `-accel kvm` follows the machine; `-nic none` (no network card: the
//! guests need none, and the virt board's default one needs a ROM file). What only TCG does is
//! refused with the reason (`-icount`, `-singlestep`, the instruction-counting plugin), as is a
//! board model (KVM runs `virt` only).
//!
//! Before the run, `/dev/kvm` is asked what it offers (`lib/kvmprobe` decodes it; the KVM host
//! model runs the same decoding inside its Linux, `pgtlab-kvmprobe`): a run that needs EL2 on a
//! KVM without it is refused ("run the kernel alone with --no-hypervisor"), never run without
//! the hypervisor.

use crate::qemu::Outcome;
use anyhow::Result;
use kvmprobe::Needs;
use std::time::Duration;

/// How QEMU runs the guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// QEMU's TCG on this machine (the default).
    Tcg,
    /// This arm64 Linux host's KVM (`-accel kvm -cpu host`).
    Kvm,
    /// The KVM host model: the `Kvm` command line inside Debian's arm64 Linux on TCG
    /// ([`crate::kvm_model`]).
    KvmModel,
}

impl Accel {
    /// From `--accel`: `tcg`, `kvm` or `kvm-model`.
    pub fn parse(s: &str) -> Result<Accel, String> {
        match s {
            "tcg" => Ok(Accel::Tcg),
            "kvm" => Ok(Accel::Kvm),
            "kvm-model" => Ok(Accel::KvmModel),
            _ => Err(format!(
                "--accel {s}: tcg (QEMU's TCG, the default), kvm (this arm64 host's KVM) or kvm-model (the KVM \
                 host model: an arm64 Linux with KVM on TCG)"
            )),
        }
    }
}

/// The value following `flag` in `args`.
pub fn arg_after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(String::as_str)
}

/// `args` (a TCG command line of [`crate::qemu::QemuConfig::args`]) for KVM: `-cpu host`,
/// `-accel kvm` after the machine, `-nic none`; what KVM cannot do is refused with the reason.
pub fn accel_kvm(args: &[String]) -> Result<Vec<String>, String> {
    let machine = arg_after(args, "-M").ok_or("the QEMU command line names no machine (-M)")?;
    if !(machine == "virt" || machine.starts_with("virt,")) {
        return Err(format!("-M {machine}: KVM runs QEMU's virt machine only (a board model needs TCG)"));
    }
    if arg_after(args, "-cpu").is_none() {
        return Err("the QEMU command line names no CPU model (-cpu) to replace with the host's".into());
    }
    let mut out = Vec::with_capacity(args.len() + 4);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-icount" => {
                return Err("--icount: KVM runs instructions on the cores, nothing counts them (TCG only)".into())
            }
            "-singlestep" => return Err("--singlestep: a TCG translation setting, nothing KVM has".into()),
            "-plugin" => {
                return Err("--count-insns: the instruction-counting plugin is a TCG plugin; under KVM use the PMU \
                            (cargo xtask perf)"
                    .into())
            }
            "-accel" | "-enable-kvm" => return Err(format!("{a}: the command line already chooses an accelerator")),
            s if s.starts_with("-semihosting") => return Err(format!("{s}: never on for any guest")),
            "-cpu" => {
                it.next();
                out.extend(["-cpu".to_string(), "host".to_string()]);
            }
            "-M" => {
                let m = it.next().cloned().unwrap_or_default();
                out.extend(["-M".to_string(), m, "-accel".to_string(), "kvm".to_string()]);
            }
            _ => out.push(a.clone()),
        }
    }
    if !out.iter().any(|a| a == "-nic" || a == "-net" || a == "-netdev") {
        out.extend(["-nic".to_string(), "none".to_string()]);
    }
    Ok(out)
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

/// What this host's `/dev/kvm` offers, asked now.
#[derive(Debug, Clone)]
pub struct HostKvm {
    /// The decoded offer.
    pub offer: kvmprobe::Offer,
    /// Each CPU PMU's events (device name, events).
    pub pmus: Vec<(String, kvmprobe::PmuEvents)>,
}

impl HostKvm {
    /// The report, one line each.
    pub fn lines(&self) -> Vec<String> {
        let mut s = String::new();
        let _ = self.offer.write_lines(&mut s);
        for (dev, p) in &self.pmus {
            let _ = p.write_line(dev, &mut s);
        }
        if self.pmus.is_empty() {
            s.push_str("no CPU PMU under /sys/bus/event_source/devices\n");
        }
        s.lines().map(String::from).collect()
    }
}

/// Asks this host's `/dev/kvm` (arm64 Linux only) and reads its PMUs' events from sysfs.
pub fn probe() -> Result<HostKvm> {
    let raw = host_ioctls()?;
    let offer = kvmprobe::decode(&raw).map_err(|e| anyhow::anyhow!("/dev/kvm: {e}"))?;
    Ok(HostKvm { offer, pmus: pmu_events(std::path::Path::new("/sys/bus/event_source/devices")) })
}

/// Each CPU PMU under `devices` (`/sys/bus/event_source/devices`) with its events.
pub fn pmu_events(devices: &std::path::Path) -> Vec<(String, kvmprobe::PmuEvents)> {
    let mut names: Vec<String> = std::fs::read_dir(devices)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| kvmprobe::is_cpu_pmu(n))
        .collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|n| {
            let mut p = kvmprobe::PmuEvents::default();
            for e in std::fs::read_dir(devices.join(&n).join("events")).ok()?.flatten() {
                p.add(&e.file_name().to_string_lossy());
            }
            Some((n, p))
        })
        .collect()
}

#[cfg(all(target_os = "linux", target_arch = "aarch64"))]
fn host_ioctls() -> Result<kvmprobe::Raw> {
    use anyhow::Context;
    use std::os::fd::AsRawFd;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .context("opening /dev/kvm (no KVM on this host, or this user may not use it: the `kvm` group)")?;
    let fd = f.as_raw_fd();
    Ok(kvmprobe::Raw::collect(|req, arg| {
        // SAFETY: KVM_GET_API_VERSION and KVM_CHECK_EXTENSION take an integer argument (no
        // pointer) on an open /dev/kvm descriptor and change nothing.
        let r = unsafe { libc::ioctl(fd, req as libc::c_ulong, arg as libc::c_ulong) };
        if r < 0 {
            -(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL) as i64)
        } else {
            r as i64
        }
    }))
}

#[cfg(not(all(target_os = "linux", target_arch = "aarch64")))]
fn host_ioctls() -> Result<kvmprobe::Raw> {
    anyhow::bail!(
        "this host is not arm64 Linux ({} {}): its KVM cannot run arm64 guests; --accel kvm-model runs the KVM \
         host model here instead",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// `cargo xtask doctor`'s lines about KVM: what this host's KVM offers, or why there is none,
/// and the KVM host model's state.
pub fn doctor_lines() -> Vec<String> {
    let mut v = Vec::new();
    match probe() {
        Ok(k) => {
            v.push("kvm (--accel kvm): /dev/kvm".to_string());
            v.extend(k.lines().into_iter().map(|l| format!("  {l}")));
        }
        Err(e) => v.push(format!("kvm (--accel kvm): not available: {e:#}")),
    }
    v.push(format!("kvm host model (--accel kvm-model): {}", crate::kvm_model::state()));
    v
}

/// Runs `tcg_args` (a TCG command line) under `accel` (`Kvm` or `KvmModel`): refused with the
/// reason when KVM cannot run it (the probe), else the run's outcome, its console lines
/// through `echo`.
pub fn run(
    accel: Accel,
    tcg_args: &[String],
    timeout: Duration,
    progress: Option<Duration>,
    echo: impl FnMut(&str),
) -> Result<Outcome> {
    let refuse = |why: String| anyhow::Error::new(crate::outcome::Refused(why));
    let args = accel_kvm(tcg_args).map_err(refuse)?;
    match accel {
        Accel::Tcg => Err(anyhow::anyhow!("kvm_host::run is for --accel kvm and kvm-model")),
        Accel::Kvm => {
            let k = probe()?;
            for l in k.lines() {
                eprintln!("xtask: kvm: {l}");
            }
            if let Some(r) = k.offer.refusal(needs(&args)) {
                return Err(refuse(r.to_string()));
            }
            let qemu = crate::system::qemu()?;
            eprintln!("xtask: {} {}", qemu.display(), args.join(" "));
            crate::qemu::run_args(&qemu, &args, timeout, progress, echo)
        }
        Accel::KvmModel => {
            let model = crate::kvm_model::provision()?;
            model.run(&args, timeout, progress, echo)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn the_tcg_command_line_becomes_kvms() {
        let tcg = v("-M virt,gic-version=3,virtualization=on -cpu max -smp 4 -m 1046M -nographic -no-reboot -kernel /t/h.img -initrd /t/k.img -append hyp.guest-mem=1024M");
        let kvm = accel_kvm(&tcg).unwrap();
        assert_eq!(
            kvm.join(" "),
            "-M virt,gic-version=3,virtualization=on -accel kvm -cpu host -smp 4 -m 1046M -nographic -no-reboot -kernel /t/h.img -initrd /t/k.img -append hyp.guest-mem=1024M -nic none"
        );
        assert_eq!(needs(&kvm), Needs { el2: true, vcpus: 4, mte: false });
        let alone = accel_kvm(&v("-M virt,gic-version=2,mte=on -cpu cortex-a76 -smp 2 -m 1024M -kernel /k")).unwrap();
        assert_eq!(arg_after(&alone, "-cpu"), Some("host"));
        assert_eq!(needs(&alone), Needs { el2: false, vcpus: 2, mte: true });
        assert_eq!(alone.iter().filter(|a| *a == "-nic").count(), 1);
        assert!(!needs(&v("-M virt,virtualization=off -smp 1")).el2, "virtualization=off is no EL2");
    }

    #[test]
    fn what_only_tcg_does_is_refused_with_the_reason() {
        let base = "-M virt,gic-version=3 -cpu max -smp 1 -m 1024M";
        for (extra, why) in [
            ("-icount shift=0", "--icount"),
            ("-singlestep", "--singlestep"),
            ("-plugin lib.so", "--count-insns"),
            ("-accel tcg", "already chooses"),
            ("-semihosting-config enable=on", "never on"),
        ] {
            let e = accel_kvm(&v(&format!("{base} {extra}"))).unwrap_err();
            assert!(e.contains(why), "{extra}: {e}");
        }
        let e = accel_kvm(&v("-M raspi4b -m 2048M -kernel /h")).unwrap_err();
        assert!(e.contains("virt machine only"), "{e}");
        assert!(accel_kvm(&v("-M virt -smp 1")).unwrap_err().contains("no CPU model"));
        assert!(accel_kvm(&v("-cpu max")).unwrap_err().contains("no machine"));
        assert_eq!(Accel::parse("kvm-model"), Ok(Accel::KvmModel));
        assert!(Accel::parse("hvf").unwrap_err().contains("kvm-model"));
    }

    #[test]
    fn pmu_events_are_read_per_cpu_pmu() {
        let d = tempfile::tempdir().unwrap();
        for (dev, events) in [("armv8_pmuv3_0", &["cpu_cycles", "inst_retired"][..]), ("software", &["x"][..])] {
            std::fs::create_dir_all(d.path().join(dev).join("events")).unwrap();
            for e in events {
                std::fs::write(d.path().join(dev).join("events").join(e), "event=0x11\n").unwrap();
            }
        }
        let p = pmu_events(d.path());
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!((p[0].0.as_str(), p[0].1.count), ("armv8_pmuv3_0", 2));
    }
}
