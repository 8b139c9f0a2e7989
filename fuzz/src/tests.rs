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
    h[0x38..0x3c].copy_from_slice(&rt::image::MAGIC.to_le_bytes());
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
