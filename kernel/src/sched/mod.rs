//! The scheduler: EL0 tasks on per-CPU run queues, preemptive, migrating.
//!
//! * **Placement**: a task starts on the CPU `spawn` names or round-robin, and may move
//!   (`preempt`): an idle or lightly loaded CPU pulls queued tasks from the busiest one (on
//!   every tick and in the idle loop), and a task limited to other CPUs by its affinity moves
//!   at once. Each CPU has a run queue, a list of sleepers and an idle loop on its boot stack
//!   ([`cpu_loop`]), which runs queued tasks and otherwise waits for an interrupt.
//! * **Switching** ([`schedule`]) happens only in the kernel, with IRQs masked: when a task
//!   yields, sleeps, waits or ends; when it returns to EL0 after the tick asked for a
//!   reschedule; and when an IRQ ends in a preemptible kernel section (IRQs on, preemption
//!   count 0: see `sync` and `preempt`). The switch saves the callee-saved registers
//!   ([`switch::Context`]); the EL0 context is the exception frame at the top of the task's
//!   kernel stack; the EL0 FP/SIMD registers stay with their owner (`fpsimd`: the resumed
//!   task's EL0 access is set, a task leaving the CPU flushed, one that ended forgotten);
//!   TPIDR_EL0 is saved per task; SP_EL0 points at the running thread's
//!   `sync::ThreadInfo` (its preemption count); TTBR0 changes only when the next task belongs
//!   to another address space (`mm::user::switch_to`). TTBR1 never changes on a switch: with
//!   `percpu_tables=on` each CPU keeps its own root for good.
//! * **Lifetimes**: a CPU keeps the task it switched away from until the next context runs
//!   ([`finish_switch`]): only then is its context saved (`Task::on_cpu` cleared: another CPU
//!   may now pick it), a task bound elsewhere handed to its new CPU, a dead task dropped (its
//!   kernel stack freed), never on its own stack. A process (and its address space) goes when
//!   its last task does.
//! * **Wake-ups** put a task on its CPU's queue and, from another CPU, send that CPU the
//!   reschedule SGI (out of its idle wait). The tick wakes sleepers and marks the running task
//!   for preemption once it has had its time slice while others wait.
//!
//! The queues and every decision on them (who is requeued, picked, handed over, pulled) are
//! `kcore::sched::Queues`, tested on the host with threads playing CPUs; this file keeps the
//! hardware side (the context switch, TTBR0, TPIDR_EL0, SP_EL0, the SGI, the tick) and the
//! processes.
//!
//! Lock order: a CPU's run-queue lock (its queue and `current`), then its sleepers
//! (`kcore::sched`); a task's
//! `waiters` before any of those; a process's `tasks` / `zombies` before any queue. IRQ
//! handlers take queue and sleeper locks, so these are only ever taken with IRQs masked
//! (preemptible sections take none).

mod error;
pub mod fpsimd;
pub mod preempt;
pub mod switch;
pub mod task;

use crate::arch::cpu::this_cpu;
use crate::irq::{self, timer, Sgi};
use crate::mm::user::{self, UserSpace};
use abi::syscall::EXIT_KILLED;
use alloc::collections::BTreeMap;
use alloc::string::ToString;
use alloc::sync::Arc;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub use error::SchedError;
use kcore::options::{Program, SchedOptions};
use kcore::sched::{Queues, Switch};
use rt::TrapFrame;
use spin::Mutex;
use switch::Context;
pub use task::{Process, State, Task};

/// Timer ticks per second (`tick_hz=N`).
pub static TICK_HZ: AtomicU64 = AtomicU64::new(100);
/// Most tasks a process may have alive.
pub const MAX_TASKS: u64 = 64;

/// Every CPU's run queue, sleepers, running task and the task it switched away from.
static QUEUES: Queues<Task> = Queues::new();

/// How the queues tell a CPU to look at its queue: the reschedule SGI, or this CPU's
/// `need_resched`.
struct Kick;

impl kcore::sched::Kick for Kick {
    fn this_cpu(&self) -> usize {
        this_cpu()
    }
    fn remote(&self, cpu: usize) {
        irq::send_sgi(1 << cpu, Sgi::Reschedule);
    }
    fn local(&self, cpu: usize) {
        crate::arch::cpu::set_need_resched(cpu, true);
    }
}

/// One CPU's state beyond its queues.
struct CpuSched {
    /// The process whose address space TTBR0 holds (None: the reserved table).
    mm: Mutex<Option<Arc<Process>>>,
    /// The address of that process (`Arc::as_ptr`, 0: none), written with `mm` and read by
    /// [`use_mm`] without the lock: only this CPU writes either, with IRQs masked.
    mm_ptr: AtomicUsize,
    /// The idle loop's context while a task runs.
    idle: UnsafeCell<Context>,
    /// Whether its loop has set the CPU up (tick, PMU, EL0 access).
    ready: AtomicBool,
}

// SAFETY: `mm` is locked and `ready` atomic; `idle` only its CPU touches (switch path, IRQs
// masked).
unsafe impl Sync for CpuSched {}

static CPUS: [CpuSched; rt::MAX_CPUS] = [const {
    CpuSched {
        mm: Mutex::new(None),
        mm_ptr: AtomicUsize::new(0),
        idle: UnsafeCell::new(Context { x: [0; 12], sp: 0, pad: 0 }),
        ready: AtomicBool::new(false),
    }
}; rt::MAX_CPUS];

static NEXT_TID: AtomicU64 = AtomicU64::new(1);
static NEXT_PID: AtomicU64 = AtomicU64::new(1);
static NEXT_CPU: AtomicUsize = AtomicUsize::new(0);
/// Processes not yet ended.
static LIVE_PROCESSES: AtomicU64 = AtomicU64::new(0);
/// Processes that ended with a status other than 0.
static FAILED_PROCESSES: AtomicU64 = AtomicU64::new(0);
/// Programs of the list `run_programs` was given that it has not started yet.
static UNSTARTED_PROGRAMS: AtomicU64 = AtomicU64::new(0);
/// Context switches, all CPUs.
pub static SWITCHES: AtomicU64 = AtomicU64::new(0);
static SECONDARIES_STARTED: AtomicBool = AtomicBool::new(false);

/// Whether CPU `cpu` runs the scheduler.
pub fn online(cpu: usize) -> bool {
    QUEUES.online(cpu)
}

/// CPUs running the scheduler, as a bit set.
pub fn online_mask() -> u64 {
    QUEUES.online_mask()
}

/// CPUs running the scheduler.
pub fn online_cpus() -> usize {
    online_mask().count_ones() as usize
}

/// The task running on this CPU.
pub fn current() -> Option<Arc<Task>> {
    QUEUES.current(this_cpu())
}

/// Runs `f` with the task running on this CPU, borrowed (no lock, no reference count: its
/// thread info is at SP_EL0, inside the task); `None` on a CPU's idle thread. The task stays
/// alive while it runs, whatever `f` does (a switch away and back included): its CPU's
/// `current` holds it, and `finish_switch` drops a task only on another thread's stack.
#[inline(always)]
pub fn with_running<R>(f: impl FnOnce(&Task) -> R) -> Option<R> {
    let ti = crate::arch::sync::thread() as *const crate::arch::sync::ThreadInfo;
    if crate::arch::sync::is_idle(ti) {
        return None;
    }
    // SAFETY: SP_EL0 holds the running task's `thread`, a field of its `Task` (in its Arc's
    // allocation), which lives at least as long as the task runs (see above); the reference
    // does not outlive `f`.
    let t = unsafe { &*((ti as *const u8).sub(core::mem::offset_of!(Task, thread)) as *const Task) };
    Some(f(t))
}

/// [`with_running`] in an exception taken from EL0, with what its [`enter_from_user`] put
/// into SP_EL0 (not read back): a task runs (an idle thread never runs at EL0), so there is no
/// idle thread to rule out.
#[inline(always)]
pub fn with_running_from_user<R>(entry: UserEntry, f: impl FnOnce(&Task) -> R) -> R {
    let ti = entry.0;
    debug_assert_eq!(ti, crate::arch::sync::thread() as *const _, "SP_EL0 changed since the entry");
    debug_assert!(!crate::arch::sync::is_idle(ti), "an exception from EL0 on an idle thread");
    // SAFETY: as in `with_running`; SP_EL0 holds a task's `thread`, not an idle thread's (the
    // exception came from EL0, where only tasks run).
    let t = unsafe { &*((ti as *const u8).sub(core::mem::offset_of!(Task, thread)) as *const Task) };
    f(t)
}

/// The id of the task running on this CPU, without waiting for a lock (None: no task, or the
/// lock is held): for fault reports.
pub fn try_current_tid() -> Option<u64> {
    QUEUES.try_current(this_cpu()).map(|t| t.tid)
}

/// The kernel stack holding `addr`, if it is the running task's (for backtraces; takes no
/// lock that could be held).
fn stack_lookup(addr: usize) -> Option<(usize, usize)> {
    let (lo, hi) = QUEUES.try_current(this_cpu())?.stack_bounds();
    (lo..hi).contains(&addr).then_some((lo, hi))
}

/// The scheduler's boot words: `tick_hz=N`, and the programs of `user=` (checked against
/// `abi::programs` by the options) must be embedded in this kernel.
pub fn configure(o: &SchedOptions) -> Result<(), SchedError> {
    TICK_HZ.store(o.tick_hz, Ordering::Relaxed);
    for p in &o.programs {
        crate::user_programs::find(p.name)?;
    }
    Ok(())
}

/// Boot CPU, once: backtraces learn task stacks, the tick hook and the preemption point go in.
pub fn init() {
    rt::backtrace::set_stack_lookup(stack_lookup);
    timer::set_hook(on_tick);
    irq::set_handler(Sgi::Reschedule as u32, |_, cpu| crate::arch::cpu::set_need_resched(cpu, true));
    crate::arch::sync::set_preempt_hook(preempt::preempt_schedule);
}

/// Starts process `name` (an embedded program) with argument string `args`.
pub fn start_program(name: &str, args: &str) -> Result<Arc<Process>, SchedError> {
    let elf = crate::user_programs::find(name)?;
    let mm = UserSpace::new().map_err(|errno| SchedError::NoAddressSpace { name: name.to_string(), errno })?;
    let loaded = mm.load(elf).map_err(|err| SchedError::Load { name: name.to_string(), err })?;
    // The argument string on a read-only page, and a stack below the top of user space.
    const ARGS: u64 = 0x7fff_f000_0000;
    const STACK_TOP: u64 = 0x7fff_e000_0000;
    const STACK_SIZE: u64 = 256 * 1024;
    mm.with(|s, t| s.map_bytes(t, ARGS, args.as_bytes(), abi::syscall::prot::READ))
        .map_err(|errno| SchedError::Args { name: name.to_string(), errno })?;
    mm.with(|s, _| s.map_stack(STACK_TOP, STACK_SIZE))
        .map_err(|errno| SchedError::Stack { name: name.to_string(), errno })?;
    let p = Arc::new(Process {
        pid: NEXT_PID.fetch_add(1, Ordering::Relaxed),
        name: name.into(),
        mm,
        live: AtomicU64::new(0),
        started: AtomicU64::new(0),
        tasks: Mutex::new(BTreeMap::new()),
        zombies: Mutex::new(BTreeMap::new()),
        main_tid: AtomicU64::new(0),
        status: AtomicU64::new(0),
        killed: AtomicU64::new(0),
    });
    LIVE_PROCESSES.fetch_add(1, Ordering::AcqRel);
    let t = spawn(&p, loaded.entry, STACK_TOP, [ARGS, args.len() as u64], None).map_err(|errno| {
        LIVE_PROCESSES.fetch_sub(1, Ordering::AcqRel);
        SchedError::FirstTask { name: name.to_string(), errno }
    })?;
    rt::println!("kernel: started {name} (process {}, task {t}, entry {:#x}, args {args:?})", p.pid, loaded.entry);
    Ok(p)
}

/// A new task of `p` at EL0 `entry` with stack `sp` and x0/x1 = `args`, on `cpu` (bound to it:
/// only an affinity change moves it) or, for None, round-robin over the online CPUs (free to
/// migrate). Returns its id.
pub fn spawn(p: &Arc<Process>, entry: u64, sp: u64, args: [u64; 2], cpu: Option<usize>) -> Result<u64, i64> {
    if p.live.load(Ordering::Acquire) >= MAX_TASKS {
        return Err(abi::syscall::errno::ENOMEM);
    }
    let bound = cpu.map(|c| 1u64 << c);
    let cpu = match cpu {
        Some(c) => c,
        None => {
            let n = rt::MAX_CPUS;
            let start = NEXT_CPU.fetch_add(1, Ordering::Relaxed);
            (0..n).map(|k| (start + k) % n).find(|&c| online(c)).unwrap_or(0)
        }
    };
    let va = crate::mm::vmalloc(task::KSTACK_PAGES, false).map_err(|_| abi::syscall::errno::ENOMEM)?;
    let tid = NEXT_TID.fetch_add(1, Ordering::Relaxed);
    let top = va + task::KSTACK_PAGES as u64 * crate::mm::frames::PAGE;
    // The first exception frame, as the EL1 vectors would leave it.
    let frame = top - rt::trap::EL1_FRAME_SIZE as u64;
    // SAFETY: the frame lies in the fresh, mapped, unshared kernel stack; zero is a valid bit
    // pattern for every field of a TrapFrame.
    unsafe {
        core::ptr::write_bytes(frame as *mut u8, 0, rt::trap::EL1_FRAME_SIZE);
        let f = &mut *(frame as *mut TrapFrame);
        f.x[0] = args[0];
        f.x[1] = args[1];
        f.elr = entry;
        // EL0t, DAIF clear: IRQs are taken at EL0.
        f.spsr = 0;
        f.sp_el0 = sp;
    }
    let t = Arc::new(Task::new(tid, p.clone(), cpu, (va, task::KSTACK_PAGES), switch::first_context(frame)));
    // A task started on a named CPU stays there (load balancing leaves it alone) until it
    // changes its affinity.
    if let Some(m) = bound {
        t.affinity.store(m, Ordering::Relaxed);
    }
    p.tasks.lock().insert(tid, Arc::downgrade(&t));
    // The first task is the main one (its status is the process's): recorded before it can run.
    let _ = p.main_tid.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Relaxed);
    p.live.fetch_add(1, Ordering::AcqRel);
    p.started.fetch_add(1, Ordering::Relaxed);
    wake(t);
    Ok(tid)
}

/// Makes `t` runnable on its CPU (and wakes that CPU if it is another; see
/// `kcore::sched::Queues::wake` for a task woken while it still runs).
pub fn wake(t: Arc<Task>) {
    QUEUES.wake(t, &Kick);
}

/// Where a new task's context starts: finish the switch, then enter EL0 through its frame.
pub extern "C" fn task_first_run(frame: u64) -> ! {
    let cpu = this_cpu();
    finish_switch(cpu);
    // Its FP/SIMD state (all zero: FPCR's defaults) is loaded at its first use.
    with_running(|t| fpsimd::resume(cpu, t));
    // SAFETY: `frame` is the task's exception frame at the top of its own kernel stack, set up
    // by `spawn` for an EL0t return to its entry.
    unsafe { rt::trap::return_to_el1_frame(frame as *const TrapFrame) }
}

/// Runs right after every switch, in the context switched to: the task switched away from is
/// off this CPU now (its context saved); `kcore::sched::Queues::finish_switch` lets other CPUs
/// pick it and hands it to its new CPU if it moved; a dead one is dropped here (its stack is no
/// longer in use).
fn finish_switch(cpu: usize) {
    // SAFETY: `cpu` is this CPU, in the context switched to.
    drop(unsafe { QUEUES.finish_switch(cpu, &Kick) });
}

/// Puts the TTBR0 of `p` (None: the reserved table) on this CPU if it is not there yet. The
/// common case, a switch between tasks of one process, is a compare with `mm_ptr` (this CPU's
/// own, IRQs masked): the lock and the reference count change only with the address space.
#[inline(always)]
fn use_mm(cpu: usize, p: Option<&Arc<Process>>) {
    let want = p.map_or(0, |p| Arc::as_ptr(p) as usize);
    if CPUS[cpu].mm_ptr.load(Ordering::Relaxed) != want {
        change_mm(cpu, p, want);
    }
}

/// [`use_mm`] when the address space changes.
#[inline(never)]
fn change_mm(cpu: usize, p: Option<&Arc<Process>>, want: usize) {
    let mut cur = CPUS[cpu].mm.lock();
    user::switch_to(cpu, p.map(|p| &p.mm));
    // The Arc in `mm` keeps the process (and `want`'s address) alive while `mm_ptr` names it.
    *cur = p.cloned();
    CPUS[cpu].mm_ptr.store(want, Ordering::Relaxed);
}

/// Switches the running task out (its state set by the caller: `Ready` when yielding, which
/// requeues it) and the next one in, or the idle loop. Returns when the task runs again.
pub fn schedule() {
    let cpu = this_cpu();
    let now = timer::now();
    let taken = |prev: &Arc<Task>| {
        // Only the CPU running a task (here, IRQs masked) writes its time: no atomic add.
        let t = prev.cputime.load(Ordering::Relaxed) + (now - prev.ran_since.load(Ordering::Relaxed));
        prev.cputime.store(t, Ordering::Relaxed);
        prev.tpidr_el0.store(read_tpidr_el0(), Ordering::Relaxed);
    };
    // SAFETY: `cpu` is this CPU (IRQs masked); the context switched to runs `finish_switch`
    // first.
    let sw = unsafe { QUEUES.switch_out(cpu, taken, |n| start_running_at(cpu, n, now)) };
    if !matches!(sw, Switch::NoTask) {
        crate::arch::cpu::set_need_resched(cpu, false);
    }
    let (save, load, me): (*mut Context, *const Context, *const Task) = match sw {
        Switch::NoTask => return,
        Switch::Stay => {
            if let Some(t) = current() {
                t.ran_since.store(now, Ordering::Relaxed);
            }
            return;
        }
        Switch::To { prev, next } => {
            SWITCHES.fetch_add(1, Ordering::Relaxed);
            crate::percpu::this_cpu_inc(crate::percpu::SWITCHES);
            // SAFETY: `prev` is in this CPU's `prev` slot until the next context runs
            // `finish_switch`, `next` in its `current` (`kcore::sched::Switch`): both alive here.
            let (prev, next) = unsafe { (&*prev, next.map(|n| &*n)) };
            // Its FP/SIMD registers stay here unless it ends or leaves this CPU.
            if prev.state() == State::Dead {
                fpsimd::forget(cpu, prev);
            } else if prev.cpu() != cpu {
                fpsimd::flush(cpu, prev);
            }
            let load = match next {
                Some(n) => n.ctx.get() as *const Context,
                None => {
                    use_mm(cpu, None);
                    set_thread(cpu, crate::arch::sync::idle_thread(cpu));
                    CPUS[cpu].idle.get()
                }
            };
            (prev.ctx.get(), load, prev as *const Task)
        }
    };
    // SAFETY: `save` belongs to the task the queues keep in this CPU's `prev` (alive until the
    // next context has run `finish_switch`), `load` to the task now `current` or this CPU's
    // idle loop, all on this CPU with IRQs masked; no Arc is held on this stack across the
    // switch.
    unsafe { switch::switch(save, load) };
    // Back, maybe on another CPU (the task may have migrated meanwhile).
    let cpu = this_cpu();
    finish_switch(cpu);
    // SAFETY: this task runs again (it is alive while it runs).
    fpsimd::resume(cpu, unsafe { &*me });
}

/// The thread info SP_EL0 holds from now on on this CPU (`cpu`), and where the EL0 entry finds
/// it.
fn set_thread(cpu: usize, ti: &crate::arch::sync::ThreadInfo) {
    crate::percpu::static_area(cpu).thread.store(ti as *const _ as usize, Ordering::Relaxed);
    crate::arch::sync::set_thread(ti);
}

/// On entry from EL0 (SP_EL0 held the user's stack pointer, now saved in the frame): SP_EL0
/// to the running task's thread info, which it returns (for [`with_running_from_user`]).
#[inline(always)]
pub fn enter_from_user() -> UserEntry {
    enter_from_user_on(crate::percpu::this_area())
}

/// [`enter_from_user`] on the CPU whose static area is `area` (the caller's).
#[inline(always)]
pub fn enter_from_user_on(area: &crate::percpu::StaticArea) -> UserEntry {
    let ti = area.thread.load(Ordering::Relaxed) as *const crate::arch::sync::ThreadInfo;
    crate::arch::sync::set_thread(ti);
    UserEntry(ti)
}

/// The thread info [`enter_from_user`] put into SP_EL0: a task's (an exception from EL0).
#[derive(Clone, Copy)]
pub struct UserEntry(*const crate::arch::sync::ThreadInfo);

/// Bookkeeping for `n` going on this CPU (the queues set its state and `on_cpu`): TTBR0,
/// TPIDR_EL0, SP_EL0, time.
fn start_running(cpu: usize, n: &Arc<Task>) {
    start_running_at(cpu, n, timer::now());
}

/// [`start_running`] with the time read already (`now`).
#[inline(always)]
fn start_running_at(cpu: usize, n: &Arc<Task>, now: u64) {
    set_thread(cpu, &n.thread);
    use_mm(cpu, Some(&n.process));
    write_tpidr_el0(n.tpidr_el0.load(Ordering::Relaxed));
    n.ran_since.store(now, Ordering::Relaxed);
}

fn read_tpidr_el0() -> u64 {
    use aarch64_cpu::registers::{Readable, TPIDR_EL0};
    TPIDR_EL0.get()
}

fn write_tpidr_el0(v: u64) {
    use aarch64_cpu::registers::{Writeable, TPIDR_EL0};
    TPIDR_EL0.set(v);
}

/// The tick (IRQ context): wake due sleepers, and ask the running task to make way once its
/// slice is used up while others wait, or when this CPU pulled a task.
fn on_tick(cpu: usize, now: u64) {
    wake_sleepers(cpu, now);
    crate::percpu::check_window_on_tick(cpu);
    if QUEUES.tick(cpu) {
        crate::arch::cpu::set_need_resched(cpu, true);
    }
    if preempt::balance(cpu, QUEUES.running(cpu)) {
        crate::arch::cpu::set_need_resched(cpu, true);
    }
}

fn wake_sleepers(cpu: usize, now: u64) {
    let (due, next) = QUEUES.due(cpu, now);
    if let Some(next) = next {
        timer::set_wakeup(cpu, next);
    }
    for t in due {
        wake(t);
    }
}

/// The end of an exception from EL0: the preemption point. (This CPU's flag, read afresh: a
/// system call may have switched and come back on another CPU.)
#[inline(always)]
pub fn return_to_user() {
    return_to_user_on(crate::percpu::this_area());
}

/// [`return_to_user`] through `area`, this CPU's static area as the caller read it at entry
/// (valid only if nothing since could have switched tasks or CPUs: IRQs masked, no schedule).
#[inline(always)]
pub fn return_to_user_on(area: &crate::percpu::StaticArea) {
    if area.need_resched.load(Ordering::Relaxed) != 0 {
        resched_before_user();
    }
}

#[inline(never)]
fn resched_before_user() {
    if crate::arch::cpu::take_need_resched(this_cpu()) {
        if let Some(t) = current() {
            t.set_state(State::Ready);
            drop(t);
            schedule();
        }
    }
}

/// `yield`. The running task is borrowed ([`with_running`]: no lock, no reference count); on
/// the idle thread nothing happens.
pub fn yield_now() {
    if with_running(|t| t.set_state(State::Ready)).is_some() {
        schedule();
    }
}

/// `sleep(ns)`.
pub fn sleep(ns: u64) {
    let cpu = this_cpu();
    let Some(t) = current() else {
        return;
    };
    let at = timer::now().saturating_add(timer::ns_to_ticks(ns));
    t.wake_at.store(at, Ordering::Relaxed);
    QUEUES.sleep(cpu, t);
    timer::set_wakeup(cpu, at);
    schedule();
}

/// `wait(tid)`: the exit status of task `tid` of the caller's process.
pub fn wait(tid: u64) -> Result<u64, i64> {
    use abi::syscall::errno;
    let me = current().ok_or(errno::ESRCH)?;
    if tid == me.tid {
        return Err(errno::EINVAL);
    }
    let p = me.process.clone();
    if let Some(s) = p.zombies.lock().remove(&tid) {
        return Ok(s);
    }
    let target = p.tasks.lock().get(&tid).and_then(|w| w.upgrade());
    let Some(target) = target else {
        // Dead in between: it is a zombie now, or it never was ours.
        return p.zombies.lock().remove(&tid).ok_or(errno::ESRCH);
    };
    {
        let mut w = target.waiters.lock();
        if target.state() == State::Dead {
            drop(w);
            return p.zombies.lock().remove(&tid).ok_or(errno::ESRCH);
        }
        me.set_state(State::Blocked);
        w.push(me.clone());
    }
    drop(target);
    drop(me);
    schedule();
    let r = p.zombies.lock().remove(&tid).ok_or(errno::ESRCH);
    r
}

/// Ends the running task with `status` (never returns): wakes its waiters, records its status,
/// ends the process with its last task.
pub fn exit_current(status: u64) -> ! {
    let t = current().expect("a running task exits");
    let p = t.process.clone();
    t.exit_status.store(status, Ordering::Relaxed);
    if status == EXIT_KILLED {
        p.killed.fetch_add(1, Ordering::Relaxed);
    }
    // The status first, then out of the live set: a concurrent `wait` finds the task in one
    // or the other, never in neither.
    p.zombies.lock().insert(t.tid, status);
    p.tasks.lock().remove(&t.tid);
    if t.tid == p.main_tid.load(Ordering::Relaxed) {
        p.status.store(status, Ordering::Relaxed);
    }
    let waiters = {
        let mut w = t.waiters.lock();
        t.set_state(State::Dead);
        core::mem::take(&mut *w)
    };
    for w in waiters {
        w.wait_result.store(status, Ordering::Release);
        wake(w);
    }
    if p.live.fetch_sub(1, Ordering::AcqRel) == 1 {
        process_ended(&p);
    }
    drop(p);
    drop(t);
    schedule();
    unreachable!("a dead task ran again")
}

fn process_ended(p: &Process) {
    let status = p.status.load(Ordering::Relaxed);
    let mut r = abi::report::Record::new("process_exit");
    r.u64("pid", p.pid)
        .str("name", &p.name)
        .u64("status", status)
        .u64("tasks", p.started.load(Ordering::Relaxed))
        .u64("killed", p.killed.load(Ordering::Relaxed));
    rt::println!("kernel: process {} ({}) exited with status {status}", p.pid, p.name);
    rt::println!("{r}");
    if status != 0 {
        FAILED_PROCESSES.fetch_add(1, Ordering::Relaxed);
    }
    if LIVE_PROCESSES.fetch_sub(1, Ordering::AcqRel) == 1 {
        irq::send_sgi(1, Sgi::Reschedule);
    }
}

/// The scheduler loop of CPU `cpu` on its boot stack: runs queued tasks, wakes sleepers,
/// waits for interrupts. On CPU 0 it returns once every process has ended; elsewhere never.
pub fn cpu_loop(cpu: usize) {
    QUEUES.set_online(cpu);
    if !CPUS[cpu].ready.swap(true, Ordering::AcqRel) {
        user::init_cpu();
        crate::perf::claim_el0_instructions();
        timer::start(cpu, TICK_HZ.load(Ordering::Relaxed));
    }
    loop {
        finish_switch(cpu);
        wake_sleepers(cpu, timer::now());
        if cpu == 0 && LIVE_PROCESSES.load(Ordering::Acquire) == 0 {
            return;
        }
        match QUEUES.pick(cpu, |n| start_running(cpu, n)) {
            Some(n) => {
                crate::arch::cpu::set_need_resched(cpu, false);
                SWITCHES.fetch_add(1, Ordering::Relaxed);
                let load = n.ctx.get() as *const Context;
                drop(n);
                // SAFETY: the idle context is this CPU's own; `load` is the picked task's
                // saved (or first) context, kept alive by the queues' `current`.
                unsafe { switch::switch(CPUS[cpu].idle.get(), load) };
            }
            None => {
                if !preempt::balance(cpu, false) {
                    irq::wait_for_interrupt();
                }
            }
        }
    }
}

/// Secondary CPUs enter their scheduler loop for good.
fn secondary_scheduler(cpu: usize) -> ! {
    cpu_loop(cpu);
    unreachable!("only CPU 0 leaves its scheduler loop")
}

/// Programs of the current list not ended yet, counting those not started yet
/// (`sysctl::PROGRAMS_LEFT`).
pub fn programs_left() -> u64 {
    UNSTARTED_PROGRAMS.load(Ordering::Acquire) + LIVE_PROCESSES.load(Ordering::Acquire)
}

/// Runs the programs `(name, args)` to completion on every online CPU; returns how many
/// processes ended with a status other than 0.
pub fn run_programs(programs: &[Program]) -> Result<u64, SchedError> {
    if !SECONDARIES_STARTED.swap(true, Ordering::AcqRel) {
        let cpus = crate::work::hand_over(secondary_scheduler);
        for cpu in (0..rt::MAX_CPUS).filter(|c| cpus & (1 << c) != 0) {
            QUEUES.set_online(cpu);
        }
    }
    QUEUES.set_online(0);
    let failed0 = FAILED_PROCESSES.load(Ordering::Relaxed);
    UNSTARTED_PROGRAMS.store(programs.len() as u64, Ordering::Release);
    for p in programs {
        let started = start_program(p.name, &p.args);
        // After the start: a reader between the two counts sees one program too many, never
        // one too few (`programs_left`).
        UNSTARTED_PROGRAMS.fetch_sub(1, Ordering::AcqRel);
        if let Err(e) = started {
            UNSTARTED_PROGRAMS.store(0, Ordering::Release);
            return Err(e);
        }
    }
    cpu_loop(0);
    Ok(FAILED_PROCESSES.load(Ordering::Relaxed) - failed0)
}

/// Kills the running task after a fault it may not survive (the report is the caller's).
pub fn kill_current() -> ! {
    exit_current(EXIT_KILLED)
}
