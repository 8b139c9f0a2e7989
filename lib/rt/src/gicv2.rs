//! GICv2 registers: the distributor and the banked CPU interface as tock-registers structs,
//! each register of `gic::v2::Reg` mapped onto its field. Both binaries use it: the
//! kernel's GICv2 driver and the hypervisor's wake-up of CPUs it holds in WFI. What is written
//! where, and when, is `gic::v2` and `hypcore::park`, tested on the host against a fake
//! GIC.

use gic::v2::{Reg, Regs, APRS};
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::register_structs;
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};

register_structs! {
    /// GICv2 distributor (the parts the kernel uses).
    pub Gicd {
        (0x000 => ctlr: ReadWrite<u32>),
        (0x004 => typer: ReadOnly<u32>),
        (0x008 => _r0),
        (0x100 => isenabler: [ReadWrite<u32>; 32]),
        (0x180 => icenabler: [ReadWrite<u32>; 32]),
        (0x200 => _r1),
        (0x280 => icpendr: [ReadWrite<u32>; 32]),
        (0x300 => _r5),
        (0x380 => icactiver: [ReadWrite<u32>; 32]),
        (0x400 => ipriorityr: [ReadWrite<u8>; 1020]),
        (0x7fc => _r2),
        (0x800 => itargetsr: [ReadWrite<u8>; 1020]),
        (0xbfc => _r3),
        (0xf00 => sgir: WriteOnly<u32>),
        (0xf04 => _r4),
        (0xf10 => cpendsgir: [ReadWrite<u8>; 16]),
        (0xf20 => @END),
    }
}

register_structs! {
    /// GICv2 CPU interface.
    pub Gicc {
        (0x00 => ctlr: ReadWrite<u32>),
        (0x04 => pmr: ReadWrite<u32>),
        (0x08 => bpr: ReadWrite<u32>),
        (0x0c => iar: ReadOnly<u32>),
        (0x10 => eoir: WriteOnly<u32>),
        (0x14 => _r0),
        (0xd0 => apr: [ReadWrite<u32>; APRS]),
        (0xe0 => @END),
    }
}

/// A GICv2's register blocks in the MMIO window.
pub struct V2Mmio {
    gicd: usize,
    gicc: usize,
    /// Called after each `DSB ISHST` the driver asks for (the kernel counts them).
    after_dsb: fn(),
}

impl V2Mmio {
    /// # Safety
    ///
    /// `gicd` and `gicc` must be the mapped (device memory) register blocks of one GICv2; the
    /// caller decides which registers each user touches (the kernel's driver owns the GIC, the
    /// hypervisor only the banked registers of CPUs the guest has not started, and the SGI it
    /// wakes them with).
    pub const unsafe fn new(gicd: usize, gicc: usize, after_dsb: fn()) -> Self {
        V2Mmio { gicd, gicc, after_dsb }
    }

    fn d(&self) -> &Gicd {
        // SAFETY: `new`'s caller guarantees a mapped distributor.
        unsafe { &*(self.gicd as *const Gicd) }
    }

    fn c(&self) -> &Gicc {
        // SAFETY: `new`'s caller guarantees a mapped CPU interface (banked per CPU).
        unsafe { &*(self.gicc as *const Gicc) }
    }
}

impl Regs for V2Mmio {
    fn read(&self, r: Reg) -> u32 {
        let (d, c) = (self.d(), self.c());
        match r {
            Reg::DCtlr => d.ctlr.get(),
            Reg::DTyper => d.typer.get(),
            Reg::DIsenabler(n) => d.isenabler[n].get(),
            Reg::DIcenabler(n) => d.icenabler[n].get(),
            Reg::DIpriority(i) => d.ipriorityr[i as usize].get() as u32,
            Reg::DItargets(i) => d.itargetsr[i as usize].get() as u32,
            Reg::DCpendsgir(i) => d.cpendsgir[i as usize].get() as u32,
            Reg::DIcpendr(n) => d.icpendr[n].get(),
            Reg::DIcactiver(n) => d.icactiver[n].get(),
            Reg::CApr(n) => c.apr[n].get(),
            Reg::CCtlr => c.ctlr.get(),
            Reg::CPmr => c.pmr.get(),
            Reg::CBpr => c.bpr.get(),
            Reg::CIar => c.iar.get(),
            // Write-only registers read as nothing.
            Reg::DSgir | Reg::CEoir => 0,
        }
    }

    fn write(&self, r: Reg, v: u32) {
        let (d, c) = (self.d(), self.c());
        match r {
            Reg::DCtlr => d.ctlr.set(v),
            Reg::DIsenabler(n) => d.isenabler[n].set(v),
            Reg::DIcenabler(n) => d.icenabler[n].set(v),
            Reg::DIpriority(i) => d.ipriorityr[i as usize].set(v as u8),
            Reg::DItargets(i) => d.itargetsr[i as usize].set(v as u8),
            Reg::DSgir => d.sgir.set(v),
            Reg::DCpendsgir(i) => d.cpendsgir[i as usize].set(v as u8),
            Reg::DIcpendr(n) => d.icpendr[n].set(v),
            Reg::DIcactiver(n) => d.icactiver[n].set(v),
            Reg::CApr(n) => c.apr[n].set(v),
            Reg::CCtlr => c.ctlr.set(v),
            Reg::CPmr => c.pmr.set(v),
            Reg::CBpr => c.bpr.set(v),
            Reg::CEoir => c.eoir.set(v),
            // Read-only registers take no writes.
            Reg::DTyper | Reg::CIar => {}
        }
    }

    fn dsb_ishst(&self) {
        #[cfg(target_arch = "aarch64")]
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
        (self.after_dsb)();
    }
}
