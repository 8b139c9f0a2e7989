//! The real Raspberry Pi 5 device tree (`broadcom/bcm2712-rpi-5-b.dtb` of Debian's backports
//! arm64 kernel, fetched once with this machine's apt sources by `xtask::provision::debian` and cached in
//! `target/downloads`), and the guest DTB the hypervisor writes from it.
//!
//! **This test needs that download once.** Without network and without the cached file it
//! fails and says so; `PGTLAB_OFFLINE=1` turns the failure into an explicit skip.

use board::{guest_dtb, Board, EnableMethod, GicVersion, GuestSpec, PsciMethod, PsciVersion, Region, Status};
use hypcore::plan::{MemoryPlan, PlanInput};
use hypcore::Range;
use std::sync::{Mutex, OnceLock};

/// The DTB, or `None` when skipped (PGTLAB_OFFLINE=1 and nothing cached).
fn pi5_dtb() -> Option<Vec<u8>> {
    // One fetch for all tests of this file (they run in parallel).
    static FETCH: OnceLock<Mutex<Option<Vec<u8>>>> = OnceLock::new();
    let m = FETCH.get_or_init(|| {
        Mutex::new(match xtask::provision::debian::pi5_dtb() {
            Ok(p) => Some(std::fs::read(p).expect("reading the cached DTB")),
            Err(e) if std::env::var_os("PGTLAB_OFFLINE").is_some() => {
                eprintln!("SKIPPED (PGTLAB_OFFLINE is set): the Pi 5 DTB is not cached and cannot be fetched: {e:#}");
                None
            }
            Err(e) => panic!(
                "cannot fetch the Raspberry Pi 5 DTB from Debian's backports arm64 kernel with this machine's apt \
                 sources: {e:#}\nThis test needs that download once (cached in target/downloads); set \
                 PGTLAB_OFFLINE=1 to skip it explicitly."
            ),
        })
    });
    m.lock().unwrap().clone()
}

#[test]
fn raspberry_pi_5_device_tree() {
    let Some(dtb) = pi5_dtb() else { return };
    let b = Board::from_dtb(&dtb).unwrap_or_else(|e| panic!("Pi 5 DTB: {e}"));
    assert_eq!(b.model.as_deref(), Some("Raspberry Pi 5"));
    assert_eq!(b.compatible, ["raspberrypi,5-model-b", "brcm,bcm2712"]);

    // The debug UART (uart10), found through stdout-path's alias and the soc bus's ranges, with
    // the fixed clock its `uartclk` names: at 9.216 MHz the PL011 reaches 576000 baud at most.
    assert_eq!(b.stdout_path.as_deref(), Some("serial10:115200n8"));
    let uart = b.console.as_ref().unwrap();
    assert_eq!(uart.path, "/soc@107c000000/serial@7d001000");
    assert_eq!((uart.base, uart.size), (0x10_7d00_1000, 0x200));
    assert_eq!(uart.options.as_deref(), Some("115200n8"));
    assert!(uart.from_stdout_path);
    assert_eq!(uart.clock_frequency, Some(9_216_000));

    // GIC-400: distributor, CPU interface, and the virtualization interfaces the hypervisor
    // keeps for itself (GICH, GICV).
    let gic = b.gic.as_ref().unwrap();
    assert_eq!((gic.version, gic.compatible.as_str()), (GicVersion::V2, "arm,gic-400"));
    assert_eq!(gic.path, "/soc@107c000000/interrupt-controller@7fff9000");
    assert_eq!(gic.distributor, Region::new(0x10_7fff_9000, 0x1000));
    assert_eq!(gic.cpu_interface, Some(Region::new(0x10_7fff_a000, 0x2000)));
    assert_eq!(gic.hyp_interface, Some(Region::new(0x10_7fff_c000, 0x2000)));
    assert_eq!(gic.vcpu_interface, Some(Region::new(0x10_7fff_e000, 0x2000)));
    assert!(gic.redistributors.is_empty());

    // PSCI through SMC to TF-A.
    // The four per-CPU timers as PPIs 13, 14, 11, 10 (the kernel ticks with the virtual one).
    let timer = b.timer.as_ref().unwrap();
    assert_eq!((timer.secure_phys, timer.phys, timer.virt, timer.hyp_phys), (Some(29), Some(30), Some(27), Some(26)));

    let psci = b.psci.as_ref().unwrap();
    assert_eq!((psci.path.as_str(), psci.method, psci.version), ("/psci", PsciMethod::Smc, PsciVersion::V1_0));
    assert_eq!(psci.compatible, ["arm,psci-1.0", "arm,psci-0.2"]);
    assert_eq!(psci.function_ids, Default::default());

    // Four Cortex-A76, started with PSCI, the core number in Aff1.
    let mpidrs: Vec<u64> = b.cpus.iter().map(|c| c.mpidr).collect();
    assert_eq!(mpidrs, [0x000, 0x100, 0x200, 0x300]);
    let paths: Vec<&str> = b.cpus.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["/cpus/cpu@0", "/cpus/cpu@1", "/cpus/cpu@2", "/cpus/cpu@3"]);
    assert!(b.cpus.iter().all(|c| c.enable_method == Some(EnableMethod::Psci)));
    assert!(b.cpus.iter().all(|c| c.compatible.as_deref() == Some("arm,cortex-a76") && c.status == Status::Okay));
    assert_eq!(b.cpu_by_mpidr(0x200).map(|c| c.path.as_str()), Some("/cpus/cpu@2"));
    assert!(b.cpu_by_mpidr(2).is_none(), "Aff0 numbering is not the Pi 5's");
    assert_eq!(b.boot_cpuid_phys, 0);

    // Memory: the kernel package's tree has a placeholder the firmware replaces; TF-A's first
    // 512 KiB are reserved no-map; the CMA pool is placed at run time (no static region).
    assert_eq!(b.memory, [Region::new(0, 0x2800_0000)]);
    assert!(b.mem_reserve.is_empty());
    assert_eq!(b.reserved_memory.len(), 2);
    let atf = &b.reserved_memory[0];
    assert_eq!((atf.path.as_str(), atf.no_map, atf.reusable), ("/reserved-memory/atf@0", true, false));
    assert_eq!(atf.regions, [Region::new(0, 0x8_0000)]);
    let cma = &b.reserved_memory[1];
    assert_eq!(cma.path, "/reserved-memory/linux,cma");
    assert!(cma.reusable && !cma.no_map && cma.regions.is_empty());
    assert_eq!(cma.compatible.as_deref(), Some("shared-dma-pool"));
    assert_eq!(b.no_map_regions().collect::<Vec<_>>(), [Region::new(0, 0x8_0000)]);
    assert_eq!(b.reserved_regions().collect::<Vec<_>>(), [Region::new(0, 0x8_0000)]);

    // The devices behind the soc bus (0x10_0000_0000 + offset).
    let mmc = b.device("/soc@107c000000/mmc@fff000").unwrap();
    assert_eq!(mmc.regions, [Region::new(0x10_00ff_f000, 0x260), Region::new(0x10_00ff_f400, 0x200)]);
    assert_eq!(b.device("/soc@107c000000/serial@7d001000").unwrap().status, Status::Okay);
    assert!(b.device("/soc@107c000000/timer@7c003000").is_some());
    assert!(b.device("/__symbols__").is_none());
    assert!(b.initrd.is_none() && b.bootargs.is_none(), "the firmware adds those");
}

/// What the Pi 5's firmware does to the tree before the hypervisor sees it: real memory (the
/// VideoCore's share cut out below 1 GiB), the initramfs (the guest kernel) loaded high, and the
/// command line from cmdline.txt.
fn as_the_firmware_hands_it(dtb: &[u8], gib: u64, kernel_len: u64) -> Vec<u8> {
    let mut memory = vec![Region::new(0, 0x3fc0_0000), Region::new(0x4000_0000, 0xc000_0000)];
    if gib == 8 {
        memory.push(Region::new(1 << 32, 1 << 32));
    }
    let spec = GuestSpec {
        memory,
        bootargs: Some("hyp.conduit=smc rodata=full".into()),
        initrd: Some(Region::new(0x2e00_0000, kernel_len)),
        ..Default::default()
    };
    guest_dtb(dtb, &spec).unwrap()
}

#[test]
fn guest_device_tree_the_hypervisor_writes_for_a_pi5() {
    let Some(dtb) = pi5_dtb() else { return };
    let hyp = std::fs::read(&tests::images().hypervisor).unwrap();
    let kernel_len = std::fs::metadata(&tests::images().kernel).unwrap().len();
    let image_size = abi::image::ImageHeader::parse(&hyp).unwrap().image_size;
    for gib in [4, 8] {
        let host_dtb = as_the_firmware_hands_it(&dtb, gib, kernel_len);
        let host = Board::from_dtb(&host_dtb).unwrap();
        // The firmware loads kernel_2712.img at kernel_address 0x200000.
        let image = Range::new(0x20_0000, 0x20_0000 + image_size);
        let input = PlanInput::from_board(&host, image, None, None);
        let plan = MemoryPlan::new(&input).unwrap_or_else(|e| panic!("{gib} GiB: {e}"));
        let spec = plan.guest_spec("rodata=full".into(), None);
        let g = Board::from_dtb(&guest_dtb(&host_dtb, &spec).unwrap()).unwrap();

        // RAM: everything but TF-A's 512 KiB and what the hypervisor keeps.
        let guest: Vec<Range> = g.memory.iter().map(|r| Range::new(r.base, r.end())).collect();
        assert_eq!(guest, plan.guest_ram, "{gib} GiB");
        assert_eq!(g.memory[0], Region::new(0x8_0000, 0x18_0000), "from TF-A's end to the hypervisor");
        assert_eq!(plan.hyp.start, 0x20_0000);
        let tfa = Range::new(0, 0x8_0000);
        for r in guest.iter().chain(plan.hypervisor_owned().iter()) {
            assert!(!r.overlaps(&tfa), "{r} covers TF-A's memory");
        }
        let total: u64 = host.memory.iter().map(|r| r.size).sum();
        assert_eq!(total, (gib << 30) - 0x40_0000);
        assert_eq!(Some(plan.frame_pool_bytes), hypcore::plan::frame_pool_size(total, None));
        assert_eq!(
            hypcore::range::total(&guest) + plan.kept_bytes() + 0x8_0000,
            total,
            "every byte is the guest's, the hypervisor's or TF-A's"
        );
        // The initrd (the guest kernel) stays guest RAM: the hypervisor copies it from there.
        let initrd = host.initrd.unwrap();
        assert!(guest.iter().any(|r| r.contains(initrd.base, initrd.size)));

        // The rest is the board's own: console, GIC, CPUs (Aff1), PSCI over SMC, TF-A's node.
        assert_eq!((&g.console, &g.gic, &g.cpus, &g.psci), (&host.console, &host.gic, &host.cpus, &host.psci));
        assert_eq!(g.psci.as_ref().unwrap().method, PsciMethod::Smc);
        assert_eq!(g.reserved_memory, host.reserved_memory, "TF-A's no-map node tells the guest what it lacks");
        assert_eq!(g.bootargs.as_deref(), Some("rodata=full"));
        assert!(g.initrd.is_none(), "the guest's kernel is loaded, not passed on");
        let out = guest_dtb(&host_dtb, &spec).unwrap();
        let symbols =
            fdt::Fdt::new(&out).unwrap().find_node("/__symbols__").and_then(|n| n.property("uart10")).is_some();
        assert!(symbols, "__symbols__ (for overlays) survives");
    }
}

/// The early scan the hypervisor moves itself by reads what the full parse reads, on every
/// board's own tree (and the Pi 5's as its firmware hands it over, with memory, initrd and
/// command line filled in).
#[test]
fn early_scan_reads_every_boards_tree_as_the_full_parse() {
    let Some(pi5) = pi5_dtb() else { return };
    let mut trees = vec![("pi5 as the firmware hands it".to_string(), as_the_firmware_hands_it(&pi5, 4, 0x0100_0000))];
    for f in xtask::provision::debian::KERNEL_PACKAGE_FILES.iter().filter(|f| f.ends_with(".dtb")) {
        let p = xtask::provision::debian::file_from_kernel_package(f).unwrap_or_else(|e| panic!("{f}: {e:#}"));
        trees.push((f.to_string(), std::fs::read(p).unwrap()));
    }
    for (what, dtb) in &trees {
        let full = Board::from_dtb(dtb).unwrap_or_else(|e| panic!("{what}: {e}")).mem_facts();
        let scan = board::MemFacts::scan(dtb).unwrap_or_else(|e| panic!("{what}: the early scan fails: {e}"));
        assert_eq!(scan, full, "{what}: the early scan and the full parse disagree");
    }
}
