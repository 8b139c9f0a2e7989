//! User address spaces in the kernel: a `uspace::AddressSpace` over the kernel's frames
//! behind a lock, its ASID context, and TTBR0 switching.
//!
//! * **ASIDs**: `pgtable::asid::AsidAllocator` (8 or 16 bits as ID_AA64MMFR0_EL1.ASIDBits
//!   says; ASID 0 is the reserved empty TTBR0's). [`switch_to`] runs its fast or slow path and
//!   flushes the local TLB when a roll-over asks for it, then writes TTBR0 (root and ASID in
//!   one register write, TCR_EL1.A1 = 0: no window with a new ASID on old tables).
//! * **Every operation** on an address space ([`UserSpace::with`]) runs under its lock, first
//!   copying the address space's current ASID into its table (a roll-over may have given it a
//!   new one while it ran nowhere) and the run-time switches `flush_elision` / `lazy_relax`
//!   into its policy.
//! * **User/kernel split**: user pages are never executable at EL1 (PXN) and kernel pages never
//!   at EL0 (UXN, and not EL0-accessible); with FEAT_PAN the kernel runs with PSTATE.PAN set
//!   (SCTLR_EL1.SPAN = 0 sets it on every exception entry), so an ordinary load or store of a
//!   user page from EL1 faults: user memory is reached only through `uaccess`.
//! * **EL0 may read** the virtual counter (CNTKCTL_EL1.EL0VCTEN) and, for the benchmarks, the
//!   PMU cycle counter and event counters (PMUSERENR_EL0.CR/ER: read only).

use super::frames::KFrames;
use crate::arch::cpu::CpuTally;
use crate::arch::cpuinfo::CpuInfo;
use aarch64_cpu::registers::{Readable, Writeable, ID_AA64MMFR0_EL1, ID_AA64MMFR1_EL1};
use abi::syscall::Counters;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kcore::options::UserOptions;
use pgtable::asid::AsidAllocator;
use pgtable::hw::HwTlb;
use pgtable::tlb::BARRIER_KINDS;
use pgtable::{regime, Barrier, TlbMaintenance, Tlbi, VirtAddr};
use spin::{Mutex, Once};
use uspace::{Access, AddressSpace, FaultKind, FaultOutcome};

static ASIDS: Once<AsidAllocator> = Once::new();
static TLB: Once<HwTlb> = Once::new();

/// `flush_elision=on|off`: skip TLB maintenance for changes `needs_flush` says are free.
pub static FLUSH_ELISION: AtomicBool = AtomicBool::new(true);
/// `lazy_relax=on|off`: leave permission upgrades of user pages unflushed.
pub static LAZY_RELAX: AtomicBool = AtomicBool::new(true);
/// Whether EL0 may read the PMU counters.
pub static PMU_EL0: AtomicBool = AtomicBool::new(false);

/// Totals over all address spaces (the parts of `abi::syscall::Counters` the kernel keeps).
pub static FAULTS_DEMAND: AtomicU64 = AtomicU64::new(0);
/// Adds `n` to a count only this CPU writes (IRQs masked), without an atomic read-modify-write.
#[inline(always)]
fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

/// [`HwTlb`] with its barriers tallied in `dsb` (by kind) instead of its shared atomic
/// counters; the caller adds them to its CPU's [`CpuTally`].
struct TalliedTlb {
    hw: HwTlb,
    dsb: [u64; BARRIER_KINDS],
}

impl TlbMaintenance for TalliedTlb {
    fn tlbi(&mut self, op: Tlbi) {
        self.hw.tlbi(op)
    }
    fn tlbi_series(&mut self, first: Tlbi, stride: u64, count: u64) {
        self.hw.tlbi_series(first, stride, count)
    }
    #[inline(always)]
    fn dsb(&mut self, barrier: Barrier) {
        self.dsb[barrier.kind()] += 1;
        pgtable::hw::dsb_uncounted(barrier);
    }
    fn isb(&mut self) {
        self.hw.isb()
    }
    fn features(&self) -> pgtable::TlbFeatures {
        self.hw.features()
    }
}

/// Every CPU's [`CpuTally`] (the static per-CPU pages in the image: the same frames the CPUs
/// reach through TPIDR_EL1).
fn tallies() -> impl Iterator<Item = &'static CpuTally> {
    crate::arch::cpu::STATIC_AREAS.iter().map(|a| &a.first_touch)
}

/// `HwTlb::counters` with the barriers every CPU tallied itself: what the kernel's TLB
/// maintenance counts are, wherever they are read.
pub fn tlb_counters() -> pgtable::TlbCounters {
    let mut c = HwTlb::counters();
    for cpu in tallies() {
        for (total, n) in c.dsb.iter_mut().zip(&cpu.dsb) {
            *total += n.load(Ordering::Relaxed);
        }
    }
    c
}

/// Spurious permission faults fixed with a local TLBI.
pub static FAULTS_SPURIOUS: AtomicU64 = AtomicU64::new(0);
/// Faults that were the task's.
pub static FAULTS_DENIED: AtomicU64 = AtomicU64::new(0);
/// TLB maintenance elided in user tables (flush elision).
pub static FLUSHES_ELIDED: AtomicU64 = AtomicU64::new(0);
/// Permission upgrades left to lazy relaxation.
pub static LAZY_RELAXED: AtomicU64 = AtomicU64::new(0);

/// The run-time switches as the boot words set them (`flush_elision=`, `lazy_relax=`); the
/// `sysctl` call may change them later.
pub fn configure(o: &UserOptions) {
    FLUSH_ELISION.store(o.flush_elision, Ordering::Relaxed);
    LAZY_RELAX.store(o.lazy_relax, Ordering::Relaxed);
}

/// The ASID allocator.
pub fn asids() -> &'static AsidAllocator {
    ASIDS.get().expect("mm::user::init ran")
}

fn tlb() -> HwTlb {
    *TLB.get().expect("mm::user::init ran")
}

/// Boot CPU, after `mm::init`: the ASID allocator (for `cpus` CPUs), then [`init_cpu`].
///
/// # Errors
///
/// `asid_bits=` too small: a roll-over keeps one ASID per CPU, so there must be more.
pub fn init(cpus: usize, o: &UserOptions) -> Result<(), alloc::string::String> {
    let hw = if pgtable::cpu::has_asid16(ID_AA64MMFR0_EL1.get()) { 16 } else { 8 };
    // `asid_bits=N`: use only N-bit ASIDs (2 up to what the CPU has), so roll-overs happen with a
    // handful of address spaces (for tests).
    let bits = hw.min(o.asid_bits);
    if (1usize << bits) - 1 <= cpus {
        return Err(alloc::format!(
            "asid_bits={bits} gives {} ASIDs for {cpus} CPUs: a roll-over keeps one per CPU, so more are needed",
            (1usize << bits) - 1
        ));
    }
    ASIDS.call_once(|| AsidAllocator::new(bits));
    TLB.call_once(HwTlb::detect);
    PMU_EL0.store(CpuInfo::read().pmuver != 0 && CpuInfo::read().pmuver != 0xf, Ordering::Relaxed);
    init_cpu();
    Ok(())
}

/// This CPU: PAN on (where implemented), EL0 reads of the virtual counter and, if present,
/// the PMU counters.
pub fn init_cpu() {
    use aarch64_cpu::registers::{Writeable, CNTKCTL_EL1};
    super::frames::init_cpu();
    // ID_AA64MMFR1_EL1.PAN, bits 23:20.
    if (ID_AA64MMFR1_EL1.get() >> 20) & 0xf != 0 {
        extra_sctlr::clear_span();
        // SAFETY: sets PSTATE.PAN (MSR PAN, #1, by its encoding: the assembler may not know
        // FEAT_PAN): from now on EL1 loads and stores to EL0-accessible pages fault; the kernel
        // reaches user memory only with LDTR/STTR, which PAN does not affect.
        unsafe { core::arch::asm!(".inst 0xd500419f", options(nomem, nostack, preserves_flags)) };
    }
    // The whole register: EL0 reads the virtual counter and nothing else of the timers.
    CNTKCTL_EL1.set(rt::el1::cntkctl(true));
    // EL0 loads and stores through a misaligned SP fault (SA0), as on Linux.
    {
        use aarch64_cpu::registers::{ReadWriteable, SCTLR_EL1};
        SCTLR_EL1.modify(SCTLR_EL1::SA0::Enable);
    }
    if PMU_EL0.load(Ordering::Relaxed) {
        // PMUSERENR_EL0: EL0 may read the cycle and event counters; it cannot program them.
        rt::write_sysreg!("pmuserenr_el0", rt::el1::pmuserenr(true));
    }
}

/// `SCTLR_EL1` fields `aarch64-cpu` does not name.
mod extra_sctlr {
    use aarch64_cpu::registers::{Readable, Writeable, SCTLR_EL1};
    use tock_registers::register_bitfields;

    register_bitfields! {u64,
        SCTLR_EXTRA [
            /// Set Privileged Access Never on exception entry to EL1: 0 = set it.
            SPAN OFFSET(23) NUMBITS(1) []
        ]
    }

    /// SCTLR_EL1.SPAN = 0: every exception taken to EL1 sets PSTATE.PAN.
    pub fn clear_span() {
        SCTLR_EL1.set(SCTLR_EL1.get() & !SCTLR_EXTRA::SPAN::SET.mask());
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        crate::arch::counters::count_other_isb();
    }
}

/// The TLB maintenance of operations on one address space: the hardware's, counted for that
/// address space too (what `Counters::space_tlbi` reports to its tasks): in `tlbis` while the
/// operation runs, added to the address space's count once at its end ([`UserSpace::with`]).
pub struct SpaceTlb {
    hw: HwTlb,
    tlbis: u64,
}

impl TlbMaintenance for SpaceTlb {
    #[inline(always)]
    fn tlbi(&mut self, op: Tlbi) {
        self.tlbis += 1;
        self.hw.tlbi(op)
    }
    fn tlbi_series(&mut self, first: Tlbi, stride: u64, count: u64) {
        self.tlbis += count;
        self.hw.tlbi_series(first, stride, count)
    }
    // Always inlined: every change ends in a barrier or two, and an outlined call (which the
    // inliner chooses when the callers' budget shifts) costs each mprotect a dozen instructions.
    #[inline(always)]
    fn dsb(&mut self, b: Barrier) {
        self.hw.dsb(b)
    }
    #[inline(always)]
    fn isb(&mut self) {
        self.hw.isb()
    }
    fn features(&self) -> pgtable::TlbFeatures {
        self.hw.features()
    }
}

/// One user address space.
pub struct UserSpace {
    /// `None` only while it is torn down.
    space: Mutex<Option<AddressSpace<KFrames>>>,
    /// ASID context id (`pgtable::asid`).
    ctx: AtomicU64,
    /// Physical address of the root.
    root: u64,
    /// TLBIs its operations issued.
    tlbis: AtomicU64,
    /// The hardware's TLB maintenance (a copy of `TLB`'s, at hand for [`UserSpace::first_touch`]
    /// and [`UserSpace::with`]).
    hw: HwTlb,
}

impl UserSpace {
    /// An empty address space.
    ///
    /// # Errors
    ///
    /// `ENOMEM`.
    pub fn new() -> Result<UserSpace, i64> {
        let mut t = tlb();
        let s = AddressSpace::new(KFrames, &mut t)?;
        let root = s.table().root().as_u64();
        Ok(UserSpace { space: Mutex::new(Some(s)), ctx: AtomicU64::new(0), root, tlbis: AtomicU64::new(0), hw: t })
    }

    /// Runs `f` on the address space under its lock, with its current ASID and the run-time
    /// switches in its table; adds what the table counted to the global counters.
    pub fn with<R>(&self, f: impl FnOnce(&mut AddressSpace<KFrames>, &mut SpaceTlb) -> R) -> R {
        let mut guard = self.space.lock();
        let s = guard.as_mut().expect("a live address space");
        let asid = asids().asid(self.ctx.load(Ordering::Relaxed));
        let pt = s.table_mut();
        pt.set_asid(asid);
        pt.policy_mut().flush_elision = FLUSH_ELISION.load(Ordering::Relaxed);
        pt.policy_mut().lazy_relax = LAZY_RELAX.load(Ordering::Relaxed);
        let (e0, l0) = (pt.stats().flushes_elided, pt.stats().lazy_relaxed);
        let mut t = SpaceTlb { hw: self.hw, tlbis: 0 };
        let r = f(s, &mut t);
        if t.tlbis != 0 {
            self.tlbis.fetch_add(t.tlbis, Ordering::Relaxed);
        }
        let st = s.table().stats();
        for (total, d) in [(&FLUSHES_ELIDED, st.flushes_elided - e0), (&LAZY_RELAXED, st.lazy_relaxed - l0)] {
            if d != 0 {
                total.fetch_add(d, Ordering::Relaxed);
            }
        }
        r
    }

    /// The common EL0 fault alone (the hardware reported a translation fault at level 3): a
    /// first touch the region allows, mapped under the address space's lock by
    /// `uspace::AddressSpace::first_touch` (a zeroed frame, `DSB ISHST`, the entry, `DSB
    /// ISHST`; an empty entry becoming valid needs no TLBI, so neither the ASID nor the
    /// counters of [`UserSpace::with`] are needed). Returns false, having changed nothing, for
    /// anything else, and with flush elision off (its baseline maps new pages by the walk):
    /// the caller then calls [`UserSpace::fault`]. The lock orders it with every other
    /// operation on the space (an munmap or mprotect on another CPU runs wholly before or
    /// after it). The caller returns to the access by an exception return. `mine`: the
    /// running CPU's tally (its static page's), which counts what was done; IRQs masked.
    #[inline(always)]
    pub fn first_touch(&self, va: u64, access: Access, mine: &CpuTally) -> bool {
        if !FLUSH_ELISION.load(Ordering::Relaxed) {
            return false;
        }
        let mut guard = self.space.lock();
        let Some(s) = guard.as_mut() else {
            return false;
        };
        let mut t = TalliedTlb { hw: self.hw, dsb: [0; BARRIER_KINDS] };
        let mapped = s.first_touch(&mut t, va, access);
        drop(guard);
        // This CPU's counts, with IRQs masked (an exception handler): plain increments.
        for (total, n) in mine.dsb.iter().zip(t.dsb) {
            if n != 0 {
                bump(total, n);
            }
        }
        if mapped {
            bump(&mine.touches, 1);
        }
        mapped
    }

    /// A fault at `va` by the running task (at EL0, or in a user copy). A spurious one is fixed
    /// here: the stale entry is invalidated on this CPU (TLBI VALE1 of this ASID, local).
    pub fn fault(&self, va: u64, access: Access, kind: FaultKind) -> FaultOutcome {
        let out = self.with(|s, t| s.fault(t, va, access, kind));
        match out {
            FaultOutcome::Mapped => {
                FAULTS_DEMAND.fetch_add(1, Ordering::Relaxed);
            }
            FaultOutcome::Spurious => {
                FAULTS_SPURIOUS.fetch_add(1, Ordering::Relaxed);
                // The same fix the user-space model checker replays (`lib/pgtable`).
                self.with(|s, t| s.table().fix_spurious_fault(t, VirtAddr::new(va)));
            }
            FaultOutcome::Retry => {}
            FaultOutcome::Denied(_) => {
                FAULTS_DENIED.fetch_add(1, Ordering::Relaxed);
            }
        }
        out
    }

    /// TLBIs its operations issued so far.
    pub fn tlbis(&self) -> u64 {
        self.tlbis.load(Ordering::Relaxed)
    }

    /// Loads an EL0 program; returns its entry point.
    pub fn load(&self, elf: &[u8]) -> Result<uspace::Loaded, uspace::LoadError> {
        let r = self.with(|s, t| {
            s.load(t, elf, |p, n| {
                // Written through the linear map: make the instructions fetchable.
                rt::cache::sync_icache(p as u64, n as u64);
            })
        });
        // Instruction caches may be virtually indexed: drop lines an earlier user of these
        // frames may have left under other addresses.
        rt::cache::invalidate_icache_all();
        r
    }
}

impl Drop for UserSpace {
    fn drop(&mut self) {
        let Some(mut s) = self.space.lock().take() else {
            return;
        };
        let asid = asids().asid(self.ctx.load(Ordering::Relaxed));
        let mut t = tlb();
        s.table_mut().set_asid(asid);
        // SAFETY: the owner (the process) is dropped only after its last task was switched away
        // from on its CPU, so no CPU runs this address space; every mapping is unmapped with its
        // flush, and the ASID is invalidated everywhere right after (its number is reused only
        // after a roll-over, which flushes every CPU anyway).
        unsafe { s.destroy(&mut t) };
        asids().retire(asid, &mut t);
    }
}

/// Points this CPU's TTBR0 at `to` (None: the reserved empty table), with the ASID the
/// allocator gives it, flushing the local TLB first if a roll-over asks for it.
pub fn switch_to(cpu: usize, to: Option<&UserSpace>) {
    use aarch64_cpu::registers::TTBR0_EL1;
    let mut t = tlb();
    match to {
        None => TTBR0_EL1.set(super::reserved_ttbr0()),
        Some(u) => {
            // The allocator's decision and its local flush, as the model checker replays them.
            let sw = asids().switch_to(cpu, &u.ctx, &mut t);
            TTBR0_EL1.set(regime::ttbr_el1(pgtable::PhysAddr::new(u.root), sw.asid));
        }
    }
    t.isb();
}

/// The counters block of `nr::COUNTERS`.
pub fn counters() -> Counters {
    let c = tlb_counters();
    let first_touches: u64 = tallies().map(|n| n.touches.load(Ordering::Relaxed)).sum();
    let (mut broadcast, mut range, mut whole) = (0, 0, 0);
    for (name, n) in c.tlbi_by_kind() {
        if name.ends_with("IS") {
            broadcast += n;
        }
        if name.starts_with('R') {
            range += n;
        }
        if name.starts_with("ASID") || name.starts_with("VMALL") || name.starts_with("ALL") {
            whole += n;
        }
    }
    Counters {
        tlbi: c.tlbi_total(),
        tlbi_broadcast: broadcast,
        tlbi_range: range,
        tlbi_whole: whole,
        dsb: c.dsb_total(),
        faults_demand: FAULTS_DEMAND.load(Ordering::Relaxed) + first_touches,
        faults_spurious: FAULTS_SPURIOUS.load(Ordering::Relaxed),
        faults_denied: FAULTS_DENIED.load(Ordering::Relaxed),
        flushes_elided: FLUSHES_ELIDED.load(Ordering::Relaxed) + first_touches,
        lazy_relaxed: LAZY_RELAXED.load(Ordering::Relaxed),
        asid_rollovers: asids().rollovers(),
        context_switches: 0,
        syscalls: 0,
        ticks: 0,
        space_tlbi: 0,
    }
}
