//! The console: one UART (`crate::uart`: PL011, i.MX, Cadence or 16550) behind a spin lock, shared by all CPUs, with `print!`/`println!`.
//!
//! Lines are written whole under the lock so output from several CPUs does not interleave
//! within a line (report records depend on that). [`panic_print`] is for paths that may already
//! hold the lock (a panic inside a print): it waits a bounded time and then writes regardless.

use crate::uart::Uart;
use board::UartKind;
use core::fmt::Write;
use spin::Mutex;

static CONSOLE: Mutex<Option<Uart>> = Mutex::new(None);

/// Installs the console UART, a `kind` at `base`.
///
/// # Safety
/// As [`Uart::new`]: `base` must be a mapped UART of that kind owned by this console from now on.
pub unsafe fn init(kind: UartKind, base: usize) {
    // SAFETY: forwarded from the caller.
    let uart = unsafe { Uart::new(kind, base) };
    uart.enable();
    *CONSOLE.lock() = Some(uart);
}

#[doc(hidden)]
pub fn _print(args: core::fmt::Arguments) {
    if let Some(uart) = CONSOLE.lock().as_mut() {
        let _ = uart.write_fmt(args);
    }
}

/// Prints even if another context holds the console lock (used by panic and fault reports).
pub fn panic_print(args: core::fmt::Arguments) {
    for _ in 0..10_000_000 {
        if let Some(mut guard) = CONSOLE.try_lock() {
            if let Some(uart) = guard.as_mut() {
                let _ = uart.write_fmt(args);
            }
            return;
        }
        core::hint::spin_loop();
    }
    // SAFETY: the lock holder is stuck (we waited ~10^7 spins); writing through the same polled
    // protocol at worst interleaves characters, which is better than losing the report.
    unsafe { CONSOLE.force_unlock() };
    if let Some(uart) = CONSOLE.lock().as_mut() {
        let _ = uart.write_fmt(args);
    }
}

/// Waits until the UART has sent everything (before powering off).
pub fn flush() {
    if let Some(uart) = CONSOLE.lock().as_ref() {
        uart.flush();
    }
}

/// Prints to the console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::_print(format_args!($($arg)*)) };
}

/// Prints a line to the console (one lock hold for the whole line).
#[macro_export]
macro_rules! println {
    () => { $crate::console::_print(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::console::_print(format_args!("{}\n", format_args!($($arg)*))) };
}
