//! The system calls (`SVC #0`, number in x8, result in x0; see `abi::syscall`).

use abi::syscall::{decode, nr, Counters, COUNTERS_WORDS};

/// Raw call: x0 after the call.
#[inline(always)]
pub fn call(n: u64, a: [u64; 6]) -> u64 {
    let r: u64;
    #[cfg(target_arch = "aarch64")]
    // SAFETY: SVC #0 enters the kernel, which preserves every register but x0 (the result) and
    // reads or writes user memory only as the call documents (through the task's own rights).
    unsafe {
        core::arch::asm!(
            "svc #0",
            inlateout("x0") a[0] => r,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            in("x8") n,
            options(nostack),
        )
    };
    #[cfg(not(target_arch = "aarch64"))]
    {
        let _ = (n, a);
        r = abi::syscall::error(abi::syscall::errno::ENOSYS);
    }
    r
}

/// Raw call without arguments (x0..x5 left as they are: the call reads none): x0 after it.
#[inline(always)]
pub fn call0(n: u64) -> u64 {
    let r: u64;
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as `call`; the call takes no argument.
    unsafe {
        core::arch::asm!("svc #0", in("x8") n, lateout("x0") r, options(nostack))
    };
    #[cfg(not(target_arch = "aarch64"))]
    {
        let _ = n;
        r = abi::syscall::error(abi::syscall::errno::ENOSYS);
    }
    r
}

/// A call's result: `Ok(value)` or `Err(errno)`.
pub fn result(n: u64, a: [u64; 6]) -> Result<u64, i64> {
    decode(call(n, a))
}

/// `write(fd, buf)`.
pub fn write(fd: u64, buf: &[u8]) -> Result<u64, i64> {
    result(nr::WRITE, [fd, buf.as_ptr() as u64, buf.len() as u64, 0, 0, 0])
}

/// `exit(status)`: ends this task.
pub fn exit(status: u64) -> ! {
    call(nr::EXIT, [status, 0, 0, 0, 0, 0]);
    #[allow(clippy::empty_loop)]
    loop {}
}

/// `yield()`.
pub fn yield_now() {
    call0(nr::YIELD);
}

/// `sleep(ns)`.
pub fn sleep_ns(ns: u64) -> Result<u64, i64> {
    result(nr::SLEEP, [ns, 0, 0, 0, 0, 0])
}

/// `clock(id)`: nanoseconds.
pub fn clock(id: u64) -> Result<u64, i64> {
    let mut v = 0u64;
    result(nr::CLOCK, [id, &mut v as *mut u64 as u64, 0, 0, 0, 0])?;
    Ok(v)
}

/// `getcpu()`.
pub fn getcpu() -> u64 {
    call0(nr::GETCPU)
}

/// `mmap(addr, len, prot, flags, -1, 0)`.
pub fn mmap(addr: u64, len: u64, prot: u64, flags: u64) -> Result<u64, i64> {
    result(nr::MMAP, [addr, len, prot, flags, u64::MAX, 0])
}

/// `munmap(addr, len)`.
pub fn munmap(addr: u64, len: u64) -> Result<u64, i64> {
    result(nr::MUNMAP, [addr, len, 0, 0, 0, 0])
}

/// `mprotect(addr, len, prot)`.
pub fn mprotect(addr: u64, len: u64, prot: u64) -> Result<u64, i64> {
    result(nr::MPROTECT, [addr, len, prot, 0, 0, 0])
}

/// `counters()`: the whole block.
pub fn counters() -> Counters {
    let mut w = [0u64; COUNTERS_WORDS];
    let _ = result(nr::COUNTERS, [w.as_mut_ptr() as u64, (COUNTERS_WORDS * 8) as u64, 0, 0, 0, 0]);
    Counters::from_words(&w)
}

/// `spawn(entry, stack_top, arg, cpu)`: a new task of this address space.
pub fn spawn(entry: extern "C" fn(u64) -> !, stack_top: u64, arg: u64, cpu: u64) -> Result<u64, i64> {
    result(nr::SPAWN, [entry as *const () as u64, stack_top, arg, cpu, 0, 0])
}

/// `wait(tid)`: its exit status.
pub fn wait(tid: u64) -> Result<u64, i64> {
    result(nr::WAIT, [tid, 0, 0, 0, 0, 0])
}

/// `sysctl(knob, value)`: the previous value.
pub fn sysctl(knob: u64, value: u64) -> Result<u64, i64> {
    result(nr::SYSCTL, [knob, value, 0, 0, 0, 0])
}

/// `fault_handler(entry, cookie)`: the previous entry.
pub fn fault_handler(entry: u64, cookie: u64) -> Result<u64, i64> {
    result(nr::FAULT_HANDLER, [entry, cookie, 0, 0, 0, 0])
}

/// `fault_return(how)`: resumes the faulting context (does not return on success).
pub fn fault_return(how: u64) -> Result<u64, i64> {
    result(nr::FAULT_RETURN, [how, 0, 0, 0, 0, 0])
}

/// `percpu(op, a, b, c)` (see `abi::syscall::percpu`).
pub fn percpu(op: u64, a: u64, b: u64, c: u64) -> Result<u64, i64> {
    result(nr::PERCPU, [op, a, b, c, 0, 0])
}

/// `percpu(STATS)`.
pub fn percpu_stats() -> Result<abi::syscall::percpu::Stats, i64> {
    use abi::syscall::percpu::{Stats, STATS, STATS_WORDS};
    let mut w = [0u64; STATS_WORDS];
    percpu(STATS, w.as_mut_ptr() as u64, 0, 0)?;
    Ok(Stats::from_words(&w))
}
