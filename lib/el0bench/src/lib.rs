//! The EL0 benchmark of `cargo xtask bench mprotect`, written once for both kernels it runs
//! on: the project's (`user/src/bin/mprotect.rs`) and Linux (`linux-user/src/bench.rs`, which
//! `--peer linux` runs under Debian's Linux on the same QEMU machine). Each side implements
//! [`Os`] (its system calls and counters); [`run`] does everything else: which rows, in which
//! order, how each is measured and the `bench` record each row ends as. The two sides cannot
//! drift apart: the workload's shape lives here only.
//!
//! Rows, each measured once per round (`rounds=N`, default 30), in this order:
//! * `measurement overhead`: an empty measured region; its median is subtracted from every
//!   other row (and shown as `overhead_ns` / `overhead_insns`);
//! * the null system call (`getcpu`);
//! * a `sched_yield` round trip between two tasks of one process on one CPU (a yield and a
//!   context switch each way), timed as a batch of [`YIELD_BATCH`] with every instruction the
//!   CPU runs counted (both tasks, EL0 and EL1), per round trip;
//! * a page fault on an untouched anonymous page (demand zero; its page table exists: the
//!   mapping's other page was touched first, untimed);
//! * `mmap` + a write to every page + `munmap`, of 1 / 16 / 512 pages;
//! * `mprotect` RW->NONE, NONE->RW, RO->RW alone and RO->RW with a write to every page after,
//!   on 1 / 16 / 512 populated pages; a side with mechanism switches (the project's flush
//!   elision and lazy relaxation) measures each setting, interleaved round by round.
//!
//! Every measured region reads the virtual counter (time; under QEMU `-icount shift=0` one ns
//! is one instruction) and the PMU's instruction count of the calling task at EL0 + EL1 inside
//! it; what the side's kernel counts itself (TLBIs, spurious faults) is read outside it.

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

use abi::report::Record;
use abi::stats::{ratio, Summary};
use abi::syscall::prot;
use core::fmt::Write as _;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Bytes per page (both kernels: 4 KiB).
pub const PAGE: u64 = 4096;
/// Pages of the mmap and mprotect rows.
pub const SIZES: [u64; 3] = [1, 16, 512];
/// Most rounds kept.
pub const MAX_ROUNDS: usize = 200;
/// Round trips per `sched_yield` measurement.
pub const YIELD_BATCH: u64 = 32;
/// The benchmark's name (the `bench` field of its records).
pub const BENCH: &str = "mprotect";
/// Rounds without a `rounds=` argument.
pub const DEFAULT_ROUNDS: usize = 30;

/// A mechanism a side can switch at run time (its settings are [`Os::variants`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Which TLB maintenance an mprotect RW<->NONE does (the project's flush elision).
    FlushElision,
    /// Whether an RO->RW upgrade is flushed (the project's lazy relaxation).
    LazyRelax,
}

/// What the side's kernel counted over a measured region (zero where it keeps no such count).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// TLB invalidations the task's address space issued.
    pub tlbi: u64,
    /// Spurious permission faults (stale TLB entries after a lazy upgrade).
    pub spurious: u64,
}

/// The system calls and counters of one kernel, as the workload needs them.
pub trait Os {
    /// Which kernel: `pgtlab` or `linux` (the records' `peer`).
    fn peer(&self) -> &'static str;
    /// Online CPUs.
    fn ncpus(&self) -> u64;
    /// The CPU the caller runs on (the kernel's null system call: `getcpu`).
    fn getcpu(&mut self) -> u64;
    /// `mmap` of `bytes` anonymous, private, read-write, demand-zero bytes (no huge pages).
    fn mmap(&mut self, bytes: u64) -> Result<u64, i64>;
    /// `munmap`.
    fn munmap(&mut self, addr: u64, bytes: u64) -> Result<(), i64>;
    /// `mprotect` with `prot` bits (`abi::syscall::prot`: Linux's values).
    fn mprotect(&mut self, addr: u64, bytes: u64, prot: u64) -> Result<(), i64>;
    /// `sched_yield`.
    fn yield_now(&mut self);
    /// Keeps the caller on the CPU it runs on from now on.
    fn pin(&mut self) -> Result<(), i64>;
    /// Starts the partner task: a task of this process on the caller's CPU that runs
    /// [`partner`] (the caller is pinned).
    fn start_partner(&mut self) -> Result<(), i64>;
    /// Waits until the partner task (told to stop) has ended.
    fn join_partner(&mut self) -> Result<(), i64>;
    /// The calling task's instructions at EL0 + EL1 so far, as the PMU counts them (a raw
    /// counter: only differences of two reads within [`Os::instructions_mask`] mean anything).
    fn instructions(&self) -> u64;
    /// The bits [`Os::instructions`] counts in (its counter's width).
    fn instructions_mask(&self) -> u64;
    /// Called around a measured region: a token before, and whether the region's
    /// instruction count is valid after (Linux: the counter was not reprogrammed in between).
    fn region_begin(&self) -> u64 {
        0
    }
    /// See [`Os::region_begin`].
    fn region_valid(&self, _token: u64) -> bool {
        true
    }
    /// Every instruction of this CPU so far (all tasks, EL0 + EL1), for the batch rows.
    fn cpu_instructions(&mut self) -> u64;
    /// The settings of `m` this side can switch between (one name where it has no switch).
    fn variants(&self, m: Mechanism) -> &'static [&'static str];
    /// The setting the kernel runs with by default (compared with the other side).
    fn default_variant(&self, m: Mechanism) -> usize;
    /// Switches `m` to setting `v`.
    fn set_variant(&mut self, m: Mechanism, v: usize) -> Result<(), i64>;
    /// What the kernel counted so far.
    fn counts(&mut self) -> Counts;
    /// Prints a line.
    fn say(&mut self, line: core::fmt::Arguments<'_>);
    /// Prints a record.
    fn report(&mut self, r: &Record);
}

/// The virtual counter now (after every earlier instruction).
#[inline(always)]
pub fn counter() -> u64 {
    let v: u64;
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads CNTVCT_EL0, which both kernels let EL0 read; `isb` keeps it after the
    // instructions before it.
    unsafe {
        core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    {
        v = 0;
    }
    v
}

/// The virtual counter's frequency in Hz.
pub fn frequency() -> u64 {
    let v: u64;
    #[cfg(target_arch = "aarch64")]
    // SAFETY: reads CNTFRQ_EL0 (always readable at EL0).
    unsafe {
        core::arch::asm!("mrs {}, cntfrq_el0", out(reg) v, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    {
        v = 1_000_000_000;
    }
    v.max(1)
}

/// Counter ticks to nanoseconds.
pub fn ticks_to_ns(t: u64) -> u64 {
    abi::time::ticks_to_ns(t, frequency())
}

/// The partner task's state, shared with the task measuring.
pub struct Partner {
    stop: AtomicBool,
    started: AtomicBool,
    /// Yields the partner made.
    pub yields: AtomicU64,
    /// The CPU it started on.
    pub cpu: AtomicU64,
}

/// The one partner.
pub static PARTNER: Partner = Partner {
    stop: AtomicBool::new(false),
    started: AtomicBool::new(false),
    yields: AtomicU64::new(0),
    cpu: AtomicU64::new(0),
};

/// The partner task's body: yields until told to stop (each side's task entry calls it with
/// its CPU and its `sched_yield`, then ends the task).
pub fn partner(cpu: u64, mut yield_now: impl FnMut()) {
    PARTNER.cpu.store(cpu, Ordering::Relaxed);
    PARTNER.started.store(true, Ordering::Release);
    while !PARTNER.stop.load(Ordering::Acquire) {
        yield_now();
        PARTNER.yields.fetch_add(1, Ordering::Relaxed);
    }
}

/// One row of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The empty region.
    Overhead,
    /// `getcpu`.
    Null,
    /// A `sched_yield` round trip.
    Yield,
    /// A write to an untouched anonymous page.
    Fault,
    /// `mmap` + touch + `munmap` of this many pages.
    MmapTouch(u64),
    /// mprotect `step` of this many pages.
    Mprotect(Step, u64),
}

/// The mprotect steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// RW -> NONE.
    RwToNone,
    /// NONE -> RW.
    NoneToRw,
    /// RO -> RW.
    RoToRw,
    /// RO -> RW, then a write to every page.
    RoToRwTouch,
}

impl Step {
    const ALL: [Step; 4] = [Step::RwToNone, Step::NoneToRw, Step::RoToRw, Step::RoToRwTouch];

    fn name(self) -> &'static str {
        match self {
            Step::RwToNone => "RW->NONE",
            Step::NoneToRw => "NONE->RW",
            Step::RoToRw => "RO->RW",
            Step::RoToRwTouch => "RO->RW + touch",
        }
    }

    /// The mechanism that decides this step's TLB maintenance.
    pub fn mechanism(self) -> Mechanism {
        match self {
            Step::RwToNone | Step::NoneToRw => Mechanism::FlushElision,
            Step::RoToRw | Step::RoToRwTouch => Mechanism::LazyRelax,
        }
    }
}

impl Kind {
    /// The row's name, the same on both sides (the records' `row`).
    pub fn name(self) -> RowName {
        let mut n = RowName::default();
        let _ = match self {
            Kind::Overhead => write!(n, "measurement overhead (empty region)"),
            Kind::Null => write!(n, "getcpu (null system call)"),
            Kind::Yield => write!(n, "sched_yield round trip (2 tasks, 1 CPU)"),
            Kind::Fault => write!(n, "page fault (untouched anonymous page)"),
            Kind::MmapTouch(p) => write!(n, "mmap + touch + munmap {p} pages"),
            Kind::Mprotect(s, p) => write!(n, "{} {p} pages", s.name()),
        };
        n
    }

    /// Pages the row works on (1 for rows without pages).
    pub fn pages(self) -> u64 {
        match self {
            Kind::MmapTouch(p) | Kind::Mprotect(_, p) => p,
            _ => 1,
        }
    }

    /// Its mechanism, if a side may measure several settings of it.
    pub fn mechanism(self) -> Option<Mechanism> {
        match self {
            Kind::Mprotect(s, _) => Some(s.mechanism()),
            _ => None,
        }
    }

    /// Whether its instructions are the CPU's (both tasks of the batch) rather than the
    /// calling task's.
    pub fn counts_cpu(self) -> bool {
        self == Kind::Yield
    }
}

/// Every row kind, in the order of a round.
pub fn kinds() -> impl Iterator<Item = Kind> {
    let fixed = [Kind::Overhead, Kind::Null, Kind::Yield, Kind::Fault].into_iter();
    let mmap = SIZES.into_iter().map(Kind::MmapTouch);
    let mprotect = SIZES.into_iter().flat_map(|p| Step::ALL.into_iter().map(move |s| Kind::Mprotect(s, p)));
    fixed.chain(mmap).chain(mprotect)
}

/// A row name (fits the longest).
pub type RowName = Text<64>;

/// A short string in a fixed buffer.
#[derive(Clone, Copy)]
pub struct Text<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Default for Text<N> {
    fn default() -> Self {
        Text { buf: [0; N], len: 0 }
    }
}

impl<const N: usize> Text<N> {
    /// The text.
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl<const N: usize> core::fmt::Write for Text<N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

impl<const N: usize> core::fmt::Debug for Text<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// The samples of one (row, setting).
#[derive(Clone, Copy)]
struct Samples {
    kind: Kind,
    variant: usize,
    ns: [u64; MAX_ROUNDS],
    insns: [u64; MAX_ROUNDS],
    n: usize,
    /// Measurements whose instruction count was invalid (left out).
    invalid: u64,
    tlbi: u64,
    spurious: u64,
}

impl Samples {
    const EMPTY: Samples = Samples {
        kind: Kind::Overhead,
        variant: 0,
        ns: [0; MAX_ROUNDS],
        insns: [0; MAX_ROUNDS],
        n: 0,
        invalid: 0,
        tlbi: 0,
        spurious: 0,
    };

    fn add(&mut self, m: &Measured) {
        if !m.valid {
            self.invalid += 1;
            return;
        }
        if self.n < MAX_ROUNDS {
            self.ns[self.n] = ticks_to_ns(m.ticks);
            self.insns[self.n] = m.insns;
            self.n += 1;
        }
        self.tlbi += m.counts.tlbi;
        self.spurious += m.counts.spurious;
    }
}

/// Most (row, setting) pairs: 7 rows without settings, 12 mprotect rows of up to 3 settings.
const MAX_SAMPLES: usize = 7 + 12 * 3;

static mut SAMPLES: [Samples; MAX_SAMPLES] = [Samples::EMPTY; MAX_SAMPLES];

/// One measured region.
#[derive(Debug, Clone, Copy, Default)]
pub struct Measured {
    /// Counter ticks.
    pub ticks: u64,
    /// Instructions.
    pub insns: u64,
    /// What the kernel counted meanwhile.
    pub counts: Counts,
    /// Whether the instruction count is valid.
    pub valid: bool,
}

/// Measures `f` once: the calling task's instructions and the time.
#[inline(always)]
pub fn measure<O: Os>(os: &mut O, f: impl FnOnce(&mut O)) -> Measured {
    let c0 = os.counts();
    let token = os.region_begin();
    let i0 = os.instructions();
    let t0 = counter();
    f(os);
    let t1 = counter();
    let i1 = os.instructions();
    let valid = os.region_valid(token);
    let c1 = os.counts();
    let counts = Counts { tlbi: c1.tlbi.wrapping_sub(c0.tlbi), spurious: c1.spurious.wrapping_sub(c0.spurious) };
    Measured { ticks: t1 - t0, insns: i1.wrapping_sub(i0) & os.instructions_mask(), counts, valid }
}

/// Measures `f` with every instruction of the CPU counted (the batch rows).
#[inline(always)]
fn measure_cpu<O: Os>(os: &mut O, f: impl FnOnce(&mut O)) -> Measured {
    let i0 = os.cpu_instructions();
    let t0 = counter();
    f(os);
    let t1 = counter();
    let i1 = os.cpu_instructions();
    Measured { ticks: t1 - t0, insns: i1.wrapping_sub(i0), counts: Counts::default(), valid: true }
}

fn touch(base: u64, pages: u64, v: u64) {
    for p in 0..pages {
        // SAFETY: the caller's own read-write mapping of `pages` pages.
        unsafe { core::ptr::write_volatile((base + p * PAGE) as *mut u64, v) };
    }
}

fn read_all(base: u64, pages: u64) -> u64 {
    let mut s = 0u64;
    for p in 0..pages {
        // SAFETY: the caller's own readable mapping of `pages` pages.
        s = s.wrapping_add(unsafe { core::ptr::read_volatile((base + p * PAGE) as *const u64) });
    }
    s
}

/// The rounds `args` asks for: checked as the project's kernel checks `user=mprotect:ARGS`
/// (`abi::programs`, one rule for both sides), [`DEFAULT_ROUNDS`] when not given.
pub fn rounds(args: &str) -> Result<usize, abi::programs::ArgError<'_>> {
    abi::programs::check(BENCH, args)?;
    Ok(abi::programs::uint(args, "rounds").map_or(DEFAULT_ROUNDS, |n| n as usize))
}

/// The (row, setting) slots of this side, in round order: rows with a mechanism get one per
/// setting. Returns how many.
fn layout<O: Os>(os: &O, samples: &mut [Samples; MAX_SAMPLES]) -> usize {
    let mut n = 0;
    for k in kinds() {
        let variants = k.mechanism().map_or(1, |m| os.variants(m).len());
        for v in 0..variants {
            samples[n] = Samples { kind: k, variant: v, ..Samples::EMPTY };
            n += 1;
        }
    }
    n
}

fn slot(samples: &[Samples], kind: Kind, variant: usize) -> usize {
    samples.iter().position(|s| s.kind == kind && s.variant == variant).expect("every row has its slots")
}

/// Runs the benchmark on `os` with `args` (`rounds=N`); returns the exit status (0: every
/// call succeeded and every row was measured).
pub fn run<O: Os>(os: &mut O, args: &str) -> i32 {
    let rounds = match rounds(args) {
        Ok(n) => n,
        Err(e) => {
            os.say(format_args!("{BENCH}: {e}"));
            return 2;
        }
    };
    // SAFETY: the samples are this single measuring task's own (the partner never touches
    // them), used only within this call.
    let samples = unsafe { &mut *core::ptr::addr_of_mut!(SAMPLES) };
    let used = layout(os, samples);
    let samples = &mut samples[..used];
    let ncpus = os.ncpus();
    let peer = os.peer();
    os.say(format_args!("{BENCH}: {rounds} rounds on {peer}, {ncpus} CPUs, sizes 1/16/512 pages"));
    let mut failures = 0u64;
    if os.pin().is_err() {
        os.say(format_args!("{BENCH}: cannot pin the task to its CPU"));
        return 2;
    }
    let max = SIZES[SIZES.len() - 1];
    let base = match os.mmap(max * PAGE) {
        Ok(b) => b,
        Err(e) => {
            os.say(format_args!("{BENCH}: mmap of {max} pages failed ({e})"));
            return 2;
        }
    };
    touch(base, max, 1);
    for round in 0..rounds {
        failures += one_round(os, samples, base, round);
    }
    for m in [Mechanism::FlushElision, Mechanism::LazyRelax] {
        let d = os.default_variant(m);
        if os.set_variant(m, d).is_err() {
            failures += 1;
        }
    }
    let _ = os.munmap(base, max * PAGE);
    emit(os, samples);
    if samples.iter().any(|s| s.n == 0) {
        os.say(format_args!("{BENCH}: a row has no valid measurement"));
        return 1;
    }
    if failures > 0 {
        os.say(format_args!("{BENCH}: {failures} system calls failed"));
        return 1;
    }
    0
}

/// One round: every row once (each setting of a mechanism row once, the first setting
/// alternating round by round). Returns how many calls failed.
fn one_round<O: Os>(os: &mut O, samples: &mut [Samples], base: u64, round: usize) -> u64 {
    let mut failures = 0;
    let mut ok = |r: Result<(), i64>| failures += r.is_err() as u64;
    let m = measure(os, |_| {});
    samples[slot(samples, Kind::Overhead, 0)].add(&m);
    let m = measure(os, |os| {
        os.getcpu();
    });
    samples[slot(samples, Kind::Null, 0)].add(&m);
    ok(yield_round(os, samples));
    ok(fault_round(os, samples));
    for pages in SIZES {
        let len = pages * PAGE;
        let mut r = Ok(());
        let m = measure(os, |os| {
            r = os.mmap(len).and_then(|a| {
                touch(a, pages, 1);
                os.munmap(a, len)
            });
        });
        ok(r);
        samples[slot(samples, Kind::MmapTouch(pages), 0)].add(&m);
    }
    for pages in SIZES {
        let len = pages * PAGE;
        let nv = os.variants(Mechanism::FlushElision).len();
        for k in 0..nv {
            let v = (k + round) % nv;
            ok(os.set_variant(Mechanism::FlushElision, v));
            let mut r = Ok(());
            let m = measure(os, |os| r = os.mprotect(base, len, prot::NONE));
            ok(r);
            samples[slot(samples, Kind::Mprotect(Step::RwToNone, pages), v)].add(&m);
            let m = measure(os, |os| r = os.mprotect(base, len, prot::READ | prot::WRITE));
            ok(r);
            samples[slot(samples, Kind::Mprotect(Step::NoneToRw, pages), v)].add(&m);
        }
        let d = os.default_variant(Mechanism::FlushElision);
        ok(os.set_variant(Mechanism::FlushElision, d));
        let nv = os.variants(Mechanism::LazyRelax).len();
        for k in 0..nv {
            let v = (k + round) % nv;
            ok(os.set_variant(Mechanism::LazyRelax, v));
            // Read-only pages that a TLB holds as such, then the upgrade: alone, and with a
            // write to every page (the spurious faults a stale read-only entry causes).
            ok(os.mprotect(base, len, prot::READ));
            let _ = read_all(base, pages);
            let mut r = Ok(());
            let m = measure(os, |os| r = os.mprotect(base, len, prot::READ | prot::WRITE));
            ok(r);
            samples[slot(samples, Kind::Mprotect(Step::RoToRw, pages), v)].add(&m);
            ok(os.mprotect(base, len, prot::READ));
            let _ = read_all(base, pages);
            let m = measure(os, |os| {
                r = os.mprotect(base, len, prot::READ | prot::WRITE);
                touch(base, pages, round as u64);
            });
            ok(r);
            samples[slot(samples, Kind::Mprotect(Step::RoToRwTouch, pages), v)].add(&m);
        }
    }
    failures
}

/// A batch of yield round trips with the partner on this CPU. An error when the partner
/// could not start, or did not run between the yields (then it is not on this CPU).
fn yield_round<O: Os>(os: &mut O, samples: &mut [Samples]) -> Result<(), i64> {
    PARTNER.stop.store(false, Ordering::Relaxed);
    PARTNER.started.store(false, Ordering::Relaxed);
    os.start_partner()?;
    let mut tries = 0;
    while !PARTNER.started.load(Ordering::Acquire) && tries < 100_000 {
        os.yield_now();
        tries += 1;
    }
    let started = PARTNER.started.load(Ordering::Acquire);
    let here = os.getcpu();
    let y0 = PARTNER.yields.load(Ordering::Relaxed);
    let m = measure_cpu(os, |os| {
        for _ in 0..YIELD_BATCH {
            os.yield_now();
        }
    });
    let y1 = PARTNER.yields.load(Ordering::Relaxed);
    PARTNER.stop.store(true, Ordering::Release);
    os.yield_now();
    let joined = os.join_partner();
    let same_cpu = started && PARTNER.cpu.load(Ordering::Relaxed) == here;
    // Each of our yields let the partner yield once (a tick may add a few more switches).
    let alternated = y1 - y0 >= YIELD_BATCH && y1 - y0 <= YIELD_BATCH + 4;
    let m = Measured { ticks: m.ticks / YIELD_BATCH, insns: m.insns / YIELD_BATCH, valid: same_cpu && alternated, ..m };
    samples[slot(samples, Kind::Yield, 0)].add(&m);
    joined?;
    if !started {
        return Err(-1);
    }
    Ok(())
}

/// A fault on an untouched page of a fresh mapping whose page table exists already (its other
/// page was touched first, untimed): the demand-zero fault alone, not the table's allocation.
fn fault_round<O: Os>(os: &mut O, samples: &mut [Samples]) -> Result<(), i64> {
    let a = os.mmap(2 * PAGE)?;
    touch(a, 1, 1);
    let m = measure(os, |_| touch(a + PAGE, 1, 1));
    samples[slot(samples, Kind::Fault, 0)].add(&m);
    os.munmap(a, 2 * PAGE)
}

/// A row's figures, net of the measurement overhead.
struct Figures {
    ns: Summary,
    insns: Summary,
    raw_insns: u64,
}

fn figures(s: &mut Samples, overhead_ns: u64, overhead_insns: u64, net: bool) -> Figures {
    let n = s.n;
    let ns = Summary::of(&mut s.ns[..n]);
    let insns = Summary::of(&mut s.insns[..n]);
    let raw_insns = insns.median;
    if !net {
        return Figures { ns, insns, raw_insns };
    }
    let sub = |x: Summary, o: u64| Summary {
        n: x.n,
        min: x.min.saturating_sub(o),
        p10: x.p10.saturating_sub(o),
        median: x.median.saturating_sub(o),
        p90: x.p90.saturating_sub(o),
        max: x.max.saturating_sub(o),
    };
    Figures { ns: sub(ns, overhead_ns), insns: sub(insns, overhead_insns), raw_insns }
}

fn emit<O: Os>(os: &mut O, samples: &mut [Samples]) {
    let o = slot(samples, Kind::Overhead, 0);
    let ov = figures(&mut samples[o], 0, 0, false);
    let (ov_ns, ov_insns) = (ov.ns.median, ov.insns.median);
    for i in 0..samples.len() {
        let kind = samples[i].kind;
        let v = samples[i].variant;
        // The batch rows subtract nothing: their overhead is spread over the batch.
        let net = kind != Kind::Overhead && !kind.counts_cpu();
        let f = figures(&mut samples[i], ov_ns, ov_insns, net);
        let b = figures(&mut samples[slot(samples, kind, 0)], ov_ns, ov_insns, net);
        let s = &samples[i];
        let (variant, default) = match kind.mechanism() {
            Some(m) => (os.variants(m)[v], v == os.default_variant(m)),
            None => (os.peer(), true),
        };
        let row = kind.name();
        let mut case = Text::<96>::default();
        let _ = write!(case, "{}, {variant}", row.as_str());
        let pages = kind.pages();
        let n = s.n.max(1) as f64;
        let mut r = Record::new("bench");
        r.str("bench", BENCH)
            .str("case", case.as_str())
            .str("row", row.as_str())
            .str("variant", variant)
            .str("peer", os.peer())
            .bool("default", default)
            .u64("cpus", os.ncpus())
            .u64("pages", pages)
            .u64("n", s.n as u64)
            .u64("invalid", s.invalid)
            .u64("median_ns", f.ns.median)
            .u64("p10_ns", f.ns.p10)
            .u64("p90_ns", f.ns.p90)
            .f64("spread", f.ns.spread(), 3)
            .u64("median_insns", f.insns.median)
            .u64("raw_median_insns", f.raw_insns)
            .u64("overhead_ns", if net { ov_ns } else { 0 })
            .u64("overhead_insns", if net { ov_insns } else { 0 })
            .str("insns_of", if kind.counts_cpu() { "cpu" } else { "task" })
            .u64("ns_per_page", f.ns.median / pages)
            .u64("insns_per_page", f.insns.median / pages)
            .f64("tlbi_per_step", s.tlbi as f64 / n, 2)
            .f64("spurious_per_step", s.spurious as f64 / n, 2)
            .f64("ratio_ns", ratio(f.ns.median, b.ns.median), 3)
            .f64("ratio_insns", ratio(f.insns.median, b.insns.median), 3);
        os.report(&r);
    }
}

#[cfg(test)]
mod tests;
