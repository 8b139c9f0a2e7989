//! `pgtlab-kvmprobe`: what this Linux's KVM offers a guest (`lib/kvmprobe` decodes it): opens
//! `/dev/kvm`, asks `KVM_GET_API_VERSION` and one `KVM_CHECK_EXTENSION` per capability, counts
//! the events of each CPU PMU under `/sys/bus/event_source/devices/*/events`, and prints the
//! offer (lines starting `kvm-probe: `, then a `kvm_probe` report record). The KVM host model's
//! `/init` runs it before the inner QEMU, with what the run needs: `need-el2` (the hypervisor
//! runs), `smp=N`, `mte`; a need KVM cannot meet ends it with the refusal
//! (`kvmprobe::status`).
#![cfg_attr(target_os = "none", no_std, no_main)]

/// The program (the target build only: its system calls are aarch64 `svc`s).
#[cfg(target_os = "none")]
mod on_linux {
    use core::fmt::Write;
    use kvmprobe::{decode, is_cpu_pmu, status, Needs, PmuEvents, Raw, LINE_PREFIX};
    use linux_user::sys::{self, Args, Line};
    use linux_user::{entry, say};

    entry!(main);

    /// Writes what it is given as lines, each behind [`LINE_PREFIX`].
    struct Prefixed(Line);

    impl Write for Prefixed {
        fn write_str(&mut self, s: &str) -> core::fmt::Result {
            let mut rest = s;
            while let Some((line, after)) = rest.split_once('\n') {
                self.0.write_str(line)?;
                let mut l = Line::new();
                l.write_str(LINE_PREFIX)?;
                core::mem::replace(&mut self.0, l).emit();
                rest = after;
            }
            self.0.write_str(rest)
        }
    }

    fn prefixed() -> Prefixed {
        let mut l = Line::new();
        let _ = l.write_str(LINE_PREFIX);
        Prefixed(l)
    }

    /// `/sys/bus/event_source/devices/<name>/events` with a NUL, in `buf`.
    fn events_dir<'a>(buf: &'a mut [u8; 256], name: &str) -> Option<&'a [u8]> {
        const DEVICES: &[u8] = b"/sys/bus/event_source/devices/";
        const EVENTS: &[u8] = b"/events\0";
        let n = DEVICES.len() + name.len() + EVENTS.len();
        if n > buf.len() {
            return None;
        }
        buf[..DEVICES.len()].copy_from_slice(DEVICES);
        buf[DEVICES.len()..DEVICES.len() + name.len()].copy_from_slice(name.as_bytes());
        buf[DEVICES.len() + name.len()..n].copy_from_slice(EVENTS);
        Some(&buf[..n])
    }

    fn main(args: &Args) -> i32 {
        let mut needs = Needs { el2: false, vcpus: 1, mte: false };
        for a in args.args() {
            match a {
                b"need-el2" => needs.el2 = true,
                b"mte" => needs.mte = true,
                _ => match a.strip_prefix(b"smp=").and_then(|v| core::str::from_utf8(v).ok()?.parse().ok()) {
                    Some(n) => needs.vcpus = n,
                    None => {
                        say!("{LINE_PREFIX}unknown argument {:?}: need-el2, mte, smp=N", core::str::from_utf8(a));
                        return 64;
                    }
                },
            }
        }
        let fd = match sys::open(b"/dev/kvm\0", sys::O_RDWR) {
            Ok(fd) => fd,
            Err(e) => {
                say!("{LINE_PREFIX}no KVM: opening /dev/kvm failed with errno {}", e.1);
                return status::NO_KVM;
            }
        };
        let raw = Raw::collect(|req, arg| match sys::ioctl(fd, req, arg) {
            Ok(v) => v as i64,
            Err(e) => -e.1,
        });
        sys::close(fd);
        let offer = match decode(&raw) {
            Ok(o) => o,
            Err(e) => {
                say!("{LINE_PREFIX}{e}");
                return status::UNKNOWN_KVM;
            }
        };
        let mut out = prefixed();
        let _ = offer.write_lines(&mut out);
        // Each CPU PMU's events; the record carries the first one's.
        let mut first: Option<PmuEvents> = None;
        let listed = sys::for_each_dir_entry(b"/sys/bus/event_source/devices\0", |dev| {
            if !is_cpu_pmu(dev) {
                return;
            }
            let mut buf = [0u8; 256];
            let Some(path) = events_dir(&mut buf, dev) else { return };
            let mut p = PmuEvents::default();
            match sys::for_each_dir_entry(path, |e| p.add(e)) {
                Ok(()) => {
                    let mut out = prefixed();
                    let _ = p.write_line(dev, &mut out);
                    first.get_or_insert(p);
                }
                Err(e) => say!("{LINE_PREFIX}PMU {dev}: its events directory cannot be read (errno {})", e.1),
            }
        });
        match (listed, first) {
            (Err(e), _) => say!("{LINE_PREFIX}no PMU events: /sys/bus/event_source/devices unreadable (errno {})", e.1),
            (Ok(()), None) => say!("{LINE_PREFIX}no CPU PMU under /sys/bus/event_source/devices"),
            _ => {}
        }
        say!("{}", offer.record(first.as_ref()));
        if let Some(r) = offer.refusal(needs) {
            say!("{LINE_PREFIX}refused: {r}");
            return status::REFUSED;
        }
        status::OFFERED
    }
}

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("pgtlab-kvmprobe runs on aarch64-unknown-none: the KVM host model's Linux runs it");
    std::process::exit(abi::exit::USAGE as i32);
}
