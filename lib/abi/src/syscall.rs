//! The system-call ABI between the guest kernel and its EL0 programs (`user/`).
//!
//! # Calling convention
//!
//! `SVC #0` with the call number ([`nr`]) in x8 and up to six arguments in x0..x5. The result
//! comes back in x0: a value `>= 0` on success, `-errno` ([`errno`]) on failure
//! ([`decode`]). Every other general-purpose, FP/SIMD and status register is preserved. Calls
//! never crash the kernel: a bad pointer, length, flag or alignment returns an error, and a
//! pointer into memory the task may not access in the needed way returns [`errno::EFAULT`].
//!
//! User addresses are `[USER_START, USER_END)`; the kernel accesses user memory only with
//! unprivileged loads and stores, so it gets exactly the task's rights.
//!
//! # The calls
//!
//! | call | arguments | result |
//! |---|---|---|
//! | [`nr::WRITE`] | fd (1 or 2: the console), buf, len (<= [`MAX_WRITE`]) | len; the bytes are printed together |
//! | [`nr::EXIT`] | status (low 8 bits kept) | does not return; the task ends |
//! | [`nr::YIELD`] | - | 0, after other runnable tasks of this CPU had their turn |
//! | [`nr::SLEEP`] | nanoseconds | 0, no earlier than that |
//! | [`nr::CLOCK`] | clock id ([`clock`]), `*mut u64` | 0; nanoseconds written there |
//! | [`nr::GETCPU`] | - | the CPU index the task runs on |
//! | [`nr::MMAP`] | addr, len, prot ([`prot`]), flags ([`map`]), fd (must be -1), offset (0) | the address; anonymous, demand-zero |
//! | [`nr::MUNMAP`] | addr (page aligned), len | 0 (unmapping nothing is fine) |
//! | [`nr::MPROTECT`] | addr (page aligned), len, prot | 0; ENOMEM if part of the range is not mapped |
//! | [`nr::COUNTERS`] | `*mut Counters`, size in bytes (multiple of 8) | bytes written |
//! | [`nr::SPAWN`] | entry, stack top (16-aligned), argument (x0 of the new task), CPU ([`ANY_CPU`]: placed round-robin, free to migrate; or an index: bound to that CPU until its affinity changes) | the new task's id; it shares this task's address space |
//! | [`nr::WAIT`] | task id (of this address space, not the caller) | its exit status ([`EXIT_KILLED`] if a fault ended it); reaps it |
//! | [`nr::SYSCTL`] | knob ([`sysctl`]), value ([`SYSCTL_GET`]: only read) | the previous value |
//! | [`nr::FAULT_HANDLER`] | entry (0: none), cookie | the previous entry |
//! | [`nr::FAULT_RETURN`] | [`RETRY`], [`SKIP`] or [`RETURN_TO_LR`] | does not return; resumes the faulting context |
//! | [`nr::PERCPU`] | operation ([`percpu`]), up to four arguments | per operation |
//!
//! # Faults
//!
//! A task that touches memory it may not (no mapping, or not with that access) is ended and
//! reported, unless it registered a fault handler: the kernel then saves its context and
//! continues at the handler with x0 = the faulting address, x1 = ESR_EL1, x2 = the faulting
//! instruction's address, x3 = the cookie given with the handler, on the same stack (SP
//! lowered by [`FAULT_RED_ZONE`]). The handler is
//! off while it runs (a fault in it ends the task) and must end with [`nr::FAULT_RETURN`].

/// Call numbers (x8).
pub mod nr {
    /// `write(fd, buf, len)`.
    pub const WRITE: u64 = 0;
    /// `exit(status)`.
    pub const EXIT: u64 = 1;
    /// `yield()`.
    pub const YIELD: u64 = 2;
    /// `sleep(ns)`.
    pub const SLEEP: u64 = 3;
    /// `clock(id, *mut u64)`.
    pub const CLOCK: u64 = 4;
    /// `getcpu()`.
    pub const GETCPU: u64 = 5;
    /// `mmap(addr, len, prot, flags, fd, offset)`.
    pub const MMAP: u64 = 6;
    /// `munmap(addr, len)`.
    pub const MUNMAP: u64 = 7;
    /// `mprotect(addr, len, prot)`.
    pub const MPROTECT: u64 = 8;
    /// `counters(*mut Counters, size)`.
    pub const COUNTERS: u64 = 9;
    /// `spawn(entry, stack_top, arg, cpu)`.
    pub const SPAWN: u64 = 10;
    /// `wait(tid)`.
    pub const WAIT: u64 = 11;
    /// `sysctl(knob, value)`.
    pub const SYSCTL: u64 = 12;
    /// `fault_handler(entry)`.
    pub const FAULT_HANDLER: u64 = 13;
    /// `fault_return(how)`.
    pub const FAULT_RETURN: u64 = 14;
    /// `percpu(op, a, b, c, d)`: per-CPU variables, the stress test's and benchmark's driver.
    pub const PERCPU: u64 = 15;
    /// One past the highest call number.
    pub const COUNT: u64 = 16;
    /// Names, by number.
    pub const NAMES: [&str; COUNT as usize] = [
        "write",
        "exit",
        "yield",
        "sleep",
        "clock",
        "getcpu",
        "mmap",
        "munmap",
        "mprotect",
        "counters",
        "spawn",
        "wait",
        "sysctl",
        "fault_handler",
        "fault_return",
        "percpu",
    ];
}

/// Error numbers (returned negated), with Linux's values.
pub mod errno {
    /// Operation not permitted (a read-only knob).
    pub const EPERM: i64 = 1;
    /// No such task.
    pub const ESRCH: i64 = 3;
    /// Bad file descriptor.
    pub const EBADF: i64 = 9;
    /// Out of memory (or part of a range not mapped, as Linux's mprotect says it).
    pub const ENOMEM: i64 = 12;
    /// Bad address: the task may not access that memory as the call needs.
    pub const EFAULT: i64 = 14;
    /// Device or resource busy.
    pub const EBUSY: i64 = 16;
    /// Invalid argument: unknown flag, zero length, misaligned address, ...
    pub const EINVAL: i64 = 22;
    /// Function not implemented: unknown call number.
    pub const ENOSYS: i64 = 38;

    /// The name of an error number (`"E?"` for one this ABI does not use).
    pub fn name(e: i64) -> &'static str {
        match e {
            EPERM => "EPERM",
            ESRCH => "ESRCH",
            EBADF => "EBADF",
            ENOMEM => "ENOMEM",
            EFAULT => "EFAULT",
            EBUSY => "EBUSY",
            EINVAL => "EINVAL",
            ENOSYS => "ENOSYS",
            _ => "E?",
        }
    }
}

/// x0 of a failed call.
pub const fn error(errno: i64) -> u64 {
    (-errno) as u64
}

/// Reads x0 after a call: `Ok(value)` or `Err(errno)`. Values in `[-4095, -1]` are errors, as
/// on Linux; anything else (large unsigned values, e.g. addresses) is a result.
pub const fn decode(x0: u64) -> Result<u64, i64> {
    let v = x0 as i64;
    if v < 0 && v >= -4095 {
        Err(-v)
    } else {
        Ok(x0)
    }
}

/// First user address (the page at 0 and the ones after it stay unmapped).
pub const USER_START: u64 = 0x1_0000;
/// One past the last user address (TTBR0_EL1 covers 48 bits).
pub const USER_END: u64 = 1 << 48;
/// The page size.
pub use crate::PAGE_SIZE;
/// Longest [`nr::WRITE`].
pub const MAX_WRITE: u64 = 1 << 20;
/// [`nr::SPAWN`]'s CPU argument: any CPU (the kernel spreads tasks round-robin).
pub const ANY_CPU: u64 = u64::MAX;
/// [`nr::SYSCTL`]'s value argument: read without changing.
pub const SYSCTL_GET: u64 = u64::MAX;
/// [`nr::WAIT`]'s result for a task a fault ended.
pub const EXIT_KILLED: u64 = 0x100;
/// [`nr::FAULT_RETURN`]: execute the faulting instruction again.
pub const RETRY: u64 = 0;
/// [`nr::FAULT_RETURN`]: continue after the faulting instruction.
pub const SKIP: u64 = 1;
/// [`nr::FAULT_RETURN`]: continue at the faulting context's x30 (for an instruction abort
/// on the target of a call: return to the caller).
pub const RETURN_TO_LR: u64 = 2;
/// Bytes below the interrupted SP the fault handler starts at (AAPCS64 has no red zone, but
/// a leaf function may have stored just below SP before it moves it).
pub const FAULT_RED_ZONE: u64 = 256;

/// [`nr::MMAP`] / [`nr::MPROTECT`] protection bits (none: `PROT_NONE`).
pub mod prot {
    /// Readable.
    pub const READ: u64 = 1;
    /// Writable (implies readable on arm64).
    pub const WRITE: u64 = 2;
    /// Executable (implies readable here).
    pub const EXEC: u64 = 4;
    /// No access.
    pub const NONE: u64 = 0;
    /// Every known bit.
    pub const ALL: u64 = READ | WRITE | EXEC;
}

/// [`nr::MMAP`] flags (Linux's values). `PRIVATE | ANONYMOUS` are required.
pub mod map {
    /// Private mapping (shared by the tasks of the address space, like any memory).
    pub const PRIVATE: u64 = 0x02;
    /// Place the mapping exactly at `addr`, replacing what is there.
    pub const FIXED: u64 = 0x10;
    /// Not backed by a file: demand-zero.
    pub const ANONYMOUS: u64 = 0x20;
    /// Every known bit.
    pub const ALL: u64 = PRIVATE | FIXED | ANONYMOUS;
}

/// [`nr::CLOCK`] ids.
pub mod clock {
    /// Nanoseconds since boot (the generic timer).
    pub const MONOTONIC: u64 = 0;
    /// Nanoseconds the calling task has run (at EL0 and in the kernel on its behalf).
    pub const TASK_CPUTIME: u64 = 1;
}

/// [`nr::SYSCTL`] knobs.
pub mod sysctl {
    /// Flush elision in user address spaces (`needs_flush` per entry): 0 or 1.
    pub const FLUSH_ELISION: u64 = 0;
    /// Lazy permission relaxation of user pages (RO -> RW, NX -> X without a TLBI): 0 or 1.
    pub const LAZY_RELAX: u64 = 1;
    /// CPUs online (read-only).
    pub const NCPUS: u64 = 2;
    /// Timer ticks per second (read-only).
    pub const TICK_HZ: u64 = 3;
    /// Whether EL0 may read the PMU cycle and instruction counters (read-only; the kernel
    /// programs counter 0 for instructions retired).
    pub const PMU_EL0: u64 = 4;
    /// Programs of this boot's `user=` list that have not ended yet, those not yet started
    /// included (read-only): a background program can run exactly as long as the others.
    pub const PROGRAMS_LEFT: u64 = 5;
    /// One past the highest knob.
    pub const COUNT: u64 = 6;
}

/// What [`nr::COUNTERS`] writes (a prefix of it, as long as the caller's buffer). Counters
/// are totals since boot over all CPUs, except `space_tlbi`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// TLBI instructions, all kinds.
    pub tlbi: u64,
    /// ... of which broadcast (inner shareable).
    pub tlbi_broadcast: u64,
    /// ... of which range (FEAT_TLBIRANGE) operations.
    pub tlbi_range: u64,
    /// ... of which whole-ASID or whole-VMALL operations.
    pub tlbi_whole: u64,
    /// DSB instructions issued by the page-table code.
    pub dsb: u64,
    /// Page faults that mapped a demand-zero page.
    pub faults_demand: u64,
    /// Permission faults on pages whose tables already allowed the access (a stale TLB entry
    /// after a lazy relaxation, or a race with an upgrade): fixed with a local TLBI.
    pub faults_spurious: u64,
    /// Faults that were the task's fault (no mapping, or not with that access).
    pub faults_denied: u64,
    /// Page-table changes whose TLB maintenance was elided (flush elision, lazy relaxation).
    pub flushes_elided: u64,
    /// Permission upgrades left to lazy relaxation (no TLBI).
    pub lazy_relaxed: u64,
    /// ASID generation roll-overs.
    pub asid_rollovers: u64,
    /// Context switches.
    pub context_switches: u64,
    /// System calls.
    pub syscalls: u64,
    /// Timer ticks, all CPUs.
    pub ticks: u64,
    /// TLBIs issued by operations on the caller's own address space (mmap, munmap, mprotect,
    /// faults): unaffected by what other programs do.
    pub space_tlbi: u64,
}

/// Words in [`Counters`].
pub const COUNTERS_WORDS: usize = core::mem::size_of::<Counters>() / 8;

impl Counters {
    /// The counters as words, in declaration order.
    pub fn as_words(&self) -> [u64; COUNTERS_WORDS] {
        [
            self.tlbi,
            self.tlbi_broadcast,
            self.tlbi_range,
            self.tlbi_whole,
            self.dsb,
            self.faults_demand,
            self.faults_spurious,
            self.faults_denied,
            self.flushes_elided,
            self.lazy_relaxed,
            self.asid_rollovers,
            self.context_switches,
            self.syscalls,
            self.ticks,
            self.space_tlbi,
        ]
    }

    /// `self - earlier`, field by field (wrapping).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let (a, b) = (self.as_words(), earlier.as_words());
        let mut w = [0u64; COUNTERS_WORDS];
        for i in 0..COUNTERS_WORDS {
            w[i] = a[i].wrapping_sub(b[i]);
        }
        Counters::from_words(&w)
    }

    /// From words in declaration order (missing ones 0).
    pub fn from_words(w: &[u64]) -> Counters {
        let g = |i: usize| w.get(i).copied().unwrap_or(0);
        Counters {
            tlbi: g(0),
            tlbi_broadcast: g(1),
            tlbi_range: g(2),
            tlbi_whole: g(3),
            dsb: g(4),
            faults_demand: g(5),
            faults_spurious: g(6),
            faults_denied: g(7),
            flushes_elided: g(8),
            lazy_relaxed: g(9),
            asid_rollovers: g(10),
            context_switches: g(11),
            syscalls: g(12),
            ticks: g(13),
            space_tlbi: g(14),
        }
    }
}

/// How a system call reaches user memory through one of its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserAccess {
    /// The kernel reads the bytes there (`copy_from_user`).
    Reads,
    /// The kernel writes its result there (`copy_to_user`).
    Writes,
}

/// One argument of a call (or of a [`nr::PERCPU`] operation) that points into user memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserPointer {
    /// The call (x8).
    pub nr: u64,
    /// For [`nr::PERCPU`]: the operation (x0); else `None`.
    pub op: Option<u64>,
    /// Which argument (x0..x5) is the pointer.
    pub arg: usize,
    /// What the kernel does there.
    pub access: UserAccess,
    /// Arguments that reach the access when the pointer is good (the pointer's own slot is
    /// replaced): so a bad pointer must come back [`errno::EFAULT`] and nothing else.
    pub args: [u64; 6],
    /// What the call is called in reports.
    pub name: &'static str,
}

/// Every argument of every call that points into user memory: the kernel must answer
/// [`errno::EFAULT`] for each one given a pointer the task may not access that way (NULL, a
/// kernel address, a range that wraps, an unmapped page, a read-only page for a write). The
/// EL0 selftest (`user/src/bin/selftest.rs`) tries every row with every kind of bad pointer, so
/// a call added here is tested without more code; [`CALLS`] says which calls have pointers and
/// a host test keeps the two tables in step.
pub const USER_POINTERS: &[UserPointer] = &[
    UserPointer { nr: nr::WRITE, op: None, arg: 1, access: UserAccess::Reads, args: [1, 0, 8, 0, 0, 0], name: "write" },
    UserPointer {
        nr: nr::CLOCK,
        op: None,
        arg: 1,
        access: UserAccess::Writes,
        args: [clock::MONOTONIC, 0, 0, 0, 0, 0],
        name: "clock",
    },
    UserPointer {
        nr: nr::COUNTERS,
        op: None,
        arg: 0,
        access: UserAccess::Writes,
        args: [0, 8 * COUNTERS_WORDS as u64, 0, 0, 0, 0],
        name: "counters",
    },
    UserPointer {
        nr: nr::PERCPU,
        op: Some(percpu::STATS),
        arg: 1,
        access: UserAccess::Writes,
        args: [percpu::STATS, 0, 0, 0, 0, 0],
        name: "percpu STATS",
    },
    UserPointer {
        nr: nr::PERCPU,
        op: Some(percpu::BENCH_OP),
        arg: 3,
        access: UserAccess::Writes,
        args: [percpu::BENCH_OP, percpu::bench_op::EMPTY, 1, 0, 0, 0],
        name: "percpu BENCH_OP",
    },
];

/// Per call number: the arguments that point into user memory (the [`nr::PERCPU`] operations
/// that have one are listed by operation in [`PERCPU_POINTERS`]). A new call must get its row
/// here (the array has one per call number) and a row in [`USER_POINTERS`] per pointer.
pub const CALLS: [&[usize]; nr::COUNT as usize] = [
    &[1], // write(fd, buf, len)
    &[],  // exit
    &[],  // yield
    &[],  // sleep
    &[1], // clock(id, *mut u64)
    &[],  // getcpu
    &[],  // mmap (an address to map, never accessed by the call)
    &[],  // munmap
    &[],  // mprotect
    &[0], // counters(*mut Counters, size)
    &[],  // spawn (entry and stack are checked as user addresses, never accessed)
    &[],  // wait
    &[],  // sysctl
    &[],  // fault_handler (an entry point, never accessed)
    &[],  // fault_return
    &[],  // percpu: by operation, below
];

/// [`nr::PERCPU`] operations whose arguments point into user memory: (operation, argument).
pub const PERCPU_POINTERS: &[(u64, usize)] = &[(percpu::STATS, 1), (percpu::BENCH_OP, 3)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_and_errors() {
        assert_eq!(decode(0), Ok(0));
        assert_eq!(decode(error(errno::EINVAL)), Err(errno::EINVAL));
        assert_eq!(decode(error(4095)), Err(4095));
        assert_eq!(decode((-4096i64) as u64), Ok((-4096i64) as u64), "a large value is a result");
        assert_eq!(decode(0xffff_8000_0000_0000), Ok(0xffff_8000_0000_0000));
        assert_eq!(errno::name(errno::EFAULT), "EFAULT");
        assert_eq!(errno::name(99), "E?");
        assert_eq!(nr::NAMES[nr::MPROTECT as usize], "mprotect");
    }

    #[test]
    fn every_user_pointer_has_its_efault_row() {
        // Every pointer argument [`CALLS`] and [`PERCPU_POINTERS`] name has exactly one row in
        // USER_POINTERS, and every row names a listed pointer: a call with a pointer cannot be
        // added without its bad-pointer test.
        let mut want: std::vec::Vec<(u64, Option<u64>, usize)> = std::vec::Vec::new();
        for (n, args) in CALLS.iter().enumerate() {
            want.extend(args.iter().map(|&a| (n as u64, None, a)));
        }
        want.extend(PERCPU_POINTERS.iter().map(|&(op, a)| (nr::PERCPU, Some(op), a)));
        let mut have: std::vec::Vec<_> = USER_POINTERS.iter().map(|u| (u.nr, u.op, u.arg)).collect();
        want.sort();
        have.sort();
        assert_eq!(have, want);
        for u in USER_POINTERS {
            assert!(u.arg < 6 && u.args[u.arg] == 0, "{}: the pointer's slot is a placeholder", u.name);
            assert_eq!(u.op.is_some(), u.nr == nr::PERCPU, "{}", u.name);
            if let Some(op) = u.op {
                assert_eq!(u.args[0], op, "{}: x0 is the operation", u.name);
            }
            assert!(u.name.starts_with(nr::NAMES[u.nr as usize]), "{} is call {}", u.name, nr::NAMES[u.nr as usize]);
        }
    }

    #[test]
    fn counters_round_trip() {
        let mut w = [0u64; COUNTERS_WORDS];
        for (i, x) in w.iter_mut().enumerate() {
            *x = i as u64 * 3 + 1;
        }
        let c = Counters::from_words(&w);
        assert_eq!(c.as_words(), w);
        assert_eq!(c.since(&c), Counters::default());
        assert_eq!(core::mem::size_of::<Counters>(), COUNTERS_WORDS * 8);
        assert_eq!(Counters::from_words(&w[..2]).tlbi_range, 0, "a short prefix reads as zeros");
    }
}

/// [`nr::PERCPU`]: per-CPU variables from EL0 (tests and benchmarks of `this_cpu_*`).
///
/// A variable is named by a handle: `0..STATIC` are the kernel's static per-CPU counters, a
/// larger one comes from [`percpu::ALLOC`] (a dynamic per-CPU allocation). The add loop runs
/// in the kernel with IRQs on (a preemptible section): the tick preempts the calling task in
/// the middle of it and the scheduler may move it to another CPU.
pub mod percpu {
    /// Static counters (handles `0..STATIC`).
    pub const STATIC: u64 = 8;
    /// `(ADD_LOOP, handle, n, method)`: `n` times `this_cpu_add(handle, 1)`; returns `n`.
    pub const ADD_LOOP: u64 = 0;
    /// `(SUM, handle)`: the sum over every CPU's copy.
    pub const SUM: u64 = 1;
    /// `(RESET, handle)`: every copy to 0.
    pub const RESET: u64 = 2;
    /// `(SET_TABLES, on)`: per-CPU roots on every CPU (1) or the shared root (0); the previous.
    pub const SET_TABLES: u64 = 3;
    /// `(ALLOC, bytes)`: a dynamic per-CPU variable (zeroed); its handle.
    pub const ALLOC: u64 = 4;
    /// `(FREE, handle, bytes)`.
    pub const FREE: u64 = 5;
    /// `(AFFINITY, cpu mask)`: limit the caller to those CPUs (moving it now if needed); returns
    /// the CPU it runs on.
    pub const AFFINITY: u64 = 6;
    /// `(STATS, *mut [u64; STATS_WORDS])`: see [`Stats`].
    pub const STATS: u64 = 7;
    /// `(LATE_MAP)`: map a page at a new top-level slot of the kernel's table, then read it on
    /// every CPU in turn; returns the CPUs that read it right (a bit set).
    pub const LATE_MAP: u64 = 8;
    /// `(CHECK)`: every area's canaries; 0, or an error if one is wrong.
    pub const CHECK: u64 = 9;
    /// `(BENCH_OP, which, n, *mut [u64; 2])`: `n` this_cpu ops of kind `which`
    /// ([`bench_op`]) with IRQs masked; writes (instructions, counter ticks) of the whole loop.
    pub const BENCH_OP: u64 = 10;
    /// `(SHOOTDOWN, cpu mask)`: a local full TLB invalidation on each of those CPUs by IPI.
    pub const SHOOTDOWN: u64 = 11;
    /// `(SHOOTDOWN_CHECK, cpu mask)`: the window's probe page of each of those CPUs is read
    /// there, remapped to another frame with a [`SHOOTDOWN`] as its TLB invalidation, and read
    /// again; returns the CPUs that read the new frame. EINVAL with the tables off.
    pub const SHOOTDOWN_CHECK: u64 = 12;

    /// The add loop's method.
    pub mod method {
        /// The mode the system runs (`percpu_tables`).
        pub const SYSTEM: u64 = 0;
        /// TPIDR_EL1 + offset with the preemption guard.
        pub const BASE: u64 = 1;
        /// The window (tables must be on).
        pub const WINDOW: u64 = 2;
        /// The bug seeded with `percpu.seed=` (no-guard: base without its guard; window-plain:
        /// a plain load/add/store on the window); EINVAL when none is seeded.
        pub const SEEDED: u64 = 3;
    }

    /// [`BENCH_OP`] kinds.
    pub mod bench_op {
        /// Baseline this_cpu_add.
        pub const BASE_ADD: u64 = 0;
        /// Window this_cpu_add.
        pub const WINDOW_ADD: u64 = 1;
        /// Baseline this_cpu_cmpxchg.
        pub const BASE_CMPXCHG: u64 = 2;
        /// Window this_cpu_cmpxchg.
        pub const WINDOW_CMPXCHG: u64 = 3;
        /// An empty loop (the loop's own cost).
        pub const EMPTY: u64 = 4;
    }

    /// What [`STATS`] writes, in this order.
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
    #[repr(C)]
    pub struct Stats {
        /// 1 if the per-CPU roots are on.
        pub tables_on: u64,
        /// Tasks preempted in a preemptible kernel section.
        pub preemptions: u64,
        /// Tasks pulled by load balancing.
        pub pulls: u64,
        /// Tasks moved by an affinity change.
        pub pushes: u64,
        /// Ticks that checked the window.
        pub window_checks: u64,
        /// Ticks that found another CPU's area (or a broken canary) in the window.
        pub window_mismatches: u64,
        /// Top-level entries copied into per-CPU roots after boot.
        pub root_syncs: u64,
        /// Page-table pages of the roots and windows.
        pub table_pages: u64,
        /// Pages of each area mapped.
        pub area_pages: u64,
        /// Dynamic allocations.
        pub allocs: u64,
        /// Dynamic frees.
        pub frees: u64,
        /// IPI calls answered.
        pub ipi_calls: u64,
        /// Local TLB shootdowns by IPI (one per CPU).
        pub shootdowns: u64,
        /// Context switches.
        pub switches: u64,
    }

    /// Words of [`Stats`].
    pub const STATS_WORDS: usize = core::mem::size_of::<Stats>() / 8;

    impl Stats {
        /// From the words [`STATS`] wrote.
        pub fn from_words(w: &[u64; STATS_WORDS]) -> Stats {
            // SAFETY: Stats is repr(C) and made of u64s only: every bit pattern is valid.
            unsafe { core::mem::transmute_copy(w) }
        }
        /// As words.
        pub fn as_words(&self) -> [u64; STATS_WORDS] {
            // SAFETY: as above.
            unsafe { core::mem::transmute_copy(self) }
        }
    }
}
