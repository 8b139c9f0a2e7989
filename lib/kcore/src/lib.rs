//! The guest kernel's decisions that touch no hardware, as a `no_std` library tested on the host
//! (`cargo test -p kcore`), as Hafnium tests its core against a fake architecture. The kernel
//! binary implements the thin traits here over the real registers and does the side effects.
//!
//! * [`options`]: the kernel's boot words and the typed [`options::Options`] they are parsed
//!   into, once, at boot.
//! * [`sched`]: the scheduler's run queues and every decision on them (wake-up, the switch and
//!   the hand-over after it, load balancing, affinity, the time slice, sleepers).
#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod options;
pub mod sched;
