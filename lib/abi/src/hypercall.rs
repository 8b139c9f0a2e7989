//! The hypervisor's calls.
//!
//! Function ids follow the Arm SMC Calling Convention (DEN0028): bit 31 = fast call, bit 30 =
//! SMC64, bits 29:24 = owner (6 = vendor-specific hypervisor service), bits 15:0 = function
//! number. So this hypervisor's calls are `0xC600_xxxx` and `0x8600_FFxx` are the SMCCC general
//! queries of that range. Only W0 carries the id (the upper half of x0 is ignored: use
//! [`function_id`]). Arguments in x1..x3; x0 returns an [`crate::error`] code unless stated,
//! results in x1..x3. The guest may use HVC or SMC: both trap to EL2.
//!
//! | id            | name                | x1           | x2              | x3                 | returns          |
//! |---------------|---------------------|--------------|-----------------|--------------------|------------------|
//! | `0xC600_0000` | [`VERSION`]         |              |                 |                    | x1 = [`ABI_VERSION`] |
//! | `0xC600_0001` | [`EXIT`]            | status       |                 |                    | does not return  |
//! | `0xC600_0002` | [`COUNTERS_RESET`]  |              |                 |                    |                  |
//! | `0xC600_0003` | [`COUNTERS_REPORT`] |              |                 |                    | prints records   |
//! | `0xC600_0010` | [`MEMSLOT_CREATE`]  | IPA base     | size            | flags              | x1 = slot id     |
//! | `0xC600_0011` | [`MEMSLOT_DELETE`]  | slot id      |                 |                    |                  |
//! | `0xC600_0012` | [`DIRTY_LOG_ENABLE`]| slot id      | [`DIRTY_LOG_MANUAL_PROTECT`] etc. | |              |
//! | `0xC600_0013` | [`DIRTY_LOG_DISABLE`]| slot id     |                 |                    |                  |
//! | `0xC600_0014` | [`DIRTY_LOG_GET`]   | slot id      | bitmap IPA      | bitmap bytes       |                  |
//! | `0xC600_0015` | [`DIRTY_LOG_CLEAR`] | slot id      | bitmap IPA      | first page \| count << 32 |           |
//! | `0xC600_0016` | [`WALKER_MODE`]     | [`WalkerMode`] |               |                    | x1 = previous mode |
//!
//! `0xC600_0010..=0xC600_0016` are reserved now for the memslot / dirty-logging / split-walker
//! work (issue 4) and answer NOT_SUPPORTED until it lands, so the guest driver and the
//! hypervisor cannot drift apart. `0xC600_0017..=0xC600_00FF` are free for later calls.

/// SMCCC "Call UID" of the vendor hypervisor service range: returns [`UID`] in x0..x3. The
/// kernel asks this to know whether it runs under this hypervisor (as Linux does for KVM).
pub const CALL_UID: u64 = 0x8600_ff01;
/// SMCCC "Call count" query of the range (deprecated by SMCCC, answered NOT_SUPPORTED).
pub const CALL_COUNT: u64 = 0x8600_ff00;
/// SMCCC "Revision" query of the range: x0 = major, x1 = minor of this ABI.
pub const REVISION: u64 = 0x8600_ff03;
/// The UID: the four 32-bit words of this project's UUID
/// `7067746c-6162-4879-7076-69736f720001`.
pub const UID: [u64; 4] = [0x7067_746c, 0x6162_4879, 0x7076_6973, 0x6f72_0001];

/// SMCCC_VERSION (arch call 0x8000_0000): x0 = version (1.1 = 0x1_0001).
pub const SMCCC_VERSION: u64 = 0x8000_0000;
/// SMCCC_ARCH_FEATURES (arch call 0x8000_0001): x1 = the function id asked about.
pub const SMCCC_ARCH_FEATURES: u64 = 0x8000_0001;
/// SMCCC_ARCH_SOC_ID (arch call 0x8000_0002).
pub const SMCCC_ARCH_SOC_ID: u64 = 0x8000_0002;
/// SMCCC_ARCH_WORKAROUND_1 (Spectre v2), asked about through SMCCC_ARCH_FEATURES.
pub const SMCCC_ARCH_WORKAROUND_1: u64 = 0x8000_8000;
/// SMCCC_ARCH_WORKAROUND_2 (Spectre v4).
pub const SMCCC_ARCH_WORKAROUND_2: u64 = 0x8000_7fff;
/// SMCCC_ARCH_WORKAROUND_3 (Spectre-BHB).
pub const SMCCC_ARCH_WORKAROUND_3: u64 = 0x8000_3fff;

/// First id of this hypervisor's calls.
pub const BASE: u64 = 0xc600_0000;
/// Version of this ABI: x0 = SUCCESS, x1 = [`ABI_VERSION`].
pub const VERSION: u64 = 0xc600_0000;
/// End the run: x1 = status (0 = success). Does not return. The hypervisor turns the status
/// into QEMU's exit code with [`crate::exit::from_guest_status`].
pub const EXIT: u64 = 0xc600_0001;
/// Reset every counter the hypervisor keeps (exits, TLBIs, walker visits).
pub const COUNTERS_RESET: u64 = 0xc600_0002;
/// Print the counters as `@@report` records.
pub const COUNTERS_REPORT: u64 = 0xc600_0003;

/// Create a memslot: x1 = IPA base, x2 = size, x3 = flags; x1 returns the slot id.
pub const MEMSLOT_CREATE: u64 = 0xc600_0010;
/// Delete a memslot: x1 = id.
pub const MEMSLOT_DELETE: u64 = 0xc600_0011;
/// Enable dirty logging: x1 = id, x2 = flags ([`DIRTY_LOG_MANUAL_PROTECT`], [`DIRTY_LOG_EAGER_SPLIT`]).
pub const DIRTY_LOG_ENABLE: u64 = 0xc600_0012;
/// Disable dirty logging: x1 = id.
pub const DIRTY_LOG_DISABLE: u64 = 0xc600_0013;
/// Copy the dirty bitmap: x1 = id, x2 = guest buffer IPA, x3 = buffer size in bytes.
pub const DIRTY_LOG_GET: u64 = 0xc600_0014;
/// Clear (re-protect) dirty bits: x1 = id, x2 = guest bitmap IPA, x3 = first page | count << 32.
pub const DIRTY_LOG_CLEAR: u64 = 0xc600_0015;
/// Choose the stage-2 split walker: x1 = [`WalkerMode`]; x1 returns the previous mode.
pub const WALKER_MODE: u64 = 0xc600_0016;
/// One past the last id in use; ids from here to `0xC600_00FF` are free.
pub const END: u64 = 0xc600_0017;

/// [`DIRTY_LOG_ENABLE`] flag: manual-protect mode (each clear write-protects and splits only
/// the cleared pages) instead of write-protecting the whole slot at enable.
pub const DIRTY_LOG_MANUAL_PROTECT: u64 = 1 << 0;
/// [`DIRTY_LOG_ENABLE`] flag: split blocks eagerly (at enable / clear) rather than on fault.
pub const DIRTY_LOG_EAGER_SPLIT: u64 = 1 << 1;

/// ABI version returned by [`VERSION`] (and [`REVISION`] as major.minor = 1.0).
pub const ABI_VERSION: u64 = 1;

/// The split walker [`WALKER_MODE`] selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum WalkerMode {
    /// Baseline: visit every entry, level 3 included.
    Baseline = 0,
    /// Skip level-3 tables when splitting (the optimisation measured).
    SkipLevel3 = 1,
}

impl TryFrom<u64> for WalkerMode {
    type Error = u64;
    fn try_from(v: u64) -> Result<Self, u64> {
        match v {
            0 => Ok(WalkerMode::Baseline),
            1 => Ok(WalkerMode::SkipLevel3),
            other => Err(other),
        }
    }
}

/// The function id of an SMC/HVC: W0 (SMCCC ignores the upper half of x0).
pub const fn function_id(x0: u64) -> u64 {
    x0 & 0xffff_ffff
}

/// SMCCC owner field (bits 29:24) of a function id: 0 arch, 4 standard secure (PSCI), 5
/// standard hypervisor, 6 vendor hypervisor.
pub const fn owner(fid: u64) -> u8 {
    ((fid >> 24) & 0x3f) as u8
}

/// Is this a fast call using the SMC64 convention (bit 30)?
pub const fn is_smc64(fid: u64) -> bool {
    fid & (1 << 30) != 0
}

/// One of this hypervisor's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// [`VERSION`].
    Version,
    /// [`EXIT`].
    Exit,
    /// [`COUNTERS_RESET`].
    CountersReset,
    /// [`COUNTERS_REPORT`].
    CountersReport,
    /// [`MEMSLOT_CREATE`] (reserved).
    MemslotCreate,
    /// [`MEMSLOT_DELETE`] (reserved).
    MemslotDelete,
    /// [`DIRTY_LOG_ENABLE`] (reserved).
    DirtyLogEnable,
    /// [`DIRTY_LOG_DISABLE`] (reserved).
    DirtyLogDisable,
    /// [`DIRTY_LOG_GET`] (reserved).
    DirtyLogGet,
    /// [`DIRTY_LOG_CLEAR`] (reserved).
    DirtyLogClear,
    /// [`WALKER_MODE`] (reserved).
    WalkerMode,
}

impl Call {
    /// Every call, in id order.
    pub const ALL: [Call; 11] = [
        Call::Version,
        Call::Exit,
        Call::CountersReset,
        Call::CountersReport,
        Call::MemslotCreate,
        Call::MemslotDelete,
        Call::DirtyLogEnable,
        Call::DirtyLogDisable,
        Call::DirtyLogGet,
        Call::DirtyLogClear,
        Call::WalkerMode,
    ];

    /// The SMCCC function id.
    pub const fn id(self) -> u64 {
        match self {
            Call::Version => VERSION,
            Call::Exit => EXIT,
            Call::CountersReset => COUNTERS_RESET,
            Call::CountersReport => COUNTERS_REPORT,
            Call::MemslotCreate => MEMSLOT_CREATE,
            Call::MemslotDelete => MEMSLOT_DELETE,
            Call::DirtyLogEnable => DIRTY_LOG_ENABLE,
            Call::DirtyLogDisable => DIRTY_LOG_DISABLE,
            Call::DirtyLogGet => DIRTY_LOG_GET,
            Call::DirtyLogClear => DIRTY_LOG_CLEAR,
            Call::WalkerMode => WALKER_MODE,
        }
    }

    /// The call for a function id (only W0 is looked at).
    pub fn from_id(x0: u64) -> Option<Call> {
        let fid = function_id(x0);
        Call::ALL.iter().copied().find(|c| c.id() == fid)
    }

    /// Upper-case name, e.g. `"DIRTY_LOG_CLEAR"`.
    pub const fn name(self) -> &'static str {
        match self {
            Call::Version => "VERSION",
            Call::Exit => "EXIT",
            Call::CountersReset => "COUNTERS_RESET",
            Call::CountersReport => "COUNTERS_REPORT",
            Call::MemslotCreate => "MEMSLOT_CREATE",
            Call::MemslotDelete => "MEMSLOT_DELETE",
            Call::DirtyLogEnable => "DIRTY_LOG_ENABLE",
            Call::DirtyLogDisable => "DIRTY_LOG_DISABLE",
            Call::DirtyLogGet => "DIRTY_LOG_GET",
            Call::DirtyLogClear => "DIRTY_LOG_CLEAR",
            Call::WalkerMode => "WALKER_MODE",
        }
    }

    /// Reserved for issue 4: numbered, not implemented yet (answer NOT_SUPPORTED).
    pub const fn is_reserved(self) -> bool {
        !matches!(self, Call::Version | Call::Exit | Call::CountersReset | Call::CountersReport)
    }
}

impl TryFrom<u64> for Call {
    type Error = u64;
    fn try_from(x0: u64) -> Result<Self, u64> {
        Call::from_id(x0).ok_or(x0)
    }
}

impl core::fmt::Display for Call {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({:#x})", self.name(), self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_smccc_fast_smc64_vendor_hypervisor() {
        for c in Call::ALL {
            let id = c.id();
            assert_eq!(id >> 31, 1, "{c}: fast call");
            assert!(is_smc64(id), "{c}");
            assert_eq!(owner(id), 6, "{c}: vendor-specific hypervisor service");
            assert!((BASE..END).contains(&id), "{c}");
            assert_eq!(Call::from_id(id), Some(c));
            assert_eq!(Call::try_from(id | 0xdead_0000_0000_0000), Ok(c), "upper half ignored");
        }
        let mut ids: [u64; 11] = Call::ALL.map(Call::id);
        ids.sort_unstable();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "distinct");
        assert_eq!(owner(CALL_UID), 6);
        assert!(!is_smc64(CALL_UID));
        assert_eq!(owner(SMCCC_VERSION), 0);
        assert_eq!(Call::from_id(END), None);
        assert_eq!(Call::try_from(0x8400_0000), Err(0x8400_0000));
    }

    #[test]
    fn reserved_calls() {
        let reserved: usize = Call::ALL.iter().filter(|c| c.is_reserved()).count();
        assert_eq!(reserved, 7);
        assert!(!Call::Exit.is_reserved());
        assert_eq!(WalkerMode::try_from(1), Ok(WalkerMode::SkipLevel3));
        assert_eq!(WalkerMode::try_from(2), Err(2));
    }
}
