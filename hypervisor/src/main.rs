//! The EL2 hypervisor. Entered by QEMU or the Pi 5 firmware as a Linux arm64 Image with x0 = DTB;
//! runs one guest at EL1 on every CPU, with the kernel Image it finds in the initrd.
//!
//! Boot: `rt_main` (boot CPU) parses the DTB, brings up the console, reserves the hypervisor's
//! memory, turns on its EL2 MMU (W^X), builds stage 2 for the guest, loads the guest kernel and
//! its DTB, configures EL2 and enters the guest. Other CPUs start in `rt_secondary_main` when the
//! guest asks PSCI CPU_ON for them. After that the hypervisor only runs in `trap::rt_exception`.
// A bare-metal binary: on the host (`cargo clippy --workspace`, `cargo test --workspace`) it is
// only the stub `main` at the end; every other item is `#[cfg(target_os = "none")]`.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
extern crate alloc;

#[cfg(target_os = "none")]
mod counters;
#[cfg(target_os = "none")]
mod cpu;
#[cfg(target_os = "none")]
mod dirtylog;
#[cfg(target_os = "none")]
mod efi;
#[cfg(target_os = "none")]
mod el2;
#[cfg(target_os = "none")]
mod exit;
#[cfg(target_os = "none")]
mod guest;
#[cfg(target_os = "none")]
mod hypercall;
#[cfg(target_os = "none")]
mod inject;
#[cfg(target_os = "none")]
mod mem;
#[cfg(target_os = "none")]
mod memslot;
#[cfg(target_os = "none")]
mod migrate;
#[cfg(target_os = "none")]
mod mmu;
#[cfg(target_os = "none")]
mod options;
#[cfg(target_os = "none")]
mod psci;
#[cfg(target_os = "none")]
mod slotlog;
#[cfg(target_os = "none")]
mod smccc;
#[cfg(target_os = "none")]
mod split;
#[cfg(target_os = "none")]
mod trap;

#[cfg(target_os = "none")]
use alloc::string::{String, ToString};
#[cfg(target_os = "none")]
use alloc::vec::Vec;
#[cfg(target_os = "none")]
use board::Board;
#[cfg(target_os = "none")]
use core::sync::atomic::Ordering;
#[cfg(target_os = "none")]
use cpu::{CpuState, CPUS};
#[cfg(target_os = "none")]
use mem::Range;

/// `HINT #125` (a NOP) then return: executed first thing on every boot, wherever the image
/// runs (it may have moved itself, `hypcore::home`), so the instruction-counting QEMU plugin
/// (`xtask/plugin/insncount.c`, told this symbol's image offset) knows where EL2 code is.
#[cfg(target_os = "none")]
#[unsafe(naked)]
#[no_mangle]
extern "C" fn pgtlab_el2_home_mark() {
    // What this guarantees: nothing but a NOP-space hint and a return; no register or memory
    // is touched.
    core::arch::naked_asm!("hint #125", "ret")
}

/// x2 on a restart after the move to the top of RAM (then x1 is where the image was loaded);
/// a boot loader gives x1 = x2 = 0 (the arm64 boot protocol).
#[cfg(target_os = "none")]
const MOVED_MARK: u64 = u64::from_le_bytes(*b"PGTLMOVE");

#[cfg(target_os = "none")]
#[no_mangle]
extern "C" fn rt_main(dtb: usize, x1: u64, x2: u64) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL2};
    pgtlab_el2_home_mark();
    VBAR_EL2.set(rt::trap::vectors_el2());
    mem::init_heap();
    let loaded_at = (x2 == MOVED_MARK).then_some(x1);
    match boot(dtb, loaded_at) {
        Ok(never) => match never {},
        Err(e) => {
            rt::console::panic_print(format_args!("hyp: boot failed: {e}\n"));
            exit::exit(trap::EXIT_HYP_FAULT)
        }
    }
}

/// `loaded_at`: where the boot loader put the image, if it has moved since (its old copy is
/// zeroed once the guest is in place).
#[cfg(target_os = "none")]
fn boot(dtb_addr: usize, loaded_at: Option<u64>) -> Result<core::convert::Infallible, String> {
    use alloc::format;
    if dtb_addr == 0 {
        return Err("no device tree in x0 (boot the hypervisor as an arm64 Image: QEMU -kernel, Pi 5 kernel=)".into());
    }
    // SAFETY: x0 points at the DTB per the arm64 boot protocol, in RAM nothing writes meanwhile;
    // only its length is taken here (the header's, checked: at most 2 MiB).
    let size = unsafe { board::dtb_at(dtb_addr as *const u8) }
        .map_err(|e| format!("device tree at {dtb_addr:#x}: {e}"))?
        .len();
    // Keep our own copy: the original lies in what becomes guest RAM (QEMU's is 1 MiB: copied
    // 32 bytes at a time, the softfloat memcpy goes byte by byte).
    let mut host_dtb: Vec<u8> = alloc::vec![0; size];
    // SAFETY: the header says the blob is `size` bytes long; `host_dtb` holds `size` bytes and is
    // a fresh heap buffer, so the two do not overlap.
    unsafe { mem::copy_fast(host_dtb.as_mut_ptr() as u64, dtb_addr as u64, size as u64) };
    let board = Board::from_dtb(&host_dtb).map_err(|e| format!("device tree: {e}"))?;
    let uart = board.console.as_ref().ok_or(
        "the device tree names no UART this build drives (PL011, i.MX, Cadence, 16550) for /chosen/stdout-path",
    )?;
    // SAFETY: the DTB names this UART as the console; it is used only through rt::console.
    unsafe { rt::console::init(uart.kind, uart.base as usize) };
    if let Some(p) = &board.console_problem {
        rt::println!("hyp: warning: {p}: this console is {} ({}) instead", uart.path, uart.kind.name());
    }
    exit::init(&board);

    let opts = options::parse(board.bootargs.as_deref().unwrap_or(""));
    trap::set_stop_on_fault(opts.stop_on_fault);
    let home = go_home(&board, &opts, Range::new(dtb_addr as u64, (dtb_addr + size) as u64), dtb_addr);
    let layout = rt::start::image_layout();
    rt::println!(
        "hyp: pgtlab hypervisor at EL2, image [{:#x}, {:#x}) ({home}), DTB {dtb_addr:#x} ({size} bytes), {} CPUs, {}",
        layout.start,
        layout.end,
        board.cpus.len(),
        board.model.as_deref().unwrap_or("unknown board")
    );

    for (i, c) in board.cpus.iter().enumerate().take(rt::MAX_CPUS) {
        CPUS[i].mpidr.store(c.mpidr & rt::MPIDR_AFF_MASK, Ordering::Relaxed);
    }
    psci::init(&board);
    let guest_cpus = board.cpus.len().min(rt::MAX_CPUS).min(opts.cpus.unwrap_or(usize::MAX));
    psci::set_guest_cpus(guest_cpus);
    if board.cpus.len() > rt::MAX_CPUS {
        rt::println!(
            "hyp: the device tree has {} CPUs and this hypervisor runs at most {}: the guest's device tree lists \
             the first {guest_cpus}, the others stay off",
            board.cpus.len(),
            rt::MAX_CPUS
        );
    }
    let me = cpu::index_of(cpu::current_mpidr()).ok_or("the boot CPU's MPIDR is not in the device tree")?;
    CPUS[me].set_state(CpuState::On);

    let plan = memory_plan(&board, &opts)?;
    mem::add_frames(plan.frames_low);
    mem::add_frames(plan.frames_high);
    memslot::init(plan.slotpool, plan.hypervisor_owned());
    dirtylog::set_check_split(opts.check_split);
    guest::set_ram(plan.guest_ram.clone());
    let (hyp, guest_ram) = (plan.hyp, &plan.guest_ram);
    let reserved: Vec<Range> = board.reserved_regions().map(|r| Range::new(r.base, r.end())).collect();

    let gic_v3 = matches!(board.gic.as_ref().map(|g| g.version), Some(board::GicVersion::V3));
    let (vttbr, vtcr) = mmu::setup(&board, &plan).map_err(|e| format!("page tables: {e}"))?;
    el2::set_config(el2::Config { vttbr, vtcr, gic_v3 });
    // Spare RAM joins the frame pool only now: never used with the MMU off, it needs no cache
    // maintenance before its first cacheable use.
    for r in &plan.spare {
        mem::add_frames(*r);
    }
    if opts.check_stage2 {
        let mut kept = alloc::vec![
            ("hypervisor's region", plan.hyp),
            ("frame pool", plan.frames_high),
            ("slot pool", plan.slotpool)
        ];
        kept.extend(plan.spare.iter().map(|r| ("spare RAM", *r)));
        let devices = hypcore::devices::kept_pages(&board);
        kept.extend(devices.iter().map(|(_, r)| ("power controller's registers", *r)));
        let bytes = mmu::check_stage2(&kept)?;
        rt::println!(
            "hyp: check-stage2: nothing of the {} MiB the hypervisor keeps (region, frame pool, slot pool) translates in stage 2",
            bytes >> 20
        );
        for (path, r) in &devices {
            rt::println!(
                "hyp: check-stage2: {path} [{:#x}, {:#x}) is the hypervisor's: not in stage 2",
                r.start,
                r.end
            );
        }
    }

    // The guest: a bundle (kernel, initramfs, command line) or a lone kernel in the initrd, put
    // where QEMU would put it on a machine with the guest's RAM.
    let (contents, sources) = guest::from_boot_loader(&board).map_err(|e| e.to_string())?;
    let migration = if opts.migrate { Some(setup_migration(&board, &plan)?) } else { None };
    // The DTB's size hardly depends on where things go: measure it with the initramfs put
    // above 4 GiB (its properties then take their widest form). Its room is as large as the
    // boot loader's DTB (QEMU's: 1 MiB), or the tree if that is larger.
    let probe = contents.initramfs.map(|r| Range::new(1 << 40, (1 << 40) + r.len()));
    let probe =
        guest_device_tree(&board, &host_dtb, &plan, &contents.cmdline, probe, &opts, migration.as_ref(), guest_cpus)?;
    let dtb_room = (size as u64).max(probe.len() as u64).next_multiple_of(8);
    // Where QEMU would put the guest on the guest's RAM (`hypcore::load::place_guest`: from the
    // machine's RAM base, or a later range when the first cannot hold it).
    let base = board.memory.first().map_or(0, |m| m.base);
    let loaded = guest::load(&contents, base, &reserved, dtb_room);
    let loaded = loaded.map_err(|e| e.to_string())?;
    let kernel = loaded.kernel;
    let gdtb = guest_device_tree(
        &board,
        &host_dtb,
        &plan,
        &loaded.cmdline,
        loaded.initrd,
        &opts,
        migration.as_ref(),
        guest_cpus,
    )?;
    guest::write_dtb(&gdtb, loaded.dtb).map_err(|e| e.to_string())?;
    let gdtb_at = loaded.dtb.start;
    // What the boot loader and the hypervisor left in the guest's RAM: the bundle, the boot
    // loader's DTB, the image before the move.
    let mut dirty = sources;
    dirty.push(Range::new(dtb_addr as u64, (dtb_addr + size) as u64));
    if let Some(at) = loaded_at {
        dirty.push(Range::new(at, at + (layout.end - layout.start) as u64));
    }
    let mut keep = alloc::vec![kernel.range(), loaded.dtb];
    keep.extend(loaded.initrd);
    let scrubbed = guest::scrub(&dirty, &keep);
    rt::println!(
        "hyp: guest RAM {} ({} MiB; the hypervisor keeps {} MiB from {:#x}), {} at {:#x} ({} KiB){}, DTB at {gdtb_at:#x} \
         ({} KiB left over from loading zeroed)",
        ranges_str(guest_ram),
        guest_ram.iter().map(|r| r.len()).sum::<u64>() >> 20,
        plan.kept_bytes() >> 20,
        hyp.start.min(plan.hypervisor_owned().iter().map(|r| r.start).min().unwrap_or(hyp.start)),
        match kernel.kind {
            guest::KernelKind::Image => "kernel Image",
            guest::KernelKind::Raw => "raw kernel binary",
        },
        kernel.entry,
        kernel.image_size / 1024,
        match loaded.initrd {
            Some(i) => format!(", initramfs [{:#x}, {:#x})", i.start, i.end),
            None => String::new(),
        },
        scrubbed >> 10,
    );
    rt::println!("{}", boot_record(&board, &plan, &loaded, guest_cpus, gdtb_at));
    if opts.test_el2_fault {
        rt::println!("hyp: hyp.test=el2-fault: reading an unmapped address at EL2");
        // SAFETY: deliberately faults (the address is unmapped) to exercise the fatal-exception
        // report; the handler never returns.
        unsafe { core::ptr::read_volatile(opts.fault_addr as *const u64) };
    }
    if let Some(insn) = opts.aarch32_test {
        aarch32_test_guest(me, insn, kernel.entry, hyp.start)?;
    }
    match psci::take_waiting_cpus() {
        (0, 0) => {}
        (guest, 0) => rt::println!("hyp: {guest} CPUs taken from the spin table: they wait in WFI for the guest's CPU_ON"),
        (guest, other) => rt::println!(
            "hyp: {} CPUs taken from the spin table: they wait in WFI, {guest} for the guest's CPU_ON, {other} for good \
             (not the guest's)",
            guest + other
        ),
    }
    el2::start_cpu(me, kernel.entry, gdtb_at)
}

/// `hyp.test=aarch32-*`: instead of the kernel, a guest in AArch32 at EL1 runs `insn` (then
/// loops) with r1 = the hypervisor's first byte. Whatever it does must stop it as the guest's
/// doing (exit 4), never as a hypervisor fault.
#[cfg(target_os = "none")]
fn aarch32_test_guest(me: usize, insn: u32, at: u64, r1: u64) -> Result<core::convert::Infallible, String> {
    if !el2::has_aarch32_el1() {
        return Err("hyp.test=aarch32-*: this CPU has no AArch32 at EL1 (try --cpu cortex-a72)".into());
    }
    rt::println!("hyp: hyp.test: entering an AArch32 guest at {at:#x} running {insn:#010x} with r1 = {r1:#x}");
    // A32 `b .` after the instruction.
    let code = [insn, 0xeaff_fffe];
    // SAFETY: `at` is the loaded kernel's entry in guest RAM, which this test replaces; nothing
    // else uses it.
    unsafe { core::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u32, 2) };
    el2::clean_dcache_range(at, 8);
    el2::prepare_cpu(me);
    el2::enter_aarch32_guest(at, r1)
}

/// Moves the hypervisor to the top of RAM (`hypcore::home`) so the guest's RAM has no hole: the
/// image is copied there and boot starts over in the copy (this call then never returns). Says
/// where the hypervisor runs, for the banner. Called before any static outside the BSS is
/// written (`rt::start::restart_at`'s condition).
#[cfg(target_os = "none")]
fn go_home(board: &Board, opts: &options::Options, dtb: Range, dtb_addr: usize) -> &'static str {
    use hypcore::home::{decide, Home, HomeInput};
    let layout = rt::start::image_layout();
    let image = Range::new(layout.start as u64, layout.end as u64);
    // RAM and reserved memory as the memory plan sees them (firmware's no-map memory is no RAM).
    let plan_input = hypcore::plan::PlanInput::from_board(board, image, opts.pool, opts.slotpool);
    let input = HomeInput {
        ram: plan_input.ram,
        image,
        reserved: plan_input.reserved,
        loaded: [Some(dtb), board.initrd.map(|i| Range::new(i.base, i.end()))]
            .into_iter()
            .flatten()
            .chain(board.module_regions().map(|m| Range::new(m.base, m.end())))
            .collect(),
        slotpool: opts.slotpool,
    };
    match decide(&input) {
        Home::Here => "top of RAM",
        Home::Stay(why) => {
            rt::println!(
                "hyp: warning: staying where the boot loader put the hypervisor (the guest's RAM gets a hole): {why}"
            );
            "where it was loaded"
        }
        // SAFETY: `decide` chose a 2 MiB aligned destination inside RAM, clear of the running
        // image, the DTB, the initrd and reserved memory; only the boot CPU runs; so far only the
        // heap, the console and the options (BSS statics) have been written.
        Home::MoveTo(to) => unsafe { rt::start::restart_at(to, dtb_addr as u64, image.start, MOVED_MARK) },
    }
}

/// What `hyp.migrate` set up.
#[cfg(target_os = "none")]
struct Migration {
    control: u64,
    worker_mpidr: u64,
}

/// `hyp.migrate`: the last CPU becomes the migration worker, the control page goes on the first
/// free page above RAM (clear of every device), the mirror is the plan's.
#[cfg(target_os = "none")]
fn setup_migration(board: &Board, plan: &hypcore::plan::MemoryPlan) -> Result<Migration, String> {
    let n = board.cpus.len().min(rt::MAX_CPUS);
    if n < 2 {
        return Err("hyp.migrate needs at least 2 CPUs (the last one copies, the others run the guest)".into());
    }
    let worker = (n - 1, board.cpus[n - 1].mpidr);
    let top = board.memory.iter().map(|r| r.end()).max().unwrap_or(0);
    let busy: Vec<Range> = board
        .devices
        .iter()
        .flat_map(|d| d.regions.iter().chain(d.windows.iter().map(|w| &w.region)))
        .map(|r| Range::new(r.base, r.end()))
        .collect();
    let mut control = hypcore::range::align_up(top, mem::BLOCK_2M).ok_or("no room above RAM")?;
    while busy.iter().any(|b| b.overlaps(&Range::new(control, control + mem::PAGE))) {
        control += mem::BLOCK_2M;
    }
    if control + mem::PAGE > 1 << pgtable::regime::IPA_BITS {
        return Err("hyp.migrate: no free page for the control page in the IPA space".into());
    }
    migrate::init(&plan.guest_ram, plan.mirror, control, worker)?;
    rt::println!(
        "hyp: migrate: CPU {} is the copier, second memory image {}, control page at {control:#x}",
        worker.0,
        plan.mirror
    );
    Ok(Migration { control, worker_mpidr: worker.1 })
}

/// The boot-time memory plan (`hypcore::plan`): what the hypervisor keeps, what the guest gets.
#[cfg(target_os = "none")]
fn memory_plan(board: &Board, opts: &options::Options) -> Result<hypcore::plan::MemoryPlan, String> {
    let layout = rt::start::image_layout();
    let image = Range::new(layout.start as u64, layout.end as u64);
    let mut input = hypcore::plan::PlanInput::from_board(board, image, opts.pool, opts.slotpool);
    input.mirror = opts.migrate;
    input.guest_mem = opts.plan.guest_mem;
    hypcore::plan::MemoryPlan::new(&input).map_err(|e| alloc::format!("memory plan: {e}"))
}

/// The guest's device tree: the host's with the guest's memory, its command line (the bundle's
/// first, then the boot loader's words for the guest, then the migration control page), its
/// initramfs, only the CPUs it runs on, the hypervisor's own devices, and the PSCI conduit and
/// GIC and timer nodes of a machine without EL2 (docs/ARCHITECTURE.md lists every change).
#[cfg(target_os = "none")]
#[allow(clippy::too_many_arguments)]
fn guest_device_tree(
    board: &Board,
    host_dtb: &[u8],
    plan: &hypcore::plan::MemoryPlan,
    cmdline: &str,
    initrd: Option<Range>,
    opts: &options::Options,
    migration: Option<&Migration>,
    guest_cpus: usize,
) -> Result<Vec<u8>, String> {
    use alloc::format;
    let ctl_arg = migration.map(|m| format!("{}={:#x}", abi::control::CMDLINE_WORD, m.control)).unwrap_or_default();
    let bootargs = [cmdline, opts.guest_bootargs.as_str(), ctl_arg.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    // The guest sees only the CPUs it can run on (and no CPU topology naming the others).
    let trimmed: Vec<String> = board.cpus.iter().skip(guest_cpus).map(|c| c.path.clone()).collect();
    // QEMU's virt gives a guest without EL2 PSCI over HVC; a board's firmware, SMC. The guest
    // always starts its CPUs with PSCI, the hypervisor's (the Pi 4's spin-table and missing
    // PSCI firmware included): HVC where the host has no PSCI.
    let on_virt = board.compatible.iter().any(|c| c == "linux,dummy-virt");
    let conduit = opts
        .conduit
        .or(on_virt.then_some(board::PsciMethod::Hvc))
        .or(board.psci.as_ref().map(|p| p.method))
        .unwrap_or(board::PsciMethod::Hvc);
    let mut spec = plan.guest_spec(bootargs, Some(conduit));
    // The power controller the run ends with is the hypervisor's: its node disabled.
    hypcore::devices::hide_kept(board, &mut spec);
    spec.initrd = initrd.map(|r| board::Region::new(r.start, r.len()));
    spec.hide_el2 = true;
    if let Some(m) = migration {
        spec.remove_cpus = alloc::vec![m.worker_mpidr];
        spec.extra_devices = alloc::vec![board::ExtraDevice {
            name: "hyp-control".into(),
            compatible: abi::control::COMPATIBLE.into(),
            reg: board::Region::new(m.control, mem::PAGE),
        }];
    }
    spec.remove.extend(trimmed.iter().cloned());
    // The boot loader's module nodes described the hypervisor's input, not the guest's.
    spec.remove.extend(board.modules.iter().flat_map(|m| {
        [Some(&m.kernel), m.ramdisk.as_ref(), m.device_tree.as_ref()].into_iter().flatten().map(|x| x.path.clone())
    }));
    if !trimmed.is_empty() {
        spec.remove.push("/cpus/cpu-map".into());
    }
    match board::guest_dtb(host_dtb, &spec) {
        Err(board::BoardError::BadGuestSpec { item, .. }) if item == "/cpus/cpu-map" => {
            spec.remove.retain(|p| p != "/cpus/cpu-map");
            board::guest_dtb(host_dtb, &spec)
        }
        r => r,
    }
    .map_err(|e| format!("guest device tree: {e}"))
}

/// The `hyp_boot` record: where everything went.
#[cfg(target_os = "none")]
fn boot_record(
    board: &Board,
    plan: &hypcore::plan::MemoryPlan,
    loaded: &guest::GuestBoot,
    guest_cpus: usize,
    gdtb_at: u64,
) -> abi::report::Record {
    let (hyp, frames_hi, slotpool, guest_ram) = (plan.hyp, plan.frames_high, plan.slotpool, &plan.guest_ram);
    let kernel = &loaded.kernel;
    let mut r = abi::report::Record::new("hyp_boot");
    r.u64("cpus", board.cpus.len() as u64)
        .u64("guest_cpus", guest_cpus as u64)
        .hex("hyp_start", hyp.start)
        .hex("hyp_end", hyp.end)
        .u64("guest_ram_bytes", guest_ram.iter().map(|r| r.len()).sum())
        .u64("hyp_reserved_bytes", plan.kept_bytes())
        .hex("kernel", kernel.entry)
        .str("kernel_kind", if kernel.kind == guest::KernelKind::Raw { "raw" } else { "image" })
        .bool("bundle", loaded.bundle)
        .hex("initramfs", loaded.initrd.map_or(0, |i| i.start))
        .u64("initramfs_bytes", loaded.initrd.map_or(0, |i| i.len()))
        .hexes("guest_ram", &guest_ram.iter().flat_map(|r| [r.start, r.end]).collect::<Vec<_>>())
        .hex("dtb", gdtb_at)
        .u64("dtb_bytes", loaded.dtb.len())
        .u64("spare_bytes", plan.spare.iter().map(|r| r.len()).sum())
        .hex("guest_pcs", cpu::GUEST_PCS.as_ptr() as u64)
        .u64("frame_pool_bytes", plan.frame_pool_bytes)
        .hex("frame_pool_high", frames_hi.start)
        .hex("slotpool", slotpool.start)
        .u64("slotpool_bytes", slotpool.len())
        .u64("stage2_table_pages", mmu::stage2_table_pages())
        .u64("el2_table_pages", mmu::el2_table_pages())
        .u64("boot_us", boot_us());
    r
}

/// Microseconds of the generic timer so far: since the machine started, so the hypervisor's boot
/// with whatever the boot loader did before it (QEMU: nothing).
#[cfg(target_os = "none")]
fn boot_us() -> u64 {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    (CNTPCT_EL0.get() as u128 * 1_000_000 / CNTFRQ_EL0.get().max(1) as u128) as u64
}

#[cfg(target_os = "none")]
fn ranges_str(r: &[Range]) -> String {
    use core::fmt::Write;
    let mut s = String::new();
    for (i, x) in r.iter().enumerate() {
        let _ = write!(s, "{}[{:#x}, {:#x})", if i > 0 { " + " } else { "" }, x.start, x.end);
    }
    s
}

/// A CPU started through the guest's PSCI CPU_ON (context = CPU number).
#[cfg(target_os = "none")]
#[no_mangle]
extern "C" fn rt_secondary_main(cpu: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL2};
    VBAR_EL2.set(rt::trap::vectors_el2());
    // First the MMU: everything shared is read through the caches, coherently with the boot CPU.
    mmu::enable_secondary(cpu);
    if migrate::worker_cpu() == Some(cpu) {
        migrate::worker_main();
    }
    let c = &CPUS[cpu];
    if !c.ready_to_start() {
        // Taken at boot (`psci::take_waiting_cpus`): wait for the guest's CPU_ON.
        psci::park(cpu);
    }
    el2::start_cpu(cpu, c.entry.load(Ordering::Relaxed), c.context.load(Ordering::Relaxed))
}

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::console::panic_print(format_args!("hyp: PANIC on CPU {}: {info}\n", cpu::current()));
    rt::backtrace::print(rt::backtrace::current_fp(), |a| rt::console::panic_print(format_args!("hyp: {a}")));
    exit::exit(trap::EXIT_HYP_FAULT)
}

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("hypervisor runs on aarch64-unknown-none: `cargo xtask run` builds and boots it");
    std::process::exit(abi::exit::USAGE as i32);
}
