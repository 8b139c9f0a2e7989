//! GICv3 (QEMU `virt,gic-version=3`): a distributor, one redistributor per CPU (found by
//! matching GICR_TYPER's affinity with MPIDR), and the CPU interface as ICC_* system registers.
//!
//! Affinity routing is on (ARE); SGIs and PPIs are group 1 (non-secure), configured in each
//! CPU's redistributor; the CPU interface signals group 1 as IRQ. Under the hypervisor,
//! ICC_SRE_EL2.ENABLE lets EL1 use the system-register interface (`hypervisor/src/el2.rs`).

use crate::{Acked, CpuInterface, PRIORITY_MASK, SPURIOUS};
use abi::MAX_CPUS;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// No redistributor's GICR_TYPER affinity matches this CPU's MPIDR ([`GicV3::init_cpu`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRedistributor {
    /// The CPU's MPIDR affinity.
    pub mpidr: u64,
}

impl core::fmt::Display for NoRedistributor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "no GICv3 redistributor for MPIDR {:#x}", self.mpidr)
    }
}

/// The registers the driver uses. A redistributor is named by the address of its RD_base frame
/// (its SGI_base frame follows at +64 KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    /// GICD_CTLR.
    DCtlr,
    /// GICD_TYPER.
    DTyper,
    /// GICD_IGROUPRn.
    DIgroupr(usize),
    /// GICD_ISENABLERn.
    DIsenabler(usize),
    /// GICD_ICENABLERn.
    DIcenabler(usize),
    /// GICD_ICPENDRn (n >= 1: SPIs; with affinity routing banked interrupts are the
    /// redistributor's).
    DIcpendr(usize),
    /// GICD_ICACTIVERn (n >= 1).
    DIcactiver(usize),
    /// GICR_CTLR of the redistributor at this RD_base (its RWP bit).
    RCtlr(usize),
    /// GICR_TYPER (64 bits) of the redistributor at this RD_base.
    RTyper(usize),
    /// GICR_WAKER.
    RWaker(usize),
    /// GICR_IGROUPR0 (SGI_base frame).
    SIgroupr0(usize),
    /// GICR_ISENABLER0.
    SIsenabler0(usize),
    /// GICR_ICENABLER0.
    SIcenabler0(usize),
    /// GICR_ICPENDR0 (SGIs and PPIs).
    SIcpendr0(usize),
    /// GICR_ICACTIVER0.
    SIcactiver0(usize),
    /// GICR_IPRIORITYR, the byte of one banked INTID.
    SIpriority(usize, u32),
    /// ICC_SRE_EL1.
    IccSre,
    /// ICC_PMR_EL1.
    IccPmr,
    /// ICC_BPR1_EL1.
    IccBpr1,
    /// ICC_CTLR_EL1.
    IccCtlr,
    /// ICC_IGRPEN1_EL1.
    IccIgrpen1,
    /// ICC_IAR1_EL1 (read only; reading acknowledges).
    IccIar1,
    /// ICC_EOIR1_EL1 (write only).
    IccEoir1,
    /// ICC_SGI1R_EL1 (write only).
    IccSgi1r,
    /// ICC_AP1Rn_EL1, n < [`active_priority_registers`] (the others are UNDEFINED): group 1
    /// active priorities, a bit per preemption level.
    IccAp1r(usize),
}

/// Register access of one GICv3 from the calling CPU.
pub trait Regs {
    /// Reads `r`.
    fn read(&self, r: Reg) -> u64;
    /// Writes `r`.
    fn write(&self, r: Reg, v: u64);
    /// `DSB ISHST`: orders earlier stores before an SGI.
    fn dsb_ishst(&self);
    /// `ISB`: a system-register write takes effect.
    fn isb(&self);
}

/// GICD_CTLR: ARE_NS (affinity routing), EnableGrp1A, EnableGrp1 (bit 0: group 0 with
/// security disabled), RWP (register write pending).
pub const GICD_CTLR_ARE: u64 = 1 << 4;
/// GICD_CTLR.EnableGrp1A.
pub const GICD_CTLR_ENABLE_G1A: u64 = 1 << 1;
/// GICD_CTLR.EnableGrp1 (bit 0).
pub const GICD_CTLR_ENABLE_G1: u64 = 1 << 0;
/// GICD_CTLR.RWP.
pub const GICD_CTLR_RWP: u64 = 1 << 31;
/// GICR_CTLR.RWP: a write to GICR_ICENABLER0 has not taken effect yet.
pub const GICR_CTLR_RWP: u64 = 1 << 3;
/// ICC_CTLR_EL1.PRIbits, bits [10:8]: priority bits implemented, minus one.
pub const ICC_CTLR_PRIBITS_SHIFT: u32 = 8;
/// GICR_WAKER.ProcessorSleep.
pub const WAKER_PROCESSOR_SLEEP: u64 = 1 << 1;
/// GICR_WAKER.ChildrenAsleep.
pub const WAKER_CHILDREN_ASLEEP: u64 = 1 << 2;
/// GICR_TYPER.Last: the last redistributor of its region.
pub const TYPER_LAST: u64 = 1 << 4;
/// GICR_TYPER.VLPIS: four 64 KiB frames instead of two.
pub const TYPER_VLPIS: u64 = 1 << 1;
/// Size of the RD_base + SGI_base frames.
pub const FRAMES_2: usize = 0x20000;
/// Size with the two VLPI frames.
pub const FRAMES_4: usize = 0x40000;

/// MPIDR affinity as GICR_TYPER[63:32] holds it: Aff3.Aff2.Aff1.Aff0.
pub fn typer_affinity(mpidr: u64) -> u64 {
    ((mpidr >> 8) & 0xff00_0000) | (mpidr & 0xff_ffff)
}

/// ICC_SGI1R_EL1 for SGI `sgi` to the one CPU whose MPIDR is `mpidr`: Aff3/Aff2/Aff1 name its
/// cluster, Aff0 is a bit of the 16-bit target list, in the block of 16 the range selector
/// (RS, bits [47:44]) picks.
pub fn sgi1r(mpidr: u64, sgi: u32) -> u64 {
    let aff0 = mpidr & 0xff;
    let (aff1, aff2, aff3) = ((mpidr >> 8) & 0xff, (mpidr >> 16) & 0xff, (mpidr >> 32) & 0xff);
    (aff3 << 48) | ((aff0 >> 4) << 44) | (aff2 << 32) | ((sgi as u64 & 0xf) << 24) | (aff1 << 16) | (1 << (aff0 & 0xf))
}

/// How many ICC_AP1Rn_EL1 the CPU interface implements, from ICC_CTLR_EL1: one bit per
/// preemption level, and there are at most 7 preemption bits, so 2^min(bits, 7) levels in
/// 32-bit registers, at least one (the architecture: AP1R1 exists with 6 or more priority bits,
/// AP1R2 and AP1R3 with 7 or more; accessing an unimplemented one is UNDEFINED).
pub fn active_priority_registers(icc_ctlr: u64) -> usize {
    let bits = ((icc_ctlr >> ICC_CTLR_PRIBITS_SHIFT) & 7) as u32 + 1;
    ((1usize << bits.min(7)) / 32).max(1)
}

/// A GICv3 driver.
pub struct GicV3<R> {
    regs: R,
    /// Redistributor regions: (RD_base address of the first, bytes).
    regions: Vec<(usize, usize)>,
    /// RD_base of each kernel CPU index (0 until the CPU initialised its interface).
    rd: [AtomicUsize; MAX_CPUS],
    /// MPIDR of each kernel CPU index, for ICC_SGI1R_EL1.
    mpidr: [AtomicU64; MAX_CPUS],
}

impl<R: Regs> GicV3<R> {
    /// A driver over `regs` with these redistributor regions (address, bytes).
    pub fn new(regs: R, regions: Vec<(usize, usize)>) -> Self {
        GicV3 {
            regs,
            regions,
            rd: [const { AtomicUsize::new(0) }; MAX_CPUS],
            mpidr: [const { AtomicU64::new(0) }; MAX_CPUS],
        }
    }

    /// The register access.
    pub fn regs(&self) -> &R {
        &self.regs
    }

    fn wait_rwp(&self) {
        while self.regs.read(Reg::DCtlr) & GICD_CTLR_RWP != 0 {
            core::hint::spin_loop();
        }
    }

    fn wait_rwp_rd(&self, rd: usize) {
        while self.regs.read(Reg::RCtlr(rd)) & GICR_CTLR_RWP != 0 {
            core::hint::spin_loop();
        }
    }

    /// Number of SPI lines + 32 (GICD_TYPER.ITLinesNumber).
    pub fn lines(&self) -> u32 {
        32 * ((self.regs.read(Reg::DTyper) as u32 & 0x1f) + 1)
    }

    /// Boot CPU, before any [`Self::init_cpu`]: distributor off, every SPI disabled, then
    /// deactivated, not pending and group 1, whatever the firmware (or a previous kernel) left;
    /// then on with affinity routing.
    ///
    /// Order: GICD_CTLR = 0 and the ICENABLER writes take effect only once GICD_CTLR.RWP reads
    /// 0, so the SPIs' active and pending state is cleared after that wait: an SPI whose disable
    /// is still on its way could be forwarded (and acknowledged, active again) in between.
    pub fn init_distributor(&self) {
        self.regs.write(Reg::DCtlr, 0);
        self.wait_rwp();
        let words = (self.lines() / 32) as usize;
        for i in 1..words {
            self.regs.write(Reg::DIcenabler(i), u32::MAX as u64);
        }
        self.wait_rwp();
        for i in 1..words {
            self.regs.write(Reg::DIcactiver(i), u32::MAX as u64);
            self.regs.write(Reg::DIcpendr(i), u32::MAX as u64);
            self.regs.write(Reg::DIgroupr(i), u32::MAX as u64);
        }
        self.regs.write(Reg::DCtlr, GICD_CTLR_ARE | GICD_CTLR_ENABLE_G1A | GICD_CTLR_ENABLE_G1);
        self.wait_rwp();
    }

    /// The RD_base whose GICR_TYPER affinity is that of `mpidr`: each region is walked frame by
    /// frame (two or four 64 KiB frames per redistributor) up to the one marked Last.
    pub fn find_rd(&self, mpidr: u64) -> Option<usize> {
        let aff = typer_affinity(mpidr);
        for &(base, size) in &self.regions {
            let mut off = 0;
            while off + FRAMES_2 <= size {
                let typer = self.regs.read(Reg::RTyper(base + off));
                if typer >> 32 == aff {
                    return Some(base + off);
                }
                if typer & TYPER_LAST != 0 {
                    break;
                }
                off += if typer & TYPER_VLPIS != 0 { FRAMES_4 } else { FRAMES_2 };
            }
        }
        None
    }

    /// This CPU (`cpu`, MPIDR `mpidr`), after [`Self::init_distributor`]: finds and wakes its
    /// redistributor, makes its SGIs and PPIs disabled, deactivated, not pending and group 1,
    /// turns on the system-register CPU interface with its group 1 active priorities zeroed, an
    /// open priority mask, EOImode 0 (an EOI also deactivates).
    ///
    /// Order: GICR_ICENABLER0, then GICR_CTLR.RWP read 0 (the disable took effect), then
    /// GICR_ICACTIVER0 and GICR_ICPENDR0; ICC_AP1Rn_EL1 = 0 (as many as ICC_CTLR_EL1.PRIbits
    /// implies: [`active_priority_registers`]) once nothing is active (the SPIs were deactivated
    /// by `init_distributor`), 0 being the only value the architecture allows besides one read
    /// back: an active priority left by the firmware would otherwise hold the running priority
    /// and block every interrupt of that priority or lower.
    pub fn init_cpu(&self, cpu: usize, mpidr: u64) -> Result<(), NoRedistributor> {
        let rd = self.find_rd(mpidr).ok_or(NoRedistributor { mpidr })?;
        self.rd[cpu].store(rd, Ordering::Relaxed);
        self.mpidr[cpu].store(mpidr, Ordering::Relaxed);
        let waker = self.regs.read(Reg::RWaker(rd));
        self.regs.write(Reg::RWaker(rd), waker & !WAKER_PROCESSOR_SLEEP);
        while self.regs.read(Reg::RWaker(rd)) & WAKER_CHILDREN_ASLEEP != 0 {
            core::hint::spin_loop();
        }
        self.regs.write(Reg::SIcenabler0(rd), u32::MAX as u64);
        self.wait_rwp_rd(rd);
        self.regs.write(Reg::SIcactiver0(rd), u32::MAX as u64);
        self.regs.write(Reg::SIcpendr0(rd), u32::MAX as u64);
        self.regs.write(Reg::SIgroupr0(rd), u32::MAX as u64);
        self.regs.write(Reg::IccSre, self.regs.read(Reg::IccSre) | 1);
        self.regs.isb();
        for n in 0..active_priority_registers(self.regs.read(Reg::IccCtlr)) {
            self.regs.write(Reg::IccAp1r(n), 0);
        }
        self.regs.write(Reg::IccPmr, PRIORITY_MASK as u64);
        self.regs.write(Reg::IccBpr1, 0);
        self.regs.write(Reg::IccCtlr, 0);
        self.regs.write(Reg::IccIgrpen1, 1);
        self.regs.isb();
        Ok(())
    }

    fn rd_of(&self, cpu: usize) -> usize {
        self.rd[cpu].load(Ordering::Relaxed)
    }

    /// Enables banked interrupt `intid` (SGI or PPI) of CPU `cpu` (this one) at `priority`.
    pub fn enable_private(&self, cpu: usize, intid: u32, priority: u8) {
        let rd = self.rd_of(cpu);
        self.regs.write(Reg::SIpriority(rd, intid), priority as u64);
        self.regs.write(Reg::SIsenabler0(rd), 1 << intid);
    }

    /// Disables banked interrupt `intid` of CPU `cpu`.
    pub fn disable_private(&self, cpu: usize, intid: u32) {
        self.regs.write(Reg::SIcenabler0(self.rd_of(cpu)), 1 << intid);
    }

    /// Sends SGI `sgi` to the CPUs whose kernel indices are set in `cpus` (those that
    /// initialised their interface): a `DSB ISHST`, one ICC_SGI1R_EL1 write per CPU, an `ISB`.
    pub fn send_sgi(&self, cpus: u64, sgi: u32) {
        self.regs.dsb_ishst();
        for cpu in (0..MAX_CPUS).filter(|&c| cpus & (1 << c) != 0 && self.rd_of(c) != 0) {
            self.regs.write(Reg::IccSgi1r, sgi1r(self.mpidr[cpu].load(Ordering::Relaxed), sgi));
        }
        self.regs.isb();
    }
}

impl<R: Regs> CpuInterface for GicV3<R> {
    fn ack(&self) -> Option<Acked> {
        let iar = (self.regs.read(Reg::IccIar1) & 0xff_ffff) as u32;
        (iar < SPURIOUS).then_some(Acked { intid: iar, iar })
    }
    fn eoi(&self, a: Acked) {
        self.regs.write(Reg::IccEoir1, a.iar as u64);
    }
    fn disable_private(&self, cpu: usize, intid: u32) {
        GicV3::disable_private(self, cpu, intid)
    }
}
