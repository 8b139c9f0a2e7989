//! A guest's abort at EL2 decoded once, from ESR_EL2, FAR_EL2 and HPFAR_EL2, into one typed
//! value the trap handler passes around (instead of each handler re-reading the registers and
//! re-deriving the IPA).
//!
//! HPFAR_EL2.FIPA holds IPA[47:12] in bits [43:4], and it is valid only for stage-2 translation
//! and access-flag faults and for faults on a stage-1 table walk (ISS.S1PTW). For any other
//! stage-2 fault (a permission fault in particular: dirty logging's write-protect) the IPA must
//! be found by translating FAR through the guest's stage 1 (`AT S1E1R`), as KVM does.

use abi::esr::{self, FaultStatus};

/// ESR ISS bit 7: the fault happened on a stage-1 translation table walk.
pub const ISS_S1PTW: u64 = 1 << 7;

/// The IPA HPFAR_EL2 and FAR_EL2 give together: FIPA (IPA[47:12]) and the page offset.
pub fn ipa_from_hpfar(hpfar: u64, far: u64) -> u64 {
    ((hpfar & 0x0fff_ffff_fff0) << 8) | (far & 0xfff)
}

/// A data or instruction abort from the guest, taken to EL2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestAbort {
    /// ESR_EL2.
    pub esr: u64,
    /// An instruction fetch (else a data access).
    pub insn: bool,
    /// A data write (ISS.WnR); false for a fetch.
    pub write: bool,
    /// The fault status.
    pub status: FaultStatus,
    /// On a stage-1 table walk.
    pub s1ptw: bool,
    /// FAR_EL2: the guest's virtual address.
    pub far: u64,
    /// HPFAR_EL2 as read (meaningful only where [`GuestAbort::hpfar_ipa`] says).
    pub hpfar: u64,
}

impl GuestAbort {
    /// Decodes the syndrome; None unless it is a data or instruction abort from a lower EL.
    pub fn decode(esr: u64, far: u64, hpfar: u64) -> Option<GuestAbort> {
        let insn = match esr::class(esr) {
            esr::EC_IABT_LOWER => true,
            esr::EC_DABT_LOWER => false,
            _ => return None,
        };
        Some(GuestAbort {
            esr,
            insn,
            write: !insn && esr::is_write(esr),
            status: FaultStatus::of(esr),
            s1ptw: esr & ISS_S1PTW != 0,
            far,
            hpfar,
        })
    }

    /// The IPA, where HPFAR_EL2 holds it (translation or access-flag fault, or a fault on a
    /// stage-1 walk); None where it must be found by translating FAR.
    pub fn hpfar_ipa(&self) -> Option<u64> {
        let valid = matches!(self.status, FaultStatus::Translation(_) | FaultStatus::AccessFlag(_)) || self.s1ptw;
        valid.then(|| ipa_from_hpfar(self.hpfar, self.far))
    }

    /// A stage-2 translation fault: nothing mapped at the IPA (yet: a split may be breaking
    /// the entry, or the hypervisor emulates the page).
    pub fn is_translation(&self) -> bool {
        self.status.is_translation()
    }

    /// A write that stage 2 refused for its permissions (dirty logging's write-protect).
    pub fn is_write_permission(&self) -> bool {
        self.write && self.status.is_permission()
    }

    /// What the access was, for reports.
    pub fn access(&self) -> &'static str {
        if self.insn {
            "instruction fetch"
        } else if self.write {
            "write"
        } else {
            "read"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DABT: u64 = (esr::EC_DABT_LOWER as u64) << 26;
    const IABT: u64 = (esr::EC_IABT_LOWER as u64) << 26;
    const WNR: u64 = 1 << 6;

    #[test]
    fn hpfar_gives_the_ipa_only_where_it_is_valid() {
        let (far, hpfar) = (0xffff_0000_1234_5678, 0x4_5678_9ab0);
        let ipa = 0x456_789a_b678;
        assert_eq!(ipa_from_hpfar(hpfar, far), ipa);
        for (fsc, valid) in [(0x04, true), (0x07, true), (0x09, true), (0x0f, false), (0x10, false), (0x01, false)] {
            for s1ptw in [false, true] {
                let esr = DABT | WNR | fsc | if s1ptw { ISS_S1PTW } else { 0 };
                let a = GuestAbort::decode(esr, far, hpfar).unwrap();
                assert_eq!(a.hpfar_ipa(), (valid || s1ptw).then_some(ipa), "fsc {fsc:#x} s1ptw {s1ptw}");
            }
        }
    }

    #[test]
    fn kinds_and_accesses() {
        let w = GuestAbort::decode(DABT | WNR | 0x0f, 0, 0).unwrap();
        assert!(w.is_write_permission() && !w.is_translation());
        assert_eq!(w.access(), "write");
        let r = GuestAbort::decode(DABT | 0x0f, 0, 0).unwrap();
        assert!(!r.is_write_permission());
        assert_eq!(r.access(), "read");
        // WnR means nothing for a fetch.
        let f = GuestAbort::decode(IABT | WNR | 0x06, 0, 0).unwrap();
        assert!(f.insn && !f.write && f.is_translation());
        assert_eq!(f.access(), "instruction fetch");
        assert_eq!(GuestAbort::decode((esr::EC_HVC64 as u64) << 26, 0, 0), None);
        assert_eq!(GuestAbort::decode((esr::EC_DABT_CUR as u64) << 26, 0, 0), None);
    }
}
