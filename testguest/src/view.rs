//! `testguest=view`: what a guest sees, checked from the inside, the way third-party test
//! suites set themselves up (BSS and stacks after the image, the DTB expected above them). One
//! `testguest: check NAME: ok (…)` or `FAILED: …` line per check, a `testguest_view` record of
//! what it found (`tests/tests/testguest.rs` holds the record equal on plain QEMU and under the
//! hypervisor), then `testguest: N checks passed` or `testguest: FAILED: …` (a guest failure).
//!
//! Checks: EL1 with x1 = x2 = x3 = 0 (the boot protocol); the DTB at x0 lies in RAM, above the
//! image, its BSS and stacks; an initramfs lies clear of both; the image sits where QEMU loads its
//! form (`testguest.load=raw|image`: RAM base + 0x80000 or + 2 MiB); RAM is `testguest.mem`;
//! `testguest.smp` CPUs; PSCI VERSION is 1.x as the DTB's `compatible` claims and FEATURES says
//! the calls a guest needs are there and MIGRATE and an unassigned id are not; the generic timer
//! has a frequency, counts, and the DTB names its virtual timer; the DTB's GIC answers with its
//! architecture revision (GICD_PIDR2); the command line is there.
//!
//! `testguest=hang` fails a check on purpose and then waits without a word, as a suite does after
//! a failed assert: the xtask's time-limit verdict must still say where it stopped.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use board::{Board, GicVersion};

/// The checks of one run: each prints one line; the first failure is kept.
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

/// A PSCI call through the DTB's conduit; returns x0.
fn psci(fid: u64, a1: u64) -> u64 {
    crate::calls::smccc(crate::calls::PSCI.load(core::sync::atomic::Ordering::Relaxed) == 2, fid, a1)[0]
}

/// `testguest=hang`.
pub fn hang() -> ! {
    rt::println!("testguest: check hang: FAILED: this mode fails on purpose, then waits without a word");
    loop {
        aarch64_cpu::asm::wfe();
    }
}

/// `testguest=view`: the checks; returns the run's exit status.
pub fn run(b: &Board, blob: &[u8], regs: [u64; 3], args: &bootargs::Args, cmdline: &str) -> u32 {
    use aarch64_cpu::registers::{CurrentEL, Readable, CNTFRQ_EL0, CNTVCT_EL0};
    let mut c = Checks { passed: 0, failed: None };
    let el = CurrentEL.read(CurrentEL::EL);
    c.check("el", el == 1, format!("EL{el}"));
    c.check("boot-registers", regs == [0, 0, 0], format!("x1 {:#x}, x2 {:#x}, x3 {:#x}", regs[0], regs[1], regs[2]));

    // Where things are.
    let (dtb, size) = (blob.as_ptr() as u64, blob.len() as u64);
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
    if let Some(load) = args.choice("testguest.load") {
        let want = if load == "raw" { base + 0x8_0000 } else { base + 0x20_0000 };
        c.check("load-address", start == want, format!("{load} form at {start:#x}, QEMU puts it at {want:#x}"));
    }
    let mem: u64 = b.memory.iter().map(|r| r.size).sum();
    if let Some(want) = args.size("testguest.mem") {
        c.check("ram-size", mem == want, format!("{} MiB of RAM, testguest.mem {} MiB", mem >> 20, want >> 20));
    }
    if let Some(n) = args.uint("testguest.smp") {
        c.check("cpus", b.cpus.len() as u64 == n, format!("{} CPUs in the DTB, testguest.smp {n}", b.cpus.len()));
    }

    // RAM nobody loaded reads as zero, as QEMU's fresh RAM does: no leftover of what the
    // hypervisor copied or moved (its own first image, the bundle) and no unzeroed BSS. One word
    // at each end of every page outside the image, the DTB, the initramfs, reserved memory and
    // QEMU's boot stub.
    let mut kept: Vec<(u64, u64)> = alloc::vec![(start, end), (dtb, dtb + size)];
    kept.extend(b.initrd.iter().map(|i| (i.base, i.end())));
    // QEMU's own boot stub (its `bootloader_aarch64`, under 256 bytes) lies at the start of RAM.
    kept.extend(ram.first().map(|&(s, _)| (s, s + 0x1000)));
    kept.extend(b.mem_reserve.iter().map(|r| (r.base, r.end())));
    kept.extend(b.reserved_memory.iter().flat_map(|m| m.regions.iter().map(|r| (r.base, r.end()))));
    let (mut dirty, mut first_dirty) = (0u64, None);
    for &(s, e) in &ram {
        let mut page = s.next_multiple_of(0x1000);
        while page + 0x1000 <= e {
            if !kept.iter().any(|&(ks, ke)| page < ke && ks < page + 0x1000) {
                // SAFETY: a whole page of the guest's RAM (the DTB's memory node) that nothing
                // of the guest's lies in: an aligned read of RAM has no side effect.
                let (head, tail) = unsafe {
                    (
                        core::ptr::read_volatile(page as *const u64),
                        core::ptr::read_volatile((page + 0xff8) as *const u64),
                    )
                };
                if head | tail != 0 {
                    dirty += 1;
                    first_dirty.get_or_insert(page);
                }
            }
            page += 0x1000;
        }
    }
    c.check(
        "ram-zero",
        dirty == 0,
        format_args!("{dirty} pages outside what was loaded are not zero (first at {:#x})", first_dirty.unwrap_or(0)),
    );

    // PSCI.
    use abi::psci as p;
    let p_node = b.psci.as_ref();
    let version = psci(p::VERSION, 0) as u32;
    let (major, minor) = (version >> 16, version & 0xffff);
    let claims_1_0 = p_node.is_some_and(|n| n.compatible.iter().any(|s| s == "arm,psci-1.0"));
    c.check(
        "psci-version",
        version != u32::MAX && major >= 1 && claims_1_0,
        format!("PSCI {major}.{minor} over {}", p_node.map_or("?", |n| n.method.as_str())),
    );
    let feature = |fid: u64| psci(p::FEATURES, fid) as i64 as i32;
    let needed =
        [p::VERSION, p::CPU_ON_64, p::CPU_OFF, p::AFFINITY_INFO_64, p::SYSTEM_OFF, p::SYSTEM_RESET, p::FEATURES];
    let missing: Vec<String> = needed.iter().filter(|&&f| feature(f) != 0).map(|f| format!("{f:#x}")).collect();
    c.check("psci-features", missing.is_empty(), format!("the calls a guest needs, missing: {missing:?}"));
    let refused = [p::MIGRATE_64, 0x8400_001f].iter().all(|&f| feature(f) == p::NOT_SUPPORTED as i32);
    c.check("psci-features-refused", refused, "MIGRATE and an unassigned id: NOT_SUPPORTED");
    let features: Vec<String> = [p::CPU_SUSPEND_64, p::MIGRATE_INFO_TYPE, p::SYSTEM_SUSPEND_64, p::SYSTEM_RESET2_64]
        .iter()
        .map(|&f| format!("{f:#x}:{}", feature(f)))
        .collect();

    // The generic timer: a frequency, a counter that moves, the DTB's node.
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

    // The interrupt controller: GICD_PIDR2 (0xffe8 on GICv3, 0xfe8 on GICv2), bits 7:4 the
    // architecture revision.
    let (gic, arch) = match b.gic.as_ref() {
        Some(g) => {
            let off = if g.version == GicVersion::V3 { 0xffe8 } else { 0xfe8 };
            // SAFETY: the distributor's registers, a device region the DTB gives the guest; a
            // 32-bit read of an ID register has no side effect.
            let pidr2 = unsafe { core::ptr::read_volatile((g.distributor.base + off) as *const u32) };
            (if g.version == GicVersion::V3 { 3 } else { 2 }, (pidr2 >> 4) & 0xf)
        }
        None => (0, 0),
    };
    c.check("gic", gic != 0 && arch == gic, format!("DTB GICv{gic}, distributor ArchRev {arch}"));
    c.check("bootargs", !cmdline.is_empty(), format!("{cmdline:?}"));

    let mut r = abi::report::Record::new("testguest_view");
    r.hex("image", start)
        .hex("image_end", end)
        .hex("dtb", dtb)
        .u64("dtb_bytes", size)
        .hex("initrd", b.initrd.map_or(0, |i| i.base))
        .u64("mem_bytes", mem)
        .u64("cpus", b.cpus.len() as u64)
        .str("psci_version", &format!("{major}.{minor}"))
        .str("psci_method", p_node.map_or("", |n| n.method.as_str()))
        .str("psci_features", &features.join(","))
        .u64("cntfrq", freq)
        .u64("gic", u64::from(gic))
        .str("bootargs", cmdline);
    rt::println!("{r}");
    match c.failed {
        None => {
            rt::println!("testguest: {} checks passed", c.passed);
            abi::exit::SUCCESS
        }
        Some(f) => {
            rt::println!("testguest: FAILED: {f}");
            abi::exit::GUEST_FAILURE
        }
    }
}
