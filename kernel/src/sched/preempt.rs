//! Preemption inside the kernel and moving tasks between CPUs.
//!
//! * **Preemption**: an IRQ taken in a preemptible kernel section (IRQs on, preemption count
//!   0: see `sync`) ends in [`from_irq`], which switches tasks when the CPU was asked to (the
//!   tick after a time slice, a wake-up). A section that lowers its count to 0 with a switch
//!   pending switches at once ([`preempt_schedule`]). The switched-out task keeps its kernel
//!   stack (the IRQ's frame on it) and resumes, maybe on another CPU, by returning from that
//!   IRQ.
//! * **Load balancing** ([`balance`], on every tick and in the idle loop): a CPU whose load
//!   (queued tasks + the running one) is at least two below the busiest CPU's pulls one queued
//!   task that may run on it and is not still on its old CPU (`Task::on_cpu`).
//! * **Affinity** ([`set_affinity`]): a task may be limited to a set of CPUs; if its CPU is not
//!   in the set, it switches out and its old CPU hands it to the new one in `finish_switch`,
//!   once its context is saved. So a task is never on two queues, and never on another CPU's
//!   queue while a CPU still runs it.

use super::{current, schedule, Kick, State, QUEUES};
use crate::arch::cpu::this_cpu;
use core::sync::atomic::{AtomicU64, Ordering};

/// Tasks switched out by an IRQ in a preemptible kernel section, or by `preempt_enable`.
pub static PREEMPTIONS: AtomicU64 = AtomicU64::new(0);
/// Tasks a CPU pulled from another's queue.
pub static PULLS: AtomicU64 = AtomicU64::new(0);
/// Tasks moved by an affinity change.
pub static PUSHES: AtomicU64 = AtomicU64::new(0);

/// The end of an IRQ taken at EL1: switch if this is a preemptible task context and a switch
/// is pending.
pub fn from_irq() {
    if crate::arch::sync::preempt_count() != 0 {
        return;
    }
    if !crate::arch::cpu::take_need_resched(this_cpu()) {
        return;
    }
    if let Some(t) = current() {
        PREEMPTIONS.fetch_add(1, Ordering::Relaxed);
        t.set_state(State::Ready);
        drop(t);
        schedule();
    }
}

/// `preempt_enable` reached 0 with a switch pending: switch now if IRQs are on here (a section
/// that masks IRQs is not preemptible whatever its count).
pub fn preempt_schedule() {
    if crate::arch::sync::irqs_masked() {
        return;
    }
    crate::arch::sync::without_irqs(from_irq);
}

/// CPU `cpu` (IRQs masked) pulls one task from the busiest CPU if that is at least two tasks
/// busier (`kcore::sched::Queues::balance`). `running`: whether `cpu` runs a task now.
/// Returns whether it pulled one.
pub fn balance(cpu: usize, running: bool) -> bool {
    let pulled = QUEUES.balance(cpu, running, &Kick);
    if pulled {
        PULLS.fetch_add(1, Ordering::Relaxed);
    }
    pulled
}

/// Limits the running task to the CPUs in `mask` (of the online ones); moves it now if its CPU
/// is not among them. Returns the CPU it runs on after.
pub fn set_affinity(mask: u64) -> Result<u64, i64> {
    use abi::syscall::errno;
    let allowed = QUEUES.allowed(mask);
    if allowed == 0 {
        return Err(errno::EINVAL);
    }
    let t = current().ok_or(errno::ESRCH)?;
    t.affinity.store(mask, Ordering::Relaxed);
    if allowed & (1 << this_cpu()) == 0 {
        t.set_cpu(QUEUES.affinity_target(allowed));
        t.set_state(State::Ready);
        PUSHES.fetch_add(1, Ordering::Relaxed);
        drop(t);
        schedule();
    }
    Ok(this_cpu() as u64)
}
