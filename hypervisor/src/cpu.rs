//! Per-CPU state: which physical CPU runs which vCPU, and where a started vCPU enters the guest.

use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use rt::{MAX_CPUS, MPIDR_AFF_MASK};

/// Life cycle of a CPU as the hypervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CpuState {
    Off = 0,
    /// CPU_ON accepted, the CPU has not reached the guest yet.
    Starting = 1,
    /// Running the guest.
    On = 2,
}

/// What one CPU needs when it starts.
pub struct PerCpu {
    state: AtomicU8,
    /// MPIDR affinity (Aff3..Aff0) of this physical CPU.
    pub mpidr: AtomicU64,
    /// Guest entry point and context id given to PSCI CPU_ON.
    pub entry: AtomicU64,
    pub context: AtomicU64,
}

impl PerCpu {
    const fn new() -> Self {
        Self {
            state: AtomicU8::new(0),
            mpidr: AtomicU64::new(u64::MAX),
            entry: AtomicU64::new(0),
            context: AtomicU64::new(0),
        }
    }

    pub fn set_state(&self, s: CpuState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// Moves Off -> Starting; false if the CPU was not off (PSCI: ALREADY_ON / ON_PENDING).
    pub fn claim_for_start(&self) -> Result<(), CpuState> {
        self.state
            .compare_exchange(CpuState::Off as u8, CpuState::Starting as u8, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
            .map_err(|s| if s == CpuState::On as u8 { CpuState::On } else { CpuState::Starting })
    }
}

/// Index = CPU number (DTB order); the boot CPU is whichever matches MPIDR at boot.
pub static CPUS: [PerCpu; MAX_CPUS] = [const { PerCpu::new() }; MAX_CPUS];

/// This CPU's MPIDR affinity.
pub fn current_mpidr() -> u64 {
    rt::mpidr_affinity()
}

/// CPU number of an MPIDR, if the board has that CPU.
pub fn index_of(mpidr: u64) -> Option<usize> {
    CPUS.iter().position(|c| c.mpidr.load(Ordering::Relaxed) == mpidr & MPIDR_AFF_MASK)
}

/// This CPU's number.
pub fn current() -> usize {
    index_of(current_mpidr()).unwrap_or(0)
}
