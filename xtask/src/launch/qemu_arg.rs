//! `--qemu-arg "OPTION VALUE"`: a device or setting a test suite needs (kvm-unit-tests'
//! `pci-test` needs `-device pci-testdev`), passed to QEMU after the xtask's own arguments.
//!
//! Only what cannot give a guest a path to the host passes: devices (but none wired to a host
//! character device, network or file system, and no `loader` writing files into memory behind
//! the hypervisor), `-global`, drives, firmware and any file a device or global names inside the
//! workspace's `target/`, and `null` chardevs. Semihosting, monitors, serial ports (the console
//! is the xtask's), sockets, networks, shared folders, trace and log files are refused, and so
//! is what the xtask sets itself (the machine, CPU, RAM, kernel, DTB, command line): those have
//! their own flags.

use crate::error::Refused;
use std::path::{Component, Path};

/// Options `--qemu-arg` passes, and what their value may be.
const ALLOWED: &[&str] = &["-device", "-global", "-drive", "-bios", "-pflash", "-chardev"];

/// Properties of a `-device` that connect it to something on the host.
const HOST_PROPS: &[&str] = &["chardev", "netdev", "fsdev", "socket", "path", "vhostfd", "fd"];

/// Devices that write files into the machine's memory at start, behind the hypervisor's back
/// (anywhere, its own image included): the guest comes through `--guest` / `--initrd`.
const LOADERS: &[&str] = &["loader", "guest-loader"];

/// Whether a `-device` / `-global` property value names a file QEMU would open: a property
/// that takes one (`file`, `romfile`, `kernel`, ...), or any value that reads as a path.
fn names_a_file(key: &str, value: &str) -> bool {
    const FILE_PROPS: &[&str] = &["file", "romfile", "kernel", "initrd", "dtb", "bios", "firmware", "filename"];
    !value.is_empty() && (FILE_PROPS.contains(&key) || value.contains('/') || value.starts_with('~'))
}

/// One `--qemu-arg` value as QEMU's argument list (an option and its value), or why not.
pub fn parse(spec: &str) -> Result<Vec<String>, Refused> {
    let spec = spec.trim();
    let (opt, value) = spec.split_once(char::is_whitespace).map_or((spec, ""), |(o, v)| (o, v.trim()));
    let refuse = |why: &str| Err(Refused(format!("--qemu-arg {spec:?}: {why}")));
    if !opt.starts_with('-') {
        return refuse("give an option and its value, e.g. --qemu-arg \"-device pci-testdev\"");
    }
    let opt = if opt.starts_with("--") { &opt[1..] } else { opt };
    if opt.contains("semihosting") {
        return refuse("semihosting would give the guest the host's files and shell: never on");
    }
    if !ALLOWED.contains(&opt) {
        return refuse(&format!(
            "{opt} is not passed on: it would give the guest a path to the host or it is the xtask's to set (its \
             own flags: --board, --cpu, --smp, --mem, --gdb, --guest, --bootargs ...); --qemu-arg takes {}",
            ALLOWED.join(", ")
        ));
    }
    if value.is_empty() {
        return refuse(&format!("{opt} needs a value"));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return refuse(&format!("the value has a control character ({c:?})"));
    }
    match opt {
        "-device" | "-global" => {
            // `-device DRIVER,k=v,...`; `-global DRIVER.PROP=VALUE`.
            let (driver, pairs): (&str, Vec<(&str, &str)>) = if opt == "-device" {
                (value.split(',').next().unwrap_or(""), props(value).collect())
            } else {
                let (lhs, v) = value.split_once('=').unwrap_or((value, ""));
                let (d, k) = lhs.split_once('.').unwrap_or(("", lhs));
                (d, vec![(k, v)])
            };
            if LOADERS.contains(&driver) {
                return refuse(&format!(
                    "{driver} writes files into the machine's memory behind the hypervisor: give the guest with \
                     --guest (and --initrd)"
                ));
            }
            if let Some(p) = pairs.iter().find(|(k, _)| HOST_PROPS.contains(k)) {
                return refuse(&format!("{}= wires the device to the host", p.0));
            }
            if driver.contains("vhost") || driver.contains("9p") {
                return refuse("a vhost or 9p device shares the host's resources with the guest");
            }
            for (k, v) in pairs.iter().filter(|(k, v)| names_a_file(k, v)) {
                if let Err(why) = inside_target(v) {
                    return refuse(&format!("{k}={v}: {why}"));
                }
            }
        }
        "-chardev" => {
            let backend = value.split([',', ':']).next().unwrap_or("");
            if backend != "null" {
                return refuse("a chardev other than null would connect the guest to the host");
            }
        }
        "-drive" => match props(value).find(|(k, _)| *k == "file") {
            Some((_, f)) => {
                if let Err(why) = inside_target(f) {
                    return refuse(&why);
                }
            }
            None if value.contains("if=none") => {}
            None => return refuse("a drive needs file=PATH (inside target/) or if=none"),
        },
        _ => {
            if let Err(why) = inside_target(value) {
                return refuse(&why);
            }
        }
    }
    Ok(vec![opt.to_string(), value.to_string()])
}

/// `key=value` pairs of a QEMU option value (the first, a bare name, left out).
fn props(value: &str) -> impl Iterator<Item = (&str, &str)> {
    value.split(',').filter_map(|p| p.split_once('='))
}

/// `Ok` for a regular file inside the workspace's `target/` (no `..`).
fn inside_target(path: &str) -> Result<(), String> {
    let p = Path::new(path);
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(format!("{path}: no `..` in a path"));
    }
    let target = crate::workspace_root().join("target");
    let abs = if p.is_absolute() { p.to_path_buf() } else { crate::workspace_root().join(p) };
    if !abs.starts_with(&target) {
        return Err(format!("{path}: files QEMU opens for the guest live inside {}", target.display()));
    }
    crate::error::regular_file("the file", &abs).map_err(|r| r.0)
}

/// `Ok` for one option of [`Launch::qemu_args`](super::Launch::qemu_args) (flattened pairs
/// from [`parse`]): checked again where a spec is built by hand.
pub fn check(arg: &str) -> Result<(), Refused> {
    if arg.contains("semihosting") {
        return Err(Refused(format!("{arg}: semihosting would give the guest the host's files and shell")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_pass_and_paths_to_the_host_do_not() {
        assert_eq!(parse("-device pci-testdev").unwrap(), ["-device", "pci-testdev"]);
        assert_eq!(parse("--device virtio-rng-pci").unwrap(), ["-device", "virtio-rng-pci"]);
        assert_eq!(parse("-chardev null,id=n").unwrap(), ["-chardev", "null,id=n"]);
        // The console is the xtask's: a -serial of the user's would take its place.
        assert!(parse("-serial null").unwrap_err().0.contains("not passed on"));
        let e = |s: &str| parse(s).unwrap_err().0;
        assert!(e("-semihosting").contains("never on"));
        assert!(e("-semihosting-config enable=on,target=native").contains("never on"));
        assert!(e("-monitor stdio").contains("not passed on"));
        assert!(e("-qmp unix:/tmp/q.sock,server").contains("not passed on"));
        assert!(e("-serial file:/tmp/x").contains("not passed on"));
        assert!(e("-chardev socket,id=c,path=/tmp/s").contains("connect the guest"));
        assert!(e("-device virtio-serial-device,chardev=c").contains("chardev="));
        assert!(e("-device virtio-net-device,netdev=n").contains("netdev="));
        assert!(e("-netdev user,id=n").contains("not passed on"));
        assert!(e("-nic user").contains("not passed on"));
        assert!(e("-device vhost-user-fs-device,tag=x").contains("vhost"));
        assert!(e("-virtfs local,path=/,mount_tag=h").contains("not passed on"));
        assert!(e("-m 4G").contains("the xtask's to set"));
        assert!(e("-kernel x").contains("not passed on"));
        assert!(e("-D /tmp/log").contains("not passed on"));
        assert!(e("-drive file=/etc/passwd,format=raw").contains("inside"));
        assert!(e("-drive file=target/../../etc/passwd,format=raw").contains(".."));
        assert!(e("-bios /usr/share/x.fd").contains("inside"));
        assert!(e("-device").contains("needs a value"));
        assert!(e("device pci-testdev").contains("give an option"));
        assert!(e("-device pci-testdev\n-monitor stdio").contains("control character"));
        // Files a device or a global would open: inside target/ only; loaders never.
        assert!(e("-device loader,file=/etc/passwd,addr=0x40000000").contains("behind the hypervisor"));
        assert!(e("-device loader,addr=0x40080000,data=0,data-len=4").contains("behind the hypervisor"));
        assert!(e("-device guest-loader,kernel=/boot/vmlinuz,addr=0x48000000").contains("behind the hypervisor"));
        assert!(e("-global loader.file=/etc/passwd").contains("behind the hypervisor"));
        assert!(e("-device virtio-net-pci,romfile=/etc/hostname").contains("romfile=/etc/hostname"));
        assert!(e("-global virtio-net-pci.romfile=/etc/hostname").contains("inside"));
        assert!(e("-device pci-testdev,x=../../etc/passwd").contains(".."));
        assert_eq!(parse("-device virtio-net-pci,romfile=").unwrap(), ["-device", "virtio-net-pci,romfile="]);
        assert_eq!(
            parse("-global virtio-mmio.force-legacy=false").unwrap(),
            ["-global", "virtio-mmio.force-legacy=false"]
        );
    }
}
