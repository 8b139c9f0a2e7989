//! The EL0 FP/SIMD state (q0-q31, FPSR, FPCR) of tasks. The kernel is built without FP/SIMD
//! (as Linux is, `-mgeneral-regs-only`), and its exception vectors leave these registers
//! alone: while the kernel runs they hold the running task's EL0 values. So a trap costs no FP
//! save, and the switch does it instead: [`save`] into the outgoing task before the switch,
//! [`load`] of its own state once a task runs again (cf. Linux `fpsimd_thread_switch`, which
//! defers the load to the return to EL0). SVE and SME stay trapped at EL0 (CPACR_EL1), so the
//! Q registers are the whole EL0 vector state.
//!
//! The xtask holds the kernel to this (`xtask/src/build.rs`, `fp_simd_allowed`): no FP/SIMD
//! instruction outside these two functions and the self-test of the CPU's vector state.

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

/// Saves the registers (the running task's EL0 state) into `st`.
///
/// # Safety
///
/// `st` is valid for writes, 16-byte aligned, and no other CPU uses it.
#[inline(always)]
pub unsafe fn save(st: *mut FpState) {
    // SAFETY: per the caller; the function touches only `*st` and the FP/SIMD registers.
    unsafe { __kernel_fp_save(st) }
}

/// Loads the registers from `st` (the EL0 state of the task about to return there).
///
/// # Safety
///
/// `st` is valid for reads and 16-byte aligned.
#[inline(always)]
pub unsafe fn load(st: *const FpState) {
    // SAFETY: per the caller; the function reads only `*st` and writes FP/SIMD registers the
    // kernel does not use.
    unsafe { __kernel_fp_load(st) }
}

/// The registers as they are now (the running task's EL0 state).
pub fn current() -> FpState {
    let mut st = FpState { q: [0; 32], fpsr: 0, fpcr: 0 };
    // SAFETY: a local, aligned FpState.
    unsafe { save(&mut st) };
    st
}
