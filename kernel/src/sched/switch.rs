//! The context switch: the callee-saved state of a kernel thread of control (a task's kernel
//! side, or a CPU's idle loop), saved into one [`Context`] and loaded from another.

/// What a switch keeps: x19-x28, the frame pointer (x29), the link register (x30) and SP
/// (AAPCS64): everything else is caller-saved, and the switch is an ordinary call. The kernel
/// uses no FP/SIMD register; the EL0 FP/SIMD state is switched apart (`fpsimd`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct Context {
    /// x19..x30.
    pub x: [u64; 12],
    /// SP.
    pub sp: u64,
    /// Keeps the size a multiple of 16.
    pub pad: u64,
}

// What this block guarantees: `__kernel_switch(save, load)` stores x19-x30 and SP into
// `*save`, loads them from `*load` and returns into the loaded context (to its x30, on its
// SP). `__kernel_task_start` is where a new task's context first "returns": x19 holds its exit
// frame, which it passes to `sched::task_first_run`. Neither touches anything else.
core::arch::global_asm!(
    r#"
.section .text.kernel_switch, "ax"
.global __kernel_switch
__kernel_switch:
    stp     x19, x20, [x0, #0]
    stp     x21, x22, [x0, #16]
    stp     x23, x24, [x0, #32]
    stp     x25, x26, [x0, #48]
    stp     x27, x28, [x0, #64]
    stp     x29, x30, [x0, #80]
    mov     x9, sp
    str     x9, [x0, #96]
    ldp     x19, x20, [x1, #0]
    ldp     x21, x22, [x1, #16]
    ldp     x23, x24, [x1, #32]
    ldp     x25, x26, [x1, #48]
    ldp     x27, x28, [x1, #64]
    ldp     x29, x30, [x1, #80]
    ldr     x9, [x1, #96]
    mov     sp, x9
    ret

.global __kernel_task_start
__kernel_task_start:
    mov     x0, x19
    bl      {first_run}
1:  b       1b
"#,
    first_run = sym super::task_first_run,
);

extern "C" {
    fn __kernel_switch(save: *mut Context, load: *const Context);
    fn __kernel_task_start();
}

const _: () = assert!(core::mem::size_of::<Context>() == 112);

/// Saves the running context into `save` and continues in `load`; returns when something
/// switches back to `save`.
///
/// # Safety
///
/// `save` must stay valid until it is loaded again; `load` must be a context saved by this
/// function or made by [`first_context`], whose stack is mapped and owned by it. IRQs masked.
pub unsafe fn switch(save: *mut Context, load: *const Context) {
    // SAFETY: per the caller.
    unsafe { __kernel_switch(save, load) }
}

/// The context a new task starts in: on its kernel stack just below its first exception
/// frame (`frame`), running `task_first_run(frame)`.
pub fn first_context(frame: u64) -> Context {
    let mut c = Context::default();
    c.x[0] = frame; // x19
    c.x[10] = 0; // x29: the frame chain ends here
    c.x[11] = __kernel_task_start as *const () as u64; // x30
    c.sp = frame;
    c
}
