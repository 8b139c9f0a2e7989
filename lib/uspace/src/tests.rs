//! Address spaces on the host: every system call's errors, demand-zero and spurious faults,
//! PROT_NONE and lazy relaxation costs in TLBIs, loading, teardown.

use abi::syscall::{errno, map, prot, PAGE_SIZE, USER_END, USER_START};
use pgtable::{CountingTlb, HeapFrames, TlbFeatures, VirtAddr};

use crate::space::{perms_of, MMAP_BASE, PROGRAM_BASE};
use crate::{Access, AddressSpace, Denial, FaultKind, FaultOutcome};

const ANON: u64 = map::PRIVATE | map::ANONYMOUS;
const RW: u64 = prot::READ | prot::WRITE;
const NOFD: u64 = u64::MAX;

fn space() -> (AddressSpace<HeapFrames>, CountingTlb) {
    let mut tlb = CountingTlb { features: TlbFeatures { range: true }, ..Default::default() };
    let s = AddressSpace::new(HeapFrames::default(), &mut tlb).unwrap();
    (s, tlb)
}

fn touch(s: &mut AddressSpace<HeapFrames>, tlb: &mut CountingTlb, va: u64, a: Access) -> FaultOutcome {
    s.fault(tlb, va, a, FaultKind::Translation)
}

#[test]
fn mmap_arguments() {
    let (mut s, mut t) = space();
    let e = |r: Result<u64, i64>| r.unwrap_err();
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: 4096, prot: RW, flags: map::PRIVATE, fd: NOFD, offset: 0 })),
        errno::EINVAL,
        "not anonymous"
    );
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: 4096, prot: RW, flags: map::ANONYMOUS, fd: NOFD, offset: 0 })),
        errno::EINVAL,
        "not private"
    );
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: 4096, prot: RW, flags: ANON | 0x1000, fd: NOFD, offset: 0 })),
        errno::EINVAL,
        "unknown flag"
    );
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: 4096, prot: 8, flags: ANON, fd: NOFD, offset: 0 })),
        errno::EINVAL,
        "unknown prot"
    );
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: 4096, prot: RW, flags: ANON, fd: 3, offset: 0 })),
        errno::EINVAL,
        "a file descriptor"
    );
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: 4096, prot: RW, flags: ANON, fd: NOFD, offset: 4096 })),
        errno::EINVAL,
        "an offset"
    );
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: 0, prot: RW, flags: ANON, fd: NOFD, offset: 0 })),
        errno::EINVAL,
        "zero length"
    );
    assert_eq!(
        e(s.mmap(&mut t, crate::Mmap { addr: 0, len: u64::MAX, prot: RW, flags: ANON, fd: NOFD, offset: 0 })),
        errno::ENOMEM,
        "too long"
    );
    assert_eq!(
        e(s.mmap(
            &mut t,
            crate::Mmap { addr: 0x1001, len: 4096, prot: RW, flags: ANON | map::FIXED, fd: NOFD, offset: 0 }
        )),
        errno::EINVAL,
        "misaligned FIXED"
    );
    assert_eq!(
        e(s.mmap(
            &mut t,
            crate::Mmap { addr: 0x1000, len: 4096, prot: RW, flags: ANON | map::FIXED, fd: NOFD, offset: 0 }
        )),
        errno::EINVAL,
        "below user space"
    );
    assert_eq!(
        e(s.mmap(
            &mut t,
            crate::Mmap { addr: USER_END, len: 4096, prot: RW, flags: ANON | map::FIXED, fd: NOFD, offset: 0 }
        )),
        errno::EINVAL,
        "above"
    );
    assert_eq!(
        e(s.mmap(
            &mut t,
            crate::Mmap { addr: USER_END - 4096, len: 8192, prot: RW, flags: ANON | map::FIXED, fd: NOFD, offset: 0 }
        )),
        errno::EINVAL,
        "across"
    );
    let a = s.mmap(&mut t, crate::Mmap { addr: 0, len: 5000, prot: RW, flags: ANON, fd: NOFD, offset: 0 }).unwrap();
    assert_eq!(a, MMAP_BASE, "first fit from the mmap base");
    assert_eq!(s.regions().find(a + 4096).unwrap().end, a + 8192, "length rounded up to pages");
    let b = s.mmap(&mut t, crate::Mmap { addr: 0, len: 4096, prot: RW, flags: ANON, fd: NOFD, offset: 0 }).unwrap();
    assert_eq!(b, a + 8192);
    let hint = s
        .mmap(&mut t, crate::Mmap { addr: 0x7000_0000, len: 4096, prot: prot::READ, flags: ANON, fd: NOFD, offset: 0 })
        .unwrap();
    assert_eq!(hint, 0x7000_0000, "a free hint is taken");
    let taken =
        s.mmap(&mut t, crate::Mmap { addr: a, len: 4096, prot: prot::READ, flags: ANON, fd: NOFD, offset: 0 }).unwrap();
    assert_ne!(taken, a, "an occupied hint is not");
}

#[test]
fn demand_zero_faults_and_map_fixed_replacement() {
    let (mut s, mut t) = space();
    let a = s
        .mmap(&mut t, crate::Mmap { addr: 0, len: 3 * PAGE_SIZE, prot: RW, flags: ANON, fd: NOFD, offset: 0 })
        .unwrap();
    assert_eq!(touch(&mut s, &mut t, a + 8, Access::Write), FaultOutcome::Mapped);
    assert_eq!(touch(&mut s, &mut t, a + 16, Access::Write), FaultOutcome::Retry, "mapped meanwhile");
    assert_eq!(touch(&mut s, &mut t, a + PAGE_SIZE, Access::Read), FaultOutcome::Mapped);
    assert_eq!(s.stats.pages, 2);
    assert_eq!(touch(&mut s, &mut t, a + 3 * PAGE_SIZE, Access::Read), FaultOutcome::Denied(Denial::NoRegion));
    assert_eq!(touch(&mut s, &mut t, a, Access::Exec), FaultOutcome::Denied(Denial::Protection(RW)));
    // The page really is zero and mapped where it should be.
    let tr = s.table().translate(VirtAddr::new(a)).unwrap();
    assert_eq!(tr.attrs.perms, perms_of(RW));
    // SAFETY: HeapFrames' physical addresses are heap pointers to whole pages.
    let word = unsafe { *(tr.phys.as_u64() as *const u64) };
    assert_eq!(word, 0);
    // MAP_FIXED over the first page replaces it (frees the populated page).
    s.mmap(
        &mut t,
        crate::Mmap { addr: a, len: PAGE_SIZE, prot: prot::READ, flags: ANON | map::FIXED, fd: NOFD, offset: 0 },
    )
    .unwrap();
    assert_eq!(s.stats.pages, 1);
    assert!(s.table().translate(VirtAddr::new(a)).is_none(), "demand-zero again");
    assert_eq!(touch(&mut s, &mut t, a, Access::Write), FaultOutcome::Denied(Denial::Protection(prot::READ)));
    assert_eq!(touch(&mut s, &mut t, a, Access::Read), FaultOutcome::Mapped);
}

/// The lean first touch maps exactly what `fault` would map as a demand-zero page, and
/// nothing else: not outside a region, not beyond its protection, not over a page (or a
/// PROT_NONE marker) already there, not above user space; the general path then decides.
#[test]
fn first_touch_maps_only_what_the_region_allows() {
    let (mut s, mut t) = space();
    let mm = |s: &mut AddressSpace<HeapFrames>, t: &mut CountingTlb, prot: u64| {
        s.mmap(t, crate::Mmap { addr: 0, len: 4 * PAGE_SIZE, prot, flags: ANON, fd: NOFD, offset: 0 }).unwrap()
    };
    let ro = mm(&mut s, &mut t, prot::READ);
    let none = mm(&mut s, &mut t, 0);
    let rw = mm(&mut s, &mut t, RW);
    // The first page of each region through `fault` (its level-3 table is made there).
    assert_eq!(touch(&mut s, &mut t, ro, Access::Read), FaultOutcome::Mapped);
    assert_eq!(touch(&mut s, &mut t, rw, Access::Write), FaultOutcome::Mapped);
    let before = (s.stats, t.counters.tlbi_total());
    assert!(!s.first_touch(&mut t, ro + PAGE_SIZE, Access::Write), "a write to a read-only region");
    assert!(!s.first_touch(&mut t, ro + PAGE_SIZE, Access::Exec), "an instruction fetch from a non-executable region");
    assert!(!s.first_touch(&mut t, none, Access::Read), "PROT_NONE");
    assert!(!s.first_touch(&mut t, rw + 4 * PAGE_SIZE + 8, Access::Read), "past the region");
    assert!(!s.first_touch(&mut t, USER_END + 8, Access::Read), "above user space");
    assert!(!s.first_touch(&mut t, rw + 8, Access::Read), "mapped already");
    assert_eq!((s.stats, t.counters.tlbi_total()), before, "a refused first touch changes nothing");
    assert!(s.table().translate(VirtAddr::new(ro + PAGE_SIZE)).is_none());
    // What it maps: a zero page with the region's permissions, counted as a demand-zero fault,
    // with no TLBI (an empty entry becomes valid).
    assert!(s.first_touch(&mut t, ro + PAGE_SIZE + 16, Access::Read));
    assert!(s.first_touch(&mut t, rw + 2 * PAGE_SIZE + 8, Access::Write));
    assert_eq!((s.stats.pages, s.stats.demand), (before.0.pages + 2, before.0.demand + 2));
    assert_eq!(t.counters.tlbi_total(), before.1);
    let tr = s.table().translate(VirtAddr::new(ro + PAGE_SIZE)).unwrap();
    assert_eq!(tr.attrs.perms, perms_of(prot::READ));
    let tw = s.table().translate(VirtAddr::new(rw + 2 * PAGE_SIZE)).unwrap();
    assert_eq!(tw.attrs.perms, perms_of(RW));
    // SAFETY: HeapFrames' physical addresses are heap pointers to whole pages.
    let words = unsafe { core::slice::from_raw_parts(tw.phys.as_u64() as *const u64, 512) };
    assert!(words.iter().all(|&w| w == 0), "a zero page");
    // A PROT_NONE page (populated, then protected) is not a first touch.
    s.mprotect(&mut t, rw, PAGE_SIZE, 0).unwrap();
    assert!(!s.first_touch(&mut t, rw, Access::Read));
    // And `fault` still decides the rest as before.
    assert_eq!(
        touch(&mut s, &mut t, ro + PAGE_SIZE, Access::Write),
        FaultOutcome::Denied(Denial::Protection(prot::READ))
    );
    assert_eq!(touch(&mut s, &mut t, rw + 2 * PAGE_SIZE, Access::Write), FaultOutcome::Retry);
}

/// The first touch's check on the `prot` bits is the permissions' own.
#[test]
fn allows_is_what_the_permissions_grant() {
    for p in 0..=prot::ALL {
        for a in [Access::Read, Access::Write, Access::Exec] {
            assert_eq!(crate::space::allows(p, a), perms_of(p).contains(crate::space::need(a)), "prot {p:#x}, {a:?}");
        }
    }
}

#[test]
fn mprotect_and_munmap_arguments() {
    let (mut s, mut t) = space();
    let a = s
        .mmap(&mut t, crate::Mmap { addr: 0, len: 4 * PAGE_SIZE, prot: RW, flags: ANON, fd: NOFD, offset: 0 })
        .unwrap();
    assert_eq!(s.mprotect(&mut t, a + 1, PAGE_SIZE, prot::READ), Err(errno::EINVAL), "misaligned");
    assert_eq!(s.mprotect(&mut t, a, PAGE_SIZE, 0x10), Err(errno::EINVAL), "unknown bits");
    assert_eq!(s.mprotect(&mut t, a, 0, prot::READ), Ok(()), "zero length is fine");
    assert_eq!(s.mprotect(&mut t, a, 5 * PAGE_SIZE, prot::READ), Err(errno::ENOMEM), "past the region");
    assert_eq!(s.mprotect(&mut t, a - PAGE_SIZE, PAGE_SIZE, prot::READ), Err(errno::ENOMEM), "not mapped");
    assert_eq!(
        s.mprotect(&mut t, USER_END - PAGE_SIZE, 2 * PAGE_SIZE, prot::READ),
        Err(errno::ENOMEM),
        "past user space"
    );
    assert_eq!(s.mprotect(&mut t, a, u64::MAX, prot::READ), Err(errno::ENOMEM), "wraps");
    assert_eq!(s.munmap(&mut t, a + 1, PAGE_SIZE), Err(errno::EINVAL));
    assert_eq!(s.munmap(&mut t, a, 0), Err(errno::EINVAL));
    assert_eq!(s.munmap(&mut t, 0, PAGE_SIZE), Err(errno::EINVAL), "below user space");
    assert_eq!(s.munmap(&mut t, USER_END, PAGE_SIZE), Err(errno::EINVAL));
    assert_eq!(s.munmap(&mut t, a + 8 * PAGE_SIZE, PAGE_SIZE), Ok(()), "nothing there is fine");
    // mprotect splits regions; munmap of the middle leaves two.
    s.mprotect(&mut t, a + PAGE_SIZE, PAGE_SIZE, prot::READ).unwrap();
    assert_eq!(s.regions().len(), 3);
    s.munmap(&mut t, a + PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
    assert_eq!(s.regions().len(), 2);
    assert_eq!(touch(&mut s, &mut t, a + PAGE_SIZE, Access::Read), FaultOutcome::Denied(Denial::NoRegion));
}

#[test]
fn prot_none_and_back_costs_no_tlbi_and_read_only_denies_every_write() {
    let (mut s, mut t) = space();
    let n = 16;
    let a = s
        .mmap(&mut t, crate::Mmap { addr: 0, len: n * PAGE_SIZE, prot: RW, flags: ANON, fd: NOFD, offset: 0 })
        .unwrap();
    for i in 0..n {
        assert_eq!(touch(&mut s, &mut t, a + i * PAGE_SIZE, Access::Write), FaultOutcome::Mapped);
    }
    let t0 = t.counters.tlbi_total();
    s.mprotect(&mut t, a, n * PAGE_SIZE, prot::NONE).unwrap();
    let t1 = t.counters.tlbi_total();
    assert!(t1 > t0, "RW -> NONE flushes");
    assert_eq!(t1 - t0, 1, "one range TLBI for the whole call");
    for i in 0..n {
        let f = s.fault(&mut t, a + i * PAGE_SIZE, Access::Read, FaultKind::Translation);
        assert_eq!(f, FaultOutcome::Denied(Denial::Protection(prot::NONE)));
    }
    assert_eq!(s.stats.pages, n, "PROT_NONE keeps the pages");
    s.mprotect(&mut t, a, n * PAGE_SIZE, RW).unwrap();
    assert_eq!(t.counters.tlbi_total(), t1, "NONE -> RW: no TLBI");
    // PROT_READ: every write is refused, whether the page was written, only read, or never
    // touched; a read of a never-touched page maps a zero page read-only.
    s.mmap(
        &mut t,
        crate::Mmap {
            addr: a + n * PAGE_SIZE,
            len: 2 * PAGE_SIZE,
            prot: RW,
            flags: ANON | map::FIXED,
            fd: NOFD,
            offset: 0,
        },
    )
    .unwrap();
    touch(&mut s, &mut t, a + n * PAGE_SIZE, Access::Read);
    s.mprotect(&mut t, a, (n + 2) * PAGE_SIZE, prot::READ).unwrap();
    for i in 0..n + 2 {
        let va = a + i * PAGE_SIZE;
        for kind in [FaultKind::Translation, FaultKind::Permission] {
            let f = s.fault(&mut t, va, Access::Write, kind);
            assert_eq!(f, FaultOutcome::Denied(Denial::Protection(prot::READ)), "page {i} {kind:?}");
        }
    }
    assert_eq!(touch(&mut s, &mut t, a + (n + 1) * PAGE_SIZE, Access::Read), FaultOutcome::Mapped);
    let tr = s.table().translate(VirtAddr::new(a + (n + 1) * PAGE_SIZE)).unwrap();
    assert!(!tr.attrs.perms.contains(pgtable::Perms::WRITE), "populated read-only");
}

#[test]
fn lazy_relaxation_leaves_upgrades_unflushed_and_their_faults_are_spurious() {
    let (mut s, mut t) = space();
    s.table_mut().policy_mut().lazy_relax = true;
    let a = s
        .mmap(&mut t, crate::Mmap { addr: 0, len: 8 * PAGE_SIZE, prot: prot::READ, flags: ANON, fd: NOFD, offset: 0 })
        .unwrap();
    for i in 0..8 {
        touch(&mut s, &mut t, a + i * PAGE_SIZE, Access::Read);
    }
    let t0 = t.counters.tlbi_total();
    s.mprotect(&mut t, a, 8 * PAGE_SIZE, RW).unwrap();
    assert_eq!(t.counters.tlbi_total(), t0, "RO -> RW left to lazy relaxation");
    assert_eq!(s.table().stats().lazy_relaxed, 8);
    // A CPU with the old entry writes: a permission fault the tables no longer explain.
    assert_eq!(s.fault(&mut t, a, Access::Write, FaultKind::Permission), FaultOutcome::Spurious);
    assert_eq!(s.stats.spurious, 1);
    s.mprotect(&mut t, a, 8 * PAGE_SIZE, prot::READ).unwrap();
    assert!(t.counters.tlbi_total() > t0, "a restriction always flushes");
    assert_eq!(
        s.fault(&mut t, a, Access::Write, FaultKind::Permission),
        FaultOutcome::Denied(Denial::Protection(prot::READ))
    );
    // Without lazy relaxation the upgrade flushes.
    s.table_mut().policy_mut().lazy_relax = false;
    let t1 = t.counters.tlbi_total();
    s.mprotect(&mut t, a, 8 * PAGE_SIZE, RW).unwrap();
    assert!(t.counters.tlbi_total() > t1);
}

#[test]
fn loading_a_program_and_tearing_everything_down() {
    let mut tlb = CountingTlb::default();
    let mut s = AddressSpace::new(HeapFrames::default(), &mut tlb).unwrap();
    let mut synced = 0;
    let l = s.load(&mut tlb, &crate::elf::tests::tiny_pie(), |_, n| synced += n).unwrap();
    assert_eq!((l.entry, l.bias, l.end), (PROGRAM_BASE + 0x100, PROGRAM_BASE, PROGRAM_BASE + 0x3000));
    assert_eq!(synced, 4096, "the one text page");
    let text = s.table().translate(VirtAddr::new(PROGRAM_BASE)).unwrap();
    assert!(text.attrs.perms.contains(pgtable::Perms::USER_EXEC) && !text.attrs.perms.contains(pgtable::Perms::WRITE));
    let data = s.table().translate(VirtAddr::new(PROGRAM_BASE + 0x1000)).unwrap();
    // SAFETY: HeapFrames' physical addresses are heap pointers to whole pages.
    let (ret, slot, bss) = unsafe {
        (
            *((text.phys.as_u64() + 0x100) as *const u32),
            *((data.phys.as_u64() + 8) as *const u64),
            *((s.table().translate(VirtAddr::new(PROGRAM_BASE + 0x2000)).unwrap().phys.as_u64()) as *const u64),
        )
    };
    assert_eq!(ret, 0xd65f_03c0);
    assert_eq!(slot, PROGRAM_BASE + 0x100, "relocated for the bias");
    assert_eq!(bss, 0);
    assert_eq!(s.load(&mut tlb, &crate::elf::tests::tiny_pie(), |_, _| {}).unwrap_err(), crate::LoadError::Placement);
    assert!(matches!(
        s.load(&mut tlb, b"not an elf file at all, no no no, not even close to one", |_, _| {}),
        Err(crate::LoadError::Elf(_))
    ));
    s.map_stack(0x7fff_0000_0000, 64 * 1024).unwrap();
    assert_eq!(s.map_stack(0x7fff_0000_0000, 4096), Err(errno::EINVAL), "over the stack");
    let top = 0x7fff_0000_0000 - 8;
    assert_eq!(s.fault(&mut tlb, top, Access::Write, FaultKind::Translation), FaultOutcome::Mapped);
    assert_eq!(
        s.fault(&mut tlb, 0x7fff_0000_0000 - 65 * 1024, Access::Write, FaultKind::Translation),
        FaultOutcome::Denied(Denial::NoRegion),
        "below the stack"
    );
    s.map_bytes(&mut tlb, 0x5000_0000, b"hello", prot::READ).unwrap();
    assert_eq!(s.map_bytes(&mut tlb, 0x5000_0001, b"x", prot::READ), Err(errno::EINVAL));
    const { assert!(USER_START <= PROGRAM_BASE) };
    // SAFETY: nothing runs this address space.
    let frames = unsafe { s.destroy(&mut tlb) };
    assert_eq!(frames.in_use, 0, "every table and data page freed");
}

#[test]
fn random_calls_never_leak_or_panic() {
    let (mut s, mut t) = space();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let base = MMAP_BASE;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let va = base + (x % 64) * PAGE_SIZE + if (x >> 7).is_multiple_of(16) { 1 } else { 0 };
        let len = ((x >> 12) % 8) * PAGE_SIZE + if (x >> 9).is_multiple_of(16) { 7 } else { 0 };
        let p = (x >> 20) % 9;
        let _ = match (x >> 24) % 5 {
            0 => s.mmap(&mut t, crate::Mmap::anon(va, len, p, map::FIXED * ((x >> 30) & 1))).map(|_| ()),
            1 => s.munmap(&mut t, va, len),
            2 => s.mprotect(&mut t, va, len, p),
            3 => {
                s.fault(&mut t, va, Access::Write, FaultKind::Translation);
                Ok(())
            }
            _ => {
                s.fault(&mut t, va, Access::Read, FaultKind::Permission);
                Ok(())
            }
        };
    }
    // SAFETY: nothing runs this address space.
    let frames = unsafe { s.destroy(&mut t) };
    assert_eq!(frames.in_use, 0);
}

#[test]
fn a_denial_survives_its_code() {
    let all = [
        Denial::NoRegion,
        Denial::NoMemory,
        Denial::Unresolvable,
        Denial::Protection(0),
        Denial::Protection(prot::READ),
        Denial::Protection(prot::READ | prot::WRITE | prot::EXEC),
    ];
    for d in all {
        // Never 0: that word means "resolved" to the exception entry.
        assert_ne!(d.code(), 0, "{d:?}");
        assert_eq!(Denial::from_code(d.code()), Some(d));
    }
    let codes: std::collections::BTreeSet<u64> = all.iter().map(|d| d.code()).collect();
    assert_eq!(codes.len(), all.len(), "two denials share a code");
    for bad in [0, 5, 0xff, 0x101, 0x203] {
        assert_eq!(Denial::from_code(bad), None, "{bad:#x}");
    }
}
