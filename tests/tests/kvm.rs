//! The KVM path: the project's command line with `-accel kvm -cpu host`, on this arm64 host's
//! KVM (`cargo xtask test --accel kvm`) or inside the KVM host model (`xtask::supervise::kvm_model`:
//! Debian's arm64 Linux with KVM, `kvm-arm.mode=nested`, on QEMU 10's TCG; the default). Each run
//! is judged as any run; in the model, its Linux never decides one.
//!
//! The default run boots the kernel alone (in the model: about 10 s of model boot and inner run
//! on an idle machine, over a minute on a loaded one; the model is provisioned first, once:
//! about 50 MB downloaded). The rest are `--long` (`cargo xtask test --accel kvm` runs them all:
//! on real cores they take seconds). A run of the hypervisor on a KVM without EL2 (a Pi 5) must
//! be refused, with the way that works ([`boot_hypervisor`]).

use abi::exit;
use tests::kvm::{boot, boot_hypervisor, in_model, probe_record};
use tests::Config;

fn alone(smp: u32) -> Config {
    Config { no_hypervisor: true, smp, ..Config::default() }
}

#[test]
fn kvm_kernel_alone_brings_every_cpu_online() {
    let r = boot(alone(2));
    r.run.expect_exit(exit::SUCCESS as i32);
    assert!(r.run.outcome.output.contains("kernel: 2 of 2 CPUs online"), "{}", r.dump());
    let banner = r.run.records("banner");
    assert!(banner.iter().all(|b| b.u64("el") == Some(1) && b.bool("hypervisor") == Some(false)), "{}", r.dump());
    if in_model() {
        // The model's KVM gives guests an EL2 (the probe's record, on the model's console).
        let p = probe_record(&r.transcript).unwrap_or_else(|| panic!("no kvm_probe record\n{}", r.dump()));
        assert_ne!(p.str("el2"), Some("none"), "{}", r.dump());
        // The model's own Linux is on the transcript, never in the inner run's output.
        assert!(r.transcript.contains("VHE+NV2 mode initialized"), "{}", r.dump());
        assert!(!r.run.outcome.output.contains("kvm-model:") && !r.run.outcome.output.contains("kvm-probe:"));
    }
}

#[test]
#[ignore = "--long"]
fn long_kvm_hypervisor_and_kernel() {
    let Some(r) = boot_hypervisor(Config { smp: 2, ..Config::default() }) else { return };
    r.run.expect_exit(exit::SUCCESS as i32);
    r.run.expect_output("kernel: 2 of 2 CPUs online");
}

#[test]
#[ignore = "--long"]
fn long_kvm_self_tests_under_the_hypervisor() {
    // Not `smccc` nor `storm`: KVM's SMCCC answers SMCCC_ARCH_WORKAROUND_1 (0x80008000) with 0
    // while its SMCCC_ARCH_FEATURES says NOT_SUPPORTED, which both self-tests refuse. Not
    // `pmu`: a counter filtered to EL2 counts the guest's EL1 under KVM's nested PMU
    // (docs/kvm.md).
    let tests = "test=sve-state,bad-calls,mem-perms,irq,pan,percpu,memslot-nopool";
    let Some(r) = boot_hypervisor(Config { smp: 2, bootargs: tests.into(), ..Config::default() }) else { return };
    r.run.expect_exit(exit::SUCCESS as i32);
}

#[test]
#[ignore = "--long"]
fn long_kvm_bench_mprotect_under_the_hypervisor() {
    let cfg = Config { smp: 1, bootargs: "bench=mprotect mprotect.rounds=10".into(), ..Config::default() };
    let Some(r) = boot_hypervisor(cfg) else { return };
    r.run.expect_exit(exit::SUCCESS as i32);
    let rows = r.run.records("bench");
    assert!(rows.iter().any(|b| b.str("row") == Some("NONE->RW 512 pages")), "{}", r.dump());
}

#[test]
#[ignore = "--long"]
fn long_kvm_kernel_self_tests_alone() {
    let r = boot(Config { bootargs: "test=irq,pmu,mem-perms,percpu".into(), ..alone(2) });
    r.run.expect_exit(exit::SUCCESS as i32);
}

#[test]
#[ignore = "--long"]
fn long_kvm_linux_guest_under_the_hypervisor() {
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
    let Some(r) = boot_hypervisor(cfg) else { return };
    r.run.expect_exit(exit::SUCCESS as i32);
    r.run.expect_output(xtask::linux::MARKER);
}
