//! The EL1 guest kernel. Boots as a Linux arm64 Image (x0 = DTB), under the hypervisor or alone
//! on QEMU (`--no-hypervisor`). Brings up every CPU with PSCI, prints a banner per CPU, runs the
//! self-tests named on its command line, and ends the run.
#![no_std]
#![no_main]

extern crate alloc;

mod bench;
mod cpuinfo;
mod heap;
mod hyp;
mod mm;
mod perf;
mod power;
mod selftest;
mod smccc;
mod smp;
mod trap;
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

#[no_mangle]
extern "C" fn rt_main(dtb: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL1};
    VBAR_EL1.set(rt::trap::vectors_el1());
    heap::init();
    match boot(dtb) {
        Ok(()) => power::exit(0),
        Err(e) => {
            rt::console::panic_print(format_args!("kernel: boot failed: {e}\n"));
            power::exit(1)
        }
    }
}

fn boot(dtb_addr: usize) -> Result<(), String> {
    use alloc::format;
    if dtb_addr == 0 {
        return Err("no device tree in x0".into());
    }
    // SAFETY: x0 points at the DTB (boot protocol); only the checked header is read first, then
    // exactly the size it declares.
    let dtb = unsafe {
        let size = board::dtb_total_size(core::slice::from_raw_parts(dtb_addr as *const u8, 40))
            .map_err(|e| format!("device tree at {dtb_addr:#x}: {e}"))?;
        core::slice::from_raw_parts(dtb_addr as *const u8, size)
    };
    let board = Board::from_dtb(dtb).map_err(|e| format!("device tree: {e}"))?;
    if let Some(uart) = &board.console {
        // SAFETY: the DTB names this PL011 as the console; only rt::console uses it.
        unsafe { rt::console::init(uart.base as usize) };
    }
    let psci = board.psci.as_ref().ok_or("device tree has no PSCI node: cannot start CPUs or power off")?;
    smccc::set_conduit(match psci.method {
        board::PsciMethod::Hvc => smccc::Conduit::Hvc,
        board::PsciMethod::Smc => smccc::Conduit::Smc,
    });
    let host = detect_host(&board);
    power::set_host(host);
    let mem_bytes = board.memory.iter().map(|r| r.size).sum();
    let args: Vec<String> =
        board.bootargs.as_deref().unwrap_or("").split_ascii_whitespace().map(String::from).collect();
    mm::init(&board, (dtb_addr as u64, (dtb_addr + dtb.len()) as u64), &args)?;
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
    KERNEL.call_once(|| Kernel { board, host, mem_bytes });
    banner(0);
    let online = smp::start_secondaries()?;
    let k = KERNEL.get().unwrap();
    rt::println!("kernel: {online} of {} CPUs online", k.board.cpus.len());
    selftest::run(&args)?;
    for a in &args {
        if let Some(name) = a.strip_prefix("bench=") {
            bench::run(name)?;
        }
    }
    rt::println!("kernel: all done, powering off");
    Ok(())
}

/// The hypervisor answers the SMCCC vendor-hypervisor UID call with its UID. Only asked when
/// EL2 exists: with no EL2, HVC is undefined.
fn detect_host(board: &Board) -> Host {
    use aarch64_cpu::registers::{Readable, ID_AA64PFR0_EL1};
    // ID_AA64PFR0_EL1.EL2, bits [11:8]: non-zero when EL2 is implemented.
    let el2 = (ID_AA64PFR0_EL1.get() >> 8) & 0xf != 0;
    if el2 {
        let r = smccc::call(abi::hypercall::CALL_UID, 0, 0, 0);
        if r == abi::hypercall::UID {
            return Host::Hypervisor;
        }
    }
    if board.compatible.iter().any(|c| c == "linux,dummy-virt") {
        Host::Qemu
    } else {
        Host::Firmware
    }
}

/// Prints this CPU's banner line and report record.
pub fn banner(cpu: usize) {
    let i = CpuInfo::read();
    let k = KERNEL.get().expect("banner after boot");
    let (bbml2, why) = mm::banner_decision();
    rt::println!(
        "kernel: CPU {cpu} up at EL{} | MIDR {:#010x} ({} r{}p{}) | MPIDR {:#x} | BBM level {} | {} MiB | bbml2 {} ({why}) | {} | tlbi-range {} | PMUv{} | {}-bit PA",
        i.el,
        i.midr,
        i.core_name(),
        i.variant(),
        i.revision(),
        i.mpidr,
        i.bbm,
        k.mem_bytes >> 20,
        if bbml2 { "yes" } else { "no" },
        mm::banner_modes(),
        if i.tlbi_range() { "yes" } else { "no" },
        i.pmuver,
        i.pa_bits()
    );
    let mut r = abi::report::Record::new("banner");
    r.u64("cpu", cpu as u64)
        .u64("el", i.el)
        .hex("midr", i.midr)
        .str("core", i.core_name())
        .hex("mpidr", i.mpidr)
        .u64("bbm", i.bbm)
        .u64("mem_mib", k.mem_bytes >> 20)
        .bool("bbml2", bbml2)
        .bool("bbml2_capable", i.bbml2().0)
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
