//! MEMSLOT_CREATE's decisions: the argument checks, the check of the IPA range against every
//! kind of range it may already hold ([`Kind`]), and the mapping of the slot's pieces with a
//! rollback that unmaps only what it mapped. The hypervisor (`hypervisor/src/memslot.rs`)
//! gives the ranges it knows and its stage-2 table behind [`Stage2`]; the host tests give a
//! fake table and check every kind and every way of overlapping against a page-set model.

use crate::range::{subtract, Range};
use crate::BLOCK_1G;
use abi::error::HypError;
use abi::hypercall as hc;
use alloc::vec;
use alloc::vec::Vec;

/// What part of the IPA space may already be taken, and by what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Memory the hypervisor keeps (its image, frame pool, the slot pool; IPA = PA): DENIED.
    Hypervisor,
    /// The guest's RAM: OVERLAP.
    GuestRam,
    /// Another memslot: OVERLAP.
    Memslot,
    /// Any other stage-2 mapping (a device the guest was given, the control page): OVERLAP.
    Mapping,
}

/// Every [`Kind`].
pub const KINDS: [Kind; 4] = [Kind::Hypervisor, Kind::GuestRam, Kind::Memslot, Kind::Mapping];

impl Kind {
    /// The error a slot overlapping a range of this kind gets.
    pub const fn refusal(self) -> HypError {
        match self {
            Kind::Hypervisor => HypError::Denied,
            _ => HypError::Overlap,
        }
    }
}

/// A taken range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// By what.
    pub kind: Kind,
    /// Which bytes (an empty range takes nothing).
    pub range: Range,
}

/// A memslot request whose arguments passed [`request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// `[base, base + size)`.
    pub range: Range,
    /// `hc::MEMSLOT_BACKING_*`.
    pub backing: u64,
    /// Bytes of one backing unit.
    pub backing_size: u64,
}

/// The arguments of MEMSLOT_CREATE: known flags, a size, both ends aligned to the backing
/// unit, inside an IPA space of `ipa_bits`.
pub fn request(base: u64, size: u64, flags: u64, ipa_bits: u32) -> Result<Request, HypError> {
    if flags & !hc::MEMSLOT_BACKING_MASK != 0 || size == 0 {
        return Err(HypError::InvalidParameter);
    }
    let backing = flags & hc::MEMSLOT_BACKING_MASK;
    let backing_size = hc::backing_size(backing).ok_or(HypError::InvalidParameter)?;
    if !base.is_multiple_of(backing_size) || !size.is_multiple_of(backing_size) {
        return Err(HypError::Misaligned);
    }
    let range = Range::sized(base, size).ok_or(HypError::OutOfRange)?;
    if range.end > 1 << ipa_bits {
        return Err(HypError::OutOfRange);
    }
    Ok(Request { range, backing, backing_size })
}

/// `r` against every taken range: the hypervisor's memory first (DENIED, whatever else is
/// there too), then any other kind (OVERLAP). One shared byte is enough, at either end.
pub fn admit(r: Range, taken: &[Taken]) -> Result<(), HypError> {
    let hit = |k: Kind| taken.iter().any(|t| t.kind == k && !t.range.is_empty() && t.range.overlaps(&r));
    match KINDS.iter().find(|&&k| k == Kind::Hypervisor && hit(k)).or_else(|| KINDS.iter().find(|&&k| hit(k))) {
        Some(k) => Err(k.refusal()),
        None => Ok(()),
    }
}

/// The guest's stage-2 table as the slot code needs it.
pub trait Stage2 {
    /// The leaf mappings (pages, blocks, each whole) that share a byte with `r`.
    fn mapped(&mut self, r: Range) -> Result<Vec<Range>, HypError>;
    /// Maps `ipa` to the physical range from `pa` as normal RW memory, in units of `backing`.
    /// On an error it may have mapped part of `ipa`.
    fn map(&mut self, ipa: Range, pa: u64, backing: u64) -> Result<(), HypError>;
    /// Unmaps every leaf inside `r`.
    fn unmap(&mut self, r: Range) -> Result<(), HypError>;
}

/// The longest piece one map call gets for `backing`: pieces below 1 GiB can never form a
/// 1 GiB block, so 2 MiB slots go 512 MiB at a time.
pub const fn piece_cap(backing: u64) -> u64 {
    match backing {
        hc::MEMSLOT_BACKING_2M => 512 << 20,
        _ => u64::MAX,
    }
}

/// MEMSLOT_CREATE after [`request`]: `r` checked against `taken` and against whatever `s2`
/// maps there (each as a [`Kind::Mapping`]), a free registry entry (`slots` in use of
/// [`hc::MAX_MEMSLOTS`]) and a pool of at least one unit; then the slot mapped onto `pool`
/// repeatedly (slot byte `o` maps pool byte `o % usable`). On a failed map, everything this
/// call mapped is unmapped again and nothing else: a piece's range less what was mapped there
/// before the call (nothing, once the checks passed).
pub fn create(s2: &mut impl Stage2, req: Request, taken: &[Taken], slots: usize, pool: Range) -> Result<(), HypError> {
    let r = req.range;
    admit(r, taken)?;
    let mapped = s2.mapped(r)?;
    let mappings: Vec<Taken> = mapped.into_iter().map(|range| Taken { kind: Kind::Mapping, range }).collect();
    admit(r, &mappings)?;
    if slots >= hc::MAX_MEMSLOTS || pool.len() < req.backing_size {
        return Err(HypError::NoMemory);
    }
    let usable = pool.len() - pool.len() % req.backing_size;
    let cap = piece_cap(req.backing);
    let mut o = 0;
    while o < r.len() {
        let in_pool = o % usable;
        let len = (usable - in_pool).min(r.len() - o).min(cap);
        let piece = Range::new(r.start + o, r.start + o + len);
        let before = s2.mapped(piece)?;
        let res =
            if before.is_empty() { s2.map(piece, pool.start + in_pool, req.backing) } else { Err(HypError::Overlap) };
        if let Err(e) = res {
            let mut undo = vec![Range::new(r.start, piece.end)];
            for b in &before {
                undo = subtract(&undo, *b);
            }
            for u in undo {
                unmap_in_steps(s2, u)?;
            }
            return Err(e);
        }
        o += len;
    }
    Ok(())
}

/// Unmaps `r` 1 GiB at a time (one unmap call gathers every table it frees until its flush,
/// so one call over a 64 GiB slot of pages would need megabytes of the hypervisor's heap).
pub fn unmap_in_steps(s2: &mut impl Stage2, r: Range) -> Result<(), HypError> {
    let mut a = r.start;
    while a < r.end {
        let next = ((a / BLOCK_1G + 1) * BLOCK_1G).min(r.end);
        s2.unmap(Range::new(a, next))?;
        a = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
