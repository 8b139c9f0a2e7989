//! ARM PL011 UART (QEMU `virt` at 0x0900_0000, Pi 5 debug UART at 0x10_7d00_1000).
//!
//! Transmit only, polled. The firmware's (or QEMU's) line settings are kept: on the Pi 5 the
//! firmware has already programmed the baud rate for its 48 MHz clock, so we never reprogram it.

use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

register_bitfields! {u32,
    FR [
        /// Transmit FIFO full.
        TXFF OFFSET(5) NUMBITS(1) [],
        /// UART busy transmitting.
        BUSY OFFSET(3) NUMBITS(1) []
    ],
    CR [
        UARTEN OFFSET(0) NUMBITS(1) [],
        TXE OFFSET(8) NUMBITS(1) [],
        RXE OFFSET(9) NUMBITS(1) []
    ]
}

register_structs! {
    /// The PL011 register block.
    pub Registers {
        (0x00 => dr: ReadWrite<u32>),
        (0x04 => _reserved0),
        (0x18 => fr: ReadOnly<u32, FR::Register>),
        (0x1c => _reserved1),
        (0x30 => cr: ReadWrite<u32, CR::Register>),
        (0x34 => _reserved2),
        (0x44 => icr: WriteOnly<u32>),
        (0x48 => @END),
    }
}

/// A PL011 at a fixed address.
pub struct Pl011 {
    base: usize,
}

impl Pl011 {
    /// # Safety
    /// `base` must be the address (as mapped now) of a PL011's register block, valid for the rest
    /// of the program, and nothing else may use it except through this driver (or with the same
    /// polled protocol).
    pub unsafe fn new(base: usize) -> Self {
        Self { base }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s caller guaranteed `base` is a live PL011 register block for good.
        unsafe { &*(self.base as *const Registers) }
    }

    /// Enables the transmitter if the firmware left the UART off; keeps its line settings.
    pub fn enable(&self) {
        if !self.regs().cr.is_set(CR::UARTEN) || !self.regs().cr.is_set(CR::TXE) {
            self.regs().icr.set(0x7ff);
            self.regs().cr.write(CR::UARTEN::SET + CR::TXE::SET + CR::RXE::SET);
        }
    }

    /// Sends one byte, waiting while the FIFO is full.
    pub fn put(&self, b: u8) {
        while self.regs().fr.is_set(FR::TXFF) {
            core::hint::spin_loop();
        }
        self.regs().dr.set(b as u32);
    }

    /// Waits until everything sent has left the UART.
    pub fn flush(&self) {
        while self.regs().fr.is_set(FR::BUSY) {
            core::hint::spin_loop();
        }
    }
}

impl core::fmt::Write for Pl011 {
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
