//! ASIDs for user address spaces, with generation roll-over (the algorithm of Linux's
//! `arch/arm64/mm/context.c`).
//!
//! Every address space has a **context id** (an `AtomicU64` it owns, 0 before its first run):
//! `generation | asid`, where the generation counts in units of `1 << bits`. ASID 0 is never
//! handed out: it tags what a CPU runs while no task does (an empty TTBR0).
//!
//! A CPU switching to an address space ([`AsidAllocator::switch`]):
//!
//! * **Fast path, no lock:** the context id is of the current generation and this CPU's
//!   active slot is non-zero: the slot takes the id (compare-and-swap, so a concurrent
//!   roll-over, which zeroes every slot, sends it to the slow path).
//! * **Slow path, under the lock:** an id of an old generation gets a new one: the same ASID
//!   number if a CPU was running it at the roll-over (it is *reserved*: that CPU's TLB still
//!   holds its entries, so the number must keep meaning this address space) or if that
//!   number is still free in the new generation; else the next free number; and if none is
//!   free, a **roll-over**: generation + 1, every number free again except each CPU's active
//!   (or, if it has not switched since the last roll-over, reserved) one, and every CPU must
//!   flush its whole local TLB before it next runs with an ASID of the new generation
//!   ([`Switch::flush_local`]).
//!
//! So a number is reused only after every CPU has flushed: no CPU can hit another address
//! space's stale entries. TLB maintenance for an address space uses the number in its
//! current context id (`PageTable::set_asid` before each operation): while a task of it runs on
//! some CPU, that number survives roll-overs (reserved), so a TLBI by it reaches every entry.

use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use spin::Mutex;

use crate::tlb::{Barrier, Shareability, TlbMaintenance, Tlbi, TlbiOp};

/// Most CPUs an allocator serves.
pub const MAX_CPUS: usize = 8;

/// What a CPU must do to run with the address space's ASID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    /// The ASID to put in TTBR0_EL1.
    pub asid: u16,
    /// Flush this CPU's whole TLB (TLBI VMALLE1, local) before running with it: a roll-over
    /// happened since this CPU last flushed.
    pub flush_local: bool,
    /// The address space got a new context id (first run, or its generation was old).
    pub new_context: bool,
}

/// The part of the state only the slow path touches.
struct Pool {
    /// One bit per ASID number of the current generation: taken.
    map: Vec<u64>,
    /// Each CPU's active context id at the last roll-over (its own TLB's entries).
    reserved: [u64; MAX_CPUS],
    /// CPUs that must flush their TLB before using an ASID of the current generation.
    flush_pending: u64,
    /// Where the search for a free number starts.
    cursor: u64,
}

/// Seeded bugs of the allocator (tests and the `seeded-bugs` feature only), to show the model
/// checker notices them.
#[cfg(any(test, feature = "seeded-bugs"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AsidMutation {
    /// The allocator as written.
    #[default]
    None,
    /// A roll-over does not ask the CPUs to flush their TLBs.
    NoFlushOnRollover,
    /// A roll-over does not keep the ASIDs the CPUs are running.
    NoReserveActive,
}

/// The ASID allocator of one system (all CPUs).
pub struct AsidAllocator {
    bits: u32,
    generation: AtomicU64,
    active: [AtomicU64; MAX_CPUS],
    rollovers: AtomicU64,
    pool: Mutex<Pool>,
    #[cfg(any(test, feature = "seeded-bugs"))]
    pub(crate) mutation: AsidMutation,
}

impl AsidAllocator {
    /// The TLB side of CPU `cpu` switching to the address space whose context id is `ctx`:
    /// [`AsidAllocator::switch`], then, when a roll-over asks for it, this CPU's whole EL1&0 TLB
    /// dropped (`TLBI VMALLE1` local; `DSB NSH`). Returns the decision; the caller then writes
    /// TTBR0_EL1 (root and ASID in one write) and an `ISB`. The kernel's switch and the
    /// user-space model checker both go through here.
    pub fn switch_to<T: TlbMaintenance + ?Sized>(&self, cpu: usize, ctx: &AtomicU64, tlb: &mut T) -> Switch {
        let sw = self.switch(cpu, ctx);
        if sw.flush_local {
            tlb.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: None }, leaf_only: false, sh: Shareability::Local });
            tlb.dsb(Barrier::Nsh);
        }
        sw
    }

    /// An address space is gone (its table unmapped and destroyed): every translation tagged
    /// with its ASID `asid` is dropped on every CPU (`TLBI ASIDE1IS`; `DSB ISH`). Its number
    /// is handed out again only after a roll-over, which flushes every CPU anyway.
    pub fn retire<T: TlbMaintenance + ?Sized>(&self, asid: u16, tlb: &mut T) {
        tlb.tlbi(Tlbi { op: TlbiOp::Aside1 { asid }, leaf_only: false, sh: Shareability::InnerShareable });
        tlb.dsb(Barrier::Ish);
    }

    /// An allocator for `bits`-bit ASIDs (8 or 16 on real CPUs: ID_AA64MMFR0_EL1.ASIDBits;
    /// tests use fewer to roll over quickly). Numbers `1 .. 2^bits` are handed out; a roll-over
    /// keeps one per CPU, so there must be more numbers than CPUs using the allocator.
    pub fn new(bits: u32) -> Self {
        assert!((2..=16).contains(&bits), "ASID width {bits}");
        let numbers = 1u64 << bits;
        let mut map = vec![0u64; numbers.div_ceil(64) as usize];
        map[0] = 1; // ASID 0 is the kernel's.
        AsidAllocator {
            bits,
            generation: AtomicU64::new(numbers),
            active: [const { AtomicU64::new(0) }; MAX_CPUS],
            rollovers: AtomicU64::new(0),
            pool: Mutex::new(Pool { map, reserved: [0; MAX_CPUS], flush_pending: 0, cursor: 1 }),
            #[cfg(any(test, feature = "seeded-bugs"))]
            mutation: AsidMutation::None,
        }
    }

    /// Seeds a bug for the model checker to find (tests and the `seeded-bugs` feature only).
    #[cfg(any(test, feature = "seeded-bugs"))]
    pub fn seed_bug(&mut self, m: AsidMutation) {
        self.mutation = m;
    }

    /// ASID width.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// Roll-overs so far.
    pub fn rollovers(&self) -> u64 {
        self.rollovers.load(Ordering::Relaxed)
    }

    fn numbers(&self) -> u64 {
        1 << self.bits
    }

    fn asid_of(&self, id: u64) -> u64 {
        id & (self.numbers() - 1)
    }

    fn current_generation(&self, id: u64) -> bool {
        (id ^ self.generation.load(Ordering::Relaxed)) >> self.bits == 0
    }

    /// The ASID number of a context id (what TLB maintenance for that address space names).
    pub fn asid(&self, id: u64) -> u16 {
        self.asid_of(id) as u16
    }

    /// CPU `cpu` is about to run the address space whose context id is `ctx`: which ASID, and
    /// whether to flush the local TLB first. Call with the CPU's interrupts masked (the kernel
    /// does not preempt it between this and the TTBR0 write).
    pub fn switch(&self, cpu: usize, ctx: &AtomicU64) -> Switch {
        let id = ctx.load(Ordering::Relaxed);
        let old_active = self.active[cpu].load(Ordering::Relaxed);
        if old_active != 0
            && id != 0
            && self.current_generation(id)
            && self.active[cpu].compare_exchange(old_active, id, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            return Switch { asid: self.asid(id), flush_local: false, new_context: false };
        }
        let mut pool = self.pool.lock();
        let mut id = ctx.load(Ordering::Relaxed);
        let mut new_context = false;
        if id == 0 || !self.current_generation(id) {
            id = self.new_context(&mut pool, id);
            ctx.store(id, Ordering::Relaxed);
            new_context = true;
        }
        let flush_local = pool.flush_pending & (1 << cpu) != 0;
        pool.flush_pending &= !(1 << cpu);
        self.active[cpu].store(id, Ordering::Relaxed);
        Switch { asid: self.asid(id), flush_local, new_context }
    }

    fn take(&self, pool: &mut Pool, asid: u64) -> bool {
        let (w, b) = ((asid / 64) as usize, asid % 64);
        let was = pool.map[w] & (1 << b) != 0;
        pool.map[w] |= 1 << b;
        !was
    }

    fn new_context(&self, pool: &mut Pool, id: u64) -> u64 {
        let mut generation = self.generation.load(Ordering::Relaxed);
        if id != 0 {
            let new_id = generation | self.asid_of(id);
            // Running somewhere at the last roll-over: keep the number (update every copy).
            let mut hit = false;
            for r in pool.reserved.iter_mut() {
                if *r == id {
                    *r = new_id;
                    hit = true;
                }
            }
            if hit {
                return new_id;
            }
            // A number from an earlier life that is still free: take it again.
            if self.take(pool, self.asid_of(id)) {
                return new_id;
            }
        }
        let asid = match self.find_free(pool, pool.cursor) {
            Some(a) => a,
            None => {
                generation = self.generation.fetch_add(self.numbers(), Ordering::Relaxed) + self.numbers();
                self.rollovers.fetch_add(1, Ordering::Relaxed);
                self.flush_context(pool);
                self.find_free(pool, 1).expect("more ASIDs than CPUs")
            }
        };
        self.take(pool, asid);
        pool.cursor = asid;
        generation | asid
    }

    fn find_free(&self, pool: &Pool, from: u64) -> Option<u64> {
        (from.max(1)..self.numbers()).find(|&a| pool.map[(a / 64) as usize] & (1 << (a % 64)) == 0)
    }

    /// The roll-over: every number free again except those the CPUs run (reserved), and
    /// every CPU owes a local flush.
    fn flush_context(&self, pool: &mut Pool) {
        pool.map.iter_mut().for_each(|w| *w = 0);
        pool.map[0] = 1;
        #[cfg(any(test, feature = "seeded-bugs"))]
        let reserve = self.mutation != AsidMutation::NoReserveActive;
        #[cfg(not(any(test, feature = "seeded-bugs")))]
        let reserve = true;
        for cpu in 0..MAX_CPUS {
            let mut id = self.active[cpu].swap(0, Ordering::Relaxed);
            // A CPU that has not switched since the previous roll-over still runs its reserved
            // address space: keep that one.
            if id == 0 {
                id = pool.reserved[cpu];
            }
            if reserve && id != 0 {
                let asid = self.asid_of(id);
                pool.map[(asid / 64) as usize] |= 1 << (asid % 64);
            }
            pool.reserved[cpu] = if reserve { id } else { 0 };
        }
        #[cfg(any(test, feature = "seeded-bugs"))]
        let flush = self.mutation != AsidMutation::NoFlushOnRollover;
        #[cfg(not(any(test, feature = "seeded-bugs")))]
        let flush = true;
        if flush {
            pool.flush_pending = u64::MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every CPU's running address space and the ASID its TTBR0 holds.
    struct Sim {
        alloc: AsidAllocator,
        ctx: Vec<AtomicU64>,
        running: [Option<(usize, u16)>; 2],
        flushes: [u64; 2],
    }

    impl Sim {
        fn new(bits: u32, spaces: usize) -> Self {
            Sim {
                alloc: AsidAllocator::new(bits),
                ctx: (0..spaces).map(|_| AtomicU64::new(0)).collect(),
                running: [None; 2],
                flushes: [0; 2],
            }
        }
        fn run(&mut self, cpu: usize, mm: usize) -> Switch {
            let s = self.alloc.switch(cpu, &self.ctx[mm]);
            if s.flush_local {
                self.flushes[cpu] += 1;
            }
            self.running[cpu] = Some((mm, s.asid));
            // Two CPUs never run different address spaces under one ASID.
            if let (Some((a, x)), Some((b, y))) = (self.running[0], self.running[1]) {
                assert!(a == b || x != y, "address spaces {a} and {b} both run with ASID {x}");
            }
            s
        }
    }

    #[test]
    fn numbers_are_unique_within_a_generation_and_zero_is_never_given() {
        let mut s = Sim::new(8, 300);
        let mut seen = std::collections::HashSet::new();
        for mm in 0..255 {
            let sw = s.run(0, mm);
            assert_ne!(sw.asid, 0);
            assert!(seen.insert(sw.asid), "ASID {} handed out twice", sw.asid);
            assert!(!sw.flush_local);
        }
        assert_eq!(s.alloc.rollovers(), 0);
        // The 256th address space rolls over; CPU 0 must flush before using it.
        let sw = s.run(0, 255);
        assert_eq!(s.alloc.rollovers(), 1);
        assert!(sw.flush_local && sw.new_context);
    }

    /// Seeded bug `asid-flush-only-on-new-context` of `cargo xtask mutants`: the roll-over's
    /// flush is owed by every CPU, also one that switches into a space another CPU already
    /// renumbered (no new context for it, but its TLB holds the old generation's entries).
    #[test]
    fn a_cpu_flushes_after_a_rollover_into_a_space_already_renumbered() {
        let mut s = Sim::new(2, 6); // ASIDs 1..3
        s.run(0, 0);
        s.run(1, 1);
        s.run(0, 2);
        let d = s.run(0, 3); // CPU 0 rolls over
        assert!(d.flush_local && d.new_context);
        let e = s.run(1, 3);
        assert_eq!((e.asid, e.new_context), (d.asid, false));
        assert!(e.flush_local, "CPU 1 owes the roll-over's flush");
        assert!(!s.run(1, 3).flush_local, "once");
    }

    #[test]
    fn fast_path_keeps_the_id_and_a_rollover_keeps_running_asids() {
        let mut s = Sim::new(2, 6); // ASIDs 1..3
        let a = s.run(0, 0);
        let b = s.run(1, 1);
        assert!(a.new_context && b.new_context);
        let again = s.run(0, 0);
        assert_eq!((again.asid, again.new_context, again.flush_local), (a.asid, false, false));
        s.run(0, 2); // third number
                     // CPU 0 now needs a fourth: roll-over. CPU 1 still runs space 1: its number is kept.
        let d = s.run(0, 3);
        assert!(d.flush_local && d.new_context);
        assert_eq!(s.alloc.rollovers(), 1);
        assert_ne!(d.asid, b.asid, "space 1's number is reserved for it");
        // CPU 1 switches again to space 1: same number, new generation, and it flushes once.
        let b2 = s.run(1, 1);
        assert_eq!(b2.asid, b.asid);
        assert!(b2.flush_local);
        let b3 = s.run(1, 1);
        assert!(!b3.flush_local, "one flush per roll-over");
    }

    /// A space that a CPU runs, without switching, across two roll-overs keeps the number that
    /// CPU's TTBR0 holds, also after another CPU renumbered it in between: TLB maintenance
    /// for it (by its current number) must reach that CPU's entries.
    #[test]
    fn a_space_kept_across_two_rollovers_keeps_the_number_its_cpu_runs_it_with() {
        let mut s = Sim::new(2, 8); // ASIDs 1..3
        let (a, b, c, d, e) = (0, 1, 2, 3, 4);
        let on_cpu1 = s.run(1, a).asid; // CPU 1 runs space a from now on, never switching
        s.run(0, b);
        s.run(0, c);
        s.run(0, d); // roll-over 1: a's number is reserved for CPU 1
        assert_eq!(s.alloc.rollovers(), 1);
        assert_eq!(s.run(0, a).asid, on_cpu1, "renumbered into the new generation, same number");
        s.run(0, d);
        s.run(0, e); // roll-over 2: CPU 1 has not switched since the first
        assert_eq!(s.alloc.rollovers(), 2);
        assert_eq!(s.run(0, a).asid, on_cpu1, "space a must keep the number CPU 1 runs it with");
    }

    /// The TLB side: a roll-over's local flush is the whole EL1&0 TLB of this CPU, completed
    /// (`DSB NSH`, not a store-only barrier) before the new ASID is used; a retired ASID is
    /// dropped on every CPU (`TLBI ASIDE1IS`, `DSB ISH`).
    #[test]
    fn the_flush_of_a_rollover_and_of_a_retired_asid_complete_where_they_must() {
        #[derive(Default)]
        struct Rec(Vec<&'static str>);
        impl TlbMaintenance for Rec {
            fn tlbi(&mut self, op: Tlbi) {
                self.0.push(op.mnemonic());
            }
            fn dsb(&mut self, b: Barrier) {
                self.0.push(b.mnemonic());
            }
            fn isb(&mut self) {
                self.0.push("ISB");
            }
        }
        let alloc = AsidAllocator::new(2);
        let ctx: Vec<AtomicU64> = (0..4).map(|_| AtomicU64::new(0)).collect();
        let mut rec = Rec::default();
        for c in &ctx[..3] {
            alloc.switch_to(0, c, &mut rec);
        }
        assert!(rec.0.is_empty(), "no flush before a roll-over: {:?}", rec.0);
        let sw = alloc.switch_to(0, &ctx[3], &mut rec);
        assert!(sw.flush_local);
        assert_eq!(rec.0, ["VMALLE1", "DSB NSH"]);
        let mut rec = Rec::default();
        alloc.retire(sw.asid, &mut rec);
        assert_eq!(rec.0, ["ASIDE1IS", "DSB ISH"]);
    }

    #[test]
    fn every_cpu_flushes_once_per_rollover_before_new_asids() {
        let mut s = Sim::new(3, 40);
        for round in 0..40 {
            s.run(round % 2, round);
        }
        let r = s.alloc.rollovers();
        assert!(r >= 4, "{r} roll-overs");
        // Each CPU flushed at most once per roll-over, and at least once for the last one it saw.
        for cpu in 0..2 {
            assert!(
                s.flushes[cpu] <= r && s.flushes[cpu] >= 1,
                "CPU {cpu}: {} flushes, {r} roll-overs",
                s.flushes[cpu]
            );
        }
    }
}
