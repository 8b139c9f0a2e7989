//! Per-CPU state: which physical CPU runs which vCPU, and where a started vCPU enters the guest.

use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use rt::{MAX_CPUS, MPIDR_AFF_MASK};

pub use hypcore::psci::CpuState;

/// What one CPU needs when it starts.
pub struct PerCpu {
    /// Off / Starting / On, and where a CPU_ON enters the guest (`hypcore::psci::CpuStart`:
    /// the entry is written before the CPU can see it may start).
    pub start: hypcore::psci::CpuStart,
    /// MPIDR affinity (Aff3..Aff0) of this physical CPU.
    pub mpidr: AtomicU64,
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
            start: hypcore::psci::CpuStart::new(),
            mpidr: AtomicU64::new(u64::MAX),
            release_addr: AtomicU64::new(0),
            released: AtomicBool::new(false),
            park: hypcore::park::Handshake::new(),
        }
    }

    /// The state now.
    pub fn state(&self) -> CpuState {
        self.start.state()
    }

    /// Whether a CPU_ON's entry and context are written, so the CPU may start.
    pub fn ready_to_start(&self) -> bool {
        self.start.ready_to_start()
    }

    pub fn set_state(&self, s: CpuState) {
        self.start.set_state(s)
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
