//! `guest_dtb`: the host tree re-emitted for the guest, checked by parsing the output again.

mod common;

use board::{guest_dtb, Board, BoardError, EnableMethod, GuestSpec, PsciMethod, Region, Status};
use common::{base_tree, cells, s, Qemu, N};

const MIB: u64 = 1 << 20;

fn spec() -> GuestSpec {
    GuestSpec {
        memory: vec![Region::new(0x4000_0000, 256 * MIB), Region::new(0x6000_0000, 128 * MIB)],
        bootargs: Some("console=ttyAMA0 \"quoted\" guest".into()),
        initrd: Some(Region::new(0x4800_0000, 0x1234)),
        reserved: vec![Region::new(0x4f00_0000, MIB)],
        remove: vec!["/pl061@9030000".into(), "/gpio-keys".into()],
        disable: vec!["/pl031@9010000".into()],
        psci_method: Some(PsciMethod::Hvc),
        remove_cpus: vec![],
        extra_devices: vec![],
        hide_el2: true,
    }
}

#[test]
fn qemu_tree_for_the_guest() {
    let host_dtb = Qemu { initrd: Some(100), append: Some("host args"), ..Qemu::default() }.dtb();
    let host = Board::from_dtb(&host_dtb).unwrap();
    let out = guest_dtb(&host_dtb, &spec()).unwrap();
    let g = Board::from_dtb(&out).unwrap();

    assert_eq!(g.memory, spec().memory);
    assert_eq!(g.bootargs, spec().bootargs);
    assert_eq!(g.initrd, spec().initrd);
    let rm = &g.reserved_memory;
    assert_eq!(rm.len(), 1);
    assert_eq!(rm[0].path, "/reserved-memory/guest-reserved@4f000000");
    assert!(rm[0].no_map);
    assert_eq!(rm[0].regions, [Region::new(0x4f00_0000, MIB)]);
    assert_eq!(g.psci.as_ref().unwrap().method, PsciMethod::Hvc);
    assert_eq!(host.psci.as_ref().unwrap().method, PsciMethod::Smc);
    assert!(g.device("/pl061@9030000").is_none());
    assert!(g.device("/pl031@9010000").unwrap().status == Status::Disabled);

    // Everything else is the host's.
    assert_eq!(g.cpus, host.cpus);
    assert_eq!(g.gic, host.gic);
    assert_eq!(g.console, host.console);
    assert_eq!(g.model, host.model);
    let mut host_devs = host.devices.clone();
    host_devs.retain(|d| d.path != "/pl061@9030000");
    for d in host_devs.iter_mut().filter(|d| d.path == "/pl031@9010000") {
        d.status = Status::Disabled;
    }
    assert_eq!(g.devices, host_devs);
    assert!(out.len() < 16 * 1024, "compact blob ({} bytes), not QEMU's 1 MiB", out.len());
    assert_eq!(g.dtb_size, out.len());
    let again = GuestSpec { remove: vec![], ..spec() };
    assert!(guest_dtb(&out, &again).unwrap() == out, "idempotent, reserved regions not doubled");

    // The rest of /chosen survives: stdout-path, kaslr-seed, rng-seed.
    let f = fdt::Fdt::new(&out).unwrap();
    let chosen = f.find_node("/chosen").unwrap();
    for p in ["stdout-path", "kaslr-seed", "rng-seed"] {
        assert!(chosen.property(p).is_some(), "{p}");
    }
}

#[test]
fn keeps_bootargs_removes_initrd_by_default() {
    let host_dtb = Qemu { initrd: Some(100), append: Some("a b c"), ..Qemu::default() }.dtb();
    let spec = GuestSpec { memory: vec![Region::new(0x4000_0000, 64 * MIB)], ..GuestSpec::default() };
    let g = Board::from_dtb(&guest_dtb(&host_dtb, &spec).unwrap()).unwrap();
    assert_eq!(g.bootargs.as_deref(), Some("a b c"));
    assert_eq!(g.initrd, None);
    assert_eq!(g.psci.unwrap().method, PsciMethod::Smc, "method kept unless asked");
    assert!(g.reserved_memory.is_empty());
}

#[test]
fn every_qemu_configuration_round_trips() {
    for gic in [2, 3] {
        for virtualization in [false, true] {
            let q = Qemu { gic, virtualization, smp: 2, mem: "2G", ..Qemu::default() };
            let host_dtb = q.dtb();
            let host = Board::from_dtb(&host_dtb).unwrap();
            let spec = GuestSpec { memory: host.memory.clone(), ..GuestSpec::default() };
            let once = guest_dtb(&host_dtb, &spec).unwrap();
            let g = Board::from_dtb(&once).unwrap();
            assert_eq!(Board { dtb_size: 0, ..g }, Board { dtb_size: 0, ..host.clone() }, "{}", q.name());
            // Idempotent: a guest tree of a guest tree is byte-identical.
            assert_eq!(guest_dtb(&once, &spec).unwrap(), once, "{}", q.name());
        }
    }
}

#[test]
fn creates_chosen_and_reserved_memory_when_missing() {
    let mut t = base_tree();
    t.remove_kid("chosen");
    t.at("/uart@9000000"); // still there
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, MIB)],
        bootargs: Some("x".into()),
        initrd: Some(Region::new(0x4008_0000, 0x100)),
        reserved: vec![Region::new(0x4000_0000, 0x1000)],
        ..GuestSpec::default()
    };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &spec).unwrap()).unwrap();
    assert_eq!(g.bootargs.as_deref(), Some("x"));
    assert_eq!(g.initrd, Some(Region::new(0x4008_0000, 0x100)));
    assert_eq!(g.reserved_memory[0].regions, [Region::new(0x4000_0000, 0x1000)]);
    // Either one alone makes a /chosen: an initrd with no command line, a command line with
    // no initrd.
    let only_initrd = GuestSpec { bootargs: None, ..spec.clone() };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &only_initrd).unwrap()).unwrap();
    assert_eq!((g.bootargs, g.initrd), (None, Some(Region::new(0x4008_0000, 0x100))));
    let only_bootargs = GuestSpec { initrd: None, ..spec };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &only_bootargs).unwrap()).unwrap();
    assert_eq!((g.bootargs.as_deref(), g.initrd), (Some("x"), None));
}

#[test]
fn extends_an_existing_reserved_memory_node_and_filters_memreserve() {
    let mut t = base_tree();
    t.kids.push(
        N::new("reserved-memory")
            .p("#address-cells", cells(&[2]))
            .p("#size-cells", cells(&[2]))
            .p("ranges", vec![])
            .kid(N::new("atf@0").p("reg", cells(&[0, 0, 0, 0x80000])).p("no-map", vec![])),
    );
    let host = t.dtb_with_reserve(&[(0x0, 0x1000), (0x5000_0000, 0x1000)]);
    let spec = GuestSpec {
        memory: vec![Region::new(0, 0x4000_0000)],
        reserved: vec![Region::new(0x100_0000, 0x1000)],
        ..GuestSpec::default()
    };
    let out = guest_dtb(&host, &spec).unwrap();
    let f = fdt::Fdt::new(&out).unwrap();
    for cpu in ["/cpus/cpu@0", "/cpus/cpu@1"] {
        assert!(f.find_node(cpu).unwrap().property("cpu-release-addr").is_none(), "{cpu} keeps its release address");
    }
    let g = Board::from_dtb(&out).unwrap();
    let paths: Vec<_> = g.reserved_memory.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/reserved-memory/atf@0", "/reserved-memory/guest-reserved@1000000"]);
    assert_eq!(g.mem_reserve, [Region::new(0, 0x1000)], "only entries inside guest RAM");
}

#[test]
fn one_cell_roots_refuse_addresses_above_4g() {
    let mut t = base_tree();
    t.set("#address-cells", cells(&[1])).set("#size-cells", cells(&[1]));
    t.at("/memory@40000000").set("reg", cells(&[0x4000_0000, 0x1000_0000]));
    t.at("/uart@9000000").set("reg", cells(&[0x0900_0000, 0x1000]));
    t.at("/intc@8000000").set("reg", cells(&[0x0800_0000, 0x10000, 0x080a_0000, 0xf6_0000]));
    let ok = GuestSpec { memory: vec![Region::new(0x4000_0000, MIB)], ..GuestSpec::default() };
    let g = Board::from_dtb(&guest_dtb(&t.dtb(), &ok).unwrap()).unwrap();
    assert_eq!(g.memory, ok.memory);
    let high = GuestSpec { memory: vec![Region::new(0x1_0000_0000, MIB)], ..GuestSpec::default() };
    let e = guest_dtb(&t.dtb(), &high).unwrap_err();
    assert!(matches!(&e, BoardError::BadGuestSpec { item, .. } if item == "memory 0x100000000+0x100000"), "{e:?}");
}

#[test]
fn spec_errors() {
    let host = base_tree().dtb();
    let base = || GuestSpec { memory: vec![Region::new(0x4000_0000, MIB)], ..GuestSpec::default() };
    let cases: Vec<(GuestSpec, &str)> = vec![
        (GuestSpec { memory: vec![], ..base() }, "no guest RAM given"),
        (
            GuestSpec { memory: vec![Region::new(0, 0x2000), Region::new(0x1000, 0x1000)], ..base() },
            "overlaps another range",
        ),
        (GuestSpec { memory: vec![Region::new(0, 0)], ..base() }, "empty range"),
        (GuestSpec { reserved: vec![Region::new(u64::MAX, 2)], ..base() }, "range wraps past 2^64"),
        (GuestSpec { remove: vec!["/nonexistent".into()], ..base() }, "no such node in the host tree"),
        (GuestSpec { remove: vec!["/".into()], ..base() }, "cannot remove or disable the root node"),
        (GuestSpec { disable: vec!["/cpus/cpu@7".into()], ..base() }, "no such node in the host tree"),
        (GuestSpec { bootargs: Some("a\0b".into()), ..base() }, "contains NUL"),
    ];
    for (spec, why) in cases {
        match guest_dtb(&host, &spec) {
            Err(BoardError::BadGuestSpec { why: w, .. }) => assert_eq!(w, why),
            other => panic!("{why}: {other:?}"),
        }
    }
    // A broken host tree is reported as such.
    let mut bad = host.clone();
    bad[0] = 0;
    assert!(matches!(guest_dtb(&bad, &base()), Err(BoardError::BadHeader { field: "magic", .. })));
}

/// A board without PSCI firmware whose CPUs wait in a spin table (the Pi 4): the guest gets a
/// PSCI node and PSCI CPUs, without the release addresses; the host tree's spin-table memory
/// is known to the board (seen failing with the node not added and with `cpu-release-addr` kept).
#[test]
fn spin_table_cpus_become_psci_cpus_in_the_guest() {
    let mut t = base_tree();
    t.remove_kid("psci");
    for cpu in ["/cpus/cpu@0", "/cpus/cpu@1"] {
        let n = t.at(cpu);
        n.unset("enable-method");
        let release: u64 = if cpu.ends_with('0') { 0xd8 } else { 0xe0 };
        n.props.push(("enable-method".into(), s("spin-table")));
        n.props.push(("cpu-release-addr".into(), release.to_be_bytes().to_vec()));
    }
    let host = t.dtb_with_reserve(&[(0, 0x1000)]);
    let hb = Board::from_dtb(&host).unwrap();
    assert!(hb.psci.is_none() && hb.has_spin_table());
    assert_eq!(hb.spin_table_regions(), [Region::new(0, 0x1000)], "the /memreserve/ holding both release addresses");
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, 1 << 20)],
        psci_method: Some(PsciMethod::Hvc),
        ..GuestSpec::default()
    };
    let out = guest_dtb(&host, &spec).unwrap();
    let f = fdt::Fdt::new(&out).unwrap();
    for cpu in ["/cpus/cpu@0", "/cpus/cpu@1"] {
        assert!(f.find_node(cpu).unwrap().property("cpu-release-addr").is_none(), "{cpu} keeps its release address");
    }
    let g = Board::from_dtb(&out).unwrap();
    let psci = g.psci.clone().expect("a PSCI node");
    assert_eq!((psci.method, psci.version), (PsciMethod::Hvc, board::PsciVersion::V1_0));
    assert!(g.cpus.iter().all(|c| c.enable_method == Some(EnableMethod::Psci)), "{:?}", g.cpus);
    assert!(!g.has_spin_table() && g.spin_table_regions().is_empty());
    // Without a /memreserve/ around it, the release address's own page.
    let lone = Board::from_dtb(&t.dtb()).unwrap();
    assert_eq!(lone.spin_table_regions(), [Region::new(0, 0x1000)]);
}

#[test]
fn removing_a_subtree_and_adding_a_psci_method() {
    let mut t = base_tree();
    t.at("/psci").unset("method");
    t.kids.push(N::new("bus").p("x", s("y")).kid(N::new("inner").kid(N::new("deeper"))));
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, MIB)],
        remove: vec!["/bus".into()],
        psci_method: Some(PsciMethod::Smc),
        ..GuestSpec::default()
    };
    let out = guest_dtb(&t.dtb(), &spec).unwrap();
    let f = fdt::Fdt::new(&out).unwrap();
    assert!(f.find_node("/bus").is_none() && f.find_node("/bus/inner").is_none());
    assert_eq!(Board::from_dtb(&out).unwrap().psci.unwrap().method, PsciMethod::Smc);
}

#[test]
fn extra_devices_are_added_at_the_root() {
    let t = base_tree();
    let ctl = Region::new(0x1_4000_0000, 0x1000);
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, MIB)],
        extra_devices: vec![board::ExtraDevice {
            name: "hyp-control".into(),
            compatible: "pgtlab,hyp-control".into(),
            reg: ctl,
        }],
        ..GuestSpec::default()
    };
    let out = guest_dtb(&t.dtb(), &spec).unwrap();
    let b = Board::from_dtb(&out).unwrap();
    let d = b.device("/hyp-control@140000000").expect("the control page is a device of the guest's tree");
    assert_eq!((d.compatible.as_slice(), d.regions.as_slice()), (&["pgtlab,hyp-control".to_string()][..], &[ctl][..]));
}

#[test]
fn a_cpu_kept_by_the_hypervisor_leaves_the_tree_with_its_cpu_map_entry() {
    let q = Qemu { smp: 3, ..Qemu::default() };
    let dtb = q.dtb();
    let spec = GuestSpec { memory: vec![Region::new(0x4000_0000, MIB)], remove_cpus: vec![2], ..GuestSpec::default() };
    let out = guest_dtb(&dtb, &spec).unwrap();
    let b = Board::from_dtb(&out).unwrap();
    assert_eq!(b.cpus.iter().map(|c| c.mpidr).collect::<Vec<_>>(), [0, 1]);
    let f = fdt::Fdt::new(&out).unwrap();
    assert!(f.find_node("/cpus/cpu-map/socket0/cluster0/core1").is_some());
    assert!(f.find_node("/cpus/cpu-map/socket0/cluster0/core2").is_none(), "its cpu-map entry goes too");
    let bad = GuestSpec { remove_cpus: vec![7], ..spec };
    assert!(matches!(guest_dtb(&dtb, &bad), Err(BoardError::BadGuestSpec { .. })));
}

/// The guest tree of QEMU's EL2 machine (`virtualization=on`) is QEMU's EL1 machine's, node by
/// node, but for the random seeds in `/chosen`: `hide_el2` drops the GIC's maintenance
/// interrupt and GICH/GICV, the timer's fifth interrupt, and the conduit becomes HVC. Seen
/// failing with `hide_el2: false` (the GIC and timer differences) and with the memory nodes
/// emitted first (the root's order).
#[test]
fn an_el2_machine_becomes_the_el1_machine() {
    for gic in [2, 3] {
        let plain = Qemu { gic, virtualization: false, append: Some("a b"), initrd: Some(16), ..Qemu::default() }.dtb();
        let el2 =
            Qemu { gic, virtualization: true, append: Some("hyp.x a b"), initrd: Some(16), ..Qemu::default() }.dtb();
        let b = Board::from_dtb(&plain).unwrap();
        let spec = GuestSpec {
            memory: b.memory,
            initrd: b.initrd,
            bootargs: Some("a b".into()),
            psci_method: Some(PsciMethod::Hvc),
            hide_el2: true,
            ..GuestSpec::default()
        };
        let guest = guest_dtb(&el2, &spec).unwrap();
        let diff = board::diff::compare(&plain, &guest).unwrap();
        let left: Vec<String> = diff
            .iter()
            .filter(|d| !(d.path() == "/chosen" && matches!(d.property(), Some("rng-seed" | "kaslr-seed"))))
            .map(|d| d.to_string())
            .collect();
        assert!(left.is_empty(), "GICv{gic}: {left:#?}");
        let without = guest_dtb(&el2, &GuestSpec { hide_el2: false, ..spec }).unwrap();
        assert!(board::diff::compare(&plain, &without).unwrap().iter().any(|d| d.path().starts_with("/intc")));
    }
}

#[test]
fn an_empty_command_line_is_no_bootargs() {
    let host = Qemu { append: Some("hyp.x"), initrd: Some(16), ..Qemu::default() }.dtb();
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, 64 * MIB)],
        bootargs: Some(String::new()),
        ..GuestSpec::default()
    };
    let out = guest_dtb(&host, &spec).unwrap();
    assert_eq!(Board::from_dtb(&out).unwrap().bootargs, None);
}

/// A board whose CPUs are named from every kind of node that refers to CPUs (`CPU_REFS`): the
/// cpu-map (a cluster of one CPU), a PMU with one SPI per CPU and its `interrupt-affinity`, a
/// per-CPU trace unit (`cpu`), a DSU PMU (`cpus`), GICv3 PPI partitions (`affinity`) and thermal
/// cooling maps (`cooling-device` entries of a phandle and two cells). CPU `k` has MPIDR `k`
/// and phandle `0x10 + k`.
fn cpu_referring_tree() -> common::N {
    let ph = |k: u32| 0x10 + k;
    let mut t = base_tree();
    let cpus = t.at("/cpus");
    cpus.kids.clear();
    for k in 0..3u32 {
        cpus.kids.push(
            N::new(&format!("cpu@{k}"))
                .p("device_type", s("cpu"))
                .p("reg", cells(&[k]))
                .p("enable-method", s("psci"))
                .p("phandle", cells(&[ph(k)]))
                .p("#cooling-cells", cells(&[2])),
        );
    }
    let core = |k: u32| N::new(&format!("core{k}")).p("cpu", cells(&[ph(k)]));
    cpus.kids.push(
        N::new("cpu-map").kid(
            N::new("socket0").kid(N::new("cluster0").kid(core(0)).kid(core(1))).kid(N::new("cluster1").kid(core(2))),
        ),
    );
    t.at("/intc@8000000").set("#interrupt-cells", cells(&[3])).set("interrupt-controller", vec![]);
    let part = |n: u32, cpus: &[u32]| {
        N::new(&format!("interrupt-partition-{n}"))
            .p("affinity", cells(&cpus.iter().map(|&k| ph(k)).collect::<Vec<_>>()))
    };
    let intc = t.at("/intc@8000000");
    intc.kids.push(N::new("ppi-partitions").kid(part(0, &[2])).kid(part(1, &[0, 2])));
    let max = 0xffff_ffff;
    t.kids.push(
        N::new("pmu")
            .p("compatible", s("arm,cortex-a72-pmu"))
            .p("interrupts", cells(&[0, 16, 4, 0, 17, 4, 0, 18, 4]))
            .p("interrupt-affinity", cells(&[ph(0), ph(1), ph(2)])),
    );
    t.kids.push(N::new("etm@22040000").p("compatible", s("arm,coresight-etm4x")).p("cpu", cells(&[ph(2)])));
    t.kids.push(N::new("dsu-pmu").p("compatible", s("arm,dsu-pmu")).p("cpus", cells(&[ph(0), ph(2)])));
    t.kids.push(
        N::new("thermal-zones").kid(
            N::new("cpu-thermal").kid(
                N::new("cooling-maps")
                    .kid(N::new("map0").p("cooling-device", cells(&[ph(0), max, max, ph(2), max, max])))
                    .kid(N::new("map1").p("cooling-device", cells(&[ph(2), max, max]))),
            ),
        ),
    );
    t
}

/// The phandles a `CPU_REFS` property names (the first cell of each entry; cooling entries are
/// 3 cells here).
fn refs_of(how: board::CpuRef, v: &[u8]) -> Vec<u32> {
    let w: Vec<u32> = v.chunks_exact(4).map(|c| u32::from_be_bytes(c.try_into().unwrap())).collect();
    match how {
        board::CpuRef::Cooling => w.chunks(3).map(|e| e[0]).collect(),
        _ => w,
    }
}

/// Every subset of the 3 CPUs left out, against a reference model of the trimmed tree: a node
/// that refers to CPUs survives iff it does not belong to a removed CPU (`cpu`) and keeps at
/// least one of its CPUs, and then its list is the host's with the removed CPUs filtered out
/// (the PMU's `interrupts` keeping the specifiers of the kept CPUs, in order); a cpu-map
/// cluster survives iff one of its CPUs does; no CPU_REFS property of the output names a node
/// that is not there. Seen failing with `interrupt-affinity` left as it was (the guest's own
/// check refused the tree: "still names a CPU the guest's tree left out"), and with emptied
/// clusters kept (the cluster1 assertion).
#[test]
fn a_trimmed_tree_keeps_no_reference_to_a_removed_cpu() {
    let host = cpu_referring_tree().dtb();
    assert_eq!(board::dangling_cpu_refs(&host).unwrap(), vec![], "the host tree is whole");
    let hf = fdt::Fdt::new(&host).unwrap();
    let referring: Vec<(String, &str, board::CpuRef)> = [
        ("/cpus/cpu-map/socket0/cluster0/core0", "cpu"),
        ("/cpus/cpu-map/socket0/cluster0/core1", "cpu"),
        ("/cpus/cpu-map/socket0/cluster1/core2", "cpu"),
        ("/intc@8000000/ppi-partitions/interrupt-partition-0", "affinity"),
        ("/intc@8000000/ppi-partitions/interrupt-partition-1", "affinity"),
        ("/pmu", "interrupt-affinity"),
        ("/etm@22040000", "cpu"),
        ("/dsu-pmu", "cpus"),
        ("/thermal-zones/cpu-thermal/cooling-maps/map0", "cooling-device"),
        ("/thermal-zones/cpu-thermal/cooling-maps/map1", "cooling-device"),
    ]
    .into_iter()
    .map(|(p, n)| {
        let how = board::CPU_REFS.iter().find(|(m, _)| *m == n).unwrap().1;
        (p.to_string(), n, how)
    })
    .collect();
    // Every kind of CPU reference is in the tree.
    for (name, _) in board::CPU_REFS {
        assert!(referring.iter().any(|(_, n, _)| n == name), "{name} not covered");
    }
    for mask in 1u32..8 {
        let gone: Vec<u64> = (0..3).filter(|k| mask & (1 << k) != 0).collect();
        let gone_ph: Vec<u32> = gone.iter().map(|&k| 0x10 + k as u32).collect();
        let spec = GuestSpec {
            memory: vec![Region::new(0x4000_0000, MIB)],
            remove_cpus: gone.clone(),
            ..GuestSpec::default()
        };
        let out = guest_dtb(&host, &spec).unwrap_or_else(|e| panic!("CPUs {gone:?} removed: {e}"));
        assert_eq!(board::dangling_cpu_refs(&out).unwrap(), vec![], "CPUs {gone:?} removed");
        let g = fdt::Fdt::new(&out).unwrap();
        for (path, name, how) in &referring {
            let was = refs_of(*how, hf.find_node(path).unwrap().property(name).unwrap().value);
            let kept: Vec<u32> = was.iter().copied().filter(|p| !gone_ph.contains(p)).collect();
            let survives = !(kept.is_empty() || *how == board::CpuRef::Owner && kept.len() < was.len());
            let node = g.find_node(path);
            assert_eq!(node.is_some(), survives, "{path} with CPUs {gone:?} removed");
            if let Some(n) = node {
                assert_eq!(
                    refs_of(*how, n.property(name).unwrap().value),
                    kept,
                    "{path} {name}, CPUs {gone:?} removed"
                );
            }
        }
        let pmu_irqs = g.find_node("/pmu").map(|n| n.property("interrupts").unwrap().value.to_vec());
        let want: Vec<u32> = (0..3).filter(|k| mask & (1 << k) == 0).flat_map(|k| [0, 16 + k, 4]).collect();
        assert_eq!(pmu_irqs, (!want.is_empty()).then(|| cells(&want)), "PMU interrupts, CPUs {gone:?} removed");
        let cluster1 = g.find_node("/cpus/cpu-map/socket0/cluster1").is_some();
        assert_eq!(cluster1, mask & 4 == 0, "a cpu-map cluster goes with its last CPU ({gone:?} removed)");
        let socket = g.find_node("/cpus/cpu-map/socket0").is_some();
        assert_eq!(socket, mask != 7, "the socket goes with its last cluster");
        let left: Vec<u64> = (0..3).filter(|k| mask & (1 << k) == 0).collect();
        match Board::from_dtb(&out) {
            Ok(b) => assert_eq!(b.cpus.iter().map(|c| c.mpidr).collect::<Vec<_>>(), left),
            Err(e) => assert!(left.is_empty(), "{e}"),
        }
    }
}

/// A list of CPUs that does not pair with the node's interrupts cannot be trimmed: refused,
/// naming the node, rather than leaving the interrupts of a CPU the guest does not have.
#[test]
fn an_interrupt_affinity_that_does_not_pair_with_the_interrupts_is_refused() {
    let mut t = cpu_referring_tree();
    t.at("/pmu").set("interrupts", cells(&[0, 16, 4, 0, 17, 4]));
    let spec = GuestSpec { memory: vec![Region::new(0x4000_0000, MIB)], remove_cpus: vec![2], ..GuestSpec::default() };
    let e = guest_dtb(&t.dtb(), &spec).unwrap_err().to_string();
    assert!(e.contains("/pmu") && e.contains("interrupt-affinity"), "{e}");
    // Nothing names CPU 2: nothing to pair, the tree is written as it is.
    let spec = GuestSpec { remove_cpus: vec![], ..spec };
    assert!(guest_dtb(&t.dtb(), &spec).is_ok());
}

/// CPU nodes removed by path (as the hypervisor drops those a board lists beyond what runs)
/// take their references with them, as `remove_cpus` does. Seen failing on the i.MX 8M Plus
/// EVK's tree (its thermal map's `cooling-device` named the removed CPUs).
#[test]
fn cpus_removed_by_path_leave_no_reference_either() {
    let mut t = cpu_referring_tree();
    // Paths, not phandles (as in the Pi 4's and i.MX's trees): left alone.
    t.kids.push(N::new("__symbols__").p("cpus", s("/cpus")).p("cpu2", s("/cpus/cpu@2")));
    let host = t.dtb();
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, MIB)],
        remove: vec!["/cpus/cpu@2".into()],
        ..GuestSpec::default()
    };
    let out = guest_dtb(&host, &spec).unwrap();
    assert_eq!(board::dangling_cpu_refs(&out).unwrap(), vec![]);
    let g = fdt::Fdt::new(&out).unwrap();
    assert!(g.find_node("/etm@22040000").is_none() && g.find_node("/cpus/cpu-map/socket0/cluster1").is_none());
    assert_eq!(g.find_node("/__symbols__").unwrap().property("cpus").unwrap().value, b"/cpus\0");
}

/// Paths to remove or disable name nodes exactly, and among siblings of one name (malformed,
/// but possible) the first in tree order whose subtree has the rest of the path.
#[test]
fn spec_paths_among_siblings_of_one_name() {
    let mut t = base_tree();
    t.kids.push(N::new("dup").kid(N::new("x")));
    t.kids.push(N::new("dup").kid(N::new("y")).kid(N::new("x")));
    let host = t.dtb();
    let spec = |remove: &[&str], disable: &[&str]| GuestSpec {
        memory: vec![Region::new(0x4000_0000, MIB)],
        remove: remove.iter().map(|s| s.to_string()).collect(),
        disable: disable.iter().map(|s| s.to_string()).collect(),
        ..GuestSpec::default()
    };
    let out = guest_dtb(&host, &spec(&["/dup/y"], &["/dup/x"])).unwrap();
    let f = fdt::Fdt::new(&out).unwrap();
    let dups: Vec<Vec<(String, bool)>> = f
        .find_node("/")
        .unwrap()
        .children()
        .filter(|n| n.name == "dup")
        .map(|n| n.children().map(|c| (c.name.to_string(), c.property("status").is_some())).collect())
        .collect();
    assert_eq!(dups, [vec![("x".to_string(), true)], vec![("x".to_string(), false)]]);
    for bad in ["/dup/z", "/dup/", "dup/x", "//dup/x", "/dup//x", ""] {
        let e = guest_dtb(&host, &spec(&[bad], &[])).unwrap_err();
        assert!(matches!(&e, BoardError::BadGuestSpec { why: "no such node in the host tree", .. }), "{bad}: {e:?}");
    }
    let e = guest_dtb(&host, &spec(&[], &["/"])).unwrap_err();
    assert!(matches!(&e, BoardError::BadGuestSpec { why: "cannot remove or disable the root node", .. }), "{e:?}");
}
