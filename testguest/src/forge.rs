//! `testguest=forge-reset` and `forge-panic`: a guest that lies about the run. It prints final
//! lines claiming success, one without a key and one with a key it made up, the way a hostile
//! guest (or a command line Linux echoes) would, then:
//!
//! * `forge-reset`: resets the machine without a final line of its own (PSCI SYSTEM_RESET): the
//!   run is a failure whatever the console says (alone, QEMU's reset is the verdict; under the
//!   hypervisor, its keyed final line);
//! * `forge-panic`: prints a complete Linux panic report and waits: the end-at-panic watch must
//!   end the run at once, planted final lines or not.

use core::sync::atomic::Ordering;

/// What the forged lines claim.
const FORGED: [&str; 2] = ["@@exit 0 (success)", "@@exit 0 (success) key=0123456789abcdef"];

fn forge() {
    for l in FORGED {
        rt::println!("{l}");
    }
}

/// `forge-reset`.
pub fn reset() -> ! {
    forge();
    rt::console::flush();
    let conduit = crate::calls::PSCI.load(Ordering::Relaxed);
    crate::calls::smccc(conduit == 2, abi::psci::SYSTEM_RESET, 0);
    rt::println!("testguest: PSCI SYSTEM_RESET returned");
    crate::calls::end(1)
}

/// `forge-panic`.
pub fn panic() -> ! {
    forge();
    rt::println!("Kernel panic - not syncing: forged by the test guest");
    rt::println!("---[ end Kernel panic - not syncing: forged by the test guest ]---");
    loop {
        aarch64_cpu::asm::wfe();
    }
}
