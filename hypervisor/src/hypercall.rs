//! The hypervisor's own calls (`lib/abi`'s hypercall module). Every argument is checked; an
//! unknown call returns NOT_SUPPORTED and changes nothing.

use crate::exit;
use abi::error;
use abi::hypercall as hc;
use rt::TrapFrame;

fn code(c: i64) -> [u64; 4] {
    [c as u64, 0, 0, 0]
}

pub fn handle(fid: u64, a: [u64; 3], _frame: &mut TrapFrame) -> [u64; 4] {
    match fid {
        hc::CALL_UID => hc::UID,
        hc::SMCCC_VERSION => [0x1_0001, 0, 0, 0], // SMCCC 1.1
        // No firmware workarounds are advertised (SMCCC_ARCH_WORKAROUND_*): not supported.
        hc::SMCCC_ARCH_FEATURES => code(error::NOT_SUPPORTED),
        hc::VERSION => [error::SUCCESS as u64, hc::ABI_VERSION, 0, 0],
        hc::EXIT => {
            let status = a[0];
            rt::println!("hyp: guest exit hypercall, status {status}");
            exit::exit(abi::exit::from_guest_status(status))
        }
        hc::COUNTERS_RESET => {
            crate::counters::reset();
            code(error::SUCCESS)
        }
        hc::COUNTERS_REPORT => {
            crate::counters::report();
            code(error::SUCCESS)
        }
        _ => code(error::NOT_SUPPORTED),
    }
}
