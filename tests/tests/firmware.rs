//! The hypervisor started by real boot firmware instead of QEMU's loader, on `virt` at EL2, with
//! Debian's packages (`xtask::provision::firmware`): EDK2 (UEFI: the Image as an EFI application, through
//! QEMU's `-kernel`/`-initrd` and from an EFI system partition) and U-Boot (`booti` through
//! its fw_cfg boot method, and a board user's boot script that loads the files and describes
//! the guest in Xen's `/chosen/module@` nodes). Each with the project's kernel and Debian's
//! Linux as the guest (the default run boots Linux through U-Boot's module nodes, the one path
//! only Linux's initramfs takes; `--long` boots it through the others too).
//!
//! What firmware leaves that QEMU's loader does not: RAM with holes (EDK2's runtime-services
//! regions near the top of RAM), a device tree that is the firmware's (U-Boot's own, with its
//! extra nodes), an initrd wherever the firmware put it, caches and the MMU on at entry (EDK2).
//! The guest gets the RAM the hypervisor does not keep (no `hyp.guest-mem`: firmware takes its
//! share of RAM first), and QEMU gets `FIRMWARE_MEM` more than the usual machine. Each boot
//! waits for firmware start-up (EDK2 about 1 s, U-Boot's autoboot countdown 2 s, TCG).

use tests::{linux_guest, try_boot_edited, Config, Run};
use xtask::provision::firmware::{self, FirmwareFile};

/// RAM QEMU gets beyond the usual machine, for the firmware's own memory.
const FIRMWARE_MEM_MIB: u64 = 64;

/// The QEMU arguments of `cfg` booted through `bios`: `-bios`, `FIRMWARE_MEM_MIB` more RAM,
/// `hyp.guest-mem` dropped, `machine` appended to `-M`.
fn through<'a>(bios: FirmwareFile, machine: &'a str, extra: &'a [String]) -> impl FnOnce(&mut Vec<String>) + 'a {
    let fw = firmware::get(bios).unwrap_or_else(|e| panic!("firmware {}: {e:#}", bios.name));
    move |a: &mut Vec<String>| {
        let at = |a: &Vec<String>, k: &str| a.iter().position(|x| x == k).map(|i| i + 1);
        let m = at(a, "-m").expect("-m");
        let mib: u64 = a[m].trim_end_matches('M').parse().expect("-m in MiB");
        a[m] = format!("{}M", mib + FIRMWARE_MEM_MIB);
        let mach = at(a, "-M").expect("-M");
        a[mach].push_str(machine);
        if let Some(i) = at(a, "-append") {
            a[i] = a[i].split_whitespace().filter(|w| !w.starts_with("hyp.guest-mem=")).collect::<Vec<_>>().join(" ");
            if a[i].is_empty() {
                a.drain(i - 1..=i);
            }
        }
        a.extend(["-bios".into(), fw.display().to_string()]);
        a.extend_from_slice(extra);
    }
}

fn boot(cfg: Config, edit: impl FnOnce(&mut Vec<String>)) -> Run {
    try_boot_edited(cfg, edit).unwrap_or_else(|why| panic!("the xtask refused the configuration: {why}"))
}

fn kernel_cfg(smp: u32) -> Config {
    tests::config(|c| c.smp = smp)
}

fn linux_cfg() -> Config {
    linux_guest().unwrap_or_else(|e| panic!("the Linux guest is not available: {e}"));
    tests::linux_config("", |c| {
        c.cpu = "cortex-a76".into();
        c.smp = 2;
    })
}

/// The project's kernel reached with every CPU, and the run ended by it.
fn expect_kernel(run: &Run, cpus: u32) {
    run.expect_exit(0);
    run.expect_output(&format!("kernel: {cpus} of {cpus} CPUs online"));
}

fn expect_linux(run: &Run) {
    run.expect_exit(0);
    run.expect_output(xtask::linux::MARKER);
    assert_eq!(run.record("linux_guest").u64("cpus"), Some(2), "{}", run.dump());
}

/// EDK2 through `-kernel`/`-initrd`: EDK2's QEMU loader starts the Image as an EFI application
/// with `-append` (and " initrd=initrd") as its load options and offers the initrd through
/// LoadFile2; `acpi=off` makes EDK2 publish the device tree.
#[test]
fn edk2_kernel_project_kernel() {
    // The load options carry `-append`: hyp.cpus=3 must reach the hypervisor.
    let cfg = tests::config(|c| {
        c.smp = 4;
        c.bootargs = "hyp.cpus=3".into();
    });
    let run = boot(cfg, through(firmware::EDK2_VIRT, ",acpi=off", &[]));
    run.expect_output("hyp: EFI: initrd (");
    run.expect_output("initrd=initrd dropped");
    expect_kernel(&run, 3);
    // EDK2 keeps runtime-services memory near the top of RAM: the hypervisor went below it.
    let hyp = run.record("hyp_boot");
    assert!(hyp.u64s("guest_ram").is_some_and(|r| r.len() >= 2), "{}", run.dump());
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_edk2_kernel_linux() {
    let run = boot(linux_cfg(), through(firmware::EDK2_VIRT, ",acpi=off", &[]));
    run.expect_output("hyp: EFI: initrd (");
    expect_linux(&run);
}

/// U-Boot's fw_cfg boot method: it loads `-kernel` and `-initrd` and `booti`s the hypervisor
/// with U-Boot's own device tree, the initrd where U-Boot moved it (near the top of RAM).
#[test]
fn uboot_fw_cfg_project_kernel() {
    let run = boot(kernel_cfg(4), through(firmware::UBOOT_VIRT, "", &[]));
    run.expect_output("Starting kernel ...");
    expect_kernel(&run, 4);
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_uboot_fw_cfg_linux() {
    let run = boot(linux_cfg(), through(firmware::UBOOT_VIRT, "", &[]));
    run.expect_output("Starting kernel ...");
    expect_linux(&run);
}

/// A FAT disk image of `files` under target/test-scratch, named `name`.
fn disk(name: &str, files: &[xtask::flash::fat::File]) -> std::path::PathBuf {
    let image = xtask::flash::fat::build(files, xtask::flash::fat::size_for(files)).expect("building the disk image");
    let path = tests::scratch_dir().join(format!("{name}-{}.img", std::process::id()));
    std::fs::write(&path, image).expect("writing the disk image");
    path
}

/// The arguments without QEMU's own loading (`-kernel`, `-initrd`, `-append`): the firmware
/// finds everything on `disk` (a virtio disk, read-only to QEMU: writes go to a snapshot).
fn from_disk(disk: &std::path::Path) -> Vec<String> {
    vec!["-drive".into(), format!("if=virtio,format=raw,snapshot=on,file={}", disk.display())]
}

fn drop_loader_args(a: &mut Vec<String>) {
    for k in ["-kernel", "-initrd", "-append"] {
        if let Some(i) = a.iter().position(|x| x == k) {
            a.drain(i..=i + 1);
        }
    }
}

/// What a guest's files are: (kernel, initramfs, command line) of the project's kernel or of
/// Debian's Linux.
fn guest_files(linux: bool) -> (Vec<u8>, Option<Vec<u8>>, String) {
    if linux {
        let cfg = linux_cfg();
        let g = cfg.guest.expect("the Linux guest");
        (std::fs::read(&g.kernel).unwrap(), g.initrd.map(|i| std::fs::read(i).unwrap()), g.append)
    } else {
        (std::fs::read(&tests::images().kernel).unwrap(), None, String::new())
    }
}

/// U-Boot's distro boot finds `boot.scr` on a virtio disk (`cargo xtask flash --layout uboot`'s
/// files): the script loads the hypervisor and the guest's files and describes the guest in
/// `/chosen/module@…` nodes, as a board user's script does for Xen.
fn uboot_modules(linux: bool) -> Run {
    let key = xtask::launch::new_key().unwrap();
    let (kernel, initrd, guest_cmdline) = guest_files(linux);
    let g = xtask::flash::layouts::UbootGuest {
        hypervisor: std::fs::read(&tests::images().hypervisor).unwrap(),
        kernel,
        initrd,
        guest_cmdline,
        // The run's key, which the hypervisor's final line must carry: on the disk, as the
        // command line a board user writes.
        bootargs: format!("hyp.key={key:#x}"),
    };
    let d = disk(if linux { "uboot-linux" } else { "uboot-kernel" }, &xtask::flash::layouts::uboot_files(&g));
    let mut cfg = if linux { linux_cfg() } else { kernel_cfg(4) };
    cfg.key = Some(key);
    let extra = from_disk(&d);
    let fw = through(firmware::UBOOT_VIRT, "", &extra);
    let run = boot(cfg, |a| {
        drop_loader_args(a);
        fw(a)
    });
    let _ = std::fs::remove_file(&d);
    run.expect_output("pgtlab: loading the hypervisor and its guest");
    run
}

#[test]
fn uboot_modules_project_kernel() {
    let run = uboot_modules(false);
    expect_kernel(&run, 4);
    assert_eq!(run.record("hyp_boot").bool("bundle"), Some(false), "{}", run.dump());
}

#[test]
fn uboot_modules_linux() {
    let run = uboot_modules(true);
    expect_linux(&run);
}

/// EDK2 boots `EFI/BOOT/BOOTAA64.EFI` from an EFI system partition on a virtio disk (`cargo
/// xtask flash --layout efi`'s files); the hypervisor reads the guest and its command line
/// beside itself on that volume.
fn edk2_esp(linux: bool) -> Run {
    let key = xtask::launch::new_key().unwrap();
    let mut cfg = if linux { linux_cfg() } else { kernel_cfg(4) };
    cfg.key = Some(key);
    let guest = match &cfg.guest {
        Some(g) => std::fs::read(g.write_bundle().expect("the guest bundle")).unwrap(),
        None => std::fs::read(&tests::images().kernel).unwrap(),
    };
    let hyp = std::fs::read(&tests::images().hypervisor).unwrap();
    // The command line beside the application (no load options from the boot manager).
    let bootargs = if linux { format!("hyp.key={key:#x}") } else { format!("pgtlab hyp.cpus=3 hyp.key={key:#x}") };
    let files = xtask::flash::layouts::efi_files(&hyp, &guest, &bootargs);
    let d = disk(if linux { "esp-linux" } else { "esp-kernel" }, &files);
    let extra = from_disk(&d);
    let fw = through(firmware::EDK2_VIRT, ",acpi=off", &extra);
    let run = boot(cfg, |a| {
        drop_loader_args(a);
        fw(a)
    });
    let _ = std::fs::remove_file(&d);
    run.expect_output("hyp: EFI: guest \\EFI\\BOOT\\pgtlab-kernel.img");
    run
}

#[test]
fn edk2_esp_project_kernel() {
    let run = edk2_esp(false);
    expect_kernel(&run, 3);
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_edk2_esp_linux() {
    let run = edk2_esp(true);
    expect_linux(&run);
}

/// `cargo xtask flash --board pi4|pi5 --armstub tfa`: Debian's TF-A BL31 for the board (upstream
/// TF-A's `rpi4` / `rpi5` port) goes on the card as the armstub (QEMU's raspi4b cannot run it:
/// docs/firmware.md "Real firmware on the Pis").
#[test]
fn pi_cards_with_debian_tfa_as_armstub() {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    for (board, plat) in [("pi4", "rpi4"), ("pi5", "rpi5")] {
        let pi = xtask::machine::with_card(board).unwrap().1;
        let path = xtask::flash::armstub_tfa(pi).unwrap_or_else(|e| panic!("Debian's BL31 for {plat}: {e:#}"));
        let bl31 = std::fs::read(&path).unwrap();
        assert!(bl31.len() > 4096, "{board}: {} bytes", bl31.len());
        // Each board its own port (the ports' strings are alike: the bytes tell them apart).
        assert!(!seen.contains(&bl31), "{board}: the same BL31 as another board's");
        seen.push(bl31.clone());
        // TF-A's own banner string, and the package it came from.
        assert!(bl31.windows(6).any(|w| w == b"BL31: "), "{board}: no BL31 banner in {}", path.display());
        let source = xtask::provision::firmware::source_of(&path);
        assert!(source.starts_with("arm-trusted-firmware_"), "{board}: {source}");
        let b = xtask::flash::Boot {
            kernel: std::fs::read(&tests::images().hypervisor).unwrap(),
            guest: Some(std::fs::read(&tests::images().kernel).unwrap()),
            bootargs: String::new(),
            baud: None,
            pi,
            armstub: Some(bl31.clone()),
        };
        let files = xtask::flash::image_files(&b, None).unwrap();
        let image = xtask::flash::fat::build(&files, xtask::flash::fat::size_for(&files)).unwrap();
        let info = xtask::flash::fat::read(&image).unwrap();
        assert_eq!(info.file(xtask::flash::ARMSTUB).map(|f| f.data.clone()), Some(bl31), "{board}");
        let config = String::from_utf8(info.file("config.txt").unwrap().data.clone()).unwrap();
        assert!(config.lines().any(|l| l == "armstub=pgtlab-bl31.bin"), "{board}: {config}");
        assert!(config.lines().any(|l| l == format!("kernel={}", pi.kernel)), "{board}: {config}");
    }
}
