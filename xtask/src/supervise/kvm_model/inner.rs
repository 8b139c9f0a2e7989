//! The inner run: its QEMU command line with the files it names carried into the model's
//! initramfs ([`carry`]), the model's `/init` ([`init_script`]) and the per-run part of the
//! initramfs ([`run_part`]).

use crate::cpio::Archive;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// The options whose value is a file the inner QEMU reads.
const FILE_OPTIONS: [&str; 3] = ["-kernel", "-initrd", "-dtb"];
/// Where the carried files are in the model.
pub const IMAGES_DIR: &str = "images";
/// The inner QEMU's arguments in the model, one per line.
pub const ARGS_FILE: &str = "inner/args";
/// The probe in the model.
pub const PROBE_FILE: &str = "inner/pgtlab-kvmprobe";

/// An inner command line ready for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    /// The arguments, files named by their place in the model.
    pub args: Vec<String>,
    /// Each file to carry: (on this machine, in the model's initramfs without the leading `/`).
    pub files: Vec<(PathBuf, String)>,
}

/// A file name made of `[A-Za-z0-9._-]` only.
fn plain_name(p: &Path) -> String {
    let n = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    n.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

/// `kvm_args` (a KVM command line, `crate::launch::Launch::resolve`'s under `--accel kvm`) for the model: each file of
/// `-kernel`, `-initrd` and `-dtb` carried to `/images/N-NAME`; what cannot run inside the
/// model is refused with the reason (a gdb stub, any other argument naming a file of this
/// machine, an argument the line-per-argument file cannot hold).
pub fn carry(kvm_args: &[String]) -> Result<Carried, String> {
    let mut out = Carried { args: Vec::with_capacity(kvm_args.len()), files: Vec::new() };
    let mut it = kvm_args.iter();
    while let Some(a) = it.next() {
        if a.contains('\n') {
            return Err(format!("the argument {a:?} holds a newline"));
        }
        if a == "-gdb" || a == "-s" {
            return Err("--gdb: the inner QEMU's gdb stub would listen inside the KVM host model".into());
        }
        out.args.push(a.clone());
        if FILE_OPTIONS.contains(&a.as_str()) {
            let v = it.next().ok_or_else(|| format!("{a} without its file"))?;
            let src = PathBuf::from(v);
            let dst = format!("{IMAGES_DIR}/{}-{}", out.files.len(), plain_name(&src));
            out.args.push(format!("/{dst}"));
            out.files.push((src, dst));
        } else if a == "-append" {
            let v = it.next().ok_or("-append without its command line")?;
            if v.contains('\n') {
                return Err("the guest's command line holds a newline".into());
            }
            out.args.push(v.clone());
        } else if a.starts_with('/') || a.contains("=/") || a.contains(":/") {
            return Err(format!("{a}: names a file of this machine, which the KVM host model does not carry"));
        }
    }
    Ok(out)
}

/// The model's `/init`: busybox sh. It mounts what it needs, says what the model's Linux and
/// its KVM are, asks the probe whether KVM can run the inner command line (the run's needs
/// come on the kernel command line: `kvm_model_needs=need-el2,smp=4`), runs the inner QEMU
/// with its console on `/dev/hvc0` and its stderr relayed there behind the stderr tag, prints
/// the end marker with its status, and powers the model off. Markers and relayed lines carry
/// `kvm_model_token` (the kernel command line); see `judge`.
pub fn init_script() -> String {
    use kvmprobe::status;
    INIT_TEMPLATE
        .replace("@@ARGS@@", &format!("/{ARGS_FILE}"))
        .replace("@@PROBE@@", &format!("/{PROBE_FILE}"))
        .replace("@@QEMU@@", &format!("/{}", super::provision::QEMU_IN_INITRAMFS))
        .replace("@@NO_KVM@@", &status::NO_KVM.to_string())
        .replace("@@REFUSED@@", &status::REFUSED.to_string())
        .replace("@@OFFERED@@", &status::OFFERED.to_string())
}

const INIT_TEMPLATE: &str = r#"#!/bin/busybox sh
# The KVM host model's /init (xtask/src/kvm_model): an arm64 Linux with KVM runs the project's
# QEMU command line with -accel kvm -cpu host, its console on /dev/hvc0, and powers off.
bb=/bin/busybox
$bb mount -t proc proc /proc
$bb mount -t sysfs sysfs /sys
$bb mount -t devtmpfs devtmpfs /dev
$bb mkdir -p /tmp
inner=/dev/hvc0
tag="[$kvm_model_token]"
say() { echo "kvm-model: $*"; }
mark() { echo "kvm-model: $tag $*" > $inner; }
off() { $bb sync; $bb poweroff -f; }
read up idle < /proc/uptime
mem=$($bb awk '/^MemTotal/ { print int($2 / 1024) }' /proc/meminfo)
say "Linux $($bb uname -r) up after $up s: $($bb nproc) CPUs, $mem MiB"
$bb dmesg | $bb grep -E 'kvm \[[0-9]+\]|CPU: All CPU' | $bb sed 's/^/kvm-model: dmesg: /'
if [ ! -c $inner ]; then
    say "no $inner (virtio console): the inner run has nowhere to print"
    off
fi
# The probe opens /dev/kvm (no KVM: NO_KVM) and says whether KVM can run what the run needs.
@@PROBE@@ $(echo "$kvm_model_needs" | $bb tr , ' ') > /tmp/probe 2>&1
st=$?
$bb cat /tmp/probe
case $st in
@@OFFERED@@) ;;
@@REFUSED@@)
    mark "refused $($bb sed -n 's/^kvm-probe: refused: //p' /tmp/probe)"
    off ;;
@@NO_KVM@@)
    mark "nokvm $($bb tail -n 1 /tmp/probe | $bb sed 's/^kvm-probe: //') (KVM did not initialise in the model's Linux)"
    off ;;
*)
    mark "probe-failed status=$st: $($bb tail -n 1 /tmp/probe)"
    off ;;
esac
set --
while IFS= read -r a; do set -- "$@" "$a"; done < @@ARGS@@
$bb mkfifo /tmp/qerr /tmp/qmp.in /tmp/qmp.out
(while IFS= read -r l; do echo "$tag! $l"; done < /tmp/qerr > $inner) &
relay=$!
# The inner machine's QMP events (how it ended: a guest alone is judged by it), relayed behind
# "$tag@". A monitor drops events until its client has left capability negotiation, so the
# machine starts stopped (-S) and the same input resumes it.
(while IFS= read -r l; do echo "$tag@ $l"; done < /tmp/qmp.out > $inner) &
events=$!
(echo '{"execute": "qmp_capabilities"}'; echo '{"execute": "cont"}'; exec $bb sleep 2147483647) > /tmp/qmp.in &
feed=$!
say "inner QEMU: $*"
# From here on the model's kernel prints only its emergencies (its console is not the run's).
$bb dmesg -n 1
mark "start"
read t0 idle < /proc/uptime
@@QEMU@@ "$@" -S -chardev pipe,id=events,path=/tmp/qmp -mon chardev=events,mode=control < /dev/null > $inner 2> /tmp/qerr
st=$?
read t1 idle < /proc/uptime
kill $feed 2> /dev/null
# A QEMU that never opened its pipes leaves the relay waiting to open one: a moment's writer
# (opening read-write never waits) lets it open and see the end.
: 3<> /tmp/qmp.out
wait $relay $events
secs=$($bb awk "BEGIN { print $t1 - $t0 }")
say "the inner QEMU exited with status $st after $secs s"
mark "end status=$st secs=$secs"
off
"#;

/// The per-run part of the initramfs: `/init`, the probe, the inner arguments and the carried
/// files (a newc archive the kernel unpacks after the base one).
pub fn run_part(carried: &Carried, probe: &[u8]) -> Result<Vec<u8>> {
    let mut a = Archive::new();
    a.dir("inner", 0o755)?;
    a.dir(IMAGES_DIR, 0o755)?;
    a.file("init", 0o755, init_script().as_bytes())?;
    a.file(PROBE_FILE, 0o755, probe)?;
    let mut args = carried.args.join("\n");
    args.push('\n');
    a.file(ARGS_FILE, 0o644, args.as_bytes())?;
    for (src, dst) in &carried.files {
        let data = std::fs::read(src).map_err(|e| anyhow::anyhow!("reading {}: {e}", src.display()))?;
        a.file(dst, 0o644, &data)?;
    }
    Ok(a.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn files_are_carried_and_renamed_and_the_rest_kept() {
        let kvm = v("-M virt,gic-version=3,virtualization=on -accel kvm -cpu host -smp 2 -m 1046M -nographic -no-reboot -kernel /w/target/images/hypervisor.img -initrd /w/target/guest/bundle-0a1b.img -append x -nic none");
        let mut kvm = kvm;
        let i = kvm.iter().position(|a| a == "x").unwrap();
        kvm[i] = "hyp.guest-mem=1024M test=pmu,irq".into();
        let c = carry(&kvm).unwrap();
        assert_eq!(
            c.args.join(" "),
            "-M virt,gic-version=3,virtualization=on -accel kvm -cpu host -smp 2 -m 1046M -nographic -no-reboot -kernel /images/0-hypervisor.img -initrd /images/1-bundle-0a1b.img -append hyp.guest-mem=1024M test=pmu,irq -nic none"
        );
        assert_eq!(
            c.files,
            [
                (PathBuf::from("/w/target/images/hypervisor.img"), "images/0-hypervisor.img".to_string()),
                (PathBuf::from("/w/target/guest/bundle-0a1b.img"), "images/1-bundle-0a1b.img".to_string()),
            ]
        );
        // The same file twice is two carried files, never one name for two.
        let twice = carry(&v("-kernel /a/k.img -initrd /b/k.img")).unwrap();
        assert_ne!(twice.files[0].1, twice.files[1].1);
        assert_eq!(plain_name(Path::new("/x/a b;c.img")), "a_b_c.img");
    }

    #[test]
    fn what_cannot_run_in_the_model_is_refused() {
        assert!(carry(&v("-kernel /k -gdb tcp:127.0.0.1:1234 -S")).unwrap_err().contains("--gdb"));
        assert!(carry(&v("-kernel /k -plugin /lib.so,outfile=/x")).unwrap_err().contains("does not carry"));
        assert!(carry(&v("-kernel /k -serial file:/tmp/x")).unwrap_err().contains("does not carry"));
        assert!(carry(&["-append".into(), "a\nb".into()]).unwrap_err().contains("newline"));
        assert!(carry(&v("-kernel")).unwrap_err().contains("without its file"));
    }

    #[test]
    fn the_init_script_has_every_placeholder_filled_and_the_markers_judge_reads() {
        let s = init_script();
        assert!(!s.contains("@@"), "every placeholder filled");
        assert!(s.starts_with("#!/bin/busybox sh\n"));
        let tag = super::super::judge::Tag::new("TOKEN");
        // mark() prints "kvm-model: [$kvm_model_token] WORD ...": the judge's marker prefix.
        assert!(
            s.contains("mark() { echo \"kvm-model: $tag $*\" > $inner; }") && s.contains("tag=\"[$kvm_model_token]\"")
        );
        assert_eq!(tag.marker(), "kvm-model: [TOKEN] ");
        assert!(s.contains("echo \"$tag! $l\"") && tag.stderr() == "[TOKEN]! ");
        for word in [
            "mark \"start\"",
            "mark \"end status=$st secs=$secs\"",
            "mark \"refused ",
            "mark \"nokvm ",
            "mark \"probe-failed ",
        ] {
            assert!(s.contains(word), "{word}");
        }
        let end = "kvm-model: [TOKEN] end status=0 secs=8.1";
        assert_eq!(tag.parse(end), Some(super::super::judge::Marker::End { status: 0, secs: Some(8.1) }));
        assert!(s.contains(&format!("case $st in\n{})", kvmprobe::status::OFFERED)));
        assert!(s.contains(&format!("\n{})\n    mark \"refused", kvmprobe::status::REFUSED)));
        assert!(s.contains("/bin/qemu-system-aarch64 \"$@\" -S -chardev pipe,id=events,path=/tmp/qmp -mon chardev=events,mode=control < /dev/null > $inner 2> /tmp/qerr"));
        // Events are relayed behind the tag the judge reads, and the machine resumed once they flow.
        assert!(s.contains("echo \"$tag@ $l\"") && tag.events() == "[TOKEN]@ ");
        assert!(s.contains("{\"execute\": \"qmp_capabilities\"}'; echo '{\"execute\": \"cont\"}'"));
    }

    #[test]
    fn the_run_part_holds_init_probe_args_and_files() {
        let d = tempfile::tempdir().unwrap();
        let k = d.path().join("kernel.img");
        std::fs::write(&k, b"IMAGE").unwrap();
        let c = carry(&["-kernel".into(), k.display().to_string(), "-append".into(), "a b".into()]).unwrap();
        let e = crate::cpio::read(&run_part(&c, b"PROBE").unwrap()).unwrap();
        let get = |n: &str| e.iter().find(|x| x.name == n).unwrap_or_else(|| panic!("no {n}")).data.clone();
        assert_eq!(get("images/0-kernel.img"), b"IMAGE");
        assert_eq!(get(PROBE_FILE), b"PROBE");
        assert_eq!(get(ARGS_FILE), b"-kernel\n/images/0-kernel.img\n-append\na b\n");
        assert_eq!(get("init"), init_script().as_bytes());
    }
}
