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
//! The two CPUs meet in a [`Handshake`], whose order makes a lost wake-up impossible (checked on
//! every interleaving by this module's tests).

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering::SeqCst};
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

#[cfg(test)]
mod tests;
