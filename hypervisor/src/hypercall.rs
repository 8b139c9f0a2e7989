//! The hypervisor's own calls (`lib/abi`'s hypercall module). Every argument is checked; an
//! unknown call returns NOT_SUPPORTED and changes nothing.

use crate::{counters, dirtylog, exit, memslot, split};
use abi::error;
use abi::error::HypError;
use abi::hypercall as hc;
use rt::TrapFrame;

fn code(c: i64) -> [u64; 4] {
    [c as u64, 0, 0, 0]
}

fn unit(r: Result<(), HypError>) -> [u64; 4] {
    code(error::to_x0(r) as i64)
}

fn with1(r: Result<u64, HypError>) -> [u64; 4] {
    match r {
        Ok(v) => [error::SUCCESS as u64, v, 0, 0],
        Err(e) => code(e.code()),
    }
}

/// Whether SMCCC_ARCH_FEATURES says `fid` is implemented: exactly the arch calls [`handle`]
/// answers (SMCCC_VERSION and ARCH_FEATURES itself); SOC_ID and the firmware workarounds
/// are not, and calling them answers NOT_SUPPORTED.
fn arch_feature(fid: u64) -> bool {
    matches!(hc::function_id(fid), hc::SMCCC_VERSION | hc::SMCCC_ARCH_FEATURES)
}

/// `fid` is W0 (the caller dropped the upper half of x0); 32-bit calls' arguments are W1..W3.
pub fn handle(fid: u64, a: [u64; 3], _frame: &mut TrapFrame) -> [u64; 4] {
    match fid {
        hc::CALL_UID => hc::UID,
        hc::SMCCC_VERSION => [0x1_0001, 0, 0, 0], // SMCCC 1.1
        hc::SMCCC_ARCH_FEATURES => code(if arch_feature(a[0]) { error::SUCCESS } else { error::NOT_SUPPORTED }),
        // The range's revision: this ABI's version as major.minor.
        hc::REVISION => [hc::ABI_VERSION, 0, 0, 0],
        hc::VERSION => [error::SUCCESS as u64, hc::ABI_VERSION, 0, 0],
        hc::EXIT => {
            let status = a[0];
            let code = abi::exit::from_guest_status(status);
            if abi::exit::is_guest_status(status) {
                rt::println!("hyp: guest exit hypercall, status {status}");
            } else {
                rt::println!(
                    "hyp: guest exit hypercall, status {status}: not a guest outcome (0-3), reported as {code} ({})",
                    abi::exit::describe(code as i32)
                );
            }
            exit::exit(code)
        }
        hc::COUNTERS_RESET => {
            counters::reset();
            counters::reset_dirty_log();
            code(error::SUCCESS)
        }
        hc::COUNTERS_REPORT => {
            counters::report();
            counters::report_dirty_log();
            code(error::SUCCESS)
        }
        hc::MEMSLOT_CREATE => with1(memslot::create(a[0], a[1], a[2])),
        hc::MEMSLOT_DELETE => unit(memslot::delete(a[0])),
        hc::DIRTY_LOG_ENABLE => unit(dirtylog::enable(a[0], a[1])),
        hc::DIRTY_LOG_DISABLE => unit(dirtylog::disable(a[0])),
        hc::DIRTY_LOG_GET => unit(dirtylog::get(a[0], a[1], a[2])),
        hc::DIRTY_LOG_CLEAR => unit(dirtylog::clear(a[0], a[1], a[2])),
        hc::WALKER_MODE => match split::walker_mode(a[0], a[1]) {
            Ok((mode, chunk)) => [error::SUCCESS as u64, mode, chunk, 0],
            Err(e) => code(e.code()),
        },
        hc::COUNTER_READ => with1(counters::counter(a[0])),
        hc::MAINT_COUNTS => maint_counts(a[0]),
        _ => code(error::NOT_SUPPORTED),
    }
}

/// MAINT_COUNTS: this binary's barrier and TLBI counts since boot (never reset).
fn maint_counts(which: u64) -> [u64; 4] {
    let ok = error::SUCCESS as u64;
    match which {
        hc::MAINT_TLB => {
            let c = pgtable::hw::HwTlb::counters();
            [ok, c.tlbi_total(), c.dsb_total(), c.isb]
        }
        hc::MAINT_OTHER => {
            let (dsb, isb) = rt::cache::barrier_counts();
            [ok, dsb, isb, pmu::hw::isb_count()]
        }
        _ => code(error::INVALID_PARAMETER),
    }
}
