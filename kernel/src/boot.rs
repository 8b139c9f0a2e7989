//! The kernel's entry points and boot: the boot CPU (`rt_main`, from `rt::start`'s entry code,
//! MMU off), on at its virtual address (`boot_high`), the refusal to run at EL2 or EL3, `boot`
//! (DTB, conduit, `kcore::options::Options` parsed once and passed down, each subsystem's
//! `init`, the self-tests, benchmarks and programs the command line names) and the panic
//! handler. CPUs started later enter at `smp::rt_secondary_main`; exceptions at `trap`.

use crate::arch::machine::{Kernel, KERNEL};
use crate::arch::power::{self, Host};
use crate::arch::{heap, smccc};
use crate::{bench, irq, mm, percpu, perf, sched, selftest, smp};
use alloc::string::String;
use board::Board;
use kcore::options::Options;

/// The boot CPU, MMU off, at the image's physical address: on to `mm::early::boot`, which
/// builds the early tables, turns the MMU on and continues at [`boot_high`].
#[no_mangle]
extern "C" fn rt_main(dtb: usize) -> ! {
    use aarch64_cpu::registers::{CurrentEL, Readable, Writeable, VBAR_EL1};
    heap::init();
    let el = CurrentEL.get() >> 2 & 3;
    if el != 1 {
        refuse_el(el, dtb);
    }
    VBAR_EL1.set(rt::trap::vectors_el1());
    // Nothing the boot loader left in EL1's controls is relied on (`rt::el1`).
    rt::entry::el1(&rt::features::Features::from_ids(&rt::features::IdRegs::read()));
    // lib/pgtable's vector routines keep Q registers only: CPACR_EL1 (`rt::el1::CPACR_ENTRY`)
    // traps SVE and SME at EL0 and EL1, so a task's vector state is Q0-Q31 and never in
    // streaming mode; FP/SIMD stays untrapped at EL1 throughout.
    pgtable::vector::set(pgtable::vector::VectorUse::Neon);
    // Before anything can fail: under the hypervisor the run's final line is the hypervisor's.
    if power::probe_hypervisor() {
        power::set_host(Host::Hypervisor);
    }
    mm::early::boot(dtb, rt::pc_relative!(boot_high))
}

/// The boot CPU at the image's virtual address (MMU on, early tables), `dtb` the DTB's
/// physical address.
pub extern "C" fn boot_high(dtb: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL1};
    VBAR_EL1.set(rt::trap::vectors_el1());
    smp::set_this_cpu(0);
    // SAFETY: nothing allocated with the MMU off is used any more (`mm::early` only passes the
    // DTB's physical address on).
    unsafe { heap::reset() };
    match boot(dtb) {
        Ok(()) => power::exit(0),
        Err(e) => {
            rt::console::panic_print(format_args!("kernel: boot failed: {e}\n"));
            power::exit(1)
        }
    }
}

/// Started at EL2 or EL3 (e.g. `-kernel kernel.img` on a machine with virtualization=on): say so
/// on the DTB's UART and end the run (the final line, then PSCI SYSTEM_OFF over SMC, which
/// reaches the firmware from EL2; at EL3, or without PSCI, the CPU parks after saying so).
fn refuse_el(el: u64, dtb: usize) -> ! {
    // SAFETY: x0 is 0 or points at the DTB (boot protocol), in RAM nothing else writes.
    let board = unsafe { Board::from_ptr(dtb as *const u8) }.ok();
    if let Some(uart) = board.as_ref().and_then(|b| b.console.as_ref()) {
        // SAFETY: the DTB names this UART as the console; nothing else uses it.
        unsafe { rt::console::init(uart.kind, uart.base as usize) };
    }
    rt::console::panic_print(format_args!(
        "kernel: boot failed: started at EL{el}: this kernel runs at EL1 only (boot it as the hypervisor's \
         guest, or alone with --no-hypervisor on a machine without virtualization=on)\n"
    ));
    if el == 2 && board.as_ref().is_some_and(|b| b.psci.is_some()) {
        // From EL2 the firmware is reached with SMC, whatever conduit the DTB names for EL1.
        smccc::set_conduit(smccc::Conduit::Smc);
        power::set_psci_known();
    }
    power::exit(abi::exit::GUEST_FAILURE)
}

fn boot(dtb_pa: usize) -> Result<(), String> {
    use alloc::format;
    // The early linear map covers RAM, where `mm::early` checked the DTB lies.
    let dtb_addr = (mm::LINEAR_BASE + dtb_pa as u64) as usize;
    // SAFETY: the DTB is in RAM (checked by `mm::early`), mapped read-write by the linear map,
    // and nothing writes it.
    let dtb =
        unsafe { board::dtb_at(dtb_addr as *const u8) }.map_err(|e| format!("device tree at {dtb_pa:#x}: {e}"))?;
    let board = Board::from_dtb(dtb).map_err(|e| format!("device tree: {e}"))?;
    let host = detect_host(&board);
    power::set_host(host);
    let psci = board.psci.as_ref().ok_or("device tree has no PSCI node: cannot start CPUs or power off")?;
    smccc::set_conduit(match psci.method {
        board::PsciMethod::Hvc => smccc::Conduit::Hvc,
        board::PsciMethod::Smc => smccc::Conduit::Smc,
    });
    power::set_psci_known();
    let mem_bytes = board.memory.iter().map(|r| r.size).sum();
    // The command line, checked and typed once; each subsystem gets its part.
    let (opts, firmware) = Options::parse(board.bootargs.as_deref().unwrap_or("")).map_err(|e| format!("{e}"))?;
    if !firmware.is_empty() {
        rt::println!(
            "kernel: {} words before {:?} are the boot loader's, ignored: {}",
            firmware.len(),
            bootargs::FIRMWARE_MARKER,
            firmware.join(" ")
        );
    }
    mm::init(&board, (dtb_pa as u64, (dtb_pa + dtb.len()) as u64), &opts.mm)?;
    mm::user::configure(&opts.user);
    percpu::init(board.cpus.len(), &opts.percpu)?;
    sched::configure(&opts.sched)?;
    rt::println!(
        "kernel: pgtlab kernel, {} CPUs, {} MiB RAM in {} ranges, PSCI over {:?}, {}, bootargs {:?}",
        board.cpus.len(),
        mem_bytes >> 20,
        board.memory.len(),
        smccc::conduit(),
        match host {
            Host::Hypervisor => "under the pgtlab hypervisor",
            Host::Qemu => "on bare QEMU (no hypervisor)",
            Host::Firmware => "on firmware",
        },
        opts.words.join(" ")
    );
    irq::init(&board)?;
    perf::init_irq(&board)?;
    mm::user::init(board.cpus.len().min(rt::MAX_CPUS), &opts.user)?;
    sched::init();
    KERNEL.call_once(|| Kernel { board, host, mem_bytes });
    smp::banner(0);
    let online = smp::start_secondaries(opts.tests.cycle_cpu)?;
    let k = KERNEL.get().unwrap();
    let usable = k.board.cpus.len().min(rt::MAX_CPUS);
    if usable < k.board.cpus.len() {
        rt::println!(
            "kernel: {online} of {usable} CPUs online (the device tree has {}; this kernel runs at most {}, the others stay off)",
            k.board.cpus.len(),
            rt::MAX_CPUS
        );
    } else {
        rt::println!("kernel: {online} of {} CPUs online", k.board.cpus.len());
    }
    perf::scenario::around::<String>(&opts.perf, || {
        selftest::run(&opts)?;
        if let Some(name) = opts.bench.name {
            bench::run(name, &opts.bench)?;
        }
        Ok(())
    })?;
    let programs = &opts.sched.programs;
    if !programs.is_empty() {
        let failed = sched::run_programs(programs)?;
        if failed != 0 {
            return Err(format!("{failed} of {} EL0 programs failed", programs.len()));
        }
    }
    rt::println!("kernel: all done, powering off");
    Ok(())
}

/// Who ends the run: the hypervisor when [`power::probe_hypervisor`] found it at boot, else bare
/// QEMU (`linux,dummy-virt`) or firmware.
fn detect_host(board: &Board) -> Host {
    if power::host() == Host::Hypervisor {
        Host::Hypervisor
    } else if board.is_qemu_virt() {
        Host::Qemu
    } else {
        Host::Firmware
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::console::panic_print(format_args!("kernel: PANIC: {info}\n"));
    rt::backtrace::print(rt::backtrace::current_fp(), |a| rt::console::panic_print(format_args!("kernel: {a}")));
    power::exit(abi::exit::GUEST_PANIC)
}
