//! Thousands of random mutations and truncations of real DTBs: the parser and the guest DTB
//! writer must return `Ok` or `Err`, never panic, and whatever `guest_dtb` writes must parse.

mod common;

use std::collections::BTreeMap;

use board::{guest_dtb, Board, GuestSpec, Region};
use common::{base_tree, compact, Qemu, Rng};

const INTERESTING: [u32; 14] =
    [0, 1, 2, 3, 4, 9, 0x10, 0x28, 0x7fff_ffff, 0x8000_0000, 0xffff_fff0, 0xffff_fffc, 0xffff_ffff, 0xd00d_feed];

fn mutate(rng: &mut Rng, seed: &[u8]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = d.len();
        if len < 40 {
            break;
        }
        match rng.below(9) {
            // Flip bits anywhere.
            0 | 1 => {
                let i = rng.below(len);
                d[i] ^= 1 << rng.below(8);
            }
            // An interesting or random word at an aligned offset (tokens, lengths, offsets).
            2 | 3 => {
                let i = rng.below(len / 4) * 4;
                let v = if rng.below(2) == 0 { INTERESTING[rng.below(INTERESTING.len())] } else { rng.next() as u32 };
                d[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            // A header field.
            4 => {
                let i = rng.below(10) * 4;
                let v = INTERESTING[rng.below(INTERESTING.len())].wrapping_add(rng.below(64) as u32);
                d[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            // Truncate.
            5 => d.truncate(rng.below(len + 1)),
            // Delete a chunk.
            6 => {
                let a = rng.below(len);
                let b = (a + rng.below(64)).min(len);
                d.drain(a..b);
            }
            // Duplicate a chunk.
            7 => {
                let a = rng.below(len);
                let b = (a + rng.below(64)).min(len);
                let chunk = d[a..b].to_vec();
                let at = rng.below(d.len());
                d.splice(at..at, chunk);
            }
            // A byte set to NUL, '/', '@' or 0xff (names and strings).
            _ => {
                let i = rng.below(len);
                d[i] = [0, b'/', b'@', 0xff][rng.below(4)];
            }
        }
    }
    // Often make totalsize agree with the new length, so mutants get past the header checks.
    if d.len() >= 40 && d.len() != seed.len() && rng.below(2) == 0 {
        let n = d.len() as u32;
        d[4..8].copy_from_slice(&n.to_be_bytes());
    }
    d
}

fn outcome(r: &Result<Board, board::BoardError>) -> String {
    match r {
        Ok(_) => "ok".into(),
        Err(e) => format!("{e:?}").split([' ', '{', '(']).next().unwrap().to_string(),
    }
}

#[test]
fn random_mutations_never_panic() {
    let seeds: Vec<(String, Vec<u8>)> = vec![
        ("qemu-gicv3-smp4".into(), compact(&Qemu::default().dtb())),
        (
            "qemu-gicv2-initrd".into(),
            compact(&Qemu { gic: 2, smp: 2, initrd: Some(64), append: Some("x y"), ..Qemu::default() }.dtb()),
        ),
        ("synthetic".into(), base_tree().dtb_with_reserve(&[(0x4000_0000, 0x1000)])),
    ];
    let spec = GuestSpec {
        memory: vec![Region::new(0x4000_0000, 0x1000_0000)],
        bootargs: Some("guest".into()),
        initrd: Some(Region::new(0x4800_0000, 0x1000)),
        reserved: vec![Region::new(0x4f00_0000, 0x1000)],
        remove: vec![],
        disable: vec![],
        psci_method: None,
        remove_cpus: vec![],
        extra_devices: vec![],
        hide_el2: true,
    };
    let per_seed = 3000;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for (name, seed) in &seeds {
        assert!(Board::from_dtb(seed).is_ok(), "{name}: seed must parse");
        for _ in 0..per_seed {
            let m = mutate(&mut rng, seed);
            let r = Board::from_dtb(&m);
            if let Err(e) = &r {
                assert!(!e.to_string().is_empty());
            }
            *tally.entry(outcome(&r)).or_default() += 1;
            if m.len() >= 8 {
                let mut padded = m.clone();
                let total = board::dtb_total_size(&m).unwrap_or(0).min(board::MAX_DTB_SIZE);
                padded.resize(padded.len().max(total), 0);
                // SAFETY: `padded` is live and covers every byte `from_ptr` may read: 8 header
                // bytes, then `totalsize` bytes only when that is at most MAX_DTB_SIZE.
                let via_ptr = unsafe { Board::from_ptr(padded.as_ptr()) };
                assert_eq!(via_ptr.is_ok(), Board::from_dtb(&padded).is_ok());
            }
            if let Ok(out) = guest_dtb(&m, &spec) {
                // The writer's output is always a well-formed tree.
                let again = guest_dtb(&out, &spec).expect("guest DTB of a guest DTB");
                assert!(again == out, "guest_dtb is not idempotent");
                if r.is_ok() {
                    let g = Board::from_dtb(&out).expect("guest DTB of a parsable host parses");
                    assert_eq!(g.memory, spec.memory);
                }
            }
        }
    }
    let total: usize = tally.values().sum();
    println!("{total} mutants: {tally:?}");
    assert_eq!(total, seeds.len() * per_seed);
    // The mutations must reach past the header checks, or this test proves little.
    assert!(tally.get("ok").copied().unwrap_or(0) > total / 50, "{tally:?}");
    assert!(tally.get("BadStructure").copied().unwrap_or(0) > total / 50, "{tally:?}");
    assert!(tally.get("BadProperty").copied().unwrap_or(0) > 0, "{tally:?}");
}

/// Evidence for the pre-validation: `fdt` 0.1.5 alone panics on inputs this crate rejects
/// cleanly.
#[test]
fn fdt_alone_panics_where_board_returns_errors() {
    let seed = base_tree().dtb();
    let mut rng = Rng(42);
    let mut fdt_panics = 0;
    for _ in 0..2000 {
        let m = mutate(&mut rng, &seed);
        let raw = std::panic::catch_unwind(|| {
            if let Ok(f) = fdt::Fdt::new(&m) {
                let n = f.all_nodes().count();
                let props: usize = f.all_nodes().map(|n| n.properties().count()).sum();
                let _ = f.memory_reservations().count();
                let _ = (n, props);
            }
        });
        if raw.is_err() {
            fdt_panics += 1;
            assert!(Board::from_dtb(&m).is_err());
        }
    }
    println!("fdt 0.1.5 alone panicked on {fdt_panics} of 2000 mutants");
    assert!(fdt_panics > 0, "fdt no longer panics on malformed input: the validation could be relaxed");
}
