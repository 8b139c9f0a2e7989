//! The bundle header parser against a reference model that owns bytes: a header is accepted
//! iff the kernel is there, every part given is 4 KiB aligned, the parts come in order, each
//! byte of each part lies after the header and before the total size, and no byte belongs to
//! two parts (an empty part has offset 0); the total size fits what the boot loader handed over.

use abi::bundle::{self, Bundle, Part, ALIGN, HEADER_SIZE};
use proptest::prelude::*;

/// The model's verdict on `(offset, size)` of kernel, initrd and command line.
fn model(parts: [(u64, u64); 3], total: u64, len: u64) -> Option<Bundle> {
    if total > len || total < HEADER_SIZE || parts[0].1 == 0 {
        return None;
    }
    let mut owner: Vec<Option<usize>> = vec![None; total as usize];
    let mut last_start = 0;
    for (k, &(offset, size)) in parts.iter().enumerate() {
        if size == 0 {
            if offset != 0 {
                return None;
            }
            continue;
        }
        if offset % ALIGN != 0 || offset < HEADER_SIZE || offset < last_start {
            return None;
        }
        last_start = offset;
        for b in offset..offset.checked_add(size)? {
            match owner.get_mut(b as usize) {
                Some(o @ None) => *o = Some(k),
                _ => return None,
            }
        }
    }
    let part = |(offset, size): (u64, u64)| (size != 0).then_some(Part { offset, size });
    Some(Bundle {
        total_size: total,
        kernel: Part { offset: parts[0].0, size: parts[0].1 },
        initrd: part(parts[1]),
        cmdline: part(parts[2]),
    })
}

fn header(parts: [(u64, u64); 3], total: u64, len: u64) -> Vec<u8> {
    let mut b = vec![b'a'; len.max(HEADER_SIZE) as usize];
    b[..HEADER_SIZE as usize].fill(0);
    b[..8].copy_from_slice(&bundle::MAGIC);
    b[8..12].copy_from_slice(&bundle::VERSION.to_le_bytes());
    let fields = [total, parts[0].0, parts[0].1, parts[1].0, parts[1].1, parts[2].0, parts[2].1];
    for (i, v) in fields.iter().enumerate() {
        b[0x10 + 8 * i..0x18 + 8 * i].copy_from_slice(&v.to_le_bytes());
    }
    b.truncate(len as usize);
    b
}

/// Offsets near page boundaries (mostly aligned) and sizes near page multiples.
fn part() -> impl Strategy<Value = (u64, u64)> {
    let offset = prop_oneof![4 => (0u64..6).prop_map(|p| p * ALIGN), 1 => 0u64..6 * ALIGN];
    let size = prop_oneof![1 => Just(0u64), 4 => (0u64..3, 0u64..3).prop_map(|(p, d)| (p * ALIGN + d).max(1)), 1 => 1u64..3 * ALIGN];
    (offset, size)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, ..ProptestConfig::default() })]

    #[test]
    fn parse_agrees_with_the_byte_owner_model(
        parts in [part(), part(), part()],
        total_pages in 1u64..7,
        total_tail in prop_oneof![Just(0u64), 1u64..ALIGN],
        extra in prop_oneof![Just(0u64), 1u64..2 * ALIGN],
    ) {
        let total = total_pages * ALIGN - total_tail.min(total_pages * ALIGN - 1);
        let len = total + extra;
        let bytes = header(parts, total, len);
        prop_assert_eq!(bundle::parse(&bytes).ok(), model(parts, total, len), "parts {:x?} total {:#x} len {:#x}", parts, total, len);
    }
}
