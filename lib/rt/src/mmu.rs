//! Turning a CPU's MMU on, the same way in both binaries.
//!
//! The page tables come from `lib/pgtable`; this module only programs the registers of the
//! translation regime and enables it: MAIR, TCR, the TTBRs, one local invalidation of whatever
//! the CPU may have cached from before (through the caller's [`TlbMaintenance`], so it is counted
//! like every other TLBI), then SCTLR with the MMU, the caches, stack alignment checks and (on
//! request) WXN: the whole register, as `crate::el1` / `crate::el2` decide it.
//!
//! Runs with the MMU off (boot CPU and CPUs started by PSCI): it touches no memory but `regs`
//! (which the caller made visible to a CPU whose caches are off) and the caller's TLB handle.

use aarch64_cpu::asm::barrier;
use aarch64_cpu::registers::*;
use pgtable::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp};

/// Register values of one translation regime.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MmuRegs {
    /// MAIR_ELx.
    pub mair: u64,
    /// TCR_ELx.
    pub tcr: u64,
    /// TTBR0_ELx.
    pub ttbr0: u64,
    /// TTBR1_EL1 (EL1 only; ignored at EL2).
    pub ttbr1: u64,
    /// Set SCTLR_ELx.WXN: writable memory is never executable, whatever the tables say.
    pub wxn: bool,
}

/// Drops this CPU's cached translations of the regime being enabled (local, not broadcast:
/// other CPUs have their own MMU state), completes it, synchronizes the context.
fn flush_local<T: TlbMaintenance + ?Sized>(tlb: &mut T, op: TlbiOp) {
    tlb.tlbi(Tlbi { op, leaf_only: false, sh: Shareability::Local });
    tlb.dsb(Barrier::Nsh);
    tlb.isb();
}

/// Turns the EL1&0 MMU on for the calling CPU (at EL1): MAIR_EL1, TCR_EL1, TTBR0_EL1,
/// TTBR1_EL1, ISB, TLBI VMALLE1, DSB NSH, ISB, then SCTLR_EL1 = `el1::sctlr_mmu_on` (the entry
/// value + M, C, I, SA, and WXN on request: nothing inherited).
pub fn enable_el1<T: TlbMaintenance + ?Sized>(r: &MmuRegs, tlb: &mut T) {
    MAIR_EL1.set(r.mair);
    TCR_EL1.set(r.tcr);
    TTBR0_EL1.set(r.ttbr0);
    TTBR1_EL1.set(r.ttbr1);
    barrier::isb(barrier::SY);
    flush_local(tlb, TlbiOp::Vmalle1 { vmid: None });
    SCTLR_EL1.set(crate::el1::sctlr_mmu_on(r.wxn));
    barrier::isb(barrier::SY);
}

/// Turns the EL2 MMU on for the calling CPU (at EL2, in either mode: `r.tcr` is in the layout
/// of the mode the table was built for, `rt::el2::tcr`): MAIR_EL2, TCR_EL2, TTBR0_EL2, ISB,
/// TLBI ALLE2 (the EL2 or EL2&0 regime, whichever runs), DSB NSH, ISB, then SCTLR_EL2 =
/// `el2::sctlr_mmu_on` (the same bits in both layouts).
pub fn enable_el2<T: TlbMaintenance + ?Sized>(r: &MmuRegs, tlb: &mut T) {
    MAIR_EL2.set(r.mair);
    TCR_EL2.set(r.tcr);
    TTBR0_EL2.set(r.ttbr0);
    barrier::isb(barrier::SY);
    flush_local(tlb, TlbiOp::Alle2);
    SCTLR_EL2.set(crate::el2::sctlr_mmu_on(r.wxn));
    barrier::isb(barrier::SY);
}
