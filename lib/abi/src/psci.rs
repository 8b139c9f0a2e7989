//! PSCI 1.x function ids and return codes.

pub const VERSION: u64 = 0x8400_0000;
pub const CPU_SUSPEND_32: u64 = 0x8400_0001;
pub const CPU_SUSPEND_64: u64 = 0xc400_0001;
pub const CPU_OFF: u64 = 0x8400_0002;
pub const CPU_ON_32: u64 = 0x8400_0003;
pub const CPU_ON_64: u64 = 0xc400_0003;
pub const AFFINITY_INFO_32: u64 = 0x8400_0004;
pub const AFFINITY_INFO_64: u64 = 0xc400_0004;
pub const MIGRATE_INFO_TYPE: u64 = 0x8400_0006;
pub const SYSTEM_OFF: u64 = 0x8400_0008;
pub const SYSTEM_RESET: u64 = 0x8400_0009;
pub const FEATURES: u64 = 0x8400_000a;

pub const SUCCESS: i64 = 0;
pub const NOT_SUPPORTED: i64 = -1;
pub const INVALID_PARAMETERS: i64 = -2;
pub const DENIED: i64 = -3;
pub const ALREADY_ON: i64 = -4;
pub const ON_PENDING: i64 = -5;
pub const INTERNAL_FAILURE: i64 = -6;
pub const NOT_PRESENT: i64 = -7;
pub const DISABLED: i64 = -8;
pub const INVALID_ADDRESS: i64 = -9;
