//! The i.MX UART (i.MX 6/7/8: `fsl,imx6q-uart`, `fsl,imx8mp-uart`), polled transmit and
//! receive.
//!
//! Registers (i.MX 8M Plus reference manual, "UART"): URXD (the byte and its error flags) at
//! 0x00, UTXD at 0x40, UCR1 (UARTEN) at 0x80, UCR2 (SRST, RXEN, TXEN, WS) at 0x84, USR2 (RDR:
//! a byte waiting; TXDC: transmission complete) at 0x98, UTS (TXFULL, TXEMPTY) at 0xb4. The boot loader's (or QEMU's) line settings are kept; the UART is
//! only switched on when it was left off.

use crate::rx::RxError;
use tock_registers::interfaces::{ReadWriteable, Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

register_bitfields! {u32,
    URXD [
        DATA OFFSET(0) NUMBITS(8) [],
        /// Parity error.
        PRERR OFFSET(10) NUMBITS(1) [],
        /// Break.
        BRK OFFSET(11) NUMBITS(1) [],
        /// Framing error.
        FRMERR OFFSET(12) NUMBITS(1) [],
        /// Receiver overrun: bytes were lost before this one.
        OVRRUN OFFSET(13) NUMBITS(1) [],
        /// Any of the above.
        ERR OFFSET(14) NUMBITS(1) []
    ],
    UCR1 [
        /// UART enable.
        UARTEN OFFSET(0) NUMBITS(1) []
    ],
    UCR2 [
        /// Software reset, active low: 1 = not in reset.
        SRST OFFSET(0) NUMBITS(1) [],
        RXEN OFFSET(1) NUMBITS(1) [],
        TXEN OFFSET(2) NUMBITS(1) [],
        /// Word size: 1 = 8 bits.
        WS OFFSET(5) NUMBITS(1) [],
        /// Ignore the RTS pin.
        IRTS OFFSET(14) NUMBITS(1) []
    ],
    USR2 [
        /// Receive data ready: a byte waits in URXD.
        RDR OFFSET(0) NUMBITS(1) [],
        /// Transmission complete: shift register and FIFO empty.
        TXDC OFFSET(3) NUMBITS(1) []
    ],
    UTS [
        /// Transmit FIFO full.
        TXFULL OFFSET(4) NUMBITS(1) []
    ]
}

register_structs! {
    /// The i.MX UART register block.
    pub Registers {
        (0x00 => urxd: ReadOnly<u32, URXD::Register>),
        (0x04 => _reserved_rx),
        (0x40 => utxd: WriteOnly<u32>),
        (0x44 => _reserved0),
        (0x80 => ucr1: ReadWrite<u32, UCR1::Register>),
        (0x84 => ucr2: ReadWrite<u32, UCR2::Register>),
        (0x88 => _reserved1),
        (0x98 => usr2: ReadOnly<u32, USR2::Register>),
        (0x9c => _reserved2),
        (0xb4 => uts: ReadOnly<u32, UTS::Register>),
        (0xb8 => @END),
    }
}

/// An i.MX UART at a fixed address.
pub struct ImxUart {
    base: usize,
}

impl ImxUart {
    /// # Safety
    /// `base` must be the address (as mapped now) of an i.MX UART's register block, valid for
    /// the rest of the program, used by nothing else but this driver's polled protocol.
    pub unsafe fn new(base: usize) -> Self {
        Self { base }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s caller guaranteed `base` is a live i.MX UART register block for good.
        unsafe { &*(self.base as *const Registers) }
    }

    /// Switches the UART and its transmitter on if the boot loader left them off.
    pub fn enable(&self) {
        let r = self.regs();
        if !r.ucr1.is_set(UCR1::UARTEN) {
            r.ucr1.modify(UCR1::UARTEN::SET);
        }
        if !r.ucr2.is_set(UCR2::TXEN) || !r.ucr2.is_set(UCR2::SRST) {
            r.ucr2.modify(UCR2::SRST::SET + UCR2::TXEN::SET + UCR2::RXEN::SET + UCR2::WS::SET + UCR2::IRTS::SET);
        }
    }

    /// Switches the receiver on if it is off.
    pub fn enable_receiver(&self) {
        let r = self.regs();
        if !r.ucr2.is_set(UCR2::RXEN) {
            r.ucr2.modify(UCR2::RXEN::SET);
        }
    }

    /// The next received byte, if one is waiting; one that came with a line error (URXD.ERR:
    /// overrun, framing, parity, break) comes back as [`RxError`].
    pub fn try_get(&self) -> Option<Result<u8, RxError>> {
        let r = self.regs();
        if !r.usr2.is_set(USR2::RDR) {
            return None;
        }
        let d = r.urxd.extract();
        let byte = d.read(URXD::DATA) as u8;
        Some(if d.is_set(URXD::ERR) { Err(RxError { byte, overrun: d.is_set(URXD::OVRRUN) }) } else { Ok(byte) })
    }

    /// Sends one byte, waiting while the FIFO is full.
    pub fn put(&self, b: u8) {
        while self.regs().uts.is_set(UTS::TXFULL) {
            core::hint::spin_loop();
        }
        self.regs().utxd.set(b as u32);
    }

    /// Waits until everything sent has left the UART.
    pub fn flush(&self) {
        while !self.regs().usr2.is_set(USR2::TXDC) {
            core::hint::spin_loop();
        }
    }
}
