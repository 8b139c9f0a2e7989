//! The DTB reader's address translation against a reference model: a device on a simple bus
//! is where the bus's `ranges` put it, or not a device at all.

mod common;

use board::{Board, Region};
use common::{base_tree, cells, s, N};
use proptest::prelude::*;

/// One `ranges` window: (child address, parent address, length).
type Window = (u64, u64, u64);

/// The model: the first window holding all of `[addr, addr + size)` translates it; none, and
/// the node is not a memory-mapped device.
fn model(windows: &[Window], addr: u64, size: u64) -> Option<u64> {
    windows.iter().find(|&&(c, _, len)| addr >= c && addr + size <= c + len).map(|&(c, p, _)| p + (addr - c))
}

fn windows() -> impl Strategy<Value = Vec<Window>> {
    prop::collection::vec((0u64..0x100, 0u64..0x1000, 1u64..0x40), 1..4).prop_map(|v| {
        // Child windows 16 MiB apart (so they never overlap), parents anywhere below 2^44.
        v.iter()
            .enumerate()
            .map(|(i, &(c, p, len))| ((i as u64) << 24 | c << 12, p << 32 | c << 12, len << 12))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// A device whose `reg` starts near a window (before it, inside, at its end, past it) and is
    /// from 1 byte to larger than the window: translated exactly as the model says, and absent
    /// when the model finds no window (a child larger than its bus's window included).
    #[test]
    fn a_device_is_where_the_bus_ranges_put_it(
        ws in windows(),
        pick in 0usize..4,
        offset in -0x40i64..0x41000,
        size in prop_oneof![1u64..0x100, 0x1000u64..0x50000],
    ) {
        let (c, _, _) = ws[pick % ws.len()];
        let addr = (c as i64 + offset).max(0) as u64;
        let ranges: Vec<u32> = ws.iter().flat_map(|&(c, p, len)| [c as u32, (p >> 32) as u32, p as u32, len as u32]).collect();
        let mut t: N = base_tree();
        t.kids.push(
            N::new("soc")
                .p("compatible", s("simple-bus"))
                .p("#address-cells", cells(&[1]))
                .p("#size-cells", cells(&[1]))
                .p("ranges", cells(&ranges))
                .kid(N::new("dev@0").p("reg", cells(&[addr as u32, size as u32]))),
        );
        let b = Board::from_dtb(&t.dtb()).unwrap();
        let got = b.device("/soc/dev@0").map(|d| d.regions.clone());
        let want = model(&ws, addr, size).map(|phys| vec![Region::new(phys, size)]);
        prop_assert_eq!(got, want, "windows {:x?}, reg {:#x}+{:#x}", ws, addr, size);
    }
}
