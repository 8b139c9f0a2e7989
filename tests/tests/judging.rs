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

/// The test guest in mode `mode`, under the hypervisor or alone.
fn forging(mode: &str, alone: bool) -> tests::Run {
    tests::boot(tests::config(|c| {
        c.smp = 1;
        c.no_hypervisor = alone;
        c.guest = Some(xtask::launch::Guest {
            kernel: xtask::build::testguest_image(),
            initrd: None,
            append: format!("testguest={mode}"),
        });
    }))
}

/// A guest that prints final lines claiming success (one without a key, one with a key of its
/// own making), then resets the machine: the run fails, alone (QEMU's reset is the verdict) as
/// under the hypervisor (its own final line, with the run's key). Before the run key, alone
/// this run passed: the judge took the last `@@exit` line wherever it came from.
#[test]
fn a_guest_cannot_forge_the_verdict() {
    for alone in [true, false] {
        let run = forging("forge-reset", alone);
        run.expect_output("@@exit 0 (success) key=0123456789abcdef");
        assert!(!run.outcome.timed_out, "{}", run.dump());
        assert_eq!(run.verdict().code, exit::GUEST_RESET, "alone {alone}: {}\n{}", run.verdict(), run.dump());
    }
}

/// A guest that prints a final line, then a complete panic report, then waits: the run ends at
/// the report as a guest panic, long before its time limit. Before the run key, the planted line
/// switched the end-at-panic watch off and the run waited for the whole time limit.
#[test]
fn a_planted_final_line_does_not_switch_off_the_panic_watch() {
    for alone in [true, false] {
        let run = forging("forge-panic", alone);
        assert!(!run.outcome.timed_out, "{}", run.dump());
        assert_eq!(run.verdict().code, exit::GUEST_PANIC, "alone {alone}: {}\n{}", run.verdict(), run.dump());
        assert!(run.outcome.elapsed < std::time::Duration::from_secs(60), "{:?}\n{}", run.outcome.elapsed, run.dump());
    }
}
