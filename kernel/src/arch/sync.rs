//! The preemption count and interrupt masking.
//!
//! # Where kernel code may be preempted
//!
//! Most of the kernel runs with IRQs masked (see the nesting rules in `irq`): it cannot be
//! interrupted, so it cannot be preempted. A section that unmasks IRQs ([`IrqsOn`]) is
//! **preemptible**: when the tick (or a reschedule SGI) asks for a switch while such a section
//! runs with a preemption count of 0, the IRQ's way back into it switches tasks
//! (`sched::preempt::from_irq`), and the task may continue later on another CPU (it may have
//! been migrated meanwhile). Rules for a preemptible section:
//!
//! * it holds no lock an IRQ handler takes (the scheduler's locks, `mm::TABLES`, ...): every
//!   `spin` lock of the kernel is taken with IRQs masked; take one only inside
//!   [`without_irqs`];
//! * it keeps no CPU index across an instruction boundary unless the preemption count is
//!   raised ([`preempt_disable`]) or IRQs are masked;
//! * it never sleeps, yields or waits (those run with IRQs masked).
//!
//! # The count
//!
//! Like Linux on arm64, the count belongs to the running thread of control, not to the CPU:
//! it lives in that thread's [`ThreadInfo`], and SP_EL0 points at it while the kernel runs
//! (EL0's SP_EL0 is saved in the exception frame on entry and restored on return; the switch
//! loads the next thread's pointer). So `preempt_disable` is one load, add and store through
//! SP_EL0 and can itself be preempted anywhere: the count it changes moves with the task. A
//! CPU's idle loop and the boot CPU's self-tests run on [`ThreadInfo`]s whose count is 1 for
//! good: never preempted.

use core::sync::atomic::{compiler_fence, AtomicU32, AtomicUsize, Ordering};

/// What SP_EL0 points at while the kernel runs: the running thread's preemption count.
#[repr(C)]
pub struct ThreadInfo {
    /// Preemption-disabling nesting depth (0: preemptible where IRQs are on).
    pub preempt_count: AtomicU32,
}

impl ThreadInfo {
    /// A preemptible thread (a task).
    pub const fn new() -> ThreadInfo {
        ThreadInfo { preempt_count: AtomicU32::new(0) }
    }
}

impl Default for ThreadInfo {
    fn default() -> Self {
        Self::new()
    }
}

/// Each CPU's idle/boot thread: count 1 for good (never preempted).
static IDLE: [ThreadInfo; rt::MAX_CPUS] = [const { ThreadInfo { preempt_count: AtomicU32::new(1) } }; rt::MAX_CPUS];

/// CPU `cpu`'s idle/boot thread info.
pub fn idle_thread(cpu: usize) -> &'static ThreadInfo {
    &IDLE[cpu]
}

/// Whether `ti` is a CPU's idle/boot thread info (not a task's).
#[inline(always)]
pub fn is_idle(ti: *const ThreadInfo) -> bool {
    IDLE.as_ptr_range().contains(&ti)
}

/// Makes `ti` the running thread's info (SP_EL0).
#[inline(always)]
pub fn set_thread(ti: *const ThreadInfo) {
    use aarch64_cpu::registers::{Writeable, SP_EL0};
    SP_EL0.set(ti as u64);
}

/// The running thread's info.
#[inline(always)]
pub fn thread() -> &'static ThreadInfo {
    use aarch64_cpu::registers::{Readable, SP_EL0};
    // SAFETY: while the kernel runs SP_EL0 holds a live ThreadInfo: a CPU's idle one (static)
    // or the running task's (the task is alive while it runs).
    unsafe { &*(SP_EL0.get() as *const ThreadInfo) }
}

/// The running thread's preemption count.
#[inline(always)]
pub fn preempt_count() -> u32 {
    thread().preempt_count.load(Ordering::Relaxed)
}

/// Raises the preemption count: until the matching [`preempt_enable`] this thread stays on
/// its CPU even with IRQs on.
#[inline(always)]
pub fn preempt_disable() {
    let t = thread();
    t.preempt_count.store(t.preempt_count.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    compiler_fence(Ordering::SeqCst);
}

/// Lowers the preemption count; at 0, switches now if this CPU was asked to.
#[inline(always)]
pub fn preempt_enable() {
    compiler_fence(Ordering::SeqCst);
    let t = thread();
    let n = t.preempt_count.load(Ordering::Relaxed) - 1;
    t.preempt_count.store(n, Ordering::Relaxed);
    if n == 0 && crate::arch::cpu::need_resched() {
        preempt_schedule();
    }
}

/// What switches tasks at a preemption point: the scheduler installs it at boot
/// ([`set_preempt_hook`]). The bottom layer cannot name the scheduler (it sits above
/// everything that takes a preemption count), so the one call upward goes through this hook;
/// before the scheduler installs it there is nothing to switch to.
static PREEMPT_HOOK: AtomicUsize = AtomicUsize::new(0);

/// Installs the scheduler's preemption point (`sched::preempt::preempt_schedule`).
pub fn set_preempt_hook(f: fn()) {
    PREEMPT_HOOK.store(f as usize, Ordering::Release);
}

/// A pending switch at a preemption point: the scheduler's hook, if installed.
#[cold]
fn preempt_schedule() {
    let f = PREEMPT_HOOK.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: only `set_preempt_hook` stores here, always a `fn()`.
        let f = unsafe { core::mem::transmute::<usize, fn()>(f) };
        f();
    }
}

/// Lowers the preemption count without looking for a pending switch.
#[inline(always)]
pub fn preempt_enable_no_resched() {
    compiler_fence(Ordering::SeqCst);
    let t = thread();
    t.preempt_count.store(t.preempt_count.load(Ordering::Relaxed) - 1, Ordering::Relaxed);
}

/// Whether IRQs are masked here.
#[inline(always)]
pub fn irqs_masked() -> bool {
    use aarch64_cpu::registers::{Readable, DAIF};
    DAIF.is_set(DAIF::I)
}

/// A preemptible section: IRQs unmasked until dropped (then masked again). Only for code that
/// holds no lock (see the module rules).
pub struct IrqsOn(());

impl IrqsOn {
    /// Unmasks IRQs.
    #[allow(clippy::new_without_default)] // a section starts here: `default` would hide that
    pub fn new() -> IrqsOn {
        compiler_fence(Ordering::SeqCst);
        // SAFETY: clears PSTATE.I: interrupts are taken from here on (the caller holds no lock
        // an IRQ handler takes). Not `nomem`: handlers change memory the caller reads.
        unsafe { core::arch::asm!("msr daifclr, #2", options(nostack, preserves_flags)) };
        IrqsOn(())
    }
}

impl Drop for IrqsOn {
    fn drop(&mut self) {
        // SAFETY: sets PSTATE.I again: back to the kernel's normal state.
        unsafe { core::arch::asm!("msr daifset, #2", options(nostack, preserves_flags)) };
        compiler_fence(Ordering::SeqCst);
    }
}

/// Runs `f` with IRQs masked (restoring the previous state after).
#[inline]
pub fn without_irqs<R>(f: impl FnOnce() -> R) -> R {
    let was = irqs_masked();
    if !was {
        // SAFETY: sets PSTATE.I; restored below.
        unsafe { core::arch::asm!("msr daifset, #2", options(nostack, preserves_flags)) };
    }
    compiler_fence(Ordering::SeqCst);
    let r = f();
    compiler_fence(Ordering::SeqCst);
    if !was {
        // SAFETY: clears PSTATE.I again, as it was on entry.
        unsafe { core::arch::asm!("msr daifclr, #2", options(nostack, preserves_flags)) };
    }
    r
}
