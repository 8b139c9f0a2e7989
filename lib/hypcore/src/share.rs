//! The hypervisor's share of a machine: how much RAM to give QEMU so that the guest gets
//! exactly `--mem` and the hypervisor what it needs on top.
//!
//! No formula: [`machine_for_guest`] runs the hypervisor's own boot decisions for a candidate
//! machine size (QEMU's loader placing the hypervisor Image and its initrd, [`crate::load`];
//! the move to the top of RAM, [`crate::home`]; the memory plan with `hyp.guest-mem`,
//! [`crate::plan`]) and takes the smallest size, in MiB steps, for which they all succeed.
//! The hypervisor makes the same decisions at boot from the same code, so the two cannot
//! disagree: the guest's RAM is `--mem`, and every byte above it is the hypervisor's.
//!
//! RAM is a list of ranges (a board's memory may come in several banks): the caller says how
//! the machine lays out a given size ([`virt_layout`] for QEMU's `virt`).

use crate::home::{self, Home, HomeInput};
use crate::load::{self, Kernel, LoadInput};
use crate::plan::{MemoryPlan, PlanError, PlanInput};
use crate::range::{self, Range};
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// Where QEMU's `virt` puts RAM.
pub const VIRT_RAM_BASE: u64 = 1 << 30;

/// QEMU `virt`'s RAM for `-m size`: one range from 1 GiB.
pub fn virt_layout(size: u64) -> Vec<Range> {
    vec![Range::new(VIRT_RAM_BASE, VIRT_RAM_BASE.saturating_add(size))]
}

/// Step of the search: QEMU's `-m` takes MiB.
pub const STEP: u64 = 1 << 20;
/// How far past the least possible size the search goes before it gives up.
pub const SEARCH_SPAN: u64 = 8 << 30;

/// What the machine boots with, besides its size.
pub struct ShareInput<'a> {
    /// The machine's RAM for a memory size (QEMU's `-m`), in address order.
    pub layout: &'a dyn Fn(u64) -> Vec<Range>,
    /// The guest's RAM, bytes (`--mem`, `hyp.guest-mem`).
    pub guest_mem: u64,
    /// The hypervisor's Image (QEMU's `-kernel`).
    pub hypervisor: Kernel,
    /// Bytes of the hypervisor's initrd (the guest bundle or the guest kernel).
    pub initrd_len: u64,
    /// Bytes of the DTB the loader places ([`load::VIRT_DTB_BYTES`] on `virt`).
    pub dtb_len: u64,
    /// The loader's target page ([`load::VIRT_PAGE`] on `virt`).
    pub page: u64,
    /// Firmware-reserved memory (stays in the guest's RAM, never taken).
    pub reserved: Vec<Range>,
    /// Firmware's `no-map` memory (nobody's).
    pub no_map: Vec<Range>,
    /// `hyp.pool=`.
    pub pool: Option<u64>,
    /// `hyp.slotpool=`.
    pub slotpool: Option<u64>,
    /// `hyp.migrate`.
    pub mirror: bool,
}

/// The answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    /// The machine's memory size (QEMU's `-m`).
    pub machine_mem: u64,
    /// Its RAM.
    pub ram: Vec<Range>,
    /// The plan the hypervisor will make there.
    pub plan: MemoryPlan,
}

impl Share {
    /// Bytes on top of the guest's: the hypervisor's share.
    pub fn hypervisor_bytes(&self, guest_mem: u64) -> u64 {
        self.machine_mem - guest_mem
    }
}

/// No machine size works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareError {
    /// The guest's RAM asked for.
    pub guest_mem: u64,
    /// The largest size tried.
    pub tried_up_to: u64,
    /// Why that size did not work.
    pub why: String,
}

impl fmt::Display for ShareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no machine up to {} MiB gives the guest exactly {} MiB: {}",
            self.tried_up_to >> 20,
            self.guest_mem >> 20,
            self.why
        )
    }
}

/// The hypervisor's boot decisions on a machine of `size` bytes: its plan, or why it fails.
pub fn boot_plan(input: &ShareInput, size: u64) -> Result<(Vec<Range>, MemoryPlan), String> {
    let memory = (input.layout)(size);
    let first = *memory.first().ok_or("the machine has no RAM")?;
    // QEMU loads the hypervisor Image, its initrd and the DTB.
    let placed = load::place(&LoadInput {
        ram: first,
        kernel: input.hypervisor,
        initrd_len: Some(input.initrd_len),
        dtb_len: input.dtb_len,
        page: input.page,
    })
    .map_err(|e| format!("QEMU cannot load the hypervisor: {e}"))?;
    let initrd = placed.initrd.ok_or("no initrd placed")?;
    let mut ram = memory.clone();
    for hole in &input.no_map {
        ram = range::subtract(&ram, *hole);
    }
    // The hypervisor moves itself to the top of RAM.
    let image = placed.kernel;
    let image = match home::decide(&HomeInput {
        ram: ram.clone(),
        image,
        reserved: input.reserved.clone(),
        loaded: vec![placed.dtb, initrd],
        slotpool: input.slotpool,
    }) {
        Home::Here => image,
        Home::MoveTo(to) => Range::new(to, to + image.len()),
        Home::Stay(why) => return Err(format!("the hypervisor would stay where QEMU loads it: {why}")),
    };
    let plan = MemoryPlan::new(&PlanInput {
        ram,
        image,
        reserved: input.reserved.clone(),
        initrd: Some(initrd),
        modules: Vec::new(),
        pool: input.pool,
        slotpool: input.slotpool,
        mirror: input.mirror,
        memory: memory.clone(),
        guest_mem: Some(input.guest_mem),
    })
    .map_err(|e: PlanError| alloc::string::ToString::to_string(&e))?;
    Ok((memory, plan))
}

/// The smallest machine (in [`STEP`]s) on which the hypervisor gives the guest exactly
/// `input.guest_mem` bytes.
pub fn machine_for_guest(input: &ShareInput) -> Result<Share, ShareError> {
    machine_for_guest_within(input, u64::MAX)
}

/// [`machine_for_guest`] on a machine of at most `max` bytes (a board model's largest RAM):
/// the search stops there.
pub fn machine_for_guest_within(input: &ShareInput, max: u64) -> Result<Share, ShareError> {
    let least = input
        .guest_mem
        .checked_add(home::region_len(input.hypervisor.footprint()).unwrap_or(u64::MAX))
        .and_then(|s| s.checked_add(if input.mirror { input.guest_mem } else { 0 }))
        .and_then(|s| s.checked_add(input.slotpool.unwrap_or(0)))
        .and_then(|s| range::align_up(s, STEP));
    let fail = |tried, why| ShareError { guest_mem: input.guest_mem, tried_up_to: tried, why };
    let least = least.ok_or_else(|| fail(u64::MAX, "the sizes overflow 64 bits".into()))?;
    let last_size = least.saturating_add(SEARCH_SPAN).min(max);
    if least > last_size {
        return Err(fail(max, format!("it needs at least {} MiB", least >> 20)));
    }
    let mut last = String::new();
    let mut size = least;
    while size <= last_size {
        match boot_plan(input, size) {
            Ok((ram, plan)) => return Ok(Share { machine_mem: size, ram, plan }),
            Err(why) => last = why,
        }
        size += STEP;
    }
    Err(fail(size - STEP, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;

    fn input(guest_mem: u64) -> ShareInput<'static> {
        ShareInput {
            layout: &virt_layout,
            guest_mem,
            // This project's hypervisor: ~330 KiB file, ~4.8 MiB with its BSS.
            hypervisor: Kernel::image(340 << 10, 0, 0x4d_6000),
            initrd_len: 1 << 20,
            dtb_len: load::VIRT_DTB_BYTES,
            page: load::VIRT_PAGE,
            reserved: vec![],
            no_map: vec![],
            pool: None,
            slotpool: None,
            mirror: false,
        }
    }

    #[test]
    fn the_guest_gets_exactly_its_share_from_128m_to_16g() {
        let mut sizes: Vec<u64> = vec![64 * MIB, 129 * MIB, 1023 * MIB, 2 * GIB - 32 * MIB, 3 * GIB + 5 * MIB];
        sizes.extend((7..=14).map(|s| 1u64 << (s + 20)));
        for m in sizes {
            let s = machine_for_guest(&input(m)).unwrap_or_else(|e| panic!("{m:#x}: {e}"));
            assert_eq!(s.plan.guest_ram, vec![Range::new(VIRT_RAM_BASE, VIRT_RAM_BASE + m)], "{m:#x}");
            // One size below fails: the share is the least that works.
            assert!(boot_plan(&input(m), s.machine_mem - STEP).is_err(), "{m:#x}: {:#x}", s.machine_mem);
            // 22 MiB (the region) below 2 GiB of machine; RAM/16 of frame pool from there.
            let share = s.hypervisor_bytes(m);
            if s.machine_mem < 2 * GIB {
                assert!((22 * MIB..=23 * MIB).contains(&share), "{m:#x}: {share:#x}");
            } else {
                assert!(share <= s.machine_mem / 16 + 24 * MIB, "{m:#x}: {share:#x}");
            }
        }
    }

    #[test]
    fn pools_and_the_mirror_come_on_top() {
        for (pool, slotpool, mirror) in [(Some(256 * MIB), None, false), (None, Some(GIB), false), (None, None, true)] {
            let i = ShareInput { pool, slotpool, mirror, ..input(GIB) };
            let s = machine_for_guest(&i).unwrap();
            assert_eq!(s.plan.guest_ram, vec![Range::new(GIB, 2 * GIB)]);
            if let Some(p) = pool {
                assert!(s.plan.frames_low.len() + s.plan.frames_high.len() >= p);
            }
            assert_eq!(s.plan.slotpool.len(), slotpool.unwrap_or(0));
            assert_eq!(s.plan.mirror.len(), if mirror { GIB } else { 0 });
        }
    }

    #[test]
    fn a_bounded_search_stops_at_the_bound() {
        let s = machine_for_guest(&input(GIB)).unwrap();
        assert_eq!(machine_for_guest_within(&input(GIB), s.machine_mem), Ok(s.clone()));
        let e = machine_for_guest_within(&input(GIB), s.machine_mem - STEP).unwrap_err();
        assert_eq!(e.tried_up_to, s.machine_mem - STEP, "{e}");
        assert!(machine_for_guest_within(&input(GIB), GIB).unwrap_err().why.contains("at least"));
    }

    #[test]
    fn a_guest_that_cannot_be_given_says_why() {
        // The initrd (here 200 MiB) must lie in the guest's RAM, where QEMU puts it.
        let e = machine_for_guest(&ShareInput { initrd_len: 200 * MIB, ..input(128 * MIB) }).unwrap_err();
        assert!(e.to_string().contains("exactly 128 MiB"), "{e}");
        assert!(e.why.contains("initrd"), "{e}");
    }
}
