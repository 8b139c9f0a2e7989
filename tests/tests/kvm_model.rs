//! The KVM path (`--accel kvm`) in the KVM host model (`xtask::kvm_model`): Debian's arm64
//! Linux with KVM (`kvm-arm.mode=nested`) on QEMU 10's TCG runs the project's command line with
//! `-accel kvm -cpu host`. Each run is judged by the inner run's own final line; the model's
//! Linux never decides one, and a model that cannot run the inner QEMU fails with the reason.
//!
//! The default run boots the kernel alone (about 10 s of model boot and inner run on an idle
//! machine, over a minute on a loaded one; the model is provisioned first, once: about 50 MB
//! downloaded). The rest are `--long`.

use abi::exit;
use tests::kvm_model::{boot, model, probe_record, try_boot_in};
use tests::Config;

fn alone(smp: u32) -> Config {
    Config { no_hypervisor: true, smp, ..Config::default() }
}

#[test]
fn kvm_model_kernel_alone_brings_every_cpu_online() {
    let r = boot(alone(2));
    r.run.expect_exit(exit::SUCCESS as i32);
    assert!(r.run.outcome.output.contains("kernel: 2 of 2 CPUs online"), "{}", r.dump());
    // The model's KVM gives guests an EL2 (the probe's record, on the model's console).
    let p = probe_record(&r.transcript).unwrap_or_else(|| panic!("no kvm_probe record\n{}", r.dump()));
    assert_ne!(p.str("el2"), Some("none"), "{}", r.dump());
    // The model's own Linux is on the transcript, never in the inner run's output.
    assert!(r.transcript.contains("VHE+NV2 mode initialized"), "{}", r.dump());
    assert!(!r.run.outcome.output.contains("kvm-model:") && !r.run.outcome.output.contains("kvm-probe:"));
    let banner = r.run.records("banner");
    assert!(banner.iter().all(|b| b.u64("el") == Some(1) && b.bool("hypervisor") == Some(false)), "{}", r.dump());
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_hypervisor_and_kernel() {
    let r = boot(Config { smp: 2, ..Config::default() });
    r.run.expect_exit(exit::SUCCESS as i32);
    r.run.expect_output("kernel: 2 of 2 CPUs online");
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_self_tests_under_the_hypervisor() {
    // Not `smccc` nor `storm`: KVM's SMCCC answers SMCCC_ARCH_WORKAROUND_1 (0x80008000) with 0
    // while its SMCCC_ARCH_FEATURES says NOT_SUPPORTED, which both self-tests refuse. Not
    // `pmu`: a counter filtered to EL2 counts the guest's EL1 under KVM's nested PMU
    // (docs/kvm.md).
    let tests = "test=sve-state,bad-calls,mem-perms,irq,pan,percpu,memslot-nopool";
    let r = boot(Config { smp: 2, bootargs: tests.into(), ..Config::default() });
    r.run.expect_exit(exit::SUCCESS as i32);
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_bench_mprotect_under_the_hypervisor() {
    let r = boot(Config { smp: 1, bootargs: "bench=mprotect mprotect.rounds=10".into(), ..Config::default() });
    r.run.expect_exit(exit::SUCCESS as i32);
    let rows = r.run.records("bench");
    assert!(rows.iter().any(|b| b.str("row") == Some("NONE->RW 512 pages")), "{}", r.dump());
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_kernel_self_tests_alone() {
    let r = boot(Config { bootargs: "test=irq,pmu,mem-perms,percpu".into(), ..alone(2) });
    r.run.expect_exit(exit::SUCCESS as i32);
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_a_host_without_nested_virtualisation_refuses_the_hypervisor() {
    // The model's Linux without kvm-arm.mode=nested: KVM runs, with no EL2 for guests.
    let mut m = model().clone();
    m.outer_append = m.outer_append.replace(" kvm-arm.mode=nested", "");
    let (e, t) = match try_boot_in(&m, Config { smp: 2, ..Config::default() }) {
        Err(x) => x,
        Ok(r) => panic!("ran: {}", r.dump()),
    };
    assert_eq!(xtask::error::code_of(&e), exit::USAGE, "{e:#}\n{t}");
    let msg = format!("{e:#}");
    assert!(msg.starts_with("this host's KVM offers no EL2") && msg.contains("--no-hypervisor"), "{msg}\n{t}");
    assert!(t.contains("kvm-probe: EL2 for guests: no"), "{t}");
    // The same host runs the kernel alone.
    let r = try_boot_in(&m, alone(1)).unwrap_or_else(|(e, t)| panic!("{e:#}\n{t}"));
    r.run.expect_exit(exit::SUCCESS as i32);
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_without_kvm_fails_saying_so() {
    let mut m = model().clone();
    m.outer_append = m.outer_append.replace("kvm-arm.mode=nested", "kvm-arm.mode=none");
    let r = try_boot_in(&m, alone(1)).unwrap_or_else(|(e, t)| panic!("{e:#}\n{t}"));
    let v = r.run.verdict();
    assert_eq!(v.code, exit::QEMU_REFUSED, "{v}\n{}", r.dump());
    assert!(v.reason.contains("no KVM in the model's Linux"), "{v}");
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_the_inner_qemu_s_refusal_is_the_run_s() {
    // The model's GIC is a GICv3 without GICv2 compatibility: KVM has no GICv2 to give.
    let r = boot(Config { gic: 2, ..alone(1) });
    let v = r.run.verdict();
    assert_eq!(v.code, exit::QEMU_REFUSED, "{v}\n{}", r.dump());
    assert_eq!(v.reason, "QEMU refused: qemu-system-aarch64: KVM does not support GICv2 emulation", "QEMU's own: {v}");
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_linux_guest_under_the_hypervisor() {
    let l = tests::linux_guest().unwrap_or_else(|e| panic!("the Linux guest is not available: {e}"));
    let cfg = Config {
        smp: 2,
        guest: Some(xtask::launch::Guest {
            kernel: l.kernel,
            initrd: Some(l.initramfs),
            append: xtask::linux::DEFAULT_APPEND.to_string(),
        }),
        ..Config::default()
    };
    let r = boot(cfg);
    r.run.expect_exit(exit::SUCCESS as i32);
    r.run.expect_output(xtask::linux::MARKER);
}
