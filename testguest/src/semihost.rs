//! `testguest=semihost`: the QEMU semihosting calls a hostile guest would make to reach the host
//! (Arm's semihosting for AArch64: `hlt #0xf000`, W0 the operation, X1 its parameter block).
//! With semihosting off, as every run of this project has it, each is an undefined instruction
//! at EL1: [`undefined`] steps over it and notes it.

use core::sync::atomic::{AtomicU64, Ordering};
use rt::trap::TrapFrame;

/// `hlt #0xf000`.
const HLT_SEMIHOSTING: u32 = 0xd45e_0000;
const SYS_OPEN: u64 = 0x01;
const SYS_WRITE: u64 = 0x05;
const SYS_SYSTEM: u64 = 0x12;
const SYS_EXIT: u64 = 0x18;
/// SYS_EXIT's reason for a normal end of the application.
const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x2_0026;
/// SYS_OPEN's mode "w" (write, create, truncate).
const OPEN_MODE_W: u64 = 4;
/// What a call returns in X0 when it came back as an undefined instruction.
const UNDEFINED: u64 = u64::MAX - 0xdead;

/// ESR_EL1 of the last undefined semihosting instruction.
static LAST_ESR: AtomicU64 = AtomicU64::new(0);

/// Called for a synchronous exception at EL1: `true` when it is an undefined-instruction
/// exception (EC 0) on `hlt #0xf000`, which is then stepped over with X0 = [`UNDEFINED`].
pub fn undefined(frame: &mut TrapFrame, esr: u64) -> bool {
    let ec = esr >> 26;
    // SAFETY: ELR points at the instruction that raised the exception, in this image's text.
    let insn = unsafe { core::ptr::read_volatile(frame.elr as *const u32) };
    if ec != 0 || insn != HLT_SEMIHOSTING {
        return false;
    }
    LAST_ESR.store(esr, Ordering::Relaxed);
    frame.x[0] = UNDEFINED;
    frame.elr += 4;
    true
}

/// One semihosting call: the result in X0, or `None` if it came back undefined.
fn call(op: u64, block: &[u64]) -> Option<u64> {
    LAST_ESR.store(0, Ordering::Relaxed);
    let r: u64;
    // SAFETY: the semihosting trap instruction with W0 = op and X1 = a parameter block that
    // lives across the call; with semihosting off it is undefined and [`undefined`] resumes
    // after it. Served by a host, it would only read the block and the strings it points at.
    unsafe {
        core::arch::asm!("hlt #0xf000", inout("x0") op => r, in("x1") block.as_ptr(), options(nostack));
    }
    (LAST_ESR.load(Ordering::Relaxed) == 0).then_some(r)
}

/// The result of one call as the record and the console say it.
fn said(name: &str, r: Option<u64>) -> &'static str {
    match r {
        None => {
            rt::println!(
                "testguest: semihosting {name}: undefined instruction (ESR {:#x}): no path to the host",
                LAST_ESR.load(Ordering::Relaxed)
            );
            "undefined"
        }
        Some(v) => {
            rt::println!("testguest: semihosting {name} was SERVED (returned {v:#x}): the guest reaches the host");
            "served"
        }
    }
}

/// Tries every call; returns the run's status: a guest failure, since SYS_EXIT did not end it.
pub fn run(path: &str) -> u32 {
    use alloc::format;
    let open_path = format!("{path}.open\0");
    let open = call(SYS_OPEN, &[open_path.as_ptr() as u64, OPEN_MODE_W, (open_path.len() - 1) as u64]);
    let open_said = said("SYS_OPEN", open);
    let mut write_said = "skipped";
    if let Some(handle) = open.filter(|&h| h as i64 >= 0) {
        let data = b"written by a guest through semihosting\n";
        write_said = said("SYS_WRITE", call(SYS_WRITE, &[handle, data.as_ptr() as u64, data.len() as u64]));
    }
    let cmd = format!("touch {path}.system\0");
    let system_said = said("SYS_SYSTEM", call(SYS_SYSTEM, &[cmd.as_ptr() as u64, (cmd.len() - 1) as u64]));
    let exit_said = said("SYS_EXIT", call(SYS_EXIT, &[ADP_STOPPED_APPLICATION_EXIT, 0]));
    let mut r = abi::report::Record::new("testguest_semihost");
    r.str("open", open_said).str("write", write_said).str("system", system_said).str("exit", exit_said);
    rt::println!("{r}");
    rt::println!("testguest: semihosting SYS_EXIT did not end the run: ending it as a guest failure");
    abi::exit::GUEST_FAILURE
}
