//! Decoding a trapped guest load or store for MMIO emulation: when stage 2 has nothing at an
//! address the hypervisor emulates, the data abort's syndrome (ISV = 1) says which register,
//! how wide, signed or not, read or write. Loads and stores without a valid syndrome (pairs,
//! writeback, SIMD) are not emulated: the guest gets an external abort instead.

/// One decoded single-register access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// A store.
    pub write: bool,
    /// Bytes: 1, 2, 4 or 8.
    pub size: u8,
    /// The general-purpose register (31 = XZR for a store, discarded for a load).
    pub reg: u8,
    /// Sign-extend a load (SSE).
    pub sign_extend: bool,
    /// The register is 64-bit (SF): a sign-extended load fills all 64 bits.
    pub sixty_four: bool,
    /// The instruction was 32 bits long (IL): the guest resumes 4 bytes on.
    pub len: u8,
}

/// Decodes ESR_EL2 of a data abort; `None` when the syndrome is not valid (ISV = 0) or the
/// exception is not a data abort from a lower EL.
pub fn decode(esr: u64) -> Option<Access> {
    if (esr >> 26) & 0x3f != 0x24 || esr & (1 << 24) == 0 {
        return None;
    }
    Some(Access {
        write: esr & (1 << 6) != 0,
        size: 1 << ((esr >> 22) & 3),
        reg: ((esr >> 16) & 0x1f) as u8,
        sign_extend: esr & (1 << 21) != 0,
        sixty_four: esr & (1 << 15) != 0,
        len: if esr & (1 << 25) != 0 { 4 } else { 2 },
    })
}

impl Access {
    /// The value a store writes, from the register's contents (XZR reads as 0), truncated to
    /// the access size.
    pub fn store_value(&self, reg_value: u64) -> u64 {
        let v = if self.reg == 31 { 0 } else { reg_value };
        v & self.mask()
    }

    /// What a load leaves in its register for `value` read from the device: truncated to the
    /// access size, then sign-extended if asked (to 64 bits with SF, else to 32).
    pub fn load_result(&self, value: u64) -> u64 {
        let v = value & self.mask();
        if !self.sign_extend || self.size == 8 {
            return v;
        }
        let shift = 64 - 8 * u32::from(self.size);
        let ext = (((v << shift) as i64) >> shift) as u64;
        if self.sixty_four {
            ext
        } else {
            ext & 0xffff_ffff
        }
    }

    fn mask(&self) -> u64 {
        if self.size == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * self.size)) - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ESR of `str x5, [x0]` (a 64-bit store, ISV, IL, translation fault level 3).
    const STR_X5: u64 = (0x24 << 26) | (1 << 25) | (1 << 24) | (3 << 22) | (5 << 16) | (1 << 15) | (1 << 6) | 0x07;

    #[test]
    fn a_64_bit_store() {
        let a = decode(STR_X5).unwrap();
        assert_eq!((a.write, a.size, a.reg, a.len), (true, 8, 5, 4));
        assert_eq!(a.store_value(0x1234_5678_9abc_def0), 0x1234_5678_9abc_def0);
        let xzr = decode((STR_X5 & !(0x1f << 16)) | (31 << 16)).unwrap();
        assert_eq!(xzr.store_value(77), 0, "xzr stores zero");
    }

    #[test]
    fn loads_truncate_and_sign_extend() {
        // ldrsb w3, [x0]: byte, SSE, 32-bit register.
        let ldrsb_w = (0x24 << 26) | (1 << 25) | (1 << 24) | (1 << 21) | (3 << 16) | 0x07;
        let a = decode(ldrsb_w).unwrap();
        assert_eq!((a.write, a.size, a.reg, a.sign_extend, a.sixty_four), (false, 1, 3, true, false));
        assert_eq!(a.load_result(0x1ff), 0xffff_ffff);
        assert_eq!(a.load_result(0x17f), 0x7f);
        // ldrsh x3: halfword into a 64-bit register.
        let a = decode(ldrsb_w | (1 << 22) | (1 << 15)).unwrap();
        assert_eq!(a.load_result(0x8000), 0xffff_ffff_ffff_8000);
        // ldr w3: 32-bit, no extension.
        let a = decode((0x24 << 26) | (1 << 25) | (1 << 24) | (2 << 22) | (3 << 16)).unwrap();
        assert_eq!(a.load_result(0xdead_beef_8000_0001), 0x8000_0001);
    }

    #[test]
    fn no_syndrome_no_emulation() {
        assert_eq!(decode(STR_X5 & !(1 << 24)), None, "ISV = 0 (e.g. ldp, writeback)");
        assert_eq!(decode((STR_X5 & !(0x3f << 26)) | (0x20 << 26)), None, "an instruction abort");
        assert_eq!(decode((STR_X5 & !(0x3f << 26)) | (0x25 << 26)), None, "from EL2 itself");
    }
}
