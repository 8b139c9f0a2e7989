//! The early scan (`MemFacts::scan`) against the full parse (`Board::from_dtb` then
//! `Board::mem_facts`): whenever both succeed they agree, on QEMU's trees, on synthetic trees
//! that hit each rule of the full parse, and on thousands of mutants. The hypervisor moves
//! itself on the scan's word before the full parse runs: a disagreement would put it over
//! something the full parse keeps.

mod common;

use board::{Board, MemFacts, Region};
use common::{base_tree, cells, compact, s, Qemu, Rng, N};

/// Both, and the check that they agree when both succeed. Returns the scan's result.
fn both(dtb: &[u8], what: &str) -> (Option<MemFacts>, bool) {
    let scan = MemFacts::scan(dtb).ok();
    let full = Board::from_dtb(dtb).map(|b| b.mem_facts());
    if let (Some(s), Ok(f)) = (&scan, &full) {
        assert_eq!(s, f, "{what}: the early scan and the full parse disagree");
    }
    (scan, full.is_ok())
}

fn agree(dtb: &[u8], what: &str) -> MemFacts {
    let (scan, full_ok) = both(dtb, what);
    assert!(full_ok, "{what}: the full parse fails");
    scan.unwrap_or_else(|| panic!("{what}: the scan fails where the full parse reads the tree"))
}

#[test]
fn qemu_trees_scan_as_they_parse() {
    for q in [
        Qemu::default(),
        Qemu { gic: 2, smp: 1, mem: "512M", ..Qemu::default() },
        Qemu {
            smp: 8,
            mem: "4G",
            initrd: Some(4096),
            append: Some("hyp.slotpool=64M console=ttyAMA0"),
            ..Qemu::default()
        },
    ] {
        let f = agree(&q.dtb(), &q.name());
        assert!(!f.memory.is_empty(), "{}", q.name());
        if q.initrd.is_some() {
            assert!(f.initrd.is_some() && f.bootargs.is_some(), "{}: initrd and bootargs read", q.name());
        }
    }
}

/// A tree with everything the scan reads: two memory nodes (one by name only, one disabled),
/// `/memreserve/`, reserved memory with and without `no-map`, spin-table CPUs (one disabled,
/// one failed), an initrd and module nodes.
fn rich() -> N {
    let mut t = base_tree();
    t.at("/chosen")
        .set("linux,initrd-start", cells(&[0x4800_0000]))
        .set("linux,initrd-end", cells(&[0, 0x4810_0000]))
        .set("#address-cells", cells(&[2]))
        .set("#size-cells", cells(&[2]));
    let chosen = t.at("/chosen");
    chosen.kids.push(
        N::new("module@50000000")
            .p("compatible", [s("multiboot,kernel"), s("multiboot,module")].concat())
            .p("reg", cells(&[0, 0x5000_0000, 0, 0x20_0000])),
    );
    chosen.kids.push(
        N::new("module@52000000")
            .p("compatible", [s("multiboot,ramdisk"), s("multiboot,module")].concat())
            .p("reg", cells(&[0, 0x5200_0000, 0, 0x10_0000])),
    );
    chosen.kids.push(N::new("other").p("compatible", s("vendor,thing")).p("reg", cells(&[0, 1, 0, 1])));
    t.kids.push(N::new("memory").p("reg", cells(&[0, 0x8000_0000, 0, 0x1000_0000, 0, 0x9000_0000, 0, 0])));
    t.kids.push(
        N::new("memory@c0000000")
            .p("device_type", s("memory"))
            .p("status", s("disabled"))
            .p("reg", cells(&[0, 0xc000_0000, 0, 0x1000_0000])),
    );
    t.kids.push(
        N::new("reserved-memory")
            .p("#address-cells", cells(&[2]))
            .p("#size-cells", cells(&[2]))
            .p("ranges", vec![])
            .kid(N::new("tfa@40000000").p("reg", cells(&[0, 0x4000_0000, 0, 0x8_0000])).p("no-map", vec![]))
            .kid(N::new("cma").p("size", cells(&[0, 0x100_0000])).p("reusable", vec![]))
            .kid(N::new("fw@5f000000").p("reg", cells(&[0, 0x5f00_0000, 0, 0x1000, 0, 0x5f10_0000, 0, 0x1000])))
            .kid(N::new("off@5e000000").p("status", s("disabled")).p("reg", cells(&[0, 0x5e00_0000, 0, 0x1000]))),
    );
    let cpus = t.at("/cpus");
    for (i, (status, addr)) in
        [(None, 0xd8u32), (Some("disabled"), 0xe0), (Some("fail"), 0xe8), (None, 0x4001_0000)].into_iter().enumerate()
    {
        let mut c = N::new(&format!("cpu@{}", i + 2))
            .p("device_type", s("cpu"))
            .p("reg", cells(&[i as u32 + 2]))
            .p("enable-method", s("spin-table"))
            .p("cpu-release-addr", cells(&[0, addr]));
        if let Some(st) = status {
            c = c.p("status", s(st));
        }
        cpus.kids.push(c);
    }
    t
}

/// A change to [`rich`]'s tree.
type Change = Box<dyn Fn(&mut N)>;

#[test]
fn every_rule_the_scan_follows_matches_the_full_parse() {
    let dtb = rich().dtb_with_reserve(&[(0, 0x1000), (0x4100_0000, 0x2000)]);
    let f = agree(&dtb, "rich");
    assert_eq!(
        f.memory,
        [Region::new(0x4000_0000, 0x2000_0000), Region::new(0x8000_0000, 0x1000_0000)],
        "a memory node by name, the disabled one and the empty entry left out"
    );
    assert_eq!(f.reserved.len(), 3, "{:?}", f.reserved);
    assert_eq!(f.no_map_regions().collect::<Vec<_>>(), [Region::new(0x4000_0000, 0x8_0000)]);
    assert_eq!(f.spin_release, [0xd8, 0xe0, 0x4001_0000], "the failed CPU is not there");
    assert_eq!(f.spin_table_regions(), [Region::new(0, 0x1000), Region::new(0x4001_0000, 0x1000)]);
    assert_eq!(f.initrd, Some(Region::new(0x4800_0000, 0x10_0000)));
    assert_eq!(f.modules, [Region::new(0x5000_0000, 0x20_0000), Region::new(0x5200_0000, 0x10_0000)]);
    assert_eq!(f.bootargs.as_deref(), Some("console=ttyAMA0"));

    // The look-ups' corner cases, each as the full parse reads it.
    let cases: Vec<(&str, Change)> = vec![
        (
            "reserved-memory with a unit address is no reserved memory",
            Box::new(|t| t.at("/reserved-memory").name = "reserved-memory@0".into()),
        ),
        (
            "a second reserved-memory is not looked at",
            Box::new(|t| {
                let mut second = t.at("/reserved-memory").clone();
                second.kids.truncate(1);
                t.kids.insert(
                    1,
                    N::new("reserved-memory@1")
                        .p("device_type", s("memory"))
                        .p("reg", cells(&[0, 0x7000_0000, 0, 0x1000])),
                );
                t.kids.push(second);
            }),
        ),
        ("chosen with a unit address is /chosen", Box::new(|t| t.at("/chosen").name = "chosen@0".into())),
        (
            "a malformed status is okay",
            Box::new(|t| {
                t.at("/memory@c0000000").set("status", b"disabled".to_vec());
            }),
        ),
        (
            "status ok",
            Box::new(|t| {
                t.at("/memory@c0000000").set("status", s("ok"));
            }),
        ),
        (
            "a device_type other than memory",
            Box::new(|t| {
                t.at("/memory").set("device_type", s("ram"));
            }),
        ),
        (
            "a memory node without the memory name",
            Box::new(|t| {
                t.kids.push(N::new("dram@0").p("device_type", s("memory")).p("reg", cells(&[1, 0, 0, 0x1000])))
            }),
        ),
        (
            "duplicate reg: the first counts",
            Box::new(|t| t.at("/memory").props.push(("reg".into(), cells(&[0, 0x9900_0000, 0, 0x1000])))),
        ),
        (
            "no-map on a disabled child",
            Box::new(|t| {
                t.at("/reserved-memory/off@5e000000").set("no-map", vec![]);
            }),
        ),
        (
            "one-cell initrd",
            Box::new(|t| {
                t.at("/chosen").set("linux,initrd-end", cells(&[0x4820_0000]));
            }),
        ),
        (
            "a 32-bit release address",
            Box::new(|t| {
                t.at("/cpus/cpu@2").set("cpu-release-addr", cells(&[0xf0]));
            }),
        ),
        (
            "a spin-table CPU without release address",
            Box::new(|t| {
                t.at("/cpus/cpu@2").unset("cpu-release-addr");
            }),
        ),
        (
            "a cpu by name only",
            Box::new(|t| {
                t.at("/cpus/cpu@3").unset("device_type");
            }),
        ),
        (
            "a non-cpu child of /cpus",
            Box::new(|t| {
                t.at("/cpus").kids.push(
                    N::new("cpu-map").p("enable-method", s("spin-table")).p("cpu-release-addr", cells(&[0, 0x10])),
                )
            }),
        ),
        (
            "no bootargs",
            Box::new(|t| {
                t.at("/chosen").unset("bootargs");
            }),
        ),
        (
            "a module with only the generic string",
            Box::new(|t| {
                t.at("/chosen/module@52000000").set("compatible", s("multiboot,module"));
            }),
        ),
        (
            "/reserved-memory that is a memory node too",
            Box::new(|t| {
                t.at("/reserved-memory")
                    .set("device_type", s("memory"))
                    .set("reg", cells(&[0, 0xa000_0000, 0, 0x1000]));
            }),
        ),
        (
            "memory in deeper nodes is not RAM",
            Box::new(|t| {
                t.at("/cpus/cpu@0").kids.push(N::new("memory@0").p("device_type", s("memory")).p("reg", cells(&[0])))
            }),
        ),
    ];
    let mut read = 0;
    for (what, change) in &cases {
        let mut t = rich();
        change(&mut t);
        let (scan, full_ok) = both(&t.dtb_with_reserve(&[(0, 0x1000)]), what);
        if scan.is_some() && full_ok {
            read += 1;
        }
    }
    assert!(read + 1 >= cases.len(), "nearly every case parses both ways ({read} of {})", cases.len());
}

#[test]
fn mutants_never_panic_and_never_disagree() {
    let seeds = [
        rich().dtb_with_reserve(&[(0, 0x1000)]),
        compact(&Qemu { initrd: Some(64), append: Some("a b"), ..Qemu::default() }.dtb()),
    ];
    let mut rng = Rng(0x51ed_2701_f00d_cafe);
    let (mut both_ok, mut total) = (0, 0);
    for seed in &seeds {
        for _ in 0..4000 {
            let mut d = seed.clone();
            for _ in 0..1 + rng.below(3) {
                let len = d.len();
                match rng.below(4) {
                    0 => {
                        let i = rng.below(len);
                        d[i] ^= 1 << rng.below(8);
                    }
                    1 => {
                        let i = rng.below(len / 4) * 4;
                        let v = [0u32, 1, 2, 3, 4, 8, 9, 0xffff_ffff, rng.next() as u32][rng.below(9)];
                        d[i..i + 4].copy_from_slice(&v.to_be_bytes());
                    }
                    2 => {
                        let i = rng.below(len);
                        d[i] = [0, b'@', b'm', 0xff][rng.below(4)];
                    }
                    _ => d.truncate(40 + rng.below(len - 40)),
                }
            }
            let (scan, full_ok) = both(&d, "mutant");
            total += 1;
            if scan.is_some() && full_ok {
                both_ok += 1;
            }
        }
    }
    println!("{both_ok} of {total} mutants read both ways, and agree");
    assert!(both_ok > total / 10, "the mutants must mostly stay readable, or this test proves little");
}
