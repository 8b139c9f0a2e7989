//! `test=pmu`: the PMU driver checked on the CPU it runs on.
//!
//! * Overflow: a SW_INCR counter started 16 below 2^32 and incremented 32 times reads exactly
//!   2^32 + 16, through the hardware's 64-bit counters (PMUv3p5, QEMU `max`) or through the
//!   driver's wrap accounting of 32-bit ones (Cortex-A76), whose overflow flag must have been
//!   seen once.
//! * The overflow interrupt (32-bit counters, wired from the device tree): the same SW_INCR
//!   overflow with the interrupt armed is folded in by the interrupt handler, taken in the idle
//!   wait, before any read of the counter.
//! * The cycle counter moves.
//! * INST_RETIRED is counted exactly when this CPU says so (PMCEID0; QEMU: only under
//!   `-icount`): a loop of 2 instructions per turn, run 1000 and 3000 turns, differs by exactly
//!   4000. Where it is not counted, the claim must say so.
//! * EL filtering: a counter filtered to EL2 does not move over an EL1 loop and does move over a
//!   hypercall (under the hypervisor); one filtered to EL1 counts the loop.
//! * MAINT_COUNTS with an unknown selector answers INVALID_PARAMETER.

use super::driver;
use crate::arch::power::Host;
use abi::report::Record;
use alloc::format;
use alloc::string::String;
use pmu::events::{CPU_CYCLES, INST_RETIRED, SW_INCR};
use pmu::{ElFilter, NotCounted};

/// Runs `turns` turns of a two-instruction loop.
#[inline(never)]
fn spin(turns: u64) {
    // SAFETY: a register-only countdown loop; `turns` >= 1.
    unsafe {
        core::arch::asm!(
            "1: subs {n}, {n}, #1",
            "b.ne 1b",
            n = inout(reg) turns.max(1) => _,
            options(nomem, nostack),
        )
    }
}

/// SW_INCR from 2^32 - 16 plus 32 with the overflow interrupt armed: the interrupt (taken in
/// the idle wait) must fold the wrap in before the counter is read. Returns (interrupts taken,
/// wraps seen before the read).
fn overflow_interrupt(pmu: &pmu::Pmu<'static, pmu::hw::SysRegs>, sw_incr: pmu::Event) -> Result<(u64, u64), String> {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTVCT_EL0};
    let cpu = crate::perf::cpu_index();
    let c = pmu.claim(sw_incr, ElFilter::ALL).map_err(|e| format!("SW_INCR: {}", e.why()))?;
    crate::perf::arm_overflow(pmu, &c);
    pmu.preset(&c, 0xffff_fff0);
    let irqs0 = crate::perf::OVERFLOW_IRQS[cpu].load(core::sync::atomic::Ordering::Relaxed);
    for _ in 0..32 {
        pmu.software_increment(&c);
    }
    let deadline = CNTVCT_EL0.get() + CNTFRQ_EL0.get();
    while crate::perf::OVERFLOW_IRQS[cpu].load(core::sync::atomic::Ordering::Relaxed) == irqs0
        && CNTVCT_EL0.get() < deadline
    {
        crate::irq::take_pending();
    }
    let irqs = crate::perf::OVERFLOW_IRQS[cpu].load(core::sync::atomic::Ordering::Relaxed) - irqs0;
    let wraps = crate::perf::CPU_STATE[cpu].wraps(c.idx) as u64;
    let v = pmu.read(&c);
    pmu.release(c);
    if irqs != 1 || wraps != 1 || v != 0x1_0000_0010 {
        return Err(format!(
            "test=pmu: with the overflow interrupt armed, {irqs} interrupts and {wraps} wraps before the read \
             (expected 1 and 1), then the counter read {v:#x} (expected 0x100000010)"
        ));
    }
    Ok((irqs, wraps))
}

pub fn run() -> Result<(), String> {
    let pmu = driver().ok_or("test=pmu: this CPU has no PMUv3")?;
    let i = *pmu.info();
    let core = i.core;
    let ev = |n: u16| core.lookup(&format!("{n}")).ok_or_else(|| format!("event {n:#x} missing from the tables"));
    let mut rec = Record::new("pmu_selftest");
    rec.str("core", core.name()).u64("pmuver", i.pmuver as u64).u64("counters", i.counters as u64);
    rec.bool("long_counters", i.long_events).bool("emulated", i.emulated);

    // Overflow across 2^32.
    let c = pmu.claim(ev(SW_INCR)?, ElFilter::ALL).map_err(|e| format!("SW_INCR: {}", e.why()))?;
    pmu.preset(&c, 0xffff_fff0);
    for _ in 0..32 {
        pmu.software_increment(&c);
    }
    let v = pmu.read(&c);
    let wraps = crate::perf::CPU_STATE[crate::perf::cpu_index()].wraps(c.idx);
    pmu.release(c);
    if v != 0x1_0000_0010 {
        return Err(format!("test=pmu: SW_INCR from 2^32-16 plus 32 reads {v:#x}, expected 0x100000010"));
    }
    if !i.long_events && wraps != 1 {
        return Err(format!("test=pmu: 32-bit counter wrapped {wraps} times, expected once"));
    }
    rec.hex("swincr_after_wrap", v).u64("wraps_seen", wraps as u64);
    if !i.long_events && super::pmu_overflow_wired() {
        let (irqs, wraps) = overflow_interrupt(&pmu, ev(SW_INCR)?)?;
        rec.u64("overflow_irqs", irqs).u64("irq_wraps_before_read", wraps);
    } else {
        rec.str("overflow_irq", if i.long_events { "64-bit counters: not armed" } else { "not wired" });
    }

    // The cycle counter.
    let c0 = pmu.cycles();
    spin(100_000);
    let c1 = pmu.cycles();
    if c1 <= c0 {
        return Err(format!("test=pmu: the cycle counter did not move ({c0} -> {c1})"));
    }
    rec.u64("cycles_100k_turns", c1 - c0);

    // INST_RETIRED, exact.
    let insn_event = ev(INST_RETIRED)?;
    let insns = match pmu.claim(insn_event, ElFilter::ALL) {
        Ok(c) => {
            let mut d = [0u64; 2];
            for (k, turns) in [1000u64, 3000].into_iter().enumerate() {
                let a = pmu.read(&c);
                spin(turns);
                d[k] = pmu.read(&c) - a;
            }
            pmu.release(c);
            if d[1] - d[0] != 4000 {
                return Err(format!(
                    "test=pmu: INST_RETIRED over 3000 vs 1000 turns differs by {}, expected 4000",
                    d[1] - d[0]
                ));
            }
            rec.u64("insns_2000_extra", d[1] - d[0]);
            true
        }
        Err(NotCounted::NotImplemented) => {
            rec.str("inst_retired", NotCounted::NotImplemented.why());
            false
        }
        Err(e) => return Err(format!("test=pmu: INST_RETIRED: {}", e.why())),
    };

    // Every event the driver calls counted here really moves (over a loop; SW_INCR is above).
    let mut checked = 0u64;
    for e in core.events().filter(|e| e.number != SW_INCR && e.number != pmu::events::CHAIN) {
        if let Ok(c) = pmu.claim(*e, ElFilter::ALL) {
            let a = pmu.read(&c);
            spin(10_000);
            let d = pmu.read(&c) - a;
            pmu.release(c);
            if d == 0 {
                return Err(format!("test=pmu: {} is called counted here but did not move over a loop", e.name));
            }
            checked += 1;
        }
    }
    rec.u64("counted_events_checked", checked);

    // EL filtering, with instructions where counted, else cycles.
    let filtered = if insns { insn_event } else { ev(CPU_CYCLES)? };
    let el1 = ElFilter { el0: false, el1: true, el2: false };
    let el2 = ElFilter { el0: false, el1: false, el2: true };
    let c1 = pmu.claim(filtered, el1).map_err(|e| format!("EL1 counter: {}", e.why()))?;
    let c2 = pmu.claim(filtered, el2).map_err(|e| format!("EL2 counter: {}", e.why()))?;
    let (a1, a2) = (pmu.read(&c1), pmu.read(&c2));
    spin(100_000);
    let (b2, b1) = (pmu.read(&c2), pmu.read(&c1));
    let result = if b2 != a2 {
        Err(format!("test=pmu: a counter filtered to EL2 moved by {} over an EL1 loop", b2 - a2))
    } else if b1 - a1 < if insns { 200_000 } else { 1 } {
        Err(format!("test=pmu: a counter filtered to EL1 moved by only {} over 100000 turns", b1 - a1))
    } else {
        Ok(())
    };
    rec.str("filtered_event", filtered.name).u64("el1_over_el1_loop", b1 - a1).u64("el2_over_el1_loop", b2 - a2);
    let under_hyp = crate::arch::power::host() == Host::Hypervisor;
    let hyp_result = if under_hyp && result.is_ok() {
        let a2 = pmu.read(&c2);
        crate::arch::smccc::call(abi::hypercall::VERSION, 0, 0, 0);
        let d = pmu.read(&c2) - a2;
        rec.u64("el2_over_hypercall", d);
        if d == 0 {
            Err("test=pmu: a counter filtered to EL2 did not move over a hypercall".into())
        } else {
            let r = crate::arch::smccc::call(abi::hypercall::MAINT_COUNTS, 7, 0, 0)[0] as i64;
            if r != abi::error::INVALID_PARAMETER {
                Err(format!("test=pmu: MAINT_COUNTS with selector 7 answered {r}, expected INVALID_PARAMETER"))
            } else {
                Ok(())
            }
        }
    } else {
        Ok(())
    };
    pmu.release(c1);
    pmu.release(c2);
    result?;
    hyp_result?;
    rt::println!("{rec}");
    rt::println!("kernel: pmu: driver checks passed on {}", core.name());
    Ok(())
}
