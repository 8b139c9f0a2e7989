//! The argument lists a launch gives QEMU.

use super::*;
use crate::machine::{find, GIB, MIB};

/// Two Image files with this project's headers (a 4.8 MiB hypervisor, a 5.6 MiB kernel),
/// written once (a guest bundle's name depends on its files' modification times).
fn images() -> Images {
    static DIR: std::sync::OnceLock<(tempfile::TempDir, Images)> = std::sync::OnceLock::new();
    let (_, images) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let image = |name: &str, image_size: u64| {
            let mut f = vec![0u8; 4096];
            f[16..24].copy_from_slice(&image_size.to_le_bytes());
            f[0x38..0x3c].copy_from_slice(b"ARM\x64");
            let p = dir.path().join(name);
            std::fs::write(&p, f).unwrap();
            p
        };
        std::fs::write(dir.path().join("rootfs.cpio"), [7u8; 1000]).unwrap();
        let images = Images {
            hypervisor: image("h.img", 0x4d_6000),
            kernel: image("k.img", 0x5a_7000),
            hypervisor_elf: "h".into(),
            kernel_elf: "k".into(),
        };
        (dir, images)
    });
    images.clone()
}

fn name(a: &[String], flag: &str) -> Option<String> {
    after(a, flag).map(|p| Path::new(p).file_name().unwrap().to_string_lossy().into_owned())
}

fn after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().position(|a| a == flag).map(|i| args[i + 1].as_str())
}

#[test]
fn hypervisor_boot_passes_the_kernel_as_initrd_at_el2() {
    let a = Launch::default().args(&images()).unwrap();
    assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,virtualization=on"));
    assert_eq!(name(&a, "-kernel").as_deref(), Some("h.img"));
    assert_eq!(name(&a, "-initrd").as_deref(), Some("k.img"));
    assert_eq!(after(&a, "-cpu"), Some("max"));
    assert_eq!(after(&a, "-smp"), Some("4"));
    // 1 GiB for the guest, 22 MiB for the hypervisor's region (image + 16 MiB of frames).
    assert_eq!(after(&a, "-m"), Some("1046M"));
    let append = after(&a, "-append").unwrap();
    assert!(append.starts_with("hyp.guest-mem=1024M hyp.key=0x"), "{append}");
    assert_eq!(after(&a, "-semihosting-config"), None, "no guest gets the host's files and shell");
    assert!(a.iter().any(|x| x == "-no-reboot"), "a reset ends QEMU: the run's final line is out");
    assert!(!a.contains(&"-icount".to_string()) && !a.contains(&"-S".to_string()));
}

#[test]
fn no_hypervisor_boots_the_kernel_alone_at_el1() {
    let cfg = Launch {
        no_hypervisor: true,
        gic: 2,
        icount: Some(0),
        gdb: Some(1234),
        bootargs: "a b".into(),
        ..Launch::default()
    };
    let a = cfg.args(&images()).unwrap();
    assert_eq!(after(&a, "-M"), Some("virt,gic-version=2"));
    assert_eq!(after(&a, "-m"), Some("1024M"));
    assert_eq!(name(&a, "-kernel").as_deref(), Some("k.img"));
    assert_eq!(after(&a, "-initrd"), None);
    assert_eq!(after(&a, "-icount"), Some("shift=0,sleep=off"));
    assert_eq!(after(&a, "-append"), Some("a b"));
    // gdb on localhost only, never `-s` (every interface).
    assert_eq!(after(&a, "-gdb"), Some("tcp:127.0.0.1:1234"));
    assert!(a.contains(&"-S".to_string()) && !a.contains(&"-s".to_string()));
}

#[test]
fn another_guest_travels_as_a_bundle_or_boots_alone() {
    let dir = images().kernel.parent().unwrap().to_path_buf();
    let guest =
        Guest { kernel: images().kernel, initrd: Some(dir.join("rootfs.cpio")), append: "console=ttyAMA0".into() };
    let cfg =
        Launch { guest: Some(guest.clone()), bootargs: "hyp.on-fault=stop".into(), mte: true, ..Default::default() };
    let a = cfg.args(&images()).unwrap();
    assert_eq!(name(&a, "-kernel").as_deref(), Some("h.img"));
    let bundle = guest.bundle_path();
    assert_eq!(after(&a, "-initrd"), Some(bundle.to_str().unwrap()));
    assert!(bundle.starts_with(crate::workspace_root().join("target/guest")));
    assert!(bundle.is_file(), "written before QEMU's arguments are (their -m depends on its size)");
    let append = after(&a, "-append").unwrap();
    assert!(
        append.starts_with("hyp.on-fault=stop hyp.guest-mem=1024M hyp.key=0x"),
        "the bundle carries the guest's: {append}"
    );
    assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,virtualization=on,mte=on"));
    let plain = Launch { no_hypervisor: true, ..cfg };
    let a = plain.args(&images()).unwrap();
    assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,mte=on"));
    assert_eq!((name(&a, "-kernel").as_deref(), name(&a, "-initrd").as_deref()), (Some("k.img"), Some("rootfs.cpio")));
    assert_eq!(after(&a, "-append"), Some("console=ttyAMA0 hyp.on-fault=stop pgtlab_alone=1"));
    // Alone at EL2 (Linux with KVM): the same guest, on a machine with EL2.
    let at_el2 = Launch { no_hypervisor: false, kernel_at_el2: true, mte: false, ..plain.clone() };
    let a = at_el2.args(&images()).unwrap();
    assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,virtualization=on"));
    assert_eq!((name(&a, "-kernel").as_deref(), name(&a, "-initrd").as_deref()), (Some("k.img"), Some("rootfs.cpio")));
    assert_eq!(after(&a, "-append"), Some("console=ttyAMA0 hyp.on-fault=stop pgtlab_alone=1"));
    let other = Guest { append: "quiet".into(), ..guest.clone() };
    assert_ne!(other.bundle_path(), guest.bundle_path(), "a different guest gets its own bundle file");
}

#[test]
fn mem_is_the_guests_and_the_machine_is_sized_once() {
    let alone = Launch { mem: Some(Size::mib(2048)), no_hypervisor: true, ..Launch::default() };
    assert_eq!(after(&alone.args(&images()).unwrap(), "-m"), Some("2048M"));
    // Under the hypervisor: --mem for the guest, told to the hypervisor, its share on top.
    let hyp = Launch { mem: Some(Size::gib(4)), ..Launch::default() };
    let r = hyp.resolve(&images(), Version(7, 2, 0)).unwrap();
    assert_eq!(r.mem.guest, 4 * GIB);
    assert!(
        r.mem.hypervisor_bytes() > 256 * MIB && r.mem.hypervisor_bytes() < 300 * MIB,
        "RAM/16 of frames: {:?}",
        r.mem
    );
    assert_eq!(after(&r.args, "-m"), Some(format!("{}M", r.mem.total >> 20).as_str()));
    assert!(after(&r.args, "-append").unwrap().starts_with("hyp.guest-mem=4096M hyp.key=0x"));
    assert!(matches!(r.judging, Judging::Keyed(_)));
    // A new key for each run, in the arguments and in what judges the run.
    let again = hyp.resolve(&images(), Version(7, 2, 0)).unwrap();
    assert_ne!(again.judging, r.judging);
    if let Judging::Keyed(k) = again.judging {
        assert!(after(&again.args, "-append").unwrap().ends_with(&format!("hyp.key={k:#x}")));
    }
    let e = Launch { bootargs: "hyp.key=0x1".into(), ..hyp.clone() }.validate().unwrap_err().0;
    assert!(e.contains("the xtask's to choose"), "{e}");
    let e = Launch { bootargs: "hyp.guest-mem=1G".into(), ..hyp.clone() }.validate().unwrap_err().0;
    assert!(e.contains("--mem"), "{e}");
    assert!(Launch { smp: 0, ..hyp.clone() }.validate().is_err());
    assert!(Launch { cpu: "cortex-a7".into(), ..hyp }.validate().is_err());
}

/// Words the machine cannot honour and lines that are not one line are refused, not clamped
/// or cut.
#[test]
fn bootargs_that_cannot_be_honoured_are_refused() {
    let e =
        |bootargs: &str, smp| Launch { bootargs: bootargs.into(), smp, ..Launch::default() }.validate().unwrap_err().0;
    assert!(e("hyp.cpus=8", 2).contains("at most 2"), "{}", e("hyp.cpus=8", 2));
    assert!(Launch { bootargs: "hyp.cpus=2".into(), smp: 2, ..Launch::default() }.validate().is_ok());
    assert!(e("a\n@@exit 0 (success)", 4).contains("control character"));
    let guest = Guest { kernel: images().kernel, initrd: None, append: "x\ry".into() };
    let e = Launch { guest: Some(guest), ..Launch::default() }.validate().unwrap_err().0;
    assert!(e.starts_with("--guest-append"), "{e}");
    // Longer than Linux keeps: refused, not cut.
    let long = Guest { kernel: images().kernel, initrd: None, append: "a ".repeat(2400) };
    let e = Launch { guest: Some(long), ..Launch::default() }.validate().unwrap_err().0;
    assert!(e.contains("COMMAND_LINE_SIZE"), "{e}");
    let fits = Guest { kernel: images().kernel, initrd: None, append: "a".repeat(2000) };
    assert!(Launch { guest: Some(fits), ..Launch::default() }.validate().is_ok());
}

#[test]
fn a_board_takes_its_dtb_its_cpus_and_ends_its_own_bootargs() {
    let mut pi4 = Launch::for_machine(find("pi4").unwrap());
    assert!(pi4.validate().unwrap_err().0.contains("device tree was not fetched"));
    let dir = tempfile::tempdir().unwrap();
    pi4.dtb = Some(dir.path().join("pi4.dtb"));
    assert_eq!((pi4.cpu.as_str(), pi4.gic, pi4.smp), ("cortex-a72", 2, 4));
    pi4.validate().unwrap();
    let imx = Launch { smp: 2, no_hypervisor: true, ..Launch::for_machine(find("imx8mp-evk").unwrap()) };
    assert_eq!(imx.model().machine_arg(imx.gic, false, false), "imx8mp-evk");
}

#[test]
fn singlestep_is_spelled_as_the_qemu_takes_it() {
    let l = Launch { singlestep: true, no_hypervisor: true, ..Launch::default() };
    assert!(l.resolve(&images(), Version(7, 2, 0)).unwrap().args.contains(&"-singlestep".to_string()));
    let a = l.resolve(&images(), Version(10, 0, 2)).unwrap().args;
    assert_eq!(after(&a, "-accel"), Some("tcg,one-insn-per-tb=on"));
    assert!(!a.contains(&"-singlestep".to_string()));
}

#[test]
fn kvm_takes_the_hosts_cpu_and_refuses_tcg_options() {
    let kvm = Launch { accel: crate::machine::accel::find("kvm").unwrap(), key: Some(7), ..Launch::default() };
    let a = kvm.args(&images()).unwrap();
    assert_eq!(after(&a, "-accel"), Some("kvm"));
    assert_eq!(after(&a, "-cpu"), Some("host"));
    assert_eq!(after(&a, "-M"), Some("virt,gic-version=3,virtualization=on"));
    assert!(Launch { icount: Some(0), ..kvm.clone() }.validate().unwrap_err().0.contains("--icount"));
    assert!(Launch { singlestep: true, ..kvm.clone() }.validate().unwrap_err().0.contains("--singlestep"));
    assert!(Launch { plugin: Some("p.so".into()), ..kvm.clone() }.validate().unwrap_err().0.contains("--count-insns"));
    // One accelerator: a --qemu-arg cannot choose another.
    assert!(crate::launch::qemu_arg::parse("-accel tcg").is_err());
    // KVM runs virt only: a board model is TCG's.
    let pi4 = Launch { accel: kvm.accel, ..Launch::for_machine(find("pi4").unwrap()) };
    let e = pi4.validate().unwrap_err().0;
    assert!(e.contains("virt machine only") && e.contains("--accel tcg"), "{e}");
    // The same command line under the KVM host model, whose QEMU lacks virt's NIC ROM.
    let model = Launch { accel: crate::machine::accel::find("kvm-model").unwrap(), ..kvm.clone() };
    let m = model.args(&images()).unwrap();
    assert_eq!(m, a, "kvm-model runs the command line --accel kvm would");
    assert_eq!(after(&m, "-nic"), Some("none"));
}

#[test]
fn qemu_args_come_last_and_semihosting_never() {
    let l = Launch { qemu_args: vec!["-device".into(), "pci-testdev".into()], ..Launch::default() };
    let a = l.args(&images()).unwrap();
    assert_eq!(&a[a.len() - 2..], ["-device", "pci-testdev"]);
    let bad = Launch { qemu_args: vec!["-semihosting-config".into(), "enable=on".into()], ..Launch::default() };
    assert!(bad.validate().unwrap_err().0.contains("semihosting"));
}

/// A guest that cannot fit in `--mem` is refused before its bundle is written (no 1.2 GiB file
/// left behind for nothing).
#[test]
fn a_guest_too_large_is_refused_before_its_bundle_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("initrd.img");
    std::fs::File::create(&big).unwrap().set_len(1200 << 20).unwrap();
    let guest = Guest { kernel: images().kernel, initrd: Some(big), append: "x".into() };
    let l = Launch { guest: Some(guest.clone()), ..Launch::default() };
    let e = l.resolve(&images(), Version(7, 2, 0)).unwrap_err();
    assert!(format!("{e:#}").contains("--mem 1G"), "{e:#}");
    assert!(crate::error::code_of(&e) == abi::exit::USAGE, "{e:#}");
    assert!(!guest.bundle_path().exists(), "no bundle written");
}

/// The project's kernel runs at EL1 only: alone on a board whose CPUs start at EL2 it would
/// refuse to boot, so the xtask refuses first, saying what works. Alone on a board, the DTB's
/// own command line ends at the marker.
#[test]
fn alone_on_a_board_is_what_the_board_can_do() {
    let dir = tempfile::tempdir().unwrap();
    let board = |name: &str| Launch {
        dtb: Some(dir.path().join("b.dtb")),
        no_hypervisor: true,
        ..Launch::for_machine(find(name).unwrap())
    };
    let e = board("pi4").validate().unwrap_err().0;
    assert!(e.contains("start at EL2") && e.contains("under the hypervisor"), "{e}");
    assert!(board("imx8mp-evk").validate().is_err());
    let zcu = board("zcu102");
    zcu.validate().unwrap();
    let r = zcu.resolve(&images(), Version(10, 0, 2)).unwrap();
    assert_eq!(after(&r.args, "-append"), Some("pgtlab"), "the DTB's earlycon is the firmware's, not ours");
    assert_eq!(r.judging, Judging::Alone);
}
