//! A GIC model for host tests: the registers [`super::v2`] and [`super::v3`] use, with the
//! state machine behind them (pending, active, priority drop), and a list of every rule a
//! write broke. Where QEMU's TCG is lenient the model is not:
//!
//! * GICv2: an SGI is pending once per source CPU; GICC_IAR returns the source in bits [12:10],
//!   and GICC_EOIR must be written with that same value. An EOI naming another source (or
//!   another INTID) does not match the active interrupt: like a GIC-400 the model leaves it
//!   active, so the CPU's running priority never drops and nothing else is signalled.
//! * Nothing is ended that was not acknowledged (a spurious 1020-1023 in particular), and an
//!   interrupt is only signalled while the CPU interface and the distributor are enabled, it is
//!   enabled, its priority is below the priority mask and below the running priority.
//! * An SGI register write must follow a `DSB ISHST` with no other register write between.
//! * With [`FakeGic::with_delays`], an SGI takes the way it does on hardware: the write is posted
//!   (it reaches the distributor at [`FakeGic::land`], or when the CPU that wrote it reads a
//!   distributor register: a read from the same device cannot pass the write), and once pending
//!   it reaches the target's CPU interface only at [`FakeGic::forward`] (until then GICC_IAR
//!   does not see it, GICD_SPENDSGIR does).
//! * GICv3: ICC_SGI1R_EL1 is decoded as the architecture says (Aff3.Aff2.Aff1, the range
//!   selector and the target list name the CPUs by MPIDR); redistributors are found only at
//!   their frames; ICC registers need ICC_SRE_EL1.SRE set first.
//!
//! One [`FakeGic`] serves every CPU: [`FakeGic::on`] sets the CPU whose banked view the next
//! register accesses see (the drivers take `&FakeGic` as their register access).

use crate::{v2, v3, SPURIOUS};
use core::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::format;
use std::string::String;
use std::vec;
use std::vec::Vec;

/// Which GIC the model is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// GICv2.
    V2,
    /// GICv3.
    V3,
}

/// An interrupt as the model tracks it: INTID and, for a GICv2 SGI, its source CPU (else 0).
pub type Irq = (u32, u32);

#[derive(Debug, Clone, Default)]
struct Cpu {
    /// Banked (0-31) enable bits.
    banked_enabled: u32,
    /// Banked priorities.
    banked_priority: [u8; 32],
    pending: BTreeSet<Irq>,
    /// Pending and not yet forwarded to the CPU interface (with delays).
    held: BTreeSet<Irq>,
    /// Acknowledged and not ended, in acknowledge order (the last one is the running one).
    active: Vec<Irq>,
    iface_enabled: bool,
    pmr: u8,
    /// GICv3: ICC_SRE_EL1.SRE, ICC_IGRPEN1_EL1.
    sre: bool,
    /// GICv3: GICR_WAKER.ProcessorSleep (set out of reset).
    sleeping: bool,
}

#[derive(Debug)]
struct State {
    cpus: Vec<Cpu>,
    mpidr: Vec<u64>,
    dist_enabled: bool,
    /// Shared interrupts (32 and up): enabled bits.
    spi_enabled: BTreeSet<u32>,
    lines: u32,
    /// A DSB ISHST came after the last register write.
    dsb_armed: bool,
    violations: Vec<String>,
    /// Every SGI sent: (from, to, intid).
    sgis: Vec<(usize, usize, u32)>,
    eois: u64,
    /// SGIs take time to arrive ([`FakeGic::with_delays`]).
    delays: bool,
    /// SGI writes on their way to the distributor: (writer, target, interrupt).
    posted: Vec<(usize, usize, Irq)>,
}

/// The model.
#[derive(Debug)]
pub struct FakeGic {
    version: Version,
    cur: Cell<usize>,
    s: RefCell<State>,
    /// GICv3 redistributor regions: (address, bytes) and the frame stride of each CPU.
    regions: Vec<(usize, usize)>,
    /// GICv3: RD_base address of each CPU.
    rd: Vec<usize>,
    vlpis: bool,
}

/// Where the model's single GICv3 redistributor region starts.
pub const RD_REGION: usize = 0x80a_0000;

impl FakeGic {
    fn with(version: Version, mpidr: Vec<u64>, lines: u32, vlpis: bool) -> Self {
        let n = mpidr.len();
        let stride = if vlpis { v3::FRAMES_4 } else { v3::FRAMES_2 };
        let rd = (0..n).map(|c| RD_REGION + c * stride).collect();
        FakeGic {
            version,
            cur: Cell::new(0),
            s: RefCell::new(State {
                cpus: vec![Cpu { sleeping: true, ..Cpu::default() }; n],
                mpidr,
                dist_enabled: false,
                spi_enabled: BTreeSet::new(),
                lines,
                dsb_armed: false,
                violations: Vec::new(),
                sgis: Vec::new(),
                eois: 0,
                delays: false,
                posted: Vec::new(),
            }),
            regions: vec![(RD_REGION, n * stride)],
            rd,
            vlpis,
        }
    }

    /// A GICv2 with `cpus` CPU interfaces (interface bit `c` is CPU `c`) and 96 lines.
    pub fn v2(cpus: usize) -> Self {
        Self::with(Version::V2, (0..cpus as u64).collect(), 96, false)
    }

    /// A GICv3 whose CPUs have these MPIDRs (one redistributor each, in this order, in one
    /// region; with `vlpis` each takes four frames), 96 lines.
    pub fn v3(mpidrs: &[u64], vlpis: bool) -> Self {
        Self::with(Version::V3, mpidrs.to_vec(), 96, vlpis)
    }

    /// The same model whose SGIs take time to arrive: posted on the way to the distributor
    /// ([`Self::land`]), then pending but not yet at the target's CPU interface
    /// ([`Self::forward`]).
    pub fn with_delays(self) -> Self {
        self.s.borrow_mut().delays = true;
        self
    }

    /// Whether an SGI is on its way: posted, or pending and not yet forwarded.
    pub fn in_flight(&self) -> bool {
        let s = self.s.borrow();
        !s.posted.is_empty() || s.cpus.iter().any(|c| !c.held.is_empty())
    }

    /// The oldest posted SGI write reaches the distributor (pending, not yet forwarded).
    /// Whether there was one.
    pub fn land(&self) -> bool {
        let mut s = self.s.borrow_mut();
        if s.posted.is_empty() {
            return false;
        }
        let (_, to, irq) = s.posted.remove(0);
        s.cpus[to].pending.insert(irq);
        s.cpus[to].held.insert(irq);
        true
    }

    /// The pending SGIs of CPU `c` reach its CPU interface. Whether there were any.
    pub fn forward(&self, c: usize) -> bool {
        let mut s = self.s.borrow_mut();
        let any = !s.cpus[c].held.is_empty();
        s.cpus[c].held.clear();
        any
    }

    /// The writes CPU `c` posted reach the distributor (it reads a distributor register).
    fn land_from(&self, c: usize) {
        let mut s = self.s.borrow_mut();
        let (mine, others): (Vec<_>, Vec<_>) = s.posted.drain(..).partition(|&(from, _, _)| from == c);
        s.posted = others;
        for (_, to, irq) in mine {
            s.cpus[to].pending.insert(irq);
            s.cpus[to].held.insert(irq);
        }
    }

    /// The redistributor regions (for [`v3::GicV3::new`]).
    pub fn regions(&self) -> Vec<(usize, usize)> {
        self.regions.clone()
    }

    /// The MPIDR of CPU `c`.
    pub fn mpidr(&self, c: usize) -> u64 {
        self.s.borrow().mpidr[c]
    }

    /// From now on register accesses are CPU `c`'s.
    pub fn on(&self, c: usize) -> &Self {
        self.cur.set(c);
        self
    }

    /// Runs `f` as CPU `c`.
    pub fn as_cpu<T>(&self, c: usize, f: impl FnOnce() -> T) -> T {
        let was = self.cur.replace(c);
        let r = f();
        self.cur.set(was);
        r
    }

    /// Makes PPI (or SGI, with source 0) `intid` of CPU `c` pending, as a device would.
    pub fn raise(&self, c: usize, intid: u32) {
        self.s.borrow_mut().cpus[c].pending.insert((intid, 0));
    }

    /// The rules broken so far.
    pub fn violations(&self) -> Vec<String> {
        self.s.borrow().violations.clone()
    }

    /// Ok, or every rule broken.
    pub fn verdict(&self) -> Result<(), String> {
        let v = self.violations();
        if v.is_empty() {
            Ok(())
        } else {
            Err(v.join("\n"))
        }
    }

    /// Pending interrupts of CPU `c`.
    pub fn pending(&self, c: usize) -> Vec<Irq> {
        self.s.borrow().cpus[c].pending.iter().copied().collect()
    }

    /// Active interrupts of CPU `c` (acknowledged, not ended).
    pub fn active(&self, c: usize) -> Vec<Irq> {
        self.s.borrow().cpus[c].active.clone()
    }

    /// Every SGI sent so far: (from, to, intid).
    pub fn sgis(&self) -> Vec<(usize, usize, u32)> {
        self.s.borrow().sgis.clone()
    }

    /// EOIs that ended an interrupt.
    pub fn eois(&self) -> u64 {
        self.s.borrow().eois
    }

    /// The shared interrupts (SPIs) enabled now.
    pub fn spis_enabled(&self) -> Vec<u32> {
        self.s.borrow().spi_enabled.iter().copied().collect()
    }

    /// Whether banked interrupt `intid` is enabled on CPU `c`.
    pub fn banked_enabled(&self, c: usize, intid: u32) -> bool {
        self.s.borrow().cpus[c].banked_enabled & (1 << intid) != 0
    }

    fn violation(s: &mut State, m: String) {
        if s.violations.len() < 64 {
            s.violations.push(m);
        }
    }

    fn priority(s: &State, c: usize, intid: u32) -> u8 {
        if intid < 32 {
            s.cpus[c].banked_priority[intid as usize]
        } else {
            0
        }
    }

    fn enabled(s: &State, c: usize, intid: u32) -> bool {
        if intid < 32 {
            s.cpus[c].banked_enabled & (1 << intid) != 0
        } else {
            s.spi_enabled.contains(&intid)
        }
    }

    /// The highest-priority interrupt CPU `c`'s interface signals in state `s`.
    fn best(&self, s: &State, c: usize) -> Option<Irq> {
        let st = &s.cpus[c];
        let ready = if self.version == Version::V3 { st.sre } else { true };
        if !s.dist_enabled || !st.iface_enabled || !ready {
            return None;
        }
        let running = st.active.last().map(|&(i, _)| Self::priority(s, c, i)).unwrap_or(0xff);
        st.pending
            .iter()
            .filter(|irq| !st.held.contains(irq))
            .filter(|&&(i, _)| Self::enabled(s, c, i))
            .filter(|&&(i, _)| {
                let p = Self::priority(s, c, i);
                p < st.pmr && p < running
            })
            .min_by_key(|&&(i, src)| (Self::priority(s, c, i), i, src))
            .copied()
    }

    /// The interrupt CPU `c`'s interface signals now, if any: what would wake it from WFI.
    pub fn signalled(&self, c: usize) -> Option<Irq> {
        self.best(&self.s.borrow(), c)
    }

    /// Whether the distributor is enabled (GICv2: GICD_CTLR bit 0).
    pub fn distributor_enabled(&self) -> bool {
        self.s.borrow().dist_enabled
    }

    /// CPU `c`'s banked priority of interrupt `intid` (0-31) and its interface's priority mask.
    pub fn banked_priority(&self, c: usize, intid: u32) -> (u8, u8) {
        let s = self.s.borrow();
        (s.cpus[c].banked_priority[intid as usize], s.cpus[c].pmr)
    }

    /// Whether CPU `c`'s interface is enabled.
    pub fn interface_enabled(&self, c: usize) -> bool {
        self.s.borrow().cpus[c].iface_enabled
    }

    /// The acknowledge: the highest-priority signalled interrupt becomes active.
    fn acknowledge(&self) -> Option<Irq> {
        let c = self.cur.get();
        let mut s = self.s.borrow_mut();
        let best = self.best(&s, c)?;
        let st = &mut s.cpus[c];
        st.pending.remove(&best);
        st.active.push(best);
        Some(best)
    }

    fn end(&self, written: Irq, raw: u64) {
        let c = self.cur.get();
        let mut s = self.s.borrow_mut();
        if written.0 >= SPURIOUS && written.0 <= 1023 {
            Self::violation(&mut s, format!("CPU {c} wrote the EOI register with the spurious INTID {}", written.0));
            return;
        }
        match s.cpus[c].active.last().copied() {
            Some(a) if a == written => {
                s.cpus[c].active.pop();
                s.eois += 1;
            }
            Some(a) => Self::violation(
                &mut s,
                format!(
                    "CPU {c} ended {raw:#x} (INTID {}, source {}) but its running interrupt is INTID {} from source {}: \
                     it stays active and the CPU's priority never drops",
                    written.0, written.1, a.0, a.1
                ),
            ),
            None => {
                Self::violation(&mut s, format!("CPU {c} ended {raw:#x} with no interrupt active"));
            }
        }
    }

    fn sgi_written(&self, what: &str) {
        let c = self.cur.get();
        let mut s = self.s.borrow_mut();
        if !s.dsb_armed {
            Self::violation(&mut s, format!("CPU {c} wrote {what} without a DSB ISHST before it"));
        }
    }

    fn send(&self, to: usize, intid: u32, source: u32) {
        let from = self.cur.get();
        let mut s = self.s.borrow_mut();
        if to >= s.cpus.len() {
            Self::violation(&mut s, format!("CPU {from} sent SGI {intid} to CPU {to}, which does not exist"));
            return;
        }
        if s.delays {
            s.posted.push((from, to, (intid, source)));
        } else {
            s.cpus[to].pending.insert((intid, source));
        }
        s.sgis.push((from, to, intid));
    }

    fn written(&self) {
        self.s.borrow_mut().dsb_armed = false;
    }

    fn rd_cpu(&self, addr: usize, what: &str) -> Option<usize> {
        let found = self.rd.iter().position(|&a| a == addr);
        if found.is_none() {
            let mut s = self.s.borrow_mut();
            let c = self.cur.get();
            Self::violation(&mut s, format!("CPU {c} accessed {what} at {addr:#x}, where no redistributor frame is"));
        }
        found
    }

    fn need_sre(&self, what: &str) {
        let c = self.cur.get();
        let mut s = self.s.borrow_mut();
        if !s.cpus[c].sre {
            Self::violation(&mut s, format!("CPU {c} accessed {what} before setting ICC_SRE_EL1.SRE"));
        }
    }
}

impl v2::Regs for &FakeGic {
    fn read(&self, r: v2::Reg) -> u32 {
        use v2::Reg::*;
        if self.version != Version::V2 {
            panic!("GICv2 register {r:?} read on a GICv3 model");
        }
        let c = self.cur.get();
        if !matches!(r, CCtlr | CPmr | CBpr | CIar | CEoir) {
            self.land_from(c);
        }
        match r {
            DCtlr => self.s.borrow().dist_enabled as u32,
            DTyper => self.s.borrow().lines / 32 - 1,
            DIsenabler(0) | DIcenabler(0) => self.s.borrow().cpus[c].banked_enabled,
            DIsenabler(_) | DIcenabler(_) => 0,
            DIpriority(i) if i < 32 => self.s.borrow().cpus[c].banked_priority[i as usize] as u32,
            DIpriority(_) => 0,
            DItargets(i) if i < 32 => {
                if self.s.borrow().cpus.len() > 1 {
                    1 << c
                } else {
                    0
                }
            }
            DItargets(_) => 0,
            DCpendsgir(i) => {
                let s = self.s.borrow();
                s.cpus[c].pending.iter().filter(|&&(id, _)| id == i).fold(0, |b, &(_, src)| b | 1 << src)
            }
            CCtlr => self.s.borrow().cpus[c].iface_enabled as u32,
            CPmr => self.s.borrow().cpus[c].pmr as u32,
            CBpr => 0,
            CIar => match self.acknowledge() {
                Some((intid, src)) => intid | (src << 10),
                None => 1023,
            },
            DSgir | CEoir => {
                let mut s = self.s.borrow_mut();
                FakeGic::violation(&mut s, format!("CPU {c} read the write-only {r:?}"));
                0
            }
        }
    }

    fn write(&self, r: v2::Reg, v: u32) {
        use v2::Reg::*;
        let c = self.cur.get();
        match r {
            DSgir => {
                self.sgi_written("GICD_SGIR");
                if (v >> 24) & 3 != 0 {
                    let mut s = self.s.borrow_mut();
                    FakeGic::violation(&mut s, format!("GICD_SGIR {v:#x}: TargetListFilter is not 0 (the list)"));
                } else {
                    for to in (0..8).filter(|t| (v >> 16) & (1 << t) != 0) {
                        self.send(to, v & 0xf, c as u32);
                    }
                }
            }
            CEoir => self.end((v & 0x3ff, (v >> 10) & 7), v as u64),
            _ => {
                let mut s = self.s.borrow_mut();
                match r {
                    DCtlr => s.dist_enabled = v & 1 != 0,
                    DIsenabler(0) => s.cpus[c].banked_enabled |= v,
                    DIcenabler(0) => s.cpus[c].banked_enabled &= !v,
                    DIsenabler(n) => (0..32).filter(|b| v & (1 << b) != 0).for_each(|b| {
                        s.spi_enabled.insert(n as u32 * 32 + b);
                    }),
                    DIcenabler(n) => (0..32).filter(|b| v & (1 << b) != 0).for_each(|b| {
                        s.spi_enabled.remove(&(n as u32 * 32 + b));
                    }),
                    DIpriority(i) if i < 32 => s.cpus[c].banked_priority[i as usize] = v as u8,
                    DIpriority(_) | DItargets(_) => {}
                    DCpendsgir(i) => {
                        let cleared = |&(id, src): &Irq| id == i && v & (1 << src) != 0;
                        s.cpus[c].pending.retain(|irq| !cleared(irq));
                        s.cpus[c].held.retain(|irq| !cleared(irq));
                    }
                    CCtlr => s.cpus[c].iface_enabled = v & 1 != 0,
                    CPmr => s.cpus[c].pmr = v as u8,
                    CBpr => {}
                    DTyper | CIar => FakeGic::violation(&mut s, format!("CPU {c} wrote the read-only {r:?}")),
                    DSgir | CEoir => unreachable!(),
                }
            }
        }
        self.written();
    }

    fn dsb_ishst(&self) {
        self.s.borrow_mut().dsb_armed = true;
    }
}

impl v3::Regs for &FakeGic {
    fn read(&self, r: v3::Reg) -> u64 {
        use v3::Reg::*;
        if self.version != Version::V3 {
            panic!("GICv3 register {r:?} read on a GICv2 model");
        }
        let c = self.cur.get();
        match r {
            DCtlr => {
                if self.s.borrow().dist_enabled {
                    v3::GICD_CTLR_ARE | v3::GICD_CTLR_ENABLE_G1A | v3::GICD_CTLR_ENABLE_G1
                } else {
                    0
                }
            }
            DTyper => (self.s.borrow().lines / 32 - 1) as u64,
            DIgroupr(_) => u32::MAX as u64,
            DIsenabler(_) | DIcenabler(_) => 0,
            RTyper(a) => match self.rd_cpu(a, "GICR_TYPER") {
                Some(k) => {
                    let s = self.s.borrow();
                    let last = if k + 1 == s.cpus.len() { v3::TYPER_LAST } else { 0 };
                    let vlpis = if self.vlpis { v3::TYPER_VLPIS } else { 0 };
                    (v3::typer_affinity(s.mpidr[k]) << 32) | last | vlpis | ((k as u64) << 8)
                }
                None => 0,
            },
            RWaker(a) => match self.rd_cpu(a, "GICR_WAKER") {
                Some(k) if self.s.borrow().cpus[k].sleeping => v3::WAKER_PROCESSOR_SLEEP | v3::WAKER_CHILDREN_ASLEEP,
                _ => 0,
            },
            SIgroupr0(_) => u32::MAX as u64,
            SIsenabler0(a) | SIcenabler0(a) => {
                self.rd_cpu(a, "GICR_ISENABLER0").map(|k| self.s.borrow().cpus[k].banked_enabled as u64).unwrap_or(0)
            }
            SIpriority(a, i) => self
                .rd_cpu(a, "GICR_IPRIORITYR")
                .map(|k| self.s.borrow().cpus[k].banked_priority[i as usize & 31] as u64)
                .unwrap_or(0),
            IccSre => self.s.borrow().cpus[c].sre as u64,
            IccPmr => {
                self.need_sre("ICC_PMR_EL1");
                self.s.borrow().cpus[c].pmr as u64
            }
            IccBpr1 | IccCtlr => 0,
            IccIgrpen1 => self.s.borrow().cpus[c].iface_enabled as u64,
            IccIar1 => {
                self.need_sre("ICC_IAR1_EL1");
                self.acknowledge().map(|(i, _)| i as u64).unwrap_or(1023)
            }
            IccEoir1 | IccSgi1r => {
                let mut s = self.s.borrow_mut();
                FakeGic::violation(&mut s, format!("CPU {c} read the write-only {r:?}"));
                0
            }
        }
    }

    fn write(&self, r: v3::Reg, v: u64) {
        use v3::Reg::*;
        let c = self.cur.get();
        match r {
            IccSgi1r => {
                self.need_sre("ICC_SGI1R_EL1");
                self.sgi_written("ICC_SGI1R_EL1");
                let intid = ((v >> 24) & 0xf) as u32;
                if v & (1 << 40) != 0 {
                    let mut s = self.s.borrow_mut();
                    FakeGic::violation(&mut s, format!("ICC_SGI1R_EL1 {v:#x}: IRM set (to all but self)"));
                } else {
                    let (aff1, aff2, aff3, rs) =
                        ((v >> 16) & 0xff, (v >> 32) & 0xff, (v >> 48) & 0xff, (v >> 44) & 0xf);
                    let targets: Vec<usize> = {
                        let s = self.s.borrow();
                        (0..s.cpus.len())
                            .filter(|&k| {
                                let m = s.mpidr[k];
                                let aff0 = m & 0xff;
                                (m >> 8) & 0xff == aff1
                                    && (m >> 16) & 0xff == aff2
                                    && (m >> 32) & 0xff == aff3
                                    && aff0 >> 4 == rs
                                    && v & (1 << (aff0 & 0xf)) != 0
                            })
                            .collect()
                    };
                    if targets.is_empty() {
                        let mut s = self.s.borrow_mut();
                        FakeGic::violation(&mut s, format!("ICC_SGI1R_EL1 {v:#x} names no CPU"));
                    }
                    for t in targets {
                        self.send(t, intid, 0);
                    }
                }
            }
            IccEoir1 => {
                self.need_sre("ICC_EOIR1_EL1");
                self.end(((v & 0xff_ffff) as u32, 0), v)
            }
            _ => {
                let rd = |a: usize, what: &str| self.rd_cpu(a, what);
                match r {
                    RWaker(a) => {
                        if let Some(k) = rd(a, "GICR_WAKER") {
                            self.s.borrow_mut().cpus[k].sleeping = v & v3::WAKER_PROCESSOR_SLEEP != 0;
                        }
                    }
                    SIsenabler0(a) => {
                        if let Some(k) = rd(a, "GICR_ISENABLER0") {
                            self.s.borrow_mut().cpus[k].banked_enabled |= v as u32;
                        }
                    }
                    SIcenabler0(a) => {
                        if let Some(k) = rd(a, "GICR_ICENABLER0") {
                            self.s.borrow_mut().cpus[k].banked_enabled &= !(v as u32);
                        }
                    }
                    SIpriority(a, i) => {
                        if let Some(k) = rd(a, "GICR_IPRIORITYR") {
                            self.s.borrow_mut().cpus[k].banked_priority[i as usize & 31] = v as u8;
                        }
                    }
                    SIgroupr0(a) => {
                        rd(a, "GICR_IGROUPR0");
                    }
                    _ => {
                        let mut s = self.s.borrow_mut();
                        match r {
                            DCtlr => {
                                s.dist_enabled = v & (v3::GICD_CTLR_ENABLE_G1 | v3::GICD_CTLR_ENABLE_G1A) != 0;
                                if s.dist_enabled && v & v3::GICD_CTLR_ARE == 0 {
                                    FakeGic::violation(&mut s, "GICD_CTLR enabled without affinity routing".into());
                                }
                            }
                            DIsenabler(n) => (0..32).filter(|b| v & (1 << b) != 0).for_each(|b| {
                                s.spi_enabled.insert(n as u32 * 32 + b);
                            }),
                            DIcenabler(n) => (0..32).filter(|b| v & (1 << b) != 0).for_each(|b| {
                                s.spi_enabled.remove(&(n as u32 * 32 + b));
                            }),
                            DIgroupr(_) => {}
                            IccSre => s.cpus[c].sre = v & 1 != 0,
                            IccPmr => s.cpus[c].pmr = v as u8,
                            IccBpr1 => {}
                            IccCtlr => {
                                if v & 2 != 0 {
                                    FakeGic::violation(
                                        &mut s,
                                        "ICC_CTLR_EL1.EOImode 1: EOI would not deactivate".into(),
                                    );
                                }
                            }
                            IccIgrpen1 => s.cpus[c].iface_enabled = v & 1 != 0,
                            DTyper | RTyper(_) | IccIar1 => {
                                FakeGic::violation(&mut s, format!("CPU {c} wrote the read-only {r:?}"))
                            }
                            _ => unreachable!(),
                        }
                        if matches!(r, IccPmr | IccBpr1 | IccCtlr | IccIgrpen1) && !s.cpus[c].sre {
                            FakeGic::violation(
                                &mut s,
                                format!("CPU {c} accessed {r:?} before setting ICC_SRE_EL1.SRE"),
                            );
                        }
                    }
                }
            }
        }
        self.written();
    }

    fn dsb_ishst(&self) {
        self.s.borrow_mut().dsb_armed = true;
    }

    fn isb(&self) {}
}
