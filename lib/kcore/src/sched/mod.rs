//! Which task runs where: the run queues of the kernel's scheduler and every decision on them
//! (wake-up, the switch, the hand-over after it, load balancing, affinity, the time slice,
//! sleepers), generic over the task handle (`Arc<Task>` in the kernel) and the way a CPU is
//! told to look at its queue. The kernel keeps the hardware side: the context switch, TTBR0,
//! the reschedule SGI, the tick.
//!
//! # The protocol
//!
//! * A CPU's `current` names the task it runs; `prev` the one it switched away from until the
//!   next context ran [`Queues::finish_switch`]. A task's `on_cpu` is set while a CPU runs it
//!   or has not finished switching away from it (its context is not saved): no other CPU may
//!   pick it then.
//! * [`Queues::wake`] marks a task ready; if it still runs (it joined a wait list and has not
//!   switched out yet) that is all (its own switch requeues it), else it goes on its CPU's queue.
//! * [`Queues::switch_out`] (the switch, under the CPU's one lock) requeues the task it takes
//!   off if it is ready and still this CPU's, picks the next one, names it `current`, and leaves
//!   the old one in `prev` (this CPU's own slot, no lock).
//! * [`Queues::finish_switch`] (in the context switched to) clears `on_cpu` of `prev` and hands
//!   it to its new CPU if it moved (a new affinity). That decision is read **before** `on_cpu`
//!   is cleared: afterwards [`Queues::balance`] on another CPU may pull a task this CPU
//!   requeued and change its CPU, and a decision read then would queue it twice.
//! * [`Queues::balance`] pulls one queued task that is not `on_cpu`, may run on the puller and
//!   has no state left in another CPU's registers ([`SchedTask::regs_on`], the lazy FP/SIMD
//!   switch of [`fp`]).
//!
//! Locks: one per CPU over its queue and `current` (a yield takes it once), and its sleepers'
//! (taken after it, never inside). CPU locks are never nested (a pull takes the victim's, lets
//! go, then takes its own). The kernel takes all of these with IRQs masked.

use abi::MAX_CPUS;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
/// The queues' lock: a spin lock (the kernel takes it with IRQs masked); in host tests, where
/// more threads than cores play CPUs, one that yields its core while it waits.
#[cfg(not(test))]
type Mutex<T> = spin::Mutex<T>;
#[cfg(test)]
type Mutex<T> = spin::mutex::Mutex<T, spin::relax::Yield>;

pub mod fp;
#[cfg(test)]
mod tests;

/// Ticks a task runs before another ready task of its CPU gets its turn.
pub const TIMESLICE_TICKS: u64 = 2;

/// A task's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// In its CPU's run queue.
    Ready = 0,
    /// On its CPU.
    Running = 1,
    /// Waiting for its wake-up time.
    Sleeping = 2,
    /// Waiting for another task to end.
    Blocked = 3,
    /// Ended.
    Dead = 4,
}

impl State {
    /// The state stored as `v` (see [`State`]'s discriminants; anything else is `Dead`).
    pub fn from_u8(v: u8) -> State {
        match v {
            0 => State::Ready,
            1 => State::Running,
            2 => State::Sleeping,
            3 => State::Blocked,
            _ => State::Dead,
        }
    }
}

/// What the queues need of a task (they hold it as an `Arc`).
pub trait SchedTask {
    /// The CPU whose queue it belongs to.
    fn cpu(&self) -> usize;
    /// Moves it to `cpu`'s queue from now on.
    fn set_cpu(&self, cpu: usize);
    /// Its state.
    fn state(&self) -> State;
    /// Sets its state.
    fn set_state(&self, s: State);
    /// Whether a CPU runs it or has not finished switching away from it.
    fn on_cpu(&self) -> bool;
    /// Sets `on_cpu` (cleared with release ordering: its context is saved before).
    fn set_on_cpu(&self, v: bool);
    /// CPUs it may run on (a bit set).
    fn affinity(&self) -> u64;
    /// Counter value to wake at, while sleeping.
    fn wake_at(&self) -> u64;
    /// The CPU whose registers still hold part of its state (its lazily switched FP/SIMD
    /// registers, [`fp`]): no other CPU may pull it until that CPU saved them.
    fn regs_on(&self) -> Option<usize> {
        None
    }
}

/// How a CPU is told to look at its queue.
pub trait Kick {
    /// The calling CPU.
    fn this_cpu(&self) -> usize;
    /// CPU `cpu` (not the caller) must look at its queue: the reschedule SGI.
    fn remote(&self, cpu: usize);
    /// This CPU (`cpu`) must switch at its next preemption point: its `need_resched`.
    fn local(&self, cpu: usize);
    /// A point between two steps where, on real hardware, this CPU may stall for a while
    /// (a vCPU descheduled by its host) while the others go on: nothing in the kernel, a
    /// random delay in the host tests, so their threads interleave at the steps that matter.
    fn pause(&self) {}
}

/// What one CPU's lock covers: its queue and the task it runs.
struct Rq<T> {
    queue: VecDeque<Arc<T>>,
    current: Option<Arc<T>>,
}

/// The task a CPU switched away from, until the next context runs [`Queues::finish_switch`].
enum Prev<T> {
    None,
    /// Not requeued here (it blocks, sleeps, ends, or moves to another CPU): held here.
    Held(Arc<T>),
    /// Requeued on this CPU: its queue holds it, and nothing takes it from there before
    /// `finish_switch` (no other CPU pulls a task that is `on_cpu`; only this CPU picks).
    Queued(*const T),
}

/// One CPU's queues.
pub struct RunQueue<T> {
    /// The queue and `current`, under one lock (a yield takes it once).
    rq: Mutex<Rq<T>>,
    sleepers: Mutex<Vec<Arc<T>>>,
    /// Only this CPU touches it, in its switch and in the context switched to (IRQs masked):
    /// no lock (see [`Queues::switch_out`]'s safety rule).
    prev: UnsafeCell<Prev<T>>,
    /// Ticks the current task has run since it was last picked.
    slice: AtomicU64,
    /// Whether this CPU runs (or is about to run) its scheduler loop.
    online: AtomicBool,
}

// SAFETY: `rq` and `sleepers` are locked, `slice` and `online` atomic; `prev` is touched only
// by its own CPU (the callers' promise on `switch_out` / `finish_switch`), and the tasks in it
// are `Send + Sync` as the bounds say.
unsafe impl<T: Send + Sync> Sync for RunQueue<T> {}
// SAFETY: as above: the `prev` address is only ever used by the CPU that put it there.
unsafe impl<T: Send + Sync> Send for RunQueue<T> {}

/// What [`Queues::switch_out`] did.
pub enum Switch<T> {
    /// No task ran here.
    NoTask,
    /// The task keeps running (it was ready and is the next in line).
    Stay,
    /// The task is off `current` (kept in `prev`); `next` runs now, or the idle loop if None.
    /// Both by address, not by reference count (the switch is on every yield: no atomic
    /// add and subtract for each): the CPU's `prev` holds the task switched away from until
    /// [`Queues::finish_switch`] takes it, its `current` the task switched to until its next
    /// switch; only the CPU that switched may use them, and only until then.
    To {
        /// The task switched away from (in `prev` until `finish_switch`).
        prev: *const T,
        /// The task switched to (in `current`).
        next: Option<*const T>,
    },
}

/// Every CPU's queues.
pub struct Queues<T> {
    cpus: [RunQueue<T>; MAX_CPUS],
}

impl<T> Default for Queues<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Queues<T> {
    /// Empty queues, every CPU offline.
    pub const fn new() -> Self {
        Queues {
            cpus: [const {
                RunQueue {
                    rq: Mutex::new(Rq { queue: VecDeque::new(), current: None }),
                    sleepers: Mutex::new(Vec::new()),
                    prev: UnsafeCell::new(Prev::None),
                    slice: AtomicU64::new(0),
                    online: AtomicBool::new(false),
                }
            }; MAX_CPUS],
        }
    }
}

impl<T: SchedTask> Queues<T> {
    /// Whether CPU `cpu` runs the scheduler.
    pub fn online(&self, cpu: usize) -> bool {
        cpu < MAX_CPUS && self.cpus[cpu].online.load(Ordering::Acquire)
    }

    /// Marks CPU `cpu` as running the scheduler.
    pub fn set_online(&self, cpu: usize) {
        self.cpus[cpu].online.store(true, Ordering::Release);
    }

    /// CPUs running the scheduler, as a bit set.
    pub fn online_mask(&self) -> u64 {
        (0..MAX_CPUS).filter(|&c| self.online(c)).fold(0, |m, c| m | 1 << c)
    }

    /// The task CPU `cpu` runs.
    pub fn current(&self, cpu: usize) -> Option<Arc<T>> {
        self.cpus[cpu].rq.lock().current.clone()
    }

    /// [`Queues::current`] without waiting (None when its lock is held), for backtraces.
    pub fn try_current(&self, cpu: usize) -> Option<Arc<T>> {
        self.cpus.get(cpu)?.rq.try_lock()?.current.clone()
    }

    /// Makes `t` runnable on its CPU (and tells that CPU). A task that still runs (between
    /// joining a wait list or the sleepers and its own switch) is only marked ready: its
    /// switch keeps it. Queuing it as well would queue it twice. `switch_out` takes a task off
    /// `current` under the same lock, so the two cannot both miss or both queue it.
    pub fn wake(&self, t: Arc<T>, k: &impl Kick) {
        let cpu = t.cpu();
        {
            let mut rq = self.cpus[cpu].rq.lock();
            t.set_state(State::Ready);
            if rq.current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &t)) {
                return;
            }
            rq.queue.push_back(t);
        }
        Self::tell(cpu, k);
    }

    fn tell(cpu: usize, k: &impl Kick) {
        if cpu != k.this_cpu() {
            k.remote(cpu);
        } else {
            k.local(cpu);
        }
    }

    /// Puts a ready task on its CPU's queue and tells that CPU.
    pub fn enqueue(&self, t: Arc<T>, k: &impl Kick) {
        let cpu = t.cpu();
        self.cpus[cpu].rq.lock().queue.push_back(t);
        Self::tell(cpu, k);
    }

    /// The switch on CPU `cpu` (the running task's state set by the caller: `Ready` when it
    /// yields or is preempted). Under the CPU's lock, once: the running task is taken off, put
    /// back on the queue if it is ready and still this CPU's (one moving elsewhere goes there
    /// in [`Queues::finish_switch`]), the next one picked; `taken(prev)` runs on the one taken
    /// off, `start(next)` before `current` names the next one.
    ///
    /// # Safety
    ///
    /// Called on CPU `cpu` itself, which then runs [`Queues::finish_switch`] in the context it
    /// switches to before it switches again (its `prev` slot has no lock).
    #[inline(always)]
    pub unsafe fn switch_out(&self, cpu: usize, taken: impl FnOnce(&Arc<T>), start: impl FnOnce(&Arc<T>)) -> Switch<T> {
        let c = &self.cpus[cpu];
        let mut rq = c.rq.lock();
        let Some(prev) = rq.current.take() else {
            return Switch::NoTask;
        };
        taken(&prev);
        let prev_at = Arc::as_ptr(&prev);
        let slot = if prev.state() == State::Ready && prev.cpu() == cpu {
            rq.queue.push_back(prev);
            Prev::Queued(prev_at)
        } else {
            Prev::Held(prev)
        };
        let next = rq.queue.pop_front();
        c.slice.store(0, Ordering::Relaxed);
        match next {
            Some(n) if Arc::as_ptr(&n) == prev_at => {
                debug_assert_eq!(n.state(), State::Ready, "a task found itself queued while it was not ready");
                n.set_state(State::Running);
                rq.current = Some(n);
                Switch::Stay
            }
            next => {
                // SAFETY: only this CPU touches its `prev` (the caller's promise); the last
                // `finish_switch` emptied it (so nothing is dropped by overwriting it).
                unsafe {
                    debug_assert!(matches!(*c.prev.get(), Prev::None), "a switch before the last one finished");
                    core::ptr::write(c.prev.get(), slot)
                };
                let next_at = next.as_ref().map(Arc::as_ptr);
                if let Some(n) = next {
                    debug_assert_eq!(n.state(), State::Ready, "a queued task was not ready");
                    n.set_on_cpu(true);
                    start(&n);
                    n.set_state(State::Running);
                    rq.current = Some(n);
                }
                Switch::To { prev: prev_at, next: next_at }
            }
        }
    }

    /// The idle loop of CPU `cpu` picks its next task, if any: `start(next)` runs before
    /// `current` names it.
    pub fn pick(&self, cpu: usize, start: impl FnOnce(&Arc<T>)) -> Option<Arc<T>> {
        let c = &self.cpus[cpu];
        let mut rq = c.rq.lock();
        let n = rq.queue.pop_front()?;
        c.slice.store(0, Ordering::Relaxed);
        debug_assert_eq!(n.state(), State::Ready, "a queued task was not ready");
        n.set_on_cpu(true);
        start(&n);
        n.set_state(State::Running);
        rq.current = Some(n.clone());
        Some(n)
    }

    /// Right after every switch, in the context switched to on CPU `cpu`: the task switched
    /// away from is off this CPU now (its context saved), so other CPUs may pick it; one that
    /// is to run elsewhere (a new affinity) goes to its new CPU's queue. Returns it when this
    /// CPU held it (the caller drops a dead one, whose stack is no longer in use); a task this
    /// CPU requeued stays in its queue.
    ///
    /// # Safety
    ///
    /// Called on CPU `cpu` itself (as [`Queues::switch_out`]).
    #[inline(always)]
    pub unsafe fn finish_switch(&self, cpu: usize, k: &impl Kick) -> Option<Arc<T>> {
        // SAFETY: only this CPU touches its `prev` (the caller's promise).
        let slot = unsafe { core::mem::replace(&mut *self.cpus[cpu].prev.get(), Prev::None) };
        match slot {
            Prev::None => None,
            Prev::Queued(p) => {
                // SAFETY: the queue holds it and nothing takes it out before `on_cpu` is
                // cleared here (see `Prev::Queued`); not touched after.
                unsafe { &*p }.set_on_cpu(false);
                None
            }
            Prev::Held(p) => {
                k.pause();
                // Decided before `on_cpu` is cleared (see the module doc).
                let hand_over = p.state() == State::Ready && p.cpu() != cpu;
                p.set_on_cpu(false);
                k.pause();
                if hand_over {
                    self.enqueue(p.clone(), k);
                }
                Some(p)
            }
        }
    }

    /// The load of CPU `cpu`: queued tasks plus the running one. Reads without waiting (None:
    /// a busy queue lock; a busy `current` lock counts as running).
    pub fn load(&self, cpu: usize) -> Option<usize> {
        let rq = self.cpus[cpu].rq.try_lock()?;
        Some(rq.queue.len() + rq.current.is_some() as usize)
    }

    /// Whether CPU `cpu` has tasks queued.
    pub fn has_queued(&self, cpu: usize) -> bool {
        !self.cpus[cpu].rq.lock().queue.is_empty()
    }

    /// CPU `cpu` pulls one task from the busiest CPU if that is at least two tasks busier
    /// (`running`: whether `cpu` runs a task now): the last queued one that is not `on_cpu`
    /// and may run here. Returns whether it pulled one.
    pub fn balance(&self, cpu: usize, running: bool, k: &impl Kick) -> bool {
        let mine = match self.cpus[cpu].rq.try_lock() {
            Some(rq) => rq.queue.len() + running as usize,
            None => return false,
        };
        let mut busiest = None;
        for other in (0..MAX_CPUS).filter(|&o| o != cpu && self.online(o)) {
            if let Some(l) = self.load(other) {
                if l >= mine + 2 && busiest.is_none_or(|(_, bl)| l > bl) {
                    busiest = Some((other, l));
                }
            }
        }
        let Some((from, _)) = busiest else {
            return false;
        };
        let task = {
            let mut rq = self.cpus[from].rq.lock();
            let q = &mut rq.queue;
            let pick = q
                .iter()
                .rposition(|t| !t.on_cpu() && t.affinity() & (1 << cpu) != 0 && t.regs_on().is_none_or(|c| c == cpu));
            pick.and_then(|i| q.remove(i))
        };
        let Some(t) = task else {
            return false;
        };
        k.pause();
        t.set_cpu(cpu);
        self.cpus[cpu].rq.lock().queue.push_back(t);
        true
    }

    /// The online CPUs of `mask`, as a bit set (0: none).
    pub fn allowed(&self, mask: u64) -> u64 {
        mask & self.online_mask()
    }

    /// Where a task limited to `allowed` (non-empty) goes when its CPU is not among them: the
    /// least loaded allowed CPU.
    pub fn affinity_target(&self, allowed: u64) -> usize {
        (0..MAX_CPUS)
            .filter(|&c| allowed & (1 << c) != 0)
            .min_by_key(|&c| self.load(c).unwrap_or(usize::MAX))
            .unwrap_or(allowed.trailing_zeros() as usize)
    }

    /// A tick on CPU `cpu`: whether the running task (if `running`) has used its slice while
    /// others wait. Takes no lock that can be held when the tick comes (`try_lock`).
    pub fn tick(&self, cpu: usize) -> bool {
        let c = &self.cpus[cpu];
        let Some(rq) = c.rq.try_lock() else {
            return false;
        };
        if rq.current.is_none() {
            return false;
        }
        let used = c.slice.fetch_add(1, Ordering::Relaxed) + 1;
        used >= TIMESLICE_TICKS && !rq.queue.is_empty()
    }

    /// Whether CPU `cpu` runs a task now (without waiting: a held lock counts as no).
    pub fn running(&self, cpu: usize) -> bool {
        self.cpus[cpu].rq.try_lock().is_some_and(|rq| rq.current.is_some())
    }

    /// `t` (running on CPU `cpu`) sleeps until its `wake_at`: on the sleepers (its caller then
    /// switches).
    pub fn sleep(&self, cpu: usize, t: Arc<T>) {
        t.set_state(State::Sleeping);
        self.cpus[cpu].sleepers.lock().push(t);
    }

    /// The sleepers of CPU `cpu` due at `now` (taken off), and the earliest wake-up left.
    pub fn due(&self, cpu: usize, now: u64) -> (Vec<Arc<T>>, Option<u64>) {
        let mut s = self.cpus[cpu].sleepers.lock();
        let (due, keep): (Vec<_>, Vec<_>) = s.drain(..).partition(|t| t.wake_at() <= now);
        *s = keep;
        let next = s.iter().map(|t| t.wake_at()).min();
        (due, next)
    }
}
