//! The run queues driven by real threads, one per CPU, doing what the kernel's CPUs do (pick,
//! run, yield, block on a wait list, wake, move by affinity, balance, exit, use FP/SIMD at EL0
//! and in the kernel) in random order, and a few scenarios step by step. A task is never run by
//! two CPUs at once, never picked unless it is ready, never lost, and never sees FP/SIMD
//! values but its own (the lazy switch of `fp`, with simulated registers).

use super::fp::{FpHome, FpOwners, FpRegs, FpTask};
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
    /// Where its FP/SIMD state lives.
    home: FpHome,
    /// Its FP/SIMD state's memory copy.
    fp_mem: Mutex<Fp>,
    /// What its EL0 code last wrote to the registers (only the CPU running it touches it).
    fp_expect: Mutex<Fp>,
    /// Ended: nothing may save into it any more.
    dead: AtomicBool,
}

/// Four values standing for q0-q31, FPSR and FPCR.
type Fp = [u64; 4];

/// A task's first FP/SIMD state: its own values (so a task seeing another's is caught from the
/// start).
fn first_fp(id: usize) -> Fp {
    core::array::from_fn(|i| ((id as u64) << 32) | i as u64)
}

impl FpTask for SimTask {
    fn fp_home(&self) -> &FpHome {
        &self.home
    }
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
    fn regs_on(&self) -> Option<usize> {
        self.home.cpu()
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
        home: FpHome::new(),
        fp_mem: Mutex::new(first_fp(id)),
        fp_expect: Mutex::new(first_fp(id)),
        dead: AtomicBool::new(false),
    })
}

/// One simulated CPU's FP/SIMD registers and EL0 access (only its thread uses them).
struct SimRegs {
    regs: Mutex<Fp>,
    on: AtomicBool,
    /// Saves and loads done (the cost the lazy switch spares).
    moves: AtomicUsize,
}

/// Every CPU's registers and the owners.
struct Fpu {
    cpus: Vec<SimRegs>,
    owners: FpOwners<SimTask>,
}

/// CPU `cpu`'s FP hardware.
struct Hw<'a>(&'a SimRegs);

impl FpRegs<SimTask> for Hw<'_> {
    fn save(&self, t: &SimTask) {
        assert!(!t.dead.load(Ordering::Acquire), "saved FP/SIMD state into task {}, which ended", t.id);
        *t.fp_mem.lock() = *self.0.regs.lock();
        self.0.moves.fetch_add(1, Ordering::Relaxed);
    }
    fn load(&self, t: &SimTask) {
        *self.0.regs.lock() = *t.fp_mem.lock();
        self.0.moves.fetch_add(1, Ordering::Relaxed);
    }
    fn el0_access(&self, on: bool) {
        self.0.on.store(on, Ordering::Relaxed);
    }
}

impl Fpu {
    fn new(cpus: usize) -> Fpu {
        Fpu {
            cpus: (0..cpus)
                .map(|_| SimRegs {
                    regs: Mutex::new([0xbad; 4]),
                    on: AtomicBool::new(true),
                    moves: AtomicUsize::new(0),
                })
                .collect(),
            owners: FpOwners::new(),
        }
    }

    fn hw(&self, cpu: usize) -> Hw<'_> {
        Hw(&self.cpus[cpu])
    }

    /// `t`'s EL0 code on `cpu` reads every FP/SIMD register (trapping first if access is
    /// off), checks it finds what it last wrote, and writes new values (`stamp`).
    fn el0_use(&self, cpu: usize, t: &SimTask, stamp: u64) {
        let r = &self.cpus[cpu];
        if !r.on.load(Ordering::Relaxed) {
            // SAFETY: an ended task is forgotten before it goes (`switch`).
            unsafe { self.owners.trap(cpu, t, &self.hw(cpu)) };
        }
        let mut regs = r.regs.lock();
        let mut mine = t.fp_expect.lock();
        assert_eq!(*regs, *mine, "task {} on CPU {cpu} sees FP/SIMD values that are not its own", t.id);
        *regs = core::array::from_fn(|i| ((t.id as u64) << 32) | (stamp << 4) | i as u64);
        *mine = *regs;
    }

    /// Kernel code on `cpu` uses one vector register in a section no switch can enter (rule
    /// 4): it saves what it uses and gives it back, whoever owns the registers.
    fn kernel_simd(&self, cpu: usize) {
        let mut regs = self.cpus[cpu].regs.lock();
        let saved = regs[0];
        regs[0] = 0x6b65_726e_656c;
        regs[0] = saved;
    }
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

/// The switch on `cpu` as the kernel's `schedule` does it (without FP/SIMD state: [`switch_fp`]).
fn switch(q: &Queues<SimTask>, cpu: usize) -> Option<H> {
    switch_fp(q, None, cpu)
}

/// The switch on `cpu` as the kernel's `schedule` does it: the FP/SIMD state of a task that
/// ends is forgotten, of one that moves to another CPU flushed, before the next context (task
/// or idle) runs `finish_switch`; a task's context that runs again resumes its FP access.
/// Returns what runs on `cpu` now.
fn switch_fp(q: &Queues<SimTask>, fp: Option<&Fpu>, cpu: usize) -> Option<H> {
    let k = K(cpu);
    // SAFETY: this thread plays CPU `cpu` and finishes the switch below.
    match unsafe { q.switch_out(cpu, |_| {}, |n| start(n, cpu)) } {
        Switch::NoTask => None,
        Switch::Stay => q.current(cpu),
        Switch::To { prev, next } => {
            // SAFETY: `prev` is in this CPU's `prev` slot (or its queue) until `finish_switch`.
            let p = unsafe { &*prev };
            if let Some(fp) = fp {
                if p.state() == State::Dead {
                    fp.owners.forget(cpu, p, &fp.hw(cpu));
                    p.dead.store(true, Ordering::Release);
                } else if p.cpu() != cpu {
                    fp.owners.flush(cpu, p, &fp.hw(cpu));
                }
            }
            // The context switch saves prev's registers: no longer live here.
            p.running_on.store(NONE, Ordering::Release);
            // SAFETY: on CPU `cpu`, after its switch.
            unsafe { q.finish_switch(cpu, &k) };
            let now = q.current(cpu);
            assert_eq!(now.as_ref().map(Arc::as_ptr), next, "`next` is the CPU's current task");
            if let (Some(fp), Some(n)) = (fp, &now) {
                fp.owners.resume(cpu, n, &fp.hw(cpu));
            }
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
    let fpu = Arc::new(Fpu::new(cpus));
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
            let fpu = fpu.clone();
            std::thread::spawn(move || {
                let k = K(cpu);
                let switch = |q: &Queues<SimTask>, cpu| switch_fp(q, Some(&fpu), cpu);
                let mut rng = Rng(seed ^ (cpu as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                let mut running: Option<H> = None;
                for step in 0..steps {
                    // A few instructions' worth of delay now and then, so the CPUs' steps
                    // interleave differently.
                    for _ in 0..rng.below(8) {
                        core::hint::spin_loop();
                    }
                    let Some(t) = running.clone() else {
                        // The idle loop.
                        // SAFETY: this thread plays CPU `cpu`, in the context switched to.
                        unsafe { q.finish_switch(cpu, &k) };
                        running = q.pick(cpu, |n| start(n, cpu));
                        match &running {
                            // Its context runs again.
                            Some(n) => fpu.owners.resume(cpu, n, &fpu.hw(cpu)),
                            None => {
                                q.balance(cpu, false, &k);
                            }
                        }
                        continue;
                    };
                    assert_eq!(t.running_on.load(Ordering::Acquire), cpu, "task {} runs here", t.id);
                    match rng.below(20) {
                        // Yield, or preempted by the tick (at EL0 or in the kernel).
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
                        // FP/SIMD at EL0.
                        15..=17 => fpu.el0_use(cpu, &t, step),
                        // FP/SIMD in the kernel, in a section no switch enters.
                        18 => fpu.kernel_simd(cpu),
                        // A fault handler: the kernel reads the task's state (its memory copy
                        // made current), then replaces it with another (its return).
                        19 => {
                            fpu.owners.sync(cpu, &t, &fpu.hw(cpu));
                            assert_eq!(*t.fp_mem.lock(), *t.fp_expect.lock(), "task {}'s saved FP/SIMD state", t.id);
                            let new: Fp = core::array::from_fn(|i| ((t.id as u64) << 32) | (step << 4) | 8 | i as u64);
                            fpu.owners.forget(cpu, &t, &fpu.hw(cpu));
                            *t.fp_mem.lock() = new;
                            *t.fp_expect.lock() = new;
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
    // SAFETY: the test plays CPU 0 and finishes the switch below.
    let Switch::To { prev, next } = (unsafe { q.switch_out(0, |_| {}, |n| start(n, 0)) }) else { panic!("a switch") };
    assert_eq!(next, Some(Arc::as_ptr(&ts[1])));
    // Before CPU 0 finished the switch, CPU 1 may pull another task, never `first`.
    assert!(q.balance(1, false, &K(1)));
    assert!(ts[3].cpu() == 1 && first.cpu() == 0);
    // SAFETY: `prev` is in CPU 0's `prev` slot until its `finish_switch` below.
    unsafe { &*prev }.running_on.store(NONE, Ordering::Release);
    // SAFETY: CPU 0, after its switch.
    unsafe { q.finish_switch(0, &K(0)) };
    // Now it may: `first` is the last task queued on CPU 0.
    assert!(q.balance(1, false, &K(1)));
    assert_eq!(first.cpu(), 1);
    let queued: usize = (0..2).map(|c| q.cpus[c].rq.lock().queue.iter().filter(|t| t.same(&first)).count()).sum();
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

/// CPU `cpu` picks its next task from the idle loop; that task's context runs again.
fn pick_fp(q: &Queues<SimTask>, fp: &Fpu, cpu: usize) -> H {
    // SAFETY: the test plays CPU `cpu`, in the context switched to.
    unsafe { q.finish_switch(cpu, &K(cpu)) };
    let n = q.pick(cpu, |n| start(n, cpu)).expect("a queued task");
    fp.owners.resume(cpu, &n, &fp.hw(cpu));
    n
}

/// `tasks` tasks queued on CPU 0 of `cpus` online ones.
fn fp_setup(cpus: usize, tasks: usize) -> (Queues<SimTask>, Fpu, Vec<H>) {
    let q: Queues<SimTask> = Queues::new();
    (0..cpus).for_each(|c| q.set_online(c));
    let ts: Vec<H> = (0..tasks).map(|i| task(i, 0)).collect();
    ts.iter().for_each(|t| q.wake(t.clone(), &K(0)));
    (q, Fpu::new(cpus), ts)
}

/// Rule 1: a task moved to another CPU by a new affinity has its state saved on the way out
/// (its registers stay behind), and finds it there.
#[test]
fn fp_a_task_moved_by_affinity_takes_its_state_along() {
    let (q, fp, ts) = fp_setup(2, 1);
    let a = pick_fp(&q, &fp, 0);
    fp.el0_use(0, &a, 1);
    assert_eq!(a.regs_on(), Some(0));
    a.affinity.store(0b10, Ordering::Relaxed);
    a.set_cpu(q.affinity_target(q.allowed(0b10)));
    a.set_state(State::Ready);
    assert!(switch_fp(&q, Some(&fp), 0).is_none());
    assert_eq!(a.regs_on(), None, "flushed on its way out");
    let a1 = pick_fp(&q, &fp, 1);
    assert!(a1.same(&ts[0]));
    fp.el0_use(1, &a1, 2);
}

/// Rule 1: another CPU's balance never pulls a task whose state is in its CPU's registers; once
/// another task's trap saved it there (rule 2), it may, and the puller finds the state saved.
#[test]
fn fp_a_task_whose_state_is_in_registers_is_not_pulled() {
    let (q, fp, ts) = fp_setup(3, 3);
    let a = pick_fp(&q, &fp, 0);
    fp.el0_use(0, &a, 1);
    a.set_state(State::Ready);
    let b = switch_fp(&q, Some(&fp), 0).unwrap();
    assert!(b.same(&ts[1]));
    // Queue of CPU 0: c, a. `a` is the last one but its state is in CPU 0's registers.
    assert!(q.balance(1, false, &K(1)));
    assert_eq!((ts[0].cpu(), ts[2].cpu()), (0, 1), "c pulled, a left");
    // b's FP use saves a's state and lets it go: CPU 2 may pull it now.
    fp.el0_use(0, &b, 2);
    assert_eq!(ts[0].regs_on(), None);
    assert!(q.balance(2, false, &K(2)));
    assert_eq!(ts[0].cpu(), 2);
    let a2 = pick_fp(&q, &fp, 2);
    assert!(a2.same(&ts[0]));
    fp.el0_use(2, &a2, 3);
}

/// Rules 2 and 3, with a preemption in the kernel: `a` owns CPU 0's registers and is switched
/// out inside the kernel; `b` traps and takes the registers; when `a`'s context runs again its
/// access is off, so its return to EL0 traps and loads its saved state. Between tasks that do
/// not touch FP/SIMD, a switch saves and loads nothing, and the owner finds its state in place.
#[test]
fn fp_access_is_set_on_every_resume() {
    let (q, fp, ts) = fp_setup(1, 2);
    let a = pick_fp(&q, &fp, 0);
    fp.el0_use(0, &a, 1);
    let moves = fp.cpus[0].moves.load(Ordering::Relaxed);
    // Round trips without FP/SIMD use by b: nothing moves, a keeps its registers.
    for _ in 0..3 {
        a.set_state(State::Ready);
        let b = switch_fp(&q, Some(&fp), 0).unwrap();
        assert!(b.same(&ts[1]));
        assert!(!fp.cpus[0].on.load(Ordering::Relaxed), "b does not own the registers: access off");
        b.set_state(State::Ready);
        assert!(switch_fp(&q, Some(&fp), 0).unwrap().same(&a));
        assert!(fp.cpus[0].on.load(Ordering::Relaxed), "a owns them: access on");
    }
    fp.el0_use(0, &a, 2);
    assert_eq!(fp.cpus[0].moves.load(Ordering::Relaxed), moves, "no save or load");
    // a in the kernel, preempted (an IRQ's switch); b uses FP/SIMD.
    a.set_state(State::Ready);
    let b = switch_fp(&q, Some(&fp), 0).unwrap();
    fp.el0_use(0, &b, 3);
    b.set_state(State::Ready);
    let a = switch_fp(&q, Some(&fp), 0).unwrap();
    assert!(!fp.cpus[0].on.load(Ordering::Relaxed), "a's state is not in the registers: access off");
    // a's way back to EL0 (from the IRQ) traps and loads its own state.
    fp.el0_use(0, &a, 4);
}

/// A task that ended is forgotten before it goes: the next trap on its CPU saves nothing into it.
#[test]
fn fp_an_ended_task_is_never_saved_into() {
    let (q, fp, ts) = fp_setup(1, 2);
    let a = pick_fp(&q, &fp, 0);
    fp.el0_use(0, &a, 1);
    a.set_state(State::Dead);
    let b = switch_fp(&q, Some(&fp), 0).unwrap();
    assert!(b.same(&ts[1]) && a.dead.load(Ordering::Relaxed));
    fp.el0_use(0, &b, 2);
}

/// Rule 4: kernel code that saves the vector registers it uses and gives them back, in a
/// section no switch enters, is invisible to every task, whoever owns the registers.
#[test]
fn fp_kernel_simd_in_a_section_leaves_every_task_its_state() {
    let (q, fp, ts) = fp_setup(1, 2);
    let a = pick_fp(&q, &fp, 0);
    fp.el0_use(0, &a, 1);
    fp.kernel_simd(0);
    a.set_state(State::Ready);
    let b = switch_fp(&q, Some(&fp), 0).unwrap();
    // b's system call uses SIMD while a's state is in the registers.
    fp.kernel_simd(0);
    fp.el0_use(0, &b, 2);
    fp.kernel_simd(0);
    b.set_state(State::Ready);
    assert!(switch_fp(&q, Some(&fp), 0).unwrap().same(&ts[0]));
    fp.el0_use(0, &a, 3);
}

/// Why rule 4 holds kernel SIMD out of preemptible sections: a section that a switch entered
/// would leave its temporaries in the registers, and the next task's trap would save them as
/// the owner's EL0 state.
#[test]
fn fp_kernel_simd_across_a_switch_would_corrupt_the_owner() {
    let (q, fp, ts) = fp_setup(1, 2);
    let a = pick_fp(&q, &fp, 0);
    fp.el0_use(0, &a, 1);
    // a's kernel side: saves v0, clobbers it, and is switched out before it gives it back.
    let saved = fp.cpus[0].regs.lock()[0];
    fp.cpus[0].regs.lock()[0] = 0x6b65_726e_656c;
    a.set_state(State::Ready);
    let b = switch_fp(&q, Some(&fp), 0).unwrap();
    fp.el0_use(0, &b, 2);
    b.set_state(State::Ready);
    assert!(switch_fp(&q, Some(&fp), 0).unwrap().same(&ts[0]));
    // a gives v0 back (into b's registers now) and returns to EL0: its state is wrong.
    fp.cpus[0].regs.lock()[0] = saved;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fp.el0_use(0, &a, 3)));
    assert!(r.is_err(), "a saw its own state although the section spanned a switch");
}
