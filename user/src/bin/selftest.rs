//! Every system call with good and bad arguments, one `check` record per check and a
//! `selftest` summary; exit status = failed checks. Memory checks probe with this task's fault
//! handler (a faulting access is skipped and reported, not fatal), through pages in every state
//! a page can be in (never touched, read, written, PROT_NONE) before and after each mprotect,
//! and through the kernel's own accesses to user memory (a system call writing its result).
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::report::Record;
use core::sync::atomic::{AtomicU64, Ordering};
use user::fault::{Fault, Prober};
use user::io::Text;
use user::sys;
use user::{errno, map, prot, sysctl, PAGE_SIZE};

user::entry!(run);

const ANON: u64 = map::PRIVATE | map::ANONYMOUS;
const RW: u64 = prot::READ | prot::WRITE;
/// A kernel address (the image): never accessible from EL0.
const KERNEL_ADDR: u64 = 0xffff_0000_2000_0000;
/// `RET`.
const RET: u32 = 0xd65f_03c0;

static PROBE: Prober = Prober::new();

struct Checks {
    n: u64,
    failed: u64,
}

impl Checks {
    fn record(&mut self, name: &str, ok: bool, got: i64, want: i64) {
        self.n += 1;
        if !ok {
            self.failed += 1;
        }
        let mut r = Record::new("check");
        r.str("prog", "selftest").str("check", name).bool("ok", ok).i64("got", got).i64("want", want);
        user::io::report(&r);
    }
    /// A call that must fail with `errno`.
    fn err(&mut self, name: &str, r: Result<u64, i64>, errno: i64) {
        let got = match r {
            Ok(v) => v as i64,
            Err(e) => -e,
        };
        self.record(name, r == Err(errno), got, -errno);
    }
    /// A call that must succeed with `want`.
    fn ok(&mut self, name: &str, r: Result<u64, i64>, want: u64) {
        let got = match r {
            Ok(v) => v as i64,
            Err(e) => -e,
        };
        self.record(name, r == Ok(want), got, want as i64);
    }
    /// A condition.
    fn that(&mut self, name: &str, ok: bool) {
        self.record(name, ok, ok as i64, 1);
    }
    /// An access that must fault at `addr` (and be a permission or translation fault).
    fn faults<T>(&mut self, name: &str, r: Result<T, Fault>, addr: u64) {
        match r {
            Ok(_) => self.record(name, false, 0, addr as i64),
            Err(f) => {
                let ok = f.addr == addr && (f.is_permission() || f.is_translation());
                self.record(name, ok, f.addr as i64, addr as i64);
            }
        }
    }
    /// An access that must succeed.
    fn goes<T>(&mut self, name: &str, r: Result<T, Fault>) -> Option<T> {
        match r {
            Ok(v) => {
                self.record(name, true, 0, 0);
                Some(v)
            }
            Err(f) => {
                self.record(name, false, f.addr as i64, 0);
                None
            }
        }
    }
}

fn run(_args: &str) -> i32 {
    let mut c = Checks { n: 0, failed: 0 };
    c.ok("install the fault handler", PROBE.install(), 0);
    calls_without_memory(&mut c);
    write_and_clock(&mut c);
    mmap_munmap(&mut c);
    fault_counts(&mut c);
    mprotect_paths(&mut c);
    exec_permissions(&mut c);
    tasks(&mut c);
    knobs(&mut c);
    registers_survive(&mut c);
    fp_state_is_per_task(&mut c);
    vector_registers_survive(&mut c);
    let bad = bad_pointers(&mut c);
    let mut r = Record::new("selftest");
    r.u64("checks", c.n)
        .u64("failed", c.failed)
        .u64("faults_caught", PROBE.count.load(Ordering::Relaxed))
        .u64("bad_pointer_checks", bad);
    user::io::report(&r);
    user::println!("selftest: {} checks, {} failed", c.n, c.failed);
    c.failed.min(255) as i32
}

/// Every row of `abi::syscall::USER_POINTERS` (each argument of each call that points into user
/// memory) with every kind of pointer the task may not use that way: EFAULT, nothing else.
/// Generated from the ABI table: a call added there is tested here without more code. Returns
/// the checks made.
fn bad_pointers(c: &mut Checks) -> u64 {
    use abi::syscall::{UserAccess, USER_POINTERS};
    let (n0, page) = (c.n, PAGE_SIZE);
    // Read-only (for the calls that write) and PROT_NONE (for those that read), both touched
    // first so they are mapped, not just reserved; then a page unmapped (last: nothing is
    // mapped after it, so its address stays free).
    let ro = sys::mmap(0, page, RW, ANON).unwrap_or(0);
    c.goes("bad pointers: touch a page", PROBE.write(ro, 1));
    c.ok("bad pointers: make it read-only", sys::mprotect(ro, page, prot::READ), 0);
    let none = sys::mmap(0, page, RW, ANON).unwrap_or(0);
    c.goes("bad pointers: touch another", PROBE.write(none, 1));
    c.ok("bad pointers: make it PROT_NONE", sys::mprotect(none, page, prot::NONE), 0);
    let unmapped = sys::mmap(0, page, RW, ANON).unwrap_or(0);
    c.ok("bad pointers: unmap a page", sys::munmap(unmapped, page), 0);
    for u in USER_POINTERS {
        let denied = match u.access {
            UserAccess::Writes => ("a read-only page", ro),
            UserAccess::Reads => ("a PROT_NONE page", none),
        };
        let kinds = [
            ("NULL", 0),
            ("a kernel address", KERNEL_ADDR),
            ("a range that wraps", u64::MAX - 2),
            ("an unmapped page", unmapped),
            denied,
        ];
        for (what, ptr) in kinds {
            let mut a = u.args;
            a[u.arg] = ptr;
            let mut name = Text::<96>::new();
            let _ = core::fmt::Write::write_fmt(&mut name, format_args!("{} with {what}", u.name));
            c.err(name.as_str(), sys::result(u.nr, a), errno::EFAULT);
        }
    }
    for (p, n) in [(ro, page), (none, page)] {
        let _ = sys::munmap(p, n);
    }
    c.n - n0
}

fn calls_without_memory(c: &mut Checks) {
    c.err("unknown call number", sys::result(999, [0; 6]), errno::ENOSYS);
    c.ok("yield", sys::result(abi::syscall::nr::YIELD, [0; 6]), 0);
    let ncpus = sys::sysctl(sysctl::NCPUS, abi::syscall::SYSCTL_GET).unwrap_or(0);
    c.that("getcpu is an online CPU", sys::getcpu() < ncpus);
    let t0 = sys::clock(abi::syscall::clock::MONOTONIC).unwrap_or(0);
    c.ok("sleep 2 ms", sys::sleep_ns(2_000_000), 0);
    let t1 = sys::clock(abi::syscall::clock::MONOTONIC).unwrap_or(0);
    c.that("slept at least 2 ms", t1 >= t0 + 2_000_000);
    c.ok("sleep 0", sys::sleep_ns(0), 0);
    c.that("task CPU time is counted", sys::clock(abi::syscall::clock::TASK_CPUTIME).unwrap_or(0) > 0);
    c.err("clock with an unknown id", sys::clock(7), errno::EINVAL);
    c.err("fault_return with no fault", sys::fault_return(abi::syscall::SKIP), errno::EINVAL);
    c.err("fault_return with a bad mode", sys::fault_return(9), errno::EINVAL);
    c.err("fault handler misaligned", sys::fault_handler(0x40_0002, 0), errno::EINVAL);
    c.err("fault handler in the kernel", sys::fault_handler(KERNEL_ADDR, 0), errno::EINVAL);
}

fn write_and_clock(c: &mut Checks) {
    use abi::syscall::nr;
    let msg = b"selftest: write to the console\n";
    c.ok("write", sys::write(1, msg), msg.len() as u64);
    c.ok("write to fd 2", sys::write(2, b"selftest: and to fd 2\n"), 22);
    c.ok("write of nothing", sys::result(nr::WRITE, [1, 0, 0, 0, 0, 0]), 0);
    c.err("write to fd 0 (stdin)", sys::write(0, msg), errno::EBADF);
    c.err("write to fd 3", sys::write(3, msg), errno::EBADF);
    c.err("write from NULL", sys::result(nr::WRITE, [1, 0, 5, 0, 0, 0]), errno::EFAULT);
    c.err("write from a kernel address", sys::result(nr::WRITE, [1, KERNEL_ADDR, 8, 0, 0, 0]), errno::EFAULT);
    c.err("write that wraps", sys::result(nr::WRITE, [1, u64::MAX - 2, 8, 0, 0, 0]), errno::EFAULT);
    c.err(
        "write too long",
        sys::result(nr::WRITE, [1, msg.as_ptr() as u64, abi::syscall::MAX_WRITE + 1, 0, 0, 0]),
        errno::EINVAL,
    );
    let clock = |p: u64| sys::result(nr::CLOCK, [0, p, 0, 0, 0, 0]);
    c.err("clock into NULL", clock(0), errno::EFAULT);
    c.err("clock into the kernel", clock(KERNEL_ADDR), errno::EFAULT);
    let mut v = [0u64; 2];
    let odd = (v.as_mut_ptr() as u64) + 3;
    c.ok("clock into an unaligned address", clock(odd), 0);
    // The kernel's write populates a never-touched page on demand.
    let a = sys::mmap(0, PAGE_SIZE, RW, ANON).unwrap_or(0);
    c.ok("clock into a fresh demand-zero page", clock(a + 64), 0);
    let read = PROBE.read(a + 64).unwrap_or(0);
    c.that("... whose value is there", read > 0);
    c.ok("munmap it", sys::munmap(a, PAGE_SIZE), 0);
    c.err("write from an unmapped page", sys::result(nr::WRITE, [1, a, 8, 0, 0, 0]), errno::EFAULT);
    c.err("clock into an unmapped page", clock(a), errno::EFAULT);
}

fn mmap_munmap(c: &mut Checks) {
    let e = |r: Result<u64, i64>| r;
    c.err("mmap not anonymous", e(sys::mmap(0, PAGE_SIZE, RW, map::PRIVATE)), errno::EINVAL);
    c.err("mmap not private", e(sys::mmap(0, PAGE_SIZE, RW, map::ANONYMOUS)), errno::EINVAL);
    c.err("mmap unknown flag", e(sys::mmap(0, PAGE_SIZE, RW, ANON | 0x4000)), errno::EINVAL);
    c.err("mmap unknown prot", e(sys::mmap(0, PAGE_SIZE, 0x80, ANON)), errno::EINVAL);
    c.err("mmap length 0", e(sys::mmap(0, 0, RW, ANON)), errno::EINVAL);
    c.err("mmap too long", e(sys::mmap(0, 1 << 60, RW, ANON)), errno::ENOMEM);
    c.err("mmap with a file", sys::result(abi::syscall::nr::MMAP, [0, PAGE_SIZE, RW, ANON, 3, 0]), errno::EINVAL);
    c.err(
        "mmap with an offset",
        sys::result(abi::syscall::nr::MMAP, [0, PAGE_SIZE, RW, ANON, u64::MAX, 4096]),
        errno::EINVAL,
    );
    c.err("mmap FIXED misaligned", e(sys::mmap(0x5000_0001, PAGE_SIZE, RW, ANON | map::FIXED)), errno::EINVAL);
    c.err("mmap FIXED at 0", e(sys::mmap(0, PAGE_SIZE, RW, ANON | map::FIXED)), errno::EINVAL);
    c.err("mmap FIXED in the kernel", e(sys::mmap(KERNEL_ADDR, PAGE_SIZE, RW, ANON | map::FIXED)), errno::EINVAL);
    let a = sys::mmap(0, 4 * PAGE_SIZE, RW, ANON).unwrap_or(0);
    c.that("mmap gives a page-aligned address", a != 0 && a.is_multiple_of(PAGE_SIZE));
    c.ok("demand-zero page reads 0", PROBE.read(a + 8).map_err(|_| 0), 0);
    c.goes("write a fresh page", PROBE.write(a + PAGE_SIZE, 0x1234));
    c.ok("read it back", PROBE.read(a + PAGE_SIZE).map_err(|_| 0), 0x1234);
    c.ok("mmap at a free hint", sys::mmap(0x6000_0000, PAGE_SIZE, RW, ANON), 0x6000_0000);
    // MAP_FIXED over the written page: it is replaced by a fresh demand-zero one.
    c.ok("mmap FIXED over a mapping", sys::mmap(a + PAGE_SIZE, PAGE_SIZE, RW, ANON | map::FIXED), a + PAGE_SIZE);
    c.ok("... which is zero again", PROBE.read(a + PAGE_SIZE).map_err(|_| 0), 0);
    c.err("munmap misaligned", sys::munmap(a + 1, PAGE_SIZE), errno::EINVAL);
    c.err("munmap length 0", sys::munmap(a, 0), errno::EINVAL);
    c.err("munmap in the kernel", sys::munmap(KERNEL_ADDR, PAGE_SIZE), errno::EINVAL);
    c.ok("munmap of nothing", sys::munmap(0x7000_0000, PAGE_SIZE), 0);
    c.ok("munmap the middle", sys::munmap(a + PAGE_SIZE, 2 * PAGE_SIZE), 0);
    c.faults("read an unmapped page", PROBE.read(a + PAGE_SIZE), a + PAGE_SIZE);
    c.faults("write an unmapped page", PROBE.write(a + 2 * PAGE_SIZE, 1), a + 2 * PAGE_SIZE);
    c.goes("its neighbour stays", PROBE.write(a + 3 * PAGE_SIZE, 1));
    c.ok("munmap the rest", sys::munmap(a, 4 * PAGE_SIZE), 0);
    c.faults("read after munmap", PROBE.read(a), a);
}

/// Pages in four states (never touched, read, written, PROT_NONE while written), then each
/// protection change, probed by EL0 stores and loads and by the kernel writing for the task.
/// Demand-zero faults are counted, with their barriers: each maps a page after a `DSB ISHST`
/// that publishes the zeroed frame and before one that publishes the entry, whichever path
/// the kernel takes (its lean first touch tallies them per CPU; the totals add every CPU's).
fn fault_counts(c: &mut Checks) {
    const N: u64 = 8;
    let a = sys::mmap(0, N * PAGE_SIZE, RW, ANON).unwrap_or(0);
    let before = sys::counters();
    for i in 0..N {
        c.goes("touch a fresh page", PROBE.write(a + i * PAGE_SIZE, i));
    }
    let after = sys::counters();
    c.that("each first touch counts a demand-zero fault", after.faults_demand - before.faults_demand >= N);
    c.that("... and its two DSBs", after.dsb - before.dsb >= 2 * N);
    c.ok("munmap them", sys::munmap(a, N * PAGE_SIZE), 0);
}

fn mprotect_paths(c: &mut Checks) {
    use abi::syscall::nr;
    let n = 4;
    let a = sys::mmap(0, n * PAGE_SIZE, RW, ANON).unwrap_or(0);
    let page = |i: u64| a + i * PAGE_SIZE;
    let _ = PROBE.read(page(1));
    c.goes("write page 2", PROBE.write(page(2), 0x22));
    c.goes("write page 3", PROBE.write(page(3), 0x33));
    c.ok("page 3 PROT_NONE", sys::mprotect(page(3), PAGE_SIZE, prot::NONE), 0);
    c.faults("read a PROT_NONE page", PROBE.read(page(3)), page(3));
    c.err("mprotect misaligned", sys::mprotect(a + 8, PAGE_SIZE, prot::READ), errno::EINVAL);
    c.err("mprotect unknown bits", sys::mprotect(a, PAGE_SIZE, 0x40), errno::EINVAL);
    c.ok("mprotect length 0", sys::mprotect(a, 0, prot::READ), 0);
    c.err("mprotect past the mapping", sys::mprotect(a, (n + 1) * PAGE_SIZE, prot::READ), errno::ENOMEM);
    c.err("mprotect of nothing", sys::mprotect(0x7100_0000, PAGE_SIZE, prot::READ), errno::ENOMEM);
    c.err("mprotect in the kernel", sys::mprotect(KERNEL_ADDR, PAGE_SIZE, prot::READ), errno::ENOMEM);
    // PROT_READ on all four: every write faults, from EL0 and from the kernel (a system call
    // storing its result), whatever state the page was in; contents stay.
    c.ok("mprotect PROT_READ", sys::mprotect(a, n * PAGE_SIZE, prot::READ), 0);
    let states = ["never touched", "read", "written", "PROT_NONE"];
    for i in 0..n {
        let name = |what: &str| {
            let mut b = Text::<96>::new();
            let _ = core::fmt::Write::write_fmt(&mut b, format_args!("PROT_READ, {} page: {what}", states[i as usize]));
            b
        };
        c.faults(name("write faults").as_str(), PROBE.write(page(i) + 16, 0x99), page(i) + 16);
        let r = sys::result(nr::CLOCK, [0, page(i) + 24, 0, 0, 0, 0]);
        c.err(name("kernel write for the task refused").as_str(), r, errno::EFAULT);
        let want = [0, 0, 0x22, 0x33][i as usize];
        c.ok(name("contents kept").as_str(), PROBE.read(page(i)).map_err(|_| 0), want);
        // The read populated a never-touched page (the zero-fill path): still read-only.
        c.faults(name("write after a read faults").as_str(), PROBE.write(page(i) + 32, 0x98), page(i) + 32);
    }
    // PROT_NONE: nothing goes; back to read-write: everything goes again (no TLBI needed).
    c.ok("mprotect PROT_NONE", sys::mprotect(a, n * PAGE_SIZE, prot::NONE), 0);
    for i in 0..n {
        c.faults("PROT_NONE: read faults", PROBE.read(page(i)), page(i));
    }
    let before = sys::counters();
    c.ok("mprotect NONE -> RW", sys::mprotect(a, n * PAGE_SIZE, RW), 0);
    let after = sys::counters();
    let elision = sys::sysctl(sysctl::FLUSH_ELISION, abi::syscall::SYSCTL_GET) == Ok(1);
    if elision {
        c.ok("NONE -> RW issued no TLBI", Ok(after.space_tlbi - before.space_tlbi), 0);
    }
    for i in 0..n {
        c.goes("NONE -> RW: write goes", PROBE.write(page(i) + 8, i + 1));
    }
    c.ok("contents after NONE -> RW", PROBE.read(page(2)).map_err(|_| 0), 0x22);
    // RO -> RW with lazy relaxation: no TLBI, every write goes (a stale read-only entry takes a
    // spurious fault the kernel fixes).
    let lazy = sys::sysctl(sysctl::LAZY_RELAX, abi::syscall::SYSCTL_GET) == Ok(1);
    c.ok("mprotect RW -> RO", sys::mprotect(a, n * PAGE_SIZE, prot::READ), 0);
    for i in 0..n {
        let _ = PROBE.read(page(i));
    }
    let before = sys::counters();
    c.ok("mprotect RO -> RW", sys::mprotect(a, n * PAGE_SIZE, RW), 0);
    let after = sys::counters();
    if lazy {
        c.ok("RO -> RW under lazy_relax issued no TLBI", Ok(after.space_tlbi - before.space_tlbi), 0);
        c.that("... and relaxed every page lazily", after.lazy_relaxed - before.lazy_relaxed >= n);
    } else {
        c.that("RO -> RW without lazy_relax flushed", after.space_tlbi > before.space_tlbi);
    }
    for i in 0..n {
        c.goes("RO -> RW: write goes", PROBE.write(page(i), 7));
    }
    c.ok("munmap", sys::munmap(a, n * PAGE_SIZE), 0);
}

fn exec_permissions(c: &mut Checks) {
    let a = sys::mmap(0, PAGE_SIZE, RW, ANON).unwrap_or(0);
    c.goes("write a RET", PROBE.write(a, RET as u64));
    c.faults("execute a read-write page", PROBE.exec(a), a);
    c.ok("mprotect READ|EXEC", sys::mprotect(a, PAGE_SIZE, prot::READ | prot::EXEC), 0);
    c.goes("execute it", PROBE.exec(a));
    c.faults("write a read-exec page", PROBE.write(a, 0), a);
    c.ok("mprotect READ", sys::mprotect(a, PAGE_SIZE, prot::READ), 0);
    c.faults("execute after X -> NX", PROBE.exec(a), a);
    c.ok("munmap", sys::munmap(a, PAGE_SIZE), 0);
}

static CPU_SEEN: [AtomicU64; 8] = [const { AtomicU64::new(u64::MAX) }; 8];

extern "C" fn on_cpu(slot: u64) -> ! {
    CPU_SEEN[slot as usize].store(sys::getcpu(), Ordering::Release);
    sys::exit(7)
}

extern "C" fn touch_null(_: u64) -> ! {
    // No fault handler in this task: the fault ends it, with a report.
    // SAFETY: deliberately touches an unmapped user address.
    unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
    sys::exit(0)
}

fn tasks(c: &mut Checks) {
    let any = abi::syscall::ANY_CPU;
    let stack = sys::mmap(0, 64 * 1024, RW, ANON).unwrap_or(0) + 64 * 1024;
    c.err(
        "spawn at a kernel address",
        sys::result(abi::syscall::nr::SPAWN, [KERNEL_ADDR, stack, 0, any, 0, 0]),
        errno::EINVAL,
    );
    c.err(
        "spawn misaligned entry",
        sys::result(abi::syscall::nr::SPAWN, [on_cpu as *const () as u64 + 2, stack, 0, any, 0, 0]),
        errno::EINVAL,
    );
    c.err("spawn misaligned stack", sys::spawn(on_cpu, stack - 8, 0, any), errno::EINVAL);
    c.err("spawn on a CPU that is not online", sys::spawn(on_cpu, stack, 0, 99), errno::EINVAL);
    let me = sys::spawn(on_cpu, stack, 0, any);
    c.that("spawn", me.is_ok());
    let tid = me.unwrap_or(0);
    c.ok("wait for it: its status", sys::wait(tid), 7);
    c.err("wait for it again", sys::wait(tid), errno::ESRCH);
    c.err("wait for no such task", sys::wait(1_000_000), errno::ESRCH);
    let ncpus = sys::sysctl(sysctl::NCPUS, abi::syscall::SYSCTL_GET).unwrap_or(1).min(8);
    let mut tids = [0u64; 8];
    for cpu in 0..ncpus {
        tids[cpu as usize] = user::thread::spawn(on_cpu, cpu, cpu).unwrap_or(0);
    }
    for cpu in 0..ncpus {
        let _ = sys::wait(tids[cpu as usize]);
        c.ok("a task runs on the CPU it asked for", Ok(CPU_SEEN[cpu as usize].load(Ordering::Acquire)), cpu);
    }
    let bad = user::thread::spawn(touch_null, 0, any).unwrap_or(0);
    c.ok("a task that faults is ended and reaped", sys::wait(bad), abi::syscall::EXIT_KILLED);
}

fn knobs(c: &mut Checks) {
    use abi::syscall::SYSCTL_GET;
    let fe = sys::sysctl(sysctl::FLUSH_ELISION, SYSCTL_GET).unwrap_or(9);
    c.that("flush_elision reads 0 or 1", fe <= 1);
    c.ok("flush_elision off", sys::sysctl(sysctl::FLUSH_ELISION, 0), fe);
    c.ok("flush_elision back", sys::sysctl(sysctl::FLUSH_ELISION, fe), 0);
    c.err("flush_elision = 2", sys::sysctl(sysctl::FLUSH_ELISION, 2), errno::EINVAL);
    c.err("set the CPU count", sys::sysctl(sysctl::NCPUS, 3), errno::EPERM);
    c.err("unknown knob", sys::sysctl(77, SYSCTL_GET), errno::EINVAL);
    c.that("tick rate", sys::sysctl(sysctl::TICK_HZ, SYSCTL_GET).unwrap_or(0) > 0);
    let before = sys::counters();
    let mut w = [0u64; 3];
    c.ok("counters, a prefix", sys::result(abi::syscall::nr::COUNTERS, [w.as_mut_ptr() as u64, 24, 0, 0, 0, 0]), 24);
    c.err(
        "counters, size 0",
        sys::result(abi::syscall::nr::COUNTERS, [w.as_mut_ptr() as u64, 0, 0, 0, 0, 0]),
        errno::EINVAL,
    );
    c.err(
        "counters, size 7",
        sys::result(abi::syscall::nr::COUNTERS, [w.as_mut_ptr() as u64, 7, 0, 0, 0, 0]),
        errno::EINVAL,
    );
    c.err("counters into NULL", sys::result(abi::syscall::nr::COUNTERS, [0, 24, 0, 0, 0, 0]), errno::EFAULT);
    let after = sys::counters();
    c.that("counters count system calls", after.syscalls > before.syscalls);
    c.that("counters count faults the task took", after.faults_denied >= 1);
}

// What this block guarantees: `__selftest_regs(page, out)` sets x1-x30 to `REG_PATTERN | k`
// (x8 to `nr::YIELD`), stores to `page` (an untouched page of an anonymous read-write mapping:
// a demand-zero fault, x0 holding the address), makes the `YIELD` system call (x0 becomes its
// result), then writes x0-x30 as they are into `out[0..31]`, gives back the caller's x19-x30
// and SP, and returns. Nothing else is touched.
#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    r#"
.section .text.selftest_regs, "ax"
.global __selftest_regs
__selftest_regs:
    sub     sp, sp, #112
    stp     x19, x20, [sp, #0]
    stp     x21, x22, [sp, #16]
    stp     x23, x24, [sp, #32]
    stp     x25, x26, [sp, #48]
    stp     x27, x28, [sp, #64]
    stp     x29, x30, [sp, #80]
    str     x1, [sp, #96]
    .irp k, 1,2,3,4,5,6,7,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30
    movz    x\k, #0x5a5a, lsl #48
    movk    x\k, #\k
    .endr
    mov     x8, #{yield_nr}
    str     xzr, [x0]
    svc     #0
    sub     sp, sp, #256
    stp     x0, x1, [sp, #0]
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    str     x30, [sp, #240]
    ldr     x9, [sp, #352]
    mov     x10, #0
1:
    ldr     x11, [sp, x10, lsl #3]
    str     x11, [x9, x10, lsl #3]
    add     x10, x10, #1
    cmp     x10, #31
    b.ne    1b
    add     sp, sp, #256
    ldp     x19, x20, [sp, #0]
    ldp     x21, x22, [sp, #16]
    ldp     x23, x24, [sp, #32]
    ldp     x25, x26, [sp, #48]
    ldp     x27, x28, [sp, #64]
    ldp     x29, x30, [sp, #80]
    add     sp, sp, #112
    ret
"#,
    yield_nr = const abi::syscall::nr::YIELD,
);

// What this block guarantees: `__selftest_vregs(addr, len, prot, src, dst)` loads q0-q31 from
// `src` (512 bytes), makes the `MPROTECT(addr, len, prot)` system call, stores q0-q31 into `dst`
// (512 bytes) and returns the call's x0; the caller's d8-d15 (callee-saved) are given back.
#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    r#"
.section .text.selftest_vregs, "ax"
.arch_extension simd
.global __selftest_vregs
__selftest_vregs:
    sub     sp, sp, #64
    stp     d8, d9, [sp, #0]
    stp     d10, d11, [sp, #16]
    stp     d12, d13, [sp, #32]
    stp     d14, d15, [sp, #48]
    .irp k, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    ldr     q\k, [x3, #(\k * 16)]
    .endr
    mov     x8, #{mprotect_nr}
    svc     #0
    .irp k, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    str     q\k, [x4, #(\k * 16)]
    .endr
    ldp     d8, d9, [sp, #0]
    ldp     d10, d11, [sp, #16]
    ldp     d12, d13, [sp, #32]
    ldp     d14, d15, [sp, #48]
    add     sp, sp, #64
    ret
"#,
    mprotect_nr = const abi::syscall::nr::MPROTECT,
);

#[cfg(target_arch = "aarch64")]
extern "C" {
    fn __selftest_vregs(addr: u64, len: u64, prot: u64, src: *const [u64; 64], dst: *mut [u64; 64]) -> i64;
}

/// The task's vector registers survive an mprotect of 512 present pages, which the kernel does
/// with its vector routine (lib/pgtable's, saving and restoring what it uses): q0-q31 loaded
/// with a pattern before the call must all come back.
fn vector_registers_survive(c: &mut Checks) {
    const PAGES: u64 = 512;
    let Ok(base) = sys::mmap(0, PAGES * PAGE_SIZE, RW, ANON) else {
        c.that("vector registers: mmap", false);
        return;
    };
    for i in 0..PAGES {
        // SAFETY: inside the mapping just made, read-write.
        unsafe { ((base + i * PAGE_SIZE) as *mut u64).write_volatile(i) };
    }
    let src: [u64; 64] =
        core::array::from_fn(|k| 0xa5c3_0000_0000_0000 ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    #[cfg(target_arch = "aarch64")]
    let (r, dst) = {
        let mut dst = [0u64; 64];
        // SAFETY: the mapping is this task's; `src` and `dst` are 512 bytes each; the routine
        // gives back every register the ABI asks it to.
        let r = unsafe { __selftest_vregs(base, PAGES * PAGE_SIZE, prot::READ, &src, &mut dst) };
        (r, dst)
    };
    #[cfg(not(target_arch = "aarch64"))]
    let (r, dst) = (0i64, src);
    c.ok("vector registers: mprotect of 512 pages", if r < 0 { Err(r) } else { Ok(r as u64) }, 0);
    let bad = (0..32).filter(|&q| dst[2 * q..2 * q + 2] != src[2 * q..2 * q + 2]).fold(0u64, |m, q| m | 1 << q);
    c.record("vector registers: q0-q31 survive an mprotect of 512 pages", bad == 0, bad as i64, 0);
    let _ = sys::munmap(base, PAGES * PAGE_SIZE);
}

/// The high half of the values `__selftest_regs` puts into the registers.
const REG_PATTERN: u64 = 0x5a5a << 48;

#[cfg(target_arch = "aarch64")]
extern "C" {
    fn __selftest_regs(page: u64, out: *mut [u64; 31]);
}

/// Every register the task had survives a page fault (demand zero) and a system call (`YIELD`,
/// a way through the scheduler), but x0, the call's result: the exception entry saves only
/// part of the frame on both ways and relies on the kernel's code giving back the rest.
fn registers_survive(c: &mut Checks) {
    let Ok(page) = sys::mmap(0, PAGE_SIZE, RW, ANON) else {
        c.that("registers: mmap", false);
        return;
    };
    #[cfg_attr(not(target_arch = "aarch64"), allow(unused_mut))]
    let mut out = [0u64; 31];
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `page` is this task's fresh read-write page; `out` is 31 writable words; the
    // function gives back every register the ABI asks it to.
    unsafe {
        __selftest_regs(page, &mut out)
    };
    c.ok("registers: x0 is the call's result", Ok(out[0]), 0);
    let mut bad = 0u64;
    for (k, &v) in out.iter().enumerate().skip(1) {
        let want = if k == 8 { abi::syscall::nr::YIELD } else { REG_PATTERN | k as u64 };
        if v != want {
            bad |= 1 << k;
        }
    }
    c.record("registers: x1-x30 survive a page fault and a system call", bad == 0, bad as i64, 0);
    let _ = sys::munmap(page, PAGE_SIZE);
}

// What this block guarantees: `__selftest_fp_round(seed, fpcr, fpsr, mask)` puts into q<k>
// the low half `seed + k` and the high half `!(seed + k)` (k = 0..31), FPCR = `fpcr`, FPSR =
// `fpsr`, makes the `YIELD` system call, then (when `mask` is not 0) `percpu(AFFINITY, mask)`
// (a move to another CPU) and `YIELD` again, and returns a bit set of what it then finds
// changed: bit k for q<k>, bit 32 for FPCR, bit 33 for FPSR. It gives back x19-x30 and SP and
// touches no memory but its stack.
#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    r#"
.section .text.selftest_fp, "ax"
.global __selftest_fp_round
__selftest_fp_round:
    stp     x19, x20, [sp, #-48]!
    stp     x21, x22, [sp, #16]
    str     x30, [sp, #32]
    mov     x19, x0
    mov     x20, x1
    mov     x21, x2
    mov     x22, x3
    .irp k, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    add     x9, x19, #\k
    mvn     x10, x9
    fmov    d\k, x9
    mov     v\k\().d[1], x10
    .endr
    msr     fpcr, x20
    msr     fpsr, x21
    mov     x8, #{yield_nr}
    svc     #0
    cbz     x22, 1f
    mov     x0, #{affinity}
    mov     x1, x22
    mov     x8, #{percpu_nr}
    svc     #0
    mov     x8, #{yield_nr}
    svc     #0
1:
    mov     x0, #0
    .irp k, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    add     x9, x19, #\k
    mvn     x10, x9
    fmov    x11, d\k
    mov     x12, v\k\().d[1]
    cmp     x11, x9
    ccmp    x12, x10, #0, eq
    cset    x13, ne
    orr     x0, x0, x13, lsl #\k
    .endr
    mrs     x11, fpcr
    cmp     x11, x20
    cset    x13, ne
    orr     x0, x0, x13, lsl #32
    mrs     x11, fpsr
    cmp     x11, x21
    cset    x13, ne
    orr     x0, x0, x13, lsl #33
    ldr     x30, [sp, #32]
    ldp     x21, x22, [sp, #16]
    ldp     x19, x20, [sp], #48
    ret
"#,
    yield_nr = const abi::syscall::nr::YIELD,
    percpu_nr = const abi::syscall::nr::PERCPU,
    affinity = const abi::syscall::percpu::AFFINITY,
);

#[cfg(target_arch = "aarch64")]
extern "C" {
    fn __selftest_fp_round(seed: u64, fpcr: u64, fpsr: u64, mask: u64) -> u64;
}

/// Rounds each FP/SIMD task makes.
const FP_ROUNDS: u64 = 64;
/// CPUs online (set by [`fp_state_is_per_task`] before it starts the tasks).
static FP_CPUS: AtomicU64 = AtomicU64::new(1);

/// One FP/SIMD task (`id` 0 or 1): [`FP_ROUNDS`] rounds of distinct values in q0-q31, FPCR
/// (its rounding mode and flush-to-zero bits) and FPSR (cumulative flags), each kept across
/// yields and, with more than one CPU, moves between CPUs. Exit status:
/// the rounds that found a value changed.
extern "C" fn fp_task(id: u64) -> ! {
    let cpus = FP_CPUS.load(Ordering::Acquire).clamp(1, 8);
    // RMode (23:22) and FZ (24) differ between the tasks; FPSR's QC (27) and IOC/DZC (0, 1).
    let fpcr = if id == 0 { 1 << 22 } else { (2 << 22) | (1 << 24) };
    let fpsr = if id == 0 { (1 << 27) | 1 } else { 2 };
    let mut bad = 0;
    for round in 0..FP_ROUNDS {
        let seed = ((id + 1) << 40) | (round << 16);
        // Every fourth round a move to one CPU; every eighth all CPUs again (the balance may
        // then pull it).
        let mask = match round % 8 {
            _ if cpus == 1 => 0,
            3 => 1 << ((round / 4 + id) % cpus),
            7 => u64::MAX,
            _ => 0,
        };
        #[cfg(target_arch = "aarch64")]
        // SAFETY: the function gives back every register the ABI asks it to (it changes the
        // FP/SIMD registers, all caller-saved here but d8-d15's low halves, which this
        // function's caller does not keep anything in: it is the task's whole body).
        let found = unsafe { __selftest_fp_round(seed, fpcr, fpsr, mask) };
        #[cfg(not(target_arch = "aarch64"))]
        let found = {
            let _ = (seed, fpcr, fpsr, mask);
            0u64
        };
        if found != 0 {
            user::println!("selftest: FP/SIMD task {id} round {round}: changed {found:#x}");
            bad += 1;
        }
    }
    sys::exit(bad)
}

/// Two tasks each keep their own q0-q31, FPSR and FPCR across many yields between them (the
/// lazy FP/SIMD switch traps and swaps the registers' owner) and moves between CPUs (a task
/// leaving a CPU takes its state along), never seeing the other's.
fn fp_state_is_per_task(c: &mut Checks) {
    let ncpus = sys::sysctl(sysctl::NCPUS, abi::syscall::SYSCTL_GET).unwrap_or(1).min(8);
    FP_CPUS.store(ncpus, Ordering::Release);
    // Both on CPU 0 first (the moves spread them), so they yield to each other.
    let a = user::thread::spawn(fp_task, 0, 0).unwrap_or(0);
    let b = user::thread::spawn(fp_task, 1, 0).unwrap_or(0);
    c.ok("FP/SIMD: task 0 kept its registers", sys::wait(a), 0);
    c.ok("FP/SIMD: task 1 kept its registers", sys::wait(b), 0);
}
