//! A program that does what a task may not, as its argument says, with no fault handler: the
//! kernel must end it with a report and go on. `kernel-read` (an EL1 address), `null-write`,
//! `undef` (an undefined instruction), `exec-data` (a jump into its read-write data), `bad-sp`
//! (a misaligned stack pointer used for an access).
#![cfg_attr(target_os = "none", no_std, no_main)]

use core::sync::atomic::{AtomicU32, Ordering};

user::entry!(run);

/// A `RET` in read-write data: never executable.
static DATA_RET: AtomicU32 = AtomicU32::new(0xd65f_03c0);

fn run(args: &str) -> i32 {
    user::println!("fault: about to {args}");
    match args {
        "kernel-read" => {
            // SAFETY: deliberately reads a kernel address; the kernel ends this task.
            unsafe { core::ptr::read_volatile(0xffff_0000_2000_0000 as *const u64) };
        }
        "null-write" => {
            // SAFETY: deliberately writes near address 0 (unmapped); the kernel ends this task.
            unsafe { core::ptr::write_volatile(core::ptr::null_mut::<u64>().wrapping_add(2), 7) };
        }
        "undef" => {
            // SAFETY: a permanently undefined instruction; the kernel ends this task.
            unsafe { core::arch::asm!("udf #1") };
        }
        "exec-data" => {
            DATA_RET.store(0xd65f_03c0, Ordering::Relaxed);
            // SAFETY: deliberately calls into read-write (never executable) data; the kernel
            // ends this task on the instruction fetch.
            let f: extern "C" fn() = unsafe { core::mem::transmute(&DATA_RET as *const AtomicU32) };
            f();
        }
        "bad-pc" => {
            let target = run as *const () as usize + 2;
            // SAFETY: deliberately branches to a misaligned address; the kernel ends this task.
            unsafe { core::arch::asm!("br {}", in(reg) target, options(noreturn)) };
        }
        _ => {
            user::println!("fault: unknown fault {args:?}");
            return 2;
        }
    }
    user::println!("fault: survived {args}: the kernel did not stop it");
    3
}
