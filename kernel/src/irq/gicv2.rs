//! GICv2 (QEMU `virt,gic-version=2`, the Pi 5's GIC-400): a distributor and a memory-mapped
//! CPU interface per CPU (the same address, banked).
//!
//! Groups: the kernel leaves every interrupt in the group the firmware (or reset) put it in and
//! enables "group 0/1" in both the distributor and the CPU interface with bit 0, as Linux does:
//! without security extensions (QEMU without EL3) bit 0 enables group 0, which is signalled as
//! IRQ; with them (the Pi 5 under TF-A) the kernel sees the non-secure view, where bit 0 enables
//! group 1 (non-secure), which the firmware configured.

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
        (0x400 => ipriorityr: [ReadWrite<u8>; 1020]),
        (0x7fc => _r2),
        (0x800 => itargetsr: [ReadWrite<u8>; 1020]),
        (0xbfc => _r3),
        (0xf00 => sgir: WriteOnly<u32>),
        (0xf04 => @END),
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
        (0x14 => @END),
    }
}

/// A GICv2 reached through the MMIO window.
pub struct GicV2 {
    gicd: usize,
    gicc: usize,
    /// GIC CPU-interface bit of each kernel CPU index (read from the banked ITARGETSR0 when
    /// the CPU initialises its interface); 0 until then.
    targets: [core::sync::atomic::AtomicU8; rt::MAX_CPUS],
}

impl GicV2 {
    /// # Safety
    ///
    /// `gicd` and `gicc` must be the mapped (device memory) register blocks of one GICv2,
    /// used by nothing else.
    pub unsafe fn new(gicd: usize, gicc: usize) -> Self {
        GicV2 { gicd, gicc, targets: [const { core::sync::atomic::AtomicU8::new(0) }; rt::MAX_CPUS] }
    }

    fn d(&self) -> &Gicd {
        // SAFETY: `new`'s caller guarantees a mapped distributor.
        unsafe { &*(self.gicd as *const Gicd) }
    }

    fn c(&self) -> &Gicc {
        // SAFETY: `new`'s caller guarantees a mapped CPU interface (banked per CPU).
        unsafe { &*(self.gicc as *const Gicc) }
    }

    /// Number of interrupt lines (GICD_TYPER.ITLinesNumber).
    pub fn lines(&self) -> u32 {
        32 * ((self.d().typer.get() & 0x1f) + 1)
    }

    /// Boot CPU: every shared interrupt disabled, then the distributor enabled.
    pub fn init_distributor(&self) {
        let d = self.d();
        d.ctlr.set(0);
        for i in 1..(self.lines() / 32) as usize {
            d.icenabler[i].set(u32::MAX);
        }
        d.ctlr.set(1);
    }

    /// This CPU: its banked SGIs and PPIs disabled, priority mask open, interface enabled; its
    /// interface bit recorded for SGIs.
    pub fn init_cpu(&self, cpu: usize) {
        let d = self.d();
        d.icenabler[0].set(u32::MAX);
        // ITARGETSR0..7 read back this CPU's own interface bit on a multiprocessor GIC.
        let me = d.itargetsr[0].get();
        self.targets[cpu].store(if me == 0 { 1 } else { me }, core::sync::atomic::Ordering::Relaxed);
        let c = self.c();
        c.pmr.set(super::PRIORITY_MASK as u32);
        c.bpr.set(0);
        c.ctlr.set(1);
    }

    /// Enables banked interrupt `intid` (an SGI or a PPI) on this CPU at `priority`.
    pub fn enable_private(&self, intid: u32, priority: u8) {
        let d = self.d();
        d.ipriorityr[intid as usize].set(priority);
        d.isenabler[0].set(1 << intid);
    }

    /// Disables banked interrupt `intid` on this CPU.
    pub fn disable_private(&self, intid: u32) {
        self.d().icenabler[0].set(1 << intid);
    }

    /// Acknowledges the highest-priority pending interrupt: its INTID (1023: none).
    pub fn ack(&self) -> u32 {
        self.c().iar.get()
    }

    /// Ends interrupt `iar` (the value `ack` returned: SGIs carry the source CPU in it).
    pub fn eoi(&self, iar: u32) {
        self.c().eoir.set(iar);
    }

    /// Sends SGI `sgi` to the CPUs whose kernel indices are set in `cpus`.
    pub fn send_sgi(&self, cpus: u64, sgi: u32) {
        let mut list = 0u32;
        for cpu in 0..rt::MAX_CPUS {
            if cpus & (1 << cpu) != 0 {
                list |= self.targets[cpu].load(core::sync::atomic::Ordering::Relaxed) as u32;
            }
        }
        if list != 0 {
            // The SGI must be ordered after earlier stores the target will read.
            aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
            crate::perf::count_other_dsb();
            // TargetListFilter 0 (use the list), CPUTargetList, SGIINTID.
            self.d().sgir.set((list << 16) | (sgi & 0xf));
        }
    }
}
