//! Physical address ranges and sets of them. Every operation uses checked arithmetic: a range
//! near the top of the 64-bit space gives `None` or an empty result, never a wrapped one.

use alloc::vec::Vec;

/// `[start, end)`. Empty when `end <= start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Range {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
}

impl Range {
    /// `[start, end)`.
    pub const fn new(start: u64, end: u64) -> Self {
        Self { start, end }
    }
    /// `[start, start + len)`, or `None` if that wraps.
    pub fn sized(start: u64, len: u64) -> Option<Self> {
        Some(Self { start, end: start.checked_add(len)? })
    }
    /// Bytes in the range (0 when empty).
    pub fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
    /// Whether the range holds no byte.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
    /// Whether `[addr, addr + len)` lies inside (false if it wraps).
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.start && addr.checked_add(len).is_some_and(|e| e <= self.end)
    }
    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, o: &Range) -> bool {
        self.start < o.end && o.start < self.end
    }
}

impl core::fmt::Display for Range {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "[{:#x}, {:#x})", self.start, self.end)
    }
}

/// `v` rounded up to a multiple of `a` (a power of two), `None` on overflow.
pub const fn align_up(v: u64, a: u64) -> Option<u64> {
    match v.checked_add(a - 1) {
        Some(x) => Some(x & !(a - 1)),
        None => None,
    }
}

/// `v` rounded down to a multiple of `a` (a power of two).
pub const fn align_down(v: u64, a: u64) -> u64 {
    v & !(a - 1)
}

/// The whole `block`-aligned blocks inside `r` (`block` a power of two), as a range, and the
/// bytes before and after them, which a block operation (`DC ZVA`) cannot reach; `None` when
/// `r` holds no whole block (then all of `r` is left for byte-wise work).
pub fn whole_blocks(r: Range, block: u64) -> Option<Range> {
    let lo = align_up(r.start, block)?;
    let hi = align_down(r.end, block);
    (lo < hi).then(|| Range::new(lo, hi))
}

/// The smallest range holding `a` (if any) and `b`: where a set of ranges lies, kept as one
/// bound (the frames the hypervisor took with its MMU off, which it must invalidate).
pub fn hull(a: Option<Range>, b: Range) -> Range {
    match a {
        Some(a) => Range::new(a.start.min(b.start), a.end.max(b.end)),
        None => b,
    }
}

/// The bytes of all `ranges`.
pub fn total(ranges: &[Range]) -> u64 {
    ranges.iter().map(Range::len).fold(0, u64::saturating_add)
}

/// The address where the first `bytes` bytes of `ranges` (in address order) end: `ranges`
/// start + `bytes` for one range. `None` if the ranges hold fewer bytes. 0 bytes end at the
/// first range's start.
pub fn address_after(ranges: &[Range], bytes: u64) -> Option<u64> {
    let mut left = bytes;
    let mut sorted: Vec<Range> = ranges.iter().copied().filter(|r| !r.is_empty()).collect();
    sorted.sort_by_key(|r| r.start);
    for r in &sorted {
        if left <= r.len() {
            return Some(r.start + left);
        }
        left -= r.len();
    }
    None
}

/// `ranges` split at `at`: the parts below it and the parts at or above it, in order.
pub fn split_at(ranges: &[Range], at: u64) -> (Vec<Range>, Vec<Range>) {
    let below = subtract(ranges, Range::new(at, u64::MAX));
    let above = subtract(ranges, Range::new(0, at));
    (below, above)
}

/// `ranges` minus `hole`, keeping order and dropping empty pieces.
pub fn subtract(ranges: &[Range], hole: Range) -> Vec<Range> {
    let mut out = Vec::new();
    for r in ranges.iter().filter(|r| !r.is_empty()) {
        if !r.overlaps(&hole) {
            out.push(*r);
            continue;
        }
        if r.start < hole.start {
            out.push(Range::new(r.start, hole.start));
        }
        if hole.end < r.end {
            out.push(Range::new(hole.end, r.end));
        }
    }
    out
}

/// The highest `align`ed range of `size` bytes inside one of `ram`'s ranges that overlaps none
/// of `avoid`.
pub fn find_top(ram: &[Range], size: u64, align: u64, avoid: &[Range]) -> Option<Range> {
    if size == 0 {
        return None;
    }
    ram.iter().rev().find_map(|r| {
        let mut at = align_down(r.end.checked_sub(size)?, align);
        while at >= r.start {
            let cand = Range::new(at, at + size);
            match avoid.iter().filter(|a| a.overlaps(&cand)).map(|a| a.start).min() {
                None => return Some(cand),
                // Jump below the lowest obstacle instead of stepping one alignment at a time.
                Some(lowest) => at = align_down(lowest.checked_sub(size)?, align),
            }
        }
        None
    })
}

/// Takes `size` bytes, `align`ed, from the top of `ram` avoiding `avoid` (see [`find_top`]) and
/// removes them from `ram`. Returns the range taken.
pub fn reserve_top(ram: &mut Vec<Range>, size: u64, align: u64, avoid: &[Range]) -> Option<Range> {
    let found = find_top(ram, size, align, avoid)?;
    *ram = subtract(ram, found);
    Some(found)
}

/// The lowest `align`ed address in `ram` with `size` bytes free of every `avoid` range, the
/// block not crossing a `window` boundary (0: no such rule).
pub fn place(ram: &[Range], size: u64, align: u64, window: u64, avoid: &[Range]) -> Option<u64> {
    if size == 0 || (window != 0 && size > window) {
        return None;
    }
    for r in ram {
        let mut a = align_up(r.start, align)?;
        while a.checked_add(size).is_some_and(|e| e <= r.end) {
            let cand = Range::new(a, a + size);
            if let Some(c) = avoid.iter().filter(|x| x.overlaps(&cand)).map(|x| x.end).max() {
                a = align_up(c, align)?;
                continue;
            }
            if window != 0 && a / window != (a + size - 1) / window {
                a = align_up(a + 1, window)?;
                continue;
            }
            return Some(a);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hull_holds_both_and_no_more() {
        use super::{hull, Range};
        let (a, b) = (Range::new(0x3000, 0x5000), Range::new(0x8000, 0x9000));
        assert_eq!(hull(None, b), b);
        assert_eq!(hull(Some(a), b), Range::new(0x3000, 0x9000));
        assert_eq!(hull(Some(b), a), Range::new(0x3000, 0x9000));
        assert_eq!(hull(Some(Range::new(0x1000, 0xa000)), a), Range::new(0x1000, 0xa000));
    }

    #[test]
    fn whole_blocks_are_aligned_inside_and_maximal() {
        use super::{whole_blocks, Range};
        let b = 64;
        assert_eq!(whole_blocks(Range::new(0x1000, 0x2000), b), Some(Range::new(0x1000, 0x2000)));
        assert_eq!(whole_blocks(Range::new(0x1001, 0x2000), b), Some(Range::new(0x1040, 0x2000)));
        assert_eq!(whole_blocks(Range::new(0x1000, 0x203f), b), Some(Range::new(0x1000, 0x2000)));
        // Less than a whole block, or one that straddles: none.
        assert_eq!(whole_blocks(Range::new(0x1001, 0x1040), b), None);
        assert_eq!(whole_blocks(Range::new(0x1020, 0x1060), b), None);
        assert_eq!(whole_blocks(Range::new(0x1000, 0x1000), b), None);
        // Exactly one block; and no overflow at the top of the address space.
        assert_eq!(whole_blocks(Range::new(0x1040, 0x1080), b), Some(Range::new(0x1040, 0x1080)));
        assert_eq!(whole_blocks(Range::new(u64::MAX - 10, u64::MAX), b), None);
        for start in 0x1000..0x1100u64 {
            for len in 0..0x100u64 {
                let r = Range::new(start, start + len);
                match whole_blocks(r, b) {
                    Some(w) => {
                        assert!(w.start % b == 0 && w.end % b == 0 && w.start >= r.start && w.end <= r.end);
                        assert!(w.start - r.start < b && r.end - w.end < b, "{r}: {w} is not all of it");
                    }
                    None => assert!(r.start.next_multiple_of(b) + b > r.end, "{r} holds a block"),
                }
            }
        }
    }

    use super::*;
    use alloc::vec;
    use proptest::prelude::*;

    #[test]
    fn subtract_splits_and_keeps_order() {
        let ram = [Range::new(0, 100), Range::new(200, 300)];
        assert_eq!(subtract(&ram, Range::new(50, 250)), vec![Range::new(0, 50), Range::new(250, 300)]);
        assert_eq!(subtract(&ram, Range::new(0, 100)), vec![Range::new(200, 300)]);
        assert_eq!(subtract(&ram, Range::new(400, 500)), ram.to_vec());
    }

    #[test]
    fn reserve_top_skips_what_it_must_avoid() {
        let mut ram = vec![Range::new(0x4000_0000, 0x8000_0000)];
        let avoid = [Range::new(0x7fe0_0000, 0x7fe0_1000)];
        let r = reserve_top(&mut ram, 0x20_0000, 0x20_0000, &avoid).unwrap();
        assert_eq!(r, Range::new(0x7fc0_0000, 0x7fe0_0000));
        assert_eq!(ram, vec![Range::new(0x4000_0000, 0x7fc0_0000), Range::new(0x7fe0_0000, 0x8000_0000)]);
        assert_eq!(reserve_top(&mut ram, 1 << 40, 0x20_0000, &[]), None);
    }

    #[test]
    fn address_after_counts_bytes_across_ranges() {
        let ram = [Range::new(0x1000, 0x2000), Range::new(0x8000, 0x9000)];
        assert_eq!(address_after(&ram, 0), Some(0x1000));
        assert_eq!(address_after(&ram, 0x1000), Some(0x2000));
        assert_eq!(address_after(&ram, 0x1001), Some(0x8001));
        assert_eq!(address_after(&ram, 0x2000), Some(0x9000));
        assert_eq!(address_after(&ram, 0x2001), None);
        let (lo, hi) = split_at(&ram, 0x8800);
        assert_eq!(lo, vec![Range::new(0x1000, 0x2000), Range::new(0x8000, 0x8800)]);
        assert_eq!(hi, vec![Range::new(0x8800, 0x9000)]);
    }

    #[test]
    fn place_respects_window_and_avoid() {
        let ram = [Range::new(0x1000, 0x40_0000)];
        assert_eq!(place(&ram, 0x2000, 0x1000, 0x20_0000, &[Range::new(0x1000, 0x1f_f000)]), Some(0x20_0000));
        assert_eq!(place(&ram, 0x30_0000, 0x1000, 0x20_0000, &[]), None, "larger than the window");
        assert_eq!(place(&ram, 0x20_0000, 0x20_0000, 0x20_0000, &[]), Some(0x20_0000), "a whole window fits");
        assert_eq!(place(&ram, 0, 0x1000, 0, &[]), None);
    }

    #[test]
    fn arithmetic_near_the_top_does_not_wrap() {
        assert_eq!(align_up(u64::MAX - 10, 4096), None);
        assert_eq!(Range::sized(u64::MAX - 10, 20), None);
        assert!(!Range::new(0, u64::MAX).contains(u64::MAX - 1, 2));
        let top = [Range::new(u64::MAX - 0x10_0000, u64::MAX)];
        assert_eq!(place(&top, 0x1000, 0x20_0000, 0, &[]), None);
    }

    proptest! {
        #[test]
        fn reserve_top_result_is_inside_ram_and_clear_of_avoid(
            starts in proptest::collection::vec(0u64..1 << 40, 1..4),
            lens in proptest::collection::vec(0u64..1 << 32, 1..4),
            size in 1u64..1 << 31,
            avoid_at in 0u64..1 << 40,
        ) {
            let mut ram: Vec<Range> = starts.iter().zip(&lens).map(|(&s, &l)| Range::new(s, s + l)).collect();
            ram.sort_by_key(|r| r.start);
            let before = total(&ram);
            let avoid = [Range::new(avoid_at, avoid_at + 0x1000)];
            let original = ram.clone();
            if let Some(r) = reserve_top(&mut ram, size, 0x20_0000, &avoid) {
                prop_assert_eq!(r.len(), size);
                prop_assert!(r.start % 0x20_0000 == 0);
                prop_assert!(original.iter().any(|o| o.contains(r.start, r.len())));
                prop_assert!(!r.overlaps(&avoid[0]));
                prop_assert!(!ram.iter().any(|x| x.overlaps(&r)));
                prop_assert!(total(&ram) <= before);
            } else {
                prop_assert_eq!(ram, original);
            }
        }
    }
}
