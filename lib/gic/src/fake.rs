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
//! * Active state and active priorities are two things, as on hardware: an acknowledge makes
//!   the interrupt active and sets the bit of its priority in the CPU's active priorities
//!   (GICC_APRn / ICC_AP1Rn_EL1, one bit per preemption level, [`FakeGic::with_priority_bits`]
//!   bits of priority, the architecture's recommended layout); an EOI drops the highest active
//!   priority and deactivates. GICD_ICACTIVERn / GICR_ICACTIVER0 deactivate and leave the
//!   active priorities alone: the running priority is the highest active priority, so one left
//!   set (firmware acknowledged and never ended) blocks every interrupt of that priority or
//!   lower until software zeroes it. Active priority registers take only 0, with nothing active
//!   on the CPU, or the value they hold; GICv3's beyond what ICC_CTLR_EL1.PRIbits implies are
//!   UNDEFINED (GICv2's are RAZ/WI).
//! * GICv2's GICD_ICPENDR0 does not clear SGIs (GICD_CPENDSGIRn does, per source CPU);
//!   GICv3's GICR_ICPENDR0 does.
//! * Init order: active or pending state is cleared (ICACTIVER, ICPENDR) only of disabled
//!   interrupts, on GICv3 only once the disable took effect (GICD_CTLR.RWP / GICR_CTLR.RWP read
//!   0 after the ICENABLER write); an ICENABLER write sets RWP until it is read once.
//! * Shared interrupts (SPIs) have a priority, pending and active state and are signalled to
//!   CPU 0 only (the model has no GICD_ITARGETSR / GICD_IROUTER routing; the kernel routes
//!   none).
//!
//! One [`FakeGic`] serves every CPU: [`FakeGic::on`] sets the CPU whose banked view the next
//! register accesses see (the drivers take `&FakeGic` as their register access).

use crate::{v2, v3, BANKED, SGIS, SPURIOUS};
use core::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
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
    /// Acknowledged and not ended (nor deactivated), in acknowledge order; SPIs too.
    active: Vec<Irq>,
    /// Active priorities: bit `l` = an interrupt of preemption level `l` was acknowledged and
    /// its priority not dropped (GICC_APRn / ICC_AP1Rn_EL1 are its 32-bit words).
    apr: u128,
    /// GICv3: a GICR_ICENABLER0 write has not taken effect (GICR_CTLR.RWP reads 1 once).
    rd_rwp: bool,
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
    /// Pending shared interrupts (signalled to CPU 0).
    spi_pending: BTreeSet<u32>,
    /// Priorities of shared interrupts (0 unless written).
    spi_priority: BTreeMap<u32, u8>,
    /// GICv3: a GICD_CTLR or GICD_ICENABLERn write has not taken effect (RWP reads 1 once).
    dist_rwp: bool,
    /// Bits of priority the CPU interfaces implement.
    pribits: u32,
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
                spi_pending: BTreeSet::new(),
                spi_priority: BTreeMap::new(),
                dist_rwp: false,
                pribits: 5,
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

    /// The same model whose CPU interfaces implement `bits` (4-8) bits of priority (5 unless
    /// set: QEMU's and the Cortex-A cores'): priorities are kept to those bits, there are
    /// 2^min(bits, 7) preemption levels, and as many active priority registers as those take.
    pub fn with_priority_bits(self, bits: u32) -> Self {
        assert!((4..=8).contains(&bits), "{bits} bits of priority");
        self.s.borrow_mut().pribits = bits;
        self
    }

    /// Sets the priority of shared interrupt `intid`, as firmware would have.
    pub fn set_spi_priority(&self, intid: u32, priority: u8) {
        self.s.borrow_mut().spi_priority.insert(intid, priority);
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

    /// Which GIC the model is.
    pub fn version(&self) -> Version {
        self.version
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

    /// Makes PPI (or SGI, with source 0) `intid` of CPU `c` pending, as a device would; an
    /// SPI (32 and up, `c` ignored) is pending in the distributor.
    pub fn raise(&self, c: usize, intid: u32) {
        let mut s = self.s.borrow_mut();
        if intid >= BANKED {
            s.spi_pending.insert(intid);
        } else {
            s.cpus[c].pending.insert((intid, 0));
        }
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

    /// Pending shared interrupts.
    pub fn spis_pending(&self) -> Vec<u32> {
        self.s.borrow().spi_pending.iter().copied().collect()
    }

    /// Active shared interrupts (acknowledged by any CPU, not ended or deactivated).
    pub fn spis_active(&self) -> Vec<u32> {
        let s = self.s.borrow();
        s.cpus.iter().flat_map(|c| c.active.iter()).filter(|&&(i, _)| i >= BANKED).map(|&(i, _)| i).collect()
    }

    /// CPU `c`'s active priorities (bit `l`: preemption level `l`).
    pub fn active_priorities(&self, c: usize) -> u128 {
        self.s.borrow().cpus[c].apr
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

    /// The priority of `intid` on CPU `c`, kept to the implemented bits.
    fn priority(s: &State, c: usize, intid: u32) -> u8 {
        let p = if intid < BANKED {
            s.cpus[c].banked_priority[intid as usize]
        } else {
            s.spi_priority.get(&intid).copied().unwrap_or(0)
        };
        p & (0xffu8 << (8 - s.pribits))
    }

    /// Bits of preemption (group priority): at most 7.
    fn preemption_bits(s: &State) -> u32 {
        s.pribits.min(7)
    }

    /// The preemption level of priority `p`: its active priority bit.
    fn level(s: &State, p: u8) -> u32 {
        p as u32 >> (8 - Self::preemption_bits(s))
    }

    /// The running priority of CPU `c`: that of its highest active priority (0x100: idle).
    fn running(s: &State, c: usize) -> u32 {
        match s.cpus[c].apr {
            0 => 0x100,
            apr => apr.trailing_zeros() << (8 - Self::preemption_bits(s)),
        }
    }

    /// The active priority registers (32-bit words) the CPU interface implements.
    fn aprs_implemented(s: &State) -> usize {
        ((1usize << Self::preemption_bits(s)) / 32).max(1)
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
        let running = Self::running(s, c);
        let spis = s.spi_pending.iter().filter(|_| c == 0).map(|&i| (i, 0));
        st.pending
            .iter()
            .copied()
            .chain(spis)
            .filter(|irq| !st.held.contains(irq))
            .filter(|&(i, _)| Self::enabled(s, c, i))
            .filter(|&(i, _)| {
                let p = Self::priority(s, c, i);
                p < st.pmr && (p as u32) < running
            })
            .min_by_key(|&(i, src)| (Self::priority(s, c, i), i, src))
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
        let level = Self::level(&s, Self::priority(&s, c, best.0));
        if best.0 >= BANKED {
            s.spi_pending.remove(&best.0);
        }
        let st = &mut s.cpus[c];
        st.pending.remove(&best);
        st.active.push(best);
        st.apr |= 1 << level;
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
                // Priority drop (the highest active priority), then deactivation.
                let st = &mut s.cpus[c];
                st.apr &= st.apr.wrapping_sub(1);
                st.active.pop();
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

    /// The interrupts `first + b` for each bit `b` set in `v`.
    fn named(first: u32, v: u64) -> impl Iterator<Item = u32> {
        (0..32).filter(move |b| v & (1 << b) != 0).map(move |b| first + b)
    }

    /// Init order: active or pending state is cleared only of disabled interrupts (on GICv3 once
    /// the disable took effect, `rwp` false).
    fn check_disabled(s: &mut State, c: usize, what: &str, first: u32, v: u64, rwp: bool) {
        if rwp {
            Self::violation(
                s,
                format!(
                    "CPU {c} wrote {what} before RWP read 0 after its ICENABLER write: the disable may not have \
                     taken effect"
                ),
            );
        }
        if let Some(i) = Self::named(first, v).find(|&i| Self::enabled(s, c, i)) {
            Self::violation(
                s,
                format!(
                    "CPU {c} wrote {what} naming INTID {i}, still enabled: it can be forwarded again before it \
                     is disabled"
                ),
            );
        }
    }

    /// ICACTIVER: word `n` (CPU `k`'s banked view for 0) deactivated, active priorities left.
    fn deactivate(s: &mut State, k: usize, n: usize, v: u64) {
        let first = n as u32 * 32;
        let named: BTreeSet<u32> = Self::named(first, v).collect();
        let cpus: Vec<usize> = if n == 0 { vec![k] } else { (0..s.cpus.len()).collect() };
        for c in cpus {
            s.cpus[c].active.retain(|(i, _)| !named.contains(i));
        }
    }

    /// ICPENDR: word `n` (CPU `k`'s banked view for 0) not pending; GICv2 SGIs excepted.
    fn unpend(&self, s: &mut State, k: usize, n: usize, v: u64) {
        let first = n as u32 * 32;
        for i in Self::named(first, v) {
            if i >= BANKED {
                s.spi_pending.remove(&i);
            } else if i >= SGIS || self.version == Version::V3 {
                s.cpus[k].pending.retain(|&(id, _)| id != i);
                s.cpus[k].held.retain(|&(id, _)| id != i);
            }
        }
    }

    /// A write of active priority register `n` of CPU `c`.
    fn write_apr(s: &mut State, c: usize, what: &str, n: usize, v: u32) {
        if n >= Self::aprs_implemented(s) {
            if what.starts_with("ICC") {
                Self::violation(s, format!("CPU {c} wrote {what}, UNDEFINED with {} bits of priority", s.pribits));
            }
            return;
        }
        let word = (s.cpus[c].apr >> (32 * n)) as u32;
        if v != 0 && v != word {
            Self::violation(s, format!("CPU {c} wrote {v:#x} to {what}: only 0 or the value read back is allowed"));
        }
        if v == 0 {
            if let Some(&(i, _)) = s.cpus[c].active.first() {
                Self::violation(
                    s,
                    format!("CPU {c} zeroed {what} with INTID {i} still active: 0 means nothing is active"),
                );
            }
        }
        let mask = (u32::MAX as u128) << (32 * n);
        s.cpus[c].apr = (s.cpus[c].apr & !mask) | ((v as u128) << (32 * n));
    }

    /// A read of active priority register `n` of CPU `c`.
    fn read_apr(s: &mut State, c: usize, what: &str, n: usize) -> u32 {
        if n >= Self::aprs_implemented(s) {
            if what.starts_with("ICC") {
                Self::violation(s, format!("CPU {c} read {what}, UNDEFINED with {} bits of priority", s.pribits));
            }
            return 0;
        }
        (s.cpus[c].apr >> (32 * n)) as u32
    }

    /// Bitmap of word `n` of the pending (`active` false) or active state as CPU `k` sees it.
    fn state_word(&self, s: &State, k: usize, n: usize, active: bool) -> u32 {
        let first = n as u32 * 32;
        let on = |i: u32| {
            if active {
                if i >= BANKED {
                    s.cpus.iter().any(|c| c.active.iter().any(|&(a, _)| a == i))
                } else {
                    s.cpus[k].active.iter().any(|&(a, _)| a == i)
                }
            } else if i >= BANKED {
                s.spi_pending.contains(&i)
            } else {
                s.cpus[k].pending.iter().any(|&(p, _)| p == i)
            }
        };
        (0..32).filter(|&b| on(first + b)).fold(0, |w, b| w | 1 << b)
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
        if !matches!(r, CCtlr | CPmr | CBpr | CIar | CEoir | CApr(_)) {
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
            DIcpendr(n) => self.state_word(&self.s.borrow(), c, n, false),
            DIcactiver(n) => self.state_word(&self.s.borrow(), c, n, true),
            CApr(n) => FakeGic::read_apr(&mut self.s.borrow_mut(), c, &format!("GICC_APR{n}"), n),
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
                    DIpriority(i) if i < BANKED => s.cpus[c].banked_priority[i as usize] = v as u8,
                    DIpriority(i) => {
                        s.spi_priority.insert(i, v as u8);
                    }
                    DItargets(_) => {}
                    DIcactiver(n) => {
                        FakeGic::check_disabled(
                            &mut s,
                            c,
                            &format!("GICD_ICACTIVER{n}"),
                            n as u32 * 32,
                            v as u64,
                            false,
                        );
                        FakeGic::deactivate(&mut s, c, n, v as u64);
                    }
                    DIcpendr(n) => {
                        FakeGic::check_disabled(&mut s, c, &format!("GICD_ICPENDR{n}"), n as u32 * 32, v as u64, false);
                        self.unpend(&mut s, c, n, v as u64);
                    }
                    CApr(n) => FakeGic::write_apr(&mut s, c, &format!("GICC_APR{n}"), n, v),
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
                let mut s = self.s.borrow_mut();
                let rwp = if core::mem::take(&mut s.dist_rwp) { v3::GICD_CTLR_RWP } else { 0 };
                rwp | if s.dist_enabled {
                    v3::GICD_CTLR_ARE | v3::GICD_CTLR_ENABLE_G1A | v3::GICD_CTLR_ENABLE_G1
                } else {
                    0
                }
            }
            DIcpendr(n) => self.state_word(&self.s.borrow(), c, n, false) as u64,
            DIcactiver(n) => self.state_word(&self.s.borrow(), c, n, true) as u64,
            RCtlr(a) => match self.rd_cpu(a, "GICR_CTLR") {
                Some(k) if core::mem::take(&mut self.s.borrow_mut().cpus[k].rd_rwp) => v3::GICR_CTLR_RWP,
                _ => 0,
            },
            SIcpendr0(a) => self
                .rd_cpu(a, "GICR_ICPENDR0")
                .map(|k| self.state_word(&self.s.borrow(), k, 0, false) as u64)
                .unwrap_or(0),
            SIcactiver0(a) => self
                .rd_cpu(a, "GICR_ICACTIVER0")
                .map(|k| self.state_word(&self.s.borrow(), k, 0, true) as u64)
                .unwrap_or(0),
            IccAp1r(n) => {
                self.need_sre("ICC_AP1Rn_EL1");
                FakeGic::read_apr(&mut self.s.borrow_mut(), c, &format!("ICC_AP1R{n}_EL1"), n) as u64
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
            IccBpr1 => 0,
            IccCtlr => ((self.s.borrow().pribits - 1) as u64) << v3::ICC_CTLR_PRIBITS_SHIFT,
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
                            let mut s = self.s.borrow_mut();
                            s.cpus[k].banked_enabled &= !(v as u32);
                            s.cpus[k].rd_rwp = true;
                        }
                    }
                    SIcactiver0(a) => {
                        if let Some(k) = rd(a, "GICR_ICACTIVER0") {
                            let mut s = self.s.borrow_mut();
                            let rwp = s.cpus[k].rd_rwp;
                            FakeGic::check_disabled(&mut s, k, "GICR_ICACTIVER0", 0, v, rwp);
                            FakeGic::deactivate(&mut s, k, 0, v);
                        }
                    }
                    SIcpendr0(a) => {
                        if let Some(k) = rd(a, "GICR_ICPENDR0") {
                            let mut s = self.s.borrow_mut();
                            let rwp = s.cpus[k].rd_rwp;
                            FakeGic::check_disabled(&mut s, k, "GICR_ICPENDR0", 0, v, rwp);
                            self.unpend(&mut s, k, 0, v);
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
                                s.dist_rwp = true;
                                s.dist_enabled = v & (v3::GICD_CTLR_ENABLE_G1 | v3::GICD_CTLR_ENABLE_G1A) != 0;
                                if s.dist_enabled && v & v3::GICD_CTLR_ARE == 0 {
                                    FakeGic::violation(&mut s, "GICD_CTLR enabled without affinity routing".into());
                                }
                            }
                            DIsenabler(n) => (0..32).filter(|b| v & (1 << b) != 0).for_each(|b| {
                                s.spi_enabled.insert(n as u32 * 32 + b);
                            }),
                            DIcenabler(n) => {
                                s.dist_rwp = true;
                                (0..32).filter(|b| v & (1 << b) != 0).for_each(|b| {
                                    s.spi_enabled.remove(&(n as u32 * 32 + b));
                                })
                            }
                            DIcactiver(0) | DIcpendr(0) => FakeGic::violation(
                                &mut s,
                                format!(
                                    "CPU {c} wrote {r:?}: with affinity routing SGIs and PPIs are the redistributor's"
                                ),
                            ),
                            DIcactiver(n) => {
                                let rwp = s.dist_rwp;
                                FakeGic::check_disabled(
                                    &mut s,
                                    c,
                                    &format!("GICD_ICACTIVER{n}"),
                                    n as u32 * 32,
                                    v,
                                    rwp,
                                );
                                FakeGic::deactivate(&mut s, c, n, v);
                            }
                            DIcpendr(n) => {
                                let rwp = s.dist_rwp;
                                FakeGic::check_disabled(&mut s, c, &format!("GICD_ICPENDR{n}"), n as u32 * 32, v, rwp);
                                self.unpend(&mut s, c, n, v);
                            }
                            IccAp1r(n) => {
                                if !s.cpus[c].sre {
                                    FakeGic::violation(
                                        &mut s,
                                        format!("CPU {c} accessed ICC_AP1R{n}_EL1 before setting ICC_SRE_EL1.SRE"),
                                    );
                                }
                                FakeGic::write_apr(&mut s, c, &format!("ICC_AP1R{n}_EL1"), n, v as u32);
                            }
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
                            DTyper | RTyper(_) | RCtlr(_) | IccIar1 => {
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
