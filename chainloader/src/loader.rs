//! The loader itself: its entry point (`rt_main`), what it knows about the board (`Loader`),
//! the receive loop, checking and placing what it received, and the jump to the hypervisor.

use crate::receive::{Clock, Rx};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use board::{Board, Region};
use buddy_system_allocator::LockedHeap;
use chainboot::{Header, Layout, Request, Status};

/// Heap for the DTB copies (a DTB is at most 2 MiB).
const HEAP_SIZE: usize = 8 << 20;
/// Room the new DTB may take beyond the firmware's and the boot arguments.
const DTB_SLACK: u64 = 16 << 10;

#[repr(C, align(4096))]
struct HeapSpace([u8; HEAP_SIZE]);
static mut HEAP_SPACE: HeapSpace = HeapSpace([0; HEAP_SIZE]);

#[global_allocator]
static HEAP: LockedHeap<32> = LockedHeap::empty();

fn current_el() -> u64 {
    use aarch64_cpu::registers::{CurrentEL, Readable};
    CurrentEL.read(CurrentEL::EL)
}

#[no_mangle]
extern "C" fn rt_main(dtb: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL1, VBAR_EL2};
    // The entry code (`rt::start`) wrote SCTLR, HCR_EL2 / CPTR_EL2 or CPACR_EL1 and PSTATE; at
    // EL2 the loader relies on nothing else (it runs with the MMU off, reads the physical
    // counter, which EL2 never traps, and leaves EL2 to the hypervisor it starts), at EL1 on
    // EL1's entry values.
    if current_el() == 2 {
        VBAR_EL2.set(rt::trap::vectors_el2());
    } else {
        VBAR_EL1.set(rt::trap::vectors_el1());
        rt::entry::el1(&rt::features::Features::from_ids(&rt::features::IdRegs::read()));
    }
    // SAFETY: HEAP_SPACE is used only here, once, and handed to the allocator for good.
    unsafe { HEAP.lock().init(core::ptr::addr_of_mut!(HEAP_SPACE) as usize, HEAP_SIZE) };
    enable_icache();
    match setup(dtb) {
        Ok(loader) => loader.serve(),
        Err(e) => {
            rt::console::panic_print(format_args!("chainloader: {e}\n"));
            halt()
        }
    }
}

/// What the loader knows about the board.
struct Loader {
    host_dtb: Vec<u8>,
    board: Board,
    /// Memory nothing may be placed in: the loader, the DTB it was given, reserved memory.
    avoid: Vec<Region>,
    rx: Rx,
}

fn setup(dtb_addr: usize) -> Result<Loader, String> {
    if dtb_addr == 0 {
        // Without a DTB there is no UART address either: nothing can be said.
        halt();
    }
    // SAFETY: x0 points at the DTB (boot protocol), in RAM nothing else writes meanwhile.
    let host_dtb = unsafe { board::dtb_at(dtb_addr as *const u8) }
        .map_err(|e| format!("device tree at {dtb_addr:#x}: {e}"))?
        .to_vec();
    let board = Board::from_dtb(&host_dtb).map_err(|e| format!("device tree: {e}"))?;
    let uart = board.console.as_ref().ok_or(
        "the device tree names no UART this build drives (PL011, i.MX, Cadence, 16550) for /chosen/stdout-path",
    )?;
    // SAFETY: the DTB names this UART as the console; rt::console sends through it and `Rx`
    // only receives (both polled).
    let rx = unsafe {
        rt::console::init(uart.kind, uart.base as usize);
        Rx::new(uart.kind, uart.base as usize)
    };
    if let Some(p) = &board.console_problem {
        rt::println!("chainloader: warning: {p}: this console is {} ({}) instead", uart.path, uart.kind.name());
    }
    let l = rt::start::image_layout();
    let mut avoid = alloc::vec![
        Region::new(l.start as u64, (l.end - l.start) as u64),
        Region::new(dtb_addr as u64, host_dtb.len() as u64),
    ];
    avoid.extend(board.reserved_regions());
    // Where secondary CPUs may still spin (the Pi 4's page 0) until the hypervisor starts them.
    avoid.extend(board.spin_table_regions());
    avoid.extend(board.initrd);
    let rate = match uart.clock_frequency.and_then(|hz| rx.uart().line_rate(hz)) {
        Some(baud) => format!("{baud} baud as the firmware set it"),
        None if uart.kind == board::UartKind::Pl011 => String::from("line rate not programmed (emulated UART)"),
        None => format!("{}, line settings as the firmware left them", uart.kind.name()),
    };
    rt::println!(
        "chainloader: {} at EL{}, image [{:#x}, {:#x}), console {} ({rate})",
        board.model.as_deref().unwrap_or("unknown board"),
        current_el(),
        l.start,
        l.end,
        uart.path,
    );
    Ok(Loader { host_dtb, board, avoid, rx })
}

impl Loader {
    fn ram_mib(&self) -> u64 {
        self.board.memory.iter().map(|r| r.size).sum::<u64>() >> 20
    }

    /// Waits for transfers until one boots.
    fn serve(mut self) -> ! {
        let clock = Clock::new();
        let ready = Status::Ready { version: chainboot::VERSION, ram_mib: self.ram_mib() };
        loop {
            rt::println!("{ready}");
            let header = self.rx.wait_for_header(&clock, ready);
            match self.transfer(&clock, header) {
                Ok((layout, dtb)) => boot(layout, dtb),
                Err(status_line) => rt::println!("{status_line}"),
            }
        }
    }

    /// One transfer after its header arrived; on failure, the line that says why.
    fn transfer(&mut self, clock: &Clock, header: [u8; chainboot::HEADER_LEN]) -> Result<(Layout, Region), String> {
        let refuse = |why: &dyn core::fmt::Display| format!("{}", Status::Refuse(&format!("{why}")));
        let h = Header::decode(&header).map_err(|e| refuse(&e))?;
        let req = Request {
            hyp_text_offset: h.hyp_text_offset.into(),
            hyp_image_size: h.hyp_image_size.into(),
            kernel_len: h.kernel_len.into(),
            dtb_len: self.host_dtb.len() as u64 + u64::from(h.args_len) + DTB_SLACK,
            staging_len: if h.compressed() { u64::from(h.hyp_wire_len) + u64::from(h.kernel_wire_len) } else { 0 },
        };
        let layout = chainboot::plan(&self.board.memory, &self.avoid, &req).map_err(|e| refuse(&e))?;
        rt::println!(
            "{}",
            Status::Accept { hypervisor: layout.hyp_region.base, kernel: layout.kernel.base, dtb: layout.dtb.base }
        );
        // Nothing the firmware cached may be written back over what arrives (the MMU is off, so
        // the loader's own writes go straight to memory).
        for r in [layout.hyp_region, layout.kernel, layout.dtb, layout.staging] {
            rt::cache::clean_invalidate_to_poc(r.base, r.size);
        }
        let total = h.payload_len();
        let mut args = alloc::vec![0u8; h.args_len as usize];
        // SAFETY: the plan put these ranges in RAM, apart from each other and clear of the loader,
        // its heap and stacks, the firmware's DTB and reserved memory; nothing else runs.
        let (hyp, kernel, staging) = unsafe {
            (
                core::slice::from_raw_parts_mut(layout.hyp_entry as *mut u8, h.hyp_len as usize),
                core::slice::from_raw_parts_mut(layout.kernel.base as *mut u8, h.kernel_len as usize),
                core::slice::from_raw_parts_mut(layout.staging.base as *mut u8, layout.staging.size as usize),
            )
        };
        let errors_before = self.rx.errors;
        let mut received = 0u64;
        {
            let (hyp_wire, kernel_wire): (&mut [u8], &mut [u8]) =
                if h.compressed() { staging.split_at_mut(h.hyp_wire_len as usize) } else { (&mut *hyp, &mut *kernel) };
            for buf in [&mut args[..], hyp_wire, kernel_wire] {
                if let Err(got) = self.rx.receive(clock, buf, &mut received) {
                    return Err(format!("{}", Status::Timeout { received: received + got as u64, total }));
                }
            }
        }
        let line_errors = match self.rx.errors - errors_before {
            0 => String::new(),
            n => format!(" ({n} bytes arrived with UART errors, overruns lose bytes: try a lower baud rate)"),
        };
        if h.compressed() {
            let (hyp_wire, kernel_wire) = staging.split_at(h.hyp_wire_len as usize);
            for (what, wire, out) in [("hypervisor", hyp_wire, &mut *hyp), ("kernel", kernel_wire, &mut *kernel)] {
                inflate(wire, out)
                    .map_err(|why| refuse(&format_args!("the {what} does not inflate: {why}{line_errors}")))?;
            }
        }
        for (what, data, want) in [
            ("boot arguments", &args[..], h.args_crc),
            ("hypervisor", &*hyp, h.hyp_crc),
            ("kernel", &*kernel, h.kernel_crc),
        ] {
            let got = chainboot::crc32(data);
            if got != want {
                return Err(refuse(&format_args!(
                    "checksum: the {what} arrived with CRC-32 {got:#010x}, the header says {want:#010x}; nothing was started{line_errors}"
                )));
            }
        }
        for (what, img) in [("hypervisor", &*hyp), ("kernel", &*kernel)] {
            let ih = rt::image::ImageHeader::parse(img).map_err(|e| refuse(&format_args!("the {what}: {e}")))?;
            if what == "hypervisor" && (ih.text_offset != req.hyp_text_offset || ih.image_size != req.hyp_image_size) {
                return Err(refuse(&"the hypervisor's Image header disagrees with the transfer header"));
            }
        }
        let args = core::str::from_utf8(&args).map_err(|_| refuse(&"the boot arguments are not UTF-8"))?;
        let spec = board::GuestSpec {
            memory: self.board.memory.clone(),
            bootargs: (!args.is_empty()).then(|| String::from(args)),
            initrd: Some(layout.kernel),
            ..Default::default()
        };
        let dtb = board::guest_dtb(&self.host_dtb, &spec).map_err(|e| refuse(&format_args!("new device tree: {e}")))?;
        if dtb.len() as u64 > layout.dtb.size {
            return Err(refuse(&format_args!("the new device tree ({} bytes) outgrew its room", dtb.len())));
        }
        // SAFETY: the plan reserved `layout.dtb.size` bytes there for it.
        unsafe { core::ptr::copy_nonoverlapping(dtb.as_ptr(), layout.dtb.base as *mut u8, dtb.len()) };
        Ok((layout, Region::new(layout.dtb.base, dtb.len() as u64)))
    }
}

/// Inflates a raw DEFLATE stream into exactly `out`.
fn inflate(wire: &[u8], out: &mut [u8]) -> Result<(), String> {
    match miniz_oxide::inflate::decompress_slice_iter_to_slice(out, core::iter::once(wire), false, true) {
        Ok(n) if n == out.len() => Ok(()),
        Ok(n) => Err(format!("{n} bytes instead of {}", out.len())),
        Err(e) => Err(format!("{e:?}")),
    }
}

/// Turns the instruction cache on (instruction fetches are cacheable with the MMU off when
/// SCTLR.I is set): the receive loop then runs from the cache.
fn enable_icache() {
    use aarch64_cpu::registers::{ReadWriteable, SCTLR_EL1, SCTLR_EL2};
    rt::cache::invalidate_icache_all();
    if current_el() == 2 {
        SCTLR_EL2.modify(SCTLR_EL2::I::Cacheable);
    } else {
        SCTLR_EL1.modify(SCTLR_EL1::I::Cacheable);
    }
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// Enters the hypervisor as a Linux arm64 Image: x0 = DTB, x1-x3 = 0, MMU off, DAIF masked,
/// at this exception level.
fn boot(layout: Layout, dtb: Region) -> ! {
    rt::println!("{}", Status::Boot { entry: layout.hyp_entry, dtb: dtb.base });
    rt::console::flush();
    // The new code was written through the data side (uncached): drop any stale instructions.
    rt::cache::invalidate_icache_all();
    // SAFETY: the hypervisor Image at `hyp_entry` passed its CRC and header checks and the DTB
    // was written for it; nothing of the loader is needed after the branch (the hypervisor
    // treats the loader's memory as guest RAM). Interrupts are masked so nothing runs in between.
    unsafe {
        core::arch::asm!(
            "msr daifset, #0xf",
            "isb",
            "mov x1, xzr",
            "mov x2, xzr",
            "mov x3, xzr",
            "br x4",
            in("x0") dtb.base,
            in("x4") layout.hyp_entry,
            options(noreturn),
        )
    }
}

fn halt() -> ! {
    loop {
        aarch64_cpu::asm::wfe();
    }
}

/// Only the boot CPU runs the loader.
#[no_mangle]
extern "C" fn rt_secondary_main(_cpu: usize) -> ! {
    halt()
}

#[no_mangle]
extern "C" fn rt_exception(frame: &mut rt::TrapFrame, vec: u64) {
    rt::console::panic_print(format_args!(
        "chainloader: unexpected {} exception from {} at ELR {:#x}\n",
        rt::trap::vector::kind(vec),
        rt::trap::vector::source(vec),
        frame.elr
    ));
    halt()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::console::panic_print(format_args!("chainloader: PANIC: {info}\n"));
    halt()
}
