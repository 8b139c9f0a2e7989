//! Decisions from ID registers, as pure functions (the target reads the registers, the host
//! tests the decisions).

/// MIDR_EL1 fields.
const fn implementer(midr: u64) -> u64 {
    (midr >> 24) & 0xff
}
const fn variant(midr: u64) -> u64 {
    (midr >> 20) & 0xf
}
const fn part(midr: u64) -> u64 {
    (midr >> 4) & 0xfff
}
const fn revision(midr: u64) -> u64 {
    midr & 0xf
}

/// CPUs known never to raise TLB conflict aborts when a block and a table (or contiguous and
/// non-contiguous entries) for the same output coexist: (implementer, part, minimum variant,
/// minimum revision within that variant). Linux's list: Cortex-X4 r0p3+, Neoverse-V3 and
/// V3AE r0p2+, AmpereOne (all). Plus QEMU's `max` CPU (implementer 0, part 'Q' = 0x051), whose
/// TCG TLB never raises conflict aborts.
const BBML2_ALLOW: [(u64, u64, u64, u64); 6] = [
    (0x41, 0xd82, 0, 3), // Cortex-X4
    (0x41, 0xd84, 0, 2), // Neoverse-V3
    (0x41, 0xd83, 0, 2), // Neoverse-V3AE
    (0xc0, 0xac3, 0, 0), // AmpereOne
    (0xc0, 0xac4, 0, 0), // AmpereOne AC04
    (0x00, 0x051, 0, 0), // QEMU max
];

/// Whether BBML2 may be trusted: ID_AA64MMFR2_EL1.BBM (bits 55:52) >= 2 **and** the CPU is on
/// the allow-list. `forced_off` is the boot argument that disables it.
pub const fn bbml2_allowed(midr: u64, id_aa64mmfr2: u64, forced_off: bool) -> bool {
    if forced_off || (id_aa64mmfr2 >> 52) & 0xf < 2 {
        return false;
    }
    let mut i = 0;
    while i < BBML2_ALLOW.len() {
        let (imp, p, var, rev) = BBML2_ALLOW[i];
        if implementer(midr) == imp
            && part(midr) == p
            && (variant(midr) > var || (variant(midr) == var && revision(midr) >= rev))
        {
            return true;
        }
        i += 1;
    }
    false
}

/// FEAT_TLBIRANGE: ID_AA64ISAR0_EL1.TLB (bits 59:56) == 0b0010.
pub const fn has_tlbi_range(id_aa64isar0: u64) -> bool {
    (id_aa64isar0 >> 56) & 0xf >= 2
}

/// 16-bit ASIDs: ID_AA64MMFR0_EL1.ASIDBits (bits 7:4) == 0b0010.
pub const fn has_asid16(id_aa64mmfr0: u64) -> bool {
    (id_aa64mmfr0 >> 4) & 0xf == 2
}

/// 16-bit VMIDs: ID_AA64MMFR1_EL1.VMIDBits (bits 7:4) == 0b0010.
pub const fn has_vmid16(id_aa64mmfr1: u64) -> bool {
    (id_aa64mmfr1 >> 4) & 0xf == 2
}

/// PARange (ID_AA64MMFR0_EL1 bits 3:0).
pub const fn parange(id_aa64mmfr0: u64) -> u8 {
    (id_aa64mmfr0 & 0xf) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    const BBM2: u64 = 2 << 52;

    #[test]
    fn bbml2_allow_list() {
        let x4 = |var: u64, rev: u64| 0x41 << 24 | var << 20 | 0xf << 16 | 0xd82 << 4 | rev;
        assert!(!bbml2_allowed(x4(0, 2), BBM2, false));
        assert!(bbml2_allowed(x4(0, 3), BBM2, false));
        assert!(bbml2_allowed(x4(1, 0), BBM2, false));
        assert!(!bbml2_allowed(x4(0, 3), 1 << 52, false), "BBM level 1 is not enough");
        assert!(!bbml2_allowed(x4(0, 3), BBM2, true), "boot argument forces it off");
        assert!(bbml2_allowed(0x000f_0510, BBM2, false), "QEMU max");
        // Cortex-A76 (Raspberry Pi 5): never.
        assert!(!bbml2_allowed(0x414f_d0b1, BBM2, false));
    }

    #[test]
    fn id_fields() {
        assert!(has_tlbi_range(0x0200_0000_0000_0000));
        assert!(!has_tlbi_range(0x0100_0000_0000_0000));
        assert!(has_asid16(0x20));
        assert!(has_vmid16(0x20));
        assert_eq!(parange(0x1122), 2);
    }
}
