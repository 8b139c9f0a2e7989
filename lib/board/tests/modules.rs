//! `/chosen/module@…` nodes (Xen's convention for a boot loader handing a hypervisor its guest,
//! `board::modules`): what a U-Boot script writes parses, every way it can be wrong is refused
//! with the node and property named.

mod common;

use board::modules::{DEVICE_TREE, KERNEL, MODULE, RAMDISK};
use board::{Board, BoardError, Region};
use common::{base_tree, cells, N};

/// A compatible list.
fn compat(c: &[&str]) -> Vec<u8> {
    c.iter().flat_map(|s| s.bytes().chain([0])).collect()
}

fn module(name: &str, c: &[&str], base: u32, size: u32) -> N {
    N::new(name).p("compatible", compat(c)).p("reg", cells(&[base, size]))
}

/// The base tree with `/chosen` in one-cell addresses and sizes (as a U-Boot script sets them)
/// and `mods` under it.
fn tree(mods: Vec<N>) -> N {
    let mut t = base_tree();
    let c = t.at("/chosen");
    c.set("#address-cells", cells(&[1])).set("#size-cells", cells(&[1]));
    for m in mods {
        c.kids.push(m);
    }
    t
}

fn parse(t: &N) -> Result<Board, BoardError> {
    Board::from_dtb(&t.dtb())
}

fn refused(t: &N, node: &str, prop: &str) -> String {
    match parse(t) {
        Err(e @ BoardError::BadProperty { .. }) | Err(e @ BoardError::MissingProperty { .. }) => {
            let text = e.to_string();
            assert!(text.contains(node) && text.contains(prop), "{text}");
            text
        }
        other => panic!("expected a refusal naming {node} {prop}, got {other:?}"),
    }
}

#[test]
fn what_a_boot_script_writes_is_the_guest() {
    let t = tree(vec![
        module("module@48000000", &[KERNEL, MODULE], 0x4800_0000, 0x12_3400)
            .p("bootargs", common::s("test=smccc console=ttyAMA0")),
        module("module@49000000", &[RAMDISK, MODULE], 0x4900_0000, 0x1000),
    ]);
    let m = parse(&t).unwrap().modules.unwrap();
    assert_eq!(m.kernel.region, Region::new(0x4800_0000, 0x12_3400));
    assert_eq!(m.kernel.path, "/chosen/module@48000000");
    assert_eq!(m.bootargs.as_deref(), Some("test=smccc console=ttyAMA0"));
    assert_eq!(m.ramdisk.unwrap().region, Region::new(0x4900_0000, 0x1000));
    assert_eq!(m.device_tree, None);
    assert_eq!(parse(&base_tree()).unwrap().modules, None, "no module nodes: no modules");
}

/// Xen's rule: modules with only the generic string are the kernel, then the ramdisk.
#[test]
fn generic_modules_are_kernel_then_ramdisk() {
    let t = tree(vec![
        module("module@1", &[MODULE], 0x4800_0000, 0x1000),
        module("module@2", &[MODULE], 0x4900_0000, 0x1000),
    ]);
    let m = parse(&t).unwrap().modules.unwrap();
    assert_eq!((m.kernel.region.base, m.ramdisk.unwrap().region.base), (0x4800_0000, 0x4900_0000));
    let third = tree(vec![
        module("module@1", &[MODULE], 0x4800_0000, 0x1000),
        module("module@2", &[MODULE], 0x4900_0000, 0x1000),
        module("module@3", &[MODULE], 0x4a00_0000, 0x1000),
    ]);
    refused(&third, "/chosen/module@3", "compatible");
    let dt = tree(vec![
        module("module@1", &[MODULE], 0x4800_0000, 0x1000),
        module("module@2", &[DEVICE_TREE, MODULE], 0x4900_0000, 0x1000),
    ]);
    assert_eq!(parse(&dt).unwrap().modules.unwrap().device_tree.unwrap().region.base, 0x4900_0000);
}

#[test]
fn broken_modules_are_refused_by_name() {
    let k = || module("module@1", &[KERNEL, MODULE], 0x4800_0000, 0x1000);
    // The specific string without the generic one.
    refused(&tree(vec![module("module@1", &[KERNEL], 0x4800_0000, 0x1000)]), "module@1", "compatible");
    // A module kind this hypervisor does not take, or two kinds at once.
    refused(
        &tree(vec![k(), module("module@2", &["xen,xsm-policy", MODULE], 0x4900_0000, 0x10)]),
        "module@2",
        "compatible",
    );
    refused(
        &tree(vec![k(), module("module@2", &["multiboot,xsm", MODULE], 0x4900_0000, 0x10)]),
        "module@2",
        "compatible",
    );
    refused(&tree(vec![module("module@1", &[KERNEL, RAMDISK, MODULE], 0x4800_0000, 0x10)]), "module@1", "compatible");
    // Two kernels; no kernel.
    refused(&tree(vec![k(), module("module@2", &[KERNEL, MODULE], 0x4900_0000, 0x10)]), "module@2", "compatible");
    refused(&tree(vec![module("module@2", &[RAMDISK, MODULE], 0x4900_0000, 0x10)]), "/chosen", "multiboot,kernel");
    // reg: empty, missing, two pairs, overlapping, past the address space.
    refused(&tree(vec![module("module@1", &[KERNEL, MODULE], 0x4800_0000, 0)]), "module@1", "reg");
    refused(&tree(vec![N::new("module@1").p("compatible", compat(&[KERNEL, MODULE]))]), "module@1", "reg");
    let two = N::new("module@1")
        .p("compatible", compat(&[KERNEL, MODULE]))
        .p("reg", cells(&[0x4800_0000, 0x10, 0x4900_0000, 0x10]));
    refused(&tree(vec![two]), "module@1", "reg");
    refused(&tree(vec![k(), module("module@2", &[RAMDISK, MODULE], 0x4800_0800, 0x1000)]), "module@2", "reg");
    let odd = N::new("module@1").p("compatible", compat(&[KERNEL, MODULE])).p("reg", cells(&[0x4800_0000, 0x10, 7]));
    refused(&tree(vec![odd]), "module@1", "reg");
    // bootargs on the ramdisk.
    let rd = module("module@2", &[RAMDISK, MODULE], 0x4900_0000, 0x10).p("bootargs", common::s("x"));
    refused(&tree(vec![k(), rd]), "module@2", "bootargs");
    // /chosen without its cells once there are modules.
    let mut t = tree(vec![k()]);
    t.at("/chosen").unset("#size-cells");
    refused(&t, "/chosen", "#size-cells");
}

/// Two-cell addresses (a module above 4 GiB) parse with `/chosen`'s cells, and nodes that are
/// not modules (U-Boot's own children of /chosen) are left alone.
#[test]
fn wide_cells_and_other_chosen_children() {
    let mut t = base_tree();
    let c = t.at("/chosen");
    c.set("#address-cells", cells(&[2])).set("#size-cells", cells(&[2]));
    c.kids.push(
        N::new("module@880000000")
            .p("compatible", compat(&[KERNEL, MODULE]))
            .p("reg", cells(&[8, 0x8000_0000, 0, 0x2000])),
    );
    c.kids.push(N::new("framebuffer@0").p("compatible", compat(&["simple-framebuffer"])));
    let m = Board::from_dtb(&t.dtb()).unwrap().modules.unwrap();
    assert_eq!(m.kernel.region, Region::new(0x8_8000_0000, 0x2000));
}
