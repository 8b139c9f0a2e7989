//! Time and PMU counters for measurements, on top of the shared PMU driver (`lib/pmu`).
//!
//! * [`now_ns`]: the generic timer (CNTVCT_EL0 at CNTFRQ_EL0; 16 ns steps on QEMU `virt`).
//! * [`driver`]: this CPU's [`pmu::Pmu`] (per-CPU wrap counts in [`CPU_STATE`]).
//! * [`Pmu`]: what the benchmarks read: the cycle counter and instructions retired (event
//!   0x08), counted at EL0, EL1 and EL2 (a guest exit's hypervisor work counts). Under TCG,
//!   QEMU counts instructions only with `-icount` (PMCEID0 then advertises them); without it
//!   the instruction count reads as zero.
//! * [`Barriers`]: the project's own counts of TLBI, DSB and ISB instructions at EL1 (this
//!   kernel) and EL2 (the hypervisor, through MAINT_COUNTS), by source: `lib/pgtable`'s TLB
//!   maintenance, cache maintenance (`rt::cache`), the PMU driver.
//! * [`scenario`]: `perf.events=...` counts events around a whole self-test or benchmark.
//! * [`selftest`]: `test=pmu`, the driver's checks on the CPU.
//! * [`mark`]: window markers for the instruction-counting QEMU plugin.
//! * [`overflow_irq`]: the PMU overflow interrupt (the device tree's PMU PPI, [`init_irq`]):
//!   every counter claimed here on a 32-bit PMU has it armed ([`arm_overflow`]), so a wrap is
//!   folded in when it happens, however long between reads.

pub mod scenario;
pub mod selftest;

use crate::arch::machine::KERNEL;
use crate::arch::power::Host;
use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTVCT_EL0, MIDR_EL1};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use pmu::hw::SysRegs;
use pmu::{CpuState, ElFilter};

/// The PMU overflow interrupt's PPI (0: none wired).
static PMU_PPI: AtomicU32 = AtomicU32::new(0);

/// Wires the PMU's overflow interrupt from the device tree's PMU node (boot CPU, after
/// `irq::init`): when it is one PPI for every CPU, as on QEMU `virt`; one SPI per CPU is
/// reported and left alone (the driver folds overflows on reads then).
pub fn init_irq(board: &board::Board) -> Result<(), crate::irq::IrqError> {
    match board.pmu.as_ref().map(|p| p.interrupts.as_slice()) {
        Some(&[ppi]) if (16..32).contains(&ppi) => {
            crate::irq::wire_ppi(0, ppi, overflow_irq)?;
            PMU_PPI.store(ppi, Ordering::Relaxed);
        }
        Some([]) | None => {}
        Some(other) => rt::println!(
            "kernel: the PMU's overflow interrupts are SPIs {other:?} (one per CPU): not wired; reads fold overflows"
        ),
    }
    Ok(())
}

/// Whether the PMU's overflow interrupt (one PPI for every CPU, from the device tree) reaches
/// [`overflow_irq`].
pub fn pmu_overflow_wired() -> bool {
    PMU_PPI.load(Ordering::Relaxed) != 0
}

/// PMU overflow interrupts handled, per CPU.
pub static OVERFLOW_IRQS: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];

/// The PMU overflow interrupt's handler: folds this CPU's overflow flags into its wrap counts
/// (which also clears them, so the level-sensitive interrupt drops).
pub fn overflow_irq(_intid: u32, cpu: usize) {
    OVERFLOW_IRQS[cpu.min(rt::MAX_CPUS - 1)].fetch_add(1, Ordering::Relaxed);
    if let Some(p) = driver() {
        p.service_overflow();
    }
}

/// Arms `c`'s overflow interrupt where the PMU's event counters are 32 bits wide and the
/// interrupt is wired (64-bit counters never wrap in practice; without the interrupt, reads
/// fold overflows).
pub fn arm_overflow(p: &pmu::Pmu<'static, SysRegs>, c: &pmu::Counter) {
    if !p.info().long_events && pmu_overflow_wired() {
        p.enable_overflow_irq(c, true);
    }
}

/// Programs this CPU's event counter 0 for instructions retired at every EL and keeps it
/// claimed for good: EL0 programs read it directly (PMUSERENR_EL0.ER; `user/src/time.rs`), so
/// it must stay counter 0 and never be released. Returns whether it counts them (false: no
/// PMUv3, instructions not counted here (QEMU without `-icount`), or counter 0 already taken).
pub fn claim_el0_instructions() -> bool {
    let Some(p) = driver() else {
        return false;
    };
    let Some(ev) = p.info().core.lookup("INST_RETIRED") else {
        return false;
    };
    match p.claim(ev, ElFilter::ALL) {
        Ok(c) if c.idx == 0 => {
            arm_overflow(&p, &c);
            true
        }
        Ok(c) => {
            p.release(c);
            false
        }
        Err(_) => false,
    }
}

/// Nanoseconds since boot.
pub fn now_ns() -> u64 {
    ticks_to_ns(ticks())
}

/// Raw ticks of the virtual counter, for timing an interval: [`ticks_to_ns`] converts the
/// difference afterwards, so the 128-bit division of [`now_ns`] stays out of the interval.
#[inline(always)]
pub fn ticks() -> u64 {
    CNTVCT_EL0.get()
}

/// Nanoseconds of `ticks` virtual-counter ticks.
pub fn ticks_to_ns(ticks: u64) -> u64 {
    abi::time::ticks_to_ns(ticks, CNTFRQ_EL0.get())
}

/// The PMU driver's per-CPU state (claimed counters, wrap counts), by CPU index.
pub static CPU_STATE: [CpuState; rt::MAX_CPUS] = [const { CpuState::new() }; rt::MAX_CPUS];

/// This CPU's index in the DTB's CPU list.
pub fn cpu_index() -> usize {
    let me = rt::mpidr_affinity();
    KERNEL.get().and_then(|k| k.board.cpus.iter().position(|c| c.mpidr == me)).unwrap_or(0).min(rt::MAX_CPUS - 1)
}

/// Whether this kernel runs on QEMU TCG (whose PMU counts only SW_INCR, CPU_CYCLES and, under
/// `-icount`, INST_RETIRED): QEMU's own device tree says so, and a board's tree on QEMU (the Pi 5
/// paths) is recognised by QEMU's PMCEID.
pub fn emulated() -> bool {
    let dtb = KERNEL.get().is_some_and(|k| k.board.is_qemu_virt());
    // PMCEID exists only with a PMUv3 (PMUVer 1..=0xE).
    let ver = pmu::PmuRegs::pmuver(&SysRegs);
    dtb || ((1..0xf).contains(&ver) && pmu::looks_emulated(pmu::PmuRegs::pmceid(&SysRegs)))
}

/// This CPU's PMU (`None` without PMUv3).
pub fn driver() -> Option<pmu::Pmu<'static, SysRegs>> {
    pmu::Pmu::new(SysRegs, &CPU_STATE[cpu_index()], MIDR_EL1.get(), emulated())
}

/// The cycle counter and, where counted, instructions retired, at every EL, on this CPU.
pub struct Pmu {
    pmu: Option<pmu::Pmu<'static, SysRegs>>,
    insns: Option<pmu::Counter>,
}

impl Pmu {
    /// Starts counting on this CPU (claims one event counter for instructions when this CPU
    /// counts them; frees it on drop).
    pub fn enable() -> Self {
        let pmu = driver();
        let insns = pmu.as_ref().and_then(|p| {
            let ev = p.info().core.lookup("INST_RETIRED")?;
            match p.claim(ev, ElFilter::ALL) {
                Ok(c) => {
                    arm_overflow(p, &c);
                    Some(c)
                }
                Err(pmu::NotCounted::NoFreeCounter) => {
                    rt::println!("kernel: warning: every PMU counter is taken: instructions read as 0");
                    None
                }
                Err(_) => None,
            }
        });
        Pmu { pmu, insns }
    }

    /// Runs `f` once and measures it: (wall nanoseconds, instructions retired, `f`'s result).
    /// The reads nest: instructions outside, the virtual counter inside, so the wall time
    /// holds neither the PMU reads (helper calls under TCG) nor a tick conversion, and the
    /// instruction count holds `f` and the two counter reads (`mrs`) only. Instructions read 0
    /// where they are not counted.
    #[inline(always)]
    pub fn measure<R>(&self, f: impl FnOnce() -> R) -> (u64, u64, R) {
        let (_, i0) = self.read();
        let t0 = ticks();
        let r = f();
        let t1 = ticks();
        let (_, i1) = self.read();
        (ticks_to_ns(t1.wrapping_sub(t0)), i1.wrapping_sub(i0), r)
    }

    /// (cycles, instructions) now; instructions read 0 where they are not counted.
    #[inline(always)]
    pub fn read(&self) -> (u64, u64) {
        match &self.pmu {
            Some(p) => (p.cycles(), self.insns.as_ref().map_or(0, |c| p.read(c))),
            None => (0, 0),
        }
    }
}

impl Drop for Pmu {
    fn drop(&mut self) {
        if let (Some(p), Some(c)) = (&self.pmu, self.insns.take()) {
            p.release(c);
        }
    }
}

/// TLBI, DSB and ISB counts at one exception level, by source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LevelCounts {
    /// TLBIs (`lib/pgtable`).
    pub tlbi: u64,
    /// DSBs of TLB maintenance (`lib/pgtable`).
    pub dsb_pgtable: u64,
    /// ISBs of TLB maintenance (`lib/pgtable`).
    pub isb_pgtable: u64,
    /// DSBs of cache maintenance (`rt::cache`, e.g. around hypercall and dirty-log buffers).
    pub dsb_cache: u64,
    /// ISBs of cache maintenance.
    pub isb_cache: u64,
    /// ISBs of the PMU driver (each counter read synchronises).
    pub isb_pmu: u64,
    /// Other ISBs (after an address translation, the GIC's, the idle wait's).
    pub isb_other: u64,
    /// Other DSBs (before an SGI).
    pub dsb_other: u64,
}

impl LevelCounts {
    fn since(&self, e: &LevelCounts) -> LevelCounts {
        LevelCounts {
            tlbi: self.tlbi - e.tlbi,
            dsb_pgtable: self.dsb_pgtable - e.dsb_pgtable,
            isb_pgtable: self.isb_pgtable - e.isb_pgtable,
            dsb_cache: self.dsb_cache - e.dsb_cache,
            isb_cache: self.isb_cache - e.isb_cache,
            isb_pmu: self.isb_pmu - e.isb_pmu,
            isb_other: self.isb_other - e.isb_other,
            dsb_other: self.dsb_other - e.dsb_other,
        }
    }

    /// Every DSB the project counted.
    pub fn dsb(&self) -> u64 {
        self.dsb_pgtable + self.dsb_cache + self.dsb_other
    }

    /// Every ISB the project counted.
    pub fn isb(&self) -> u64 {
        self.isb_pgtable + self.isb_cache + self.isb_pmu + self.isb_other
    }
}

/// The project's own maintenance counts, EL1 and (under the hypervisor) EL2.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Barriers {
    /// This kernel's.
    pub el1: LevelCounts,
    /// The hypervisor's (`None` without it).
    pub el2: Option<LevelCounts>,
}

impl Barriers {
    /// EL1's counts (plain loads: no barrier of their own).
    pub fn el1_now() -> LevelCounts {
        let t = crate::mm::user::tlb_counters();
        let (dsb_cache, isb_cache) = rt::cache::barrier_counts();
        LevelCounts {
            tlbi: t.tlbi_total(),
            dsb_pgtable: t.dsb_total(),
            isb_pgtable: t.isb,
            dsb_cache,
            isb_cache,
            isb_pmu: pmu::hw::isb_count(),
            isb_other: crate::arch::counters::other_isbs(),
            dsb_other: crate::arch::counters::other_dsbs(),
        }
    }

    /// EL2's counts through MAINT_COUNTS (`None` without the hypervisor).
    pub fn el2_now() -> Option<LevelCounts> {
        use abi::hypercall as hc;
        if crate::arch::power::host() != Host::Hypervisor {
            return None;
        }
        let a = crate::arch::smccc::call(hc::MAINT_COUNTS, hc::MAINT_TLB, 0, 0);
        let b = crate::arch::smccc::call(hc::MAINT_COUNTS, hc::MAINT_OTHER, 0, 0);
        if a[0] != 0 || b[0] != 0 {
            return None;
        }
        Some(LevelCounts {
            tlbi: a[1],
            dsb_pgtable: a[2],
            isb_pgtable: a[3],
            dsb_cache: b[1],
            isb_cache: b[2],
            isb_pmu: b[3],
            isb_other: 0,
            dsb_other: 0,
        })
    }

    /// `self - earlier`.
    pub fn since(&self, earlier: &Barriers) -> Barriers {
        Barriers {
            el1: self.el1.since(&earlier.el1),
            el2: match (self.el2, earlier.el2) {
                (Some(a), Some(b)) => Some(a.since(&b)),
                _ => None,
            },
        }
    }
}

/// Window markers for the QEMU instruction-counting plugin (`cargo xtask ... --count-insns`):
/// `HINT #126` opens a window and `HINT #127` closes it. Both are unallocated hints, so every
/// CPU executes them as NOPs; the plugin recognises their encodings and snapshots its counts.
pub fn mark(open: bool) {
    // SAFETY: unallocated HINT encodings execute as NOPs (Arm ARM C6.2.127): no effect.
    unsafe {
        if open {
            core::arch::asm!("hint #126", options(nostack, preserves_flags))
        } else {
            core::arch::asm!("hint #127", options(nostack, preserves_flags))
        }
    }
}
