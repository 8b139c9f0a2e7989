//! Lazy switching of the tasks' EL0 FP/SIMD state (q0-q31, FPSR, FPCR): every decision of it,
//! generic over the task and over one CPU's FP hardware ([`FpRegs`]), so the host tests play
//! it with simulated registers. The kernel keeps the registers and the trap.
//!
//! A switch does not touch the FP/SIMD registers. Each CPU has an **owner**: the task whose EL0
//! state its registers hold (maybe newer than the task's memory copy); each task has a
//! **home** ([`FpHome`]): the CPU that owns its state, or none (its memory copy is the truth).
//! `owner(c) == t` exactly when `home(t) == c`. EL0's FP/SIMD access (CPACR_EL1.FPEN; EL1 is
//! never trapped) is on only while the running task is its CPU's owner; otherwise its first
//! FP/SIMD instruction traps ([`FpOwners::trap`]): the owner's state is saved into its memory,
//! the task's loaded, the task becomes the owner. A yield between tasks that do not touch
//! FP/SIMD costs nothing for it, and a task that runs again on the CPU it owns finds its state
//! in place.
//!
//! # The rules (each stated by a host test, `tests.rs`)
//!
//! 1. **A task leaves its home only flushed.** A task whose state lives in a CPU's registers
//!    runs nowhere else: a hand-over to another CPU (a new affinity) saves it first
//!    ([`FpOwners::flush`], before the switch lets other CPUs take the task), and another CPU's
//!    balance never pulls it ([`super::SchedTask::regs_on`]).
//! 2. **Saved before released.** The trap saves the old owner's registers before it clears the
//!    owner's home (release ordering): a CPU that then takes the task (acquire, under the queue
//!    lock) loads what was saved.
//! 3. **Access is set on every resume.** [`FpOwners::resume`] runs every time a task's context
//!    runs again after a switch (its first run too): access on if it owns this CPU's
//!    registers, off (trap) otherwise, whichever path switched it out (a yield, a block, a
//!    preemption in the kernel by an IRQ).
//! 4. **Kernel SIMD never spans a switch.** Kernel code may use vector registers only in a
//!    section that cannot be switched out (IRQs masked or the preemption count raised) and
//!    gives back exactly what it used: a switch inside one would let the next owner's trap save
//!    the kernel's temporaries as the owner's EL0 state.
//!
//! A task that ends is forgotten ([`FpOwners::forget`]) before its memory goes; one whose
//! memory copy is read ([`FpOwners::sync`]) or replaced ([`FpOwners::forget`]) by the kernel
//! is brought up to date or disowned first.
//!
//! Every method works on the calling CPU's own state, with IRQs masked (the kernel's switch
//! and trap paths): `cpu` must be the caller's CPU.

use abi::MAX_CPUS;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

/// A home that is no CPU: the state is in memory.
const NO_CPU: usize = usize::MAX;

/// Where a task's FP/SIMD state lives: in the registers of one CPU, or in memory.
#[derive(Debug)]
pub struct FpHome(AtomicUsize);

impl FpHome {
    /// In memory (a new task).
    pub const fn new() -> FpHome {
        FpHome(AtomicUsize::new(NO_CPU))
    }

    /// The CPU whose registers hold the state (None: memory holds it). Acquire: what that CPU
    /// saved before it let go is visible after a None.
    #[inline(always)]
    pub fn cpu(&self) -> Option<usize> {
        let c = self.0.load(Ordering::Acquire);
        (c != NO_CPU).then_some(c)
    }

    #[inline(always)]
    fn set(&self, cpu: Option<usize>) {
        self.0.store(cpu.unwrap_or(NO_CPU), Ordering::Release);
    }
}

impl Default for FpHome {
    fn default() -> Self {
        Self::new()
    }
}

/// What the rules need of a task.
pub trait FpTask {
    /// Its home.
    fn fp_home(&self) -> &FpHome;
}

/// The calling CPU's FP/SIMD hardware.
pub trait FpRegs<T> {
    /// The registers into `t`'s memory copy.
    fn save(&self, t: &T);
    /// `t`'s memory copy into the registers.
    fn load(&self, t: &T);
    /// EL0's FP/SIMD access on (no trap) or off (its first FP/SIMD instruction traps).
    fn el0_access(&self, on: bool);
}

struct CpuFp {
    /// The owner's address (0: none). Only its CPU reads or writes it.
    owner: AtomicUsize,
    /// The EL0 access last set (a CPACR_EL1 write spared when it stays): [`UNKNOWN`] (a CPU's
    /// first setting writes the register whatever it holds), [`OFF`] or [`ON`]. Its CPU's only.
    access: AtomicU8,
}

const UNKNOWN: u8 = 0;
const OFF: u8 = 1;
const ON: u8 = 2;

/// Every CPU's owner.
pub struct FpOwners<T> {
    cpus: [CpuFp; MAX_CPUS],
    _t: PhantomData<fn(&T)>,
}

impl<T> Default for FpOwners<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> FpOwners<T> {
    /// No CPU owns anything.
    pub const fn new() -> Self {
        FpOwners {
            cpus: [const { CpuFp { owner: AtomicUsize::new(0), access: AtomicU8::new(UNKNOWN) } }; MAX_CPUS],
            _t: PhantomData,
        }
    }
}

impl<T: FpTask> FpOwners<T> {
    #[inline(always)]
    fn owns(&self, cpu: usize, t: &T) -> bool {
        self.cpus[cpu].owner.load(Ordering::Relaxed) == t as *const T as usize
    }

    #[inline(always)]
    fn access(&self, cpu: usize, on: bool, hw: &impl FpRegs<T>) {
        let c = &self.cpus[cpu];
        let want = if on { ON } else { OFF };
        if c.access.load(Ordering::Relaxed) != want {
            hw.el0_access(on);
            c.access.store(want, Ordering::Relaxed);
        }
    }

    /// Whether task `t` owns CPU `cpu`'s registers.
    pub fn is_owner(&self, cpu: usize, t: &T) -> bool {
        self.owns(cpu, t)
    }

    /// `t`'s context runs again on `cpu` after a switch (or for the first time): EL0 access on
    /// exactly when it owns the registers (rule 3).
    #[inline(always)]
    pub fn resume(&self, cpu: usize, t: &T, hw: &impl FpRegs<T>) {
        self.access(cpu, self.owns(cpu, t), hw);
    }

    /// `t`, running on `cpu`, used FP/SIMD at EL0 with access off: the owner's state saved and
    /// released (rule 2), `t`'s loaded, `t` the owner, access on.
    ///
    /// # Safety
    ///
    /// Every task that owns a CPU is alive (a task is [`forget`](Self::forget)ten or
    /// [`flush`](Self::flush)ed before its memory goes).
    pub unsafe fn trap(&self, cpu: usize, t: &T, hw: &impl FpRegs<T>) {
        let c = &self.cpus[cpu];
        let me = t as *const T as usize;
        let old = c.owner.load(Ordering::Relaxed);
        if old != me {
            if old != 0 {
                // SAFETY: an owner is alive (the caller's promise).
                let o = unsafe { &*(old as *const T) };
                hw.save(o);
                o.fp_home().set(None);
            }
            debug_assert_eq!(t.fp_home().cpu(), None, "a task ran away from the CPU holding its state");
            hw.load(t);
            c.owner.store(me, Ordering::Relaxed);
            t.fp_home().set(Some(cpu));
        }
        // Written whatever the cache says: a trap means the hardware has access off.
        c.access.store(UNKNOWN, Ordering::Relaxed);
        self.access(cpu, true, hw);
    }

    /// `t` (which ran on `cpu`) is to run on another CPU: its state saved if `cpu` holds it, and
    /// released (rule 1). Access goes off (in case `t` returns to EL0 here first).
    pub fn flush(&self, cpu: usize, t: &T, hw: &impl FpRegs<T>) {
        if self.owns(cpu, t) {
            hw.save(t);
            self.cpus[cpu].owner.store(0, Ordering::Relaxed);
            t.fp_home().set(None);
            self.access(cpu, false, hw);
        }
    }

    /// `t`'s memory copy brought up to date (`t` runs on `cpu`), for the kernel to read it;
    /// the registers stay `t`'s.
    pub fn sync(&self, cpu: usize, t: &T, hw: &impl FpRegs<T>) {
        if self.owns(cpu, t) {
            hw.save(t);
        }
    }

    /// `t`'s registers are no longer its state (it ended, or the kernel replaces its memory
    /// copy; `t` runs on `cpu` or just did): released without a save, access off.
    pub fn forget(&self, cpu: usize, t: &T, hw: &impl FpRegs<T>) {
        if self.owns(cpu, t) {
            self.cpus[cpu].owner.store(0, Ordering::Relaxed);
            t.fp_home().set(None);
            self.access(cpu, false, hw);
        }
    }
}
