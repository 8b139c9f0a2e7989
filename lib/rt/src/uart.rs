//! The console UART of whichever kind the DTB names (`board::UartKind`): one driver per kind,
//! each a small tock-registers block ([`crate::pl011`], [`crate::imx_uart`],
//! [`crate::cadence_uart`], [`crate::ns16550`]), used by the hypervisor, the kernel and the
//! chainloader alike.

use crate::cadence_uart::CadenceUart;
use crate::imx_uart::ImxUart;
use crate::ns16550::Ns16550;
use crate::pl011::Pl011;
pub use crate::rx::RxError;
use board::UartKind;

/// A console UART.
pub enum Uart {
    /// ARM PL011.
    Pl011(Pl011),
    /// i.MX UART.
    Imx(ImxUart),
    /// Cadence UART.
    Cadence(CadenceUart),
    /// 16550/8250.
    Ns16550(Ns16550),
}

impl Uart {
    /// The driver for `kind` at `base`.
    ///
    /// # Safety
    /// `base` must be the address (as mapped now) of that UART's register block, valid for the
    /// rest of the program, used by nothing else but this driver's polled protocol.
    pub unsafe fn new(kind: UartKind, base: usize) -> Uart {
        // SAFETY: the caller guarantees a live register block of `kind` at `base` (all four arms).
        unsafe {
            match kind {
                UartKind::Pl011 => Uart::Pl011(Pl011::new(base)),
                UartKind::Imx => Uart::Imx(ImxUart::new(base)),
                UartKind::Cadence => Uart::Cadence(CadenceUart::new(base)),
                UartKind::Ns16550 { reg_shift, reg_io_width } => {
                    Uart::Ns16550(Ns16550::new(base, reg_shift, reg_io_width))
                }
            }
        }
    }

    /// Switches the transmitter on if the boot loader left it off; keeps line settings.
    pub fn enable(&self) {
        match self {
            Uart::Pl011(u) => u.enable(),
            Uart::Imx(u) => u.enable(),
            Uart::Cadence(u) => u.enable(),
            Uart::Ns16550(u) => u.enable(),
        }
    }

    /// Sends one byte.
    pub fn put(&self, b: u8) {
        match self {
            Uart::Pl011(u) => u.put(b),
            Uart::Imx(u) => u.put(b),
            Uart::Cadence(u) => u.put(b),
            Uart::Ns16550(u) => u.put(b),
        }
    }

    /// Readies the receiver: switches it on if the boot loader left it off, and (PL011) turns
    /// the FIFOs on, keeping the line settings.
    pub fn enable_receiver(&self) {
        match self {
            Uart::Pl011(u) => u.enable_fifos(),
            Uart::Imx(u) => u.enable_receiver(),
            Uart::Cadence(u) => u.enable_receiver(),
            // Receives once its line is set up; the mini UART's FIFOs are always on.
            Uart::Ns16550(_) => {}
        }
    }

    /// The next received byte, if one is waiting, polled; a byte that arrived with a line
    /// error (overrun, framing, parity, break) comes back as [`RxError`].
    pub fn try_get(&self) -> Option<Result<u8, RxError>> {
        match self {
            Uart::Pl011(u) => u.try_get(),
            Uart::Imx(u) => u.try_get(),
            Uart::Cadence(u) => u.try_get(),
            Uart::Ns16550(u) => u.try_get(),
        }
    }

    /// The line rate the boot loader programmed, with a `clock_hz` reference clock, where the
    /// driver can read it without disturbing the line (PL011: from its divisors); `None`
    /// otherwise, or when it was never programmed (an emulated UART).
    pub fn line_rate(&self, clock_hz: u32) -> Option<u32> {
        match self {
            Uart::Pl011(u) => u.line_rate(clock_hz),
            _ => None,
        }
    }

    /// Waits until everything sent has left the UART.
    pub fn flush(&self) {
        match self {
            Uart::Pl011(u) => u.flush(),
            Uart::Imx(u) => u.flush(),
            Uart::Cadence(u) => u.flush(),
            Uart::Ns16550(u) => u.flush(),
        }
    }
}

impl core::fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                self.put(b'\r');
            }
            self.put(b);
        }
        Ok(())
    }
}
