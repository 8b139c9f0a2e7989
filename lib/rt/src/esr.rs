//! Exception syndrome (ESR_ELx) decoding, for fault reports at both levels.

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

/// Name of an abort's fault status code, with its level where it has one.
pub fn fault_status_name(fsc: u8) -> &'static str {
    match fsc & 0x3c {
        0x00 => "address size fault",
        0x04 => "translation fault",
        0x08 => "access flag fault",
        0x0c => "permission fault",
        _ => match fsc {
            0x10 => "synchronous external abort",
            0x21 => "alignment fault",
            0x30 => "TLB conflict abort",
            _ => "other fault",
        },
    }
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
    fn names_permission_and_conflict_faults() {
        assert_eq!(fault_status_name(0x0f), "permission fault");
        assert_eq!(fault_status_name(0x30), "TLB conflict abort");
        assert_eq!(class_name(0x16), "HVC (AArch64)");
    }
}
