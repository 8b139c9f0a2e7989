//! Every EL1 control-register value a binary entered at EL1 writes at entry (the kernel, the
//! test guest), and the SCTLR_EL1 the hypervisor gives a guest: decided once here, so nothing
//! is taken from what a boot loader, firmware or an earlier guest left. The early assembly of
//! `crate::start` writes SCTLR_EL1 and CPACR_EL1 before any other instruction touches memory
//! or FP/SIMD and sets PSTATE with an exception return (EL1h, DAIF masked, PAN, UAO, SSBS,
//! DIT, TCO 0); `crate::entry::el1` writes the rest before Rust code relies on them.

/// SCTLR_EL1 bits this module sets.
pub mod sctlr {
    /// MMU on.
    pub const M: u64 = 1 << 0;
    /// Alignment checks.
    pub const A: u64 = 1 << 1;
    /// Data cacheable.
    pub const C: u64 = 1 << 2;
    /// Stack alignment checks at EL1.
    pub const SA: u64 = 1 << 3;
    /// Stack alignment checks at EL0.
    pub const SA0: u64 = 1 << 4;
    /// Instruction cacheable.
    pub const I: u64 = 1 << 12;
    /// Writable implies execute-never.
    pub const WXN: u64 = 1 << 19;
    /// 0: set PSTATE.PAN on exception entry to EL1.
    pub const SPAN: u64 = 1 << 23;
    /// Big-endian data at EL1.
    pub const EE: u64 = 1 << 25;
    /// Big-endian data at EL0.
    pub const E0E: u64 = 1 << 24;
    /// RES1 without the features that define them: LSMAOE (29), nTLSMD (28), EIS (22),
    /// TSCXT (20), EOS (11).
    pub const RES1: u64 = (1 << 29) | (1 << 28) | (1 << 22) | (1 << 20) | (1 << 11);
}

/// SCTLR_EL1 with the MMU, the caches and alignment checks off, little-endian, PAN left alone
/// on exceptions (SPAN = 1) and EL0's WFI, WFE, cache maintenance, DC ZVA and CTR_EL0 reads
/// trapped (nTWI = nTWE = UCI = DZE = UCT = 0): what the Linux boot protocol promises a kernel,
/// the value the hypervisor enters a guest with and the one the kernel and the test guest
/// write first.
pub const SCTLR_MMU_OFF: u64 = sctlr::RES1 | sctlr::SPAN;

/// SCTLR_EL1 that turns the MMU on: [`SCTLR_MMU_OFF`] + M, C, I, SA, and WXN when `wxn`. (The
/// kernel adds SA0 and clears SPAN later, when it gives EL0 its tasks.)
pub const fn sctlr_mmu_on(wxn: bool) -> u64 {
    SCTLR_MMU_OFF | sctlr::M | sctlr::C | sctlr::I | sctlr::SA | if wxn { sctlr::WXN } else { 0 }
}

/// CPACR_EL1.FPEN = 0b11: FP/SIMD not trapped at EL1 or EL0. At entry the only bits written
/// (SVE, SME, trace trapped: ZEN = SMEN = 0, TTA = 0) until the code that uses them says so.
pub const CPACR_ENTRY: u64 = 0b11 << 20;

/// MDSCR_EL1.TDCC: EL0 accesses to the debug communication channel trap.
pub const MDSCR_TDCC: u64 = 1 << 12;
/// MDSCR_EL1 at entry: no software step (SS), no kernel debug (KDE) or monitor debug events
/// (MDE), EL0's DCC trapped (as Linux writes it).
pub const MDSCR_ENTRY: u64 = MDSCR_TDCC;

/// CNTKCTL_EL1.EL0VCTEN: EL0 may read the virtual counter.
pub const CNTKCTL_EL0VCTEN: u64 = 1 << 1;

/// CNTKCTL_EL1: EL0 may read the virtual counter when `el0_counter`; nothing else (no physical
/// counter or timer, no virtual timer at EL0, no event stream).
pub const fn cntkctl(el0_counter: bool) -> u64 {
    if el0_counter {
        CNTKCTL_EL0VCTEN
    } else {
        0
    }
}

/// PMUSERENR_EL0.CR and .ER: EL0 may read the cycle counter and the event counters.
pub const PMUSERENR_READ: u64 = 0b1100;

/// PMUSERENR_EL0 (where the PMU exists): EL0 may read the counters when `el0_reads`; it never
/// programs them (EN = SW = 0).
pub const fn pmuserenr(el0_reads: bool) -> u64 {
    if el0_reads {
        PMUSERENR_READ
    } else {
        0
    }
}

/// SPSR value of the exception return with which the entry code sets PSTATE at EL1: EL1h
/// (SP_EL1), D, A, I, F masked, every other bit 0 (PAN, UAO, SSBS, DIT, TCO, BTYPE, SS).
pub const SPSR_EL1H_MASKED: u64 = 0x3c5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_sctlr_is_the_one_the_hypervisor_always_gave() {
        assert_eq!(SCTLR_MMU_OFF, 0x30d0_0800);
        assert_eq!(SCTLR_MMU_OFF & (sctlr::M | sctlr::C | sctlr::A | sctlr::EE | sctlr::E0E | sctlr::I), 0);
    }

    #[test]
    fn the_mmu_on_value_adds_only_what_it_names() {
        assert_eq!(sctlr_mmu_on(false), SCTLR_MMU_OFF | 0x100d);
        assert_eq!(sctlr_mmu_on(true) ^ sctlr_mmu_on(false), sctlr::WXN);
    }

    #[test]
    fn entry_values_give_el0_and_debug_nothing() {
        assert_eq!(MDSCR_ENTRY & 0b1, 0, "no software step");
        assert_eq!(MDSCR_ENTRY & ((1 << 13) | (1 << 15)), 0, "no KDE, no MDE");
        assert_eq!(cntkctl(false), 0);
        assert_eq!(cntkctl(true), 0b10);
        assert_eq!(pmuserenr(false), 0);
        assert_eq!(pmuserenr(true) & 0b11, 0, "EL0 never programs the PMU");
        assert_eq!(CPACR_ENTRY, 0x30_0000);
    }

    #[test]
    fn pstate_at_entry_is_the_handler_mode_with_everything_masked() {
        assert_eq!(SPSR_EL1H_MASKED & 0xf, 0b0101, "EL1h");
        assert_eq!(crate::el2::SPSR_EL2H_MASKED & 0xf, 0b1001, "EL2h");
        for v in [SPSR_EL1H_MASKED, crate::el2::SPSR_EL2H_MASKED] {
            assert_eq!(v >> 6 & 0xf, 0xf, "D, A, I, F masked");
            assert_eq!(v >> 10, 0, "PAN, UAO, SSBS, DIT, TCO, SS all 0");
        }
    }
}
