//! `test=irq`: the timer tick and SGIs on every online CPU, on whichever GIC the device tree
//! names. Every CPU ticks at [`HZ`] until it has taken [`TICKS`] ticks (no tick may come early:
//! the shortest gap between two must be at least one period); then CPU 0 pings every other CPU
//! [`PINGS`] times, one at a time, and each ping must be answered by exactly one pong (SGIs do
//! not queue, so a lost or doubled one shows in the counts). Prints one `irq` record.

use crate::arch::cpu::this_cpu;
use crate::irq::{self, timer, Sgi};
use crate::work;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Tick rate of the test.
const HZ: u64 = 1000;
/// Ticks every CPU must take.
const TICKS: u64 = 20;
/// Ping-pong round trips per other CPU.
const PINGS: u64 = 50;

static DONE: AtomicBool = AtomicBool::new(false);
static TICKED: AtomicU64 = AtomicU64::new(0);

fn on_cpu(_index: usize, n: usize) {
    let cpu = this_cpu();
    let t0 = timer::TICKS[cpu].load(Ordering::Relaxed);
    timer::start(cpu, HZ);
    while timer::TICKS[cpu].load(Ordering::Relaxed) < t0 + TICKS {
        irq::wait_for_interrupt();
    }
    timer::stop(cpu);
    TICKED.fetch_add(1, Ordering::AcqRel);
    if cpu == 0 {
        // Every CPU is ticked out and waiting with IRQs open: ping them one at a time.
        while TICKED.load(Ordering::Acquire) < n as u64 {
            core::hint::spin_loop();
        }
        for target in 1..rt::MAX_CPUS {
            if !online(target) {
                continue;
            }
            for k in 0..PINGS {
                let want = irq::PONGS.load(Ordering::Acquire) + 1;
                irq::send_sgi(1 << target, Sgi::Ping);
                let deadline = timer::now() + timer::frequency();
                while irq::PONGS.load(Ordering::Acquire) < want {
                    if timer::now() > deadline {
                        rt::println!("kernel: irq: no pong from CPU {target} for ping {k} within 1 s");
                        break;
                    }
                    irq::wait_for_interrupt();
                }
            }
        }
        DONE.store(true, Ordering::Release);
        irq::send_sgi(!1 & ((1 << rt::MAX_CPUS) - 1), Sgi::Reschedule);
    } else {
        while !DONE.load(Ordering::Acquire) {
            irq::wait_for_interrupt();
        }
    }
}

fn online(cpu: usize) -> bool {
    ONLINE_MASK.load(Ordering::Relaxed) & (1 << cpu) != 0
}

static ONLINE_MASK: AtomicU64 = AtomicU64::new(0);
/// Set by each CPU taking part (before the test starts).
fn mark_online(_index: usize, _n: usize) {
    ONLINE_MASK.fetch_or(1 << this_cpu(), Ordering::AcqRel);
}

pub fn run() -> Result<(), String> {
    let n = work::cpus();
    work::run_everywhere(n, mark_online)?;
    let pings0: Vec<u64> = irq::PINGS.iter().map(|p| p.load(Ordering::Relaxed)).collect();
    let pongs0 = irq::PONGS.load(Ordering::Relaxed);
    work::run_everywhere(n, on_cpu)?;
    let mut r = abi::report::Record::new("irq");
    let gic = match irq::gic() {
        Some(irq::Gic::V2(_)) => 2,
        Some(irq::Gic::V3(_)) => 3,
        None => 0,
    };
    let cpus: Vec<usize> = (0..rt::MAX_CPUS).filter(|&c| online(c)).collect();
    let ticks: Vec<u64> = cpus.iter().map(|&c| timer::TICKS[c].load(Ordering::Relaxed)).collect();
    let max_late_us: Vec<u64> =
        cpus.iter().map(|&c| timer::ticks_to_ns(timer::MAX_LATE[c].load(Ordering::Relaxed)) / 1000).collect();
    let early: u64 = cpus.iter().map(|&c| timer::EARLY[c].load(Ordering::Relaxed)).sum();
    let pings: Vec<u64> = cpus.iter().map(|&c| irq::PINGS[c].load(Ordering::Relaxed) - pings0[c]).collect();
    let pongs = irq::PONGS.load(Ordering::Relaxed) - pongs0;
    let unexpected: u64 = irq::COUNTS.iter().map(|c| c.unexpected.load(Ordering::Relaxed)).sum();
    let missed: u64 = cpus.iter().map(|&c| timer::MISSED[c].load(Ordering::Relaxed)).sum();
    r.u64("gic", gic)
        .u64("cpus", cpus.len() as u64)
        .u64("hz", HZ)
        .u64s("ticks", &ticks)
        .u64("early", early)
        .u64s("max_late_us", &max_late_us)
        .u64("missed", missed)
        .u64s("pings", &pings)
        .u64("pongs", pongs)
        .u64("unexpected", unexpected);
    rt::println!("{r}");
    for (i, &c) in cpus.iter().enumerate() {
        if ticks[i] < TICKS {
            return Err(format!("irq: CPU {c} took {} ticks, expected at least {TICKS}", ticks[i]));
        }
        if c != 0 && pings[i] != PINGS {
            return Err(format!("irq: CPU {c} received {} pings, {PINGS} sent", pings[i]));
        }
    }
    let want = PINGS * (cpus.len() as u64 - 1);
    if pongs != want {
        return Err(format!("irq: CPU 0 received {pongs} pongs, expected {want}"));
    }
    if early != 0 {
        return Err(format!("irq: {early} timer interrupts before anything was due"));
    }
    if unexpected != 0 {
        return Err(format!("irq: {unexpected} interrupts without a handler"));
    }
    rt::println!(
        "kernel: irq: GICv{gic}, {} CPUs: {TICKS}+ ticks each at {HZ} Hz, {pongs} SGI round trips",
        cpus.len()
    );
    Ok(())
}
