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

/// The benchmarks, in the order of `abi::names::BENCHES` (the names `bench=` accepts), each
/// with what runs it; checked against that list at compile time.
type Runner = fn() -> Result<(), String>;
const RUNNERS: [(&str, Runner); 6] = [
    ("exits", exits::run),
    ("linear-map", linear_map::run),
    ("contpte", contpte::run),
    ("split", split::run),
    ("mprotect", mprotect),
    ("percpu", percpu),
];
const _: () = assert!(abi::names::table_matches(&RUNNERS, abi::names::BENCHES));

/// Runs the benchmark `name`.
pub fn run(name: &str) -> Result<(), String> {
    rt::println!("kernel: benchmark {name}");
    let (_, run) = RUNNERS
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| format!("unknown benchmark {name:?} (known: {})", abi::names::BENCHES.join(", ")))?;
    run()
}

/// `bench=mprotect`: an EL0 program (user/src/bin/mprotect.rs); `mprotect.rounds=N` is passed
/// on.
fn mprotect() -> Result<(), String> {
    let rounds = crate::cmdline::args().uint("mprotect.rounds").unwrap_or(100);
    let failed = crate::sched::run_programs(&[("mprotect".into(), format!("rounds={rounds}"))])?;
    if failed != 0 {
        return Err("the mprotect benchmark program failed".into());
    }
    Ok(())
}

/// `bench=percpu`: an EL0 program (user/src/bin/percpu_bench.rs); `percpu.rounds=N` is passed
/// on (the program's default: 20, or 3 under -icount).
fn percpu() -> Result<(), String> {
    let args = match crate::cmdline::args().uint("percpu.rounds") {
        Some(r) => format!("rounds={r}"),
        None => String::new(),
    };
    let failed = crate::sched::run_programs(&[("percpu_bench".into(), args)])?;
    if failed != 0 {
        return Err("the percpu benchmark program failed".into());
    }
    Ok(())
}
