//! The bottom layer: this CPU and its registers, nothing above it. Everything here is reached
//! from every other layer and reaches none of them (the one way up, the preemption point of
//! [`sync::preempt_enable`], is a hook the scheduler installs).
//!
//! * [`cpu`]: which CPU this is and its per-CPU static page (what TPIDR_EL1 points at).
//! * [`sync`]: the preemption count and interrupt masking.
//! * [`smccc`]: SMCCC calls through the device tree's PSCI conduit.
//! * [`power`]: who ends the run and how.
//! * [`cpuinfo`]: what this CPU is (ID registers).
//! * [`counters`]: barriers the kernel issues outside `lib/pgtable` and `rt::cache`.
//! * [`machine`]: what the boot CPU found (the device tree, the host), for every CPU.
//! * [`heap`]: the kernel heap.

pub mod counters;
pub mod cpu;
pub mod cpuinfo;
pub mod heap;
pub mod machine;
pub mod power;
pub mod smccc;
pub mod sync;
