//! Bringing up the other CPUs with PSCI CPU_ON.

use crate::{banner, smccc, KERNEL};
use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicUsize, Ordering};

static ONLINE: AtomicUsize = AtomicUsize::new(1);
/// CPUs that came up but were refused (BBML2 disagreement, see `mm::enable_secondary`).
static REFUSED: AtomicUsize = AtomicUsize::new(0);

/// How long the boot CPU waits for the others, in counter ticks per second (CNTFRQ).
const WAIT_SECONDS: u64 = 10;

/// Starts every CPU of the DTB (one at a time, so banners come out in order); returns how many
/// are online. A CPU that PSCI refuses or that does not show up in time is an error; a CPU the
/// memory code refuses (BBML2 disagreement) is reported by itself and not counted.
pub fn start_secondaries() -> Result<usize, String> {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0, MPIDR_EL1};
    let k = KERNEL.get().unwrap();
    let me = MPIDR_EL1.get() & 0xff_00ff_ffff;
    let entry = rt::start::secondary_entry_addr() as u64;
    for (idx, cpu) in k.board.cpus.iter().enumerate().take(rt::MAX_CPUS) {
        if cpu.mpidr == me {
            continue;
        }
        let before = (ONLINE.load(Ordering::Acquire), REFUSED.load(Ordering::Acquire));
        let r = smccc::call(abi::psci::CPU_ON_64, cpu.mpidr, entry, idx as u64)[0] as i64;
        if r != abi::psci::SUCCESS {
            return Err(format!("PSCI CPU_ON for CPU {idx} (MPIDR {:#x}) failed: {r}", cpu.mpidr));
        }
        let deadline = CNTPCT_EL0.get() + WAIT_SECONDS * CNTFRQ_EL0.get();
        while (ONLINE.load(Ordering::Acquire), REFUSED.load(Ordering::Acquire)) == before {
            if CNTPCT_EL0.get() > deadline {
                return Err(format!("CPU {idx} (MPIDR {:#x}) did not come up within {WAIT_SECONDS} s", cpu.mpidr));
            }
            core::hint::spin_loop();
        }
    }
    Ok(ONLINE.load(Ordering::Acquire))
}

#[no_mangle]
extern "C" fn rt_secondary_main(cpu: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL1};
    VBAR_EL1.set(rt::trap::vectors_el1());
    if let Err(why) = crate::mm::enable_secondary(cpu) {
        rt::println!("kernel: {why}; it powers off");
        REFUSED.fetch_add(1, Ordering::AcqRel);
        // As Linux does for a CPU that fails a capability check: PSCI CPU_OFF (returns only on
        // failure, then the CPU parks).
        smccc::call(abi::psci::CPU_OFF, 0, 0, 0);
        loop {
            aarch64_cpu::asm::wfe();
        }
    }
    banner(cpu);
    ONLINE.fetch_add(1, Ordering::AcqRel);
    crate::work::secondary_loop()
}
