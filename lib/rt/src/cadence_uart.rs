//! The Cadence UART (`cdns,uart-r1p12`, `xlnx,xuartps`: Zynq and ZynqMP), polled transmit and
//! receive.
//!
//! Registers (Zynq UltraScale+ TRM, "UART"; Linux `xilinx_uartps.c`): CR at 0x00 (TXEN,
//! TXDIS, RXEN, RXDIS), ISR at 0x14 (receive overrun, framing and parity errors, write 1 to
//! clear), SR at 0x2c (RXEMPTY, TXEMPTY, TXFULL), FIFO at 0x30. The boot loader's line
//! settings are kept; the transmitter is switched on when it was left off (QEMU resets it off).

use crate::rx::RxError;
use tock_registers::interfaces::{ReadWriteable, Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite};
use tock_registers::{register_bitfields, register_structs};

register_bitfields! {u32,
    CR [
        RXEN OFFSET(2) NUMBITS(1) [],
        RXDIS OFFSET(3) NUMBITS(1) [],
        TXEN OFFSET(4) NUMBITS(1) [],
        TXDIS OFFSET(5) NUMBITS(1) []
    ],
    ISR [
        /// Receive overrun: bytes were lost.
        ROVR OFFSET(5) NUMBITS(1) [],
        /// Framing error.
        FRAME OFFSET(6) NUMBITS(1) [],
        /// Parity error.
        PARE OFFSET(7) NUMBITS(1) []
    ],
    SR [
        /// Receive FIFO empty.
        RXEMPTY OFFSET(1) NUMBITS(1) [],
        /// Transmit FIFO empty (and nothing being sent).
        TXEMPTY OFFSET(3) NUMBITS(1) [],
        /// Transmit FIFO full.
        TXFULL OFFSET(4) NUMBITS(1) []
    ]
}

register_structs! {
    /// The Cadence UART register block.
    pub Registers {
        (0x00 => cr: ReadWrite<u32, CR::Register>),
        (0x04 => _reserved0),
        (0x14 => isr: ReadWrite<u32, ISR::Register>),
        (0x18 => _reserved1),
        (0x2c => sr: ReadOnly<u32, SR::Register>),
        (0x30 => fifo: ReadWrite<u32>),
        (0x34 => @END),
    }
}

/// A Cadence UART at a fixed address.
pub struct CadenceUart {
    base: usize,
}

impl CadenceUart {
    /// # Safety
    /// `base` must be the address (as mapped now) of a Cadence UART's register block, valid
    /// for the rest of the program, used by nothing else but this driver's polled protocol.
    pub unsafe fn new(base: usize) -> Self {
        Self { base }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s caller guaranteed `base` is a live Cadence UART register block.
        unsafe { &*(self.base as *const Registers) }
    }

    /// Switches the transmitter (and receiver) on if they are off.
    pub fn enable(&self) {
        let cr = &self.regs().cr;
        if !cr.is_set(CR::TXEN) || cr.is_set(CR::TXDIS) {
            cr.modify(CR::TXDIS::CLEAR + CR::RXDIS::CLEAR + CR::TXEN::SET + CR::RXEN::SET);
        }
    }

    /// Switches the receiver on if it is off.
    pub fn enable_receiver(&self) {
        let cr = &self.regs().cr;
        if !cr.is_set(CR::RXEN) || cr.is_set(CR::RXDIS) {
            cr.modify(CR::RXDIS::CLEAR + CR::RXEN::SET);
        }
    }

    /// The next received byte, if one is waiting; a byte read while the interrupt status holds
    /// a receive error (overrun, framing, parity: cleared here) comes back as [`RxError`].
    pub fn try_get(&self) -> Option<Result<u8, RxError>> {
        let r = self.regs();
        if r.sr.is_set(SR::RXEMPTY) {
            return None;
        }
        let byte = r.fifo.get() as u8;
        let isr = r.isr.extract();
        let errors = ISR::ROVR::SET + ISR::FRAME::SET + ISR::PARE::SET;
        if isr.get() & errors.value == 0 {
            return Some(Ok(byte));
        }
        r.isr.set(isr.get() & errors.value);
        Some(Err(RxError { byte, overrun: isr.is_set(ISR::ROVR) }))
    }

    /// Sends one byte, waiting while the FIFO is full.
    pub fn put(&self, b: u8) {
        while self.regs().sr.is_set(SR::TXFULL) {
            core::hint::spin_loop();
        }
        self.regs().fifo.set(b as u32);
    }

    /// Waits until everything sent has left the UART.
    pub fn flush(&self) {
        while !self.regs().sr.is_set(SR::TXEMPTY) {
            core::hint::spin_loop();
        }
    }
}
