//! What a guest sees under the hypervisor is what plain QEMU gives it (issue 22): its device tree
//! node by node, where its kernel, initramfs and DTB are, and its RAM size.
//!
//! The guest here is a raw binary that waits (`wfi; b .`): once the hypervisor has said where it
//! put everything (`hyp_boot`), the test reads the DTB the guest finds at x0 out of guest
//! memory over QMP and compares it with the DTB plain QEMU (`-M virt` without EL2, `-m` = `--mem`,
//! the same `-kernel`, `-initrd` and `-append`) dumps. The only differences allowed are the random
//! seeds of `/chosen` and those the hypervisor must make, each named in docs/ARCHITECTURE.md
//! ("What the guest sees"). The placement of each part is held to QEMU's own `info roms`.

use board::diff::{compare, Difference};
use std::path::Path;
use std::path::PathBuf;
use tests::{board_models_qemu, boot_until_on, qemu_binary, scratch_dir, Config};
use xtask::launch::{Guest, Launch};

/// `wfi; b .-4`: a guest that waits for ever without touching memory.
fn waiting_guest() -> PathBuf {
    let p = scratch_dir().join("guest-view-wait.bin");
    xtask::write_if_changed(&p, &[0x7f, 0x20, 0x03, 0xd5, 0xff, 0xff, 0xff, 0x17]).unwrap();
    p
}

fn initramfs() -> PathBuf {
    let p = scratch_dir().join("guest-view-initrd.img");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    xtask::write_if_changed(&p, &data).unwrap();
    p
}

/// What the hypervisor put where, and the guest's DTB as it lies in guest memory.
struct GuestView {
    dtb: Vec<u8>,
    kernel: u64,
    initramfs: u64,
    dtb_at: u64,
    ram: Vec<u64>,
}

fn under_hypervisor(qemu: &Path, cfg: &Launch) -> GuestView {
    let (view, console) = boot_until_on(
        qemu,
        cfg,
        |l| l.contains("\"kind\":\"hyp_boot\""),
        |q, console| {
            let rec = console.lines().find_map(|l| abi::report::parse_line(l).and_then(Result::ok)).expect("hyp_boot");
            let dtb_at = rec.u64("dtb").unwrap();
            let header = q.read_memory(dtb_at, 8).unwrap();
            let total = u32::from_be_bytes(header[4..8].try_into().unwrap()) as u64;
            let view = GuestView {
                dtb: q.read_memory(dtb_at, total).unwrap(),
                kernel: rec.u64("kernel").unwrap(),
                initramfs: rec.u64("initramfs").unwrap(),
                dtb_at,
                ram: rec.u64s("guest_ram").unwrap(),
            };
            (view, console.to_string())
        },
    );
    assert!(view.dtb.len() >= 1 << 20, "the DTB's room is QEMU's 1 MiB\n{console}");
    view
}

/// Plain QEMU's DTB and `info roms` for the same guest and machine.
fn plain(qemu: &Path, cfg: &Launch) -> (Vec<u8>, Vec<(String, u64)>) {
    let g = cfg.guest.as_ref().unwrap();
    let plain = Launch { no_hypervisor: true, guest: None, ..cfg.clone() };
    let mut files = vec!["-kernel".to_string(), g.kernel.display().to_string()];
    if let Some(i) = &g.initrd {
        files.extend(["-initrd".into(), i.display().to_string()]);
    }
    if !g.append.is_empty() {
        files.extend(["-append".into(), g.append.clone()]);
    }
    // One file per call: the tests of this file run in parallel threads of one process.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = scratch_dir().join(format!("plain-{}-{n}.dtb", std::process::id()));
    let mem = plain.mem.expect("--mem").bytes();
    let mut args = plain.machine_args(mem, plain.model().min_qemu);
    let m = args.iter().position(|a| a == "-M").unwrap() + 1;
    args[m] = format!("{},dumpdtb={}", args[m], file.display());
    let out = std::process::Command::new(qemu).args(&args).args(&files).arg("-nographic").output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let dtb = std::fs::read(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    // Where QEMU put each part: `info roms` with the machine stopped before its first instruction.
    let mut args = plain.machine_args(mem, plain.model().min_qemu);
    args.extend(files);
    args.extend(["-S", "-display", "none", "-monitor", "stdio", "-serial", "none"].map(String::from));
    let mut child = std::process::Command::new(qemu)
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"info roms\nquit\n").unwrap();
    let text = String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned();
    let roms = text
        .lines()
        .filter_map(|l| {
            let addr = l.strip_prefix("addr=")?.split_whitespace().next()?;
            let name = l.split("name=\"").nth(1)?.trim_end_matches('"');
            Some((name.to_string(), u64::from_str_radix(addr, 16).ok()?))
        })
        .collect();
    (dtb, roms)
}

/// The differences that are not the random seeds of `/chosen`.
fn real(diff: Vec<Difference>) -> Vec<String> {
    diff.into_iter()
        .filter(|d| !(d.path() == "/chosen" && matches!(d.property(), Some("rng-seed" | "kaslr-seed"))))
        .map(|d| d.to_string())
        .collect()
}

fn config(gic: u8, smp: u32, mem: &str, mte: bool, initrd: bool, append: &str) -> Launch {
    Launch {
        gic,
        smp,
        mem: Some(tests::mem(mem)),
        mte,
        guest: Some(Guest { kernel: waiting_guest(), initrd: initrd.then(initramfs), append: append.into() }),
        ..Config::default()
    }
}

/// The guest's tree equals plain QEMU's but for the seeds, and each part is where QEMU puts it
/// (on the system QEMU).
fn same_machine(cfg: Launch) {
    same_machine_on(qemu_binary(), cfg);
}

/// [`same_machine`] on the QEMU binary `qemu`.
fn same_machine_on(qemu: &Path, cfg: Launch) {
    let v = under_hypervisor(qemu, &cfg);
    let (dtb, roms) = plain(qemu, &cfg);
    let left = real(compare(&dtb, &v.dtb).unwrap());
    assert!(left.is_empty(), "{}: plain QEMU | hypervisor\n{}", cfg.describe(), left.join("\n"));
    let rom = |suffix: &str| roms.iter().find(|(n, _)| n.ends_with(suffix)).map(|r| r.1);
    assert_eq!(Some(v.kernel), rom(".bin"), "{}: kernel, {roms:?}", cfg.describe());
    assert_eq!(Some(v.dtb_at), rom("dtb"), "{}: DTB, {roms:?}", cfg.describe());
    if cfg.guest.as_ref().unwrap().initrd.is_some() {
        assert_eq!(Some(v.initramfs), rom(".img"), "{}: initramfs, {roms:?}", cfg.describe());
    }
    let mem = cfg.mem.expect("--mem").bytes();
    assert_eq!(v.ram, [0x4000_0000, 0x4000_0000 + mem], "{}", cfg.describe());
}

#[test]
fn gicv2_one_cpu_is_plain_qemus_machine() {
    same_machine(config(2, 1, "128M", false, false, ""));
}

#[test]
fn gicv3_four_cpus_with_mte_and_an_initramfs_is_plain_qemus_machine() {
    same_machine(config(3, 4, "1G", true, true, "console=ttyAMA0 x=1"));
}

#[test]
fn gicv2_eight_cpus_with_mte_is_plain_qemus_machine() {
    same_machine(config(2, 8, "256M", true, true, "a"));
}

#[test]
fn gicv3_eight_cpus_at_16g_is_plain_qemus_machine() {
    same_machine(config(3, 8, "16G", false, false, "y"));
}

/// The same on the QEMU the board models run on (10.x, whose `virt` differs from 7.2's: a
/// 2-cell initramfs range in `/chosen`, the EL2 virtual timer's interrupt in the EL2 tree).
#[test]
fn on_the_board_models_qemu_gicv2_with_an_initramfs_is_plain_qemus_machine() {
    same_machine_on(&board_models_qemu(), config(2, 2, "256M", false, true, "console=ttyAMA0"));
}

#[test]
fn on_the_board_models_qemu_gicv3_four_cpus_with_mte_is_plain_qemus_machine() {
    same_machine_on(&board_models_qemu(), config(3, 4, "1G", true, false, "z"));
}

/// Every combination of GIC, 1-8 CPUs and MTE (`--long`), on 129 MiB (an odd size), 512 MiB,
/// 2 GiB (the frame pool grows with RAM from there) and 4 GiB.
#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_every_virt_machine_is_plain_qemus() {
    for gic in [2, 3] {
        for smp in 1..=8 {
            for mte in [false, true] {
                let mem = ["129M", "512M", "2G", "4G"][smp as usize % 4];
                same_machine(config(gic, smp, mem, mte, smp % 2 == 0, "a b"));
            }
        }
    }
}

/// With `hyp.migrate` the hypervisor keeps the last CPU: the guest's tree lacks it (and its
/// `cpu-map` entry) and has the control page the migration is driven through; nothing else.
#[test]
fn a_cpu_the_hypervisor_keeps_is_the_only_cpu_difference() {
    let cfg = Launch { bootargs: "hyp.migrate".into(), ..config(3, 4, "256M", false, false, "m") };
    let v = under_hypervisor(qemu_binary(), &cfg);
    let (dtb, _) = plain(qemu_binary(), &cfg);
    let left = real(compare(&dtb, &v.dtb).unwrap());
    let ctl = left.iter().find(|l| l.starts_with("/chosen: bootargs")).cloned().unwrap_or_default();
    assert!(ctl.contains("\"m\" | \"m pgtlab_ctl=0x"), "{left:#?}");
    let rest: Vec<&str> = left.iter().filter(|l| **l != ctl).map(|l| l.as_str()).collect();
    assert_eq!(rest.len(), 3, "{left:#?}");
    assert_eq!(rest[0], "/cpus/cpu-map/socket0/cluster0/core3: only in the left tree", "{left:#?}");
    assert_eq!(rest[1], "/cpus/cpu@3: only in the left tree", "{left:#?}");
    assert!(rest[2].starts_with("/hyp-control@") && rest[2].ends_with(": only in the right tree"), "{left:#?}");
}
