//! Property tests: random sequences of map / unmap / protect / remap / split / fold / unfold /
//! software-bit changes on random ranges, against a plain reference map of unit -> (output,
//! permissions), with the model checker watching every step.
//!
//! Two scales: *fine* (4 KiB units in a 16 MiB window: pages, contiguous ranges, 2 MiB blocks)
//! and *coarse* (2 MiB units in a 4 GiB window: 1 GiB blocks, contiguous 2 MiB blocks, live
//! splits). A bounded number of cases by default; `PGTABLE_LONG=1` runs 10^6 fine and 2 x 10^4
//! coarse cases; `PGTABLE_CASES=n` sets the count of both.

use std::collections::BTreeMap;
use std::string::String;
use std::vec::Vec;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::harness::Harness;
use crate::addr::{InputAddress, IntermPhysAddr, PhysAddr, VirtAddr, PAGE_SIZE};
use crate::attrs::{Attributes, Constraints, Perms};
use crate::descriptor::{sw, validate};
use crate::mutation::Mutation;
use crate::regime::{Regime, VaHalf};
use crate::{CrossingBlocks, Error, ErrorKind, SplitOpts};

/// One step of a sequence; ranges in units of the scale. `WriteProtect::whole`: blocks crossing
/// the ends are write-protected whole ([`CrossingBlocks::ProtectWhole`]).
#[derive(Clone, Debug)]
enum Op {
    Map {
        at: u64,
        len: u64,
        out: u64,
        perms: u8,
        cons: u8,
    },
    Unmap {
        at: u64,
        len: u64,
    },
    /// `unmap_pages_of`: told every page it clears.
    UnmapPages {
        at: u64,
        len: u64,
    },
    Protect {
        at: u64,
        len: u64,
        perms: u8,
    },
    WriteProtect {
        at: u64,
        len: u64,
        whole: bool,
    },
    Remap {
        at: u64,
        len: u64,
        out: u64,
        perms: u8,
    },
    Split {
        at: u64,
        len: u64,
        to: usize,
        ro: bool,
    },
    Fold {
        at: u64,
        len: u64,
    },
    Unfold {
        at: u64,
        len: u64,
    },
    SoftBits {
        at: u64,
        len: u64,
        dirty: bool,
    },
    /// `map_fresh_page` of unit `at` (fine scale only: one page), its frame from the table's
    /// allocator (the model's, which counts it as written until an inner-shareable DSB).
    Fresh {
        at: u64,
        perms: u8,
    },
}

#[derive(Clone, Copy, Debug)]
struct Scale {
    unit: u64,
    window_units: u64,
    /// Largest range in units.
    max_len: u64,
}

const FINE: Scale = Scale { unit: PAGE_SIZE, window_units: 4096, max_len: 1536 };
const COARSE: Scale = Scale { unit: 2 << 20, window_units: 2048, max_len: 1024 };
/// 1 GiB of 2 MiB units: block maps and splits of runs of blocks come often and stay cheap.
const BLOCKS: Scale = Scale { unit: 2 << 20, window_units: 512, max_len: 512 };

#[derive(Clone, Debug)]
struct Setup {
    regime: usize,
    bbml2: bool,
    range_tlbi: bool,
    elision: bool,
    split_contiguous: bool,
    live_after: usize,
    ops: Vec<Op>,
}

const REGIMES: [Regime; 4] = [
    Regime::El2,
    Regime::El1 { asid: 3, half: VaHalf::Lower },
    Regime::El1 { asid: 0, half: VaHalf::Upper },
    Regime::Stage2 { vmid: 2 },
];

/// Candidate permissions; those a regime cannot express are mapped to RW.
const PERMS: [Perms; 8] = [
    Perms::NONE,
    Perms::RO,
    Perms::RW,
    Perms::RX,
    Perms::RWX,
    Perms::from_bits(Perms::RW.bits() | Perms::USER.bits()),
    Perms::from_bits(Perms::RO.bits() | Perms::USER.bits() | Perms::USER_EXEC.bits()),
    Perms::from_bits(Perms::WRITE.bits()),
];

fn perms_for(regime: Regime, i: u8) -> Perms {
    let p = PERMS[i as usize % PERMS.len()];
    if validate(regime, Attributes::normal(p)).is_ok() {
        p
    } else {
        Perms::RW
    }
}

fn input_base(regime: Regime) -> u64 {
    match regime {
        Regime::El1 { half: VaHalf::Upper, .. } => 0xffff_8000_0000_0000,
        Regime::Stage2 { .. } => 0x40_0000_0000,
        _ => 0x7f_0000_0000,
    }
}

/// Output of unit 0 of the window for `out == 0`.
const OUT_BASE: u64 = 0x10_0000_0000;

fn range(scale: Scale) -> impl Strategy<Value = (u64, u64)> {
    let w = scale.window_units;
    let max = scale.max_len;
    let at = prop_oneof![0..w, (0..w / 16).prop_map(|x| x * 16), (0..w / 512).prop_map(|x| x * 512),];
    let len = prop_oneof![
        3 => 1..=4u64,
        2 => 1..=40u64,
        2 => (1..=8u64).prop_map(|x| x * 16),
        2 => (1..=max / 512).prop_map(|x| x * 512),
        1 => 1..=max,
    ];
    (at, len).prop_map(move |(at, len)| (at, len.min(w - at).max(1)))
}

fn out_for(scale: Scale) -> impl Strategy<Value = Option<u64>> {
    // None: identity within the output window; Some(x): an explicit output unit.
    prop_oneof![
        2 => Just(None),
        1 => (0..scale.window_units / 512).prop_map(|x| Some(x * 512)),
        1 => (0..scale.window_units / 16).prop_map(|x| Some(x * 16)),
        1 => (0..scale.window_units).prop_map(Some),
    ]
}

/// One random operation; with `ro_splits`, splits are read-only, to pages where they may be,
/// and three times as frequent. A constant (`Just`) draws nothing from the runner's random
/// stream: without `ro_splits` the sequences are those drawn before read-only splits existed
/// (the fixed seed of [`property_test_catches_every_mutation`] finds each seeded bug in the
/// same case).
fn op(scale: Scale, ro_splits: bool) -> impl Strategy<Value = Op> {
    let split_weight = if ro_splits { 3 } else { 1 };
    prop_oneof![
        4 => (range(scale), out_for(scale), any::<u8>(), 0..4u8).prop_map(|((at, len), out, perms, cons)| Op::Map {
            at,
            len,
            out: out.unwrap_or(at),
            perms,
            cons
        }),
        2 => range(scale).prop_map(|(at, len)| Op::Unmap { at, len }),
        2 => range(scale).prop_map(|(at, len)| Op::UnmapPages { at, len }),
        4 => (range(scale), any::<u8>()).prop_map(|((at, len), perms)| Op::Protect { at, len, perms }),
        2 => (range(scale), any::<bool>()).prop_map(|((at, len), whole)| Op::WriteProtect { at, len, whole }),
        1 => (range(scale), out_for(scale), any::<u8>()).prop_map(|((at, len), out, perms)| Op::Remap {
            at,
            len,
            out: out.unwrap_or(at + 7),
            perms
        }),
        // Coarse scale: splitting gigabytes down to pages would only make the run slow.
        split_weight => (range(scale), 2..=3usize, Just(ro_splits)).prop_map(move |((at, len), to, ro)| Op::Split {
            at,
            len,
            to: if scale.unit > PAGE_SIZE && len > 2 { 2 } else if ro { 3 } else { to },
            ro
        }),
        1 => range(scale).prop_map(|(at, len)| Op::Fold { at, len }),
        1 => range(scale).prop_map(|(at, len)| Op::Unfold { at, len }),
        1 => (range(scale), any::<bool>()).prop_map(|((at, len), dirty)| Op::SoftBits { at, len, dirty }),
    ]
}

/// [`op`], and with `fresh` also one-page [`Op::Fresh`] maps (fine scale), one in four: a
/// strategy of its own, so the sequences without them stay those drawn before they existed.
fn ops(scale: Scale, ro_splits: bool, fresh: bool) -> BoxedStrategy<Op> {
    if !fresh {
        return op(scale, ro_splits).boxed();
    }
    assert_eq!(scale.unit, PAGE_SIZE, "fresh pages are drawn at the fine scale only");
    let w = scale.window_units;
    prop_oneof![
        3 => op(scale, ro_splits),
        1 => (0..w, any::<u8>()).prop_map(|(at, perms)| Op::Fresh { at, perms }),
    ]
    .boxed()
}

fn setup(scale: Scale, max_ops: usize, ro_splits: bool, fresh: bool) -> impl Strategy<Value = Setup> {
    (
        0..REGIMES.len(),
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.8),
        any::<bool>(),
        prop_oneof![3 => Just(0usize), 1 => 0..4usize],
        prop::collection::vec(ops(scale, ro_splits, fresh), 1..=max_ops),
        planted(scale, max_ops, ro_splits),
    )
        .prop_map(move |(regime, bbml2, range_tlbi, elision, split_contiguous, live_after, mut ops, planted)| {
            if let Some(((at, len), i, j)) = planted {
                let to = if len * scale.unit <= 8 << 20 { 3 } else { 2 };
                ops.insert(i.max(j).min(ops.len()), Op::Split { at, len, to, ro: true });
                ops.insert(i.min(j).min(ops.len()), Op::Map { at, len, out: at, perms: 2, cons: 0 });
            }
            Setup { regime, bbml2, range_tlbi, elision, split_contiguous, live_after, ops }
        })
}

/// A planted pair: the range (`at`, `len`), then where the map and the split go among the ops.
type Planted = ((u64, u64), usize, usize);

/// With `ro_splits`, each case also maps a writable, block-aligned range (1 to 4 blocks of
/// 2 MiB, or 1 GiB where the window holds one) and later splits the same range read-only,
/// both at random places among its random operations (which may change the range between
/// them): random ranges alone rarely put a writable block wholly inside a read-only split, the
/// case that write-protects. Without, nothing is drawn.
fn planted(scale: Scale, max_ops: usize, ro_splits: bool) -> BoxedStrategy<Option<Planted>> {
    if !ro_splits {
        return Just(None).boxed();
    }
    let block = (2 << 20) / scale.unit;
    let w = scale.window_units;
    let blocks = (0..w / block, 1..=4u64).prop_map(move |(b, n)| (b * block, (n * block).min(w - b * block)));
    let range = if w * scale.unit >= 1 << 30 {
        prop_oneof![3 => blocks, 1 => Just((0, (1 << 30) / scale.unit))].boxed()
    } else {
        blocks.boxed()
    };
    (range, 0..=max_ops, 0..=max_ops).prop_map(Some).boxed()
}

type RefMap = BTreeMap<u64, (u64, Perms)>;

/// One case on a table of input addresses `K` (the stage is chosen once, in [`run_case`]).
struct Case<K: InputAddress> {
    h: Harness<K>,
    regime: Regime,
    scale: Scale,
    base: u64,
    reference: RefMap,
    /// The pages the last `unmap_pages_of` told.
    told: Vec<u64>,
    /// What the last `map_fresh_page` did.
    fresh: Option<crate::FreshPage>,
}

impl<K: InputAddress> Case<K> {
    fn translate(&self, raw: u64) -> Option<(u64, Perms)> {
        self.h.pt.translate(K::from_raw(raw)).map(|t| (t.phys.as_u64(), t.attrs.perms))
    }

    fn compare(&self, lo: u64, hi: u64, after: &Op) -> Result<(), TestCaseError> {
        let unit = self.scale.unit;
        for u in lo..hi.min(self.scale.window_units) {
            let addr = self.base + u * unit;
            let probes: &[u64] = if unit > PAGE_SIZE { &[0, unit - PAGE_SIZE] } else { &[0] };
            for &p in probes {
                let got = self.translate(addr + p);
                let want = self.reference.get(&u).map(|&(out, perms)| (out + p, perms));
                if got != want {
                    return Err(TestCaseError::fail(format!(
                        "after {after:?}: unit {u} ({:#x}): tables say {got:x?}, reference {want:x?}",
                        addr + p
                    )));
                }
            }
        }
        Ok(())
    }

    fn call(&mut self, op: &Op) -> Result<(), Error> {
        let unit = self.scale.unit;
        let a = |at: u64| K::from_raw(self.base + at * unit);
        let out = |o: u64| PhysAddr::new(OUT_BASE + o * unit);
        let regime = self.regime;
        let h = &mut self.h;
        match *op {
            Op::Map { at, len, out: o, perms, cons } => {
                let c = Constraints { no_blocks: cons & 1 != 0, no_contiguous: cons & 2 != 0 };
                h.pt.map(&mut h.tlb, a(at), len * unit, out(o), Attributes::normal(perms_for(regime, perms)), c)
            }
            Op::Unmap { at, len } => h.pt.unmap(&mut h.tlb, a(at), len * unit),
            Op::UnmapPages { at, len } => {
                let mut told = Vec::new();
                let r = h.pt.unmap_pages_of(&mut h.tlb, a(at), len * unit, |pa| told.push(pa.as_u64()));
                self.told = told;
                r
            }
            Op::Protect { at, len, perms } => h.pt.protect(&mut h.tlb, a(at), len * unit, perms_for(regime, perms)),
            Op::WriteProtect { at, len, whole } => {
                let crossing = if whole { CrossingBlocks::ProtectWhole } else { CrossingBlocks::Split };
                h.pt.write_protect_with(&mut h.tlb, a(at), len * unit, crossing)
            }
            Op::Remap { at, len, out: o, perms } => h.pt.remap(
                &mut h.tlb,
                a(at),
                len * unit,
                out(o),
                Attributes::normal(perms_for(regime, perms)),
                Constraints::NONE,
            ),
            Op::Split { at, len, to, ro } => {
                let opts = SplitOpts { read_only: ro, ..SplitOpts::to(to) };
                h.pt.split_with(&mut h.tlb, a(at), len * unit, opts).map(drop)
            }
            Op::Fold { at, len } => h.pt.fold(&mut h.tlb, a(at), len * unit).map(drop),
            Op::Unfold { at, len } => h.pt.unfold(&mut h.tlb, a(at), len * unit).map(drop),
            Op::SoftBits { at, len, dirty } => {
                h.pt.set_software_bits(&mut h.tlb, a(at), len * unit, sw::DIRTY, if dirty { sw::DIRTY } else { 0 })
            }
            Op::Fresh { at, perms } => {
                let attrs = Attributes::normal(perms_for(regime, perms));
                self.fresh = Some(h.pt.map_fresh_page(&mut h.tlb, a(at), attrs));
                Ok(())
            }
        }
    }

    /// The units `[start, end)` of the leaf mapping unit `u` when it covers more than `min`
    /// bytes (`entry`: of its one entry, not of its contiguous group), if any.
    fn leaf_units(&self, u: u64, min: u64, entry: bool) -> Option<(u64, u64)> {
        let unit = self.scale.unit;
        let addr = self.base + u * unit;
        let t = self.h.pt.translate(K::from_raw(addr));
        t.map(|t| if entry { crate::addr::level_size(t.level) } else { t.size }).filter(|&size| size > min).map(
            |size| {
                let start = (addr & !(size - 1)) - self.base;
                (start / unit, (start + size) / unit)
            },
        )
    }

    /// The units a read-only split of `[at, at + len)` to `to` makes read-only: those of every
    /// block larger than level `to`'s entries that lies inside the range (read before the call).
    fn read_only_split_units(&self, at: u64, len: u64, to: usize) -> Vec<u64> {
        let mut units = Vec::new();
        let mut u = at;
        while u < at + len {
            match self.leaf_units(u, crate::addr::level_size(to), true) {
                Some((lo, hi)) => {
                    if lo >= at && hi <= at + len {
                        units.extend(lo..hi);
                    }
                    u = hi.max(u + 1);
                }
                None => u += 1,
            }
        }
        units
    }

    /// The units a write-protect of `[at, at + len)` makes read-only: the range, and with
    /// `whole` also the rest of a leaf crossing either end (read before the call).
    fn write_protected_units(&self, at: u64, len: u64, whole: bool) -> core::ops::Range<u64> {
        let unit = self.scale.unit;
        let (mut lo, mut hi) = (at, at + len);
        if whole && len > 0 {
            let leaf = |u: u64| self.leaf_units(u, unit, false);
            if let Some((s, _)) = leaf(at) {
                lo = s;
            }
            if let Some((_, e)) = leaf(at + len - 1) {
                hi = e;
            }
        }
        lo..hi
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let protected = match *op {
            Op::WriteProtect { at, len, whole } => self.write_protected_units(at, len, whole),
            _ => 0..0,
        };
        let split_read_only = match *op {
            Op::Split { at, len, to, ro: true } => self.read_only_split_units(at, len, to),
            _ => Vec::new(),
        };
        let res = self.call(op);
        let unit = self.scale.unit;
        let out = |o: u64| OUT_BASE + o * unit;
        let (at, len) = match *op {
            Op::Map { at, len, .. }
            | Op::Unmap { at, len }
            | Op::UnmapPages { at, len }
            | Op::Protect { at, len, .. }
            | Op::WriteProtect { at, len, .. }
            | Op::Remap { at, len, .. }
            | Op::Split { at, len, .. }
            | Op::Fold { at, len }
            | Op::Unfold { at, len }
            | Op::SoftBits { at, len, .. } => (at, len),
            Op::Fresh { at, .. } => (at, 1),
        };
        let r = &mut self.reference;
        match *op {
            Op::Map { out: o, perms, .. } => {
                let clash = r.range(at..at + len).next().is_some();
                if clash {
                    prop_assert_eq!(res.map_err(|e| e.kind()), Err(ErrorKind::AlreadyMapped), "{:?}", op);
                } else {
                    prop_assert_eq!(res, Ok(()), "{:?}", op);
                    for u in 0..len {
                        r.insert(at + u, (out(o + u), perms_for(self.regime, perms)));
                    }
                }
            }
            Op::Unmap { .. } => {
                prop_assert_eq!(res, Ok(()), "{:?}", op);
                let keys: Vec<u64> = r.range(at..at + len).map(|(&k, _)| k).collect();
                for k in keys {
                    r.remove(&k);
                }
            }
            Op::UnmapPages { .. } => {
                prop_assert_eq!(res, Ok(()), "{:?}", op);
                let mut expect: Vec<u64> = Vec::new();
                for (_, (o, _)) in r.range(at..at + len) {
                    expect.extend((0..unit / PAGE_SIZE).map(|p| o + p * PAGE_SIZE));
                }
                let mut told = core::mem::take(&mut self.told);
                told.sort_unstable();
                expect.sort_unstable();
                prop_assert_eq!(told, expect, "pages told by {:?}", op);
                let keys: Vec<u64> = r.range(at..at + len).map(|(&k, _)| k).collect();
                for k in keys {
                    r.remove(&k);
                }
            }
            Op::Protect { perms, .. } => {
                prop_assert_eq!(res, Ok(()), "{:?}", op);
                let p = perms_for(self.regime, perms);
                for (_, v) in r.range_mut(at..at + len) {
                    v.1 = p;
                }
            }
            Op::WriteProtect { .. } => {
                prop_assert_eq!(res, Ok(()), "{:?}", op);
                for (_, v) in r.range_mut(protected.clone()) {
                    v.1 = v.1.difference(Perms::WRITE);
                }
            }
            Op::Remap { out: o, perms, .. } => {
                prop_assert_eq!(res, Ok(()), "{:?}", op);
                for u in 0..len {
                    r.insert(at + u, (out(o + u), perms_for(self.regime, perms)));
                }
            }
            Op::Fresh { perms, .. } => {
                prop_assert_eq!(res, Ok(()), "{:?}", op);
                let held = r.contains_key(&at);
                match self.fresh.take() {
                    Some(crate::FreshPage::Mapped(pa)) => {
                        prop_assert!(!held, "{:?} mapped over unit {} of the reference", op, at);
                        r.insert(at, (pa.as_u64(), perms_for(self.regime, perms)));
                    }
                    Some(crate::FreshPage::Occupied) => prop_assert!(held, "{:?}: occupied, reference empty", op),
                    // Not its case (no level-3 table, a block, a summary to clear, flush
                    // elision off): nothing changed, as the comparison below checks.
                    Some(crate::FreshPage::Declined) => {}
                    other => prop_assert!(false, "{:?}: {:?}", op, other),
                }
            }
            Op::Split { .. } => {
                prop_assert_eq!(res, Ok(()), "{:?}", op);
                for u in split_read_only {
                    if let Some(v) = r.get_mut(&u) {
                        v.1 = v.1.difference(Perms::WRITE);
                    }
                }
            }
            _ => prop_assert_eq!(res, Ok(()), "{:?}", op),
        }
        if let Err(e) = self.h.check() {
            return Err(TestCaseError::fail(format!("model checker after {op:?}:\n{e}")));
        }
        // Blocks and contiguous ranges around the range may have been split or refolded.
        let around = 512;
        let lo = at.saturating_sub(at % around);
        let hi = (at + len).div_ceil(around) * around;
        self.compare(lo, hi, op)
    }
}

/// One case; `lazy_relax` turns on lazy permission relaxation (it acts on user tables only).
/// The table's input address type follows the case's regime, chosen here once.
fn run_case(scale: Scale, s: &Setup, mutation: Mutation, lazy_relax: bool) -> Result<(), TestCaseError> {
    if REGIMES[s.regime].is_stage2() {
        run_case_of::<IntermPhysAddr>(scale, s, mutation, lazy_relax)
    } else {
        run_case_of::<VirtAddr>(scale, s, mutation, lazy_relax)
    }
}

fn run_case_of<K: InputAddress>(
    scale: Scale,
    s: &Setup,
    mutation: Mutation,
    lazy_relax: bool,
) -> Result<(), TestCaseError> {
    let regime = REGIMES[s.regime];
    let mut h = Harness::<K>::new(regime, s.bbml2, s.range_tlbi);
    h.model.borrow_mut().keep_log = false;
    h.pt.policy_mut().flush_elision = s.elision;
    h.pt.policy_mut().split_contiguous = s.split_contiguous;
    h.pt.policy_mut().lazy_relax = lazy_relax;
    h.mutate(mutation);
    let mut case =
        Case { h, regime, scale, base: input_base(regime), reference: RefMap::new(), told: Vec::new(), fresh: None };
    for (i, op) in s.ops.iter().enumerate() {
        if i == s.live_after {
            case.h.go_live();
        }
        case.step(op)?;
    }
    let last = s.ops.last().expect("at least one op").clone();
    case.compare(0, scale.window_units, &last)?;
    // Tear down: everything unmapped leaves only the root.
    case.step(&Op::Unmap { at: 0, len: scale.window_units })?;
    let root_pages = regime.root_pages() as u64;
    prop_assert_eq!(case.h.pt.stats().table_pages, root_pages);
    Ok(())
}

fn long() -> bool {
    std::env::var("PGTABLE_LONG").map(|v| v == "1").unwrap_or(false)
}

/// The seed of a default run's random cases (`cargo xtask test`): the same cases every run,
/// so a run takes the same time every run. With a new seed per run, one block-scale case once
/// ran for more than 12 minutes (a stage-2 table whose model TLBs held so many entries that
/// every DSB's sweep over them dominated) and held up a whole test run.
const DEFAULT_SEED: u64 = 0x5eed_0001;

/// The seed of this run's random cases: `PROPTEST_RNG_SEED=N` replays run N; `--long`
/// (`PGTABLE_LONG=1`) draws a new one each run, to find what the default cases do not;
/// otherwise [`DEFAULT_SEED`]. A failure names its seed.
pub(super) fn seed() -> u64 {
    match std::env::var("PROPTEST_RNG_SEED") {
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("PROPTEST_RNG_SEED={v:?}: a seed is a decimal u64")),
        Err(_) if long() => {
            use std::hash::{BuildHasher, Hasher};
            // The standard library's per-process random keys: a new seed each run.
            std::collections::hash_map::RandomState::new().build_hasher().finish()
        }
        Err(_) => DEFAULT_SEED,
    }
}

/// Fails the test with proptest's report and the seed that replays it.
pub(super) fn failed(e: impl core::fmt::Display, seed: u64) -> ! {
    panic!("{e}\n(seed {seed}: PROPTEST_RNG_SEED={seed} replays this run)")
}

/// A runner of `cases` random cases from `seed` (see [`seed`]).
pub(super) fn config(cases: u32, seed: u64) -> Config {
    Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 2048,
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed),
        ..Config::default()
    }
}

/// Runs random cases of `scale` (`ro_splits`: splits are read-only, [`op`]) against the reference.
fn property(scale: Scale, default_cases: u32, long_cases: u32, max_ops: usize, lazy_relax: bool, ro_splits: bool) {
    property_of(scale, default_cases, long_cases, max_ops, lazy_relax, ro_splits, false)
}

/// [`property`], with `fresh`: one-page [`Op::Fresh`] maps among the operations.
fn property_of(
    scale: Scale,
    default_cases: u32,
    long_cases: u32,
    max_ops: usize,
    lazy_relax: bool,
    ro_splits: bool,
    fresh: bool,
) {
    let cases = match std::env::var("PGTABLE_CASES").ok().and_then(|v| v.parse().ok()) {
        Some(n) => n,
        None if long() => long_cases,
        None => default_cases,
    };
    let seed = seed();
    let mut runner = TestRunner::new(config(cases, seed));
    let result =
        runner.run(&setup(scale, max_ops, ro_splits, fresh), |s| run_case(scale, &s, Mutation::None, lazy_relax));
    if let Err(e) = result {
        failed(e, seed);
    }
}

#[test]
fn fine_sequences_match_reference_and_checker_stays_silent() {
    property(FINE, 96, 1_000_000, 8, false, false);
}

/// A page fault's one-page maps (`map_fresh_page`, frames from the table's allocator) among
/// every other operation: the reference gets the frame it mapped; occupied means mapped there.
#[test]
fn fresh_page_sequences_match_reference_and_checker_stays_silent() {
    property_of(FINE, 96, 100_000, 12, false, false, true);
}

/// Lazy relaxation leaves narrower entries in the TLBs: the checker accepts them (they only
/// refuse what the tables allow) while the reference map still matches.
#[test]
fn sequences_with_lazy_relaxation_stay_silent() {
    property(FINE, 96, 100_000, 8, true, false);
}

#[test]
fn coarse_sequences_match_reference_and_checker_stays_silent() {
    property(COARSE, 32, 20_000, 6, false, false);
}

/// 2 MiB units over 1 GiB: maps of blocks and splits of runs of them to pages.
#[test]
fn block_sequences_match_reference_and_checker_stays_silent() {
    property(BLOCKS, 64, 50_000, 8, false, false);
}

/// Sequences whose splits write-protect (`SplitOpts::read_only`, the dirty log's split),
/// mixed with every other operation: 2 MiB blocks split to pages among pages and contiguous
/// ranges. Apart from the tests above, which draw the sequences they drew before read-only
/// splits existed.
#[test]
fn read_only_split_sequences_match_reference_and_checker_stays_silent() {
    property(FINE, 96, 100_000, 8, false, true);
}

/// Read-only splits of runs of 2 MiB blocks to pages and of 1 GiB blocks to 2 MiB blocks.
#[test]
fn read_only_split_block_sequences_match_reference_and_checker_stays_silent() {
    property(BLOCKS, 32, 10_000, 8, false, true);
}

/// The property test (not only the hand-written scenarios) finds every seeded bug.
#[test]
fn property_test_catches_every_mutation() {
    let mut report = String::new();
    for m in Mutation::ALL {
        // A run stops at the first failure (6000 cases: only a bug that is hard to reach runs
        // long), and nothing is shrunk. A fixed seed of its own, whatever the run's: whether a
        // seeded bug is found must not depend on the run (the summary-bit bug needs a whole
        // level-3 table write-protected, then a writable leaf below it, and a random seed
        // missed it in about one run in twelve).
        let mut runner = TestRunner::new(Config { max_shrink_iters: 0, ..config(6000, 0x11_5eed) });
        // Runs of 2 MiB blocks split to pages come often only with 2 MiB units.
        let scale = if m.needs_block_runs() || m.needs_read_only_splits() { BLOCKS } else { FINE };
        let r = runner.run(&setup(scale, 8, m.needs_read_only_splits(), m.needs_fresh_pages()), |s| {
            // Live from the start so that every change is maintained.
            let s = Setup { live_after: 0, ..s };
            // A bug in lazy relaxation shows only with it on.
            run_case(scale, &s, m, m.needs_lazy_relax())
        });
        match r {
            Err(proptest::test_runner::TestError::Fail(why, _)) => {
                report.push_str(&format!("{m:?}: caught: {}\n", why.message().lines().next().unwrap_or("")));
            }
            other => panic!("{m:?} not caught by the property test: {other:?}"),
        }
    }
    println!("{report}");
}
