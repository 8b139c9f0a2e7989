//! An Arm PMUv3 driver shared by the EL2 hypervisor and the EL1 kernel.
//!
//! * [`events`]: the architectural common events and per-core tables (Cortex-A76's own events),
//!   looked up by name or number.
//! * [`ElFilter`]: count at EL0, EL1 and/or EL2 (PMEVTYPER<n>_EL0 / PMCCFILTR_EL0 P, U, NSK,
//!   NSU, NSH bits: NSK/NSU follow P/U, so the filter means the same with or without EL3).
//! * [`Pmu`]: the cycle counter (64-bit, PMCR.LC) and event counters claimed by event, read as
//!   64-bit values. With PMUv3p5 (PMCR.LP) the hardware counters are 64-bit; without it they
//!   are 32-bit, and every overflow flag (PMOVSCLR_EL0) is folded into a per-counter wrap count
//!   in [`CpuState`] on each read and by [`Pmu::service_overflow`], which the PMU interrupt's
//!   handler calls (the interrupt is enabled with [`Pmu::enable_overflow_irq`]). A 32-bit
//!   counter read at least once per 2^32 events, or with the interrupt wired, never loses one.
//! * [`NotCounted`]: an honest "not counted here" for an event this CPU does not count,
//!   decided from PMCEID0/1 for the common events and from the core's table for its own,
//!   which QEMU TCG never counts (it counts SW_INCR, CPU_CYCLES, and INST_RETIRED only with
//!   `-icount`, exactly what its PMCEID says).
//!
//! Register access goes through [`PmuRegs`]: [`hw::SysRegs`] on the target, a simulated PMU in
//! the host tests. The per-CPU state is the caller's (one [`CpuState`] per CPU, `static`), so
//! an interrupt handler can reach it without a lock.

#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

pub mod events;
#[cfg(target_arch = "aarch64")]
pub mod hw;

use core::sync::atomic::{AtomicU32, Ordering};
pub use events::{Core, Event};

/// Index of the cycle counter in PMCNTENSET/PMOVSCLR/PMINTENSET and in [`CpuState`].
pub const CYCLE_IDX: u8 = 31;

/// PMCR_EL0 bits.
pub mod pmcr {
    /// E: enable the counters (those below MDCR_EL2.HPMN).
    pub const E: u64 = 1 << 0;
    /// P: reset every event counter (never used: counters are shared by claim).
    pub const P: u64 = 1 << 1;
    /// C: reset the cycle counter (never used: readers take differences).
    pub const C: u64 = 1 << 2;
    /// LC: the cycle counter overflows at 64 bits.
    pub const LC: u64 = 1 << 6;
    /// LP: event counters are 64-bit (PMUv3p5).
    pub const LP: u64 = 1 << 7;
    /// N: number of event counters this EL may use (at EL1 under a hypervisor: MDCR_EL2.HPMN).
    pub const fn n(pmcr: u64) -> u8 {
        ((pmcr >> 11) & 0x1f) as u8
    }
}

/// Which exception levels an event counter (or the cycle counter) counts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElFilter {
    /// Count at EL0.
    pub el0: bool,
    /// Count at EL1.
    pub el1: bool,
    /// Count at EL2.
    pub el2: bool,
}

impl ElFilter {
    /// EL0, EL1 and EL2: a guest's work and the hypervisor's work on its behalf.
    pub const ALL: ElFilter = ElFilter { el0: true, el1: true, el2: true };

    /// The PMEVTYPER / PMCCFILTR filter bits: P (31) and U (30) exclude EL1 and EL0, NSK (29)
    /// and NSU (28) equal P and U (with EL3 present, Non-secure EL1/EL0 then count as P/U say;
    /// without EL3 they are ignored), NSH (27) includes EL2.
    pub const fn bits(self) -> u64 {
        let p = !self.el1 as u64;
        let u = !self.el0 as u64;
        (p << 31) | (u << 30) | (p << 29) | (u << 28) | ((self.el2 as u64) << 27)
    }

    /// Parses `el0+el1+el2` (any subset, any order) or `all`.
    pub fn parse(s: &str) -> Option<ElFilter> {
        if s.eq_ignore_ascii_case("all") {
            return Some(ElFilter::ALL);
        }
        let mut f = ElFilter { el0: false, el1: false, el2: false };
        for part in s.split('+') {
            if part.eq_ignore_ascii_case("el0") {
                f.el0 = true;
            } else if part.eq_ignore_ascii_case("el1") {
                f.el1 = true;
            } else if part.eq_ignore_ascii_case("el2") {
                f.el2 = true;
            } else {
                return None;
            }
        }
        Some(f)
    }

    /// `el0+el1+el2` style name.
    pub fn name(self) -> &'static str {
        match (self.el0, self.el1, self.el2) {
            (true, true, true) => "el0+el1+el2",
            (true, true, false) => "el0+el1",
            (true, false, true) => "el0+el2",
            (false, true, true) => "el1+el2",
            (true, false, false) => "el0",
            (false, true, false) => "el1",
            (false, false, true) => "el2",
            (false, false, false) => "none",
        }
    }
}

/// Why an event is not counted here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCounted {
    /// The CPU has no PMUv3 (ID_AA64DFR0_EL1.PMUVer 0 or IMPLEMENTATION DEFINED).
    NoPmu,
    /// PMCEID0/1 says this CPU does not implement the common event.
    NotImplemented,
    /// An IMPLEMENTATION DEFINED event of this core's table under an emulator, which counts
    /// only the common events its PMCEID advertises.
    Emulated,
    /// An IMPLEMENTATION DEFINED event number that this core's table does not list.
    NotThisCore,
    /// Advertised by the emulator's PMCEID but never counted: QEMU lists STALL_FRONTEND,
    /// STALL_BACKEND and STALL and reads them as 0.
    EmulatedZero,
    /// Every event counter this EL may use is taken.
    NoFreeCounter,
}

impl NotCounted {
    /// One line for tables and records.
    pub const fn why(self) -> &'static str {
        match self {
            NotCounted::NoPmu => "no PMUv3 on this CPU",
            NotCounted::NotImplemented => "not implemented here (PMCEID0/1)",
            NotCounted::Emulated => "not counted under QEMU TCG (IMPLEMENTATION DEFINED event)",
            NotCounted::NotThisCore => "not an event of this core",
            NotCounted::EmulatedZero => "advertised by QEMU's PMCEID but always 0 under TCG",
            NotCounted::NoFreeCounter => "no free event counter",
        }
    }
}

/// The events QEMU TCG really counts (QEMU 7.2 `pm_events`): SW_INCR, INST_RETIRED (only under
/// `-icount`, and only then in its PMCEID), CPU_CYCLES (virtual nanoseconds at a nominal 1 GHz).
/// Everything else its PMCEID lists reads 0.
pub const QEMU_COUNTED: [u16; 3] = [events::SW_INCR, events::INST_RETIRED, events::CPU_CYCLES];

/// Whether these PMCEID0/1 values are QEMU TCG's: besides SW_INCR, INST_RETIRED and CPU_CYCLES
/// (and the STALL events it reads as 0) it advertises no common event, where every real PMUv3
/// advertises dozens (cache and TLB refills above all). For a guest whose device tree does not
/// say it runs on QEMU (a board's tree on QEMU, or a hypervisor in between).
pub fn looks_emulated(pmceid: [u64; 2]) -> bool {
    let qemu0 = 1 << events::SW_INCR | 1 << events::INST_RETIRED | 1 << events::CPU_CYCLES;
    let qemu1 = 1 << (0x23 - 0x20) | 1 << (0x24 - 0x20) | 1 << (0x3c - 0x20);
    pmceid[0] & 0xffff_ffff & !qemu0 == 0 && pmceid[1] & 0xffff_ffff & !qemu1 == 0
}

/// Whether `event` is counted on a CPU with these PMCEID0/1 values, this core and this platform.
pub fn support(event: u16, pmceid: [u64; 2], core: Core, emulated: bool) -> Result<(), NotCounted> {
    let bit = |reg: u64, b: u16| reg >> b & 1 == 1;
    let advertised = match event {
        0x00..=0x1f => bit(pmceid[0], event),
        0x20..=0x3f => bit(pmceid[1], event - 0x20),
        0x4000..=0x401f => bit(pmceid[0], 32 + event - 0x4000),
        0x4020..=0x403f => bit(pmceid[1], 32 + event - 0x4020),
        _ => {
            return if !core.own_events().iter().any(|e| e.number == event) {
                Err(NotCounted::NotThisCore)
            } else if emulated {
                Err(NotCounted::Emulated)
            } else {
                Ok(())
            };
        }
    };
    if !advertised {
        Err(NotCounted::NotImplemented)
    } else if emulated && !QEMU_COUNTED.contains(&event) {
        Err(NotCounted::EmulatedZero)
    } else {
        Ok(())
    }
}

/// The PMU registers of the current CPU. Reads and writes are the plain system-register
/// accesses; the target implementation synchronises with an ISB where a write must take effect
/// before the next read ([`PmuRegs::sync`]).
pub trait PmuRegs {
    /// ID_AA64DFR0_EL1.PMUVer (bits 11:8).
    fn pmuver(&self) -> u8;
    /// PMCR_EL0.
    fn pmcr(&self) -> u64;
    /// Writes PMCR_EL0.
    fn set_pmcr(&self, v: u64);
    /// PMCEID0_EL0 and PMCEID1_EL0.
    fn pmceid(&self) -> [u64; 2];
    /// PMEVTYPER<n>_EL0.
    fn evtyper(&self, n: u8) -> u64;
    /// Writes PMEVTYPER<n>_EL0.
    fn set_evtyper(&self, n: u8, v: u64);
    /// PMEVCNTR<n>_EL0.
    fn evcntr(&self, n: u8) -> u64;
    /// Writes PMEVCNTR<n>_EL0.
    fn set_evcntr(&self, n: u8, v: u64);
    /// PMCCNTR_EL0.
    fn ccntr(&self) -> u64;
    /// Writes PMCCFILTR_EL0.
    fn set_ccfiltr(&self, v: u64);
    /// PMCNTENSET_EL0 (enabled counters).
    fn cnten(&self) -> u32;
    /// PMCNTENSET_EL0 / PMCNTENCLR_EL0: enables / disables the counters in `mask`.
    fn set_cnten(&self, mask: u32, on: bool);
    /// PMINTENSET_EL1 / PMINTENCLR_EL1: overflow interrupt on / off for `mask`.
    fn set_inten(&self, mask: u32, on: bool);
    /// PMOVSCLR_EL0: overflow flags.
    fn ovs(&self) -> u32;
    /// Writes PMOVSCLR_EL0: clears the flags in `mask`.
    fn clear_ovs(&self, mask: u32);
    /// PMSWINC_EL0: one software increment of the SW_INCR counters in `mask`.
    fn swinc(&self, mask: u32);
    /// Makes earlier writes take effect before later reads (ISB on the target).
    fn sync(&self);
    /// Runs `f` with this CPU's interrupts masked (so the overflow interrupt cannot run inside).
    fn without_irqs<T>(&self, f: impl FnOnce() -> T) -> T;
}

/// The per-CPU software state: which counters are claimed, and how often each 32-bit counter
/// has wrapped. One per CPU, `static`, reached by the interrupt handler without a lock.
pub struct CpuState {
    used: AtomicU32,
    wraps: [AtomicU32; 32],
}

impl CpuState {
    /// Nothing claimed.
    pub const fn new() -> Self {
        CpuState { used: AtomicU32::new(0), wraps: [const { AtomicU32::new(0) }; 32] }
    }

    /// Overflows seen on counter `idx` since it was claimed (cycle counter: [`CYCLE_IDX`]).
    pub fn wraps(&self, idx: u8) -> u32 {
        self.wraps[idx as usize].load(Ordering::Relaxed)
    }
}

impl Default for CpuState {
    fn default() -> Self {
        Self::new()
    }
}

/// What the PMU of this CPU offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// ID_AA64DFR0_EL1.PMUVer: 1 = PMUv3, 4 = v3p1, 5 = v3p4, 6 = v3p5, ...
    pub pmuver: u8,
    /// Event counters this EL may use (PMCR_EL0.N).
    pub counters: u8,
    /// 64-bit event counters (PMUv3p5, PMCR.LP).
    pub long_events: bool,
    /// PMCEID0_EL0, PMCEID1_EL0.
    pub pmceid: [u64; 2],
    /// The core's event table.
    pub core: Core,
    /// Running under an emulator (QEMU TCG).
    pub emulated: bool,
}

impl Info {
    /// Whether `event` is counted here.
    pub fn support(&self, event: u16) -> Result<(), NotCounted> {
        support(event, self.pmceid, self.core, self.emulated)
    }
}

/// An event counter claimed from a [`Pmu`]; give it back with [`Pmu::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    /// Hardware index (PMEVCNTR<idx>_EL0).
    pub idx: u8,
    /// What it counts.
    pub event: Event,
    /// Where it counts.
    pub filter: ElFilter,
}

/// The PMU of the current CPU.
pub struct Pmu<'s, R: PmuRegs> {
    regs: R,
    state: &'s CpuState,
    info: Info,
}

impl<'s, R: PmuRegs> Pmu<'s, R> {
    /// The PMU of this CPU, `None` without PMUv3. `midr` picks the core's event table;
    /// `emulated` says the CPU is QEMU TCG (IMPLEMENTATION DEFINED events are then not counted).
    /// Turns the counters on (PMCR.E, 64-bit cycle counter, 64-bit event counters with
    /// PMUv3p5) and starts the cycle counter at every EL; resets nothing, so other claimers'
    /// counts stay valid.
    pub fn new(regs: R, state: &'s CpuState, midr: u64, emulated: bool) -> Option<Self> {
        let pmuver = regs.pmuver();
        if pmuver == 0 || pmuver == 0xf {
            return None;
        }
        let long_events = pmuver >= 6;
        let pmcr_v = regs.pmcr();
        let info = Info {
            pmuver,
            counters: pmcr::n(pmcr_v),
            long_events,
            pmceid: regs.pmceid(),
            core: Core::from_midr(midr),
            emulated,
        };
        let want = pmcr::E | pmcr::LC | if long_events { pmcr::LP } else { 0 };
        if pmcr_v & want != want {
            // LP changes how the event counters wrap: flip it only while none is claimed.
            let keep_lp = if state.used.load(Ordering::Relaxed) != 0 { pmcr_v & pmcr::LP } else { want & pmcr::LP };
            regs.set_pmcr((pmcr_v & !(pmcr::P | pmcr::C | pmcr::LP)) | pmcr::E | pmcr::LC | keep_lp);
        }
        if regs.cnten() & (1 << CYCLE_IDX) == 0 {
            regs.set_ccfiltr(ElFilter::ALL.bits());
            regs.set_cnten(1 << CYCLE_IDX, true);
        }
        regs.sync();
        Some(Pmu { regs, state, info })
    }

    /// What this PMU offers.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The register interface (tests use it to step a simulated PMU).
    pub fn regs(&self) -> &R {
        &self.regs
    }

    /// The cycle counter (64-bit; free-running since the PMU was first enabled).
    pub fn cycles(&self) -> u64 {
        self.regs.sync();
        self.regs.ccntr()
    }

    /// Claims the lowest free event counter for `event`, zeroed and counting.
    pub fn claim(&self, event: Event, filter: ElFilter) -> Result<Counter, NotCounted> {
        self.claim_at(event, filter, false)
    }

    /// Claims the highest free event counter (scenario counting takes counters from the top,
    /// benchmarks from the bottom: a benchmark run inside a counted scenario keeps the low
    /// counters it always had).
    pub fn claim_high(&self, event: Event, filter: ElFilter) -> Result<Counter, NotCounted> {
        self.claim_at(event, filter, true)
    }

    fn claim_at(&self, event: Event, filter: ElFilter, high: bool) -> Result<Counter, NotCounted> {
        self.info.support(event.number)?;
        let n = self.info.counters.min(31);
        let idx = loop {
            let used = self.state.used.load(Ordering::Relaxed);
            let mut free = (0..n).filter(|i| used & (1 << i) == 0);
            let pick = if high { free.next_back() } else { free.next() };
            let Some(i) = pick else { return Err(NotCounted::NoFreeCounter) };
            if self.state.used.compare_exchange(used, used | (1 << i), Ordering::Acquire, Ordering::Relaxed).is_ok() {
                break i;
            }
        };
        let bit = 1u32 << idx;
        self.regs.set_cnten(bit, false);
        self.regs.set_evtyper(idx, filter.bits() | event.number as u64);
        self.regs.set_evcntr(idx, 0);
        self.regs.clear_ovs(bit);
        self.state.wraps[idx as usize].store(0, Ordering::Relaxed);
        self.regs.set_cnten(bit, true);
        self.regs.sync();
        Ok(Counter { idx, event, filter })
    }

    /// Stops `c` and frees its counter.
    pub fn release(&self, c: Counter) {
        let bit = 1u32 << c.idx;
        self.regs.set_cnten(bit, false);
        self.regs.set_inten(bit, false);
        self.state.used.fetch_and(!bit, Ordering::Release);
    }

    /// Events counted by `c` since it was claimed, as a 64-bit value.
    pub fn read(&self, c: &Counter) -> u64 {
        self.regs.sync();
        if self.info.long_events {
            return self.regs.evcntr(c.idx);
        }
        // A 32-bit counter: the wrap count and the low half must belong together. An overflow
        // between the two services changes the wrap count, and the read is repeated.
        loop {
            self.service_overflow();
            let hi = self.state.wraps(c.idx);
            let lo = self.regs.evcntr(c.idx) & 0xffff_ffff;
            self.service_overflow();
            if self.state.wraps(c.idx) == hi {
                return ((hi as u64) << 32) | lo;
            }
        }
    }

    /// Sets `c`'s count to `v` (the overflow tests start a counter just below a wrap).
    pub fn preset(&self, c: &Counter, v: u64) {
        self.regs.without_irqs(|| {
            if self.info.long_events {
                self.regs.set_evcntr(c.idx, v);
                self.state.wraps[c.idx as usize].store(0, Ordering::Relaxed);
            } else {
                self.regs.set_evcntr(c.idx, v & 0xffff_ffff);
                self.state.wraps[c.idx as usize].store((v >> 32) as u32, Ordering::Relaxed);
            }
            self.regs.clear_ovs(1 << c.idx);
        });
        self.regs.sync();
    }

    /// Folds the overflow flags into the wrap counts and clears them; returns the flags seen.
    /// The PMU interrupt handler calls this; reads call it too, so without the interrupt a
    /// counter read at least once per 2^32 events loses nothing.
    pub fn service_overflow(&self) -> u32 {
        self.regs.without_irqs(|| {
            let ovs = self.regs.ovs();
            if ovs != 0 {
                self.regs.clear_ovs(ovs);
                for i in 0..32 {
                    if ovs & (1 << i) != 0 {
                        self.state.wraps[i].fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            ovs
        })
    }

    /// Raises the PMU interrupt when `c` overflows (the handler calls
    /// [`Pmu::service_overflow`]); off by default.
    pub fn enable_overflow_irq(&self, c: &Counter, on: bool) {
        self.regs.set_inten(1 << c.idx, on);
    }

    /// One software increment of `c` (a SW_INCR counter).
    pub fn software_increment(&self, c: &Counter) {
        self.regs.swinc(1 << c.idx);
    }

    /// The lowest enabled counter below PMCR.N programmed for `event` (the hypervisor reads the
    /// guest's instruction counter this way).
    pub fn find_programmed(&self, event: u16) -> Option<u8> {
        let en = self.regs.cnten();
        (0..self.info.counters.min(31)).find(|&i| en & (1 << i) != 0 && self.regs.evtyper(i) & 0xffff == event as u64)
    }

    /// The raw count of counter `idx` (no wrap accounting: for a reader that does not own it).
    pub fn raw(&self, idx: u8) -> u64 {
        self.regs.evcntr(idx)
    }
}

/// A raw reading of a counter someone else programmed (the hypervisor reading its guest's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawCount {
    /// Counter index.
    pub idx: u8,
    /// Its value now.
    pub value: u64,
    /// Its width: 64 with PMCR.LP, else 32.
    pub bits: u8,
}

impl RawCount {
    /// Events between `earlier` and `self` (one wrap of the counter's width allowed).
    pub fn since(&self, earlier: &RawCount) -> u64 {
        let mask = if self.bits >= 64 { u64::MAX } else { (1u64 << self.bits) - 1 };
        self.value.wrapping_sub(earlier.value) & mask
    }
}

/// The lowest enabled counter below PMCR.N counting `event`, read without changing anything
/// (no claim, no PMCR write): for a reader that does not own the PMU.
pub fn observe<R: PmuRegs>(regs: &R, event: u16) -> Option<RawCount> {
    let pmcr_v = regs.pmcr();
    let en = regs.cnten();
    let idx = (0..pmcr::n(pmcr_v).min(31)).find(|&i| en & (1 << i) != 0 && regs.evtyper(i) & 0xffff == event as u64)?;
    Some(RawCount { idx, value: regs.evcntr(idx), bits: if pmcr_v & pmcr::LP != 0 { 64 } else { 32 } })
}

/// MDCR_EL2 for a CPU that runs a guest: HPMN = every event counter (the guest owns the PMU),
/// no trap of PMU registers (TPM, TPMCR = 0), EL2 counting allowed (HPMD = 0, HCCD = 0), so
/// a guest's counters with NSH set include the hypervisor's work on its behalf.
pub const fn mdcr_el2_for_guest(pmcr_el0: u64) -> u64 {
    pmcr::n(pmcr_el0) as u64
}

#[cfg(test)]
mod sim;

#[cfg(test)]
mod tests;
