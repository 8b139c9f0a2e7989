//! Function-call IPIs to an idle CPU: `rounds` times, this task asks the kernel for a TLB
//! shootdown on the next CPU (`percpu(SHOOTDOWN, 1 << other)`), which runs a function there by
//! the call SGI (`irq::call::on_cpus`) and returns when that CPU has run it. Nothing else runs
//! on the other CPU, so it waits in the idle WFI: the SGI alone must wake it, and the caller
//! must see the answer as soon as it is given (a caller that slept until its own next interrupt
//! waits for its tick; a target woken by its tick rather than the SGI waits for that).
//!
//! So, booted with a slow tick (`tick_hz=1`), a round that needed a tick shows in the system's
//! tick count (`counters().ticks`, every CPU's): the record gives the rounds during which no
//! tick came at all, and the median and largest round-trip times, with the tick rate so the
//! QEMU test compares them against the tick period.
//!
//! Arguments: `rounds=N` (default 20, at most 200). One `ipi` record; exit status 0 unless a call failed or
//! did not reach exactly the one CPU asked for.
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::report::Record;
use abi::syscall::percpu as op;
use abi::syscall::{clock, sysctl, SYSCTL_GET};
use user::sys;

user::entry!(run);

const MAX_ROUNDS: usize = 200;

fn run(args: &str) -> i32 {
    let rounds = (abi::programs::uint(args, "rounds").unwrap_or(20) as usize).min(MAX_ROUNDS);
    let ncpus = sys::sysctl(sysctl::NCPUS, SYSCTL_GET).unwrap_or(1);
    let hz = sys::sysctl(sysctl::TICK_HZ, SYSCTL_GET).unwrap_or(0);
    if ncpus < 2 {
        user::println!("ipi: needs 2 CPUs, has {ncpus}");
        return 1;
    }
    let me = sys::getcpu();
    let other = (me + 1) % ncpus;
    let calls0 = sys::percpu_stats().map(|s| s.shootdowns).unwrap_or(0);
    let mut times = [0u64; MAX_ROUNDS];
    let mut tickless = 0u64;
    for t in times.iter_mut().take(rounds) {
        let ticks0 = sys::counters().ticks;
        let t0 = sys::clock(clock::MONOTONIC).unwrap_or(0);
        match sys::percpu(op::SHOOTDOWN, 1 << other, 0, 0) {
            Ok(1) => {}
            r => {
                user::println!("ipi: shootdown on CPU {other} gave {r:?}, expected Ok(1)");
                return 1;
            }
        }
        *t = sys::clock(clock::MONOTONIC).unwrap_or(0).saturating_sub(t0);
        if sys::counters().ticks == ticks0 {
            tickless += 1;
        }
    }
    let calls = sys::percpu_stats().map(|s| s.shootdowns).unwrap_or(0) - calls0;
    let times = &mut times[..rounds];
    times.sort_unstable();
    let (median, max) = (times[rounds / 2], times[rounds - 1]);
    let mut r = Record::new("ipi");
    r.u64("cpus", ncpus)
        .u64("from", me)
        .u64("to", other)
        .u64("tick_hz", hz)
        .u64("rounds", rounds as u64)
        .u64("calls", calls)
        .u64("tickless", tickless)
        .u64("median_ns", median)
        .u64("max_ns", max);
    user::io::report(&r);
    user::println!(
        "ipi: {rounds} calls CPU {me} -> {other}: {tickless} without a tick, median {} us, max {} us (tick {hz} Hz)",
        median / 1000,
        max / 1000
    );
    0
}
