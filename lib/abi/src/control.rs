//! The hypervisor's control page (`hyp.migrate`): an emulated MMIO page the guest reaches
//! through stage 2, named in the guest's DTB ([`COMPATIBLE`]) and on its command line
//! ([`CMDLINE_WORD`]`=ADDR`). The hypervisor's side is `hypervisor/src/migrate.rs`; the
//! guest's, `linux-user/` (`pgtlab-dirty`). Every register is 64-bit; a narrower access is not
//! emulated.
//!
//! | off | read | write |
//! |---|---|---|
//! | [`reg::MAGIC`] | [`MAGIC`] | - |
//! | [`reg::WATCH`] | watched pages | watch the page at this IPA (page aligned; at most [`MAX_WATCH`]) |
//! | [`reg::STATE`] | [`state`] | start: scenario 1 or 2 ([`reg::START`]) |
//! | [`reg::ROUNDS`] | rounds done | - |
//! | [`reg::THRESHOLD`] | dirty-set threshold (pages) | set it |
//! | [`reg::MAX_ROUNDS`] | round limit | set it (1..=1000) |
//! | [`reg::VERDICT`] | [`verdict`] | - |
//!
//! While a run is under way (pre-copy or stopped) writes are ignored.

/// `"PGTLCTL1"`, little-endian: what [`reg::MAGIC`] reads.
pub const MAGIC: u64 = u64::from_le_bytes(*b"PGTLCTL1");
/// Most pages a guest may ask to be watched.
pub const MAX_WATCH: usize = 4096;
/// The guest DTB node's `compatible`.
pub const COMPATIBLE: &str = "pgtlab,hyp-control";
/// The guest command-line word (and the Linux program's environment variable) naming its IPA.
pub const CMDLINE_WORD: &str = "pgtlab_ctl";

/// Register offsets.
pub mod reg {
    /// [`super::MAGIC`].
    pub const MAGIC: u64 = 0x00;
    /// Read: pages watched; write: watch the page at this IPA.
    pub const WATCH: u64 = 0x08;
    /// Read: the run state ([`super::state`]).
    pub const STATE: u64 = 0x10;
    /// Write: start a run with this scenario (1: eager split on enable, 2: manual protect).
    pub const START: u64 = 0x10;
    /// Read: rounds done.
    pub const ROUNDS: u64 = 0x18;
    /// Dirty-set threshold in pages (read and write).
    pub const THRESHOLD: u64 = 0x20;
    /// Round limit (read and write).
    pub const MAX_ROUNDS: u64 = 0x28;
    /// Read: the verdict ([`super::verdict`]).
    pub const VERDICT: u64 = 0x30;
}

/// Run states ([`reg::STATE`]).
pub mod state {
    /// No run yet.
    pub const IDLE: u64 = 0;
    /// Pre-copy rounds under way.
    pub const PRECOPY: u64 = 1;
    /// The guest's writes are held: the stop-and-copy.
    pub const STOPPED: u64 = 2;
    /// Over, with a verdict.
    pub const DONE: u64 = 3;
    /// Over: could not run, or the check failed.
    pub const FAILED: u64 = 4;
}

/// Verdicts ([`reg::VERDICT`]).
pub mod verdict {
    /// None yet.
    pub const NONE: u64 = 0;
    /// The mirror equals the guest's memory and no written page was missing from a bitmap.
    pub const EQUAL: u64 = 1;
    /// It does not, or a page was missed.
    pub const DIFFERS: u64 = 2;
}
