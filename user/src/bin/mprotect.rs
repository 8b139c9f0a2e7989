//! `cargo xtask bench mprotect`: the cost of mprotect from EL0, baseline and optimised in one
//! run, interleaved round by round.
//!
//! * `RW->NONE` and `NONE->RW` on 1, 16 and 512 populated pages, with flush elision off (the
//!   baseline: every changed entry flushed) and on (`needs_flush`: NONE -> RW, an invalid entry
//!   becoming valid, needs no TLBI);
//! * `RO->RW` on the same sizes with lazy relaxation off and on (flush elision on in both),
//!   timed alone and together with a write to every page afterwards ("+ touch"), so the
//!   spurious faults a stale read-only entry causes are in the figure (the pages are read
//!   after the RO step so a TLB holds read-only entries).
//!
//! Time from the virtual counter; instructions from the PMU (exact under `-icount`); TLBIs
//! and spurious faults from the kernel's counters, read outside the timed region. One `bench`
//! record per row with the median, spread, per-step TLBIs, the cost per page, and the ratio to
//! the row's baseline; a first row times a null system call (`getcpu`), the fixed cost every
//! step carries. Argument: `rounds=N` (default 30).
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::report::Record;
use user::io::Text;
use user::stats::{ratio, Summary};
use user::{map, prot, sys, sysctl, time, Counters, PAGE_SIZE};

user::entry!(run);

const MAX_ROUNDS: usize = 200;
const SIZES: [u64; 3] = [1, 16, 512];
const RW: u64 = prot::READ | prot::WRITE;

/// Samples of one row.
struct Row {
    ns: [u64; MAX_ROUNDS],
    insns: [u64; MAX_ROUNDS],
    n: usize,
    tlbi: u64,
    spurious: u64,
}

impl Row {
    const fn new() -> Row {
        Row { ns: [0; MAX_ROUNDS], insns: [0; MAX_ROUNDS], n: 0, tlbi: 0, spurious: 0 }
    }
    fn add(&mut self, ticks: u64, insns: u64, d: &Counters) {
        if self.n < MAX_ROUNDS {
            self.ns[self.n] = time::ticks_to_ns(ticks);
            self.insns[self.n] = insns;
            self.n += 1;
        }
        self.tlbi += d.space_tlbi;
        self.spurious += d.faults_spurious;
    }
}

/// Times `f` once: (counter ticks, instructions, counters moved).
fn measure(pmu: bool, f: impl FnOnce()) -> (u64, u64, Counters) {
    let c0 = sys::counters();
    let i0 = if pmu { time::instructions() } else { 0 };
    let t0 = time::counter();
    f();
    let t1 = time::counter();
    let i1 = if pmu { time::instructions() } else { 0 };
    (t1 - t0, i1.wrapping_sub(i0), sys::counters().since(&c0))
}

fn touch(base: u64, pages: u64, v: u64) {
    for p in 0..pages {
        // SAFETY: the bench's own mapping, read-write at this point.
        unsafe { core::ptr::write_volatile((base + p * PAGE_SIZE) as *mut u64, v) };
    }
}

fn read_all(base: u64, pages: u64) -> u64 {
    let mut s = 0;
    for p in 0..pages {
        // SAFETY: the bench's own mapping, readable at this point.
        s += unsafe { core::ptr::read_volatile((base + p * PAGE_SIZE) as *const u64) };
    }
    s
}

/// `key=N` of the arguments (checked by the kernel against `abi::programs`), or `default`.
fn arg(args: &str, key: &str, default: u64) -> u64 {
    abi::programs::uint(args, key).unwrap_or(default)
}

/// (case, variant) rows: 0..6 NONE<->RW per size x {baseline, elision} x 2 directions, then
/// RO->RW per size x {flushed, lazy} x {alone, + touch}.
static mut ROWS: [[[Row; 2]; 2]; 3] = [const { [const { [const { Row::new() }; 2] }; 2] }; 3];
static mut NULL_ROW: Row = Row::new();
static mut LAZY_ROWS: [[[Row; 2]; 2]; 3] = [const { [const { [const { Row::new() }; 2] }; 2] }; 3];

fn run(args: &str) -> i32 {
    let rounds = (arg(args, "rounds", 30) as usize).clamp(1, MAX_ROUNDS);
    let pmu = sys::sysctl(sysctl::PMU_EL0, abi::syscall::SYSCTL_GET) == Ok(1);
    let ncpus = sys::sysctl(sysctl::NCPUS, abi::syscall::SYSCTL_GET).unwrap_or(1);
    let max = *SIZES.last().unwrap();
    let Ok(base) = sys::mmap(0, max * PAGE_SIZE, RW, map::PRIVATE | map::ANONYMOUS) else {
        user::println!("mprotect: mmap failed");
        return 2;
    };
    touch(base, max, 1);
    let fe0 = sys::sysctl(sysctl::FLUSH_ELISION, abi::syscall::SYSCTL_GET).unwrap_or(1);
    let lz0 = sys::sysctl(sysctl::LAZY_RELAX, abi::syscall::SYSCTL_GET).unwrap_or(1);
    // SAFETY: the rows are this single-task program's own, used only from this function.
    let (rows, lazy_rows, null_row) = unsafe {
        (
            &mut *core::ptr::addr_of_mut!(ROWS),
            &mut *core::ptr::addr_of_mut!(LAZY_ROWS),
            &mut *core::ptr::addr_of_mut!(NULL_ROW),
        )
    };
    user::println!("mprotect: {rounds} rounds on {ncpus} CPUs, sizes 1/16/512 pages, PMU at EL0: {pmu}");
    let mut failures = 0;
    let mut ok = |r: Result<u64, i64>| {
        if r.is_err() {
            failures += 1;
        }
    };
    for round in 0..rounds {
        let (t, i, d) = measure(pmu, || {
            sys::getcpu();
        });
        null_row.add(t, i, &d);
        for (si, &pages) in SIZES.iter().enumerate() {
            let len = pages * PAGE_SIZE;
            // NONE <-> RW, baseline and elision alternating which goes first.
            for k in 0..2 {
                let v = (k + round) % 2;
                ok(sys::sysctl(sysctl::FLUSH_ELISION, v as u64));
                let (t, i, d) = measure(pmu, || ok(sys::mprotect(base, len, prot::NONE)));
                rows[si][0][v].add(t, i, &d);
                let (t, i, d) = measure(pmu, || ok(sys::mprotect(base, len, RW)));
                rows[si][1][v].add(t, i, &d);
            }
            ok(sys::sysctl(sysctl::FLUSH_ELISION, 1));
            // RO -> RW, flushed and lazy.
            for k in 0..2 {
                let v = (k + round) % 2;
                ok(sys::sysctl(sysctl::LAZY_RELAX, v as u64));
                ok(sys::mprotect(base, len, prot::READ));
                let _ = read_all(base, pages);
                let (t, i, d) = measure(pmu, || ok(sys::mprotect(base, len, RW)));
                lazy_rows[si][v][0].add(t, i, &d);
                ok(sys::mprotect(base, len, prot::READ));
                let _ = read_all(base, pages);
                let (t, i, d) = measure(pmu, || {
                    ok(sys::mprotect(base, len, RW));
                    touch(base, pages, round as u64);
                });
                lazy_rows[si][v][1].add(t, i, &d);
            }
        }
    }
    let _ = sys::sysctl(sysctl::FLUSH_ELISION, fe0);
    let _ = sys::sysctl(sysctl::LAZY_RELAX, lz0);
    let null = summarise(null_row);
    emit("getcpu (null system call)", &null, &null, ncpus, 1);
    let steps = ["RW->NONE", "NONE->RW"];
    let variants = ["baseline (flush everything)", "flush elision"];
    for (si, &pages) in SIZES.iter().enumerate() {
        for (di, step) in steps.iter().enumerate() {
            let base_row = summarise(&mut rows[si][di][0]);
            for (v, name) in variants.iter().enumerate() {
                let s = summarise(&mut rows[si][di][v]);
                emit(format_case(step, pages, name).as_str(), &s, &base_row, ncpus, pages);
            }
        }
        for (mi, mode) in ["", " + touch"].iter().enumerate() {
            let base_row = summarise(&mut lazy_rows[si][0][mi]);
            for (v, name) in ["flushed", "lazy_relax"].iter().enumerate() {
                let s = summarise(&mut lazy_rows[si][v][mi]);
                let mut c = Text::<96>::new();
                let _ = core::fmt::Write::write_fmt(&mut c, format_args!("RO->RW{mode} {pages} pages, {name}"));
                emit(c.as_str(), &s, &base_row, ncpus, pages);
            }
        }
    }
    if failures > 0 {
        user::println!("mprotect: {failures} system calls failed");
        return 1;
    }
    0
}

/// What one row's record needs.
struct Summarised {
    ns: Summary,
    insns: Summary,
    n: usize,
    tlbi_per_step: f64,
    spurious_per_step: f64,
}

fn summarise(r: &mut Row) -> Summarised {
    let n = r.n;
    Summarised {
        ns: Summary::of(&mut r.ns[..n]),
        insns: Summary::of(&mut r.insns[..n]),
        n,
        tlbi_per_step: r.tlbi as f64 / n.max(1) as f64,
        spurious_per_step: r.spurious as f64 / n.max(1) as f64,
    }
}

fn emit(case: &str, s: &Summarised, base: &Summarised, ncpus: u64, pages: u64) {
    let mut r = Record::new("bench");
    r.str("bench", "mprotect")
        .str("case", case)
        .u64("cpus", ncpus)
        .u64("n", s.n as u64)
        .u64("median_ns", s.ns.median)
        .u64("p10_ns", s.ns.p10)
        .u64("p90_ns", s.ns.p90)
        .f64("spread", s.ns.spread(), 3)
        .u64("median_insns", s.insns.median)
        .u64("ns_per_page", s.ns.median / pages)
        .u64("insns_per_page", s.insns.median / pages)
        .f64("tlbi_per_step", s.tlbi_per_step, 2)
        .f64("spurious_per_step", s.spurious_per_step, 2)
        .f64("ratio_ns", ratio(s.ns.median, base.ns.median), 3)
        .f64("ratio_insns", ratio(s.insns.median, base.insns.median), 3);
    user::io::report(&r);
}

fn format_case(step: &str, pages: u64, variant: &str) -> Text<96> {
    let mut c = Text::<96>::new();
    let _ = core::fmt::Write::write_fmt(&mut c, format_args!("{step} {pages} pages, {variant}"));
    c
}
