//! Kernel memory policy on top of [`PageTable`]: what the EL1 kernel decides about its linear
//! map and how `set_memory_*` changes a range, as pure page-table logic so the model checker
//! can run it on the host.
//!
//! - [`bbml2_decide`]: the boot-time BBML2 decision from the CPU's capability and the
//!   `bbml2=auto|on|off` boot argument (with an explicit unsafe override), and
//!   [`late_cpu_accepted`] for CPUs that come up after the decision.
//! - [`linear_map_constraints`]: block / contiguous use of the linear map for a
//!   `rodata=full|on|off` mode.
//! - [`set_memory`]: `set_memory_ro / rw / x / nx / valid / invalid` on one table: permission
//!   runs are applied with [`PageTable::protect`], which splits only the leaves crossing the two
//!   ends of a run (live without TLBI under BBML2) and keeps blocks fully inside as blocks; then,
//!   with contpte, the 64 KiB groups at the two ends of the range are folded again where they
//!   became uniform.

use core::fmt;

use crate::addr::{align_down, VirtAddr, CONT_ENTRIES, PAGE_SIZE};
use crate::attrs::{Constraints, Perms};
use crate::cpu::Refusal;
use crate::error::{Arg, Error};
use crate::frame::FrameAlloc;
use crate::table::{Opts, PageTable};
use crate::tlb::TlbMaintenance;

/// The `rodata=` boot argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rodata {
    /// Kernel text/rodata read-only, and the linear alias of every page whose permissions
    /// change gets them too (the default).
    Full,
    /// Kernel text/rodata read-only; the linear map keeps RW on the aliases (blocks allowed).
    On,
    /// No read-only kernel image.
    Off,
}

impl Rodata {
    /// Parses `full`, `on` or `off`.
    pub fn parse(s: &str) -> Option<Rodata> {
        match s {
            "full" => Some(Rodata::Full),
            "on" => Some(Rodata::On),
            "off" => Some(Rodata::Off),
            _ => None,
        }
    }
    /// The boot-argument spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Rodata::Full => "full",
            Rodata::On => "on",
            Rodata::Off => "off",
        }
    }
}

/// The `bbml2=` boot argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bbml2Arg {
    /// Use BBML2 where the CPU is allowed (the default).
    Auto,
    /// Ask for BBML2; refused on a CPU that is not allowed unless the unsafe override is given.
    On,
    /// Never use BBML2.
    Off,
}

impl Bbml2Arg {
    /// Parses `auto`, `on` or `off`.
    pub fn parse(s: &str) -> Option<Bbml2Arg> {
        match s {
            "auto" => Some(Bbml2Arg::Auto),
            "on" => Some(Bbml2Arg::On),
            "off" => Some(Bbml2Arg::Off),
            _ => None,
        }
    }
}

/// The outcome of [`bbml2_decide`]; prints why (for the banner).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bbml2Decision {
    /// Whether the kernel uses BBML2.
    pub enabled: bool,
    /// Enabled although the CPU is not allowed (`bbml2=on` with the unsafe override).
    pub forced: bool,
    /// `bbml2=on` was asked for and refused.
    pub refused: bool,
    /// The boot argument.
    pub arg: Bbml2Arg,
    /// The boot CPU's capability ([`crate::cpu::capability`]).
    pub cpu: Result<(), Refusal>,
}

impl fmt::Display for Bbml2Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.arg, self.cpu) {
            (Bbml2Arg::Off, _) => f.write_str("bbml2=off"),
            (Bbml2Arg::Auto, Ok(())) => f.write_str("BBM level 2 on an allow-listed core"),
            (Bbml2Arg::Auto, Err(why)) => write!(f, "{why}"),
            (Bbml2Arg::On, Ok(())) => f.write_str("bbml2=on, BBM level 2 on an allow-listed core"),
            (Bbml2Arg::On, Err(why)) if self.forced => {
                write!(f, "bbml2=on FORCED by bbml2_unsafe_override although {why} (TLB conflict aborts possible)")
            }
            (Bbml2Arg::On, Err(why)) => {
                write!(f, "bbml2=on refused: {why} (add bbml2_unsafe_override to force it)")
            }
        }
    }
}

/// Decides whether to use BBML2. `cpu` is the boot CPU's capability
/// ([`crate::cpu::capability`]). `unsafe_override` lets `bbml2=on` force it on a CPU that is not
/// allowed (it may raise TLB conflict aborts there).
pub fn bbml2_decide(cpu: Result<(), Refusal>, arg: Bbml2Arg, unsafe_override: bool) -> Bbml2Decision {
    let (enabled, forced, refused) = match (arg, cpu) {
        (Bbml2Arg::Off, _) => (false, false, false),
        (Bbml2Arg::Auto, Ok(())) | (Bbml2Arg::On, Ok(())) => (true, false, false),
        (Bbml2Arg::Auto, Err(_)) => (false, false, false),
        (Bbml2Arg::On, Err(_)) if unsafe_override => (true, true, false),
        (Bbml2Arg::On, Err(_)) => (false, false, true),
    };
    Bbml2Decision { enabled, forced, refused, arg, cpu }
}

/// Whether a CPU that comes up after the decision may join: with BBML2 in use every CPU must be
/// allowed too, unless BBML2 was forced.
pub fn late_cpu_accepted(decision: &Bbml2Decision, cpu_allowed: bool) -> bool {
    !decision.enabled || decision.forced || cpu_allowed
}

/// How the linear map is built: with BBML2 or without `rodata=full` it uses 1 GiB / 2 MiB blocks
/// (and contiguous ranges with contpte); under `rodata=full` without BBML2 it is PTE-only, so a
/// permission change never needs a live split.
pub fn linear_map_constraints(bbml2: bool, rodata: Rodata, contpte: bool) -> Constraints {
    if rodata == Rodata::Full && !bbml2 {
        Constraints::PAGES_ONLY
    } else {
        Constraints { no_blocks: false, no_contiguous: !contpte }
    }
}

/// Whether permission changes are applied to the linear alias too.
pub fn alias_permissions(rodata: Rodata) -> bool {
    rodata == Rodata::Full
}

/// One `set_memory_*` operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemChange {
    /// Remove write.
    Ro,
    /// Add read and write.
    Rw,
    /// Add (privileged) execute.
    X,
    /// Remove execute.
    Nx,
    /// Make PROT_NONE (invalid) entries accessible again with these permissions.
    Valid(Perms),
    /// Make the entries invalid (PROT_NONE: the mapping is kept, the hardware faults).
    Invalid,
}

impl MemChange {
    /// The permissions of a leaf after the change (`Perms::NONE` is PROT_NONE).
    pub fn apply(self, old: Perms) -> Perms {
        match self {
            MemChange::Invalid => Perms::NONE,
            MemChange::Valid(p) if old.is_none() => p,
            _ if old.is_none() => old,
            MemChange::Valid(_) => old,
            MemChange::Ro => old.difference(Perms::WRITE),
            MemChange::Rw => old | Perms::RW,
            MemChange::X => old | Perms::EXEC,
            MemChange::Nx => old.difference(Perms::EXEC),
        }
    }

    /// Whether the change also applies to the linear alias under `rodata=full` (the alias is
    /// never executable: `x` / `nx` leave it alone).
    pub fn applies_to_alias(self) -> bool {
        !matches!(self, MemChange::X | MemChange::Nx)
    }
}

/// Applies `change` to every mapping of `[start, start + size)` of `pt`. Runs of leaves that end
/// up with the same permissions go to one [`PageTable::protect`], so only leaves crossing the
/// ends of the range are split. With `fold`, the aligned 64 KiB groups holding the two ends of
/// the range are folded back into contiguous ranges where all 16 entries became identical (only
/// ask for it under BBML2, or where a transiently invalid group is harmless). Holes are skipped.
///
/// # Errors
/// `Misaligned` (start or size not 4 KiB aligned), `OutOfRange`, and what
/// [`PageTable::protect`] and [`PageTable::fold`] return (changes made before stay).
pub fn set_memory<A: FrameAlloc, T: TlbMaintenance + ?Sized>(
    pt: &mut PageTable<A>,
    tlb: &mut T,
    start: VirtAddr,
    size: u64,
    change: MemChange,
    fold: bool,
) -> Result<(), Error> {
    set_memory_with(pt, tlb, start, size, change, fold, Opts::DEFAULT)
}

/// [`set_memory`] with per-call options for every operation it makes (`Opts::FORCE_BBM`: as
/// without BBML2, the baseline of a benchmark, without touching the table).
///
/// # Errors
/// As [`set_memory`].
pub fn set_memory_with<A: FrameAlloc, T: TlbMaintenance + ?Sized>(
    pt: &mut PageTable<A>,
    tlb: &mut T,
    start: VirtAddr,
    size: u64,
    change: MemChange,
    fold: bool,
    opts: Opts,
) -> Result<(), Error> {
    // The range checks every operation makes (alignment, the table's half of the address
    // space): a range outside the table is refused, not skipped as unmapped.
    pt.offsets(start, size)?;
    let s = start.as_u64();
    // The table's last page ends at 2^64, which a u64 cannot hold.
    let e = s.checked_add(size).ok_or(Error::OutOfRange { arg: Arg::End, value: s, limit: u64::MAX })?;
    let mut run: Option<(u64, u64, Perms)> = None;
    let mut a = s;
    while a < e {
        let Some(t) = pt.translate(VirtAddr::new(a)) else {
            if let Some((rs, re, p)) = run.take() {
                pt.protect_with(tlb, VirtAddr::new(rs), re - rs, p, opts)?;
            }
            a += PAGE_SIZE;
            continue;
        };
        let leaf_end = align_down(a, t.size).saturating_add(t.size).min(e);
        let new = change.apply(t.attrs.perms);
        run = match run {
            Some((rs, re, p)) if re == a && p == new => Some((rs, leaf_end, p)),
            other => {
                if let Some((rs, re, p)) = other {
                    pt.protect_with(tlb, VirtAddr::new(rs), re - rs, p, opts)?;
                }
                Some((a, leaf_end, new))
            }
        };
        a = leaf_end;
    }
    if let Some((rs, re, p)) = run {
        pt.protect_with(tlb, VirtAddr::new(rs), re - rs, p, opts)?;
    }
    if fold && e > s {
        // Groups inside the range that were folded stayed folded (repainted whole); only the
        // groups holding the two ends can have become uniform again.
        let group = CONT_ENTRIES as u64 * PAGE_SIZE;
        let (first, last) = (align_down(s, group), align_down(e - 1, group));
        pt.fold_with(tlb, VirtAddr::new(first), group, opts)?;
        if last != first {
            pt.fold_with(tlb, VirtAddr::new(last), group, opts)?;
        }
    }
    Ok(())
}

/// The fewest table pages (root included) a stage-1 4 KiB-granule map of `ranges` (`[start,
/// end)`, page aligned, sorted, not overlapping; addresses as input addresses) can have: one
/// root, one level-1 table per 512 GiB touched, one level-2 table per 1 GiB touched and, with
/// `blocks`, not wholly covered, one level-3 table per 2 MiB likewise. The limit the
/// linear-map benchmark measures against.
pub fn min_table_pages(ranges: &[(u64, u64)], blocks: bool) -> u64 {
    use crate::addr::level_size;
    // Merge touching ranges so coverage is judged on their union.
    let mut merged: alloc::vec::Vec<(u64, u64)> = alloc::vec::Vec::new();
    for &(s, e) in ranges.iter().filter(|(s, e)| e > s) {
        match merged.last_mut() {
            Some(last) if last.1 >= s => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    let mut total = 1;
    for level in 1..=3 {
        // A table at `level` covers one entry of level - 1.
        let span = level_size(level - 1);
        let mut last: Option<u64> = None;
        for &(s, e) in &merged {
            let mut chunk = align_down(s, span);
            while chunk < e {
                let covered = merged.iter().any(|&(ms, me)| ms <= chunk && me >= chunk + span);
                let needed = level == 1 || !blocks || !covered;
                if needed && last != Some(chunk) {
                    total += 1;
                    last = Some(chunk);
                }
                chunk += span;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regime::{Regime, VaHalf};
    use crate::{Attributes, HeapFrames, PhysAddr};

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// The layout of QEMU virt RAM under the hypervisor: 2 MiB, a hole, the rest.
    fn guest_ram(total: u64) -> [(u64, u64); 2] {
        [(GIB, GIB + 2 * MIB), (GIB + 24 * MIB, GIB + total)]
    }

    /// The `bbml2=` and `rodata=` words: each spelling gives its choice, anything else none
    /// (the kernel's options then keep the default), and `rodata` prints as it is spelt.
    #[test]
    fn boot_words_parse_to_their_choice() {
        let bbml2 = [("auto", Bbml2Arg::Auto), ("on", Bbml2Arg::On), ("off", Bbml2Arg::Off)];
        for (word, arg) in bbml2 {
            assert_eq!(Bbml2Arg::parse(word), Some(arg), "bbml2={word}");
        }
        for (word, r) in [("full", Rodata::Full), ("on", Rodata::On), ("off", Rodata::Off)] {
            assert_eq!(Rodata::parse(word), Some(r), "rodata={word}");
            assert_eq!(r.as_str(), word);
        }
        for bad in ["", "Off", "no", "off "] {
            assert_eq!((Bbml2Arg::parse(bad), Rodata::parse(bad)), (None, None), "{bad:?}");
        }
    }

    #[test]
    fn set_memory_refuses_a_range_outside_the_table() {
        let mut pt = PageTable::new(Regime::El1 { asid: 0, half: VaHalf::Upper }, HeapFrames::default()).unwrap();
        let mut tlb = crate::CountingTlb::default();
        let r = set_memory(&mut pt, &mut tlb, VirtAddr::new(0x40_0000), PAGE_SIZE, MemChange::Ro, false);
        assert!(matches!(r, Err(Error::OutOfRange { arg: Arg::Start, value: 0x40_0000, .. })), "{r:?}");
        let r = set_memory(&mut pt, &mut tlb, VirtAddr::new(0xffff_8000_0000_0008), PAGE_SIZE, MemChange::Ro, false);
        assert!(matches!(r, Err(Error::Misaligned { arg: Arg::Start, .. })), "{r:?}");
        let r = set_memory(&mut pt, &mut tlb, VirtAddr::new(u64::MAX - 0xfff), 2 * PAGE_SIZE, MemChange::Ro, false);
        assert!(matches!(r, Err(Error::OutOfRange { .. })), "{r:?}");
    }

    #[test]
    fn the_linear_map_reaches_the_table_page_limit() {
        for total in [512 * MIB, GIB, 4 * GIB] {
            for blocks in [false, true] {
                let ram = guest_ram(total);
                let mut pt =
                    PageTable::new(Regime::El1 { asid: 0, half: VaHalf::Upper }, HeapFrames::default()).unwrap();
                let mut tlb = crate::CountingTlb::default();
                let c = linear_map_constraints(blocks, Rodata::Full, true);
                for (s, e) in ram {
                    pt.map(
                        &mut tlb,
                        VirtAddr::new(0xffff_8000_0000_0000 + s),
                        e - s,
                        PhysAddr::new(s),
                        Attributes::normal(Perms::RW),
                        c,
                    )
                    .unwrap();
                }
                let limit = min_table_pages(&ram, blocks);
                assert_eq!(pt.stats().table_pages, limit, "{total:#x} blocks={blocks}");
            }
        }
        // PTE-only 1 GiB of RAM: root + L1 + L2 + 512 L3 tables.
        assert_eq!(min_table_pages(&[(GIB, 2 * GIB)], false), 3 + 512);
        assert_eq!(min_table_pages(&[(GIB, 2 * GIB)], true), 2);
        assert_eq!(min_table_pages(&[(GIB, GIB + MIB), (GIB + MIB, 2 * GIB)], true), 2, "touching ranges merge");
    }

    #[test]
    fn decision_table() {
        use alloc::string::ToString;
        let no = Err(Refusal::BbmLevel(0));
        let a = bbml2_decide(Ok(()), Bbml2Arg::Auto, false);
        assert!(a.enabled && !a.forced && !a.refused);
        assert_eq!(a.to_string(), "BBM level 2 on an allow-listed core");
        let a = bbml2_decide(no, Bbml2Arg::Auto, false);
        assert!(!a.enabled && !a.refused);
        assert_eq!(a.to_string(), "no FEAT_BBM");
        let off = bbml2_decide(Ok(()), Bbml2Arg::Off, true);
        assert!(!off.enabled);
        assert_eq!(off.to_string(), "bbml2=off");
        let r = bbml2_decide(no, Bbml2Arg::On, false);
        assert!(!r.enabled && r.refused);
        assert_eq!(r.to_string(), "bbml2=on refused: no FEAT_BBM (add bbml2_unsafe_override to force it)");
        let f = bbml2_decide(no, Bbml2Arg::On, true);
        assert!(f.enabled && f.forced && !f.refused);
        assert!(f.to_string().starts_with("bbml2=on FORCED"), "{f}");
        assert!(bbml2_decide(Ok(()), Bbml2Arg::On, false).enabled);
    }

    #[test]
    fn late_cpus() {
        let on = bbml2_decide(Ok(()), Bbml2Arg::Auto, false);
        assert!(late_cpu_accepted(&on, true));
        assert!(!late_cpu_accepted(&on, false), "a late CPU without BBML2 must be refused");
        let off = bbml2_decide(Ok(()), Bbml2Arg::Off, false);
        assert!(late_cpu_accepted(&off, false));
        let forced = bbml2_decide(Err(Refusal::BbmLevel(1)), Bbml2Arg::On, true);
        assert!(late_cpu_accepted(&forced, false));
    }

    #[test]
    fn constraints() {
        assert_eq!(linear_map_constraints(false, Rodata::Full, true), Constraints::PAGES_ONLY);
        assert_eq!(linear_map_constraints(true, Rodata::Full, true), Constraints::NONE);
        assert!(linear_map_constraints(true, Rodata::Full, false).no_contiguous);
        assert!(!linear_map_constraints(false, Rodata::On, true).no_blocks);
        assert!(!linear_map_constraints(false, Rodata::Off, true).no_blocks);
        assert!(alias_permissions(Rodata::Full) && !alias_permissions(Rodata::On));
    }

    #[test]
    fn changes() {
        assert_eq!(MemChange::Ro.apply(Perms::RW), Perms::RO);
        assert_eq!(MemChange::Rw.apply(Perms::RX), Perms::RWX);
        assert_eq!(MemChange::X.apply(Perms::RO), Perms::RX);
        assert_eq!(MemChange::Nx.apply(Perms::RX), Perms::RO);
        assert_eq!(MemChange::Invalid.apply(Perms::RW), Perms::NONE);
        assert_eq!(MemChange::Valid(Perms::RW).apply(Perms::NONE), Perms::RW);
        assert_eq!(MemChange::Valid(Perms::RW).apply(Perms::RO), Perms::RO);
        assert_eq!(MemChange::Ro.apply(Perms::NONE), Perms::NONE, "PROT_NONE stays until set valid");
        assert!(!MemChange::X.applies_to_alias() && MemChange::Ro.applies_to_alias());
    }
}
