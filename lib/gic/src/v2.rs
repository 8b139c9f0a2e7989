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
}

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

    /// Boot CPU: every shared interrupt disabled, then the distributor enabled.
    pub fn init_distributor(&self) {
        self.regs.write(Reg::DCtlr, 0);
        for i in 1..(self.lines() / 32) as usize {
            self.regs.write(Reg::DIcenabler(i), u32::MAX);
        }
        self.regs.write(Reg::DCtlr, 1);
    }

    /// This CPU (`cpu`): its banked SGIs and PPIs disabled, priority mask open, interface
    /// enabled; its interface bit recorded for SGIs.
    pub fn init_cpu(&self, cpu: usize) {
        self.regs.write(Reg::DIcenabler(0), u32::MAX);
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
