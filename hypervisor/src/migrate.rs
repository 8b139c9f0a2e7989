//! Dirty logging under a running guest, used the way live migration uses it (`hyp.migrate`):
//! pre-copy rounds copy the guest's dirty pages into a second memory image (the *mirror*, kept
//! by the memory plan) while the guest keeps running, until the dirty set is small; then a
//! stop-and-copy round with the guest's writes held, and a check that the mirror equals the
//! guest's memory at the stop.
//!
//! Pieces:
//!
//! * a worker CPU: the last CPU of the board, left out of the guest's DTB; started (PSCI
//!   CPU_ON to the firmware) when the guest asks for a run, it does all the copying, so the
//!   guest's CPUs only pay for the write faults;
//! * a control page the guest reaches through stage 2 (an emulated MMIO page, named in the
//!   guest's DTB as `pgtlab,hyp-control` and on its command line as `pgtlab_ctl=ADDR`): a user
//!   program registers the pages it will write (by IPA, from `/proc/self/pagemap`), starts a
//!   run, and polls its state;
//! * dirty logging on the guest's RAM as one internal slot (`memslot::register_guest_ram`):
//!   scenario 1 (enable write-protects and splits eagerly) or 2 (manual protect with
//!   initially-set: each clear protects and splits what it clears).
//!
//! Every round copies a page only after its dirty bit was cleared and the page write-protected
//! (the protect is flushed before the clear returns), so a write after the copy always shows in
//! a later bitmap. The check of the watched pages uses that: a watched page whose first word
//! (the program's write counter) differs from the copy's before a bitmap read must be dirty in
//! that bitmap; one that is not is a missed page. The stop: every guest write now faults and
//! waits (`park`), the last dirty pages are copied, and the whole mirror is compared with the
//! guest's RAM.
//!
//! The control page's registers, states and verdicts are `abi::control` (the guest program
//! `linux-user/` uses the same).

use crate::dirtylog::internal as log;
use crate::mem::{Range, PAGE};
use abi::control::{reg, state, verdict, MAGIC, MAX_WATCH};
use abi::hypercall as hc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use rt::TrapFrame;
use spin::{Mutex, Once};

/// Fixed at boot.
struct Setup {
    /// The guest's RAM (one range: the hypervisor lives at the top of RAM).
    ram: Range,
    /// The second memory image.
    mirror: Range,
    /// The control page's IPA.
    control: u64,
    /// The worker: CPU index and MPIDR.
    worker: (usize, u64),
}

static SETUP: Once<Setup> = Once::new();

/// What the guest set and the run's progress.
struct Control {
    watch: Vec<u64>,
    threshold: u64,
    max_rounds: u64,
    scenario: u64,
}

static CONTROL: Mutex<Control> = Mutex::new(Control { watch: Vec::new(), threshold: 512, max_rounds: 30, scenario: 1 });
static STATE: AtomicU64 = AtomicU64::new(state::IDLE);
static ROUNDS: AtomicU64 = AtomicU64::new(0);
static VERDICT: AtomicU64 = AtomicU64::new(verdict::NONE);
/// Guest writes to RAM wait while this is set (the stop-and-copy).
static STOPPED: AtomicBool = AtomicBool::new(false);
/// Writes that waited for the stop to end.
static PARKED: AtomicU64 = AtomicU64::new(0);

/// Sets the feature up (`hyp.migrate`): the guest's RAM, the mirror, the control page, the
/// worker CPU. Returns an error message when the machine cannot do it.
pub fn init(guest_ram: &[Range], mirror: Range, control: u64, worker: (usize, u64)) -> Result<(), &'static str> {
    let [ram] = guest_ram else {
        return Err("hyp.migrate needs the guest's RAM in one range");
    };
    if mirror.len() < ram.len() {
        return Err("hyp.migrate: the second memory image is smaller than the guest's RAM");
    }
    SETUP.call_once(|| Setup { ram: *ram, mirror, control, worker });
    crate::cpu::keep_for_hypervisor(worker.0);
    crate::dirtylog::set_hold(holding);
    Ok(())
}

/// The worker CPU, when `hyp.migrate` is on.
pub fn worker_cpu() -> Option<usize> {
    SETUP.get().map(|s| s.worker.0)
}

/// A guest load or store that stage 2 had nothing for, at `ipa`: emulated when it is the
/// control page. Returns whether it was (the guest then resumes after the instruction).
pub fn mmio(frame: &mut TrapFrame, esr: u64, ipa: u64) -> bool {
    let Some(s) = SETUP.get() else { return false };
    if ipa & !(PAGE - 1) != s.control {
        return false;
    }
    let Some(a) = hypcore::mmio::decode(esr) else {
        return false;
    };
    if a.size != 8 {
        return false;
    }
    let reg = a.reg as usize;
    let off = ipa & (PAGE - 1);
    if a.write {
        write_reg(off, a.store_value(if reg == 31 { 0 } else { frame.x[reg] }));
    } else if reg != 31 {
        frame.x[reg] = a.load_result(read_reg(off));
    }
    frame.elr += u64::from(a.len);
    true
}

fn read_reg(off: u64) -> u64 {
    let c = CONTROL.lock();
    match off {
        reg::MAGIC => MAGIC,
        reg::WATCH => c.watch.len() as u64,
        reg::STATE => STATE.load(Ordering::Acquire),
        reg::ROUNDS => ROUNDS.load(Ordering::Acquire),
        reg::THRESHOLD => c.threshold,
        reg::MAX_ROUNDS => c.max_rounds,
        reg::VERDICT => VERDICT.load(Ordering::Acquire),
        _ => 0,
    }
}

fn write_reg(off: u64, v: u64) {
    let busy = STATE.load(Ordering::Acquire) == state::PRECOPY || STATE.load(Ordering::Acquire) == state::STOPPED;
    let mut c = CONTROL.lock();
    match off {
        reg::WATCH if !busy && c.watch.len() < MAX_WATCH && v.is_multiple_of(PAGE) => c.watch.push(v),
        reg::START if !busy && (v == 1 || v == 2) => {
            c.scenario = v;
            drop(c);
            start();
        }
        reg::THRESHOLD if !busy => c.threshold = v,
        reg::MAX_ROUNDS if !busy => c.max_rounds = v.clamp(1, 1000),
        _ => {}
    }
}

/// Starts the worker CPU (PSCI firmware or spin-table, into the hypervisor's secondary entry).
fn start() {
    let Some(s) = SETUP.get() else { return };
    STATE.store(state::PRECOPY, Ordering::Release);
    ROUNDS.store(0, Ordering::Release);
    VERDICT.store(verdict::NONE, Ordering::Release);
    let (idx, mpidr) = s.worker;
    let r = crate::psci::start_physical(idx, mpidr);
    if r != abi::psci::SUCCESS {
        rt::println!("hyp: migrate: starting the worker CPU {idx} failed (PSCI {r})");
        STATE.store(state::FAILED, Ordering::Release);
    }
}

/// Whether guest writes to `ipa` are being held (the stop-and-copy): the write-fault handler then
/// leaves the page read-only and lets the guest retry (and wait in [`park`]).
fn holding(ipa: u64) -> bool {
    STOPPED.load(Ordering::Acquire) && SETUP.get().is_some_and(|s| s.ram.contains(ipa, 1))
}

/// Called for a guest write that faulted on stage 2 at `ipa`: while the guest is stopped,
/// writes to its RAM wait here until the stop-and-copy is over, then retry. Returns whether it
/// waited.
pub fn park(ipa: u64) -> bool {
    let Some(s) = SETUP.get() else { return false };
    if !STOPPED.load(Ordering::Acquire) || !s.ram.contains(ipa, 1) {
        return false;
    }
    PARKED.fetch_add(1, Ordering::Relaxed);
    while STOPPED.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    true
}

fn now_ns() -> u64 {
    rt::counter_ns()
}

/// The mirror's address for guest page `ipa`.
fn mirror_of(s: &Setup, ipa: u64) -> u64 {
    s.mirror.start + (ipa - s.ram.start)
}

/// Copies guest page `ipa` into the mirror.
fn copy_page(s: &Setup, ipa: u64) {
    // SAFETY: `ipa` is a page of guest RAM and its mirror page lies in the mirror, both mapped
    // RW at EL2, page aligned and disjoint. The guest may write its page concurrently only if
    // the page was write-protected first (the caller cleared its dirty bit), in which case the
    // write is logged and the page copied again later.
    unsafe { crate::mem::copy_fast(mirror_of(s, ipa), ipa, PAGE) };
}

/// Whether the guest's page `ipa` and its mirror page hold the same bytes (64-bit words: the
/// compiler's memcmp compares byte by byte here).
fn same_page(s: &Setup, ipa: u64) -> bool {
    // SAFETY: both pages are mapped at EL2 and 8-byte aligned; 512 words each.
    let (a, b) = unsafe {
        (
            core::slice::from_raw_parts(ipa as *const u64, 512),
            core::slice::from_raw_parts(mirror_of(s, ipa) as *const u64, 512),
        )
    };
    a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn first_word(a: u64) -> u64 {
    // SAFETY: `a` is a page of guest RAM or the mirror, mapped at EL2; a racing guest write
    // gives one value or the other.
    unsafe { core::ptr::read_volatile(a as *const u64) }
}

/// One pre-copy round's figures.
#[derive(Default, Clone, Copy)]
struct Round {
    dirty: u64,
    copied: u64,
    ns: u64,
    faults: u64,
    missed: u64,
    watched_dirty: u64,
}

/// Reads the watched pages' first words (the guest program's write counters) before a bitmap
/// read.
fn watch_before(watch: &[u64]) -> Vec<u64> {
    let v: Vec<u64> = watch.iter().map(|&w| first_word(w)).collect();
    core::sync::atomic::fence(Ordering::SeqCst);
    v
}

/// Watched pages written since their last copy (counter differs) but clean in `bitmap`: missed.
fn check_watch(s: &Setup, watch: &[u64], before: &[u64], bitmap: &[u64]) -> (u64, u64) {
    let (mut missed, mut dirty) = (0, 0);
    for (&w, &seen) in watch.iter().zip(before) {
        let page = (w - s.ram.start) / PAGE;
        let bit = bitmap[(page / 64) as usize] >> (page % 64) & 1 == 1;
        if seen != first_word(mirror_of(s, w)) {
            dirty += 1;
            if !bit {
                missed += 1;
                if missed <= 4 {
                    rt::println!("hyp: migrate: MISSED page {w:#x}: written (counter {seen}) but clean in the bitmap");
                }
            }
        }
    }
    (missed, dirty)
}

/// Copies every page whose bit is set in `bitmap` (after `log::clear` protected them); word 0
/// of `bitmap` is word `first_word` of the whole bitmap.
fn copy_dirty(s: &Setup, first_word: usize, bitmap: &[u64]) -> u64 {
    let mut n = 0;
    for (i, &word) in bitmap.iter().enumerate() {
        let w = first_word + i;
        let mut m = word;
        while m != 0 {
            let b = m.trailing_zeros() as u64;
            m &= m - 1;
            let ipa = s.ram.start + (w as u64 * 64 + b) * PAGE;
            if ipa < s.ram.end {
                copy_page(s, ipa);
                n += 1;
            }
        }
    }
    n
}

/// Clears (and so write-protects) the pages of `bitmap` in chunks of 32768 pages, then copies
/// each chunk: the order every round keeps.
fn clear_and_copy(s: &Setup, id: u64, bitmap: &[u64]) -> Result<u64, abi::error::HypError> {
    let pages = s.ram.len() / PAGE;
    const CHUNK_WORDS: usize = 512;
    let mut copied = 0;
    for (c, chunk) in bitmap.chunks(CHUNK_WORDS).enumerate() {
        if chunk.iter().all(|&w| w == 0) {
            continue;
        }
        let first = (c * CHUNK_WORDS * 64) as u64;
        let count = (chunk.len() as u64 * 64).min(pages - first);
        log::clear(id, first, count, chunk)?;
        copied += copy_dirty(s, c * CHUNK_WORDS, chunk);
    }
    Ok(copied)
}

fn faults() -> u64 {
    crate::counters::DIRTY.faults.load(Ordering::Relaxed)
}

/// The worker CPU's life: one migration run, then PSCI CPU_OFF.
pub fn worker_main() -> ! {
    let s = SETUP.get().expect("the worker starts only with hyp.migrate");
    let (scenario, threshold, max_rounds, watch) = {
        let c = CONTROL.lock();
        (c.scenario, c.threshold, c.max_rounds, c.watch.clone())
    };
    let ok = match run(s, scenario, threshold, max_rounds, &watch) {
        Ok(good) => good,
        Err(e) => {
            rt::println!("hyp: migrate: failed: {e}");
            STOPPED.store(false, Ordering::Release);
            false
        }
    };
    VERDICT.store(if ok { verdict::EQUAL } else { verdict::DIFFERS }, Ordering::Release);
    STATE.store(if ok { state::DONE } else { state::FAILED }, Ordering::Release);
    crate::smccc::smc(abi::psci::CPU_OFF, 0, 0, 0);
    loop {
        aarch64_cpu::asm::wfe();
    }
}

fn run(s: &Setup, scenario: u64, threshold: u64, max_rounds: u64, watch: &[u64]) -> Result<bool, abi::error::HypError> {
    let id = crate::memslot::register_guest_ram(s.ram);
    let pages = s.ram.len() / PAGE;
    rt::println!(
        "hyp: migrate: scenario {scenario}, guest RAM {} ({} pages), mirror {}, {} watched pages, threshold {threshold}, \
         at most {max_rounds} rounds",
        s.ram,
        pages,
        s.mirror,
        watch.len()
    );
    let t_start = now_ns();
    let f0 = faults();
    let split0 = crate::counters::DIRTY.split_ns.load(Ordering::Relaxed);
    let flags = if scenario == 2 {
        hc::DIRTY_LOG_MANUAL_PROTECT | hc::DIRTY_LOG_EAGER_SPLIT
    } else {
        hc::DIRTY_LOG_EAGER_SPLIT
    };
    crate::dirtylog::enable_slot(id, flags, true)?;
    let enable_ns = now_ns() - t_start;
    let mut bitmap: Vec<u64> = Vec::new();
    let mut rounds: Vec<Round> = Vec::new();
    let mut missed_total = 0;
    // Round 0 copies everything: in scenario 1 the protect at enable came first; in scenario 2
    // every bit starts set, and each chunk is cleared (protected, split) before it is copied.
    let mut converged = false;
    for n in 0..max_rounds {
        let t0 = now_ns();
        let fr = faults();
        let before = watch_before(watch);
        let dirty = log::get(id, &mut bitmap)?;
        let (missed, watched_dirty) = if n == 0 { (0, 0) } else { check_watch(s, watch, &before, &bitmap) };
        missed_total += missed;
        let copied = if n == 0 && scenario == 1 {
            // Everything, the bits set since enable included (cleared first).
            clear_and_copy(s, id, &bitmap)?;
            let mut c = 0;
            let mut a = s.ram.start;
            while a < s.ram.end {
                copy_page(s, a);
                a += PAGE;
                c += 1;
            }
            c
        } else {
            clear_and_copy(s, id, &bitmap)?
        };
        let r = Round { dirty, copied, ns: now_ns() - t0, faults: faults() - fr, missed, watched_dirty };
        let mut rec = abi::report::Record::new("migrate_round");
        rec.u64("scenario", scenario)
            .u64("round", n)
            .u64("dirty_pages", r.dirty)
            .u64("copied_pages", r.copied)
            .u64("watched_dirty", r.watched_dirty)
            .u64("missed", r.missed)
            .u64("faults", r.faults)
            .u64("ns", r.ns);
        rt::println!("{rec}");
        rounds.push(r);
        ROUNDS.store(n + 1, Ordering::Release);
        if n > 0 && dirty <= threshold {
            converged = true;
            break;
        }
    }
    let precopy_ns = now_ns() - t_start;

    // Stop and copy: hold every guest write, copy what is still dirty, compare.
    let t_stop = now_ns();
    STOPPED.store(true, Ordering::SeqCst);
    STATE.store(state::STOPPED, Ordering::Release);
    log::protect_all(id)?;
    let before = watch_before(watch);
    let dirty = log::get(id, &mut bitmap)?;
    let (missed, watched_dirty) = check_watch(s, watch, &before, &bitmap);
    missed_total += missed;
    let copied = clear_and_copy(s, id, &bitmap)?;
    let downtime_ns = now_ns() - t_stop;
    let t_check = now_ns();
    let (mut mismatched, mut first_bad) = (0u64, 0u64);
    let mut a = s.ram.start;
    while a < s.ram.end {
        // The guest cannot write its page: it is stopped.
        if !same_page(s, a) {
            if mismatched == 0 {
                first_bad = a;
            }
            mismatched += 1;
        }
        a += PAGE;
    }
    let check_ns = now_ns() - t_check;
    STOPPED.store(false, Ordering::SeqCst);
    crate::dirtylog::disable_slot(id, true)?;
    let total_ns = now_ns() - t_start;
    let split_ns = crate::counters::DIRTY.split_ns.load(Ordering::Relaxed) - split0;
    let good = mismatched == 0 && missed_total == 0;
    let mut rec = abi::report::Record::new("migrate_stop");
    rec.u64("scenario", scenario)
        .u64("dirty_pages", dirty)
        .u64("copied_pages", copied)
        .u64("watched_dirty", watched_dirty)
        .u64("missed", missed)
        .u64("downtime_ns", downtime_ns)
        .u64("parked_writes", PARKED.load(Ordering::Relaxed));
    rt::println!("{rec}");
    let mut rec = abi::report::Record::new("migrate_summary");
    rec.u64("scenario", scenario)
        .u64("guest_pages", pages)
        .u64("watched_pages", watch.len() as u64)
        .u64("rounds", rounds.len() as u64)
        .bool("converged", converged)
        .u64("threshold", threshold)
        .u64s("pages_per_round", &rounds.iter().map(|r| r.dirty).collect::<Vec<_>>())
        .u64("enable_ns", enable_ns)
        .u64("split_ns", split_ns)
        .u64("faults", faults() - f0)
        .u64("precopy_ns", precopy_ns)
        .u64("downtime_ns", downtime_ns)
        .u64("check_ns", check_ns)
        .u64("total_ns", total_ns)
        .u64("missed", missed_total)
        .u64("mismatched_pages", mismatched)
        .hex("first_mismatch", first_bad)
        .bool("mirror_equal", mismatched == 0);
    rt::println!("{rec}");
    rt::println!(
        "hyp: migrate: {} rounds ({}), {} pages at the stop, downtime {} us, mirror {} the guest's memory, {} missed page(s)",
        rounds.len(),
        if converged { "converged" } else { "round limit" },
        copied,
        downtime_ns / 1000,
        if mismatched == 0 { "equals" } else { "DIFFERS FROM" },
        missed_total
    );
    Ok(good)
}
