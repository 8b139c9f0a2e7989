//! GICv3 registers: the distributor and the redistributors as tock-registers structs, the CPU
//! interface as ICC_* system registers, each register of `gic::v3::Reg` mapped onto
//! its field or encoding. The driver (what is written where, and when) is `gic::v3`,
//! tested on the host against a fake GIC.

use gic::v3::{Reg, Regs};
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
        (0x0200 => _r1),
        (0x0280 => icpendr: [ReadWrite<u32>; 32]),
        (0x0300 => _r2),
        (0x0380 => icactiver: [ReadWrite<u32>; 32]),
        (0x0400 => @END),
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
        (0x0280 => icpendr0: ReadWrite<u32>),
        (0x0284 => _r4),
        (0x0380 => icactiver0: ReadWrite<u32>),
        (0x0384 => _r5),
        (0x0400 => ipriorityr: [ReadWrite<u8>; 32]),
        (0x0420 => @END),
    }
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
        // enable, end of interrupt, SGI generation, active priorities zeroed once nothing is
        // active); no memory is touched.
        unsafe { core::arch::asm!(concat!("msr ", $enc, ", {}"), in(reg) v, options(nomem, nostack, preserves_flags)) };
    }};
}

/// A GICv3's distributor in the MMIO window (its redistributors are named by address).
pub struct V3Mmio {
    gicd: usize,
}

impl V3Mmio {
    /// # Safety
    ///
    /// `gicd` must be the mapped (device memory) distributor of one GICv3, and every
    /// redistributor address the driver names must lie in a mapped redistributor region; used
    /// by nothing else.
    pub unsafe fn new(gicd: usize) -> Self {
        V3Mmio { gicd }
    }

    fn d(&self) -> &Gicd {
        // SAFETY: `new`'s caller guarantees a mapped distributor.
        unsafe { &*(self.gicd as *const Gicd) }
    }
}

fn rd(base: usize) -> &'static GicrRd {
    // SAFETY: the driver names only RD_base frames inside the mapped regions (`new`'s contract).
    unsafe { &*(base as *const GicrRd) }
}

fn sgi(rd_base: usize) -> &'static GicrSgi {
    // SAFETY: the SGI_base frame follows RD_base in the mapped region.
    unsafe { &*((rd_base + 0x10000) as *const GicrSgi) }
}

impl Regs for V3Mmio {
    fn read(&self, r: Reg) -> u64 {
        let d = self.d();
        match r {
            Reg::DCtlr => d.ctlr.get() as u64,
            Reg::DTyper => d.typer.get() as u64,
            Reg::DIgroupr(n) => d.igroupr[n].get() as u64,
            Reg::DIsenabler(n) => d.isenabler[n].get() as u64,
            Reg::DIcenabler(n) => d.icenabler[n].get() as u64,
            Reg::DIcpendr(n) => d.icpendr[n].get() as u64,
            Reg::DIcactiver(n) => d.icactiver[n].get() as u64,
            Reg::RCtlr(a) => rd(a).ctlr.get() as u64,
            Reg::RTyper(a) => rd(a).typer.get(),
            Reg::RWaker(a) => rd(a).waker.get() as u64,
            Reg::SIgroupr0(a) => sgi(a).igroupr0.get() as u64,
            Reg::SIsenabler0(a) => sgi(a).isenabler0.get() as u64,
            Reg::SIcenabler0(a) => sgi(a).icenabler0.get() as u64,
            Reg::SIcpendr0(a) => sgi(a).icpendr0.get() as u64,
            Reg::SIcactiver0(a) => sgi(a).icactiver0.get() as u64,
            Reg::SIpriority(a, i) => sgi(a).ipriorityr[i as usize].get() as u64,
            Reg::IccSre => icc_read!("s3_0_c12_c12_5"),
            Reg::IccPmr => icc_read!("s3_0_c4_c6_0"),
            Reg::IccBpr1 => icc_read!("s3_0_c12_c12_3"),
            Reg::IccCtlr => icc_read!("s3_0_c12_c12_4"),
            Reg::IccIgrpen1 => icc_read!("s3_0_c12_c12_7"),
            Reg::IccIar1 => icc_read!("s3_0_c12_c12_0"),
            Reg::IccAp1r(0) => icc_read!("s3_0_c12_c9_0"),
            Reg::IccAp1r(1) => icc_read!("s3_0_c12_c9_1"),
            Reg::IccAp1r(2) => icc_read!("s3_0_c12_c9_2"),
            Reg::IccAp1r(3) => icc_read!("s3_0_c12_c9_3"),
            // There are four.
            Reg::IccAp1r(_) => 0,
            // Write-only registers read as nothing.
            Reg::IccEoir1 | Reg::IccSgi1r => 0,
        }
    }

    fn write(&self, r: Reg, v: u64) {
        let d = self.d();
        match r {
            Reg::DCtlr => d.ctlr.set(v as u32),
            Reg::DIgroupr(n) => d.igroupr[n].set(v as u32),
            Reg::DIsenabler(n) => d.isenabler[n].set(v as u32),
            Reg::DIcenabler(n) => d.icenabler[n].set(v as u32),
            Reg::DIcpendr(n) => d.icpendr[n].set(v as u32),
            Reg::DIcactiver(n) => d.icactiver[n].set(v as u32),
            Reg::RWaker(a) => rd(a).waker.set(v as u32),
            Reg::SIgroupr0(a) => sgi(a).igroupr0.set(v as u32),
            Reg::SIsenabler0(a) => sgi(a).isenabler0.set(v as u32),
            Reg::SIcenabler0(a) => sgi(a).icenabler0.set(v as u32),
            Reg::SIcpendr0(a) => sgi(a).icpendr0.set(v as u32),
            Reg::SIcactiver0(a) => sgi(a).icactiver0.set(v as u32),
            Reg::SIpriority(a, i) => sgi(a).ipriorityr[i as usize].set(v as u8),
            Reg::IccSre => icc_write!("s3_0_c12_c12_5", v),
            Reg::IccPmr => icc_write!("s3_0_c4_c6_0", v),
            Reg::IccBpr1 => icc_write!("s3_0_c12_c12_3", v),
            Reg::IccCtlr => icc_write!("s3_0_c12_c12_4", v),
            Reg::IccIgrpen1 => icc_write!("s3_0_c12_c12_7", v),
            Reg::IccEoir1 => icc_write!("s3_0_c12_c12_1", v),
            Reg::IccSgi1r => icc_write!("s3_0_c12_c11_5", v),
            Reg::IccAp1r(0) => icc_write!("s3_0_c12_c9_0", v),
            Reg::IccAp1r(1) => icc_write!("s3_0_c12_c9_1", v),
            Reg::IccAp1r(2) => icc_write!("s3_0_c12_c9_2", v),
            Reg::IccAp1r(3) => icc_write!("s3_0_c12_c9_3", v),
            // Registers the driver only reads take no writes; there are four ICC_AP1Rn_EL1.
            Reg::DTyper | Reg::RTyper(_) | Reg::RCtlr(_) | Reg::IccIar1 | Reg::IccAp1r(_) => {}
        }
    }

    fn dsb_ishst(&self) {
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
        crate::arch::counters::count_other_dsb();
    }

    fn isb(&self) {
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        crate::arch::counters::count_other_isb();
    }
}
