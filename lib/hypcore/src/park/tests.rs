//! The park/wake protocol on a fake GICv2 (`kcore`'s, which checks every write), on every
//! interleaving of the parked CPU's and the waker's steps.

use super::*;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use gic::fake::FakeGic;

const WAKER: usize = 0;
const PARKED: usize = 1;
/// A PPI the guest left enabled and pending on the parked CPU, at the guest's priority.
const GUEST_PPI: u32 = 27;

/// The parked CPU's program counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum T {
    Open,
    Offer,
    Check,
    Wfi,
    Withdraw,
    WaitSent,
    Close,
    MarkWoke,
    Done,
}

/// The waker's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum W {
    Claim,
    Take,
    Send,
    MarkSent,
    WaitWoke,
    Restore,
    Done,
}

/// How the guest left the GIC before the wait.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// Out of reset: distributor off, the parked CPU's interface untouched.
    Reset,
    /// As a guest leaves it: distributor on, the parked CPU's interface on at the guest's
    /// mask, the wake SGI at the guest's priority, one of the guest's PPIs pending.
    Guest,
}

struct World {
    gic: FakeGic,
    hs: Handshake,
    claimed: bool,
    t: T,
    w: W,
    opened: Option<Opened>,
    iface: Option<u8>,
    restore: Option<u32>,
    took: bool,
}

impl World {
    fn new(start: Start) -> Self {
        let gic = FakeGic::v2(2);
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
        World {
            gic,
            hs: Handshake::new(),
            claimed: false,
            t: T::Open,
            w: W::Claim,
            opened: None,
            iface: None,
            restore: None,
            took: false,
        }
    }

    /// Whether `side` (0 waker, 1 parked) can take a step now.
    fn enabled(&self, side: usize) -> bool {
        if side == PARKED {
            match self.t {
                T::Done => false,
                T::Wfi => self.gic.signalled(PARKED).is_some(),
                T::WaitSent => self.hs.is_sent(),
                _ => true,
            }
        } else {
            match self.w {
                W::Done => false,
                W::WaitWoke => self.hs.is_woke(),
                _ => true,
            }
        }
    }

    fn step(&mut self, side: usize) {
        let g = &self.gic;
        if side == PARKED {
            g.on(PARKED);
            self.t = match self.t {
                T::Open => {
                    self.opened = Some(open(&g));
                    T::Offer
                }
                T::Offer => {
                    self.hs.offer(self.opened.unwrap().iface);
                    T::Check
                }
                T::Check if self.claimed => T::Withdraw,
                T::Check => T::Wfi,
                T::Wfi => T::Check,
                T::Withdraw => {
                    self.took = self.hs.withdraw();
                    if self.took {
                        T::WaitSent
                    } else {
                        T::Close
                    }
                }
                T::WaitSent => T::Close,
                T::Close => {
                    close(&g, self.opened.unwrap());
                    T::MarkWoke
                }
                T::MarkWoke => {
                    self.hs.mark_woke();
                    T::Done
                }
                T::Done => unreachable!(),
            };
        } else {
            g.on(WAKER);
            self.w = match self.w {
                W::Claim => {
                    self.claimed = true;
                    W::Take
                }
                W::Take => {
                    self.iface = self.hs.take();
                    if self.iface.is_some() {
                        W::Send
                    } else {
                        W::Done
                    }
                }
                W::Send => {
                    self.restore = send(&g, self.iface.unwrap());
                    W::MarkSent
                }
                W::MarkSent => {
                    self.hs.mark_sent();
                    if self.restore.is_some() {
                        W::WaitWoke
                    } else {
                        W::Done
                    }
                }
                W::WaitWoke => W::Restore,
                W::Restore => {
                    use gic::v2::Regs as _;
                    g.write(Reg::DCtlr, self.restore.unwrap());
                    W::Done
                }
                W::Done => unreachable!(),
            };
        }
    }
}

/// What must hold once both are done, for a run that started as `start`.
fn check_end(w: &World, start: Start, trace: &str) -> Result<(), String> {
    let g = &w.gic;
    g.verdict().map_err(|v| format!("{trace}: the GIC model saw broken rules:\n{v}"))?;
    let wake_left = g.pending(PARKED).iter().any(|&(i, _)| i == WAKE_SGI);
    if wake_left || !g.active(PARKED).is_empty() {
        return Err(format!(
            "{trace}: the parked CPU left pending {:?}, active {:?} for the guest",
            g.pending(PARKED),
            g.active(PARKED)
        ));
    }
    let (prio, pmr) = g.banked_priority(PARKED, WAKE_SGI);
    let expect = match start {
        Start::Reset => (false, 0, 0, false, false),
        Start::Guest => (true, 0xa0, 0xf0, true, true),
    };
    let got = (g.distributor_enabled(), prio, pmr, g.interface_enabled(PARKED), g.banked_enabled(PARKED, WAKE_SGI));
    if got != expect {
        return Err(format!(
            "{trace}: GIC not given back (distributor, SGI priority, mask, interface, SGI enabled): \
             {got:?}, expected {expect:?}"
        ));
    }
    if let Start::Guest = start {
        if g.pending(PARKED) != [(GUEST_PPI, 0)] {
            return Err(format!("{trace}: the guest's PPI was taken: pending {:?}", g.pending(PARKED)));
        }
    }
    Ok(())
}

/// Every interleaving from `schedule` on (depth first, each one replayed from the start).
fn explore(start: Start, schedule: &mut Vec<usize>, runs: &mut u64) -> Result<(), String> {
    let mut w = World::new(start);
    for &s in schedule.iter() {
        w.step(s);
    }
    let trace = || format!("{start:?} schedule {schedule:?}");
    let next: Vec<usize> = [WAKER, PARKED].into_iter().filter(|&s| w.enabled(s)).collect();
    if next.is_empty() {
        if w.t != T::Done || w.w != W::Done {
            return Err(format!("{}: stuck with the parked CPU at {:?} and the waker at {:?}", trace(), w.t, w.w));
        }
        *runs += 1;
        return check_end(&w, start, &trace());
    }
    if schedule.len() > 64 {
        return Err(format!("{}: no end after 64 steps", trace()));
    }
    for s in next {
        schedule.push(s);
        explore(start, schedule, runs)?;
        schedule.pop();
    }
    Ok(())
}

#[test]
fn no_interleaving_loses_the_wake_up_or_leaves_the_gic_changed() {
    for start in [Start::Reset, Start::Guest] {
        let mut runs = 0;
        explore(start, &mut Vec::new(), &mut runs).unwrap();
        // Both orders of offer and claim, and the SGI before or after the WFI, were run.
        assert!(runs > 20, "{start:?}: only {runs} interleavings");
    }
}

#[test]
fn a_parked_cpu_is_woken_by_the_sgi_alone() {
    let w = World::new(Start::Guest);
    let g = &w.gic;
    g.on(PARKED);
    let o = open(&g);
    assert_eq!(o.iface, 1 << PARKED);
    // The guest's PPI, pending at the guest's priority, is not signalled: WFI would sleep.
    assert_eq!(g.signalled(PARKED), None);
    g.on(WAKER);
    assert_eq!(send(&g, o.iface), None, "the distributor was on: nothing to give back");
    assert_eq!(g.signalled(PARKED), Some((WAKE_SGI, WAKER as u32)));
    assert_eq!(g.sgis(), [(WAKER, PARKED, WAKE_SGI)]);
    g.on(PARKED);
    assert_eq!(close(&g, o), 1);
    assert_eq!(g.eois(), 1);
    g.verdict().unwrap();
}

#[test]
fn the_distributor_is_enabled_for_the_sgi_only_when_the_guest_left_it_off() {
    let w = World::new(Start::Reset);
    let g = &w.gic;
    g.on(PARKED);
    let o = open(&g);
    g.on(WAKER);
    assert_eq!(send(&g, o.iface), Some(0));
    assert!(g.distributor_enabled());
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
