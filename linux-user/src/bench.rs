//! `pgtlab-bench`: the EL0 benchmark of `lib/el0bench` on Linux, the peer side of `cargo
//! xtask bench mprotect --peer linux` (its twin on the project's kernel is
//! `user/src/bin/mprotect.rs`). This file is only Linux's side of `el0bench::Os`: its system
//! calls (the null call is `getcpu`), the partner thread (`clone`, joined on its cleared tid),
//! the task pinned to the CPU it starts on (`sched_setaffinity`), transparent huge pages off
//! (`PR_SET_THP_DISABLE`: the rows measure 4 KiB pages, as on the project's kernel), and the
//! PMU through `perf_event_open` (`perf::TaskCounter` read at EL0; `perf::CpuCounter` for the
//! yield batch). Linux has no flush-elision or lazy-relaxation switch: one setting, `linux`.
//! Arguments: `rounds=N` (argv words, else `pgtlab_bench_args` in the environment), checked
//! as the project's kernel checks `user=mprotect:ARGS`.
#![cfg_attr(target_os = "none", no_std, no_main)]

/// The program (the target build only: its system calls are aarch64 `svc`s).
#[cfg(target_os = "none")]
mod on_linux {
    use core::sync::atomic::{AtomicU32, Ordering};
    use el0bench::{Counts, Mechanism, Os};
    use linux_user::perf::{CpuCounter, TaskCounter};
    use linux_user::sys::{self, Args};
    use linux_user::{entry, say};

    entry!(main);

    const ONE: &[&str] = &["linux"];

    #[repr(C, align(16))]
    struct Stack([u8; 64 * 1024]);
    static mut PARTNER_STACK: Stack = Stack([0; 64 * 1024]);
    /// The partner thread's id while it lives (cleared by the kernel when it has ended).
    static PARTNER_TID: AtomicU32 = AtomicU32::new(0);

    extern "C" fn partner_main() -> ! {
        el0bench::partner(sys::getcpu(), sys::sched_yield);
        sys::exit_thread(0)
    }

    struct Linux {
        ncpus: u64,
        task: Option<TaskCounter>,
        cpu_counter: Option<CpuCounter>,
    }

    impl Os for Linux {
        fn peer(&self) -> &'static str {
            "linux"
        }
        fn ncpus(&self) -> u64 {
            self.ncpus
        }
        #[inline(always)]
        fn getcpu(&mut self) -> u64 {
            sys::getcpu()
        }
        fn mmap(&mut self, bytes: u64) -> Result<u64, i64> {
            sys::mmap(bytes, sys::PROT_RW, sys::MAP_PRIVATE | sys::MAP_ANONYMOUS, -1, 0).map_err(|e| e.1)
        }
        fn munmap(&mut self, addr: u64, bytes: u64) -> Result<(), i64> {
            sys::munmap(addr, bytes).map(|_| ()).map_err(|e| e.1)
        }
        fn mprotect(&mut self, addr: u64, bytes: u64, p: u64) -> Result<(), i64> {
            sys::mprotect(addr, bytes, p).map(|_| ()).map_err(|e| e.1)
        }
        fn yield_now(&mut self) {
            sys::sched_yield()
        }
        fn pin(&mut self) -> Result<(), i64> {
            let cpu = sys::getcpu();
            sys::sched_setaffinity(1 << cpu).map_err(|e| e.1)?;
            // The CPU's own counter, for the batch rows (the task's cannot see the partner).
            self.cpu_counter = self.task.is_some().then(|| CpuCounter::open(cpu)).transpose().map_err(|e| e.1)?;
            Ok(())
        }
        fn start_partner(&mut self) -> Result<(), i64> {
            // SAFETY: only the address is taken; the previous partner was joined (its tid read 0)
            // before this one starts, so nothing else uses the stack; `partner_main` ends with
            // exit_thread.
            unsafe {
                let top = core::ptr::addr_of_mut!(PARTNER_STACK) as u64 + 64 * 1024;
                sys::clone_thread(top, partner_main, &PARTNER_TID).map(|_| ()).map_err(|e| e.1)
            }
        }
        fn join_partner(&mut self) -> Result<(), i64> {
            loop {
                let t = PARTNER_TID.load(Ordering::Acquire);
                if t == 0 {
                    return Ok(());
                }
                sys::futex_wait(&PARTNER_TID, t);
            }
        }
        #[inline(always)]
        fn instructions(&self) -> u64 {
            self.task.as_ref().map_or(0, |t| t.read())
        }
        fn instructions_mask(&self) -> u64 {
            self.task.as_ref().map_or(u64::MAX, |t| t.mask())
        }
        #[inline(always)]
        fn region_begin(&self) -> u64 {
            self.task.as_ref().map_or(0, |t| t.lock())
        }
        #[inline(always)]
        fn region_valid(&self, token: u64) -> bool {
            self.task.as_ref().is_none_or(|t| t.lock() == token)
        }
        fn cpu_instructions(&mut self) -> u64 {
            self.cpu_counter.as_ref().map_or(0, |c| c.read())
        }
        fn variants(&self, _m: Mechanism) -> &'static [&'static str] {
            ONE
        }
        fn default_variant(&self, _m: Mechanism) -> usize {
            0
        }
        fn set_variant(&mut self, _m: Mechanism, _v: usize) -> Result<(), i64> {
            Ok(())
        }
        fn counts(&mut self) -> Counts {
            Counts::default()
        }
        fn say(&mut self, line: core::fmt::Arguments<'_>) {
            say!("{line}");
        }
        fn report(&mut self, r: &abi::report::Record) {
            say!("{r}");
        }
    }

    fn main(args: &Args) -> i32 {
        let mut text = el0bench::Text::<256>::default();
        // The words (or, given none, the environment's `pgtlab_bench_args`: /init passes it both
        // ways) joined by commas, `key=value,...` as `user=mprotect:ARGS` takes them, checked by
        // el0bench with the project's rule (a word that is not UTF-8 stays visible as such).
        let words = args.args().count();
        for (i, a) in args.args().chain(args.env(b"pgtlab_bench_args").filter(|_| words == 0)).enumerate() {
            let _ = core::fmt::Write::write_str(&mut text, if i > 0 { "," } else { "" });
            let _ = core::fmt::Write::write_str(&mut text, core::str::from_utf8(a).unwrap_or("(not UTF-8)"));
        }
        if let Err(e) = sys::prctl(sys::PR_SET_THP_DISABLE, 1) {
            say!("pgtlab-bench: {} failed (errno {}): transparent huge pages stay on", e.0, e.1);
            return 2;
        }
        let task = match TaskCounter::open() {
            Ok(t) => Some(t),
            Err(e) => {
                // QEMU counts instructions only under -icount: without it the PMU has no such
                // event, and the rows have times only (as on the project's kernel).
                say!("pgtlab-bench: no instruction counter ({} failed, errno {}): times only", e.0, e.1);
                None
            }
        };
        let ncpus = sys::sched_getaffinity().map(|m| m.count_ones() as u64).unwrap_or(1);
        let mut os = Linux { ncpus, task, cpu_counter: None };
        el0bench::run(&mut os, text.as_str())
    }
}

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("pgtlab-bench runs on aarch64-unknown-none: the Linux guest runs it (`cargo xtask bench mprotect --peer linux`)");
    std::process::exit(abi::exit::USAGE as i32);
}
