//! Expected memory faults: probes that touch an address once and report whether the access
//! faulted, for the permission tests (permission and translation faults) and the stray-access
//! test (the synchronous external abort the hypervisor injects). A probe arms the catcher; the exception handler then
//! counts a permission or translation fault at EL1 instead of treating it as fatal, and resumes:
//! after the faulting load/store (ELR + 4), or, for an instruction fetch, at the probe's return
//! address (the probe branched there with `BLR`, so x30 holds it). Unarmed, or any other
//! exception, stays fatal.

use core::sync::atomic::{AtomicU64, Ordering};
use rt::esr::FaultStatus;
use rt::TrapFrame;

/// MPIDR + 1 of the CPU whose probe is armed, 0 when none: a fault on any other CPU stays fatal.
static ARMED_BY: AtomicU64 = AtomicU64::new(0);
static LAST_ESR: AtomicU64 = AtomicU64::new(0);
static LAST_FAR: AtomicU64 = AtomicU64::new(0);

/// Faults caught, by kind.
pub static WRITE_FAULTS: AtomicU64 = AtomicU64::new(0);
pub static READ_FAULTS: AtomicU64 = AtomicU64::new(0);
pub static EXEC_FAULTS: AtomicU64 = AtomicU64::new(0);

/// ESR exception classes: instruction / data abort taken without a change of EL.
const EC_IABT_CUR: u8 = 0x21;
const EC_DABT_CUR: u8 = 0x25;

/// A caught fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    pub esr: u64,
    pub far: u64,
}

impl Fault {
    /// Fault status code (DFSC / IFSC).
    pub fn fsc(&self) -> u8 {
        rt::esr::fault_status(self.esr)
    }
    /// Permission fault (any level).
    pub fn is_permission(&self) -> bool {
        FaultStatus::of(self.esr).is_permission()
    }
    /// Translation fault (any level).
    pub fn is_translation(&self) -> bool {
        FaultStatus::of(self.esr).is_translation()
    }
    /// Synchronous external abort (not on a table walk): what the hypervisor injects for an
    /// access to memory nobody owns.
    pub fn is_external_abort(&self) -> bool {
        FaultStatus::of(self.esr) == FaultStatus::SyncExternal
    }
    /// A short description.
    pub fn describe(&self) -> &'static str {
        rt::esr::fault_status_name(self.fsc())
    }
}

/// Called first by the exception handler: whether the exception was an expected fault, now
/// counted and resumed past.
pub fn try_catch(frame: &mut TrapFrame, esr: u64, far: u64) -> bool {
    if ARMED_BY.load(Ordering::Acquire) != me() {
        return false;
    }
    let ec = rt::esr::class(esr);
    let expected = matches!(
        FaultStatus::of(esr),
        FaultStatus::Permission(_) | FaultStatus::Translation(_) | FaultStatus::SyncExternal
    );
    if !(ec == EC_IABT_CUR || ec == EC_DABT_CUR) || !expected {
        return false;
    }
    ARMED_BY.store(0, Ordering::Release);
    LAST_ESR.store(esr, Ordering::Relaxed);
    LAST_FAR.store(far, Ordering::Relaxed);
    if ec == EC_IABT_CUR {
        EXEC_FAULTS.fetch_add(1, Ordering::Relaxed);
        frame.elr = frame.x[30];
    } else {
        if rt::esr::is_write(esr) {
            WRITE_FAULTS.fetch_add(1, Ordering::Relaxed);
        } else {
            READ_FAULTS.fetch_add(1, Ordering::Relaxed);
        }
        frame.elr += 4;
    }
    true
}

/// This CPU's MPIDR affinity + 1 (never 0).
fn me() -> u64 {
    rt::mpidr_affinity() + 1
}

/// Arms the catcher for this CPU. One probe at a time in the whole system (the tests run on
/// one CPU).
fn arm() {
    LAST_ESR.store(0, Ordering::Relaxed);
    ARMED_BY.store(me(), Ordering::Release);
}

fn disarm() -> Result<(), Fault> {
    let was_armed = ARMED_BY.swap(0, Ordering::AcqRel) == me();
    if was_armed {
        Ok(())
    } else {
        Err(Fault { esr: LAST_ESR.load(Ordering::Relaxed), far: LAST_FAR.load(Ordering::Relaxed) })
    }
}

/// Stores `v` at `addr` once; `Err` with the fault if it faulted (the store did not happen).
pub fn probe_write(addr: u64, v: u64) -> Result<(), Fault> {
    arm();
    // SAFETY: one 8-byte store to `addr`, which the caller chose as a test target it owns or
    // that must fault; a fault is caught by `try_catch` and resumes at the next instruction.
    unsafe { core::arch::asm!("str {v}, [{a}]", v = in(reg) v, a = in(reg) addr, options(nostack, preserves_flags)) };
    disarm()
}

/// Loads 8 bytes at `addr` once.
pub fn probe_read(addr: u64) -> Result<u64, Fault> {
    let v: u64;
    arm();
    // SAFETY: one 8-byte load from `addr` (a test target); a fault is caught by `try_catch` and
    // resumes at the next instruction, leaving `v` undefined but initialised (a register).
    unsafe {
        core::arch::asm!("mov {v}, xzr", "ldr {v}, [{a}]", v = out(reg) v, a = in(reg) addr, options(nostack, preserves_flags))
    };
    disarm().map(|()| v)
}

/// Loads 4 bytes at `addr` once (a device register that takes only 32-bit accesses).
pub fn probe_read32(addr: u64) -> Result<u32, Fault> {
    let v: u32;
    arm();
    // SAFETY: one 4-byte load from `addr` (a test target); a fault is caught by `try_catch` and
    // resumes at the next instruction, leaving `v` undefined but initialised (a register).
    unsafe {
        core::arch::asm!("mov {v:w}, wzr", "ldr {v:w}, [{a}]", v = out(reg) v, a = in(reg) addr, options(nostack, preserves_flags))
    };
    disarm().map(|()| v)
}

/// Calls the code at `addr`, which must be a leaf function that only returns (`RET`).
pub fn probe_exec(addr: u64) -> Result<(), Fault> {
    arm();
    // SAFETY: branches with link to `addr`, which holds a lone `RET` written by the test (or
    // must fault); an instruction abort is caught by `try_catch`, which resumes at x30, right
    // after the BLR. Every caller-saved register is declared clobbered.
    unsafe { core::arch::asm!("blr {a}", a = in(reg) addr, clobber_abi("C"), options(nostack)) };
    disarm()
}

/// Makes instructions written through the data side at `[va, va + len)` visible to
/// instruction fetch (clean to PoU, invalidate the I-cache, barriers).
pub fn sync_icache(va: u64, len: u64) {
    rt::cache::sync_icache(va, len);
}
