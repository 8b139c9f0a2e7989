//! PSCI (Arm DEN0022) function ids, return codes and versions, as the guest calls them and the
//! hypervisor emulates or forwards them. `_32` / `_64` are the SMC32 / SMC64 variants of calls
//! that take addresses or MPIDRs; calls without one exist only as SMC32.

use core::fmt;

/// PSCI_VERSION: x0 = major << 16 | minor.
pub const VERSION: u64 = 0x8400_0000;
/// CPU_SUSPEND (SMC32).
pub const CPU_SUSPEND_32: u64 = 0x8400_0001;
/// CPU_SUSPEND (SMC64).
pub const CPU_SUSPEND_64: u64 = 0xc400_0001;
/// CPU_OFF.
pub const CPU_OFF: u64 = 0x8400_0002;
/// CPU_ON (SMC32): x1 = target MPIDR, x2 = entry point, x3 = context id.
pub const CPU_ON_32: u64 = 0x8400_0003;
/// CPU_ON (SMC64).
pub const CPU_ON_64: u64 = 0xc400_0003;
/// AFFINITY_INFO (SMC32): x1 = target affinity, x2 = lowest affinity level.
pub const AFFINITY_INFO_32: u64 = 0x8400_0004;
/// AFFINITY_INFO (SMC64).
pub const AFFINITY_INFO_64: u64 = 0xc400_0004;
/// MIGRATE (SMC32).
pub const MIGRATE_32: u64 = 0x8400_0005;
/// MIGRATE (SMC64).
pub const MIGRATE_64: u64 = 0xc400_0005;
/// MIGRATE_INFO_TYPE.
pub const MIGRATE_INFO_TYPE: u64 = 0x8400_0006;
/// MIGRATE_INFO_UP_CPU (SMC32).
pub const MIGRATE_INFO_UP_CPU_32: u64 = 0x8400_0007;
/// MIGRATE_INFO_UP_CPU (SMC64).
pub const MIGRATE_INFO_UP_CPU_64: u64 = 0xc400_0007;
/// SYSTEM_OFF.
pub const SYSTEM_OFF: u64 = 0x8400_0008;
/// SYSTEM_RESET.
pub const SYSTEM_RESET: u64 = 0x8400_0009;
/// PSCI_FEATURES (1.0): x1 = function id asked about.
pub const FEATURES: u64 = 0x8400_000a;
/// CPU_FREEZE (1.0).
pub const CPU_FREEZE: u64 = 0x8400_000b;
/// CPU_DEFAULT_SUSPEND (1.0, SMC32).
pub const CPU_DEFAULT_SUSPEND_32: u64 = 0x8400_000c;
/// CPU_DEFAULT_SUSPEND (1.0, SMC64).
pub const CPU_DEFAULT_SUSPEND_64: u64 = 0xc400_000c;
/// NODE_HW_STATE (1.0, SMC32).
pub const NODE_HW_STATE_32: u64 = 0x8400_000d;
/// NODE_HW_STATE (1.0, SMC64).
pub const NODE_HW_STATE_64: u64 = 0xc400_000d;
/// SYSTEM_SUSPEND (1.0, SMC32).
pub const SYSTEM_SUSPEND_32: u64 = 0x8400_000e;
/// SYSTEM_SUSPEND (1.0, SMC64).
pub const SYSTEM_SUSPEND_64: u64 = 0xc400_000e;
/// PSCI_SET_SUSPEND_MODE (1.0).
pub const SET_SUSPEND_MODE: u64 = 0x8400_000f;
/// PSCI_STAT_RESIDENCY (1.0, SMC32).
pub const STAT_RESIDENCY_32: u64 = 0x8400_0010;
/// PSCI_STAT_RESIDENCY (1.0, SMC64).
pub const STAT_RESIDENCY_64: u64 = 0xc400_0010;
/// PSCI_STAT_COUNT (1.0, SMC32).
pub const STAT_COUNT_32: u64 = 0x8400_0011;
/// PSCI_STAT_COUNT (1.0, SMC64).
pub const STAT_COUNT_64: u64 = 0xc400_0011;
/// SYSTEM_RESET2 (1.1, SMC32).
pub const SYSTEM_RESET2_32: u64 = 0x8400_0012;
/// SYSTEM_RESET2 (1.1, SMC64).
pub const SYSTEM_RESET2_64: u64 = 0xc400_0012;
/// MEM_PROTECT (1.1).
pub const MEM_PROTECT: u64 = 0x8400_0013;
/// MEM_PROTECT_CHECK_RANGE (1.1, SMC32).
pub const MEM_PROTECT_CHECK_RANGE_32: u64 = 0x8400_0014;
/// MEM_PROTECT_CHECK_RANGE (1.1, SMC64).
pub const MEM_PROTECT_CHECK_RANGE_64: u64 = 0xc400_0014;

/// Success.
pub const SUCCESS: i64 = 0;
/// NOT_SUPPORTED.
pub const NOT_SUPPORTED: i64 = -1;
/// INVALID_PARAMETERS.
pub const INVALID_PARAMETERS: i64 = -2;
/// DENIED.
pub const DENIED: i64 = -3;
/// ALREADY_ON.
pub const ALREADY_ON: i64 = -4;
/// ON_PENDING.
pub const ON_PENDING: i64 = -5;
/// INTERNAL_FAILURE.
pub const INTERNAL_FAILURE: i64 = -6;
/// NOT_PRESENT.
pub const NOT_PRESENT: i64 = -7;
/// DISABLED.
pub const DISABLED: i64 = -8;
/// INVALID_ADDRESS.
pub const INVALID_ADDRESS: i64 = -9;

/// AFFINITY_INFO result: the affinity instance is on.
pub const AFFINITY_ON: i64 = 0;
/// AFFINITY_INFO result: off.
pub const AFFINITY_OFF: i64 = 1;
/// AFFINITY_INFO result: on pending.
pub const AFFINITY_ON_PENDING: i64 = 2;

/// MIGRATE_INFO_TYPE result: no trusted OS needs migrating (what a hypervisor answers).
pub const MIGRATE_INFO_TYPE_NOT_PRESENT: i64 = 2;

/// A PSCI version as PSCI_VERSION returns it: `major << 16 | minor`.
pub const fn version(major: u16, minor: u16) -> u64 {
    (major as u64) << 16 | minor as u64
}
/// PSCI 0.2.
pub const VERSION_0_2: u64 = version(0, 2);
/// PSCI 1.0.
pub const VERSION_1_0: u64 = version(1, 0);
/// PSCI 1.1.
pub const VERSION_1_1: u64 = version(1, 1);

/// A PSCI function, either width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Function {
    /// PSCI_VERSION.
    Version,
    /// CPU_SUSPEND.
    CpuSuspend,
    /// CPU_OFF.
    CpuOff,
    /// CPU_ON.
    CpuOn,
    /// AFFINITY_INFO.
    AffinityInfo,
    /// MIGRATE.
    Migrate,
    /// MIGRATE_INFO_TYPE.
    MigrateInfoType,
    /// MIGRATE_INFO_UP_CPU.
    MigrateInfoUpCpu,
    /// SYSTEM_OFF.
    SystemOff,
    /// SYSTEM_RESET.
    SystemReset,
    /// PSCI_FEATURES.
    Features,
    /// CPU_FREEZE.
    CpuFreeze,
    /// CPU_DEFAULT_SUSPEND.
    CpuDefaultSuspend,
    /// NODE_HW_STATE.
    NodeHwState,
    /// SYSTEM_SUSPEND.
    SystemSuspend,
    /// PSCI_SET_SUSPEND_MODE.
    SetSuspendMode,
    /// PSCI_STAT_RESIDENCY.
    StatResidency,
    /// PSCI_STAT_COUNT.
    StatCount,
    /// SYSTEM_RESET2.
    SystemReset2,
    /// MEM_PROTECT.
    MemProtect,
    /// MEM_PROTECT_CHECK_RANGE.
    MemProtectCheckRange,
}

/// SMC32 or SMC64 calling convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// Arguments in W registers (ids `0x8400_00xx`).
    Smc32,
    /// Arguments in X registers (ids `0xC400_00xx`).
    Smc64,
}

impl Function {
    /// Every function, in function-number order (`0x00..=0x14`).
    pub const ALL: [Function; 21] = [
        Function::Version,
        Function::CpuSuspend,
        Function::CpuOff,
        Function::CpuOn,
        Function::AffinityInfo,
        Function::Migrate,
        Function::MigrateInfoType,
        Function::MigrateInfoUpCpu,
        Function::SystemOff,
        Function::SystemReset,
        Function::Features,
        Function::CpuFreeze,
        Function::CpuDefaultSuspend,
        Function::NodeHwState,
        Function::SystemSuspend,
        Function::SetSuspendMode,
        Function::StatResidency,
        Function::StatCount,
        Function::SystemReset2,
        Function::MemProtect,
        Function::MemProtectCheckRange,
    ];

    /// Does it have an SMC64 variant (it takes an address or an MPIDR)?
    pub const fn has_smc64(self) -> bool {
        matches!(
            self,
            Function::CpuSuspend
                | Function::CpuOn
                | Function::AffinityInfo
                | Function::Migrate
                | Function::MigrateInfoUpCpu
                | Function::CpuDefaultSuspend
                | Function::NodeHwState
                | Function::SystemSuspend
                | Function::StatResidency
                | Function::StatCount
                | Function::SystemReset2
                | Function::MemProtectCheckRange
        )
    }

    /// The function id for `width`, `None` when that variant does not exist.
    pub fn id(self, width: Width) -> Option<u64> {
        let n = Function::ALL.iter().position(|f| *f == self).unwrap_or(0) as u64;
        match width {
            Width::Smc32 => Some(0x8400_0000 | n),
            Width::Smc64 if self.has_smc64() => Some(0xc400_0000 | n),
            Width::Smc64 => None,
        }
    }

    /// Decodes a function id (W0 only).
    pub fn decode(x0: u64) -> Option<(Function, Width)> {
        let fid = x0 & 0xffff_ffff;
        let width = match fid & 0xffff_ff00 {
            0x8400_0000 => Width::Smc32,
            0xc400_0000 => Width::Smc64,
            _ => return None,
        };
        let f = *Function::ALL.get((fid & 0xff) as usize)?;
        (f.id(width) == Some(fid)).then_some((f, width))
    }

    /// Upper-case name as in the specification.
    pub const fn name(self) -> &'static str {
        match self {
            Function::Version => "PSCI_VERSION",
            Function::CpuSuspend => "CPU_SUSPEND",
            Function::CpuOff => "CPU_OFF",
            Function::CpuOn => "CPU_ON",
            Function::AffinityInfo => "AFFINITY_INFO",
            Function::Migrate => "MIGRATE",
            Function::MigrateInfoType => "MIGRATE_INFO_TYPE",
            Function::MigrateInfoUpCpu => "MIGRATE_INFO_UP_CPU",
            Function::SystemOff => "SYSTEM_OFF",
            Function::SystemReset => "SYSTEM_RESET",
            Function::Features => "PSCI_FEATURES",
            Function::CpuFreeze => "CPU_FREEZE",
            Function::CpuDefaultSuspend => "CPU_DEFAULT_SUSPEND",
            Function::NodeHwState => "NODE_HW_STATE",
            Function::SystemSuspend => "SYSTEM_SUSPEND",
            Function::SetSuspendMode => "PSCI_SET_SUSPEND_MODE",
            Function::StatResidency => "PSCI_STAT_RESIDENCY",
            Function::StatCount => "PSCI_STAT_COUNT",
            Function::SystemReset2 => "SYSTEM_RESET2",
            Function::MemProtect => "MEM_PROTECT",
            Function::MemProtectCheckRange => "MEM_PROTECT_CHECK_RANGE",
        }
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A PSCI error return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum PsciError {
    /// [`NOT_SUPPORTED`].
    NotSupported = NOT_SUPPORTED,
    /// [`INVALID_PARAMETERS`].
    InvalidParameters = INVALID_PARAMETERS,
    /// [`DENIED`].
    Denied = DENIED,
    /// [`ALREADY_ON`].
    AlreadyOn = ALREADY_ON,
    /// [`ON_PENDING`].
    OnPending = ON_PENDING,
    /// [`INTERNAL_FAILURE`].
    InternalFailure = INTERNAL_FAILURE,
    /// [`NOT_PRESENT`].
    NotPresent = NOT_PRESENT,
    /// [`DISABLED`].
    Disabled = DISABLED,
    /// [`INVALID_ADDRESS`].
    InvalidAddress = INVALID_ADDRESS,
}

impl PsciError {
    /// Every error, -1 to -9.
    pub const ALL: [PsciError; 9] = [
        PsciError::NotSupported,
        PsciError::InvalidParameters,
        PsciError::Denied,
        PsciError::AlreadyOn,
        PsciError::OnPending,
        PsciError::InternalFailure,
        PsciError::NotPresent,
        PsciError::Disabled,
        PsciError::InvalidAddress,
    ];

    /// The value returned in x0.
    pub const fn code(self) -> i64 {
        self as i64
    }

    /// Upper-case name as in the specification.
    pub const fn name(self) -> &'static str {
        match self {
            PsciError::NotSupported => "NOT_SUPPORTED",
            PsciError::InvalidParameters => "INVALID_PARAMETERS",
            PsciError::Denied => "DENIED",
            PsciError::AlreadyOn => "ALREADY_ON",
            PsciError::OnPending => "ON_PENDING",
            PsciError::InternalFailure => "INTERNAL_FAILURE",
            PsciError::NotPresent => "NOT_PRESENT",
            PsciError::Disabled => "DISABLED",
            PsciError::InvalidAddress => "INVALID_ADDRESS",
        }
    }
}

impl TryFrom<i64> for PsciError {
    type Error = i64;
    fn try_from(code: i64) -> Result<Self, i64> {
        PsciError::ALL.iter().copied().find(|e| e.code() == code).ok_or(code)
    }
}

impl fmt::Display for PsciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PSCI {} ({})", self.name(), self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn ids_match_the_constants() {
        let table = [
            (VERSION, Function::Version, Width::Smc32),
            (CPU_SUSPEND_32, Function::CpuSuspend, Width::Smc32),
            (CPU_SUSPEND_64, Function::CpuSuspend, Width::Smc64),
            (CPU_OFF, Function::CpuOff, Width::Smc32),
            (CPU_ON_32, Function::CpuOn, Width::Smc32),
            (CPU_ON_64, Function::CpuOn, Width::Smc64),
            (AFFINITY_INFO_32, Function::AffinityInfo, Width::Smc32),
            (AFFINITY_INFO_64, Function::AffinityInfo, Width::Smc64),
            (MIGRATE_64, Function::Migrate, Width::Smc64),
            (MIGRATE_INFO_TYPE, Function::MigrateInfoType, Width::Smc32),
            (SYSTEM_OFF, Function::SystemOff, Width::Smc32),
            (SYSTEM_RESET, Function::SystemReset, Width::Smc32),
            (FEATURES, Function::Features, Width::Smc32),
            (SYSTEM_SUSPEND_64, Function::SystemSuspend, Width::Smc64),
            (SYSTEM_RESET2_64, Function::SystemReset2, Width::Smc64),
            (MEM_PROTECT_CHECK_RANGE_64, Function::MemProtectCheckRange, Width::Smc64),
        ];
        for (id, f, w) in table {
            assert_eq!(Function::decode(id), Some((f, w)), "{id:#x}");
            assert_eq!(f.id(w), Some(id));
        }
        // The QEMU DTB's 0.1 ids are the 1.0 ones.
        assert_eq!(Function::decode(0xc400_0003), Some((Function::CpuOn, Width::Smc64)));
        assert_eq!(
            Function::decode(0x0000_0000_8400_0008 | 0xffff_0000_0000_0000),
            Some((Function::SystemOff, Width::Smc32))
        );
        assert_eq!(Function::decode(0xc400_0002), None, "CPU_OFF has no SMC64 variant");
        assert_eq!(Function::decode(0x8400_0015), None);
        assert_eq!(Function::decode(0xc600_0000), None);
        assert_eq!(Function::SystemOff.id(Width::Smc64), None);
        for f in Function::ALL {
            assert_eq!(Function::decode(f.id(Width::Smc32).unwrap()), Some((f, Width::Smc32)));
        }
    }

    #[test]
    fn errors_and_versions() {
        for e in PsciError::ALL {
            assert_eq!(PsciError::try_from(e.code()), Ok(e));
        }
        assert_eq!(PsciError::try_from(SUCCESS), Err(0));
        assert_eq!(PsciError::AlreadyOn.to_string(), "PSCI ALREADY_ON (-4)");
        assert_eq!(VERSION_1_0, 0x1_0000);
        assert_eq!(VERSION_0_2, 2);
        assert_eq!(version(1, 1), VERSION_1_1);
        assert_eq!(Function::CpuOn.to_string(), "CPU_ON");
    }
}
