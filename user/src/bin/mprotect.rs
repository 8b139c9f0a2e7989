//! `cargo xtask bench mprotect`: the EL0 benchmark (`lib/el0bench`: its rows, their order, the
//! measurement and the records) on this kernel. This file is only the kernel's side of
//! `el0bench::Os`: its system calls, its mechanism switches (flush elision for RW<->NONE,
//! lazy relaxation for RO->RW; each measured on and off, interleaved), the TLBIs and spurious
//! faults it counts, and its PMU counter, which counts every instruction of the CPU at EL0,
//! EL1 (and EL2). Its Linux twin is `linux-user/src/bench.rs`. Argument: `rounds=N`.
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::syscall::{percpu, SYSCTL_GET};
use el0bench::{Counts, Mechanism, Os};
use user::{map, prot, sys, sysctl, time};

user::entry!(run);

const FE: &[&str] = &["baseline (flush everything)", "flush elision"];
const LR: &[&str] = &["flushed", "lazy_relax"];

/// The partner task's stack (one partner at a time).
#[repr(C, align(16))]
struct Stack([u8; 64 * 1024]);
static mut PARTNER_STACK: Stack = Stack([0; 64 * 1024]);

struct Pgtlab {
    pmu: bool,
    ncpus: u64,
    cpu: u64,
    partner: Option<u64>,
    /// The settings the kernel booted with (the defaults).
    fe0: usize,
    lz0: usize,
}

extern "C" fn partner_entry(_: u64) -> ! {
    el0bench::partner(sys::getcpu(), sys::yield_now);
    sys::exit(0)
}

fn knob(m: Mechanism) -> u64 {
    match m {
        Mechanism::FlushElision => sysctl::FLUSH_ELISION,
        Mechanism::LazyRelax => sysctl::LAZY_RELAX,
    }
}

impl Os for Pgtlab {
    fn peer(&self) -> &'static str {
        "pgtlab"
    }
    fn ncpus(&self) -> u64 {
        self.ncpus
    }
    #[inline(always)]
    fn getcpu(&mut self) -> u64 {
        sys::getcpu()
    }
    fn mmap(&mut self, bytes: u64) -> Result<u64, i64> {
        sys::mmap(0, bytes, prot::READ | prot::WRITE, map::PRIVATE | map::ANONYMOUS)
    }
    fn munmap(&mut self, addr: u64, bytes: u64) -> Result<(), i64> {
        sys::munmap(addr, bytes).map(|_| ())
    }
    fn mprotect(&mut self, addr: u64, bytes: u64, p: u64) -> Result<(), i64> {
        sys::mprotect(addr, bytes, p).map(|_| ())
    }
    fn yield_now(&mut self) {
        sys::yield_now()
    }
    fn pin(&mut self) -> Result<(), i64> {
        self.cpu = sys::getcpu();
        sys::percpu(percpu::AFFINITY, 1 << self.cpu, 0, 0).map(|_| ())
    }
    fn start_partner(&mut self) -> Result<(), i64> {
        // Only the address is taken; one partner runs at a time (joined before the next
        // starts), and nothing else uses this memory.
        let top = core::ptr::addr_of_mut!(PARTNER_STACK) as u64 + 64 * 1024;
        self.partner = Some(sys::spawn(partner_entry, top, 0, self.cpu)?);
        Ok(())
    }
    fn join_partner(&mut self) -> Result<(), i64> {
        match self.partner.take() {
            Some(t) => sys::wait(t).map(|_| ()),
            None => Ok(()),
        }
    }
    #[inline(always)]
    fn instructions(&self) -> u64 {
        if self.pmu {
            time::instructions()
        } else {
            0
        }
    }
    fn instructions_mask(&self) -> u64 {
        u64::MAX
    }
    #[inline(always)]
    fn cpu_instructions(&mut self) -> u64 {
        // The kernel's counter counts whatever runs on the CPU.
        self.instructions()
    }
    fn variants(&self, m: Mechanism) -> &'static [&'static str] {
        match m {
            Mechanism::FlushElision => FE,
            Mechanism::LazyRelax => LR,
        }
    }
    fn default_variant(&self, m: Mechanism) -> usize {
        match m {
            Mechanism::FlushElision => self.fe0,
            Mechanism::LazyRelax => self.lz0,
        }
    }
    fn set_variant(&mut self, m: Mechanism, v: usize) -> Result<(), i64> {
        sys::sysctl(knob(m), v as u64).map(|_| ())
    }
    fn counts(&mut self) -> Counts {
        let c = sys::counters();
        Counts { tlbi: c.space_tlbi, spurious: c.faults_spurious }
    }
    fn say(&mut self, line: core::fmt::Arguments<'_>) {
        user::io::print_line(line);
    }
    fn report(&mut self, r: &abi::report::Record) {
        user::io::report(r);
    }
}

fn run(args: &str) -> i32 {
    let get = |k| sys::sysctl(k, SYSCTL_GET);
    let mut os = Pgtlab {
        pmu: get(sysctl::PMU_EL0) == Ok(1),
        ncpus: get(sysctl::NCPUS).unwrap_or(1),
        cpu: 0,
        partner: None,
        fe0: get(sysctl::FLUSH_ELISION).unwrap_or(1).min(1) as usize,
        lz0: get(sysctl::LAZY_RELAX).unwrap_or(1).min(1) as usize,
    };
    el0bench::run(&mut os, args)
}
