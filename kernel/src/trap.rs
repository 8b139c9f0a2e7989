//! EL1 exceptions. Only the faults a memory probe armed (`mm::fault`) are expected: they are
//! counted and resumed. Every other exception is reported with its class, ESR, FAR, ELR and a
//! backtrace, and ends the run with a failure status.

use crate::power;
use aarch64_cpu::registers::{Readable, ESR_EL1, FAR_EL1};
use rt::esr;
use rt::trap::vector;
use rt::TrapFrame;

#[no_mangle]
extern "C" fn rt_exception(frame: &mut TrapFrame, vec: u64) {
    if vec == vector::CUR_SPX_IRQ {
        crate::irq::handle(crate::smp::this_cpu());
        return;
    }
    let esr_v = ESR_EL1.get();
    if vec == vector::CUR_SPX_SYNC && crate::mm::fault::try_catch(frame, esr_v, FAR_EL1.get()) {
        return;
    }
    let ec = esr::class(esr_v);
    let base = rt::start::image_layout().start as u64;
    rt::console::panic_print(format_args!(
        "kernel: FATAL: unexpected {} exception from {}\n\
         kernel:   EC {ec:#04x} ({}) ESR {esr_v:#x} FAR {:#x} ELR {:#x} SPSR {:#x}\n\
         kernel:   at image+{:#x}\n",
        vector::kind(vec),
        vector::source(vec),
        esr::class_name(ec),
        FAR_EL1.get(),
        frame.elr,
        frame.spsr,
        frame.elr.wrapping_sub(base),
    ));
    rt::backtrace::print(frame.x[29] as usize, |a| rt::console::panic_print(format_args!("kernel: {a}")));
    power::exit(abi::exit::GUEST_EXCEPTION)
}
