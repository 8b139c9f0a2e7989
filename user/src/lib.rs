//! The EL0 side of the guest kernel: a small system-call library (the ABI is
//! `abi::syscall`), a runtime (`_start`, panics, output), fault probes, threads, and the
//! counters EL0 may read. The programs are in `src/bin/`; the xtask builds them as static
//! position-independent executables and the kernel embeds them (`user=NAME` runs one).
#![no_std]
#![deny(missing_docs)]

pub mod fault;
pub mod io;
#[doc(hidden)]
pub use abi as __abi;
pub use abi::stats;
pub mod sys;
pub mod thread;
pub mod time;

pub use abi::syscall::{errno, map, prot, sysctl, Counters, PAGE_SIZE};

// What this block guarantees: a program starts at `_start` with x0/x1 = its argument string
// (pointer, length) and SP = the top of its stack (the kernel's doing); x29 and x30 are zeroed so
// backtraces end here, and `__user_start` never returns.
#[cfg(target_arch = "aarch64")]
core::arch::global_asm!(
    r#"
.section .text._start, "ax"
.global _start
_start:
    mov     x29, xzr
    mov     x30, xzr
    bl      __user_start
1:  b       1b
"#
);

/// Defines the program's entry: `run(args) -> status`, then `exit(status)`. A program's crate
/// root starts `#![cfg_attr(target_os = "none", no_std, no_main)]`: on the host (`cargo clippy
/// --workspace`, `cargo test --workspace`) it is compiled and linted, and its `main` only says
/// where it runs.
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        #[cfg(not(target_os = "none"))]
        fn main() {
            let _: fn(&str) -> i32 = $main;
            ::std::eprintln!("an EL0 program of the pgtlab kernel: `cargo xtask run --bootargs user=NAME` runs it");
            ::std::process::exit($crate::__abi::exit::USAGE as i32);
        }
        #[cfg(target_os = "none")]
        #[no_mangle]
        extern "C" fn __user_start(arg: *const u8, len: usize) -> ! {
            // SAFETY: the kernel passes a readable mapping of `len` bytes of UTF-8 (the
            // argument after `NAME:` of the boot word), or an empty one.
            let args = unsafe { core::str::from_utf8_unchecked(core::slice::from_raw_parts(arg, len)) };
            let f: fn(&str) -> i32 = $main;
            $crate::sys::exit(f(args) as u64)
        }
    };
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let mut w = io::Line::new();
    let _ = core::fmt::Write::write_fmt(&mut w, format_args!("user: PANIC: {info}\n"));
    w.flush_to(2);
    sys::exit(101)
}
