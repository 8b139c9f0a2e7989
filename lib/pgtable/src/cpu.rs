//! Decisions from ID registers, as pure functions (the target reads the registers, the host
//! tests the decisions).
//!
//! - [`Midr`]: MIDR_EL1 decoded once (implementer, part, variant, revision, a name for the core).
//! - [`capability`]: whether BBML2 may be trusted on a CPU, or the [`Refusal`] that says why not.
//! - Feature fields: [`has_tlbi_range`], [`has_asid16`], [`has_vmid16`], [`parange`] (its
//!   encodings and widths are [`crate::regime::parange`]).

use core::fmt;

/// A MIDR_EL1 value: which core this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Midr(pub u64);

impl Midr {
    /// Implementer (bits 31:24): 0x41 Arm, 0xc0 Ampere, 0x46 Fujitsu, 0x00 software (QEMU).
    pub const fn implementer(self) -> u8 {
        (self.0 >> 24) as u8
    }
    /// Variant (bits 23:20): the `r` of `rNpM`.
    pub const fn variant(self) -> u8 {
        ((self.0 >> 20) & 0xf) as u8
    }
    /// Primary part number (bits 15:4).
    pub const fn part(self) -> u16 {
        ((self.0 >> 4) & 0xfff) as u16
    }
    /// Revision (bits 3:0): the `p` of `rNpM`.
    pub const fn revision(self) -> u8 {
        (self.0 & 0xf) as u8
    }
    /// Whether this is at least revision `rVARpREV`.
    pub const fn at_least(self, variant: u8, revision: u8) -> bool {
        self.variant() > variant || (self.variant() == variant && self.revision() >= revision)
    }
    /// A name for the core ("unknown core" when it is not in the table).
    pub const fn name(self) -> &'static str {
        match (self.implementer(), self.part()) {
            (0x41, 0xd03) => "Cortex-A53",
            (0x41, 0xd04) => "Cortex-A35",
            (0x41, 0xd07) => "Cortex-A57",
            (0x41, 0xd08) => "Cortex-A72",
            (0x41, 0xd0b) => "Cortex-A76",
            (0x41, 0xd0c) => "Neoverse-N1",
            (0x41, 0xd40) => "Neoverse-V1",
            (0x41, 0xd4f) => "Neoverse-V2",
            (0x41, 0xd82) => "Cortex-X4",
            (0x41, 0xd83) => "Neoverse-V3AE",
            (0x41, 0xd84) => "Neoverse-V3",
            (0xc0, 0xac3) => "AmpereOne",
            (0xc0, 0xac4) => "AmpereOne AC04",
            (0x46, 0x001) => "A64FX",
            (0x00, 0x051) => "QEMU max",
            _ => "unknown core",
        }
    }
}

/// `Cortex-A76 r4p1` (the name, then `r<variant>p<revision>`).
impl fmt::Display for Midr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} r{}p{}", self.name(), self.variant(), self.revision())
    }
}

/// CPUs known never to raise TLB conflict aborts when a block and a table (or contiguous and
/// non-contiguous entries) for the same output coexist: (implementer, part, minimum variant,
/// minimum revision within that variant). Linux's list: Cortex-X4 r0p3+, Neoverse-V3 and
/// V3AE r0p2+, AmpereOne (all). Plus QEMU's `max` CPU (implementer 0, part 'Q' = 0x051), whose
/// TCG TLB never raises conflict aborts.
const BBML2_ALLOW: [(u8, u16, u8, u8); 6] = [
    (0x41, 0xd82, 0, 3), // Cortex-X4
    (0x41, 0xd84, 0, 2), // Neoverse-V3
    (0x41, 0xd83, 0, 2), // Neoverse-V3AE
    (0xc0, 0xac3, 0, 0), // AmpereOne
    (0xc0, 0xac4, 0, 0), // AmpereOne AC04
    (0x00, 0x051, 0, 0), // QEMU max
];

/// Why BBML2 may not be trusted on a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// ID_AA64MMFR2_EL1.BBM is below 2: the level the CPU has (0 or 1).
    BbmLevel(u8),
    /// BBM level 2, but the core is not on the allow-list of cores that never raise TLB
    /// conflict aborts.
    NotAllowListed(Midr),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refusal::BbmLevel(0) => f.write_str("no FEAT_BBM"),
            Refusal::BbmLevel(level) => write!(f, "FEAT_BBM level {level} only"),
            Refusal::NotAllowListed(midr) => write!(f, "CPU {midr} not on the BBML2 allow-list"),
        }
    }
}

/// ID_AA64MMFR2_EL1.BBM (bits 55:52): 0, 1 or 2 (level 2 = change a block's size without
/// break-before-make).
pub const fn bbm_level(id_aa64mmfr2: u64) -> u8 {
    ((id_aa64mmfr2 >> 52) & 0xf) as u8
}

/// Whether BBML2 may be trusted on this CPU: ID_AA64MMFR2_EL1.BBM >= 2 **and** the core is on
/// the allow-list (FEAT_BBM level 2 alone still permits TLB conflict aborts). A boot argument
/// that turns BBML2 off is the caller's concern ([`crate::kmem::bbml2_decide`]).
///
/// # Errors
///
/// [`Refusal::BbmLevel`] below level 2, else [`Refusal::NotAllowListed`] for a core not on
/// the list (or on it at too early a revision).
pub const fn capability(midr: Midr, id_aa64mmfr2: u64) -> Result<(), Refusal> {
    let level = bbm_level(id_aa64mmfr2);
    if level < 2 {
        return Err(Refusal::BbmLevel(level));
    }
    let mut i = 0;
    while i < BBML2_ALLOW.len() {
        let (imp, part, var, rev) = BBML2_ALLOW[i];
        if midr.implementer() == imp && midr.part() == part && midr.at_least(var, rev) {
            return Ok(());
        }
        i += 1;
    }
    Err(Refusal::NotAllowListed(midr))
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

/// PARange (ID_AA64MMFR0_EL1 bits 3:0); [`crate::regime::parange::bits`] gives its width.
pub const fn parange(id_aa64mmfr0: u64) -> u8 {
    (id_aa64mmfr0 & 0xf) as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    const BBM2: u64 = 2 << 52;

    fn x4(var: u64, rev: u64) -> Midr {
        Midr(0x41 << 24 | var << 20 | 0xf << 16 | 0xd82 << 4 | rev)
    }

    #[test]
    fn midr_fields_and_name() {
        let a76 = Midr(0x414f_d0b1);
        assert_eq!((a76.implementer(), a76.part(), a76.variant(), a76.revision()), (0x41, 0xd0b, 4, 1));
        assert_eq!(a76.to_string(), "Cortex-A76 r4p1");
        assert_eq!(Midr(0x000f_0510).to_string(), "QEMU max r0p0");
        assert_eq!(Midr(0x4100_0000).name(), "unknown core");
        assert!(x4(1, 0).at_least(0, 3) && x4(0, 3).at_least(0, 3) && !x4(0, 2).at_least(0, 3));
    }

    #[test]
    fn bbml2_allow_list() {
        assert_eq!(capability(x4(0, 2), BBM2), Err(Refusal::NotAllowListed(x4(0, 2))), "X4 before r0p3");
        assert_eq!(capability(x4(0, 3), BBM2), Ok(()));
        assert_eq!(capability(x4(1, 0), BBM2), Ok(()), "a later variant at any revision");
        assert_eq!(capability(x4(0, 3), 1 << 52), Err(Refusal::BbmLevel(1)), "BBM level 1 is not enough");
        assert_eq!(capability(x4(0, 3), 0), Err(Refusal::BbmLevel(0)));
        assert_eq!(capability(Midr(0x000f_0510), BBM2), Ok(()), "QEMU max");
        assert_eq!(capability(Midr(0x410f_d823), BBM2), Ok(()), "Neoverse-V3AE r0p3");
        assert_eq!(capability(Midr(0x410f_d841), BBM2), Err(Refusal::NotAllowListed(Midr(0x410f_d841))), "V3 r0p1");
        // Cortex-A76 (Raspberry Pi 5): never, and the level is checked first.
        assert_eq!(capability(Midr(0x414f_d0b1), 0), Err(Refusal::BbmLevel(0)));
        assert_eq!(capability(Midr(0x414f_d0b1), BBM2), Err(Refusal::NotAllowListed(Midr(0x414f_d0b1))));
    }

    #[test]
    fn refusals_print_themselves() {
        assert_eq!(Refusal::BbmLevel(0).to_string(), "no FEAT_BBM");
        assert_eq!(Refusal::BbmLevel(1).to_string(), "FEAT_BBM level 1 only");
        assert_eq!(
            Refusal::NotAllowListed(Midr(0x414f_d0b1)).to_string(),
            "CPU Cortex-A76 r4p1 not on the BBML2 allow-list"
        );
    }

    #[test]
    fn id_fields() {
        assert!(has_tlbi_range(0x0200_0000_0000_0000));
        assert!(!has_tlbi_range(0x0100_0000_0000_0000));
        assert!(has_asid16(0x20));
        assert!(has_vmid16(0x20));
        assert_eq!(parange(0x1122), 2);
        assert_eq!(bbm_level(0x0021_0000_0000_0000), 2);
    }
}
