//! A figure that gets worse fails this test: the quick set of the benchmarks (the EL0 rows of
//! `bench mprotect` with a few rounds on its four machines, `bench contpte` on its two) under
//! `-icount shift=0`, whose instruction counts are exact, against the committed baseline's
//! `test` set (`xtask/bench-baseline.jsonl`, `xtask::bench::baseline`). A rise beyond the
//! margin, a row gone or a new row fails, naming the row, the figure before and after; a
//! deliberate change refreshes the baseline with `cargo xtask bench baseline --update`.
//! Each boot takes one to two seconds of QEMU time.

use tests::{boot, Run};
use xtask::bench::baseline::{self, Figure};

/// Boots every quick run of benchmark `bench` and returns its figures.
fn measure(bench: &str) -> Vec<Figure> {
    let mut out = Vec::new();
    for q in baseline::quick_runs().into_iter().filter(|q| q.bench.name == bench) {
        let run: Run = boot(q.launch.clone());
        run.expect_exit(0);
        let figs = baseline::quick_figures(&q, &run.records);
        assert!(!figs.is_empty(), "{bench} on {} printed no figures\n{}", q.setup.label, run.dump());
        out.extend(figs);
    }
    out
}

fn check(bench: &str) {
    let base = baseline::read(&baseline::path()).expect("the committed baseline");
    let measured = measure(bench);
    let report = baseline::check(&base, &measured, baseline::Run::Test);
    assert!(
        report.ok(),
        "{bench}: figures rose above the baseline (a deliberate change: cargo xtask bench baseline --update, and \
         commit the file with the change):\n{}",
        report.text()
    );
}

#[test]
fn el0_rows_do_not_rise_above_the_baseline() {
    check("mprotect");
}

#[test]
fn contpte_converts_do_not_rise_above_the_baseline() {
    check("contpte");
}
