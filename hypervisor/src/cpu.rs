//! Per-CPU state: which physical CPU runs which vCPU, and where a started vCPU enters the guest.

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
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
    /// The spin-table `cpu-release-addr` this CPU waits on in the firmware (0: started by
    /// PSCI firmware instead).
    pub release_addr: AtomicU64,
    /// Set once the CPU left the firmware's spin loop: from then on the hypervisor keeps it
    /// (a guest CPU_OFF parks it in [`crate::psci::park`]).
    pub released: AtomicBool,
    /// Where this CPU, parked in WFI, and the CPU that starts it meet.
    pub park: hypcore::park::Handshake,
}

impl PerCpu {
    const fn new() -> Self {
        Self {
            state: AtomicU8::new(0),
            mpidr: AtomicU64::new(u64::MAX),
            entry: AtomicU64::new(0),
            context: AtomicU64::new(0),
            release_addr: AtomicU64::new(0),
            released: AtomicBool::new(false),
            park: hypcore::park::Handshake::new(),
        }
    }

    /// The state now. Sequentially consistent, as [`Self::claim_for_start`]: a parked CPU
    /// offers its wake-up, then reads this; the CPU that starts it claims, then takes the offer
    /// (`hypcore::park::Handshake`), so one of them sees the other. A CPU claimed by a CPU_ON
    /// whose entry is not written yet reads as Starting.
    pub fn state(&self) -> CpuState {
        match self.state.load(Ordering::SeqCst) {
            0 => CpuState::Off,
            1 | CLAIMED => CpuState::Starting,
            _ => CpuState::On,
        }
    }

    /// Whether a CPU_ON's entry and context are written, so the CPU may start: what a CPU
    /// waiting to be started looks at (Acquire: the entry written before is visible).
    pub fn ready_to_start(&self) -> bool {
        self.state.load(Ordering::SeqCst) == CpuState::Starting as u8
    }

    pub fn set_state(&self, s: CpuState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// CPU_ON: moves Off -> Starting with the guest's entry and context id, written before the
    /// CPU can see it Starting ([`Self::ready_to_start`]); the CPU's state if it was not off
    /// (PSCI: ALREADY_ON / ON_PENDING), nothing written then.
    pub fn claim_for_start(&self, entry: u64, context: u64) -> Result<(), CpuState> {
        self.state.compare_exchange(CpuState::Off as u8, CLAIMED, Ordering::SeqCst, Ordering::SeqCst).map_err(|s| {
            if s == CpuState::On as u8 {
                CpuState::On
            } else {
                CpuState::Starting
            }
        })?;
        self.entry.store(entry, Ordering::Relaxed);
        self.context.store(context, Ordering::Relaxed);
        self.state.store(CpuState::Starting as u8, Ordering::SeqCst);
        Ok(())
    }
}

/// The state between a CPU_ON's claim and its entry being written (reads as Starting).
const CLAIMED: u8 = 3;

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

/// Per CPU, the guest's PC at its last exit to the hypervisor (ELR_EL2), 0 before the first:
/// when a run hangs, the xtask reads this table (its address is in the `hyp_boot` record) for
/// each CPU it finds inside the hypervisor (`xtask/src/qmp.rs`).
pub static GUEST_PCS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// Makes `cpu`'s [`GUEST_PCS`] slot this CPU's (TPIDR_EL2 holds its address, so noting a PC
/// on every exit costs a register read and a store).
pub fn set_guest_pc_slot(cpu: usize) {
    use aarch64_cpu::registers::{Writeable, TPIDR_EL2};
    if let Some(slot) = GUEST_PCS.get(cpu) {
        TPIDR_EL2.set(slot.as_ptr() as u64);
    }
}

/// Records `elr` as this CPU's guest PC.
#[inline(always)]
pub fn note_guest_pc(elr: u64) {
    use aarch64_cpu::registers::{Readable, TPIDR_EL2};
    let slot = TPIDR_EL2.get() as *const AtomicU64;
    if !slot.is_null() {
        // SAFETY: TPIDR_EL2 is 0 or the address of this CPU's GUEST_PCS slot (a static),
        // written only by set_guest_pc_slot.
        unsafe { (*slot).store(elr, Ordering::Relaxed) };
    }
}

/// The CPU the hypervisor keeps for itself (`hyp.migrate`'s worker), never started for the
/// guest (`usize::MAX`: none).
static KEPT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Keeps CPU `idx` for the hypervisor: a guest CPU_ON to it is refused.
pub fn keep_for_hypervisor(idx: usize) {
    KEPT.store(idx, Ordering::Release);
}

/// The CPU the hypervisor keeps, if any.
pub fn kept_for_hypervisor() -> Option<usize> {
    let k = KEPT.load(Ordering::Acquire);
    (k != usize::MAX).then_some(k)
}
