//! What this host's KVM offers (`--accel kvm`): `/dev/kvm` asked with `KVM_CHECK_EXTENSION`
//! and its PMUs' events read from sysfs, decoded by `lib/kvmprobe` (the KVM host model runs
//! the same decoding inside its Linux, `pgtlab-kvmprobe`). A run that needs EL2 on a KVM
//! without it is refused before QEMU starts ("run the kernel alone with --no-hypervisor"),
//! never run without the hypervisor (`crate::supervise::kvm`). docs/kvm.md says what each
//! answer means.

use anyhow::Result;

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
    v.push(format!("kvm host model (--accel kvm-model): {}", super::kvm_model::state()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

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
