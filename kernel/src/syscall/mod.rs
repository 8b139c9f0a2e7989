//! System calls: `SVC #0` from EL0, the ABI of `abi::syscall` (numbers, arguments, errors).
//! Every argument is checked here or by `uspace`; user memory is reached only through
//! `mm::uaccess`. Runs on the calling task's kernel stack with IRQs masked.

pub mod percpu;

use crate::mm::uaccess;
use crate::mm::user;
use crate::sched;
use abi::syscall::{self as sc, errno, nr, sysctl, Counters, COUNTERS_WORDS};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use rt::TrapFrame;

/// System calls made, all tasks (the sum of every CPU's `percpu::SYSCALLS`).
pub fn calls() -> u64 {
    (0..crate::percpu::cpus())
        // SAFETY: a static per-CPU counter of an existing area, read atomically.
        .map(|c| unsafe { &*(crate::percpu::SYSCALLS.on(c) as *const AtomicU64) }.load(Ordering::Relaxed))
        .sum()
}

/// The first step of every system call in `frame` (x8 = number): counts it, and handles the
/// null system call (`GETCPU`: x0 = this CPU) right here. Returns whether it did (then the call
/// is complete); [`dispatch`] handles every other. Runs with IRQs masked on the caller's CPU,
/// whose static area `area` is: this and the exception entry and return are what a null system
/// call costs.
#[inline(always)]
pub fn count_and_null(area: &crate::percpu::StaticArea, frame: &mut TrapFrame) -> bool {
    // This CPU's counter, with IRQs masked: a plain increment (other CPUs only read it).
    let n = &area.counters[SYSCALLS_INDEX];
    n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    if frame.x[8] == nr::GETCPU {
        frame.x[0] = area.cpu;
        return true;
    }
    false
}

/// Handles the SVC in `frame` that [`count_and_null`] left (x8 = number, x0..x5 = arguments;
/// x0 = result). The calls that do real work are functions of their own. Returns whether the
/// call rewrote the whole frame (`FAULT_RETURN`: the resumed context, every register of it);
/// every other call changes x0 only, and leaves x19-x29 (which the vectors may not have saved)
/// alone.
#[inline(always)]
pub fn dispatch(frame: &mut TrapFrame) -> bool {
    let r = match frame.x[8] {
        nr::GETCPU => Ok(crate::percpu::this_area().cpu),
        nr::YIELD => {
            sched::yield_now();
            Ok(0)
        }
        nr::MMAP => mmap(&frame.x),
        nr::MUNMAP => munmap(&frame.x),
        nr::MPROTECT => mprotect(&frame.x),
        nr::FAULT_RETURN => match fault_return(frame) {
            // The frame now holds the resumed context, x0 included.
            Ok(()) => return true,
            Err(e) => Err(e),
        },
        n => other(n, &frame.x),
    };
    frame.x[0] = match r {
        Ok(v) => v,
        Err(e) => sc::error(e),
    };
    false
}

/// `percpu::SYSCALLS` as an index of the static counters.
const SYSCALLS_INDEX: usize = 6;
const _: () = assert!(
    crate::percpu::SYSCALLS.offset()
        == (core::mem::offset_of!(crate::percpu::StaticArea, counters) + 8 * SYSCALLS_INDEX) as u64
);

#[inline(never)]
fn mmap(a: &[u64; 31]) -> Result<u64, i64> {
    let m = uspace::Mmap { addr: a[0], len: a[1], prot: a[2], flags: a[3], fd: a[4], offset: a[5] };
    with_mm(|s, t| s.mmap(t, m))
}

#[inline(never)]
fn munmap(a: &[u64; 31]) -> Result<u64, i64> {
    with_mm(|s, t| s.munmap(t, a[0], a[1]).map(|()| 0))
}

#[inline(never)]
fn mprotect(a: &[u64; 31]) -> Result<u64, i64> {
    with_mm(|s, t| s.mprotect(t, a[0], a[1], a[2]).map(|()| 0))
}

/// The calls no benchmark times.
#[inline(never)]
fn other(n: u64, a: &[u64; 31]) -> Result<u64, i64> {
    match n {
        nr::WRITE => write(a[0], a[1], a[2]),
        nr::EXIT => sched::exit_current(a[0] & 0xff),
        nr::SLEEP => {
            sched::sleep(a[0]);
            Ok(0)
        }
        nr::CLOCK => clock(a[0], a[1]),
        nr::COUNTERS => counters(a[0], a[1]),
        nr::SPAWN => spawn(a[0], a[1], a[2], a[3]),
        nr::WAIT => sched::wait(a[0]),
        nr::SYSCTL => sysctl(a[0], a[1]),
        nr::FAULT_HANDLER => fault_handler(a[0], a[1]),
        nr::PERCPU => percpu::call([a[0], a[1], a[2], a[3], a[4], a[5]]),
        _ => Err(errno::ENOSYS),
    }
}

fn with_mm<R>(
    f: impl FnOnce(&mut uspace::AddressSpace<crate::mm::frames::KFrames>, &mut user::SpaceTlb) -> Result<R, i64>,
) -> Result<R, i64> {
    sched::with_running(|t| t.process.mm.with(f)).unwrap_or(Err(errno::ESRCH))
}

fn write(fd: u64, buf: u64, len: u64) -> Result<u64, i64> {
    if fd != 1 && fd != 2 {
        return Err(errno::EBADF);
    }
    if len > sc::MAX_WRITE {
        return Err(errno::EINVAL);
    }
    let mut v: Vec<u8> = Vec::new();
    v.try_reserve_exact(len as usize).map_err(|_| errno::ENOMEM)?;
    v.resize(len as usize, 0);
    uaccess::copy_from_user(&mut v, buf).map_err(|()| errno::EFAULT)?;
    print_bytes(&v);
    Ok(len)
}

/// Prints bytes as text (invalid UTF-8 as U+FFFD), under one hold of the console lock.
fn print_bytes(b: &[u8]) {
    struct Text<'a>(&'a [u8]);
    impl core::fmt::Display for Text<'_> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            for chunk in self.0.utf8_chunks() {
                f.write_str(chunk.valid())?;
                if !chunk.invalid().is_empty() {
                    f.write_str("\u{fffd}")?;
                }
            }
            Ok(())
        }
    }
    rt::print!("{}", Text(b));
}

fn clock(id: u64, out: u64) -> Result<u64, i64> {
    let ns = match id {
        sc::clock::MONOTONIC => crate::perf::now_ns(),
        sc::clock::TASK_CPUTIME => {
            let t = sched::current().ok_or(errno::ESRCH)?;
            let now = crate::irq::timer::now();
            let ticks = t.cputime.load(Ordering::Relaxed) + (now - t.ran_since.load(Ordering::Relaxed));
            crate::irq::timer::ticks_to_ns(ticks)
        }
        _ => return Err(errno::EINVAL),
    };
    uaccess::copy_to_user(out, &ns.to_le_bytes()).map_err(|()| errno::EFAULT)?;
    Ok(0)
}

/// The counters block, whole.
pub fn counters_now() -> Counters {
    let mut c = user::counters();
    c.context_switches = sched::SWITCHES.load(Ordering::Relaxed);
    c.syscalls = calls();
    c.ticks = crate::irq::timer::TICKS.iter().map(|t| t.load(Ordering::Relaxed)).sum();
    c.space_tlbi = sched::current().map(|t| t.process.mm.tlbis()).unwrap_or(0);
    c
}

fn counters(buf: u64, size: u64) -> Result<u64, i64> {
    if size == 0 || !size.is_multiple_of(8) {
        return Err(errno::EINVAL);
    }
    let words = counters_now().as_words();
    let n = (size as usize / 8).min(COUNTERS_WORDS);
    let mut bytes = [0u8; COUNTERS_WORDS * 8];
    for (i, w) in words.iter().enumerate() {
        bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    uaccess::copy_to_user(buf, &bytes[..n * 8]).map_err(|()| errno::EFAULT)?;
    Ok(n as u64 * 8)
}

fn spawn(entry: u64, stack: u64, arg: u64, cpu: u64) -> Result<u64, i64> {
    let user_addr = |a: u64| (sc::USER_START..sc::USER_END).contains(&a);
    if !user_addr(entry) || !entry.is_multiple_of(4) {
        return Err(errno::EINVAL);
    }
    if !(sc::USER_START..=sc::USER_END).contains(&stack) || !stack.is_multiple_of(16) {
        return Err(errno::EINVAL);
    }
    let cpu = match cpu {
        sc::ANY_CPU => None,
        c if sched::online(c as usize) => Some(c as usize),
        _ => return Err(errno::EINVAL),
    };
    let t = sched::current().ok_or(errno::ESRCH)?;
    sched::spawn(&t.process, entry, stack, [arg, 0], cpu)
}

fn sysctl(knob: u64, value: u64) -> Result<u64, i64> {
    let flag = |f: &core::sync::atomic::AtomicBool| -> Result<u64, i64> {
        let old = f.load(Ordering::Relaxed) as u64;
        match value {
            sc::SYSCTL_GET => {}
            0 | 1 => f.store(value == 1, Ordering::Relaxed),
            _ => return Err(errno::EINVAL),
        }
        Ok(old)
    };
    let read_only = |v: u64| if value == sc::SYSCTL_GET { Ok(v) } else { Err(errno::EPERM) };
    match knob {
        sysctl::FLUSH_ELISION => flag(&user::FLUSH_ELISION),
        sysctl::LAZY_RELAX => flag(&user::LAZY_RELAX),
        sysctl::NCPUS => read_only(sched::online_cpus() as u64),
        sysctl::TICK_HZ => read_only(sched::TICK_HZ.load(Ordering::Relaxed)),
        sysctl::PMU_EL0 => read_only(user::PMU_EL0.load(Ordering::Relaxed) as u64),
        sysctl::PROGRAMS_LEFT => read_only(sched::programs_left()),
        _ => Err(errno::EINVAL),
    }
}

fn fault_handler(entry: u64, cookie: u64) -> Result<u64, i64> {
    if entry != 0 && (!(sc::USER_START..sc::USER_END).contains(&entry) || !entry.is_multiple_of(4)) {
        return Err(errno::EINVAL);
    }
    let t = sched::current().ok_or(errno::ESRCH)?;
    let mut f = t.fault.lock();
    let old = f.entry;
    f.entry = entry;
    f.cookie = cookie;
    Ok(old)
}

fn fault_return(frame: &mut TrapFrame) -> Result<(), i64> {
    let how = frame.x[0];
    if ![sc::RETRY, sc::SKIP, sc::RETURN_TO_LR].contains(&how) {
        return Err(errno::EINVAL);
    }
    let t = sched::current().ok_or(errno::ESRCH)?;
    let saved = t.fault.lock().saved.take().ok_or(errno::EINVAL)?;
    frame.clone_from(&saved.0);
    crate::sched::fpsimd::set_task_state(&t, &saved.1);
    match how {
        sc::SKIP => frame.elr += 4,
        sc::RETURN_TO_LR => frame.elr = frame.x[30],
        _ => {}
    }
    Ok(())
}
