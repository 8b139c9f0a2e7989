//! Fuzz targets of every parser that reads input the project does not control, and a small
//! seeded mutation driver so `cargo xtask test` runs each for a moment (deterministic, no
//! coverage feedback); `cargo xtask fuzz` runs the same targets under libFuzzer (coverage-guided,
//! `fuzz/libfuzzer/`) for as long as asked and reports the executions.
//!
//! Each target must return for every input, never panic, and check what it can about the
//! result: an accepted Image header's footprint does not overflow; a guest DTB the writer
//! produced parses again and says what the spec asked (the host's CPUs, or all but a removed
//! one with no reference to it left); boot arguments that were accepted
//! re-parse to the same thing and hold each of the table's words at most once.

use abi::image::ImageHeader;
use board::{guest_dtb, Board, GuestSpec, PsciMethod, Region};
use bootargs::{Table, Word};

/// A fuzz target: one input.
pub type Target = fn(&[u8]);

/// Every target, by name (the libfuzzer/ binaries have the same names).
pub const TARGETS: &[(&str, Target)] = &[
    ("image_header", image_header),
    ("dtb", dtb),
    ("guest_dtb", guest_dtb_target),
    ("bootargs", bootargs_target),
    ("efi", efi_target),
];

/// The Image header parser (the hypervisor loads the guest kernel with it).
pub fn image_header(data: &[u8]) {
    if let Ok(h) = ImageHeader::parse(data) {
        assert!(h.text_offset.checked_add(h.image_size).is_some(), "accepted an overflowing footprint");
        assert!(h.image_size >= data.len() as u64 || h.image_size == 0, "image_size below the file");
        assert!(h.text_offset < 2 << 20 && h.text_offset.is_multiple_of(4096));
    }
}

/// The DTB parser (both binaries read the DTB they are given).
pub fn dtb(data: &[u8]) {
    let _ = board::dtb_total_size(data);
    if let Ok(b) = Board::from_dtb(data) {
        for r in &b.memory {
            assert!(r.base.checked_add(r.size).is_some(), "memory range overflows");
        }
        // `/chosen/module@…` nodes: non-empty, inside 64 bits, never overlapping.
        let m: Vec<board::Region> = b.module_regions().collect();
        for (i, r) in m.iter().enumerate() {
            assert!(r.size > 0 && r.base.checked_add(r.size).is_some(), "bad module region {r:?}");
            assert!(m[i + 1..].iter().all(|o| !o.overlaps(r)), "overlapping modules");
        }
    }
}

/// What the hypervisor's EFI entry reads from firmware: its own PE header (`abi::pe::parse`,
/// also run by the Image check), the load options (`hypcore::efi::command_line`) and a memory
/// map (`hypcore::efi::ram_from_map`: descriptors from the bytes, 28 each).
pub fn efi_target(data: &[u8]) {
    if let Ok(info) = abi::pe::parse(data) {
        assert!(info.entry < info.size_of_image, "entry point outside the image");
    }
    if let Ok(Some(o)) = hypcore::efi::command_line(data) {
        assert!(o.cmdline.bytes().all(|c| (0x20..0x7f).contains(&c)), "non-printable command line");
        assert!(!o.cmdline.split(' ').any(|w| w.starts_with("initrd=")), "initrd= left in");
    }
    let rd = |c: &[u8], o: usize, n: usize| c[o..o + n].iter().rev().fold(0u64, |a, &b| (a << 8) | u64::from(b));
    let descs: std::vec::Vec<hypcore::efi::Descriptor> = data
        .chunks_exact(28)
        .map(|c| hypcore::efi::Descriptor {
            ty: rd(c, 0, 4) as u32 & 0x1f,
            start: rd(c, 4, 8),
            pages: rd(c, 12, 8) >> 32,
            attr: rd(c, 20, 8),
        })
        .collect();
    if let Ok(ram) = hypcore::efi::ram_from_map(&descs) {
        for w in ram.windows(2) {
            assert!(w[0].end < w[1].start, "RAM ranges unsorted, overlapping or not merged");
        }
        for r in &ram {
            assert!(!r.is_empty() && r.start % 4096 == 0 && r.end % 4096 == 0, "bad RAM range {r:?}");
        }
    }
}

/// The guest-DTB writer on whatever the parser accepted: the output must parse, with the
/// memory and boot arguments the spec gave.
pub fn guest_dtb_target(data: &[u8]) {
    let Ok(host) = Board::from_dtb(data) else { return };
    let base = host.memory.first().map_or(0x4000_0000, |r| r.base & !0xfff);
    let spec = GuestSpec {
        memory: vec![Region::new(base, 64 << 20)],
        bootargs: Some("test=smccc".into()),
        psci_method: Some(PsciMethod::Hvc),
        ..Default::default()
    };
    let Ok(out) = guest_dtb(data, &spec) else { return };
    let g = Board::from_dtb(&out).expect("the guest DTB the writer produced does not parse");
    assert_eq!(g.memory.len(), 1, "guest memory");
    assert_eq!((g.memory[0].base, g.memory[0].size), (base, 64 << 20));
    assert_eq!(g.bootargs.as_deref(), Some("test=smccc"));
    let mpidrs = |b: &Board| b.cpus.iter().map(|c| c.mpidr).collect::<Vec<_>>();
    assert_eq!(mpidrs(&g), mpidrs(&host), "the guest's CPUs");
    // Without its last CPU: the others stay, nothing names the removed one.
    let Some(last) = host.cpus.last().map(|c| c.mpidr).filter(|_| host.cpus.len() > 1) else { return };
    let out = match guest_dtb(data, &GuestSpec { remove_cpus: vec![last], ..spec }) {
        Ok(out) => out,
        Err(board::BoardError::BadProperty { why, .. }) if why.contains("left out") => {
            panic!("the trimming left a reference to the removed CPU (guest_dtb's own check)")
        }
        Err(_) => return,
    };
    assert_eq!(board::dangling_cpu_refs(&out).ok(), Some(vec![]), "a reference to a removed CPU is left");
    let g = Board::from_dtb(&out).expect("the trimmed guest DTB does not parse");
    let mut want = mpidrs(&host);
    want.pop();
    assert_eq!(mpidrs(&g), want, "the CPUs left");
}

const WORDS: &[Word] = &[
    Word::choice("bbml2", &["auto", "on", "off"], ""),
    Word::flag("bbml2_unsafe_override", ""),
    Word::list("test", &["panic", "undef", "smccc", "storm"], ""),
    Word::uint("split.iters", 1, 1_000_000, ""),
    Word::size("hyp.pool", 16 << 20, 1 << 40, ""),
    Word::size("hyp.slotpool", 2 << 20, 1 << 40, ""),
];
const TABLE: Table = Table { owner: "fuzz", words: WORDS, foreign: &[("xyz.", "someone else's")] };

/// The strict boot-argument parser and the size parser.
pub fn bootargs_target(data: &[u8]) {
    let Ok(line) = core::str::from_utf8(data) else { return };
    let _ = bootargs::parse_size(line);
    let _ = bootargs::parse_uint(line);
    match bootargs::parse(line, &TABLE) {
        Ok(a) => {
            let again: Vec<&str> = a.words().collect();
            assert_eq!(bootargs::parse(&again.join(" "), &TABLE).as_ref(), Ok(&a), "re-parse differs");
            // The reference model of acceptance: every word of the line names a word of the
            // table, no name twice anywhere in the line (not only next to each other).
            let names: Vec<&str> =
                line.split_ascii_whitespace().map(|w| w.split_once('=').map_or(w, |(n, _)| n)).collect();
            for (i, n) in names.iter().enumerate() {
                assert!(WORDS.iter().any(|w| w.name == *n), "accepted a word not in the table: {n:?}");
                assert!(!names[..i].contains(n), "accepted {n:?} twice in {line:?}");
            }
            if let Some(s) = a.size("hyp.pool") {
                assert!((16 << 20..=1 << 40).contains(&s));
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// xorshift64*: deterministic, so a failure reproduces from its seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}

const INTERESTING: [u64; 12] = [
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x1000,
    0x20_0000,
    0xffff_ffff,
    0x8000_0000_0000_0000,
    0xffff_ffff_ffff_f000,
    u64::MAX,
    0x28,
];

/// One mutant of `seed`: bit flips, interesting little- and big-endian words, truncation,
/// deletion, duplication, bytes from `dict`.
pub fn mutate(rng: &mut Rng, seed: &[u8], dict: &[&[u8]]) -> Vec<u8> {
    let mut d = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = d.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                d[i] ^= 1 << rng.below(8);
            }
            1 | 2 if len >= 8 => {
                let i = rng.below(len - 7) & !if rng.below(2) == 0 { 7 } else { 3 };
                let v = if rng.below(2) == 0 { INTERESTING[rng.below(INTERESTING.len())] } else { rng.next_u64() };
                let bytes = if rng.below(2) == 0 { v.to_le_bytes() } else { v.to_be_bytes() };
                let w = [8, 4][rng.below(2)];
                d[i..i + w].copy_from_slice(&bytes[8 - w..]);
            }
            3 => d.truncate(rng.below(len + 1)),
            4 if len > 0 => {
                let a = rng.below(len);
                let b = (a + rng.below(64)).min(len);
                d.drain(a..b);
            }
            5 if len > 0 => {
                let a = rng.below(len);
                let b = (a + rng.below(64)).min(len);
                let chunk = d[a..b].to_vec();
                let at = rng.below(d.len() + 1);
                d.splice(at..at, chunk);
            }
            6 if !dict.is_empty() => {
                let word = dict[rng.below(dict.len())];
                let at = rng.below(d.len() + 1);
                d.splice(at..at, word.iter().copied());
            }
            _ => {
                let at = rng.below(d.len() + 1);
                d.insert(at, rng.next_u64() as u8);
            }
        }
    }
    d
}

/// Runs `target` on every seed and on `iterations` mutants of them; returns the executions.
/// A panic in the target is a finding: the failing input is written to `target/fuzz-findings/`
/// and the panic goes on (failing the test).
pub fn drive(name: &str, target: Target, seeds: &[Vec<u8>], dict: &[&[u8]], iterations: u64, seed: u64) -> u64 {
    let mut rng = Rng(seed | 1);
    let mut execs = 0;
    let mut run = |input: &[u8]| {
        if let Err(p) = std::panic::catch_unwind(|| target(input)) {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/fuzz-findings");
            let _ = std::fs::create_dir_all(&dir);
            let file = dir.join(format!("{name}-{seed:x}-{execs}"));
            let _ = std::fs::write(&file, input);
            eprintln!("fuzz: {name}: finding saved to {}", file.display());
            std::panic::resume_unwind(p);
        }
        execs += 1;
    };
    for s in seeds {
        run(s);
    }
    for _ in 0..iterations {
        let base = &seeds[rng.below(seeds.len())];
        let m = mutate(&mut rng, base, dict);
        run(&m);
    }
    execs
}

#[cfg(test)]
mod tests;
