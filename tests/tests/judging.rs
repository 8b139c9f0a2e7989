//! The judging is code too: `cargo xtask test` must fail (exit code CHECK_FAILED) when a test
//! fails. (The harness helpers' own checks are unit tests in `tests/src/lib.rs`; `cargo xtask
//! run` returning the guest's code is in `runs.rs`.)

use abi::exit;
use tests::xtask_cli;

#[test]
#[ignore = "fails on purpose: cargo_xtask_test_fails_when_a_test_fails runs it through cargo xtask test"]
fn judged_fails_on_purpose() {
    panic!("this test fails on purpose");
}

#[test]
fn cargo_xtask_test_fails_when_a_test_fails() {
    let (code, out) = xtask_cli(&["test", "judged_fails_on_purpose", "--include-ignored"]);
    assert_eq!(code, exit::CHECK_FAILED as i32, "{out}");
    assert!(out.contains("this test fails on purpose"), "{out}");
    assert!(out.contains("QEMU integration tests failed (0 passed, 1 failed)"), "{out}");
}
