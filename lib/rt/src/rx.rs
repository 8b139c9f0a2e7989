//! What every UART driver's receiver reports besides a byte: shared by the drivers and the
//! [`crate::uart::Uart`] that chooses among them, so neither imports the other for it.

/// A byte received with a line error flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxError {
    /// The byte as it arrived.
    pub byte: u8,
    /// The receiver overflowed before this byte: earlier bytes were lost. (Otherwise a framing,
    /// parity or break condition.)
    pub overrun: bool,
}
