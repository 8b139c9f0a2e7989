//! The boot CPU's way from the boot loader to the guest, one phase per type: each phase takes
//! the one before by value and holds what is known from then on, so no step can run on
//! something an earlier one has not settled.
//!
//! 1. [`Discovered`]: the boot loader's device tree (our copy), the board, the console, the boot
//!    words, the move to the top of RAM (the image restarts there: `go_home`), how EL2 runs.
//! 2. [`Planned`]: the CPUs and the memory plan (frame pools, slot pool, the guest's RAM).
//! 3. [`Mapped`]: the EL2 table and the guest's stage 2, the MMU on, what every CPU applies to
//!    EL2 before it enters the guest.
//! 4. [`Loaded`]: the guest in its RAM with its device tree, what loading left zeroed.
//!
//! [`Loaded::enter`] then starts the guest on this CPU. Each phase also hands the subsystems it
//! settles their part (the console and power-off, the fault policy, PSCI's CPUs, the frame and
//! slot pools, the guest's RAM, EL2's configuration): those are the hypervisor's global state,
//! set here once, in this order.

use crate::cpu::{self, CpuState, CPUS};
use crate::mem::{self, Range};
use crate::{dirtylog, el2, exit, guest, memslot, migrate, mmu, options, psci, trap};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use board::Board;
use core::convert::Infallible;
use core::sync::atomic::Ordering;
use hypcore::plan::MemoryPlan;

/// x2 on a restart after the move to the top of RAM (then x1 is where the image was loaded);
/// a boot loader gives x1 = x2 = 0 (the arm64 boot protocol).
pub const MOVED_MARK: u64 = u64::from_le_bytes(*b"PGTLMOVE");

/// From the device tree at `dtb_addr` (x0) to the guest; `loaded_at`: where the boot loader put
/// the image, if it has moved since (its old copy is zeroed once the guest is in place).
pub fn boot(dtb_addr: usize, loaded_at: Option<u64>) -> Result<Infallible, String> {
    if loaded_at.is_none() {
        move_early(dtb_addr);
    }
    Discovered::read(dtb_addr, loaded_at)?.plan()?.map()?.load()?.enter()
}

/// Phase 1: what the boot loader handed over, read and checked.
struct Discovered {
    /// The boot loader's device tree where it lies (in what becomes the guest's RAM).
    dtb: Range,
    /// Our own copy of it.
    host_dtb: Vec<u8>,
    board: Board,
    opts: options::Options,
    /// Where the boot loader put the image, if it moved to the top of RAM since.
    loaded_at: Option<u64>,
}

impl Discovered {
    /// Copies and parses the device tree, starts the console and the way the run ends, reads the
    /// boot words, moves the image home (restarting there: this call then never returns), and
    /// chooses how EL2 runs.
    fn read(dtb_addr: usize, loaded_at: Option<u64>) -> Result<Discovered, String> {
        if dtb_addr == 0 {
            return Err(
                "no device tree in x0 (boot the hypervisor as an arm64 Image: QEMU -kernel, Pi 5 kernel=)".into()
            );
        }
        // SAFETY: x0 points at the DTB per the arm64 boot protocol, in RAM nothing writes
        // meanwhile; the header's length is checked (at most 2 MiB).
        let blob = unsafe { board::dtb_at(dtb_addr as *const u8) }
            .map_err(|e| format!("device tree at {dtb_addr:#x}: {e}"))?;
        let size = blob.len();
        // Keep our own copy: the original lies in what becomes guest RAM. Only the bytes its
        // blocks use (QEMU's blob is 1 MiB, a few KiB of it tree), with `totalsize` saying so;
        // copied 32 bytes at a time (the softfloat memcpy goes byte by byte), not zeroed first.
        let used = board::dtb_used_len(blob).map_err(|e| format!("device tree at {dtb_addr:#x}: {e}"))?;
        let mut host_dtb: Vec<u8> = Vec::with_capacity(used);
        // SAFETY: `used` <= the blob's length (checked by `dtb_used_len`); `host_dtb` has room
        // for `used` bytes and is a fresh heap buffer, so the two do not overlap; after the copy
        // all `used` bytes are initialised.
        unsafe {
            mem::copy_fast(host_dtb.as_mut_ptr() as u64, dtb_addr as u64, used as u64);
            host_dtb.set_len(used);
        }
        host_dtb[4..8].copy_from_slice(&(used as u32).to_be_bytes());
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
        exit::set_key_from(board.bootargs.as_deref().unwrap_or(""));

        let opts = options::parse(board.bootargs.as_deref().unwrap_or(""));
        trap::set_stop_on_fault(opts.stop_on_fault);
        let dtb = Range::new(dtb_addr as u64, (dtb_addr + size) as u64);
        let home = go_home(&board, &opts, dtb, dtb_addr, loaded_at.is_some())?;
        let mode = el2::choose_mode(opts.force_e2h);
        let layout = rt::start::image_layout();
        rt::println!(
            "hyp: pgtlab hypervisor at EL2, image [{:#x}, {:#x}) ({home}), DTB {dtb_addr:#x} ({size} bytes), {} CPUs, {}",
            layout.start,
            layout.end,
            board.cpus.len(),
            board.model.as_deref().unwrap_or("unknown board")
        );
        rt::println!("hyp: EL2 runs {}", mode.describe());
        Ok(Discovered { dtb, host_dtb, board, opts, loaded_at })
    }

    /// Numbers the CPUs (PSCI's table, the guest's share of them, this CPU on) and makes the
    /// memory plan; hands the frame pools, the slot pool and the guest's RAM to their owners.
    fn plan(self) -> Result<Planned, String> {
        let (board, opts) = (&self.board, &self.opts);
        for (i, c) in board.cpus.iter().enumerate().take(rt::MAX_CPUS) {
            CPUS[i].mpidr.store(c.mpidr & rt::MPIDR_AFF_MASK, Ordering::Relaxed);
        }
        psci::init(board);
        let guest_cpus = hypcore::options::guest_cpus(board.cpus.len(), rt::MAX_CPUS, opts.cpus)?;
        psci::set_guest_cpus(guest_cpus);
        if board.cpus.len() > rt::MAX_CPUS {
            rt::println!(
                "hyp: the device tree has {} CPUs and this hypervisor runs at most {}: the guest's device tree \
                 lists the first {guest_cpus}, the others stay off",
                board.cpus.len(),
                rt::MAX_CPUS
            );
        }
        let me = cpu::index_of(cpu::current_mpidr()).ok_or("the boot CPU's MPIDR is not in the device tree")?;
        CPUS[me].set_state(CpuState::On);

        let plan = memory_plan(board, opts)?;
        mem::add_frames(plan.frames_low);
        mem::add_frames(plan.frames_high);
        memslot::init(plan.slotpool, plan.hypervisor_owned());
        dirtylog::set_check_split(opts.check_split);
        guest::set_ram(plan.guest_ram.clone());
        Ok(Planned { d: self, plan, me, guest_cpus })
    }
}

/// Phase 2: the CPUs numbered and the memory plan made.
struct Planned {
    d: Discovered,
    plan: MemoryPlan,
    /// This CPU's index.
    me: usize,
    /// How many CPUs the guest gets (the first of the device tree).
    guest_cpus: usize,
}

impl Planned {
    /// Builds the EL2 table and the guest's stage 2 and turns the MMU on (`mmu::setup`), records
    /// what every CPU applies to EL2, gives spare RAM to the frame pool, and with
    /// `hyp.check-stage2` checks that nothing the hypervisor keeps translates in stage 2.
    fn map(self) -> Result<Mapped, String> {
        let (board, plan) = (&self.d.board, &self.plan);
        let gic_v3 = matches!(board.gic.as_ref().map(|g| g.version), Some(board::GicVersion::V3));
        let (vttbr, vtcr) = mmu::setup(board, plan).map_err(|e| format!("page tables: {e}"))?;
        el2::set_config(el2::Config { vttbr, vtcr, gic_v3 });
        // Spare RAM joins the frame pool only now: never used with the MMU off, it needs no
        // cache maintenance before its first cacheable use.
        for r in &plan.spare {
            mem::add_frames(*r);
        }
        if self.d.opts.check_stage2 {
            check_stage2(board, plan)?;
        }
        Ok(Mapped { p: self })
    }
}

/// `hyp.check-stage2`: nothing the hypervisor keeps (its region, frame pools, slot pool, spare
/// RAM, the power controller's registers) translates in the guest's stage 2.
fn check_stage2(board: &Board, plan: &MemoryPlan) -> Result<(), String> {
    let mut kept =
        alloc::vec![("hypervisor's region", plan.hyp), ("frame pool", plan.frames_high), ("slot pool", plan.slotpool)];
    kept.extend(plan.spare.iter().map(|r| ("spare RAM", *r)));
    let devices = hypcore::devices::kept_pages(board);
    kept.extend(devices.iter().map(|(_, r)| ("power controller's registers", *r)));
    let bytes = mmu::check_stage2(&kept)?;
    rt::println!(
        "hyp: check-stage2: nothing of the {} MiB the hypervisor keeps (region, frame pool, slot pool) translates in stage 2",
        bytes >> 20
    );
    for (path, r) in &devices {
        rt::println!("hyp: check-stage2: {path} [{:#x}, {:#x}) is the hypervisor's: not in stage 2", r.start, r.end);
    }
    Ok(())
}

/// Phase 3: the tables built, the MMU on, EL2's configuration recorded.
struct Mapped {
    p: Planned,
}

impl Mapped {
    /// The guest (a bundle or a lone kernel in the initrd) put where QEMU would put it on a
    /// machine with the guest's RAM, its device tree written, what the boot loader and the
    /// hypervisor left in its RAM zeroed; `hyp.migrate` set up.
    fn load(self) -> Result<Loaded, String> {
        let (d, plan, guest_cpus) = (&self.p.d, &self.p.plan, self.p.guest_cpus);
        let board = &d.board;
        let (contents, sources) = guest::from_boot_loader(board).map_err(|e| e.to_string())?;
        let migration = if d.opts.migrate { Some(setup_migration(board, plan)?) } else { None };
        // The CPUs waiting in a firmware spin table come into the hypervisor's `WFI` now, not
        // after the loading: under QEMU's TCG a `WFE` loop keeps a host thread busy, and on a
        // small host the three of the Pi 4 model slowed this CPU's boot by half. Everything
        // they need is ready: the EL2 tables and configuration (`map`), the migration worker.
        let taken = psci::take_waiting_cpus();
        let tree = GuestTree::new(board, &d.host_dtb, plan, &d.opts, migration.as_ref(), guest_cpus);
        // Where QEMU would put the guest on the guest's RAM (`hypcore::load::place_guest`: from
        // the machine's RAM base, or a later range when the first cannot hold it). The DTB's
        // room is as large as the boot loader's DTB (QEMU's: 1 MiB), or the guest's tree if
        // that is larger; the tree names the initramfs, which goes before the DTB: placed with
        // the boot loader's room first, the tree is written once, and again only if its own
        // size moved the initramfs (a larger room that sends the guest to another RAM range).
        let base = board.memory.first().map_or(0, |m| m.base);
        let reserved: Vec<Range> = board.reserved_regions().map(|r| Range::new(r.base, r.end())).collect();
        let initrd = guest::initrd_at(&contents, base, &reserved, d.dtb.len()).map_err(|e| e.to_string())?;
        let first = tree.build(&contents.cmdline, initrd)?;
        let dtb_room = d.dtb.len().max(first.len() as u64).next_multiple_of(8);
        let loaded = guest::load(&contents, base, &reserved, dtb_room).map_err(|e| e.to_string())?;
        let gdtb = if loaded.initrd == initrd { first } else { tree.build(&loaded.cmdline, loaded.initrd)? };
        guest::write_dtb(&gdtb, loaded.dtb).map_err(|e| e.to_string())?;
        // What the boot loader and the hypervisor left in the guest's RAM: the bundle, the boot
        // loader's DTB, the image before the move.
        let layout = rt::start::image_layout();
        let mut dirty = sources;
        dirty.push(d.dtb);
        if let Some(at) = d.loaded_at {
            dirty.push(Range::new(at, at + (layout.end - layout.start) as u64));
        }
        let mut keep = alloc::vec![loaded.kernel.file(), loaded.dtb];
        keep.extend(loaded.initrd);
        let scrubbed = guest::scrub(&dirty, &keep);
        report_guest(plan, &loaded, scrubbed);
        rt::println!("{}", boot_record(board, plan, &loaded, guest_cpus, loaded.dtb.start));
        Ok(Loaded { kernel_entry: loaded.kernel.entry, dtb_at: loaded.dtb.start, taken, m: self })
    }
}

/// The boot line that says where the guest went.
fn report_guest(plan: &MemoryPlan, loaded: &guest::GuestBoot, scrubbed: u64) {
    let (hyp, guest_ram, kernel) = (plan.hyp, &plan.guest_ram, &loaded.kernel);
    rt::println!(
        "hyp: guest RAM {} ({} MiB; the hypervisor keeps {} MiB from {:#x}), {} at {:#x} ({} KiB){}, DTB at {:#x} \
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
        loaded.dtb.start,
        scrubbed >> 10,
    );
}

/// Phase 4: the guest in place.
struct Loaded {
    m: Mapped,
    kernel_entry: u64,
    /// The guest's device tree (x0).
    dtb_at: u64,
    /// CPUs taken from the spin table: (the guest's, the others).
    taken: (usize, usize),
}

impl Loaded {
    /// The tests that replace the guest's start (`hyp.test=`), what the spin-table CPUs taken
    /// into `WFI` wait for, then the guest on this CPU at EL1.
    fn enter(self) -> Result<Infallible, String> {
        let p = &self.m.p;
        let opts = &p.d.opts;
        if opts.test_el2_fault {
            rt::println!("hyp: hyp.test=el2-fault: reading an unmapped address at EL2");
            // SAFETY: deliberately faults (the address is unmapped) to exercise the
            // fatal-exception report; the handler never returns.
            unsafe { core::ptr::read_volatile(opts.fault_addr as *const u64) };
        }
        if let Some(insn) = opts.aarch32_test {
            aarch32_test_guest(p.me, insn, self.kernel_entry, p.plan.hyp.start)?;
        }
        match self.taken {
            (0, 0) => {}
            (guest, 0) => {
                rt::println!("hyp: {guest} CPUs taken from the spin table: they wait in WFI for the guest's CPU_ON")
            }
            (guest, other) => rt::println!(
                "hyp: {} CPUs taken from the spin table: they wait in WFI, {guest} for the guest's CPU_ON, {other} \
                 for good (not the guest's)",
                guest + other
            ),
        }
        el2::start_cpu(p.me, self.kernel_entry, self.dtb_at)
    }
}

/// `hyp.test=aarch32-*`: instead of the kernel, a guest in AArch32 at EL1 runs `insn` (then
/// loops) with r1 = the hypervisor's first byte. Whatever it does must stop it as the guest's
/// doing (exit 4), never as a hypervisor fault.
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

/// Before anything else is read or written: the early scan of the device tree
/// (`board::MemFacts::scan`: RAM, reserved memory, what the boot loader loaded, the command
/// line) and, where `hypcore::home` says so, the move to the top of RAM (restarting there: this
/// call then never returns). The full parse then runs once, after the move: the code that runs
/// before it is translated twice by an emulator, and under QEMU's TCG every translation left in
/// what becomes the guest's RAM costs a flush of every vCPU's jump cache when the guest's
/// kernel is copied over it. Anything the scan cannot read, and every other decision, is left
/// to [`go_home`] after the full parse, which says why.
fn move_early(dtb_addr: usize) {
    use hypcore::home::{decide, Home};
    if dtb_addr == 0 {
        return;
    }
    // SAFETY: as in `Discovered::read`: x0 points at the DTB, which nothing writes meanwhile;
    // the header's length is checked (at most 2 MiB).
    let Ok(blob) = (unsafe { board::dtb_at(dtb_addr as *const u8) }) else {
        return;
    };
    let Ok(facts) = board::MemFacts::scan(blob) else {
        return;
    };
    // Of the command line only `hyp.slotpool=` matters here; the whole line is parsed (and any
    // error in it reported) after the move. A line without the word has no slot pool.
    let line = facts.bootargs.as_deref().unwrap_or("");
    let word = hypcore::options::SLOTPOOL.as_bytes();
    let slotpool = if line.as_bytes().windows(word.len()).any(|w| w == word) {
        let Ok(opts) = options::try_parse(line) else {
            return;
        };
        opts.slotpool
    } else {
        None
    };
    let dtb = Range::new(dtb_addr as u64, (dtb_addr + blob.len()) as u64);
    let input = home_input(&facts, slotpool, dtb);
    if let Home::MoveTo(to) = decide(&input) {
        // SAFETY: as in `go_home`; nothing but the heap (BSS) has been written yet.
        unsafe { rt::start::restart_at(to, dtb_addr as u64, input.image.start, MOVED_MARK) }
    }
}

/// What `hypcore::home::decide` needs, from a tree's memory facts: RAM and reserved memory as
/// the memory plan sees them (firmware's no-map memory is no RAM), and what the boot loader
/// loaded (the DTB at `dtb`, the initrd, the modules).
fn home_input(f: &board::MemFacts, slotpool: Option<u64>, dtb: Range) -> hypcore::home::HomeInput {
    let layout = rt::start::image_layout();
    let image = Range::new(layout.start as u64, layout.end as u64);
    let plan_input = hypcore::plan::PlanInput::from_facts(f, image, None, slotpool);
    hypcore::home::HomeInput {
        ram: plan_input.ram,
        image,
        reserved: plan_input.reserved,
        loaded: [Some(dtb), plan_input.initrd].into_iter().flatten().chain(plan_input.modules).collect(),
        slotpool,
    }
}

/// Moves the hypervisor to the top of RAM (`hypcore::home`) so the guest's RAM has no hole: the
/// image is copied there and boot starts over in the copy (this call then never returns). Says
/// where the hypervisor runs, for the banner. Called before any static outside the BSS is
/// written (`rt::start::restart_at`'s condition). `moved`: the image moved already (after
/// [`move_early`]); the full parse must then agree that it is home, or the boot stops.
fn go_home(
    board: &Board,
    opts: &options::Options,
    dtb: Range,
    dtb_addr: usize,
    moved: bool,
) -> Result<&'static str, String> {
    use hypcore::home::{decide, Home};
    let input = home_input(&board.mem_facts(), opts.slotpool, dtb);
    match decide(&input) {
        Home::Here => Ok("top of RAM"),
        Home::Stay(why) => {
            rt::println!(
                "hyp: warning: staying where the boot loader put the hypervisor (the guest's RAM gets a hole): {why}"
            );
            Ok("where it was loaded")
        }
        Home::MoveTo(to) if moved => Err(format!(
            "the image moved to the top of RAM by the early scan of the device tree, but the full parse \
             places it at {to:#x}: the two disagree (board::MemFacts)"
        )),
        // SAFETY: `decide` chose a 2 MiB aligned destination inside RAM, clear of the running
        // image, the DTB, the initrd and reserved memory; only the boot CPU runs; so far only the
        // heap, the console and the options (BSS statics) have been written.
        Home::MoveTo(to) => unsafe { rt::start::restart_at(to, dtb_addr as u64, input.image.start, MOVED_MARK) },
    }
}

/// What `hyp.migrate` set up.
struct Migration {
    control: u64,
    worker_mpidr: u64,
}

/// `hyp.migrate`: the last CPU becomes the migration worker, the control page goes on the first
/// free page above RAM (clear of every device), the mirror is the plan's.
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
fn memory_plan(board: &Board, opts: &options::Options) -> Result<hypcore::plan::MemoryPlan, String> {
    let layout = rt::start::image_layout();
    let image = Range::new(layout.start as u64, layout.end as u64);
    let mut input = hypcore::plan::PlanInput::from_board(board, image, opts.pool, opts.slotpool);
    input.mirror = opts.migrate;
    input.guest_mem = opts.plan.guest_mem;
    hypcore::plan::MemoryPlan::new(&input).map_err(|e| alloc::format!("memory plan: {e}"))
}

/// The guest's device tree: the host's with the guest's memory, its command line (the
/// bundle's first, then the boot loader's words for the guest, then the migration control
/// page), its initramfs, only the CPUs it runs on, the hypervisor's own devices, and the PSCI
/// conduit and GIC and timer nodes of a machine without EL2 (docs/ARCHITECTURE.md lists every
/// change). Everything but the bundle's command line and the initramfs is decided once, in
/// [`GuestTree::new`]; [`GuestTree::build`] writes the blob.
struct GuestTree<'a> {
    host_dtb: &'a [u8],
    spec: board::GuestSpec,
    /// The boot loader's words for the guest, then the control page's word.
    extra_words: String,
}

impl<'a> GuestTree<'a> {
    fn new(
        board: &Board,
        host_dtb: &'a [u8],
        plan: &MemoryPlan,
        opts: &options::Options,
        migration: Option<&Migration>,
        guest_cpus: usize,
    ) -> GuestTree<'a> {
        let ctl_arg = migration.map(|m| format!("{}={:#x}", abi::control::CMDLINE_WORD, m.control)).unwrap_or_default();
        let extra_words = [opts.guest_bootargs.as_str(), ctl_arg.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        // The guest sees only the CPUs it can run on (and no CPU topology naming the others).
        let trimmed: Vec<String> = board.cpus.iter().skip(guest_cpus).map(|c| c.path.clone()).collect();
        // QEMU's virt gives a guest without EL2 PSCI over HVC; a board's firmware, SMC. The
        // guest always starts its CPUs with PSCI, the hypervisor's (the Pi 4's spin-table and
        // missing PSCI firmware included): HVC where the host has no PSCI.
        let on_virt = board.is_qemu_virt();
        let conduit = opts
            .conduit
            .or(on_virt.then_some(board::PsciMethod::Hvc))
            .or(board.psci.as_ref().map(|p| p.method))
            .unwrap_or(board::PsciMethod::Hvc);
        let mut spec = plan.guest_spec(String::new(), Some(conduit));
        // The power controller the run ends with is the hypervisor's: its node disabled.
        hypcore::devices::hide_kept(board, &mut spec);
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
        GuestTree { host_dtb, spec, extra_words }
    }

    /// The blob, with `cmdline` (the bundle's) first on the command line and `initrd` as the
    /// initramfs.
    fn build(&self, cmdline: &str, initrd: Option<Range>) -> Result<Vec<u8>, String> {
        let mut spec = self.spec.clone();
        let words = [cmdline, self.extra_words.as_str()].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>();
        spec.bootargs = Some(words.join(" "));
        spec.initrd = initrd.map(|r| board::Region::new(r.start, r.len()));
        match board::guest_dtb(self.host_dtb, &spec) {
            Err(board::BoardError::BadGuestSpec { item, .. }) if item == "/cpus/cpu-map" => {
                spec.remove.retain(|p| p != "/cpus/cpu-map");
                board::guest_dtb(self.host_dtb, &spec)
            }
            r => r,
        }
        .map_err(|e| format!("guest device tree: {e}"))
    }
}

/// The `hyp_boot` record: where everything went.
fn boot_record(
    board: &Board,
    plan: &MemoryPlan,
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
fn boot_us() -> u64 {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    (CNTPCT_EL0.get() as u128 * 1_000_000 / CNTFRQ_EL0.get().max(1) as u128) as u64
}

fn ranges_str(r: &[Range]) -> String {
    use core::fmt::Write;
    let mut s = String::new();
    for (i, x) in r.iter().enumerate() {
        let _ = write!(s, "{}[{:#x}, {:#x})", if i > 0 { " + " } else { "" }, x.start, x.end);
    }
    s
}
