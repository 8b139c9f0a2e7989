//! The project's test guest: a small bare-metal program that boots as a raw binary (no Image
//! magic: QEMU and the hypervisor load it at RAM base plus 0x80000) or as an arm64 Image (RAM
//! base plus 2 MiB), on plain QEMU or under the hypervisor, and checks the machine it was given,
//! the way third-party test suites set themselves up: its BSS and stacks follow its image, and
//! the DTB must lie above them. The xtask builds both forms (`target/images/testguest.{img,bin}`).
//!
//! Its command line (`/chosen/bootargs`) picks what it does:
//!
//! * `mode=view` (default): every check below, one `check` line each, a `testguest` record with
//!   what it found, then `testguest: N checks passed` or `testguest: FAILED …`;
//!   `mem=SIZE`, `smp=N`, `load=raw|image` say what it must find;
//! * `mode=hang`: fails a check on purpose, then waits for ever without a word (what a suite
//!   does after a failed assert), for the xtask's time-limit diagnostics.
//!
//! Checks (`view`): runs at EL1 with x1 = x2 = x3 = 0; the DTB at x0 parses and lies in RAM,
//! above the image, its BSS and stacks; an initramfs does not overlap either; the image sits
//! where QEMU loads its form; RAM is `mem=`; `smp=` CPUs; PSCI answers VERSION (>= 1.0, as the
//! DTB's `compatible` says) and FEATURES (the calls a guest needs supported, MIGRATE and an
//! unassigned id not); the generic timer has a frequency and counts; the DTB's GIC answers
//! with its architecture revision; `bootargs` is printed as found. The run ends as every run of
//! the project does: under the hypervisor with its exit hypercall (it prints the final line),
//! else with the final line `@@exit CODE (…)` and PSCI SYSTEM_OFF. No semihosting.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use board::{Board, GicVersion, PsciMethod};
use buddy_system_allocator::LockedHeap;

const HEAP_SIZE: usize = 1 << 20;

#[repr(C, align(4096))]
struct HeapSpace([u8; HEAP_SIZE]);
static mut HEAP_SPACE: HeapSpace = HeapSpace([0; HEAP_SIZE]);

#[global_allocator]
static HEAP: LockedHeap<32> = LockedHeap::empty();

/// The conduit the DTB names (set once the DTB is read).
static HVC: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(true);
/// Under this project's hypervisor (set once found).
static UNDER_HYP: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// One SMCCC call with `insn` (`hvc #0` or `smc #0`): x0-x3 in and out, x4-x17 clobbered.
macro_rules! smccc_call {
    ($insn:literal, $fid:expr, $a1:expr, $a2:expr, $a3:expr) => {{
        let (r0, r1, r2, r3);
        // SAFETY: an SMCCC call (x0-x17 may be clobbered, no memory of ours is touched).
        unsafe {
            core::arch::asm!($insn, inlateout("x0") $fid => r0, inlateout("x1") $a1 => r1,
                inlateout("x2") $a2 => r2, inlateout("x3") $a3 => r3, out("x4") _, out("x5") _,
                out("x6") _, out("x7") _, out("x8") _, out("x9") _, out("x10") _, out("x11") _,
                out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _, out("x17") _,
                options(nostack))
        }
        [r0, r1, r2, r3]
    }};
}

fn smccc(fid: u64, a1: u64, a2: u64, a3: u64) -> [u64; 4] {
    if HVC.load(core::sync::atomic::Ordering::Relaxed) {
        smccc_call!("hvc #0", fid, a1, a2, a3)
    } else {
        smccc_call!("smc #0", fid, a1, a2, a3)
    }
}

/// Ends the run with `status` (0: every check passed).
fn exit(status: u32) -> ! {
    if UNDER_HYP.load(core::sync::atomic::Ordering::Relaxed) {
        rt::console::flush();
        smccc(abi::hypercall::EXIT, u64::from(status), 0, 0);
    } else {
        rt::console::panic_print(format_args!("{}\n", abi::exit::FinalLine(status)));
        rt::console::flush();
        smccc(abi::psci::SYSTEM_OFF, 0, 0, 0);
    }
    loop {
        aarch64_cpu::asm::wfe();
    }
}

/// The checks of one run: each prints one line; the first failure is remembered.
struct Checks {
    passed: u32,
    failed: Option<String>,
}

impl Checks {
    fn check(&mut self, name: &str, ok: bool, detail: impl core::fmt::Display) {
        if ok {
            self.passed += 1;
            rt::println!("testguest: check {name}: ok ({detail})");
        } else {
            rt::println!("testguest: check {name}: FAILED: {detail}");
            self.failed.get_or_insert_with(|| format!("{name}: {detail}"));
        }
    }
}

/// A word `key=value` of the command line.
fn word<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline.split_ascii_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

#[no_mangle]
extern "C" fn rt_main(dtb: usize, x1: u64, x2: u64, x3: u64) -> ! {
    // SAFETY: HEAP_SPACE is handed to the allocator once, here, before anything allocates.
    unsafe { HEAP.lock().init(core::ptr::addr_of_mut!(HEAP_SPACE) as usize, HEAP_SIZE) };
    use aarch64_cpu::registers::{Readable, Writeable, VBAR_EL1};
    VBAR_EL1.set(rt::trap::vectors_el1());
    // SAFETY: x0 is the DTB by the boot protocol; only its 40-byte header is read before its
    // size is checked.
    let header = unsafe { core::slice::from_raw_parts(dtb as *const u8, 40) };
    let Ok(size) = board::dtb_total_size(header) else {
        loop {
            aarch64_cpu::asm::wfe()
        }
    };
    // SAFETY: the header says the blob is `size` bytes long.
    let blob = unsafe { core::slice::from_raw_parts(dtb as *const u8, size) };
    let Ok(b) = Board::from_dtb(blob) else {
        loop {
            aarch64_cpu::asm::wfe()
        }
    };
    if let Some(u) = &b.console {
        // SAFETY: the DTB's console PL011; nothing else drives it.
        unsafe { rt::console::init(u.base as usize) };
    }
    let method = b.psci.as_ref().map_or(PsciMethod::Hvc, |p| p.method);
    HVC.store(method == PsciMethod::Hvc, core::sync::atomic::Ordering::Relaxed);
    // The hypervisor answers its vendor UID (asked only where EL2 exists: else HVC is
    // undefined for anything but PSCI).
    let el2 = (aarch64_cpu::registers::ID_AA64PFR0_EL1.get() >> 8) & 0xf != 0;
    let under_hyp = el2 && smccc(abi::hypercall::CALL_UID, 0, 0, 0) == abi::hypercall::UID;
    UNDER_HYP.store(under_hyp, core::sync::atomic::Ordering::Relaxed);
    let cmdline = b.bootargs.clone().unwrap_or_default();
    rt::println!(
        "testguest: at {:#x}, DTB {dtb:#x} ({size} bytes), {}, command line {cmdline:?}",
        rt::start::image_layout().start,
        if under_hyp { "under the pgtlab hypervisor" } else { "no hypervisor" }
    );
    let mut c = Checks { passed: 0, failed: None };
    match word(&cmdline, "mode").unwrap_or("view") {
        "view" => view(&mut c, &b, dtb as u64, size as u64, [x1, x2, x3], &cmdline),
        "hang" => {
            c.check("hang", false, "this mode fails on purpose, then waits without a word");
            loop {
                aarch64_cpu::asm::wfe();
            }
        }
        other => c.check("mode", false, format!("unknown mode {other:?} (view, hang)")),
    }
    match c.failed {
        None => {
            rt::println!("testguest: {} checks passed", c.passed);
            exit(0)
        }
        Some(f) => {
            rt::println!("testguest: FAILED: {f}");
            exit(1)
        }
    }
}

fn view(c: &mut Checks, b: &Board, dtb: u64, size: u64, regs: [u64; 3], cmdline: &str) {
    use aarch64_cpu::registers::{CurrentEL, Readable, CNTFRQ_EL0, CNTVCT_EL0};
    let el = CurrentEL.read(CurrentEL::EL);
    c.check("el", el == 1, format!("EL{el}"));
    c.check("boot-registers", regs == [0, 0, 0], format!("x1 {:#x}, x2 {:#x}, x3 {:#x}", regs[0], regs[1], regs[2]));

    // Where things are.
    let layout = rt::start::image_layout();
    let (start, end) = (layout.start as u64, layout.end as u64);
    let ram: Vec<(u64, u64)> = b.memory.iter().map(|r| (r.base, r.end())).collect();
    let in_ram = |a: u64, n: u64| ram.iter().any(|&(s, e)| a >= s && a.saturating_add(n) <= e);
    c.check("dtb-in-ram", in_ram(dtb, size), format!("DTB [{dtb:#x}, {:#x})", dtb + size));
    c.check("dtb-above-image", dtb >= end, format!("DTB at {dtb:#x}, image, BSS and stacks [{start:#x}, {end:#x})"));
    if let Some(i) = b.initrd {
        let clear = i.base >= end && (i.end() <= dtb || i.base >= dtb + size) && in_ram(i.base, i.size);
        c.check("initrd-clear", clear, format!("initramfs [{:#x}, {:#x})", i.base, i.end()));
    }
    let base = ram.first().map_or(0, |r| r.0);
    if let Some(load) = word(cmdline, "load") {
        let want = if load == "raw" { base + 0x8_0000 } else { base + 0x20_0000 };
        c.check("load-address", start == want, format!("{load} form at {start:#x}, QEMU puts it at {want:#x}"));
    }
    let mem: u64 = b.memory.iter().map(|r| r.size).sum();
    match word(cmdline, "mem").map(bootargs::parse_size) {
        Some(Ok(want)) => c.check("ram-size", mem == want, format!("{} MiB of RAM, mem={} MiB", mem >> 20, want >> 20)),
        Some(Err(e)) => c.check("ram-size", false, format!("mem=: {e}")),
        None => {}
    }
    if let Some(n) = word(cmdline, "smp").and_then(|n| n.parse::<usize>().ok()) {
        c.check("cpus", b.cpus.len() == n, format!("{} CPUs in the DTB, smp={n}", b.cpus.len()));
    }

    // PSCI.
    let psci = b.psci.as_ref();
    let version = smccc(abi::psci::VERSION, 0, 0, 0)[0] as u32;
    let (major, minor) = (version >> 16, version & 0xffff);
    let claims_1_0 = psci.is_some_and(|p| p.compatible.iter().any(|s| s == "arm,psci-1.0"));
    c.check(
        "psci-version",
        version != u32::MAX && major >= 1 && claims_1_0,
        format!("PSCI {major}.{minor} over {}", psci.map_or("?", |p| p.method.as_str())),
    );
    let feature = |fid: u64| smccc(abi::psci::FEATURES, fid, 0, 0)[0] as i64 as i32;
    use abi::psci as p;
    let needed =
        [p::VERSION, p::CPU_ON_64, p::CPU_OFF, p::AFFINITY_INFO_64, p::SYSTEM_OFF, p::SYSTEM_RESET, p::FEATURES];
    let missing: Vec<String> = needed.iter().filter(|&&f| feature(f) != 0).map(|f| format!("{f:#x}")).collect();
    c.check("psci-features", missing.is_empty(), format!("needed calls supported; not: {missing:?}"));
    let refused = [p::MIGRATE_64, 0x8400_001f].iter().all(|&f| feature(f) == p::NOT_SUPPORTED as i32);
    c.check("psci-features-refused", refused, "MIGRATE and an unassigned id: NOT_SUPPORTED");
    let features: Vec<String> = [p::CPU_SUSPEND_64, p::MIGRATE_INFO_TYPE, p::SYSTEM_SUSPEND_64, p::SYSTEM_RESET2_64]
        .iter()
        .map(|&f| format!("{f:#x}:{}", feature(f)))
        .collect();

    // The generic timer.
    let freq = CNTFRQ_EL0.get();
    let t0 = CNTVCT_EL0.get();
    let mut spins = 0u64;
    while CNTVCT_EL0.get() == t0 && spins < 100_000_000 {
        spins += 1;
    }
    let timer = b.timer.as_ref();
    c.check(
        "timer",
        freq != 0 && CNTVCT_EL0.get() != t0 && timer.is_some_and(|t| t.virt.is_some()),
        format!("CNTFRQ {freq} Hz, counting, DTB timer {}", timer.map_or("absent", |t| t.path.as_str())),
    );

    // The interrupt controller.
    let gic = b.gic.as_ref();
    let (gic_version, arch) = match gic {
        Some(g) => {
            // GICD_PIDR2 (offset 0xffe8 on GICv3, 0xfe8 on GICv2): bits 7:4 the architecture revision.
            let off = if g.version == GicVersion::V3 { 0xffe8 } else { 0xfe8 };
            // SAFETY: the distributor's registers, a device region of the guest's (the DTB
            // names it; QEMU and the hypervisor map it); a 32-bit read has no side effect.
            let pidr2 = unsafe { core::ptr::read_volatile((g.distributor.base + off) as *const u32) };
            (if g.version == GicVersion::V3 { 3 } else { 2 }, (pidr2 >> 4) & 0xf)
        }
        None => (0, 0),
    };
    c.check(
        "gic",
        gic_version != 0 && arch == gic_version,
        format!("DTB GICv{gic_version}, distributor ArchRev {arch}"),
    );
    c.check("bootargs", !cmdline.is_empty(), format!("{cmdline:?}"));

    let mut r = abi::report::Record::new("testguest");
    r.hex("image", start)
        .hex("image_end", end)
        .hex("dtb", dtb)
        .u64("dtb_bytes", size)
        .hex("initrd", b.initrd.map_or(0, |i| i.base))
        .u64("mem_bytes", mem)
        .u64("cpus", b.cpus.len() as u64)
        .str("psci_version", &format!("{major}.{minor}"))
        .str("psci_method", psci.map_or("", |p| p.method.as_str()))
        .str("psci_features", &features.join(","))
        .u64("cntfrq", freq)
        .u64("gic", u64::from(gic_version))
        .str("bootargs", cmdline)
        .bool("hypervisor", UNDER_HYP.load(core::sync::atomic::Ordering::Relaxed));
    rt::println!("{r}");
}

/// Any exception is a failed run: report it and end.
#[no_mangle]
extern "C" fn rt_exception(frame: &mut rt::TrapFrame, vector: u64) {
    use aarch64_cpu::registers::{Readable, ESR_EL1, FAR_EL1};
    rt::console::panic_print(format_args!(
        "testguest: FAILED: unexpected {} exception ({}) at {:#x}: ESR {:#x} FAR {:#x}\n",
        rt::trap::vector::kind(vector),
        rt::trap::vector::source(vector),
        frame.elr,
        ESR_EL1.get(),
        FAR_EL1.get()
    ));
    exit(3)
}

/// Secondary CPUs are never started.
#[no_mangle]
extern "C" fn rt_secondary_main(_cpu: usize) -> ! {
    loop {
        aarch64_cpu::asm::wfe();
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    rt::console::panic_print(format_args!("testguest: PANIC: {info}\n"));
    exit(2)
}
