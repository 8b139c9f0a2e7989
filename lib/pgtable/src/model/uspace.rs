//! The user-space model: several address spaces (one EL1&0 TTBR0 table each), two CPUs that
//! switch between them through the real [`AsidAllocator`], and one TLB per CPU whose entries
//! are tagged by ASID across all spaces, as the hardware's are.
//!
//! Each space is a [`Harness`]: its own single-table [`super::state::Model`] checks its
//! break-before-make, its frees and its own staleness (conservatively, as if any CPU could
//! cache it at any time). On top, this model checks what only several spaces and ASIDs show:
//!
//! * **Filling.** A CPU running a space may hold any translation the space had while it ran:
//!   before each operation on a space, every CPU running it takes a snapshot of all its
//!   translations (tagged with its ASID), and a CPU leaving a space keeps a snapshot of it.
//! * **Maintenance.** The TLBIs and DSBs an operation issued (read back from the space's
//!   event log, in order) remove entries: a broadcast TLBI from every CPU, a local one from
//!   the issuing CPU, only once a DSB of the right domain completed it; by ASID where the
//!   operation names one.
//! * **Checks.** After each operation, and whenever a CPU switches to a space, every entry a
//!   CPU could use (tagged with the ASID it runs) must agree with the tables of the space it
//!   runs: same output, no more rights (fewer is fine: lazy relaxation). Two CPUs never run
//!   different spaces under one ASID. An access ([`UModel::access`]) that hits a stale entry
//!   with another output is a violation; one refused by a narrower stale entry takes a
//!   permission fault, which the modelled kernel handler fixes with a local TLBI when the
//!   tables allow the access (a *spurious* fault), and retries once.

use std::string::String;
use std::sync::atomic::{AtomicU64, Ordering};
use std::vec::Vec;

use super::harness::Harness;
use super::state::Event;
use crate::addr::{PhysAddr, VirtAddr, PAGE_SIZE};
use crate::asid::AsidAllocator;
use crate::attrs::{Attributes, Constraints, Perms};
use crate::descriptor::decode_leaf;
use crate::regime::{Regime, VaHalf};
use crate::tlb::{Shareability, TlbMaintenance, Tlbi, TlbiOp};
use crate::walker::WalkFlags;

/// CPUs of the model.
pub const CPUS: usize = 2;
/// First address of the window the driver uses.
pub const BASE: u64 = 0x40_0000;
/// Pages in the window.
pub const WINDOW: u64 = 64;

/// A cached translation of one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct UEntry {
    asid: u16,
    va: u64,
    pa: u64,
    perms: Perms,
    /// The space it was read from (for the report).
    space: usize,
}

/// One CPU.
#[derive(Default)]
pub struct Cpu {
    /// The space whose table TTBR0 holds (None: the empty reserved table).
    pub running: Option<usize>,
    /// The ASID in TTBR0.
    pub asid: u16,
    tlb: Vec<UEntry>,
}

/// One address space.
pub struct Space {
    /// Its table, frames and single-table model.
    pub h: Harness,
    /// Its context id (see [`crate::asid`]).
    pub ctx: AtomicU64,
}

/// A TLBI waiting for its DSB, with the CPU that issued it.
struct Pending {
    op: Tlbi,
    cpu: usize,
}

/// A CPU's own TLB maintenance outside an operation (its switch, a spurious-fault fix): what
/// it issued, replayed into the model TLBs afterwards.
#[derive(Default)]
struct CpuTlb(Vec<Event>);

impl TlbMaintenance for CpuTlb {
    fn tlbi(&mut self, op: Tlbi) {
        self.0.push(Event::Tlbi(op));
    }
    fn dsb(&mut self, b: crate::tlb::Barrier) {
        self.0.push(Event::Dsb(b));
    }
    fn isb(&mut self) {
        self.0.push(Event::Isb);
    }
    fn features(&self) -> crate::tlb::TlbFeatures {
        crate::tlb::TlbFeatures::default()
    }
}

/// How an access ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// It went through (from the TLB or a walk).
    Done,
    /// It went through after a spurious permission fault fixed with a local TLBI.
    Spurious,
    /// The tables do not allow it: the task's fault.
    Denied,
}

/// The model.
pub struct UModel {
    /// The spaces.
    pub spaces: Vec<Space>,
    /// The CPUs.
    pub cpus: [Cpu; CPUS],
    /// The allocator under test.
    pub asids: AsidAllocator,
    /// The driver copies the space's current ASID into its table before each operation (as
    /// the kernel must); off: a seeded bug.
    pub sync_asid: bool,
    /// The fault handler fixes a spurious fault (`PageTable::fix_spurious_fault`); off: a
    /// seeded bug.
    pub fix_spurious: bool,
    /// Everything found.
    pub violations: Vec<String>,
    /// Spurious faults taken.
    pub spurious: u64,
    /// Roll-overs seen.
    pub rollovers: u64,
}

fn user(p: Perms) -> Perms {
    if p.is_none() {
        p
    } else {
        p | Perms::USER
    }
}

impl UModel {
    /// `spaces` empty, live user tables; ASIDs of `asid_bits` bits; lazy relaxation `lazy`.
    pub fn new(spaces: usize, asid_bits: u32, lazy: bool) -> Self {
        let spaces = (0..spaces)
            .map(|_| {
                let mut h = Harness::new(Regime::El1 { asid: 0, half: VaHalf::Lower }, false, false);
                h.pt.policy_mut().lazy_relax = lazy;
                h.go_live();
                Space { h, ctx: AtomicU64::new(0) }
            })
            .collect();
        UModel {
            spaces,
            cpus: Default::default(),
            asids: AsidAllocator::new(asid_bits),
            sync_asid: true,
            fix_spurious: true,
            violations: Vec::new(),
            spurious: 0,
            rollovers: 0,
        }
    }

    fn violation(&mut self, m: String) {
        if self.violations.len() < 32 {
            self.violations.push(m);
        }
    }

    /// Every valid translation of space `s` now: (va, pa, perms).
    fn translations(&self, s: usize) -> Vec<(u64, u64, Perms)> {
        let pt = &self.spaces[s].h.pt;
        let regime = pt.regime();
        let mut out = Vec::new();
        let _ = pt.walk(VirtAddr::new(BASE), WINDOW * PAGE_SIZE, WalkFlags::LEAF, |e| {
            if e.desc.is_valid_leaf(e.level) {
                out.push((e.off, e.desc.addr().as_u64(), decode_leaf(regime, e.desc).perms));
            }
            Ok(())
        });
        out
    }

    /// The tables' translation of `va` in space `s` (None: nothing valid).
    fn lookup(&self, s: usize, va: u64) -> Option<(u64, Perms)> {
        let t = self.spaces[s].h.pt.translate(VirtAddr::new(va))?;
        if t.attrs.perms.is_none() {
            None
        } else {
            Some((t.phys.as_u64(), t.attrs.perms))
        }
    }

    /// CPU `c` may hold any translation of the space it runs.
    fn snapshot(&mut self, c: usize) {
        let Some(s) = self.cpus[c].running else {
            return;
        };
        let asid = self.cpus[c].asid;
        for (va, pa, perms) in self.translations(s) {
            let e = UEntry { asid, va, pa, perms, space: s };
            if !self.cpus[c].tlb.contains(&e) {
                self.cpus[c].tlb.push(e);
            }
        }
    }

    /// The entries CPU `c` can use must agree with the tables of the space it runs.
    fn check_cpu(&mut self, c: usize, when: &str) {
        let Some(s) = self.cpus[c].running else {
            return;
        };
        let asid = self.cpus[c].asid;
        let entries: Vec<UEntry> = self.cpus[c].tlb.iter().filter(|e| e.asid == asid).copied().collect();
        for e in entries {
            let problem = match self.lookup(s, e.va) {
                None => Some(String::from("the tables map nothing there")),
                Some((pa, _)) if pa != e.pa => Some(format!("the tables map it to {pa:#x}")),
                Some((_, p)) if !p.contains(e.perms) => Some(format!("the tables grant only {p:?}")),
                _ => None,
            };
            if let Some(why) = problem {
                self.violation(format!(
                    "{when}: CPU {c} runs space {s} with ASID {asid} and holds {:#x} -> {:#x} {:?} (read from space {}): {why}",
                    e.va, e.pa, e.perms, e.space
                ));
            }
        }
        for o in 0..CPUS {
            if let (true, Some(t)) = (o != c, self.cpus[o].running) {
                if t != s && self.cpus[o].asid == asid {
                    self.violation(format!("{when}: CPUs {c} and {o} run spaces {s} and {t} under one ASID {asid}"));
                }
            }
        }
    }

    /// CPU `c` switches to space `to` (None: to no space).
    pub fn switch(&mut self, c: usize, to: Option<usize>) {
        if self.cpus[c].running == to {
            return;
        }
        self.snapshot(c);
        match to {
            None => {
                self.cpus[c].running = None;
                self.cpus[c].asid = 0;
            }
            Some(s) => {
                let before = self.asids.rollovers();
                // The kernel's switch: the allocator's decision and its local flush, replayed
                // into this CPU's TLB.
                let mut tlb = CpuTlb::default();
                let sw = self.asids.switch_to(c, &self.spaces[s].ctx, &mut tlb);
                self.rollovers += self.asids.rollovers() - before;
                self.replay(c, &tlb.0);
                self.cpus[c].running = Some(s);
                self.cpus[c].asid = sw.asid;
                self.check_cpu(c, &format!("switch of CPU {c} to space {s}"));
            }
        }
    }

    /// Runs `f` on the table of space `s` from CPU `c` (switching it there first), replays its
    /// maintenance into the TLBs and checks.
    pub fn op(
        &mut self,
        c: usize,
        s: usize,
        what: &str,
        f: impl FnOnce(&mut crate::PageTable<super::memory::ModelFrames>, &mut super::recorder::ModelTlb),
    ) {
        self.switch(c, Some(s));
        for o in 0..CPUS {
            if self.cpus[o].running == Some(s) {
                self.snapshot(o);
            }
        }
        let asid = self.asids.asid(self.spaces[s].ctx.load(Ordering::Relaxed));
        let sp = &mut self.spaces[s];
        if self.sync_asid {
            sp.h.pt.set_asid(asid);
            sp.h.model.borrow_mut().regime = Regime::El1 { asid, half: VaHalf::Lower };
        }
        let mark = sp.h.model.borrow().log.len();
        f(&mut sp.h.pt, &mut sp.h.tlb);
        let events: Vec<Event> = sp.h.model.borrow().log[mark..].to_vec();
        let own = sp.h.check();
        if own.is_err() {
            sp.h.model.borrow_mut().violations.clear();
        }
        if let Err(e) = own {
            self.violation(format!("{what} on space {s} (single-table model): {e}"));
        }
        self.replay(c, &events);
        for o in 0..CPUS {
            if self.cpus[o].running == Some(s) {
                self.check_cpu(o, &format!("after {what} on space {s} from CPU {c}"));
            }
        }
    }

    fn replay(&mut self, issuer: usize, events: &[Event]) {
        let mut pending: Vec<Pending> = Vec::new();
        for ev in events {
            match ev {
                Event::Tlbi(op) => pending.push(Pending { op: *op, cpu: issuer }),
                Event::Dsb(b) => {
                    let is = b.is_inner_shareable();
                    let mut rest = Vec::new();
                    for p in pending.drain(..) {
                        let broadcast = p.op.sh == Shareability::InnerShareable;
                        if broadcast && !is {
                            rest.push(p);
                            continue;
                        }
                        let targets: Vec<usize> = if broadcast { (0..CPUS).collect() } else { vec![p.cpu] };
                        for t in targets {
                            self.cpus[t].tlb.retain(|e| !hits(&p.op, e));
                        }
                    }
                    pending = rest;
                }
                _ => {}
            }
        }
        if !pending.is_empty() {
            self.violation(format!("{} TLBI(s) without a completing DSB", pending.len()));
        }
    }

    /// CPU `c` (running a space) reads or writes `va` from EL0, as the hardware and the
    /// kernel's fault handler would handle it.
    pub fn access(&mut self, c: usize, va: u64, write: bool) -> Access {
        let Some(s) = self.cpus[c].running else {
            return Access::Denied;
        };
        let need = if write { Perms::RW | Perms::USER } else { Perms::READ | Perms::USER };
        let asid = self.cpus[c].asid;
        let mut faulted = false;
        for _attempt in 0..2 {
            let hit = self.cpus[c].tlb.iter().find(|e| e.asid == asid && e.va == va).copied();
            match hit {
                Some(e) if e.perms.contains(need) => {
                    if self.lookup(s, va).map(|(pa, _)| pa) != Some(e.pa) {
                        self.violation(format!(
                            "CPU {c} (space {s}, ASID {asid}) {} {va:#x} through a stale entry to {:#x} (from space {})",
                            if write { "wrote" } else { "read" },
                            e.pa,
                            e.space
                        ));
                    }
                    return if faulted { Access::Spurious } else { Access::Done };
                }
                Some(_) => {
                    // A permission fault on a cached entry: the handler looks at the tables.
                    match self.lookup(s, va) {
                        Some((_, p)) if p.contains(need) => {
                            self.spurious += 1;
                            faulted = true;
                            if self.fix_spurious {
                                // The kernel's fix, replayed into this CPU's TLB.
                                let mut tlb = CpuTlb::default();
                                let pt = &mut self.spaces[s].h.pt;
                                pt.set_asid(asid);
                                assert!(pt.fix_spurious_fault(&mut tlb, VirtAddr::new(va)));
                                self.replay(c, &tlb.0);
                            }
                        }
                        _ => return Access::Denied,
                    }
                }
                None => match self.lookup(s, va) {
                    Some((pa, p)) if p.contains(need) => {
                        self.cpus[c].tlb.push(UEntry { asid, va, pa, perms: p, space: s });
                        return if faulted { Access::Spurious } else { Access::Done };
                    }
                    _ => return Access::Denied,
                },
            }
        }
        self.violation(format!(
            "CPU {c} (space {s}) faults again on {va:#x} after the spurious-fault fix: the stale entry survived"
        ));
        Access::Denied
    }

    /// Maps `pages` pages at window page `page` of space `s` from CPU `c` (demand-zero
    /// population: invalid -> valid), to `pa`, read-write.
    pub fn map(&mut self, c: usize, s: usize, page: u64, pages: u64, pa: u64) {
        let va = BASE + page * PAGE_SIZE;
        self.op(c, s, "map", |pt, tlb| {
            let _ = pt.map(
                tlb,
                VirtAddr::new(va),
                pages * PAGE_SIZE,
                PhysAddr::new(pa),
                Attributes::normal(user(Perms::RW)),
                Constraints::PAGES_ONLY,
            );
        });
    }

    /// mprotect: `perms` (user rights added) on the range.
    pub fn protect(&mut self, c: usize, s: usize, page: u64, pages: u64, perms: Perms) {
        let va = BASE + page * PAGE_SIZE;
        self.op(c, s, &format!("protect {perms:?}"), |pt, tlb| {
            pt.protect(tlb, VirtAddr::new(va), pages * PAGE_SIZE, user(perms)).expect("protect");
        });
    }

    /// munmap of the range.
    pub fn unmap(&mut self, c: usize, s: usize, page: u64, pages: u64) {
        let va = BASE + page * PAGE_SIZE;
        self.op(c, s, "unmap", |pt, tlb| {
            pt.unmap(tlb, VirtAddr::new(va), pages * PAGE_SIZE).expect("unmap");
        });
    }

    /// All violations, or Ok.
    pub fn verdict(&self) -> Result<(), String> {
        if self.violations.is_empty() {
            Ok(())
        } else {
            Err(self.violations.join("\n"))
        }
    }
}

/// Whether TLBI `op` removes entry `e` (EL1&0 forms only; user entries are non-global).
fn hits(op: &Tlbi, e: &UEntry) -> bool {
    let page = |va: VirtAddr| va.as_u64() & !(PAGE_SIZE - 1);
    match op.op {
        TlbiOp::Vae1 { asid, va } => asid == e.asid && page(va) == e.va,
        TlbiOp::Vaae1 { va } => page(va) == e.va,
        TlbiOp::Rvae1 { asid, base, range } => {
            asid == e.asid && e.va >= base.as_u64() && e.va < base.as_u64() + range.bytes()
        }
        TlbiOp::Rvaae1 { base, range } => e.va >= base.as_u64() && e.va < base.as_u64() + range.bytes(),
        TlbiOp::Aside1 { asid } => asid == e.asid,
        TlbiOp::Vmalle1 { vmid: None } => true,
        _ => false,
    }
}
