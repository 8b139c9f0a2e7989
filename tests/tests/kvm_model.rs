//! The KVM host model itself (`xtask::supervise::kvm_model`): a host whose KVM gives no EL2,
//! a Linux without KVM, and QEMU's own refusal inside it. All `--long`.

use abi::exit;
use tests::kvm::{model, try_boot_in};
use tests::Config;

fn alone(smp: u32) -> Config {
    Config { no_hypervisor: true, smp, ..Config::default() }
}

/// These run inside the model whatever `XTASK_TEST_ACCEL` says (they change the model).
fn in_model() {
    assert!(tests::kvm::in_model(), "the KVM host model's own tests run with --accel kvm-model");
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_a_host_without_nested_virtualisation_refuses_the_hypervisor() {
    in_model();
    // The model's Linux without kvm-arm.mode=nested: KVM runs, with no EL2 for guests.
    let mut m = model().clone();
    m.outer_append = m.outer_append.replace(" kvm-arm.mode=nested", "");
    let (e, t) = match try_boot_in(Some(&m), Config { smp: 2, ..Config::default() }) {
        Err(x) => x,
        Ok(r) => panic!("ran: {}", r.dump()),
    };
    assert_eq!(xtask::error::code_of(&e), exit::USAGE, "{e:#}\n{t}");
    let msg = format!("{e:#}");
    assert!(msg.starts_with("this host's KVM offers no EL2") && msg.contains("--no-hypervisor"), "{msg}\n{t}");
    assert!(t.contains("kvm-probe: EL2 for guests: no"), "{t}");
    // The same host runs the kernel alone.
    let r = try_boot_in(Some(&m), alone(1)).unwrap_or_else(|(e, t)| panic!("{e:#}\n{t}"));
    r.run.expect_exit(exit::SUCCESS as i32);
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_without_kvm_fails_saying_so() {
    in_model();
    let mut m = model().clone();
    m.outer_append = m.outer_append.replace("kvm-arm.mode=nested", "kvm-arm.mode=none");
    let r = try_boot_in(Some(&m), alone(1)).unwrap_or_else(|(e, t)| panic!("{e:#}\n{t}"));
    let v = r.run.verdict();
    assert_eq!(v.code, exit::QEMU_REFUSED, "{v}\n{}", r.dump());
    assert!(v.reason.contains("no KVM in the model's Linux"), "{v}");
}

#[test]
#[ignore = "--long"]
fn long_kvm_model_the_inner_qemu_s_refusal_is_the_run_s() {
    in_model();
    // The model's GIC is a GICv3 without GICv2 compatibility: KVM has no GICv2 to give.
    let r = try_boot_in(Some(model()), Config { gic: 2, ..alone(1) }).unwrap_or_else(|(e, t)| panic!("{e:#}\n{t}"));
    let v = r.run.verdict();
    assert_eq!(v.code, exit::QEMU_REFUSED, "{v}\n{}", r.dump());
    assert_eq!(v.reason, "QEMU refused: qemu-system-aarch64: KVM does not support GICv2 emulation", "QEMU's own: {v}");
}
