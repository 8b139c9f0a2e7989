//! Failures must be loud: each ends the run with its own non-zero exit code and a report.

use tests::{boot, config};

#[test]
fn guest_panic_is_reported_and_fails_the_run() {
    let run = boot(config(|c| c.bootargs = "test=panic".into()));
    run.expect_exit(abi::exit::GUEST_PANIC as i32);
    run.expect_output("kernel: PANIC");
    run.expect_output("deliberate panic (test=panic)");
    run.expect_output("kernel: backtrace:");
}

#[test]
fn guest_undefined_instruction_is_reported() {
    let run = boot(config(|c| c.bootargs = "test=undef".into()));
    run.expect_exit(abi::exit::GUEST_EXCEPTION as i32);
    run.expect_output("kernel: FATAL: unexpected synchronous exception");
    run.expect_output("EC 0x00 (unknown reason (undefined instruction))");
    run.expect_output("ELR 0x");
    // Which CPU and task, the interrupted SP and every register.
    run.expect_output("kernel:   CPU 0, task none");
    run.expect_output(" x30 0x");
    assert!(!run.outcome.output.contains("outside the kernel's text"), "{}", run.dump());
}

/// A return to address 1 (a corrupted frame record: the once-seen flake of
/// `percpu::stress_on_8_cpus_booted_with_the_tables_off`): the report says it was a return,
/// where the stack was and every register, though the backtrace from x29 may be empty.
#[test]
fn guest_return_to_a_bad_address_is_reported_as_such() {
    let run = boot(config(|c| c.bootargs = "test=bad-return".into()));
    run.expect_exit(abi::exit::GUEST_EXCEPTION as i32);
    run.expect_output("EC 0x21 (instruction abort at the current EL)");
    run.expect_output("FAR 0x1 ELR 0x1 ");
    run.expect_output("kernel:   CPU 0, task none");
    run.expect_output(
        "ELR is outside the kernel's text: a return (RET) to it: x30 held it; x30 0x1 (outside the text)",
    );
}

#[test]
fn guest_touching_hypervisor_memory_is_stopped_with_the_ipa() {
    // hyp.on-fault=stop: the run ends at the first stray access, with its IPA.
    let run = boot(config(|c| c.bootargs = "test=touch-hyp hyp.on-fault=stop".into()));
    run.expect_exit(abi::exit::GUEST_FAULT as i32);
    let hyp_start = run.record("hyp_boot").u64("hyp_start").unwrap();
    let fault = run.record("guest_fault");
    assert_eq!(fault.u64("ipa"), Some(hyp_start), "{}", run.dump());
    assert_eq!(fault.str("access"), Some("read"));
    run.expect_output(&format!("at IPA {hyp_start:#x}"));
    assert!(!run.outcome.output.contains("did not stop"), "{}", run.dump());
}

#[test]
fn a_stray_access_reaches_the_guests_abort_handler() {
    // The default: the access comes back to the guest as a synchronous external abort (DFSC
    // 0x10, EC 0x25 from EL1), which the kernel's own fault handler catches; the run goes on.
    let run = boot(config(|c| c.bootargs = "test=stray-access".into()));
    run.expect_exit(0);
    let hyp_start = run.record("hyp_boot").u64("hyp_start").unwrap();
    run.expect_output(&format!("hyp: guest read at IPA {hyp_start:#x}"));
    run.expect_output("injected a synchronous external abort into the guest");
    run.expect_output(
        "kernel: stray access: synchronous external abort caught by the kernel's handler (ESR 0x96000010",
    );
    assert_eq!(run.record("hyp_exits").u64("injected_abort"), Some(1), "{}", run.dump());
    assert!(run.records("guest_fault").is_empty(), "{}", run.dump());
}

#[test]
fn stray_access_without_a_handler_is_the_guests_crash_not_the_hypervisors() {
    // Unarmed, the injected abort is an unexpected exception in the kernel: it reports it (exit 3).
    let run = boot(config(|c| c.bootargs = "test=touch-hyp".into()));
    run.expect_exit(abi::exit::GUEST_EXCEPTION as i32);
    run.expect_output("kernel: FATAL: unexpected synchronous exception from current EL");
    run.expect_output("EC 0x25");
    run.expect_output("ESR 0x96000010");
}

#[test]
fn hypervisor_exception_is_reported() {
    let run = boot(config(|c| c.bootargs = "hyp.test=el2-fault".into()));
    run.expect_exit(abi::exit::HYP_FAULT as i32);
    run.expect_output("hyp: FATAL: unexpected synchronous exception from current EL");
    run.expect_output("EC 0x25 (data abort at the current EL)");
    run.expect_output("FAR 0xdead0000");
    run.expect_output("hyp:   at image+0x");
    run.expect_output("hyp: backtrace:");
}

#[test]
fn unknown_self_test_fails_the_run() {
    let run = boot(config(|c| c.bootargs = "test=no-such-test".into()));
    run.expect_exit(abi::exit::GUEST_FAILURE as i32);
    run.expect_output("bad boot argument \"test=no-such-test\": \"no-such-test\" is not one of them");
}

#[test]
fn bad_hypercalls_return_errors_and_the_hypervisor_survives() {
    let run = boot(config(|c| c.bootargs = "test=bad-calls".into()));
    run.expect_exit(0);
    run.expect_output("arbitrary calls and 8 checked ones answered, hypervisor still running");
}
