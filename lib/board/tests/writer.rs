//! `FdtWriter`'s strings block: each property name once, in the order of first use, found
//! again through its hash table exactly as a linear search of the names so far would; and the
//! blob built in place, memory reservations added after the first node included.

use board::FdtWriter;
use proptest::prelude::*;

/// The names a test draws from: short ones over a small alphabet (each a prefix or suffix of
/// others, so a look-up that matched a prefix would show) and enough long ones to make the
/// table grow several times.
fn pool() -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for len in 1..=3 {
        for k in 0..3usize.pow(len) {
            let mut s = String::new();
            let mut x = k;
            for _ in 0..len {
                s.push(['a', 'b', ','][x % 3]);
                x /= 3;
            }
            v.push(s);
        }
    }
    v.extend((0..300).map(|k| format!("name-{k}")));
    v
}

/// The strings block a linear search gives: every name once, in the order first used.
fn linear(names: &[&str]) -> Vec<u8> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for &n in names {
        if !seen.contains(&n) {
            seen.push(n);
            out.extend_from_slice(n.as_bytes());
            out.push(0);
        }
    }
    out
}

fn strings_block(dtb: &[u8]) -> &[u8] {
    let be = |o: usize| u32::from_be_bytes(dtb[o..o + 4].try_into().unwrap()) as usize;
    &dtb[be(12)..be(12) + be(32)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every property reads back with the name it was written with, and the strings block is
    /// the linear search's.
    #[test]
    fn names_as_a_linear_search(picks in prop::collection::vec(0usize..339, 1..600)) {
        let pool = pool();
        let names: Vec<&str> = picks.iter().map(|&k| pool[k].as_str()).collect();
        let mut w = FdtWriter::new();
        w.begin_node("").unwrap();
        // Several nodes, so a name recurs in another node as well as in its own.
        for (k, chunk) in names.chunks(50).enumerate() {
            w.begin_node(&format!("n{k}")).unwrap();
            for (j, n) in chunk.iter().enumerate() {
                w.property_u32(n, j as u32).unwrap();
            }
            w.end_node().unwrap();
        }
        w.end_node().unwrap();
        let dtb = w.finish().unwrap();
        let expect = linear(&names);
        prop_assert_eq!(strings_block(&dtb), expect.as_slice());
        let f = fdt::Fdt::new(&dtb).unwrap();
        let read: Vec<&str> = f.all_nodes().flat_map(|n| n.properties().map(|p| p.name)).collect();
        prop_assert_eq!(read, names);
    }
}

/// A reservation added after the first node lands where one added before would: the blob is
/// the same byte for byte.
#[test]
fn reservations_after_the_first_node() {
    let rsv = [(0x4000_0000u64, 0x1000u64), (0x4800_0000, 0x2000), (0x5000_0000, 0x10)];
    let body = |w: &mut FdtWriter| {
        w.property_u32("#address-cells", 2).unwrap();
        w.begin_node("chosen").unwrap();
        w.property_str("bootargs", "x").unwrap();
        w.end_node().unwrap();
    };
    let mut early = FdtWriter::new();
    for (a, s) in rsv {
        early.add_mem_reserve(a, s).unwrap();
    }
    early.begin_node("").unwrap();
    body(&mut early);
    early.end_node().unwrap();
    let early = early.finish().unwrap();

    for first in 0..=rsv.len() {
        let mut w = FdtWriter::with_capacity(16, 16);
        w.set_boot_cpuid_phys(0);
        for (a, s) in &rsv[..first] {
            w.add_mem_reserve(*a, *s).unwrap();
        }
        w.begin_node("").unwrap();
        for (a, s) in &rsv[first..] {
            w.add_mem_reserve(*a, *s).unwrap();
        }
        body(&mut w);
        w.end_node().unwrap();
        assert_eq!(w.finish().unwrap(), early, "{first} reservations before the first node");
    }
    let f = fdt::Fdt::new(&early).unwrap();
    let got: Vec<(u64, u64)> = f.memory_reservations().map(|r| (r.address() as u64, r.size() as u64)).collect();
    assert_eq!(got, rsv);
}

/// Names whose hashes collide, one the other's prefix ("abhedQ.j" hashes as "ab" under
/// FNV-1a): the table compares the whole name, its NUL included.
#[test]
fn colliding_names_stay_apart() {
    for names in [["abhedQ.j", "ab"], ["ab", "abhedQ.j"]] {
        let mut w = FdtWriter::new();
        w.begin_node("").unwrap();
        for n in names.iter().chain(&names) {
            w.property_empty(n).unwrap();
        }
        w.end_node().unwrap();
        let dtb = w.finish().unwrap();
        assert_eq!(strings_block(&dtb), linear(&names), "{names:?}");
        let f = fdt::Fdt::new(&dtb).unwrap();
        let read: Vec<&str> = f.root().properties().map(|p| p.name).collect();
        assert_eq!(read, [names, names].concat());
    }
}
