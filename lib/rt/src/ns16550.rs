//! A 16550/8250 UART (`ns16550a`, `snps,dw-apb-uart`, the Pi's mini UART
//! `brcm,bcm2835-aux-uart`), polled transmit. Register `n` lies at `base + (n << reg_shift)`
//! and is `reg_io_width` bytes wide (the DTB's `reg-shift` / `reg-io-width`; the mini UART:
//! 2 and 4). THR is register 0, LSR register 5 (THRE: room in the FIFO; TEMT: all sent).
//! The boot loader's line settings (LCR, divisors) are kept.

use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::register_bitfields;
use tock_registers::registers::ReadWrite;

register_bitfields! {u32,
    LSR [
        /// Transmit holding register empty (the mini UART: the FIFO takes a byte).
        THRE OFFSET(5) NUMBITS(1) [],
        /// Transmitter empty: nothing left to send (the mini UART: transmitter idle).
        TEMT OFFSET(6) NUMBITS(1) []
    ]
}

const THR: usize = 0;
const LSR_REG: usize = 5;

/// A 16550 at a fixed address.
pub struct Ns16550 {
    base: usize,
    shift: u8,
    wide: bool,
}

impl Ns16550 {
    /// # Safety
    /// `base` must be the address (as mapped now) of a 16550's registers laid out with
    /// `reg_shift` and accessed `reg_io_width` (1 or 4) bytes wide, valid for the rest of the
    /// program, used by nothing else but this driver's polled protocol.
    pub unsafe fn new(base: usize, reg_shift: u8, reg_io_width: u8) -> Self {
        Self { base, shift: reg_shift, wide: reg_io_width == 4 }
    }

    fn lsr(&self) -> u32 {
        let a = self.base + (LSR_REG << self.shift);
        if self.wide {
            // SAFETY: `new`'s caller guaranteed a live 16550 with 32-bit registers at this layout.
            unsafe { &*(a as *const ReadWrite<u32, LSR::Register>) }.get()
        } else {
            // SAFETY: as above, with 8-bit registers.
            u32::from(unsafe { &*(a as *const ReadWrite<u8>) }.get())
        }
    }

    fn lsr_is_set(&self, field: tock_registers::fields::Field<u32, LSR::Register>) -> bool {
        field.is_set(self.lsr())
    }

    /// Nothing to switch on: a 16550 transmits once its line is set up (by the boot loader).
    pub fn enable(&self) {}

    /// Sends one byte, waiting until the transmitter takes it.
    pub fn put(&self, b: u8) {
        while !self.lsr_is_set(LSR::THRE) {
            core::hint::spin_loop();
        }
        let a = self.base + (THR << self.shift);
        if self.wide {
            // SAFETY: `new`'s caller guaranteed a live 16550 with 32-bit registers at this layout.
            unsafe { &*(a as *const ReadWrite<u32>) }.set(u32::from(b));
        } else {
            // SAFETY: as above, with 8-bit registers.
            unsafe { &*(a as *const ReadWrite<u8>) }.set(b);
        }
    }

    /// Waits until everything sent has left the UART.
    pub fn flush(&self) {
        while !self.lsr_is_set(LSR::TEMT) {
            core::hint::spin_loop();
        }
    }
}
