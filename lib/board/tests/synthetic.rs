//! Hand-built trees: features QEMU's DTBs do not exercise, and malformed blobs that must give
//! a clear error naming the node (never a panic).

mod common;

use board::{Board, BoardError, EnableMethod, GicVersion, Region, Status, Window, WindowSpace};
use common::{base_tree, cells, s, N};

fn parse(t: &N) -> Result<Board, BoardError> {
    Board::from_dtb(&t.dtb())
}

fn err(t: &N) -> BoardError {
    let e = parse(t).expect_err("must fail");
    let _ = e.to_string();
    e
}

fn bad_prop(node: &str, prop: &'static str, why: &'static str) -> BoardError {
    BoardError::BadProperty { node: node.into(), prop, why }
}

#[test]
fn base_tree_parses() {
    let b = parse(&base_tree()).unwrap();
    assert_eq!(b.model.as_deref(), Some("Test Board"));
    assert_eq!(b.compatible, ["test,board"]);
    assert!(!b.is_qemu_virt(), "a board is not QEMU's virt");
    assert_eq!(b.memory, [Region::new(0x4000_0000, 0x2000_0000)]);
    let uart = b.console.unwrap();
    assert_eq!((uart.base, uart.clock_frequency, uart.options), (0x0900_0000, Some(48_000_000), None));
    assert_eq!(b.gic.unwrap().version, GicVersion::V3);
    assert_eq!(b.cpus.len(), 2);
    assert_eq!(b.bootargs.as_deref(), Some("console=ttyAMA0"));
}

// ---- header and structure ------------------------------------------------------------------

#[test]
fn bad_magic() {
    let mut d = base_tree().dtb();
    d[0] = 0xd1;
    let e = Board::from_dtb(&d).unwrap_err();
    assert!(matches!(e, BoardError::BadHeader { field: "magic", .. }), "{e:?}");
    assert!(e.to_string().contains("not a DTB"), "{e}");
}

#[test]
fn truncated_blob_and_short_header() {
    let d = base_tree().dtb();
    let e = Board::from_dtb(&d[..d.len() - 1]).unwrap_err();
    assert_eq!(e, BoardError::Truncated { need: d.len() as u64, have: d.len() as u64 - 1 });
    assert_eq!(e.to_string(), format!("DTB truncated: need {} bytes, have {}", d.len(), d.len() - 1));
    assert!(matches!(Board::from_dtb(&d[..20]), Err(BoardError::Truncated { need: 40, have: 20 })));
    assert!(matches!(Board::from_dtb(&[]), Err(BoardError::Truncated { .. })));
}

#[test]
fn totalsize_larger_than_buffer() {
    let mut d = base_tree().dtb();
    let big = (d.len() as u32 + 4096).to_be_bytes();
    d[4..8].copy_from_slice(&big);
    assert!(matches!(Board::from_dtb(&d), Err(BoardError::Truncated { .. })));
}

#[test]
fn buffer_longer_than_totalsize_is_fine() {
    let mut d = base_tree().dtb();
    d.extend_from_slice(&[0xff; 100]);
    assert!(Board::from_dtb(&d).is_ok());
}

#[test]
fn old_version_and_blocks_outside_the_blob() {
    let mut d = base_tree().dtb();
    d[20..24].copy_from_slice(&16u32.to_be_bytes());
    assert!(matches!(Board::from_dtb(&d), Err(BoardError::BadHeader { field: "version", .. })));
    let mut d = base_tree().dtb();
    d[36..40].copy_from_slice(&0x10_0000u32.to_be_bytes()); // size_dt_struct
    assert!(matches!(Board::from_dtb(&d), Err(BoardError::BadHeader { field: "off_dt_struct", .. })));
    let mut d = base_tree().dtb();
    d[12..16].copy_from_slice(&0xffff_fff0u32.to_be_bytes()); // off_dt_strings
    assert!(matches!(Board::from_dtb(&d), Err(BoardError::BadHeader { field: "off_dt_strings", .. })));
}

/// The header's bounds at their edges: a `totalsize` of exactly the 40-byte header is a size
/// (39 is not), and a blob whose `last_comp_version` is 17 is read (18 is not).
#[test]
fn header_bounds_at_their_edges() {
    let mut head = base_tree().dtb()[..40].to_vec();
    head[4..8].copy_from_slice(&40u32.to_be_bytes());
    assert_eq!(board::dtb_total_size(&head), Ok(40));
    // A header-only blob is all there: judged by its blocks, not called truncated.
    let e = Board::from_dtb(&head).unwrap_err();
    assert!(matches!(e, BoardError::BadHeader { field: "off_dt_struct", .. }), "{e:?}");
    head[4..8].copy_from_slice(&39u32.to_be_bytes());
    assert!(matches!(board::dtb_total_size(&head), Err(BoardError::BadHeader { field: "totalsize", value: 39, .. })));
    let mut d = base_tree().dtb();
    d[24..28].copy_from_slice(&17u32.to_be_bytes());
    assert!(Board::from_dtb(&d).is_ok(), "last_comp_version 17");
    d[24..28].copy_from_slice(&18u32.to_be_bytes());
    let e = Board::from_dtb(&d).unwrap_err();
    assert!(matches!(e, BoardError::BadHeader { field: "last_comp_version", value: 18, .. }), "{e:?}");
}

#[test]
fn unterminated_memory_reservation_block() {
    let mut d = base_tree().dtb();
    // Point the reservation map at the structure block's first 16 bytes, which are not zero,
    // and the following ones, until the end of the blob.
    let off_struct = u32::from_be_bytes(d[8..12].try_into().unwrap());
    let fill = d.len() - 16;
    d[16..20].copy_from_slice(&((fill as u32) & !7).to_be_bytes());
    let at = (fill & !7)..d.len();
    d[at].fill(0xaa);
    let _ = off_struct;
    let e = Board::from_dtb(&d).unwrap_err();
    assert!(matches!(e, BoardError::BadMemReserve { .. }), "{e:?}");
}

/// Offset of the structure block and the byte offset of the first occurrence of `needle` in it.
fn find(d: &[u8], needle: &[u8]) -> usize {
    d.windows(needle.len()).position(|w| w == needle).expect("needle")
}

#[test]
fn unknown_token_names_the_node() {
    let mut d = base_tree().dtb();
    // The token right after the cpu@1 node name ("cpu@1\0" padded to 8) is its first PROP.
    let at = find(&d, b"cpu@1\0") + 8;
    d[at..at + 4].copy_from_slice(&7u32.to_be_bytes());
    let e = Board::from_dtb(&d).unwrap_err();
    match &e {
        BoardError::BadStructure { node, why, .. } => {
            assert_eq!(node, "/cpus/cpu@1");
            assert_eq!(*why, "unknown token in the structure block");
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("/cpus/cpu@1"), "{e}");
}

#[test]
fn property_name_offset_outside_strings() {
    let mut d = base_tree().dtb();
    let at = find(&d, b"cpu@1\0") + 8; // PROP, len, nameoff
    d[at + 8..at + 12].copy_from_slice(&0xffffu32.to_be_bytes());
    let e = Board::from_dtb(&d).unwrap_err();
    assert!(
        matches!(&e, BoardError::BadStructure { node, why: "property name offset outside the strings block", .. } if node == "/cpus/cpu@1"),
        "{e:?}"
    );
}

#[test]
fn property_value_past_the_block() {
    let mut d = base_tree().dtb();
    let at = find(&d, b"cpu@1\0") + 8;
    d[at + 4..at + 8].copy_from_slice(&0x7fff_ffffu32.to_be_bytes());
    let e = Board::from_dtb(&d).unwrap_err();
    assert!(
        matches!(&e, BoardError::BadStructure { why: "property value runs past the structure block", .. }),
        "{e:?}"
    );
}

#[test]
fn node_name_not_utf8() {
    let mut d = base_tree().dtb();
    let at = find(&d, b"cpu@1\0");
    d[at] = 0xff;
    let e = Board::from_dtb(&d).unwrap_err();
    assert!(
        matches!(&e, BoardError::BadStructure { node, why: "node name is not UTF-8", .. } if node == "/cpus"),
        "{e:?}"
    );
}

#[test]
fn too_deep_nesting() {
    // The writer refuses to nest more than 32 levels...
    let mut w = board::FdtWriter::new();
    w.begin_node("").unwrap();
    for _ in 1..32 {
        w.begin_node("n").unwrap();
    }
    assert!(w.begin_node("n").is_err());
    // ...so hand-make root + 40 nested nodes.
    let mut structs = Vec::new();
    let mut strings = Vec::new();
    strings.extend_from_slice(b"x\0");
    structs.extend_from_slice(&1u32.to_be_bytes());
    structs.extend_from_slice(&[0, 0, 0, 0]);
    for _ in 0..40 {
        structs.extend_from_slice(&1u32.to_be_bytes());
        structs.extend_from_slice(b"n\0\0\0");
    }
    for _ in 0..41 {
        structs.extend_from_slice(&2u32.to_be_bytes());
    }
    structs.extend_from_slice(&9u32.to_be_bytes());
    let d = raw_blob(&structs, &strings);
    let e = Board::from_dtb(&d).unwrap_err();
    assert!(matches!(&e, BoardError::BadStructure { why: "nodes nested deeper than 32 levels", .. }), "{e:?}");
}

fn raw_blob(structs: &[u8], strings: &[u8]) -> Vec<u8> {
    let off_struct = 40 + 16;
    let off_strings = off_struct + structs.len();
    let total = off_strings + strings.len();
    let mut d = Vec::new();
    for v in [0xd00dfeed, total, off_struct, off_strings, 40, 17, 16, 0, strings.len(), structs.len()] {
        d.extend_from_slice(&(v as u32).to_be_bytes());
    }
    d.extend_from_slice(&[0; 16]);
    d.extend_from_slice(structs);
    d.extend_from_slice(strings);
    d
}

#[test]
fn structure_without_end_token_or_with_stray_end_node() {
    let mut structs = Vec::new();
    structs.extend_from_slice(&1u32.to_be_bytes());
    structs.extend_from_slice(&[0; 4]);
    structs.extend_from_slice(&2u32.to_be_bytes());
    let e = Board::from_dtb(&raw_blob(&structs, b"")).unwrap_err();
    assert!(matches!(&e, BoardError::BadStructure { why: "structure block ends before FDT_END", .. }), "{e:?}");
    structs.extend_from_slice(&2u32.to_be_bytes());
    let e = Board::from_dtb(&raw_blob(&structs, b"")).unwrap_err();
    assert!(matches!(&e, BoardError::BadStructure { why, .. } if why.contains("without a matching")), "{e:?}");
}

/// libfdt's `fdt_nop_node`/`fdt_nop_property` leave FDT_NOP tokens (QEMU's board models hand
/// over trees with them); `fdt` 0.1.5 trips over some of them, the parser here skips them:
/// same Board as without NOPs, its `dtb_size` the blob's own.
#[test]
fn nop_tokens_anywhere_are_harmless() {
    let clean = base_tree().dtb();
    let expect = Board::from_dtb(&clean).unwrap();
    // Re-tokenize the structure block and insert a NOP before every token.
    let be = |d: &[u8], o: usize| u32::from_be_bytes(d[o..o + 4].try_into().unwrap()) as usize;
    let (off, size) = (be(&clean, 8), be(&clean, 36));
    let (soff, ssize) = (be(&clean, 12), be(&clean, 32));
    let mut pos = off;
    let mut structs = Vec::new();
    while pos < off + size {
        let tag = be(&clean, pos) as u32;
        let len = match tag {
            1 => (4 + clean[pos + 4..].iter().position(|&b| b == 0).unwrap() + 1 + 3) & !3,
            3 => (12 + be(&clean, pos + 4) + 3) & !3,
            _ => 4,
        };
        structs.extend_from_slice(&4u32.to_be_bytes());
        structs.extend_from_slice(&4u32.to_be_bytes());
        structs.extend_from_slice(&clean[pos..pos + len]);
        pos += len;
        if tag == 9 {
            break;
        }
    }
    let d = raw_blob(&structs, &clean[soff..soff + ssize]);
    let mut got = Board::from_dtb(&d).unwrap();
    assert_eq!(got.dtb_size, d.len(), "the bytes the blob occupies, its NOPs included");
    got.dtb_size = expect.dtb_size;
    assert_eq!(got, expect);
    // The guest's tree (written without NOPs) is the same, and so is the comparison of trees.
    let spec = board::GuestSpec { memory: vec![Region::new(0x4000_0000, 0x100_0000)], ..Default::default() };
    assert_eq!(board::guest_dtb(&d, &spec).unwrap(), board::guest_dtb(&clean, &spec).unwrap());
    assert_eq!(board::diff::compare(&d, &clean).unwrap(), vec![]);
    // And fdt alone, on the same blob, panics or loses nodes.
    let lost = std::panic::catch_unwind(|| {
        let f = fdt::Fdt::new(&d).unwrap();
        f.all_nodes().count()
    });
    assert!(!matches!(lost, Ok(n) if n == 10), "fdt 0.1.5 now handles NOPs: {lost:?}");
}

/// NOPs in a blob whose `/memreserve/` entries include one at address 0 and whose structure
/// block comes last (after the strings, ending at the blob's end): the copy without NOPs keeps
/// every reservation and reads nothing past the blob.
#[test]
fn nop_tokens_with_reservations_and_the_structure_block_last() {
    let rsv = [(0, 0x1000), (0x4800_0000, 0x2000)];
    let clean = base_tree().dtb_with_reserve(&rsv);
    let expect = Board::from_dtb(&clean).unwrap();
    assert_eq!(expect.mem_reserve, [Region::new(0, 0x1000), Region::new(0x4800_0000, 0x2000)]);
    let be = |o: usize| u32::from_be_bytes(clean[o..o + 4].try_into().unwrap()) as usize;
    let (soff, ssize, roff) = (be(12), be(32), be(16));
    let (off, size) = (be(8), be(36));
    let mut structs = 4u32.to_be_bytes().to_vec(); // FDT_NOP first
    structs.extend_from_slice(&clean[off..off + size]);
    let rsv_block = &clean[roff..roff + 16 * (rsv.len() + 1)];
    let off_strings = 40 + rsv_block.len();
    let off_struct = (off_strings + ssize + 3) & !3;
    let total = off_struct + structs.len();
    let mut d = Vec::new();
    for v in [0xd00d_feed, total, off_struct, off_strings, 40, 17, 16, 0, ssize, structs.len()] {
        d.extend_from_slice(&(v as u32).to_be_bytes());
    }
    d.extend_from_slice(rsv_block);
    d.extend_from_slice(&clean[soff..soff + ssize]);
    d.resize(off_struct, 0);
    d.extend_from_slice(&structs);
    assert_eq!(d.len(), total);
    let mut got = Board::from_dtb(&d).unwrap();
    assert_eq!(got.mem_reserve, expect.mem_reserve);
    got.dtb_size = expect.dtb_size;
    assert_eq!(got, expect);
}

// ---- properties ----------------------------------------------------------------------------

#[test]
fn memory_reg_with_wrong_length() {
    let mut t = base_tree();
    t.at("/memory@40000000").set("reg", cells(&[0, 0x4000_0000, 0]));
    let e = err(&t);
    assert_eq!(e, bad_prop("/memory@40000000", "reg", "length not a multiple of the cell size"));
    assert_eq!(e.to_string(), "DTB: node /memory@40000000: property `reg`: length not a multiple of the cell size");
}

#[test]
fn missing_address_cells() {
    let mut t = base_tree();
    t.unset("#address-cells");
    let e = err(&t);
    assert_eq!(e, BoardError::MissingProperty { node: "/".into(), prop: "#address-cells" });
    assert_eq!(e.to_string(), "DTB: node /: missing property `#address-cells`");
}

#[test]
fn size_cells_with_the_wrong_length() {
    let mut t = base_tree();
    t.at("/cpus").set("#size-cells", vec![0, 0]);
    assert_eq!(err(&t), bad_prop("/cpus", "#size-cells", "expected exactly one 32-bit cell"));
}

#[test]
fn more_than_two_address_cells() {
    let mut t = base_tree();
    t.set("#address-cells", cells(&[3]));
    t.at("/memory@40000000").set("reg", cells(&[0, 0, 0x4000_0000, 0, 0x1000]));
    assert_eq!(err(&t), bad_prop("/memory@40000000", "reg", "more than 2 address or size cells do not fit in 64 bits"));
}

#[test]
fn memory_range_wrapping_past_2_64() {
    let mut t = base_tree();
    t.at("/memory@40000000").set("reg", cells(&[0xffff_ffff, 0xffff_f000, 0, 0x2000]));
    assert_eq!(err(&t), bad_prop("/memory@40000000", "reg", "range wraps past 2^64"));
}

#[test]
fn no_memory_node() {
    let mut t = base_tree();
    t.remove_kid("memory@40000000");
    assert_eq!(err(&t), BoardError::MissingNode { node: "/memory".into() });
}

#[test]
fn several_memory_nodes_and_entries_one_cell_root() {
    let mut t = base_tree();
    t.set("#address-cells", cells(&[1])).set("#size-cells", cells(&[1]));
    t.at("/memory@40000000").set("reg", cells(&[0x8000_0000, 0x1000_0000, 0x4000_0000, 0x100_0000, 0, 0]));
    t.kids.push(N::new("memory@0").p("device_type", s("memory")).p("reg", cells(&[0x1000, 0x1000])));
    // Devices and the GIC decode with one cell too.
    t.at("/uart@9000000").set("reg", cells(&[0x0900_0000, 0x1000]));
    t.at("/intc@8000000").set("reg", cells(&[0x0800_0000, 0x10000, 0x080a_0000, 0xf6_0000]));
    let b = parse(&t).unwrap();
    assert_eq!(
        b.memory,
        [Region::new(0x1000, 0x1000), Region::new(0x4000_0000, 0x100_0000), Region::new(0x8000_0000, 0x1000_0000)],
        "sorted, zero-sized entries dropped"
    );
}

#[test]
fn stdout_path_naming_no_node() {
    let mut t = base_tree();
    t.at("/chosen").set("stdout-path", s("/nonexistent@0:115200n8"));
    assert_eq!(err(&t), bad_prop("/chosen", "stdout-path", "names no node (neither a path nor an alias)"));
    t.at("/chosen").set("stdout-path", s("serial7"));
    assert_eq!(err(&t), bad_prop("/chosen", "stdout-path", "names no node (neither a path nor an alias)"));
    t.at("/chosen").set("stdout-path", vec![b'/', 0xff, 0]);
    assert_eq!(err(&t), bad_prop("/chosen", "stdout-path", "string is not UTF-8"));
}

/// A path component without a unit address names the first child of that name up to its `@`
/// (as Linux's `of_find_node_by_path`); a string property holding two strings is refused as
/// such, not read as one string with a NUL inside.
#[test]
fn stdout_path_without_unit_address_and_a_two_string_value() {
    let mut t = base_tree();
    t.at("/chosen").set("stdout-path", s("/uart:115200n8"));
    let uart = parse(&t).unwrap().console.unwrap();
    assert_eq!(
        (uart.path.as_str(), uart.options.as_deref(), uart.from_stdout_path),
        ("/uart@9000000", Some("115200n8"), true)
    );
    t.at("/chosen").set("stdout-path", b"/uart@9000000\0serial0\0".to_vec());
    assert_eq!(err(&t), bad_prop("/chosen", "stdout-path", "not a single NUL-terminated string"));
}

#[test]
fn stdout_path_through_an_alias_with_options() {
    let mut t = base_tree();
    t.kids.insert(0, N::new("aliases").p("serial0", s("/uart@9000000")));
    // A second PL011 that comes first in the tree, so the alias decides.
    t.kids.insert(1, N::new("uart@1000").p("compatible", s("arm,pl011")).p("reg", cells(&[0, 0x1000, 0, 0x1000])));
    t.at("/chosen").set("stdout-path", s("serial0:115200n8"));
    let b = parse(&t).unwrap();
    let uart = b.console.unwrap();
    assert_eq!(uart.path, "/uart@9000000");
    assert_eq!(uart.options.as_deref(), Some("115200n8"));
    assert!(uart.from_stdout_path);
    assert_eq!(b.stdout_path.as_deref(), Some("serial0:115200n8"));
}

#[test]
fn stdout_path_chooses_the_uart_kind_and_an_unknown_one_is_named() {
    use board::UartKind;
    let mut t = base_tree();
    let kinds = [
        ("ns16550a", UartKind::Ns16550 { reg_shift: 0, reg_io_width: 1 }),
        ("brcm,bcm2835-aux-uart", UartKind::Ns16550 { reg_shift: 2, reg_io_width: 4 }),
        ("fsl,imx8mp-uart", UartKind::Imx),
        ("xlnx,xuartps", UartKind::Cadence),
        ("arm,pl011", UartKind::Pl011),
    ];
    t.at("/chosen").set("stdout-path", s("/serial@1000"));
    for (compat, kind) in kinds {
        t.remove_kid("serial@1000");
        t.kids.push(N::new("serial@1000").p("compatible", s(compat)).p("reg", cells(&[0, 0x1000, 0, 0x100])));
        let b = parse(&t).unwrap();
        let uart = b.console.unwrap();
        assert_eq!((uart.path.as_str(), uart.kind, uart.from_stdout_path), ("/serial@1000", kind, true), "{compat}");
        assert_eq!(b.console_problem, None);
    }
    // A DesignWare 16550 says its own register layout.
    t.remove_kid("serial@1000");
    t.kids.push(
        N::new("serial@1000")
            .p("compatible", s("snps,dw-apb-uart"))
            .p("reg", cells(&[0, 0x1000, 0, 0x100]))
            .p("reg-shift", cells(&[2]))
            .p("reg-io-width", cells(&[4])),
    );
    assert_eq!(parse(&t).unwrap().console.unwrap().kind, UartKind::Ns16550 { reg_shift: 2, reg_io_width: 4 });
    // A UART no driver here speaks: the first drivable one (the PL011) is the console, and the
    // problem names the node and its compatible (seen failing when it fell back silently).
    t.remove_kid("serial@1000");
    t.kids.push(N::new("serial@1000").p("compatible", s("acme,uart")).p("reg", cells(&[0, 0x1000, 0, 0x100])));
    let b = parse(&t).unwrap();
    let uart = b.console.unwrap();
    assert_eq!((uart.path.as_str(), uart.kind, uart.from_stdout_path), ("/uart@9000000", UartKind::Pl011, false));
    let p = b.console_problem.unwrap();
    assert!(p.contains("/serial@1000") && p.contains("acme,uart"), "{p}");
    // No stdout-path at all: the first drivable UART, no problem. No UART at all: no console.
    t.at("/chosen").unset("stdout-path");
    let b = parse(&t).unwrap();
    assert_eq!((b.console.unwrap().path.as_str(), b.console_problem), ("/uart@9000000", None));
    t.remove_kid("uart@9000000");
    assert_eq!(parse(&t).unwrap().console, None);
}

#[test]
fn uart_clock_from_a_fixed_clock_provider() {
    let mut t = base_tree();
    t.kids.push(
        N::new("clk-a").p("compatible", s("fixed-clock")).p("#clock-cells", cells(&[1])).p("phandle", cells(&[7])),
    );
    t.kids.push(
        N::new("clk-b")
            .p("compatible", s("fixed-clock"))
            .p("#clock-cells", cells(&[0]))
            .p("clock-frequency", cells(&[44_236_800]))
            .p("phandle", cells(&[8])),
    );
    let u = t.at("/uart@9000000");
    u.unset("clock-frequency");
    u.set("clocks", cells(&[7, 3, 8])).set("clock-names", [s("apb_pclk"), s("uartclk")].concat());
    assert_eq!(parse(&t).unwrap().console.unwrap().clock_frequency, Some(44_236_800));
    t.at("/uart@9000000").unset("clock-names");
    assert_eq!(parse(&t).unwrap().console.unwrap().clock_frequency, None, "clk-a has cells");
}

#[test]
fn psci_method_and_version() {
    let mut t = base_tree();
    t.at("/psci").set("method", s("svc"));
    assert_eq!(err(&t), bad_prop("/psci", "method", "neither \"hvc\" nor \"smc\""));
    t.at("/psci").unset("method");
    assert_eq!(err(&t), BoardError::MissingProperty { node: "/psci".into(), prop: "method" });
    t.at("/psci").set("method", s("smc")).set("compatible", s("arm,psci")).set("cpu_on", cells(&[0x95c1ba60]));
    let p = parse(&t).unwrap().psci.unwrap();
    assert_eq!(p.version, board::PsciVersion::V0_1);
    assert_eq!(p.function_ids.cpu_on, Some(0x95c1ba60));
    t.remove_kid("psci");
    assert_eq!(parse(&t).unwrap().psci, None);
}

#[test]
fn gic_errors() {
    let mut t = base_tree();
    t.at("/intc@8000000").set("reg", cells(&[0, 0x0800_0000, 0, 0x10000]));
    assert_eq!(err(&t), bad_prop("/intc@8000000", "reg", "fewer entries than 1 distributor + #redistributor-regions"));
    t.at("/intc@8000000").set("compatible", s("arm,gic-400"));
    assert_eq!(err(&t), bad_prop("/intc@8000000", "reg", "GICv2 needs distributor and CPU interface entries"));
    t.at("/intc@8000000").unset("reg");
    assert_eq!(err(&t), BoardError::MissingProperty { node: "/intc@8000000".into(), prop: "reg" });
}

#[test]
fn initrd_cells_and_errors() {
    let mut t = base_tree();
    t.at("/chosen").set("linux,initrd-start", cells(&[0x1, 0x0])).set("linux,initrd-end", cells(&[0x1_0000]));
    assert_eq!(err(&t), bad_prop("/chosen", "linux,initrd-end", "smaller than linux,initrd-start"));
    t.at("/chosen").set("linux,initrd-end", cells(&[0x1, 0x2000]));
    assert_eq!(parse(&t).unwrap().initrd, Some(Region::new(0x1_0000_0000, 0x2000)));
    // An empty initrd (end == start) is no error: a region of 0 bytes.
    t.at("/chosen").set("linux,initrd-end", cells(&[0x1, 0x0]));
    assert_eq!(parse(&t).unwrap().initrd, Some(Region::new(0x1_0000_0000, 0)));
    t.at("/chosen").unset("linux,initrd-end");
    assert_eq!(err(&t), BoardError::MissingProperty { node: "/chosen".into(), prop: "linux,initrd-end" });
    t.at("/chosen").set("linux,initrd-end", cells(&[1, 2, 3]));
    assert_eq!(err(&t), bad_prop("/chosen", "linux,initrd-end", "expected one or two 32-bit cells"));
}

#[test]
fn cpu_errors_and_spin_table() {
    let mut t = base_tree();
    t.at("/cpus/cpu@1").unset("reg");
    assert_eq!(err(&t), BoardError::MissingProperty { node: "/cpus/cpu@1".into(), prop: "reg" });
    let mut t = base_tree();
    t.at("/cpus").set("#address-cells", cells(&[2]));
    t.at("/cpus/cpu@0").set("reg", cells(&[0, 0x100]));
    t.at("/cpus/cpu@1").set("reg", cells(&[0x1, 0x100])).set("enable-method", s("spin-table"));
    t.at("/cpus/cpu@1").set("cpu-release-addr", cells(&[0, 0xd8])).set("status", s("disabled"));
    let b = parse(&t).unwrap();
    assert_eq!(b.cpus[0].mpidr, 0x100);
    assert_eq!(b.cpus[1].mpidr, 0x1_0000_0100, "Aff3 in the high cell");
    assert_eq!(b.cpus[1].enable_method, Some(EnableMethod::SpinTable { release_addr: Some(0xd8) }));
    assert_eq!(b.cpus[1].status, Status::Disabled);
    t.remove_kid("cpus");
    assert_eq!(err(&t), BoardError::MissingNode { node: "/cpus".into() });
}

#[test]
fn reserved_memory_and_memreserve() {
    let mut t = base_tree();
    t.kids.push(
        N::new("reserved-memory")
            .p("#address-cells", cells(&[2]))
            .p("#size-cells", cells(&[2]))
            .p("ranges", vec![])
            .kid(N::new("fw@4f000000").p("reg", cells(&[0, 0x4f00_0000, 0, 0x10_0000])).p("no-map", vec![]))
            .kid(
                N::new("linux,cma")
                    .p("compatible", s("shared-dma-pool"))
                    .p("size", cells(&[0, 0x400_0000]))
                    .p("reusable", vec![]),
            ),
    );
    let b = Board::from_dtb(&t.dtb_with_reserve(&[(0x4000_0000, 0x1000)])).unwrap();
    assert_eq!(b.mem_reserve, [Region::new(0x4000_0000, 0x1000)]);
    assert_eq!(b.reserved_memory.len(), 2);
    let fw = &b.reserved_memory[0];
    assert_eq!(
        (fw.path.as_str(), fw.no_map, fw.regions.as_slice()),
        ("/reserved-memory/fw@4f000000", true, &[Region::new(0x4f00_0000, 0x10_0000)][..])
    );
    let cma = &b.reserved_memory[1];
    assert!(cma.reusable && cma.regions.is_empty());
    assert_eq!(cma.compatible.as_deref(), Some("shared-dma-pool"));
    let all: Vec<_> = b.reserved_regions().collect();
    assert_eq!(all, [Region::new(0x4000_0000, 0x1000), Region::new(0x4f00_0000, 0x10_0000)]);
}

#[test]
fn devices_on_nested_simple_buses_are_translated() {
    let mut t = base_tree();
    t.kids.push(
        N::new("soc@107c000000")
            .p("compatible", s("simple-bus"))
            .p("#address-cells", cells(&[1]))
            .p("#size-cells", cells(&[1]))
            .p("ranges", cells(&[0x7c00_0000, 0x10, 0x7c00_0000, 0x400_0000]))
            .kid(
                N::new("serial@7d001000")
                    .p("compatible", s("arm,pl011"))
                    .p("reg", cells(&[0x7d00_1000, 0x200]))
                    .p("status", s("okay")),
            )
            .kid(
                N::new("bus@7e000000")
                    .p("compatible", s("simple-bus"))
                    .p("#address-cells", cells(&[1]))
                    .p("#size-cells", cells(&[1]))
                    .p("ranges", cells(&[0, 0x7e00_0000, 0x10_0000]))
                    .kid(N::new("dev@100").p("reg", cells(&[0x100, 0x10])).p("status", s("disabled")))
                    // Starts inside the bus's window, ends past it.
                    .kid(N::new("straddle@ffff0").p("reg", cells(&[0xf_fff0, 0x20]))),
            )
            .kid(
                N::new("hidden")
                    .p("compatible", s("simple-bus"))
                    .p("#address-cells", cells(&[1]))
                    .p("#size-cells", cells(&[1]))
                    .kid(N::new("dev@0").p("reg", cells(&[0, 0x10]))),
            )
            .kid(N::new("outside@0").p("reg", cells(&[0x1000, 0x10]))),
    );
    // Not a bus: children are not devices.
    t.kids.push(
        N::new("i2c@1000")
            .p("reg", cells(&[0, 0x1000, 0, 0x100]))
            .p("#address-cells", cells(&[1]))
            .p("#size-cells", cells(&[0]))
            .kid(N::new("eeprom@50").p("reg", cells(&[0x50]))),
    );
    t.at("/chosen").set("stdout-path", s("/soc@107c000000/serial@7d001000"));
    let b = parse(&t).unwrap();
    let uart = b.console.as_ref().unwrap();
    assert_eq!(uart.base, 0x10_7d00_1000, "translated through soc ranges");
    let dev = b.device("/soc@107c000000/bus@7e000000/dev@100").unwrap();
    assert_eq!(dev.regions, [Region::new(0x10_7e00_0100, 0x10)]);
    assert_eq!(dev.status, Status::Disabled);
    assert!(b.device("/soc@107c000000/hidden/dev@0").is_none(), "bus without ranges");
    assert!(b.device("/soc@107c000000/outside@0").is_none(), "outside every range");
    // Seeded bug `dtb-child-larger-than-window` of `cargo xtask mutants`.
    assert!(b.device("/soc@107c000000/bus@7e000000/straddle@ffff0").is_none(), "larger than its window");
    assert!(b.device("/i2c@1000").is_some());
    assert!(b.device("/i2c@1000/eeprom@50").is_none());
    assert!(b.device("/soc@107c000000").is_none(), "bus without reg");

    // A GIC behind the bus is translated too, and the root's interrupt-parent picks it.
    t.at("/soc@107c000000").kids.push(
        N::new("interrupt-controller@7fff9000")
            .p("compatible", s("arm,gic-400"))
            .p("phandle", cells(&[9]))
            .p("reg", cells(&[0x7fff_9000, 0x1000, 0x7fff_a000, 0x2000, 0x7fff_c000, 0x2000, 0x7fff_e000, 0x2000])),
    );
    t.set("interrupt-parent", cells(&[9]));
    let g = parse(&t).unwrap().gic.unwrap();
    assert_eq!(g.version, GicVersion::V2);
    assert_eq!(g.distributor, Region::new(0x10_7fff_9000, 0x1000));
    assert_eq!(g.cpu_interface, Some(Region::new(0x10_7fff_a000, 0x2000)));
    assert_eq!(g.vcpu_interface, Some(Region::new(0x10_7fff_e000, 0x2000)));

    // A bus with a malformed ranges property is an error naming the bus.
    t.at("/soc@107c000000").set("ranges", cells(&[1, 2, 3]));
    let e = err(&t);
    assert!(matches!(&e, BoardError::BadProperty { node, prop: "ranges", .. } if node == "/soc@107c000000"), "{e:?}");
}

#[test]
fn raw_pointer_constructor() {
    let d = base_tree().dtb();
    // SAFETY: `d` holds the whole blob for the duration of the call.
    let b = unsafe { Board::from_ptr(d.as_ptr()) }.unwrap();
    assert_eq!(b, Board::from_dtb(&d).unwrap());
    // SAFETY: null is explicitly allowed.
    let e = unsafe { Board::from_ptr(std::ptr::null()) }.unwrap_err();
    assert!(matches!(e, BoardError::BadHeader { field: "address", .. }));
    // A header claiming more than 2 MiB is refused before anything past it is read.
    let mut h = d[..8].to_vec();
    h[4..8].copy_from_slice(&(3u32 << 20).to_be_bytes());
    // SAFETY: only the first 8 bytes are read when totalsize is over the limit.
    let e = unsafe { Board::from_ptr(h.as_ptr()) }.unwrap_err();
    assert!(matches!(e, BoardError::BadHeader { field: "totalsize", .. }), "{e:?}");
    let mut h = d[..8].to_vec();
    h[0] = 0;
    // SAFETY: only the first 8 bytes are read when the magic is wrong.
    let e = unsafe { Board::from_ptr(h.as_ptr()) }.unwrap_err();
    assert!(matches!(e, BoardError::BadHeader { field: "magic", .. }));
    assert_eq!(board::dtb_total_size(&d), Ok(d.len()));
}

#[test]
fn writer_refuses_malformed_trees() {
    let mut w = board::FdtWriter::new();
    assert!(w.property("x", &[]).is_err(), "property outside a node");
    assert!(w.begin_node("notroot").is_err());
    w.begin_node("").unwrap();
    assert!(w.begin_node("").is_err(), "empty child name");
    assert!(w.begin_node("a/b").is_err());
    w.begin_node("a").unwrap();
    w.end_node().unwrap();
    assert!(w.property("late", &[]).is_err(), "property after a child");
    assert!(w.add_mem_reserve(1, 0).is_err());
    w.end_node().unwrap();
    assert!(w.end_node().is_err());
    assert!(w.begin_node("second-root").is_err());
    let unfinished = {
        let mut w = board::FdtWriter::new();
        w.begin_node("").unwrap();
        w.finish()
    };
    assert!(unfinished.is_err());
    // Names real trees use that vm-fdt would refuse.
    let t = N::new("")
        .p("#address-cells", cells(&[2]))
        .p("a-property-name-longer-than-31-characters", vec![])
        .kid(N::new("__symbols__").p("uart0", s("/uart@0")));
    let d = t.dtb();
    assert!(board::dtb_total_size(&d).is_ok());
}

/// A Pi 5-like PCIe bridge behind a bus: its `ranges` are windows (32-bit and 64-bit memory),
/// its children are PCI functions (3 address cells) and not memory-mapped devices; a device
/// with `ranges` and children (a GIC with its ITS) has them descended.
#[test]
fn sub_devices_and_pci_bridge_windows() {
    let mut t = base_tree();
    t.kids.push(
        N::new("axi")
            .p("compatible", s("simple-bus"))
            .p("#address-cells", cells(&[2]))
            .p("#size-cells", cells(&[2]))
            .p("ranges", cells(&[0, 0, 0, 0, 0x20, 0]))
            .kid(
                N::new("pcie@1000120000")
                    .p("compatible", s("brcm,bcm2712-pcie"))
                    .p("device_type", s("pci"))
                    .p("#address-cells", cells(&[3]))
                    .p("#size-cells", cells(&[2]))
                    .p("reg", cells(&[0x10, 0x0012_0000, 0, 0x9310]))
                    .p(
                        "ranges",
                        cells(&[
                            0x0200_0000,
                            0,
                            0,
                            0x1f,
                            0,
                            0,
                            0xffff_fffc, // 32-bit memory
                            0x4300_0000,
                            4,
                            0,
                            0x1c,
                            0,
                            3,
                            0, // 64-bit prefetchable memory
                        ]),
                    )
                    .kid(
                        N::new("pci@0,0")
                            .p("device_type", s("pci"))
                            .p("#address-cells", cells(&[3]))
                            .p("#size-cells", cells(&[2]))
                            .p("reg", cells(&[0, 0, 0, 0, 0]))
                            .p("ranges", vec![])
                            .kid(N::new("rp1").p("reg", cells(&[0x0200_0000, 0, 0, 0, 0x40_0000]))),
                    ),
            ),
    );
    t.kids.push(
        N::new("intc@8000000")
            .p("compatible", s("arm,gic-v3"))
            .p("#address-cells", cells(&[2]))
            .p("#size-cells", cells(&[2]))
            .p("ranges", vec![])
            .p("reg", cells(&[0, 0x0800_0000, 0, 0x1_0000, 0, 0x080a_0000, 0, 0xf6_0000]))
            .kid(
                N::new("its@8080000")
                    .p("compatible", s("arm,gic-v3-its"))
                    .p("reg", cells(&[0, 0x0808_0000, 0, 0x2_0000])),
            ),
    );
    let b = parse(&t).unwrap();
    let its = b.device("/intc@8000000/its@8080000").expect("the ITS under the GIC node is a device");
    assert_eq!(its.regions, [Region::new(0x0808_0000, 0x2_0000)]);
    let pcie = b.device("/axi/pcie@1000120000").unwrap();
    assert_eq!(pcie.regions, [Region::new(0x10_0012_0000, 0x9310)]);
    assert_eq!(
        pcie.windows,
        [
            Window {
                region: Region::new(0x1f_0000_0000, 0xffff_fffc),
                bus_address: 0,
                space: WindowSpace::Mem32,
                prefetchable: false
            },
            Window {
                region: Region::new(0x1c_0000_0000, 3 << 32),
                bus_address: 4 << 32,
                space: WindowSpace::Mem64,
                prefetchable: true
            },
        ]
    );
    assert!(b.devices.iter().all(|d| !d.path.contains("pci@0,0")), "PCI functions are not MMIO devices");

    // A bridge window that does not fit its cells is an error naming the bridge.
    t.at("/axi/pcie@1000120000").set("ranges", cells(&[0x0200_0000, 0, 0, 0x1f, 0, 0]));
    let e = err(&t);
    assert!(
        matches!(&e, BoardError::BadProperty { node, prop: "ranges", .. } if node == "/axi/pcie@1000120000"),
        "{e:?}"
    );
}

/// A PCI bridge's `ranges` entries carry a parent address of the parent bus's cells: a bus
/// with no address cells (an identity `ranges`, so its children's `reg` still reach the CPU)
/// leaves the windows without a parent address, and the bridge is refused by name.
#[test]
fn pci_bridge_under_a_bus_without_address_cells_is_refused() {
    let mut t = base_tree();
    t.kids.push(
        N::new("bus")
            .p("compatible", s("simple-bus"))
            .p("#address-cells", cells(&[0]))
            .p("#size-cells", cells(&[1]))
            .p("ranges", vec![])
            .kid(
                N::new("pcie")
                    .p("device_type", s("pci"))
                    .p("#address-cells", cells(&[3]))
                    .p("#size-cells", cells(&[2]))
                    .p("reg", cells(&[0x1000]))
                    .p("ranges", cells(&[0x0200_0000, 0, 0, 0, 0x1000])),
            ),
    );
    assert_eq!(
        err(&t),
        bad_prop("/bus/pcie", "ranges", "a PCI bridge needs 3 address cells, 1-2 size cells and a 1-2 cell parent")
    );
}

#[test]
fn timer_interrupts() {
    let timer = |ints: &[u32]| {
        let mut t = base_tree();
        t.kids.push(N::new("timer").p("compatible", s("arm,armv8-timer")).p("interrupts", cells(ints)));
        t
    };
    // PPIs 13, 14, 11, 10 (QEMU's and the Pi 5's), 3 cells each (the GIC's default).
    let b = parse(&timer(&[1, 13, 0xf04, 1, 14, 0xf04, 1, 11, 0xf04, 1, 10, 0xf04])).unwrap();
    let t = b.timer.unwrap();
    assert_eq!(
        (t.path.as_str(), t.secure_phys, t.phys, t.virt, t.hyp_phys),
        ("/timer", Some(29), Some(30), Some(27), Some(26))
    );
    // Fewer timers listed: the missing ones are None; an SPI is INTID 32 + n.
    let t = parse(&timer(&[0, 5, 4, 1, 14, 4])).unwrap().timer.unwrap();
    assert_eq!((t.secure_phys, t.phys, t.virt), (Some(37), Some(30), None));
    // 4 cells (a GICv3 with PPI partitions).
    let mut t4 = timer(&[1, 13, 4, 0, 1, 14, 4, 0]);
    t4.at("/intc@8000000").set("#interrupt-cells", cells(&[4]));
    assert_eq!(parse(&t4).unwrap().timer.unwrap().phys, Some(30));
    assert_eq!(
        err(&timer(&[1, 13, 4, 1])),
        bad_prop("/timer", "interrupts", "not a whole number of interrupt specifiers")
    );
    assert_eq!(err(&timer(&[1, 16, 4])), bad_prop("/timer", "interrupts", "neither an SPI nor a PPI in range"));
    assert_eq!(err(&timer(&[2, 1, 4])), bad_prop("/timer", "interrupts", "neither an SPI nor a PPI in range"));
    let mut t = base_tree();
    t.kids.push(N::new("timer").p("compatible", s("arm,armv8-timer")));
    assert_eq!(err(&t), BoardError::MissingProperty { node: "/timer".into(), prop: "interrupts" });
    let mut t = timer(&[1, 13, 4]);
    t.at("/").unset("interrupt-parent");
    assert_eq!(err(&t), bad_prop("/timer", "interrupts", "no interrupt-parent"));
    assert_eq!(parse(&base_tree()).unwrap().timer, None);
}

#[test]
fn pmu_interrupts() {
    let pmu = |compatible: &str, ints: Option<&[u32]>| {
        let mut t = base_tree();
        let mut n = N::new("pmu").p("compatible", s(compatible));
        if let Some(i) = ints {
            n = n.p("interrupts", cells(i));
        }
        t.kids.push(n);
        t
    };
    // QEMU's: one PPI for every CPU.
    let p = parse(&pmu("arm,armv8-pmuv3", Some(&[1, 7, 4]))).unwrap().pmu.unwrap();
    assert_eq!((p.path.as_str(), p.interrupts.as_slice()), ("/pmu", &[23][..]));
    // A core's own compatible, one SPI per CPU.
    let p = parse(&pmu("arm,cortex-a76-pmu", Some(&[0, 16, 4, 0, 17, 4]))).unwrap().pmu.unwrap();
    assert_eq!(p.interrupts, [48, 49]);
    // No interrupts: counting only.
    assert_eq!(parse(&pmu("arm,armv8-pmuv3", None)).unwrap().pmu.unwrap().interrupts, []);
    assert_eq!(
        err(&pmu("arm,armv8-pmuv3", Some(&[1, 7]))),
        bad_prop("/pmu", "interrupts", "not a whole number of interrupt specifiers")
    );
    // Not a CPU PMU: the DynamIQ cluster's, an Arm SMMU's PMCG, another vendor's.
    assert_eq!(parse(&pmu("arm,dsu-pmu", Some(&[0, 1, 4]))).unwrap().pmu, None);
    assert_eq!(parse(&pmu("arm,smmu-v3-pmcg", Some(&[0, 1, 4]))).unwrap().pmu, None);
    assert_eq!(parse(&pmu("vendor,some-pmu", Some(&[0, 1, 4]))).unwrap().pmu, None);
    assert_eq!(parse(&base_tree()).unwrap().pmu, None);
}

/// Property names at every offset of a shared string (`linux,phandle`, `phandle` and `handle`
/// are one string at three offsets, as dtc merges suffixes), in changing order: each property
/// keeps its own name, however often its offset recurs (the parser checks each offset's name
/// once and remembers it).
#[test]
fn property_names_sharing_their_bytes() {
    let strings = b"#address-cells\0#size-cells\0linux,phandle\0";
    let (ac, sc, lp) = (0u32, 15u32, 27u32);
    let token = |v: u32| v.to_be_bytes();
    let prop = |structs: &mut Vec<u8>, nameoff: u32, v: u32| {
        structs.extend_from_slice(&token(3));
        structs.extend_from_slice(&token(4));
        structs.extend_from_slice(&token(nameoff));
        structs.extend_from_slice(&token(v));
    };
    let mut structs = Vec::new();
    structs.extend_from_slice(&token(1));
    structs.extend_from_slice(&[0; 4]);
    prop(&mut structs, ac, 2);
    prop(&mut structs, sc, 2);
    let order = [lp, lp + 6, lp + 8, sc + 1, lp + 6, lp, sc + 6, lp + 8, sc];
    for (k, chunk) in order.chunks(3).enumerate() {
        structs.extend_from_slice(&token(1));
        structs.extend_from_slice(format!("n{k}\0\0").as_bytes());
        for (j, &off) in chunk.iter().enumerate() {
            prop(&mut structs, off, j as u32);
        }
        structs.extend_from_slice(&token(2));
    }
    structs.extend_from_slice(&token(2));
    structs.extend_from_slice(&token(9));
    let d = raw_blob(&structs, strings);
    let name_at = |off: u32| {
        let rest = &strings[off as usize..];
        std::str::from_utf8(&rest[..rest.iter().position(|&b| b == 0).unwrap()]).unwrap()
    };
    // The guest's tree re-emits every property under the name the parser read.
    let spec = board::GuestSpec { memory: vec![Region::new(0x4000_0000, 0x100_0000)], ..Default::default() };
    let out = board::guest_dtb(&d, &spec).unwrap();
    let f = fdt::Fdt::new(&out).unwrap();
    for (k, chunk) in order.chunks(3).enumerate() {
        let n = f.find_node(&format!("/n{k}")).unwrap();
        let got: Vec<&str> = n.properties().map(|p| p.name).collect();
        let want: Vec<&str> = chunk.iter().map(|&o| name_at(o)).collect();
        assert_eq!(got, want, "/n{k}");
    }
}
