//! QEMU's models of real boards, each booted from the board's own DTB (Debian's backports
//! kernel package) on the QEMU it needs (`xtask::provision::qemu_pkg`): the Raspberry Pi 4B (`raspi4b`:
//! spin-table CPUs, no PSCI firmware, GIC-400, the mini UART), the ZCU102 (`xlnx-zcu102`:
//! PSCI over SMC, GIC-400, Cadence UART) and the i.MX 8M Plus EVK (`imx8mp-evk`: GICv3, i.MX
//! UART). On each: the hypervisor and the kernel at 1 and 4 CPUs, the kernel's self-tests and
//! `user=selftest`, and Debian's Linux to its user-space marker with a quiet console UART.
//! `--long` adds the dirty-log self-test (on the Pi 4 without its 1 GiB backing: the model's
//! RAM is 960 MiB). A board whose QEMU or DTB cannot be had fails
//! with the reason.

use tests::{board_linux_config, boot, Run};
use xtask::launch::Launch;
use xtask::machine::Machine;

fn cfg(board: &'static Machine, f: impl FnOnce(&mut Launch)) -> Launch {
    let mut c = Launch::for_machine(board);
    f(&mut c);
    c
}

/// The hypervisor and the kernel with `cpus` CPUs: the board's model name, the console the
/// DTB names, every CPU online at EL1, a clean power-off with one final line.
fn hyp_and_kernel(board: &'static Machine, cpus: u32) -> Run {
    hyp_and_kernel_with(board, cpus, None)
}

/// [`hyp_and_kernel`] with the guest's RAM `mem` (`--mem`; `None`: the board's default).
fn hyp_and_kernel_with(board: &'static Machine, cpus: u32, mem: Option<xtask::machine::Size>) -> Run {
    let run = boot(cfg(board, |c| {
        c.mem = mem;
        match board.model().smp {
            xtask::machine::Smp::Fixed(n) if cpus < n => c.bootargs = format!("hyp.cpus={cpus}"),
            _ => c.smp = cpus,
        }
    }));
    run.expect_exit(0);
    run.expect_output(&format!("kernel: {cpus} of {cpus} CPUs online"));
    let finals = run.outcome.output.lines().filter(|l| abi::exit::parse_final_line(l).is_some()).count();
    assert_eq!(finals, 1, "one final line\n{}", run.dump());
    let hyp = run.record("hyp_boot");
    assert_eq!(hyp.u64("guest_cpus"), Some(cpus as u64), "{}", run.dump());
    let banners = run.records("banner");
    assert_eq!(banners.len(), cpus as usize, "{}", run.dump());
    assert!(banners.iter().all(|b| b.u64("el") == Some(1) && b.bool("hypervisor") == Some(true)), "{}", run.dump());
    run
}

fn model(run: &Run, name: &str, core: &str) {
    run.expect_output(&format!("CPUs, {name}"));
    assert!(run.records("banner").iter().all(|b| b.str("core") == Some(core)), "{}", run.dump());
}

#[test]
fn pi4_hypervisor_and_kernel_4_cpus() {
    // Spin-table CPUs released by the hypervisor, the guest on its PSCI; power-off by the PM
    // watchdog (no PSCI firmware on the Pi 4).
    let r = hyp_and_kernel(tests::machine("pi4"), 4);
    model(&r, "Raspberry Pi 4 Model B", "Cortex-A72");
    // Taken at boot, they wait for CPU_ON in WFI (QEMU halts their threads), woken by an SGI.
    r.expect_output("hyp: 3 CPUs taken from the spin table: they wait in WFI for the guest's CPU_ON");
    // The spin-table page (0..4 KiB, where QEMU's and the firmware's spin loop lives) is not
    // the guest's.
    let ram = r.record("hyp_boot");
    assert_eq!(ram.strs("guest_ram").and_then(|v| v.first().copied()), Some("0x1000"), "{}", r.dump());
}

/// The PM watchdog powers the Pi 4 off at the end of the run: it is the hypervisor's. The guest's
/// DTB has its node disabled, its registers are not in stage 2 (`hyp.check-stage2` walks them),
/// and the guest's read of them comes back as an external abort; the run still ends by the
/// watchdog, exit 0.
#[test]
fn pi4_power_controller_is_the_hypervisors() {
    let r = boot(cfg(tests::machine("pi4"), |c| c.bootargs = "test=power-hidden hyp.check-stage2".into()));
    r.expect_exit(0);
    r.expect_output("hyp: check-stage2: /soc/watchdog@7e100000 [0xfe100000, 0xfe101000) is the hypervisor's");
    r.expect_output("hyp: guest read at IPA 0xfe10001c");
    r.expect_output("kernel: power-hidden: synchronous external abort caught by the kernel's handler (ESR 0x96000010");
    r.expect_output("kernel: power-hidden: /soc/watchdog@7e100000 is disabled and its registers are the hypervisor's");
    assert_eq!(r.record("hyp_exits").u64("injected_abort"), Some(1), "{}", r.dump());
}

/// A CPU turned off on a spin-table board, where no firmware takes it back: CPU 2 is left off
/// at boot (`cycle.cpu=2`: the A72 has no BBML2 to refuse it), released from the firmware's
/// spin table by the first CPU_ON, then parked in the hypervisor at each CPU_OFF and woken by
/// the next CPU_ON, 8 times, with AFFINITY_INFO answering ON and OFF and CPU_ON to a starting
/// CPU answering ON_PENDING or ALREADY_ON.
#[test]
fn pi4_cpu_off_and_on_by_the_hypervisor() {
    let r = boot(cfg(tests::machine("pi4"), |c| c.bootargs = "cycle.cpu=2 test=cpu-cycle".into()));
    r.expect_exit(0);
    r.expect_output("kernel: CPU 2 (MPIDR 0x2) left off at boot (cycle.cpu=2)");
    r.expect_output("kernel: 3 of 4 CPUs online");
    r.expect_output("kernel: cpu-cycle: 8 CPU_OFF/CPU_ON cycles of CPU 0x2");
    r.expect_output("AFFINITY_INFO answered ON and OFF");
}

#[test]
fn pi4_hypervisor_and_kernel_1_cpu() {
    let r = hyp_and_kernel(tests::machine("pi4"), 1);
    // Not the guest's, so never started, but out of the firmware's busy WFE loop all the same.
    r.expect_output(
        "hyp: 3 CPUs taken from the spin table: they wait in WFI, 0 for the guest's CPU_ON, 3 for good \
         (not the guest's)",
    );
}

#[test]
fn zcu102_hypervisor_and_kernel_4_cpus() {
    let r = hyp_and_kernel(tests::machine("zcu102"), 4);
    model(&r, "ZynqMP ZCU102 Rev1.0", "Cortex-A53");
}

/// With `--mem 1G` on a board whose device tree keeps firmware memory from every kernel
/// (`no-map`): the xtask says how much of the guest's RAM that is, and the kernel counts
/// exactly the rest.
#[test]
fn zcu102_hypervisor_and_kernel_1_cpu() {
    let board = tests::machine("zcu102");
    let mut c = cfg(board, |c| c.mem = Some(tests::mem("1G")));
    c.resolve_dtb().unwrap();
    let m = c.machine_mem(tests::images()).unwrap();
    assert_eq!(m.guest, 1 << 30);
    assert!(m.withheld > 0 && m.withheld < 1 << 20, "the ZCU102's no-map firmware regions: {m:?}");
    assert!(m.describe().contains(&format!("keeps {} KiB", m.withheld >> 10)), "{}", m.describe());
    let run = hyp_and_kernel_with(board, 1, Some(tests::mem("1G")));
    let banners = run.records("banner");
    let kib = (m.guest - m.withheld) >> 10;
    assert!(banners.iter().all(|b| b.u64("mem_mib") == Some(kib >> 10)), "{kib} KiB\n{}", run.dump());
}

#[test]
fn imx8mp_evk_hypervisor_and_kernel_4_cpus() {
    // QEMU makes as many CPUs as -smp says (the xtask always passes it): with the default 1,
    // its PSCI refuses CPU_ON for CPUs 1-3.
    let r = hyp_and_kernel(tests::machine("imx8mp-evk"), 4);
    model(&r, "NXP i.MX8MPlus EVK board", "Cortex-A53");
}

/// With `--mem` too: on a board it is the guest's RAM exactly, as on `virt` (the machine is
/// sized for it with the hypervisor's share and the board's reservations on top).
#[test]
fn imx8mp_evk_hypervisor_and_kernel_1_cpu() {
    let run = hyp_and_kernel_with(tests::machine("imx8mp-evk"), 1, Some(tests::mem("1G")));
    let banners = run.records("banner");
    assert!(banners.iter().all(|b| b.u64("mem_mib") == Some(1024)), "--mem 1G\n{}", run.dump());
}

/// The kernel's self-tests (SMCCC rules, bad calls, memory permissions, interrupts on the
/// board's GIC, PAN, the call storm from every CPU) and the EL0 self-test program.
fn selftests(board: &'static Machine) {
    let r = boot(cfg(board, |c| c.bootargs = "test=smccc,bad-calls,mem-perms,irq,pan,storm user=selftest".into()));
    r.expect_exit(0);
    let checks = r.records("check");
    let failed: Vec<_> = checks.iter().filter(|c| c.bool("ok") != Some(true)).map(|c| c.str("check")).collect();
    assert!(failed.is_empty(), "failed checks: {failed:?}\n{}", r.dump());
    assert!(!checks.is_empty(), "{}", r.dump());
    r.expect_output("kernel: mem-perms: 29 checks passed");
    let gic = format!("GICv{}", board.model().default_gic());
    r.expect_output(&format!("kernel: irq: {gic}, 4 CPUs"));
}

#[test]
fn pi4_selftests() {
    selftests(tests::machine("pi4"));
}

#[test]
fn zcu102_selftests() {
    selftests(tests::machine("zcu102"));
}

#[test]
fn imx8mp_evk_selftests() {
    selftests(tests::machine("imx8mp-evk"));
}

/// Debian's Linux (6.12 backports) under the hypervisor to its user-space marker, on every CPU
/// and all the RAM the hypervisor gave it, then PSCI SYSTEM_OFF through the hypervisor.
fn linux(board: &'static Machine) {
    let r = boot(board_linux_config(board, ""));
    r.expect_exit(0);
    r.expect_output(xtask::linux::MARKER);
    let l = r.record("linux_guest");
    assert_eq!(l.u64("cpus"), Some(4), "{}", r.dump());
    // The console UART's interrupt: a few dozen at the marker (only /init's first lines go
    // through it), not a storm (Pi 4 at 115200: QEMU's mini UART kept its THR-empty interrupt
    // raised behind the driver's back, ~10^6 interrupts on CPU 0 before user space).
    let irqs = l.i64("console_irqs").unwrap_or_else(|| panic!("no console_irqs: {}", r.dump()));
    // -1: no console tty with an interrupt (the ZCU102's ttyPS0 never registers: Linux keeps
    // its early console, `keep_bootcon`).
    if !board.model().linux.console.contains("keep_bootcon") {
        assert!(irqs >= 0, "/init found no interrupt for the console's tty: {}", r.dump());
    }
    assert!(irqs < CONSOLE_IRQS_MAX, "the console UART took {irqs} interrupts by the marker: {}", r.dump());
    r.expect_output("hyp: guest called PSCI SYSTEM_OFF");
}

/// At most this many console interrupts by the marker: a working console takes a few per line
/// /init writes; a stuck level interrupt takes this many within a second of guest time.
const CONSOLE_IRQS_MAX: i64 = 10_000;

#[test]
fn imx8mp_evk_linux_guest() {
    linux(tests::machine("imx8mp-evk"));
}

#[test]
fn zcu102_linux_guest() {
    linux(tests::machine("zcu102"));
}

#[test]
fn pi4_linux_guest() {
    linux(tests::machine("pi4"));
}

/// Dirty logging (1 GiB slots backed by the slot pool) on the board's CPUs and stage 2, the
/// guest given all the model holds beside the hypervisor and its 1 GiB slot pool. The
/// Pi 4's model has 960 MiB of RAM for its guest: too little for the test's 1 GiB slot
/// (`long_pi4_dirty_log` tests the 4 KiB and 2 MiB backings there).
fn dirty_log(board: &'static Machine) {
    let r = boot(cfg(board, |c| {
        c.bootargs = "test=dirty-log hyp.slotpool=1G hyp.check-split".into();
    }));
    r.expect_exit(0);
}

#[test]
#[ignore = "--long"]
fn long_zcu102_dirty_log() {
    dirty_log(tests::machine("zcu102"));
}

#[test]
#[ignore = "--long"]
fn long_imx8mp_evk_dirty_log() {
    dirty_log(tests::machine("imx8mp-evk"));
}

#[test]
#[ignore = "--long"]
fn long_pi4_dirty_log() {
    let r = boot(cfg(tests::machine("pi4"), |c| {
        c.bootargs = "test=dirty-log dirty.largest=2M hyp.slotpool=128M hyp.check-split".into();
    }));
    r.expect_exit(0);
    r.expect_output("kernel: dirty-log: every bitmap matched exactly");
    let backings: Vec<_> = r.records("dirty_log").iter().map(|d| d.str("backing").map(String::from)).collect();
    assert_eq!(backings.len(), 6, "4K and 2M, three scenarios each: {}", r.dump());
    assert!(backings.iter().all(|b| matches!(b.as_deref(), Some("4K" | "2M"))), "{}", r.dump());
}

/// What a board's model cannot be is refused before QEMU starts, naming the board.
#[test]
fn boards_refuse_what_their_model_lacks() {
    let e = Launch { smp: 2, ..Launch::for_machine(tests::machine("pi4")) }.validate().unwrap_err().0;
    assert!(e.contains("always has 4 CPUs"), "{e}");
    let e = Launch { gic: 3, ..Launch::for_machine(tests::machine("zcu102")) }.validate().unwrap_err().0;
    assert!(e.contains("GICv2"), "{e}");
}
