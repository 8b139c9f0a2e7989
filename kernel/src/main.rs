//! The EL1 guest kernel. Boots as a Linux arm64 Image (x0 = DTB), under the hypervisor or alone
//! on QEMU (`--no-hypervisor`). Brings up every CPU with PSCI, prints a banner per CPU, runs the
//! self-tests named on its command line, and ends the run.
#![no_std]
#![no_main]

extern crate alloc;

mod bench;
mod cmdline;
mod cpuinfo;
mod heap;
mod hyp;
mod irq;
mod mm;
mod percpu;
mod perf;
mod power;
mod sched;
mod selftest;
mod smccc;
mod smp;
mod sync;
mod syscall;
mod trap;
mod user_programs;
mod work;

use alloc::string::String;
use alloc::vec::Vec;
use board::Board;
use cpuinfo::CpuInfo;
use power::Host;
use spin::Once;

/// What every CPU needs to know after boot.
pub struct Kernel {
    pub board: Board,
    pub host: Host,
    pub mem_bytes: u64,
}

pub static KERNEL: Once<Kernel> = Once::new();

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
    // Before anything can fail: under the hypervisor the run's final line is the hypervisor's.
    if power::probe_hypervisor() {
        power::set_host(Host::Hypervisor);
    }
    mm::early::boot(dtb)
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
    cmdline::init(board.bootargs.as_deref().unwrap_or(""))?;
    // The checked words (a boot loader's words before the marker left out).
    let args: Vec<String> = cmdline::args().words().map(String::from).collect();
    mm::init(&board, (dtb_pa as u64, (dtb_pa + dtb.len()) as u64), &args)?;
    mm::user::parse_args();
    let percpu_tables = percpu::parse_args();
    percpu::init(board.cpus.len(), percpu_tables)?;
    let programs = sched::parse_args()?;
    percpu::check_seed(&programs)?;
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
        args.join(" ")
    );
    irq::init(&board)?;
    mm::user::init(board.cpus.len().min(rt::MAX_CPUS))?;
    sched::init();
    KERNEL.call_once(|| Kernel { board, host, mem_bytes });
    banner(0);
    let online = smp::start_secondaries()?;
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
    perf::scenario::around(|| {
        selftest::run(&args)?;
        if let Some(name) = cmdline::args().choice("bench") {
            bench::run(name)?;
        }
        Ok(())
    })?;
    if !programs.is_empty() {
        let failed = sched::run_programs(&programs)?;
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
    } else if board.compatible.iter().any(|c| c == "linux,dummy-virt") {
        Host::Qemu
    } else {
        Host::Firmware
    }
}

/// Prints this CPU's banner line and report record.
pub fn banner(cpu: usize) {
    let i = CpuInfo::read();
    let k = KERNEL.get().expect("banner after boot");
    let decision = mm::bbml2_decision();
    let pa_bits =
        i.pa_bits().map_or_else(|| alloc::format!("reserved PARange {}", i.parange), |b| alloc::format!("{b}-bit PA"));
    rt::println!(
        "kernel: CPU {cpu} up at EL{} | MIDR {:#010x} ({}) | MPIDR {:#x} | BBM level {} | {} MiB | bbml2 {} ({decision}) | {} | tlbi-range {} | PMUv{} | {pa_bits}",
        i.el,
        i.midr.0,
        i.midr,
        i.mpidr,
        i.bbm(),
        k.mem_bytes >> 20,
        if decision.enabled { "yes" } else { "no" },
        mm::banner_modes(),
        if i.tlbi_range() { "yes" } else { "no" },
        i.pmuver,
    );
    let mut r = abi::report::Record::new("banner");
    r.u64("cpu", cpu as u64)
        .u64("el", i.el)
        .hex("midr", i.midr.0)
        .str("core", i.midr.name())
        .hex("mpidr", i.mpidr)
        .u64("bbm", i.bbm().into())
        .u64("mem_mib", k.mem_bytes >> 20)
        .bool("bbml2", decision.enabled)
        .bool("bbml2_capable", i.bbml2().is_ok())
        .str("rodata", mm::info().rodata.as_str())
        .bool("contpte", mm::contpte())
        .u64("linear_table_pages", mm::info().linear_table_pages)
        .bool("tlbi_range", i.tlbi_range())
        .u64("pmuver", i.pmuver)
        .bool("hypervisor", k.host == Host::Hypervisor);
    rt::println!("{r}");
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::console::panic_print(format_args!("kernel: PANIC: {info}\n"));
    rt::backtrace::print(rt::backtrace::current_fp(), |a| rt::console::panic_print(format_args!("kernel: {a}")));
    power::exit(abi::exit::GUEST_PANIC)
}
