//! GICv3 (QEMU `virt,gic-version=3`): a distributor, one redistributor per CPU (found by
//! matching GICR_TYPER's affinity with MPIDR), and the CPU interface as ICC_* system registers.
//!
//! Affinity routing is on (ARE); SGIs and PPIs are group 1 (non-secure), configured in each
//! CPU's redistributor; the CPU interface signals group 1 as IRQ. Under the hypervisor,
//! ICC_SRE_EL2.ENABLE lets EL1 use the system-register interface (`hypervisor/src/el2.rs`).

use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::register_structs;
use tock_registers::registers::{ReadOnly, ReadWrite};

register_structs! {
    /// GICv3 distributor (the parts the kernel uses).
    pub Gicd {
        (0x0000 => ctlr: ReadWrite<u32>),
        (0x0004 => typer: ReadOnly<u32>),
        (0x0008 => _r0),
        (0x0080 => igroupr: [ReadWrite<u32>; 32]),
        (0x0100 => isenabler: [ReadWrite<u32>; 32]),
        (0x0180 => icenabler: [ReadWrite<u32>; 32]),
        (0x0200 => @END),
    }
}

register_structs! {
    /// GICv3 redistributor, RD_base frame.
    pub GicrRd {
        (0x0000 => ctlr: ReadWrite<u32>),
        (0x0004 => iidr: ReadOnly<u32>),
        (0x0008 => typer: ReadOnly<u64>),
        (0x0010 => statusr: ReadWrite<u32>),
        (0x0014 => waker: ReadWrite<u32>),
        (0x0018 => @END),
    }
}

register_structs! {
    /// GICv3 redistributor, SGI_base frame (RD_base + 64 KiB): SGIs and PPIs of its CPU.
    pub GicrSgi {
        (0x0000 => _r0),
        (0x0080 => igroupr0: ReadWrite<u32>),
        (0x0084 => _r1),
        (0x0100 => isenabler0: ReadWrite<u32>),
        (0x0104 => _r2),
        (0x0180 => icenabler0: ReadWrite<u32>),
        (0x0184 => _r3),
        (0x0400 => ipriorityr: [ReadWrite<u8>; 32]),
        (0x0420 => @END),
    }
}

/// GICD_CTLR: ARE_NS (affinity routing), EnableGrp1A, EnableGrp1 (bit 0: group 0 with
/// security disabled), RWP (register write pending).
const GICD_CTLR_ARE: u32 = 1 << 4;
const GICD_CTLR_ENABLE_G1A: u32 = 1 << 1;
const GICD_CTLR_ENABLE_G1: u32 = 1 << 0;
const GICD_CTLR_RWP: u32 = 1 << 31;
/// GICR_WAKER: ProcessorSleep, ChildrenAsleep.
const WAKER_PROCESSOR_SLEEP: u32 = 1 << 1;
const WAKER_CHILDREN_ASLEEP: u32 = 1 << 2;
/// GICR_TYPER: Last (the last redistributor of its region), VLPIS (4 frames instead of 2).
const TYPER_LAST: u64 = 1 << 4;
const TYPER_VLPIS: u64 = 1 << 1;

/// A GICv3 reached through the MMIO window.
pub struct GicV3 {
    gicd: usize,
    /// Mapped redistributor regions: (virtual address, size).
    regions: alloc::vec::Vec<(usize, usize)>,
    /// RD_base of each kernel CPU index (0 until the CPU initialised its interface).
    rd: [core::sync::atomic::AtomicUsize; rt::MAX_CPUS],
    /// MPIDR affinity of each kernel CPU index, for ICC_SGI1R_EL1.
    mpidr: [core::sync::atomic::AtomicU64; rt::MAX_CPUS],
}

/// `mrs` of an ICC register by its encoding (aarch64-cpu names none of the EL1 ones used here).
macro_rules! icc_read {
    ($enc:literal) => {{
        let v: u64;
        // SAFETY: reads a GIC CPU-interface system register; the interface is enabled for EL1
        // (ICC_SRE_EL1.SRE) before any of these run; no memory is touched.
        unsafe { core::arch::asm!(concat!("mrs {}, ", $enc), out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}
macro_rules! icc_write {
    ($enc:literal, $v:expr) => {{
        let v: u64 = $v;
        // SAFETY: writes a GIC CPU-interface system register of this CPU (priority mask, group
        // enable, end of interrupt, SGI generation); no memory is touched.
        unsafe { core::arch::asm!(concat!("msr ", $enc, ", {}"), in(reg) v, options(nomem, nostack, preserves_flags)) };
    }};
}

impl GicV3 {
    /// # Safety
    ///
    /// `gicd` and every `regions` entry must be the mapped (device memory) register blocks of
    /// one GICv3, used by nothing else.
    pub unsafe fn new(gicd: usize, regions: alloc::vec::Vec<(usize, usize)>) -> Self {
        GicV3 {
            gicd,
            regions,
            rd: [const { core::sync::atomic::AtomicUsize::new(0) }; rt::MAX_CPUS],
            mpidr: [const { core::sync::atomic::AtomicU64::new(0) }; rt::MAX_CPUS],
        }
    }

    fn d(&self) -> &Gicd {
        // SAFETY: `new`'s caller guarantees a mapped distributor.
        unsafe { &*(self.gicd as *const Gicd) }
    }

    fn wait_rwp(&self) {
        while self.d().ctlr.get() & GICD_CTLR_RWP != 0 {
            core::hint::spin_loop();
        }
    }

    /// Number of SPI lines + 32 (GICD_TYPER.ITLinesNumber).
    pub fn lines(&self) -> u32 {
        32 * ((self.d().typer.get() & 0x1f) + 1)
    }

    /// Boot CPU: distributor off, every SPI disabled and group 1, then on with affinity routing.
    pub fn init_distributor(&self) {
        let d = self.d();
        d.ctlr.set(0);
        self.wait_rwp();
        for i in 1..(self.lines() / 32) as usize {
            d.icenabler[i].set(u32::MAX);
            d.igroupr[i].set(u32::MAX);
        }
        self.wait_rwp();
        d.ctlr.set(GICD_CTLR_ARE | GICD_CTLR_ENABLE_G1A | GICD_CTLR_ENABLE_G1);
        self.wait_rwp();
    }

    /// The RD_base whose GICR_TYPER affinity is `aff` (MPIDR Aff3.Aff2.Aff1.Aff0).
    fn find_rd(&self, aff: u64) -> Option<usize> {
        for &(base, size) in &self.regions {
            let mut off = 0;
            while off + 0x20000 <= size {
                // SAFETY: inside a mapped redistributor region, at a frame boundary.
                let rd = unsafe { &*((base + off) as *const GicrRd) };
                let typer = rd.typer.get();
                if typer >> 32 == aff {
                    return Some(base + off);
                }
                if typer & TYPER_LAST != 0 {
                    break;
                }
                off += if typer & TYPER_VLPIS != 0 { 0x40000 } else { 0x20000 };
            }
        }
        None
    }

    /// This CPU: finds and wakes its redistributor, makes its SGIs and PPIs group 1 and
    /// disabled, turns on the system-register CPU interface with an open priority mask.
    pub fn init_cpu(&self, cpu: usize, mpidr: u64) -> Result<(), alloc::string::String> {
        let aff = ((mpidr >> 8) & 0xff00_0000) | (mpidr & 0xff_ffff);
        let rd = self.find_rd(aff).ok_or_else(|| alloc::format!("no GICv3 redistributor for MPIDR {mpidr:#x}"))?;
        self.rd[cpu].store(rd, core::sync::atomic::Ordering::Relaxed);
        self.mpidr[cpu].store(mpidr, core::sync::atomic::Ordering::Relaxed);
        // SAFETY: `rd` is this CPU's RD_base frame, found above in a mapped region.
        let r = unsafe { &*(rd as *const GicrRd) };
        r.waker.set(r.waker.get() & !WAKER_PROCESSOR_SLEEP);
        while r.waker.get() & WAKER_CHILDREN_ASLEEP != 0 {
            core::hint::spin_loop();
        }
        let s = self.sgi(cpu);
        s.icenabler0.set(u32::MAX);
        s.igroupr0.set(u32::MAX);
        // ICC_SRE_EL1.SRE (bit 0): system-register interface.
        icc_write!("s3_0_c12_c12_5", icc_read!("s3_0_c12_c12_5") | 1);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        crate::perf::count_other_isb();
        icc_write!("s3_0_c4_c6_0", super::PRIORITY_MASK as u64); // ICC_PMR_EL1
        icc_write!("s3_0_c12_c12_3", 0); // ICC_BPR1_EL1
        icc_write!("s3_0_c12_c12_4", 0); // ICC_CTLR_EL1: EOImode 0 (EOI also deactivates)
        icc_write!("s3_0_c12_c12_7", 1); // ICC_IGRPEN1_EL1
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        crate::perf::count_other_isb();
        Ok(())
    }

    fn sgi(&self, cpu: usize) -> &GicrSgi {
        let rd = self.rd[cpu].load(core::sync::atomic::Ordering::Relaxed);
        // SAFETY: the SGI_base frame follows RD_base in the mapped region; `rd` was set by
        // `init_cpu` for this CPU index.
        unsafe { &*((rd + 0x10000) as *const GicrSgi) }
    }

    /// Enables banked interrupt `intid` (SGI or PPI) of CPU `cpu` (this one) at `priority`.
    pub fn enable_private(&self, cpu: usize, intid: u32, priority: u8) {
        let s = self.sgi(cpu);
        s.ipriorityr[intid as usize].set(priority);
        s.isenabler0.set(1 << intid);
    }

    /// Disables banked interrupt `intid` of CPU `cpu`.
    pub fn disable_private(&self, cpu: usize, intid: u32) {
        self.sgi(cpu).icenabler0.set(1 << intid);
    }

    /// Acknowledges the highest-priority pending group-1 interrupt (ICC_IAR1_EL1): its INTID
    /// (1023: none).
    pub fn ack(&self) -> u32 {
        (icc_read!("s3_0_c12_c12_0") & 0xff_ffff) as u32
    }

    /// Ends interrupt `intid` (ICC_EOIR1_EL1).
    pub fn eoi(&self, intid: u32) {
        icc_write!("s3_0_c12_c12_1", intid as u64);
    }

    /// Sends SGI `sgi` to the CPUs whose kernel indices are set in `cpus` (ICC_SGI1R_EL1, one
    /// write per CPU: affinity Aff3.Aff2.Aff1 and a target-list bit for Aff0).
    pub fn send_sgi(&self, cpus: u64, sgi: u32) {
        // The SGI must be ordered after earlier stores the target will read.
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
        crate::perf::count_other_dsb();
        for cpu in 0..rt::MAX_CPUS {
            if cpus & (1 << cpu) == 0 || self.rd[cpu].load(core::sync::atomic::Ordering::Relaxed) == 0 {
                continue;
            }
            let m = self.mpidr[cpu].load(core::sync::atomic::Ordering::Relaxed);
            let (aff0, aff1, aff2, aff3) = (m & 0xf, (m >> 8) & 0xff, (m >> 16) & 0xff, (m >> 32) & 0xff);
            let v = (aff3 << 48) | (aff2 << 32) | ((sgi as u64 & 0xf) << 24) | (aff1 << 16) | (1 << aff0);
            icc_write!("s3_0_c12_c11_5", v); // ICC_SGI1R_EL1
        }
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        crate::perf::count_other_isb();
    }
}
