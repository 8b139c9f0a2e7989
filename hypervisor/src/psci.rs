//! PSCI for the guest. vCPU n runs on physical CPU n, so most calls are forwarded to the
//! firmware after checking their arguments; CPU_ON is rewritten so the physical CPU starts in
//! the hypervisor (which sets up EL2 and then enters the guest at the requested address), and
//! SYSTEM_OFF (success) / SYSTEM_RESET (its own exit code: a reset is not a power-off) end the
//! run.

use crate::cpu::{self, CpuState, CPUS};
use crate::{exit, guest, smccc};
use abi::psci as p;
use core::sync::atomic::Ordering;

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
    if power_state & 0xfc7e_0000 != 0 || power_state & (1 << 16) != 0 {
        return p::INVALID_PARAMETERS;
    }
    p::SUCCESS
}

/// Handles one PSCI call (`fid` is W0; a 32-bit call's arguments are W1..W3); returns x0..x3.
pub fn handle(fid: u64, a: [u64; 3]) -> [u64; 4] {
    let fid = fid & 0xffff_ffff;
    match fid {
        p::VERSION | p::MIGRATE_INFO_TYPE | p::AFFINITY_INFO_32 | p::AFFINITY_INFO_64 => {
            // Harmless queries: the firmware's answer is the truth.
            smccc::smc(fid, a[0], a[1], a[2])
        }
        p::FEATURES => ret(features(a[0])),
        p::CPU_SUSPEND_32 | p::CPU_SUSPEND_64 => ret(cpu_suspend(a[0])),
        p::CPU_ON_32 | p::CPU_ON_64 => ret(cpu_on(a[0], a[1], a[2])),
        p::CPU_OFF => {
            CPUS[cpu::current()].set_state(CpuState::Off);
            let r = smccc::smc(fid, 0, 0, 0);
            // CPU_OFF only returns on failure.
            CPUS[cpu::current()].set_state(CpuState::On);
            r
        }
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

fn cpu_on(target: u64, entry: u64, context: u64) -> i64 {
    let Some(idx) = cpu::index_of(target).filter(|&i| Some(i) != crate::migrate::worker_cpu()) else {
        // Not a CPU of the guest (the migration worker is the hypervisor's).
        return p::INVALID_PARAMETERS;
    };
    if !guest::is_guest_ram(entry, 4) || !entry.is_multiple_of(4) {
        return p::INVALID_ADDRESS;
    }
    let c = &CPUS[idx];
    if let Err(state) = c.claim_for_start() {
        return if state == CpuState::On { p::ALREADY_ON } else { p::ON_PENDING };
    }
    c.entry.store(entry, Ordering::Relaxed);
    c.context.store(context, Ordering::Relaxed);
    let r = smccc::smc(p::CPU_ON_64, target, rt::start::secondary_entry_addr() as u64, idx as u64)[0] as i64;
    if r != p::SUCCESS {
        c.set_state(CpuState::Off);
    }
    r
}
