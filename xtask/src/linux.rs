//! Debian's arm64 Linux as a guest: the kernel (`linux-image-cloud-arm64` or
//! `linux-image-arm64`, whichever version the machine's apt sources offer; or that of the
//! machine's backports; or Debian's newest cloud kernel, [`Flavour`]) and a static busybox
//! fetched with `apt-get download` (`debian`), and an initramfs built here (`cpio`) whose
//! `/init` prints [`MARKER`] with what the guest sees (a `linux_guest` report record), runs what
//! the command line asks (`pgtlab_test=panic|stray|dirty|bench|dirtylog`), and powers off.
//!
//! Everything lands in `target/downloads/linux/` and is reused on the next run (never committed).

use crate::cpio::Archive;
use crate::provision::debian::{self, Apt};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// The line `/init` prints once user space runs.
pub const MARKER: &str = "pgtlab-linux: user space reached";
/// Kernel command line the Linux guest boots with unless told otherwise.
pub const DEFAULT_APPEND: &str = "console=ttyAMA0 panic=-1";

/// The Linux guest's command line on `m`: its console (the model's `linux.console`) and
/// `panic=-1`.
pub fn default_append(m: &crate::machine::Machine) -> String {
    format!("{} panic=-1", m.model().linux.console)
}

/// Which Debian kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// `linux-image-cloud-arm64`: virtual-machine drivers only, boots faster.
    Cloud,
    /// `linux-image-arm64`: the generic kernel.
    Generic,
    /// `linux-image-cloud-arm64` of `<codename>-backports` (Linux 6.12 on Debian 12): the
    /// kernel `cargo xtask bench NAME --peer linux` compares the project's kernel with.
    CloudBackports,
    /// The generic kernel of `<codename>-backports` (6.12 on Debian 12), from the same package
    /// as the boards' DTBs (`debian::file_from_kernel_package`): the board models need its
    /// drivers (i.MX and Cadence UARTs, the Pi 4's mini UART).
    Backports,
    /// Debian's newest arm64 cloud kernel (Linux 7.x from sid or trixie-backports), the one the
    /// KVM host model boots, found by the same rule (`provision::cloud_kernel`): the second
    /// peer of `cargo xtask bench NAME --peer linux-newest`.
    CloudNewest,
}

impl Flavour {
    /// From the `--guest` value: `linux` (cloud) or `linux-generic`.
    pub fn from_guest_arg(s: &str) -> Option<Flavour> {
        match s {
            "linux" | "linux-cloud" => Some(Flavour::Cloud),
            "linux-generic" => Some(Flavour::Generic),
            "linux-backports" => Some(Flavour::CloudBackports),
            "linux-newest" => Some(Flavour::CloudNewest),
            _ => None,
        }
    }

    fn meta_package(self) -> &'static str {
        match self {
            Flavour::Cloud | Flavour::CloudBackports | Flavour::CloudNewest => "linux-image-cloud-arm64",
            Flavour::Generic | Flavour::Backports => "linux-image-arm64",
        }
    }

    fn name(self) -> &'static str {
        match self {
            Flavour::Cloud => "cloud",
            Flavour::Generic => "generic",
            Flavour::Backports => "backports",
            Flavour::CloudBackports => "cloud-backports",
            Flavour::CloudNewest => "cloud-newest",
        }
    }

    /// Its private apt state: the machine's own suites, or their backports.
    fn apt(self) -> Result<Apt> {
        match self {
            Flavour::CloudBackports => Apt::backports(&linux_dir().join("apt-backports"), "arm64"),
            _ => Apt::machine_arm64(),
        }
    }
}

/// A Linux guest ready to boot.
#[derive(Debug, Clone)]
pub struct LinuxGuest {
    /// The kernel Image (Debian's `vmlinuz` is an uncompressed arm64 Image).
    pub kernel: PathBuf,
    /// The busybox initramfs (uncompressed newc cpio).
    pub initramfs: PathBuf,
    /// The Debian package the kernel came from.
    pub package: String,
}

fn linux_dir() -> PathBuf {
    crate::provision::debian::cache_dir().join("linux")
}

/// The kernel of `flavour`, fetched once.
fn kernel(flavour: Flavour) -> Result<(PathBuf, String)> {
    if flavour == Flavour::Backports {
        let image = debian::file_from_kernel_package("vmlinuz")?;
        let src = image.with_file_name("vmlinuz.source");
        let package = std::fs::read_to_string(&src).unwrap_or_default().trim().to_string();
        return Ok((image, package));
    }
    let dir = linux_dir().join(flavour.name());
    let image = dir.join("vmlinuz");
    let stamp = dir.join("package");
    if image.is_file() {
        if let Ok(p) = std::fs::read_to_string(&stamp) {
            return Ok((image, p.trim().to_string()));
        }
    }
    std::fs::create_dir_all(&dir)?;
    let package = if flavour == Flavour::CloudNewest {
        // The KVM host model's rule and apt states; the download stays in this directory.
        let shared = crate::provision::cloud_kernel::shared_dir();
        crate::provision::cloud_kernel::fetch_newest_image(&shared, &dir.join("debs"), &image)?.1
    } else {
        let deb = flavour.apt()?.fetch(flavour.meta_package(), true)?;
        // Where the package keeps the Image (`boot/` or, in newer packaging, `usr/lib/modules/`)
        // is the cloud kernels' one rule.
        crate::provision::cloud_kernel::extract_image(&deb, &image)?;
        let package = deb.file_stem().and_then(|n| n.to_str()).unwrap_or("?").to_string();
        let _ = std::fs::remove_file(&deb);
        package
    };
    std::fs::write(&stamp, &package)?;
    Ok((image, package))
}

/// Debian's static busybox, fetched once.
fn busybox(apt: &Apt) -> Result<PathBuf> {
    let bin = linux_dir().join("busybox");
    if bin.is_file() {
        return Ok(bin);
    }
    let deb = apt.fetch("busybox-static", false)?;
    debian::extract(&deb, "./bin/busybox", &bin)?;
    Ok(bin)
}

/// `/init`: a busybox shell script.
///
/// It reports what the guest sees, runs the step `pgtlab_test=` names (its status is `st`),
/// and powers off when the step succeeded, resets when not (alone, how the machine ends is the
/// run's verdict; under the hypervisor a reset is exit 6). With [`ALONE_WORD`](crate::launch::ALONE_WORD) on its command line (a run without the hypervisor, whose
/// own final line would end the run otherwise) it prints the run's final line
/// `@@exit CODE (meaning)` itself first: 0 when the step succeeded, 1 (guest failure) when not.
pub fn init_script() -> String {
    let ok = abi::exit::FinalLine(abi::exit::SUCCESS);
    let failed = abi::exit::FinalLine(abi::exit::GUEST_FAILURE);
    INIT_TEMPLATE.replace("@@EXIT_OK@@", &ok.to_string()).replace("@@EXIT_FAILED@@", &failed.to_string())
}

const INIT_TEMPLATE: &str = r#"#!/bin/busybox sh
# pgtlab's Linux guest: report what the guest sees, run the test the command line asks for
# (pgtlab_test=...), power off. Each busybox applet is called by name: no links needed.
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
$bb mount -t devtmpfs devtmpfs /dev
# No serial console (a board whose UART driver never probes, e.g. the ZCU102 model without PMU
# firmware: no console, or only the dummy VT tty0): write through the kernel's log, which its
# early console prints.
active=$($bb cat /sys/class/tty/console/active 2>/dev/null)
if ! { true >&1; } 2>/dev/null || [ -z "$active" ] || [ "$active" = tty0 ]; then
    exec >/dev/kmsg 2>&1
    # Our lines have the default level (warning): shown even after `quiet`.
    echo 7 > /proc/sys/kernel/printk
fi
read up idle < /proc/uptime
cpus=$($bb grep -c ^processor /proc/cpuinfo)
ram=$($bb grep ': System RAM' /proc/iomem | $bb cut -d' ' -f1 | $bb tr '\n' ' ')
ram=${ram% }
feat=$($bb grep -m1 ^Features /proc/cpuinfo | $bb cut -d: -f2)
feat=${feat# }
sve=$($bb cat /proc/sys/abi/sve_default_vector_length 2>/dev/null || echo 0)
# Interrupts the console's UART has taken so far (-1: no console UART): a handful when the
# driver and the device agree, hundreds of thousands when its interrupt is stuck high.
cirqs=-1
for c in $active; do
    [ -r /sys/class/tty/$c/irq ] || continue
    irq=$($bb cat /sys/class/tty/$c/irq)
    n=$($bb awk -v i="$irq:" '$1 == i { s = 0; for (k = 2; k <= NF && $k ~ /^[0-9]+$/; k++) s += $k; print s }' /proc/interrupts)
    [ -n "$n" ] && cirqs=$n
    break
done
echo "pgtlab-linux: user space reached after $up s: $cpus CPUs, RAM $ram, Linux $($bb uname -r)"
echo "@@report {\"kind\":\"linux_guest\",\"uptime_s\":$up,\"cpus\":$cpus,\"ram\":\"$ram\",\"kernel\":\"$($bb uname -r)\",\"sve_default_vl\":$sve,\"console_irqs\":$cirqs,\"features\":\"$feat\"}"
st=0
case "$pgtlab_test" in
panic)
    echo "pgtlab-linux: crashing the kernel on purpose (sysrq c)"
    echo c > /proc/sysrq-trigger
    ;;
stray)
    # The first byte above the guest's RAM: not RAM, not a device. Reading it must come back
    # as a bus error (SIGBUS) in this process, not stop the machine.
    last=${ram##* }
    addr=$((0x${last#*-} + 1))
    $bb devmem $addr 64
    st=$?
    echo "@@report {\"kind\":\"linux_stray\",\"addr\":$addr,\"status\":$st}"
    # A bus error is what this step expects.
    st=0
    ;;
dirty)
    # Locked pages must keep their physical address while the hypervisor watches them.
    echo 0 > /proc/sys/vm/compact_unevictable_allowed
    /bin/pgtlab-dirty $pgtlab_dirty_args
    st=$?
    echo "@@report {\"kind\":\"linux_dirty_exit\",\"status\":$st}"
    ;;
bench)
    # The EL0 benchmark (lib/el0bench), the peer of the project's kernel.
    /bin/pgtlab-bench $pgtlab_bench_args
    st=$?
    echo "@@report {\"kind\":\"linux_bench_exit\",\"status\":$st}"
    ;;
dirtylog)
    # KVM's dirty-log benchmark (this Linux at EL2 with KVM), the peer of bench split.
    /bin/pgtlab-dirtylog
    st=$?
    echo "@@report {\"kind\":\"linux_dirtylog_exit\",\"status\":$st}"
    ;;
esac
# Alone (no hypervisor to print it), the final line is ours: it names the step's verdict, and
# the power-off (success) or reset (failure) that follows is it.
if [ "$pgtlab_alone" = 1 ]; then
    if [ $st = 0 ]; then echo "@@EXIT_OK@@"; else echo "@@EXIT_FAILED@@"; fi
fi
if [ $st = 0 ]; then
    echo "pgtlab-linux: powering off"
    $bb poweroff -f
fi
echo "pgtlab-linux: the step failed (status $st): resetting"
$bb reboot -f
"#;

/// Builds the initramfs: busybox, `/init`, device nodes, and `extra` files (name, bytes).
pub fn initramfs(busybox: &[u8], extra: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    let mut a = Archive::new();
    for d in ["bin", "dev", "proc", "sys", "tmp"] {
        a.dir(d, 0o755)?;
    }
    a.char_dev("dev/console", 0o600, 5, 1)?;
    a.char_dev("dev/null", 0o666, 1, 3)?;
    a.file("bin/busybox", 0o755, busybox)?;
    a.symlink("bin/sh", "busybox")?;
    for (name, data) in extra {
        a.file(name, 0o755, data)?;
    }
    a.file("init", 0o755, init_script().as_bytes())?;
    Ok(a.finish())
}

/// Fetches (once) Debian's kernel of `flavour` and busybox, and writes the initramfs with
/// `extra` programs (e.g. `bin/pgtlab-dirty`).
pub fn prepare(flavour: Flavour, extra: &[(String, PathBuf)]) -> Result<LinuxGuest> {
    prepare_with(flavour, extra, &linux_dir().join("initramfs.cpio"))
}

/// [`prepare`] with the initramfs written to `initramfs` (guests of different programs, ready
/// at once).
pub fn prepare_with(flavour: Flavour, extra: &[(String, PathBuf)], initramfs: &std::path::Path) -> Result<LinuxGuest> {
    let apt = Apt::machine_arm64()?;
    let fetched = kernel(flavour).and_then(|k| Ok((k, busybox(&apt)?)));
    let ((kernel, package), busybox) = fetched.context(
        "cannot fetch Debian's arm64 kernel and busybox with apt-get download (the Linux guest needs this machine's \
         apt sources and the package registry)",
    )?;
    let bb = std::fs::read(&busybox)?;
    let extra_bytes: Vec<(String, Vec<u8>)> = extra
        .iter()
        .map(|(n, p)| Ok((n.to_string(), std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)))
        .collect::<Result<_>>()?;
    let refs: Vec<(&str, &[u8])> = extra_bytes.iter().map(|(n, b)| (n.as_str(), b.as_slice())).collect();
    let cpio = self::initramfs(&bb, &refs)?;
    if let Some(d) = initramfs.parent() {
        std::fs::create_dir_all(d)?;
    }
    crate::write_if_changed(initramfs, &cpio)?;
    Ok(LinuxGuest { kernel, initramfs: initramfs.to_path_buf(), package })
}

/// The apt states that may offer the sources of `flavour`'s kernel (`linux-source-X.Y`), in
/// the order to try: the state its kernel came from; for the newest kernel each suite of the
/// rule that found it (`provision::cloud_kernel`), opened only when reached.
pub fn source_apts(flavour: Flavour) -> Box<dyn Iterator<Item = Result<Apt>>> {
    match flavour {
        Flavour::CloudNewest => Box::new(crate::provision::cloud_kernel::SUITES.into_iter().map(|(suite, suites)| {
            crate::provision::cloud_kernel::apt(&crate::provision::cloud_kernel::shared_dir(), suite, suites)
        })),
        f => Box::new(std::iter::once_with(move || {
            let apt = f.apt()?;
            apt.ensure_lists()?;
            Ok(apt)
        })),
    }
}

/// Programs of ours the initramfs carries: `bin/pgtlab-dirty` and `bin/pgtlab-bench`
/// (linux-user), built now.
pub fn extra_programs() -> Result<Vec<(String, PathBuf)>> {
    let tc = crate::provision::toolchain::find()?;
    Ok(crate::build::linux_user(&tc)?.into_iter().map(|(n, p)| (format!("bin/{n}"), p)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initramfs_has_init_busybox_and_a_console() {
        let c = initramfs(b"BB", &[("bin/extra", b"X")]).unwrap();
        let e = crate::cpio::read(&c).unwrap();
        let get = |n: &str| e.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n}"));
        assert_eq!(get("init").data, init_script().as_bytes());
        assert_eq!(get("init").mode, crate::cpio::S_IFREG | 0o755);
        assert_eq!(get("bin/busybox").data, b"BB");
        assert_eq!(get("dev/console").rdev, (5, 1));
        assert_eq!(get("bin/extra").data, b"X");
        let init = init_script();
        assert!(init.contains(MARKER), "the marker the tests wait for is what /init prints");
        assert!(init.contains("echo \"@@exit 0 (success)\"") && init.contains("echo \"@@exit 1 (guest failure)\""));
        assert!(!init.contains("@@EXIT"), "every placeholder filled");
        let alone = crate::launch::ALONE_WORD.split_once('=').unwrap();
        assert!(init.contains(&format!("[ \"${}\" = {} ]", alone.0, alone.1)), "/init reads the alone word");
    }

    #[test]
    fn guest_names() {
        assert_eq!(Flavour::from_guest_arg("linux"), Some(Flavour::Cloud));
        assert_eq!(Flavour::from_guest_arg("linux-generic"), Some(Flavour::Generic));
        assert_eq!(Flavour::from_guest_arg("linux-backports"), Some(Flavour::CloudBackports));
        assert_eq!(Flavour::from_guest_arg("linux-newest"), Some(Flavour::CloudNewest));
        assert_eq!(Flavour::from_guest_arg("/some/Image"), None);
        assert_eq!(default_append(crate::machine::default()), format!("{DEFAULT_APPEND}"));
        assert!(default_append(crate::machine::find("imx8mp-evk").unwrap()).starts_with("console=ttymxc1"));
    }
}
