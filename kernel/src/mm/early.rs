//! With the MMU off: the early tables, and the move of the image from its physical address to
//! [`KIMAGE_VA`], for the boot CPU and for every CPU PSCI starts later.
//!
//! # Why the image moves
//!
//! User space owns TTBR0_EL1, so the kernel must run from TTBR1 (upper half). The image is
//! loaded at a physical address and relocates itself there (`rt::start`); it keeps running at
//! that address until its MMU is on, then moves:
//!
//! 1. **Boot CPU, MMU off** ([`boot`], called first by `rt_main`): the device tree is read (on
//!    the boot heap) for the RAM ranges and the console; two small tables are built with
//!    `lib/pgtable` in [`POOL_PAGES`] static pages of the image's BSS (no frame allocator yet):
//!    - the **identity map** (TTBR0): the image at its physical address, W^X. It is what lets a
//!      CPU execute the instruction after the one that turns its MMU on; it is kept for good,
//!      for the CPUs started later and for `mm::replace_ttbr1`, and is never a task's table;
//!    - the **early TTBR1 table**: the image at [`KIMAGE_VA`] (W^X), the console UART at the
//!      start of the MMIO window, and a linear map of RAM in blocks (RW, never executable).
//! 2. The MMU goes on with both ([`rt::mmu::enable_el1`]); the console moves to its virtual
//!    address; the image's relocations are applied again for [`KIMAGE_VA`]
//!    ([`rt::start::relocate`]), so every pointer the image holds is virtual; the CPU jumps to
//!    `boot_high` at its virtual address, on its boot stack's virtual address.
//! 3. **Boot CPU, virtual** (`crate::boot::boot_high`): the heap restarts at its virtual address
//!    (whatever the first phase allocated is gone), the device tree is read again through the
//!    linear map, and `mm::init` builds the real TTBR1 table with the frame allocator and swaps
//!    it in from the identity map (`mm::replace_ttbr1`); TTBR0 then holds the empty reserved
//!    table until a task runs.
//! 4. **Later CPUs** (`rt_secondary_main`, MMU off, at the physical address): the BBML2 check
//!    ([`accept_cpu`]: a refused CPU parks with its MMU off so it never walks tables that are
//!    changed without break-before-make), then the MMU goes on with the identity map and the
//!    real TTBR1 table ([`SecondaryBoot`]), and the CPU jumps to its virtual address.
//!
//! Code that runs with the MMU off after step 2 (step 4) must not follow any pointer the image
//! holds (they are virtual): it reads only [`SecondaryBoot`] (reached PC-relative) and ID
//! registers, and calls code that needs nothing else.

use super::layout::{self, KIMAGE_VA, LINEAR_BASE, MMIO_START};
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use pgtable::hw::HwTlb;
use pgtable::{regime, Attributes, Constraints, CountingTlb, FrameAlloc, PageTable, Perms, PhysAddr};
use pgtable::{VaHalf, VirtAddr};

/// Static pages for the early tables: the identity map of the image (a handful of pages) and
/// the early TTBR1 table (image, UART, linear map in blocks: a few pages per GiB of RAM that is
/// not 1 GiB aligned).
pub const POOL_PAGES: usize = 48;
const PAGE: usize = abi::PAGE_SIZE as usize;

#[repr(C, align(4096))]
struct Pool([[u64; 512]; POOL_PAGES]);

/// In the BSS: zero when the image starts.
static mut POOL: Pool = Pool([[0; 512]; POOL_PAGES]);
static POOL_USED: AtomicUsize = AtomicUsize::new(0);

/// Root of the identity map (physical address), for later CPUs and `mm::replace_ttbr1`.
static IDMAP_ROOT: AtomicU64 = AtomicU64::new(0);

/// The identity map's root (a TTBR0_EL1 value with ASID 0).
pub fn idmap_root() -> u64 {
    IDMAP_ROOT.load(Ordering::Relaxed)
}

/// Frames for the early tables, from [`POOL`], reached at their physical address (MMU off).
struct EarlyFrames;

// SAFETY: each pool page is handed out once (bump pointer), 4 KiB aligned and zero (BSS,
// cleared by `rt::start` and never written before); the pool is part of the image, so the
// physical address the MMU-off code computes is also where `phys_to_ptr` reaches it. Early
// tables are never torn down, so `free` is never called with pages in use elsewhere.
unsafe impl FrameAlloc for EarlyFrames {
    fn alloc_zeroed(&mut self, pages: usize) -> Option<PhysAddr> {
        let first = POOL_USED.fetch_add(pages, Ordering::Relaxed);
        if first + pages > POOL_PAGES {
            POOL_USED.fetch_sub(pages, Ordering::Relaxed);
            return None;
        }
        let base = core::ptr::addr_of!(POOL) as usize;
        Some(PhysAddr::new((base + first * PAGE) as u64))
    }
    fn free(&mut self, _pa: PhysAddr, _pages: usize) {}
    fn phys_to_ptr(&self, pa: PhysAddr) -> *mut u64 {
        pa.as_u64() as *mut u64
    }
}

/// Where the console UART is mapped (the first page of the MMIO window; `mm::init` maps it at
/// the same address in the real table).
pub fn uart_va(uart_pa: u64) -> u64 {
    MMIO_START + (uart_pa & (PAGE as u64 - 1))
}

/// The boot CPU's first phase (MMU off, at the physical address); never returns: continues at
/// the image's virtual address with `dtb` (the DTB's physical address) at the code whose
/// address *now* (MMU off, PC-relative: `rt::pc_relative!`) is `cont_pc_now` (the caller's
/// next phase: `main`'s `boot_high`; passed down, as for a later CPU's `secondary`).
pub fn boot(dtb: usize, cont_pc_now: usize) -> ! {
    let l = rt::start::image_layout();
    layout::set_image_phys(l.start as u64);
    let regs = match early_tables(dtb) {
        Ok(r) => r,
        Err(e) => {
            rt::console::panic_print(format_args!("kernel: boot failed: {e}\n"));
            crate::arch::power::exit(1)
        }
    };
    let uart = UART_PA.load(Ordering::Relaxed);
    // Everything the continuation needs, computed before the relocation rewrites the pointers
    // (black_box: the compiler must not recompute an address from the GOT afterwards).
    let delta = layout::image_delta() as usize;
    let pc = core::hint::black_box(cont_pc_now) + delta;
    let sp = core::hint::black_box(rt::start::stack_bounds(0).1) + delta;
    rt::mmu::enable_el1(&regs, &mut HwTlb::detect());
    if uart != 0 {
        let kind = *UART_KIND.get().expect("the console's kind is set with its address");
        // SAFETY: the early TTBR1 table maps the console UART there (device memory).
        unsafe { rt::console::init(kind, uart_va(uart) as usize) };
    }
    // SAFETY: the image is mapped read-write (data) at its physical address by the identity
    // map, and whole at KIMAGE_VA by the early TTBR1 table; this CPU is the only one running,
    // and what follows uses only `pc`, `sp` and `dtb`.
    unsafe {
        rt::start::relocate(KIMAGE_VA as usize);
        rt::start::jump(pc, sp, dtb)
    }
}

/// Physical address of the console UART (0: none), from the first phase.
static UART_PA: AtomicU64 = AtomicU64::new(0);
/// Its kind (set with [`UART_PA`]).
static UART_KIND: spin::Once<board::UartKind> = spin::Once::new();

/// Why the early tables could not be built (the boot stops with this message).
#[derive(Clone, Debug, PartialEq, Eq)]
enum EarlyError {
    /// No valid device tree header at `at`.
    Dtb { at: usize, err: board::BoardError },
    /// The device tree could not be read.
    Board(board::BoardError),
    /// The device tree is outside every memory range it lists.
    DtbNotInRam { at: usize },
    /// The image does not fit its virtual window.
    ImageTooBig { size: u64, max: u64 },
    /// The page-table library refused building `what` (`used` of the pool's pages taken).
    Table { what: &'static str, err: pgtable::Error, used: usize },
}

impl fmt::Display for EarlyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EarlyError::Dtb { at, err } => write!(f, "device tree at {at:#x}: {err}"),
            EarlyError::Board(err) => write!(f, "device tree: {err}"),
            EarlyError::DtbNotInRam { at } => write!(f, "the device tree at {at:#x} is not in RAM"),
            EarlyError::ImageTooBig { size, max } => {
                write!(f, "the image is {size} bytes, more than the {max} bytes its window holds")
            }
            EarlyError::Table { what, err, used } => {
                write!(f, "early {what}: {err} (pool of {POOL_PAGES} pages, {used} used)")
            }
        }
    }
}

/// Reads the device tree and builds the two early tables; returns the MMU registers.
fn early_tables(dtb: usize) -> Result<rt::mmu::MmuRegs, EarlyError> {
    // SAFETY: x0 is 0 or points at the DTB (boot protocol), in RAM nothing else writes.
    let blob = unsafe { board::dtb_at(dtb as *const u8) }.map_err(|err| EarlyError::Dtb { at: dtb, err })?;
    let board = board::Board::from_dtb(blob).map_err(EarlyError::Board)?;
    if let Some(u) = &board.console {
        // SAFETY: the DTB names this UART as the console; only rt::console uses it.
        unsafe { rt::console::init(u.kind, u.base as usize) };
        UART_KIND.call_once(|| u.kind);
        UART_PA.store(u.base, Ordering::Relaxed);
    }
    let ram: Vec<(u64, u64)> = board.memory.iter().map(|r| (r.base, r.end())).collect();
    if !ram.iter().any(|&(s, e)| (s..e).contains(&(dtb as u64))) {
        return Err(EarlyError::DtbNotInRam { at: dtb });
    }
    let l = rt::start::image_layout();
    let img = [l.start as u64, l.text_end as u64, l.rodata_end as u64, l.end as u64];
    if img[3] - img[0] > layout::KIMAGE_MAX {
        return Err(EarlyError::ImageTooBig { size: img[3] - img[0], max: layout::KIMAGE_MAX });
    }
    let mut tlb = CountingTlb::default();
    let e = |what: &'static str, err: pgtable::Error| EarlyError::Table {
        what,
        err,
        used: POOL_USED.load(Ordering::Relaxed),
    };
    let pages = Constraints::PAGES_ONLY;
    let sections = [(img[0], img[1], Perms::RX), (img[1], img[2], Perms::RO), (img[2], img[3], Perms::RW)];

    let mut id = PageTable::el1(0, VaHalf::Lower, EarlyFrames).map_err(|x| e("identity map", x))?;
    for (s, end, p) in sections {
        id.map(&mut tlb, VirtAddr::new(s), end - s, PhysAddr::new(s), Attributes::normal(p), pages)
            .map_err(|x| e("identity map", x))?;
    }
    let mut k = PageTable::el1(0, VaHalf::Upper, EarlyFrames).map_err(|x| e("TTBR1 table", x))?;
    for (s, end, p) in sections {
        let va = KIMAGE_VA + (s - img[0]);
        k.map(&mut tlb, VirtAddr::new(va), end - s, PhysAddr::new(s), Attributes::normal(p), pages)
            .map_err(|x| e("image map", x))?;
    }
    if let Some(u) = &board.console {
        let pa = u.base & !(PAGE as u64 - 1);
        let va = uart_va(u.base) & !(PAGE as u64 - 1);
        k.map(&mut tlb, VirtAddr::new(va), PAGE as u64, PhysAddr::new(pa), Attributes::device(Perms::RW), pages)
            .map_err(|x| e("console", x))?;
    }
    for &(s, end) in &ram {
        let (s, end) = ((s + PAGE as u64 - 1) & !(PAGE as u64 - 1), end & !(PAGE as u64 - 1));
        if end > s {
            let rw = Attributes::normal(Perms::RW);
            k.map(&mut tlb, VirtAddr::new(LINEAR_BASE + s), end - s, PhysAddr::new(s), rw, Constraints::NONE)
                .map_err(|x| e("linear map", x))?;
        }
    }
    id.set_live(&mut tlb);
    k.set_live(&mut tlb);
    IDMAP_ROOT.store(id.root().as_u64(), Ordering::Relaxed);
    let mmfr0 = {
        use aarch64_cpu::registers::{Readable, ID_AA64MMFR0_EL1};
        ID_AA64MMFR0_EL1.get()
    };
    let regs = rt::mmu::MmuRegs {
        mair: regime::MAIR,
        tcr: regime::tcr_el1(pgtable::cpu::parange(mmfr0), pgtable::cpu::has_asid16(mmfr0), true),
        ttbr0: regime::ttbr_el1(id.root(), 0),
        ttbr1: regime::ttbr_el1(k.root(), 0),
        wxn: true,
    };
    // The image (tables included) was written with the MMU off: memory holds it. Drop any
    // stale line before the first cacheable access.
    // SAFETY: nothing has accessed the image through the caches yet.
    unsafe { rt::cache::invalidate_to_poc(img[0], img[3] - img[0]) };
    Ok(regs)
}

/// What a CPU started by PSCI needs before its MMU is on. Written by the boot CPU (caches on)
/// and cleaned to the point of coherency before any such CPU starts.
#[repr(C, align(64))]
pub struct SecondaryBoot {
    /// TTBR0 = the identity map, TTBR1 = the kernel's table.
    pub regs: rt::mmu::MmuRegs,
    /// The boot CPU's BBML2 decision: with BBML2 in use a CPU that is not allowed stays out,
    /// unless it was forced (`pgtable::kmem::late_cpu_accepted`).
    pub bbml2: pgtable::kmem::Bbml2Decision,
    /// `bbml2_test_disallow_cpu=N` (u64::MAX: none).
    pub disallow_cpu: u64,
    /// `KIMAGE_VA` minus the image's physical address.
    pub image_delta: u64,
    /// `bbml2_test_midr=`: the MIDR the allow-list check sees instead of the CPU's (u64::MAX:
    /// none).
    pub midr_override: u64,
    /// The PSCI conduit is SMC (else HVC): how a refused CPU turns itself off.
    pub psci_smc: bool,
}

static mut SECONDARY_BOOT: SecondaryBoot = SecondaryBoot {
    regs: rt::mmu::MmuRegs { mair: 0, tcr: 0, ttbr0: 0, ttbr1: 0, wxn: true },
    bbml2: pgtable::kmem::Bbml2Decision {
        enabled: false,
        forced: false,
        refused: false,
        arg: pgtable::kmem::Bbml2Arg::Off,
        cpu: Ok(()),
    },
    disallow_cpu: u64::MAX,
    image_delta: 0,
    midr_override: u64::MAX,
    psci_smc: false,
};

/// Refusals of later CPUs, one cache line each, written by the CPU with its MMU off.
static mut REFUSALS: [Refusal; rt::MAX_CPUS] = [const { Refusal { reason: 0, midr: 0 } }; rt::MAX_CPUS];

/// Publishes what later CPUs read with their MMU off (boot CPU, before the first CPU_ON).
pub fn publish_secondary_boot(b: SecondaryBoot) {
    // SAFETY: written once by the boot CPU before any other CPU runs; later CPUs only read it.
    unsafe { *core::ptr::addr_of_mut!(SECONDARY_BOOT) = b };
    rt::cache::clean_to_poc(core::ptr::addr_of!(SECONDARY_BOOT) as u64, core::mem::size_of::<SecondaryBoot>() as u64);
}

/// Why CPU `cpu` refused to come up, if it did: (reason, its MIDR).
pub fn refusal_of(cpu: usize) -> Option<(RefusalReason, u64)> {
    if cpu >= rt::MAX_CPUS {
        return None;
    }
    // SAFETY: a slot of the static array; read through `read_refusal` only.
    read_refusal(unsafe { core::ptr::addr_of!(REFUSALS[cpu]) })
}

/// The local flush `rt::mmu::enable_el1` asks for, for a CPU whose MMU is off after the image
/// moved: `HwTlb` counts in shared memory that such a CPU cannot update coherently (its caches
/// are off while the others' are on), and its counters are reached through the GOT, which holds
/// virtual addresses by then. This one TLBI per CPU start is therefore not counted.
struct MmuOffTlb;

impl pgtable::TlbMaintenance for MmuOffTlb {
    fn tlbi(&mut self, op: pgtable::Tlbi) {
        debug_assert!(matches!(op.op, pgtable::TlbiOp::Vmalle1 { .. }));
        // SAFETY: drops this CPU's EL1&0 translations (its MMU is off: none are in use); no
        // memory or register is changed.
        unsafe { core::arch::asm!("tlbi vmalle1", options(nostack, preserves_flags)) };
    }
    fn dsb(&mut self, _b: pgtable::Barrier) {
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::NSH);
    }
    fn isb(&mut self) {
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    }
    fn features(&self) -> pgtable::TlbFeatures {
        pgtable::TlbFeatures::default()
    }
}

/// A CPU started by PSCI, MMU off, at the image's physical address: the BBML2 check, then the
/// MMU on and on to `cont(cpu)` at its virtual address, on the virtual address of its boot
/// stack. A refused CPU records why and turns itself off with PSCI CPU_OFF, as Linux does for a
/// CPU that fails a capability check (parking here, MMU off, if that returns).
///
/// Only code that follows no pointer of the image may run here (see the module doc): statics
/// of this crate and `rt`'s PC-relative helpers.
pub fn secondary(cpu: usize, cont_pc_now: usize) -> ! {
    // SAFETY: written and cleaned by the boot CPU before this CPU was started; read-only now.
    let boot = unsafe { &*core::ptr::addr_of!(SECONDARY_BOOT) };
    if let Err(why) = accept_cpu(cpu, boot) {
        // SAFETY: this CPU's own slot.
        record_refusal(unsafe { core::ptr::addr_of_mut!(REFUSALS[cpu]) }, why, effective_midr(boot));
        let conduit = if boot.psci_smc { crate::arch::smccc::Conduit::Smc } else { crate::arch::smccc::Conduit::Hvc };
        crate::arch::smccc::call_via(conduit, abi::psci::CPU_OFF, 0, 0, 0);
        loop {
            aarch64_cpu::asm::wfe();
        }
    }
    let (bottom, top) = rt::start::stack_bounds(cpu);
    // Its stack was written straight to memory: drop stale lines before reading it cacheably.
    // SAFETY: this CPU's stack was only written with its MMU off, by this CPU.
    unsafe { rt::cache::invalidate_to_poc(bottom as u64, (top - bottom) as u64) };
    let delta = boot.image_delta as usize;
    let (pc, sp) = (core::hint::black_box(cont_pc_now) + delta, core::hint::black_box(top) + delta);
    rt::mmu::enable_el1(&boot.regs, &mut MmuOffTlb);
    // SAFETY: `pc` is `cont` at its virtual address, `sp` the top of this CPU's boot stack there;
    // both are mapped by the kernel's table now in TTBR1.
    unsafe { rt::start::jump(pc, sp, cpu) }
}

/// Why a later CPU stays out (recorded with its MIDR for the boot CPU to print).
#[repr(C, align(64))]
pub struct Refusal {
    /// 0: not refused; else a [`RefusalReason`]'s code.
    pub reason: u64,
    /// The refused CPU's MIDR_EL1.
    pub midr: u64,
}

/// Why a CPU's BBML2 capability disagrees with the system's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// `bbml2_test_disallow_cpu` names it.
    TestDisallowed,
    /// `pgtable::cpu::capability` refused it.
    Capability(pgtable::cpu::Refusal),
}

impl core::fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RefusalReason::TestDisallowed => f.write_str("disallowed by bbml2_test_disallow_cpu"),
            RefusalReason::Capability(why) => write!(f, "{why}"),
        }
    }
}

impl RefusalReason {
    /// The code a CPU with its MMU off records (never 0: that is "not refused"); the MIDR
    /// travels beside it.
    fn code(self) -> u64 {
        use pgtable::cpu::Refusal;
        match self {
            RefusalReason::TestDisallowed => 1,
            RefusalReason::Capability(Refusal::NotAllowListed(_)) => 2,
            RefusalReason::Capability(Refusal::BbmLevel(level)) => 3 + level as u64,
        }
    }
    fn from_code(c: u64, midr: u64) -> Option<Self> {
        use pgtable::cpu::{Midr, Refusal};
        match c {
            1 => Some(RefusalReason::TestDisallowed),
            2 => Some(RefusalReason::Capability(Refusal::NotAllowListed(Midr(midr)))),
            3..=4 => Some(RefusalReason::Capability(Refusal::BbmLevel((c - 3) as u8))),
            _ => None,
        }
    }
}

/// The BBML2 check of a later CPU, with its MMU off: `Err` when the system uses BBML2 and this
/// CPU may not (see `pgtable::kmem::late_cpu_accepted`). Reads only ID registers and `boot`.
pub fn accept_cpu(cpu: usize, boot: &SecondaryBoot) -> Result<(), RefusalReason> {
    use aarch64_cpu::registers::{Readable, ID_AA64MMFR2_EL1};
    let allowed = if boot.disallow_cpu == cpu as u64 {
        Err(RefusalReason::TestDisallowed)
    } else {
        pgtable::cpu::capability(pgtable::cpu::Midr(effective_midr(boot)), ID_AA64MMFR2_EL1.get())
            .map_err(RefusalReason::Capability)
    };
    // The one rule (host-tested in lib/pgtable): BBML2 off, forced, or this CPU allowed.
    match allowed {
        Err(why) if !pgtable::kmem::late_cpu_accepted(&boot.bbml2, false) => Err(why),
        _ => Ok(()),
    }
}

/// This CPU's MIDR as the allow-list check sees it (`bbml2_test_midr=` stands in for it).
fn effective_midr(boot: &SecondaryBoot) -> u64 {
    use aarch64_cpu::registers::{Readable, MIDR_EL1};
    match boot.midr_override {
        u64::MAX => MIDR_EL1.get(),
        m => m,
    }
}

/// Records a refusal of a CPU whose MIDR (as checked) is `midr` (MMU off: straight to memory;
/// the boot CPU invalidates before reading).
pub fn record_refusal(slot: *mut Refusal, why: RefusalReason, midr: u64) {
    // SAFETY: `slot` is this CPU's own refusal slot (a static the boot CPU only reads).
    unsafe {
        core::ptr::addr_of_mut!((*slot).midr).write_volatile(midr);
        core::ptr::addr_of_mut!((*slot).reason).write_volatile(why.code());
    }
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
}

/// Reads a refusal slot written by a CPU with its MMU off.
pub fn read_refusal(slot: *const Refusal) -> Option<(RefusalReason, u64)> {
    // SAFETY: the boot CPU never writes the slots (zero in the BSS since boot), so no line
    // holds data memory lacks; the invalidation drops a stale clean copy.
    unsafe { rt::cache::invalidate_to_poc(slot as u64, core::mem::size_of::<Refusal>() as u64) };
    // SAFETY: a static slot, read whole.
    let (reason, midr) = unsafe {
        (core::ptr::addr_of!((*slot).reason).read_volatile(), core::ptr::addr_of!((*slot).midr).read_volatile())
    };
    RefusalReason::from_code(reason, midr).map(|why| (why, midr))
}
