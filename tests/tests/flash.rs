//! `cargo xtask flash` with the real Images: the SD card image built and read back (partition
//! table, file system, file list, sizes, the config.txt section), and a boot partition flashed
//! twice.

use tests::images;
use xtask::flash::{self, config_txt, fat, Boot};

fn boot(chainloader: bool) -> Boot {
    let i = images();
    Boot {
        kernel: std::fs::read(if chainloader { xtask::build::chainloader_image() } else { i.hypervisor.clone() })
            .unwrap(),
        guest: (!chainloader).then(|| std::fs::read(&i.kernel).unwrap()),
        bootargs: "hyp.conduit=smc".into(),
        baud: None,
        pi: flash::pi5(),
        armstub: None,
    }
}

fn pi4() -> flash::Pi {
    xtask::machine::with_card("pi4").unwrap().1
}

/// A Pi 4 card: the hypervisor as kernel8.img (the Pi 4 firmware's 64-bit kernel, entered at
/// EL2 with arm_64bit=1), the kernel as its initramfs, the Pi 4 DTB asked for.
#[test]
fn pi4_card_boots_kernel8_img_in_64_bit_mode() {
    let b = Boot { pi: pi4(), ..boot(false) };
    let files = flash::image_files(&b, None).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["config.txt", "kernel8.img", "pgtlab-cmdline.txt", "pgtlab-kernel.img"]);
    let config = String::from_utf8(files[0].data.clone()).unwrap();
    for line in ["arm_64bit=1", "kernel=kernel8.img", "initramfs pgtlab-kernel.img followkernel", "enable_uart=1"] {
        assert!(config.lines().any(|l| l.trim() == line), "{line} in\n{config}");
    }
    let w = flash::dtb_warning_for(pi4(), names.into_iter()).unwrap();
    assert!(w.contains("bcm2711-rpi-4-b.dtb"), "{w}");
    assert_eq!(xtask::machine::with_card("raspi4b").unwrap().1, pi4());
    assert!(xtask::machine::with_card("zcu102").is_err());
    // With the chainloader (it receives through the mini UART, the Pi 4 DTB's stdout-path):
    // kernel8.img is the loader, no guest file, no initramfs line.
    let b = Boot { pi: pi4(), ..boot(true) };
    let files = flash::image_files(&b, None).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["config.txt", "kernel8.img", "pgtlab-cmdline.txt"]);
    assert_eq!(files[1].data, std::fs::read(xtask::build::chainloader_image()).unwrap());
    let config = String::from_utf8(files[0].data.clone()).unwrap();
    assert!(config.lines().any(|l| l.trim() == "kernel=kernel8.img") && !config.contains("initramfs"), "{config}");
}

#[test]
fn image_reads_back_with_the_files_and_the_section() {
    let b = boot(false);
    let files = flash::image_files(&b, None).unwrap();
    let image = fat::build(&files, fat::size_for(&files)).unwrap();
    assert_eq!(image.len(), 64 << 20);
    let info = fat::read(&image).unwrap();
    assert_eq!(info.partitions, [(0x0c, 2048, (64 << 11) - 2048)]);
    assert_eq!((info.fs_type.as_str(), info.label.as_str(), info.hidden_sectors), ("FAT32   ", "PGTLAB-BOOT", 2048));
    let names: Vec<(&str, usize)> = info.files.iter().map(|f| (f.path.as_str(), f.data.len())).collect();
    let hyp = std::fs::metadata(&images().hypervisor).unwrap().len() as usize;
    let kernel = std::fs::metadata(&images().kernel).unwrap().len() as usize;
    let config = info.file("config.txt").unwrap().data.len();
    assert_eq!(
        names,
        [
            ("config.txt", config),
            ("kernel_2712.img", hyp),
            ("pgtlab-cmdline.txt", "pgtlab hyp.conduit=smc\n".len()),
            ("pgtlab-kernel.img", kernel)
        ]
    );
    assert_eq!(info.file("kernel_2712.img").unwrap().data, std::fs::read(&images().hypervisor).unwrap());
    assert_eq!(info.file("pgtlab-kernel.img").unwrap().data, std::fs::read(&images().kernel).unwrap());
    // The firmware puts its own words first: `pgtlab` ends them (lib/bootargs).
    assert_eq!(info.file("pgtlab-cmdline.txt").unwrap().data, b"pgtlab hyp.conduit=smc\n");
    let text = String::from_utf8(info.file("config.txt").unwrap().data.clone()).unwrap();
    let section = config_txt::section_of(&text).unwrap().unwrap();
    assert_eq!(section, b.section().lines());
    for line in [
        "arm_64bit=1",
        "enable_uart=1",
        "uart_2ndstage=1",
        "kernel=kernel_2712.img",
        "initramfs pgtlab-kernel.img followkernel",
    ] {
        assert!(section.iter().any(|l| l == line), "{line} missing:\n{text}");
    }
    assert!(flash::dtb_warning(info.files.iter().map(|f| f.path.as_str())).is_some());
}

#[test]
fn image_with_firmware_and_the_chainloader() {
    let fw = tempfile::tempdir().unwrap();
    std::fs::write(fw.path().join("config.txt"), "# from Raspberry Pi OS\ndtparam=audio=on\n").unwrap();
    std::fs::write(fw.path().join(flash::pi5().dtb), vec![0xd0; 6860]).unwrap();
    std::fs::create_dir(fw.path().join("overlays")).unwrap();
    std::fs::write(fw.path().join("overlays/disable-bt.dtbo"), b"x").unwrap();
    let b = boot(true);
    let files = flash::image_files(&b, Some(fw.path())).unwrap();
    let info = fat::read(&fat::build(&files, fat::size_for(&files)).unwrap()).unwrap();
    let names: Vec<&str> = info.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        [flash::pi5().dtb, "config.txt", "kernel_2712.img", "overlays/disable-bt.dtbo", "pgtlab-cmdline.txt"]
    );
    assert_eq!(info.file("kernel_2712.img").unwrap().data, std::fs::read(xtask::build::chainloader_image()).unwrap());
    let text = String::from_utf8(info.file("config.txt").unwrap().data.clone()).unwrap();
    assert!(text.starts_with("# from Raspberry Pi OS\ndtparam=audio=on\n\n# >>> pgtlab"), "{text}");
    assert!(!text.contains("initramfs"), "the loader gets no initramfs");
    assert!(flash::dtb_warning(names.into_iter()).is_none());
}

#[test]
fn boot_dir_flashed_twice_has_one_section() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("config.txt"), "dtparam=i2c_arm=on\n").unwrap();
    flash::install_boot_dir(d.path(), &boot(false)).unwrap();
    flash::install_boot_dir(d.path(), &boot(false)).unwrap();
    let text = std::fs::read_to_string(d.path().join("config.txt")).unwrap();
    assert_eq!(text.matches(config_txt::BEGIN).count(), 1, "{text}");
    assert_eq!(text.matches(config_txt::END).count(), 1);
    assert!(text.starts_with("dtparam=i2c_arm=on\n"));
    assert_eq!(std::fs::read(d.path().join("config.txt.pgtlab-backup")).unwrap(), b"dtparam=i2c_arm=on\n");
    assert_eq!(std::fs::read(d.path().join("kernel_2712.img")).unwrap(), std::fs::read(&images().hypervisor).unwrap());
}
