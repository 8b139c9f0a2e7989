//! Entered by a hostile boot loader: QEMU boots the test guest at EL2 as a shim
//! (`testguest=entry-el2` / `entry-el1`, `testguest/src/entry.rs`), which leaves the control
//! registers in states the Linux arm64 boot protocol allows but a pristine QEMU never shows
//! (traps of FP/SIMD/SVE/SME, debug and PMU, timers and counters; HCR_EL2 with E2H and TGE;
//! 128-bit vector lengths; a nonzero CNTVOFF_EL2; garbage vectors, stage-2 root, translation
//! registers; EL1 with software step armed, FP trapped, timers firing, the thread stack pointer
//! selected), then enters the Image QEMU's loader put at [`NEXT`] as the protocol says. Each
//! binary must write every control register it relies on: the run must end with every CPU
//! online and exit 0. The hypervisor starts its other CPUs through QEMU's PSCI (CPU_ON resets
//! them): only its boot CPU sees the hostile state; the kernel alone at EL1 gets every CPU
//! hostile (the shim stays at EL2 and starts them itself).

use std::path::Path;
use tests::{boot_edited_on, config, Run};
use xtask::launch::Launch;

/// Where the shim finds the Image it enters: 2 MiB aligned, clear of the shim (QEMU's `-kernel`
/// at RAM base + 2 MiB), the initrd and the DTB (from RAM base + 128 MiB with 1 GiB of RAM).
const NEXT: u64 = 0x4400_0000;

/// Boots `cfg` with the test guest as its `-kernel` in `mode` (plus `words`), and what `cfg`
/// would have booted (the hypervisor, or the kernel alone) loaded raw at [`NEXT`]; the shim's
/// words go before the `pgtlab` marker, the next Image's after it.
fn through_shim(cfg: Launch, mode: &str, words: &str) -> Run {
    through_shim_on(&tests::qemu_for(cfg.machine), cfg, mode, words)
}

/// [`through_shim`] on the QEMU binary `qemu`.
fn through_shim_on(qemu: &Path, cfg: Launch, mode: &str, words: &str) -> Run {
    let shim = xtask::build::testguest_image();
    boot_edited_on(qemu, cfg, |a| {
        let k = a.iter().position(|x| x == "-kernel").expect("-kernel") + 1;
        let next = std::mem::replace(&mut a[k], shim.display().to_string());
        a.extend(["-device".into(), format!("loader,file={next},addr={NEXT:#x},force-raw=on")]);
        let shim_words = format!("testguest={mode} testguest.next={NEXT:#x} {words} pgtlab");
        match a.iter().position(|x| x == "-append") {
            Some(i) => a[i + 1] = format!("{shim_words} {}", a[i + 1]),
            None => a.extend(["-append".into(), shim_words]),
        }
    })
}

/// The run passed through the shim and ended well with every CPU online.
fn expect_all_online(run: &Run, smp: u32) {
    run.expect_output("testguest: entering 0x44000000");
    run.expect_exit(0);
    run.expect_output(&format!("kernel: {smp} of {smp} CPUs online"));
}

#[test]
fn hypervisor_entered_with_e2h_tge_and_every_trap_set() {
    let run = through_shim(
        config(|c| {
            c.smp = 4;
            c.gic = 3;
            c.bootargs = "user=selftest".into();
        }),
        "entry-el2",
        "",
    );
    expect_all_online(&run, 4);
    let shim = run.record("entry_shim");
    assert_eq!(shim.u64("hcr_el2").map(|h| h >> 34 & 1), Some(1), "E2H set by the shim\n{}", run.dump());
    // E2H is writable on QEMU's max: the hypervisor cleared what the shim left.
    assert_eq!(run.record("hyp_features").str("el2_mode"), Some("nvhe"), "{}", run.dump());
}

#[test]
fn hypervisor_entered_with_tge_and_every_trap_set_gicv2() {
    let run = through_shim(
        config(|c| {
            c.smp = 4;
            c.gic = 2;
            c.bootargs = "user=selftest".into();
        }),
        "entry-el2",
        "testguest.e2h=0",
    );
    expect_all_online(&run, 4);
    assert_eq!(run.record("entry_shim").u64("hcr_el2").map(|h| h >> 34 & 1), Some(0), "{}", run.dump());
}

/// QEMU 10's `max` has FEAT_FGT (7.2's has not): the shim leaves every fine-grained trap
/// register 0 (their `n` bits trap), the hypervisor, forced to hVHE, writes them back.
#[test]
fn hypervisor_entered_with_fine_grained_traps_set_on_qemu_10() {
    let run = through_shim_on(
        &tests::board_models_qemu(),
        config(|c| {
            c.smp = 2;
            // sve-state reaches SME's TPIDR2_EL0, behind a fine-grained trap.
            c.bootargs = "hyp.e2h=1 test=sve-state user=selftest".into();
        }),
        "entry-el2",
        "",
    );
    expect_all_online(&run, 2);
    run.expect_output("kernel: sve-state: TPIDR2_EL0 survived an HVC");
    let f = run.record("hyp_features");
    assert_eq!(f.bool("fgt"), Some(true), "{}", run.dump());
    assert_eq!(f.str("el2_mode"), Some("hvhe-forced"), "{}", run.dump());
}

#[test]
fn hypervisor_forced_to_hvhe_from_a_hostile_entry() {
    let run = through_shim(
        config(|c| {
            c.smp = 2;
            c.bootargs = "hyp.e2h=1 user=selftest".into();
        }),
        "entry-el2",
        "",
    );
    expect_all_online(&run, 2);
    assert_eq!(run.record("hyp_features").str("el2_mode"), Some("hvhe-forced"), "{}", run.dump());
}

/// Every CPU hostile: the shim stays at EL2 as the kernel's firmware, forwards its PSCI calls
/// and starts each CPU through itself (QEMU's PSCI alone would start them at EL2).
#[test]
fn kernel_alone_entered_at_el1_with_hostile_el1_state() {
    let run = through_shim(
        config(|c| {
            c.smp = 4;
            c.kernel_at_el2 = true;
            // A task on every CPU: EL0 runs on the CPUs the shim started too.
            c.bootargs = "user=selftest+stale:rounds=5".into();
        }),
        "entry-el1",
        "",
    );
    expect_all_online(&run, 4);
    let started = run.outcome.output.lines().filter(|l| l.starts_with("testguest: CPU ")).count();
    assert_eq!(started, 3, "CPUs 1-3 through the shim\n{}", run.dump());
    assert_eq!(run.record("entry_shim").str("enters"), Some("el1"), "{}", run.dump());
}
