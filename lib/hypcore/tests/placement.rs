//! The rules of guest and hypervisor placement that a boot under QEMU does not show (a region
//! one page off, a pool 2 MiB off, a bound that is inclusive where it should not be): each
//! stated at the value where it decides, through the crate's public decisions.

use hypcore::home::{decide, Home, HomeInput};
use hypcore::load::{order_copies, place, place_guest, Copy, GuestRam, Kernel, LoadError, LoadInput, VIRT_PAGE};
use hypcore::plan::{frame_pool_size, MemoryPlan, PlanInput, FRAME_POOL_MIN};
use hypcore::Range;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const BASE: u64 = 0x4000_0000;

/// QEMU `virt`'s loader on `mem` bytes of RAM with a 1 MiB DTB.
fn virt(mem: u64, kernel: Kernel, initrd: Option<u64>) -> Result<hypcore::load::Placement, LoadError> {
    place(&LoadInput { ram: Range::new(BASE, BASE + mem), kernel, initrd_len: initrd, dtb_len: MIB, page: VIRT_PAGE })
}

#[test]
fn an_initrd_or_a_dtb_that_ends_on_the_last_byte_of_ram_fits() {
    // 64 MiB: the initrd at half of RAM (32 MiB); the DTB on the next 2 MiB boundary after it.
    let k = Kernel::raw(4096);
    // An initrd up to 1 MiB below the top leaves the DTB the last MiB: both end exactly at it.
    let p = virt(64 * MIB, k, Some(29 * MIB)).unwrap();
    assert_eq!(p.initrd.unwrap().end, BASE + 61 * MIB);
    assert_eq!(p.dtb, Range::new(BASE + 62 * MIB, BASE + 63 * MIB));
    let p = virt(64 * MIB, k, Some(31 * MIB)).unwrap_err();
    assert!(matches!(p, LoadError::NoRoomForDtb { .. }), "{p:?}");
    // Without room for the DTB anyway, an initrd ending on RAM's last byte is not too large.
    let exact = place(&LoadInput {
        ram: Range::new(BASE, BASE + 64 * MIB),
        kernel: k,
        initrd_len: Some(32 * MIB),
        dtb_len: 0,
        page: VIRT_PAGE,
    });
    assert!(!matches!(exact, Err(LoadError::InitrdTooLarge { .. })), "{exact:?}");
    let over = place(&LoadInput {
        ram: Range::new(BASE, BASE + 64 * MIB),
        kernel: k,
        initrd_len: Some(32 * MIB + 1),
        dtb_len: 0,
        page: VIRT_PAGE,
    });
    assert!(matches!(over, Err(LoadError::InitrdTooLarge { .. })), "{over:?}");
    // A DTB of exactly the room left after the initrd.
    let p = place(&LoadInput {
        ram: Range::new(BASE, BASE + 64 * MIB),
        kernel: k,
        initrd_len: Some(MIB),
        dtb_len: 30 * MIB,
        page: VIRT_PAGE,
    })
    .unwrap();
    assert_eq!(p.dtb.end, BASE + 64 * MIB);
}

#[test]
fn a_kernel_file_longer_than_its_image_size_keeps_its_whole_file_clear() {
    // An Image whose file (with its appended data) runs 1 MiB past its image_size.
    let k = Kernel::image(5 * MIB, 0, 4 * MIB);
    let p = virt(GIB, k, None).unwrap();
    assert_eq!(p.kernel, Range::new(BASE + 2 * MIB, BASE + 6 * MIB), "image_size counts for QEMU");
    assert_eq!(p.kernel_room(&k), Range::new(BASE + 2 * MIB, BASE + 7 * MIB), "the file is copied whole");
    assert_eq!(p.pieces(&k)[0], ("kernel", p.kernel_room(&k)));
    // Reserved memory under the file's tail (past image_size) moves the guest on.
    let ranges = [Range::new(BASE, BASE + GIB), Range::new(4 * GIB, 5 * GIB)];
    let reserved = [Range::new(BASE + 6 * MIB + 0x1000, BASE + 6 * MIB + 0x2000)];
    let what = LoadInput { ram: Range::default(), kernel: k, initrd_len: None, dtb_len: MIB, page: VIRT_PAGE };
    let (w, _) = place_guest(&what, &GuestRam { base: BASE, ranges: &ranges, reserved: &reserved }).unwrap();
    assert_eq!(w, ranges[1], "the file's tail would land on reserved memory in the first range");
}

/// Runs `copies` in the order `order_copies` gives on a model memory: every destination must
/// end with its source's bytes as they were.
fn copies_end_right(copies: &[Copy], scratch: &[Range]) {
    let mut mem: Vec<u8> = (0..4096usize).map(|i| (i * 7 + i / 251) as u8).collect();
    let want: Vec<Vec<u8>> = copies.iter().map(|c| mem[c.from as usize..(c.from + c.len) as usize].to_vec()).collect();
    let order = order_copies(copies, scratch).unwrap();
    for c in &order {
        mem.copy_within(c.from as usize..(c.from + c.len) as usize, c.to as usize);
    }
    for (c, w) in copies.iter().zip(&want) {
        assert_eq!(&mem[c.to as usize..(c.to + c.len) as usize], &w[..], "{copies:?} -> {order:?}");
    }
}

#[test]
fn scratch_space_for_a_cycle_never_overwrites_a_copy_already_done() {
    // The first copy is free and goes first; the other two swap places and need scratch. The
    // first piece of scratch RAM is where the first copy went.
    let copies = [
        Copy { from: 3000, to: 0, len: 100 },
        Copy { from: 200, to: 300, len: 100 },
        Copy { from: 300, to: 200, len: 100 },
    ];
    copies_end_right(&copies, &[Range::new(0, 100), Range::new(1000, 1200)]);
}

/// QEMU `virt`: the 5 MiB image at RAM + 2 MiB, the initrd and DTB at RAM + 128 MiB.
fn qemu_home(ram: Vec<Range>) -> HomeInput {
    HomeInput {
        ram,
        image: Range::new(GIB + 2 * MIB, GIB + 7 * MIB),
        reserved: vec![],
        loaded: vec![Range::new(GIB + 128 * MIB, GIB + 131 * MIB)],
        slotpool: None,
    }
}

#[test]
fn the_top_of_ram_is_the_range_that_ends_highest_even_when_it_is_the_smaller() {
    let input = qemu_home(vec![Range::new(GIB, 3 * GIB), Range::new(4 * GIB, 4 * GIB + 64 * MIB)]);
    assert_eq!(decide(&input), Home::MoveTo(4 * GIB + 64 * MIB - 22 * MIB));
}

#[test]
fn a_highest_range_exactly_as_large_as_the_region_takes_it() {
    let input = qemu_home(vec![Range::new(GIB, 2 * GIB), Range::new(4 * GIB, 4 * GIB + 22 * MIB)]);
    assert_eq!(decide(&input), Home::MoveTo(4 * GIB));
    // 2 MiB short: the region goes to the top of the highest range below that holds it.
    let input = qemu_home(vec![Range::new(GIB, 2 * GIB), Range::new(4 * GIB, 4 * GIB + 20 * MIB)]);
    assert_eq!(decide(&input), Home::MoveTo(2 * GIB - 22 * MIB));
}

#[test]
fn anything_the_boot_loader_put_at_the_top_keeps_the_hypervisor_where_it_is() {
    // The DTB alone (the first and only thing loaded) where the region would go.
    let input = HomeInput {
        loaded: vec![Range::new(2 * GIB - 2 * MIB, 2 * GIB - MIB)],
        ..qemu_home(vec![Range::new(GIB, 2 * GIB)])
    };
    assert!(matches!(decide(&input), Home::Stay(w) if w.contains("DTB or the initrd")), "{:?}", decide(&input));
}

/// The plan for `input` with the image moved where `decide` says.
fn plan_after_move(input: &HomeInput, initrd: Range) -> MemoryPlan {
    let Home::MoveTo(to) = decide(input) else { panic!("{:?}", decide(input)) };
    MemoryPlan::new(&PlanInput {
        ram: input.ram.clone(),
        image: Range::new(to, to + input.image.len()),
        initrd: Some(initrd),
        slotpool: input.slotpool,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn the_region_goes_right_below_a_slot_pool_aligned_below_a_top_that_is_not() {
    // RAM ends at 5.5 GiB: a 1 GiB pool goes at [4 GiB, 5 GiB) (1 GiB aligned), and the region
    // right below it: more is above the region than the pool's size.
    let input = HomeInput { slotpool: Some(GIB), ..qemu_home(vec![Range::new(GIB, 5 * GIB + 512 * MIB)]) };
    let plan = plan_after_move(&input, input.loaded[0]);
    assert_eq!(plan.slotpool, Range::new(4 * GIB, 5 * GIB));
    assert_eq!(plan.hyp.end, plan.slotpool.start, "a hole between the region and the pool: {plan:?}");
}

#[test]
fn the_region_starts_on_the_2m_boundary_below_the_image_and_its_pool_on_the_page_after_it() {
    let input = PlanInput {
        ram: vec![Range::new(GIB, 2 * GIB)],
        // A firmware that loads the image 4 KiB past a 2 MiB boundary; its BSS ends mid-page.
        image: Range::new(GIB + 2 * MIB + 0x1000, GIB + 7 * MIB + 0x10),
        initrd: Some(Range::new(GIB + 128 * MIB, GIB + 131 * MIB)),
        ..Default::default()
    };
    let p = MemoryPlan::new(&input).unwrap();
    assert_eq!(p.hyp.start, GIB + 2 * MIB);
    assert_eq!(p.frames_low.start, GIB + 7 * MIB + 0x1000, "the image's last page is not a frame");
    assert_eq!(p.hyp.end, GIB + 24 * MIB, "image end + 16 MiB, rounded up to 2 MiB");
    assert_eq!(p.guest_ram[0], Range::new(GIB, GIB + 2 * MIB));
}

#[test]
fn the_default_frame_pool_grows_from_2g_of_ram_and_stops_at_512m() {
    assert_eq!(frame_pool_size((2 << 30) - 1, None), Some(FRAME_POOL_MIN));
    assert_eq!(frame_pool_size(2 << 30, None), Some(128 * MIB), "2 GiB: RAM / 16");
    assert_eq!(frame_pool_size(8 << 30, None), Some(512 * MIB));
    assert_eq!(frame_pool_size(64 << 30, None), Some(512 * MIB), "at most 512 MiB");
    assert_eq!(frame_pool_size(GIB, Some(MIB)), Some(FRAME_POOL_MIN), "at least 16 MiB when asked");
    assert_eq!(frame_pool_size(GIB, Some(17 * MIB)), Some(18 * MIB), "rounded up to 2 MiB");
}

#[test]
fn a_slot_pool_of_exactly_1g_is_1g_aligned() {
    let input = PlanInput {
        ram: vec![Range::new(GIB, 5 * GIB + 512 * MIB)],
        image: Range::new(GIB + 2 * MIB, GIB + 7 * MIB),
        initrd: Some(Range::new(GIB + 128 * MIB, GIB + 131 * MIB)),
        slotpool: Some(GIB),
        ..Default::default()
    };
    assert_eq!(MemoryPlan::new(&input).unwrap().slotpool, Range::new(4 * GIB, 5 * GIB));
    let smaller = PlanInput { slotpool: Some(GIB - 2 * MIB), ..input };
    assert_eq!(MemoryPlan::new(&smaller).unwrap().slotpool.end, 5 * GIB + 512 * MIB, "2 MiB aligned at the top");
}

#[test]
fn spare_ram_above_the_guests_share_leaves_out_reserved_memory_and_the_initrd() {
    // The hypervisor at the top of 3 GiB; the guest gets the first GiB; the firmware reserved a
    // page and the boot loader put the initrd in what is above the guest's share.
    let reserved = Range::new(GIB + 1536 * MIB, GIB + 1536 * MIB + 0x1000);
    let initrd = Range::new(GIB + 1600 * MIB, GIB + 1603 * MIB);
    let input = PlanInput {
        ram: vec![Range::new(GIB, 3 * GIB)],
        image: Range::new(3 * GIB - 22 * MIB, 3 * GIB - 17 * MIB),
        reserved: vec![reserved],
        initrd: Some(initrd),
        guest_mem: Some(GIB),
        ..Default::default()
    };
    // The initrd must be the guest's: this plan refuses it, and says so.
    assert!(MemoryPlan::new(&input).is_err());
    let input = PlanInput { initrd: Some(Range::new(GIB + 128 * MIB, GIB + 131 * MIB)), ..input };
    let p = MemoryPlan::new(&input).unwrap();
    assert_eq!(p.guest_ram, vec![Range::new(GIB, 2 * GIB)]);
    assert!(p.spare.iter().all(|s| !s.overlaps(&reserved)), "reserved memory handed out as frames: {:?}", p.spare);
    assert!(p.hypervisor_owned().iter().all(|s| !s.overlaps(&reserved)));
    let spare: u64 = p.spare.iter().map(Range::len).sum();
    assert_eq!(spare, 3 * GIB - 22 * MIB - 2 * GIB - 0x1000 - p.frames_high.len());
}

/// A tree with RAM [0, 1 GiB), `/memreserve/` of the first page, and four spin-table CPUs
/// whose release words are in it (the Pi 4's firmware).
fn spin_table_board() -> board::Board {
    let cells = |v: &[u32]| v.iter().flat_map(|c| c.to_be_bytes()).collect::<Vec<u8>>();
    let mut w = board::FdtWriter::new();
    w.add_mem_reserve(0, 0x1000).unwrap();
    w.begin_node("").unwrap();
    w.property("#address-cells", &cells(&[1])).unwrap();
    w.property("#size-cells", &cells(&[1])).unwrap();
    w.begin_node("memory@0").unwrap();
    w.property("device_type", b"memory\0").unwrap();
    w.property("reg", &cells(&[0, 0x4000_0000])).unwrap();
    w.end_node().unwrap();
    w.begin_node("cpus").unwrap();
    w.property("#address-cells", &cells(&[1])).unwrap();
    w.property("#size-cells", &cells(&[0])).unwrap();
    for i in 0..4u32 {
        w.begin_node(&format!("cpu@{i}")).unwrap();
        w.property("device_type", b"cpu\0").unwrap();
        w.property("reg", &cells(&[i])).unwrap();
        w.property("enable-method", b"spin-table\0").unwrap();
        w.property("cpu-release-addr", &cells(&[0, 0xd8 + 8 * i])).unwrap();
        w.end_node().unwrap();
    }
    w.end_node().unwrap();
    w.end_node().unwrap();
    board::Board::from_dtb(&w.finish().unwrap()).unwrap()
}

#[test]
fn spin_table_memory_is_nobodys_ram() {
    let b = spin_table_board();
    let input = PlanInput::from_board(&b, Range::new(0x20_0000, 0x70_0000), None, None);
    assert_eq!(input.ram, vec![Range::new(0x1000, 0x4000_0000)], "a CPU may still spin in page 0");
    let p = MemoryPlan::new(&input).unwrap();
    assert!(p.guest_ram.iter().all(|g| g.start >= 0x1000), "{:?}", p.guest_ram);
}

/// An image loaded a page above a 2 MiB boundary at the top of RAM is home: its region starts
/// at that boundary.
#[test]
fn an_image_a_page_above_its_regions_start_is_already_home() {
    let top = 2 * GIB;
    let input = HomeInput {
        image: Range::new(top - 22 * MIB + 0x1000, top - 17 * MIB),
        ..qemu_home(vec![Range::new(GIB, top)])
    };
    assert_eq!(decide(&input), Home::Here);
}

#[test]
fn the_region_image_and_pool_must_fit_in_one_ram_range() {
    // The image fits in RAM, its 16 MiB of frames after it do not.
    let input = PlanInput {
        ram: vec![Range::new(GIB, GIB + 16 * MIB)],
        image: Range::new(GIB + 2 * MIB, GIB + 7 * MIB),
        ..Default::default()
    };
    assert!(matches!(MemoryPlan::new(&input), Err(hypcore::plan::PlanError::ImageNotInRam { .. })));
}

#[test]
fn the_migration_mirror_is_never_taken_over_reserved_memory() {
    let reserved = Range::new(3 * GIB - 8 * MIB, 3 * GIB - 8 * MIB + 0x1000);
    let input = PlanInput {
        ram: vec![Range::new(GIB, 3 * GIB)],
        image: Range::new(GIB + 2 * MIB, GIB + 7 * MIB),
        initrd: Some(Range::new(GIB + 128 * MIB, GIB + 131 * MIB)),
        reserved: vec![reserved],
        mirror: true,
        ..Default::default()
    };
    let p = MemoryPlan::new(&input).unwrap();
    assert!(!p.mirror.is_empty() && !p.mirror.overlaps(&reserved), "{p:?}");
}

/// `hyp.guest-mem` counts the machine's memory as the DTB gives it: a `no-map` hole in the
/// guest's share is nobody's, and the share still ends SIZE bytes above the RAM base.
#[test]
fn guest_mem_counts_the_memory_with_its_no_map_holes() {
    let hole = Range::new(GIB + 256 * MIB, GIB + 288 * MIB);
    let input = PlanInput {
        ram: vec![Range::new(GIB, hole.start), Range::new(hole.end, 3 * GIB)],
        memory: vec![Range::new(GIB, 3 * GIB)],
        image: Range::new(3 * GIB - 22 * MIB, 3 * GIB - 17 * MIB),
        initrd: Some(Range::new(GIB + 128 * MIB, GIB + 131 * MIB)),
        guest_mem: Some(GIB),
        ..Default::default()
    };
    let p = MemoryPlan::new(&input).unwrap();
    assert_eq!(p.guest_ram, vec![Range::new(GIB, hole.start), Range::new(hole.end, 2 * GIB)]);
}

/// Every piece lies inside one range of the guest's RAM: a kernel reaching from below the
/// first range into it does not fit there (the loader's first window starts at the machine's
/// RAM base, below the guest's first range).
#[test]
fn a_piece_across_the_start_of_the_guests_ram_is_not_placed_there() {
    let ranges = [Range::new(64 * MIB, GIB), Range::new(2 * GIB, 3 * GIB)];
    let k = Kernel::image(MIB, 0, 70 * MIB);
    let what = LoadInput { ram: Range::default(), kernel: k, initrd_len: None, dtb_len: MIB, page: VIRT_PAGE };
    let (w, p) = place_guest(&what, &GuestRam { base: 0, ranges: &ranges, reserved: &[] }).unwrap();
    assert_eq!(w, ranges[1], "the kernel at 2 MiB would start below the guest's RAM");
    assert!(ranges[1].contains(p.entry, 70 * MIB));
}
