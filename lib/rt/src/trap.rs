//! Exception vector tables for EL1 and EL2 and the frame they save.
//!
//! Each of the 16 vectors saves the interrupted context into a [`TrapFrame`] on the current
//! stack and calls the binary's `rt_exception(frame, vector)`; when that returns, the (possibly
//! edited) frame is restored and `eret` resumes at `frame.elr`. The EL2 table (the hypervisor,
//! built without FP/SIMD) saves no FP/SIMD register, so the guest's FP, SVE and SME state at any
//! vector length is never touched by a trap. The EL1 table saves FP/SIMD registers too only in
//! a binary built with them (its Rust handlers are then free to use them: the chainloader); the
//! kernel is built without FP/SIMD, as Linux is (`-mgeneral-regs-only`): its traps leave the
//! user's FP/SIMD state in the registers, and its scheduler switches that state with the task.
//! Install with [`vectors_el2`] / [`vectors_el1`] into VBAR_EL2 / VBAR_EL1.

/// Vector numbers (the `vector` argument of `rt_exception`): source x kind.
pub mod vector {
    /// Synchronous, current EL with SP0.
    pub const CUR_SP0_SYNC: u64 = 0;
    /// Synchronous, current EL with SPx.
    pub const CUR_SPX_SYNC: u64 = 4;
    /// IRQ, current EL with SPx.
    pub const CUR_SPX_IRQ: u64 = 5;
    /// Synchronous from a lower EL in AArch64.
    pub const LOWER64_SYNC: u64 = 8;
    /// IRQ from a lower EL in AArch64.
    pub const LOWER64_IRQ: u64 = 9;
    /// FIQ from a lower EL in AArch64.
    pub const LOWER64_FIQ: u64 = 10;
    /// SError from a lower EL in AArch64.
    pub const LOWER64_SERROR: u64 = 11;

    /// What kind of exception a vector number is.
    pub fn kind(v: u64) -> &'static str {
        match v % 4 {
            0 => "synchronous",
            1 => "IRQ",
            2 => "FIQ",
            _ => "SError",
        }
    }

    /// Where the exception came from.
    pub fn source(v: u64) -> &'static str {
        match v / 4 {
            0 => "current EL, SP0",
            1 => "current EL, SPx",
            2 => "lower EL, AArch64",
            3 => "lower EL, AArch32",
            _ => "?",
        }
    }
}

/// The interrupted context. Layout is shared with the assembly below.
#[repr(C, align(16))]
#[derive(Clone)]
pub struct TrapFrame {
    /// x0..x30.
    pub x: [u64; 31],
    /// ELR_ELx: where `eret` returns to.
    pub elr: u64,
    /// SPSR_ELx.
    pub spsr: u64,
    /// SP_EL0 of the interrupted context: the user stack pointer when the exception came from
    /// EL0 (the vectors run on SP_ELx, so SP_EL0 is left as it was and restored from here).
    pub sp_el0: u64,
}

/// The FP/SIMD state the EL1 vectors save just above the [`TrapFrame`] (at `frame +
/// FRAME_SIZE`): q0-q31, FPSR, FPCR. See [`fp_state`].
#[repr(C, align(16))]
#[derive(Clone)]
pub struct FpState {
    /// q0..q31.
    pub q: [u128; 32],
    /// FPSR.
    pub fpsr: u64,
    /// FPCR.
    pub fpcr: u64,
}

/// Size of [`TrapFrame`]; the assembly reserves exactly this much.
pub const FRAME_SIZE: usize = 272;
const _: () = assert!(core::mem::size_of::<TrapFrame>() == FRAME_SIZE);

/// Size of an [`FpState`].
pub const FP_STATE_SIZE: usize = 32 * 16 + 16;
const _: () = assert!(core::mem::size_of::<FpState>() == FP_STATE_SIZE);

/// FP/SIMD save area the EL1 vectors keep above the frame: an [`FpState`] in a binary built
/// with FP/SIMD, nothing in one without.
pub const FP_AREA: usize = if cfg!(target_feature = "neon") { FP_STATE_SIZE } else { 0 };

/// What an EL1 exception entry reserves on the stack: the [`TrapFrame`] and the FP area above
/// it.
pub const EL1_FRAME_SIZE: usize = FRAME_SIZE + FP_AREA;

/// The FP/SIMD state saved with an EL1 exception frame (the area just above it), in a binary
/// built with FP/SIMD.
///
/// # Safety
///
/// `frame` must be a frame the EL1 vectors saved (or one laid out the same way, with
/// [`EL1_FRAME_SIZE`] bytes reserved), and the returned reference must not outlive it.
#[cfg(target_feature = "neon")]
pub unsafe fn fp_state(frame: &mut TrapFrame) -> &mut FpState {
    // SAFETY: per the caller the FpState lies right above the frame, in the same stack
    // allocation; FRAME_SIZE is a multiple of 16, so it is aligned.
    unsafe { &mut *((frame as *mut TrapFrame as *mut u8).add(FRAME_SIZE) as *mut FpState) }
}

/// Assembler macros both vector tables use: saving and restoring the general-purpose registers
/// and ELR/SPSR into a [`TrapFrame`], and the 16-entry table itself. Each `global_asm!` block
/// defines them, uses them and purges them, so the blocks may share one assembly unit.
macro_rules! vector_macros {
    () => {
        r#"
.macro rt_save_x2_x19
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
.endm

.macro rt_save_x20_x29
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
.endm

// x30, ELR, SPSR and SP_EL0, read through three scratch registers already saved.
.macro rt_save_special el, a, b, c
    mrs     \a, elr_el\el
    mrs     \b, spsr_el\el
    mrs     \c, sp_el0
    stp     x30, \a, [sp, #240]
    stp     \b, \c, [sp, #256]
.endm

.macro rt_save_gprs el
    rt_save_x2_x19
    rt_save_x20_x29
    rt_save_special \el, x21, x22, x23
.endm

// SP_EL0, x30, ELR and SPSR back, through two scratch registers restored after them.
.macro rt_restore_special el, a, b
    ldp     \b, \a, [sp, #256]
    msr     sp_el0, \a
    ldp     x30, \a, [sp, #240]
    msr     elr_el\el, \a
    msr     spsr_el\el, \b
.endm

.macro rt_restore_x0_x19
    ldp     x0, x1, [sp, #0]
    ldp     x2, x3, [sp, #16]
    ldp     x4, x5, [sp, #32]
    ldp     x6, x7, [sp, #48]
    ldp     x8, x9, [sp, #64]
    ldp     x10, x11, [sp, #80]
    ldp     x12, x13, [sp, #96]
    ldp     x14, x15, [sp, #112]
    ldp     x16, x17, [sp, #128]
    ldp     x18, x19, [sp, #144]
.endm

.macro rt_restore_x20_x29
    ldp     x20, x21, [sp, #160]
    ldp     x22, x23, [sp, #176]
    ldp     x24, x25, [sp, #192]
    ldp     x26, x27, [sp, #208]
    ldp     x28, x29, [sp, #224]
.endm

.macro rt_restore_gprs el
    rt_restore_special \el, x21, x22
    rt_restore_x0_x19
    rt_restore_x20_x29
.endm

.macro rt_vector_entry el, num, size
    .balign 0x80
    sub     sp, sp, #\size
    stp     x0, x1, [sp, #0]
    mov     x1, #\num
    b       __rt_trap_el\el
.endm

.macro rt_vector_table el, size, sync8=0
.section .text.rt_vectors_el\el, "ax"
.balign 0x800
.global __rt_vectors_el\el
__rt_vectors_el\el:
    rt_vector_entry \el, 0, \size
    rt_vector_entry \el, 1, \size
    rt_vector_entry \el, 2, \size
    rt_vector_entry \el, 3, \size
    rt_vector_entry \el, 4, \size
    rt_vector_entry \el, 5, \size
    rt_vector_entry \el, 6, \size
    rt_vector_entry \el, 7, \size
.if \sync8
    .balign 0x80
    sub     sp, sp, #\size
    stp     x0, x1, [sp, #0]
    b       __rt_el0_sync_el\el
.else
    rt_vector_entry \el, 8, \size
.endif
    rt_vector_entry \el, 9, \size
    rt_vector_entry \el, 10, \size
    rt_vector_entry \el, 11, \size
    rt_vector_entry \el, 12, \size
    rt_vector_entry \el, 13, \size
    rt_vector_entry \el, 14, \size
    rt_vector_entry \el, 15, \size
.endm

"#
    };
}

/// Undefines [`vector_macros`] again.
macro_rules! purge_macros {
    () => {
        ".purgem rt_save_x2_x19\n.purgem rt_save_x20_x29\n.purgem rt_save_special\n.purgem rt_save_gprs\n\
         .purgem rt_restore_special\n.purgem rt_restore_x0_x19\n.purgem rt_restore_x20_x29\n\
         .purgem rt_restore_gprs\n.purgem rt_vector_entry\n.purgem rt_vector_table\n"
    };
}

// What this block guarantees: every general-purpose register, ELR_EL2, SPSR_EL2 and SP_EL0 are stored in a
// TrapFrame at SP before any Rust code runs, and restored from it (including any edits the handler
// made) immediately before `eret`. x0 = frame, x1 = vector number on entry to `rt_exception`. SP is
// SP_EL2 (the vectors are entered with SPSel = 1), which the hypervisor keeps pointing into a
// per-CPU stack. FP/SIMD/SVE/SME registers are neither saved nor touched: the hypervisor is built
// without FP/SIMD (the xtask checks its code), so a lower EL's vector and matrix state, at any
// vector length and in streaming mode too, passes through EL2 untouched.
core::arch::global_asm!(
    vector_macros!(),
    r#"
rt_vector_table 2, {frame}
__rt_trap_el2:
    rt_save_gprs 2
    mov     x0, sp
    bl      rt_exception
    rt_restore_gprs 2
    add     sp, sp, #{frame}
    eret
"#,
    purge_macros!(),
    frame = const FRAME_SIZE,
);

// What this block guarantees (EL1, builds with FP/SIMD only): as the EL2 table, plus q0-q31, FPSR
// and FPCR stored in a save area just above the TrapFrame before any Rust code runs (the Rust
// handlers are free to use them) and restored before `eret`. SP may also be the kernel stack of
// the running task. `__rt_trap_return_el1` is the restore half on its own: entered with SP at a
// TrapFrame (and its FP area), it restores both, pops them and `eret`s (a new task's first return
// to EL0 goes through it, see `return_to_el1_frame`).
#[cfg(target_feature = "neon")]
core::arch::global_asm!(
    vector_macros!(),
    r#"
rt_vector_table 1, {total}
__rt_trap_el1:
    rt_save_gprs 1
    add     x23, sp, #{frame}
    stp     q0, q1, [x23, #0]
    stp     q2, q3, [x23, #32]
    stp     q4, q5, [x23, #64]
    stp     q6, q7, [x23, #96]
    stp     q8, q9, [x23, #128]
    stp     q10, q11, [x23, #160]
    stp     q12, q13, [x23, #192]
    stp     q14, q15, [x23, #224]
    stp     q16, q17, [x23, #256]
    stp     q18, q19, [x23, #288]
    stp     q20, q21, [x23, #320]
    stp     q22, q23, [x23, #352]
    stp     q24, q25, [x23, #384]
    stp     q26, q27, [x23, #416]
    stp     q28, q29, [x23, #448]
    stp     q30, q31, [x23, #480]
    mrs     x21, fpsr
    mrs     x22, fpcr
    add     x24, x23, #512
    stp     x21, x22, [x24]
    mov     x0, sp
    bl      rt_exception
.global __rt_trap_return_el1
__rt_trap_return_el1:
    add     x23, sp, #{frame}
    add     x24, x23, #512
    ldp     x21, x22, [x24]
    msr     fpsr, x21
    msr     fpcr, x22
    ldp     q0, q1, [x23, #0]
    ldp     q2, q3, [x23, #32]
    ldp     q4, q5, [x23, #64]
    ldp     q6, q7, [x23, #96]
    ldp     q8, q9, [x23, #128]
    ldp     q10, q11, [x23, #160]
    ldp     q12, q13, [x23, #192]
    ldp     q14, q15, [x23, #224]
    ldp     q16, q17, [x23, #256]
    ldp     q18, q19, [x23, #288]
    ldp     q20, q21, [x23, #320]
    ldp     q22, q23, [x23, #352]
    ldp     q24, q25, [x23, #384]
    ldp     q26, q27, [x23, #416]
    ldp     q28, q29, [x23, #448]
    ldp     q30, q31, [x23, #480]
    rt_restore_gprs 1
    add     sp, sp, #{total}
    eret
"#,
    purge_macros!(),
    frame = const FRAME_SIZE,
    total = const FRAME_SIZE + FP_AREA,
);

// What this block guarantees (EL1, builds without FP/SIMD: the kernel): as the EL2 table, with
// ELR_EL1/SPSR_EL1. FP/SIMD/SVE/SME registers are neither saved nor touched (nothing in the
// binary uses them), so they keep the interrupted EL0 context's values; whoever switches EL0
// contexts switches them (`kernel/src/sched`). `__rt_trap_return_el1` is the restore half on its
// own: entered with SP at a TrapFrame, it restores it, pops it and `eret`s.
//
// A system call (synchronous from EL0 with ESR_EL1.EC = SVC64) takes a shorter way: only x0-x19,
// x30, ELR_EL1, SPSR_EL1 and SP_EL0 go into the frame (x20-x29 are callee-saved: every Rust
// function, and the context switch, gives them back as they were), then `rt_syscall(frame)`.
// When it returns 0 the same registers come back from the frame (the result in x0) and x20-x29
// were never touched; when it returns anything else the handler has written the whole frame
// (`fault_return` resumes a saved context) and all of it is restored. An instruction or data
// abort from EL0 (EC 0x20 / 0x24: a page fault) saves the same registers and calls
// `rt_el0_abort(frame, esr)` with ESR_EL1 also kept in x19 (its EL0 value is in the frame):
// when it returns 0 the fault was resolved and those registers come back; anything else means
// the task must see the whole frame (its fault handler, or its end with a report): x20-x29 still
// hold the task's values, so they are saved then, and `rt_el0_abort_denied(frame, esr, code)`
// gets the returned code. Any other synchronous exception from EL0 saves x20-x29 too, as every
// other vector does, and goes to `rt_el0_sync(frame, esr)` with ESR_EL1 as read. A binary that
// runs EL0 code defines all four (the kernel); the weak ones here stop at a `BRK` in any other
// that would take them through these vectors (none installs them: the hypervisor has its own
// table).
#[cfg(not(target_feature = "neon"))]
core::arch::global_asm!(
    vector_macros!(),
    r#"
rt_vector_table 1, {frame}, 1
__rt_el0_sync_el1:
    rt_save_x2_x19
    mrs     x9, esr_el1
    lsr     x10, x9, #26
    cmp     x10, #{ec_svc64}
    b.ne    2f
    rt_save_special 1, x10, x11, x12
    mov     x0, sp
    bl      rt_syscall
    cbnz    x0, __rt_trap_return_el1
5:
    rt_restore_special 1, x12, x11
    rt_restore_x0_x19
    add     sp, sp, #{frame}
    eret
3:
    rt_save_special 1, x10, x11, x12
    mov     x19, x9
    mov     x0, sp
    mov     x1, x9
    bl      rt_el0_abort
    cbz     x0, 5b
    rt_save_x20_x29
    mov     x2, x0
    mov     x1, x19
    mov     x0, sp
    bl      rt_el0_abort_denied
    b       __rt_trap_return_el1
2:
    cmp     x10, #{ec_dabt_lower}
    b.eq    3b
    cmp     x10, #{ec_iabt_lower}
    b.eq    3b
    rt_save_x20_x29
    rt_save_special 1, x21, x22, x23
    mov     x0, sp
    mov     x1, x9
    bl      rt_el0_sync
    b       __rt_trap_return_el1
__rt_trap_el1:
    rt_save_gprs 1
    mov     x0, sp
    bl      rt_exception
.global __rt_trap_return_el1
__rt_trap_return_el1:
    rt_restore_gprs 1
    add     sp, sp, #{frame}
    eret
.weak rt_syscall
rt_syscall:
    brk     #0x5c
.weak rt_el0_sync
rt_el0_sync:
    brk     #0x5c
.weak rt_el0_abort
rt_el0_abort:
    brk     #0x5c
.weak rt_el0_abort_denied
rt_el0_abort_denied:
    brk     #0x5c
"#,
    purge_macros!(),
    frame = const FRAME_SIZE,
    ec_svc64 = const crate::esr::EC_SVC64,
    ec_dabt_lower = const crate::esr::EC_DABT_LOWER,
    ec_iabt_lower = const crate::esr::EC_IABT_LOWER,
);

extern "C" {
    static __rt_vectors_el1: u8;
    static __rt_vectors_el2: u8;
    fn __rt_trap_return_el1();
}

/// Restores the EL1 exception frame at `frame` (and the FP area above it, if any) and returns
/// from the exception (`eret`) with it, as the EL1 vectors do after `rt_exception`: SP ends just
/// above the frame's [`EL1_FRAME_SIZE`] bytes.
///
/// # Safety
///
/// `frame` must be a 16-byte aligned [`TrapFrame`] followed by its FP area ([`EL1_FRAME_SIZE`]
/// bytes in all) at the top of the stack the caller wants to keep running on after the next
/// exception (SP_EL1 becomes `frame + EL1_FRAME_SIZE`), with `elr`/`spsr` naming a valid target
/// (e.g. EL0t at a mapped user address). Called at EL1.
pub unsafe fn return_to_el1_frame(frame: *const TrapFrame) -> ! {
    // SAFETY: per the caller, SP may move to the frame, which the restore code pops.
    unsafe {
        core::arch::asm!(
            "mov sp, {f}",
            "b {ret}",
            f = in(reg) frame,
            ret = sym __rt_trap_return_el1,
            options(noreturn),
        )
    }
}

/// Address of the EL2 vector table (for VBAR_EL2), as the running code reaches it.
pub fn vectors_el2() -> u64 {
    crate::pc_relative!(__rt_vectors_el2) as u64
}

/// Address of the EL1 vector table (for VBAR_EL1), as the running code reaches it.
pub fn vectors_el1() -> u64 {
    crate::pc_relative!(__rt_vectors_el1) as u64
}
