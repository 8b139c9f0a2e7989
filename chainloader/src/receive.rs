//! Receiving from the UART with time limits (the generic timer: CNTPCT / CNTFRQ).

use chainboot::{MagicScanner, Status, HEADER_LEN, MAGIC};
use rt::uart::Uart;

/// Milliseconds from the generic timer.
pub struct Clock {
    per_ms: u64,
}

impl Clock {
    pub fn new() -> Self {
        use aarch64_cpu::registers::{Readable, CNTFRQ_EL0};
        Self { per_ms: (CNTFRQ_EL0.get() / 1000).max(1) }
    }

    pub fn now_ms(&self) -> u64 {
        use aarch64_cpu::registers::{Readable, CNTPCT_EL0};
        CNTPCT_EL0.get() / self.per_ms
    }
}

/// The receive side of the console UART (any kind `rt::uart` drives).
pub struct Rx {
    uart: Uart,
    /// Bytes that arrived with an error flag (overrun: bytes were lost before them).
    pub errors: u64,
}

impl Rx {
    /// # Safety
    /// As [`Uart::new`]; the console transmits through the same UART with the same polled
    /// protocol, which is allowed.
    pub unsafe fn new(kind: board::UartKind, base: usize) -> Self {
        // SAFETY: forwarded from the caller.
        let uart = unsafe { Uart::new(kind, base) };
        uart.enable_receiver();
        Self { uart, errors: 0 }
    }

    pub fn uart(&self) -> &Uart {
        &self.uart
    }

    fn get(&mut self) -> Option<u8> {
        let Some(got) = self.uart.try_get() else {
            // Pause before looking again (without touching the UART): under QEMU every device
            // access takes the lock the thread feeding the UART from the host needs. On a board
            // this is well under a microsecond, against 10 us a byte at 921600 baud.
            for _ in 0..1000 {
                aarch64_cpu::asm::nop();
            }
            return None;
        };
        match got {
            Ok(b) => Some(b),
            Err(e) => {
                self.errors += 1;
                Some(e.byte)
            }
        }
    }

    /// Waits for the magic (printing `ready` every so often) and the rest of a header.
    pub fn wait_for_header(&mut self, clock: &Clock, ready: Status) -> [u8; HEADER_LEN] {
        loop {
            let mut scan = MagicScanner::new();
            let mut next_ready = clock.now_ms() + chainboot::READY_INTERVAL_MS;
            loop {
                if let Some(b) = self.get() {
                    if scan.push(b) {
                        break;
                    }
                } else if clock.now_ms() >= next_ready {
                    rt::println!("{ready}");
                    next_ready = clock.now_ms() + chainboot::READY_INTERVAL_MS;
                }
            }
            let mut header = [0u8; HEADER_LEN];
            header[..MAGIC.len()].copy_from_slice(&MAGIC);
            let mut received = 0;
            match self.receive(clock, &mut header[MAGIC.len()..], &mut received) {
                Ok(_) => return header,
                Err(got) => {
                    rt::println!(
                        "{}",
                        Status::Timeout { received: got as u64, total: (HEADER_LEN - MAGIC.len()) as u64 }
                    )
                }
            }
        }
    }

    /// Fills `buf`, adding its length to `received`; fails with the number of bytes that arrived
    /// when the line went quiet for [`chainboot::BYTE_TIMEOUT_MS`].
    pub fn receive(&mut self, clock: &Clock, buf: &mut [u8], received: &mut u64) -> Result<(), usize> {
        // The timer is read only when the line is idle: the first idle poll after a byte sets
        // the deadline, later ones check it.
        let mut deadline = None;
        let mut i = 0;
        while i < buf.len() {
            match self.get() {
                Some(b) => {
                    buf[i] = b;
                    i += 1;
                    deadline = None;
                }
                None => match deadline {
                    None => deadline = Some(clock.now_ms() + chainboot::BYTE_TIMEOUT_MS),
                    Some(d) if clock.now_ms() > d => return Err(i),
                    Some(_) => {}
                },
            }
        }
        *received += buf.len() as u64;
        Ok(())
    }
}
