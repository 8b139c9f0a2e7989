//! The run queues driven by real threads, one per CPU, doing what the kernel's CPUs do (pick,
//! run, yield, block on a wait list, wake, move by affinity, balance, exit) in random order,
//! and a few scenarios step by step. A task is never run by two CPUs at once, never picked
//! unless it is ready, never lost.

use super::*;
use std::sync::atomic::{AtomicU8, AtomicUsize};
use std::sync::Arc;

const NONE: usize = usize::MAX;

struct SimTask {
    id: usize,
    cpu: AtomicUsize,
    state: AtomicU8,
    on_cpu: AtomicBool,
    affinity: AtomicU64,
    wake_at: AtomicU64,
    /// The CPU that runs it now (its context is live there), NONE when saved.
    running_on: AtomicUsize,
}

type H = Arc<SimTask>;

trait Same {
    fn same(&self, o: &Self) -> bool;
}
impl Same for H {
    fn same(&self, o: &Self) -> bool {
        Arc::ptr_eq(self, o)
    }
}

impl SchedTask for SimTask {
    fn cpu(&self) -> usize {
        self.cpu.load(Ordering::Acquire)
    }
    fn set_cpu(&self, c: usize) {
        self.cpu.store(c, Ordering::Release)
    }
    fn state(&self) -> State {
        State::from_u8(self.state.load(Ordering::Acquire))
    }
    fn set_state(&self, s: State) {
        self.state.store(s as u8, Ordering::Release)
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
}

fn task(id: usize, cpu: usize) -> H {
    Arc::new(SimTask {
        id,
        cpu: AtomicUsize::new(cpu),
        state: AtomicU8::new(State::Ready as u8),
        on_cpu: AtomicBool::new(false),
        affinity: AtomicU64::new(u64::MAX),
        wake_at: AtomicU64::new(0),
        running_on: AtomicUsize::new(NONE),
    })
}

struct K(usize);
impl Kick for K {
    fn this_cpu(&self) -> usize {
        self.0
    }
    fn remote(&self, _cpu: usize) {}
    fn local(&self, _cpu: usize) {}
    fn pause(&self) {
        // Now and then a stall long enough for the other threads to act.
        std::thread_local!(static R: core::cell::Cell<u64> = const { core::cell::Cell::new(0x2545_f491_4f6c_dd1d) });
        let r = R.with(|c| {
            let mut x = c.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            c.set(x);
            x
        });
        match r % 16 {
            0 => std::thread::yield_now(),
            1..=4 => (0..r % 256).for_each(|_| core::hint::spin_loop()),
            _ => {}
        }
    }
}

/// Starting `n` on `cpu`: it must not be live anywhere else.
fn start(n: &H, cpu: usize) {
    let was = n.running_on.swap(cpu, Ordering::AcqRel);
    assert_eq!(was, NONE, "task {} started on CPU {cpu} while its context is live on CPU {was}", n.id);
}

/// The switch on `cpu` as the kernel's `schedule` does it; the next context (task or idle)
/// then runs `finish_switch`. Returns what runs on `cpu` now.
fn switch(q: &Queues<SimTask>, cpu: usize) -> Option<H> {
    let k = K(cpu);
    match q.switch_out(cpu, |_| {}, |n| start(n, cpu)) {
        Switch::NoTask => None,
        Switch::Stay => q.current(cpu),
        Switch::To { prev, next } => {
            // The context switch saves prev's registers: no longer live here.
            // SAFETY: `prev` is in this CPU's `prev` slot until `finish_switch` below.
            unsafe { &*prev }.running_on.store(NONE, Ordering::Release);
            q.finish_switch(cpu, &k);
            let now = q.current(cpu);
            assert_eq!(now.as_ref().map(Arc::as_ptr), next, "`next` is the CPU's current task");
            now
        }
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `cpus` CPU threads, `tasks` tasks kept alive (an exited one is replaced), `steps` actions
/// per CPU.
fn run_threads(cpus: usize, tasks: usize, steps: u64, seed: u64) {
    let q: Arc<Queues<SimTask>> = Arc::new(Queues::new());
    for c in 0..cpus {
        q.set_online(c);
    }
    let waiting: Arc<Mutex<Vec<H>>> = Arc::new(Mutex::new(Vec::new()));
    let next_id = Arc::new(AtomicUsize::new(tasks));
    let live = Arc::new(AtomicUsize::new(tasks));
    for i in 0..tasks {
        q.wake(task(i, i % cpus), &K(NONE));
    }
    let threads: Vec<_> = (0..cpus)
        .map(|cpu| {
            let (q, waiting, next_id, live) = (q.clone(), waiting.clone(), next_id.clone(), live.clone());
            std::thread::spawn(move || {
                let k = K(cpu);
                let mut rng = Rng(seed ^ (cpu as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let mut running: Option<H> = None;
                for _ in 0..steps {
                    // A few instructions' worth of delay now and then, so the CPUs' steps
                    // interleave differently.
                    for _ in 0..rng.below(8) {
                        core::hint::spin_loop();
                    }
                    let Some(t) = running.clone() else {
                        // The idle loop.
                        q.finish_switch(cpu, &k);
                        running = q.pick(cpu, |n| start(n, cpu));
                        if running.is_none() {
                            q.balance(cpu, false, &k);
                        }
                        continue;
                    };
                    assert_eq!(t.running_on.load(Ordering::Acquire), cpu, "task {} runs here", t.id);
                    match rng.below(16) {
                        // Yield, or preempted by the tick.
                        0..=3 => {
                            t.set_state(State::Ready);
                            running = switch(&q, cpu);
                        }
                        // Block on the wait list (the waker may come before the switch).
                        4..=6 => {
                            t.set_state(State::Blocked);
                            waiting.lock().push(t.clone());
                            running = switch(&q, cpu);
                        }
                        // Wake a waiter.
                        7..=9 => {
                            let w = {
                                let mut l = waiting.lock();
                                let n = l.len() as u64;
                                (n > 0).then(|| l.swap_remove(rng.below(n) as usize))
                            };
                            if let Some(w) = w {
                                q.wake(w, &k);
                            }
                        }
                        // A new affinity: one CPU (maybe another), or all again.
                        10 | 11 => {
                            let mask = if rng.below(2) == 0 { 1 << rng.below(cpus as u64) } else { u64::MAX };
                            t.affinity.store(mask, Ordering::Relaxed);
                            let allowed = q.allowed(mask);
                            if allowed & (1 << cpu) == 0 {
                                t.set_cpu(q.affinity_target(allowed));
                                t.set_state(State::Ready);
                                running = switch(&q, cpu);
                            }
                        }
                        // The tick's balance.
                        12 | 13 => {
                            q.balance(cpu, true, &k);
                        }
                        // Exit (and a new task starts somewhere).
                        14 => {
                            t.set_state(State::Dead);
                            let n = task(next_id.fetch_add(1, Ordering::Relaxed), rng.below(cpus as u64) as usize);
                            q.wake(n, &k);
                            running = switch(&q, cpu);
                        }
                        _ => {
                            let _ = q.tick(cpu);
                        }
                    }
                }
                // Park: whatever runs is left there.
                let _ = live.load(Ordering::Relaxed);
                running.map(|t| t.id)
            })
        })
        .collect();
    for t in threads {
        if let Err(e) = t.join() {
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn cpus_in_threads_never_run_a_task_twice_or_pick_one_not_ready() {
    let steps = if cfg!(debug_assertions) { 60_000 } else { 400_000 };
    for seed in 1..=4u64 {
        run_threads(4, 10, steps, seed);
    }
    run_threads(8, 20, steps / 2, 99);
}

#[test]
fn a_task_woken_before_its_switch_is_requeued_once() {
    let q: Queues<SimTask> = Queues::new();
    q.set_online(0);
    let (a, b) = (task(0, 0), task(1, 0));
    q.wake(a.clone(), &K(0));
    q.wake(b.clone(), &K(0));
    assert!(q.pick(0, |n| start(n, 0)).is_some_and(|t| t.same(&a)));
    // `a` joins a wait list, is woken by CPU 1 before it switches out: only marked ready.
    a.set_state(State::Blocked);
    q.wake(a.clone(), &K(1));
    assert_eq!(a.state(), State::Ready);
    assert_eq!(q.load(0), Some(2), "b queued, a running; a not queued yet");
    // Its switch requeues it behind b, once.
    let next = switch(&q, 0).unwrap();
    assert!(next.same(&b));
    assert_eq!(q.load(0), Some(2), "b running, a queued once");
    b.set_state(State::Dead);
    assert!(switch(&q, 0).unwrap().same(&a));
    assert!(!q.has_queued(0));
}

/// The race that made a task run twice: CPU 0 requeues a yielding task and switches; before
/// CPU 0 finishes the switch, nothing may move it; after `on_cpu` is clear, CPU 1 pulls it, and
/// CPU 0's late hand-over decision must not queue it again.
#[test]
fn a_task_pulled_right_after_its_switch_is_queued_once() {
    let q: Queues<SimTask> = Queues::new();
    q.set_online(0);
    q.set_online(1);
    let ts: Vec<H> = (0..4).map(|i| task(i, 0)).collect();
    for t in &ts {
        q.wake(t.clone(), &K(0));
    }
    let first = q.pick(0, |n| start(n, 0)).unwrap();
    first.set_state(State::Ready);
    let Switch::To { prev, next } = q.switch_out(0, |_| {}, |n| start(n, 0)) else { panic!("a switch") };
    assert_eq!(next, Some(Arc::as_ptr(&ts[1])));
    // Before CPU 0 finished the switch, CPU 1 may pull another task, never `first`.
    assert!(q.balance(1, false, &K(1)));
    assert!(ts[3].cpu() == 1 && first.cpu() == 0);
    // SAFETY: `prev` is in CPU 0's `prev` slot until its `finish_switch` below.
    unsafe { &*prev }.running_on.store(NONE, Ordering::Release);
    q.finish_switch(0, &K(0));
    // Now it may: `first` is the last task queued on CPU 0.
    assert!(q.balance(1, false, &K(1)));
    assert_eq!(first.cpu(), 1);
    let queued: usize = (0..2).map(|c| q.cpus[c].queue.lock().iter().filter(|t| t.same(&first)).count()).sum();
    assert_eq!(queued, 1);
}

#[test]
fn affinity_hands_a_task_to_its_new_cpu_after_the_switch() {
    let q: Queues<SimTask> = Queues::new();
    for c in 0..3 {
        q.set_online(c);
    }
    let t = task(0, 0);
    q.wake(t.clone(), &K(0));
    q.pick(0, |n| start(n, 0)).unwrap();
    t.affinity.store(0b100, Ordering::Relaxed);
    let allowed = q.allowed(0b100);
    assert_eq!(allowed, 0b100);
    t.set_cpu(q.affinity_target(allowed));
    t.set_state(State::Ready);
    assert!(switch(&q, 0).is_none());
    assert!(!q.has_queued(0) && q.has_queued(2));
    assert!(q.pick(2, |n| start(n, 2)).unwrap().same(&t));
}

#[test]
fn balance_moves_only_from_a_cpu_two_busier_and_respects_affinity() {
    let q: Queues<SimTask> = Queues::new();
    q.set_online(0);
    q.set_online(1);
    let a = task(0, 0);
    q.wake(a.clone(), &K(0));
    assert!(!q.balance(1, false, &K(1)), "load 1 vs 0: stays");
    let b = task(1, 0);
    b.affinity.store(0b01, Ordering::Relaxed);
    q.wake(b.clone(), &K(0));
    // Load 2 vs 0: the last queued one that may run on CPU 1 is `a` (b is bound to CPU 0).
    assert!(q.balance(1, false, &K(1)));
    assert_eq!((a.cpu(), b.cpu()), (1, 0));
}

#[test]
fn the_slice_ends_only_while_others_wait() {
    let q: Queues<SimTask> = Queues::new();
    q.set_online(0);
    let a = task(0, 0);
    q.wake(a.clone(), &K(0));
    q.pick(0, |n| start(n, 0)).unwrap();
    assert!((0..5).all(|_| !q.tick(0)), "alone: never asked to yield");
    q.wake(task(1, 0), &K(0));
    assert!(q.tick(0), "slice used and another waits");
}

#[test]
fn sleepers_wake_when_due() {
    let q: Queues<SimTask> = Queues::new();
    q.set_online(0);
    let (a, b) = (task(0, 0), task(1, 0));
    a.wake_at.store(100, Ordering::Relaxed);
    b.wake_at.store(200, Ordering::Relaxed);
    q.sleep(0, a.clone());
    q.sleep(0, b.clone());
    let (due, next) = q.due(0, 150);
    assert_eq!(due.len(), 1);
    assert!(due[0].same(&a));
    assert_eq!(next, Some(200));
    assert_eq!(b.state(), State::Sleeping);
}

/// Each state's number reads back as that state; anything else is Dead.
#[test]
fn states_read_back_as_stored() {
    for st in [State::Ready, State::Running, State::Sleeping, State::Blocked, State::Dead] {
        assert_eq!(State::from_u8(st as u8), st);
    }
    assert_eq!(State::from_u8(200), State::Dead);
}

/// A CPU index past the table is offline (not a panic); an offline CPU is never a victim of
/// the balance, however long its queue.
#[test]
fn offline_cpus_are_neither_online_nor_pulled_from() {
    let q: Queues<SimTask> = Queues::new();
    assert!(!q.online(MAX_CPUS));
    q.set_online(1);
    for id in 0..3 {
        q.wake(task(id, 0), &K(1));
    }
    assert!(!q.balance(1, false, &K(1)), "CPU 0 is offline: its queue is not pulled from");
    q.set_online(0);
    assert!(q.balance(1, false, &K(1)));
}

/// The least loaded allowed CPU takes a task whose affinity leaves its CPU.
#[test]
fn affinity_target_is_the_least_loaded_allowed_cpu() {
    let q: Queues<SimTask> = Queues::new();
    for c in 0..4 {
        q.set_online(c);
    }
    q.wake(task(0, 2), &K(0));
    assert_eq!(q.affinity_target(0b1100), 3);
    assert_eq!(q.affinity_target(0b0100), 2);
}
