//! The hypervisor's calls. Function ids follow SMCCC: fast calls, SMC64, owner 6 (vendor
//! specific hypervisor service): `0xC600_xxxx`; `0x8600_FFxx` are the SMCCC general queries of
//! that range. Arguments in x1..x3, results in x0..x3 (x0 is an [`crate::error`] code unless
//! stated). The guest may use HVC or SMC: both trap to EL2.

/// SMCCC "Call UID" of the vendor hypervisor service range: returns [`UID`] in x0..x3. The
/// kernel asks this to know whether it runs under this hypervisor (as Linux does for KVM).
pub const CALL_UID: u64 = 0x8600_ff01;
/// The UID: the four 32-bit words of this project's UUID
/// `7067746c-6162-4879-7076-69736f720001`.
pub const UID: [u64; 4] = [0x7067_746c, 0x6162_4879, 0x7076_6973, 0x6f72_0001];

/// SMCCC_VERSION (arch call 0x8000_0000).
pub const SMCCC_VERSION: u64 = 0x8000_0000;
/// SMCCC_ARCH_FEATURES (arch call 0x8000_0001).
pub const SMCCC_ARCH_FEATURES: u64 = 0x8000_0001;

/// Version of this ABI: x0 = SUCCESS, x1 = [`ABI_VERSION`].
pub const VERSION: u64 = 0xc600_0000;
/// End the run: x1 = status (0 = success). Does not return.
pub const EXIT: u64 = 0xc600_0001;
/// Reset every counter the hypervisor keeps (exits, TLBIs, walker visits).
pub const COUNTERS_RESET: u64 = 0xc600_0002;
/// Print the counters as report records.
pub const COUNTERS_REPORT: u64 = 0xc600_0003;

// Reserved for the memslot / dirty-logging work (issue 4); numbers fixed now so the guest
// driver and the hypervisor cannot drift apart.
/// Create a memslot: x1 = IPA base, x2 = size, x3 = backing kind.
pub const MEMSLOT_CREATE: u64 = 0xc600_0010;
/// Delete a memslot: x1 = id.
pub const MEMSLOT_DELETE: u64 = 0xc600_0011;
/// Enable dirty logging: x1 = id, x2 = flags.
pub const DIRTY_LOG_ENABLE: u64 = 0xc600_0012;
/// Disable dirty logging: x1 = id.
pub const DIRTY_LOG_DISABLE: u64 = 0xc600_0013;
/// Copy the dirty bitmap: x1 = id, x2 = guest buffer IPA, x3 = buffer size.
pub const DIRTY_LOG_GET: u64 = 0xc600_0014;
/// Clear (re-protect) dirty bits: x1 = id, x2 = guest bitmap IPA, x3 = first page | count << 32.
pub const DIRTY_LOG_CLEAR: u64 = 0xc600_0015;
/// Choose the split walker: x1 = mode.
pub const WALKER_MODE: u64 = 0xc600_0016;

/// ABI version returned by [`VERSION`].
pub const ABI_VERSION: u64 = 1;
