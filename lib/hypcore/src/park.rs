//! Holding a CPU the guest has not started (or has stopped) in `WFI`, and waking it with an SGI
//! when the guest asks PSCI CPU_ON for it. Board without PSCI firmware, GICv2 (the Pi 4).
//!
//! Why not `WFE` and `SEV`, as a firmware spin table does: under QEMU's TCG a `WFE` does not
//! sleep, it only yields, so a CPU waiting in it keeps a host thread busy. On a small host three
//! such CPUs take the cores the guest's first CPU needs, and every broadcast TLB invalidation of
//! the guest (Linux patches its text thousands of times at boot, each with one) waits for all
//! of them. A `WFI` halts the vCPU thread. On a board both are low-power waits.
//!
//! A `WFI` ends when the CPU interface signals an interrupt, so a parked CPU opens its own
//! (banked) GIC CPU interface to one SGI and nothing else, and gives every register it changed
//! back when it leaves: the guest then finds that CPU's interface as it was.
//! * [`open`] on the parked CPU: SGI [`WAKE_SGI`] enabled at the highest priority, the priority
//!   mask at [`WAKE_PMR`] (every interrupt Linux or this project's kernel configures has a lower
//!   priority: none of the guest's interrupts wakes it or is taken by it), the interface on.
//! * [`send`] on the CPU that handles CPU_ON: the SGI, after enabling the distributor if the
//!   guest has not (it is then put back once the target has woken).
//! * [`close`] on the woken CPU: every wake SGI acknowledged and ended, one still in flight
//!   cleared, the registers given back.
//!
//! The two CPUs meet in a [`Handshake`], whose order makes a lost wake-up impossible. Each side's
//! whole sequence is a step machine here, [`Parked`] and [`Waker`]: one step, one access to
//! what the other CPU sees, and what the CPU must do itself between steps (a system register,
//! a barrier, `WFI`) is an [`Action`] the binary executes. This module's tests run both
//! machines on every interleaving of their steps, on a fake GICv2 whose SGIs take a while to
//! arrive, and check what the actions say. The release from the firmware's spin table, a
//! sequence of stores and cache maintenance, is the value [`SPIN_RELEASE`].

use crate::psci::CpuStart;
use crate::sync::{AtomicBool, AtomicU8, Ordering::SeqCst};
use gic::v2::{intid, own_interface, sgir, Reg, Regs};
use gic::SPURIOUS;

/// The SGI that wakes a parked CPU: Linux uses SGIs 0-7, this project's kernel 0-3.
pub const WAKE_SGI: u32 = 15;
/// The wake SGI's priority while a CPU is parked: the highest.
pub const WAKE_PRIORITY: u32 = 0;
/// The parked CPU's priority mask: only priorities below this are signalled (the wake SGI's).
/// Under a GIC with security extensions a non-secure write of either value is shifted the same
/// way, so the order holds in both views.
pub const WAKE_PMR: u32 = 0x10;

/// The GICv2 (distributor, CPU interface) through which a CPU the hypervisor holds is woken from
/// `WFI`; None: such CPUs wait in `WFE` (a GICv3 board: none has spin-table CPUs here).
pub fn wake_gic(board: &board::Board) -> Option<(board::Region, board::Region)> {
    let g = board.gic.as_ref().filter(|g| g.version == board::GicVersion::V2)?;
    Some((g.distributor, g.cpu_interface?))
}

/// What [`open`] changed in the parked CPU's banked registers, given back by [`close`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// This CPU's bit in GICD_SGIR's target list (from the banked GICD_ITARGETSR).
    pub iface: u8,
    ctlr: u32,
    pmr: u32,
    priority: u32,
    enabled: bool,
}

/// On the CPU about to wait: opens its CPU interface to [`WAKE_SGI`] alone.
pub fn open(gic: &impl Regs) -> Opened {
    let saved = Opened {
        iface: own_interface(gic),
        ctlr: gic.read(Reg::CCtlr),
        pmr: gic.read(Reg::CPmr),
        priority: gic.read(Reg::DIpriority(WAKE_SGI)),
        enabled: gic.read(Reg::DIsenabler(0)) & (1 << WAKE_SGI) != 0,
    };
    gic.write(Reg::DIpriority(WAKE_SGI), WAKE_PRIORITY);
    gic.write(Reg::DIsenabler(0), 1 << WAKE_SGI);
    gic.write(Reg::CPmr, WAKE_PMR);
    gic.write(Reg::CCtlr, saved.ctlr | 1);
    saved
}

/// On the CPU that starts it: sends [`WAKE_SGI`] to the CPU whose interface bit is `iface`.
/// Returns the GICD_CTLR value to write back once that CPU has woken, when the distributor had
/// to be enabled for the SGI to reach it (a guest that starts CPUs before its GIC).
pub fn send(gic: &impl Regs, iface: u8) -> Option<u32> {
    let ctlr = gic.read(Reg::DCtlr);
    let restore = (ctlr & 1 == 0).then(|| {
        gic.write(Reg::DCtlr, ctlr | 1);
        ctlr
    });
    gic.dsb_ishst();
    gic.write(Reg::DSgir, sgir(iface, WAKE_SGI));
    // A read from the same device cannot pass the write (device memory, non-reordering): once
    // it returns, the SGI is pending in the distributor, before the waker says it is sent.
    gic.read(Reg::DCtlr);
    restore
}

/// On the woken CPU, once the SGI was sent ([`Handshake::is_sent`]): acknowledges and ends every
/// signalled interrupt (only the wake SGI passes the mask), clears one not yet signalled, and
/// gives the registers [`open`] changed back. Returns how many it ended.
pub fn close(gic: &impl Regs, o: Opened) -> u32 {
    let mut ended = 0;
    loop {
        let iar = gic.read(Reg::CIar);
        if intid(iar) >= SPURIOUS {
            break;
        }
        gic.write(Reg::CEoir, iar);
        ended += 1;
    }
    gic.write(Reg::DCpendsgir(WAKE_SGI), 0xff);
    gic.write(Reg::CCtlr, o.ctlr);
    gic.write(Reg::CPmr, o.pmr);
    gic.write(Reg::DIpriority(WAKE_SGI), o.priority);
    if !o.enabled {
        gic.write(Reg::DIcenabler(0), 1 << WAKE_SGI);
    }
    ended
}

/// Where a parked CPU and the CPU that starts it meet (one per CPU). The start itself is claimed
/// elsewhere (the CPU's state moves Off -> Starting); the parked CPU looks at that claim before
/// every `WFI`.
///
/// Parked CPU: [`open`], [`Handshake::offer`], then `while !claimed { WFI }`, then
/// [`Handshake::withdraw`]: if the waker took the offer, an SGI is on its way: wait for
/// [`Handshake::is_sent`], [`close`], [`Handshake::mark_woke`]; else [`close`] at once.
///
/// Waker: claim the start, then [`Handshake::take`]: with an interface bit, [`send`], then
/// [`Handshake::mark_sent`], and if `send` enabled the distributor, wait for
/// [`Handshake::is_woke`] and write GICD_CTLR back. Without one, the CPU has not offered yet and
/// will see the claim before it waits.
///
/// The offer and the claim are each written before the other side's is read, sequentially
/// consistent: one of the two always sees the other's.
#[derive(Debug, Default)]
pub struct Handshake {
    iface: AtomicU8,
    sent: AtomicBool,
    woke: AtomicBool,
}

impl Handshake {
    /// No offer.
    pub const fn new() -> Self {
        Handshake { iface: AtomicU8::new(0), sent: AtomicBool::new(false), woke: AtomicBool::new(false) }
    }

    /// Parked CPU, after [`open`]: it waits for an SGI at interface bit `iface` (not 0).
    pub fn offer(&self, iface: u8) {
        self.sent.store(false, SeqCst);
        self.woke.store(false, SeqCst);
        self.iface.store(iface, SeqCst);
    }

    /// Parked CPU, once its start is claimed: whether the waker took the offer (an SGI comes).
    pub fn withdraw(&self) -> bool {
        self.iface.swap(0, SeqCst) == 0
    }

    /// Waker, after claiming the start: the interface bit to send the SGI to, if offered.
    pub fn take(&self) -> Option<u8> {
        match self.iface.swap(0, SeqCst) {
            0 => None,
            b => Some(b),
        }
    }

    /// Waker: the SGI has been sent.
    pub fn mark_sent(&self) {
        self.sent.store(true, SeqCst);
    }

    /// Parked CPU: whether the SGI has been sent.
    pub fn is_sent(&self) -> bool {
        self.sent.load(SeqCst)
    }

    /// Woken CPU: [`close`] is done.
    pub fn mark_woke(&self) {
        self.woke.store(true, SeqCst);
    }

    /// Waker: whether the woken CPU has closed.
    pub fn is_woke(&self) -> bool {
        self.woke.load(SeqCst)
    }
}

/// What the CPU itself must do before the next step of a [`Parked`] or [`Waker`] (the library
/// cannot: system registers, barriers, the waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing: take the next step.
    Next,
    /// `HCR_EL2.IMO` = this: physical IRQs go to EL2 while the CPU is parked (they stay masked
    /// there), so a pending one is a `WFI` wake-up event on every implementation, whatever it
    /// does for one routed to a lower level.
    RouteIrqsToEl2(bool),
    /// `ISB`: the system register written before takes effect before anything that follows.
    Isb,
    /// `WFI`, then the next step (which looks again).
    Wfi,
    /// `WFE`, then the next step (no GICv2 to wake the CPU through).
    Wfe,
    /// A spin-loop hint, then the next step: the other CPU has a step to take first.
    Spin,
    /// `DSB SY`: what this CPU wrote is visible before what follows (the event).
    Dsb,
    /// `SEV`: a CPU waiting in `WFE` looks again.
    Sev,
    /// The parked CPU is started: enter the guest at `entry` with `context` in x0.
    Enter {
        /// The entry point CPU_ON gave.
        entry: u64,
        /// Its context id.
        context: u64,
    },
    /// The waker is done.
    Done,
}

/// Where a [`Parked`] CPU is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum P {
    Open,
    Route,
    Sync,
    Offer,
    Check,
    Withdraw,
    WaitSent,
    Close,
    Unroute,
    MarkWoke,
    Enter,
}

/// A CPU the hypervisor holds until the guest starts it (CPU_ON): the wait of [`Handshake`],
/// step by step. Without a GIC (`gic: None` at every step) it waits in `WFE` for the waker's
/// `SEV` instead.
#[derive(Debug)]
pub struct Parked<'a> {
    start: &'a CpuStart,
    hs: &'a Handshake,
    pc: P,
    opened: Option<Opened>,
}

impl<'a> Parked<'a> {
    /// The wait of the CPU whose start is `start`, meeting its waker at `hs`.
    pub fn new(start: &'a CpuStart, hs: &'a Handshake) -> Self {
        Parked { start, hs, pc: P::Open, opened: None }
    }

    /// One step: [`open`] (with a GIC), IRQs to EL2 and an `ISB`, the offer, then `WFI` until
    /// the start is claimed; then [`Handshake::withdraw`], the wait for the SGI if it was
    /// taken, [`close`], IRQs back, [`Handshake::mark_woke`], and the guest's entry. `gic` is
    /// the same at every step.
    pub fn step(&mut self, gic: Option<&impl Regs>) -> Action {
        let (next, action) = match (self.pc, gic) {
            (P::Open, Some(g)) => {
                self.opened = Some(open(g));
                (P::Route, Action::Next)
            }
            (P::Open, None) => (P::Check, Action::Next),
            (P::Route, _) => (P::Sync, Action::RouteIrqsToEl2(true)),
            (P::Sync, _) => (P::Offer, Action::Isb),
            (P::Offer, _) => {
                if let Some(o) = self.opened {
                    self.hs.offer(o.iface);
                }
                (P::Check, Action::Next)
            }
            (P::Check, _) => match (self.start.ready_to_start(), self.opened.is_some()) {
                (true, true) => (P::Withdraw, Action::Next),
                (true, false) => (P::Enter, Action::Next),
                (false, true) => (P::Check, Action::Wfi),
                (false, false) => (P::Check, Action::Wfe),
            },
            (P::Withdraw, _) => match self.hs.withdraw() {
                // The waker took the offer: its SGI is sent, or about to be; end it here.
                true => (P::WaitSent, Action::Next),
                false => (P::Close, Action::Next),
            },
            (P::WaitSent, _) => match self.hs.is_sent() {
                true => (P::Close, Action::Next),
                false => (P::WaitSent, Action::Spin),
            },
            (P::Close, g) => {
                if let (Some(g), Some(o)) = (g, self.opened) {
                    close(g, o);
                }
                (P::Unroute, Action::Next)
            }
            (P::Unroute, _) => (P::MarkWoke, Action::RouteIrqsToEl2(false)),
            (P::MarkWoke, _) => {
                self.hs.mark_woke();
                (P::Enter, Action::Next)
            }
            (P::Enter, _) => {
                let (entry, context) = self.start.entry();
                (P::Enter, Action::Enter { entry, context })
            }
        };
        self.pc = next;
        action
    }
}

/// Where a [`Waker`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum W {
    Take,
    Send,
    MarkSent,
    WaitWoke,
    Restore,
    Dsb,
    Sev,
    Done,
}

/// The CPU that starts a parked CPU, once it has claimed the start ([`CpuStart::claim`]): the
/// waker's half of [`Handshake`], step by step, ending with `DSB; SEV` for a CPU waiting in
/// `WFE`.
#[derive(Debug)]
pub struct Waker<'a> {
    hs: &'a Handshake,
    pc: W,
    iface: u8,
    restore: Option<u32>,
}

impl<'a> Waker<'a> {
    /// The wake-up of the CPU that waits at `hs` (its start already claimed).
    pub fn new(hs: &'a Handshake) -> Self {
        Waker { hs, pc: W::Take, iface: 0, restore: None }
    }

    /// One step: [`Handshake::take`]; with an offer, [`send`], [`Handshake::mark_sent`], and
    /// when `send` had to enable the distributor, the wait for [`Handshake::is_woke`] and
    /// GICD_CTLR written back; then `DSB` and `SEV`. `gic` is the same at every step.
    pub fn step(&mut self, gic: Option<&impl Regs>) -> Action {
        let (next, action) = match (self.pc, gic) {
            (W::Take, Some(_)) => match self.hs.take() {
                Some(b) => {
                    self.iface = b;
                    (W::Send, Action::Next)
                }
                // Not offered yet: it sees the claim before it waits.
                None => (W::Dsb, Action::Next),
            },
            (W::Take, None) => (W::Dsb, Action::Next),
            (W::Send, Some(g)) => {
                self.restore = send(g, self.iface);
                (W::MarkSent, Action::Next)
            }
            (W::MarkSent, _) => {
                self.hs.mark_sent();
                match self.restore {
                    Some(_) => (W::WaitWoke, Action::Next),
                    None => (W::Dsb, Action::Next),
                }
            }
            (W::WaitWoke, _) => match self.hs.is_woke() {
                true => (W::Restore, Action::Next),
                false => (W::WaitWoke, Action::Spin),
            },
            (W::Restore, Some(g)) => {
                // The guest had not enabled its distributor: put it back now the CPU woke.
                if let Some(ctlr) = self.restore {
                    g.write(Reg::DCtlr, ctlr);
                }
                (W::Dsb, Action::Next)
            }
            (W::Dsb, _) => (W::Sev, Action::Dsb),
            (W::Sev, _) => (W::Done, Action::Sev),
            (W::Done, _) | (W::Send | W::Restore, None) => (W::Done, Action::Done),
        };
        self.pc = next;
        action
    }
}

/// One step of releasing a CPU from the firmware's spin table ([`SPIN_RELEASE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Write the CPU's MPIDR where the hypervisor's spin entry looks for it (and clean it to
    /// the point of coherency: the CPU reads it with its MMU off).
    SpinMpidr,
    /// Mark the CPU released: from now on the hypervisor keeps it (a guest CPU_OFF parks it).
    MarkReleased,
    /// Write the hypervisor's spin entry to the CPU's `cpu-release-addr`.
    WriteEntry,
    /// Clean that word to the point of coherency: the firmware's loop reads it with its MMU off.
    CleanToPoc,
    /// `DSB SY`: the clean is complete before the event.
    Dsb,
    /// `SEV`: the firmware's loop waits in `WFE`.
    Sev,
}

/// The release from a firmware spin table, in order: everything the released CPU reads is
/// written and at the point of coherency before the release word that lets it go, and that word
/// is there before the event that wakes it.
pub const SPIN_RELEASE: [Release; 6] =
    [Release::SpinMpidr, Release::MarkReleased, Release::WriteEntry, Release::CleanToPoc, Release::Dsb, Release::Sev];

#[cfg(test)]
mod tests;
