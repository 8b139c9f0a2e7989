//! Turning a CPU's MMU on, the same way in both binaries.
//!
//! The page tables come from `lib/pgtable`; this module only programs the registers of the
//! translation regime and enables it: MAIR, TCR, the TTBRs, one local invalidation of whatever
//! the CPU may have cached from before (through the caller's [`TlbMaintenance`], so it is counted
//! like every other TLBI), then SCTLR with the MMU, the caches, stack alignment checks and (on
//! request) WXN. SCTLR is written through `aarch64-cpu`'s fields; the RES1 bits the crate does
//! not name are spelled out below.
//!
//! Runs with the MMU off (boot CPU and CPUs started by PSCI): it touches no memory but `regs`
//! (which the caller made visible to a CPU whose caches are off) and the caller's TLB handle.

use aarch64_cpu::asm::barrier;
use aarch64_cpu::registers::*;
use pgtable::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp};
use tock_registers::register_bitfields;

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

register_bitfields! {u64,
    /// SCTLR_EL2 (HCR_EL2.E2H = 0) bits that are RES1 and that `aarch64-cpu` does not name.
    SCTLR_EL2_RES1 [
        B4 OFFSET(4) NUMBITS(1) [],
        B5 OFFSET(5) NUMBITS(1) [],
        B16 OFFSET(16) NUMBITS(1) [],
        B18 OFFSET(18) NUMBITS(1) [],
        B23 OFFSET(23) NUMBITS(1) [],
        B28 OFFSET(28) NUMBITS(1) [],
        B29 OFFSET(29) NUMBITS(1) []
    ]
}

/// Drops this CPU's cached translations of the regime being enabled (local, not broadcast:
/// other CPUs have their own MMU state), completes it, synchronizes the context.
fn flush_local<T: TlbMaintenance + ?Sized>(tlb: &mut T, op: TlbiOp) {
    tlb.tlbi(Tlbi { op, leaf_only: false, sh: Shareability::Local });
    tlb.dsb(Barrier::Nsh);
    tlb.isb();
}

/// Turns the EL1&0 MMU on for the calling CPU (at EL1): MAIR_EL1, TCR_EL1, TTBR0_EL1,
/// TTBR1_EL1, ISB, TLBI VMALLE1, DSB NSH, ISB, then SCTLR_EL1 M, C, I, SA (and WXN) on top of its
/// current value.
pub fn enable_el1<T: TlbMaintenance + ?Sized>(r: &MmuRegs, tlb: &mut T) {
    MAIR_EL1.set(r.mair);
    TCR_EL1.set(r.tcr);
    TTBR0_EL1.set(r.ttbr0);
    TTBR1_EL1.set(r.ttbr1);
    barrier::isb(barrier::SY);
    flush_local(tlb, TlbiOp::Vmalle1 { vmid: None });
    let wxn = if r.wxn { SCTLR_EL1::WXN::Enable } else { SCTLR_EL1::WXN::Disable };
    SCTLR_EL1
        .modify(SCTLR_EL1::M::Enable + SCTLR_EL1::C::Cacheable + SCTLR_EL1::I::Cacheable + SCTLR_EL1::SA::Enable + wxn);
    barrier::isb(barrier::SY);
}

/// Turns the EL2 MMU on for the calling CPU (at EL2, HCR_EL2.E2H = 0): MAIR_EL2, TCR_EL2,
/// TTBR0_EL2, ISB, TLBI ALLE2, DSB NSH, ISB, then SCTLR_EL2 = RES1 + M, C, I, SA (and WXN).
pub fn enable_el2<T: TlbMaintenance + ?Sized>(r: &MmuRegs, tlb: &mut T) {
    MAIR_EL2.set(r.mair);
    TCR_EL2.set(r.tcr);
    TTBR0_EL2.set(r.ttbr0);
    barrier::isb(barrier::SY);
    flush_local(tlb, TlbiOp::Alle2);
    let res1 = SCTLR_EL2_RES1::B4::SET
        + SCTLR_EL2_RES1::B5::SET
        + SCTLR_EL2_RES1::B16::SET
        + SCTLR_EL2_RES1::B18::SET
        + SCTLR_EL2_RES1::B23::SET
        + SCTLR_EL2_RES1::B28::SET
        + SCTLR_EL2_RES1::B29::SET;
    let wxn = if r.wxn { SCTLR_EL2::WXN::Enable } else { SCTLR_EL2::WXN::Disable };
    // EOS and EIS are RES1 without FEAT_ExS, and with it 1 keeps exception entry and exit
    // context synchronizing, as code written for v8.0 assumes.
    let on = SCTLR_EL2::EOS::IsSynch
        + SCTLR_EL2::EIS::IsSynch
        + SCTLR_EL2::M::Enable
        + SCTLR_EL2::C::Cacheable
        + SCTLR_EL2::I::Cacheable
        + SCTLR_EL2::SA::Enable
        + wxn;
    SCTLR_EL2.set(res1.value | on.value);
    barrier::isb(barrier::SY);
}
