//! The boot-time memory plan: what the hypervisor keeps and what the guest gets.
//!
//! The hypervisor keeps, out of the DTB's RAM:
//!
//! 1. **its region**: from the 2 MiB boundary below its image to the 2 MiB boundary at or above
//!    `image end + FRAME_POOL_MIN`. The part after the image is the first piece of the
//!    page-table frame pool. 2 MiB alignment lets the guest's stage 2 use blocks around it.
//! 2. **the memslot pool** (`hyp.slotpool=`): from the top of RAM, 1 GiB aligned when it is
//!    1 GiB or more (so 1 GiB blocks can map it), else 2 MiB aligned. Taken first: the largest
//!    alignment first leaves the fewest gaps;
//! 3. **more frame pool**, when the pool is larger than what fits in the region (`hyp.pool=`,
//!    or the default for 2 GiB of RAM and more): 2 MiB aligned, from the top of what is left.
//!
//! The hypervisor moves itself to the top of RAM first when it can ([`crate::home`]), leaving
//! room above its region for the memslot pool: then everything it keeps is one block at the top
//! and the guest's RAM is one range.
//!
//! Pieces taken from the top never cover the initrd or firmware-reserved memory. The guest
//! gets every other byte of RAM, or, with `hyp.guest-mem=SIZE` ([`PlanInput::guest_mem`]),
//! exactly the first SIZE bytes of the machine's memory: everything above is the hypervisor's
//! (what it does not need joins the frame pool as [`MemoryPlan::spare`]). The xtask gives QEMU
//! `--mem` plus the hypervisor's share, found by running this very plan ([`crate::share`]),
//! and passes `hyp.guest-mem=` so the guest gets `--mem` exactly. RAM here is the DTB's memory without its `no-map` reserved
//! regions ([`PlanInput::from_board`]): firmware such as TF-A on the Pi 5 owns those, and
//! neither the hypervisor nor the guest maps them. When a request cannot be met, the error says what was in the
//! way, so the user knows which knob to turn.

use crate::range::{self, align_down, align_up, Range};
use crate::{BLOCK_1G, BLOCK_2M, PAGE};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// Frame pool below 2 GiB of RAM, and the least any pool gets.
pub const FRAME_POOL_MIN: u64 = 16 << 20;
/// Largest default frame pool.
pub const FRAME_POOL_MAX_DEFAULT: u64 = 512 << 20;

/// The frame pool's size: `requested` (`hyp.pool=`) if given, at least [`FRAME_POOL_MIN`]; else
/// 16 MiB below 2 GiB of RAM and RAM / 16 (at most 512 MiB) from there, enough for the page
/// tables of a 64 GiB memslot of 4 KiB pages (~130 MiB) with 4 GiB of RAM. Rounded up to 2 MiB;
/// `None` if that overflows.
pub fn frame_pool_size(ram_bytes: u64, requested: Option<u64>) -> Option<u64> {
    let s = match requested {
        Some(r) => r.max(FRAME_POOL_MIN),
        None if ram_bytes < 2 << 30 => FRAME_POOL_MIN,
        None => (ram_bytes / 16).clamp(FRAME_POOL_MIN, FRAME_POOL_MAX_DEFAULT),
    };
    align_up(s, BLOCK_2M)
}

/// What the plan starts from.
#[derive(Debug, Clone, Default)]
pub struct PlanInput {
    /// RAM ranges of the DTB.
    pub ram: Vec<Range>,
    /// The hypervisor's image as loaded, BSS included.
    pub image: Range,
    /// Memory the firmware reserved (`/memreserve/`, `/reserved-memory`): never taken from the
    /// top, and stays guest RAM (with its reserved-memory node in the guest's DTB).
    pub reserved: Vec<Range>,
    /// The initrd QEMU or the firmware loaded (it holds the guest kernel).
    pub initrd: Option<Range>,
    /// The files a boot loader described in `/chosen/module@…` nodes (the guest kernel, its
    /// initramfs: `board::modules`), kept like the initrd.
    pub modules: Vec<Range>,
    /// `hyp.pool=`: the frame pool's size.
    pub pool: Option<u64>,
    /// `hyp.slotpool=`: the memslot pool's size (`None` or 0: no pool).
    pub slotpool: Option<u64>,
    /// `hyp.migrate`: keep a second memory image as large as the guest's RAM (half of what is
    /// left, or the guest's [`Self::guest_mem`]), for pre-copy migration into it.
    pub mirror: bool,
    /// The DTB's memory as it is (no-map regions included), in address order: what
    /// [`Self::guest_mem`] counts. Empty: [`Self::ram`].
    pub memory: Vec<Range>,
    /// `hyp.guest-mem=SIZE`: the guest's RAM is the first SIZE bytes of [`Self::memory`] (minus
    /// the no-map regions in them, which are nobody's); nothing the hypervisor keeps may lie
    /// there, and everything above is the hypervisor's. `None`: every byte the hypervisor does
    /// not need is the guest's.
    pub guest_mem: Option<u64>,
}

impl PlanInput {
    /// The input for `board` with the hypervisor's `image` where it was loaded:
    /// [`Self::from_facts`] of the full parse's facts.
    pub fn from_board(board: &board::Board, image: Range, pool: Option<u64>, slotpool: Option<u64>) -> PlanInput {
        Self::from_facts(&board.mem_facts(), image, pool, slotpool)
    }

    /// The input for a tree's memory facts (`board::MemFacts`, from the full parse or the early
    /// scan) with the hypervisor's `image` where it was loaded: RAM is the DTB's memory minus
    /// its `no-map` reserved regions and the firmware's spin-table memory (a CPU may still spin
    /// there: `MemFacts::spin_table_regions`); the other reserved regions (and `/memreserve/`)
    /// stay RAM that nothing is placed in.
    pub fn from_facts(f: &board::MemFacts, image: Range, pool: Option<u64>, slotpool: Option<u64>) -> PlanInput {
        let region = |r: board::Region| Range::new(r.base, r.end());
        let mut ram: Vec<Range> = f.memory.iter().map(|r| region(*r)).collect();
        for hole in f.no_map_regions().chain(f.spin_table_regions()) {
            ram = range::subtract(&ram, region(hole));
        }
        let no_map: Vec<board::Region> = f.no_map_regions().collect();
        PlanInput {
            memory: f.memory.iter().map(|r| region(*r)).collect(),
            guest_mem: None,
            ram,
            image,
            reserved: f.reserved_regions().filter(|r| !no_map.contains(r)).map(region).collect(),
            initrd: f.initrd.map(region),
            modules: f.modules.iter().map(|r| region(*r)).collect(),
            pool,
            slotpool,
            mirror: false,
        }
    }
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    /// The region around the image (the image and the first piece of the frame pool).
    pub hyp: Range,
    /// Frame pool inside [`Self::hyp`], right after the image.
    pub frames_low: Range,
    /// Frame pool taken from the top of RAM (empty when the low piece is enough).
    pub frames_high: Range,
    /// The frame pool's total size as decided (the low piece may be a little larger).
    pub frame_pool_bytes: u64,
    /// The memslot pool (empty without `hyp.slotpool`).
    pub slotpool: Range,
    /// The second memory image (empty without `hyp.migrate`): at least as large as the guest's
    /// RAM, right below the rest of what the hypervisor keeps.
    pub mirror: Range,
    /// Everything else: the guest's RAM, in address order.
    pub guest_ram: Vec<Range>,
    /// With [`PlanInput::guest_mem`]: RAM above the guest's that the hypervisor keeps without
    /// needing it (more page-table frames), reserved memory and the initrd left out.
    pub spare: Vec<Range>,
    /// Bytes of RAM in the DTB.
    pub ram_bytes: u64,
}

impl MemoryPlan {
    /// Bytes of RAM the hypervisor keeps (RAM minus guest RAM).
    pub fn kept_bytes(&self) -> u64 {
        self.ram_bytes.saturating_sub(range::total(&self.guest_ram))
    }
    /// How the guest's DTB differs from the host's: its RAM, its command line and (if given)
    /// the PSCI conduit. The host's reserved-memory nodes stay, `no-map` ones included, so the
    /// guest knows what it was not given.
    pub fn guest_spec(&self, bootargs: String, psci_method: Option<board::PsciMethod>) -> board::GuestSpec {
        board::GuestSpec {
            memory: self.guest_ram.iter().map(|r| board::Region::new(r.start, r.len())).collect(),
            bootargs: Some(bootargs),
            initrd: None,
            psci_method,
            ..Default::default()
        }
    }

    /// Every range the guest must never reach: the region, the high frame pool, the slot pool,
    /// the mirror and the spare RAM (empty ones left out).
    pub fn hypervisor_owned(&self) -> Vec<Range> {
        let mut v: Vec<Range> =
            [self.hyp, self.frames_high, self.slotpool, self.mirror].into_iter().filter(|r| !r.is_empty()).collect();
        v.extend(self.spare.iter().copied().filter(|r| !r.is_empty()));
        v
    }
}

/// Why no plan fits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The image with its first frame-pool piece does not lie inside one RAM range.
    ImageNotInRam {
        /// The region the hypervisor needs.
        hyp: Range,
    },
    /// The initrd (the guest kernel) lies in the hypervisor's region: RAM is too small or the
    /// loader put it too close to the image.
    InitrdInHypervisor {
        /// The initrd.
        initrd: Range,
        /// The hypervisor's region.
        hyp: Range,
    },
    /// The initrd is not inside the RAM the guest keeps.
    InitrdOutsideRam {
        /// The initrd.
        initrd: Range,
    },
    /// `hyp.guest-mem` asks for more than the machine's memory.
    GuestMemTooLarge {
        /// `hyp.guest-mem`.
        guest_mem: u64,
        /// Bytes of the machine's memory.
        memory: u64,
    },
    /// With `hyp.guest-mem`, something the hypervisor keeps lies in the guest's share.
    KeptInGuestRam {
        /// What.
        what: &'static str,
        /// Where it is.
        range: Range,
        /// Where the guest's share ends.
        guest_end: u64,
    },
    /// A size overflows the address space.
    TooLarge {
        /// Which request.
        what: &'static str,
        /// The size asked for.
        size: u64,
    },
    /// No aligned free stretch for a pool taken from the top of RAM.
    NoRoom {
        /// `hyp.pool` (its part beyond the region) or `hyp.slotpool`.
        what: &'static str,
        /// Bytes needed.
        size: u64,
        /// Alignment needed.
        align: u64,
        /// The largest aligned free stretch there was.
        largest: u64,
        /// What was already taken or had to be avoided, to name in the message.
        taken: Vec<(&'static str, Range)>,
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ImageNotInRam { hyp } => write!(
                f,
                "the hypervisor's region {hyp} (its image and {} MiB of page-table frames) is not inside one RAM range",
                FRAME_POOL_MIN >> 20
            ),
            Self::InitrdInHypervisor { initrd, hyp } => write!(
                f,
                "the initrd {initrd} (the guest kernel) lies inside the hypervisor's region {hyp}: RAM is too small \
                 for the hypervisor's {} MiB region plus the guest (give the machine more memory)",
                hyp.len() >> 20
            ),
            Self::InitrdOutsideRam { initrd } => write!(f, "the initrd {initrd} is not in the guest's RAM"),
            Self::GuestMemTooLarge { guest_mem, memory } => write!(
                f,
                "hyp.guest-mem={} MiB is more than the machine's {} MiB of memory",
                guest_mem >> 20,
                memory >> 20
            ),
            Self::KeptInGuestRam { what, range, guest_end } => write!(
                f,
                "hyp.guest-mem: {what} {range} lies in the guest's RAM (up to {guest_end:#x}): the machine needs more \
                 memory on top of the guest's"
            ),
            Self::TooLarge { what, size } => write!(f, "{what}={size:#x} does not fit in the address space"),
            Self::NoRoom { what, size, align, largest, taken } => {
                write!(
                    f,
                    "{what}: no {} MiB-aligned free stretch of {} MiB in RAM (the largest is {} MiB)",
                    align >> 20,
                    size >> 20,
                    largest >> 20
                )?;
                for (i, (name, r)) in taken.iter().enumerate() {
                    write!(f, "{} {name} {r}", if i == 0 { "; in the way:" } else { "," })?;
                }
                Ok(())
            }
        }
    }
}

/// The largest `align`ed stretch inside `ram` free of `avoid`.
fn largest_free(ram: &[Range], align: u64, avoid: &[Range]) -> u64 {
    let mut free: Vec<Range> = ram.to_vec();
    for a in avoid {
        free = range::subtract(&free, *a);
    }
    free.iter()
        .filter_map(|r| Some(align_down(r.end, align).saturating_sub(align_up(r.start, align)?)))
        .max()
        .unwrap_or(0)
}

impl MemoryPlan {
    /// Plans the memory for `input`.
    pub fn new(input: &PlanInput) -> Result<MemoryPlan, PlanError> {
        let img = input.image;
        let too_large = |what, size| PlanError::TooLarge { what, size };
        let image_end = align_up(img.end, PAGE).ok_or(too_large("image end", img.end))?;
        let hyp_end = img
            .end
            .checked_add(FRAME_POOL_MIN)
            .and_then(|e| align_up(e, BLOCK_2M))
            .ok_or(too_large("image end", img.end))?;
        let hyp = Range::new(align_down(img.start, BLOCK_2M), hyp_end);
        if !input.ram.iter().any(|r| r.contains(hyp.start, hyp.len())) {
            return Err(PlanError::ImageNotInRam { hyp });
        }
        // What the guest comes from: the initrd, or the module nodes' files.
        let loaded: Vec<Range> = input.initrd.into_iter().chain(input.modules.iter().copied()).collect();
        if let Some(&i) = loaded.iter().find(|i| i.overlaps(&hyp)) {
            return Err(PlanError::InitrdInHypervisor { initrd: i, hyp });
        }
        let frames_low = Range::new(image_end, hyp.end);
        let mut guest_ram = range::subtract(&input.ram, hyp);

        let ram_bytes = range::total(&input.ram);
        let pool = frame_pool_size(ram_bytes, input.pool).ok_or(too_large("hyp.pool", input.pool.unwrap_or(0)))?;
        let mut avoid = input.reserved.clone();
        avoid.extend(loaded.iter().copied());
        let mut taken: Vec<(&'static str, Range)> = Vec::new();
        if let Some(i) = input.initrd {
            taken.push(("the initrd", i));
        }
        taken.extend(input.modules.iter().map(|m| ("a module (/chosen/module@…)", *m)));
        taken.extend(input.reserved.iter().map(|r| ("reserved memory", *r)));
        let no_room = |what, size, align, ram: &[Range], taken: &Vec<(&'static str, Range)>| PlanError::NoRoom {
            what,
            size,
            align,
            largest: largest_free(ram, align, &avoid),
            taken: taken.clone(),
        };

        let extra = pool.saturating_sub(frames_low.len());
        let slotpool = match input.slotpool {
            None | Some(0) => Range::default(),
            Some(size) => {
                let align = if size >= BLOCK_1G { BLOCK_1G } else { BLOCK_2M };
                let size = align_up(size, BLOCK_2M).ok_or(too_large("hyp.slotpool", size))?;
                range::reserve_top(&mut guest_ram, size, align, &avoid)
                    .ok_or_else(|| no_room("hyp.slotpool", size, align, &guest_ram, &taken))?
            }
        };
        if !slotpool.is_empty() {
            taken.push(("the memslot pool", slotpool));
        }

        let frames_high = if extra == 0 {
            Range::default()
        } else {
            let size = align_up(extra, BLOCK_2M).ok_or(too_large("hyp.pool", pool))?;
            range::reserve_top(&mut guest_ram, size, BLOCK_2M, &avoid).ok_or_else(|| {
                no_room("hyp.pool (beyond the hypervisor's region)", size, BLOCK_2M, &guest_ram, &taken)
            })?
        };
        if !frames_high.is_empty() {
            taken.push(("the frame pool", frames_high));
        }
        let mut spare = Vec::new();
        if let Some(limit) = input.guest_mem {
            let memory = if input.memory.is_empty() { &input.ram } else { &input.memory };
            let guest_end = range::address_after(memory, limit)
                .ok_or(PlanError::GuestMemTooLarge { guest_mem: limit, memory: range::total(memory) })?;
            let kept =
                [("the hypervisor's region", hyp), ("the memslot pool", slotpool), ("the frame pool", frames_high)];
            if let Some((what, r)) = kept.into_iter().find(|(_, r)| !r.is_empty() && r.start < guest_end) {
                return Err(PlanError::KeptInGuestRam { what, range: r, guest_end });
            }
            let (below, mut above) = range::split_at(&guest_ram, guest_end);
            guest_ram = below;
            for a in &avoid {
                above = range::subtract(&above, *a);
            }
            spare = above;
        }
        let mirror = if input.mirror && input.guest_mem.is_some() {
            // As large as the guest's RAM, from what it does not get.
            let size = align_up(range::total(&guest_ram), BLOCK_2M).ok_or(too_large("hyp.migrate", 0))?;
            range::reserve_top(&mut spare, size, BLOCK_2M, &avoid)
                .ok_or_else(|| no_room("hyp.migrate (the second memory image)", size, BLOCK_2M, &spare, &taken))?
        } else if input.mirror {
            // Half of what is left, rounded up: the guest keeps the other (smaller) half.
            let size = align_up(range::total(&guest_ram) / 2, BLOCK_2M).ok_or(too_large("hyp.migrate", 0))?;
            range::reserve_top(&mut guest_ram, size, BLOCK_2M, &avoid)
                .ok_or_else(|| no_room("hyp.migrate (the second memory image)", size, BLOCK_2M, &guest_ram, &taken))?
        } else {
            Range::default()
        };
        for &i in &loaded {
            if !guest_ram.iter().any(|r| r.contains(i.start, i.len())) {
                return Err(PlanError::InitrdOutsideRam { initrd: i });
            }
        }
        Ok(MemoryPlan {
            hyp,
            frames_low,
            frames_high,
            frame_pool_bytes: pool,
            slotpool,
            mirror,
            guest_ram,
            spare,
            ram_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    /// QEMU `virt`: RAM at 1 GiB, the hypervisor Image at RAM + 2 MiB (about 5 MiB with BSS),
    /// the initrd (guest kernel) at 128 MiB above RAM base when RAM allows.
    fn qemu(mem: u64) -> PlanInput {
        PlanInput {
            ram: vec![Range::new(GIB, GIB + mem)],
            image: Range::new(GIB + 2 * MIB, GIB + 7 * MIB),
            initrd: Some(Range::new(GIB + 128 * MIB, GIB + 131 * MIB)),
            ..Default::default()
        }
    }

    fn check_invariants(input: &PlanInput, p: &MemoryPlan) {
        let owned = p.hypervisor_owned();
        for g in &p.guest_ram {
            assert!(input.ram.iter().any(|r| r.contains(g.start, g.len())), "guest RAM {g} outside RAM");
            for o in &owned {
                assert!(!g.overlaps(o), "guest RAM {g} overlaps hypervisor memory {o}");
            }
        }
        // Reserved memory above a `hyp.guest-mem` share is nobody's (the firmware's).
        let nobodys: u64 = match input.guest_mem {
            Some(g) => {
                let end = range::address_after(&input.ram, g).unwrap();
                input.reserved.iter().map(|r| range::split_at(&[*r], end).1).map(|v| range::total(&v)).sum()
            }
            None => 0,
        };
        assert_eq!(
            range::total(&p.guest_ram) + range::total(&owned) + nobodys,
            range::total(&input.ram),
            "every byte of RAM is either the guest's or the hypervisor's"
        );
        assert!(p.frames_low.len() + p.frames_high.len() >= p.frame_pool_bytes);
    }

    #[test]
    fn small_machine_keeps_a_16m_region_and_nothing_else() {
        let input = qemu(GIB);
        let p = MemoryPlan::new(&input).unwrap();
        assert_eq!(p.hyp, Range::new(GIB + 2 * MIB, GIB + 24 * MIB));
        assert!(p.frames_high.is_empty() && p.slotpool.is_empty());
        assert_eq!(p.guest_ram, vec![Range::new(GIB, GIB + 2 * MIB), Range::new(GIB + 24 * MIB, 2 * GIB)]);
        assert_eq!(p.kept_bytes(), 22 * MIB);
        check_invariants(&input, &p);
    }

    #[test]
    fn large_machine_takes_ram_over_16_from_the_top() {
        let input = PlanInput { slotpool: Some(GIB), ..qemu(4 * GIB) };
        let p = MemoryPlan::new(&input).unwrap();
        assert_eq!(p.frame_pool_bytes, 256 * MIB);
        assert_eq!(p.slotpool, Range::new(4 * GIB, 5 * GIB), "1 GiB aligned, at the top");
        // 256 MiB minus the 17 MiB after the image, rounded up to 2 MiB, right below.
        assert_eq!(p.frames_high, Range::new(4 * GIB - 240 * MIB, 4 * GIB));
        check_invariants(&input, &p);
    }

    #[test]
    fn tiny_ram_says_the_initrd_is_in_the_hypervisors_region() {
        // QEMU with 32 MiB puts the initrd right after the image.
        let input = PlanInput { initrd: Some(Range::new(GIB + 8 * MIB, GIB + 11 * MIB)), ..qemu(32 * MIB) };
        let e = MemoryPlan::new(&input).unwrap_err();
        assert!(matches!(e, PlanError::InitrdInHypervisor { .. }), "{e:?}");
        assert!(e.to_string().contains("give the machine more memory"), "{e}");
    }

    #[test]
    fn frame_pool_that_cannot_fit_names_the_slot_pool_in_the_way() {
        // 2 GiB: the memslot pool takes the top GiB, the initrd splits what is left below.
        let input = PlanInput { slotpool: Some(GIB), pool: Some(GIB), ..qemu(2 * GIB) };
        let e = MemoryPlan::new(&input).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("hyp.pool") && msg.contains("the memslot pool") && msg.contains("the initrd"), "{msg}");
        // The largest stretch: from the first 2 MiB boundary after the initrd (which ends at
        // 0x4830_0000) to the slot pool at 2 GiB.
        assert!(matches!(e, PlanError::NoRoom { largest, .. } if largest == 0x8000_0000 - 0x4840_0000), "{e:?}");
        // A slot pool as large as RAM names the initrd.
        let input = PlanInput { slotpool: Some(2 * GIB), ..qemu(2 * GIB) };
        let msg = MemoryPlan::new(&input).unwrap_err().to_string();
        assert!(msg.contains("hyp.slotpool") && msg.contains("the initrd"), "{msg}");
    }

    #[test]
    fn absurd_sizes_are_errors_not_wraps() {
        let input = PlanInput { pool: Some(u64::MAX), ..qemu(GIB) };
        assert!(matches!(MemoryPlan::new(&input), Err(PlanError::TooLarge { .. })));
        let input = PlanInput { slotpool: Some(u64::MAX - 5), ..qemu(GIB) };
        assert!(matches!(MemoryPlan::new(&input), Err(PlanError::TooLarge { .. })));
        let input = PlanInput { pool: Some(1 << 40), ..qemu(GIB) };
        assert!(matches!(MemoryPlan::new(&input), Err(PlanError::NoRoom { .. })));
        let input = PlanInput { image: Range::new(u64::MAX - MIB, u64::MAX), ..qemu(GIB) };
        assert!(MemoryPlan::new(&input).is_err());
    }

    #[test]
    fn reserved_memory_and_initrd_are_never_taken_from_the_top() {
        let top_reserved = Range::new(5 * GIB - 4 * MIB, 5 * GIB - 3 * MIB);
        let input = PlanInput { reserved: vec![top_reserved], slotpool: Some(64 * MIB), ..qemu(4 * GIB) };
        let p = MemoryPlan::new(&input).unwrap();
        assert!(!p.frames_high.overlaps(&top_reserved) && !p.slotpool.overlaps(&top_reserved));
        assert!(p.guest_ram.iter().any(|g| g.contains(top_reserved.start, top_reserved.len())));
        check_invariants(&input, &p);
    }

    /// The Pi 5 as its firmware describes it: RAM from 0 (TF-A's first 512 KiB `no-map`), the
    /// VideoCore's share cut out below 1 GiB, the rest up to 4 GiB; the hypervisor at
    /// `kernel_address` 0x200000; the kernel (initramfs) loaded high.
    #[test]
    fn pi5_keeps_tf_a_out_of_everything() {
        use board::{Board, Region, ReservedMemory};
        let mut b = Board::from_dtb(&minimal_dtb()).unwrap();
        b.memory = vec![Region::new(0, 0x3fc0_0000), Region::new(0x4000_0000, 0xc000_0000)];
        let tfa = Region::new(0, 0x8_0000);
        b.reserved_memory = vec![
            ReservedMemory {
                path: "/reserved-memory/atf@0".into(),
                regions: vec![tfa],
                no_map: true,
                reusable: false,
                compatible: None,
            },
            ReservedMemory {
                path: "/reserved-memory/fw@3f000000".into(),
                regions: vec![Region::new(0x3f00_0000, 0x10_0000)],
                no_map: false,
                reusable: false,
                compatible: None,
            },
        ];
        b.initrd = Some(Region::new(0x2e00_0000, 0x4_5000));
        let input = PlanInput::from_board(&b, Range::new(0x20_0000, 0x6c_0000), None, None);
        assert_eq!(input.ram[0], Range::new(0x8_0000, 0x3fc0_0000), "TF-A's memory is not RAM to the plan");
        assert_eq!(input.reserved, vec![Range::new(0x3f00_0000, 0x3f10_0000)]);
        let p = MemoryPlan::new(&input).unwrap();
        assert_eq!(p.hyp, Range::new(0x20_0000, 0x180_0000));
        assert!(p.guest_ram.iter().all(|g| !g.overlaps(&Range::new(0, 0x8_0000))));
        assert_eq!(p.guest_ram[0], Range::new(0x8_0000, 0x20_0000));
        check_invariants(&input, &p);
        let spec = p.guest_spec("console=x".into(), Some(board::PsciMethod::Smc));
        assert_eq!(spec.memory[0], Region::new(0x8_0000, 0x18_0000));
        assert_eq!(spec.bootargs.as_deref(), Some("console=x"));
        assert_eq!(spec.psci_method, Some(board::PsciMethod::Smc));
        assert_eq!(spec.initrd, None, "the hypervisor passes no initrd on");
    }

    /// The smallest DTB `Board::from_dtb` takes.
    fn minimal_dtb() -> Vec<u8> {
        let mut w = board::FdtWriter::new();
        crate::testdtb::root_with_memory(&mut w, 2, 2, &[0, 0, 0, 0x1000_0000]);
        crate::testdtb::one_cpu(&mut w, &[]);
        w.end_node().unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn migration_keeps_a_mirror_at_least_as_large_as_the_guest() {
        let input = PlanInput { mirror: true, ..qemu(2 * GIB) };
        let p = MemoryPlan::new(&input).unwrap();
        let guest = range::total(&p.guest_ram);
        assert!(p.mirror.len() >= guest && p.mirror.len() - guest <= BLOCK_2M * 2, "{p:?}");
        assert!(p.guest_ram.iter().all(|g| !g.overlaps(&p.mirror)));
        check_invariants(&input, &p);
    }

    /// The hypervisor moved to the top of `mem` bytes of RAM (`home`), the initrd where QEMU
    /// puts it, `hyp.guest-mem=guest`.
    fn at_top(mem: u64, guest: u64) -> PlanInput {
        let top = GIB + mem;
        PlanInput {
            image: Range::new(top - 22 * MIB, top - 17 * MIB),
            guest_mem: Some(guest),
            initrd: Some(Range::new(GIB + (mem / 2).min(128 * MIB), GIB + (mem / 2).min(128 * MIB) + MIB)),
            ..qemu(mem)
        }
    }

    #[test]
    fn guest_mem_gives_the_guest_exactly_its_share() {
        let input = at_top(GIB + 22 * MIB, GIB);
        let p = MemoryPlan::new(&input).unwrap();
        assert_eq!(p.guest_ram, vec![Range::new(GIB, 2 * GIB)]);
        assert!(p.spare.is_empty(), "{p:?}");
        check_invariants(&input, &p);
        // An odd number of MiB: the guest ends there, the MiB up to the region is spare.
        let input = at_top(129 * MIB + 23 * MIB, 129 * MIB);
        let p = MemoryPlan::new(&input).unwrap();
        assert_eq!(p.guest_ram, vec![Range::new(GIB, GIB + 129 * MIB)]);
        assert_eq!(p.spare, vec![Range::new(GIB + 129 * MIB, GIB + 130 * MIB)]);
        check_invariants(&input, &p);
        // More RAM than needed: the rest is spare, the guest still gets exactly its share.
        let input = at_top(4 * GIB, GIB);
        let p = MemoryPlan::new(&input).unwrap();
        assert_eq!(p.guest_ram, vec![Range::new(GIB, 2 * GIB)]);
        assert_eq!(range::total(&p.spare), 3 * GIB - 22 * MIB - p.frames_high.len());
        check_invariants(&input, &p);
    }

    #[test]
    fn guest_mem_refuses_what_cannot_be_given() {
        // The hypervisor did not move: its region is in the guest's share.
        let input = PlanInput { guest_mem: Some(GIB), ..qemu(GIB) };
        let e = MemoryPlan::new(&input).unwrap_err();
        assert!(matches!(e, PlanError::KeptInGuestRam { what: "the hypervisor's region", .. }), "{e:?}");
        assert!(e.to_string().contains("needs more memory"), "{e}");
        let e = MemoryPlan::new(&at_top(GIB, 2 * GIB)).unwrap_err();
        assert!(matches!(e, PlanError::GuestMemTooLarge { .. }), "{e:?}");
        // Too little on top for the frame pool of 4 GiB of RAM (256 MiB).
        let e = MemoryPlan::new(&at_top(4 * GIB, 4 * GIB - 100 * MIB)).unwrap_err();
        assert!(matches!(e, PlanError::KeptInGuestRam { what: "the frame pool", .. }), "{e:?}");
    }

    #[test]
    fn guest_mem_with_migration_takes_the_mirror_from_the_spare() {
        let input = PlanInput { mirror: true, ..at_top(2 * GIB + 256 * MIB, GIB) };
        let p = MemoryPlan::new(&input).unwrap();
        assert_eq!(p.guest_ram, vec![Range::new(GIB, 2 * GIB)]);
        assert_eq!(p.mirror.len(), GIB);
        assert!(p.mirror.start >= 2 * GIB);
        check_invariants(&input, &p);
        let short = PlanInput { mirror: true, ..at_top(GIB + 24 * MIB, GIB) };
        assert!(MemoryPlan::new(&short).unwrap_err().to_string().contains("hyp.migrate"));
    }

    proptest! {
        #[test]
        fn any_plan_gives_every_byte_to_exactly_one_owner(
            mem_mib in 24u64..20_000,
            pool in proptest::option::of(0u64..1 << 34),
            slotpool in proptest::option::of(0u64..1 << 34),
            initrd_at in 0u64..1 << 34,
        ) {
            let input = PlanInput {
                pool,
                slotpool,
                initrd: Some(Range::new(GIB + initrd_at, GIB + initrd_at + 3 * MIB)),
                ..qemu(mem_mib * MIB)
            };
            if let Ok(p) = MemoryPlan::new(&input) {
                check_invariants(&input, &p);
                let i = input.initrd.unwrap();
                prop_assert!(p.guest_ram.iter().any(|g| g.contains(i.start, i.len())));
            }
        }
    }
}
