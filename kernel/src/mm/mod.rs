//! Kernel memory: frames, heap, the kernel's page tables, the linear map, a vmalloc-like area,
//! and `set_memory_*`.
//!
//! # Address space
//!
//! The image stays where it was loaded and keeps running at its physical address: there is no
//! second relocation pass. Two tables, both built with `lib/pgtable` while the MMU is still off:
//!
//! * **TTBR0_EL1** (`Regime::El1 { asid: 0, half: Lower }`): the kernel image identity mapped,
//!   W^X: text RX, rodata R, data/BSS (stacks and the boot heap included) RW + never
//!   executable (`rodata=off`: all RWX, no WXN); and the console UART as device memory. Secondary
//!   CPUs enter at their physical entry point with the MMU off and turn it on with the same
//!   tables: their PC is valid before and after.
//! * **TTBR1_EL1** (`Regime::El1 { asid: 0, half: Upper }`, global entries):
//!   - the **linear map** `LINEAR_BASE + pa` over every DTB memory range, RW + never executable.
//!     Page-table frames, the heap beyond its boot part and vmalloc-backed frames are reached
//!     through it;
//!   - the **vmalloc area** `[VMALLOC_START, VMALLOC_END)`: page mappings made at run time
//!     (each with a guard page after it) for memory whose permissions get changed later;
//!     [`vfree`] unmaps them and resets the linear alias before freeing the frames;
//!   - `[SCRATCH_BASE, LINEAR_BASE)` is left unused: the benchmarks' scratch tables use it.
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
//! Everything written before the MMU is on (the image's data and BSS, the boot frames, the
//! values secondary CPUs read with their MMU off) went straight to memory. Before the first
//! cacheable access the boot CPU invalidates those lines (`DC IVAC`), and a secondary CPU
//! invalidates its own stack, as the hypervisor does for its EL2 map.
//!
//! # Locking
//!
//! One lock, [`TABLES`], over both tables, the TLB handle and the vmalloc cursor. The frame
//! allocator's lock is taken inside it (never the other way round); the heap's lock is
//! independent.

pub mod fault;
pub mod frames;
pub mod setmem;

use crate::cpuinfo::CpuInfo;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use board::Board;
use core::sync::atomic::{AtomicBool, Ordering};
use frames::{KFrames, PAGE};
use pgtable::hw::HwTlb;
use pgtable::kmem::{self, Bbml2Arg, Bbml2Decision, Rodata};
use pgtable::{regime, Attributes, Constraints, PageTable, Perms, PhysAddr, Regime, VaHalf, VirtAddr};
use spin::{Mutex, Once};

/// Linear map: physical address `pa` is at `LINEAR_BASE + pa`.
pub const LINEAR_BASE: u64 = 0xffff_8000_0000_0000;
/// The vmalloc area.
pub const VMALLOC_START: u64 = 0xffff_0000_4000_0000;
pub const VMALLOC_END: u64 = 0xffff_4000_0000_0000;
/// Scratch tables of the benchmarks map RAM at `SCRATCH_BASE + pa` (never installed in a TTBR,
/// so nothing walks them; the VA range is unused by the kernel's own table).
pub const SCRATCH_BASE: u64 = 0xffff_4000_0000_0000;

/// Bytes of RAM given to the heap once the MMU is on (at most).
const HEAP_EXTRA_MAX: u64 = 64 << 20;

/// The kernel's tables.
pub struct Tables {
    /// TTBR1: linear map and vmalloc area.
    pub kernel: PageTable<KFrames>,
    /// TTBR0: the image, identity mapped.
    pub image: PageTable<KFrames>,
    pub tlb: HwTlb,
    vmalloc_next: u64,
}

pub static TABLES: Mutex<Option<Tables>> = Mutex::new(None);

/// What was decided at boot.
#[derive(Debug, Clone)]
pub struct MmInfo {
    pub bbml2: Bbml2Decision,
    pub rodata: Rodata,
    pub linear: Constraints,
    /// The image: [start, text_end, rodata_end, end).
    pub image: [u64; 4],
    /// RAM ranges.
    pub ram: Vec<(u64, u64)>,
    /// Page-table pages of the TTBR1 table right after the linear map was built.
    pub linear_table_pages: u64,
    disallow_cpu: Option<usize>,
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

/// What a CPU needs to turn its MMU on; written once with the MMU off, read by secondary CPUs
/// with their MMU off.
#[repr(C, align(64))]
struct MmuRegs {
    mair: u64,
    tcr: u64,
    ttbr0: u64,
    ttbr1: u64,
    sctlr_set: u64,
}

static mut MMU_REGS: MmuRegs = MmuRegs { mair: 0, tcr: 0, ttbr0: 0, ttbr1: 0, sctlr_set: 0 };

struct Args {
    bbml2: Bbml2Arg,
    unsafe_override: bool,
    /// `bbml2_test_disallow_cpu=N`: treat CPU N as not allowed, to test the refusal of a late
    /// CPU on QEMU, whose CPUs are all alike.
    disallow_cpu: Option<usize>,
    rodata: Rodata,
    contpte: bool,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a =
        Args { bbml2: Bbml2Arg::Auto, unsafe_override: false, disallow_cpu: None, rodata: Rodata::Full, contpte: true };
    for w in args {
        if let Some(v) = w.strip_prefix("bbml2=") {
            a.bbml2 = Bbml2Arg::parse(v).ok_or_else(|| format!("bad boot argument {w:?} (bbml2=auto|on|off)"))?;
        } else if w == "bbml2_unsafe_override" {
            a.unsafe_override = true;
        } else if let Some(v) = w.strip_prefix("bbml2_test_disallow_cpu=") {
            a.disallow_cpu = Some(v.parse().map_err(|_| format!("bad boot argument {w:?} (a CPU index)"))?);
        } else if let Some(v) = w.strip_prefix("rodata=") {
            a.rodata = Rodata::parse(v).ok_or_else(|| format!("bad boot argument {w:?} (rodata=full|on|off)"))?;
        } else if let Some(v) = w.strip_prefix("contpte=") {
            a.contpte = match v {
                "on" => true,
                "off" => false,
                _ => return Err(format!("bad boot argument {w:?} (contpte=on|off)")),
            };
        }
    }
    Ok(a)
}

/// This CPU's identification, with `bbml2_test_midr=` standing in for its MIDR: that is how a
/// test feeds the boot's own BBML2 decision a core that is not on the allow-list.
fn cpu_info() -> CpuInfo {
    let mut i = CpuInfo::read();
    if let Some(midr) = crate::cmdline::args().uint("bbml2_test_midr") {
        i.midr = midr;
    }
    i
}

/// This CPU's BBML2 capability as `bbml2_decide` wants it.
pub fn cpu_capability(i: &CpuInfo) -> Result<(), &'static str> {
    match i.bbml2() {
        (true, _) => Ok(()),
        (false, why) => Err(why),
    }
}

/// One mapping of the kernel's tables, with `what` naming it in the error.
#[allow(clippy::too_many_arguments)] // every argument is one field of the mapping; a struct would only rename them
fn map(
    pt: &mut PageTable<KFrames>,
    tlb: &mut HwTlb,
    what: &str,
    va: u64,
    pa: u64,
    len: u64,
    attrs: Attributes,
    c: Constraints,
) -> Result<(), String> {
    pt.map(tlb, VirtAddr::new(va), len, PhysAddr::new(pa), attrs, c)
        .map_err(|e| format!("mapping {what} [{pa:#x}, {:#x}) at {va:#x}: {e}", pa + len))
}

/// Builds the tables and turns the MMU on for the boot CPU, then grows the heap.
/// `dtb` is the DTB's physical range (kept out of the frame allocator).
pub fn init(board: &Board, dtb: (u64, u64), args: &[String]) -> Result<(), String> {
    let a = parse_args(args)?;
    let cpu = cpu_info();
    let decision = kmem::bbml2_decide(cpu_capability(&cpu), a.bbml2, a.unsafe_override);
    if decision.refused {
        rt::println!("kernel: {}", decision.reason);
    }
    CONTPTE.store(a.contpte, Ordering::Relaxed);
    let l = rt::start::image_layout();
    let image = [l.start as u64, l.text_end as u64, l.rodata_end as u64, l.end as u64];

    // Frames: RAM minus the image, the DTB, the initrd and reserved memory.
    let ram: Vec<(u64, u64)> = board.memory.iter().map(|r| (r.base, r.end())).collect();
    let mut reserved = alloc::vec![(image[0], image[3]), dtb];
    reserved.extend(board.initrd.iter().map(|r| (r.base, r.end())));
    reserved.extend(board.mem_reserve.iter().map(|r| (r.base, r.end())));
    for rm in &board.reserved_memory {
        reserved.extend(rm.regions.iter().map(|r| (r.base, r.end())));
    }
    frames::init(&ram, &reserved);

    let mut tlb = HwTlb::detect();
    let e = |what: &str, err: pgtable::Error| format!("{what}: {err}");
    // TTBR0: the image, identity, W^X.
    let mut img =
        PageTable::new(Regime::El1 { asid: 0, half: VaHalf::Lower }, KFrames).map_err(|x| e("TTBR0 table", x))?;
    let (text, ro, rw) = match a.rodata {
        Rodata::Off => (Perms::RWX, Perms::RWX, Perms::RWX),
        _ => (Perms::RX, Perms::RO, Perms::RW),
    };
    let normal = Attributes::normal;
    let pages = Constraints::PAGES_ONLY;
    map(&mut img, &mut tlb, "kernel text", image[0], image[0], image[1] - image[0], normal(text), pages)?;
    map(&mut img, &mut tlb, "kernel rodata", image[1], image[1], image[2] - image[1], normal(ro), pages)?;
    map(&mut img, &mut tlb, "kernel data", image[2], image[2], image[3] - image[2], normal(rw), pages)?;
    if let Some(u) = &board.console {
        let (s, end) = (u.base & !(PAGE - 1), (u.base + u.size.max(1) + PAGE - 1) & !(PAGE - 1));
        map(&mut img, &mut tlb, "console UART", s, s, end - s, Attributes::device(Perms::RW), pages)?;
    }

    // TTBR1: the linear map.
    let mut k =
        PageTable::new(Regime::El1 { asid: 0, half: VaHalf::Upper }, KFrames).map_err(|x| e("TTBR1 table", x))?;
    k.policy_mut().bbml2 = decision.enabled;
    k.policy_mut().split_contiguous = a.contpte;
    let linear = kmem::linear_map_constraints(decision.enabled, a.rodata, a.contpte);
    for &(s, end) in &ram {
        let (s, end) = ((s + PAGE - 1) & !(PAGE - 1), end & !(PAGE - 1));
        map(&mut k, &mut tlb, "linear map", LINEAR_BASE + s, s, end - s, normal(Perms::RW), linear)?;
    }
    let linear_table_pages = k.stats().table_pages;
    if kmem::alias_permissions(a.rodata) {
        // The image's text and rodata are read-only through their linear alias too.
        k.protect(&mut tlb, VirtAddr::new(LINEAR_BASE + image[0]), image[2] - image[0], Perms::RO)
            .map_err(|x| e("linear alias of the image", x))?;
    }
    img.set_live(&mut tlb);
    k.set_live(&mut tlb);

    let mmfr0 = {
        use aarch64_cpu::registers::{Readable, ID_AA64MMFR0_EL1};
        ID_AA64MMFR0_EL1.get()
    };
    const M: u64 = 1 << 0;
    const C: u64 = 1 << 2;
    const SA: u64 = 1 << 3;
    const I: u64 = 1 << 12;
    const WXN: u64 = 1 << 19;
    let wxn = if a.rodata == Rodata::Off { 0 } else { WXN };
    // SAFETY: written once here with the MMU off, before any other CPU runs; read-only after.
    unsafe {
        *core::ptr::addr_of_mut!(MMU_REGS) = MmuRegs {
            mair: regime::MAIR,
            tcr: regime::tcr_el1(pgtable::cpu::parange(mmfr0), false, true),
            ttbr0: regime::ttbr_el1(img.root(), 0),
            ttbr1: regime::ttbr_el1(k.root(), 0),
            sctlr_set: M | C | SA | I | wxn,
        };
    }
    // Invalidate what was written with the MMU off before reading it cacheably.
    // SAFETY: the image and the boot frames were only written with the MMU off (memory holds
    // their data); nothing has read or written them through the caches yet.
    unsafe {
        rt::cache::invalidate_to_poc(image[0], image[3] - image[0]);
        for (pa, n) in frames::boot_frames() {
            rt::cache::invalidate_to_poc(pa, n as u64 * PAGE);
        }
    }
    enable_on_this_cpu();
    // Frames allocated from here on are reached through the linear map. The frames that held
    // the vector of boot frames were themselves in the image (boot heap): already invalidated.
    frames::mmu_is_on();

    *TABLES.lock() = Some(Tables { kernel: k, image: img, tlb, vmalloc_next: VMALLOC_START });
    MM.call_once(|| MmInfo {
        bbml2: decision,
        rodata: a.rodata,
        linear,
        image,
        ram,
        linear_table_pages,
        disallow_cpu: a.disallow_cpu,
    });

    // The heap grows into RAM (through the linear map): an eighth of the free frames, at most
    // HEAP_EXTRA_MAX, in one naturally aligned block.
    let (free, _) = frames::counts();
    let want = ((free * PAGE / 8).min(HEAP_EXTRA_MAX) / PAGE).max(1);
    let pages = 1usize << (63 - want.leading_zeros());
    if let Some(pa) = frames::alloc(pages) {
        // SAFETY: fresh frames, never freed, mapped RW by the linear map for good.
        unsafe { crate::heap::extend((LINEAR_BASE + pa) as usize, pages * PAGE as usize) };
    }
    Ok(())
}

/// Turns the MMU on for a CPU started by PSCI CPU_ON (MMU off so far). Refuses a CPU whose
/// BBML2 capability disagrees with the boot decision (see `kmem::late_cpu_accepted`).
pub fn enable_secondary(cpu: usize) -> Result<(), String> {
    let i = cpu_info();
    let d = &info().bbml2;
    let (allowed, why) = match info().disallow_cpu {
        Some(n) if n == cpu => (false, "disallowed by bbml2_test_disallow_cpu"),
        _ => (cpu_capability(&i).is_ok(), i.bbml2().1),
    };
    if !kmem::late_cpu_accepted(d, allowed) {
        return Err(format!(
            "CPU {cpu} refused: the system uses BBML2 but this CPU ({}, MIDR {:#x}) is not allowed: {why}",
            i.core_name(),
            i.midr,
        ));
    }
    // Its stack was written straight to memory: drop stale lines before reading it cacheably.
    let (bottom, top) = rt::start::stack_bounds(cpu);
    // SAFETY: this CPU's stack was only written with its MMU off, by this CPU.
    unsafe { rt::cache::invalidate_to_poc(bottom as u64, (top - bottom) as u64) };
    enable_on_this_cpu();
    Ok(())
}

fn enable_on_this_cpu() {
    use aarch64_cpu::asm::barrier;
    use aarch64_cpu::registers::{Readable, Writeable, MAIR_EL1, SCTLR_EL1, TCR_EL1, TTBR0_EL1, TTBR1_EL1};
    // SAFETY: MMU_REGS was written by the boot CPU with its MMU off before any other CPU
    // started, and is never written again.
    let r = unsafe { &*core::ptr::addr_of!(MMU_REGS) };
    MAIR_EL1.set(r.mair);
    TCR_EL1.set(r.tcr);
    TTBR0_EL1.set(r.ttbr0);
    TTBR1_EL1.set(r.ttbr1);
    barrier::isb(barrier::SY);
    // SAFETY: drops any EL1 translation this CPU may hold from before (there should be none);
    // no effect on memory. aarch64-cpu has no TLBI wrapper.
    unsafe { core::arch::asm!("tlbi vmalle1", options(nostack, preserves_flags)) };
    barrier::dsb(barrier::NSH);
    barrier::isb(barrier::SY);
    // M, C, I, SA and (unless rodata=off) WXN on top of the reset value's RES1 bits.
    SCTLR_EL1.set(SCTLR_EL1.get() | r.sctlr_set);
    barrier::isb(barrier::SY);
}

/// Maps `pages` fresh frames in the vmalloc area, RW + never executable, followed by an unmapped
/// guard page. With `contiguous`, the frames are one physically contiguous, naturally aligned
/// block at a VA aligned the same way (so contpte can fold it); `pages` is then a power of two.
/// Returns the virtual address.
pub fn vmalloc(pages: usize, contiguous: bool) -> Result<u64, String> {
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or("vmalloc before mm::init")?;
    let align = if contiguous { pages as u64 * PAGE } else { PAGE };
    let va = (t.vmalloc_next + align - 1) & !(align - 1);
    let end = va + pages as u64 * PAGE;
    if end + PAGE > VMALLOC_END {
        return Err("vmalloc area exhausted".into());
    }
    t.vmalloc_next = end + PAGE;
    let cons = if contpte() { Constraints::NO_BLOCKS } else { Constraints::PAGES_ONLY };
    let rw = Attributes::normal(Perms::RW);
    if contiguous {
        let pa = frames::alloc(pages).ok_or("out of frames")?;
        map(&mut t.kernel, &mut t.tlb, "vmalloc", va, pa, pages as u64 * PAGE, rw, cons)?;
    } else {
        for i in 0..pages as u64 {
            let pa = frames::alloc(1).ok_or("out of frames")?;
            map(&mut t.kernel, &mut t.tlb, "vmalloc", va + i * PAGE, pa, PAGE, rw, cons)?;
        }
    }
    Ok(va)
}

/// Unmaps `pages` pages mapped by [`vmalloc`] at `va` and frees their frames, after resetting
/// the linear alias of every page to read-write (a later owner of a frame must find its alias
/// as the linear map has it; `set_memory_*` may have changed it under `rodata=full`). The
/// virtual range is not reused.
pub fn vfree(va: u64, pages: usize) -> Result<(), String> {
    if !(VMALLOC_START..VMALLOC_END).contains(&va) {
        return Err(format!("vfree({va:#x}): not in the vmalloc area"));
    }
    let size = pages as u64 * PAGE;
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or("vfree before mm::init")?;
    let mut frames_of: Vec<u64> = Vec::new();
    for i in 0..pages as u64 {
        let tr = t
            .kernel
            .translate(VirtAddr::new(va + i * PAGE))
            .ok_or_else(|| format!("vfree: {va:#x} page {i} not mapped"))?;
        frames_of.push(tr.phys.as_u64());
    }
    let e = |x: pgtable::Error| format!("vfree({va:#x}): {x}");
    t.kernel.unmap(&mut t.tlb, VirtAddr::new(va), size).map_err(e)?;
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
pub fn map_phys_page(pa: u64) -> Result<u64, String> {
    let mut g = TABLES.lock();
    let t = g.as_mut().ok_or("map before mm::init")?;
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

/// The BBML2 decision for the banner: (in use, why).
pub fn banner_decision() -> (bool, &'static str) {
    let d = &info().bbml2;
    (d.enabled, d.reason)
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
