//! The EL0 FP/SIMD state (q0-q31, FPSR, FPCR) of tasks, switched lazily. The kernel is built
//! without FP/SIMD (as Linux is, `-mgeneral-regs-only`), and its exception vectors leave these
//! registers alone, so a trap saves none. A switch does not touch them either: each CPU's
//! registers belong to an owner task (`kcore::sched::fp`, where the rules are stated and
//! host-tested), EL0's access (CPACR_EL1.FPEN = 0b01: EL0 trapped, EL1 never) is on only while
//! the owner runs, and another task's first FP/SIMD instruction traps ([`trap`]): the owner's
//! state is saved, the task's loaded. Every resume of a task's context sets the access
//! ([`resume`]); a task moving to another CPU is flushed, one that ends forgotten, in the
//! switch (`sched::schedule`); the kernel reads or replaces a task's state only through
//! [`task_state`] / [`set_task_state`]. SVE and SME stay trapped at EL0 (CPACR_EL1.ZEN/SMEN =
//! 0: the kernel never hands them out), so the Q registers are the whole EL0 vector state.
//!
//! Kernel code that uses vector registers does it only in a section that cannot be switched out
//! (IRQs masked, as every lock holder, or the preemption count raised) and gives back exactly the
//! registers it used: the registers may hold any task's state, or none, while the kernel runs.
//!
//! The xtask holds the kernel to this (`xtask/src/build.rs`, `fp_simd_allowed`): no FP/SIMD
//! instruction outside `__kernel_fp_save` / `__kernel_fp_load` and the self-test of the CPU's
//! vector state.

use super::Task;
use kcore::sched::fp::{FpOwners, FpRegs};
use rt::trap::FpState;

// What this block guarantees: `__kernel_fp_save(st)` stores q0-q31, FPSR and FPCR into `*st`
// (an FpState, 16-byte aligned) and changes no register but the caller-saved x9-x11;
// `__kernel_fp_load(st)` loads them from `*st` and changes nothing else but x9-x11. The FP/SIMD instructions are enabled for these two only.
core::arch::global_asm!(
    r#"
.section .text.kernel_fp, "ax"
.arch_extension fp
.arch_extension simd
.global __kernel_fp_save
.type __kernel_fp_save, %function
__kernel_fp_save:
    stp     q0, q1, [x0, #0]
    stp     q2, q3, [x0, #32]
    stp     q4, q5, [x0, #64]
    stp     q6, q7, [x0, #96]
    stp     q8, q9, [x0, #128]
    stp     q10, q11, [x0, #160]
    stp     q12, q13, [x0, #192]
    stp     q14, q15, [x0, #224]
    stp     q16, q17, [x0, #256]
    stp     q18, q19, [x0, #288]
    stp     q20, q21, [x0, #320]
    stp     q22, q23, [x0, #352]
    stp     q24, q25, [x0, #384]
    stp     q26, q27, [x0, #416]
    stp     q28, q29, [x0, #448]
    stp     q30, q31, [x0, #480]
    mrs     x9, fpsr
    mrs     x10, fpcr
    add     x11, x0, #512
    stp     x9, x10, [x11]
    ret

.global __kernel_fp_load
.type __kernel_fp_load, %function
__kernel_fp_load:
    ldp     q0, q1, [x0, #0]
    ldp     q2, q3, [x0, #32]
    ldp     q4, q5, [x0, #64]
    ldp     q6, q7, [x0, #96]
    ldp     q8, q9, [x0, #128]
    ldp     q10, q11, [x0, #160]
    ldp     q12, q13, [x0, #192]
    ldp     q14, q15, [x0, #224]
    ldp     q16, q17, [x0, #256]
    ldp     q18, q19, [x0, #288]
    ldp     q20, q21, [x0, #320]
    ldp     q22, q23, [x0, #352]
    ldp     q24, q25, [x0, #384]
    ldp     q26, q27, [x0, #416]
    ldp     q28, q29, [x0, #448]
    ldp     q30, q31, [x0, #480]
    add     x11, x0, #512
    ldp     x9, x10, [x11]
    msr     fpsr, x9
    msr     fpcr, x10
    ret
"#
);

extern "C" {
    fn __kernel_fp_save(st: *mut FpState);
    fn __kernel_fp_load(st: *const FpState);
}

/// Saves the registers into `st`.
///
/// # Safety
///
/// `st` is valid for writes, 16-byte aligned, and no other CPU uses it.
#[inline(always)]
unsafe fn save(st: *mut FpState) {
    // SAFETY: per the caller; the function touches only `*st` and the FP/SIMD registers.
    unsafe { __kernel_fp_save(st) }
}

/// Loads the registers from `st`.
///
/// # Safety
///
/// `st` is valid for reads and 16-byte aligned.
#[inline(always)]
unsafe fn load(st: *const FpState) {
    // SAFETY: per the caller; the function reads only `*st` and writes FP/SIMD registers the
    // kernel does not use.
    unsafe { __kernel_fp_load(st) }
}

/// Every CPU's owner.
static OWNERS: FpOwners<Task> = FpOwners::new();

/// The calling CPU's FP/SIMD registers and CPACR_EL1.
struct Hw;

impl FpRegs<Task> for Hw {
    fn save(&self, t: &Task) {
        // SAFETY: the task's own area (aligned, in the task); only the CPU owning its
        // registers writes it (`kcore::sched::fp`), with IRQs masked.
        unsafe { save(t.fp.get()) }
    }
    fn load(&self, t: &Task) {
        // SAFETY: as `save`; no CPU writes it while it is in memory and this task runs here.
        unsafe { load(t.fp.get()) }
    }
    fn el0_access(&self, on: bool) {
        use aarch64_cpu::registers::{Writeable, CPACR_EL1};
        // ZEN/SMEN 0: SVE and SME trapped at EL0 and EL1, as at entry. No ISB: the next FP/SIMD
        // instruction this matters for runs at EL0, after the `eret` (context synchronizing).
        CPACR_EL1.write(if on { CPACR_EL1::FPEN::TrapNothing } else { CPACR_EL1::FPEN::TrapEl0 });
    }
}

/// `t`'s context runs again on `cpu` (this CPU) after a switch, or for the first time: EL0
/// access on exactly when it owns the registers. IRQs masked.
#[inline(always)]
pub fn resume(cpu: usize, t: &Task) {
    OWNERS.resume(cpu, t, &Hw);
}

/// The running task `t` used FP/SIMD at EL0 with access off (the trap, IRQs masked).
pub fn trap(cpu: usize, t: &Task) {
    // SAFETY: a task is forgotten (`forget`) before it is dropped, and flushed when it leaves
    // this CPU: every owner is alive.
    unsafe { OWNERS.trap(cpu, t, &Hw) };
}

/// `t` (switched away from on `cpu`, this CPU) is to run on another CPU: its state saved and
/// released first. IRQs masked, before the switch lets other CPUs take it.
pub fn flush(cpu: usize, t: &Task) {
    OWNERS.flush(cpu, t, &Hw);
}

/// `t` ended (switched away from on `cpu`, this CPU, for good): it owns nothing any more.
pub fn forget(cpu: usize, t: &Task) {
    OWNERS.forget(cpu, t, &Hw);
}

/// The EL0 state of `t`, the task running on this CPU (IRQs masked).
pub fn task_state(t: &Task) -> FpState {
    OWNERS.sync(crate::arch::cpu::this_cpu(), t, &Hw);
    // SAFETY: the task runs here: only this CPU touches its area (brought up to date above).
    unsafe { (*t.fp.get()).clone() }
}

/// Replaces the EL0 state of `t`, the task running on this CPU (IRQs masked): its return to
/// EL0 finds access off and loads it at its first FP/SIMD instruction.
pub fn set_task_state(t: &Task, st: &FpState) {
    OWNERS.forget(crate::arch::cpu::this_cpu(), t, &Hw);
    // SAFETY: as `task_state`; no CPU holds the state in its registers now.
    unsafe { *t.fp.get() = st.clone() };
}
