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
pub mod stats;

use alloc::format;
use alloc::string::String;

/// The names `bench=` accepts (the same as [`BENCHES`]; a unit check keeps them equal).
pub const NAMES: &[&str] = &["exits", "linear-map", "contpte", "split", "mprotect", "percpu"];

/// The benchmarks this kernel knows.
pub const BENCHES: &[(&str, &str)] = &[
    ("exits", "cost of a guest exit: null hypercall, PSCI call forwarded to firmware"),
    ("linear-map", "linear map table pages with and without BBML2, and a set_memory_ro/rw storm"),
    ("contpte", "contpte convert (fold/unfold) with and without its TLBI"),
    ("split", "stage-2 eager split for dirty logging on a 64 GiB memslot: baseline, SKIP_LEVEL3, summary bit"),
    (
        "mprotect",
        "mprotect from EL0: NONE<->RW with and without flush elision, RO->RW with and without lazy relaxation",
    ),
    (
        "percpu",
        "this_cpu ops through TPIDR_EL1 + preemption guard vs the per-CPU-root window; switches, storm, tasks, syscalls",
    ),
];

/// Runs the benchmark `name`.
pub fn run(name: &str) -> Result<(), String> {
    rt::println!("kernel: benchmark {name}");
    match name {
        "mprotect" => {
            // An EL0 program (user/src/bin/mprotect.rs); `mprotect.rounds=N` is passed on.
            let rounds = crate::cmdline::args().uint("mprotect.rounds").unwrap_or(100);
            let failed = crate::sched::run_programs(&[("mprotect".into(), format!("rounds={rounds}"))])?;
            if failed != 0 {
                return Err("the mprotect benchmark program failed".into());
            }
            Ok(())
        }
        "percpu" => {
            // An EL0 program (user/src/bin/percpu_bench.rs).
            // `percpu.rounds=N` is passed on (the program's default: 20, or 3 under -icount).
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
        "exits" => exits::run(),
        "linear-map" => linear_map::run(),
        "contpte" => contpte::run(),
        "split" => split::run(),
        other => {
            let known: alloc::vec::Vec<&str> = BENCHES.iter().map(|(n, _)| *n).collect();
            Err(format!("unknown benchmark {other:?} (known: {})", known.join(", ")))
        }
    }
}
