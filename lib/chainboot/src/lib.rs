//! The serial chainloader: what the resident loader on the board (`chainloader/`) and the host
//! (`cargo xtask chainboot`) agree on, and where the loader puts what it receives.
//!
//! A transfer, host to loader over one UART:
//!
//! 1. the loader prints [`Status::Ready`] every second or so while it waits;
//! 2. the host sends a [`Header`] (60 bytes: [`MAGIC`], version, lengths, CRC-32s, and a CRC-32
//!    of the header itself); the loader looks for the magic in whatever arrives, so line noise
//!    before it is harmless;
//! 3. the loader answers [`Status::Accept`] (with the addresses from [`plan`]) or
//!    [`Status::Refuse`] (and waits again);
//! 4. the host sends the boot arguments, the hypervisor Image and the kernel Image, back to back
//!    (the Images DEFLATE-compressed unless the host says otherwise; the loader inflates them);
//! 5. the loader checks every CRC-32 and the Image headers: a mismatch is refused
//!    ([`Status::Refuse`], nothing is started) and it waits for the next transfer; a pause of
//!    more than [`BYTE_TIMEOUT_MS`] ends the transfer with [`Status::Timeout`];
//! 6. otherwise it writes the DTB (the firmware's, with `/chosen` pointing at the kernel as the
//!    initrd and the boot arguments), prints [`Status::Boot`] and jumps to the hypervisor as a
//!    Linux arm64 Image (x0 = DTB, MMU off, at the exception level it was entered at).
//!
//! Everything after that is the board's console.
#![no_std]
#![deny(missing_docs)]

pub mod frame;
pub mod plan;
pub mod status;

pub use abi::crc32::{crc32, Crc32};
pub use frame::{Header, HeaderError, MagicScanner, FLAG_DEFLATE, HEADER_LEN, MAGIC, MAX_ARGS, VERSION};
pub use plan::{plan, Layout, PlanError, Request, HYP_RESERVE};
pub use status::Status;

/// Longest pause between two bytes of a transfer before the loader gives up on it.
pub const BYTE_TIMEOUT_MS: u64 = 2000;
/// How often the loader repeats [`Status::Ready`] while nothing arrives.
pub const READY_INTERVAL_MS: u64 = 1000;
