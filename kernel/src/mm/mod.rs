//! Kernel memory: frames, heap, the kernel's page tables, the linear map, a vmalloc-like area,
//! and `set_memory_*`.
//!
//! # Address space
//!
//! The layout is in [`layout`]; how the image gets from its physical address to
//! [`layout::KIMAGE_VA`] is in [`early`]. [`init`] runs at the virtual address with the early
//! tables installed and builds the kernel's table with `lib/pgtable`:
//!
//! * **TTBR1_EL1** (`Regime::El1 { asid: 0, half: Upper }`, global entries):
//!   - the **image** at `KIMAGE_VA`, W^X: text RX, rodata R, data/BSS (boot stacks and the boot
//!     heap included) RW + never executable (`rodata=off`: all RWX, no WXN);
//!   - the **MMIO window**: the console UART first, then what [`ioremap`] maps (the GIC);
//!   - the **linear map** `LINEAR_BASE + pa` over every DTB memory range, RW + never executable.
//!     Page-table frames, the heap beyond its boot part and vmalloc-backed frames are reached
//!     through it;
//!   - the **vmalloc area** `[VMALLOC_START, VMALLOC_END)`: page mappings made at run time
//!     (each with a guard page after it) for memory whose permissions get changed later and
//!     for task kernel stacks; [`vfree`] unmaps them and resets the linear alias before freeing
//!     the frames;
//!   - `[SCRATCH_BASE, LINEAR_BASE)` is left unused: the benchmarks' scratch tables use it.
//! * **TTBR0_EL1**: user space. While no task runs it holds [`reserved_ttbr0`], an empty root
//!   with ASID 0 (walks find nothing; no ASID a task can have). [`replace_ttbr1`] swaps the
//!   early TTBR1 table for the real one from the identity map, as Linux's
//!   `idmap_cpu_replace_ttbr1` does: the two tables map the same image but may differ in block
//!   sizes, which must never both be live in a TLB.
//!
//! # Mechanisms (boot arguments)
//!
//! * `bbml2=auto|on|off` (+ `bbml2_unsafe_override`): see `pgtable::kmem::bbml2_decide`. With
//!   BBML2 the TTBR1 table splits live without break-before-make and without TLBI, and contpte
//!   converts skip their TLBI. Every CPU must agree: a later CPU that is not allowed is refused
//!   (it parks with its MMU off) unless BBML2 was forced.
//! * `rodata=full|on|off`: `full` (default): with BBML2 the linear map uses 1 GiB / 2 MiB blocks
//!   and contiguous ranges and is split live at the ends of a changed range; without BBML2 it is
//!   PTE-only (never split live). The linear alias of the image's text and rodata is read-only,
//!   and `set_memory_ro/rw/valid/invalid` also apply to the alias of the pages they change.
//!   `on`: image W^X, linear map with blocks, aliases untouched. `off`: image RWX.
//! * `contpte=on|off`: contiguous ranges in the linear map (built at boot, and in subtrees a
//!   live split creates) and in the vmalloc area, and refolding of vmalloc groups after
//!   `set_memory_*` (the linear map is never refolded, as in Linux: `bench=linear-map` shows
//!   the fold/unfold churn that would cost). Switchable at run time ([`set_contpte`]).
//!
//! # Caches
//!
//! Everything the boot CPU wrote before its MMU was on (the image's data and BSS, the early
//! tables) went straight to memory: [`early`] invalidates those lines (`DC IVAC`) before the
//! first cacheable access, and a later CPU invalidates its own stack before turning its MMU
//! on. What later CPUs read with their MMU off ([`early::SecondaryBoot`]) is written with the
//! caches on and cleaned to the point of coherency.
//!
//! # Locking
//!
//! One lock, [`TABLES`], over both tables, the TLB handle and the vmalloc cursor. The frame
//! allocator's lock is taken inside it (never the other way round); the heap's lock is
//! independent.

pub mod early;
mod error;
pub mod fault;
pub mod frames;
pub mod layout;
pub mod roots;
pub mod setmem;
pub mod uaccess;
pub mod user;

use crate::arch::cpuinfo::CpuInfo;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use board::Board;
use core::sync::atomic::{AtomicBool, Ordering};
pub use error::MmError;
use frames::{KFrames, PAGE};
use kcore::options::MmOptions;
pub use layout::{LINEAR_BASE, SCRATCH_BASE, VMALLOC_END, VMALLOC_START};
use pgtable::hw::HwTlb;
use pgtable::kmem::{self, Bbml2Decision, Rodata};
use pgtable::{regime, Attributes, Constraints, PageTable, Perms, PhysAddr, Regime, VaHalf, VirtAddr};
use spin::{Mutex, Once};

/// Bytes of RAM given to the heap once the MMU is on (at most).
const HEAP_EXTRA_MAX: u64 = 64 << 20;

/// The kernel's table.
pub struct Tables {
    /// TTBR1: image, MMIO window, linear map and vmalloc area.
    pub kernel: PageTable<KFrames>,
    pub tlb: HwTlb,
    vmalloc_next: u64,
    mmio_next: u64,
}

pub static TABLES: Mutex<Option<Tables>> = Mutex::new(None);

/// What was decided at boot.
#[derive(Debug, Clone)]
pub struct MmInfo {
    pub bbml2: Bbml2Decision,
    pub rodata: Rodata,
    pub linear: Constraints,
    /// The image as mapped at `KIMAGE_VA`: [start, text_end, rodata_end, end).
    pub image: [u64; 4],
    /// RAM ranges.
    pub ram: Vec<(u64, u64)>,
    /// Page-table pages of the TTBR1 table right after the linear map was built.
    pub linear_table_pages: u64,
}

pub static MM: Once<MmInfo> = Once::new();
static CONTPTE: AtomicBool = AtomicBool::new(true);

/// Whether contpte (contiguous ranges, folding) is in use.
pub fn contpte() -> bool {
    CONTPTE.load(Ordering::Relaxed)
}

/// Switches contpte at run time (new mappings and later `set_memory_*` calls).
pub fn set_contpte(on: bool) {
    CONTPTE.store(on, Ordering::Relaxed);
    if let Some(t) = TABLES.lock().as_mut() {
        t.kernel.policy_mut().split_contiguous = on;
    }
}

/// The boot-time decision.
pub fn info() -> &'static MmInfo {
    MM.get().expect("mm::init ran")
}

/// The empty TTBR0 root of CPUs that run no task (physical address; ASID 0).
static RESERVED_TTBR0: spin::Once<u64> = spin::Once::new();

/// TTBR0_EL1 value while no task runs: an empty table, ASID 0.
pub fn reserved_ttbr0() -> u64 {
    *RESERVED_TTBR0.get().expect("mm::init ran")
}

/// This CPU's identification, with `bbml2_test_midr=` standing in for its MIDR: that is how a
/// test feeds the boot's own BBML2 decision a core that is not on the allow-list.
fn cpu_info(o: &MmOptions) -> CpuInfo {
    let mut i = CpuInfo::read();
    if let Some(midr) = o.midr_override {
        i.midr = pgtable::cpu::Midr(midr);
    }
    i
}

/// One mapping of the kernel's tables, with `what` naming it in the error.
#[allow(clippy::too_many_arguments)] // every argument is one field of the mapping; a struct would only rename them
fn map(
    pt: &mut PageTable<KFrames>,
    tlb: &mut HwTlb,
    what: &'static str,
    va: u64,
    pa: u64,
    len: u64,
    attrs: Attributes,
    c: Constraints,
) -> Result<(), MmError> {
    pt.map(tlb, VirtAddr::new(va), len, PhysAddr::new(pa), attrs, c).map_err(|err| MmError::Map {
        what,
        va,
        pa,
        len,
        err,
    })?;
    // A new top-level entry goes into every CPU's root (per-CPU tables, rule 3).
    crate::mm::roots::sync_roots(va, len)?;
    Ok(())
}

/// Builds every CPU's own TTBR1 root from the kernel table (`roots`; per-CPU tables).
pub fn build_percpu_roots(cpus: usize) -> Result<(), MmError> {
    let g = TABLES.lock();
    let t = g.as_ref().ok_or(MmError::NoTables { call: "building the per-CPU roots" })?;
    roots::build(&t.kernel, cpus)
}

/// Maps one page of RAM `pa` at `va` (outside the vmalloc area and the MMIO window: the
/// per-CPU areas, a test's late mapping), RW + never executable, global.
pub fn map_kernel_page(va: u64, pa: u64) -> Result<(), MmError> {
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or(MmError::NoTables { call: "map" })?;
    map(&mut t.kernel, &mut t.tlb, "kernel page", va, pa, PAGE, Attributes::normal(Perms::RW), Constraints::PAGES_ONLY)
}

/// Builds the kernel's table and swaps it in for the early one (boot CPU, running at the
/// image's virtual address with the early tables), then grows the heap. `dtb` is the DTB's
/// physical range (kept out of the frame allocator).
pub fn init(board: &Board, dtb: (u64, u64), a: &MmOptions) -> Result<(), MmError> {
    let cpu = cpu_info(a);
    let decision = kmem::bbml2_decide(cpu.bbml2(), a.bbml2, a.bbml2_unsafe_override);
    if decision.refused {
        rt::println!("kernel: {decision}");
    }
    CONTPTE.store(a.contpte, Ordering::Relaxed);
    let l = rt::start::image_layout();
    let image = [l.start as u64, l.text_end as u64, l.rodata_end as u64, l.end as u64];
    let image_pa = layout::image_phys(image[0]);

    // Frames: RAM minus the image, the DTB, the initrd and reserved memory. They are reached
    // through the linear map (the early table's until the swap, then the real one).
    let ram: Vec<(u64, u64)> = board.memory.iter().map(|r| (r.base, r.end())).collect();
    let mut reserved = alloc::vec![(image_pa, image_pa + (image[3] - image[0])), dtb];
    reserved.extend(board.initrd.iter().map(|r| (r.base, r.end())));
    reserved.extend(board.mem_reserve.iter().map(|r| (r.base, r.end())));
    for rm in &board.reserved_memory {
        reserved.extend(rm.regions.iter().map(|r| (r.base, r.end())));
    }
    frames::init(&ram, &reserved);

    let mut tlb = HwTlb::detect();
    let e = |what: &'static str, err: pgtable::Error| MmError::Table { what, err };
    let config = pgtable::Config { bbml2: decision.enabled };
    let mut k = PageTable::with_config(Regime::El1 { asid: 0, half: VaHalf::Upper }, config, KFrames)
        .map_err(|x| e("TTBR1 table", x))?;
    k.policy_mut().split_contiguous = a.contpte;
    let normal = Attributes::normal;
    // The linear map (first: `linear_table_pages` counts its pages alone).
    let linear = kmem::linear_map_constraints(decision.enabled, a.rodata, a.contpte);
    for &(s, end) in &ram {
        let (s, end) = ((s + PAGE - 1) & !(PAGE - 1), end & !(PAGE - 1));
        map(&mut k, &mut tlb, "linear map", LINEAR_BASE + s, s, end - s, normal(Perms::RW), linear)?;
    }
    let linear_table_pages = k.stats().table_pages;
    // The image at KIMAGE_VA, W^X.
    let (text, ro, rw) = match a.rodata {
        Rodata::Off => (Perms::RWX, Perms::RWX, Perms::RWX),
        _ => (Perms::RX, Perms::RO, Perms::RW),
    };
    let pages = Constraints::PAGES_ONLY;
    let pa = layout::image_phys;
    map(&mut k, &mut tlb, "kernel text", image[0], pa(image[0]), image[1] - image[0], normal(text), pages)?;
    map(&mut k, &mut tlb, "kernel rodata", image[1], pa(image[1]), image[2] - image[1], normal(ro), pages)?;
    map(&mut k, &mut tlb, "kernel data", image[2], pa(image[2]), image[3] - image[2], normal(rw), pages)?;
    // The console UART where the early table had it: first page of the MMIO window.
    let mut mmio_next = layout::MMIO_START;
    if let Some(u) = &board.console {
        let va = early::uart_va(u.base) & !(PAGE - 1);
        map(&mut k, &mut tlb, "console UART", va, u.base & !(PAGE - 1), PAGE, Attributes::device(Perms::RW), pages)?;
        mmio_next = va + PAGE;
    }
    if kmem::alias_permissions(a.rodata) {
        // The image's text and rodata are read-only through their linear alias too.
        k.protect(&mut tlb, VirtAddr::new(LINEAR_BASE + image_pa), image[2] - image[0], Perms::RO)
            .map_err(|x| e("linear alias of the image", x))?;
    }
    let zero = frames::alloc(1).ok_or(MmError::NoFrame { what: "the reserved TTBR0 table" })?;
    // SAFETY: a fresh frame, reached through the linear map; zero makes every entry invalid.
    unsafe { core::ptr::write_bytes((LINEAR_BASE + zero) as *mut u8, 0, PAGE as usize) };
    RESERVED_TTBR0.call_once(|| regime::ttbr_el1(PhysAddr::new(zero), 0));
    k.set_live(&mut tlb);
    let ttbr1 = regime::ttbr_el1(k.root(), 0);
    let wxn = a.rodata != Rodata::Off;
    replace_ttbr1(ttbr1, wxn);
    leave_idmap(&mut tlb);

    // What later CPUs need with their MMU off.
    let tcr = {
        use aarch64_cpu::registers::{Readable, TCR_EL1};
        TCR_EL1.get()
    };
    early::publish_secondary_boot(early::SecondaryBoot {
        regs: rt::mmu::MmuRegs { mair: regime::MAIR, tcr, ttbr0: early::idmap_root(), ttbr1, wxn },
        bbml2: decision,
        disallow_cpu: a.disallow_cpu.map(|c| c as u64).unwrap_or(u64::MAX),
        image_delta: layout::image_delta(),
        midr_override: a.midr_override.unwrap_or(u64::MAX),
        psci_smc: crate::arch::smccc::conduit() == crate::arch::smccc::Conduit::Smc,
    });

    *TABLES.lock() = Some(Tables { kernel: k, tlb, vmalloc_next: VMALLOC_START, mmio_next });
    MM.call_once(|| MmInfo { bbml2: decision, rodata: a.rodata, linear, image, ram, linear_table_pages });

    // The heap grows into RAM (through the linear map): an eighth of the free frames, at most
    // HEAP_EXTRA_MAX, in one naturally aligned block.
    let (free, _) = frames::counts();
    let want = ((free * PAGE / 8).min(HEAP_EXTRA_MAX) / PAGE).max(1);
    let pages = 1usize << (63 - want.leading_zeros());
    if let Some(pa) = frames::alloc(pages) {
        // SAFETY: fresh frames, never freed, mapped RW by the linear map for good.
        unsafe { crate::arch::heap::extend((LINEAR_BASE + pa) as usize, pages * PAGE as usize) };
    }
    Ok(())
}

// The TTBR1 swap, run from the identity map: x0 = new TTBR1_EL1, x1 = an empty table's TTBR
// value, x2 = the SCTLR_EL1 to run with. What it guarantees: no translation of either TTBR1
// table is used or cached while the other is installed (TTBR1 points at the empty table across
// the flush), SCTLR's WXN changes with no translation cached, and on return every earlier
// EL1&0 translation of this CPU is gone. It reads and writes no memory and needs no stack, so it
// runs while no kernel (TTBR1) address is mapped.
core::arch::global_asm!(
    r#"
.section .text.kernel_replace_ttbr1, "ax"
.global __kernel_replace_ttbr1
__kernel_replace_ttbr1:
    msr     ttbr1_el1, x1
    isb
    msr     sctlr_el1, x2
    isb
    tlbi    vmalle1
    dsb     nsh
    isb
    msr     ttbr1_el1, x0
    isb
    ret
"#
);

extern "C" {
    fn __kernel_replace_ttbr1(ttbr1: u64, empty: u64, sctlr: u64);
}

/// Installs `ttbr1` (whose image mapping matches the current one) in place of the current TTBR1
/// table on this CPU, setting SCTLR_EL1.WXN to `wxn`, through `__kernel_replace_ttbr1` at its
/// identity-mapped address (TTBR0 must hold the identity map). Its one TLBI is not counted by
/// `HwTlb`: counting touches kernel memory, which is unmapped while it runs.
fn replace_ttbr1(ttbr1: u64, wxn: bool) {
    use aarch64_cpu::registers::{Readable, SCTLR_EL1};
    let wxn = if wxn { SCTLR_EL1::WXN::Enable } else { SCTLR_EL1::WXN::Disable };
    let sctlr = wxn.modify(SCTLR_EL1.get());
    let at = layout::image_phys(__kernel_replace_ttbr1 as *const () as u64);
    // SAFETY: `at` is the routine's identity-mapped address (TTBR0 holds the identity map,
    // whose text is executable); it touches no memory and returns to our virtual address once
    // `ttbr1`, which maps the image identically, is installed.
    unsafe {
        let f = core::mem::transmute::<usize, unsafe extern "C" fn(u64, u64, u64)>(at as usize);
        f(ttbr1, reserved_ttbr0(), sctlr);
    }
}

/// TTBR0 of this CPU: from the identity map to the reserved empty table; the identity map's
/// translations (ASID 0) are dropped.
fn leave_idmap(tlb: &mut HwTlb) {
    use aarch64_cpu::registers::{Writeable, TTBR0_EL1};
    use pgtable::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp};
    TTBR0_EL1.set(reserved_ttbr0());
    tlb.isb();
    tlb.tlbi(Tlbi { op: TlbiOp::Aside1 { asid: 0 }, leaf_only: false, sh: Shareability::Local });
    tlb.dsb(Barrier::Nsh);
    tlb.isb();
}

/// A CPU started by PSCI, now at the image's virtual address with its MMU on (TTBR0 = the
/// identity map): moves TTBR0 to the reserved table.
pub fn secondary_mmu_on() {
    leave_idmap(&mut HwTlb::detect());
}

/// Maps `pages` fresh frames in the vmalloc area, RW + never executable, followed by an unmapped
/// guard page. With `contiguous`, the frames are one physically contiguous, naturally aligned
/// block at a VA aligned the same way (so contpte can fold it); `pages` is then a power of two.
/// Returns the virtual address.
pub fn vmalloc(pages: usize, contiguous: bool) -> Result<u64, MmError> {
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or(MmError::NoTables { call: "vmalloc" })?;
    let align = if contiguous { pages as u64 * PAGE } else { PAGE };
    let va = (t.vmalloc_next + align - 1) & !(align - 1);
    let end = va + pages as u64 * PAGE;
    if end + PAGE > VMALLOC_END {
        return Err(MmError::VmallocFull);
    }
    t.vmalloc_next = end + PAGE;
    let cons = if contpte() { Constraints::NO_BLOCKS } else { Constraints::PAGES_ONLY };
    let rw = Attributes::normal(Perms::RW);
    if contiguous {
        let pa = frames::alloc(pages).ok_or(MmError::NoFrame { what: "vmalloc" })?;
        map(&mut t.kernel, &mut t.tlb, "vmalloc", va, pa, pages as u64 * PAGE, rw, cons)?;
    } else {
        for i in 0..pages as u64 {
            let pa = frames::alloc(1).ok_or(MmError::NoFrame { what: "vmalloc" })?;
            map(&mut t.kernel, &mut t.tlb, "vmalloc", va + i * PAGE, pa, PAGE, rw, cons)?;
        }
    }
    Ok(va)
}

/// Unmaps `pages` pages mapped by [`vmalloc`] at `va` and frees their frames, after resetting
/// the linear alias of every page to read-write (a later owner of a frame must find its alias
/// as the linear map has it; `set_memory_*` may have changed it under `rodata=full`). The
/// virtual range is not reused.
pub fn vfree(va: u64, pages: usize) -> Result<(), MmError> {
    if !(VMALLOC_START..VMALLOC_END).contains(&va) {
        return Err(MmError::NotVmalloc { va });
    }
    let size = pages as u64 * PAGE;
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or(MmError::NoTables { call: "vfree" })?;
    let mut frames_of: Vec<u64> = Vec::new();
    for i in 0..pages as u64 {
        let tr = t.kernel.translate(VirtAddr::new(va + i * PAGE)).ok_or(MmError::NotMapped { va, page: i })?;
        frames_of.push(tr.phys.as_u64());
    }
    let e = |err: pgtable::Error| MmError::Vfree { va, err };
    t.kernel.unmap(&mut t.tlb, VirtAddr::new(va), size).map_err(e)?;
    // Refused if the unmap removed a top-level entry the per-CPU roots still use (rule 3).
    crate::mm::roots::sync_roots(va, size)?;
    if kmem::alias_permissions(info().rodata) {
        for &pa in &frames_of {
            let alias = VirtAddr::new(LINEAR_BASE + pa);
            kmem::set_memory(&mut t.kernel, &mut t.tlb, alias, PAGE, kmem::MemChange::Valid(Perms::RW), false)
                .map_err(e)?;
            kmem::set_memory(&mut t.kernel, &mut t.tlb, alias, PAGE, kmem::MemChange::Rw, false).map_err(e)?;
        }
    }
    for pa in frames_of {
        frames::free(pa, 1);
    }
    Ok(())
}

/// Maps one physical page (not RAM: e.g. a hole) in the vmalloc area as normal RW memory, for
/// tests that must touch it. Returns its virtual address.
pub fn map_phys_page(pa: u64) -> Result<u64, MmError> {
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or(MmError::NoTables { call: "map" })?;
    let va = t.vmalloc_next;
    t.vmalloc_next += 2 * PAGE;
    map(
        &mut t.kernel,
        &mut t.tlb,
        "physical page",
        va,
        pa & !(PAGE - 1),
        PAGE,
        Attributes::normal(Perms::RW),
        Constraints::PAGES_ONLY,
    )?;
    Ok(va + (pa & (PAGE - 1)))
}

/// Maps the device registers `[pa, pa + size)` (page-rounded) in the MMIO window as device
/// memory, read-write, never executable; returns the virtual address of `pa`.
pub fn ioremap(pa: u64, size: u64) -> Result<u64, MmError> {
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or(MmError::NoTables { call: "ioremap" })?;
    let (s, end) = (pa & !(PAGE - 1), (pa + size.max(1) + PAGE - 1) & !(PAGE - 1));
    let va = t.mmio_next;
    if va + (end - s) > layout::MMIO_END {
        return Err(MmError::MmioFull { pa, size });
    }
    t.mmio_next = va + (end - s);
    map(&mut t.kernel, &mut t.tlb, "device", va, s, end - s, Attributes::device(Perms::RW), Constraints::PAGES_ONLY)?;
    Ok(va + (pa - s))
}

/// The boot-time BBML2 decision (prints why, for the banner).
pub fn bbml2_decision() -> kmem::Bbml2Decision {
    info().bbml2
}

/// `rodata=… | contpte …` for the banner.
pub fn banner_modes() -> String {
    let i = info();
    let linear = if i.linear.no_blocks { "PTE-only" } else { "blocks" };
    format!(
        "rodata={} | linear map {linear}, {} table pages | contpte {}",
        i.rodata.as_str(),
        i.linear_table_pages,
        if contpte() { "on" } else { "off" }
    )
}
