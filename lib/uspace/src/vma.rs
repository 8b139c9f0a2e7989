//! The regions of an address space: non-overlapping page-aligned ranges, each with its
//! protection, kept in address order. Neighbours with equal protection are merged.
//!
//! Kept in one sorted vector: a look-up is a binary search, and the common changes (an
//! mprotect of a whole region or of part of one, a new region next to others, a munmap) move
//! a few entries of a short array in place, allocating nothing once the vector has grown to
//! the address space's number of regions. (Linux keeps a maple tree; an address space here has
//! a handful of regions.) A look-up first tries the region the previous one found (faults
//! come in runs within one region), checked against the vector: a stale index only misses.

use alloc::vec::Vec;
use core::cell::Cell;

use abi::syscall::PAGE_SIZE;

/// One region `[start, end)` with a protection (`abi::syscall::prot` bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vma {
    /// First byte (page aligned).
    pub start: u64,
    /// One past the last byte (page aligned).
    pub end: u64,
    /// `prot::READ | WRITE | EXEC` bits, 0 for PROT_NONE.
    pub prot: u64,
}

/// The set of regions.
#[derive(Debug, Default, Clone)]
pub struct VmaSet {
    /// Sorted by address, disjoint, no two touching neighbours with the same protection.
    v: Vec<Vma>,
    /// Index of the region the last successful [`VmaSet::find`] returned: a guess, checked
    /// before use (any change may have moved the regions).
    last: Cell<usize>,
}

impl VmaSet {
    /// No regions.
    pub fn new() -> Self {
        VmaSet { v: Vec::new(), last: Cell::new(0) }
    }

    /// Index of the first region ending after `va` (the one holding `va`, if any).
    #[inline]
    fn first_ending_after(&self, va: u64) -> usize {
        self.v.partition_point(|r| r.end <= va)
    }

    /// The region holding `va`.
    #[inline]
    pub fn find(&self, va: u64) -> Option<Vma> {
        if let Some(&r) = self.v.get(self.last.get()) {
            if r.start <= va && va < r.end {
                return Some(r);
            }
        }
        let i = self.first_ending_after(va);
        let r = *self.v.get(i)?;
        if r.start > va {
            return None;
        }
        self.last.set(i);
        Some(r)
    }

    /// Every region, in order.
    pub fn iter(&self) -> impl Iterator<Item = Vma> + '_ {
        self.v.iter().copied()
    }

    /// Indices of the regions overlapping `[start, end)`.
    #[inline]
    fn overlapping_range(&self, start: u64, end: u64) -> core::ops::Range<usize> {
        let i = self.first_ending_after(start);
        let j = i + self.v[i..].partition_point(|r| r.start < end);
        i..j
    }

    /// Regions overlapping `[start, end)`.
    pub fn overlapping(&self, start: u64, end: u64) -> &[Vma] {
        &self.v[self.overlapping_range(start, end)]
    }

    /// Whether every byte of `[start, end)` is in some region.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        for r in &self.v[self.first_ending_after(start)..] {
            if r.start > at {
                return false;
            }
            at = r.end;
            if at >= end {
                return true;
            }
        }
        at >= end
    }

    /// Whether no region overlaps `[start, end)`.
    pub fn is_free(&self, start: u64, end: u64) -> bool {
        self.overlapping_range(start, end).is_empty()
    }

    /// Removes `[start, end)` from every region (splitting those crossing the ends); returns
    /// where a region starting at `start` would go.
    pub fn remove(&mut self, start: u64, end: u64) -> usize {
        let range = self.overlapping_range(start, end);
        let (i, j) = (range.start, range.end);
        if i == j {
            return i;
        }
        let (first, last) = (self.v[i], self.v[j - 1]);
        let left = (first.start < start).then_some(Vma { end: start, ..first });
        let right = (last.end > end).then_some(Vma { start: end, ..last });
        // Replace v[i..j] by what is left of its ends, in place where the count allows.
        let keep = left.into_iter().chain(right);
        let n = left.is_some() as usize + right.is_some() as usize;
        if n <= j - i {
            for (k, r) in keep.enumerate() {
                self.v[i + k] = r;
            }
            // Close the gap: the regions after it move down (no drain machinery).
            let gone = j - i - n;
            if gone > 0 {
                let len = self.v.len();
                self.v.copy_within(j..len, i + n);
                self.v.truncate(len - gone);
            }
        } else {
            // One region split in two around the hole.
            self.v[i] = left.unwrap_or(first);
            self.v.insert(i + 1, right.unwrap_or(last));
        }
        i + left.is_some() as usize
    }

    /// Adds `[start, end)` with `prot`, replacing whatever was there.
    pub fn insert(&mut self, start: u64, end: u64, prot: u64) {
        debug_assert!(start < end && start.is_multiple_of(PAGE_SIZE) && end.is_multiple_of(PAGE_SIZE));
        let at = self.remove(start, end);
        self.v.insert(at, Vma { start, end, prot });
        self.merge_around(at);
    }

    /// Sets the protection of `[start, end)`, which must be covered.
    pub fn protect(&mut self, start: u64, end: u64, prot: u64) {
        debug_assert!(self.covers(start, end));
        // Inside one region (the common mprotect of a whole mapping or of part of one):
        // change it in place, or cut it in two or three.
        let i = self.first_ending_after(start);
        if let Some(&r) = self.v.get(i) {
            if r.start <= start && end <= r.end {
                if r.prot == prot {
                    return;
                }
                let mid = Vma { start, end, prot };
                let at = match (r.start < start, end < r.end) {
                    (false, false) => {
                        self.v[i] = mid;
                        i
                    }
                    (true, false) => {
                        self.v[i].end = start;
                        self.v.insert(i + 1, mid);
                        i + 1
                    }
                    (false, true) => {
                        self.v[i].start = end;
                        self.v.insert(i, mid);
                        i
                    }
                    (true, true) => {
                        self.v[i].end = start;
                        let tail = Vma { start: end, ..r };
                        self.v.splice(i + 1..i + 1, [mid, tail]);
                        i + 1
                    }
                };
                self.merge_around(at);
                return;
            }
        }
        self.insert(start, end, prot);
    }

    /// Merges region `i` with its neighbours where they touch and have its protection.
    fn merge_around(&mut self, mut i: usize) {
        if i > 0 && self.v[i - 1].end == self.v[i].start && self.v[i - 1].prot == self.v[i].prot {
            self.v[i - 1].end = self.v[i].end;
            self.v.remove(i);
            i -= 1;
        }
        if i + 1 < self.v.len() && self.v[i].end == self.v[i + 1].start && self.v[i].prot == self.v[i + 1].prot {
            self.v[i].end = self.v[i + 1].end;
            self.v.remove(i + 1);
        }
    }

    /// The lowest free range of `len` bytes in `[from, limit)`, page aligned.
    pub fn find_free(&self, from: u64, limit: u64, len: u64) -> Option<u64> {
        let mut at = from;
        for r in self.overlapping(from, limit) {
            if r.start >= at && r.start - at >= len {
                return Some(at);
            }
            at = at.max(r.end);
        }
        (at.checked_add(len)? <= limit).then_some(at)
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.v.len()
    }

    /// Whether there is no region.
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const P: u64 = PAGE_SIZE;

    #[test]
    fn insert_split_merge_and_find() {
        let mut s = VmaSet::new();
        s.insert(10 * P, 20 * P, 3);
        assert_eq!(s.find(10 * P).unwrap().prot, 3);
        assert_eq!(s.find(20 * P), None);
        s.protect(12 * P, 14 * P, 1);
        assert_eq!(s.len(), 3);
        assert_eq!(s.find(13 * P).unwrap(), Vma { start: 12 * P, end: 14 * P, prot: 1 });
        s.protect(12 * P, 14 * P, 3);
        assert_eq!(s.len(), 1, "merged back");
        s.remove(15 * P, 16 * P);
        assert_eq!(s.len(), 2);
        assert!(!s.covers(10 * P, 20 * P));
        assert!(s.covers(10 * P, 15 * P));
        assert!(s.is_free(15 * P, 16 * P));
        assert_eq!(s.find_free(10 * P, 100 * P, P), Some(15 * P));
        assert_eq!(s.find_free(10 * P, 100 * P, 2 * P), Some(20 * P));
        assert_eq!(s.find_free(10 * P, 21 * P, 2 * P), None);
        s.insert(5 * P, 30 * P, 0);
        assert_eq!(s.iter().collect::<Vec<_>>(), [Vma { start: 5 * P, end: 30 * P, prot: 0 }]);
    }

    #[test]
    fn against_a_page_map() {
        // Random operations against a plain per-page map.
        let mut s = VmaSet::new();
        let mut pages = [None::<u64>; 64];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = x % 64;
            let b = (a + 1 + (x >> 8) % 8).min(64);
            let prot = (x >> 16) % 3;
            match (x >> 20) % 3 {
                0 => {
                    s.insert(a * P, b * P, prot);
                    pages[a as usize..b as usize].iter_mut().for_each(|p| *p = Some(prot));
                }
                1 => {
                    s.remove(a * P, b * P);
                    pages[a as usize..b as usize].iter_mut().for_each(|p| *p = None);
                }
                _ => {
                    let covered = pages[a as usize..b as usize].iter().all(Option::is_some);
                    assert_eq!(s.covers(a * P, b * P), covered);
                    if covered {
                        s.protect(a * P, b * P, prot);
                        pages[a as usize..b as usize].iter_mut().for_each(|p| *p = Some(prot));
                    }
                }
            }
            for (i, p) in pages.iter().enumerate() {
                assert_eq!(s.find(i as u64 * P).map(|v| v.prot), *p, "page {i}");
            }
            let v: Vec<Vma> = s.iter().collect();
            for w in v.windows(2) {
                assert!(w[0].end <= w[1].start, "ordered, disjoint");
                assert!(!(w[0].end == w[1].start && w[0].prot == w[1].prot), "merged");
            }
        }
    }
}
