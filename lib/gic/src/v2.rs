//! GICv2 (QEMU `virt,gic-version=2`, the Pi 5's GIC-400): a distributor and a memory-mapped CPU
//! interface per CPU (the same address, banked).
//!
//! Groups: the kernel leaves every interrupt in the group the firmware (or reset) put it in and
//! enables "group 0/1" in both the distributor and the CPU interface with bit 0, as Linux does:
//! without security extensions (QEMU without EL3) bit 0 enables group 0, which is signalled as
//! IRQ; with them (the Pi 5 under TF-A) the kernel sees the non-secure view, where bit 0 enables
//! group 1 (non-secure), which the firmware configured.

use crate::{Acked, CpuInterface, PRIORITY_MASK, SPURIOUS};
use abi::MAX_CPUS;
use core::sync::atomic::{AtomicU8, Ordering};

/// The registers the driver uses (word registers unless the name says byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reg {
    /// GICD_CTLR.
    DCtlr,
    /// GICD_TYPER.
    DTyper,
    /// GICD_ISENABLERn.
    DIsenabler(usize),
    /// GICD_ICENABLERn.
    DIcenabler(usize),
    /// GICD_ICPENDRn (n = 0 banked; its SGI bits are read-only on GICv2: [`Reg::DCpendsgir`]
    /// clears SGIs).
    DIcpendr(usize),
    /// GICD_ICACTIVERn (n = 0 banked).
    DIcactiver(usize),
    /// GICD_IPRIORITYR, the byte of one INTID.
    DIpriority(u32),
    /// GICD_ITARGETSR, the byte of one INTID (banked for 0-31: reads this CPU's own bit).
    DItargets(u32),
    /// GICD_SGIR (write only).
    DSgir,
    /// GICD_CPENDSGIR, the byte of one SGI (banked: this CPU's pending SGIs, one bit per
    /// source CPU; writing ones clears them).
    DCpendsgir(u32),
    /// GICC_CTLR.
    CCtlr,
    /// GICC_PMR.
    CPmr,
    /// GICC_BPR.
    CBpr,
    /// GICC_IAR (read only; reading acknowledges).
    CIar,
    /// GICC_EOIR (write only).
    CEoir,
    /// GICC_APRn, n < [`APRS`]: the active priorities (a bit per preemption level, set by an
    /// acknowledge, cleared by the priority drop of its EOI).
    CApr(usize),
}

/// GICC_APR0-3 (0xD0-0xDC): how many the CPU interface's register map has room for; those a
/// GIC does not implement (fewer than 6 or 7 priority bits) are RAZ/WI.
pub const APRS: usize = 4;

/// Register access of one GICv2 from the calling CPU (its banked view).
pub trait Regs {
    /// Reads `r` (a byte register zero-extended).
    fn read(&self, r: Reg) -> u32;
    /// Writes `r` (a byte register takes the low byte).
    fn write(&self, r: Reg, v: u32);
    /// `DSB ISHST`: orders earlier stores before the next register write (an SGI's handler on
    /// another CPU reads what this CPU wrote before sending it).
    fn dsb_ishst(&self);
}

/// GICD_SGIR: TargetListFilter 0 (the list), CPUTargetList, SGIINTID.
pub fn sgir(target_list: u8, sgi: u32) -> u32 {
    ((target_list as u32) << 16) | (sgi & 0xf)
}

/// The INTID in a GICC_IAR value (bits [9:0]; [12:10] are an SGI's source CPU).
pub fn intid(iar: u32) -> u32 {
    iar & 0x3ff
}

/// This CPU's bit in GICD_SGIR's target list: ITARGETSR of a banked interrupt (0-31) reads
/// back the calling CPU's own interface bit on a multiprocessor GIC, and 0 on a uniprocessor
/// one, whose only interface is bit 0.
pub fn own_interface(regs: &impl Regs) -> u8 {
    match regs.read(Reg::DItargets(0)) as u8 {
        0 => 1,
        me => me,
    }
}

/// A GICv2 driver.
pub struct GicV2<R> {
    regs: R,
    /// GIC CPU-interface bit of each kernel CPU index (read from the banked ITARGETSR0 when the
    /// CPU initialises its interface); 0 until then.
    targets: [AtomicU8; MAX_CPUS],
}

impl<R: Regs> GicV2<R> {
    /// A driver over `regs`.
    pub fn new(regs: R) -> Self {
        GicV2 { regs, targets: [const { AtomicU8::new(0) }; MAX_CPUS] }
    }

    /// The register access.
    pub fn regs(&self) -> &R {
        &self.regs
    }

    /// Number of interrupt lines (GICD_TYPER.ITLinesNumber).
    pub fn lines(&self) -> u32 {
        32 * ((self.regs.read(Reg::DTyper) & 0x1f) + 1)
    }

    /// Boot CPU, before any [`Self::init_cpu`]: the distributor off, then every shared
    /// interrupt (SPI) disabled, deactivated and not pending, whatever the firmware (or a
    /// previous kernel) left, then the distributor on.
    ///
    /// Order: each SPI is disabled before its active and pending state is cleared, so it cannot
    /// be forwarded (and acknowledged, active again) in between; the writes reach the
    /// distributor in program order (device memory), so no wait is needed.
    pub fn init_distributor(&self) {
        self.regs.write(Reg::DCtlr, 0);
        let words = (self.lines() / 32) as usize;
        for i in 1..words {
            self.regs.write(Reg::DIcenabler(i), u32::MAX);
        }
        for i in 1..words {
            self.regs.write(Reg::DIcactiver(i), u32::MAX);
            self.regs.write(Reg::DIcpendr(i), u32::MAX);
        }
        self.regs.write(Reg::DCtlr, 1);
    }

    /// This CPU (`cpu`), after [`Self::init_distributor`]: its banked SGIs and PPIs disabled,
    /// deactivated and not pending, its active priorities zeroed, priority mask open, interface
    /// enabled; its interface bit recorded for SGIs.
    ///
    /// Order: disable, then deactivate and clear pending (GICD_ICPENDR0 for the PPIs,
    /// GICD_CPENDSGIRn for each SGI from every source CPU: GICv2's ICPENDR0 does not clear
    /// SGIs), then GICC_APRn = 0, the only value the architecture allows besides one read back,
    /// and only once nothing is active: an active priority left by the firmware (an interrupt it
    /// acknowledged and never ended) would otherwise hold the running priority and block every
    /// interrupt of that priority or lower. The SPIs this CPU may have left active were
    /// deactivated by `init_distributor`. The interface is enabled last.
    pub fn init_cpu(&self, cpu: usize) {
        self.regs.write(Reg::DIcenabler(0), u32::MAX);
        self.regs.write(Reg::DIcactiver(0), u32::MAX);
        self.regs.write(Reg::DIcpendr(0), u32::MAX);
        for sgi in 0..crate::SGIS {
            self.regs.write(Reg::DCpendsgir(sgi), 0xff);
        }
        for n in 0..APRS {
            self.regs.write(Reg::CApr(n), 0);
        }
        self.targets[cpu].store(own_interface(&self.regs), Ordering::Relaxed);
        self.regs.write(Reg::CPmr, PRIORITY_MASK as u32);
        self.regs.write(Reg::CBpr, 0);
        self.regs.write(Reg::CCtlr, 1);
    }

    /// Enables banked interrupt `intid` (an SGI or a PPI) on this CPU at `priority`.
    pub fn enable_private(&self, intid: u32, priority: u8) {
        self.regs.write(Reg::DIpriority(intid), priority as u32);
        self.regs.write(Reg::DIsenabler(0), 1 << intid);
    }

    /// Disables banked interrupt `intid` on this CPU.
    pub fn disable_private(&self, intid: u32) {
        self.regs.write(Reg::DIcenabler(0), 1 << intid);
    }

    /// Sends SGI `sgi` to the CPUs whose kernel indices are set in `cpus` (those that
    /// initialised their interface), after a `DSB ISHST`.
    pub fn send_sgi(&self, cpus: u64, sgi: u32) {
        let list = (0..MAX_CPUS)
            .filter(|&c| cpus & (1 << c) != 0)
            .fold(0u8, |l, c| l | self.targets[c].load(Ordering::Relaxed));
        if list != 0 {
            self.regs.dsb_ishst();
            self.regs.write(Reg::DSgir, sgir(list, sgi));
        }
    }
}

impl<R: Regs> CpuInterface for GicV2<R> {
    fn ack(&self) -> Option<Acked> {
        let iar = self.regs.read(Reg::CIar);
        let intid = intid(iar);
        (intid < SPURIOUS).then_some(Acked { intid, iar })
    }
    fn eoi(&self, a: Acked) {
        self.regs.write(Reg::CEoir, a.iar);
    }
    fn disable_private(&self, _cpu: usize, intid: u32) {
        GicV2::disable_private(self, intid)
    }
}
