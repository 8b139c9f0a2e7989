//! Programs the Linux guest runs (static arm64 Linux executables, no libc), and what they
//! share: the few system calls they make (`sys`), the process entry ([`entry!`]), output
//! without an allocator (`say!`).
//!
//! * `pgtlab-dirty` (`src/main.rs`): writes known pages at a known rate while the hypervisor
//!   dirty-logs and pre-copies the guest (`hyp.migrate`).
//! * `pgtlab-bench` (`src/bench.rs`): the EL0 benchmark of `lib/el0bench` on Linux, the peer
//!   of the project's kernel in `cargo xtask bench mprotect --peer linux`.
#![no_std]

// The system calls are aarch64 `svc`s: on the host (`cargo clippy --workspace`) the crate is
// only its docs and the `entry!` macro.
#[cfg(target_os = "none")]
pub mod perf;
#[cfg(target_os = "none")]
pub mod sys;

/// Defines the process entry: `_start` takes the initial stack, calls `$main(&Args) -> i32`
/// and exits the process with its status.
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        // What this block guarantees: at `_start` the kernel left argc at [sp], then argv,
        // NULL, envp, NULL; x0 gets that stack address and `__linux_user_start` never returns
        // (it calls exit_group).
        core::arch::global_asm!(
            ".globl _start",
            "_start:",
            "mov x0, sp",
            "mov x29, xzr",
            "mov x30, xzr",
            "bl {start}",
            "b .",
            start = sym __linux_user_start
        );

        extern "C" fn __linux_user_start(sp: *const u64) -> ! {
            // SAFETY: `sp` is the initial stack pointer (see the block above).
            let args = unsafe { $crate::sys::Args::from_initial_stack(sp) };
            let f: fn(&$crate::sys::Args) -> i32 = $main;
            $crate::sys::exit(f(&args))
        }
    };
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    say!("linux-user: panic: {info}");
    sys::exit(101)
}
