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

/// Once the EL2 tables are built (before the guest is loaded), on a board whose CPUs wait in a
/// firmware spin table and which has a GIC to wake them through: takes the other CPUs into the
/// hypervisor now, where they wait in [`park`]
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

pub use hypcore::psci::{features, is_psci};

fn ret(v: i64) -> [u64; 4] {
    [v as u64, 0, 0, 0]
}

/// The hypervisor's own answers where there is no firmware to ask (`hypcore::psci::own_answer`,
/// AFFINITY_INFO from the hypervisor's CPU states).
fn own_answer(fid: u64, a: [u64; 3]) -> i64 {
    hypcore::psci::own_answer(fid, a, |mpidr| cpu::index_of(mpidr).map(|i| CPUS[i].state()))
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
        p::CPU_SUSPEND_32 | p::CPU_SUSPEND_64 => ret(hypcore::psci::cpu_suspend(a[0])),
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
    use hypcore::park::Action;
    let c = &CPUS[me];
    let gic = waker();
    let mut parked = hypcore::park::Parked::new(&c.start, &c.park);
    loop {
        match parked.step(gic.as_ref()) {
            Action::Next => {}
            Action::RouteIrqsToEl2(true) => HCR_EL2.modify(HCR_EL2::IMO::SET),
            Action::RouteIrqsToEl2(false) => HCR_EL2.modify(HCR_EL2::IMO::CLEAR),
            Action::Isb => aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY),
            Action::Wfi => aarch64_cpu::asm::wfi(),
            Action::Wfe => aarch64_cpu::asm::wfe(),
            Action::Spin => core::hint::spin_loop(),
            Action::Dsb => aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY),
            Action::Sev => aarch64_cpu::asm::sev(),
            // Read again on the fresh stack (`resume_parked`).
            Action::Enter { .. } => break,
            Action::Done => unreachable!("a parked CPU ends by entering the guest"),
        }
    }
    // Leave the trap's frames behind: the guest starts over from the top of this CPU's stack.
    let top = rt::start::stack_bounds(me).1;
    // SAFETY: `resume_parked` never returns and takes the CPU index; `top` is this CPU's boot
    // stack top (16-byte aligned), and nothing on the current stack is used again.
    unsafe { rt::start::jump(rt::pc_relative!(resume_parked), top, me) }
}

extern "C" fn resume_parked(me: usize) -> ! {
    let (entry, context) = CPUS[me].start.entry();
    crate::el2::start_cpu(me, entry, context)
}

fn cpu_on(target: u64, entry: u64, context: u64) -> i64 {
    let on = hypcore::psci::CpuOn {
        target: cpu::index_of(target),
        kept: crate::cpu::kept_for_hypervisor(),
        guest_cpus: GUEST_CPUS.load(Ordering::Relaxed),
        entry,
        entry_in_ram: guest::is_guest_ram(entry, 4),
    };
    let idx = match on.check() {
        Ok(i) => i,
        Err(e) => return e,
    };
    let c = &CPUS[idx];
    if let Err(e) = c.start.claim(entry, context) {
        return e;
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
        // (`hypcore::park::Waker`: it offered before it looked at its state).
        use hypcore::park::Action;
        let gic = waker();
        let mut w = hypcore::park::Waker::new(&c.park);
        loop {
            match w.step(gic.as_ref()) {
                Action::Next => {}
                Action::Spin => core::hint::spin_loop(),
                Action::Dsb => aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY),
                Action::Sev => aarch64_cpu::asm::sev(),
                Action::Done => break,
                other => unreachable!("the waker does not {other:?}"),
            }
        }
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
    use hypcore::park::Release;
    let c = &CPUS[idx];
    let release = c.release_addr.load(Ordering::Relaxed);
    for step in hypcore::park::SPIN_RELEASE {
        match step {
            Release::SpinMpidr => rt::start::set_spin_mpidr(idx, mpidr & rt::MPIDR_AFF_MASK),
            Release::MarkReleased => c.released.store(true, Ordering::Release),
            // SAFETY: `release` is the CPU's cpu-release-addr in the firmware's spin-table
            // memory, mapped at EL2 by mmu::setup and kept out of the guest's RAM; the
            // firmware's loop reads it (MMU off) and jumps there. 8-byte aligned as the binding
            // requires.
            Release::WriteEntry => unsafe {
                core::ptr::write_volatile(release as *mut u64, rt::start::spin_entry_addr() as u64)
            },
            Release::CleanToPoc => rt::cache::clean_to_poc(release, 8),
            Release::Dsb => aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY),
            Release::Sev => aarch64_cpu::asm::sev(),
        }
    }
}
