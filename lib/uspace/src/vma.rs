//! The regions of an address space: non-overlapping page-aligned ranges, each with its
//! protection, kept in address order. Neighbours with equal protection are merged.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

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
    /// start -> (end, prot).
    map: BTreeMap<u64, (u64, u64)>,
}

impl VmaSet {
    /// No regions.
    pub fn new() -> Self {
        VmaSet { map: BTreeMap::new() }
    }

    /// The region holding `va`.
    pub fn find(&self, va: u64) -> Option<Vma> {
        let (&start, &(end, prot)) = self.map.range(..=va).next_back()?;
        (va < end).then_some(Vma { start, end, prot })
    }

    /// Every region, in order.
    pub fn iter(&self) -> impl Iterator<Item = Vma> + '_ {
        self.map.iter().map(|(&start, &(end, prot))| Vma { start, end, prot })
    }

    /// Regions overlapping `[start, end)`.
    pub fn overlapping(&self, start: u64, end: u64) -> Vec<Vma> {
        let first = self.find(start).map(|v| v.start).unwrap_or(start);
        self.map
            .range(first..end)
            .map(|(&s, &(e, p))| Vma { start: s, end: e, prot: p })
            .filter(|v| v.end > start)
            .collect()
    }

    /// Whether every byte of `[start, end)` is in some region.
    pub fn covers(&self, start: u64, end: u64) -> bool {
        let mut at = start;
        for v in self.overlapping(start, end) {
            if v.start > at {
                return false;
            }
            at = v.end;
        }
        at >= end
    }

    /// Whether no region overlaps `[start, end)`.
    pub fn is_free(&self, start: u64, end: u64) -> bool {
        self.overlapping(start, end).is_empty()
    }

    /// Removes `[start, end)` from every region (splitting those crossing the ends).
    pub fn remove(&mut self, start: u64, end: u64) {
        for v in self.overlapping(start, end) {
            self.map.remove(&v.start);
            if v.start < start {
                self.map.insert(v.start, (start, v.prot));
            }
            if v.end > end {
                self.map.insert(end, (v.end, v.prot));
            }
        }
    }

    /// Adds `[start, end)` with `prot`, replacing whatever was there.
    pub fn insert(&mut self, start: u64, end: u64, prot: u64) {
        debug_assert!(start < end && start.is_multiple_of(PAGE_SIZE) && end.is_multiple_of(PAGE_SIZE));
        self.remove(start, end);
        self.map.insert(start, (end, prot));
        self.merge_around(start, end);
    }

    /// Sets the protection of `[start, end)`, which must be covered.
    pub fn protect(&mut self, start: u64, end: u64, prot: u64) {
        debug_assert!(self.covers(start, end));
        // One region exactly: change it in place (the common mprotect of a whole mapping).
        if let Some(e) = self.map.get_mut(&start) {
            if e.0 == end {
                if e.1 != prot {
                    e.1 = prot;
                    self.merge_around(start, end);
                }
                return;
            }
        }
        self.insert(start, end, prot);
    }

    fn merge_around(&mut self, start: u64, end: u64) {
        // With the previous region.
        let mut s = start;
        if let Some((&ps, &(pe, pp))) = self.map.range(..start).next_back() {
            let (_, p) = self.map[&start];
            if pe == start && pp == p {
                let (e, _) = self.map.remove(&start).unwrap();
                self.map.insert(ps, (e, p));
                s = ps;
            }
        }
        // With the next one.
        let (e, p) = self.map[&s];
        debug_assert!(e >= end);
        if let Some(&(ne, np)) = self.map.get(&e) {
            if np == p {
                self.map.remove(&e);
                self.map.insert(s, (ne, p));
            }
        }
    }

    /// The lowest free range of `len` bytes in `[from, limit)`, page aligned.
    pub fn find_free(&self, from: u64, limit: u64, len: u64) -> Option<u64> {
        let mut at = from;
        for v in self.overlapping(from, limit) {
            if v.start >= at && v.start - at >= len {
                return Some(at);
            }
            at = at.max(v.end);
        }
        (at.checked_add(len)? <= limit).then_some(at)
    }

    /// Number of regions.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether there is no region.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
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
