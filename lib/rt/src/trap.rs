//! Exception vector tables for EL1 and EL2 and the frame they save.
//!
//! Each of the 16 vectors saves the interrupted context into a [`TrapFrame`] on the current
//! stack and calls the binary's `rt_exception(frame, vector)`; when that returns, the (possibly
//! edited) frame is restored and `eret` resumes at `frame.elr`. FP/SIMD registers are saved too,
//! because the Rust handlers are free to use them and a lower EL's values must survive.
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
    _pad: u64,
    /// q0..q31.
    pub q: [u128; 32],
    /// FPSR.
    pub fpsr: u64,
    /// FPCR.
    pub fpcr: u64,
}

/// Size of [`TrapFrame`]; the assembly reserves exactly this much.
pub const FRAME_SIZE: usize = 800;
const _: () = assert!(core::mem::size_of::<TrapFrame>() == FRAME_SIZE);

// What this block guarantees: for either table, every general-purpose register, ELR_ELx,
// SPSR_ELx, q0-q31, FPSR and FPCR are stored in a TrapFrame at SP before any Rust code runs, and
// restored from it (including any edits the handler made) immediately before `eret`. x0 = frame,
// x1 = vector number on entry to `rt_exception`. SP is the current EL's SP_ELx (the vectors are
// entered with SPSel = 1), which the binaries keep pointing into a per-CPU stack.
core::arch::global_asm!(
    r#"
.macro rt_vector_entry el, num
    .balign 0x80
    sub     sp, sp, #{frame}
    stp     x0, x1, [sp, #0]
    mov     x1, #\num
    b       __rt_trap_el\el
.endm

.macro rt_vector_table el
.section .text.rt_vectors_el\el, "ax"
.balign 0x800
.global __rt_vectors_el\el
__rt_vectors_el\el:
    rt_vector_entry \el, 0
    rt_vector_entry \el, 1
    rt_vector_entry \el, 2
    rt_vector_entry \el, 3
    rt_vector_entry \el, 4
    rt_vector_entry \el, 5
    rt_vector_entry \el, 6
    rt_vector_entry \el, 7
    rt_vector_entry \el, 8
    rt_vector_entry \el, 9
    rt_vector_entry \el, 10
    rt_vector_entry \el, 11
    rt_vector_entry \el, 12
    rt_vector_entry \el, 13
    rt_vector_entry \el, 14
    rt_vector_entry \el, 15

__rt_trap_el\el:
    stp     x2, x3, [sp, #16]
    stp     x4, x5, [sp, #32]
    stp     x6, x7, [sp, #48]
    stp     x8, x9, [sp, #64]
    stp     x10, x11, [sp, #80]
    stp     x12, x13, [sp, #96]
    stp     x14, x15, [sp, #112]
    stp     x16, x17, [sp, #128]
    stp     x18, x19, [sp, #144]
    stp     x20, x21, [sp, #160]
    stp     x22, x23, [sp, #176]
    stp     x24, x25, [sp, #192]
    stp     x26, x27, [sp, #208]
    stp     x28, x29, [sp, #224]
    mrs     x21, elr_el\el
    mrs     x22, spsr_el\el
    stp     x30, x21, [sp, #240]
    str     x22, [sp, #256]
    stp     q0, q1, [sp, #272]
    stp     q2, q3, [sp, #304]
    stp     q4, q5, [sp, #336]
    stp     q6, q7, [sp, #368]
    stp     q8, q9, [sp, #400]
    stp     q10, q11, [sp, #432]
    stp     q12, q13, [sp, #464]
    stp     q14, q15, [sp, #496]
    stp     q16, q17, [sp, #528]
    stp     q18, q19, [sp, #560]
    stp     q20, q21, [sp, #592]
    stp     q22, q23, [sp, #624]
    stp     q24, q25, [sp, #656]
    stp     q26, q27, [sp, #688]
    stp     q28, q29, [sp, #720]
    stp     q30, q31, [sp, #752]
    mrs     x21, fpsr
    mrs     x22, fpcr
    add     x23, sp, #784
    stp     x21, x22, [x23]
    mov     x0, sp
    bl      rt_exception
    add     x23, sp, #784
    ldp     x21, x22, [x23]
    msr     fpsr, x21
    msr     fpcr, x22
    ldp     q0, q1, [sp, #272]
    ldp     q2, q3, [sp, #304]
    ldp     q4, q5, [sp, #336]
    ldp     q6, q7, [sp, #368]
    ldp     q8, q9, [sp, #400]
    ldp     q10, q11, [sp, #432]
    ldp     q12, q13, [sp, #464]
    ldp     q14, q15, [sp, #496]
    ldp     q16, q17, [sp, #528]
    ldp     q18, q19, [sp, #560]
    ldp     q20, q21, [sp, #592]
    ldp     q22, q23, [sp, #624]
    ldp     q24, q25, [sp, #656]
    ldp     q26, q27, [sp, #688]
    ldp     q28, q29, [sp, #720]
    ldp     q30, q31, [sp, #752]
    ldp     x30, x21, [sp, #240]
    ldr     x22, [sp, #256]
    msr     elr_el\el, x21
    msr     spsr_el\el, x22
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
    ldp     x20, x21, [sp, #160]
    ldp     x22, x23, [sp, #176]
    ldp     x24, x25, [sp, #192]
    ldp     x26, x27, [sp, #208]
    ldp     x28, x29, [sp, #224]
    add     sp, sp, #{frame}
    eret
.endm

rt_vector_table 1
rt_vector_table 2
"#,
    frame = const FRAME_SIZE,
);

extern "C" {
    static __rt_vectors_el1: u8;
    static __rt_vectors_el2: u8;
}

/// Address of the EL2 vector table (for VBAR_EL2).
pub fn vectors_el2() -> u64 {
    // Taking an extern static's address reads nothing.
    core::ptr::addr_of!(__rt_vectors_el2) as u64
}

/// Address of the EL1 vector table (for VBAR_EL1).
pub fn vectors_el1() -> u64 {
    core::ptr::addr_of!(__rt_vectors_el1) as u64
}
