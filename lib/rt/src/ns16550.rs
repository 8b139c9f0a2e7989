//! A 16550/8250 UART (`ns16550a`, `snps,dw-apb-uart`, the Pi's mini UART
//! `brcm,bcm2835-aux-uart`), polled transmit and receive. Register `n` lies at
//! `base + (n << reg_shift)` and is `reg_io_width` bytes wide (the DTB's `reg-shift` /
//! `reg-io-width`; the mini UART: 2 and 4). RBR/THR is register 0, LSR register 5 (DR: a byte
//! waiting; OE, PE, FE, BI: it came with a line error; THRE: room in the FIFO; TEMT: all sent).
//! The boot loader's line settings (LCR, divisors) are kept: the divisor latch is never
//! touched (QEMU's mini UART model ignores DLAB and would take divisor bytes as a character
//! and as IER).

use crate::rx::RxError;
use tock_registers::fields::Field;
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::register_bitfields;
use tock_registers::registers::ReadWrite;

register_bitfields! {u32,
    LSR [
        /// Data ready: a received byte waits in RBR.
        DR OFFSET(0) NUMBITS(1) [],
        /// Overrun: the receiver lost bytes before this one.
        OE OFFSET(1) NUMBITS(1) [],
        /// Parity error.
        PE OFFSET(2) NUMBITS(1) [],
        /// Framing error.
        FE OFFSET(3) NUMBITS(1) [],
        /// Break.
        BI OFFSET(4) NUMBITS(1) [],
        /// Transmit holding register empty (the mini UART: the FIFO takes a byte).
        THRE OFFSET(5) NUMBITS(1) [],
        /// Transmitter empty: nothing left to send (the mini UART: transmitter idle).
        TEMT OFFSET(6) NUMBITS(1) []
    ]
}

/// Receive buffer (read) and transmit holding register (write).
const RBR_THR: usize = 0;
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

    fn read(&self, reg: usize) -> u32 {
        let a = self.base + (reg << self.shift);
        if self.wide {
            // SAFETY: `new`'s caller guaranteed a live 16550 with 32-bit registers at this layout.
            unsafe { &*(a as *const ReadWrite<u32>) }.get()
        } else {
            // SAFETY: as above, with 8-bit registers.
            u32::from(unsafe { &*(a as *const ReadWrite<u8>) }.get())
        }
    }

    fn write(&self, reg: usize, v: u8) {
        let a = self.base + (reg << self.shift);
        if self.wide {
            // SAFETY: `new`'s caller guaranteed a live 16550 with 32-bit registers at this layout.
            unsafe { &*(a as *const ReadWrite<u32>) }.set(u32::from(v));
        } else {
            // SAFETY: as above, with 8-bit registers.
            unsafe { &*(a as *const ReadWrite<u8>) }.set(v);
        }
    }

    fn lsr_is_set(&self, field: Field<u32, LSR::Register>) -> bool {
        field.is_set(self.read(LSR_REG))
    }

    /// Nothing to switch on: a 16550 transmits once its line is set up (by the boot loader).
    pub fn enable(&self) {}

    /// Sends one byte, waiting until the transmitter takes it.
    pub fn put(&self, b: u8) {
        while !self.lsr_is_set(LSR::THRE) {
            core::hint::spin_loop();
        }
        self.write(RBR_THR, b);
    }

    /// The next received byte, if one is waiting; a byte that came with an overrun, parity,
    /// framing or break condition (LSR, read once before the byte: reading it clears them)
    /// comes back as [`RxError`].
    pub fn try_get(&self) -> Option<Result<u8, RxError>> {
        let lsr = self.read(LSR_REG);
        if !LSR::DR.is_set(lsr) {
            return None;
        }
        let byte = self.read(RBR_THR) as u8;
        let errors = LSR::OE.val(1).value | LSR::PE.val(1).value | LSR::FE.val(1).value | LSR::BI.val(1).value;
        Some(if lsr & errors == 0 { Ok(byte) } else { Err(RxError { byte, overrun: LSR::OE.is_set(lsr) }) })
    }

    /// Waits until everything sent has left the UART.
    pub fn flush(&self) {
        while !self.lsr_is_set(LSR::TEMT) {
            core::hint::spin_loop();
        }
    }
}
