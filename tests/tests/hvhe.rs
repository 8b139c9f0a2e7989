//! The hypervisor in hVHE mode (HCR_EL2.E2H = 1, TGE = 0), forced with `hyp.e2h=1` on QEMU's
//! CPUs, where E2H is writable: the mode a CPU whose E2H is RES1 (KVM's virtual EL2, Apple
//! silicon) runs in. The scenarios that touch what the mode changes: the register layouts and
//! the EL2&0 table at boot on every CPU (GICv2 and GICv3), the guest's EL1 registers through
//! `*_EL12` (an injected abort), stage-2 TLB maintenance with E2H = 1 (dirty logging's splits and
//! write-protects, PSCI CPU_OFF/CPU_ON cycles), the hypervisor's own fault report, and Linux.

use tests::{boot, config, linux_config, Run};

/// The run ended `code` with EL2 in hVHE, as forced.
fn expect_hvhe(run: &Run, code: i32) {
    run.expect_exit(code);
    run.expect_output("hyp: EL2 runs hVHE (HCR_EL2.E2H = 1, TGE = 0): forced by hyp.e2h=1");
    if code == 0 {
        assert_eq!(run.record("hyp_features").str("el2_mode"), Some("hvhe-forced"), "{}", run.dump());
    }
}

#[test]
fn hvhe_boots_four_cpus_gicv3() {
    let run = boot(config(|c| {
        c.smp = 4;
        c.gic = 3;
        c.bootargs = "hyp.e2h=1 user=selftest".into();
    }));
    expect_hvhe(&run, 0);
    run.expect_output("kernel: 4 of 4 CPUs online");
    // CPTR_EL2 in CPACR_EL1's layout (FPEN, ZEN, SMEN), CNTHCTL_EL2's EL1 bits at 10/11.
    let f = run.record("hyp_features");
    assert_eq!(f.u64("cptr_el2"), Some(0x333_0000), "{}", run.dump());
    assert_eq!(f.u64("cnthctl_el2"), Some(0xc00), "{}", run.dump());
}

#[test]
fn hvhe_boots_four_cpus_gicv2() {
    let run = boot(config(|c| {
        c.smp = 4;
        c.gic = 2;
        c.cpu = "cortex-a76".into();
        c.bootargs = "hyp.e2h=1".into();
    }));
    expect_hvhe(&run, 0);
    run.expect_output("kernel: 4 of 4 CPUs online");
}

#[test]
fn hvhe_injects_an_abort_through_the_guests_el12_registers() {
    let run = boot(config(|c| c.bootargs = "hyp.e2h=1 test=stray-access".into()));
    expect_hvhe(&run, 0);
    run.expect_output(
        "kernel: stray access: synchronous external abort caught by the kernel's handler (ESR 0x96000010",
    );
    assert_eq!(run.record("hyp_exits").u64("injected_abort"), Some(1), "{}", run.dump());
}

#[test]
fn hvhe_psci_cycles_and_bad_calls() {
    let run =
        boot(config(|c| c.bootargs = "hyp.e2h=1 bbml2_test_disallow_cpu=2 test=cpu-cycle,smccc,bad-calls".into()));
    expect_hvhe(&run, 0);
    run.expect_output("kernel: cpu-cycle: 8 CPU_OFF/CPU_ON cycles of CPU 0x2");
}

#[test]
fn hvhe_dirty_bitmaps_are_exact() {
    let run = boot(config(|c| {
        c.smp = 2;
        c.mem = Some(tests::mem("3G"));
        c.bootargs = "hyp.e2h=1 test=dirty-log hyp.slotpool=1G hyp.check-split".into();
    }));
    expect_hvhe(&run, 0);
    run.expect_output("kernel: dirty-log: every bitmap matched exactly");
}

#[test]
fn hvhe_reports_the_hypervisors_own_fault() {
    let run = boot(config(|c| c.bootargs = "hyp.e2h=1 hyp.test=el2-fault".into()));
    expect_hvhe(&run, abi::exit::HYP_FAULT as i32);
    run.expect_output("EC 0x25 (data abort at the current EL)");
    run.expect_output("FAR 0xdead0000");
}

#[test]
fn hvhe_linux_reaches_user_space_and_gets_a_bus_error() {
    let run = boot(linux_config("pgtlab_test=stray", |c| {
        c.cpu = "cortex-a76".into();
        c.smp = 2;
        c.bootargs = "hyp.e2h=1".into();
    }));
    expect_hvhe(&run, 0);
    run.expect_output(xtask::linux::MARKER);
    assert_eq!(run.record("linux_stray").u64("status"), Some(128 + 7), "SIGBUS\n{}", run.dump());
}

#[test]
fn hyp_e2h_on_a_cpu_without_vhe_runs_nvhe_and_says_so() {
    // Cortex-A72 is Armv8.0: no FEAT_VHE, E2H stays 0.
    let run = boot(config(|c| {
        c.cpu = "cortex-a72".into();
        c.smp = 2;
        c.bootargs = "hyp.e2h=1".into();
    }));
    run.expect_exit(0);
    run.expect_output("hyp: warning: hyp.e2h=1 on a CPU without FEAT_VHE: E2H stays 0");
    run.expect_output("hyp: EL2 runs nVHE (HCR_EL2.E2H = 0)");
    assert_eq!(run.record("hyp_features").str("el2_mode"), Some("nvhe"), "{}", run.dump());
}
