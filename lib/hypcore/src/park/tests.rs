//! The park/wake protocol: the library's own step machines ([`Parked`], [`Waker`], after
//! [`CpuStart::claim`]) run on every interleaving of their steps and of the SGI's way through a
//! fake GICv2 (`gic`'s, which checks every write), with the rules each action must follow.

use super::*;
use crate::sync::hook;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use gic::fake::FakeGic;

extern crate std;
use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::rc::Rc;

const WAKER: usize = 0;
const PARKED: usize = 1;
/// The fabric between the CPUs and the GIC: posted SGI writes land, pending SGIs reach the
/// parked CPU's interface.
const FABRIC: usize = 2;
/// A PPI the guest left enabled and pending on the parked CPU, at the guest's priority.
const GUEST_PPI: u32 = 27;
/// What the guest's CPU_ON asks for.
const ENTRY: u64 = 0x4020_0000;
const CONTEXT: u64 = 0x5a;

/// How the guest left the GIC before the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// Out of reset: distributor off, the parked CPU's interface untouched.
    Reset,
    /// As a guest leaves it: distributor on, the parked CPU's interface on at the guest's
    /// mask, the wake SGI at the guest's priority, one of the guest's PPIs pending.
    Guest,
    /// No GICv2 to wake the parked CPU through: it waits in `WFE` for the waker's `SEV`.
    NoGic,
}

fn guest_gic(start: Start) -> FakeGic {
    let gic = FakeGic::v2(2).with_delays();
    if let Start::Guest = start {
        use gic::v2::Regs as _;
        let g = &gic;
        g.on(WAKER).write(Reg::DCtlr, 1);
        g.on(PARKED);
        g.write(Reg::DIpriority(WAKE_SGI), 0xa0);
        g.write(Reg::DIpriority(GUEST_PPI), 0xa0);
        g.write(Reg::DIsenabler(0), (1 << WAKE_SGI) | (1 << GUEST_PPI));
        g.write(Reg::CPmr, 0xf0);
        g.write(Reg::CCtlr, 1);
        gic.raise(PARKED, GUEST_PPI);
    }
    gic
}

/// Both CPUs and the fabric, part way through a schedule.
struct World<'a> {
    start: Start,
    /// A `WFI` or `WFE` may end with nothing to wake it (the architecture allows it): the
    /// safety checks run with such wake-ups, the check for a lost wake-up without.
    spurious: bool,
    gic: &'a FakeGic,
    cpu: &'a CpuStart,
    hs: &'a Handshake,
    parked: Parked<'a>,
    /// The parked CPU's last action (what it waits for, if anything).
    parked_last: Action,
    /// `HCR_EL2.IMO` on the parked CPU, and whether an ISB followed its last write.
    routed: bool,
    synced: bool,
    /// The parked CPU's event register (set by the waker's SEV).
    event: bool,
    entered: Option<(u64, u64)>,
    /// The waker: `None` before its claim.
    waker: Option<Waker<'a>>,
    waker_last: Action,
    /// Rules an action broke.
    broken: Vec<String>,
}

impl<'a> World<'a> {
    fn enabled(&self, side: usize) -> bool {
        match side {
            PARKED => {
                self.entered.is_none()
                    && match self.parked_last {
                        Action::Wfi => self.spurious || self.gic.signalled(PARKED).is_some(),
                        Action::Wfe => self.spurious || self.event,
                        _ => true,
                    }
            }
            WAKER => self.waker_last != Action::Done,
            _ => self.gic.in_flight(),
        }
    }

    fn step(&mut self, side: usize) {
        match side {
            PARKED => {
                if self.parked_last == Action::Wfe {
                    self.event = false;
                }
                let g = self.gic.on(PARKED);
                let a = self.parked.step((self.start != Start::NoGic).then_some(&g));
                let mut last = a;
                match a {
                    Action::RouteIrqsToEl2(on) => (self.routed, self.synced) = (on, false),
                    Action::Isb => self.synced = true,
                    Action::Wfi if !(self.routed && self.synced) => {
                        self.broken.push(format!("WFI with IMO {} and ISB {} since", self.routed, self.synced))
                    }
                    // An event already latched: WFE returns at once.
                    Action::Wfe if self.event => (self.event, last) = (false, Action::Next),
                    Action::Enter { entry, context } => {
                        if self.routed {
                            self.broken.push(String::from("entered the guest with its IRQs still routed to EL2"));
                        }
                        self.entered = Some((entry, context));
                    }
                    Action::Next | Action::Wfi | Action::Wfe | Action::Spin => {}
                    other => self.broken.push(format!("the parked CPU asked for {other:?}")),
                }
                self.parked_last = last;
            }
            WAKER => {
                let g = self.gic.on(WAKER);
                let a = match self.waker.as_mut() {
                    None => {
                        if let Err(e) = self.cpu.claim(ENTRY, CONTEXT) {
                            self.broken.push(format!("the claim failed: {e}"));
                        }
                        self.waker = Some(Waker::new(self.hs));
                        Action::Next
                    }
                    Some(w) => w.step((self.start != Start::NoGic).then_some(&g)),
                };
                match a {
                    Action::Sev if self.waker_last != Action::Dsb => {
                        self.broken.push(format!("SEV after {:?}, not right after a DSB", self.waker_last))
                    }
                    Action::Sev => self.event = true,
                    Action::Next | Action::Spin | Action::Dsb | Action::Done => {}
                    other => self.broken.push(format!("the waker asked for {other:?}")),
                }
                self.waker_last = a;
            }
            _ => {
                if !self.gic.land() {
                    self.gic.forward(PARKED);
                }
            }
        }
    }

    /// Everything that matters for what happens next (a hash of it).
    fn fingerprint(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!(
            "{:?}",
            (
                &self.parked,
                self.parked_last,
                (self.routed, self.synced, self.event, self.entered),
                &self.waker,
                self.waker_last,
                self.cpu,
                self.hs,
                self.gic,
                &self.broken,
            )
        )
        .hash(&mut h);
        h.finish()
    }
}

/// Runs `schedule` from the start (`f` sees the world it reaches).
fn replay<T>((start, spurious): (Start, bool), schedule: &[usize], f: impl FnOnce(&World) -> T) -> T {
    let gic = guest_gic(start);
    let (cpu, hs) = (CpuStart::new(), Handshake::new());
    let mut w = World {
        start,
        spurious,
        gic: &gic,
        cpu: &cpu,
        hs: &hs,
        parked: Parked::new(&cpu, &hs),
        parked_last: Action::Next,
        routed: false,
        synced: false,
        event: false,
        entered: None,
        waker: None,
        waker_last: Action::Next,
        broken: Vec::new(),
    };
    for &s in schedule {
        w.step(s);
    }
    f(&w)
}

/// What must hold once both are done.
fn check_end(w: &World, trace: &str) -> Result<(), String> {
    let g = w.gic;
    if !w.broken.is_empty() {
        return Err(format!("{trace}: {}", w.broken.join("; ")));
    }
    if w.entered != Some((ENTRY, CONTEXT)) {
        return Err(format!("{trace}: the CPU entered the guest at {:x?}, not CPU_ON's", w.entered));
    }
    g.verdict().map_err(|v| format!("{trace}: the GIC model saw broken rules:\n{v}"))?;
    let wake_left = g.pending(PARKED).iter().any(|&(i, _)| i == WAKE_SGI);
    if wake_left || g.in_flight() || !g.active(PARKED).is_empty() {
        return Err(format!(
            "{trace}: the parked CPU left pending {:?}, active {:?} (in flight: {}) for the guest",
            g.pending(PARKED),
            g.active(PARKED),
            g.in_flight()
        ));
    }
    let (prio, pmr) = g.banked_priority(PARKED, WAKE_SGI);
    let expect = match w.start {
        Start::Reset | Start::NoGic => (false, 0, 0, false, false),
        Start::Guest => (true, 0xa0, 0xf0, true, true),
    };
    let got = (g.distributor_enabled(), prio, pmr, g.interface_enabled(PARKED), g.banked_enabled(PARKED, WAKE_SGI));
    if got != expect {
        return Err(format!(
            "{trace}: GIC not given back (distributor, SGI priority, mask, interface, SGI enabled): \
             {got:?}, expected {expect:?}"
        ));
    }
    if w.start == Start::Guest && g.pending(PARKED) != [(GUEST_PPI, 0)] {
        return Err(format!("{trace}: the guest's PPI was taken: pending {:?}", g.pending(PARKED)));
    }
    Ok(())
}

/// Every state reachable from `schedule` (each reached once: a state already explored is not
/// explored again), each end checked; a state from which no side can move, or only by spinning
/// in place, while one of them is not done, is a lost wake-up.
fn explore(
    case: (Start, bool),
    schedule: &mut Vec<usize>,
    seen: &mut HashSet<u64>,
    ends: &mut u64,
) -> Result<(), String> {
    let start = case;
    let (fp, sides, done) = replay(case, schedule, |w| {
        let sides: Vec<usize> = [WAKER, PARKED, FABRIC].into_iter().filter(|&s| w.enabled(s)).collect();
        let done = w.entered.is_some() && w.waker_last == Action::Done;
        (w.fingerprint(), sides, done.then(|| check_end(w, &format!("{start:?} schedule {schedule:?}"))))
    });
    if !seen.insert(fp) {
        return Ok(());
    }
    if let Some(end) = done {
        *ends += 1;
        return end;
    }
    let stuck = |schedule: &[usize]| {
        replay(case, schedule, |w| format!("parked at {:?}/{:?}, waker {:?}", w.parked, w.parked_last, w.waker))
    };
    if sides.is_empty() {
        return Err(format!("{start:?} schedule {schedule:?}: stuck, {}", stuck(schedule)));
    }
    let mut moved = false;
    for &s in &sides {
        schedule.push(s);
        moved |= replay(case, schedule, |w| w.fingerprint()) != fp;
        schedule.pop();
    }
    if !moved {
        return Err(format!("{start:?} schedule {schedule:?}: spinning for good, {}", stuck(schedule)));
    }
    if schedule.len() > 200 {
        return Err(format!("{start:?} schedule {schedule:?}: no end after 200 steps"));
    }
    for s in sides {
        schedule.push(s);
        explore(case, schedule, seen, ends)?;
        schedule.pop();
    }
    Ok(())
}

#[test]
fn no_interleaving_loses_the_wake_up_or_leaves_the_gic_changed() {
    for start in [Start::Reset, Start::Guest, Start::NoGic] {
        for spurious in [false, true] {
            let (mut seen, mut ends) = (HashSet::new(), 0);
            explore((start, spurious), &mut Vec::new(), &mut seen, &mut ends).unwrap();
            // Both orders of offer and claim, the SGI before or after the WFI, landing and
            // reaching the CPU at any point: many states, several ends.
            assert!(seen.len() > 30 && ends >= 2, "{start:?}: {ends} ends, {} states", seen.len());
        }
    }
}

/// After every store of an offer, as the waker may look: once it can take the offer, the
/// flags of the previous wake-up are cleared (else a waker could mark its SGI sent, or the CPU
/// woken, and the offer's own reset would wipe it: a parked CPU waiting for a sent SGI forever).
#[test]
fn an_offer_is_visible_only_after_the_last_wake_ups_flags_are_cleared() {
    let hs: &'static Handshake = alloc::boxed::Box::leak(alloc::boxed::Box::new(Handshake::new()));
    // A previous park and wake-up of the same CPU.
    hs.offer(1 << PARKED);
    assert_eq!(hs.take(), Some(1 << PARKED));
    hs.mark_sent();
    hs.mark_woke();
    let seen: Rc<RefCell<Vec<(u8, bool, bool)>>> = Rc::default();
    let log = seen.clone();
    hook::set(move |_| {
        log.borrow_mut().push((hs.iface.load(SeqCst), hs.sent.load(SeqCst), hs.woke.load(SeqCst)));
    });
    hs.offer(1 << PARKED);
    hook::clear();
    let seen = seen.borrow();
    assert!(!seen.is_empty());
    for &(iface, sent, woke) in seen.iter() {
        assert!(iface == 0 || (!sent && !woke), "the offer was visible with sent {sent}, woke {woke}: {seen:?}");
    }
    assert_eq!(seen.last().unwrap().0, 1 << PARKED);
}

#[test]
fn send_returns_once_the_sgi_is_in_the_distributor() {
    let gic = guest_gic(Start::Guest);
    let g = &gic;
    g.on(PARKED);
    let o = open(&g);
    g.on(WAKER);
    send(&g, o.iface);
    // Pending at the distributor (not necessarily at the parked CPU's interface yet): a waker
    // that says "sent" now says the truth.
    assert!(g.pending(PARKED).contains(&(WAKE_SGI, WAKER as u32)), "{:?}", g.pending(PARKED));
}

#[test]
fn close_clears_a_wake_sgi_that_has_not_reached_the_cpu_interface() {
    let gic = guest_gic(Start::Reset);
    let g = &gic;
    g.on(PARKED);
    let o = open(&g);
    g.on(WAKER);
    assert_eq!(send(&g, o.iface), Some(0));
    // The SGI is pending in the distributor, not yet forwarded: GICC_IAR cannot see it.
    g.on(PARKED);
    assert_eq!(close(&g, o), 0, "nothing signalled yet");
    assert!(g.pending(PARKED).is_empty(), "left for the guest: {:?}", g.pending(PARKED));
    assert!(!g.in_flight());
}

#[test]
fn the_spin_table_release_lets_the_cpu_go_only_once_what_it_reads_is_in_memory() {
    let at = |r: Release| SPIN_RELEASE.iter().position(|&x| x == r).unwrap_or_else(|| panic!("{r:?} missing"));
    let write = at(Release::WriteEntry);
    // The released CPU reads its MPIDR slot, and the hypervisor's `released` decides what its
    // CPU_OFF does: both before the word that lets it go.
    assert!(at(Release::SpinMpidr) < write);
    assert!(at(Release::MarkReleased) < write);
    // With its MMU off the firmware's loop reads memory, not the cache: the word is cleaned to
    // the point of coherency after it is written, the clean completes (DSB), then the event.
    assert!(write < at(Release::CleanToPoc));
    assert!(at(Release::CleanToPoc) < at(Release::Dsb));
    assert_eq!(at(Release::Dsb) + 1, at(Release::Sev));
    assert_eq!(SPIN_RELEASE.len(), 6, "each step once");
}

#[test]
fn a_parked_cpu_is_woken_by_the_sgi_alone() {
    let gic = guest_gic(Start::Guest);
    let g = &gic;
    g.on(PARKED);
    let o = open(&g);
    assert_eq!(o.iface, 1 << PARKED);
    // The guest's PPI, pending at the guest's priority, is not signalled: WFI would sleep.
    assert_eq!(g.signalled(PARKED), None);
    g.on(WAKER);
    assert_eq!(send(&g, o.iface), None, "the distributor was on: nothing to give back");
    g.forward(PARKED);
    assert_eq!(g.signalled(PARKED), Some((WAKE_SGI, WAKER as u32)));
    assert_eq!(g.sgis(), [(WAKER, PARKED, WAKE_SGI)]);
    g.on(PARKED);
    assert_eq!(close(&g, o), 1);
    assert_eq!(g.eois(), 1);
    g.verdict().unwrap();
}

#[test]
fn the_distributor_is_enabled_for_the_sgi_only_when_the_guest_left_it_off() {
    let gic = guest_gic(Start::Reset);
    let g = &gic;
    g.on(PARKED);
    let o = open(&g);
    g.on(WAKER);
    assert_eq!(send(&g, o.iface), Some(0));
    assert!(g.distributor_enabled());
    g.forward(PARKED);
    assert!(g.signalled(PARKED).is_some());
}

/// A tree with one CPU and one GIC node (`compatible`, `reg` cells at 1+1).
fn board_with_gic(compatible: &[u8], reg: &[u32]) -> board::Board {
    use crate::testdtb::{cells, one_cpu, root_with_memory};
    let mut w = board::FdtWriter::new();
    root_with_memory(&mut w, 1, 1, &[0x4000_0000, 0x1000_0000]);
    one_cpu(&mut w, &[]);
    w.begin_node("interrupt-controller@8000000").unwrap();
    w.property("compatible", compatible).unwrap();
    w.property("reg", &cells(reg)).unwrap();
    w.property("interrupt-controller", b"").unwrap();
    w.property("#interrupt-cells", &cells(&[3])).unwrap();
    w.end_node().unwrap();
    w.end_node().unwrap();
    board::Board::from_dtb(&w.finish().unwrap()).unwrap()
}

#[test]
fn the_wake_gic_is_a_gicv2_with_its_cpu_interface() {
    let v2 = board_with_gic(b"arm,gic-400\0", &[0x800_0000, 0x1000, 0x801_0000, 0x2000]);
    let (d, c) = wake_gic(&v2).expect("a GIC-400 wakes parked CPUs");
    assert_eq!((d.base, c.base, c.size), (0x800_0000, 0x801_0000, 0x2000));
    // GICv3, even with a legacy GICC region: the wake-up is written for GICv2 registers; its
    // CPUs keep waiting in WFE.
    let v3 = board_with_gic(b"arm,gic-v3\0", &[0x800_0000, 0x1_0000, 0x80a_0000, 0xf6_0000, 0x801_0000, 0x2000]);
    assert_eq!(wake_gic(&v3), None);
}
