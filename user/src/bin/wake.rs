//! Cross-CPU wake-ups: `rounds` times, a task is started on the next CPU and waited for, so each
//! round makes two wake-ups across CPUs (the spawn queues the task on a CPU that idles; its exit
//! wakes this task, which idles in `wait` on its own CPU). Each must come by the reschedule SGI:
//! a wake-up that only marks the other CPU (a missing SGI) waits for that CPU's next tick.
//!
//! So, booted with a slow tick (`tick_hz=1`), a round that needed a tick shows in the system's
//! tick count (`counters().ticks`, every CPU's): the record gives the rounds during which no
//! tick came at all, and the median and largest round-trip times. The QEMU test asserts the
//! rule the `ipi` test uses: at most a tenth of the rounds saw a tick, and the median is under
//! a quarter of the tick period.
//!
//! Arguments: `rounds=N` (default 20). One `wake` record; exit status 0 unless a spawn or a wait
//! failed.
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::report::Record;
use abi::syscall::{clock, sysctl, SYSCTL_GET};
use user::{map, prot, sys};

user::entry!(run);

const MAX_ROUNDS: usize = 200;

extern "C" fn quick(_: u64) -> ! {
    sys::exit(0)
}

fn run(args: &str) -> i32 {
    let rounds = abi::programs::uint(args, "rounds").unwrap_or(20) as usize;
    let ncpus = sys::sysctl(sysctl::NCPUS, SYSCTL_GET).unwrap_or(1);
    let hz = sys::sysctl(sysctl::TICK_HZ, SYSCTL_GET).unwrap_or(0);
    if ncpus < 2 {
        user::println!("wake: needs 2 CPUs, has {ncpus}");
        return 1;
    }
    let me = sys::getcpu();
    let other = (me + 1) % ncpus;
    // One stack for every round: the task it held has exited before the next starts.
    let stack_size = user::thread::STACK;
    let Ok(stack) = sys::mmap(0, stack_size, prot::READ | prot::WRITE, map::PRIVATE | map::ANONYMOUS) else {
        user::println!("wake: no memory for a stack");
        return 1;
    };
    let mut times = [0u64; MAX_ROUNDS];
    let rounds = rounds.min(MAX_ROUNDS);
    let mut tickless = 0u64;
    for t in times.iter_mut().take(rounds) {
        let ticks0 = sys::counters().ticks;
        let t0 = sys::clock(clock::MONOTONIC).unwrap_or(0);
        let tid = match sys::spawn(quick, stack + stack_size, 0, other) {
            Ok(tid) => tid,
            Err(e) => {
                user::println!("wake: spawn on CPU {other}: {}", abi::syscall::errno::name(e));
                return 1;
            }
        };
        if sys::wait(tid) != Ok(0) {
            user::println!("wake: wait for task {tid} failed");
            return 1;
        }
        *t = sys::clock(clock::MONOTONIC).unwrap_or(0).saturating_sub(t0);
        if sys::counters().ticks == ticks0 {
            tickless += 1;
        }
    }
    let times = &mut times[..rounds];
    times.sort_unstable();
    let (median, max) = (times[rounds / 2], times[rounds - 1]);
    let mut r = Record::new("wake");
    r.u64("cpus", ncpus)
        .u64("from", me)
        .u64("to", other)
        .u64("tick_hz", hz)
        .u64("rounds", rounds as u64)
        .u64("tickless", tickless)
        .u64("median_ns", median)
        .u64("max_ns", max);
    user::io::report(&r);
    user::println!(
        "wake: {rounds} round trips CPU {me} -> {other} -> {me}: {tickless} without a tick, median {} us, max {} us (tick {hz} Hz)",
        median / 1000,
        max / 1000
    );
    0
}
