//! Memslots: guest IPA ranges outside guest RAM, backed by the hypervisor's *slot pool*
//! (`hyp.slotpool=SIZE`, reserved at boot by the memory plan) mapped repeatedly: slot byte `o`
//! maps pool byte `o % usable pool size`, so a 64 GiB slot fits in a QEMU with 4 GiB of RAM.
//! The page-table pages are real. Backing: 4 KiB pages, 2 MiB blocks or 1 GiB blocks.
//!
//! This module holds the pool, the slot registry (create, delete, lookup) and the checks of
//! guest buffers the hypervisor reads or writes. Dirty logging on a slot is `dirtylog`'s; the
//! eager split it drives is `split`'s. The calls and their errors are documented in
//! `lib/abi/src/hypercall.rs`.
//!
//! Lock order: [`SLOTS`] before `mmu::STAGE2`.

use crate::mem::{Range, PAGE};
use crate::mmu::{HypFrames, STAGE2};
use crate::slotlog::Log;
use abi::error::HypError;
use abi::hypercall as hc;
use alloc::vec::Vec;
use pgtable::hw::HwTlb;
use pgtable::walker::WalkFlags;
use pgtable::{Attributes, Constraints, IntermPhysAddr, PageTable, Perms, PhysAddr};
use spin::{Mutex, Once};

/// The guest's stage-2 table.
pub type S2 = PageTable<HypFrames, IntermPhysAddr>;

/// The physical memory memslots map, and every range the hypervisor keeps (IPA = PA), which no
/// memslot and no guest buffer may touch.
pub struct Pool {
    /// The slot pool (empty without `hyp.slotpool`).
    pub range: Range,
    /// The hypervisor's own memory (region, frame pool), the slot pool included.
    hyp: Vec<Range>,
}

impl Pool {
    /// Whether `r` touches memory the hypervisor keeps.
    pub fn hypervisor_owns(&self, r: &Range) -> bool {
        self.hyp.iter().any(|h| !h.is_empty() && h.overlaps(r))
    }

    /// The pool's bytes a memslot of `backing_size` units can use (a whole number of units).
    pub fn usable(&self, backing_size: u64) -> u64 {
        self.range.len() - self.range.len() % backing_size
    }

    /// The physical address slot IPA `ipa` maps, for a slot at `slot_base` of `backing_size`
    /// units.
    pub fn pa_of(&self, backing_size: u64, slot_base: u64, ipa: u64) -> u64 {
        self.range.start + (ipa - slot_base) % self.usable(backing_size)
    }
}

static POOL: Once<Pool> = Once::new();

/// Records the slot pool (empty: none) and everything the hypervisor keeps. Called once at boot.
pub fn init(slotpool: Range, hypervisor_owned: Vec<Range>) {
    POOL.call_once(|| Pool { range: slotpool, hyp: hypervisor_owned });
}

/// The slot pool, once [`init`] ran.
pub fn pool() -> Option<&'static Pool> {
    POOL.get()
}

/// One memslot.
pub struct Slot {
    /// The id MEMSLOT_CREATE returned.
    pub id: u64,
    /// First IPA.
    pub base: u64,
    /// Bytes.
    pub size: u64,
    /// `hc::MEMSLOT_BACKING_*`.
    pub backing: u64,
    /// Dirty logging, while enabled.
    pub log: Option<Log>,
    /// The guest's own RAM (identity-mapped, registered by the hypervisor for dirty logging
    /// under a running guest): no hypercall can name, log or delete it.
    pub guest_ram: bool,
}

impl Slot {
    /// Pages of 4 KiB.
    pub fn pages(&self) -> u64 {
        self.size / PAGE
    }
    /// `[base, base + size)`.
    pub fn range(&self) -> Range {
        Range::new(self.base, self.base + self.size)
    }
    /// Bytes of one backing unit (4 KiB, 2 MiB or 1 GiB).
    pub fn backing_size(&self) -> u64 {
        hc::backing_size(self.backing).unwrap_or(PAGE)
    }
}

/// The registry.
pub struct Slots {
    slots: Vec<Slot>,
    next_id: u64,
}

impl Slots {
    /// The memslot with `id`, as a hypercall names it (never the guest-RAM slot).
    pub fn get_mut(&mut self, id: u64) -> Result<&mut Slot, HypError> {
        self.slots.iter_mut().find(|s| s.id == id && !s.guest_ram).ok_or(HypError::NotFound)
    }
    /// Any slot with `id`, the guest-RAM slot included (the hypervisor's own calls).
    pub fn get_any_mut(&mut self, id: u64) -> Result<&mut Slot, HypError> {
        self.slots.iter_mut().find(|s| s.id == id).ok_or(HypError::NotFound)
    }
    /// The slot holding `ipa`.
    pub fn containing(&mut self, ipa: u64) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|s| s.range().contains(ipa, 1))
    }
}

/// Every memslot. Lock before `mmu::STAGE2`.
pub static SLOTS: Mutex<Slots> = Mutex::new(Slots { slots: Vec::new(), next_id: 1 });

/// An IPA.
pub fn ipa(a: u64) -> IntermPhysAddr {
    IntermPhysAddr::new(a)
}

/// A page-table error as the hypercall's error code.
pub fn map_err(e: pgtable::Error) -> HypError {
    match e.kind() {
        pgtable::ErrorKind::OutOfMemory => HypError::NoMemory,
        pgtable::ErrorKind::Misaligned => HypError::Misaligned,
        pgtable::ErrorKind::OutOfRange => HypError::OutOfRange,
        _ => HypError::InvalidParameter,
    }
}

/// Checks a guest buffer `[addr, addr + len)` the hypervisor reads or writes: 8-byte aligned,
/// never the hypervisor's memory, inside guest RAM.
pub fn guest_buffer(addr: u64, len: u64) -> Result<(), HypError> {
    if !addr.is_multiple_of(8) {
        return Err(HypError::Misaligned);
    }
    let r = Range::sized(addr, len).ok_or(HypError::OutOfRange)?;
    if pool().is_some_and(|p| p.hypervisor_owns(&r)) {
        return Err(HypError::Denied);
    }
    if !crate::guest::is_guest_ram(addr, len) {
        return Err(HypError::OutOfRange);
    }
    Ok(())
}

/// MEMSLOT_CREATE: the checks and the mapping are `hypcore::slot`'s (host-tested against
/// every kind of taken range); this gathers the ranges it checks against and gives it the
/// stage-2 table.
pub fn create(base: u64, size: u64, flags: u64) -> Result<u64, HypError> {
    use hypcore::slot::{Kind, Taken};
    let req = hypcore::slot::request(base, size, flags, pgtable::regime::IPA_BITS)?;
    let pool = pool().ok_or(HypError::NoMemory)?;
    let mut st = SLOTS.lock();
    let taken: Vec<Taken> = (pool.hyp.iter().map(|&range| Taken { kind: Kind::Hypervisor, range }))
        .chain(crate::guest::ram().iter().map(|&range| Taken { kind: Kind::GuestRam, range }))
        .chain(st.slots.iter().map(|s| Taken { kind: Kind::Memslot, range: s.range() }))
        .collect();
    let mut guard = STAGE2.lock();
    let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
    let in_use = st.slots.iter().filter(|s| !s.guest_ram).count();
    hypcore::slot::create(&mut Table { s2, tlb: HwTlb::detect() }, req, &taken, in_use, pool.range)?;
    let id = st.next_id;
    st.next_id += 1;
    st.slots.push(Slot { id, base, size, backing: req.backing, log: None, guest_ram: false });
    Ok(id)
}

/// The stage-2 table as `hypcore::slot` sees it.
struct Table<'a> {
    s2: &'a mut S2,
    tlb: HwTlb,
}

impl hypcore::slot::Stage2 for Table<'_> {
    fn mapped(&mut self, r: Range) -> Result<Vec<Range>, HypError> {
        let mut out = Vec::new();
        self.s2
            .walk(ipa(r.start), r.len(), WalkFlags::LEAF, |e| {
                if e.desc.is_mapping(e.level) {
                    out.push(Range::new(e.off, e.off + e.size()));
                }
                Ok(())
            })
            .map_err(map_err)?;
        Ok(out)
    }
    fn map(&mut self, r: Range, pa: u64, backing: u64) -> Result<(), HypError> {
        let constraints = match backing {
            hc::MEMSLOT_BACKING_4K => Constraints::PAGES_ONLY,
            _ => Constraints { no_blocks: false, no_contiguous: true },
        };
        let attrs = Attributes::normal(Perms::RW);
        self.s2.map(&mut self.tlb, ipa(r.start), r.len(), PhysAddr::new(pa), attrs, constraints).map_err(map_err)
    }
    fn unmap(&mut self, r: Range) -> Result<(), HypError> {
        self.s2.unmap(&mut self.tlb, ipa(r.start), r.len()).map_err(map_err).map(|_| ())
    }
}

/// Registers the guest's RAM range `r` (already mapped, identity) as a slot the hypervisor's
/// own dirty logging can work on (`migrate`); returns its id. Registered once: a second call
/// returns the same id.
pub fn register_guest_ram(r: Range) -> u64 {
    let mut st = SLOTS.lock();
    if let Some(s) = st.slots.iter().find(|s| s.guest_ram && s.range() == r) {
        return s.id;
    }
    let id = st.next_id;
    st.next_id += 1;
    st.slots.push(Slot {
        id,
        base: r.start,
        size: r.len(),
        backing: hc::MEMSLOT_BACKING_4K,
        log: None,
        guest_ram: true,
    });
    id
}

/// MEMSLOT_DELETE.
pub fn delete(id: u64) -> Result<(), HypError> {
    let mut st = SLOTS.lock();
    let slot = st.get_mut(id)?;
    if slot.log.is_some() {
        return Err(HypError::Busy);
    }
    let range = slot.range();
    let mut guard = STAGE2.lock();
    let s2 = guard.as_mut().ok_or(HypError::NoMemory)?;
    hypcore::slot::unmap_in_steps(&mut Table { s2, tlb: HwTlb::detect() }, range)?;
    st.slots.retain(|s| s.id != id);
    Ok(())
}
