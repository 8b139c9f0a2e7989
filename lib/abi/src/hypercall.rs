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
//! | `0xC600_0010` | [`MEMSLOT_CREATE`]  | IPA base     | size            | [`MEMSLOT_BACKING_4K`] etc. | x1 = slot id |
//! | `0xC600_0011` | [`MEMSLOT_DELETE`]  | slot id      |                 |                    |                  |
//! | `0xC600_0012` | [`DIRTY_LOG_ENABLE`]| slot id      | [`DIRTY_LOG_MANUAL_PROTECT`] etc. | |              |
//! | `0xC600_0013` | [`DIRTY_LOG_DISABLE`]| slot id     |                 |                    |                  |
//! | `0xC600_0014` | [`DIRTY_LOG_GET`]   | slot id      | bitmap IPA      | bitmap bytes       |                  |
//! | `0xC600_0015` | [`DIRTY_LOG_CLEAR`] | slot id      | mask IPA        | first page \| count << 32 |           |
//! | `0xC600_0016` | [`WALKER_MODE`]     | [`WalkerMode`] | chunk bytes (0 = keep) |           | x1, x2 = previous |
//! | `0xC600_0017` | [`COUNTER_READ`]    | [`Counter`]  |                 |                    | x1 = value       |
//! | `0xC600_0018` | [`MAINT_COUNTS`]    | [`MAINT_TLB`] or [`MAINT_OTHER`] |  |                | x1..x3 = counts  |
//!
//! Memslots: guest IPA ranges outside guest RAM, backed by the hypervisor's memslot
//! pool (boot argument `hyp.slotpool=SIZE`) mapped repeatedly, so a slot may be larger than the
//! pool: slot page `i` maps pool byte `(i * 4096) % pool size`. Rules and errors:
//!
//! * [`MEMSLOT_CREATE`]: unknown flag bits or size 0 -> INVALID_PARAMETER; base or size not a
//!   multiple of the backing size -> MISALIGNED; the range leaves the 40-bit IPA space ->
//!   OUT_OF_RANGE; it touches the hypervisor's own memory (its IPA = PA hole, the pool) -> DENIED;
//!   it overlaps guest RAM, a device, or another slot -> OVERLAP; no pool, a pool smaller than
//!   the backing block, no free slot, or no page-table memory -> NO_MEMORY (nothing is left
//!   mapped).
//! * Unknown slot id -> NOT_FOUND; [`MEMSLOT_DELETE`] while dirty logging is on -> BUSY;
//!   [`DIRTY_LOG_ENABLE`] twice -> BUSY; GET / CLEAR without dirty logging -> INVALID_PARAMETER.
//! * Guest buffers (GET bitmap, CLEAR mask): not 8-byte aligned -> MISALIGNED; in the
//!   hypervisor's memory -> DENIED; otherwise outside guest RAM -> OUT_OF_RANGE; GET with fewer
//!   than `ceil(pages / 64) * 8` bytes -> INVALID_PARAMETER.
//! * [`DIRTY_LOG_CLEAR`]: first page not a multiple of 64, count 0, or a count that is neither a
//!   multiple of 64 nor reaches the slot's end -> MISALIGNED / INVALID_PARAMETER; pages beyond
//!   the slot -> OUT_OF_RANGE. Bit `i` of the mask (64-bit little-endian words) is page
//!   `first + i`; each set bit clears the page's dirty bit and write-protects it (KVM-like: the
//!   first to the last set page of each 64-page word), and, when the log was enabled with
//!   [`DIRTY_LOG_MANUAL_PROTECT`] `|` [`DIRTY_LOG_EAGER_SPLIT`], splits the blocks there: as
//!   KVM, a block reaching past the protected span is write-protected whole before the split
//!   (its other pages then fault once on their next write, keeping their dirty bits); without
//!   the split, such a block is split (a level at a time) so that only the span is protected.
//! * [`WALKER_MODE`]: unknown mode -> INVALID_PARAMETER; chunk not a multiple of 2 MiB -> MISALIGNED.
//! * [`COUNTER_READ`]: unknown counter -> INVALID_PARAMETER.
//! * [`DIRTY_LOG_DISABLE`] stops tracking and changes no mapping; a write to a page it left
//!   read-only faults once and is made writable (not marked dirty), as in KVM.
//!
//! Scenario 1 (`DIRTY_LOG_EAGER_SPLIT`): enable write-protects the slot and splits every block,
//! chunk by chunk. Scenario 2 (`DIRTY_LOG_MANUAL_PROTECT | DIRTY_LOG_EAGER_SPLIT`): enable
//! changes nothing and sets every dirty bit (initially-set); each CLEAR protects and splits only
//! the cleared pages. A guest write to a protected page takes a stage-2 permission fault: the
//! hypervisor sets its dirty bit, makes it writable (local TLBI) and resumes the guest.

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

/// Create a memslot: x1 = IPA base, x2 = size, x3 = flags (one `MEMSLOT_BACKING_*`); x1 returns
/// the slot id.
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
/// Choose the stage-2 split walker: x1 = [`WalkerMode`], x2 = eager-split chunk in bytes (a
/// multiple of 2 MiB; 0 keeps the current one); x1, x2 return the previous mode and chunk.
pub const WALKER_MODE: u64 = 0xc600_0016;
/// Read one hypervisor counter: x1 = [`Counter`]; x1 returns its value (since the last
/// [`COUNTERS_RESET`], except the gauges).
pub const COUNTER_READ: u64 = 0xc600_0017;
/// The hypervisor's maintenance instructions since boot (every CPU, never reset), so a reader
/// can take differences around any window: x1 = [`MAINT_TLB`] returns x1 = TLBIs, x2 = DSBs,
/// x3 = ISBs issued by `lib/pgtable`; x1 = [`MAINT_OTHER`] returns x1 = DSBs and x2 = ISBs of
/// cache maintenance, x3 = ISBs of the PMU driver. Any other x1 -> INVALID_PARAMETER.
pub const MAINT_COUNTS: u64 = 0xc600_0018;
/// [`MAINT_COUNTS`] selector: TLB maintenance (`lib/pgtable`'s counters).
pub const MAINT_TLB: u64 = 0;
/// [`MAINT_COUNTS`] selector: cache maintenance and PMU barriers.
pub const MAINT_OTHER: u64 = 1;
/// One past the last id in use; ids from here to `0xC600_00FF` are free.
pub const END: u64 = 0xc600_0019;

/// [`MEMSLOT_CREATE`] backing: 4 KiB pages (an already-split slot).
pub const MEMSLOT_BACKING_4K: u64 = 0;
/// [`MEMSLOT_CREATE`] backing: 2 MiB blocks (like THP).
pub const MEMSLOT_BACKING_2M: u64 = 1;
/// [`MEMSLOT_CREATE`] backing: 1 GiB blocks (like hugetlb).
pub const MEMSLOT_BACKING_1G: u64 = 2;
/// The bits of the [`MEMSLOT_CREATE`] flags that hold the backing; the others must be zero.
pub const MEMSLOT_BACKING_MASK: u64 = 0b11;
/// Most memslots at once.
pub const MAX_MEMSLOTS: usize = 8;

/// Bytes of one backing unit (`None` for an unknown backing).
pub const fn backing_size(backing: u64) -> Option<u64> {
    match backing {
        MEMSLOT_BACKING_4K => Some(4 << 10),
        MEMSLOT_BACKING_2M => Some(2 << 20),
        MEMSLOT_BACKING_1G => Some(1 << 30),
        _ => None,
    }
}

/// What [`COUNTER_READ`] reads. Walker visits are by level, for the split walks and for the
/// write-protect walks separately; TLBI / DSB / ISB are the hypervisor's instructions (every
/// CPU); table pages is the stage-2 gauge (not reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Counter {
    /// Split-walk visits at level 0 (ids 0..=3: levels 0..=3).
    SplitVisitsL0 = 0,
    /// Split-walk visits at level 1.
    SplitVisitsL1 = 1,
    /// Split-walk visits at level 2.
    SplitVisitsL2 = 2,
    /// Split-walk visits at level 3.
    SplitVisitsL3 = 3,
    /// Write-protect walk visits at level 0 (ids 4..=7: levels 0..=3).
    ProtectVisitsL0 = 4,
    /// Write-protect walk visits at level 1.
    ProtectVisitsL1 = 5,
    /// Write-protect walk visits at level 2.
    ProtectVisitsL2 = 6,
    /// Write-protect walk visits at level 3.
    ProtectVisitsL3 = 7,
    /// TLBI instructions, all kinds.
    Tlbi = 8,
    /// DSB instructions, all kinds.
    Dsb = 9,
    /// ISB instructions.
    Isb = 10,
    /// Stage-2 table pages now (gauge).
    TablePages = 11,
    /// Stage-2 table pages allocated.
    TablesAllocated = 12,
    /// Blocks split.
    BlocksSplit = 13,
    /// Stage-2 descriptor writes.
    DescWrites = 14,
    /// Dirty-logging write faults handled.
    DirtyFaults = 15,
    /// Nanoseconds spent in split walks (hypervisor clock).
    SplitNs = 16,
    /// Instructions retired in split walks (the guest's INST_RETIRED counter, wherever its PMU
    /// driver put it; 0 when it counts none, e.g. without `-icount` under TCG).
    SplitInsns = 17,
    /// Page-cache top-ups between split chunks.
    CacheTopups = 18,
    /// Table entries the summary walker did not descend (their subtree holds no block).
    SummarySkips = 19,
    /// Pages in the hypervisor's page-table frame pool (gauge: its size, not what is free).
    FramePoolPages = 20,
}

impl Counter {
    /// Every counter, in id order.
    pub const ALL: [Counter; 21] = [
        Counter::SplitVisitsL0,
        Counter::SplitVisitsL1,
        Counter::SplitVisitsL2,
        Counter::SplitVisitsL3,
        Counter::ProtectVisitsL0,
        Counter::ProtectVisitsL1,
        Counter::ProtectVisitsL2,
        Counter::ProtectVisitsL3,
        Counter::Tlbi,
        Counter::Dsb,
        Counter::Isb,
        Counter::TablePages,
        Counter::TablesAllocated,
        Counter::BlocksSplit,
        Counter::DescWrites,
        Counter::DirtyFaults,
        Counter::SplitNs,
        Counter::SplitInsns,
        Counter::CacheTopups,
        Counter::SummarySkips,
        Counter::FramePoolPages,
    ];

    /// The counter with id `v`.
    pub fn from_id(v: u64) -> Option<Counter> {
        Counter::ALL.get(usize::try_from(v).ok()?).copied()
    }

    /// Lower-case name for report fields.
    pub const fn name(self) -> &'static str {
        match self {
            Counter::SplitVisitsL0 => "split_visits_l0",
            Counter::SplitVisitsL1 => "split_visits_l1",
            Counter::SplitVisitsL2 => "split_visits_l2",
            Counter::SplitVisitsL3 => "split_visits_l3",
            Counter::ProtectVisitsL0 => "wp_visits_l0",
            Counter::ProtectVisitsL1 => "wp_visits_l1",
            Counter::ProtectVisitsL2 => "wp_visits_l2",
            Counter::ProtectVisitsL3 => "wp_visits_l3",
            Counter::Tlbi => "tlbi",
            Counter::Dsb => "dsb",
            Counter::Isb => "isb",
            Counter::TablePages => "table_pages",
            Counter::TablesAllocated => "tables_allocated",
            Counter::BlocksSplit => "blocks_split",
            Counter::DescWrites => "desc_writes",
            Counter::DirtyFaults => "dirty_faults",
            Counter::SplitNs => "split_ns",
            Counter::SplitInsns => "split_insns",
            Counter::CacheTopups => "cache_topups",
            Counter::SummarySkips => "summary_skips",
            Counter::FramePoolPages => "frame_pool_pages",
        }
    }
}

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
    /// SKIP_LEVEL3 plus the per-table summary (`lib/pgtable`: a software bit in table
    /// descriptors saying the subtree holds no block): such subtrees are not walked at all, so
    /// an already-split slot costs O(blocks), not O(size / 2 MiB).
    Summary = 2,
}

impl WalkerMode {
    /// Lower-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            WalkerMode::Baseline => "baseline",
            WalkerMode::SkipLevel3 => "skip_level3",
            WalkerMode::Summary => "summary",
        }
    }
}

impl TryFrom<u64> for WalkerMode {
    type Error = u64;
    fn try_from(v: u64) -> Result<Self, u64> {
        match v {
            0 => Ok(WalkerMode::Baseline),
            1 => Ok(WalkerMode::SkipLevel3),
            2 => Ok(WalkerMode::Summary),
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
    /// [`MEMSLOT_CREATE`] .
    MemslotCreate,
    /// [`MEMSLOT_DELETE`] .
    MemslotDelete,
    /// [`DIRTY_LOG_ENABLE`] .
    DirtyLogEnable,
    /// [`DIRTY_LOG_DISABLE`] .
    DirtyLogDisable,
    /// [`DIRTY_LOG_GET`] .
    DirtyLogGet,
    /// [`DIRTY_LOG_CLEAR`] .
    DirtyLogClear,
    /// [`WALKER_MODE`].
    WalkerMode,
    /// [`COUNTER_READ`].
    CounterRead,
    /// [`MAINT_COUNTS`].
    MaintCounts,
}

impl Call {
    /// Every call, in id order.
    pub const ALL: [Call; 13] = [
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
        Call::CounterRead,
        Call::MaintCounts,
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
            Call::CounterRead => COUNTER_READ,
            Call::MaintCounts => MAINT_COUNTS,
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
            Call::CounterRead => "COUNTER_READ",
            Call::MaintCounts => "MAINT_COUNTS",
        }
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
        let mut ids: [u64; 13] = Call::ALL.map(Call::id);
        ids.sort_unstable();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "distinct");
        assert_eq!(owner(CALL_UID), 6);
        assert!(!is_smc64(CALL_UID));
        assert_eq!(owner(SMCCC_VERSION), 0);
        assert_eq!(Call::from_id(END), None);
        assert_eq!(Call::try_from(0x8400_0000), Err(0x8400_0000));
    }

    #[test]
    fn enums_round_trip() {
        assert_eq!(WalkerMode::try_from(1), Ok(WalkerMode::SkipLevel3));
        assert_eq!(WalkerMode::try_from(2), Ok(WalkerMode::Summary));
        assert_eq!(WalkerMode::try_from(3), Err(3));
        for (i, c) in Counter::ALL.iter().enumerate() {
            assert_eq!(*c as u64, i as u64, "dense ids");
            assert_eq!(Counter::from_id(i as u64), Some(*c));
        }
        assert_eq!(Counter::from_id(Counter::ALL.len() as u64), None);
        assert_eq!(Counter::from_id(u64::MAX), None);
        assert_eq!(backing_size(MEMSLOT_BACKING_2M), Some(2 << 20));
        assert_eq!(backing_size(3), None);
    }
}
