//! PSCI for the guest, the decisions that touch no hardware: which function ids are PSCI, what
//! PSCI_FEATURES answers, CPU_SUSPEND's check of its power state, the hypervisor's own answers
//! where there is no firmware (VERSION, MIGRATE_INFO_TYPE, AFFINITY_INFO from a CPU's state),
//! CPU_ON's checks, and the life cycle of a CPU the guest starts ([`CpuStart`]: Off -> Starting
//! -> On, the entry and context written before the CPU can see Starting). `hypervisor/src/psci.rs`
//! makes the calls and the side effects.

use crate::sync::{AtomicU64, AtomicU8, Ordering};
use abi::psci as p;

/// Whether `fid` (W0) is in the PSCI range: SMCCC standard secure service calls
/// 0x8400_0000-0x8400_001F and their SMC64 forms 0xC400_0000-0xC400_001F.
pub fn is_psci(fid: u64) -> bool {
    let f = fid & 0xffff_ffff;
    (0x8400_0000..=0x8400_001f).contains(&f) || (0xc400_0000..=0xc400_001f).contains(&f)
}

/// PSCI_FEATURES: 0 for every function the hypervisor implements (CPU_SUSPEND: 0 = the original
/// power_state format, no OS-initiated mode), NOT_SUPPORTED for the others. SMCCC_VERSION is
/// reported as implemented (that is how a guest learns SMCCC 1.1 is there).
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

/// CPU_SUSPEND (original power_state format): a standby state is entered and left at once (as
/// a WFI may complete at once: the wake-up may come immediately, and the guest idles with its
/// own WFI); a power-down state is not supported (INVALID_PARAMETERS, as PSCI answers for a
/// state the platform does not have), nor is any reserved bit set (31:26, 23:17).
pub fn cpu_suspend(power_state: u64) -> i64 {
    // Bits 31:26 and 23:17 are reserved (zero); bit 16 is the state type (1 = power down).
    if power_state & 0xfcfe_0000 != 0 || power_state & (1 << 16) != 0 {
        return p::INVALID_PARAMETERS;
    }
    p::SUCCESS
}

/// Life cycle of a CPU as the hypervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CpuState {
    /// Not running the guest (never started, or stopped by CPU_OFF).
    Off = 0,
    /// CPU_ON accepted, the CPU has not reached the guest yet.
    Starting = 1,
    /// Running the guest.
    On = 2,
}

/// The state between a CPU_ON's claim and its entry being written (reads as Starting).
const CLAIMED: u8 = 3;

/// PSCI AFFINITY_INFO's answer for one CPU in `state`.
pub fn affinity_info(state: CpuState) -> i64 {
    match state {
        CpuState::On => p::AFFINITY_ON,
        CpuState::Off => p::AFFINITY_OFF,
        CpuState::Starting => p::AFFINITY_ON_PENDING,
    }
}

/// The hypervisor's own answer where no firmware answers: PSCI 1.0, no Trusted OS to migrate
/// (MIGRATE_INFO_TYPE 2), AFFINITY_INFO of one CPU (lowest level 0 only) from `state_of` (the
/// state of the CPU with that MPIDR, `None` for no such CPU). `a` are the call's x1..x3.
pub fn own_answer(fid: u64, a: [u64; 3], state_of: impl Fn(u64) -> Option<CpuState>) -> i64 {
    match fid & 0xffff_ffff {
        p::VERSION => p::VERSION_1_0 as i64,
        p::MIGRATE_INFO_TYPE => p::MIGRATE_INFO_TYPE_NOT_PRESENT,
        p::AFFINITY_INFO_32 | p::AFFINITY_INFO_64 => {
            if a[1] != 0 {
                // Only affinity level 0 (one CPU) is answered.
                return p::INVALID_PARAMETERS;
            }
            state_of(a[0]).map_or(p::INVALID_PARAMETERS, affinity_info)
        }
        _ => p::NOT_SUPPORTED,
    }
}

/// What CPU_ON is asked for, as the hypervisor finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuOn {
    /// The number of the CPU whose MPIDR is the target (`None`: no such CPU).
    pub target: Option<usize>,
    /// The CPU the hypervisor keeps for itself (`hyp.migrate`'s worker), if any.
    pub kept: Option<usize>,
    /// CPUs the guest has: the first this many of the DTB (`hyp.cpus`).
    pub guest_cpus: usize,
    /// The entry point.
    pub entry: u64,
    /// Whether the entry's first instruction (4 bytes from `entry`) is in the guest's RAM.
    pub entry_in_ram: bool,
}

impl CpuOn {
    /// CPU_ON's checks, in PSCI's order: the target is a CPU of the guest (INVALID_PARAMETERS
    /// otherwise: no such CPU, the CPU the hypervisor keeps, one past the guest's), then the
    /// entry is a 4-byte aligned address in its RAM (INVALID_ADDRESS). Returns the CPU number.
    /// Whether it is off is [`CpuStart::claim`]'s.
    pub fn check(&self) -> Result<usize, i64> {
        let idx = self.target.filter(|&i| Some(i) != self.kept && i < self.guest_cpus).ok_or(p::INVALID_PARAMETERS)?;
        if !self.entry_in_ram || !self.entry.is_multiple_of(4) {
            return Err(p::INVALID_ADDRESS);
        }
        Ok(idx)
    }
}

/// One CPU's start: its [`CpuState`], and the entry point and context id CPU_ON gave. The CPU
/// that handles CPU_ON claims it ([`Self::claim`]); the CPU itself, waiting to be started,
/// looks at [`Self::ready_to_start`] and then reads [`Self::entry`].
#[derive(Debug, Default)]
pub struct CpuStart {
    state: AtomicU8,
    entry: AtomicU64,
    context: AtomicU64,
}

impl CpuStart {
    /// Off, no entry.
    pub const fn new() -> Self {
        CpuStart { state: AtomicU8::new(0), entry: AtomicU64::new(0), context: AtomicU64::new(0) }
    }

    /// The state now. Sequentially consistent, as [`Self::claim`]: a parked CPU offers its
    /// wake-up, then reads this; the CPU that starts it claims, then takes the offer
    /// ([`crate::park::Handshake`]), so one of them sees the other. A CPU claimed by a CPU_ON
    /// whose entry is not written yet reads as Starting.
    pub fn state(&self) -> CpuState {
        match self.state.load(Ordering::SeqCst) {
            0 => CpuState::Off,
            1 | CLAIMED => CpuState::Starting,
            _ => CpuState::On,
        }
    }

    /// Whether a CPU_ON's entry and context are written, so the CPU may start: what a CPU
    /// waiting to be started looks at (sequentially consistent: the entry written before is
    /// visible once this is true).
    pub fn ready_to_start(&self) -> bool {
        self.state.load(Ordering::SeqCst) == CpuState::Starting as u8
    }

    /// The entry point and context id of the CPU_ON that started it (read once
    /// [`Self::ready_to_start`] said so).
    pub fn entry(&self) -> (u64, u64) {
        (self.entry.load(Ordering::Acquire), self.context.load(Ordering::Acquire))
    }

    /// Sets the state (the CPU reached the guest: On; CPU_OFF, or a start that failed: Off).
    pub fn set_state(&self, s: CpuState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// CPU_ON: moves Off -> Starting with the guest's entry and context id, both written before
    /// the CPU can see Starting ([`Self::ready_to_start`]). A CPU that is not off is left as it
    /// is, nothing written: ALREADY_ON when it runs, ON_PENDING when another CPU_ON started it.
    pub fn claim(&self, entry: u64, context: u64) -> Result<(), i64> {
        self.state.compare_exchange(CpuState::Off as u8, CLAIMED, Ordering::SeqCst, Ordering::SeqCst).map_err(|s| {
            if s == CpuState::On as u8 {
                p::ALREADY_ON
            } else {
                p::ON_PENDING
            }
        })?;
        self.entry.store(entry, Ordering::Relaxed);
        self.context.store(context, Ordering::Relaxed);
        self.state.store(CpuState::Starting as u8, Ordering::SeqCst);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
