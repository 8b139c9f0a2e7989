//! Processes (an address space and its tasks) and tasks (one thread of control: a kernel stack
//! with its saved context, and an EL0 context in the exception frame at the top of it).

use super::switch::Context;
use crate::mm::user::UserSpace;
use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use kcore::sched::fp::FpHome;
use rt::trap::FpState;
use rt::TrapFrame;
use spin::Mutex;

/// Pages of kernel stack per task (vmalloc, with a guard page after).
pub const KSTACK_PAGES: usize = 8;

/// One running program: an address space and the tasks sharing it.
pub struct Process {
    /// Process id.
    pub pid: u64,
    /// Program name.
    pub name: String,
    /// Its address space.
    pub mm: UserSpace,
    /// Tasks not yet dead.
    pub live: AtomicU64,
    /// Tasks ever started.
    pub started: AtomicU64,
    /// Live tasks, by id (for `wait`).
    pub tasks: Mutex<BTreeMap<u64, Weak<Task>>>,
    /// Exit statuses of dead tasks nobody waited for yet.
    pub zombies: Mutex<BTreeMap<u64, u64>>,
    /// The first task (its status is the process's).
    pub main_tid: AtomicU64,
    /// The process's exit status once its main task ended.
    pub status: AtomicU64,
    /// Tasks a fault ended.
    pub killed: AtomicU64,
}

pub use kcore::sched::State;

/// What a fault handler registration holds.
#[derive(Default)]
pub struct FaultHandler {
    /// EL0 entry (0: none).
    pub entry: u64,
    /// Passed in x3.
    pub cookie: u64,
    /// The interrupted context (registers and FP/SIMD state) while the handler runs.
    pub saved: Option<Box<(TrapFrame, FpState)>>,
}

/// One task.
pub struct Task {
    /// Task id (unique in the system).
    pub tid: u64,
    /// Its process.
    pub process: Arc<Process>,
    /// Its preemption count; SP_EL0 points here while its kernel side runs (`sync`).
    pub thread: crate::arch::sync::ThreadInfo,
    /// The CPU whose queue it belongs to (changes when it migrates).
    cpu: AtomicUsize,
    /// Whether a CPU still runs it or has not finished switching away from it (its context is
    /// not saved yet): no other CPU may pick it then.
    pub on_cpu: AtomicBool,
    /// CPUs it may run on (a bit set; all by default).
    pub affinity: AtomicU64,
    /// Times it moved to another CPU.
    pub migrations: AtomicU64,
    /// Kernel stack: (virtual address, pages).
    pub kstack: (u64, usize),
    /// Saved kernel context while it is not running (only the CPU switching it touches it).
    pub ctx: UnsafeCell<Context>,
    /// Its EL0 FP/SIMD registers' memory copy (`fpsimd`: the truth while no CPU's registers
    /// hold them, see `fp_home`; written only by the CPU that runs it or owns its registers).
    pub fp: UnsafeCell<FpState>,
    /// The CPU whose registers hold its EL0 FP/SIMD state, if any (`kcore::sched::fp`).
    pub fp_home: FpHome,
    state: AtomicU8,
    /// Exit status once dead.
    pub exit_status: AtomicU64,
    /// Tasks blocked in `wait` for this one.
    pub waiters: Mutex<Vec<Arc<Task>>>,
    /// What `wait` returns to this task when it is woken.
    pub wait_result: AtomicU64,
    /// Its fault handler.
    pub fault: Mutex<FaultHandler>,
    /// Counter value to wake at, while sleeping.
    pub wake_at: AtomicU64,
    /// TPIDR_EL0 while switched out.
    pub tpidr_el0: AtomicU64,
    /// Counter ticks it ran.
    pub cputime: AtomicU64,
    /// Counter value when it last started running.
    pub ran_since: AtomicU64,
}

// SAFETY: every field is atomic or locked except `ctx` and `fp`, which only the CPU running or switching
// the task reads and writes, with IRQs masked (the switch path); another CPU takes it over only
// after `on_cpu` was cleared with release ordering, once the context was saved; `fp` also the CPU
// owning its registers, which another CPU reads only after that CPU cleared `fp_home` (release).
unsafe impl Sync for Task {}
// SAFETY: as above; a task moves between CPUs' data structures only as an `Arc`.
unsafe impl Send for Task {}

impl Task {
    /// A task (not yet queued) with the given kernel stack and first context.
    pub fn new(tid: u64, process: Arc<Process>, cpu: usize, kstack: (u64, usize), ctx: Context) -> Task {
        Task {
            thread: crate::arch::sync::ThreadInfo::new(),
            tid,
            process,
            cpu: AtomicUsize::new(cpu),
            on_cpu: AtomicBool::new(false),
            affinity: AtomicU64::new(u64::MAX),
            migrations: AtomicU64::new(0),
            kstack,
            ctx: UnsafeCell::new(ctx),
            fp: UnsafeCell::new(FpState { q: [0; 32], fpsr: 0, fpcr: 0 }),
            fp_home: FpHome::new(),
            state: AtomicU8::new(State::Ready as u8),
            exit_status: AtomicU64::new(0),
            waiters: Mutex::new(Vec::new()),
            wait_result: AtomicU64::new(0),
            fault: Mutex::new(FaultHandler::default()),
            wake_at: AtomicU64::new(0),
            tpidr_el0: AtomicU64::new(0),
            cputime: AtomicU64::new(0),
            ran_since: AtomicU64::new(0),
        }
    }

    /// The CPU whose queue it belongs to.
    pub fn cpu(&self) -> usize {
        self.cpu.load(Ordering::Acquire)
    }

    /// Moves it to `cpu`'s queue from now on (counted when it changes).
    pub fn set_cpu(&self, cpu: usize) {
        if self.cpu.swap(cpu, Ordering::AcqRel) != cpu {
            self.migrations.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Its state.
    pub fn state(&self) -> State {
        State::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Sets its state.
    pub fn set_state(&self, s: State) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// `[bottom, top)` of its kernel stack.
    pub fn stack_bounds(&self) -> (usize, usize) {
        (self.kstack.0 as usize, (self.kstack.0 + self.kstack.1 as u64 * crate::mm::frames::PAGE) as usize)
    }
}

impl kcore::sched::SchedTask for Task {
    fn cpu(&self) -> usize {
        Task::cpu(self)
    }
    fn set_cpu(&self, cpu: usize) {
        Task::set_cpu(self, cpu)
    }
    fn state(&self) -> State {
        Task::state(self)
    }
    fn set_state(&self, s: State) {
        Task::set_state(self, s)
    }
    fn on_cpu(&self) -> bool {
        self.on_cpu.load(Ordering::Acquire)
    }
    fn set_on_cpu(&self, v: bool) {
        self.on_cpu.store(v, Ordering::Release)
    }
    fn affinity(&self) -> u64 {
        self.affinity.load(Ordering::Relaxed)
    }
    fn wake_at(&self) -> u64 {
        self.wake_at.load(Ordering::Relaxed)
    }
    fn regs_on(&self) -> Option<usize> {
        self.fp_home.cpu()
    }
}

impl kcore::sched::fp::FpTask for Task {
    fn fp_home(&self) -> &FpHome {
        &self.fp_home
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // Dropped on another stack (the switch path drops a dead task only after switching
        // away from it).
        if let Err(e) = crate::mm::vfree(self.kstack.0, self.kstack.1) {
            rt::println!("kernel: freeing the kernel stack of task {}: {e}", self.tid);
        }
    }
}
