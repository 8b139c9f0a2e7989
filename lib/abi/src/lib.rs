//! What the hypervisor, the kernel and the host tools agree on.
//!
//! * [`hypercall`]: the hypervisor's SMCCC function ids (vendor-specific hypervisor service
//!   range), reserved now for the work that will use them.
//! * [`psci`]: PSCI function ids and return codes.
//! * [`error`]: the hypercall error codes.
//! * [`exit`]: how a run's QEMU exit code is to be read.
//! * [`report`]: the `@@report` record format (one JSON object per line) and, with the `std`
//!   feature, its parser.
#![cfg_attr(not(any(test, feature = "std")), no_std)]

pub mod error;
pub mod exit;
pub mod hypercall;
pub mod psci;
pub mod report;
