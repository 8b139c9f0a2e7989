//! The Cadence UART (`cdns,uart-r1p12`, `xlnx,xuartps`: Zynq and ZynqMP), polled transmit.
//!
//! Registers (Zynq UltraScale+ TRM, "UART"; Linux `xilinx_uartps.c`): CR at 0x00 (TXEN,
//! TXDIS, RXEN, RXDIS), SR at 0x2c (TXEMPTY, TXFULL), FIFO at 0x30. The boot loader's line
//! settings are kept; the transmitter is switched on when it was left off (QEMU resets it off).

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
    SR [
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
