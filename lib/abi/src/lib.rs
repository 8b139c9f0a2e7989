//! What the hypervisor, the kernel and the host tools agree on.
//!
//! * [`hypercall`]: the hypervisor's SMCCC function ids (vendor-specific hypervisor service
//!   range `0xC600_xxxx`), including the ones reserved now for memslots, dirty logging, the
//!   split-walker mode and counters.
//! * [`error`]: hypercall return codes (`i64` in x0, SMCCC-compatible: 0, -1, -2, -3 mean what
//!   SMCCC says) and [`error::HypError`].
//! * [`names`]: benchmark and self-test names (one list each; the kernel checks its dispatch
//!   tables against them at compile time, the xtask's are checked by host tests).
//! * [`psci`]: PSCI 0.2 / 1.x function ids (32- and 64-bit), return codes, versions.
//! * [`exit`]: the exit-code table and the run's final line.
//! * [`programs`]: the kernel's EL0 programs and the arguments each takes (checked at boot).
//! * [`image`]: the arm64 `Image` header both binaries carry, with this project's stamp (length
//!   and CRC) that lets a loader refuse a truncated or corrupted file; [`pe`]: the PE/COFF header
//!   that makes the hypervisor's Image an EFI application too.
//! * [`bundle`]: the guest bundle (kernel + initramfs + command line in one initrd file), written
//!   by the xtask, unpacked by the hypervisor.
//! * [`syscall`]: the guest kernel's system calls for its EL0 programs (numbers, arguments,
//!   error numbers, flags, the counters block).
//! * [`stats`]: median, p10/p90 and spread of repeated measurements (every benchmark's).
//! * [`time`]: counter ticks and nanoseconds.
//! * [`report`]: the `@@report ` record format (one JSON object per line): the no_std writers
//!   [`report::Record`] (buffered, one `write` per record) and [`report::ReportWriter`]
//!   (streaming into any `core::fmt::Write`), and with the `std` feature the parser
//!   `report::parse_line`.
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "std")]
extern crate std;

pub mod bundle;
pub mod control;
pub mod crc32;
pub mod error;
pub mod esr;
pub mod exit;
pub mod hypercall;
pub mod image;
pub mod names;
pub mod pe;
pub mod programs;
pub mod psci;
pub mod report;
pub mod stats;
pub mod syscall;
pub mod time;

/// The translation granule every binary uses (4 KiB; `rt` checks it equals `pgtable`'s).
pub const PAGE_SIZE: u64 = 4096;

/// Most CPUs either binary brings up (QEMU `virt` runs up to 8 here; the Pi 5 has 4): the
/// hypervisor trims a guest's device tree to this many, the kernel starts at most this many.
pub const MAX_CPUS: usize = 8;
