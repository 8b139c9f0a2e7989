use crate::events::{Core, CPU_CYCLES, INST_RETIRED, SW_INCR};
use crate::sim::SimPmu;
use crate::*;

/// What QEMU TCG's PMCEID0 says: SW_INCR, CPU_CYCLES, and INST_RETIRED only under -icount.
fn qemu_pmceid(icount: bool) -> [u64; 2] {
    [1 | (1 << CPU_CYCLES) | if icount { 1 << INST_RETIRED } else { 0 }, 0]
}

fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

fn event(n: u16) -> Event {
    Core::Other.lookup(&n.to_string()).unwrap()
}

#[test]
fn a_32_bit_counter_reads_as_64_bits_across_many_wraps() {
    let sim = SimPmu::new(4, 6, qemu_pmceid(true));
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0x414f_d0b1, true).unwrap();
    assert!(!pmu.info().long_events);
    let c = pmu.claim(event(INST_RETIRED), ElFilter::ALL).unwrap();
    pmu.preset(&c, 0xffff_fff0);
    let mut want = 0xffff_fff0u64;
    for step in [0x20u64, 0xffff_ffff, 1, 0x1_0000_0000 - 1, 12345] {
        sim.tick(INST_RETIRED, step);
        want += step;
        assert_eq!(pmu.read(&c), want, "after +{step:#x}");
    }
    assert_eq!(state.wraps(c.idx), (want >> 32) as u32);
}

#[test]
fn an_overflow_inside_a_read_is_counted_once() {
    // Events arrive while the reader is between its steps and wrap the counter; with the
    // interrupt on, its handler folds the flag in there and then; with it off, the reader's own
    // second service does. Either way the wrap is counted once and matched with the low half.
    for irq in [true, false] {
        let sim = leak(SimPmu::new(4, 6, qemu_pmceid(true)));
        let state = leak(CpuState::new());
        let pmu = Pmu::new(sim, state, 0, true).unwrap();
        let c = pmu.claim(event(INST_RETIRED), ElFilter::ALL).unwrap();
        pmu.enable_overflow_irq(&c, irq);
        pmu.preset(&c, 0xffff_ff00);
        let arrived = leak(std::cell::Cell::new(false));
        *sim.on_read.borrow_mut() = Some(Box::new(move || {
            if !arrived.replace(true) {
                sim.tick(INST_RETIRED, 0x200);
                if sim.ovs.get() & sim.inten.get() != 0 {
                    Pmu::new(sim, state, 0, true).unwrap().service_overflow();
                }
            }
        }));
        assert_eq!(pmu.read(&c), 0xffff_ff00 + 0x200, "interrupt {irq}");
        assert!(arrived.get());
        assert_eq!(state.wraps(c.idx), 1);
        assert_eq!(sim.masked.get(), 0);
    }
}

#[test]
fn pmuv3p5_counters_are_64_bit_and_never_wrap_in_software() {
    let sim = SimPmu::new(6, 6, qemu_pmceid(true));
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0x000f_0510, true).unwrap();
    assert!(pmu.info().long_events);
    assert_ne!(sim.pmcr.get() & pmcr::LP, 0);
    let c = pmu.claim(event(INST_RETIRED), ElFilter::ALL).unwrap();
    pmu.preset(&c, 0xffff_fff0);
    sim.tick(INST_RETIRED, 0x20);
    assert_eq!(pmu.read(&c), 0x1_0000_0010);
    assert_eq!(state.wraps(c.idx), 0);
    assert_eq!(sim.ovs.get(), 0, "no 32-bit overflow flag with PMCR.LP");
}

#[test]
fn software_increment_crosses_the_wrap() {
    let sim = SimPmu::new(4, 6, qemu_pmceid(false));
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0, true).unwrap();
    let c = pmu.claim(event(SW_INCR), ElFilter::ALL).unwrap();
    pmu.preset(&c, 0xffff_fff0);
    for _ in 0..32 {
        pmu.software_increment(&c);
    }
    assert_eq!(pmu.read(&c), 0x1_0000_0010);
}

#[test]
fn enabling_resets_nothing_and_counts_cycles_at_every_el() {
    let sim = SimPmu::new(4, 6, qemu_pmceid(false));
    sim.ccntr.set(1000);
    sim.evcntr.borrow_mut()[3] = 77;
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0, true).unwrap();
    assert_eq!(sim.pmcr.get() & (pmcr::E | pmcr::LC), pmcr::E | pmcr::LC);
    assert_eq!(sim.ccfiltr.get(), ElFilter::ALL.bits());
    assert_eq!(pmu.cycles(), 1000);
    assert_eq!(sim.evcntr.borrow()[3], 77);
    sim.tick(CPU_CYCLES, 5);
    assert_eq!(pmu.cycles(), 1005);
}

#[test]
fn claims_share_the_counters() {
    let sim = SimPmu::new(4, 3, [u64::MAX, u64::MAX]);
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0, false).unwrap();
    let a = pmu.claim(event(INST_RETIRED), ElFilter::ALL).unwrap();
    let h = pmu.claim_high(event(CPU_CYCLES), ElFilter { el0: false, el1: true, el2: false }).unwrap();
    assert_eq!((a.idx, h.idx), (0, 2));
    assert_eq!(sim.evtyper.borrow()[2], 0x5000_0000 | CPU_CYCLES as u64);
    let b = pmu.claim(event(0x05), ElFilter::ALL).unwrap();
    assert_eq!(b.idx, 1);
    assert_eq!(pmu.claim(event(0x05), ElFilter::ALL), Err(NotCounted::NoFreeCounter));
    sim.tick(INST_RETIRED, 9);
    pmu.release(b);
    let c = pmu.claim(event(0x2d), ElFilter::ALL).unwrap();
    assert_eq!(c.idx, 1);
    assert_eq!(pmu.read(&a), 9, "claiming another counter reset nothing");
    assert_eq!(pmu.find_programmed(INST_RETIRED), Some(0));
    assert_eq!(pmu.find_programmed(0x05), None);
}

#[test]
fn not_counted_here_is_decided_from_pmceid_and_the_core_table() {
    let a76 = Core::CortexA76;
    // QEMU: only what its PMCEID says.
    assert_eq!(support(INST_RETIRED, qemu_pmceid(false), a76, true), Err(NotCounted::NotImplemented));
    assert_eq!(support(INST_RETIRED, qemu_pmceid(true), a76, true), Ok(()));
    assert_eq!(support(0x05, qemu_pmceid(true), a76, true), Err(NotCounted::NotImplemented));
    assert_eq!(support(0xd4, qemu_pmceid(true), a76, true), Err(NotCounted::Emulated));
    assert_eq!(support(0xd4, qemu_pmceid(true), Core::QemuMax, true), Err(NotCounted::NotThisCore));
    // What QEMU 7.2 really advertises: also STALL_FRONTEND, STALL_BACKEND (and STALL on max),
    // which it reads as 0.
    let qemu_real = [0x20001 | 1 << INST_RETIRED, 0x1000_0018];
    assert_eq!(support(0x23, qemu_real, a76, true), Err(NotCounted::EmulatedZero));
    assert_eq!(support(0x3c, qemu_real, Core::QemuMax, true), Err(NotCounted::EmulatedZero));
    assert_eq!(support(CPU_CYCLES, qemu_real, a76, true), Ok(()));
    assert_eq!(support(0x23, qemu_real, a76, false), Ok(()), "on silicon PMCEID is the word");
    // Silicon: the TRM's PMCEID bits and the core's own table.
    let silicon = [1 << 0x05 | 1 << 0x08 | 1 << 0x11, 1 << (0x2d - 0x20) | 1 << (0x34 - 0x20) | 1 << 36];
    for e in [0x05, 0x08, 0x11, 0x2d, 0x34, 0xd5] {
        assert_eq!(support(e, silicon, a76, false), Ok(()), "{e:#x}");
    }
    assert_eq!(support(0x35, silicon, a76, false), Err(NotCounted::NotImplemented));
    assert_eq!(support(0x4024, silicon, a76, false), Ok(()), "extended common events: upper PMCEID1 half");
    assert_eq!(support(0x4025, silicon, a76, false), Err(NotCounted::NotImplemented));
    // A claim of an event that is not counted fails with the reason and takes no counter.
    let sim = SimPmu::new(4, 6, qemu_pmceid(false));
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0x414f_d0b1, true).unwrap();
    assert_eq!(pmu.claim(event(INST_RETIRED), ElFilter::ALL), Err(NotCounted::NotImplemented));
    assert_eq!(pmu.claim(pmu.info().core.lookup("0xd5").unwrap(), ElFilter::ALL), Err(NotCounted::Emulated));
    assert_eq!(sim.cnten.get() & 0x7fff_ffff, 0);
}

#[test]
fn no_pmu_no_driver() {
    let sim = SimPmu::new(0, 6, [0, 0]);
    assert!(Pmu::new(&sim, &CpuState::new(), 0, false).is_none());
    let sim = SimPmu::new(0xf, 6, [0, 0]);
    assert!(Pmu::new(&sim, &CpuState::new(), 0, false).is_none());
}

#[test]
fn el_filters() {
    assert_eq!(ElFilter::ALL.bits(), 1 << 27);
    let el1 = ElFilter::parse("el1").unwrap();
    assert_eq!(el1.bits(), (1 << 30) | (1 << 28));
    let el2 = ElFilter::parse("EL2").unwrap();
    assert_eq!(el2.bits(), (1 << 31) | (1 << 30) | (1 << 29) | (1 << 28) | (1 << 27));
    assert_eq!(ElFilter::parse("el0+el1").unwrap().name(), "el0+el1");
    assert_eq!(ElFilter::parse("all"), Some(ElFilter::ALL));
    assert_eq!(ElFilter::parse("el3"), None);
    assert_eq!(mdcr_el2_for_guest(6 << 11 | 0x41), 6);
}

#[test]
fn an_observer_finds_the_guests_counter_and_reads_across_a_wrap() {
    let sim = SimPmu::new(4, 6, qemu_pmceid(true));
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0, true).unwrap();
    assert_eq!(observe(&&sim, INST_RETIRED), None);
    let _cycles = pmu.claim(event(CPU_CYCLES), ElFilter::ALL).unwrap();
    let c = pmu.claim(event(INST_RETIRED), ElFilter::ALL).unwrap();
    pmu.preset(&c, 0xffff_fff0);
    let pmcr_before = sim.pmcr.get();
    let a = observe(&&sim, INST_RETIRED).unwrap();
    assert_eq!((a.idx, a.bits), (1, 32));
    sim.tick(INST_RETIRED, 0x20);
    let b = observe(&&sim, INST_RETIRED).unwrap();
    assert_eq!(b.since(&a), 0x20);
    assert_eq!(sim.pmcr.get(), pmcr_before, "observing writes nothing");
}

#[test]
fn qemus_pmceid_is_recognised() {
    assert!(looks_emulated([0x20001, 0x18]), "QEMU cortex-a76");
    assert!(looks_emulated([0x20101, 0x1000_0018]), "QEMU max under -icount");
    assert!(!looks_emulated([0x7fff_ffff, 0x0000_3fff]), "a real PMU");
    assert!(!looks_emulated([0x20001 | 1 << 5, 0x18]), "one TLB event is enough to be real");
}

#[test]
fn the_pmcr_bits_are_the_architectures() {
    // The driver and the simulated PMU share these constants, so only a test against the Arm
    // ARM's numbers (PMCR_EL0: E 0, P 1, C 2, LC 6, LP 7, N [15:11]) sees one moved.
    assert_eq!([pmcr::E, pmcr::P, pmcr::C, pmcr::LC, pmcr::LP], [1, 2, 4, 0x40, 0x80]);
    assert_eq!(pmcr::n(0x4100_3000 | 0x1f << 11 | 0x7ff), 0x1f);
    assert_eq!(pmcr::n(6 << 11), 6);
}

#[test]
fn every_reason_not_to_count_says_something_its_own() {
    use NotCounted::*;
    let all = [NoPmu, NotImplemented, Emulated, NotThisCore, EmulatedZero, NoFreeCounter];
    let whys: std::collections::BTreeSet<&str> = all.iter().map(|n| n.why()).collect();
    assert_eq!(whys.len(), all.len(), "{whys:?}");
    assert!(whys.iter().all(|w| w.len() > 8), "{whys:?}");
}

#[test]
fn extended_events_and_a_cores_unlisted_numbers() {
    let a76 = Core::CortexA76;
    // 0x4000-0x401f are PMCEID0's upper half: 0x4000 is bit 32, 0x4003 bit 35.
    let ext = [1 << 32 | 1 << 35, 0];
    assert_eq!(support(0x4000, ext, a76, false), Ok(()));
    assert_eq!(support(0x4003, ext, a76, false), Ok(()));
    assert_eq!(support(0x4001, ext, a76, false), Err(NotCounted::NotImplemented));
    assert_eq!(support(0x4020, ext, a76, false), Err(NotCounted::NotImplemented), "PMCEID1's half, not PMCEID0's");
    assert_eq!(support(0x4000, [0, 1 << 32], a76, false), Err(NotCounted::NotImplemented));
    // An IMPLEMENTATION DEFINED number the core's table does not list, beside one it does.
    assert_eq!(support(0xd5, [0, 0], a76, false), Ok(()));
    assert_eq!(support(0xfff, [0, 0], a76, false), Err(NotCounted::NotThisCore));
}

/// Counters at index 0 hide a shift the wrong way (`1 << 0 == 1 >> 0`): these sit higher.
#[test]
fn a_counter_above_index_0_uses_its_own_bit_everywhere() {
    let sim = SimPmu::new(4, 6, qemu_pmceid(true));
    let state = CpuState::new();
    let pmu = Pmu::new(&sim, &state, 0, true).unwrap();
    let cycles = pmu.claim(event(CPU_CYCLES), ElFilter::ALL).unwrap();
    let sw = pmu.claim(event(SW_INCR), ElFilter::ALL).unwrap();
    let c = pmu.claim_high(event(INST_RETIRED), ElFilter::ALL).unwrap();
    assert_eq!((cycles.idx, sw.idx, c.idx), (0, 1, 5));
    pmu.enable_overflow_irq(&c, true);
    assert_eq!(sim.inten.get(), 1 << 5);
    pmu.enable_overflow_irq(&c, false);
    assert_eq!(sim.inten.get(), 0);
    pmu.software_increment(&sw);
    pmu.software_increment(&sw);
    assert_eq!((pmu.read(&sw), pmu.read(&cycles)), (2, 0));
    // A preset above 2^32: the high half is the wrap count; a pending overflow is dropped.
    sim.tick(INST_RETIRED, 0x1_0000_0000);
    assert_eq!(sim.ovs.get(), 1 << 5);
    pmu.preset(&c, 0x3_ffff_fff0);
    assert_eq!((sim.ovs.get(), sim.evcntr.borrow()[5]), (0, 0xffff_fff0));
    assert_eq!(pmu.read(&c), 0x3_ffff_fff0);
    sim.tick(INST_RETIRED, 0x20);
    assert_eq!(pmu.service_overflow(), 1 << 5);
    assert_eq!(pmu.read(&c), 0x4_0000_0010);
    assert_eq!((pmu.read(&sw), pmu.read(&cycles)), (2, 0), "the other counters' wrap counts stay");
    assert_eq!(pmu.raw(5), 0x10);
    assert_eq!(pmu.raw(1), 2);
    // A stale programming of the event on a disabled counter below is not the one counting.
    sim.evtyper.borrow_mut()[2] = INST_RETIRED as u64;
    sim.evcntr.borrow_mut()[2] = 99;
    assert_eq!(pmu.find_programmed(INST_RETIRED), Some(5));
    assert_eq!(pmu.find_programmed(SW_INCR), Some(1));
    assert_eq!(observe(&&sim, INST_RETIRED).map(|r| (r.idx, r.value)), Some((5, 0x10)));
}

#[test]
fn core_names_are_distinct() {
    let names: std::collections::BTreeSet<&str> =
        [Core::QemuMax, Core::CortexA76, Core::Other].iter().map(|c| c.name()).collect();
    assert_eq!(names.len(), 3);
    assert!(names.iter().all(|n| n.len() >= 5), "{names:?}");
}
