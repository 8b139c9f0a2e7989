//! Interrupts: the GIC (v2 or v3, as the device tree says), the per-CPU timer tick
//! ([`timer`]) and software-generated interrupts between CPUs ([`send_sgi`]).
//!
//! # Nesting rules
//!
//! * Every exception is taken with PSTATE.{D, A, I, F} masked (the hardware does it) and no
//!   handler unmasks them: **interrupts never nest**, and a handler runs to completion on the
//!   stack it was taken on (the CPU's boot stack when it idles, the running task's kernel stack
//!   otherwise).
//! * IRQs are unmasked in exactly four places: at **EL0** (user tasks run with PSTATE.I clear; an
//!   IRQ then enters through the `LOWER64_IRQ` vector), in the **idle wait** of a CPU with
//!   nothing to run (`WFI` with PSTATE.I clear; the IRQ enters through `CUR_SPX_IRQ` and returns
//!   into the wait loop), for an instant in [`take_pending`] (a self-test polling for an
//!   interrupt it caused, a CPU waiting to make an IPI call), and in **preemptible sections**
//!   (`sync::IrqsOn`, e.g. the `percpu` system call's loops), all with no lock held.
//!   Everything else the kernel does (boot, self-tests, most system calls, fault handling,
//!   scheduling) runs with IRQs masked. A task is preempted on its way back to EL0 after the
//!   tick asked for it, or, in a preemptible section with preemption count 0, on the way back
//!   from the IRQ (`sched::preempt`).
//! * Handlers only record (tick counts, wake-ups) and set flags; the scheduler acts on those
//!   when the exception returns. A synchronous exception inside an IRQ handler is a kernel bug
//!   (fatal); FIQ and SError are fatal.
//! * So a lock an IRQ handler takes is never held by code that can be interrupted: no kernel
//!   code runs with IRQs unmasked except the idle wait and `take_pending`, which hold no lock.
//!
//! # Discovery
//!
//! The GIC's registers come from the device tree's interrupt controller node (distributor and
//! CPU interface for v2, distributor and redistributor regions for v3), mapped in the MMIO
//! window; the timer's interrupt from its `/timer` node; the PMU's overflow interrupt is
//! `perf`'s ([`wire_ppi`]). Interrupts 0-31 (SGIs, PPIs) are banked per CPU: each CPU enables
//! its own in [`init_cpu`].

pub mod call;
mod error;
pub mod gicv3;
pub mod timer;

use alloc::vec::Vec;
use board::{Board, GicVersion};
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use spin::Once;

pub use error::IrqError;

pub use gic::PRIORITY;

/// The SGIs the kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Sgi {
    /// Something was queued for the target CPU (a woken task): leave the idle wait, look at
    /// the run queue.
    Reschedule = 0,
    /// Self-test: answer with [`Sgi::Pong`] to CPU 0.
    Ping = 1,
    /// Self-test: the answer to a ping.
    Pong = 2,
    /// Run the function `call::on_cpus` published (and TLB shootdowns).
    Call = 3,
}

/// The interrupt controller: `kcore`'s drivers over this kernel's register access.
pub enum Gic {
    /// GICv2 (memory-mapped CPU interface).
    V2(gic::v2::GicV2<rt::gicv2::V2Mmio>),
    /// GICv3 (system-register CPU interface, redistributors).
    V3(gic::v3::GicV3<gicv3::V3Mmio>),
}

static GIC: Once<Gic> = Once::new();

/// `fn(intid, cpu)` handlers of the banked interrupts (SGIs and PPIs), as addresses.
static HANDLERS: [AtomicUsize; 32] = [const { AtomicUsize::new(0) }; 32];

/// Interrupts handled, per CPU and kind.
pub struct IrqCounts {
    /// SGIs.
    pub sgi: AtomicU64,
    /// PPIs (the timer).
    pub ppi: AtomicU64,
    /// Acknowledged interrupts with no handler (then disabled).
    pub unexpected: AtomicU64,
    /// Exceptions through an IRQ vector that found nothing pending.
    pub spurious: AtomicU64,
}

/// Per-CPU counters.
pub static COUNTS: [IrqCounts; rt::MAX_CPUS] = [const {
    IrqCounts {
        sgi: AtomicU64::new(0),
        ppi: AtomicU64::new(0),
        unexpected: AtomicU64::new(0),
        spurious: AtomicU64::new(0),
    }
}; rt::MAX_CPUS];

/// The GIC, once [`init`] ran.
pub fn gic() -> Option<&'static Gic> {
    GIC.get()
}

/// Boot CPU, after `mm::init`: maps the GIC's registers, initialises the distributor and this
/// CPU's interface, and reads the timer's interrupt. Other CPUs call [`init_cpu`].
pub fn init(board: &Board) -> Result<(), IrqError> {
    let g = board.gic.as_ref().ok_or(IrqError::NoController)?;
    let gicd = crate::mm::ioremap(g.distributor.base, g.distributor.size)? as usize;
    let gic = match g.version {
        GicVersion::V2 => {
            let c = g.cpu_interface.ok_or(IrqError::NoCpuInterface)?;
            let gicc = crate::mm::ioremap(c.base, c.size)? as usize;
            let count = crate::arch::counters::count_other_dsb;
            // SAFETY: both blocks were just mapped as device memory, for the GIC driver alone.
            Gic::V2(gic::v2::GicV2::new(unsafe { rt::gicv2::V2Mmio::new(gicd, gicc, count) }))
        }
        GicVersion::V3 => {
            let mut regions = Vec::new();
            for r in &g.redistributors {
                regions.push((crate::mm::ioremap(r.base, r.size)? as usize, r.size as usize));
            }
            // SAFETY: the distributor and every redistributor region were just mapped; the
            // driver names redistributors only inside these regions.
            Gic::V3(gic::v3::GicV3::new(unsafe { gicv3::V3Mmio::new(gicd) }, regions))
        }
    };
    match &gic {
        Gic::V2(g) => g.init_distributor(),
        Gic::V3(g) => g.init_distributor(),
    }
    GIC.call_once(|| gic);
    timer::init(board)?;
    set_handler(Sgi::Ping as u32, ping);
    set_handler(Sgi::Pong as u32, pong);
    set_handler(Sgi::Reschedule as u32, |_, _| {});
    set_handler(Sgi::Call as u32, call::handler);
    init_cpu(0)
}

/// This CPU's interface (after [`init`] on the boot CPU): its banked interrupts with handlers
/// enabled.
pub fn init_cpu(cpu: usize) -> Result<(), IrqError> {
    let gic = GIC.get().ok_or(IrqError::NotInitialised)?;
    match gic {
        Gic::V2(g) => g.init_cpu(cpu),
        Gic::V3(g) => g.init_cpu(cpu, rt::mpidr_affinity()).map_err(|why| IrqError::CpuInterface { cpu, why })?,
    }
    for sgi in [Sgi::Reschedule, Sgi::Ping, Sgi::Pong, Sgi::Call] {
        enable_private(cpu, sgi as u32);
    }
    let ppis = EVERY_CPU.load(Ordering::Acquire);
    for intid in (16..32).filter(|i| ppis & (1 << i) != 0) {
        enable_private(cpu, intid);
    }
    Ok(())
}

/// Banked interrupts (PPIs) every CPU enables in [`init_cpu`], beside the kernel's SGIs.
static EVERY_CPU: AtomicU32 = AtomicU32::new(0);

/// Routes PPI `intid` (16..32) to `f` on every CPU: enabled now on this CPU (`cpu`) and by every
/// CPU that initialises its interface later (e.g. the PMU's overflow interrupt, `perf`).
pub fn wire_ppi(cpu: usize, intid: u32, f: fn(u32, usize)) -> Result<(), IrqError> {
    if !(16..32).contains(&intid) {
        return Err(IrqError::NotPpi { intid });
    }
    set_handler(intid, f);
    EVERY_CPU.fetch_or(1 << intid, Ordering::AcqRel);
    enable_private(cpu, intid);
    Ok(())
}

/// Installs `f` for banked interrupt `intid` (< 32).
pub fn set_handler(intid: u32, f: fn(u32, usize)) {
    HANDLERS[intid as usize].store(f as usize, Ordering::Release);
}

/// Enables banked interrupt `intid` on CPU `cpu` (the calling CPU).
pub fn enable_private(cpu: usize, intid: u32) {
    match GIC.get() {
        Some(Gic::V2(g)) => g.enable_private(intid, PRIORITY),
        Some(Gic::V3(g)) => g.enable_private(cpu, intid, PRIORITY),
        None => {}
    }
}

/// Disables banked interrupt `intid` on CPU `cpu` (the calling CPU).
pub fn disable_private(cpu: usize, intid: u32) {
    match GIC.get() {
        Some(Gic::V2(g)) => g.disable_private(intid),
        Some(Gic::V3(g)) => g.disable_private(cpu, intid),
        None => {}
    }
}

/// Sends `sgi` to the CPUs in the `cpus` bit set (kernel CPU indices).
pub fn send_sgi(cpus: u64, sgi: Sgi) {
    match GIC.get() {
        Some(Gic::V2(g)) => g.send_sgi(cpus, sgi as u32),
        Some(Gic::V3(g)) => g.send_sgi(cpus, sgi as u32),
        None => {}
    }
}

/// The IRQ exception of CPU `cpu`: acknowledges and handles every pending interrupt (IRQs
/// stay masked throughout), each ended with the value its acknowledge read
/// (`gic::handle_pending`).
pub fn handle(cpu: usize) {
    let Some(gic) = GIC.get() else {
        return;
    };
    let dispatch = |intid: u32| {
        let f = if intid < gic::BANKED { HANDLERS[intid as usize].load(Ordering::Acquire) } else { 0 };
        if f == 0 {
            return false;
        }
        // SAFETY: only `set_handler` stores here, always a `fn(u32, usize)`.
        let f = unsafe { core::mem::transmute::<usize, fn(u32, usize)>(f) };
        f(intid, cpu);
        true
    };
    let h = match gic {
        Gic::V2(g) => gic::handle_pending(g, cpu, dispatch),
        Gic::V3(g) => gic::handle_pending(g, cpu, dispatch),
    };
    let c = &COUNTS[cpu.min(rt::MAX_CPUS - 1)];
    c.sgi.fetch_add(h.sgi, Ordering::Relaxed);
    c.ppi.fetch_add(h.ppi, Ordering::Relaxed);
    c.unexpected.fetch_add(h.unexpected, Ordering::Relaxed);
    if h.total() == 0 {
        c.spurious.fetch_add(1, Ordering::Relaxed);
    }
}

/// Pings received, per CPU (self-test).
pub static PINGS: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];
/// Pongs received by CPU 0 (self-test).
pub static PONGS: AtomicU64 = AtomicU64::new(0);

fn ping(_intid: u32, cpu: usize) {
    PINGS[cpu].fetch_add(1, Ordering::Relaxed);
    send_sgi(1, Sgi::Pong);
}

fn pong(_intid: u32, _cpu: usize) {
    PONGS.fetch_add(1, Ordering::Relaxed);
}

/// Takes an interrupt that is pending now, if any: IRQs unmasked for an instant (around an ISB,
/// so a pending one is taken there) and masked again. Unlike [`wait_for_interrupt`] it never
/// waits; for a caller that polls with a deadline of its own.
pub fn take_pending() {
    // SAFETY: PSTATE.I cleared and set around an ISB, as in the idle wait (no lock held); the
    // handler runs on this stack and returns here. Not `nomem`: handlers change memory.
    unsafe { core::arch::asm!("msr daifclr, #2", "isb", "msr daifset, #2", options(nostack, preserves_flags)) };
    crate::arch::counters::count_other_isb();
}

/// The idle wait: with IRQs still masked, `WFI` (it wakes on a pending interrupt whatever
/// PSTATE.I says, so one that arrived after the caller last looked for work is not lost), then
/// IRQs are unmasked for an instant so the pending one is taken and handled by the vector, and
/// masked again before returning.
pub fn wait_for_interrupt() {
    // SAFETY: WFI, then PSTATE.I cleared and set around an ISB (the only place kernel code runs
    // with IRQs unmasked, see the nesting rules); the handler runs on this stack and returns
    // here. Not `nomem`: handlers change memory the caller reads next.
    unsafe { core::arch::asm!("wfi", "msr daifclr, #2", "isb", "msr daifset, #2", options(nostack, preserves_flags)) };
    crate::arch::counters::count_other_isb();
}
