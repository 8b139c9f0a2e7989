//! ARM PL011 UART, at the address the DTB gives (QEMU `virt`: 0x0900_0000; the Pi 5's debug
//! UART: 0x10_7d00_1000).
//!
//! Polled transmit and receive. The firmware's (or QEMU's) line
//! settings are kept: on the Pi 5 the firmware has programmed the baud rate (115200 unless
//! config.txt says `init_uart_baud=`) for the UART clock it set up, so we never reprogram it.
//! [`Pl011::line_rate`] tells what it was set to, from the divisors and the DTB's clock.

use crate::rx::RxError;
use tock_registers::interfaces::{ReadWriteable, Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

register_bitfields! {u32,
    FR [
        /// Transmit FIFO full.
        TXFF OFFSET(5) NUMBITS(1) [],
        /// Receive FIFO empty.
        RXFE OFFSET(4) NUMBITS(1) [],
        /// UART busy transmitting.
        BUSY OFFSET(3) NUMBITS(1) []
    ],
    LCR_H [
        /// FIFOs on (16 deep on QEMU, 32 on a PL011 r1p5 such as the Pi 5's); off, the
        /// UART holds one byte each way.
        FEN OFFSET(4) NUMBITS(1) []
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
        (0x24 => ibrd: ReadOnly<u32>),
        (0x28 => fbrd: ReadOnly<u32>),
        (0x2c => lcr_h: ReadWrite<u32, LCR_H::Register>),
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

    /// Turns the FIFOs on if they are off, keeping the line settings (word length, parity,
    /// stop bits, and the baud divisors the firmware programmed, which a write of LCR_H
    /// latches unchanged). Without them a receiver must take every byte before the next one
    /// arrives (QEMU then delivers one byte per main-loop turn).
    pub fn enable_fifos(&self) {
        let r = self.regs();
        if r.lcr_h.is_set(LCR_H::FEN) {
            return;
        }
        self.flush();
        // The PL011 wants the UART off while LCR_H changes.
        let cr = r.cr.get();
        r.cr.set(cr & !1);
        r.lcr_h.modify(LCR_H::FEN::SET);
        r.cr.set(cr);
    }

    /// Sends one byte, waiting while the FIFO is full.
    pub fn put(&self, b: u8) {
        while self.regs().fr.is_set(FR::TXFF) {
            core::hint::spin_loop();
        }
        self.regs().dr.set(b as u32);
    }

    /// The next received byte, if one is waiting. Bits 8-11 of the data register (framing,
    /// parity, break, overrun) come back as [`RxError`] with the byte they arrived with.
    pub fn try_get(&self) -> Option<Result<u8, RxError>> {
        if self.regs().fr.is_set(FR::RXFE) {
            return None;
        }
        let d = self.regs().dr.get();
        let flags = (d >> 8) & 0xf;
        Some(if flags == 0 { Ok(d as u8) } else { Err(RxError { byte: d as u8, overrun: flags & 8 != 0 }) })
    }

    /// The baud rate the divisors give with a `clock_hz` reference clock: `clock / (16 *
    /// (IBRD + FBRD / 64))`. `None` when the divisors were never programmed (QEMU: its model
    /// ignores them and moves bytes as fast as the host side delivers them).
    pub fn line_rate(&self, clock_hz: u32) -> Option<u32> {
        let (ibrd, fbrd) = (self.regs().ibrd.get() & 0xffff, self.regs().fbrd.get() & 0x3f);
        let divisor_64ths = u64::from(ibrd) * 64 + u64::from(fbrd);
        (ibrd != 0).then(|| (u64::from(clock_hz) * 4 / divisor_64ths) as u32)
    }

    /// Waits until everything sent has left the UART.
    pub fn flush(&self) {
        while self.regs().fr.is_set(FR::BUSY) {
            core::hint::spin_loop();
        }
    }
}
