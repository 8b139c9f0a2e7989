//! Entry points shared by both binaries: Image header, self-relocation, boot stacks.
//!
//! Both binaries are linked at address 0 as position-independent executables (`-pie`) with
//! `lib/rt/link.ld`, and loaded wherever the loader likes (QEMU: RAM base + 2 MiB; the Pi 5
//! firmware: `kernel_address`; the hypervisor: any 2 MiB aligned guest address). Before any Rust
//! code runs, `__rt_entry` applies the `R_AARCH64_RELATIVE` entries of `.rela.dyn` (the xtask
//! refuses to produce an image with any other dynamic relocation), clears the BSS (but the
//! heap's block before `__bss_clear`, `rt::heap::HeapSpace`) and switches to
//! CPU 0's boot stack. The binary then provides:
//!
//! * `extern "C" fn rt_main(dtb: usize) -> !` for the boot CPU (x1 and x2 reach it as the boot
//!   loader or [`restart_at`] set them: a binary may take them as two more arguments),
//! * `extern "C" fn rt_secondary_main(cpu: usize) -> !` for CPUs started at
//!   [`secondary_entry_addr`] with the CPU index as PSCI `context_id`,
//! * `extern "C" fn rt_exception(frame: &mut TrapFrame, vector: u64)` (see [`crate::trap`]).

use crate::{MAX_CPUS, STACK_SIZE};

/// The address of a symbol (a function, a static, a linker or assembly label) as the running
/// code reaches it, computed PC-relative (`ADRP` + `ADD`) so that it never goes through the
/// GOT: it is right before and after the image moves (see [`relocate`]), even with the MMU off
/// after the move, when the GOT already holds the new addresses.
#[macro_export]
macro_rules! pc_relative {
    ($sym:path) => {{
        let a: usize;
        // SAFETY: computes an address relative to the PC; reads no memory.
        unsafe {
            core::arch::asm!(
                "adrp {a}, {s}",
                "add {a}, {a}, :lo12:{s}",
                a = out(reg) a,
                s = sym $sym,
                options(nomem, nostack, preserves_flags),
            )
        };
        a
    }};
}

// What this block guarantees: on return to Rust (rt_main / rt_secondary_main) nothing the boot
// loader or firmware left in the registers below is relied on. At EL2: SCTLR_EL2 is
// `el2::SCTLR_MMU_OFF` (MMU and data cache off, little-endian), HCR_EL2 is `el2::HCR_ENTRY`
// (E2H = 0, TGE = 0, no trap) or, where E2H cannot be cleared, that plus E2H (detected as Linux
// does: ID_AA64MMFR4_EL1.E2H0 < 0, or FAR_EL1 turning out to be FAR_EL2 after E2H was written
// 0), CPTR_EL2 is `el2::cptr_entry` in the matching layout (FP/SIMD untrapped, SVE/SME still
// trapped). At EL1: SCTLR_EL1 is `el1::SCTLR_MMU_OFF`, CPACR_EL1 is `el1::CPACR_ENTRY` (FP/SIMD
// untrapped). At both: PSTATE is set by an exception return to the same EL in its handler mode
// (SP_ELx) with D, A, I, F masked and PAN, UAO, SSBS, DIT, TCO, SS 0, whatever the CPU was
// entered with. Then: every R_AARCH64_RELATIVE slot holds base + addend, the BSS from
// __bss_clear is zero (boot CPU only; before it lie the heap blocks, left as found), SP is the
// top of this CPU's 16-byte aligned boot stack and x29/x30 are 0 so backtraces stop there.
// x0-x3 as the CPU was entered (x1-x3 reach rt_main). A bad relocation type or a CPU index >=
// MAX_CPUS parks the CPU in a WFE loop (nothing can print yet).
core::arch::global_asm!(
    r#"
.macro rt_mov_q reg, val
    movz    \reg, #((\val) & 0xffff)
    movk    \reg, #(((\val) >> 16) & 0xffff), lsl #16
    movk    \reg, #(((\val) >> 32) & 0xffff), lsl #32
    movk    \reg, #(((\val) >> 48) & 0xffff), lsl #48
.endm

.macro rt_entry_state
    mrs     x9, CurrentEL
    lsr     x9, x9, #2
    cmp     x9, #2
    b.ne    91f
    rt_mov_q x10, {sctlr_el2}
    msr     sctlr_el2, x10
    rt_mov_q x10, {hcr_entry}
    mrs     x11, S3_0_C0_C7_4           // ID_AA64MMFR4_EL1 (RAZ where it predates the CPU)
    sbfx    x11, x11, #24, #4           // E2H0: < 0 means HCR_EL2.E2H is RES1
    tbnz    x11, #63, 93f
    msr     hcr_el2, x10
    isb
    mov     x11, #1
    msr     far_el1, x11
    isb
    mov     x11, #2
    msr     far_el2, x11
    isb
    mrs     x11, far_el1
    cmp     x11, #2                     // FAR_EL1 is FAR_EL2: E2H stayed 1
    b.ne    94f
93: orr     x10, x10, #{e2h}
    msr     hcr_el2, x10
    isb
    rt_mov_q x10, {cptr_hvhe}
    b       95f
94: rt_mov_q x10, {cptr_nvhe}
95: msr     cptr_el2, x10
    mov     x10, #{spsr_el2}
    msr     spsr_el2, x10
    adr     x10, 96f
    msr     elr_el2, x10
    isb
    eret
91: rt_mov_q x10, {sctlr_el1}
    msr     sctlr_el1, x10
    rt_mov_q x10, {cpacr_el1}
    msr     cpacr_el1, x10
    mov     x10, #{spsr_el1}
    msr     spsr_el1, x10
    adr     x10, 96f
    msr     elr_el1, x10
    isb
    eret
96:
.endm

.section .text.head, "ax"
.global _start
_start:
    .inst   0xfa405a4d              // ccmp x18, #0, #0xd, pl: a no-op reading "MZ" (rt::pe::MZ_NOP)
    b       __rt_entry
    .quad   0                       // text_offset
    .quad   0                       // image_size: written by the xtask
    .quad   0xa                     // flags: little-endian, 4 KiB pages, anywhere
    .quad   0, 0, 0
    .word   0x644d5241              // "ARM\x64"
    .word   0                       // PE header offset: written by the xtask (rt::pe)

.section .text.rt_entry, "ax"
__rt_entry:
    mov     x19, x0
    rt_entry_state
    adrp    x9, __rela_start
    add     x9, x9, :lo12:__rela_start
    adrp    x10, __rela_end
    add     x10, x10, :lo12:__rela_end
    adrp    x11, __image_start
    add     x11, x11, :lo12:__image_start
1:  cmp     x9, x10
    b.hs    3f
    ldp     x12, x13, [x9], #16
    ldr     x14, [x9], #8
    cmp     x13, #1027              // R_AARCH64_RELATIVE
    b.ne    9f
    add     x14, x14, x11
    str     x14, [x12, x11]
    b       1b
3:  adrp    x9, __bss_clear
    add     x9, x9, :lo12:__bss_clear
    adrp    x10, __bss_end
    add     x10, x10, :lo12:__bss_end
    sub     x11, x10, x9            // 64 bytes per round while 64 are left (the stacks are
    bic     x11, x11, #63           // tens of KiB), then 16 at a time as the linker aligns it
    add     x11, x9, x11
6:  cmp     x9, x11
    b.hs    4f
    stp     xzr, xzr, [x9]
    stp     xzr, xzr, [x9, #16]
    stp     xzr, xzr, [x9, #32]
    stp     xzr, xzr, [x9, #48]
    add     x9, x9, #64
    b       6b
4:  cmp     x9, x10
    b.hs    5f
    stp     xzr, xzr, [x9], #16
    b       4b
5:  dsb     ish
    adrp    x9, __rt_stacks
    add     x9, x9, :lo12:__rt_stacks
    mov     x10, #{stack_size}
    add     sp, x9, x10
    mov     x29, #0
    mov     x30, #0
    mov     x0, x19
    bl      rt_main
9:  wfe
    b       9b

.global __rt_secondary_entry
__rt_secondary_entry:
    mov     x19, x0
    rt_entry_state
    cmp     x19, #{max_cpus}
    b.hs    9b
    adrp    x9, __rt_stacks
    add     x9, x9, :lo12:__rt_stacks
    mov     x10, #{stack_size}
    madd    x9, x19, x10, x9
    add     sp, x9, x10
    mov     x29, #0
    mov     x30, #0
    mov     x0, x19
    bl      rt_secondary_main
    b       9b

// A CPU released by a spin-table (no argument): its index is where RT_SPIN_MPIDR holds its
// MPIDR affinity; then as __rt_secondary_entry. Unknown MPIDR: park.
.global __rt_spin_entry
__rt_spin_entry:
    mrs     x9, mpidr_el1
    mov     x10, #0xffffff
    movk    x10, #0xff, lsl #32
    and     x9, x9, x10
    adrp    x11, RT_SPIN_MPIDR
    add     x11, x11, :lo12:RT_SPIN_MPIDR
    mov     x0, #0
1:  ldr     x12, [x11, x0, lsl #3]
    cmp     x12, x9
    b.eq    __rt_secondary_entry
    add     x0, x0, #1
    cmp     x0, #{max_cpus}
    b.lo    1b
8:  wfe
    b       8b

.section .bss.rt_stacks, "aw", %nobits
.balign 4096
.global __rt_stacks
__rt_stacks:
    .space  {stacks_total}
"#,
    stack_size = const STACK_SIZE,
    max_cpus = const MAX_CPUS,
    stacks_total = const STACK_SIZE * MAX_CPUS,
    sctlr_el2 = const crate::el2::SCTLR_MMU_OFF,
    hcr_entry = const crate::el2::HCR_ENTRY,
    e2h = const crate::el2::hcr::E2H,
    cptr_nvhe = const crate::el2::cptr_entry(crate::el2::Mode::Nvhe),
    cptr_hvhe = const crate::el2::cptr_entry(crate::el2::Mode::Hvhe(crate::el2::Why::Res1)),
    spsr_el2 = const crate::el2::SPSR_EL2H_MASKED,
    sctlr_el1 = const crate::el1::SCTLR_MMU_OFF,
    cpacr_el1 = const crate::el1::CPACR_ENTRY,
    spsr_el1 = const crate::el1::SPSR_EL1H_MASKED,
);

extern "C" {
    static __bss_start: u8;
    static __rela_start: u8;
    static __rela_end: u8;
    static __image_start: u8;
    static __image_end: u8;
    static __text_end: u8;
    static __rodata_end: u8;
    static __rt_stacks: u8;
    fn __rt_secondary_entry();
    fn __rt_spin_entry();
}

/// MPIDR affinity (Aff3..Aff0) of CPU index `i`, for [`spin_entry_addr`]: `u64::MAX` = none.
#[no_mangle]
static RT_SPIN_MPIDR: [core::sync::atomic::AtomicU64; MAX_CPUS] =
    [const { core::sync::atomic::AtomicU64::new(u64::MAX) }; MAX_CPUS];

/// Records that the CPU whose MPIDR affinity is `mpidr` is CPU `index` for [`spin_entry_addr`]
/// and makes it visible to a CPU that reads it with its MMU off (cleaned to the point of
/// coherency). Call before releasing that CPU.
#[cfg(target_arch = "aarch64")]
pub fn set_spin_mpidr(index: usize, mpidr: u64) {
    let slot = &RT_SPIN_MPIDR[index];
    slot.store(mpidr, core::sync::atomic::Ordering::Release);
    crate::cache::clean_to_poc(slot as *const _ as u64, 8);
}

/// Where a CPU released from a firmware spin-table (`cpu-release-addr`, no argument) must
/// begin: it finds its index from its MPIDR ([`set_spin_mpidr`]) and goes on as
/// [`secondary_entry_addr`]. Addressed as [`secondary_entry_addr`] is.
pub fn spin_entry_addr() -> usize {
    crate::pc_relative!(__rt_spin_entry)
}

/// Where a CPU started by PSCI CPU_ON must begin (context_id = CPU index), as the running code
/// reaches it: the physical address while the image runs identity mapped, else its virtual
/// address (a binary that moved itself, see [`relocate`], converts it back).
pub fn secondary_entry_addr() -> usize {
    crate::pc_relative!(__rt_secondary_entry)
}

/// Where the image sits in memory, as the linker script splits it.
#[derive(Debug, Clone, Copy)]
pub struct ImageLayout {
    /// First byte of the image (the header).
    pub start: usize,
    /// End of text (4 KiB aligned): [start, text_end) is RX.
    pub text_end: usize,
    /// End of read-only data (4 KiB aligned): [text_end, rodata_end) is R.
    pub rodata_end: usize,
    /// End of data and BSS (4 KiB aligned): [rodata_end, end) is RW, never executable.
    pub end: usize,
}

/// The running image's layout, at the addresses the running code reaches it (PC-relative).
pub fn image_layout() -> ImageLayout {
    // Only the addresses of linker-defined symbols are taken, never their contents.
    ImageLayout {
        start: crate::pc_relative!(__image_start),
        text_end: crate::pc_relative!(__text_end),
        rodata_end: crate::pc_relative!(__rodata_end),
        end: crate::pc_relative!(__image_end),
    }
}

/// The boot stack of `cpu` as `[bottom, top)` (PC-relative, like [`image_layout`]).
pub fn stack_bounds(cpu: usize) -> (usize, usize) {
    let base = crate::pc_relative!(__rt_stacks);
    let bottom = base + cpu.min(MAX_CPUS - 1) * STACK_SIZE;
    (bottom, bottom + STACK_SIZE)
}

/// All boot stacks as one `[bottom, top)` range (for backtrace bounds checks).
pub fn all_stacks() -> (usize, usize) {
    let (b, _) = stack_bounds(0);
    (b, b + MAX_CPUS * STACK_SIZE)
}

/// Copies the running image (text, read-only data and data: everything before the BSS) to
/// `new_base` and starts the copy from its entry point with x0 = `x0`, x1 = `x1`, x2 = `x2`:
/// `__rt_entry` applies the relocations for the new address, clears the new BSS and calls
/// `rt_main` again (x1 and x2 pass through untouched: a boot loader gives 0 there, so a binary
/// can tell a restart from a boot). Used by the hypervisor to move itself to the top of RAM.
///
/// # Safety
///
/// `new_base` is 4 KiB aligned; `[new_base, new_base + image_layout().end - start)` is RAM that
/// nothing uses, identity-accessible (MMU off) and clear of the running image; no other CPU
/// runs this image; and no static outside the BSS has been written since boot (the copy's
/// `.data` must be what the linker produced, up to the relocated pointers `__rt_entry` rewrites).
pub unsafe fn restart_at(new_base: u64, x0: u64, x1: u64, x2: u64) -> ! {
    let start = core::ptr::addr_of!(__image_start) as u64;
    let bss = core::ptr::addr_of!(__bss_start) as u64;
    let words = (bss - start).div_ceil(8);
    for i in 0..words {
        // SAFETY: both ranges are 8-byte aligned; the source is the loaded image (readable), the
        // destination is free RAM the caller gave us; they do not overlap. Volatile: with the MMU
        // off data accesses are Device memory, and the copy must be done word by word.
        unsafe {
            let v = core::ptr::read_volatile((start + 8 * i) as *const u64);
            core::ptr::write_volatile((new_base + 8 * i) as *mut u64, v);
        }
    }
    crate::cache::clean_invalidate_to_poc(new_base, 8 * words);
    // SAFETY: the copy is complete and at the point of coherency; the I-cache is invalidated so
    // no stale instruction from that memory is fetched; the branch goes to the copy's first
    // instruction (the Image header's branch to `__rt_entry`), which takes x0 and passes x1, x2 on.
    unsafe {
        core::arch::asm!(
            "ic iallu",
            "dsb ish",
            "isb",
            "br {entry}",
            entry = in(reg) new_base,
            in("x0") x0,
            in("x1") x1,
            in("x2") x2,
            options(noreturn),
        )
    }
}

/// `R_AARCH64_RELATIVE`: the only dynamic relocation the images carry (the xtask checks).
const R_AARCH64_RELATIVE: u64 = 1027;

/// Applies the image's `R_AARCH64_RELATIVE` relocations again, for the image linked to run at
/// `base` instead of where it was loaded: every relocated slot (pointers in data, the GOT) then
/// holds `base + addend`. The slots are written through the address the running code reaches
/// the image at. Used by a binary that moves itself to a new virtual address: after this call,
/// every absolute pointer the image holds points into the new mapping.
///
/// # Safety
///
/// The image must be mapped read-write at its current address (data) and, before any pointer
/// the call rewrote is used, fully mapped at `base`. No other CPU may run the image's code
/// meanwhile, and pointers computed before the call (on the stack, in registers, in data not
/// covered by the relocations, such as heap objects) keep their old values.
pub unsafe fn relocate(base: usize) {
    let image = image_layout().start;
    let mut p = crate::pc_relative!(__rela_start);
    let end = crate::pc_relative!(__rela_end);
    while p + 24 <= end {
        // SAFETY: [__rela_start, __rela_end) holds Elf64_Rela entries (offset, info, addend),
        // part of the mapped image; the linker script brackets exactly them.
        let (off, info, addend) = unsafe {
            let e = p as *const u64;
            (e.read(), e.add(1).read(), e.add(2).read())
        };
        if info & 0xffff_ffff == R_AARCH64_RELATIVE {
            // SAFETY: the slot lies in the image (the xtask checked every relocation when it
            // built the Image), mapped read-write now per the caller.
            unsafe { ((image as u64 + off) as *mut u64).write_volatile(base as u64 + addend) };
        }
        p += 24;
    }
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISH);
}

/// Continues at `pc` with `sp` as the stack pointer and `arg` in x0, leaving the current stack
/// behind. x29 and x30 are zeroed so backtraces end at `pc`'s frame.
///
/// # Safety
///
/// `pc` must be the address of an `extern "C" fn(usize) -> !` as mapped now, and `sp` a 16-byte
/// aligned stack top that stays valid; nothing on the current stack is used again.
pub unsafe fn jump(pc: usize, sp: usize, arg: usize) -> ! {
    // SAFETY: per the caller, `pc` is a never-returning function taking x0, and `sp` a valid
    // stack; x29/x30 = 0 end the frame chain.
    unsafe {
        core::arch::asm!(
            "mov sp, {sp}",
            "mov x29, xzr",
            "mov x30, xzr",
            "br {pc}",
            sp = in(reg) sp,
            pc = in(reg) pc,
            in("x0") arg,
            options(noreturn),
        )
    }
}
