//! The short fuzz run of `cargo xtask test`: every target on its seeds and a few thousand
//! mutants (seconds in all), printing the executions. `cargo xtask fuzz` runs them for long.

use super::*;
use std::process::Command;

/// A real DTB of QEMU's `virt` board (the machine the binaries boot on), dumped now.
fn qemu_dtb(args: &str) -> Vec<u8> {
    let path = std::env::temp_dir().join(format!("fuzz-seed-{}-{}.dtb", std::process::id(), args.len()));
    let status = Command::new("qemu-system-aarch64")
        .args(["-M", &format!("virt,{args}dumpdtb={}", path.display()), "-cpu", "max", "-smp", "4", "-m", "1G"])
        .args(["-display", "none"])
        .status()
        .expect("qemu-system-aarch64 (installed by cargo xtask test before the host tests)");
    assert!(status.success(), "QEMU could not dump its DTB");
    let d = std::fs::read(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    // QEMU pads to 1 MiB; the tree is the header's totalsize.
    let n = board::dtb_total_size(&d).unwrap();
    d[..n].to_vec()
}

fn image_seeds() -> Vec<Vec<u8>> {
    let mut h = vec![0u8; 4096];
    h[0x38..0x3c].copy_from_slice(&abi::image::MAGIC.to_le_bytes());
    h[24..32].copy_from_slice(&0xau64.to_le_bytes());
    let mut stamped = h.clone();
    ImageHeader::patch(&mut stamped, 0x10_0000).unwrap();
    let mut plain = h;
    plain[16..24].copy_from_slice(&0x10_0000u64.to_le_bytes());
    vec![stamped, plain[..64].to_vec(), plain]
}

const ITERATIONS: u64 = 3000;

fn report(name: &str, execs: u64) {
    println!("fuzz: {name}: {execs} executions, no finding");
}

#[test]
fn image_header_short_run() {
    report("image_header", drive("image_header", image_header, &image_seeds(), &[], ITERATIONS * 10, 0x1111));
}

#[test]
fn dtb_and_guest_dtb_short_run() {
    let seeds = vec![qemu_dtb("gic-version=3,virtualization=on,"), qemu_dtb("gic-version=2,")];
    let dict: &[&[u8]] = &[b"memory\0", b"reg\0", b"#address-cells\0", b"/chosen\0", b"psci\0", &[0, 0, 0, 3]];
    report("dtb", drive("dtb", dtb, &seeds, dict, ITERATIONS * 2, 0x2222));
    report("guest_dtb", drive("guest_dtb", guest_dtb_target, &seeds, dict, ITERATIONS / 3, 0x3333));
}

/// A small tree whose /chosen describes a guest in Xen's module nodes (as a U-Boot script
/// writes them), for the DTB parser's module code; `bad`: `bootargs` on the ramdisk too.
fn modules_dtb(bad: bool) -> Vec<u8> {
    let mut w = board::FdtWriter::new();
    let cells = |v: &[u32]| v.iter().flat_map(|c| c.to_be_bytes()).collect::<Vec<u8>>();
    w.begin_node("").unwrap();
    w.property("#address-cells", &cells(&[2])).unwrap();
    w.property("#size-cells", &cells(&[2])).unwrap();
    w.begin_node("memory@40000000").unwrap();
    w.property_str("device_type", "memory").unwrap();
    w.property("reg", &cells(&[0, 0x4000_0000, 0, 0x4000_0000])).unwrap();
    w.end_node().unwrap();
    w.begin_node("cpus").unwrap();
    w.property("#address-cells", &cells(&[1])).unwrap();
    w.property("#size-cells", &cells(&[0])).unwrap();
    w.begin_node("cpu@0").unwrap();
    w.property_str("device_type", "cpu").unwrap();
    w.property_str("compatible", "arm,cortex-a76").unwrap();
    w.property("reg", &cells(&[0])).unwrap();
    w.end_node().unwrap();
    w.end_node().unwrap();
    w.begin_node("chosen").unwrap();
    w.property("#address-cells", &cells(&[1])).unwrap();
    w.property("#size-cells", &cells(&[1])).unwrap();
    for (name, kind, reg) in [
        ("module@44000000", "multiboot,kernel", [0x4400_0000, 0x10_0000]),
        ("module@46000000", "multiboot,ramdisk", [0x4600_0000, 0x1000]),
    ] {
        w.begin_node(name).unwrap();
        w.property_strs("compatible", &[kind, "multiboot,module"]).unwrap();
        w.property("reg", &cells(&reg)).unwrap();
        if kind == "multiboot,kernel" || bad {
            w.property_str("bootargs", "console=ttyAMA0").unwrap();
        }
        w.end_node().unwrap();
    }
    w.end_node().unwrap();
    w.end_node().unwrap();
    w.finish().unwrap()
}

#[test]
fn modules_dtb_short_run() {
    let good = modules_dtb(false);
    let m = Board::from_dtb(&good).unwrap().modules.expect("the modules");
    assert_eq!(m.kernel.region, Region::new(0x4400_0000, 0x10_0000));
    assert!(Board::from_dtb(&modules_dtb(true)).is_err(), "bootargs on the ramdisk are refused");
    let dict: &[&[u8]] =
        &[b"multiboot,module\0", b"multiboot,kernel\0", b"multiboot,ramdisk\0", b"module@", b"reg\0", &[0, 0, 0, 1]];
    report("dtb (modules)", drive("dtb", dtb, &[good, modules_dtb(true)], dict, ITERATIONS, 0x5555));
}

#[test]
fn efi_short_run() {
    let ucs2 = |s: &str| s.encode_utf16().flat_map(|c| c.to_le_bytes()).collect::<Vec<u8>>();
    let mut map = Vec::new();
    for (ty, start, pages) in [(7u32, 0x4000_0000u64, 0x100u64), (5, 0x4010_0000, 0x10), (2, 0x4011_0000, 0x10)] {
        map.extend_from_slice(&ty.to_le_bytes());
        map.extend_from_slice(&start.to_le_bytes());
        map.extend_from_slice(&(pages << 32).to_le_bytes());
        map.extend_from_slice(&8u64.to_le_bytes());
    }
    let seeds = vec![ucs2("hyp.guest-mem=1G test=smccc initrd=initrd\0"), map, image_seeds()[0].clone()];
    let dict: &[&[u8]] = &[b"M\0Z\0", b"PE\0\0", &[0x64, 0xaa], &[0x0b, 0x02], b"i\0n\0i\0t\0r\0d\0=\0"];
    report("efi", drive("efi", efi_target, &seeds, dict, ITERATIONS * 5, 0x6666));
}

#[test]
fn bootargs_short_run() {
    let seeds: Vec<Vec<u8>> =
        ["bbml2=on test=panic,undef hyp.pool=16M", "split.iters=0x10 hyp.slotpool=1T", "test=smccc test=storm"]
            .iter()
            .map(|s| s.as_bytes().to_vec())
            .collect();
    let dict: &[&[u8]] = &[b"=", b",", b" ", b"G", b"T", b"0x", b"18446744073709551615", b"bbml2", b"test=", b"hyp."];
    report("bootargs", drive("bootargs", bootargs_target, &seeds, dict, ITERATIONS * 10, 0x4444));
}

#[test]
fn a_target_that_panics_is_a_finding() {
    fn bad(d: &[u8]) {
        assert!(d.len() != 3, "three bytes");
    }
    let r = std::panic::catch_unwind(|| drive("self-check", bad, &[vec![1, 2, 3, 4]], &[], 2000, 7));
    assert!(r.is_err(), "the driver must report a panicking input");
}
