//! Exception syndrome (ESR_ELx) decoding: for fault reports at both levels, the hypervisor's
//! and the kernel's fault handling, and the EL0 programs' fault handlers (which get ESR_EL1 in
//! x1, see [`crate::syscall`]). The fault status code is read in one place, [`FaultStatus`].

/// Exception class: ESR bits [31:26].
pub fn class(esr: u64) -> u8 {
    ((esr >> 26) & 0x3f) as u8
}

/// Unknown reason: an undefined or unallocated instruction.
pub const EC_UNKNOWN: u8 = 0x00;
/// A trapped WFI or WFE.
pub const EC_WFX: u8 = 0x01;
/// An SVE, Advanced SIMD or floating-point access trapped (CPTR/CPACR).
pub const EC_SVE_SIMD_FP: u8 = 0x07;
/// Illegal execution state (PSTATE.IL set on an exception return).
pub const EC_ILLEGAL_STATE: u8 = 0x0e;
/// SVC from AArch64: a system call.
pub const EC_SVC64: u8 = 0x15;
/// HVC from AArch32.
pub const EC_HVC32: u8 = 0x12;
/// SMC from AArch32.
pub const EC_SMC32: u8 = 0x13;
/// HVC from AArch64: a hypervisor call.
pub const EC_HVC64: u8 = 0x16;
/// SMC from AArch64 (trapped to EL2 with HCR_EL2.TSC).
pub const EC_SMC64: u8 = 0x17;
/// MSR, MRS or a system instruction trapped.
pub const EC_SYSREG: u8 = 0x18;
/// An SVE access trapped (CPTR_EL2.TZ / CPACR_EL1.ZEN).
pub const EC_SVE: u8 = 0x19;
/// Instruction abort from a lower exception level.
pub const EC_IABT_LOWER: u8 = 0x20;
/// Instruction abort taken without a change of exception level.
pub const EC_IABT_CUR: u8 = 0x21;
/// PC alignment fault.
pub const EC_PC_ALIGN: u8 = 0x22;
/// Data abort from a lower exception level.
pub const EC_DABT_LOWER: u8 = 0x24;
/// Data abort taken without a change of exception level.
pub const EC_DABT_CUR: u8 = 0x25;
/// SP alignment fault.
pub const EC_SP_ALIGN: u8 = 0x26;
/// SError interrupt.
pub const EC_SERROR: u8 = 0x2f;
/// BRK instruction from AArch64.
pub const EC_BRK64: u8 = 0x3c;

/// Name of an exception class.
pub fn class_name(ec: u8) -> &'static str {
    match ec {
        EC_UNKNOWN => "unknown reason (undefined instruction)",
        EC_WFX => "WFI/WFE",
        EC_SVE_SIMD_FP => "SVE/SIMD/FP access trapped",
        EC_ILLEGAL_STATE => "illegal execution state",
        EC_HVC32 => "HVC (AArch32)",
        EC_SMC32 => "SMC (AArch32)",
        EC_SVC64 => "SVC (AArch64)",
        EC_HVC64 => "HVC (AArch64)",
        EC_SMC64 => "SMC (AArch64)",
        EC_SYSREG => "MSR/MRS/system instruction trapped",
        EC_SVE => "SVE access trapped",
        EC_IABT_LOWER => "instruction abort from a lower EL",
        EC_IABT_CUR => "instruction abort at the current EL",
        EC_PC_ALIGN => "PC alignment fault",
        EC_DABT_LOWER => "data abort from a lower EL",
        EC_DABT_CUR => "data abort at the current EL",
        EC_SP_ALIGN => "SP alignment fault",
        EC_SERROR => "SError",
        EC_BRK64 => "BRK (AArch64)",
        _ => "other exception class",
    }
}

/// Data/instruction fault status code (ISS bits [5:0] of an abort).
pub fn fault_status(esr: u64) -> u8 {
    (esr & 0x3f) as u8
}

/// What an abort's fault status code (DFSC / IFSC) says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultStatus {
    /// Address size fault at a level (0-3).
    AddressSize(u8),
    /// Translation fault: nothing valid at that level.
    Translation(u8),
    /// Access flag fault.
    AccessFlag(u8),
    /// Permission fault.
    Permission(u8),
    /// Synchronous external abort, not on a table walk (a bus error; what the hypervisor
    /// injects for an access to memory nobody owns).
    SyncExternal,
    /// Alignment fault.
    Alignment,
    /// TLB conflict abort.
    TlbConflict,
    /// Any other code.
    Other(u8),
}

impl FaultStatus {
    /// Decodes a fault status code (bits [5:2] the kind, [1:0] the level where it has one).
    pub fn from_fsc(fsc: u8) -> FaultStatus {
        let level = fsc & 3;
        match fsc & 0x3c {
            0x00 => FaultStatus::AddressSize(level),
            0x04 => FaultStatus::Translation(level),
            0x08 => FaultStatus::AccessFlag(level),
            0x0c => FaultStatus::Permission(level),
            _ => match fsc & 0x3f {
                0x10 => FaultStatus::SyncExternal,
                0x21 => FaultStatus::Alignment,
                0x30 => FaultStatus::TlbConflict,
                other => FaultStatus::Other(other),
            },
        }
    }

    /// The status of the abort whose syndrome is `esr`.
    pub fn of(esr: u64) -> FaultStatus {
        FaultStatus::from_fsc(fault_status(esr))
    }

    /// A translation fault (any level).
    pub fn is_translation(self) -> bool {
        matches!(self, FaultStatus::Translation(_))
    }

    /// A permission fault (any level).
    pub fn is_permission(self) -> bool {
        matches!(self, FaultStatus::Permission(_))
    }

    /// The level, for the kinds that have one.
    pub fn level(self) -> Option<u8> {
        match self {
            FaultStatus::AddressSize(l)
            | FaultStatus::Translation(l)
            | FaultStatus::AccessFlag(l)
            | FaultStatus::Permission(l) => Some(l),
            _ => None,
        }
    }

    /// Its name, without the level.
    pub fn name(self) -> &'static str {
        match self {
            FaultStatus::AddressSize(_) => "address size fault",
            FaultStatus::Translation(_) => "translation fault",
            FaultStatus::AccessFlag(_) => "access flag fault",
            FaultStatus::Permission(_) => "permission fault",
            FaultStatus::SyncExternal => "synchronous external abort",
            FaultStatus::Alignment => "alignment fault",
            FaultStatus::TlbConflict => "TLB conflict abort",
            FaultStatus::Other(_) => "other fault",
        }
    }
}

/// Name of an abort's fault status code (without its level).
pub fn fault_status_name(fsc: u8) -> &'static str {
    FaultStatus::from_fsc(fsc).name()
}

/// Level of a translation/access/permission fault (bits [1:0] of the status code).
pub fn fault_level(fsc: u8) -> u8 {
    fsc & 3
}

/// For a data abort: was it a write (ISS.WnR)?
pub fn is_write(esr: u64) -> bool {
    esr & (1 << 6) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_stage2_translation_fault() {
        // EC 0x24, IL, ISV clear, WnR, DFSC = translation fault level 3.
        let esr = (0x24u64 << 26) | (1 << 25) | (1 << 6) | 0x07;
        assert_eq!(class(esr), EC_DABT_LOWER);
        assert_eq!(class_name(class(esr)), "data abort from a lower EL");
        assert!(is_write(esr));
        assert_eq!(fault_status_name(fault_status(esr)), "translation fault");
        assert_eq!(fault_level(fault_status(esr)), 3);
    }

    #[test]
    fn every_status_code_decodes_to_one_kind() {
        for fsc in 0..64u8 {
            let st = FaultStatus::from_fsc(fsc);
            match fsc >> 2 {
                0 => assert_eq!(st, FaultStatus::AddressSize(fsc & 3)),
                1 => assert_eq!(st, FaultStatus::Translation(fsc & 3)),
                2 => assert_eq!(st, FaultStatus::AccessFlag(fsc & 3)),
                3 => assert_eq!(st, FaultStatus::Permission(fsc & 3)),
                _ => assert_eq!(st.level(), None, "{fsc:#x}"),
            }
            assert_eq!(st.is_translation(), fsc >> 2 == 1);
            assert_eq!(st.is_permission(), fsc >> 2 == 3);
        }
        assert_eq!(FaultStatus::from_fsc(0x10), FaultStatus::SyncExternal);
        assert_eq!(FaultStatus::from_fsc(0x11), FaultStatus::Other(0x11));
        assert_eq!(FaultStatus::of((0x24 << 26) | 0x0e), FaultStatus::Permission(2));
    }

    #[test]
    fn names_permission_and_conflict_faults() {
        assert_eq!(fault_status_name(0x0f), "permission fault");
        assert_eq!(fault_status_name(0x30), "TLB conflict abort");
        assert_eq!(class_name(0x16), "HVC (AArch64)");
    }
}
