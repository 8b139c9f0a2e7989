//! Frame-pointer backtraces (both binaries build with `-C force-frame-pointers=yes`).
//!
//! An AArch64 frame record is `[x29 = previous record, x30 = return address]`. The walk stops at
//! a null or misaligned record, one outside the boot stacks, or one that does not move up the
//! stack, so a corrupt chain cannot fault the reporter. Addresses are printed absolute and
//! relative to the image start (`image+0x…`): the xtask turns the latter into function names.

use crate::start::{all_stacks, image_layout};

/// Deepest walk.
pub const MAX_DEPTH: usize = 32;

/// Calls `f(depth, return_address)` for each frame record starting at `fp`.
pub fn walk(mut fp: usize, mut f: impl FnMut(usize, usize)) {
    let (lo, hi) = all_stacks();
    for depth in 0..MAX_DEPTH {
        if fp == 0 || !fp.is_multiple_of(16) || fp < lo || fp + 16 > hi {
            return;
        }
        // SAFETY: fp is 16-byte aligned and inside the boot stacks, which are always mapped.
        let (next, lr) = unsafe { (*(fp as *const usize), *((fp + 8) as *const usize)) };
        if lr == 0 {
            return;
        }
        f(depth, lr);
        if next <= fp {
            return;
        }
        fp = next;
    }
}

/// The current frame pointer.
#[inline(always)]
pub fn current_fp() -> usize {
    let fp: usize;
    // SAFETY: reads x29 only; no memory or flags are touched.
    unsafe { core::arch::asm!("mov {}, x29", out(reg) fp, options(nomem, nostack, preserves_flags)) };
    fp
}

/// Prints `  #N 0x… image+0x…` lines through `print`.
pub fn print(fp: usize, mut print: impl FnMut(core::fmt::Arguments)) {
    let base = image_layout().start;
    print(format_args!("backtrace:\n"));
    walk(fp, |depth, lr| {
        // The return address points after the call; show the call itself.
        let pc = lr.wrapping_sub(4);
        print(format_args!("  #{depth:<2} {pc:#018x} image+{:#x}\n", pc.wrapping_sub(base)));
    });
}
