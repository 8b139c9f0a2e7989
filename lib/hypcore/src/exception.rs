//! Exception entry into the guest, as the architecture defines it (AArch64.TakeException to
//! EL1), for exceptions the hypervisor makes the guest take: which vector, which syndrome, which
//! PSTATE. Pure arithmetic on register values; the hypervisor writes the registers.

/// Data/instruction abort classes: from a lower EL, or taken without a change of EL.
const EC_IABT_LOWER: u64 = 0x20;
const EC_IABT_CUR: u64 = 0x21;
const EC_DABT_LOWER: u64 = 0x24;
const EC_DABT_CUR: u64 = 0x25;
/// Fault status: synchronous external abort, not on a translation table walk.
const FSC_SEA: u64 = 0x10;
/// ESR.IL: a 32-bit instruction.
const ESR_IL: u64 = 1 << 25;
/// ESR ISS bit 6 for data aborts: the access was a write.
const ISS_WNR: u64 = 1 << 6;

/// SPSR / PSTATE bits set or cleared on exception entry.
pub mod pstate {
    #![allow(missing_docs)]
    pub const M_MASK: u64 = 0x1f;
    pub const M_EL1H: u64 = 0b0101;
    pub const M_EL1T: u64 = 0b0100;
    pub const AARCH32: u64 = 1 << 4;
    pub const DAIF: u64 = 0b1111 << 6;
    pub const BTYPE: u64 = 0b11 << 10;
    pub const SSBS: u64 = 1 << 12;
    pub const IL: u64 = 1 << 20;
    pub const SS: u64 = 1 << 21;
    pub const PAN: u64 = 1 << 22;
    pub const UAO: u64 = 1 << 23;
    pub const TCO: u64 = 1 << 25;
}

/// SCTLR_EL1.SPAN (bit 23): 0 = PAN is set on exception entry to EL1.
const SCTLR_SPAN: u64 = 1 << 23;
/// SCTLR_EL1.DSSBS (bit 44): PSTATE.SSBS on exception entry.
const SCTLR_DSSBS: u64 = 1 << 44;

/// What an injection computes: the guest registers to write and where it resumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// ESR_EL1.
    pub esr: u64,
    /// ELR_EL1: where the guest was.
    pub elr: u64,
    /// SPSR_EL1: the guest's PSTATE when it trapped.
    pub spsr_el1: u64,
    /// The guest's new PC (its vector).
    pub pc: u64,
    /// The guest's new PSTATE.
    pub pstate: u64,
}

/// The exception entry for a synchronous external abort on the access that trapped with
/// `esr_el2` at `pc` with PSTATE `spsr` (SPSR_EL2), given the guest's VBAR_EL1 and SCTLR_EL1.
pub fn external_abort_entry(esr_el2: u64, pc: u64, spsr: u64, vbar: u64, sctlr: u64, insn: bool) -> Entry {
    let m = spsr & pstate::M_MASK;
    let from_el0 = spsr & pstate::AARCH32 != 0 || m & 0b1100 == 0;
    let offset = match (spsr & pstate::AARCH32 != 0, from_el0, m) {
        (true, _, _) => 0x600,
        (false, true, _) => 0x400,
        (false, false, pstate::M_EL1T) => 0x000,
        _ => 0x200,
    };
    let ec = match (insn, from_el0) {
        (true, true) => EC_IABT_LOWER,
        (true, false) => EC_IABT_CUR,
        (false, true) => EC_DABT_LOWER,
        (false, false) => EC_DABT_CUR,
    };
    let wnr = if insn { 0 } else { esr_el2 & ISS_WNR };
    let esr = (ec << 26) | (esr_el2 & ESR_IL) | wnr | FSC_SEA;
    let mut p = spsr & !(pstate::M_MASK | pstate::AARCH32 | pstate::BTYPE | pstate::IL | pstate::SS | pstate::UAO);
    p |= pstate::M_EL1H | pstate::DAIF | pstate::TCO;
    if sctlr & SCTLR_SPAN == 0 {
        p |= pstate::PAN;
    }
    p = if sctlr & SCTLR_DSSBS != 0 { p | pstate::SSBS } else { p & !pstate::SSBS };
    Entry { esr, elr: pc, spsr_el1: spsr, pc: vbar + offset, pstate: p }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VBAR: u64 = 0xffff_8000_0801_0000;
    /// ESR_EL2 of a stage-2 translation fault on a 64-bit write from EL1 (IL, ISV, WnR, DFSC 0x07).
    const ESR_WRITE: u64 = (0x24 << 26) | ESR_IL | (1 << 24) | ISS_WNR | 0x07;

    #[test]
    fn kernel_access_goes_to_the_current_el_spx_vector() {
        // EL1h, interrupts enabled, PAN clear, SSBS set, BTYPE 2.
        let spsr = pstate::M_EL1H | pstate::SSBS | (2 << 10) | (0b1011 << 28);
        let e = external_abort_entry(ESR_WRITE, 0xffff_8000_0800_1234, spsr, VBAR, 0, false);
        assert_eq!(e.pc, VBAR + 0x200);
        assert_eq!(e.esr, (EC_DABT_CUR << 26) | ESR_IL | ISS_WNR | FSC_SEA, "{:#x}", e.esr);
        assert_eq!((e.elr, e.spsr_el1), (0xffff_8000_0800_1234, spsr));
        assert_eq!(e.pstate & pstate::M_MASK, pstate::M_EL1H);
        assert_eq!(e.pstate & pstate::DAIF, pstate::DAIF, "all masked");
        assert_eq!(e.pstate & pstate::BTYPE, 0);
        assert_ne!(e.pstate & pstate::PAN, 0, "SPAN = 0: PAN set on entry");
        assert_eq!(e.pstate & pstate::SSBS, 0, "DSSBS = 0");
        assert_ne!(e.pstate & pstate::TCO, 0);
        assert_eq!(e.pstate >> 28, 0b1011, "NZCV kept");
        let e = external_abort_entry(ESR_WRITE, 0, spsr, VBAR, SCTLR_SPAN | SCTLR_DSSBS, false);
        assert_eq!(e.pstate & (pstate::PAN | pstate::SSBS), pstate::SSBS);
    }

    /// The PSTATE/SPSR bits are the architecture's (Arm ARM, SPSR_EL1 in AArch64 state).
    #[test]
    fn pstate_bits_are_the_architectures() {
        use pstate::*;
        assert_eq!((M_MASK, M_EL1H, M_EL1T, AARCH32, DAIF, BTYPE), (0x1f, 0x5, 0x4, 0x10, 0x3c0, 0xc00));
        assert_eq!((SSBS, IL, SS, PAN, UAO, TCO), (0x1000, 0x10_0000, 0x20_0000, 0x40_0000, 0x80_0000, 0x200_0000));
    }

    /// Entry clears M[4:0] whole (an AArch32 mode number too), BTYPE, IL, SS and UAO, whatever
    /// the interrupted SPSR held.
    #[test]
    fn entry_pstate_drops_every_bit_it_must() {
        use pstate::*;
        let spsr = 0b1_0011 | BTYPE | IL | SS | UAO;
        let e = external_abort_entry(ESR_WRITE, 0, spsr, VBAR, 0, false);
        assert_eq!(e.pstate & (M_MASK | BTYPE | IL | SS | UAO), M_EL1H, "{:#x}", e.pstate);
    }

    #[test]
    fn user_access_goes_to_the_lower_el_vector() {
        let read = ESR_WRITE & !ISS_WNR;
        let e = external_abort_entry(read, 0x40_1000, 0, VBAR, 0, false);
        assert_eq!((e.pc, e.esr >> 26, e.esr & ISS_WNR), (VBAR + 0x400, EC_DABT_LOWER, 0));
        let e = external_abort_entry(read, 0x40_1000, 0, VBAR, 0, true);
        assert_eq!((e.pc, e.esr >> 26), (VBAR + 0x400, EC_IABT_LOWER));
        assert_eq!(e.esr & 0x3f, FSC_SEA);
        // AArch32 EL0 (M[4] set, usr mode 0b10000).
        let e = external_abort_entry(read, 0x1000, 0b1_0000, VBAR, 0, false);
        assert_eq!((e.pc, e.pstate & 0x1f), (VBAR + 0x600, pstate::M_EL1H));
        // EL1t.
        let e = external_abort_entry(read, 0x1000, pstate::M_EL1T, VBAR, 0, true);
        assert_eq!((e.pc, e.esr >> 26), (VBAR, EC_IABT_CUR));
    }
}
