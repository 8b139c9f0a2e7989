//! Where the hypervisor runs, so the guest's RAM has no hole in it.
//!
//! QEMU loads the hypervisor (an arm64 Image) at RAM base + 2 MiB, the Pi 5 firmware at
//! `kernel_address`: in the middle of what should be the guest's RAM. Left there, the guest
//! gets RAM with a hole (`[base, base + 2 MiB) + [hypervisor end, top)`). So at boot the
//! hypervisor moves itself to the top of RAM: its region (image, then the first piece of its
//! page-table frame pool, [`crate::plan`]) then ends at the top of the highest RAM range, the
//! pools taken from the top sit right below it, and the guest's RAM is one range from the RAM
//! base up (when firmware keeps memory near the top, as UEFI's runtime services do, the region
//! goes to the top of the highest range below that holds it). A hypervisor already at the bottom of its RAM range (nothing but firmware-reserved
//! memory below it) stays there: the guest's RAM then starts above it.
//!
//! The move copies the image, so the destination must not touch the running image nor anything
//! the boot loader placed (the DTB, the initrd) or the firmware reserved. When it would, the
//! hypervisor stays where it is and says why.

use crate::plan::FRAME_POOL_MIN;
use crate::range::{align_down, align_up, Range};
use crate::BLOCK_2M;
use alloc::vec::Vec;

/// What the decision needs.
#[derive(Debug, Clone, Default)]
pub struct HomeInput {
    /// RAM ranges of the DTB.
    pub ram: Vec<Range>,
    /// The running image, BSS included.
    pub image: Range,
    /// Firmware-reserved memory (`/memreserve/`, `/reserved-memory`).
    pub reserved: Vec<Range>,
    /// What the boot loader placed and the hypervisor still needs: the DTB, the initrd.
    pub loaded: Vec<Range>,
    /// `hyp.slotpool=`: the memory plan takes it from the very top first, so the region goes
    /// right below it.
    pub slotpool: Option<u64>,
}

/// The decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Home {
    /// Already at the top of RAM, or at the bottom of its RAM range: no hole either way.
    Here,
    /// Move the image so it starts at this (2 MiB aligned) address.
    MoveTo(u64),
    /// Stay, leaving a hole in the guest's RAM, because of this.
    Stay(&'static str),
}

/// Bytes of the region around an image of `image_len` bytes started on a 2 MiB boundary (as
/// [`crate::plan::MemoryPlan`] computes it); `None` on overflow.
pub fn region_len(image_len: u64) -> Option<u64> {
    align_up(image_len.checked_add(FRAME_POOL_MIN)?, BLOCK_2M)
}

/// Bytes the memory plan takes above the hypervisor's region: the memslot pool, placed as
/// [`crate::plan::MemoryPlan`] places it (highest, 1 GiB aligned from 1 GiB up, else 2 MiB).
fn above_region(top: u64, slotpool: Option<u64>) -> u64 {
    let Some(size) = slotpool.filter(|&s| s != 0).and_then(|s| align_up(s, BLOCK_2M)) else {
        return 0;
    };
    let align = if size >= crate::BLOCK_1G { crate::BLOCK_1G } else { BLOCK_2M };
    top.checked_sub(size).map_or(0, |s| top - align_down(s, align))
}

/// Decides where the hypervisor runs.
pub fn decide(input: &HomeInput) -> Home {
    let img = input.image;
    let Some(len) = region_len(img.len()) else {
        return Home::Stay("the image is too large");
    };
    let here = Range::new(align_down(img.start, BLOCK_2M), align_down(img.start, BLOCK_2M).saturating_add(len));
    let Some(top_range) = input.ram.iter().max_by_key(|r| r.end) else {
        return Home::Stay("no RAM");
    };
    if !top_range.end.is_multiple_of(BLOCK_2M) {
        return Home::Stay("the top of RAM is not 2 MiB aligned");
    }
    // The region ends at the top of the highest RAM range; when that range is too small (UEFI
    // runtime services keep memory near the top of RAM, leaving a sliver above them), at the
    // 2 MiB aligned top of the highest range below that holds it: the guest's RAM from the RAM
    // base stays one range, and the sliver joins the guest or the spare RAM.
    let top_of = |r: &Range, end: u64| {
        end.checked_sub(above_region(end, input.slotpool)).and_then(|t| t.checked_sub(len)).filter(|&t| t >= r.start)
    };
    let lower = || {
        let mut below: Vec<&Range> = input.ram.iter().filter(|r| r.end <= top_range.start).collect();
        below.sort_by_key(|r| core::cmp::Reverse(r.end));
        below.into_iter().find_map(|r| top_of(r, align_down(r.end, BLOCK_2M)))
    };
    let Some(target) = top_of(top_range, top_range.end).or_else(lower) else {
        return Home::Stay("the highest RAM range is smaller than the hypervisor's region");
    };
    if here.start == target {
        return Home::Here;
    }
    // At the bottom of its RAM range: everything below is firmware's, so no hole either.
    if let Some(r) = input.ram.iter().find(|r| r.contains(here.start, here.len())) {
        let mut below = alloc::vec![Range::new(r.start, here.start)];
        for res in &input.reserved {
            below = crate::range::subtract(&below, *res);
        }
        if below.iter().all(|b| b.is_empty()) {
            return Home::Here;
        }
    }
    let dest = Range::new(target, target + len);
    if dest.overlaps(&img) || dest.overlaps(&here) {
        return Home::Stay("the top of RAM overlaps the running image (RAM is too small to move it)");
    }
    if input.loaded.iter().any(|l| l.overlaps(&dest)) {
        return Home::Stay("the boot loader put the DTB or the initrd at the top of RAM");
    }
    if input.reserved.iter().any(|r| r.overlaps(&dest)) {
        return Home::Stay("firmware-reserved memory lies at the top of RAM");
    }
    Home::MoveTo(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{MemoryPlan, PlanInput};
    use alloc::vec;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// QEMU `virt`: RAM at 1 GiB, the image (5 MiB with BSS) at RAM + 2 MiB, the initrd at RAM +
    /// 128 MiB and the DTB after it.
    fn qemu(mem: u64) -> HomeInput {
        HomeInput {
            ram: vec![Range::new(GIB, GIB + mem)],
            image: Range::new(GIB + 2 * MIB, GIB + 7 * MIB),
            reserved: vec![],
            loaded: vec![Range::new(GIB + 128 * MIB, GIB + 158 * MIB), Range::new(GIB + 158 * MIB, GIB + 159 * MIB)],
            slotpool: None,
        }
    }

    #[test]
    fn qemu_moves_to_the_top_and_the_guest_gets_one_range() {
        let input = qemu(GIB);
        // 5 MiB image + 16 MiB pool -> a 22 MiB region ending at 2 GiB.
        assert_eq!(decide(&input), Home::MoveTo(2 * GIB - 22 * MIB));
        // Once there it stays, and the memory plan gives the guest [1 GiB, 2 GiB - 22 MiB).
        let moved = HomeInput { image: Range::new(2 * GIB - 22 * MIB, 2 * GIB - 17 * MIB), ..input.clone() };
        assert_eq!(decide(&moved), Home::Here);
        let plan = MemoryPlan::new(&PlanInput {
            ram: input.ram.clone(),
            image: moved.image,
            initrd: Some(input.loaded[0]),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(plan.guest_ram, vec![Range::new(GIB, 2 * GIB - 22 * MIB)]);
        assert_eq!(plan.hyp.end, 2 * GIB);
    }

    #[test]
    fn large_pools_leave_no_hole() {
        // 4 GiB: a 256 MiB frame pool; with and without a 1 GiB or a 64 MiB memslot pool.
        for slotpool in [None, Some(GIB), Some(64 * MIB)] {
            let input = HomeInput { slotpool, ..qemu(4 * GIB) };
            let Home::MoveTo(to) = decide(&input) else { panic!("{:?}", decide(&input)) };
            let plan = MemoryPlan::new(&PlanInput {
                ram: input.ram.clone(),
                image: Range::new(to, to + 5 * MIB),
                initrd: Some(input.loaded[0]),
                slotpool,
                ..Default::default()
            })
            .unwrap();
            assert_eq!(plan.guest_ram, vec![Range::new(GIB, plan.guest_ram[0].end)], "{slotpool:?}");
            assert_eq!(plan.guest_ram[0].end + plan.kept_bytes(), 5 * GIB, "{slotpool:?}: {plan:?}");
        }
    }

    #[test]
    fn at_the_bottom_above_firmware_memory_it_stays() {
        // Pi 5 style: RAM from 0, TF-A reserves [0, 2 MiB) here, the image right above it.
        let input = HomeInput {
            ram: vec![Range::new(0, GIB)],
            image: Range::new(2 * MIB, 7 * MIB),
            reserved: vec![Range::new(0, 2 * MIB)],
            loaded: vec![],
            slotpool: None,
        };
        assert_eq!(decide(&input), Home::Here);
        // With free RAM below (TF-A only up to 512 KiB) it moves to the top instead.
        let input = HomeInput { reserved: vec![Range::new(0, 512 << 10)], ..input };
        assert_eq!(decide(&input), Home::MoveTo(GIB - 22 * MIB));
    }

    #[test]
    fn stays_and_says_why_when_the_top_is_taken() {
        let small = qemu(32 * MIB);
        assert!(
            matches!(decide(&small), Home::Stay(w) if w.contains("overlaps the running image")),
            "{:?}",
            decide(&small)
        );
        let mut dtb_on_top = qemu(GIB);
        dtb_on_top.loaded.push(Range::new(2 * GIB - MIB, 2 * GIB));
        assert!(matches!(decide(&dtb_on_top), Home::Stay(w) if w.contains("DTB or the initrd")));
        let mut reserved_top = qemu(GIB);
        reserved_top.reserved.push(Range::new(2 * GIB - 4 * MIB, 2 * GIB - 3 * MIB));
        assert!(matches!(decide(&reserved_top), Home::Stay(w) if w.contains("firmware-reserved")));
        let odd = HomeInput { ram: vec![Range::new(GIB, 2 * GIB - 4096)], ..qemu(GIB) };
        assert!(matches!(decide(&odd), Home::Stay(_)));
        assert!(matches!(decide(&HomeInput { ram: vec![], ..qemu(GIB) }), Home::Stay("no RAM")));
    }

    #[test]
    fn the_highest_range_is_the_top() {
        // Two RAM ranges (a Pi 5 with 8 GiB has RAM below and above 4 GiB).
        let input = HomeInput { ram: vec![Range::new(0, 3 * GIB), Range::new(4 * GIB, 8 * GIB)], ..qemu(GIB) };
        let input = HomeInput { image: Range::new(2 * MIB + 4 * GIB / 4, 7 * MIB + GIB), ..input };
        assert_eq!(decide(&input), Home::MoveTo(8 * GIB - 22 * MIB));
    }

    /// EDK2 on QEMU `virt` with 1100 MiB: runtime-services regions near the top leave a 128 KiB
    /// sliver above them (the UEFI entry lists RAM with holes there, `efi::ram_from_map`): the
    /// region goes to the 2 MiB aligned top of the highest range below that holds it, and the
    /// memory plan still gives the guest its first 1 GiB as one range.
    #[test]
    fn a_sliver_above_firmware_memory_is_skipped() {
        let ram = vec![
            Range::new(GIB, 0x8104_0000),
            Range::new(0x8133_0000, 0x8480_0000),
            Range::new(0x84be_0000, 0x84c0_0000),
        ];
        let input = HomeInput { ram: ram.clone(), ..qemu(GIB) };
        let to = 0x8480_0000 - 22 * MIB;
        assert_eq!(decide(&input), Home::MoveTo(to));
        let plan = MemoryPlan::new(&PlanInput {
            ram,
            image: Range::new(to, to + 5 * MIB),
            guest_mem: Some(GIB),
            ..PlanInput::default()
        })
        .unwrap();
        assert_eq!(plan.guest_ram, vec![Range::new(GIB, 2 * GIB)]);
        // No range below holds it: stays, and says why.
        let tiny = HomeInput {
            ram: vec![Range::new(GIB, GIB + 20 * MIB), Range::new(3 * GIB, 3 * GIB + 2 * MIB)],
            ..qemu(GIB)
        };
        assert_eq!(decide(&tiny), Home::Stay("the highest RAM range is smaller than the hypervisor's region"));
    }
}
