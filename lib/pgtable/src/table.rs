//! [`PageTable`]: a root, its regime, its frames, its configuration, its policy and its
//! counters; the options one call takes ([`Opts`], [`SplitOpts`]). The per-operation context
//! every operation works through is in [`crate::ctx`].

use core::fmt;
use core::marker::PhantomData;

use crate::addr::{
    level_shift, level_size, InputAddress, IntermPhysAddr, PhysAddr, VirtAddr, ENTRIES_PER_TABLE, MAX_PA_BITS,
    PAGE_SIZE,
};
use crate::attrs::Attributes;
use crate::descriptor::{decode_leaf, Desc};
use crate::error::{Arg, Error};
use crate::frame::FrameAlloc;
use crate::gather::FlushPolicy;
use crate::regime::{Regime, VaHalf};
use crate::tlb::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp};
use crate::walker::{walk, Entry, ReadOnly, WalkFlags, WalkStats};

#[cfg(any(test, feature = "seeded-bugs"))]
pub use crate::mutation::Mutation;

/// Whether the seeded bug `Mutation::$bug` is active in `$ctx` (a [`PageTable`] or a
/// [`crate::ctx::Ctx`]): a constant `false`, with no field read, unless built for tests or with
/// the `seeded-bugs` feature.
macro_rules! seeded_bug {
    ($ctx:expr, $bug:ident) => {{
        #[cfg(any(test, feature = "seeded-bugs"))]
        let on = $ctx.mutation == crate::mutation::Mutation::$bug;
        #[cfg(not(any(test, feature = "seeded-bugs")))]
        let on = false;
        on
    }};
}
pub(crate) use seeded_bug;

/// What a table is created with and keeps for its life: facts about the CPUs that will walk it,
/// not switches (a switch flipped on a live table would leak into every later operation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Trust FEAT_BBM level 2 without TLB conflict aborts: a block may be replaced by a table
    /// mapping the same output with the same attributes (and contiguous ranges converted)
    /// without break-before-make and without TLBI. Set only after [`crate::cpu::capability`] allowed it.
    pub bbml2: bool,
}

/// Options of one call (`*_with` operations): how this call walks and changes entries. Nothing
/// of it stays on the table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Opts {
    /// Break-before-make even where the table's BBML2 would allow a live change (a benchmark's
    /// baseline; the model checker accepts both).
    pub force_bbm: bool,
}

impl Opts {
    /// The table's own behaviour.
    pub const DEFAULT: Opts = Opts { force_bbm: false };
    /// Break-before-make everywhere, as without BBML2.
    pub const FORCE_BBM: Opts = Opts { force_bbm: true };
}

/// What [`PageTable::write_protect_with`] does with a block that crosses an end of its range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CrossingBlocks {
    /// Split it one level (as `protect`), so nothing outside the range loses write access.
    #[default]
    Split,
    /// Write-protect it whole, as KVM's `kvm_pgtable_stage2_wrprotect` does: more than the range
    /// may become read-only (for dirty logging, extra write faults, never a missed write), and
    /// a later split of the block builds its pages read-only at once.
    ProtectWhole,
}

/// Options of one [`PageTable::split_with`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitOpts {
    /// No leaf larger than this level is left (2: 2 MiB, 3: 4 KiB).
    pub to_level: usize,
    /// The new leaves get the contiguous bit.
    pub contiguous: bool,
    /// Never visit the entries of `to_level` (KVM's SKIP_LEVEL); off visits them all (the
    /// baseline).
    pub skip_target_level: bool,
    /// With `to_level` 3: do not descend into tables whose summary bit says they hold no block
    /// ([`crate::descriptor::sw::TABLE_NO_BLOCKS`]), and set the bit on every table whose subtree
    /// this call split entirely, so an already-split range costs O(blocks), not O(size / 2 MiB).
    pub summary: bool,
    /// Break-before-make even under BBML2.
    pub force_bbm: bool,
    /// The leaves of every block split that lies inside the range are built without write
    /// access (KVM's write-protect of dirty logging fused into the split: no separate walk over
    /// the blocks first), and the new tables get the "no writable leaf below" summary. Blocks
    /// crossing the range's ends keep their permissions; pages and tables already there are
    /// left as they are (a write-protect after the split takes them, and skips the new tables).
    pub read_only: bool,
}

impl SplitOpts {
    /// Split to `to_level` (2 or 3), no contiguous bit, SKIP_LEVEL on, no summary, permissions
    /// kept.
    pub const fn to(to_level: usize) -> SplitOpts {
        SplitOpts {
            to_level,
            contiguous: false,
            skip_target_level: true,
            summary: false,
            force_bbm: false,
            read_only: false,
        }
    }
}

/// Run-time switches of the mechanisms that belong to a table (docs/ARCHITECTURE.md, "The
/// mechanisms"): each applies to every later operation on it. Defaults are the optimised
/// behaviour. BBML2 is fixed at creation ([`Config`]); how one call walks is in [`Opts`] /
/// [`SplitOpts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Skip maintenance for changes `needs_flush` says are free (invalid -> valid, software
    /// bits). Off: every changed entry is flushed (the baseline).
    pub flush_elision: bool,
    /// How gathered invalidations become instructions.
    pub flush: FlushPolicy,
    /// Subtrees built when an operation must split a block at a range end use contiguous
    /// ranges where possible (PUD -> contiguous PMDs -> PMDs -> contiguous PTEs -> PTEs).
    pub split_contiguous: bool,
    /// Lazy permission relaxation: a change that only widens a user page's rights
    /// ([`crate::descriptor::is_user_relaxation`]: RO -> RW, NX -> X) gets no TLB maintenance,
    /// whatever `flush_elision` says. A CPU may keep the old, narrower entry; the access it
    /// refuses faults, and the fault handler fixes it with a local TLBI. Off by default (the
    /// kernel's fault path must handle such spurious faults before this is turned on).
    pub lazy_relax: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { flush_elision: true, flush: FlushPolicy::default(), split_contiguous: true, lazy_relax: false }
    }
}

/// Counters a table keeps about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Walker visits by level and kind.
    pub walk: WalkStats,
    /// Descriptor writes.
    pub desc_writes: u64,
    /// Table pages currently allocated (root included).
    pub table_pages: u64,
    /// Table pages ever allocated (root included).
    pub tables_allocated: u64,
    /// Table pages freed.
    pub tables_freed: u64,
    /// Blocks split into tables.
    pub splits: u64,
    /// Contiguous ranges formed.
    pub folds: u64,
    /// Contiguous ranges broken.
    pub unfolds: u64,
    /// Break-before-make sequences (invalidate, TLBI, then write).
    pub bbm: u64,
    /// Changed entries whose maintenance was elided by `needs_flush`.
    pub flushes_elided: u64,
    /// Permission upgrades of user pages left unflushed by `Policy::lazy_relax`.
    pub lazy_relaxed: u64,
}

/// The result of [`PageTable::translate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translation {
    /// Output address of the translated input address (not of the block start).
    pub phys: PhysAddr,
    /// Attributes. `perms` is `Perms::NONE` for a PROT_NONE entry (which the hardware faults).
    pub attrs: Attributes,
    /// Level of the leaf (1: 1 GiB block, 2: 2 MiB block, 3: 4 KiB page).
    pub level: usize,
    /// Bytes covered by the leaf.
    pub size: u64,
    /// Whether the leaf has the contiguous bit.
    pub contiguous: bool,
    /// Software bits (55..=58) of the leaf, in place.
    pub sw: u64,
}

/// A page table of one [`Regime`], owning its frames through `A`, translating input addresses
/// of type `K`: [`VirtAddr`] for a stage-1 table (EL2, EL1&0; the default), [`IntermPhysAddr`]
/// for a stage-2 table. Every operation takes a `K`, so an address of the other kind is a
/// compile error, not a run-time one:
///
/// ```compile_fail,E0308
/// use pgtable::{HeapFrames, PageTable, VirtAddr};
/// let s2 = PageTable::stage2(1, HeapFrames::new()).unwrap();
/// s2.translate(VirtAddr::new(0x4000_0000)); // a stage-2 table takes IPAs
/// ```
/// ```compile_fail,E0308
/// use pgtable::{HeapFrames, IntermPhysAddr, PageTable};
/// let el2 = PageTable::el2(HeapFrames::new()).unwrap();
/// el2.translate(IntermPhysAddr::new(0x4000_0000)); // a stage-1 table takes virtual addresses
/// ```
/// The typed constructors ([`el2`](Self::el2), [`el1`](Self::el1), [`stage2`](Self::stage2))
/// fix `K` from the regime; [`new`](Self::new) / [`with_config`](Self::with_config) take a
/// [`Regime`] chosen at run time and refuse one whose input kind is not `K`'s
/// ([`Error::WrongAddressKind`]): the one run-time check of the kind.
///
/// A table is *not live* from [`new`](Self::new) until [`set_live`](Self::set_live): operations
/// on it then issue no TLB maintenance at all (nothing can have cached it). Once live, every
/// operation leaves the TLBs consistent with the tables before it returns.
pub struct PageTable<A: FrameAlloc, K: InputAddress = VirtAddr> {
    regime: Regime,
    root: PhysAddr,
    frames: A,
    live: bool,
    config: Config,
    policy: Policy,
    stats: Stats,
    /// The last page descriptor `map` encoded for one page, with output 0, and its attributes:
    /// a page fault maps page after page with the same attributes, each encoded once.
    page_template: Option<(Attributes, Desc)>,
    #[cfg(any(test, feature = "seeded-bugs"))]
    pub(crate) mutation: Mutation,
    kind: PhantomData<K>,
}

impl<A: FrameAlloc, K: InputAddress> fmt::Debug for PageTable<A, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageTable")
            .field("regime", &self.regime)
            .field("root", &self.root)
            .field("live", &self.live)
            .finish()
    }
}

impl<A: FrameAlloc> PageTable<A, VirtAddr> {
    /// An empty EL2 stage-1 table ([`Regime::El2`]), with the default [`Config`]. Not live.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when `frames` has no root.
    pub fn el2(frames: A) -> Result<Self, Error> {
        Self::new(Regime::El2, frames)
    }
    /// An empty EL2&0 stage-1 table ([`Regime::El20`]: EL2 with HCR_EL2.E2H = 1), with the
    /// default [`Config`]. Not live.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when `frames` has no root.
    pub fn el20(frames: A) -> Result<Self, Error> {
        Self::new(Regime::El20, frames)
    }
    /// An empty EL1&0 stage-1 table ([`Regime::El1`]) of `half`, naming `asid` in its TLB
    /// maintenance, with the default [`Config`]. Not live.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when `frames` has no root.
    pub fn el1(asid: u16, half: VaHalf, frames: A) -> Result<Self, Error> {
        Self::new(Regime::El1 { asid, half }, frames)
    }
    /// Changes the ASID of an EL1&0 table: the one its TLB maintenance names from now on (an
    /// address space gets a new ASID when it first runs, or after a roll-over, see
    /// [`crate::asid`]). No effect on other regimes.
    pub fn set_asid(&mut self, asid: u16) {
        if let Regime::El1 { half, .. } = self.regime {
            self.regime = Regime::El1 { asid, half };
        }
    }
    /// Repairs a *spurious* permission fault at `va` taken by this CPU: the tables allow the
    /// access but a narrower entry this CPU cached refused it (lazy relaxation left a permission
    /// upgrade unflushed, or another CPU's upgrade raced the access). Drops this CPU's entry
    /// for the page of `va` under the table's ASID (`TLBI VALE1` local; `DSB NSH`); the access
    /// is then retried. Only an EL1&0 lower-half (user) table relaxes lazily: for any other
    /// this issues nothing and returns false.
    pub fn fix_spurious_fault<T: TlbMaintenance + ?Sized>(&self, tlb: &mut T, va: VirtAddr) -> bool {
        let Regime::El1 { asid, half: VaHalf::Lower } = self.regime else {
            return false;
        };
        let va = VirtAddr::new(va.as_u64() & !(PAGE_SIZE - 1));
        tlb.tlbi(Tlbi { op: TlbiOp::Vae1 { asid, va }, leaf_only: true, sh: Shareability::Local });
        tlb.dsb(Barrier::Nsh);
        true
    }
}

impl<A: FrameAlloc> PageTable<A, IntermPhysAddr> {
    /// An empty stage-2 table ([`Regime::Stage2`]) of `vmid`, with the default [`Config`]. Not
    /// live.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] when `frames` has no root.
    pub fn stage2(vmid: u16, frames: A) -> Result<Self, Error> {
        Self::new(Regime::Stage2 { vmid }, frames)
    }
}

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// Allocates an empty root (two concatenated pages for stage 2), with the default
    /// [`Config`] (no BBML2). The table is not live.
    ///
    /// # Errors
    /// [`Error::WrongAddressKind`] when `regime` does not translate addresses of type `K`;
    /// [`Error::OutOfMemory`] when `frames` has no root.
    pub fn new(regime: Regime, frames: A) -> Result<Self, Error> {
        Self::with_config(regime, Config::default(), frames)
    }

    /// Allocates an empty root with `config`. The table is not live.
    ///
    /// # Errors
    /// [`Error::WrongAddressKind`] when `regime` does not translate addresses of type `K` (the
    /// one run-time check of the kind: every operation then takes a `K`);
    /// [`Error::OutOfMemory`] when `frames` has no root.
    pub fn with_config(regime: Regime, config: Config, mut frames: A) -> Result<Self, Error> {
        if regime.input_kind() != K::KIND {
            return Err(Error::WrongAddressKind { stage2: regime.is_stage2() });
        }
        let pages = regime.root_pages();
        let root = frames
            .alloc_zeroed(pages)
            .ok_or(Error::OutOfMemory { addr: regime.input_base(), level: regime.start_level() })?;
        let stats = Stats { table_pages: pages as u64, tables_allocated: pages as u64, ..Stats::default() };
        Ok(PageTable {
            regime,
            root,
            frames,
            live: false,
            config,
            policy: Policy::default(),
            stats,
            page_template: None,
            #[cfg(any(test, feature = "seeded-bugs"))]
            mutation: Mutation::None,
            kind: PhantomData,
        })
    }

    /// Physical address of the root, for TTBR0_EL2 / TTBRn_EL1 / VTTBR_EL2 (see
    /// [`crate::regime::vttbr_el2`], [`crate::regime::ttbr_el1`]).
    pub fn root(&self) -> PhysAddr {
        self.root
    }
    /// The regime.
    pub fn regime(&self) -> Regime {
        self.regime
    }
    /// Whether the table may be in use by a CPU.
    pub fn is_live(&self) -> bool {
        self.live
    }
    /// Declares the table live: from now on operations maintain the TLBs. Issues `DSB ISHST` so
    /// every descriptor written so far is visible to the walkers; the caller then writes the
    /// TTBR and issues an ISB.
    pub fn set_live<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T) {
        tlb.dsb(Barrier::IshSt);
        self.live = true;
    }
    /// Declares the table no longer live.
    ///
    /// # Safety
    ///
    /// No CPU may use the table any more, and the TLB entries of its ASID / VMID / EL2 regime
    /// must have been invalidated (TLBI completed by a DSB): later operations issue no
    /// maintenance, and `destroy` frees the frames.
    pub unsafe fn set_not_live(&mut self) {
        self.live = false;
    }
    /// What the table was created with.
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The mechanism switches.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    /// The mechanism switches, to change them.
    pub fn policy_mut(&mut self) -> &mut Policy {
        &mut self.policy
    }
    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    /// Resets the counters (the table-page gauge is kept).
    pub fn reset_stats(&mut self) {
        self.stats = Stats { table_pages: self.stats.table_pages, ..Stats::default() };
    }
    /// The frame allocator.
    pub fn frames(&self) -> &A {
        &self.frames
    }
    /// The frame allocator, mutably (e.g. to lend it to another table).
    pub fn frames_mut(&mut self) -> &mut A {
        &mut self.frames
    }

    /// Frees every table and returns the allocator. A live table is handed back unchanged.
    #[allow(clippy::result_large_err)]
    pub fn destroy(mut self) -> Result<A, Self> {
        if self.live {
            return Err(self);
        }
        let regime = self.regime;
        free_subtree(&mut self.frames, self.root, regime.start_level(), regime.root_entries());
        self.frames.free(self.root, regime.root_pages());
        Ok(self.frames)
    }

    /// Checks and converts an input range to offsets relative to the regime's base.
    pub(crate) fn offsets(&self, start: K, size: u64) -> Result<(u64, u64), Error> {
        let raw = start.raw();
        if !raw.is_multiple_of(PAGE_SIZE) {
            return Err(Error::Misaligned { arg: Arg::Start, value: raw, align: PAGE_SIZE });
        }
        if !size.is_multiple_of(PAGE_SIZE) {
            return Err(Error::Misaligned { arg: Arg::Size, value: size, align: PAGE_SIZE });
        }
        let base = self.regime.input_base();
        let limit = base.wrapping_add(self.regime.input_span());
        if raw < base {
            return Err(Error::OutOfRange { arg: Arg::Start, value: raw, limit: base });
        }
        let off = raw - base;
        let end = off.checked_add(size).ok_or(Error::OutOfRange { arg: Arg::End, value: raw, limit })?;
        if end > self.regime.input_span() {
            return Err(Error::OutOfRange { arg: Arg::End, value: raw.wrapping_add(size), limit });
        }
        Ok((off, end))
    }

    /// The entry holding the leaf (a mapping, PROT_NONE included) of `addr`, found by one walk
    /// down from the root.
    #[inline]
    pub(crate) fn find_leaf(&self, addr: K) -> Option<Entry> {
        // Below the base the offset wraps past the span.
        let off = addr.raw().wrapping_sub(self.regime.input_base());
        if off >= self.regime.input_span() {
            return None;
        }
        // One walk per root level, so each level's shift is a constant.
        if self.regime.start_level() == 0 {
            self.find_leaf_from::<0>(off)
        } else {
            self.find_leaf_from::<1>(off)
        }
    }

    /// [`find_leaf`](Self::find_leaf) of input offset `off` (inside the span) from a root at
    /// level `START`.
    #[inline(always)]
    fn find_leaf_from<const START: usize>(&self, off: u64) -> Option<Entry> {
        let mut table = self.root;
        // The root's index needs no mask: the offset lies inside the span, which the root's
        // entries (concatenated for stage 2) cover exactly.
        let mut index = (off >> level_shift(START)) as usize;
        let mut desc = Desc(self.frames.read_desc(table, index));
        let mut level = START;
        while level < 3 && desc.is_table(level) {
            table = desc.addr();
            level += 1;
            index = (off >> level_shift(level)) as usize & (ENTRIES_PER_TABLE - 1);
            desc = Desc(self.frames.read_desc(table, index));
        }
        if !desc.is_mapping(level) {
            return None;
        }
        let off = off & !(level_size(level) - 1);
        Some(Entry { table, index, level, off, desc, visit: crate::walker::Visit::Leaf })
    }

    /// The level-3 page descriptor for `attrs` with output address 0 (encoded once per
    /// attributes in a row).
    pub(crate) fn page_template(&mut self, attrs: Attributes) -> Result<Desc, Error> {
        if let Some((a, d)) = self.page_template {
            if a == attrs {
                return Ok(d);
            }
        }
        let d = crate::descriptor::encode_leaf(self.regime, PhysAddr::new(0), attrs, 3, false)?;
        self.page_template = Some((attrs, d));
        Ok(d)
    }

    /// Whether anything (a valid leaf or a PROT_NONE one) maps `addr` (software view): one load
    /// per level, nothing decoded.
    pub fn is_mapped(&self, addr: K) -> bool {
        self.find_leaf(addr).is_some()
    }

    /// Looks up one input address in the tables (software view, no TLB involved).
    pub fn translate(&self, addr: K) -> Option<Translation> {
        let off = addr.raw().checked_sub(self.regime.input_base())?;
        let e = self.find_leaf(addr)?;
        let d = e.desc;
        Some(Translation {
            phys: PhysAddr::new(d.addr().as_u64() + (off - e.off)),
            attrs: decode_leaf(self.regime, d),
            level: e.level,
            size: level_size(e.level),
            contiguous: d.is_contiguous(),
            sw: d.sw_bits(),
        })
    }

    /// Read-only walk of `[start, start + size)`; returns the visit counts of this walk (they are
    /// not added to [`stats`](Self::stats)).
    ///
    /// # Errors
    /// Range errors ([`Error::Misaligned`], [`Error::OutOfRange`]), or the first error `cb`
    /// returns (the walk stops there).
    pub fn walk<F>(&self, start: K, size: u64, flags: WalkFlags, mut cb: F) -> Result<WalkStats, Error>
    where
        F: FnMut(&Entry) -> Result<(), Error>,
    {
        let (s, e) = self.offsets(start, size)?;
        let mut state = ReadOnly { frames: &self.frames, stats: WalkStats::default() };
        walk(&mut state, self.regime, self.root, s, e, flags, &mut |_, entry| cb(entry))?;
        Ok(state.stats)
    }

    /// Writes a human-readable listing of every table and leaf, merging runs of pages or blocks
    /// with consecutive outputs and equal attributes.
    pub fn dump<W: fmt::Write>(&self, w: &mut W) -> fmt::Result {
        let regime = self.regime;
        let base = regime.input_base();
        writeln!(w, "{:?} root {}", regime, self.root)?;
        let mut state = ReadOnly { frames: &self.frames, stats: WalkStats::default() };
        // (start, end, first output, level, desc) of the run being merged.
        let mut run: Option<(u64, u64, u64, usize, Desc)> = None;
        let mut out = Ok(());
        let flush = |w: &mut W, run: &Option<(u64, u64, u64, usize, Desc)>| -> fmt::Result {
            if let Some((s, e, pa, level, d)) = *run {
                let a = decode_leaf(regime, d);
                writeln!(
                    w,
                    "{:indent$}{:#018x}..{:#018x} -> {:#x} L{} {:?} {:?}{}{}",
                    "",
                    base.wrapping_add(s),
                    base.wrapping_add(e),
                    pa,
                    level,
                    a.mem,
                    a.perms,
                    if d.is_contiguous() { " cont" } else { "" },
                    if d.sw_bits() != 0 { " sw" } else { "" },
                    indent = 2 * level
                )?;
            }
            Ok(())
        };
        let res = walk(
            &mut state,
            regime,
            self.root,
            0,
            regime.input_span(),
            WalkFlags::LEAF | WalkFlags::TABLE_PRE,
            &mut |_, e: &Entry| {
                let d = e.desc;
                let mergeable = d.is_mapping(e.level);
                if let Some((s, end, pa, level, rd)) = run {
                    let same = mergeable
                        && level == e.level
                        && end == e.off
                        && rd.leaf_attr_bits() == d.leaf_attr_bits()
                        && rd.is_contiguous() == d.is_contiguous()
                        && rd.sw_bits() == d.sw_bits()
                        && pa + (end - s) == d.addr().as_u64();
                    if same {
                        run = Some((s, e.end(), pa, level, rd));
                        return Ok(());
                    }
                    out = out.and(flush(w, &run));
                    run = None;
                }
                if d.is_table(e.level) {
                    out = out.and(writeln!(
                        w,
                        "{:indent$}{:#018x}..{:#018x} L{} table {}",
                        "",
                        base.wrapping_add(e.off),
                        base.wrapping_add(e.end()),
                        e.level,
                        d.addr(),
                        indent = 2 * e.level
                    ));
                } else if mergeable {
                    run = Some((e.off, e.end(), d.addr().as_u64(), e.level, d));
                }
                Ok(())
            },
        );
        out?;
        flush(w, &run)?;
        if res.is_err() {
            return Err(fmt::Error);
        }
        Ok(())
    }

    /// Seeds a bug for the model checker to find (tests and the `seeded-bugs` feature only).
    #[cfg(any(test, feature = "seeded-bugs"))]
    pub fn seed_bug(&mut self, m: Mutation) {
        self.mutation = m;
    }

    pub(crate) fn frames_and_stats(&mut self) -> (&mut A, &mut Stats) {
        (&mut self.frames, &mut self.stats)
    }
}

/// Checks that an output range fits the 48-bit PA space and is page aligned.
pub(crate) fn check_output(pa: PhysAddr, size: u64) -> Result<(), Error> {
    if !pa.is_page_aligned() {
        return Err(Error::Misaligned { arg: Arg::Output, value: pa.as_u64(), align: PAGE_SIZE });
    }
    match pa.as_u64().checked_add(size) {
        Some(end) if end <= 1 << MAX_PA_BITS => Ok(()),
        end => {
            Err(Error::OutOfRange { arg: Arg::OutputEnd, value: end.unwrap_or(pa.as_u64()), limit: 1 << MAX_PA_BITS })
        }
    }
}

pub(crate) fn free_subtree<A: FrameAlloc>(frames: &mut A, table: PhysAddr, level: usize, entries: usize) {
    for i in 0..entries {
        let d = Desc(frames.read_desc(table, i));
        if d.is_table(level) {
            free_subtree(frames, d.addr(), level + 1, ENTRIES_PER_TABLE);
            frames.free(d.addr(), 1);
        }
    }
}
