//! One user address space: a TTBR0 table (`lib/pgtable`, `Regime::El1 { half: Lower }`) and
//! its regions ([`VmaSet`]), with the system calls that change them and the page-fault
//! decision. Pages are populated on first touch (demand-zero), with the region's protection,
//! one 4 KiB page at a time; program images are copied in whole when loaded.
//!
//! * `mmap` records a region and maps nothing (FIXED first unmaps what was there).
//! * `munmap` unmaps (one gather, one flush) and then frees the data pages.
//! * `mprotect` changes the regions and calls `PageTable::protect` once for the whole range:
//!   populated pages change (`needs_flush` per entry, one flush per call: range TLBI, per page,
//!   or whole ASID past the threshold), holes are skipped. PROT_NONE keeps populated pages as
//!   invalid entries with a software marker (their frames stay), so NONE -> RW needs no TLBI;
//!   with lazy relaxation on, RO -> RW and NX -> X need none either.
//! * [`AddressSpace::fault`] decides what a fault at EL0 (or in a kernel access to user memory)
//!   means: a demand-zero page to map, a spurious fault (the tables already allow the access: a
//!   stale TLB entry after a lazy relaxation, or a race with an upgrade on another CPU: the
//!   caller invalidates the entry on its own CPU), a race with another population (retry), or
//!   the task's own fault.
//!
//! Every function takes the TLB-maintenance handle; the caller holds the address space's lock
//! and keeps the table's ASID current (`PageTable::set_asid`).

use alloc::vec::Vec;

use abi::syscall::{errno, map, prot, PAGE_SIZE, USER_END, USER_START};
use pgtable::{
    Attributes, Barrier, Constraints, FrameAlloc, FreshPage, PageLeaf, PageTable, Perms, PhysAddr, TlbMaintenance,
    VaHalf, VirtAddr,
};

use crate::elf::{ElfError, Program};
use crate::vma::{Vma, VmaSet};

pub use abi::programs::{MMAP_BASE, PROGRAM_BASE};

/// How a task touched memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Exec,
}

/// What the hardware reported (the fault status code's class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Translation fault: no valid entry.
    Translation,
    /// Permission fault: a valid entry refused the access.
    Permission,
    /// Anything else (access flag, alignment, external abort, ...).
    Other,
}

/// What a fault means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOutcome {
    /// A demand-zero page was mapped: retry the access.
    Mapped,
    /// The tables already allow the access and the hardware refused it through a stale
    /// entry: invalidate it on this CPU (TLBI VALE1 of the address space's ASID), then retry.
    Spurious,
    /// The page was mapped meanwhile (by another CPU's fault): retry.
    Retry,
    /// The task may not do this.
    Denied(Denial),
}

/// Why an access is the task's fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// No region holds the address.
    NoRegion,
    /// The region's protection (`prot` bits) does not allow the access.
    Protection(u64),
    /// No memory left for the page.
    NoMemory,
    /// A fault the kernel does not resolve (alignment, external abort, ...).
    Unresolvable,
}

impl Denial {
    /// The denial as one non-zero word (for a caller that passes it through a register, where 0
    /// means "resolved"): [`Denial::from_code`] gives it back. A protection's `prot` bits (the
    /// three of `abi::syscall::prot`, checked by `mmap` / `mprotect`) go above the low byte.
    pub fn code(self) -> u64 {
        match self {
            Denial::NoRegion => 1,
            Denial::NoMemory => 2,
            Denial::Unresolvable => 3,
            Denial::Protection(p) => 4 | (p << 8),
        }
    }

    /// The denial [`Denial::code`] made `code` into; `None` for a word no denial gives (0
    /// among them).
    pub fn from_code(code: u64) -> Option<Denial> {
        match code & 0xff {
            1 if code == 1 => Some(Denial::NoRegion),
            2 if code == 2 => Some(Denial::NoMemory),
            3 if code == 3 => Some(Denial::Unresolvable),
            4 => Some(Denial::Protection(code >> 8)),
            _ => None,
        }
    }
}

impl core::fmt::Display for Denial {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Denial::NoRegion => f.write_str("no mapping there"),
            Denial::Protection(p) => write!(
                f,
                "not allowed by the mapping's protection ({}{}{})",
                if p & prot::READ != 0 { 'r' } else { '-' },
                if p & prot::WRITE != 0 { 'w' } else { '-' },
                if p & prot::EXEC != 0 { 'x' } else { '-' },
            ),
            Denial::NoMemory => f.write_str("no memory for the page"),
            Denial::Unresolvable => f.write_str("a fault the kernel does not resolve"),
        }
    }
}

/// Counters of one address space.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// Demand-zero pages mapped by faults.
    pub demand: u64,
    /// Spurious permission faults.
    pub spurious: u64,
    /// Faults that found the page already mapped.
    pub retries: u64,
    /// Faults that were the task's.
    pub denied: u64,
    /// Data pages allocated now.
    pub pages: u64,
}

/// A loaded program: where to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// Entry point.
    pub entry: u64,
    /// Load bias (added to every link-time address).
    pub bias: u64,
    /// One past the image's last page.
    pub end: u64,
}

/// Why a program could not be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadError {
    /// The file is not a program this loader accepts.
    Elf(ElfError),
    /// Its addresses are not user addresses, or overlap a region.
    Placement,
    /// No memory for its pages or tables.
    NoMemory,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            LoadError::Elf(e) => write!(f, "bad ELF file: {e}"),
            LoadError::Placement => f.write_str("segments outside user space or over another region"),
            LoadError::NoMemory => f.write_str("out of memory"),
        }
    }
}

/// Page-table permissions of `prot` bits for EL0 (write and execute imply read; the kernel
/// never executes user pages: PXN always).
pub fn perms_of(p: u64) -> Perms {
    if p & prot::ALL == 0 {
        return Perms::NONE;
    }
    let mut r = Perms::READ | Perms::USER;
    if p & prot::WRITE != 0 {
        r = r | Perms::WRITE;
    }
    if p & prot::EXEC != 0 {
        r = r | Perms::USER_EXEC;
    }
    r
}

pub(crate) fn need(a: Access) -> Perms {
    match a {
        Access::Read => Perms::READ | Perms::USER,
        Access::Write => Perms::RW | Perms::USER,
        Access::Exec => Perms::READ | Perms::USER | Perms::USER_EXEC,
    }
}

/// Whether a region with protection `p` allows `a`: [`perms_of`] of `p` holds what the access
/// needs (write and execute imply read), decided on the `prot` bits alone.
#[inline(always)]
pub(crate) fn allows(p: u64, a: Access) -> bool {
    let wanted = match a {
        Access::Read => prot::ALL,
        Access::Write => prot::WRITE,
        Access::Exec => prot::EXEC,
    };
    p & wanted != 0
}

fn pt_err(e: pgtable::Error) -> i64 {
    match e.kind() {
        pgtable::ErrorKind::OutOfMemory => errno::ENOMEM,
        _ => errno::EINVAL,
    }
}

/// `[addr, addr + len rounded up to pages)` if it is a user range; `Err(errno)` else.
fn user_range(addr: u64, len: u64, bad: i64) -> Result<(u64, u64), i64> {
    let len = len.checked_add(PAGE_SIZE - 1).ok_or(errno::ENOMEM)? & !(PAGE_SIZE - 1);
    let end = addr.checked_add(len).ok_or(bad)?;
    if addr < USER_START || end > USER_END {
        return Err(bad);
    }
    Ok((addr, end))
}

/// The arguments of `mmap`, as the system call passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mmap {
    /// Address (a hint, or the place with `MAP_FIXED`).
    pub addr: u64,
    /// Bytes (rounded up to pages).
    pub len: u64,
    /// `prot` bits.
    pub prot: u64,
    /// `map` flags.
    pub flags: u64,
    /// File descriptor: must be -1 (`u64::MAX`).
    pub fd: u64,
    /// File offset: must be 0.
    pub offset: u64,
}

impl Mmap {
    /// An anonymous private mapping of `len` bytes with `prot` (no file), at `addr` with
    /// `extra` flags (e.g. `MAP_FIXED`).
    pub const fn anon(addr: u64, len: u64, prot: u64, extra: u64) -> Mmap {
        Mmap { addr, len, prot, flags: map::PRIVATE | map::ANONYMOUS | extra, fd: u64::MAX, offset: 0 }
    }
}

/// The pages an unmap cleared: the first [`Freed::INLINE`] on the stack (an munmap of a few
/// pages allocates nothing), the rest on the heap.
struct Freed {
    inline: [core::mem::MaybeUninit<PhysAddr>; Freed::INLINE],
    n: usize,
    more: Vec<PhysAddr>,
}

impl Freed {
    const INLINE: usize = 32;

    fn new() -> Freed {
        Freed { inline: [const { core::mem::MaybeUninit::uninit() }; Freed::INLINE], n: 0, more: Vec::new() }
    }

    fn push(&mut self, pa: PhysAddr) {
        if self.n < Freed::INLINE {
            self.inline[self.n].write(pa);
            self.n += 1;
        } else {
            self.more.push(pa);
        }
    }

    fn iter(&self) -> impl Iterator<Item = PhysAddr> + '_ {
        // SAFETY: the first `n` inline slots were written by `push`.
        let inline = self.inline[..self.n].iter().map(|p| unsafe { p.assume_init() });
        inline.chain(self.more.iter().copied())
    }
}

/// A user address space.
pub struct AddressSpace<A: FrameAlloc> {
    pt: PageTable<A>,
    vmas: VmaSet,
    /// The page descriptor of each `prot` value (index: its three bits), encoded once.
    leaves: [PageLeaf; 8],
    /// Its counters.
    pub stats: SpaceStats,
}

impl<A: FrameAlloc> AddressSpace<A> {
    /// An empty address space whose table is live from the start (any CPU may run it).
    ///
    /// # Errors
    ///
    /// `ENOMEM` without a frame for the root.
    pub fn new<T: TlbMaintenance + ?Sized>(frames: A, tlb: &mut T) -> Result<Self, i64> {
        let mut pt = PageTable::el1(0, VaHalf::Lower, frames).map_err(pt_err)?;
        let mut leaves = [pt.page_leaf(Attributes::normal(Perms::NONE)).map_err(pt_err)?; 8];
        for (p, leaf) in leaves.iter_mut().enumerate() {
            *leaf = pt.page_leaf(Attributes::normal(perms_of(p as u64))).map_err(pt_err)?;
        }
        pt.set_live(tlb);
        Ok(AddressSpace { pt, vmas: VmaSet::new(), leaves, stats: SpaceStats::default() })
    }

    /// The table.
    pub fn table(&self) -> &PageTable<A> {
        &self.pt
    }

    /// The table, to change its policy or ASID.
    pub fn table_mut(&mut self) -> &mut PageTable<A> {
        &mut self.pt
    }

    /// The regions.
    pub fn regions(&self) -> &VmaSet {
        &self.vmas
    }

    /// `mmap(addr, len, prot, flags, fd, offset)`: anonymous, private, demand-zero.
    ///
    /// # Errors
    ///
    /// `EINVAL` (flags, fd, offset, zero length, a misaligned or non-user FIXED address),
    /// `ENOMEM` (no room, or no memory to unmap what FIXED replaces).
    pub fn mmap<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, a: Mmap) -> Result<u64, i64> {
        let Mmap { addr, len, prot: p, flags, fd, offset } = a;
        if flags & !map::ALL != 0 || flags & (map::PRIVATE | map::ANONYMOUS) != map::PRIVATE | map::ANONYMOUS {
            return Err(errno::EINVAL);
        }
        if p & !prot::ALL != 0 || fd != u64::MAX || offset != 0 || len == 0 {
            return Err(errno::EINVAL);
        }
        if len > USER_END {
            return Err(errno::ENOMEM);
        }
        let pages = len.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let start = if flags & map::FIXED != 0 {
            if addr % PAGE_SIZE != 0 {
                return Err(errno::EINVAL);
            }
            let (s, e) = user_range(addr, pages, errno::EINVAL)?;
            self.unmap_range(tlb, s, e)?;
            s
        } else {
            let hint_ok = addr != 0
                && addr % PAGE_SIZE == 0
                && user_range(addr, pages, errno::EINVAL).is_ok()
                && self.vmas.is_free(addr, addr + pages);
            if hint_ok {
                addr
            } else {
                self.vmas
                    .find_free(MMAP_BASE, USER_END, pages)
                    .or_else(|| self.vmas.find_free(USER_START, MMAP_BASE, pages))
                    .ok_or(errno::ENOMEM)?
            }
        };
        self.vmas.insert(start, start + pages, p);
        Ok(start)
    }

    /// `munmap(addr, len)`: unmapping what is not mapped is fine.
    ///
    /// # Errors
    ///
    /// `EINVAL` (misaligned address, zero length, not a user range), `ENOMEM` (no memory to
    /// split a table, which cannot happen with page mappings).
    pub fn munmap<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, addr: u64, len: u64) -> Result<(), i64> {
        if !addr.is_multiple_of(PAGE_SIZE) || len == 0 {
            return Err(errno::EINVAL);
        }
        let (s, e) = user_range(addr, len, errno::EINVAL)?;
        self.unmap_range(tlb, s, e)
    }

    fn unmap_range<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, s: u64, e: u64) -> Result<(), i64> {
        if self.vmas.is_free(s, e) {
            return Ok(());
        }
        // One walk: the table is told each page it clears; they are freed once it has returned
        // (its flush has completed: no CPU can reach them any more).
        let mut freed = Freed::new();
        self.pt.unmap_pages_of(tlb, VirtAddr::new(s), e - s, |pa| freed.push(pa)).map_err(pt_err)?;
        for pa in freed.iter() {
            self.pt.frames_mut().free(pa, 1);
            self.stats.pages -= 1;
        }
        self.vmas.remove(s, e);
        Ok(())
    }

    /// `mprotect(addr, len, prot)`.
    ///
    /// # Errors
    ///
    /// `EINVAL` (misaligned address, unknown bits), `ENOMEM` (part of the range not mapped, not
    /// a user range).
    #[inline(always)]
    pub fn mprotect<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        addr: u64,
        len: u64,
        p: u64,
    ) -> Result<(), i64> {
        if !addr.is_multiple_of(PAGE_SIZE) || p & !prot::ALL != 0 {
            return Err(errno::EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let (s, e) = user_range(addr, len, errno::ENOMEM)?;
        if !self.vmas.covers(s, e) {
            return Err(errno::ENOMEM);
        }
        self.pt.protect(tlb, VirtAddr::new(s), e - s, perms_of(p)).map_err(pt_err)?;
        self.vmas.protect(s, e, p);
        Ok(())
    }

    /// A fault at `va` (`kind`, `access`), at EL0 or in a kernel access to user memory.
    pub fn fault<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        va: u64,
        access: Access,
        kind: FaultKind,
    ) -> FaultOutcome {
        let out = self.decide(tlb, va, access, kind);
        match out {
            FaultOutcome::Mapped => self.stats.demand += 1,
            FaultOutcome::Spurious => self.stats.spurious += 1,
            FaultOutcome::Retry => self.stats.retries += 1,
            FaultOutcome::Denied(_) => self.stats.denied += 1,
        }
        out
    }

    /// The common fault alone, a first touch the region allows: `va` a user address inside
    /// a region whose protection allows `access`, its page's entry empty in a level-3 table
    /// that exists, and a frame to be had. Then the page is mapped (`PageTable::map_fresh_page`:
    /// a zeroed frame, `DSB ISHST`, the entry, `DSB ISHST`), counted as [`fault`](Self::fault)
    /// counts a demand-zero page, and this returns true; anything else returns false having
    /// changed nothing, and the caller calls [`fault`](Self::fault). The caller knows the
    /// hardware reported a translation fault, and returns to the access through an exception
    /// return (no `ISB` here).
    #[inline(always)]
    pub fn first_touch<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, va: u64, access: Access) -> bool {
        if va >= USER_END {
            return false;
        }
        let Some(vma) = self.vmas.find(va) else {
            return false;
        };
        if !allows(vma.prot, access) {
            return false;
        }
        let page = VirtAddr::new(va & !(PAGE_SIZE - 1));
        let leaf = self.leaves[(vma.prot & prot::ALL) as usize];
        match self.pt.map_fresh_leaf(tlb, page, leaf) {
            FreshPage::Mapped(_) => {
                self.stats.pages += 1;
                self.stats.demand += 1;
                true
            }
            _ => false,
        }
    }

    #[inline(always)]
    fn decide<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        va: u64,
        access: Access,
        kind: FaultKind,
    ) -> FaultOutcome {
        if kind == FaultKind::Other {
            return FaultOutcome::Denied(Denial::Unresolvable);
        }
        let Some(vma) = (va < USER_END).then(|| self.vmas.find(va)).flatten() else {
            return FaultOutcome::Denied(Denial::NoRegion);
        };
        let want = need(access);
        let page = va & !(PAGE_SIZE - 1);
        if kind == FaultKind::Translation && perms_of(vma.prot).contains(want) {
            // The common case, a first touch: the page is mapped, nothing looked up or decoded
            // first. (A page mapped meanwhile, by another CPU's fault, is found by the map.)
            match self.populate(tlb, page, vma) {
                Ok(true) => return FaultOutcome::Mapped,
                Ok(false) => {}
                Err(_) => return FaultOutcome::Denied(Denial::NoMemory),
            }
        }
        self.decide_mapped(tlb, page, vma, want, kind)
    }

    /// [`decide`](Self::decide) for a fault that is not a first touch the region allows (or
    /// whose page was mapped meanwhile): what the tables hold decides (out of line: the first
    /// touch keeps a small frame).
    #[inline(never)]
    fn decide_mapped<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        page: u64,
        vma: Vma,
        want: Perms,
        kind: FaultKind,
    ) -> FaultOutcome {
        match self.pt.translate(VirtAddr::new(page)) {
            Some(t) if t.attrs.perms.is_none() => FaultOutcome::Denied(Denial::Protection(vma.prot)),
            Some(t) if t.attrs.perms.contains(want) => match kind {
                FaultKind::Permission => FaultOutcome::Spurious,
                _ => FaultOutcome::Retry,
            },
            Some(_) => FaultOutcome::Denied(Denial::Protection(vma.prot)),
            None => {
                if !perms_of(vma.prot).contains(want) {
                    return FaultOutcome::Denied(Denial::Protection(vma.prot));
                }
                match self.populate(tlb, page, vma) {
                    Ok(true) => FaultOutcome::Mapped,
                    Ok(false) => FaultOutcome::Retry,
                    Err(_) => FaultOutcome::Denied(Denial::NoMemory),
                }
            }
        }
    }

    /// Maps a fresh zero page at `page` with the region's protection; `Ok(false)` when
    /// something is mapped there already (no frame taken, or the frame given back).
    #[inline(always)]
    fn populate<T: TlbMaintenance + ?Sized>(&mut self, tlb: &mut T, page: u64, vma: Vma) -> Result<bool, i64> {
        let attrs = Attributes::normal(perms_of(vma.prot));
        match self.pt.map_fresh_page(tlb, VirtAddr::new(page), attrs) {
            FreshPage::Mapped(_) => {
                self.stats.pages += 1;
                Ok(true)
            }
            FreshPage::Occupied => Ok(false),
            FreshPage::NoFrame => Err(errno::ENOMEM),
            FreshPage::Declined => self.populate_walk(tlb, page, attrs),
        }
    }

    /// [`populate`](Self::populate) where the fresh-page path declined (no level-3 table yet,
    /// a summary bit to clear, flush elision off): by `map`, its frame's zeros made visible
    /// first (`DSB ISHST`), as `map_fresh_page` does.
    #[inline(never)]
    fn populate_walk<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        page: u64,
        attrs: Attributes,
    ) -> Result<bool, i64> {
        let pa = self.pt.frames_mut().alloc_zeroed(1).ok_or(errno::ENOMEM)?;
        tlb.dsb(Barrier::IshSt);
        if let Err(e) = self.pt.map(tlb, VirtAddr::new(page), PAGE_SIZE, pa, attrs, Constraints::PAGES_ONLY) {
            self.pt.frames_mut().free(pa, 1);
            return match e.kind() {
                pgtable::ErrorKind::AlreadyMapped => Ok(false),
                _ => Err(pt_err(e)),
            };
        }
        self.stats.pages += 1;
        Ok(true)
    }

    /// A byte pointer to data page `pa` (through the frame allocator's mapping).
    fn page_ptr(&self, pa: PhysAddr) -> *mut u8 {
        self.pt.frames().phys_to_ptr(pa) as *mut u8
    }

    /// Maps `bytes` at `va` (page aligned) with `p`, in fresh pages (the rest of the last page
    /// zero), as a region.
    ///
    /// # Errors
    ///
    /// `EINVAL` (misaligned, not a user range, over a region), `ENOMEM`.
    pub fn map_bytes<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        va: u64,
        bytes: &[u8],
        p: u64,
    ) -> Result<(), i64> {
        let len = (bytes.len() as u64).max(1).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        if !va.is_multiple_of(PAGE_SIZE) {
            return Err(errno::EINVAL);
        }
        let (s, e) = user_range(va, len, errno::EINVAL)?;
        if !self.vmas.is_free(s, e) {
            return Err(errno::EINVAL);
        }
        self.vmas.insert(s, e, p);
        for (i, chunk) in bytes.chunks(PAGE_SIZE as usize).enumerate() {
            let r = self
                .fill_page(tlb, s + i as u64 * PAGE_SIZE, perms_of(p), |dst| dst[..chunk.len()].copy_from_slice(chunk));
            if let Err(err) = r {
                let _ = self.unmap_range(tlb, s, e);
                return Err(err);
            }
        }
        Ok(())
    }

    /// Allocates a zero page, lets `fill` write it, maps it at `va` with `perms`.
    fn fill_page<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        va: u64,
        perms: Perms,
        fill: impl FnOnce(&mut [u8]),
    ) -> Result<PhysAddr, i64> {
        let pa = self.pt.frames_mut().alloc_zeroed(1).ok_or(errno::ENOMEM)?;
        // SAFETY: a frame just allocated for this address space, not mapped anywhere yet:
        // `phys_to_ptr` reaches all of it (FrameAlloc contract) and nothing else writes it.
        let page = unsafe { core::slice::from_raw_parts_mut(self.page_ptr(pa), PAGE_SIZE as usize) };
        fill(page);
        // What was written visible before any walker can find the entry.
        tlb.dsb(Barrier::IshSt);
        if let Err(e) =
            self.pt.map(tlb, VirtAddr::new(va), PAGE_SIZE, pa, Attributes::normal(perms), Constraints::PAGES_ONLY)
        {
            self.pt.frames_mut().free(pa, 1);
            return Err(pt_err(e));
        }
        self.stats.pages += 1;
        Ok(pa)
    }

    /// A demand-zero region `[top - size, top)` read-write (a stack; nothing is mapped below).
    ///
    /// # Errors
    ///
    /// `EINVAL` (misaligned, not user addresses, over a region).
    pub fn map_stack(&mut self, top: u64, size: u64) -> Result<u64, i64> {
        let size = size.div_ceil(PAGE_SIZE) * PAGE_SIZE;
        if !top.is_multiple_of(PAGE_SIZE) || size == 0 || top < size {
            return Err(errno::EINVAL);
        }
        let (s, e) = user_range(top - size, size, errno::EINVAL)?;
        if !self.vmas.is_free(s, e) {
            return Err(errno::EINVAL);
        }
        self.vmas.insert(s, e, prot::READ | prot::WRITE);
        Ok(s)
    }

    /// Loads `file` (position independent at [`PROGRAM_BASE`], else where it is linked): every
    /// segment copied into fresh pages with its protection, relocations applied. `sync(page,
    /// len)` is called for every executable page after it was written (make instruction
    /// fetches see it).
    ///
    /// # Errors
    ///
    /// [`LoadError`]; nothing stays mapped on error.
    pub fn load<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        file: &[u8],
        mut sync: impl FnMut(*const u8, usize),
    ) -> Result<Loaded, LoadError> {
        let prog = Program::parse(file).map_err(LoadError::Elf)?;
        let bias = if prog.pie { PROGRAM_BASE } else { 0 };
        let lo = bias + prog.segments[0].page_start();
        let hi = bias + prog.segments.last().unwrap().page_end();
        if lo < USER_START || hi > USER_END || !self.vmas.is_free(lo, hi) {
            return Err(LoadError::Placement);
        }
        let r = self.load_segments(tlb, file, &prog, bias, &mut sync);
        if let Err(e) = r {
            let _ = self.unmap_range(tlb, lo, hi);
            return Err(e);
        }
        Ok(Loaded { entry: bias + prog.entry, bias, end: hi })
    }

    fn load_segments<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        file: &[u8],
        prog: &Program,
        bias: u64,
        sync: &mut impl FnMut(*const u8, usize),
    ) -> Result<(), LoadError> {
        for seg in &prog.segments {
            let p = (seg.read as u64 * prot::READ) | (seg.write as u64 * prot::WRITE) | (seg.exec as u64 * prot::EXEC);
            let (start, end) = (bias + seg.page_start(), bias + seg.page_end());
            self.vmas.insert(start, end, p);
            let mut page = seg.page_start();
            while page < seg.page_end() {
                let relocs: Vec<(u64, u64)> =
                    prog.relocations.iter().filter(|(o, _)| *o >= page && *o < page + PAGE_SIZE).copied().collect();
                let fill = |dst: &mut [u8]| {
                    // File bytes of [page, page + 4 KiB) that belong to the segment.
                    let from = page.max(seg.vaddr);
                    let to = (page + PAGE_SIZE).min(seg.vaddr + seg.file_len);
                    if to > from {
                        let off = (seg.file_off + (from - seg.vaddr)) as usize;
                        let n = (to - from) as usize;
                        let d = (from - page) as usize;
                        dst[d..d + n].copy_from_slice(&file[off..off + n]);
                    }
                    for (o, addend) in &relocs {
                        let d = (o - page) as usize;
                        dst[d..d + 8].copy_from_slice(&(bias + addend).to_le_bytes());
                    }
                };
                let pa = self.fill_page(tlb, bias + page, perms_of(p), fill).map_err(|_| LoadError::NoMemory)?;
                if seg.exec {
                    sync(self.page_ptr(pa), PAGE_SIZE as usize);
                }
                page += PAGE_SIZE;
            }
        }
        Ok(())
    }

    /// Unmaps everything (data pages freed) and frees the table; returns the allocator.
    ///
    /// # Safety
    ///
    /// No CPU may run this address space any more (none has it in TTBR0), and none may again
    /// use its ASID before a TLB invalidation of it: the unmaps flush what they remove, but a
    /// CPU that still ran it could refill.
    pub unsafe fn destroy<T: TlbMaintenance + ?Sized>(mut self, tlb: &mut T) -> A {
        let all: Vec<Vma> = self.vmas.iter().collect();
        for v in all {
            let _ = self.unmap_range(tlb, v.start, v.end);
        }
        // SAFETY: per the caller, nothing runs it; every mapping was unmapped with its flush.
        unsafe { self.pt.set_not_live() };
        match self.pt.destroy() {
            Ok(a) => a,
            Err(_) => unreachable!("a table that is not live is destroyed"),
        }
    }
}
