//! The Pi 5's paths on QEMU: `-cpu cortex-a76 -M virt,gic-version=2` (GIC-400's version), 4
//! CPUs, PSCI over SMC, with QEMU's own device tree changed the way a board's differs: it does not
//! say it is QEMU (`linux,dummy-virt`: nothing may depend on knowing it; every run ends as on a
//! board, final `@@exit` line, then PSCI SYSTEM_OFF to the firmware, here QEMU's), and firmware
//! memory at the bottom of RAM is reserved `no-map`, like TF-A's on the Pi 5, so the hypervisor
//! must keep it out of everything.
//! 4 GiB here, 8 GiB under `--long`.

use board::{guest_dtb, Board, GuestSpec, Region};
use tests::{boot_with, config, qemu_dtb, Run};
use xtask::launch::Launch;

/// Stand-in for TF-A's memory: the first 512 KiB of RAM.
const FIRMWARE: u64 = 0x8_0000;

/// QEMU's DTB for `cfg` as a board's: not QEMU's compatible, firmware memory no-map.
fn board_dtb(cfg: &Launch) -> (Vec<u8>, Region) {
    let dtb = qemu_dtb(cfg);
    let b = Board::from_dtb(&dtb).unwrap();
    let ram = b.memory[0];
    let fw = Region::new(ram.base, FIRMWARE);
    let spec = GuestSpec { memory: b.memory.clone(), reserved: vec![fw], bootargs: None, ..Default::default() };
    let mut out = guest_dtb(&dtb, &spec).unwrap();
    // The root's model and compatible, in place (same length): a board, not QEMU's `virt`.
    let from = b"linux,dummy-virt\0";
    while let Some(at) = out.windows(from.len()).position(|w| w == from) {
        out[at..at + from.len()].copy_from_slice(b"pgtlab,as-board\0\0");
    }
    assert!(!Board::from_dtb(&out).unwrap().compatible.iter().any(|c| c == "linux,dummy-virt"));
    (out, fw)
}

fn boot_as_board(cfg: Launch) -> (Run, Region) {
    let (dtb, fw) = board_dtb(&cfg);
    let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "as-board-{}-{}-{}.dtb",
        cfg.mem.map_or("default".into(), |m| m.to_string()),
        cfg.smp,
        std::process::id()
    ));
    std::fs::write(&file, dtb).unwrap();
    let run = boot_with(cfg, &["-dtb".into(), file.display().to_string(), "-no-reboot".into()]);
    let _ = std::fs::remove_file(&file);
    (run, fw)
}

/// The last line of the console.
fn final_line(run: &Run) -> Option<u32> {
    run.outcome
        .output
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("qemu-system"))
        .and_then(abi::exit::parse_final_line)
}

fn pi5_paths(mem: &str) {
    let cfg = config(|c| {
        c.cpu = "cortex-a76".into();
        c.gic = 2;
        c.smp = 4;
        c.mem = Some(tests::mem(mem));
    });
    let (run, fw) = boot_as_board(cfg);
    // Ended by PSCI SYSTEM_OFF (QEMU's status 0), with the run's code in the final line.
    run.expect_exit(0);
    assert_eq!(final_line(&run), Some(0), "the final line carries the code\n{}", run.dump());
    run.expect_output("kernel: 4 of 4 CPUs online");
    run.expect_output("PSCI over Smc");
    // The firmware's memory is nobody's: not the guest's RAM, not the hypervisor's.
    // The hypervisor moved itself to the top of RAM: the guest's RAM is one range from there.
    run.expect_output(&format!("hyp: guest RAM [{:#x}, ", fw.end()));
    let hyp = run.record("hyp_boot");
    assert_eq!(
        hyp.u64s("guest_ram").map(|r| r.len()),
        Some(2),
        "one range
{}",
        run.dump()
    );
    // --mem is what the memory nodes give the guest: the firmware's no-map part is in it (it is
    // the same on plain QEMU with this DTB), the hypervisor's share on top.
    let guest = hyp.u64("guest_ram_bytes").unwrap();
    assert_eq!(guest + FIRMWARE, tests::mem(mem).bytes(), "{}", run.dump());
    for b in run.records("banner") {
        assert_eq!(b.str("core"), Some("Cortex-A76"));
        assert_eq!(b.bool("bbml2"), Some(false), "the A76 has no BBML2: PTE-only linear map");
        assert_eq!(b.u64("mem_mib"), Some(guest >> 20));
    }
    // Secondary CPUs came up through PSCI CPU_ON over SMC (trapped, forwarded to the firmware
    // by SMC); the one HVC is the kernel's first act, asking EL2 who it is
    // (`power::probe_hypervisor`, before the DTB names a conduit).
    let exits = run.record("hyp_exits");
    assert!(exits.u64("smc").unwrap() >= 3 && exits.u64("psci").unwrap() >= 3, "{}", run.dump());
    assert_eq!(exits.u64("hvc"), Some(1), "{}", run.dump());
}

#[test]
fn pi5_paths_4g() {
    pi5_paths("4G");
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn pi5_paths_8g() {
    pi5_paths("8G");
}

/// A failing guest on a board: QEMU (the firmware) just powers off with status 0, so the code
/// reaches the host only through the final line.
#[test]
fn a_failure_on_a_board_is_told_by_the_final_line() {
    let cfg = config(|c| {
        c.cpu = "cortex-a76".into();
        c.gic = 2;
        c.smp = 1;
        c.mem = Some(tests::mem("512M"));
        c.bootargs = "test=panic".into();
    });
    let (run, _) = boot_as_board(cfg);
    assert_eq!(run.outcome.code, Some(0), "the firmware powers off with 0\n{}", run.dump());
    run.expect_output("kernel: PANIC");
    assert_eq!(final_line(&run), Some(abi::exit::GUEST_PANIC), "{}", run.dump());
    // And the run's verdict (as `cargo xtask run` gives it) is the final line's.
    run.expect_exit(abi::exit::GUEST_PANIC as i32);
}
