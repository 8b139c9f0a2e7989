//! The GIC drivers (v2 and v3) and the IRQ loop, over a register trait, as a `no_std` library
//! tested on the host with a fake GIC ([`fake`]).
//!
//! The kernel implements [`v2::Regs`] / [`v3::Regs`] as plain register accesses (tock-registers
//! structs for the memory-mapped blocks, `MRS`/`MSR` for GICv3's ICC system registers, a `DSB`
//! or `ISB` where asked); every decision (which value goes where, in which order) is here, where
//! [`fake`] checks it: a GICv2 EOI must carry the source CPU of the SGI it ends (TCG ignores
//! those bits, a GIC-400 does not), a spurious INTID is never ended, an SGI is written only
//! after a `DSB` that orders the stores its handler will read, GICv3 SGIs reach the CPU whose
//! MPIDR they name (Aff0 beyond 15 through the range selector).

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(any(test, feature = "fake"))]
extern crate std;

pub mod v2;
pub mod v3;

#[cfg(any(test, feature = "fake"))]
pub mod fake;

#[cfg(test)]
mod tests;

/// INTIDs from here on are special: 1020-1023 ("spurious" / nothing pending).
pub const SPURIOUS: u32 = 1020;
/// Banked interrupts (SGIs 0-15, PPIs 16-31) below this INTID.
pub const BANKED: u32 = 32;
/// SGIs below this INTID.
pub const SGIS: u32 = 16;

/// Priority mask programmed in every CPU interface: interrupts with a priority value below it
/// are signalled.
pub const PRIORITY_MASK: u8 = 0xf0;
/// Priority of every interrupt the kernel enables (one level: nothing preempts a handler).
pub const PRIORITY: u8 = 0xa0;

/// Which interrupt an acknowledge returned, and the value its end-of-interrupt must write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acked {
    /// The INTID.
    pub intid: u32,
    /// What was read from the acknowledge register, written back whole to end it (GICv2 SGIs
    /// carry their source CPU in bits [12:10]).
    pub iar: u32,
}

/// A GIC CPU interface as the IRQ loop sees it.
pub trait CpuInterface {
    /// Acknowledges the highest-priority pending interrupt (None: nothing pending, a spurious
    /// INTID was read).
    fn ack(&self) -> Option<Acked>;
    /// Ends an acknowledged interrupt.
    fn eoi(&self, a: Acked);
    /// Disables banked interrupt `intid` on this CPU (`cpu`).
    fn disable_private(&self, cpu: usize, intid: u32);
}

/// What the IRQ loop did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handled {
    /// SGIs handled.
    pub sgi: u64,
    /// PPIs handled.
    pub ppi: u64,
    /// Interrupts acknowledged with no handler (banked ones then disabled).
    pub unexpected: u64,
}

impl Handled {
    /// Interrupts acknowledged in all.
    pub fn total(&self) -> u64 {
        self.sgi + self.ppi + self.unexpected
    }
}

/// The IRQ exception of CPU `cpu`: acknowledges and handles every pending interrupt, each ended
/// with exactly the value its acknowledge read. `dispatch(intid)` runs its handler and says
/// whether it had one; an interrupt without one is counted and, if banked, disabled (so it
/// cannot storm), and ended all the same.
pub fn handle_pending(gic: &impl CpuInterface, cpu: usize, mut dispatch: impl FnMut(u32) -> bool) -> Handled {
    let mut h = Handled::default();
    while let Some(a) = gic.ack() {
        if dispatch(a.intid) {
            if a.intid < SGIS {
                h.sgi += 1;
            } else {
                h.ppi += 1;
            }
        } else {
            h.unexpected += 1;
            if a.intid < BANKED {
                gic.disable_private(cpu, a.intid);
            }
        }
        gic.eoi(a);
    }
    h
}
