//! The guest's EL1 registers, as EL2 reaches them: by their own names when HCR_EL2.E2H = 0, by
//! the `*_EL12` encodings when E2H = 1 (hVHE), where the `*_EL1` names reach the `*_EL2`
//! registers instead (writing "SCTLR_EL1" would write SCTLR_EL2). Every access the hypervisor
//! makes to a guest EL1 register goes through here; the mode is the one `el2mode::mode` says.
//! (PAR_EL1 has no EL2 twin and is the same register in both modes, and `AT S1E1*` translates
//! the EL1&0 regime in both, TGE being 0: `trap::fault_ipa` uses them directly.)

/// One guest EL1 register: its name (E2H = 0) and its `*_EL12` encoding (E2H = 1).
macro_rules! guest_reg {
    ($(#[$doc:meta])* $name:ident, $el1:literal, $el12:literal) => {
        $(#[$doc])*
        pub mod $name {
            /// Reads the guest's register.
            #[allow(dead_code)]
            pub fn read() -> u64 {
                if crate::el2mode::mode().e2h() {
                    rt::read_sysreg!($el12)
                } else {
                    rt::read_sysreg!($el1)
                }
            }
            /// Writes the guest's register.
            #[allow(dead_code)]
            pub fn write(v: u64) {
                if crate::el2mode::mode().e2h() {
                    rt::write_sysreg!($el12, v);
                } else {
                    rt::write_sysreg!($el1, v);
                }
            }
        }
    };
}

guest_reg!(
    /// SCTLR_EL1 (SCTLR_EL12).
    sctlr, "sctlr_el1", "S3_5_C1_C0_0"
);
guest_reg!(
    /// VBAR_EL1 (VBAR_EL12).
    vbar, "vbar_el1", "S3_5_C12_C0_0"
);
guest_reg!(
    /// ESR_EL1 (ESR_EL12).
    esr, "esr_el1", "S3_5_C5_C2_0"
);
guest_reg!(
    /// FAR_EL1 (FAR_EL12).
    far, "far_el1", "S3_5_C6_C0_0"
);
guest_reg!(
    /// ELR_EL1 (ELR_EL12).
    elr, "elr_el1", "S3_5_C4_C0_1"
);
guest_reg!(
    /// SPSR_EL1 (SPSR_EL12).
    spsr, "spsr_el1", "S3_5_C4_C0_0"
);
