//! Per-CPU data: one area per CPU, reached two ways.
//!
//! # The areas
//!
//! CPU `c`'s area is `[AREAS_BASE + c * AREA_SPAN, + AREA_SPAN)`, mapped globally in the
//! kernel's table (every CPU can reach every area: sums, canaries, initial values). Page 0 is
//! the **static** part, a [`StaticArea`] (its frame is `STATIC_AREAS[c]` in the image's data,
//! so the boot CPU has it before the allocators run); the pages after it hold **dynamic**
//! per-CPU variables ([`alloc`]): an allocation takes one offset, valid in every area, and
//! maps fresh zeroed frames into every area (and every window) when the areas must grow.
//! Pages are never unmapped: a freed offset is reused, its frames stay (see rule 4 below).
//! A variable is a [`PerCpu`]: an offset into the area.
//!
//! # Two ways to reach this CPU's copy
//!
//! * **Baseline** ([`base`]): TPIDR_EL1 holds this CPU's area address (Linux's per-CPU offset);
//!   an op reads it and adds the variable's offset. A read-modify-write is only correct if the
//!   task cannot move between reading TPIDR_EL1 and the final store, so every op raises the
//!   preemption count around it (`sync::preempt_disable`, as Linux's generic this_cpu ops
//!   do). Works in both modes.
//! * **Window** ([`window`], `percpu_tables=on`): every CPU has its own TTBR1 root ([`tables`])
//!   whose top-level slot for [`WINDOW_VA`] leads to that CPU's own area. An op addresses
//!   `WINDOW_VA + offset`, a constant: no offset register, no preemption guard. Read and
//!   write are one load or store; add, inc and cmpxchg are one atomic read-modify-write on the
//!   window (an LL/SC loop or one LSE instruction).
//!
//! # What a migration in the middle of a window op means
//!
//! An op's effect lands in the area of the CPU that executes its *final* access, and only
//! there; that is the only CPU the op ever touched:
//!
//! * a load or a store is one instruction: it runs wholly on one CPU;
//! * an LSE atomic (`LDADD`, `CAS`) is one instruction: the same;
//! * an LL/SC loop (`LDXR` .. `STXR`) that is preempted between the two is moved with its
//!   exclusive monitor lost: taking the IRQ and the `ERET` back clear the local monitor, so
//!   the `STXR` on the new CPU fails and the loop starts again with a `LDXR` of the new CPU's
//!   copy. The value loaded on the old CPU is thrown away; the old copy was never written.
//!
//! So a migration between two ops splits them over two CPUs (as with the baseline), and a
//! migration inside one changes nothing. What must **never** be done on the window is a
//! plain load, add and store: preempted in between, it stores the old CPU's value plus one
//! into the new CPU's copy, losing the new CPU's updates (`percpu.seed=window-plain` seeds
//! exactly that for the tests).
//!
//! # The rules that keep the window correct
//!
//! 1. **The window's entries are non-global** (nG = 1) and every CPU's TLB holds only its own
//!    root's translations: TTBR1_EL1.CnP stays 0 (a TLB shared between CPUs under CnP would
//!    hand one CPU another's window). Under a hypervisor, a vCPU moved to another physical CPU
//!    must have its TLB entries of this VM invalidated (KVM's `last_vcpu_ran` rule; the pgtlab
//!    hypervisor pins each vCPU to one physical CPU).
//! 2. **All tables below a root are shared except the window's**: a root is a copy of the
//!    kernel table's top level with the window slot pointing at the CPU's own subtree.
//! 3. **A new top-level kernel mapping is copied into every root** before anyone may use it
//!    ([`tables::sync_roots`], run after every change of the kernel table through `mm`). An
//!    invalid -> table change needs no TLBI. A top-level entry is never removed (the tables
//!    below are reachable from every root; `sync_roots` refuses it as a bug).
//! 4. **A window page changes only by break-before-make whose TLBI runs on the window's own
//!    CPU**: each CPU's window maps its own frames, and nG entries are tagged with whichever
//!    ASID TTBR0 had, so the old translation must go from that CPU's TLB under every ASID: the
//!    entry is cleared with no TLBI (`mm::roots::unmap_window_page`), each CPU concerned runs
//!    a local TLBI by IPI ([`crate::irq::call::tlb_shootdown`]), then the page is mapped
//!    again. Dynamic allocation only ever adds pages (invalid -> valid: no TLBI); the one page
//!    that changes is [`PROBE_PAGE`], which [`shootdown_check`] remaps to check the shootdown.
//! 5. A window op is only issued while this CPU runs on its own root (`percpu_tables=on`):
//!    with it off the window VA is unmapped.

mod error;
pub mod selftest;

use crate::mm::frames::PAGE;
pub use crate::mm::layout::{AREAS_BASE, AREA_SPAN, LATE_VA, WINDOW_VA};
use crate::mm::roots as tables;
use crate::mm::MmError;
use alloc::{format, string::String, vec::Vec};
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use kcore::options::PercpuOptions;
use spin::Mutex;

pub use error::PercpuError;

pub use crate::arch::cpu::{this_area, StaticArea, CANARY, STATIC_AREAS};

/// A per-CPU variable of type `T`: an offset into every area.
pub struct PerCpu<T> {
    off: u64,
    _t: PhantomData<T>,
}

impl<T> Clone for PerCpu<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for PerCpu<T> {}

impl<T> PerCpu<T> {
    /// The variable at byte `off` of every area.
    pub const fn at(off: usize) -> PerCpu<T> {
        PerCpu { off: off as u64, _t: PhantomData }
    }
    /// Its offset.
    pub const fn offset(self) -> u64 {
        self.off
    }
    /// CPU `cpu`'s copy, through the global mapping of its area.
    pub fn on(self, cpu: usize) -> *mut T {
        (area_va(cpu) + self.off) as *mut T
    }
}

/// Static counter `i` (< [`STATIC_COUNTERS`]).
pub const fn static_counter(i: usize) -> PerCpu<u64> {
    PerCpu::at(core::mem::offset_of!(StaticArea, counters) + 8 * i)
}

/// System calls made on each CPU (counted with `this_cpu_inc` on every call).
pub const SYSCALLS: PerCpu<u64> = static_counter(6);
/// Context switches of each CPU (`this_cpu_inc` in the scheduler).
pub const SWITCHES: PerCpu<u64> = static_counter(4);

/// Whether the areas are mapped at `AREAS_BASE` (then TPIDR_EL1 points there).
static AREAS_MAPPED: AtomicBool = AtomicBool::new(false);
/// Whether the CPUs run on their own roots and the window ops may be used.
static TABLES_ON: AtomicBool = AtomicBool::new(false);
/// CPUs that have areas (the device tree's, at most `MAX_CPUS`).
static CPUS: AtomicUsize = AtomicUsize::new(1);

/// CPU `cpu`'s area: through `AREAS_BASE` once mapped, else its static page in the image.
pub fn area_va(cpu: usize) -> u64 {
    if AREAS_MAPPED.load(Ordering::Acquire) {
        AREAS_BASE + cpu as u64 * AREA_SPAN
    } else {
        &STATIC_AREAS[cpu] as *const StaticArea as u64
    }
}

/// CPU `cpu`'s static part.
pub fn static_area(cpu: usize) -> &'static StaticArea {
    &STATIC_AREAS[cpu]
}

/// Whether `percpu_tables` is on.
pub fn tables_on() -> bool {
    TABLES_ON.load(Ordering::Acquire)
}

/// CPUs with an area.
pub fn cpus() -> usize {
    CPUS.load(Ordering::Relaxed)
}

/// Points TPIDR_EL1 at this CPU's area (early: at its static page).
pub fn set_base(cpu: usize) {
    use aarch64_cpu::registers::{Writeable, TPIDR_EL1};
    TPIDR_EL1.set(area_va(cpu));
}

/// The baseline: TPIDR_EL1 + offset, preemption disabled around every read-modify-write.
pub mod base {
    use super::PerCpu;
    use crate::arch::sync::{preempt_disable, preempt_enable};

    /// This CPU's area (TPIDR_EL1).
    #[inline(always)]
    pub fn offset() -> u64 {
        use aarch64_cpu::registers::{Readable, TPIDR_EL1};
        TPIDR_EL1.get()
    }

    #[inline(always)]
    fn ptr<T>(v: PerCpu<T>) -> *mut T {
        (offset() + v.off) as *mut T
    }

    /// `this_cpu_read`: one load (a preemption before or after it is harmless).
    #[inline(always)]
    pub fn read(v: PerCpu<u64>) -> u64 {
        // SAFETY: `v` is an offset inside every area, and TPIDR_EL1 points at this CPU's.
        unsafe { ptr(v).read_volatile() }
    }

    /// `this_cpu_write`.
    #[inline(always)]
    pub fn write(v: PerCpu<u64>, x: u64) {
        preempt_disable();
        // SAFETY: as in `read`; the task stays on this CPU until `preempt_enable`.
        unsafe { ptr(v).write_volatile(x) };
        preempt_enable();
    }

    /// `this_cpu_add`.
    #[inline(always)]
    pub fn add(v: PerCpu<u64>, x: u64) {
        preempt_disable();
        let p = ptr(v);
        // SAFETY: as in `write`: nobody else writes this CPU's copy while we cannot move
        // (IRQ handlers do not touch these variables).
        unsafe { p.write_volatile(p.read_volatile().wrapping_add(x)) };
        preempt_enable();
    }

    /// `this_cpu_inc`.
    #[inline(always)]
    pub fn inc(v: PerCpu<u64>) {
        add(v, 1)
    }

    /// `this_cpu_cmpxchg`: stores `new` if the copy holds `old`; returns what it held.
    #[inline(always)]
    pub fn cmpxchg(v: PerCpu<u64>, old: u64, new: u64) -> u64 {
        preempt_disable();
        let p = ptr(v);
        // SAFETY: as in `add`.
        let cur = unsafe { p.read_volatile() };
        if cur == old {
            // SAFETY: as above.
            unsafe { p.write_volatile(new) };
        }
        preempt_enable();
        cur
    }

    /// `this_cpu_add` **without** the preemption guard: the seeded bug
    /// (`percpu.seed=no-guard`); a task preempted between its load and store loses updates.
    #[inline(always)]
    pub fn add_unguarded(v: PerCpu<u64>, x: u64) {
        let p = ptr(v);
        // SAFETY: the address is valid (an area); the missing guard is the point.
        unsafe { p.write_volatile(p.read_volatile().wrapping_add(x)) };
    }
}

/// The window: `WINDOW_VA + offset`, no offset register, no preemption guard.
pub mod window {
    use super::{PerCpu, WINDOW_VA};
    use core::sync::atomic::{AtomicU64, Ordering};

    #[inline(always)]
    fn atomic(v: PerCpu<u64>) -> &'static AtomicU64 {
        // SAFETY: with `percpu_tables=on` (the caller's rule) WINDOW_VA maps this CPU's area
        // read-write on every CPU; `v` is an 8-aligned offset inside it.
        unsafe { AtomicU64::from_ptr((WINDOW_VA + v.off) as *mut u64) }
    }

    /// `this_cpu_read`: one load.
    #[inline(always)]
    pub fn read(v: PerCpu<u64>) -> u64 {
        atomic(v).load(Ordering::Relaxed)
    }

    /// `this_cpu_write`: one store.
    #[inline(always)]
    pub fn write(v: PerCpu<u64>, x: u64) {
        atomic(v).store(x, Ordering::Relaxed)
    }

    /// `this_cpu_add`: one atomic read-modify-write on this CPU's copy.
    #[inline(always)]
    pub fn add(v: PerCpu<u64>, x: u64) {
        atomic(v).fetch_add(x, Ordering::Relaxed);
    }

    /// `this_cpu_inc`.
    #[inline(always)]
    pub fn inc(v: PerCpu<u64>) {
        add(v, 1)
    }

    /// `this_cpu_cmpxchg`: returns what the copy held.
    #[inline(always)]
    pub fn cmpxchg(v: PerCpu<u64>, old: u64, new: u64) -> u64 {
        match atomic(v).compare_exchange(old, new, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(x) | Err(x) => x,
        }
    }

    /// A plain load, add and store on the window: the seeded bug (`percpu.seed=window-plain`).
    #[inline(always)]
    pub fn add_plain(v: PerCpu<u64>, x: u64) {
        let p = (WINDOW_VA + v.off) as *mut u64;
        // SAFETY: as in `atomic`; not atomic: the bug the stress test must catch.
        unsafe { p.write_volatile(p.read_volatile().wrapping_add(x)) };
    }
}

/// `this_cpu_read` in the mode the system runs.
#[inline(always)]
pub fn this_cpu_read(v: PerCpu<u64>) -> u64 {
    if tables_on() {
        window::read(v)
    } else {
        base::read(v)
    }
}

/// `this_cpu_write` in the mode the system runs.
#[inline(always)]
pub fn this_cpu_write(v: PerCpu<u64>, x: u64) {
    if tables_on() {
        window::write(v, x)
    } else {
        base::write(v, x)
    }
}

/// `this_cpu_add` in the mode the system runs.
#[inline(always)]
pub fn this_cpu_add(v: PerCpu<u64>, x: u64) {
    if tables_on() {
        window::add(v, x)
    } else {
        base::add(v, x)
    }
}

/// `this_cpu_inc` in the mode the system runs.
#[inline(always)]
pub fn this_cpu_inc(v: PerCpu<u64>) {
    this_cpu_add(v, 1)
}

/// `this_cpu_cmpxchg` in the mode the system runs.
#[inline(always)]
pub fn this_cpu_cmpxchg(v: PerCpu<u64>, old: u64, new: u64) -> u64 {
    if tables_on() {
        window::cmpxchg(v, old, new)
    } else {
        base::cmpxchg(v, old, new)
    }
}

/// The dynamic part: free byte ranges `[start, end)` of every area, and pages mapped.
struct Dynamic {
    free: Vec<(u64, u64)>,
    /// Pages of every area mapped so far (page 0, the static part, included).
    mapped: u64,
    /// Bytes handed out now.
    in_use: u64,
}

static DYNAMIC: Mutex<Dynamic> = Mutex::new(Dynamic { free: Vec::new(), mapped: 1, in_use: 0 });

/// Counters of the dynamic allocator.
pub static ALLOCS: AtomicU64 = AtomicU64::new(0);
pub static FREES: AtomicU64 = AtomicU64::new(0);

pub use kcore::options::PercpuSeed as Seed;

static SEED: spin::Once<Seed> = spin::Once::new();

/// The seeded bug (none unless `percpu.seed=` said).
pub fn seed() -> Seed {
    *SEED.get().unwrap_or(&Seed::None)
}

/// Boot CPU, after `mm::init`: maps every CPU's static page at `AREAS_BASE`, builds the
/// per-CPU roots and windows, and switches this CPU to its area (and its root when
/// `percpu_tables=on`).
pub fn init(cpus: usize, o: &PercpuOptions) -> Result<(), PercpuError> {
    SEED.call_once(|| o.seed);
    tables::SEED_SKIP_CPU1.store(o.seed == Seed::NoSyncCpu1, Ordering::Relaxed);
    let on = o.tables;
    let cpus = cpus.clamp(1, rt::MAX_CPUS);
    CPUS.store(cpus, Ordering::Relaxed);
    for (c, a) in STATIC_AREAS.iter().enumerate().take(cpus) {
        let pa = crate::mm::layout::image_phys(a as *const StaticArea as u64);
        crate::mm::map_kernel_page(AREAS_BASE + c as u64 * AREA_SPAN, pa)?;
    }
    crate::mm::build_percpu_roots(cpus)?;
    for (c, a) in STATIC_AREAS.iter().enumerate().take(cpus) {
        let pa = crate::mm::layout::image_phys(a as *const StaticArea as u64);
        tables::map_window_page(c, 0, pa)?;
    }
    DYNAMIC.lock().free = alloc::vec![(PAGE, PROBE_PAGE * PAGE)];
    AREAS_MAPPED.store(true, Ordering::Release);
    TABLES_ON.store(on, Ordering::Release);
    init_cpu(0);
    Ok(())
}

/// Every CPU once it runs at its virtual address: TPIDR_EL1 to its area, TTBR1 to its root if
/// the mode says so.
pub fn init_cpu(cpu: usize) {
    if !AREAS_MAPPED.load(Ordering::Acquire) {
        return;
    }
    set_base(cpu);
    tables::install(cpu, tables_on());
}

/// Switches every CPU between its own root (window ops allowed) and the shared kernel root;
/// `on_every_cpu` runs a function on each online CPU and waits for all of them; its error is
/// returned as it is.
pub fn set_tables<E>(on: bool, on_every_cpu: impl FnOnce(fn(usize)) -> Result<(), E>) -> Result<(), E> {
    if on {
        // Roots first, then the flag: no window op before this CPU's root is in.
        on_every_cpu(|cpu| tables::install(cpu, true))?;
        TABLES_ON.store(true, Ordering::Release);
    } else {
        TABLES_ON.store(false, Ordering::Release);
        on_every_cpu(|cpu| tables::install(cpu, false))?;
    }
    Ok(())
}

/// Allocates `size` bytes (8-aligned, zeroed in every area) of dynamic per-CPU memory,
/// growing every area (and window) by fresh frames when needed. Runs with IRQs masked.
pub fn alloc(size: u64) -> Result<PerCpu<u64>, PercpuError> {
    if !AREAS_MAPPED.load(Ordering::Acquire) {
        return Err(PercpuError::NotInitialised);
    }
    let size = (size.max(8) + 7) & !7;
    let mut d = DYNAMIC.lock();
    let i = d.free.iter().position(|&(s, e)| e - s >= size).ok_or(PercpuError::Full {
        size,
        in_use: d.in_use,
        capacity: (PROBE_PAGE - 1) * PAGE,
    })?;
    let (s, e) = d.free[i];
    if s + size == e {
        d.free.remove(i);
    } else {
        d.free[i].0 = s + size;
    }
    let need = (s + size).div_ceil(PAGE);
    while d.mapped < need {
        let page = d.mapped;
        for cpu in 0..cpus() {
            let pa = crate::mm::frames::alloc(1).ok_or(MmError::NoFrame { what: "a per-CPU page" })?;
            // SAFETY: a fresh frame, reached through the linear map.
            unsafe { core::ptr::write_bytes((crate::mm::LINEAR_BASE + pa) as *mut u8, 0, PAGE as usize) };
            crate::mm::map_kernel_page(AREAS_BASE + cpu as u64 * AREA_SPAN + page * PAGE, pa)?;
            tables::map_window_page(cpu, page, pa)?;
        }
        d.mapped += 1;
    }
    d.in_use += size;
    drop(d);
    for cpu in 0..cpus() {
        // SAFETY: [s, s + size) lies in mapped pages of every area, handed to nobody else.
        unsafe { core::ptr::write_bytes((area_va(cpu) + s) as *mut u8, 0, size as usize) };
    }
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    Ok(PerCpu::at(s as usize))
}

/// Gives back `size` bytes at `v` (from [`alloc`] with the same size).
pub fn free(v: PerCpu<u64>, size: u64) {
    let size = (size.max(8) + 7) & !7;
    let (s, e) = (v.off, v.off + size);
    let mut d = DYNAMIC.lock();
    let i = d.free.partition_point(|&(fs, _)| fs < s);
    d.free.insert(i, (s, e));
    // Merge with the neighbours.
    if i + 1 < d.free.len() && d.free[i].1 == d.free[i + 1].0 {
        d.free[i].1 = d.free[i + 1].1;
        d.free.remove(i + 1);
    }
    if i > 0 && d.free[i - 1].1 == d.free[i].0 {
        d.free[i - 1].1 = d.free[i].1;
        d.free.remove(i);
    }
    d.in_use -= size;
    FREES.fetch_add(1, Ordering::Relaxed);
}

/// Pages each area has mapped (the static page included).
pub fn mapped_pages() -> u64 {
    DYNAMIC.lock().mapped
}

/// Every canary of every area, checked: the first bad one.
pub fn check_canaries() -> Result<(), PercpuError> {
    for c in 0..cpus() {
        let a = area_va(c) as *const StaticArea;
        // SAFETY: every area's page 0 is mapped (and is `STATIC_AREAS[c]`).
        let (lo, hi, cpu) = unsafe { ((*a).canary_lo, (*a).canary_hi, (*a).cpu) };
        if lo != CANARY ^ c as u64 || hi != CANARY ^ c as u64 || cpu != c as u64 {
            return Err(PercpuError::Canary { cpu: c, lo, hi, found_cpu: cpu, want: CANARY ^ c as u64 });
        }
    }
    Ok(())
}

/// Ticks whose window check ran, and ticks that found the window showing another CPU's area.
pub static WINDOW_CHECKS: AtomicU64 = AtomicU64::new(0);
pub static WINDOW_MISMATCHES: AtomicU64 = AtomicU64::new(0);

/// The tick (IRQ context, so this cannot move): with the tables on, the window must show this
/// CPU's own area (its `cpu` word and canaries).
pub fn check_window_on_tick(cpu: usize) {
    if !tables_on() {
        return;
    }
    WINDOW_CHECKS.fetch_add(1, Ordering::Relaxed);
    let a = WINDOW_VA as *const StaticArea;
    // SAFETY: with the tables on, this CPU runs on its own root, whose window maps its area's
    // page 0 (a StaticArea) read-write.
    let (c, lo, hi) = unsafe { ((*a).cpu, (*a).canary_lo, (*a).canary_hi) };
    let want = CANARY ^ cpu as u64;
    if c != cpu as u64 || lo != want || hi != want {
        WINDOW_MISMATCHES.fetch_add(1, Ordering::Relaxed);
    }
}

/// The window page [`shootdown_check`] remaps: the last one ([`alloc`] stops below it).
pub const PROBE_PAGE: u64 = AREA_SPAN / PAGE - 1;
const PROBE_VA: u64 = WINDOW_VA + PROBE_PAGE * PAGE;

/// Each CPU's two frames for the probe page (allocated on first use and never freed: a CPU
/// whose TLB kept an old entry reads the other frame, never freed memory), and which one its
/// window maps now.
struct Probe {
    frames: [[u64; 2]; rt::MAX_CPUS],
    mapped: [Option<usize>; rt::MAX_CPUS],
}

static PROBE: Mutex<Probe> = Mutex::new(Probe { frames: [[0; 2]; rt::MAX_CPUS], mapped: [None; rt::MAX_CPUS] });
/// What each CPU read at the probe page in the last read.
static PROBE_READ: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];

/// What CPU `cpu`'s probe frame `which` holds.
fn probe_pattern(cpu: usize, which: usize) -> u64 {
    0x5b0d_0000_0000_0000 | (which as u64) << 16 | cpu as u64
}

/// What CPU `cpu` reads at its window's probe page, read there by IPI (a fault reads as
/// `u64::MAX`).
fn read_probe_on(cpu: usize) -> Result<u64, String> {
    crate::irq::call::on_cpus(1 << cpu, |c| {
        PROBE_READ[c].store(probe_read(PROBE_VA).unwrap_or(u64::MAX), Ordering::Relaxed)
    })?;
    Ok(PROBE_READ[cpu].load(Ordering::Relaxed))
}

/// Rule 4 in use, as the check of the TLB shootdown: each CPU in `mask` reads its window's
/// probe page (so its TLB holds the translation, tagged with its ASID), the page is remapped
/// on each to its other frame by break-before-make whose TLBI is
/// [`crate::irq::call::tlb_shootdown`] (a local TLBI on each of those CPUs, by IPI), and each
/// reads it again. Returns the CPUs that read the new frame: one whose TLB kept the old
/// translation reads the old frame. Needs the tables on (the window is only in the CPUs' own
/// roots) and IPIs answered (the scheduler running); one check at a time.
pub fn shootdown_check(mask: u64) -> Result<u64, String> {
    if !tables_on() {
        return Err("the shootdown check needs the per-CPU tables on".into());
    }
    let Some(mut p) = PROBE.try_lock() else {
        return Err("a shootdown check is already running".into());
    };
    let list: Vec<usize> = (0..cpus()).filter(|&c| mask & (1 << c) != 0).collect();
    for &c in &list {
        if p.frames[c][0] == 0 {
            for which in 0..2 {
                let pa = crate::mm::frames::alloc(1).ok_or("out of frames for the shootdown check")?;
                // SAFETY: a fresh frame, reached through the linear map.
                unsafe {
                    core::ptr::write_bytes((crate::mm::LINEAR_BASE + pa) as *mut u8, 0, PAGE as usize);
                    ((crate::mm::LINEAR_BASE + pa) as *mut u64).write_volatile(probe_pattern(c, which));
                }
                p.frames[c][which] = pa;
            }
        }
        if p.mapped[c].is_none() {
            tables::map_window_page(c, PROBE_PAGE, p.frames[c][0])?;
            p.mapped[c] = Some(0);
        }
    }
    // Each CPU walks its window now, so its TLB holds the old translation.
    for &c in &list {
        let (v, want) = (read_probe_on(c)?, probe_pattern(c, p.mapped[c].unwrap_or(0)));
        if v != want {
            return Err(format!("CPU {c} read {v:#x} at its probe page before the remap, want {want:#x}"));
        }
    }
    // Break (no TLBI), the shootdown, make.
    for &c in &list {
        tables::unmap_window_page(c, PROBE_PAGE)?;
    }
    let old: Vec<usize> = list.iter().map(|&c| p.mapped[c].take().unwrap_or(0)).collect();
    crate::irq::call::tlb_shootdown(mask)?;
    for (&c, &o) in list.iter().zip(&old) {
        tables::map_window_page(c, PROBE_PAGE, p.frames[c][1 - o])?;
        p.mapped[c] = Some(1 - o);
    }
    let mut seen = 0;
    for (&c, &o) in list.iter().zip(&old) {
        let v = read_probe_on(c)?;
        if v == probe_pattern(c, 1 - o) {
            seen |= 1 << c;
        } else {
            rt::println!(
                "kernel: percpu: CPU {c} read {v:#x} at its probe page after the shootdown (old frame {:#x}, new {:#x})",
                probe_pattern(c, o),
                probe_pattern(c, 1 - o)
            );
        }
    }
    Ok(seen)
}

/// Loads `va` with the fault probe (one CPU at a time: the probe is armed for one CPU only).
fn probe_read(va: u64) -> Option<u64> {
    static PROBE_LOCK: Mutex<()> = Mutex::new(());
    let _g = PROBE_LOCK.lock();
    crate::mm::fault::probe_read(va).ok()
}

const LATE_PATTERN: u64 = 0x1a7e_0a11_cafe_f00d;

/// Maps a page at [`LATE_VA`] once (a top-level slot nothing used: the per-CPU roots get the new
/// entry from `tables::sync_roots`) and writes a pattern through it. Returns whether this call
/// mapped it.
pub fn late_map() -> Result<bool, PercpuError> {
    static MAPPED: spin::Once<Result<(), PercpuError>> = spin::Once::new();
    let mut now = false;
    MAPPED.call_once(|| {
        now = true;
        let pa = crate::mm::frames::alloc(1).ok_or(MmError::NoFrame { what: "the late mapping" })?;
        crate::mm::map_kernel_page(LATE_VA, pa)?;
        // SAFETY: the page just mapped RW at LATE_VA (in this CPU's root too).
        unsafe { (LATE_VA as *mut u64).write_volatile(LATE_PATTERN) };
        Ok(())
    });
    MAPPED.get().copied().unwrap_or(Err(PercpuError::LateInProgress))?;
    Ok(now)
}

/// Whether this CPU reads the pattern at [`LATE_VA`] (a fault is caught and counts as no).
/// One CPU at a time: the fault probe is armed for one CPU only.
pub fn late_read() -> bool {
    probe_read(LATE_VA) == Some(LATE_PATTERN)
}
