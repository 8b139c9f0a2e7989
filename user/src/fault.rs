//! Probing memory from EL0: one load or store that may fault, with the fault caught by this
//! task's fault handler (`abi::syscall::nr::FAULT_HANDLER`) and the instruction skipped.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// A caught fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The faulting address (FAR).
    pub addr: u64,
    /// ESR_EL1 as the kernel saw it.
    pub esr: u64,
    /// The faulting instruction.
    pub pc: u64,
}

impl Fault {
    /// Permission fault (as opposed to translation, ...).
    pub fn is_permission(&self) -> bool {
        abi::esr::FaultStatus::of(self.esr).is_permission()
    }
    /// Translation fault.
    pub fn is_translation(&self) -> bool {
        abi::esr::FaultStatus::of(self.esr).is_translation()
    }
    /// A data abort on a write (ISS.WnR).
    pub fn is_write(&self) -> bool {
        self.esr & (1 << 6) != 0
    }
}

/// One task's probe state; register it with [`Prober::install`] (per task: handlers are).
#[derive(Default)]
pub struct Prober {
    faulted: AtomicBool,
    addr: AtomicU64,
    esr: AtomicU64,
    pc: AtomicU64,
    /// Faults caught so far.
    pub count: AtomicU64,
}

extern "C" fn on_fault(addr: u64, esr: u64, pc: u64, cookie: u64) -> ! {
    // SAFETY: the cookie is the `Prober` this task installed, which outlives its probes.
    let p = unsafe { &*(cookie as *const Prober) };
    p.addr.store(addr, Ordering::Relaxed);
    p.esr.store(esr, Ordering::Relaxed);
    p.pc.store(pc, Ordering::Relaxed);
    p.count.fetch_add(1, Ordering::Relaxed);
    p.faulted.store(true, Ordering::Release);
    // An instruction abort faulted on the fetch of a call's target: return to the caller. A
    // data abort: skip the load or store.
    let instruction_abort = abi::esr::class(esr) == abi::esr::EC_IABT_LOWER;
    let how = if instruction_abort { abi::syscall::RETURN_TO_LR } else { abi::syscall::SKIP };
    // A mode the kernel does not know is refused with the fault still pending (one that took
    // it would retry the faulting instruction, and this handler would run again, forever).
    if crate::sys::fault_return(u64::MAX) != Err(abi::syscall::errno::EINVAL) {
        crate::sys::exit(103)
    }
    let _ = crate::sys::fault_return(how);
    crate::sys::exit(102)
}

impl Prober {
    /// A prober with nothing caught.
    pub const fn new() -> Self {
        Prober {
            faulted: AtomicBool::new(false),
            addr: AtomicU64::new(0),
            esr: AtomicU64::new(0),
            pc: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Registers this prober as the calling task's fault handler.
    pub fn install(&'static self) -> Result<u64, i64> {
        crate::sys::fault_handler(on_fault as *const () as u64, self as *const Prober as u64)
    }

    fn result(&self) -> Result<(), Fault> {
        if self.faulted.swap(false, Ordering::Acquire) {
            Err(Fault {
                addr: self.addr.load(Ordering::Relaxed),
                esr: self.esr.load(Ordering::Relaxed),
                pc: self.pc.load(Ordering::Relaxed),
            })
        } else {
            Ok(())
        }
    }

    /// Stores `v` at `addr` once (skipped if it faults).
    pub fn write(&self, addr: u64, v: u64) -> Result<(), Fault> {
        self.faulted.store(false, Ordering::Relaxed);
        #[cfg(target_arch = "aarch64")]
        // SAFETY: one 8-byte store to an address the caller chose as a test target; a fault is
        // caught by the handler, which resumes after this single instruction.
        unsafe {
            core::arch::asm!("str {v}, [{a}]", v = in(reg) v, a = in(reg) addr, options(nostack, preserves_flags))
        };
        #[cfg(not(target_arch = "aarch64"))]
        let _ = (addr, v);
        self.result()
    }

    /// Loads 8 bytes at `addr` once (0 if it faults).
    pub fn read(&self, addr: u64) -> Result<u64, Fault> {
        self.faulted.store(false, Ordering::Relaxed);
        let v: u64;
        #[cfg(target_arch = "aarch64")]
        // SAFETY: one 8-byte load from a test target; a fault is caught and skipped, leaving the
        // register as zeroed before.
        unsafe {
            core::arch::asm!("mov {v}, xzr", "ldr {v}, [{a}]", v = out(reg) v, a = in(reg) addr, options(nostack, preserves_flags))
        };
        #[cfg(not(target_arch = "aarch64"))]
        {
            v = addr;
        }
        self.result().map(|()| v)
    }

    /// Calls `addr`, which must hold a lone `RET`, or faults (the handler skips the branch).
    pub fn exec(&self, addr: u64) -> Result<(), Fault> {
        self.faulted.store(false, Ordering::Relaxed);
        #[cfg(target_arch = "aarch64")]
        // SAFETY: branches with link to a `RET` the test wrote (or that must fault: the handler
        // then resumes after the BLR, with x30 as the kernel saved it). Every caller-saved
        // register is declared clobbered.
        unsafe {
            core::arch::asm!("blr {a}", a = in(reg) addr, clobber_abi("C"), options(nostack))
        };
        #[cfg(not(target_arch = "aarch64"))]
        let _ = addr;
        self.result()
    }
}
