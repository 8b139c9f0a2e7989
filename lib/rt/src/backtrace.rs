//! Frame-pointer backtraces (both binaries build with `-C force-frame-pointers=yes`).
//!
//! An AArch64 frame record is `[x29 = previous record, x30 = return address]`. The walk stops at
//! a null or misaligned record, one outside the stack the walk started on (a boot stack, or a
//! stack the binary names through [`set_stack_lookup`], e.g. a task's kernel stack), or one that
//! does not move up the stack, so a corrupt chain cannot fault the reporter. Addresses are printed absolute and
//! relative to the image start (`image+0x…`): the xtask turns the latter into function names.

use crate::start::{all_stacks, image_layout};
use core::sync::atomic::{AtomicUsize, Ordering};

/// Deepest walk.
pub const MAX_DEPTH: usize = 32;

/// The binary's `fn(address) -> Option<(bottom, top)>` naming the mapped stack that holds an
/// address (beyond the boot stacks), as an address; 0 when none was set.
static STACK_LOOKUP: AtomicUsize = AtomicUsize::new(0);

/// Lets backtraces follow frame records on stacks other than the boot stacks: `lookup(addr)`
/// returns the `[bottom, top)` of the stack holding `addr`, which must stay mapped while a walk
/// may read it. It runs in panic and fault reports: it must not take locks or allocate.
pub fn set_stack_lookup(lookup: fn(usize) -> Option<(usize, usize)>) {
    STACK_LOOKUP.store(lookup as usize, Ordering::Release);
}

/// The stack holding `addr`: the boot stacks, or what the binary's lookup says.
fn stack_of(addr: usize) -> Option<(usize, usize)> {
    let (lo, hi) = all_stacks();
    if (lo..hi).contains(&addr) {
        return Some((lo, hi));
    }
    match STACK_LOOKUP.load(Ordering::Acquire) {
        0 => None,
        f => {
            // SAFETY: only `set_stack_lookup` stores here, always a `fn(usize) -> Option<..>`.
            let lookup = unsafe { core::mem::transmute::<usize, fn(usize) -> Option<(usize, usize)>>(f) };
            lookup(addr)
        }
    }
}

/// Calls `f(depth, return_address)` for each frame record starting at `fp`.
pub fn walk(mut fp: usize, mut f: impl FnMut(usize, usize)) {
    let Some((lo, hi)) = stack_of(fp) else {
        return;
    };
    for depth in 0..MAX_DEPTH {
        if fp == 0 || !fp.is_multiple_of(16) || fp < lo || fp + 16 > hi {
            return;
        }
        // SAFETY: fp is 16-byte aligned and inside one stack that stays mapped (the boot
        // stacks always are; a looked-up one per `set_stack_lookup`'s contract).
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
