//! Self-tests chosen on the command line (`test=NAME`), for the integration tests:
//!
//! * `test=panic`: a Rust panic (message, backtrace, non-zero exit).
//! * `test=undef`: an undefined instruction (exception report, non-zero exit).
//! * `test=touch-hyp`: read the first address of the hole in guest RAM where the hypervisor
//!   lives; the hypervisor must report the IPA and end the run.

use crate::KERNEL;
use alloc::format;
use alloc::string::String;

pub fn run(args: &[String]) -> Result<(), String> {
    for a in args {
        let Some(name) = a.strip_prefix("test=") else {
            continue;
        };
        rt::println!("kernel: self-test {name}");
        match name {
            "panic" => panic!("deliberate panic (test=panic)"),
            // SAFETY: deliberately executes a permanently undefined instruction; the exception
            // handler reports it and ends the run.
            "undef" => unsafe { core::arch::asm!("udf #0") },
            "touch-hyp" => touch_hole()?,
            other => {
                return Err(format!(
                    "unknown self-test {other:?} (known: panic, undef, touch-hyp)"
                ))
            }
        }
    }
    Ok(())
}

fn touch_hole() -> Result<(), String> {
    let mem = &KERNEL.get().unwrap().board.memory;
    let hole = mem
        .windows(2)
        .find(|w| w[0].end() < w[1].base)
        .map(|w| w[0].end())
        .ok_or("test=touch-hyp: guest RAM has no hole (not running under the hypervisor?)")?;
    rt::println!("kernel: reading {hole:#x}, the first byte of the hole in guest RAM");
    // SAFETY: deliberately reads memory the guest does not own; the hypervisor must stop it.
    let v = unsafe { core::ptr::read_volatile(hole as *const u64) };
    Err(format!(
        "read {hole:#x} returned {v:#x}: the hypervisor did not stop an access to its memory"
    ))
}
