//! PSCI for the guest, whatever the board has. vCPU n runs on physical CPU n. With PSCI
//! firmware (QEMU's, TF-A) most calls are forwarded after checking their arguments; CPU_ON is
//! rewritten so the physical CPU starts in the hypervisor (which sets up EL2 and then enters
//! the guest at the requested address). Without it (the Pi 4: spin-table CPUs, no EL3) the
//! hypervisor answers everything itself: CPU_ON releases the CPU from the firmware's spin
//! table the first time and wakes it from [`park`] after a CPU_OFF; VERSION, AFFINITY_INFO and
//! MIGRATE_INFO_TYPE come from its own state. SYSTEM_OFF (success) / SYSTEM_RESET (its own
//! exit code: a reset is not a power-off) end the run (`exit.rs`).

use crate::cpu::{self, CpuState, CPUS};
use crate::{exit, guest, smccc};
use abi::psci as p;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Whether the board has PSCI firmware to forward to (its DTB has a PSCI node).
static FIRMWARE: AtomicBool = AtomicBool::new(true);

/// Called once at boot: whether the board's DTB has a PSCI node, the spin-table release
/// address of each CPU that has one, and the GIC parked CPUs are woken through (mapped at EL2 by
/// `mmu::setup`, see `hypcore::park::wake_gic`).
pub fn init(board: &board::Board) {
    FIRMWARE.store(board.psci.is_some(), Ordering::Relaxed);
    for (i, c) in board.cpus.iter().enumerate().take(rt::MAX_CPUS) {
        if let Some(board::EnableMethod::SpinTable { release_addr: Some(a) }) = c.enable_method {
            CPUS[i].release_addr.store(a, Ordering::Relaxed);
        }
    }
    if let Some((d, c)) = hypcore::park::wake_gic(board) {
        WAKE_GICD.store(d.base, Ordering::Relaxed);
        WAKE_GICC.store(c.base, Ordering::Relaxed);
    }
}

static WAKE_GICD: AtomicU64 = AtomicU64::new(0);
static WAKE_GICC: AtomicU64 = AtomicU64::new(0);

fn waker() -> Option<rt::gicv2::V2Mmio> {
    let (d, c) = (WAKE_GICD.load(Ordering::Relaxed), WAKE_GICC.load(Ordering::Relaxed));
    // SAFETY: set by `init` from `hypcore::park::wake_gic`, whose blocks `mmu::setup` maps at EL2 as device
    // memory; the hypervisor touches only a parked CPU's banked registers and the wake SGI.
    (d != 0 && c != 0).then(|| unsafe { rt::gicv2::V2Mmio::new(d as usize, c as usize, || {}) })
}

/// At the end of boot, on a board whose CPUs wait in a firmware spin table and which has a GIC to
/// wake them through: takes the other CPUs into the hypervisor now, where they wait in [`park`]
/// (`WFI`) for the guest's CPU_ON instead of in the firmware's `WFE` loop, which under QEMU's TCG
/// does not sleep and keeps host threads busy for the whole run. CPUs beyond the guest's
/// (`hyp.cpus`) wait there for good (CPU_ON refuses them); the migration worker starts on its
/// own. Returns how many it took: (the guest's, the others).
pub fn take_waiting_cpus() -> (usize, usize) {
    let mut taken = (0, 0);
    if waker().is_none() {
        return taken;
    }
    let guest_cpus = GUEST_CPUS.load(Ordering::Relaxed);
    let me = cpu::current();
    for idx in (0..rt::MAX_CPUS).filter(|&i| i != me && Some(i) != cpu::kept_for_hypervisor()) {
        let c = &CPUS[idx];
        let mpidr = c.mpidr.load(Ordering::Relaxed);
        if c.release_addr.load(Ordering::Relaxed) != 0 && !c.released.load(Ordering::Acquire) && mpidr != u64::MAX {
            release_from_spin_table(idx, mpidr);
            if idx < guest_cpus {
                taken.0 += 1;
            } else {
                taken.1 += 1;
            }
        }
    }
    taken
}

/// CPUs the guest has (the first N of the DTB): CPU_ON for any other is refused.
static GUEST_CPUS: AtomicUsize = AtomicUsize::new(rt::MAX_CPUS);

/// Called once at boot with the number of CPUs in the guest's DTB.
pub fn set_guest_cpus(n: usize) {
    GUEST_CPUS.store(n, Ordering::Relaxed);
}

/// Whether PSCI calls go to firmware.
pub fn has_firmware() -> bool {
    FIRMWARE.load(Ordering::Relaxed)
}

/// Whether `fid` is in the PSCI range (SMCCC standard secure service, 0x84000000-0x8400001F and
/// the 64-bit 0xC4000000-0xC400001F).
pub fn is_psci(fid: u64) -> bool {
    let f = fid & 0xffff_ffff;
    (0x8400_0000..=0x8400_001f).contains(&f) || (0xc400_0000..=0xc400_001f).contains(&f)
}

fn ret(v: i64) -> [u64; 4] {
    [v as u64, 0, 0, 0]
}

/// PSCI_FEATURES: what this emulation answers for `fid`, consistent with [`handle`]: 0 for
/// every function it implements (CPU_SUSPEND: 0 = original power_state format, no OS-initiated
/// mode), NOT_SUPPORTED for the others. SMCCC_VERSION is reported as implemented (that is how a
/// guest learns SMCCC 1.1 is there).
pub fn features(fid: u64) -> i64 {
    match fid & 0xffff_ffff {
        p::VERSION
        | p::CPU_SUSPEND_32
        | p::CPU_SUSPEND_64
        | p::CPU_OFF
        | p::CPU_ON_32
        | p::CPU_ON_64
        | p::AFFINITY_INFO_32
        | p::AFFINITY_INFO_64
        | p::MIGRATE_INFO_TYPE
        | p::SYSTEM_OFF
        | p::SYSTEM_RESET
        | p::FEATURES
        | abi::hypercall::SMCCC_VERSION => p::SUCCESS,
        _ => p::NOT_SUPPORTED,
    }
}

/// CPU_SUSPEND (original power_state format): a standby state is entered and left at once
/// (as a WFI may complete at once: the wake-up is allowed to come immediately, and the guest
/// idles with its own WFI); a power-down state is not supported by this emulation
/// (INVALID_PARAMETERS, as PSCI answers for a state the platform does not have).
fn cpu_suspend(power_state: u64) -> i64 {
    // Bits 31:26 and 23:17 are reserved (zero); bit 16 is the state type (1 = power down).
    if power_state & 0xfcfe_0000 != 0 || power_state & (1 << 16) != 0 {
        return p::INVALID_PARAMETERS;
    }
    p::SUCCESS
}

/// The hypervisor's own answers where there is no firmware to ask: PSCI 1.0; AFFINITY_INFO
/// of one CPU (level 0) from the hypervisor's CPU states; no Trusted OS to migrate (2).
fn own_answer(fid: u64, a: [u64; 3]) -> i64 {
    match fid {
        p::VERSION => 0x1_0000,
        p::MIGRATE_INFO_TYPE => 2,
        _ => {
            if a[1] != 0 {
                // Only affinity level 0 (one CPU) is answered.
                return p::INVALID_PARAMETERS;
            }
            match cpu::index_of(a[0]) {
                Some(i) => match CPUS[i].state() {
                    CpuState::On => 0,
                    CpuState::Off => 1,
                    CpuState::Starting => 2,
                },
                None => p::INVALID_PARAMETERS,
            }
        }
    }
}

/// Handles one PSCI call (`fid` is W0; a 32-bit call's arguments are W1..W3); returns x0..x3.
pub fn handle(fid: u64, a: [u64; 3]) -> [u64; 4] {
    let fid = fid & 0xffff_ffff;
    match fid {
        p::VERSION | p::MIGRATE_INFO_TYPE | p::AFFINITY_INFO_32 | p::AFFINITY_INFO_64 if has_firmware() => {
            // Harmless queries: the firmware's answer is the truth.
            smccc::smc(fid, a[0], a[1], a[2])
        }
        p::VERSION | p::MIGRATE_INFO_TYPE | p::AFFINITY_INFO_32 | p::AFFINITY_INFO_64 => ret(own_answer(fid, a)),
        p::FEATURES => ret(features(a[0])),
        p::CPU_SUSPEND_32 | p::CPU_SUSPEND_64 => ret(cpu_suspend(a[0])),
        p::CPU_ON_32 | p::CPU_ON_64 => ret(cpu_on(a[0], a[1], a[2])),
        p::CPU_OFF => cpu_off(),
        p::SYSTEM_OFF => {
            rt::println!("hyp: guest called PSCI SYSTEM_OFF");
            exit::exit(0)
        }
        p::SYSTEM_RESET => {
            // Not a power-off: Linux resets after a panic (panic=-1). Its own exit code; on a
            // board the firmware then resets it.
            rt::println!("hyp: guest called PSCI SYSTEM_RESET: ending the run (exit {})", abi::exit::GUEST_RESET);
            exit::reset()
        }
        _ => ret(p::NOT_SUPPORTED),
    }
}

/// CPU_OFF: to the firmware when it started the CPU (returns only on failure); otherwise the
/// hypervisor keeps the CPU in [`park`] until a CPU_ON for it (never returns).
fn cpu_off() -> [u64; 4] {
    let me = cpu::current();
    CPUS[me].set_state(CpuState::Off);
    if !CPUS[me].released.load(Ordering::Acquire) {
        let r = smccc::smc(p::CPU_OFF, 0, 0, 0);
        // CPU_OFF only returns on failure.
        CPUS[me].set_state(CpuState::On);
        return r;
    }
    park(me)
}

/// A CPU the hypervisor keeps off (no firmware to give it back to, or taken at boot by
/// [`take_waiting_cpus`]): waits for a CPU_ON to mark it Starting, then enters the guest at the
/// entry CPU_ON gave. It waits in `WFI`, its GIC CPU interface opened to the wake SGI alone
/// (`hypcore::park`, which gives the interface back before the guest runs here), or in `WFE` on a
/// board without a GICv2 to wake it through.
pub fn park(me: usize) -> ! {
    use aarch64_cpu::registers::{ReadWriteable, HCR_EL2};
    let c = &CPUS[me];
    let gic = waker();
    let opened = gic.as_ref().map(|g| {
        let o = hypcore::park::open(g);
        // Physical IRQs to EL2, where they stay masked: a pending one is a WFI wake-up event
        // on every implementation, whatever it does for one routed to a lower level.
        HCR_EL2.modify(HCR_EL2::IMO::SET);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        c.park.offer(o.iface);
        o
    });
    while !c.ready_to_start() {
        if opened.is_some() {
            aarch64_cpu::asm::wfi();
        } else {
            aarch64_cpu::asm::wfe();
        }
    }
    if let (Some(g), Some(o)) = (gic, opened) {
        if c.park.withdraw() {
            // The waker took the offer: its SGI is sent (or about to be); end it here.
            while !c.park.is_sent() {
                core::hint::spin_loop();
            }
        }
        hypcore::park::close(&g, o);
        HCR_EL2.modify(HCR_EL2::IMO::CLEAR);
        c.park.mark_woke();
    }
    // Leave the trap's frames behind: the guest starts over from the top of this CPU's stack.
    let top = rt::start::stack_bounds(me).1;
    // SAFETY: `resume_parked` never returns and takes the CPU index; `top` is this CPU's boot
    // stack top (16-byte aligned), and nothing on the current stack is used again.
    unsafe { rt::start::jump(rt::pc_relative!(resume_parked), top, me) }
}

extern "C" fn resume_parked(me: usize) -> ! {
    crate::el2::start_cpu(me, CPUS[me].entry.load(Ordering::Acquire), CPUS[me].context.load(Ordering::Acquire))
}

fn cpu_on(target: u64, entry: u64, context: u64) -> i64 {
    let guest_cpus = GUEST_CPUS.load(Ordering::Relaxed);
    let Some(idx) = cpu::index_of(target).filter(|&i| Some(i) != crate::cpu::kept_for_hypervisor() && i < guest_cpus)
    else {
        // Not a CPU of the guest (the migration worker is the hypervisor's; `hyp.cpus` left
        // the others out).
        return p::INVALID_PARAMETERS;
    };
    if !guest::is_guest_ram(entry, 4) || !entry.is_multiple_of(4) {
        return p::INVALID_ADDRESS;
    }
    let c = &CPUS[idx];
    if let Err(state) = c.claim_for_start(entry, context) {
        return if state == CpuState::On { p::ALREADY_ON } else { p::ON_PENDING };
    }
    let r = start_physical(idx, target);
    if r != p::SUCCESS {
        c.set_state(CpuState::Off);
    }
    r
}

/// Starts physical CPU `idx` (MPIDR `mpidr`) in the hypervisor's secondary entry
/// (`rt_secondary_main(idx)`): wakes it from [`park`] if the hypervisor already holds it,
/// releases it from the firmware's spin table (`cpu-release-addr`), or asks PSCI firmware.
/// Returns a PSCI status.
pub fn start_physical(idx: usize, mpidr: u64) -> i64 {
    let c = &CPUS[idx];
    if c.released.load(Ordering::Acquire) {
        // A parked CPU (its state is Starting now): wake it, with the SGI if it waits in WFI
        // (`hypcore::park::Handshake`: it offered before it looked at its state).
        if let (Some(g), Some(iface)) = (waker(), c.park.take()) {
            let restore = hypcore::park::send(&g, iface);
            c.park.mark_sent();
            if let Some(ctlr) = restore {
                // The guest had not enabled its distributor: put it back once the CPU woke.
                while !c.park.is_woke() {
                    core::hint::spin_loop();
                }
                gic::v2::Regs::write(&g, gic::v2::Reg::DCtlr, ctlr);
            }
        }
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
        aarch64_cpu::asm::sev();
        return p::SUCCESS;
    }
    if c.release_addr.load(Ordering::Relaxed) != 0 {
        release_from_spin_table(idx, mpidr);
        return p::SUCCESS;
    }
    if !has_firmware() {
        return p::INTERNAL_FAILURE;
    }
    smccc::smc(p::CPU_ON_64, mpidr, rt::start::secondary_entry_addr() as u64, idx as u64)[0] as i64
}

/// Releases physical CPU `idx` (MPIDR `mpidr`) from the firmware's spin table into the
/// hypervisor's secondary entry; from then on the hypervisor keeps it.
fn release_from_spin_table(idx: usize, mpidr: u64) {
    let c = &CPUS[idx];
    let release = c.release_addr.load(Ordering::Relaxed);
    rt::start::set_spin_mpidr(idx, mpidr & rt::MPIDR_AFF_MASK);
    c.released.store(true, Ordering::Release);
    let entry = rt::start::spin_entry_addr() as u64;
    // SAFETY: `release` is the CPU's cpu-release-addr in the firmware's spin-table memory,
    // mapped at EL2 by mmu::setup and kept out of the guest's RAM; the firmware's loop
    // reads it (MMU off) and jumps there. 8-byte aligned as the binding requires.
    unsafe { core::ptr::write_volatile(release as *mut u64, entry) };
    rt::cache::clean_to_poc(release, 8);
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    aarch64_cpu::asm::sev();
}
