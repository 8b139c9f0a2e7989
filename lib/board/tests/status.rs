//! Which nodes a board has: a node whose `status` is neither "okay" nor "ok" is not there
//! (memory, reserved memory, the GIC, PSCI, the timer, the PMU), a CPU is not there when it
//! failed (`"fail"`, `"fail-..."`) or is disabled with no way to start it; and the arithmetic of
//! what the header and `/reserved-memory` keep: page rounding outward, exclusive ends, each
//! node's own cells.

mod common;

use board::{guest_dtb, Board, BoardError, GuestSpec, PsciMethod, Region};
use common::{base_tree, cells, s, N};

const MIB: u64 = 1 << 20;

fn parse(t: &N) -> Board {
    Board::from_dtb(&t.dtb()).unwrap()
}

/// `status` values that say a device is not there, and the ones that say it is.
const ABSENT: [&str; 4] = ["disabled", "fail", "fail-sss", "reserved"];
const PRESENT: [Option<&str>; 3] = [None, Some("okay"), Some("ok")];

fn with_status(n: &mut N, st: Option<&str>) {
    match st {
        Some(v) => n.set("status", s(v)),
        None => n.unset("status"),
    };
}

#[test]
fn a_memory_node_that_is_not_okay_is_not_ram() {
    for st in ABSENT {
        let mut t = base_tree();
        t.kids.push(
            N::new("memory@80000000").p("device_type", s("memory")).p("reg", cells(&[0, 0x8000_0000, 0, 0x1000_0000])),
        );
        t.at("/memory@80000000").set("status", s(st));
        assert_eq!(parse(&t).memory, [Region::new(0x4000_0000, 0x2000_0000)], "status {st:?}");
    }
    for st in PRESENT {
        let mut t = base_tree();
        with_status(t.at("/memory@40000000"), st);
        assert_eq!(parse(&t).memory, [Region::new(0x4000_0000, 0x2000_0000)], "status {st:?}");
    }
}

fn reserved_tree(st: Option<&str>) -> N {
    let mut dsp = N::new("dsp@52400000").p("reg", cells(&[0, 0x5240_0000, 0, 2 * MIB as u32])).p("no-map", vec![]);
    with_status(&mut dsp, st);
    let mut t = base_tree();
    t.kids.push(
        N::new("reserved-memory")
            .p("#address-cells", cells(&[2]))
            .p("#size-cells", cells(&[2]))
            .p("ranges", vec![])
            .kid(dsp)
            .kid(N::new("fw@5f000000").p("reg", cells(&[0, 0x5f00_0000, 0, 0x1000]))),
    );
    t
}

/// The i.MX 8M Plus EVK's tree has a disabled `no-map` region of 32 MiB (`dsp@92400000`):
/// Linux gives it to the kernel as RAM.
#[test]
fn a_reserved_memory_region_that_is_not_okay_reserves_nothing() {
    for st in ABSENT {
        let b = parse(&reserved_tree(Some(st)));
        assert_eq!(b.reserved_regions().collect::<Vec<_>>(), [Region::new(0x5f00_0000, 0x1000)], "status {st:?}");
        assert_eq!(b.no_map_regions().count(), 0, "status {st:?}");
    }
    for st in PRESENT {
        let b = parse(&reserved_tree(st));
        assert_eq!(b.no_map_regions().collect::<Vec<_>>(), [Region::new(0x5240_0000, 2 * MIB)], "status {st:?}");
    }
}

#[test]
fn a_cpu_that_failed_is_not_there_and_a_disabled_one_is_when_it_can_be_started() {
    for st in ["fail", "fail-sss"] {
        let mut t = base_tree();
        t.at("/cpus/cpu@1").set("status", s(st));
        let b = parse(&t);
        assert_eq!(b.cpus.iter().map(|c| c.mpidr).collect::<Vec<_>>(), [0], "status {st:?}");
    }
    // "disabled": a CPU waiting to be started by its enable-method (the spec's quiescent CPU).
    let mut t = base_tree();
    t.at("/cpus/cpu@1").set("status", s("disabled"));
    assert_eq!(parse(&t).cpus.len(), 2);
    // Disabled with no way to start it: not there either.
    t.at("/cpus/cpu@1").unset("enable-method");
    assert_eq!(parse(&t).cpus.iter().map(|c| c.mpidr).collect::<Vec<_>>(), [0]);
    // Every CPU failed: no CPU at all is an error, as for a tree without one.
    let mut t = base_tree();
    t.at("/cpus/cpu@0").set("status", s("fail"));
    t.at("/cpus/cpu@1").set("status", s("fail"));
    assert!(matches!(Board::from_dtb(&t.dtb()), Err(BoardError::MissingNode { .. })));
}

#[test]
fn a_gic_psci_timer_or_pmu_node_that_is_not_okay_is_not_the_boards() {
    for st in ABSENT {
        let mut t = base_tree();
        // A disabled GICv2 first in the tree (the root names no interrupt parent).
        t.unset("interrupt-parent");
        t.kids.insert(
            0,
            N::new("intc@2c000000")
                .p("compatible", s("arm,gic-400"))
                .p("status", s(st))
                .p("reg", cells(&[0, 0x2c00_0000, 0, 0x1000, 0, 0x2c00_2000, 0, 0x2000])),
        );
        t.at("/psci").set("status", s(st));
        t.kids.push(N::new("timer").p("compatible", s("arm,armv8-timer")).p("status", s(st)));
        t.kids.push(N::new("pmu").p("compatible", s("arm,armv8-pmuv3")).p("status", s(st)));
        let b = parse(&t);
        assert_eq!(b.gic.as_ref().map(|g| g.path.as_str()), Some("/intc@8000000"), "status {st:?}");
        assert!(b.psci.is_none() && b.timer.is_none() && b.pmu.is_none(), "status {st:?}: {b:?}");
    }
    for st in PRESENT {
        let mut t = base_tree();
        with_status(t.at("/psci"), st);
        t.kids.push(N::new("pmu").p("compatible", s("arm,armv8-pmuv3")));
        with_status(t.at("/pmu"), st);
        let b = parse(&t);
        assert!(b.psci.is_some() && b.pmu.is_some(), "status {st:?}");
    }
}

/// A guest whose host tree has a disabled PSCI node gets the hypervisor's PSCI: the node it
/// keeps is rewritten and is no longer disabled.
#[test]
fn the_guest_gets_a_psci_it_can_use_when_the_hosts_is_disabled() {
    let mut t = base_tree();
    t.at("/psci").set("status", s("disabled"));
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, 64 * MIB)],
        psci_method: Some(PsciMethod::Smc),
        ..GuestSpec::default()
    };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &spec).unwrap()).unwrap();
    assert_eq!(g.psci.map(|p| p.method), Some(PsciMethod::Smc));
}

/// A spin-table CPU's release word in `/memreserve/` that is not page-aligned: the firmware
/// keeps whole pages, from the page of its first byte to the page of its last.
#[test]
fn spin_table_memory_is_rounded_out_to_whole_pages() {
    let mut t = base_tree();
    let cpu1 = t.at("/cpus/cpu@1");
    cpu1.set("enable-method", s("spin-table"));
    cpu1.set("cpu-release-addr", cells(&[0, 0x4000_0ff8]));
    let b = Board::from_dtb(&t.dtb_with_reserve(&[(0x4000_0f00, 0x200)])).unwrap();
    assert_eq!(b.spin_table_regions(), [Region::new(0x4000_0000, 0x2000)], "[0xf00, 0x1100) is two pages");
    // A release word just past a reservation is not in it: its own page.
    let b = Board::from_dtb(&t.dtb_with_reserve(&[(0x4000_0000, 0xff8)])).unwrap();
    assert_eq!(b.spin_table_regions(), [Region::new(0x4000_0000, 0x1000)]);
    t.at("/cpus/cpu@1").set("cpu-release-addr", cells(&[0, 0x4000_3000]));
    let b = Board::from_dtb(&t.dtb_with_reserve(&[(0x4000_2000, 0x1000)])).unwrap();
    assert_eq!(b.spin_table_regions(), [Region::new(0x4000_3000, 0x1000)], "the word at the reservation's end");
    let r = Region::new(0x1000, 0x1000);
    assert!(r.contains(0x1000) && r.contains(0x1fff) && !r.contains(0x2000) && !r.contains(0xfff));
}

#[test]
fn cpus_take_no_size_cells() {
    let mut t = base_tree();
    t.at("/cpus").set("#size-cells", cells(&[1]));
    for c in ["/cpus/cpu@0", "/cpus/cpu@1"] {
        let reg = t.at(c).props.iter().find(|(n, _)| n == "reg").unwrap().1.clone();
        t.at(c).set("reg", [reg, cells(&[0])].concat());
    }
    assert!(matches!(Board::from_dtb(&t.dtb()), Err(BoardError::BadProperty { prop: "#size-cells", .. })));
}

/// QEMU 7.2 writes the initrd's addresses in one cell; an initrd that ends above 4 GiB needs
/// two, even when it starts below.
#[test]
fn an_initrd_crossing_4g_gets_two_cells_from_a_one_cell_host() {
    let mut t = base_tree();
    t.at("/chosen").set("linux,initrd-start", cells(&[0x4800_0000])).set("linux,initrd-end", cells(&[0x4810_0000]));
    let initrd = Region::new(0xffff_f000, 0x2000);
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, 0x1_0000_0000)],
        initrd: Some(initrd),
        ..GuestSpec::default()
    };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &spec).unwrap()).unwrap();
    assert_eq!(g.initrd, Some(initrd));
    let below = Region::new(0xffff_e000, 0x2000);
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &GuestSpec { initrd: Some(below), ..spec }).unwrap()).unwrap();
    assert_eq!(g.initrd, Some(below), "ends on the last byte below 4 GiB: one cell is enough");
}

/// A one-cell root: a region whose size is exactly the largest one cell holds still fits.
#[test]
fn one_cell_values_up_to_their_largest_fit() {
    let mut t = base_tree();
    t.set("#address-cells", cells(&[1])).set("#size-cells", cells(&[1]));
    t.at("/memory@40000000").set("reg", cells(&[0x4000_0000, 0x1000_0000]));
    for path in ["/uart@9000000", "/intc@8000000"] {
        let reg = t.at(path).props.iter().find(|(n, _)| n == "reg").unwrap().1.clone();
        let one: Vec<u8> = reg.chunks(8).flat_map(|c| c[4..].to_vec()).collect();
        t.at(path).set("reg", one);
    }
    let spec = GuestSpec { memory: vec![Region::new(0, 0xffff_ffff)], ..GuestSpec::default() };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &spec).unwrap()).unwrap();
    assert_eq!(g.memory, [Region::new(0, 0xffff_ffff)]);
    let spec = GuestSpec { memory: vec![Region::new(0, 0x1_0000_0000)], ..spec };
    assert!(matches!(guest_dtb(&t.dtb(), &spec), Err(BoardError::BadGuestSpec { .. })));
}

/// The guest's reserved regions are written in the cells of the `/reserved-memory` node they
/// go under, which need not be the root's.
#[test]
fn guest_reserved_regions_use_their_parents_cells() {
    let mut t = base_tree();
    t.kids.push(
        N::new("reserved-memory")
            .p("#address-cells", cells(&[1]))
            .p("#size-cells", cells(&[1]))
            .p("ranges", vec![])
            .kid(N::new("fw@5f000000").p("reg", cells(&[0x5f00_0000, 0x1000]))),
    );
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, 0x2000_0000)],
        reserved: vec![Region::new(0x4f00_0000, MIB)],
        ..GuestSpec::default()
    };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &spec).unwrap()).unwrap();
    let regions: Vec<Region> = g.reserved_regions().collect();
    assert_eq!(regions, [Region::new(0x5f00_0000, 0x1000), Region::new(0x4f00_0000, MIB)]);
}

/// `/memreserve/` entries go to the guest when they overlap any of its RAM ranges.
#[test]
fn memreserve_entries_in_any_guest_range_are_kept() {
    let t = base_tree();
    let host = t.dtb_with_reserve(&[(0x4000_0000, 0x1000), (0x5800_0000, 0x1000), (0x7000_0000, 0x1000)]);
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, 0x1000_0000), Region::new(0x5000_0000, 0x1000_0000)],
        ..GuestSpec::default()
    };
    let g = Board::from_dtb(&guest_dtb(&host, &spec).unwrap()).unwrap();
    assert_eq!(g.mem_reserve, [Region::new(0x4000_0000, 0x1000), Region::new(0x5800_0000, 0x1000)]);
}

/// A machine without EL2 keeps a GICv3's legacy CPU interface (GICC) and loses GICH/GICV.
#[test]
fn hiding_el2_keeps_a_gicv3s_cpu_interface() {
    let mut t = base_tree();
    t.at("/intc@8000000").set(
        "reg",
        cells(&[
            0,
            0x0800_0000,
            0,
            0x10000,
            0,
            0x080a_0000,
            0,
            0xf6_0000,
            0,
            0x0801_0000,
            0,
            0x2000,
            0,
            0x0803_0000,
            0,
            0x2000,
            0,
            0x0804_0000,
            0,
            0x2000,
        ]),
    );
    let host = parse(&t);
    let gic = host.gic.as_ref().unwrap();
    assert!(gic.cpu_interface.is_some() && gic.hyp_interface.is_some() && gic.vcpu_interface.is_some());
    let spec = GuestSpec { memory: vec![Region::new(0x4000_0000, 64 * MIB)], hide_el2: true, ..GuestSpec::default() };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &spec).unwrap()).unwrap();
    let gg = g.gic.unwrap();
    assert_eq!((gg.cpu_interface, gg.hyp_interface, gg.vcpu_interface), (gic.cpu_interface, None, None));
    assert_eq!(gg.redistributors, gic.redistributors);
}

/// Both cell counts are required of a bus (this parser takes no defaults): a node without
/// `#size-cells` is an error naming it, not a guess of one cell.
#[test]
fn a_bus_without_size_cells_is_refused() {
    let mut t = base_tree();
    t.unset("#size-cells");
    assert_eq!(Board::from_dtb(&t.dtb()), Err(BoardError::MissingProperty { node: "/".into(), prop: "#size-cells" }));
}

/// A CPU's MPIDR is the first entry of its `reg` (a node listing more is a core with threads).
#[test]
fn a_cpus_mpidr_is_its_first_reg_entry() {
    let mut t = base_tree();
    t.at("/cpus/cpu@1").set("reg", cells(&[0x100, 0x101]));
    assert_eq!(parse(&t).cpus[1].mpidr, 0x100);
}
