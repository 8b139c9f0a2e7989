//! Ending the run. Under the hypervisor: the exit hypercall with the status (the hypervisor
//! prints the run's one final line and powers off). Without it the kernel prints the final line
//! `@@exit CODE (meaning)` itself, then asks the firmware through the device tree's conduit for
//! PSCI SYSTEM_OFF on success and SYSTEM_RESET on a failure (QEMU's own PSCI ends the QEMU
//! process either way, `-no-reboot`): alone, how the machine ended is the verdict (the xtask
//! reads it from QEMU, not the console, which a guest could write anything on), and the line
//! only names the failure. QEMU semihosting is never used (it would give any guest the host's
//! files and shell).

use crate::arch::smccc;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Who ends the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// This project's hypervisor (found through its SMCCC vendor UID).
    Hypervisor,
    /// Bare QEMU (`linux,dummy-virt`), no hypervisor.
    Qemu,
    /// Anything else: real firmware.
    Firmware,
}

static HOST: AtomicU8 = AtomicU8::new(2);
/// Whether the device tree named a PSCI conduit (set with `smccc::set_conduit`).
static PSCI: AtomicBool = AtomicBool::new(false);

pub fn set_host(h: Host) {
    HOST.store(h as u8, Ordering::Relaxed);
}

pub fn host() -> Host {
    match HOST.load(Ordering::Relaxed) {
        0 => Host::Hypervisor,
        1 => Host::Qemu,
        _ => Host::Firmware,
    }
}

/// Whether this project's hypervisor runs below: it answers the SMCCC vendor-hypervisor UID call
/// with its UID. Only asked when EL2 exists (with no EL2, HVC is undefined); EL2 may still leave
/// HVC undefined (HCR_EL2.HCD, a boot loader that keeps nothing at EL2): the probe's HVC is then
/// stepped over by [`hvc_probe_undefined`] and answers "not supported". Reads no memory: usable
/// first thing at boot, with the MMU off (the vectors installed), so that every way the kernel
/// ends, even before the device tree is read, leaves the final line to the hypervisor.
pub fn probe_hypervisor() -> bool {
    use aarch64_cpu::registers::{Readable, ID_AA64PFR0_EL1};
    // ID_AA64PFR0_EL1.EL2, bits [11:8]: non-zero when EL2 is implemented.
    let el2 = (ID_AA64PFR0_EL1.get() >> 8) & 0xf != 0;
    let uid = || {
        let (r0, r1, r2, r3): (u64, u64, u64, u64);
        // SAFETY: an SMCCC call (HVC #0) at `__kernel_hvc_probe`: x0-x17 may be clobbered, no
        // memory of ours is touched; if HVC is undefined here the trap handler returns
        // NOT_SUPPORTED in x0 past it.
        unsafe {
            core::arch::asm!("bl __kernel_hvc_probe", inout("x0") abi::hypercall::CALL_UID => r0,
                inout("x1") 0u64 => r1, inout("x2") 0u64 => r2, inout("x3") 0u64 => r3,
                out("x4") _, out("x5") _, out("x6") _, out("x7") _,
                out("x8") _, out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
                out("x14") _, out("x15") _, out("x16") _, out("x17") _, out("x30") _, options(nostack));
        }
        [r0, r1, r2, r3]
    };
    el2 && uid() == abi::hypercall::UID
}

// What this block guarantees: `__kernel_hvc_probe` issues exactly one `HVC #0` at its first
// instruction with the caller's x0-x17 and returns; the trap handler recognises that address.
core::arch::global_asm!(".global __kernel_hvc_probe", "__kernel_hvc_probe:", "    hvc #0", "    ret");

extern "C" {
    fn __kernel_hvc_probe();
}

/// An undefined-instruction exception at EL1 (ESR class 0) taken at the probe's HVC: HVC is
/// disabled at EL2. Answers "not supported" past it and returns true; false for any other.
pub fn hvc_probe_undefined(frame: &mut rt::TrapFrame, esr: u64) -> bool {
    if rt::esr::class(esr) != 0 || frame.elr != rt::pc_relative!(__kernel_hvc_probe) as u64 {
        return false;
    }
    frame.x[0] = abi::psci::NOT_SUPPORTED as u64;
    frame.elr += 4;
    true
}

/// Called once the device tree has named the PSCI conduit.
pub fn set_psci_known() {
    PSCI.store(true, Ordering::Relaxed);
}

/// Ends the run with `status` (0 = success).
pub fn exit(status: u32) -> ! {
    if host() == Host::Hypervisor {
        rt::console::flush();
        smccc::call(abi::hypercall::EXIT, status as u64, 0, 0);
    } else {
        rt::console::panic_print(format_args!("{}\n", abi::exit::FinalLine(status)));
        rt::console::flush();
        if PSCI.load(Ordering::Relaxed) {
            let (fid, name) = match status {
                0 => (abi::psci::SYSTEM_OFF, "SYSTEM_OFF"),
                _ => (abi::psci::SYSTEM_RESET, "SYSTEM_RESET"),
            };
            let r = smccc::call(fid, 0, 0, 0)[0] as i64;
            rt::console::panic_print(format_args!("kernel: PSCI {name} returned {r}: {}\n", abi::exit::NO_POWER_OFF));
        } else {
            rt::console::panic_print(format_args!("kernel: {}\n", abi::exit::NO_POWER_OFF));
        }
        rt::console::flush();
    }
    loop {
        aarch64_cpu::asm::wfe();
    }
}
