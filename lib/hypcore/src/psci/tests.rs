//! PSCI's decisions, each stated as the rule it follows.

use super::*;
use crate::sync::hook;
use alloc::vec::Vec;
use p::{ALREADY_ON, INVALID_ADDRESS, INVALID_PARAMETERS, ON_PENDING, SUCCESS};

extern crate std;
use std::cell::RefCell;
use std::rc::Rc;

const RAM_ENTRY: u64 = 0x4008_0000;

fn cpu_on(
    target: Option<usize>,
    kept: Option<usize>,
    guest_cpus: usize,
    entry: u64,
    in_ram: bool,
) -> Result<usize, i64> {
    CpuOn { target, kept, guest_cpus, entry, entry_in_ram: in_ram }.check()
}

#[test]
fn cpu_on_refuses_a_cpu_the_guest_does_not_have_then_an_entry_outside_its_ram() {
    // Four CPUs for the guest (0-3), CPU 3 kept by the hypervisor in some rows.
    assert_eq!(cpu_on(Some(1), None, 4, RAM_ENTRY, true), Ok(1));
    assert_eq!(cpu_on(None, None, 4, RAM_ENTRY, true), Err(INVALID_PARAMETERS), "no CPU has that MPIDR");
    assert_eq!(cpu_on(Some(3), Some(3), 4, RAM_ENTRY, true), Err(INVALID_PARAMETERS), "the hypervisor's CPU");
    assert_eq!(cpu_on(Some(2), Some(3), 4, RAM_ENTRY, true), Ok(2), "only the kept CPU is refused");
    // The target is checked before the address: a bad CPU with a bad entry is a bad CPU.
    assert_eq!(cpu_on(None, None, 4, RAM_ENTRY + 2, false), Err(INVALID_PARAMETERS));
    assert_eq!(cpu_on(Some(1), None, 4, RAM_ENTRY, false), Err(INVALID_ADDRESS), "outside the guest's RAM");
    for misaligned in [1, 2, 3] {
        assert_eq!(cpu_on(Some(1), None, 4, RAM_ENTRY + misaligned, true), Err(INVALID_ADDRESS), "+{misaligned}");
    }
}

#[test]
fn cpu_on_starts_the_guests_last_cpu_and_refuses_the_one_after_it() {
    // `hyp.cpus=2` on a 4-CPU board: the guest has CPUs 0 and 1.
    assert_eq!(cpu_on(Some(1), None, 2, RAM_ENTRY, true), Ok(1), "the last CPU of the guest");
    assert_eq!(cpu_on(Some(2), None, 2, RAM_ENTRY, true), Err(INVALID_PARAMETERS), "the first CPU it lacks");
    assert_eq!(cpu_on(Some(0), None, 1, RAM_ENTRY, true), Ok(0));
    assert_eq!(cpu_on(Some(0), None, 0, RAM_ENTRY, true), Err(INVALID_PARAMETERS));
}

#[test]
fn a_claim_moves_off_to_starting_once_and_says_why_it_cannot() {
    let c = CpuStart::new();
    assert_eq!(c.state(), CpuState::Off);
    assert!(!c.ready_to_start());
    assert_eq!(c.claim(0x1000, 7), Ok(()));
    assert_eq!((c.state(), c.ready_to_start(), c.entry()), (CpuState::Starting, true, (0x1000, 7)));
    // A second CPU_ON before the CPU reached the guest: pending, and the first entry stays.
    assert_eq!(c.claim(0x2000, 8), Err(ON_PENDING));
    assert_eq!(c.entry(), (0x1000, 7));
    c.set_state(CpuState::On);
    assert_eq!(c.claim(0x2000, 8), Err(ALREADY_ON));
    assert_eq!((c.state(), c.entry()), (CpuState::On, (0x1000, 7)));
    // CPU_OFF, then a new CPU_ON with a new entry.
    c.set_state(CpuState::Off);
    assert_eq!(c.claim(0x3000, 9), Ok(()));
    assert_eq!(c.entry(), (0x3000, 9));
}

/// After every store `claim` makes, as the CPU being started may look: once it reads that it
/// may start, the entry and context it then reads are this CPU_ON's, and the store that let it
/// start was a release (the entry's stores are ordered before it on every CPU).
#[test]
fn the_entry_and_context_are_written_before_the_cpu_can_see_it_may_start() {
    // An earlier life of the CPU: started at another entry, then off.
    let c: &'static CpuStart = alloc::boxed::Box::leak(alloc::boxed::Box::new(CpuStart::new()));
    c.claim(0xdead_0000, 1).unwrap();
    c.set_state(CpuState::Off);
    // After each store: whether the CPU may start, the entry it would read, the store's ordering.
    type Seen = Vec<(bool, (u64, u64), Ordering)>;
    let seen: Rc<RefCell<Seen>> = Rc::default();
    let log = seen.clone();
    hook::set(move |o| log.borrow_mut().push((c.ready_to_start(), c.entry(), o)));
    c.claim(0x4020_0000, 0x42).unwrap();
    hook::clear();
    let seen = seen.borrow();
    assert!(seen.len() >= 2, "claim stores the state and the entry: {seen:?}");
    let first_ready = seen.iter().position(|s| s.0).expect("the CPU may start once claim returns");
    for (ready, entry, _) in &seen[first_ready..] {
        assert!(*ready);
        assert_eq!(*entry, (0x4020_0000, 0x42), "the CPU could start at a stale entry: {seen:?}");
    }
    let publish = seen[first_ready].2;
    assert!(matches!(publish, Ordering::Release | Ordering::AcqRel | Ordering::SeqCst), "{publish:?}: not a release");
}

#[test]
fn affinity_info_is_the_cpus_state_at_level_0_only() {
    let state_of = |mpidr: u64| match mpidr {
        0x0 => Some(CpuState::On),
        0x1 => Some(CpuState::Off),
        0x100 => Some(CpuState::Starting),
        _ => None,
    };
    for fid in [p::AFFINITY_INFO_32, p::AFFINITY_INFO_64] {
        assert_eq!(own_answer(fid, [0x0, 0, 0], state_of), 0, "ON");
        assert_eq!(own_answer(fid, [0x1, 0, 0], state_of), 1, "OFF");
        assert_eq!(own_answer(fid, [0x100, 0, 0], state_of), 2, "ON_PENDING");
        assert_eq!(own_answer(fid, [0x2, 0, 0], state_of), INVALID_PARAMETERS, "no such CPU");
        assert_eq!(own_answer(fid, [0x0, 1, 0], state_of), INVALID_PARAMETERS, "level 1: a cluster");
    }
    assert_eq!(own_answer(p::VERSION, [0; 3], state_of), 0x1_0000, "PSCI 1.0");
    assert_eq!(own_answer(p::MIGRATE_INFO_TYPE, [0; 3], state_of), 2, "no Trusted OS");
    // A claimed CPU whose entry is not written yet is already pending to AFFINITY_INFO.
    let c = CpuStart::new();
    c.state.store(CLAIMED, Ordering::SeqCst);
    assert_eq!((c.state(), c.ready_to_start()), (CpuState::Starting, false));
    assert_eq!(affinity_info(c.state()), 2);
}

#[test]
fn the_psci_range_is_32_functions_in_both_calling_conventions() {
    for f in [0x8400_0000, 0x8400_001f, 0xc400_0000, 0xc400_001f, 0xffff_ffff_8400_0003] {
        assert!(is_psci(f), "{f:#x}");
    }
    for f in [0x8400_0020, 0x83ff_ffff, 0xc400_0020, 0x8600_0000, 0xc3ff_ffff, 0] {
        assert!(!is_psci(f), "{f:#x}");
    }
}

#[test]
fn features_names_what_is_implemented_and_nothing_else() {
    let implemented = [
        p::VERSION,
        p::CPU_SUSPEND_32,
        p::CPU_SUSPEND_64,
        p::CPU_OFF,
        p::CPU_ON_32,
        p::CPU_ON_64,
        p::AFFINITY_INFO_32,
        p::AFFINITY_INFO_64,
        p::MIGRATE_INFO_TYPE,
        p::SYSTEM_OFF,
        p::SYSTEM_RESET,
        p::FEATURES,
        abi::hypercall::SMCCC_VERSION,
    ];
    for f in 0x8400_0000..=0x8400_001f_u64 {
        for fid in [f, f | 0x4000_0000] {
            let want = if implemented.contains(&fid) { SUCCESS } else { p::NOT_SUPPORTED };
            assert_eq!(features(fid), want, "{fid:#x}");
        }
    }
    assert_eq!(features(abi::hypercall::SMCCC_VERSION), SUCCESS);
    assert_eq!(features(0xffff_ffff_0000_0000 | p::CPU_ON_64), SUCCESS, "W0 only");
}

#[test]
fn cpu_suspend_takes_standby_states_and_refuses_power_down_and_reserved_bits() {
    assert_eq!(cpu_suspend(0), SUCCESS);
    assert_eq!(cpu_suspend(0x0001_ffff & !(1 << 16)), SUCCESS, "state id and affinity level");
    assert_eq!(cpu_suspend(0x0300_0000), SUCCESS, "the power level, bits 25:24");
    assert_eq!(cpu_suspend(1 << 16), INVALID_PARAMETERS, "power down");
    for bit in (17..=23).chain(26..=31) {
        assert_eq!(cpu_suspend(1 << bit), INVALID_PARAMETERS, "reserved bit {bit}");
    }
}
