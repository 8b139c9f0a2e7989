//! Self-tests of the hypervisor's memslots and dirty logging:
//!
//! * `test=memslot-errors`: every bad argument of the memslot / dirty-log / walker / counter
//!   calls returns its documented error code, and afterwards the stage-2 table-page gauge is
//!   back where it started (boot with `hyp.slotpool=64M hyp.pool=16M`: 1 GiB backing and a
//!   64 GiB slot of 4 KiB pages must then be refused, the latter after running out of tables).
//! * `test=dirty-log`: for each backing (4 KiB, 2 MiB, 1 GiB) and each scenario (1: enable
//!   write-protects and splits eagerly; 2: manual-protect, initially set, clear protects and
//!   splits; lazy: enable only write-protects, blocks split on the first write), every online
//!   CPU writes its share of a known random set of pages; the dirty bitmap must equal exactly
//!   that set, twice (the clear in between re-protects). Each backing and each scenario runs
//!   under every split walker once (baseline, SKIP_LEVEL3, summary). Needs `hyp.slotpool=1G` (and enough
//!   RAM), or with `dirty.largest=2M` (no 1 GiB backing) 64 MiB. `dirty.seed=N` fixes the
//!   random seed (printed otherwise).
//! * `test=memslot-nopool`: without `hyp.slotpool`, MEMSLOT_CREATE answers NO_MEMORY.

use crate::hyp;
use crate::work;
use abi::error::HypError;
use abi::hypercall as hc;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use spin::Mutex;

use crate::mm::frames::PAGE;
const GIB: u64 = 1 << 30;

/// Where the tests put memslots: 128 GiB, or the first 64 GiB boundary above RAM.
pub fn slot_window() -> u64 {
    let k = crate::arch::machine::KERNEL.get().unwrap();
    let ram_end = k.board.memory.iter().map(|r| r.end()).max().unwrap_or(0);
    (0x20_0000_0000u64).max((ram_end + (64 * GIB) - 1) & !(64 * GIB - 1))
}

fn expect(what: &str, got: i64, want: i64) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: returned {got} ({}), expected {want} ({})", abi::error::name(got), abi::error::name(want)))
    }
}

fn code(r: Result<impl Sized, HypError>) -> i64 {
    match r {
        Ok(_) => abi::error::SUCCESS,
        Err(e) => e.code(),
    }
}

/// `test=memslot-errors`.
pub fn errors() -> Result<(), String> {
    use abi::error::*;
    let k = crate::arch::machine::KERNEL.get().unwrap();
    if k.host != crate::arch::power::Host::Hypervisor {
        return Err("test=memslot-errors needs the hypervisor".into());
    }
    let base = slot_window();
    let m2 = 2 << 20;
    let mut n = 0;
    let mut check = |what: &str, got: i64, want: i64| -> Result<(), String> {
        n += 1;
        expect(what, got, want)
    };
    hyp::counters_reset().map_err(|e| format!("COUNTERS_RESET: {e}"))?;
    let pages0 = hyp::counter(hc::Counter::TablePages).map_err(|e| format!("COUNTER_READ: {e}"))?;
    let create = |b: u64, s: u64, f: u64| hyp::raw(hc::MEMSLOT_CREATE, b, s, f);

    check("unknown call END", hyp::raw(hc::END, 0, 0, 0), NOT_SUPPORTED)?;
    check("create: unknown flag", create(base, m2, 1 << 5), INVALID_PARAMETER)?;
    check("create: unknown backing", create(base, m2, 3), INVALID_PARAMETER)?;
    check("create: size 0", create(base, 0, hc::MEMSLOT_BACKING_4K), INVALID_PARAMETER)?;
    check("create: base misaligned", create(base + PAGE, m2, hc::MEMSLOT_BACKING_2M), MISALIGNED)?;
    check("create: size misaligned", create(base, m2 + PAGE, hc::MEMSLOT_BACKING_2M), MISALIGNED)?;
    check("create: beyond 40-bit IPA", create((1 << 40) - m2, 2 * m2, hc::MEMSLOT_BACKING_2M), OUT_OF_RANGE)?;
    check("create: wraps", create(!(PAGE - 1), 2 * PAGE, hc::MEMSLOT_BACKING_4K), OUT_OF_RANGE)?;
    let ram0 = k.board.memory[0].base;
    check("create: over guest RAM", create(ram0, m2, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
    if let Ok(hole) = super::hypervisor_memory() {
        check("create: over the hypervisor", create(hole, PAGE, hc::MEMSLOT_BACKING_4K), DENIED)?;
    }
    if let Some(u) = &k.board.console {
        let uart = u.base & !(PAGE - 1);
        check("create: over the UART", create(uart, PAGE, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
        // Sharing only its first or only its last page with the UART's: refused, and the
        // UART still prints (the records after this one).
        check("create: ending on the UART's page", create(uart - PAGE, 2 * PAGE, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
        check("create: starting on the UART's page", create(uart, 2 * PAGE, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
        // The device is the first page of the walk, unmapped pages follow: every entry counts,
        // not the last one seen.
        check("create: from the UART on", create(uart, 4 * PAGE, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
    }
    check("create: 1 GiB backing, 64 MiB pool", create(base, GIB, hc::MEMSLOT_BACKING_1G), NO_MEMORY)?;
    // A slot of 4 KiB pages needs a table page per 2 MiB: one larger than the frame pool can
    // map runs out of tables (whatever the pool's size) and must leave nothing mapped.
    let pool_pages = hyp::counter(hc::Counter::FramePoolPages).map_err(|e| format!("COUNTER_READ: {e}"))?;
    let exhaust = ((pool_pages + 64) * m2).div_ceil(GIB) * GIB;
    if base + exhaust > 1 << 40 {
        return Err(format!(
            "memslot-errors: a {pool_pages}-page frame pool cannot be exhausted inside the 40-bit IPA space \
             (boot with a smaller hyp.pool)"
        ));
    }
    check("create: page tables exhausted", create(base, exhaust, hc::MEMSLOT_BACKING_4K), NO_MEMORY)?;

    let id = hyp::memslot_create(base, 4 * m2, hc::MEMSLOT_BACKING_2M).map_err(|e| format!("create: {e}"))?;
    check("create: overlapping slot", create(base + m2, m2, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
    // Fill every slot, then one more.
    let mut more = Vec::new();
    for i in 1..hc::MAX_MEMSLOTS as u64 {
        more.push(
            hyp::memslot_create(base + i * GIB, m2, hc::MEMSLOT_BACKING_4K).map_err(|e| format!("slot {i}: {e}"))?,
        );
    }
    check("create: too many slots", create(base + 32 * GIB, m2, hc::MEMSLOT_BACKING_4K), NO_MEMORY)?;
    // With the table full, an overlap is still an overlap (not "no free slot").
    check("create: overlapping slot, table full", create(base + m2, m2, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
    check("create: over guest RAM, table full", create(ram0, m2, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
    if let Some(u) = &k.board.console {
        let uart = u.base & !(PAGE - 1);
        check("create: over the UART, table full", create(uart, PAGE, hc::MEMSLOT_BACKING_4K), OVERLAP)?;
    }
    for s in more {
        check("delete", code(hyp::memslot_delete(s)), SUCCESS)?;
    }

    let bogus = 0xdead_beef;
    check("delete: unknown id", code(hyp::memslot_delete(bogus)), NOT_FOUND)?;
    check("enable: unknown id", code(hyp::dirty_log_enable(bogus, 0)), NOT_FOUND)?;
    check("disable: unknown id", code(hyp::dirty_log_disable(bogus)), NOT_FOUND)?;
    let mut buf = vec![0u64; 64];
    check("get: unknown id", code(hyp::dirty_log_get(bogus, &mut buf)), NOT_FOUND)?;
    check("clear: unknown id", code(hyp::dirty_log_clear(bogus, &buf, 0, 64)), NOT_FOUND)?;
    check("get: not logging", code(hyp::dirty_log_get(id, &mut buf)), INVALID_PARAMETER)?;
    check("clear: not logging", code(hyp::dirty_log_clear(id, &buf, 0, 64)), INVALID_PARAMETER)?;
    check("disable: not logging", code(hyp::dirty_log_disable(id)), INVALID_PARAMETER)?;
    check("enable: unknown flag", code(hyp::dirty_log_enable(id, 1 << 7)), INVALID_PARAMETER)?;
    check("enable", code(hyp::dirty_log_enable(id, hc::DIRTY_LOG_EAGER_SPLIT)), SUCCESS)?;
    check("enable: twice", code(hyp::dirty_log_enable(id, 0)), BUSY)?;
    check("delete: while logging", code(hyp::memslot_delete(id)), BUSY)?;

    // Buffers. The slot has 2048 pages: a bitmap of 256 bytes.
    let ipa = hyp::buffer_ipa(buf.as_ptr() as u64, 512)?;
    let get = |b: u64, l: u64| hyp::raw(hc::DIRTY_LOG_GET, id, b, l);
    check("get: ok", get(ipa, 512), SUCCESS)?;
    check("get: misaligned buffer", get(ipa + 4, 256), MISALIGNED)?;
    check("get: buffer too small", get(ipa, 8), INVALID_PARAMETER)?;
    check("get: buffer wraps", get(ipa, u64::MAX - 7), OUT_OF_RANGE)?;
    check("get: buffer in a memslot", get(base, 256), OUT_OF_RANGE)?;
    check("get: buffer at 0", get(0, 256), OUT_OF_RANGE)?;
    if let Ok(hole) = super::hypervisor_memory() {
        check("get: buffer in the hypervisor", get(hole, 256), DENIED)?;
        check("get: buffer ending in the hypervisor", get(hole - 64, 256), DENIED)?;
        check("clear: mask in the hypervisor", hyp::raw(hc::DIRTY_LOG_CLEAR, id, hole, 64 << 32), DENIED)?;
    }
    let clear = |first: u64, count: u64| hyp::raw(hc::DIRTY_LOG_CLEAR, id, ipa, first | count << 32);
    buf.iter_mut().for_each(|w| *w = 0);
    hyp::sync_buffer(buf.as_ptr() as u64, 512);
    check("clear: ok", clear(64, 128), SUCCESS)?;
    check("clear: count 0", clear(0, 0), INVALID_PARAMETER)?;
    check("clear: first not a multiple of 64", clear(3, 64), MISALIGNED)?;
    check("clear: count not a multiple of 64", clear(0, 100), MISALIGNED)?;
    check("clear: to the end", clear(2048 - 64, 64), SUCCESS)?;
    check("clear: past the end", clear(2048 - 64, 128), OUT_OF_RANGE)?;
    check("clear: misaligned mask", hyp::raw(hc::DIRTY_LOG_CLEAR, id, ipa + 4, 64 << 32), MISALIGNED)?;
    check("clear: mask outside RAM", hyp::raw(hc::DIRTY_LOG_CLEAR, id, base, 64 << 32), OUT_OF_RANGE)?;

    check("walker: unknown mode", hyp::raw(hc::WALKER_MODE, 7, 0, 0), INVALID_PARAMETER)?;
    check("walker: chunk misaligned", hyp::raw(hc::WALKER_MODE, 0, PAGE, 0), MISALIGNED)?;
    let prev = hyp::walker_mode(hc::WalkerMode::Baseline, 0).map_err(|e| format!("walker: {e}"))?;
    let back = hyp::walker_mode(hc::WalkerMode::SkipLevel3, prev.1).map_err(|e| format!("walker: {e}"))?;
    check("walker: previous mode returned", back.0 as i64, hc::WalkerMode::Baseline as i64)?;
    check("counter: unknown", hyp::raw(hc::COUNTER_READ, 999, 0, 0), INVALID_PARAMETER)?;

    check("disable", code(hyp::dirty_log_disable(id)), SUCCESS)?;
    check("delete", code(hyp::memslot_delete(id)), SUCCESS)?;
    check("delete: twice", code(hyp::memslot_delete(id)), NOT_FOUND)?;
    let odd = odd_slot_bitmap(base)?;
    let pages1 = hyp::counter(hc::Counter::TablePages).map_err(|e| format!("COUNTER_READ: {e}"))?;
    check("stage-2 table pages after deleting every slot", pages1 as i64, pages0 as i64)?;
    let n = n + odd;
    rt::println!("kernel: memslot-errors: {n} checks passed, stage 2 back to {pages1} table pages");
    Ok(())
}

/// A slot of 100 pages (not a multiple of 64): the bitmap's last word holds exactly 36 bits,
/// the hypervisor writes no byte past `ceil(pages / 64)` words, and a clear that reaches the
/// slot's end clears exactly those bits. Returns the checks made.
fn odd_slot_bitmap(base: u64) -> Result<u32, String> {
    const PAGES: u64 = 100;
    const GUARD: u64 = 0x6775_6172_6467_7561;
    let e = |s: &str, err: HypError| format!("odd slot: {s}: {err}");
    let id = hyp::memslot_create(base, PAGES * PAGE, hc::MEMSLOT_BACKING_4K).map_err(|err| e("create", err))?;
    hyp::dirty_log_enable(id, hc::DIRTY_LOG_MANUAL_PROTECT).map_err(|err| e("enable", err))?;
    let get = |buf: &mut [u64; 3]| -> Result<(), String> {
        *buf = [0, 0, GUARD];
        hyp::sync_buffer(buf.as_ptr() as u64, 24);
        let ipa = hyp::buffer_ipa(buf.as_ptr() as u64, 24)?;
        let r = hyp::raw(hc::DIRTY_LOG_GET, id, ipa, 16);
        hyp::sync_buffer(buf.as_ptr() as u64, 24);
        expect("odd slot: get", r, abi::error::SUCCESS)?;
        expect("odd slot: the word after the bitmap is untouched", (buf[2] == GUARD) as i64, 1)
    };
    let mut buf = [0u64; 3];
    get(&mut buf)?;
    let last = (1u64 << (PAGES % 64)) - 1;
    expect("odd slot: initially set, first word", (buf[0] == u64::MAX) as i64, 1)?;
    expect("odd slot: initially set, last word exact", buf[1] as i64, last as i64)?;
    hyp::dirty_log_clear(id, &[u64::MAX, u64::MAX], 0, PAGES).map_err(|err| e("clear", err))?;
    get(&mut buf)?;
    expect("odd slot: after a clear to the end", (buf[0] | buf[1]) as i64, 0)?;
    let ptr = hyp::slot_ptr(base + (PAGES - 1) * PAGE)?;
    // SAFETY: the slot's last page, mapped by slot_ptr; the test owns the slot.
    unsafe { core::ptr::write_volatile(ptr, 1) };
    get(&mut buf)?;
    expect("odd slot: the last page's bit", buf[1] as i64, (1u64 << 35) as i64)?;
    expect("odd slot: nothing else", buf[0] as i64, 0)?;
    hyp::dirty_log_disable(id).map_err(|err| e("disable", err))?;
    hyp::memslot_delete(id).map_err(|err| e("delete", err))?;
    Ok(7)
}

/// `test=memslot-nopool`: without `hyp.slotpool` every memslot is refused with NO_MEMORY.
pub fn no_pool() -> Result<(), String> {
    let base = slot_window();
    for backing in [hc::MEMSLOT_BACKING_4K, hc::MEMSLOT_BACKING_2M, hc::MEMSLOT_BACKING_1G] {
        let size = hc::backing_size(backing).unwrap_or(PAGE);
        expect("create without a pool", hyp::raw(hc::MEMSLOT_CREATE, base, size, backing), abi::error::NO_MEMORY)?;
    }
    rt::println!("kernel: memslot-nopool: every memslot refused with NO_MEMORY");
    Ok(())
}

/// Pointers (as addresses) each CPU writes, with their expected value: CPU `i` of `n` writes
/// entries `i, i + n, ...`.
static PLAN: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());
static WRONG: AtomicU64 = AtomicU64::new(0);

fn write_share(me: usize, n: usize) {
    let plan = PLAN.lock().clone();
    for &(ptr, value) in plan.iter().skip(me).step_by(n) {
        // SAFETY: `ptr` maps a page of a memslot this test created (hyp::slot_ptr); every page
        // is the test's own and the hypervisor backs it.
        unsafe {
            core::ptr::write_volatile(ptr as *mut u64, value);
            if core::ptr::read_volatile(ptr as *const u64) != value {
                WRONG.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Writes the `pages` (indices into the slot) from every CPU; returns the expected bitmap.
fn write_pages(base: u64, pages: &[u64], words: usize, tag: u64, cpus: usize) -> Result<Vec<u64>, String> {
    let mut expected = vec![0u64; words];
    let mut plan = Vec::with_capacity(pages.len());
    for &p in pages {
        expected[(p / 64) as usize] |= 1 << (p % 64);
        let ptr = hyp::slot_ptr(base + p * PAGE)?;
        // A different word in each page so the value says which page it is.
        let word = (p % 512) * 8;
        plan.push((ptr as u64 + word, tag ^ p));
    }
    *PLAN.lock() = plan;
    WRONG.store(0, Ordering::Relaxed);
    work::run_everywhere(cpus, write_share)?;
    let wrong = WRONG.load(Ordering::Relaxed);
    if wrong != 0 {
        return Err(format!("{wrong} written values did not read back"));
    }
    Ok(expected)
}

fn compare(what: &str, got: &[u64], want: &[u64]) -> Result<u64, String> {
    let count = |v: &[u64]| v.iter().map(|w| w.count_ones() as u64).sum::<u64>();
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            let bit = (g ^ w).trailing_zeros() as u64;
            return Err(format!(
                "{what}: bitmap differs first at page {} (dirty {}, expected {}); {} pages dirty, {} expected",
                i as u64 * 64 + bit,
                g >> bit & 1,
                w >> bit & 1,
                count(got),
                count(want)
            ));
        }
    }
    Ok(count(got))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Eager,
    Manual,
    Lazy,
}

/// `test=dirty-log`.
pub fn dirty(o: &kcore::options::TestOptions) -> Result<(), String> {
    let k = crate::arch::machine::KERNEL.get().unwrap();
    if k.host != crate::arch::power::Host::Hypervisor {
        return Err("test=dirty-log needs the hypervisor".into());
    }
    let seed = o.dirty_seed.unwrap_or_else(|| crate::perf::now_ns() | 1);
    let cpus = work::cpus();
    rt::println!("kernel: dirty-log: seed {seed}, {cpus} CPUs writing");
    let mut rng = Rng(seed);
    let base = slot_window();
    let walkers = [hc::WalkerMode::Baseline, hc::WalkerMode::SkipLevel3, hc::WalkerMode::Summary];
    for (bi, (backing, name, size)) in [
        (hc::MEMSLOT_BACKING_4K, "4K", 64 << 20),
        (hc::MEMSLOT_BACKING_2M, "2M", 64 << 20),
        (hc::MEMSLOT_BACKING_1G, "1G", GIB),
    ]
    .into_iter()
    .enumerate()
    .filter(|(_, (backing, _, _))| !(o.dirty_no_1g && *backing == hc::MEMSLOT_BACKING_1G))
    {
        for (si, sc) in [Scenario::Eager, Scenario::Manual, Scenario::Lazy].into_iter().enumerate() {
            // Every backing and every scenario meets every walker once.
            let walker = walkers[(bi + si) % walkers.len()];
            hyp::walker_mode(walker, 0).map_err(|err| format!("walker: {err}"))?;
            let sname = match sc {
                Scenario::Eager => "enable-split",
                Scenario::Manual => "manual-protect",
                Scenario::Lazy => "enable-lazy",
            };
            let what = format!("{name} {sname}");
            let e = |s: &str, err: HypError| format!("{what}: {s}: {err}");
            let pages = size / PAGE;
            let words = pages.div_ceil(64) as usize;
            let id = hyp::memslot_create(base, size, backing).map_err(|err| e("create", err))?;
            let pick = |rng: &mut Rng| -> Vec<u64> { (0..300).map(|_| rng.next() % pages).collect() };
            // Writes before logging starts are not dirty.
            write_pages(base, &pick(&mut rng), words, seed, cpus)?;
            let flags = match sc {
                Scenario::Eager => hc::DIRTY_LOG_EAGER_SPLIT,
                Scenario::Manual => hc::DIRTY_LOG_MANUAL_PROTECT | hc::DIRTY_LOG_EAGER_SPLIT,
                Scenario::Lazy => 0,
            };
            hyp::counters_reset().map_err(|err| e("reset", err))?;
            hyp::dirty_log_enable(id, flags).map_err(|err| e("enable", err))?;
            let mut bitmap = vec![0u64; words];
            let all = vec![u64::MAX; words];
            if sc == Scenario::Manual {
                hyp::dirty_log_get(id, &mut bitmap).map_err(|err| e("get", err))?;
                let mut want = all.clone();
                if !pages.is_multiple_of(64) {
                    want[words - 1] = (1 << (pages % 64)) - 1;
                }
                compare(&format!("{what}: initially set"), &bitmap, &want)?;
                // A clear of part of a block (pages 64..192): the blocks it touches are
                // write-protected whole, then split (as KVM). Pages outside the span but in
                // those blocks still take writes (a fault makes them writable) and keep their
                // set bits; inside the span only the written pages are dirty again.
                hyp::dirty_log_clear(id, &[u64::MAX; 2], 64, 128).map_err(|err| e("partial clear", err))?;
                let written = write_pages(base, &[0, 63, 100, 191, 192], words, seed ^ 0x5a, cpus)?;
                for (w, bits) in want.iter_mut().enumerate().skip(1).take(2) {
                    *bits = written[w];
                }
                hyp::dirty_log_get(id, &mut bitmap).map_err(|err| e("get", err))?;
                compare(&format!("{what}: after a partial clear"), &bitmap, &want)?;
                hyp::dirty_log_clear(id, &all, 0, pages).map_err(|err| e("clear", err))?;
            }
            let mut dirty_total = 0;
            for round in 0..2 {
                let set = pick(&mut rng);
                let want = write_pages(base, &set, words, seed.rotate_left(round + 1), cpus)?;
                hyp::dirty_log_get(id, &mut bitmap).map_err(|err| e("get", err))?;
                dirty_total += compare(&format!("{what}: round {round}"), &bitmap, &want)?;
                hyp::dirty_log_clear(id, &all, 0, pages).map_err(|err| e("clear", err))?;
                hyp::dirty_log_get(id, &mut bitmap).map_err(|err| e("get", err))?;
                compare(&format!("{what}: after clear"), &bitmap, &vec![0; words])?;
            }
            let faults = hyp::counter(hc::Counter::DirtyFaults).map_err(|err| e("counter", err))?;
            let split = hyp::counter(hc::Counter::BlocksSplit).map_err(|err| e("counter", err))?;
            let l3 = hyp::counter(hc::Counter::SplitVisitsL3).map_err(|err| e("counter", err))?;
            hyp::dirty_log_disable(id).map_err(|err| e("disable", err))?;
            // The last clear left every page read-only: writes after disabling fault once each
            // and are made writable, without a log to mark.
            let before = hyp::counter(hc::Counter::DirtyFaults).map_err(|err| e("counter", err))?;
            let tlbi_before = hyp::counter(hc::Counter::Tlbi).map_err(|err| e("counter", err))?;
            let set = pick(&mut rng);
            write_pages(base, &set, words, seed, cpus)?;
            let after = hyp::counter(hc::Counter::DirtyFaults).map_err(|err| e("counter", err))?;
            let tlbi_after = hyp::counter(hc::Counter::Tlbi).map_err(|err| e("counter", err))?;
            if after <= before {
                return Err(format!("{what}: writes after disable took no fault ({before} -> {after})"));
            }
            // Only write faults happened in between: each made its page writable with a TLBI.
            let (late_faults, late_tlbi) = (after - before, tlbi_after - tlbi_before);
            hyp::memslot_delete(id).map_err(|err| e("delete", err))?;
            let mut r = abi::report::Record::new("dirty_log");
            r.str("backing", name)
                .str("scenario", sname)
                .str("walker", walker.name())
                .u64("cpus", cpus as u64)
                .u64("dirty_pages", dirty_total)
                .u64("faults", faults)
                .u64("blocks_split", split)
                .u64("split_visits_l3", l3)
                .u64("late_faults", late_faults)
                .u64("late_tlbi", late_tlbi);
            rt::println!("{r}");
        }
    }
    hyp::walker_mode(hc::WalkerMode::SkipLevel3, 0).map_err(|err| format!("walker: {err}"))?;
    rt::println!("kernel: dirty-log: every bitmap matched exactly");
    Ok(())
}
