//! The kernel's boot words ([`WORDS`], one line each) and what they mean, parsed once at boot
//! into one typed [`Options`] that the kernel passes down to each subsystem (`mm` gets
//! [`MmOptions`], the scheduler [`SchedOptions`], ...). Nothing reads a word by name after this:
//! a word changes shape once, here, and a misspelt one is refused here (`lib/bootargs`: an
//! unknown, duplicated or malformed word stops the boot with a message that names it and lists
//! the accepted ones).
//!
//! `hyp.` words are the hypervisor's: it takes them off the command line before the kernel sees
//! it, so one reaching the kernel means no hypervisor ran.

use abi::hypercall::WalkerMode;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bootargs::{Args, Table, Word};
use pgtable::kmem::{Bbml2Arg, Rodata};

/// Every word the kernel accepts.
pub const WORDS: &[Word] = &[
    Word::choice("bbml2", &["auto", "on", "off"], "BBML2 linear map: auto (allow-listed cores), on, off"),
    Word::flag("bbml2_unsafe_override", "with bbml2=on: force BBML2 on a core that is not allowed"),
    Word::uint("bbml2_test_disallow_cpu", 0, abi::MAX_CPUS as u64 - 1, "treat CPU N as not allowed (tests)"),
    Word::uint("bbml2_test_midr", 0, u32::MAX as u64, "feed this MIDR to the BBML2 allow-list check (tests)"),
    Word::choice("rodata", &["full", "on", "off"], "image and linear-alias permissions"),
    Word::choice("contpte", &["on", "off"], "contiguous PTE ranges"),
    Word::list("test", abi::names::SELFTESTS, "self-tests, in order (one that ends the run must be last)"),
    Word::choice("bench", abi::names::BENCHES, "in-guest benchmark"),
    Word::uint("dirty.seed", 0, u64::MAX, "test=dirty-log: random seed"),
    Word::choice(
        "dirty.largest",
        &["2M", "1G"],
        "test=dirty-log: the largest backing (2M: a board without 1 GiB to spare)",
    ),
    Word::uint("touch.ipa", 0, u64::MAX, "test=touch: the IPA to read"),
    Word::uint("cycle.cpu", 1, abi::MAX_CPUS as u64 - 1, "leave CPU N off at boot, for test=cpu-cycle to cycle"),
    Word::uint("pools.frame", 0, u64::MAX, "test=pool-calls: an IPA in the hypervisor's frame pool"),
    Word::uint("pools.slot", 0, u64::MAX, "test=pool-calls: an IPA in the hypervisor's slot pool"),
    Word::uint("split.iters", 1, 1_000_000, "bench=split: iterations"),
    Word::uint("split.gib", 1, 1024, "bench=split: memslot size in GiB"),
    Word::uint("split.chunk", 2, 1 << 20, "bench=split: eager-split chunk in MiB"),
    Word::text("perf.events", "count PMU events around the scenario: NAME|0xN[:el0+el1+el2],... (may be empty)"),
    Word::text("perf.scenario", "with perf.events: the label of the records"),
    Word::choice("perf.walker", &["baseline", "skip_level3", "summary"], "with perf.events: the split walker"),
    Word::flag("perf.list", "list the PMU events of this CPU, counted here or not"),
    Word::text("user", "EL0 programs run concurrently: NAME[:ARGS][+NAME[:ARGS]...] (ARGS: key=value,...)"),
    Word::uint("tick_hz", 1, 10_000, "the scheduler's timer tick (default 100)"),
    Word::choice(
        "flush_elision",
        &["on", "off"],
        "user mprotect/munmap: no TLBI for entries that need none (default on)",
    ),
    Word::choice("lazy_relax", &["on", "off"], "user RO->RW, NX->X upgrades without a broadcast TLBI (default on)"),
    Word::uint("asid_bits", 2, 16, "use at most N ASID bits, to force ASID roll-overs (tests)"),
    Word::uint("mprotect.rounds", 1, 1_000_000, "bench=mprotect: rounds per row (default 100)"),
    Word::choice(
        "percpu_tables",
        &["on", "off"],
        "per-CPU TTBR1 roots and the this_cpu window at one fixed VA (default on; switchable at run time)",
    ),
    Word::uint("percpu.rounds", 1, 64, "bench=percpu: rounds (default 20, 3 under -icount)"),
    Word::choice(
        "percpu.seed",
        &["no-guard", "window-plain", "no-sync-cpu1"],
        "seed a per-CPU bug the tests must catch (tests only)",
    ),
];

/// The kernel's table for `lib/bootargs`.
pub const TABLE: Table = Table {
    owner: "kernel",
    words: WORDS,
    foreign: &[("hyp.", "a hypervisor word, and no hypervisor took it off the command line (--no-hypervisor?)")],
};

/// Kernel memory (`bbml2=`, `rodata=`, `contpte=` and the BBML2 test words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MmOptions {
    /// `bbml2=auto|on|off`.
    pub bbml2: Bbml2Arg,
    /// `bbml2_unsafe_override`.
    pub bbml2_unsafe_override: bool,
    /// `bbml2_test_disallow_cpu=N`: CPU N looks not allowed.
    pub disallow_cpu: Option<usize>,
    /// `bbml2_test_midr=MIDR`: the allow-list check sees this MIDR instead of the CPU's.
    pub midr_override: Option<u64>,
    /// `rodata=full|on|off`.
    pub rodata: Rodata,
    /// `contpte=on|off`.
    pub contpte: bool,
}

/// User address spaces (`flush_elision=`, `lazy_relax=`, `asid_bits=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserOptions {
    /// `flush_elision=on|off`.
    pub flush_elision: bool,
    /// `lazy_relax=on|off`.
    pub lazy_relax: bool,
    /// `asid_bits=N`: at most N ASID bits (16 when not given; the CPU may have fewer).
    pub asid_bits: u32,
}

/// A per-CPU bug seeded for the tests (`percpu.seed=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PercpuSeed {
    /// None.
    None,
    /// The baseline's add without its preemption guard.
    NoGuard,
    /// The window's add as a plain load, add and store.
    WindowPlain,
    /// `sync_roots` forgets CPU 1's root.
    NoSyncCpu1,
}

/// Per-CPU data (`percpu_tables=`, `percpu.seed=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PercpuOptions {
    /// `percpu_tables=on|off`.
    pub tables: bool,
    /// `percpu.seed=`.
    pub seed: PercpuSeed,
}

/// One EL0 program to run (`user=NAME[:ARGS]`), its arguments checked against
/// `abi::programs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The program (`user/src/bin/NAME.rs`).
    pub name: &'static str,
    /// Its argument string.
    pub args: String,
}

/// The scheduler and the EL0 programs (`tick_hz=`, `user=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedOptions {
    /// `tick_hz=N` (100 when not given).
    pub tick_hz: u64,
    /// `user=...`: the programs, run concurrently, in order.
    pub programs: Vec<Program>,
}

/// Self-tests (`test=` and their parameters).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TestOptions {
    /// `test=NAME,...`, in order (one that ends the run is last).
    pub names: Vec<&'static str>,
    /// `dirty.seed=N`.
    pub dirty_seed: Option<u64>,
    /// `dirty.largest=2M`: `test=dirty-log` leaves out the 1 GiB backing (which needs
    /// `hyp.slotpool=1G`).
    pub dirty_no_1g: bool,
    /// `touch.ipa=IPA`.
    pub touch_ipa: Option<u64>,
    /// `pools.frame=IPA` and `pools.slot=IPA` (both, for `test=pool-calls`).
    pub pools: Option<(u64, u64)>,
    /// `cycle.cpu=N`: CPU N (in the DTB's order) is not started at boot, so `test=cpu-cycle`
    /// has a CPU that is off on any machine (`bbml2_test_disallow_cpu` needs BBML2).
    pub cycle_cpu: Option<usize>,
}

/// The benchmark (`bench=` and its parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BenchOptions {
    /// `bench=NAME`.
    pub name: Option<&'static str>,
    /// `split.iters=N`.
    pub split_iters: Option<u64>,
    /// `split.gib=N`.
    pub split_gib: Option<u64>,
    /// `split.chunk=MIB`.
    pub split_chunk_mib: Option<u64>,
    /// `mprotect.rounds=N` (100 when not given).
    pub mprotect_rounds: u64,
    /// `percpu.rounds=N` (the program's own default when not given).
    pub percpu_rounds: Option<u64>,
}

/// PMU counting around the run (`perf.*`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PerfOptions {
    /// `perf.events=LIST` (checked against the CPU's tables where it is used).
    pub events: Option<String>,
    /// `perf.scenario=LABEL` ("scenario" when not given).
    pub scenario: String,
    /// `perf.walker=`.
    pub walker: Option<WalkerMode>,
    /// `perf.list`.
    pub list: bool,
}

/// Everything the command line says, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `mm`.
    pub mm: MmOptions,
    /// `mm::user`.
    pub user: UserOptions,
    /// `percpu`.
    pub percpu: PercpuOptions,
    /// `sched`.
    pub sched: SchedOptions,
    /// `selftest`.
    pub tests: TestOptions,
    /// `bench`.
    pub bench: BenchOptions,
    /// `perf`.
    pub perf: PerfOptions,
    /// The words as given (after a boot loader's), for the banner.
    pub words: Vec<String>,
}

impl Default for Options {
    /// What an empty command line means.
    fn default() -> Self {
        Options::from_args(&Args::default()).expect("an empty command line is valid")
    }
}

/// Why a command line was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError(pub String);

impl core::fmt::Display for OptionsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

fn on(v: Option<&str>, default: bool) -> bool {
    v.map_or(default, |v| v == "on")
}

impl Options {
    /// Parses a whole command line: words before `bootargs::FIRMWARE_MARKER` are a boot
    /// loader's (returned, to be listed once, never checked); the rest must all be ours.
    pub fn parse(cmdline: &str) -> Result<(Options, Vec<String>), OptionsError> {
        let (firmware, ours) = bootargs::split_firmware(cmdline).map_err(|e| OptionsError(format!("{e}")))?;
        let args = bootargs::parse_words(ours, &TABLE).map_err(|e| OptionsError(format!("{e}")))?;
        let o = Options::from_args(&args)?;
        Ok((o, firmware.into_iter().map(String::from).collect()))
    }

    /// The options of checked words (every rule that involves more than one word is here).
    pub fn from_args(a: &Args) -> Result<Options, OptionsError> {
        let mm = MmOptions {
            bbml2: a.choice("bbml2").and_then(Bbml2Arg::parse).unwrap_or(Bbml2Arg::Auto),
            bbml2_unsafe_override: a.flag("bbml2_unsafe_override"),
            disallow_cpu: a.uint("bbml2_test_disallow_cpu").map(|c| c as usize),
            midr_override: a.uint("bbml2_test_midr"),
            rodata: a.choice("rodata").and_then(Rodata::parse).unwrap_or(Rodata::Full),
            contpte: on(a.choice("contpte"), true),
        };
        let user = UserOptions {
            flush_elision: on(a.choice("flush_elision"), true),
            lazy_relax: on(a.choice("lazy_relax"), true),
            asid_bits: a.uint("asid_bits").unwrap_or(16) as u32,
        };
        let seed = match a.choice("percpu.seed") {
            Some("no-guard") => PercpuSeed::NoGuard,
            Some("window-plain") => PercpuSeed::WindowPlain,
            Some("no-sync-cpu1") => PercpuSeed::NoSyncCpu1,
            _ => PercpuSeed::None,
        };
        let percpu = PercpuOptions { tables: on(a.choice("percpu_tables"), true), seed };
        let mut programs = Vec::new();
        if let Some(v) = a.text("user") {
            for item in v.split('+') {
                let (name, args) = item.split_once(':').unwrap_or((item, ""));
                if name.is_empty() {
                    return Err(OptionsError(format!("bad boot argument \"user={v}\": an empty program name")));
                }
                let p = abi::programs::check(name, args)
                    .map_err(|e| OptionsError(format!("bad boot argument \"user={v}\": {e}")))?;
                programs.push(Program { name: p.name, args: args.to_string() });
            }
        }
        let sched = SchedOptions { tick_hz: a.uint("tick_hz").unwrap_or(100), programs };
        check_seed(seed, &sched.programs)?;
        let names = a.list("test").to_vec();
        check_order(&names)?;
        let pools = match (a.uint("pools.frame"), a.uint("pools.slot")) {
            (Some(f), Some(s)) => Some((f, s)),
            _ => None,
        };
        let tests = TestOptions {
            names,
            dirty_seed: a.uint("dirty.seed"),
            dirty_no_1g: a.choice("dirty.largest") == Some("2M"),
            touch_ipa: a.uint("touch.ipa"),
            pools,
            cycle_cpu: a.uint("cycle.cpu").map(|c| c as usize),
        };
        let bench = BenchOptions {
            name: a.choice("bench"),
            split_iters: a.uint("split.iters"),
            split_gib: a.uint("split.gib"),
            split_chunk_mib: a.uint("split.chunk"),
            mprotect_rounds: a.uint("mprotect.rounds").unwrap_or(100),
            percpu_rounds: a.uint("percpu.rounds"),
        };
        let walker = a.choice("perf.walker").map(|w| match w {
            "baseline" => WalkerMode::Baseline,
            "skip_level3" => WalkerMode::SkipLevel3,
            _ => WalkerMode::Summary,
        });
        let perf = PerfOptions {
            events: a.text("perf.events").map(String::from),
            scenario: a.text("perf.scenario").unwrap_or("scenario").to_string(),
            walker,
            list: a.flag("perf.list"),
        };
        let words = a.words().map(String::from).collect();
        Ok(Options { mm, user, percpu, sched, tests, bench, perf, words })
    }
}

/// A self-test that ends the run must come last: whatever follows it would never run.
pub fn check_order(tests: &[&str]) -> Result<(), OptionsError> {
    match tests.iter().position(|t| abi::names::SELFTESTS_ENDING_RUN.contains(t)) {
        Some(i) if i + 1 < tests.len() => Err(OptionsError(format!(
            "bad boot argument \"test={}\": test={} ends the run, so {} would never run; put it last",
            tests.join(","),
            tests[i],
            tests[i + 1..].join(",")
        ))),
        _ => Ok(()),
    }
}

/// A seeded bug must be one a run can show, and a run that asks for the seeded method must have
/// one: `percpu.seed=no-guard|window-plain` act only through `user=percpu:modes=...seeded...`
/// (the `seeded` method), which does nothing seeded without them (`no-sync-cpu1` seeds the
/// tables themselves, whatever runs).
fn check_seed(seed: PercpuSeed, programs: &[Program]) -> Result<(), OptionsError> {
    let seeded_mode = programs.iter().any(|p| {
        p.name == "percpu" && abi::programs::text(&p.args, "modes").is_some_and(|m| m.split('/').any(|x| x == "seeded"))
    });
    match (seed, seeded_mode) {
        (PercpuSeed::NoGuard | PercpuSeed::WindowPlain, false) => Err(OptionsError(format!(
            "bad boot argument \"percpu.seed={}\": it acts only on the seeded method, and no user=percpu:modes=... \
             runs `seeded`",
            if seed == PercpuSeed::NoGuard { "no-guard" } else { "window-plain" }
        ))),
        (PercpuSeed::None | PercpuSeed::NoSyncCpu1, true) => Err(OptionsError(String::from(
            "bad boot argument \"user=percpu:modes=...seeded...\": the seeded method needs percpu.seed=no-guard or \
             percpu.seed=window-plain (it would run no bug)",
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
