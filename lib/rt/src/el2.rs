//! Every EL2 control-register value the project's EL2 code writes, decided in one place: pure
//! functions of the CPU's features ([`crate::features`]) and of how EL2 runs ([`Mode`]), so each
//! value, and each layout difference between the two modes, is tested on the host. The binaries
//! only write what these return (the hypervisor at entry and before it enters a guest, the
//! early assembly of `crate::start`).
//!
//! HCR_EL2.E2H changes the meaning of EL2 itself. With E2H = 1 (FEAT_VHE; RES1 on CPUs without
//! FEAT_E2H0, and under KVM's nested virtualisation unless its user asks otherwise):
//! CPTR_EL2 takes CPACR_EL1's layout (FPEN 21:20, ZEN 17:16, SMEN 25:24, TTA 28, TAM 30, TCPAC
//! 31), CNTHCTL_EL2 takes CNTKCTL_EL1's (EL1PCTEN/EL1PCEN move from bits 0/1 to 10/11), TCR_EL2
//! takes TCR_EL1's (two VA ranges, IPS at 34:32), SCTLR_EL2 takes SCTLR_EL1's, the EL2 stage-1
//! descriptors take the EL1&0 format (AP[1] = EL0 access, PXN and UXN), and an access to a
//! `*_EL1` register at EL2 reaches the `*_EL2` register: the guest's EL1 state is then reached
//! through the `*_EL12` encodings. The hypervisor runs that way as Linux's "hVHE" does: E2H = 1,
//! TGE = 0, the guest at EL1 as under nVHE.

use crate::features::Features;

/// How EL2 runs: HCR_EL2.E2H, which sets the layout of CPTR_EL2, CNTHCTL_EL2, TCR_EL2, SCTLR_EL2
/// and the EL2 stage-1 descriptors, and where `*_EL1` accesses at EL2 go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// E2H = 0: the Armv8.0 EL2 layouts; `*_EL1` at EL2 is the EL1 register.
    Nvhe,
    /// E2H = 1, TGE = 0: the EL1 layouts at EL2; `*_EL1` at EL2 is the `*_EL2` register, the
    /// guest's EL1 state is `*_EL12`.
    Hvhe(Why),
}

/// Why EL2 runs with E2H = 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// HCR_EL2.E2H stayed 1 when written 0 (RES1: no FEAT_E2H0, or KVM's virtual EL2).
    Res1,
    /// A boot word asked for it on a CPU where E2H is writable.
    Forced,
}

impl Mode {
    /// Whether HCR_EL2.E2H is 1.
    pub const fn e2h(self) -> bool {
        matches!(self, Mode::Hvhe(_))
    }

    /// How the boot line and the `hyp_features` record name it.
    pub const fn describe(self) -> &'static str {
        match self {
            Mode::Nvhe => "nVHE (HCR_EL2.E2H = 0)",
            Mode::Hvhe(Why::Res1) => "hVHE (HCR_EL2.E2H = 1, TGE = 0): E2H is RES1 on this CPU",
            Mode::Hvhe(Why::Forced) => "hVHE (HCR_EL2.E2H = 1, TGE = 0): forced by hyp.e2h=1",
        }
    }

    /// A short name for records: `nvhe`, `hvhe-res1`, `hvhe-forced`.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::Nvhe => "nvhe",
            Mode::Hvhe(Why::Res1) => "hvhe-res1",
            Mode::Hvhe(Why::Forced) => "hvhe-forced",
        }
    }
}

/// The boot CPU's choice: `e2h_stuck` is whether HCR_EL2.E2H stayed 1 after the entry code
/// tried to clear it (`crate::start`), `forced` whether the boot words ask for E2H = 1.
pub const fn decide(e2h_stuck: bool, forced: bool) -> Mode {
    if e2h_stuck {
        Mode::Hvhe(Why::Res1)
    } else if forced {
        Mode::Hvhe(Why::Forced)
    } else {
        Mode::Nvhe
    }
}

/// What a CPU started after the boot CPU does to run in the boot CPU's `mode`, given whether
/// its own E2H stayed 1 at entry: `Ok(true)` set E2H, `Ok(false)` nothing to change, `Err` a
/// CPU whose E2H is RES1 when the boot CPU's is not (the CPUs differ: the hypervisor cannot run
/// both layouts at once).
pub const fn secondary(mode: Mode, e2h_stuck: bool) -> Result<bool, &'static str> {
    match (mode, e2h_stuck) {
        (Mode::Nvhe, true) => Err("HCR_EL2.E2H is RES1 on this CPU but not on the boot CPU"),
        (Mode::Nvhe, false) | (Mode::Hvhe(_), true) => Ok(false),
        (Mode::Hvhe(_), false) => Ok(true),
    }
}

/// HCR_EL2 bits.
pub mod hcr {
    /// Stage 2 on for EL1&0.
    pub const VM: u64 = 1 << 0;
    /// Physical IRQs to EL2.
    pub const IMO: u64 = 1 << 4;
    /// Trap SMC from EL1.
    pub const TSC: u64 = 1 << 19;
    /// Trap general exceptions to EL2 (EL1 off).
    pub const TGE: u64 = 1 << 27;
    /// EL1 is AArch64.
    pub const RW: u64 = 1 << 31;
    /// EL2 host: the VHE layouts and register redirections.
    pub const E2H: u64 = 1 << 34;
    /// Pointer-authentication keys do not trap.
    pub const APK: u64 = 1 << 40;
    /// Pointer-authentication instructions do not trap.
    pub const API: u64 = 1 << 41;
    /// EL1 and EL0 may access allocation tags.
    pub const ATA: u64 = 1 << 56;
}

/// SPSR value of the exception return with which the entry code sets PSTATE at EL2: EL2h
/// (SP_EL2), D, A, I, F masked, every other bit 0 (PAN, UAO, SSBS, DIT, TCO, BTYPE, SS).
pub const SPSR_EL2H_MASKED: u64 = 0x3c9;

/// HCR_EL2 at entry, before the mode is known: EL1 AArch64 and nothing else (E2H = 0, TGE = 0,
/// no trap, stage 2 off). The entry code adds E2H where it is RES1.
pub const HCR_ENTRY: u64 = hcr::RW;

/// HCR_EL2 for running a guest at EL1 in `mode`: EL1 AArch64; SMC traps to EL2 (the guest's
/// PSCI conduit, whatever its DTB says); pointer-authentication keys and instructions do not
/// trap; physical IRQ/FIQ go straight to EL1 (IMO = FMO = 0: the guest owns the GIC and the
/// timers); on an MTE2 CPU, ATA gives EL1 its allocation tags; stage 2 on when `stage2`.
/// TGE = 0 in both modes.
pub const fn hcr_guest(mode: Mode, f: &Features, stage2: bool) -> u64 {
    let mut v = hcr::RW | hcr::TSC | hcr::API | hcr::APK;
    if f.mte2 {
        v |= hcr::ATA;
    }
    if stage2 {
        v |= hcr::VM;
    }
    if mode.e2h() {
        v |= hcr::E2H;
    }
    v
}

/// CPTR_EL2 bits in the E2H = 0 layout; bits 13, 9 and 7:0 are RES1, and TZ / TSM read as RES1
/// where SVE / SME are not implemented.
pub mod cptr {
    /// RES1 bits.
    pub const RES1: u64 = (1 << 13) | (1 << 9) | 0xff;
    /// Trap SVE.
    pub const TZ: u64 = 1 << 8;
    /// Trap FP/SIMD.
    pub const TFP: u64 = 1 << 10;
    /// Trap SME.
    pub const TSM: u64 = 1 << 12;
    /// Trap trace registers.
    pub const TTA: u64 = 1 << 20;
    /// Trap activity monitors.
    pub const TAM: u64 = 1 << 30;
    /// Trap CPACR_EL1 accesses.
    pub const TCPAC: u64 = 1 << 31;
    /// E2H = 1 layout (CPACR_EL1's): SVE enable (0b11: no trap).
    pub const ZEN: u64 = 0b11 << 16;
    /// E2H = 1 layout: FP/SIMD enable (0b11: no trap).
    pub const FPEN: u64 = 0b11 << 20;
    /// E2H = 1 layout: SME enable (0b11: no trap).
    pub const SMEN: u64 = 0b11 << 24;
    /// E2H = 1 layout: trap trace registers.
    pub const TTA_E2H: u64 = 1 << 28;
}

/// CPTR_EL2 with FP/SIMD untrapped and everything else as it resets (SVE, SME trapped): what
/// the entry code writes before any Rust code runs, in `mode`'s layout.
pub const fn cptr_entry(mode: Mode) -> u64 {
    match mode {
        Mode::Nvhe => cptr::RES1 | cptr::TZ | cptr::TSM,
        Mode::Hvhe(_) => cptr::FPEN,
    }
}

/// CPTR_EL2 that hands the guest (and EL2) FP/SIMD, and SVE and SME where the CPU has them,
/// untrapped; trace, activity monitors and CPACR_EL1 accesses untrapped too (TTA = TAM = TCPAC
/// = 0). In `mode`'s layout.
pub const fn cptr_guest(mode: Mode, f: &Features) -> u64 {
    match mode {
        Mode::Nvhe => {
            let mut v = cptr::RES1;
            if !f.sve {
                v |= cptr::TZ;
            }
            if !f.sme {
                v |= cptr::TSM;
            }
            v
        }
        Mode::Hvhe(_) => {
            let mut v = cptr::FPEN;
            if f.sve {
                v |= cptr::ZEN;
            }
            if f.sme {
                v |= cptr::SMEN;
            }
            v
        }
    }
}

/// CNTHCTL_EL2 that gives EL1 the physical counter and timer (EL1PCTEN, EL1PCEN), with no event
/// stream, no trap of the virtual counter or timer (FEAT_ECV's bits 0) and, under E2H = 1, no EL0
/// bit (they act only with TGE = 1). In `mode`'s layout: bits 0/1 with E2H = 0, 10/11 with E2H = 1.
pub const fn cnthctl(mode: Mode) -> u64 {
    match mode {
        Mode::Nvhe => 0b11,
        Mode::Hvhe(_) => 0b11 << 10,
    }
}

/// SCTLR_EL2 bits the two layouts share where this module sets them.
pub mod sctlr {
    /// MMU on.
    pub const M: u64 = 1 << 0;
    /// Alignment checks.
    pub const A: u64 = 1 << 1;
    /// Data cacheable.
    pub const C: u64 = 1 << 2;
    /// Stack alignment checks.
    pub const SA: u64 = 1 << 3;
    /// Instruction cacheable.
    pub const I: u64 = 1 << 12;
    /// Writable implies execute-never.
    pub const WXN: u64 = 1 << 19;
    /// Big-endian data.
    pub const EE: u64 = 1 << 25;
    /// The bits RES1 in the E2H = 0 layout (4, 5, 11, 16, 18, 22, 23, 28, 29; 11 and 22 are EOS
    /// and EIS with FEAT_ExS, where 1 keeps exception entry and return context-synchronizing).
    /// In the E2H = 1 layout the same bits are SA0, CP15BEN, EOS, nTWI, nTWE, EIS, SPAN,
    /// nTLSMD, LSMAOE: set, they keep EL0 untrapped (EL0 runs under EL1&0 anyway with TGE = 0),
    /// exceptions context-synchronizing, and PSTATE.PAN unchanged on exception entry to EL2
    /// (SPAN = 1), as Linux's hVHE writes them.
    pub const RES1: u64 =
        (1 << 4) | (1 << 5) | (1 << 11) | (1 << 16) | (1 << 18) | (1 << 22) | (1 << 23) | (1 << 28) | (1 << 29);
    /// E2H = 1 layout: SPAN (0 = set PSTATE.PAN on exception entry).
    pub const SPAN: u64 = 1 << 23;
}

/// SCTLR_EL2 with the MMU and the data cache off, little-endian, no alignment checks: what the
/// entry code writes first (the same bits in both layouts, see [`sctlr::RES1`]).
pub const SCTLR_MMU_OFF: u64 = sctlr::RES1;

/// SCTLR_EL2 that turns the MMU on: [`SCTLR_MMU_OFF`] + M, C, I, SA, and WXN when `wxn`. The
/// same value in both layouts.
pub const fn sctlr_mmu_on(wxn: bool) -> u64 {
    SCTLR_MMU_OFF | sctlr::M | sctlr::C | sctlr::I | sctlr::SA | if wxn { sctlr::WXN } else { 0 }
}

/// TCR_EL2 for the hypervisor's identity table with a `parange` PA size (ID_AA64MMFR0_EL1), in
/// `mode`'s layout: one 48-bit range from TTBR0_EL2 with E2H = 0; with E2H = 1 the same range
/// from TTBR0_EL2, TTBR1_EL2 walks disabled (EPD1), IPS in bits 34:32.
pub fn tcr(mode: Mode, parange: u8) -> u64 {
    match mode {
        Mode::Nvhe => pgtable::regime::tcr_el2(parange),
        Mode::Hvhe(_) => pgtable::regime::tcr_el2_e2h(parange),
    }
}

/// The EL2 stage-1 regime of the hypervisor's own table in `mode`: `El2` (E2H = 0) or `El20`
/// (the EL2&0 regime, E2H = 1).
pub const fn regime(mode: Mode) -> pgtable::Regime {
    match mode {
        Mode::Nvhe => pgtable::Regime::El2,
        Mode::Hvhe(_) => pgtable::Regime::El20,
    }
}

/// HCRX_EL2.MSCEn: the FEAT_MOPS instructions are enabled at EL1 and EL0.
pub const HCRX_MSCEN: u64 = 1 << 11;
/// HCRX_EL2.TCR2En: TCR2_EL1 accessible at EL1.
pub const HCRX_TCR2EN: u64 = 1 << 14;
/// HCRX_EL2.SCTLR2En: SCTLR2_EL1 accessible at EL1.
pub const HCRX_SCTLR2EN: u64 = 1 << 15;
/// HCRX_EL2.GCSEn: the GCS registers and instructions work at EL1 and EL0.
pub const HCRX_GCSEN: u64 = 1 << 22;

/// Fine-grained trap bits that trap when *clear* (the `n...` bits), per feature.
pub mod fgt {
    /// HFGRTR/HFGWTR_EL2: nPOR_EL1 (60), nPOR_EL0 (59): FEAT_S1POE.
    pub const HFG_S1POE: u64 = (1 << 60) | (1 << 59);
    /// HFGRTR/HFGWTR_EL2: nPIR_EL1 (58), nPIRE0_EL1 (57): FEAT_S1PIE.
    pub const HFG_S1PIE: u64 = (1 << 58) | (1 << 57);
    /// HFGRTR/HFGWTR_EL2: nTPIDR2_EL0 (55), nSMPRI_EL1 (54): FEAT_SME.
    pub const HFG_SME: u64 = (1 << 55) | (1 << 54);
    /// HFGRTR/HFGWTR_EL2: nGCS_EL1 (53), nGCS_EL0 (52): FEAT_GCS.
    pub const HFG_GCS: u64 = (1 << 53) | (1 << 52);
    /// HFGITR_EL2: nGCSEPP (59), nGCSSTR_EL1 (58), nGCSPUSHM_EL1 (57): FEAT_GCS.
    pub const HFGI_GCS: u64 = (1 << 59) | (1 << 58) | (1 << 57);
    /// HFGITR_EL2: nBRBIALL (56), nBRBINJ (55): FEAT_BRBE.
    pub const HFGI_BRBE: u64 = (1 << 56) | (1 << 55);
    /// HDFGRTR_EL2: nBRBDATA (61), nBRBCTL (60), nBRBIDR (59): FEAT_BRBE.
    pub const HDFGR_BRBE: u64 = (1 << 61) | (1 << 60) | (1 << 59);
    /// HDFGWTR_EL2: nBRBDATA (61), nBRBCTL (60): FEAT_BRBE.
    pub const HDFGW_BRBE: u64 = (1 << 61) | (1 << 60);
    /// HDFGRTR/HDFGWTR_EL2: nPMSNEVFR_EL1 (62): FEAT_SPEv1p2.
    pub const HDFG_SPE_V1P2: u64 = 1 << 62;
    /// HDFGRTR2/HDFGWTR2_EL2: nPMICNTR_EL0 (2), nPMICFILTR_EL0 (3), nPMUACR_EL1 (4): FEAT_PMUv3p9.
    pub const HDFG2_PMUV3P9: u64 = (1 << 2) | (1 << 3) | (1 << 4);
}

/// The fine-grained trap registers (FEAT_FGT) with nothing trapped that the CPU has: every
/// positive trap bit 0, every `n` bit of an implemented feature 1 (the `n` bits of features
/// the CPU lacks stay 0, as they are RES0 there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fgt {
    /// HFGRTR_EL2.
    pub hfgrtr: u64,
    /// HFGWTR_EL2.
    pub hfgwtr: u64,
    /// HFGITR_EL2.
    pub hfgitr: u64,
    /// HDFGRTR_EL2.
    pub hdfgrtr: u64,
    /// HDFGWTR_EL2.
    pub hdfgwtr: u64,
    /// HAFGRTR_EL2 (exists with FEAT_AMUv1).
    pub hafgrtr: Option<u64>,
    /// FEAT_FGT2: HDFGRTR2_EL2 and HDFGWTR2_EL2 (the same value); HFGRTR2, HFGWTR2 and HFGITR2
    /// are 0 (as Linux writes them: their `n` bits cover features no guest here uses).
    pub hdfg2: Option<u64>,
}

/// The fine-grained traps for `f` (`None` without FEAT_FGT).
pub const fn fgt(f: &Features) -> Option<Fgt> {
    if !f.fgt {
        return None;
    }
    let mut hfg = 0;
    let mut hfgi = 0;
    let (mut hdfgr, mut hdfgw) = (0, 0);
    if f.sme {
        hfg |= fgt::HFG_SME;
    }
    if f.s1pie {
        hfg |= fgt::HFG_S1PIE;
    }
    if f.s1poe {
        hfg |= fgt::HFG_S1POE;
    }
    if f.gcs {
        hfg |= fgt::HFG_GCS;
        hfgi |= fgt::HFGI_GCS;
    }
    if f.brbe {
        hfgi |= fgt::HFGI_BRBE;
        hdfgr |= fgt::HDFGR_BRBE;
        hdfgw |= fgt::HDFGW_BRBE;
    }
    if f.spe_v1p2 {
        hdfgr |= fgt::HDFG_SPE_V1P2;
        hdfgw |= fgt::HDFG_SPE_V1P2;
    }
    Some(Fgt {
        hfgrtr: hfg,
        hfgwtr: hfg,
        hfgitr: hfgi,
        hdfgrtr: hdfgr,
        hdfgwtr: hdfgw,
        hafgrtr: if f.amu { Some(0) } else { None },
        hdfg2: if f.fgt2 { Some(if f.pmuv3p9 { fgt::HDFG2_PMUV3P9 } else { 0 }) } else { None },
    })
}

/// SMCR_EL2.FA64.
pub const SMCR_FA64: u64 = 1 << 31;
/// SMCR_EL2.EZT0: ZT0 (SME2) does not trap.
pub const SMCR_EZT0: u64 = 1 << 30;
/// The largest vector-length field ZCR_ELx.LEN / SMCR_ELx.LEN: the CPU clamps it to what it
/// implements, so the guest may choose any length the hardware has.
pub const LEN_MAX: u64 = 0xf;

/// ICC_SRE_EL2.SRE: the system-register interface.
pub const ICC_SRE_SRE: u64 = 1 << 0;
/// ICC_SRE_EL2.Enable: EL1 may access ICC_SRE_EL1.
pub const ICC_SRE_ENABLE: u64 = 1 << 3;

/// ICC_SRE_EL2 (written only where the GICv3 CPU interface exists): the system-register
/// interface for EL2 and EL1 when the board's GIC is a GICv3 (`gic_v3`), as the Linux boot
/// protocol asks of a kernel entered at EL1; SRE = 0 when a GICv3 serves as a GICv2 (the
/// guest's tree says GICv2).
pub const fn icc_sre(gic_v3: bool) -> u64 {
    if gic_v3 {
        ICC_SRE_SRE | ICC_SRE_ENABLE
    } else {
        0
    }
}

/// Everything the hypervisor writes into EL2's control registers for a guest at EL1. `None`:
/// the register does not exist on this CPU (never write it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Controls {
    /// The mode they are laid out for.
    pub mode: Mode,
    /// HCR_EL2 with stage 2 off (add [`hcr::VM`] once it is ready).
    pub hcr: u64,
    /// CPTR_EL2 (written first: ZCR_EL2 and SMCR_EL2 are only reachable once SVE/SME are
    /// untrapped).
    pub cptr: u64,
    /// ZCR_EL2 (SVE): the largest vector length.
    pub zcr: Option<u64>,
    /// SMCR_EL2 (SME): the largest streaming vector length, FA64 and ZT0 where implemented.
    pub smcr: Option<u64>,
    /// HCRX_EL2.
    pub hcrx: Option<u64>,
    /// The fine-grained trap registers.
    pub fgt: Option<Fgt>,
    /// MDCR_EL2: all PMU counters to the guest (HPMN = N), and the profiling and trace buffers
    /// owned by EL1 where they exist (E2PB = E2TB = 0b11); nothing trapped.
    pub mdcr: u64,
    /// CNTHCTL_EL2.
    pub cnthctl: u64,
    /// CNTVOFF_EL2: the virtual counter is the physical one.
    pub cntvoff: u64,
    /// HSTR_EL2: no AArch32 system-register traps.
    pub hstr: u64,
    /// GCSCR_EL2 (FEAT_GCS): no guarded control stack at EL2.
    pub gcscr: Option<u64>,
    /// TCR2_EL2 (FEAT_TCR2): no permission indirection or overlays at EL2.
    pub tcr2: Option<u64>,
    /// SCTLR2_EL2 (FEAT_SCTLR2): none of its controls.
    pub sctlr2: Option<u64>,
}

/// The controls for a guest at EL1 on a CPU with `f`, in `mode`'s layout: everything the CPU
/// has is the guest's, untrapped (FP/SIMD, SVE and SME at the largest vector length, MTE's tags,
/// every PMU counter, the physical and virtual timers and counters), with stage 2 off.
pub const fn guest_controls(mode: Mode, f: &Features) -> Controls {
    let mut smcr = LEN_MAX;
    if f.sme_fa64 {
        smcr |= SMCR_FA64;
    }
    if f.sme2 {
        smcr |= SMCR_EZT0;
    }
    let mut mdcr = f.pmu_counters;
    if f.spe {
        mdcr |= 0b11 << 12;
    }
    if f.trbe {
        mdcr |= 0b11 << 24;
    }
    let mut hcrx = 0;
    if f.mops {
        hcrx |= HCRX_MSCEN;
    }
    if f.tcr2 {
        hcrx |= HCRX_TCR2EN;
    }
    if f.sctlr2 {
        hcrx |= HCRX_SCTLR2EN;
    }
    if f.gcs {
        hcrx |= HCRX_GCSEN;
    }
    Controls {
        mode,
        hcr: hcr_guest(mode, f, false),
        cptr: cptr_guest(mode, f),
        zcr: if f.sve { Some(LEN_MAX) } else { None },
        smcr: if f.sme { Some(smcr) } else { None },
        hcrx: if f.hcx { Some(hcrx) } else { None },
        fgt: fgt(f),
        mdcr,
        cnthctl: cnthctl(mode),
        cntvoff: 0,
        hstr: 0,
        gcscr: if f.gcs { Some(0) } else { None },
        tcr2: if f.tcr2 { Some(0) } else { None },
        sctlr2: if f.sctlr2 { Some(0) } else { None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::{Features, IdRegs};

    /// QEMU 7.2 `-cpu cortex-a76` (values the hypervisor read): no SVE, SME or MTE; PMUv3 with 6
    /// counters.
    const A76: IdRegs = IdRegs {
        pfr0: 0x1100_0000_1111_0112,
        pfr1: 0x10,
        mmfr0: 0x10_1122,
        mmfr1: 0x1021_2122,
        mmfr2: 0,
        mmfr3: 0,
        mmfr4: 0,
        dfr0: 0x1030_5408,
        isar2: 0,
        smfr0: 0,
        pmu_counters: 6,
    };

    /// QEMU 7.2 `-M virt,mte=on -cpu max`: SVE, SME with FA64, MTE (level 3), FEAT_HCX, VHE.
    const MAX_MTE: IdRegs = IdRegs {
        pfr0: 0x1201_0011_2111_0222,
        pfr1: 0x100_0321,
        mmfr0: 0x323_1020_1126,
        mmfr1: 0x110_1021_1122,
        mmfr2: 0x1011,
        mmfr3: 0,
        mmfr4: 0,
        dfr0: 0x1030_5609,
        isar2: 0,
        smfr0: 0x80f1_00fd_0000_0000,
        pmu_counters: 6,
    };

    const HVHE: Mode = Mode::Hvhe(Why::Forced);

    #[test]
    fn qemu_max_with_mte_gets_sve_sme_and_tags() {
        let f = Features::from_ids(&MAX_MTE);
        assert!(f.sve && f.sme && f.sme_fa64 && !f.sme2 && f.mte2 && f.hcx && !f.fgt && !f.mops);
        assert!(f.vhe && f.pan && f.uao && !f.e2h_res1);
        let c = guest_controls(Mode::Nvhe, &f);
        assert_eq!(c.cptr, 0x22ff);
        assert_eq!((c.zcr, c.smcr), (Some(0xf), Some(0xf | SMCR_FA64)));
        assert_eq!(c.hcr, hcr::RW | hcr::TSC | hcr::API | hcr::APK | hcr::ATA);
        assert_eq!((c.hcrx, c.fgt, c.mdcr), (Some(0), None, 6));
        // Without mte=on QEMU's max reports MTE level 0 in ID_AA64PFR1_EL1.
        let f = Features::from_ids(&IdRegs { pfr1: 0x100_0021, ..MAX_MTE });
        assert!(!f.mte2);
    }

    #[test]
    fn a_cortex_a76_keeps_sve_and_sme_trapped_and_gets_its_pmu() {
        let f = Features::from_ids(&A76);
        assert!(!f.sve && !f.sme && !f.mte2 && !f.fgt && !f.hcx && f.vhe);
        let c = guest_controls(Mode::Nvhe, &f);
        assert_eq!(c.cptr, 0x33ff, "TZ and TSM are RES1 without SVE/SME; TFP clear");
        assert_eq!((c.zcr, c.smcr, c.hcrx, c.fgt), (None, None, None, None));
        assert_eq!(c.hcr & hcr::ATA, 0);
        assert_eq!(c.mdcr, 6, "HPMN = N: every counter is the guest's");
        assert_eq!((c.gcscr, c.tcr2, c.sctlr2), (None, None, None));
    }

    /// Every feature this module knows of.
    fn everything() -> Features {
        let ids = IdRegs {
            pfr0: (1 << 32) | (1 << 24) | (1 << 44),
            pfr1: (1 << 24) | (2 << 8) | (1 << 44),
            smfr0: (1 << 63) | (1 << 56),
            mmfr0: 2 << 56,
            mmfr1: (1 << 40) | (1 << 8) | (1 << 20),
            mmfr2: 1 << 4,
            mmfr3: (1 << 8) | (1 << 16) | 1 | (1 << 4),
            mmfr4: 0,
            isar2: 1 << 16,
            dfr0: (3 << 32) | (1 << 44) | (9 << 8) | (1 << 52),
            pmu_counters: 31,
        };
        let f = Features::from_ids(&ids);
        assert!(f.sve && f.sme && f.sme_fa64 && f.sme2 && f.mte2 && f.fgt && f.fgt2 && f.hcx && f.mops);
        assert!(f.spe && f.spe_v1p2 && f.trbe && f.brbe && f.pmuv3p9 && f.amu && f.gcs && f.gic_sysregs);
        assert!(f.s1pie && f.s1poe && f.tcr2 && f.sctlr2);
        f
    }

    #[test]
    fn everything_the_cpu_has_is_the_guests_untrapped() {
        let f = everything();
        let c = guest_controls(Mode::Nvhe, &f);
        assert_eq!(c.cptr & (cptr::TZ | cptr::TSM | cptr::TFP | cptr::TTA | cptr::TAM | cptr::TCPAC), 0);
        assert_eq!(c.cptr, cptr::RES1);
        assert_eq!(c.zcr, Some(0xf));
        assert_eq!(c.smcr, Some(0xf | SMCR_FA64 | SMCR_EZT0));
        assert_eq!(c.hcr & hcr::ATA, hcr::ATA, "MTE2: tags reachable from EL1");
        assert_eq!(c.hcrx, Some(HCRX_MSCEN | HCRX_TCR2EN | HCRX_SCTLR2EN | HCRX_GCSEN));
        assert_eq!(c.mdcr, 31 | (3 << 12) | (3 << 24));
        assert_eq!((c.gcscr, c.tcr2, c.sctlr2), (Some(0), Some(0), Some(0)));
        let g = c.fgt.unwrap();
        let hfg = fgt::HFG_SME | fgt::HFG_S1PIE | fgt::HFG_S1POE | fgt::HFG_GCS;
        assert_eq!((g.hfgrtr, g.hfgwtr), (hfg, hfg), "the n-bits of every feature set, every trap bit clear");
        assert_eq!(g.hfgitr, fgt::HFGI_GCS | fgt::HFGI_BRBE);
        assert_eq!(g.hdfgrtr, fgt::HDFGR_BRBE | fgt::HDFG_SPE_V1P2);
        assert_eq!(g.hdfgwtr, fgt::HDFGW_BRBE | fgt::HDFG_SPE_V1P2);
        assert_eq!((g.hafgrtr, g.hdfg2), (Some(0), Some(fgt::HDFG2_PMUV3P9)));
    }

    #[test]
    fn fine_grained_n_bits_are_set_only_for_features_the_cpu_has() {
        // FGT alone: every n-bit is RES0 there, so all five registers are 0.
        let f = Features::from_ids(&IdRegs { mmfr0: 1 << 56, ..A76 });
        assert_eq!(
            fgt(&f),
            Some(Fgt { hfgrtr: 0, hfgwtr: 0, hfgitr: 0, hdfgrtr: 0, hdfgwtr: 0, hafgrtr: None, hdfg2: None })
        );
        let f = Features { sme: true, ..f };
        assert_eq!(fgt(&f).unwrap().hfgrtr, fgt::HFG_SME, "SME's registers do not trap");
    }

    #[test]
    fn mte_without_tag_storage_needs_no_ata() {
        let f = Features::from_ids(&IdRegs { pfr1: 1 << 8, ..A76 });
        assert!(!f.mte2);
        assert_eq!(guest_controls(Mode::Nvhe, &f).hcr & hcr::ATA, 0);
    }

    #[test]
    fn no_pmu_means_no_counters() {
        for ver in [0, 0xf] {
            let f = Features::from_ids(&IdRegs { dfr0: ver << 8, pmu_counters: 6, ..A76 });
            assert_eq!((f.pmu_counters, f.pmu), (0, false));
        }
    }

    #[test]
    fn e2h0_below_zero_means_e2h_is_res1() {
        // ID_AA64MMFR4_EL1.E2H0 (27:24) is signed: 0b1110 (-2) and 0b1111 (-1) say "no nVHE".
        for v in [0b1110u64, 0b1111] {
            assert!(Features::from_ids(&IdRegs { mmfr4: v << 24, ..A76 }).e2h_res1);
        }
        assert!(!Features::from_ids(&IdRegs { mmfr4: 1 << 24, ..A76 }).e2h_res1);
    }

    // The layout differences, one test each.

    #[test]
    fn hvhe_sets_e2h_and_never_tge() {
        let f = Features::from_ids(&A76);
        for mode in [Mode::Nvhe, HVHE, Mode::Hvhe(Why::Res1)] {
            let h = hcr_guest(mode, &f, true);
            assert_eq!(h & hcr::E2H != 0, mode.e2h());
            assert_eq!(h & hcr::TGE, 0, "TGE = 0: the guest runs at EL1 in both modes");
            assert_eq!(h & hcr::VM, hcr::VM);
        }
        assert_eq!(HCR_ENTRY, hcr::RW, "entry: no E2H, no TGE, no trap");
    }

    #[test]
    fn cptr_takes_cpacrs_layout_under_e2h() {
        let f = everything();
        let v = cptr_guest(HVHE, &f);
        assert_eq!(v, cptr::FPEN | cptr::ZEN | cptr::SMEN, "FP, SVE and SME enabled, TTA/TAM/TCPAC clear");
        // The E2H = 0 value read in the E2H = 1 layout would trap SVE (ZEN = 0): what KVM's
        // virtual EL2 did to the ZCR_EL2 write (EC 0x19).
        assert_eq!(cptr_guest(Mode::Nvhe, &f) & cptr::ZEN, 0);
        assert_eq!(cptr_guest(Mode::Nvhe, &f) & cptr::FPEN, 0);
        let a76 = Features::from_ids(&A76);
        assert_eq!(cptr_guest(HVHE, &a76), cptr::FPEN, "no SVE or SME: their enables stay 0 (RES0)");
        assert_eq!(cptr_entry(Mode::Nvhe), 0x33ff);
        assert_eq!(cptr_entry(HVHE), cptr::FPEN);
    }

    #[test]
    fn cnthctl_moves_el1_timer_access_to_bits_10_and_11_under_e2h() {
        assert_eq!(cnthctl(Mode::Nvhe), 0b11);
        assert_eq!(cnthctl(HVHE), 0xc00);
        assert_eq!(cnthctl(HVHE) & 0b11, 0, "bits 0/1 are EL0PCTEN/EL0VCTEN there (TGE = 1 only)");
    }

    #[test]
    fn sctlr_el2_keeps_pan_unchanged_and_little_endian_in_both_layouts() {
        let on = sctlr_mmu_on(true);
        assert_eq!(on, 0x30c5_183d | sctlr::WXN);
        assert_eq!(on & sctlr::SPAN, sctlr::SPAN, "E2H = 1: SPAN = 1, exceptions leave PSTATE.PAN alone");
        assert_eq!(on & sctlr::EE, 0);
        assert_eq!(SCTLR_MMU_OFF & (sctlr::M | sctlr::C | sctlr::A | sctlr::EE), 0);
        assert_eq!(sctlr_mmu_on(false) & sctlr::WXN, 0);
    }

    #[test]
    fn tcr_el2_takes_tcr_el1s_layout_under_e2h() {
        use pgtable::regime::parange;
        assert_eq!(tcr(Mode::Nvhe, parange::PA_40), 0x8082_3510, "PS in 18:16, RES1 23 and 31");
        let v = tcr(HVHE, parange::PA_40);
        assert_eq!((v >> 32) & 7, parange::PA_40 as u64, "IPS in 34:32");
        assert_eq!(v & (1 << 23), 1 << 23, "EPD1: no TTBR1_EL2 walks");
        assert_eq!(v & 0x3f, 16, "T0SZ = 16: 48-bit VA from TTBR0_EL2");
        assert_eq!((v >> 16) & 0x3f, 16, "T1SZ (unused) a valid size");
        assert_eq!(regime(Mode::Nvhe), pgtable::Regime::El2);
        assert_eq!(regime(HVHE), pgtable::Regime::El20);
    }

    #[test]
    fn the_mode_is_decided_once_and_secondaries_follow_it() {
        assert_eq!(decide(true, false), Mode::Hvhe(Why::Res1));
        assert_eq!(decide(true, true), Mode::Hvhe(Why::Res1), "RES1 wins: nothing was forced");
        assert_eq!(decide(false, true), Mode::Hvhe(Why::Forced));
        assert_eq!(decide(false, false), Mode::Nvhe);
        assert_eq!(secondary(Mode::Nvhe, false), Ok(false));
        assert!(secondary(Mode::Nvhe, true).is_err());
        assert_eq!(secondary(HVHE, false), Ok(true), "a forced mode is set on each CPU");
        assert_eq!(secondary(Mode::Hvhe(Why::Res1), true), Ok(false));
    }

    #[test]
    fn icc_sre_follows_the_boards_gic() {
        assert_eq!(icc_sre(true), 0b1001);
        assert_eq!(icc_sre(false), 0);
    }
}
