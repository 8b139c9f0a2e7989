//! The only vector-register code of the two binaries: the protect's run of like pages
//! ([`crate::raw::flip_groups`]) and the fill of a new level-3 table
//! ([`crate::frame::fill_unlinked`]) on NEON (and the fill on SVE), as named routines
//! (`__pgtable_vec_*`, the only FP/SIMD code `cargo xtask build` lets either binary hold besides
//! the kernel's task switch) that save and restore exactly the vector registers they use.
//!
//! Both binaries otherwise run on general registers (softfloat) while someone else's vector
//! state is live: the guest's under the hypervisor, a task's EL0 state in the kernel. So each
//! routine keeps that state whole, by rules the binary states once at boot ([`set`]):
//! - [`VectorUse::Neon`]: the live state is Q0-Q31 (the kernel: CPACR_EL1 traps SVE and SME at
//!   EL0 and EL1, so no task has Z bits above 128 or streaming mode). The routines save and
//!   restore the Q registers they use.
//! - [`VectorUse::Sve`]: SVE is handed to the guest untrapped (the hypervisor), so writing V`n`
//!   would zero bits above 128 of Z`n`: the routines save and restore whole Z registers, at the
//!   EL's own vector length, which is the largest any lower EL may use (ZCR_EL2.LEN caps
//!   ZCR_EL1's). No predicate register is written. Where SME exists, PSTATE.SM is the
//!   guest's (not banked per EL): in streaming mode NEON may trap (without FA64), so
//!   [`path`] reads SVCR.SM and takes the scalar loop then.
//! - [`VectorUse::Scalar`] (the default, and everything off aarch64): no vector register at all.
//!
//! A vector length that is not a power of two keeps the SVE fill off (its rounds would not
//! tile a table) and uses the NEON one with Z saves.

#![cfg_attr(not(target_arch = "aarch64"), allow(dead_code, unused_mut))]

use core::sync::atomic::{AtomicU8, Ordering};

/// What the running binary's vector registers hold while it runs: which routines it may use
/// and how they keep that state (see the module's text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VectorUse {
    /// No vector registers: the scalar loops.
    Scalar,
    /// NEON; the live vector state is Q0-Q31.
    Neon,
    /// NEON (and the SVE fill); the live state is Z0-Z31 at up to this EL's vector length, and
    /// with `sme` PSTATE.SM may be set by whoever trapped here.
    Sve {
        /// SME is implemented: check SVCR.SM before any vector instruction.
        sme: bool,
        /// This EL's vector length in bytes (RDVL).
        vl: u64,
    },
}

/// Bits of [`MODE`].
const NEON: u8 = 1;
const ZSAVE: u8 = 2;
const SM_CHECK: u8 = 4;
const SVE_FILL: u8 = 8;

/// The binary's choice ([`set`]), as bits; 0 = scalar.
static MODE: AtomicU8 = AtomicU8::new(0);

impl VectorUse {
    /// The mode bits: NEON whenever vectors are used; Z saves with SVE; the SM check with
    /// SME; the SVE fill only where the vector length tiles a table's 4 KiB (a power of two,
    /// 16..=256 bytes).
    const fn bits(self) -> u8 {
        match self {
            VectorUse::Scalar => 0,
            VectorUse::Neon => NEON,
            VectorUse::Sve { sme, vl } => {
                let fill = if vl >= 16 && vl <= 256 && vl.is_power_of_two() { SVE_FILL } else { 0 };
                let zsave = if vl <= 256 { ZSAVE | NEON } else { 0 };
                // A vector length the save area cannot hold: no vector routine at all.
                if zsave == 0 {
                    0
                } else {
                    zsave | fill | if sme { SM_CHECK } else { 0 }
                }
            }
        }
    }
}

/// Sets what the vector routines may do on this CPU and every other (one rule for the
/// binary, written once at boot before any table operation that could use them).
pub fn set(v: VectorUse) {
    MODE.store(v.bits(), Ordering::Relaxed);
}

/// This EL's SVE vector length in bytes (RDVL).
///
/// # Safety
/// SVE must be implemented and untrapped at the current EL.
#[cfg(target_arch = "aarch64")]
pub unsafe fn sve_vl() -> u64 {
    extern "C" {
        fn __pgtable_vec_rdvl() -> u64;
    }
    // SAFETY: per the caller, RDVL executes; the routine changes nothing but x0.
    unsafe { __pgtable_vec_rdvl() }
}

/// Which loop a routine takes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// The general-register loop.
    Scalar,
    /// NEON, saving Q registers.
    Q,
    /// NEON (or SVE where `sve_fill`), saving Z registers.
    Z {
        /// The SVE fill may run.
        sve_fill: bool,
    },
}

/// The path for `bits` with PSTATE.SM = `streaming`.
const fn path_of(bits: u8, streaming: bool) -> Path {
    if bits & NEON == 0 || (bits & SM_CHECK != 0 && streaming) {
        Path::Scalar
    } else if bits & ZSAVE != 0 {
        Path::Z { sve_fill: bits & SVE_FILL != 0 }
    } else {
        Path::Q
    }
}

/// The path to take now: the binary's mode, and the scalar loop while in streaming mode.
#[inline(always)]
pub(crate) fn path() -> Path {
    let bits = MODE.load(Ordering::Relaxed);
    let mut streaming = false;
    #[cfg(target_arch = "aarch64")]
    if bits & SM_CHECK != 0 {
        let svcr: u64;
        // SAFETY: SM_CHECK is set only where SME is implemented and untrapped at this EL
        // (`set`'s caller); reading SVCR changes nothing.
        unsafe { core::arch::asm!("mrs {}, S3_3_C4_C2_2", out(reg) svcr, options(nomem, nostack, preserves_flags)) };
        streaming = svcr & 1 != 0;
    }
    path_of(bits, streaming)
}

/// Bytes one Z register takes in a save area (the largest vector length, 2048 bits).
pub(crate) const Z_BYTES: usize = 256;

/// A save area for `N` bytes of vector registers, aligned for paired Q stores.
#[repr(C, align(16))]
pub(crate) struct SaveArea<const N: usize>(pub(crate) core::mem::MaybeUninit<[u8; N]>);

impl<const N: usize> SaveArea<N> {
    pub(crate) const fn new() -> Self {
        SaveArea(core::mem::MaybeUninit::uninit())
    }
    pub(crate) fn ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr() as *mut u8
    }
}

/// Vector registers the flip uses: v0-v15 (32 entries), v16 kind, v17 mask, v18 kind ^ flip,
/// v19-v20 the two groups' checks.
pub(crate) const FLIP_REGS: usize = 21;
/// Vector registers the NEON fill uses: v0-v3 (8 entries), v4 the step.
pub(crate) const FILL_REGS: usize = 5;
/// Vector registers the SVE fill uses: z0 the entries, z1 the step.
pub(crate) const SVE_FILL_REGS: usize = 2;

#[cfg(target_arch = "aarch64")]
extern "C" {
    /// Flips whole groups of 16 from `p` while every entry's `mask` bits equal `kind`'s, up to
    /// the group starting at `last`; returns where it stopped. Saves and restores q0-q20 in
    /// `save` (336 bytes).
    pub(crate) fn __pgtable_vec_flip_q(
        p: *mut u64,
        last: *mut u64,
        kind: u64,
        mask: u64,
        nk: u64,
        save: *mut u8,
    ) -> *mut u64;
    /// As `__pgtable_vec_flip_q`, saving z0-z20 in `save` (21 vector lengths).
    pub(crate) fn __pgtable_vec_flip_z(
        p: *mut u64,
        last: *mut u64,
        kind: u64,
        mask: u64,
        nk: u64,
        save: *mut u8,
    ) -> *mut u64;
    /// Writes `first + i * step` to the 512 entries at `table`; saves and restores q0-q4 in
    /// `save` (80 bytes).
    pub(crate) fn __pgtable_vec_fill_q(table: *mut u64, first: u64, step: u64, save: *mut u8);
    /// As `__pgtable_vec_fill_q`, saving z0-z4 in `save` (5 vector lengths).
    pub(crate) fn __pgtable_vec_fill_qz(table: *mut u64, first: u64, step: u64, save: *mut u8);
    /// As `__pgtable_vec_fill_q` with SVE (INDEX, then one ADD and one STR per vector length of
    /// entries; the vector length a power of two, 16..=256 bytes); saves and restores z0-z1 in
    /// `save` (2 vector lengths). No predicate register is touched.
    pub(crate) fn __pgtable_vec_fill_sve(table: *mut u64, first: u64, step: u64, save: *mut u8);
}

/// The flip's body between its save and its restore: x0 = p (the write pointer), x1 = last,
/// x2 = kind, x3 = mask, x4 = kind ^ flip; returns x0. Two groups (32 entries, v0-v15) a round
/// while two remain, their checks in two chains (v19: the first group's, v20: the second's);
/// where the pair fails, the first group alone is flipped when it passes (each group of 16 all
/// or none, as the spec). One last group alone (fewer than 32 entries left) at 5. x6 is the read
/// pointer, x7 the check, x8 the last pointer a pair starts at.
#[cfg(target_arch = "aarch64")]
macro_rules! flip_body {
    () => {
        r#"
    dup     v16.2d, x2
    dup     v17.2d, x3
    dup     v18.2d, x4
    mov     x6, x0
    sub     x8, x1, #128
    cmp     x0, x8
    b.hi    5f
1:
    ld1     {{v0.2d-v3.2d}}, [x6], #64
    ld1     {{v4.2d-v7.2d}}, [x6], #64
    ld1     {{v8.2d-v11.2d}}, [x6], #64
    ld1     {{v12.2d-v15.2d}}, [x6], #64
    .irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    eor     v\i\().16b, v\i\().16b, v16.16b
    .endr
    orr     v19.16b, v0.16b, v1.16b
    .irp i, 2,3,4,5,6,7
    orr     v19.16b, v19.16b, v\i\().16b
    .endr
    orr     v20.16b, v8.16b, v9.16b
    .irp i, 10,11,12,13,14,15
    orr     v20.16b, v20.16b, v\i\().16b
    .endr
    orr     v20.16b, v20.16b, v19.16b
    and     v20.16b, v20.16b, v17.16b
    umaxv   s20, v20.4s
    fmov    w7, s20
    cbnz    w7, 3f
    .irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15
    eor     v\i\().16b, v\i\().16b, v18.16b
    .endr
    st1     {{v0.2d-v3.2d}}, [x0], #64
    st1     {{v4.2d-v7.2d}}, [x0], #64
    st1     {{v8.2d-v11.2d}}, [x0], #64
    st1     {{v12.2d-v15.2d}}, [x0], #64
    cmp     x0, x8
    b.ls    1b
    b       5f
3:
    and     v19.16b, v19.16b, v17.16b
    umaxv   s19, v19.4s
    fmov    w7, s19
    cbnz    w7, 9f
    .irp i, 0,1,2,3,4,5,6,7
    eor     v\i\().16b, v\i\().16b, v18.16b
    .endr
    st1     {{v0.2d-v3.2d}}, [x0], #64
    st1     {{v4.2d-v7.2d}}, [x0], #64
    b       9f
5:
    cmp     x0, x1
    b.hi    9f
    mov     x6, x0
    ld1     {{v0.2d-v3.2d}}, [x6], #64
    ld1     {{v4.2d-v7.2d}}, [x6], #64
    .irp i, 0,1,2,3,4,5,6,7
    eor     v\i\().16b, v\i\().16b, v16.16b
    .endr
    orr     v19.16b, v0.16b, v1.16b
    .irp i, 2,3,4,5,6,7
    orr     v19.16b, v19.16b, v\i\().16b
    .endr
    and     v19.16b, v19.16b, v17.16b
    umaxv   s19, v19.4s
    fmov    w7, s19
    cbnz    w7, 9f
    .irp i, 0,1,2,3,4,5,6,7
    eor     v\i\().16b, v\i\().16b, v18.16b
    .endr
    st1     {{v0.2d-v3.2d}}, [x0], #64
    st1     {{v4.2d-v7.2d}}, [x0], #64
9:
"#
    };
}

/// The NEON fill's body: x0 = table, x1 = first, x2 = step. v0-v3 hold 8 consecutive entries,
/// v4 eight steps; 64 entries a round, 8 rounds.
#[cfg(target_arch = "aarch64")]
macro_rules! fill_body {
    () => {
        r#"
    add     x4, x1, x2
    fmov    d0, x1
    mov     v0.d[1], x4
    lsl     x5, x2, #1
    dup     v4.2d, x5
    add     v1.2d, v0.2d, v4.2d
    add     v2.2d, v1.2d, v4.2d
    add     v3.2d, v2.2d, v4.2d
    lsl     x5, x2, #3
    dup     v4.2d, x5
    mov     x6, #8
1:
    .rept 8
    st1     {{v0.2d-v3.2d}}, [x0], #64
    add     v0.2d, v0.2d, v4.2d
    add     v1.2d, v1.2d, v4.2d
    add     v2.2d, v2.2d, v4.2d
    add     v3.2d, v3.2d, v4.2d
    .endr
    subs    x6, x6, #1
    b.ne    1b
"#
    };
}

// What this block guarantees, for the declarations above: each routine changes no general
// register but x0-x8 and the flags (caller-saved), writes memory only in its table's entries
// and its save area, and leaves every vector register as it found it: the ones it uses are
// stored to the save area first and loaded back last (Q, or whole Z at the current vector
// length), and no predicate, FFR, FPSR or FPCR is written (integer vector operations only).
#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    ".section .text.pgtable_vec, \"ax\"",
    ".arch_extension fp",
    ".arch_extension simd",
    ".arch_extension sve",
    //
    ".global __pgtable_vec_rdvl",
    ".type __pgtable_vec_rdvl, %function",
    "__pgtable_vec_rdvl:",
    "    rdvl    x0, #1",
    "    ret",
    //
    ".global __pgtable_vec_flip_q",
    ".type __pgtable_vec_flip_q, %function",
    "__pgtable_vec_flip_q:",
    // q0-q19 four to an instruction, then q20 (336 bytes): x5 steps through the area and is
    // set back to its start for the restore, which steps through it again.
    "    st1     {{v0.2d-v3.2d}}, [x5], #64",
    "    st1     {{v4.2d-v7.2d}}, [x5], #64",
    "    st1     {{v8.2d-v11.2d}}, [x5], #64",
    "    st1     {{v12.2d-v15.2d}}, [x5], #64",
    "    st1     {{v16.2d-v19.2d}}, [x5], #64",
    "    str     q20, [x5]",
    "    sub     x5, x5, #320",
    flip_body!(),
    "    ld1     {{v0.2d-v3.2d}}, [x5], #64",
    "    ld1     {{v4.2d-v7.2d}}, [x5], #64",
    "    ld1     {{v8.2d-v11.2d}}, [x5], #64",
    "    ld1     {{v12.2d-v15.2d}}, [x5], #64",
    "    ld1     {{v16.2d-v19.2d}}, [x5], #64",
    "    ldr     q20, [x5]",
    "    ret",
    //
    ".global __pgtable_vec_flip_z",
    ".type __pgtable_vec_flip_z, %function",
    "__pgtable_vec_flip_z:",
    "    str     z0, [x5, #0, mul vl]",
    "    str     z1, [x5, #1, mul vl]",
    "    str     z2, [x5, #2, mul vl]",
    "    str     z3, [x5, #3, mul vl]",
    "    str     z4, [x5, #4, mul vl]",
    "    str     z5, [x5, #5, mul vl]",
    "    str     z6, [x5, #6, mul vl]",
    "    str     z7, [x5, #7, mul vl]",
    "    str     z8, [x5, #8, mul vl]",
    "    str     z9, [x5, #9, mul vl]",
    "    str     z10, [x5, #10, mul vl]",
    "    str     z11, [x5, #11, mul vl]",
    "    str     z12, [x5, #12, mul vl]",
    "    str     z13, [x5, #13, mul vl]",
    "    str     z14, [x5, #14, mul vl]",
    "    str     z15, [x5, #15, mul vl]",
    "    str     z16, [x5, #16, mul vl]",
    "    str     z17, [x5, #17, mul vl]",
    "    str     z18, [x5, #18, mul vl]",
    "    str     z19, [x5, #19, mul vl]",
    "    str     z20, [x5, #20, mul vl]",
    flip_body!(),
    "    ldr     z0, [x5, #0, mul vl]",
    "    ldr     z1, [x5, #1, mul vl]",
    "    ldr     z2, [x5, #2, mul vl]",
    "    ldr     z3, [x5, #3, mul vl]",
    "    ldr     z4, [x5, #4, mul vl]",
    "    ldr     z5, [x5, #5, mul vl]",
    "    ldr     z6, [x5, #6, mul vl]",
    "    ldr     z7, [x5, #7, mul vl]",
    "    ldr     z8, [x5, #8, mul vl]",
    "    ldr     z9, [x5, #9, mul vl]",
    "    ldr     z10, [x5, #10, mul vl]",
    "    ldr     z11, [x5, #11, mul vl]",
    "    ldr     z12, [x5, #12, mul vl]",
    "    ldr     z13, [x5, #13, mul vl]",
    "    ldr     z14, [x5, #14, mul vl]",
    "    ldr     z15, [x5, #15, mul vl]",
    "    ldr     z16, [x5, #16, mul vl]",
    "    ldr     z17, [x5, #17, mul vl]",
    "    ldr     z18, [x5, #18, mul vl]",
    "    ldr     z19, [x5, #19, mul vl]",
    "    ldr     z20, [x5, #20, mul vl]",
    "    ret",
    //
    ".global __pgtable_vec_fill_q",
    ".type __pgtable_vec_fill_q, %function",
    "__pgtable_vec_fill_q:",
    "    stp     q0, q1, [x3]",
    "    stp     q2, q3, [x3, #32]",
    "    str     q4, [x3, #64]",
    fill_body!(),
    "    ldp     q0, q1, [x3]",
    "    ldp     q2, q3, [x3, #32]",
    "    ldr     q4, [x3, #64]",
    "    ret",
    //
    ".global __pgtable_vec_fill_qz",
    ".type __pgtable_vec_fill_qz, %function",
    "__pgtable_vec_fill_qz:",
    "    str     z0, [x3, #0, mul vl]",
    "    str     z1, [x3, #1, mul vl]",
    "    str     z2, [x3, #2, mul vl]",
    "    str     z3, [x3, #3, mul vl]",
    "    str     z4, [x3, #4, mul vl]",
    fill_body!(),
    "    ldr     z0, [x3, #0, mul vl]",
    "    ldr     z1, [x3, #1, mul vl]",
    "    ldr     z2, [x3, #2, mul vl]",
    "    ldr     z3, [x3, #3, mul vl]",
    "    ldr     z4, [x3, #4, mul vl]",
    "    ret",
    //
    // z0 = first + i * step (lane i), z1 = the step times the lanes per vector; four vectors a
    // round until the table's 4 KiB are written (a whole number of rounds: the vector length a
    // power of two, at most 256 bytes).
    ".global __pgtable_vec_fill_sve",
    ".type __pgtable_vec_fill_sve, %function",
    "__pgtable_vec_fill_sve:",
    "    str     z0, [x3, #0, mul vl]",
    "    str     z1, [x3, #1, mul vl]",
    "    index   z0.d, x1, x2",
    "    cntd    x4",
    "    mul     x4, x4, x2",
    "    mov     z1.d, x4",
    "    add     x5, x0, #4096",
    "1:",
    "    str     z0, [x0, #0, mul vl]",
    "    add     z0.d, z0.d, z1.d",
    "    str     z0, [x0, #1, mul vl]",
    "    add     z0.d, z0.d, z1.d",
    "    str     z0, [x0, #2, mul vl]",
    "    add     z0.d, z0.d, z1.d",
    "    str     z0, [x0, #3, mul vl]",
    "    add     z0.d, z0.d, z1.d",
    "    addvl   x0, x0, #4",
    "    cmp     x0, x5",
    "    b.lo    1b",
    "    ldr     z0, [x3, #0, mul vl]",
    "    ldr     z1, [x3, #1, mul vl]",
    "    ret",
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_takes_the_path_its_state_allows() {
        let b = |v: VectorUse| v.bits();
        assert_eq!(path_of(b(VectorUse::Scalar), false), Path::Scalar);
        assert_eq!(path_of(b(VectorUse::Neon), false), Path::Q);
        // The kernel's NEON mode never reads SVCR: streaming is impossible there.
        assert_eq!(path_of(b(VectorUse::Neon), true), Path::Q);
        let sve = VectorUse::Sve { sme: false, vl: 256 };
        assert_eq!(path_of(b(sve), false), Path::Z { sve_fill: true });
        let sme = VectorUse::Sve { sme: true, vl: 64 };
        assert_eq!(path_of(b(sme), false), Path::Z { sve_fill: true });
        assert_eq!(path_of(b(sme), true), Path::Scalar, "streaming mode: no NEON");
        // A vector length that is not a power of two: Z saves, the NEON fill.
        assert_eq!(path_of(b(VectorUse::Sve { sme: false, vl: 48 }), false), Path::Z { sve_fill: false });
        assert_eq!(path_of(b(VectorUse::Sve { sme: false, vl: 16 }), false), Path::Z { sve_fill: true });
        // Longer than the save area holds: scalar.
        assert_eq!(path_of(b(VectorUse::Sve { sme: false, vl: 512 }), false), Path::Scalar);
    }
}
