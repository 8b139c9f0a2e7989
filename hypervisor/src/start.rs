//! The hypervisor's entry points: the boot CPU's (`rt_main`, from `rt::start`'s entry code), a
//! CPU started later (`rt_secondary_main`) and the panic handler. Exceptions enter through
//! `trap::rt_exception`.

use crate::cpu::{self, CPUS};
use crate::{boot, el2, exit, mem, migrate, mmu, psci, trap};

/// `HINT #125` (a NOP) then return: executed first thing on every boot, wherever the image
/// runs (it may have moved itself, `hypcore::home`), so the instruction-counting QEMU plugin
/// (`xtask/plugin/insncount.c`, told this symbol's image offset) knows where EL2 code is.
#[unsafe(naked)]
#[no_mangle]
extern "C" fn pgtlab_el2_home_mark() {
    // What this guarantees: nothing but a NOP-space hint and a return; no register or memory
    // is touched.
    core::arch::naked_asm!("hint #125", "ret")
}

/// The boot CPU: x0 = the device tree (boot protocol), x1/x2 as `rt::start::restart_at` set them
/// after the move home. Every EL2 control is written before anything relies on it
/// (`el2::entry_boot`), then `boot::boot` runs the phases up to the guest.
#[no_mangle]
extern "C" fn rt_main(dtb: usize, x1: u64, x2: u64) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL2};
    pgtlab_el2_home_mark();
    VBAR_EL2.set(rt::trap::vectors_el2());
    el2::entry_boot();
    mem::init_heap();
    let loaded_at = (x2 == boot::MOVED_MARK).then_some(x1);
    match boot::boot(dtb, loaded_at) {
        Ok(never) => match never {},
        Err(e) => {
            rt::console::panic_print(format_args!("hyp: boot failed: {e}\n"));
            exit::exit(trap::EXIT_HYP_FAULT)
        }
    }
}

/// A CPU started through the guest's PSCI CPU_ON (context = CPU number).
#[no_mangle]
extern "C" fn rt_secondary_main(cpu: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL2};
    VBAR_EL2.set(rt::trap::vectors_el2());
    if let Err(why) = el2::entry_secondary() {
        rt::console::panic_print(format_args!("hyp: CPU {}: {why}\n", cpu::current()));
        exit::exit(trap::EXIT_HYP_FAULT);
    }
    // First the MMU: everything shared is read through the caches, coherently with the boot CPU.
    mmu::enable_secondary(cpu);
    if migrate::worker_cpu() == Some(cpu) {
        migrate::worker_main();
    }
    let c = &CPUS[cpu];
    if !c.ready_to_start() {
        // Taken at boot (`psci::take_waiting_cpus`): wait for the guest's CPU_ON.
        psci::park(cpu);
    }
    let (entry, context) = c.start.entry();
    el2::start_cpu(cpu, entry, context)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::console::panic_print(format_args!("hyp: PANIC on CPU {}: {info}\n", cpu::current()));
    rt::backtrace::print(rt::backtrace::current_fp(), |a| rt::console::panic_print(format_args!("hyp: {a}")));
    exit::exit(trap::EXIT_HYP_FAULT)
}
