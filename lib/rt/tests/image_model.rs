//! The Image header's stamp against a model of what a loader may be handed: a stamped file
//! with one byte changed anywhere in it is refused, unless the change is in the stamp's magic
//! (then it is a Linux Image, checked for the header only); a file cut short is refused; a file
//! followed by a loader's padding is accepted as long as `image_size` covers it.

use proptest::prelude::*;
use rt::image::{ImageHeader, HEADER_SIZE, MAGIC, MAGIC_OFFSET, STAMP_OFFSET};

/// A stamped image of `len` bytes (`image_size` = `len + bss`) with pseudo-random contents.
fn image(len: usize, bss: u64, seed: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
    f[..HEADER_SIZE].fill(0);
    f[MAGIC_OFFSET..MAGIC_OFFSET + 4].copy_from_slice(&MAGIC.to_le_bytes());
    f[24..32].copy_from_slice(&(1u64 << 1 | 1 << 3).to_le_bytes());
    ImageHeader::patch(&mut f, len as u64 + bss).unwrap();
    f
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn one_changed_byte_is_refused_unless_it_unstamps(
        len in HEADER_SIZE..600usize, bss in 0u64..64, seed: u8, at: prop::sample::Index, flip in 1u8..=255,
    ) {
        let good = image(len, bss, seed);
        let h = ImageHeader::parse(&good).unwrap();
        let at = at.index(len);
        let mut bad = good.clone();
        bad[at] ^= flip;
        let got = ImageHeader::parse(&bad);
        if (STAMP_OFFSET..STAMP_OFFSET + 4).contains(&at) {
            prop_assert_eq!(got, Ok(h), "an unstamped file is a Linux Image");
        } else {
            prop_assert!(got.is_err(), "byte {:#x} of {} changed by {:#x}: accepted {:?}", at, len, flip, got);
        }
    }

    #[test]
    fn cut_short_is_refused_and_padding_is_not_the_file(
        len in HEADER_SIZE + 1..600usize, bss in 0u64..64, seed: u8, cut in 1usize..64, pad in 0usize..128, fill: u8,
    ) {
        let good = image(len, bss, seed);
        let h = ImageHeader::parse(&good).unwrap();
        let short = &good[..len - cut.min(len - HEADER_SIZE)];
        prop_assert!(ImageHeader::parse(short).is_err(), "{} of {} bytes accepted", short.len(), len);
        let mut padded = good.clone();
        padded.resize(len + pad, fill);
        let want = if (len + pad) as u64 <= h.image_size { Ok(h) } else { Err(()) };
        prop_assert_eq!(ImageHeader::parse(&padded).map_err(|_| ()), want, "{} bytes of padding", pad);
    }
}
