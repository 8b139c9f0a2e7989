//! The memslot checks against a page-set model, on a fake stage-2 table.

use super::*;
use crate::PAGE;
use alloc::collections::BTreeMap;

/// Pages of `r`.
fn pages(r: Range) -> impl Iterator<Item = u64> {
    (r.start / PAGE..r.end.div_ceil(PAGE)).map(|p| p * PAGE)
}

/// A stage-2 table of 4 KiB pages: IPA page -> PA. `map` refuses a page already mapped (after
/// mapping the pages before it, as a table walk that stops at the first conflict does) and
/// fails with NO_MEMORY on reaching `fail_at`.
#[derive(Default, Clone, PartialEq, Debug)]
struct FakeS2 {
    pages: BTreeMap<u64, u64>,
    fail_at: Option<u64>,
}

impl Stage2 for FakeS2 {
    fn mapped(&mut self, r: Range) -> Result<Vec<Range>, HypError> {
        Ok(self.pages.range(r.start..r.end).map(|(&a, _)| Range::new(a, a + PAGE)).collect())
    }
    fn map(&mut self, ipa: Range, pa: u64, _backing: u64) -> Result<(), HypError> {
        for (k, a) in pages(ipa).enumerate() {
            if self.fail_at == Some(a) {
                return Err(HypError::NoMemory);
            }
            if self.pages.contains_key(&a) {
                return Err(HypError::InvalidParameter);
            }
            self.pages.insert(a, pa + k as u64 * PAGE);
        }
        Ok(())
    }
    fn unmap(&mut self, r: Range) -> Result<(), HypError> {
        self.pages.retain(|&a, _| !r.contains(a, PAGE));
        Ok(())
    }
}

const P: u64 = PAGE;

fn req(base: u64, size: u64) -> Request {
    request(base, size, hc::MEMSLOT_BACKING_4K, 40).unwrap()
}

/// Every kind of taken range, and every placement of a request of 1..=6 pages from 4 pages
/// before to 4 pages after a taken range of 3 pages (first page only, last page only,
/// inside, around, touching either end): refused with the kind's error iff the two share a
/// page in the model. Seen failing with the check made on all but the request's last page
/// (the memslot that took a device page by its last page only).
#[test]
fn every_kind_is_refused_on_any_shared_page() {
    let t = Range::new(10 * P, 13 * P);
    for kind in KINDS {
        for start in 6..=16u64 {
            for len in 1..=6u64 {
                let r = Range::new(start * P, (start + len) * P);
                let shared = pages(r).any(|p| t.contains(p, P));
                let taken = [Taken { kind, range: t }];
                let want = if shared { Err(kind.refusal()) } else { Ok(()) };
                assert_eq!(admit(r, &taken), want, "{kind:?} at {t}, request {r}");
                // The same through create, with the range given as a stage-2 mapping.
                if kind == Kind::Mapping {
                    let mut s2 = FakeS2::default();
                    for p in pages(t) {
                        s2.pages.insert(p, 0x9000_0000 + p);
                    }
                    let before = s2.clone();
                    let got = create(
                        &mut s2,
                        req(r.start, r.len()),
                        &[],
                        0,
                        Range::new(0x1_0000_0000, 0x1_0000_0000 + 4 * P),
                    );
                    assert_eq!(got, want, "device at {t}, request {r}");
                    if shared {
                        assert_eq!(s2, before, "a refused slot changed the table");
                    } else {
                        assert_eq!(s2.pages.len() as u64, 3 + len, "request {r}");
                    }
                }
            }
        }
    }
}

/// The hypervisor's memory wins over any other kind in the same place (DENIED, not OVERLAP);
/// empty taken ranges take nothing.
#[test]
fn the_hypervisor_s_memory_is_denied_first() {
    let r = Range::new(0, 8 * P);
    let all: Vec<Taken> = KINDS.iter().map(|&kind| Taken { kind, range: Range::new(4 * P, 5 * P) }).collect();
    assert_eq!(admit(r, &all), Err(HypError::Denied));
    assert_eq!(admit(r, &all[1..]), Err(HypError::Overlap));
    let empty: Vec<Taken> = KINDS.iter().map(|&kind| Taken { kind, range: Range::new(4 * P, 4 * P) }).collect();
    assert_eq!(admit(r, &empty), Ok(()));
}

/// A map that fails at any page of any piece leaves the table as it was: everything the call
/// mapped is gone, and a device page right after the slot (and one right before) is still
/// there. The slot has 16 pages over a pool of 4, so 4 pieces. Seen failing with the rollback
/// unmapping one page more than the slot (the device after it lost).
#[test]
fn a_failed_map_unmaps_what_it_mapped_and_nothing_else() {
    let base = 0x4000_0000;
    let pool = Range::new(0x1_0000_0000, 0x1_0000_0000 + 4 * P);
    let mut table = FakeS2::default();
    table.pages.insert(base - P, 0x900_0000);
    table.pages.insert(base + 16 * P, 0x900_1000);
    let mut ok = table.clone();
    assert_eq!(create(&mut ok, req(base, 16 * P), &[], 0, pool), Ok(()));
    assert_eq!(ok.pages.len(), 18);
    assert_eq!(ok.pages[&(base + 5 * P)], pool.start + P, "slot page 5 maps pool page 1");
    for k in 0..16 {
        let mut s2 = FakeS2 { fail_at: Some(base + k * P), ..table.clone() };
        assert_eq!(create(&mut s2, req(base, 16 * P), &[], 0, pool), Err(HypError::NoMemory));
        s2.fail_at = None;
        assert_eq!(s2, table, "map failing at slot page {k}");
    }
}

/// A piece that finds something mapped (the checks bypassed, or the table changed between
/// the check and the map) is not mapped over, and its rollback spares what was there.
#[test]
fn a_rollback_spares_mappings_it_did_not_make() {
    let base = 0x4000_0000;
    let pool = Range::new(0x1_0000_0000, 0x1_0000_0000 + 4 * P);
    for k in 0..8 {
        let mut s2 = FakeS2::default();
        s2.pages.insert(base + k * P, 0x900_0000);
        let before = s2.clone();
        // Straight to the mapping loop: the table is empty where the checks looked.
        let mut lying = Lying { inner: &mut s2, hide: base + k * P, asked: 0 };
        assert!(create(&mut lying, req(base, 8 * P), &[], 0, pool).is_err(), "device at page {k}");
        assert_eq!(s2, before, "device at page {k}");
    }
}

/// A table whose first `mapped` answer hides one page (what the checks see), as if it had
/// been mapped after them.
struct Lying<'a> {
    inner: &'a mut FakeS2,
    hide: u64,
    asked: u32,
}

impl Stage2 for Lying<'_> {
    fn mapped(&mut self, r: Range) -> Result<Vec<Range>, HypError> {
        self.asked += 1;
        let mut v = self.inner.mapped(r)?;
        if self.asked == 1 {
            v.retain(|m| m.start != self.hide);
        }
        Ok(v)
    }
    fn map(&mut self, ipa: Range, pa: u64, backing: u64) -> Result<(), HypError> {
        self.inner.map(ipa, pa, backing)
    }
    fn unmap(&mut self, r: Range) -> Result<(), HypError> {
        self.inner.unmap(r)
    }
}

#[test]
fn request_arguments() {
    use hc::{MEMSLOT_BACKING_1G as G, MEMSLOT_BACKING_2M as M, MEMSLOT_BACKING_4K as K};
    assert_eq!(request(0, 0, K, 40), Err(HypError::InvalidParameter));
    assert_eq!(request(0, P, 4, 40), Err(HypError::InvalidParameter));
    assert_eq!(request(0, P, 3, 40), Err(HypError::InvalidParameter));
    assert_eq!(request(P, 2 << 20, M, 40), Err(HypError::Misaligned));
    assert_eq!(request(0, P, M, 40), Err(HypError::Misaligned));
    assert_eq!(request(!(P - 1), 2 * P, K, 40), Err(HypError::OutOfRange));
    assert_eq!(request((1 << 40) - P, 2 * P, K, 40), Err(HypError::OutOfRange));
    assert_eq!(request((1 << 40) - P, P, K, 40).map(|r| r.range.end), Ok(1 << 40));
    assert_eq!(request(1 << 30, 1 << 30, G, 40).map(|r| r.backing_size), Ok(1 << 30));
}

#[test]
fn registry_and_pool_limits() {
    let mut s2 = FakeS2::default();
    let pool = Range::new(0x1_0000_0000, 0x1_0000_0000 + P);
    assert_eq!(create(&mut s2, req(0, P), &[], hc::MAX_MEMSLOTS, pool), Err(HypError::NoMemory));
    assert_eq!(create(&mut s2, req(0, P), &[], 0, Range::new(0, 0)), Err(HypError::NoMemory));
    assert!(s2.pages.is_empty());
}
