//! In-guest benchmarks, chosen with `bench=NAME` on the command line and driven by
//! `cargo xtask bench NAME`. Each benchmark runs its baseline and optimised variants in the same
//! boot, interleaved, many iterations each, and prints one `bench` report record per row:
//!
//! ```text
//! @@report {"kind":"bench","bench":"exits","case":"null hypercall","n":2000,"median_ns":..., ...}
//! ```
//! Every record carries `bench` and `case`; the other fields are the row's figures, ratios
//! included (the guest computes them; the xtask lays rows of several machines side by side).

mod contpte;
mod exits;
mod linear_map;
mod split;

use alloc::format;
use alloc::string::String;
use kcore::options::{BenchOptions, Program};

/// The benchmarks, in the order of `abi::names::BENCHES` (the names `bench=` accepts), each
/// with what runs it; checked against that list at compile time.
type Runner = fn(&BenchOptions) -> Result<(), String>;
const RUNNERS: [(&str, Runner); 6] = [
    ("exits", |_| exits::run()),
    ("linear-map", |_| linear_map::run()),
    ("contpte", |_| contpte::run()),
    ("split", split::run),
    ("mprotect", mprotect),
    ("percpu", percpu),
];
const _: () = assert!(abi::names::table_matches(&RUNNERS, abi::names::BENCHES));

/// Runs the benchmark `name` with its parameters `o`.
pub fn run(name: &str, o: &BenchOptions) -> Result<(), String> {
    rt::println!("kernel: benchmark {name}");
    let (_, run) = RUNNERS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("unknown benchmark {name:?} (known: {})", abi::names::BENCHES.join(", ")))?;
    run(o)
}

/// `bench=mprotect`: an EL0 program (user/src/bin/mprotect.rs); `mprotect.rounds=N` is passed
/// on.
fn mprotect(o: &BenchOptions) -> Result<(), String> {
    let p = Program { name: "mprotect", args: format!("rounds={}", o.mprotect_rounds) };
    let failed = crate::sched::run_programs(&[p])?;
    if failed != 0 {
        return Err("the mprotect benchmark program failed".into());
    }
    Ok(())
}

/// `bench=percpu`: an EL0 program (user/src/bin/percpu_bench.rs); `percpu.rounds=N` is passed
/// on (the program's default: 20, or 3 under -icount).
fn percpu(o: &BenchOptions) -> Result<(), String> {
    let args = o.percpu_rounds.map(|r| format!("rounds={r}")).unwrap_or_default();
    let failed = crate::sched::run_programs(&[Program { name: "percpu_bench", args }])?;
    if failed != 0 {
        return Err("the percpu benchmark program failed".into());
    }
    Ok(())
}
