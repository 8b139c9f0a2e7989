//! Where the loader puts what it receives, given the RAM of the DTB and what must not be
//! overwritten (the loader itself, the DTB it was given, firmware-reserved memory).
//!
//! * The hypervisor goes as low as it fits, 2 MiB aligned plus its `text_offset` (the arm64
//!   boot protocol), with [`HYP_RESERVE`] free after its image: the hypervisor takes its page-table
//!   frame pool there.
//! * The kernel Image (the hypervisor's initrd) and then the new DTB go as high as they fit,
//!   far from the hypervisor, the way firmware places an initrd: the hypervisor copies the DTB
//!   first thing and keeps clear of the initrd when it takes more memory from the top of RAM.
//!   The DTB is 8-byte aligned (4 KiB here) and does not cross a 2 MiB boundary.
//! * Compressed Images arrive in a staging area (placed the same way) and are inflated from
//!   there to their places.

use board::Region;
use core::fmt;

/// Memory the hypervisor uses right after its image (its minimum page-table frame pool).
pub const HYP_RESERVE: u64 = 16 << 20;
const BLOCK_2M: u64 = 2 << 20;
use abi::PAGE_SIZE as PAGE;

/// Sizes of what is to be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The hypervisor Image's `text_offset`.
    pub hyp_text_offset: u64,
    /// The hypervisor Image's `image_size`.
    pub hyp_image_size: u64,
    /// Bytes of the kernel Image file.
    pub kernel_len: u64,
    /// Room for the DTB the loader writes.
    pub dtb_len: u64,
    /// Bytes of compressed Images to stage (0: none).
    pub staging_len: u64,
}

/// Where everything goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The hypervisor's entry point (its 2 MiB aligned base + `text_offset`).
    pub hyp_entry: u64,
    /// What the hypervisor occupies and keeps: its base to the end of its [`HYP_RESERVE`].
    pub hyp_region: Region,
    /// The kernel Image.
    pub kernel: Region,
    /// The DTB.
    pub dtb: Region,
    /// Where compressed Images arrive (empty when nothing is staged).
    pub staging: Region,
}

/// Why nothing could be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanError {
    /// No free RAM of that size.
    NoRoom {
        /// `"hypervisor"`, `"kernel"` or `"device tree"`.
        what: &'static str,
        /// Bytes asked for.
        size: u64,
    },
    /// A size so large that the arithmetic overflows.
    TooLarge {
        /// What.
        what: &'static str,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PlanError::NoRoom { what, size } => {
                write!(
                    f,
                    "no free RAM for the {what} ({size:#x} bytes) clear of the loader, its DTB and reserved memory"
                )
            }
            PlanError::TooLarge { what } => write!(f, "the {what} is larger than the address space"),
        }
    }
}

const fn align_up(v: u64, a: u64) -> Option<u64> {
    match v.checked_add(a - 1) {
        Some(x) => Some(x & !(a - 1)),
        None => None,
    }
}

const fn align_down(v: u64, a: u64) -> u64 {
    v & !(a - 1)
}

/// The first region of any list in `avoid` that overlaps `r`.
fn hit<'a>(r: Region, avoid: &[&'a [Region]]) -> Option<&'a Region> {
    avoid.iter().flat_map(|l| l.iter()).find(|a| a.overlaps(&r))
}

/// RAM ranges in address order without allocating (the loader plans before it has much of a
/// heap, and the host tests the same code).
struct Sorted<'a> {
    ram: &'a [Region],
    last: Option<Region>,
}

impl<'a> Sorted<'a> {
    fn new(ram: &'a [Region]) -> Self {
        Self { ram, last: None }
    }

    /// The next range above the last one returned (by base, then size).
    fn next_up(&mut self) -> Option<Region> {
        let key = |r: &Region| (r.base, r.size);
        let next = *self.ram.iter().filter(|r| self.last.is_none_or(|l| key(r) > key(&l))).min_by_key(|r| key(r))?;
        self.last = Some(next);
        Some(next)
    }

    /// The next range below the last one returned.
    fn next_down(&mut self) -> Option<Region> {
        let key = |r: &Region| (r.base, r.size);
        let next = *self.ram.iter().filter(|r| self.last.is_none_or(|l| key(r) < key(&l))).max_by_key(|r| key(r))?;
        self.last = Some(next);
        Some(next)
    }
}

/// Lowest `align`ed `[a, a + size)` inside one RAM range and clear of `avoid`.
fn lowest(ram: &[Region], size: u64, align: u64, avoid: &[&[Region]]) -> Option<u64> {
    let mut ranges = Sorted::new(ram);
    while let Some(r) = ranges.next_up() {
        let Some(mut a) = align_up(r.base, align) else { continue };
        while a.checked_add(size).is_some_and(|e| e <= r.end()) {
            match hit(Region::new(a, size), avoid) {
                None => return Some(a),
                Some(c) => match align_up(c.end(), align) {
                    Some(next) => a = next,
                    None => break,
                },
            }
        }
    }
    None
}

/// Highest `align`ed `[a, a + size)` inside one RAM range, clear of `avoid`, and not crossing a
/// multiple of `window` (0: no such rule).
fn highest(ram: &[Region], size: u64, align: u64, window: u64, avoid: &[&[Region]]) -> Option<u64> {
    let mut ranges = Sorted::new(ram);
    while let Some(r) = ranges.next_down() {
        let Some(top) = r.end().checked_sub(size) else { continue };
        let mut a = align_down(top, align);
        while a >= r.base {
            // The next candidate lies below `limit` (exclusive end of the candidate).
            let limit = if let Some(c) = hit(Region::new(a, size), avoid) {
                c.base
            } else if window != 0 && a / window != (a + size - 1) / window {
                align_down(a + size - 1, window)
            } else {
                return Some(a);
            };
            match limit.checked_sub(size) {
                Some(below) if below < a => a = align_down(below, align),
                _ => break,
            }
        }
    }
    None
}

/// Places the hypervisor, the kernel and the DTB (see the module documentation).
pub fn plan(ram: &[Region], avoid: &[Region], req: &Request) -> Result<Layout, PlanError> {
    let too_large = |what| PlanError::TooLarge { what };
    let hyp_size = req
        .hyp_text_offset
        .checked_add(req.hyp_image_size)
        .and_then(|s| s.checked_add(HYP_RESERVE))
        .and_then(|s| align_up(s, BLOCK_2M))
        .ok_or(too_large("hypervisor"))?;
    let base =
        lowest(ram, hyp_size, BLOCK_2M, &[avoid]).ok_or(PlanError::NoRoom { what: "hypervisor", size: hyp_size })?;
    let hyp_region = Region::new(base, hyp_size);

    let kernel_size = align_up(req.kernel_len, PAGE).ok_or(too_large("kernel"))?;
    let kernel = highest(ram, kernel_size, PAGE, 0, &[avoid, &[hyp_region]])
        .ok_or(PlanError::NoRoom { what: "kernel", size: kernel_size })?;
    let kernel_block = Region::new(kernel, kernel_size);

    let dtb_size = align_up(req.dtb_len.max(1), PAGE).ok_or(too_large("device tree"))?;
    let dtb = match dtb_size <= BLOCK_2M {
        true => highest(ram, dtb_size, PAGE, BLOCK_2M, &[avoid, &[hyp_region, kernel_block]]),
        false => None,
    }
    .ok_or(PlanError::NoRoom { what: "device tree", size: dtb_size })?;
    let dtb_block = Region::new(dtb, dtb_size);

    let staging = match req.staging_len {
        0 => Region::new(0, 0),
        len => {
            let size = align_up(len, PAGE).ok_or(too_large("staging area"))?;
            let at = highest(ram, size, PAGE, 0, &[avoid, &[hyp_region, kernel_block, dtb_block]])
                .ok_or(PlanError::NoRoom { what: "compressed Images", size })?;
            Region::new(at, len)
        }
    };
    Ok(Layout {
        hyp_entry: base + req.hyp_text_offset,
        hyp_region,
        kernel: Region::new(kernel, req.kernel_len),
        dtb: Region::new(dtb, req.dtb_len),
        staging,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn req() -> Request {
        Request { hyp_text_offset: 0, hyp_image_size: 5 * MIB, kernel_len: 280_824, dtb_len: 0x11_0000, staging_len: 0 }
    }

    fn check(ram: &[Region], avoid: &[Region], l: &Layout) {
        let parts = [l.hyp_region, l.kernel, l.dtb, l.staging];
        for p in parts.iter().copied().filter(|p| p.size != 0) {
            assert!(ram.iter().any(|r| r.base <= p.base && p.end() <= r.end()), "{p:?} outside RAM");
            assert!(avoid.iter().all(|a| !a.overlaps(&p)), "{p:?} overlaps an avoided region");
        }
        for (i, a) in parts.iter().enumerate() {
            for b in &parts[i + 1..] {
                assert!(!a.overlaps(b), "{a:?} overlaps {b:?}");
            }
        }
        assert_eq!(l.hyp_region.base % BLOCK_2M, 0);
        assert_eq!(l.kernel.base % PAGE, 0);
        assert_eq!(l.dtb.base / BLOCK_2M, (l.dtb.end() - 1) / BLOCK_2M, "DTB crosses 2 MiB");
    }

    #[test]
    fn qemu_virt_with_the_loader_at_ram_plus_2m() {
        let ram = [Region::new(GIB, GIB)];
        let loader = Region::new(GIB + 2 * MIB, 0x4a_0000);
        let dtb = Region::new(GIB + 0x800_0000, MIB);
        let l = plan(&ram, &[loader, dtb], &req()).unwrap();
        check(&ram, &[loader, dtb], &l);
        // Above the loader (it is still running), below everything else.
        assert_eq!(l.hyp_region.base, GIB + 8 * MIB);
        assert_eq!(l.hyp_entry, l.hyp_region.base);
        assert_eq!(l.hyp_region.size, 22 * MIB);
        // Kernel and DTB at the top.
        assert_eq!(l.kernel.end(), 2 * GIB - (0x1000 - 280_824 % 0x1000));
        assert!(l.dtb.base > l.hyp_region.end() && l.dtb.end() <= l.kernel.base);
    }

    #[test]
    fn pi5_with_tf_a_below_0x80000_and_8_gib_in_three_ranges() {
        let ram = [Region::new(0, 0x3fc0_0000), Region::new(0x4000_0000, 0xc000_0000), Region::new(4 * GIB, 4 * GIB)];
        let tfa = Region::new(0, 0x8_0000);
        let loader = Region::new(0x20_0000, 0x4a_0000);
        let fw_dtb = Region::new(0x2eff_2000, 0xe000);
        let avoid = [tfa, loader, fw_dtb];
        let l = plan(&ram, &avoid, &Request { hyp_text_offset: 0x1000, ..req() }).unwrap();
        check(&ram, &avoid, &l);
        assert_eq!(l.hyp_region.base, 0x80_0000);
        assert_eq!(l.hyp_entry, 0x80_1000);
        assert_eq!(l.kernel.base + 0x45000, 8 * GIB, "kernel at the very top");
    }

    #[test]
    fn dtb_never_crosses_2m_and_steps_around_what_is_taken() {
        // The top of RAM is taken by the kernel; the DTB must go below it without crossing.
        let ram = [Region::new(GIB, 64 * MIB)];
        let r = Request { kernel_len: 3 * MIB + 0x800, dtb_len: MIB + 1, ..req() };
        let l = plan(&ram, &[], &r).unwrap();
        check(&ram, &[], &l);
        assert!(l.dtb.end() <= l.kernel.base);
        let r = Request { dtb_len: 3 * MIB, ..req() };
        assert_eq!(plan(&ram, &[], &r), Err(PlanError::NoRoom { what: "device tree", size: 3 * MIB }));
    }

    #[test]
    fn staging_goes_below_the_kernel_and_the_dtb() {
        let ram = [Region::new(GIB, GIB)];
        let l = plan(&ram, &[], &Request { staging_len: 262_000, ..req() }).unwrap();
        check(&ram, &[], &l);
        assert_eq!(l.staging.size, 262_000);
        assert!(l.staging.end() <= l.dtb.base && l.staging.base > l.hyp_region.end());
        let tight = [Region::new(GIB, 26 * MIB)];
        assert!(plan(&tight, &[], &Request { staging_len: MIB, ..req() }).is_ok());
        let e = plan(&tight, &[], &Request { staging_len: 4 * MIB, ..req() });
        assert!(matches!(e, Err(PlanError::NoRoom { what: "compressed Images", .. })), "{e:?}");
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let ram = [Region::new(GIB, 16 * MIB)];
        assert!(matches!(plan(&ram, &[], &req()), Err(PlanError::NoRoom { what: "hypervisor", .. })));
        let ram = [Region::new(GIB, 24 * MIB)];
        let e = plan(&ram, &[], &Request { kernel_len: 4 * MIB, ..req() });
        assert!(matches!(e, Err(PlanError::NoRoom { what: "kernel", .. })), "{e:?}");
        let huge = Request { hyp_image_size: u64::MAX - 10, ..req() };
        assert_eq!(plan(&ram, &[], &huge), Err(PlanError::TooLarge { what: "hypervisor" }));
        extern crate std;
        assert!(std::format!("{}", PlanError::NoRoom { what: "kernel", size: 1 }).contains("kernel"));
    }

    #[test]
    fn a_range_too_small_is_passed_over_for_the_next() {
        // The lowest range cannot hold the hypervisor, the highest not the kernel: each goes to
        // the next range in its direction.
        let ram = [Region::new(GIB, 4 * MIB), Region::new(2 * GIB, GIB), Region::new(8 * GIB, 2 * MIB)];
        let l = plan(&ram, &[], &Request { kernel_len: 3 * MIB, ..req() }).unwrap();
        check(&ram, &[], &l);
        assert_eq!(l.hyp_region.base, 2 * GIB);
        assert_eq!(l.kernel.base, 3 * GIB - 3 * MIB);
    }

    /// Places that end on the last byte they may use are taken: a DTB of exactly one 2 MiB
    /// window, a hypervisor region that fills a RAM range to its end.
    #[test]
    fn a_place_that_ends_on_its_bound_is_taken() {
        let ram = [Region::new(GIB, 64 * MIB)];
        let l = plan(&ram, &[], &Request { dtb_len: 2 * MIB, ..req() }).unwrap();
        check(&ram, &[], &l);
        assert_eq!((l.dtb.size, l.dtb.base % BLOCK_2M), (2 * MIB, 0));
        assert_eq!(
            plan(&ram, &[], &Request { dtb_len: 2 * MIB + 1, ..req() }),
            Err(PlanError::NoRoom { what: "device tree", size: 2 * MIB + PAGE })
        );
        // The first range holds the 22 MiB region exactly; the kernel and DTB go to the next.
        let ram = [Region::new(GIB, 22 * MIB), Region::new(2 * GIB, 8 * MIB)];
        let l = plan(&ram, &[], &req()).unwrap();
        check(&ram, &[], &l);
        assert_eq!(l.hyp_region, Region::new(GIB, 22 * MIB));
        assert_eq!(lowest(&ram, 22 * MIB + 1, BLOCK_2M, &[]), None);
    }

    #[test]
    fn the_highest_place_may_end_exactly_at_a_window_boundary() {
        let ram = [Region::new(GIB, 4 * MIB)];
        // [GIB + 3M, GIB + 4M) ends at a 2 MiB boundary without crossing one.
        assert_eq!(highest(&ram, MIB, PAGE, BLOCK_2M, &[]), Some(GIB + 3 * MIB));
        assert_eq!(highest(&ram, MIB + PAGE, PAGE, BLOCK_2M, &[]), Some(GIB + 3 * MIB - PAGE));
        // The highest place crosses GIB + 2M: the next candidate ends exactly there.
        assert_eq!(highest(&[Region::new(GIB, 3 * MIB)], MIB + PAGE, PAGE, BLOCK_2M, &[]), Some(GIB + MIB - PAGE));
        // 2M + a page cannot help crossing one in 4M.
        assert_eq!(highest(&ram, 2 * MIB + PAGE, PAGE, BLOCK_2M, &[]), None);
    }

    #[test]
    fn random_layouts_never_overlap() {
        // A small deterministic generator: RAM in 1-3 ranges, 0-4 avoided regions.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut placed = 0;
        for _ in 0..2000 {
            let n = 1 + next(3) as usize;
            let mut ram = [Region::new(0, 0); 3];
            let mut at = next(4) * GIB;
            for r in ram.iter_mut().take(n) {
                let size = (8 + next(200)) * MIB;
                *r = Region::new(at, size);
                at += size + next(3) * GIB;
            }
            let ram = &ram[..n];
            let mut avoid = [Region::new(0, 0); 4];
            let k = next(5) as usize;
            for a in avoid.iter_mut().take(k) {
                let r = ram[next(n as u64) as usize];
                *a = Region::new(r.base + next(r.size / PAGE) * PAGE, (1 + next(64)) * PAGE * 64);
            }
            let avoid = &avoid[..k];
            let r = Request {
                hyp_text_offset: next(4) * PAGE,
                hyp_image_size: (1 + next(8)) * MIB,
                kernel_len: 64 + next(8 * MIB),
                dtb_len: 1 + next(MIB),
                staging_len: next(2) * (1 + next(4 * MIB)),
            };
            if let Ok(l) = plan(ram, avoid, &r) {
                check(ram, avoid, &l);
                placed += 1;
            }
        }
        assert!(placed > 1000, "only {placed} of 2000 placed");
    }
}
