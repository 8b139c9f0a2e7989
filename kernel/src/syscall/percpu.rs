//! `percpu(op, ...)`: per-CPU variables from EL0 (see `abi::syscall::percpu`): the stress
//! test's adds in a preemptible section, sums, the mode switch, dynamic allocation, affinity,
//! the late-mapping check and the benchmark's timed loops.

use crate::percpu::{self as pc, base, window, PerCpu, Seed};
use crate::sched;
use abi::syscall::errno;
use abi::syscall::percpu::{self as op, bench_op, method, Stats, STATS_WORDS};
use alloc::collections::BTreeMap;
use core::sync::atomic::{AtomicU64, Ordering};
use spin::Mutex;

/// Live dynamic allocations made through the call: offset -> bytes.
static LIVE: Mutex<BTreeMap<u64, u64>> = Mutex::new(BTreeMap::new());

/// Whether each CPU read the late mapping right.
static LATE_SEEN: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];

fn var(handle: u64) -> Result<PerCpu<u64>, i64> {
    if handle < op::STATIC {
        return Ok(pc::static_counter(handle as usize));
    }
    if LIVE.lock().contains_key(&handle) {
        Ok(PerCpu::at(handle as usize))
    } else {
        Err(errno::EINVAL)
    }
}

fn online_mask() -> u64 {
    (0..rt::MAX_CPUS).filter(|&c| sched::online(c)).fold(0, |m, c| m | 1 << c)
}

/// Handles the call.
pub fn call(a: [u64; 6]) -> Result<u64, i64> {
    match a[0] {
        op::ADD_LOOP => add_loop(var(a[1])?, a[2], a[3]),
        op::SUM => {
            let v = var(a[1])?;
            // SAFETY: every CPU's copy is mapped in its area (global mapping).
            Ok((0..pc::cpus()).map(|c| unsafe { v.on(c).read_volatile() }).fold(0u64, |s, x| s.wrapping_add(x)))
        }
        op::RESET => {
            let v = var(a[1])?;
            for c in 0..pc::cpus() {
                // SAFETY: as above.
                unsafe { v.on(c).write_volatile(0) };
            }
            Ok(0)
        }
        op::SET_TABLES => {
            let was = pc::tables_on() as u64;
            let on = match a[1] {
                0 => false,
                1 => true,
                _ => return Err(errno::EINVAL),
            };
            pc::set_tables(on, |f| crate::irq::call::on_cpus(online_mask(), f)).map_err(|e| {
                rt::println!("kernel: percpu: switching the tables: {e}");
                errno::EBUSY
            })?;
            Ok(was)
        }
        op::ALLOC => {
            if a[1] == 0 || a[1] > 4096 {
                return Err(errno::EINVAL);
            }
            let v = pc::alloc(a[1]).map_err(|e| {
                rt::println!("kernel: percpu: {e}");
                errno::ENOMEM
            })?;
            LIVE.lock().insert(v.offset(), a[1]);
            Ok(v.offset())
        }
        op::FREE => {
            let mut l = LIVE.lock();
            match l.get(&a[1]) {
                Some(&size) if size == a[2] => {
                    l.remove(&a[1]);
                    drop(l);
                    pc::free(PerCpu::at(a[1] as usize), size);
                    Ok(0)
                }
                _ => Err(errno::EINVAL),
            }
        }
        op::AFFINITY => sched::preempt::set_affinity(a[1]),
        op::STATS => {
            let s = stats();
            let w = s.as_words();
            let bytes: &[u8] =
                // SAFETY: a [u64; N] viewed as its bytes.
                unsafe { core::slice::from_raw_parts(w.as_ptr() as *const u8, STATS_WORDS * 8) };
            crate::mm::uaccess::copy_to_user(a[1], bytes).map_err(|()| errno::EFAULT)?;
            Ok(0)
        }
        op::LATE_MAP => late_map(),
        op::CHECK => pc::check_canaries().map(|()| 0).map_err(|e| {
            rt::println!("kernel: percpu: {e}");
            errno::EFAULT
        }),
        op::BENCH_OP => bench(a[1], a[2], a[3]),
        op::SHOOTDOWN => {
            let m = a[1] & online_mask();
            crate::irq::call::tlb_shootdown(m).map_err(|_| errno::EBUSY)?;
            Ok(m.count_ones() as u64)
        }
        op::SHOOTDOWN_CHECK => {
            if !pc::tables_on() {
                return Err(errno::EINVAL);
            }
            pc::shootdown_check(a[1] & online_mask()).map_err(|e| {
                rt::println!("kernel: percpu: shootdown check: {e}");
                errno::EBUSY
            })
        }
        _ => Err(errno::EINVAL),
    }
}

/// `n` adds of 1 to `v` in a preemptible section.
fn add_loop(v: PerCpu<u64>, n: u64, m: u64) -> Result<u64, i64> {
    let f: fn(PerCpu<u64>, u64) = match m {
        method::SYSTEM => pc::this_cpu_add,
        method::BASE => base::add,
        method::WINDOW if pc::tables_on() => window::add,
        method::SEEDED => match pc::seed() {
            Seed::NoGuard => base::add_unguarded,
            Seed::WindowPlain if pc::tables_on() => window::add_plain,
            _ => return Err(errno::EINVAL),
        },
        _ => return Err(errno::EINVAL),
    };
    let _on = crate::arch::sync::IrqsOn::new();
    for _ in 0..n {
        f(v, 1);
    }
    Ok(n)
}

fn stats() -> Stats {
    use sched::preempt;
    let r = Ordering::Relaxed;
    Stats {
        tables_on: pc::tables_on() as u64,
        preemptions: preempt::PREEMPTIONS.load(r),
        pulls: preempt::PULLS.load(r),
        pushes: preempt::PUSHES.load(r),
        window_checks: pc::WINDOW_CHECKS.load(r),
        window_mismatches: pc::WINDOW_MISMATCHES.load(r),
        root_syncs: crate::mm::roots::SYNCED.load(r),
        table_pages: crate::mm::roots::TABLE_PAGES.load(r),
        area_pages: pc::mapped_pages(),
        allocs: pc::ALLOCS.load(r),
        frees: pc::FREES.load(r),
        ipi_calls: crate::irq::call::CALLS.load(r),
        shootdowns: crate::irq::call::SHOOTDOWNS.load(r),
        switches: sched::SWITCHES.load(r),
    }
}

/// The late mapping (`percpu::late_map`), then every online CPU in turn reads it by IPI.
/// Returns the CPUs that read it right.
fn late_map() -> Result<u64, i64> {
    pc::late_map().map_err(|e| {
        rt::println!("kernel: percpu: late mapping: {e}");
        errno::ENOMEM
    })?;
    let mut seen = 0;
    for c in (0..rt::MAX_CPUS).filter(|&c| sched::online(c)) {
        LATE_SEEN[c].store(0, Ordering::Relaxed);
        crate::irq::call::on_cpus(1 << c, |cpu| LATE_SEEN[cpu].store(pc::late_read() as u64, Ordering::Relaxed))
            .map_err(|_| errno::EBUSY)?;
        if LATE_SEEN[c].load(Ordering::Relaxed) == 1 {
            seen |= 1 << c;
        } else {
            rt::println!("kernel: percpu: CPU {c} did not see the late mapping at {:#x}", pc::LATE_VA);
        }
    }
    Ok(seen)
}

/// `n` ops of kind `which` on static counter 7 with IRQs masked (every cmpxchg succeeds);
/// (instructions, ticks) of the whole loop to `out`.
fn bench(which: u64, n: u64, out: u64) -> Result<u64, i64> {
    let v = pc::static_counter(7);
    let needs_window = matches!(which, bench_op::WINDOW_ADD | bench_op::WINDOW_CMPXCHG);
    if which > bench_op::EMPTY || (needs_window && !pc::tables_on()) {
        return Err(errno::EINVAL);
    }
    // This CPU's copy from 0, so every cmpxchg(i, i + 1) below succeeds (IRQs are masked: the
    // loop stays on this CPU and nothing else writes the copy).
    base::write(v, 0);
    let pmu = crate::perf::Pmu::enable();
    let (t0, (_, i0)) = (crate::irq::timer::now(), pmu.read());
    match which {
        bench_op::BASE_ADD => (0..n).for_each(|_| base::add(v, 1)),
        bench_op::WINDOW_ADD => (0..n).for_each(|_| window::add(v, 1)),
        bench_op::BASE_CMPXCHG => (0..n).for_each(|i| {
            base::cmpxchg(v, i, i + 1);
        }),
        bench_op::WINDOW_CMPXCHG => (0..n).for_each(|i| {
            window::cmpxchg(v, i, i + 1);
        }),
        _ => (0..n).for_each(|i| {
            core::hint::black_box(i);
        }),
    }
    let ((_, i1), t1) = (pmu.read(), crate::irq::timer::now());
    let w = [i1 - i0, t1 - t0];
    // SAFETY: a [u64; 2] viewed as its bytes.
    let bytes: &[u8] = unsafe { core::slice::from_raw_parts(w.as_ptr() as *const u8, 16) };
    crate::mm::uaccess::copy_to_user(out, bytes).map_err(|()| errno::EFAULT)?;
    Ok(n)
}
