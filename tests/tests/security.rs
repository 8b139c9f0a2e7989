//! No guest reaches the host. QEMU semihosting (`hlt #0xf000`), were it on, would be served by
//! QEMU itself at EL1 and EL2 before any trap: the host's files and shell for any guest image.
//! The test guest (`testguest/`, `testguest=semihost`) tries SYS_OPEN + SYS_WRITE of a host
//! file, SYS_SYSTEM of a host command and SYS_EXIT with status 0, as a raw binary and as an
//! Image, under the hypervisor and alone: each must be an undefined instruction in the guest, no
//! file may appear, and the run must not be success.

use tests::{boot, config, scratch_dir};
use xtask::launch::Guest;

fn try_semihosting(kernel: std::path::PathBuf, alone: bool, what: &str) {
    let base = scratch_dir().join(format!("semihost-{what}-{}", std::process::id()));
    let files = [base.with_extension("open"), base.with_extension("system")];
    for f in &files {
        let _ = std::fs::remove_file(f);
    }
    let run = boot(config(|c| {
        c.smp = 1;
        c.no_hypervisor = alone;
        c.guest = Some(Guest {
            kernel,
            initrd: None,
            append: format!("testguest=semihost testguest.path={}", base.display()),
        });
    }));
    for f in &files {
        assert!(!f.exists(), "{what}: the guest created {} on the host\n{}", f.display(), run.dump());
    }
    let r = run.record("testguest_semihost");
    for call in ["open", "system", "exit"] {
        assert_eq!(
            r.str(call),
            Some("undefined"),
            "{what}: semihosting {call} was not an undefined instruction\n{}",
            run.dump()
        );
    }
    assert_eq!(r.str("write"), Some("skipped"), "{what}: no handle, nothing to write\n{}", run.dump());
    run.expect_output("testguest: semihosting SYS_EXIT did not end the run");
    // SYS_EXIT 0 did not end the run, so the guest ends it as a failure: not success.
    run.expect_exit(abi::exit::GUEST_FAILURE as i32);
}

#[test]
fn a_raw_guest_under_the_hypervisor_has_no_path_to_the_host() {
    try_semihosting(xtask::build::testguest_raw(), false, "raw-hyp");
}

#[test]
fn an_image_guest_under_the_hypervisor_has_no_path_to_the_host() {
    try_semihosting(xtask::build::testguest_image(), false, "image-hyp");
}

#[test]
fn a_guest_alone_on_qemu_has_no_path_to_the_host() {
    try_semihosting(xtask::build::testguest_raw(), true, "raw-alone");
}
