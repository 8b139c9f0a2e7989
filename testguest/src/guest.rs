//! The test guest's entry points, its words, the modes' dispatch, the SMCCC calls it makes and
//! how it ends the run.

use alloc::string::String;
use board::Board;
use bootargs::{Table, Word};
use buddy_system_allocator::LockedHeap;
use core::sync::atomic::Ordering;
use rt::trap::TrapFrame;

use crate::calls::{self, end};

/// Heap for the device tree's description (QEMU's DTB is 1 MiB; its description far less).
const HEAP_SIZE: usize = 1 << 20;

#[repr(C, align(4096))]
struct HeapSpace([u8; HEAP_SIZE]);
static mut HEAP_SPACE: HeapSpace = HeapSpace([0; HEAP_SIZE]);

#[global_allocator]
static HEAP: LockedHeap<32> = LockedHeap::empty();

/// Every word the test guest accepts.
pub const WORDS: &[Word] = &[
    Word::choice(
        "testguest",
        &["semihost", "view", "hang", "entry-el2", "entry-el1", "forge-reset", "forge-panic"],
        "what to do (see testguest/src/main.rs and entry.rs)",
    ),
    Word::uint("testguest.next", 0, u64::MAX, "entry-el2/el1: where QEMU's loader put the Image to enter"),
    Word::choice(
        "testguest.e2h",
        &["0", "1"],
        "entry-el2: leave HCR_EL2.E2H set (default, where FEAT_VHE allows) or clear",
    ),
    Word::size("testguest.mem", 1 << 20, 1 << 50, "view: the RAM the guest must find"),
    Word::uint("testguest.smp", 1, 512, "view: the CPUs the guest must find"),
    Word::choice("testguest.load", &["raw", "image"], "view: the form it was built in, so where QEMU loads it"),
    Word::text("testguest.path", "a host path the semihost mode tries to create (PATH.open, PATH.system)"),
    Word::choice("pgtlab_alone", &["1"], "the xtask's word for a guest that runs without the hypervisor"),
];

const TABLE: Table = Table { owner: "testguest", words: WORDS, foreign: &[] };

/// x1-x3 as the boot loader left them (the boot protocol says 0; `view` checks).
#[no_mangle]
extern "C" fn rt_main(dtb: usize, x1: u64, x2: u64, x3: u64) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL1, VBAR_EL2};
    if at_el2() {
        // A boot loader (the entry modes): nothing at EL1 is this image's yet.
        VBAR_EL2.set(rt::trap::vectors_el2());
    } else {
        VBAR_EL1.set(rt::trap::vectors_el1());
        rt::entry::el1(&rt::features::Features::from_ids(&rt::features::IdRegs::read()));
    }
    // SAFETY: HEAP_SPACE is used only here, once, and handed to the allocator for good.
    unsafe { HEAP.lock().init(core::ptr::addr_of_mut!(HEAP_SPACE) as usize, HEAP_SIZE) };
    calls::UNDER_HYPERVISOR.store(!at_el2() && probe_hypervisor(), Ordering::Relaxed);
    let status = match run(dtb, [x1, x2, x3]) {
        Ok(status) => status,
        Err(e) => {
            rt::console::panic_print(format_args!("testguest: failed: {e}\n"));
            abi::exit::GUEST_FAILURE
        }
    };
    end(status)
}

fn run(dtb: usize, regs: [u64; 3]) -> Result<u32, String> {
    use alloc::format;
    // SAFETY: x0 is 0 or points at the DTB (boot protocol), in RAM nothing else writes.
    let blob = unsafe { board::dtb_at(dtb as *const u8) }.map_err(|e| format!("device tree at {dtb:#x}: {e}"))?;
    let board = Board::from_dtb(blob).map_err(|e| format!("device tree: {e}"))?;
    if let Some(uart) = board.console.as_ref() {
        // SAFETY: the DTB names this UART as the console; nothing else in this guest uses it.
        unsafe { rt::console::init(uart.kind, uart.base as usize) };
    }
    if let Some(p) = board.psci.as_ref() {
        calls::PSCI.store(if p.method == board::PsciMethod::Smc { 2 } else { 1 }, Ordering::Relaxed);
    }
    let cmdline = board.bootargs.as_deref().unwrap_or("");
    rt::println!(
        "testguest: at EL{}, DTB {dtb:#x}, image at {:#x}, {}, bootargs {cmdline:?}",
        if at_el2() { 2 } else { 1 },
        rt::start::image_layout().start,
        if calls::UNDER_HYPERVISOR.load(Ordering::Relaxed) { "under the pgtlab hypervisor" } else { "alone" }
    );
    // As a boot loader (words before the marker) it reads its own words only; else all of them.
    let (before, after) = bootargs::split_firmware(cmdline).map_err(|e| format!("{e}"))?;
    let mine = if before.is_empty() { after } else { before };
    let args = bootargs::parse_words(mine, &TABLE).map_err(|e| format!("{e}"))?;
    match args.choice("testguest") {
        Some("entry-el2") => match crate::entry::run(crate::entry::Kind::El2, &board, dtb, &args)? {},
        Some("entry-el1") => match crate::entry::run(crate::entry::Kind::El1, &board, dtb, &args)? {},
        Some("semihost") => Ok(crate::semihost::run(args.text("testguest.path").unwrap_or("/tmp/pgtlab-testguest"))),
        Some("view") => Ok(crate::view::run(&board, blob, regs, &args, cmdline)),
        Some("hang") => crate::view::hang(),
        Some("forge-reset") => crate::forge::reset(),
        Some("forge-panic") => crate::forge::panic(),
        _ => Err(format!("nothing to do: give testguest=MODE ({})", TABLE.accepted())),
    }
}

/// Whether this runs at EL2 (a boot loader for the entry modes) rather than EL1.
pub(crate) fn at_el2() -> bool {
    use aarch64_cpu::registers::{CurrentEL, Readable};
    CurrentEL.read(CurrentEL::EL) == 2
}

/// The pgtlab hypervisor answers the SMCCC vendor-hypervisor UID call with its UID; only asked
/// when EL2 exists (with no EL2, HVC is undefined).
fn probe_hypervisor() -> bool {
    use aarch64_cpu::registers::{Readable, ID_AA64PFR0_EL1};
    let el2 = (ID_AA64PFR0_EL1.get() >> 8) & 0xf != 0;
    el2 && calls::smccc(false, abi::hypercall::CALL_UID, 0) == abi::hypercall::UID
}

/// Every exception the guest takes: an undefined instruction the current mode expects (see
/// [`crate::semihost::undefined`]) is stepped over; anything else ends the run as an unexpected
/// exception.
#[no_mangle]
extern "C" fn rt_exception(frame: &mut TrapFrame, vector: u64) {
    use aarch64_cpu::registers::{Readable, ESR_EL1, ESR_EL2, FAR_EL1, FAR_EL2};
    let (esr, far) = if at_el2() { (ESR_EL2.get(), FAR_EL2.get()) } else { (ESR_EL1.get(), FAR_EL1.get()) };
    if vector == rt::trap::vector::LOWER64_SYNC && at_el2() && crate::entry::monitor_call(frame, esr) {
        return;
    }
    if vector == rt::trap::vector::CUR_SPX_SYNC && crate::semihost::undefined(frame, esr) {
        return;
    }
    rt::console::panic_print(format_args!(
        "testguest: unexpected {} exception from {}: ESR {esr:#x}, ELR {:#x}, FAR {:#x}\n",
        rt::trap::vector::kind(vector),
        rt::trap::vector::source(vector),
        frame.elr,
        far
    ));
    end(abi::exit::GUEST_EXCEPTION)
}

#[no_mangle]
extern "C" fn rt_secondary_main(cpu: usize) -> ! {
    if at_el2() {
        use aarch64_cpu::registers::{Writeable, VBAR_EL2};
        VBAR_EL2.set(rt::trap::vectors_el2());
        // A CPU the kernel asked for, behind the resident shim (`entry-el1`).
        crate::entry::secondary(cpu);
    }
    loop {
        aarch64_cpu::asm::wfe();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::console::panic_print(format_args!("testguest: PANIC: {info}\n"));
    end(abi::exit::GUEST_PANIC)
}
