//! Where QEMU's loader puts a guest, so the hypervisor can put it in the same place.
//!
//! QEMU's direct kernel boot on arm64 (`hw/arm/boot.c`: `load_aarch64_image` and
//! `arm_setup_direct_kernel_boot`; the same rules in QEMU 7.2 and 10.0, checked against both
//! with `info roms`) places, from the loader's RAM base (the first RAM byte on `virt`):
//!
//! * **the kernel**: a file with the arm64 magic (`ARM\x64` at 0x38, file longer than 0x3c
//!   bytes) and a non-zero `image_size` at base + `text_offset`, plus 2 MiB when `text_offset`
//!   is below 4 KiB (QEMU's own 40-byte boot stub sits at the base). Anything else (a raw
//!   binary, a pre-3.17 Image with `image_size` 0) at base + 0x80000. QEMU counts the kernel as
//!   `image_size` bytes (BSS included), else as the file's length, and refuses a kernel larger
//!   than RAM;
//! * **the initrd**: at base + min(RAM / 2, 128 MiB), or right after the kernel if that is
//!   higher, rounded up to the target page (4 KiB on `virt`); it must fit below the end of RAM;
//! * **the DTB**: after the initrd (or where the initrd would be), rounded up to 2 MiB (some
//!   arm64 kernels map the 2 MiB around it early).
//!
//! Every address of the table in `docs/ARCHITECTURE.md` ("Where the guest goes") comes from
//! [`place`]; `tests/tests/placement.rs` holds it to QEMU's own `info roms`.
//!
//! [`order_copies`] then orders the copies that bring a guest from where the boot loader left it
//! (inside the guest bundle) to where [`place`] says, so that no copy overwrites bytes another
//! copy has yet to read.

use crate::range::{align_up, Range};
use alloc::vec::Vec;
use core::fmt;

/// Where QEMU loads a kernel without a usable Image header (`KERNEL64_LOAD_ADDR`), from the
/// RAM base.
pub const RAW_OFFSET: u64 = 0x8_0000;
/// QEMU's boot stub sits at the RAM base: an Image asking for a `text_offset` below this
/// (`BOOTLOADER_MAX_SIZE`) is loaded 2 MiB higher.
pub const BOOT_STUB_MAX: u64 = 0x1000;
/// The most the initrd's offset from the RAM base starts at (RAM / 2 below 256 MiB).
pub const INITRD_OFFSET_MAX: u64 = 128 << 20;
/// The DTB's alignment after the initrd.
pub const DTB_ALIGN: u64 = 2 << 20;
/// The target page QEMU aligns the initrd to on `virt` (`minimum_page_bits` = 12).
pub const VIRT_PAGE: u64 = 4096;
/// Bytes of the DTB QEMU's `virt` generates (its `totalsize`: the tree and free space to 1 MiB).
pub const VIRT_DTB_BYTES: u64 = 1 << 20;

/// Offset of the arm64 magic in an Image header.
const MAGIC_OFFSET: usize = 0x38;
const MAGIC: &[u8; 4] = b"ARM\x64";

/// A guest kernel file as QEMU's loader sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kernel {
    /// Bytes of the file (QEMU copies exactly these).
    pub file_len: u64,
    /// `Some((text_offset, image_size))` for a file with the arm64 magic.
    pub header: Option<(u64, u64)>,
}

impl Kernel {
    /// Reads `file` as `load_aarch64_image` does (after decompression): the magic at 0x38 in
    /// a file of more than 0x3c bytes makes it an Image, whose `text_offset` (at 8) and
    /// `image_size` (at 16) count.
    pub fn classify(file: &[u8]) -> Kernel {
        let le64 = |at: usize| {
            let mut v = [0u8; 8];
            v.copy_from_slice(&file[at..at + 8]);
            u64::from_le_bytes(v)
        };
        let header = (file.len() > MAGIC_OFFSET + 4 && &file[MAGIC_OFFSET..MAGIC_OFFSET + 4] == MAGIC)
            .then(|| (le64(8), le64(16)));
        Kernel { file_len: file.len() as u64, header }
    }

    /// Whether the file carries the Image header's magic where QEMU looks for it (an Image
    /// whose `image_size` is 0 still loads as a raw binary: [`Self::is_image`]).
    pub fn has_magic(&self) -> bool {
        self.header.is_some()
    }

    /// A raw binary of `len` bytes.
    pub const fn raw(len: u64) -> Kernel {
        Kernel { file_len: len, header: None }
    }

    /// An Image file of `file_len` bytes with this header.
    pub const fn image(file_len: u64, text_offset: u64, image_size: u64) -> Kernel {
        Kernel { file_len, header: Some((text_offset, image_size)) }
    }

    /// Whether QEMU treats it as an Image (the magic and a non-zero `image_size`): only then
    /// does `text_offset` count.
    pub fn is_image(&self) -> bool {
        matches!(self.header, Some((_, size)) if size != 0)
    }

    /// Offset from the RAM base QEMU loads it at.
    pub fn load_offset(&self) -> u64 {
        match self.header {
            Some((off, size)) if size != 0 && off < BOOT_STUB_MAX => off.saturating_add(2 << 20),
            Some((off, size)) if size != 0 => off,
            _ => RAW_OFFSET,
        }
    }

    /// Bytes QEMU counts as the kernel's: `image_size` (BSS included), else the file's length.
    pub fn footprint(&self) -> u64 {
        match self.header {
            Some((_, size)) if size != 0 => size,
            _ => self.file_len,
        }
    }
}

/// What to place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadInput {
    /// The RAM the loader uses: from its base (QEMU's `loader_start`), `ram_size` bytes.
    pub ram: Range,
    /// The kernel.
    pub kernel: Kernel,
    /// Bytes of the initrd, if there is one.
    pub initrd_len: Option<u64>,
    /// Bytes of the DTB.
    pub dtb_len: u64,
    /// The target page the initrd is aligned to ([`VIRT_PAGE`] on `virt`).
    pub page: u64,
}

/// Where everything goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// The kernel's first byte: where it is entered.
    pub entry: u64,
    /// `[entry, entry + footprint)`: what the kernel may use from its first byte (the file
    /// and, for an Image, its BSS up to `image_size`).
    pub kernel: Range,
    /// The initrd.
    pub initrd: Option<Range>,
    /// The DTB.
    pub dtb: Range,
}

impl Placement {
    /// The bytes the kernel's file occupies.
    pub fn kernel_file(&self, k: &Kernel) -> Range {
        Range::new(self.entry, self.entry + k.file_len)
    }

    /// What the kernel may use from its entry: its footprint, or its file if that is longer
    /// (a file longer than its `image_size`).
    pub fn kernel_room(&self, k: &Kernel) -> Range {
        Range::new(self.entry, self.kernel.end.max(self.entry.saturating_add(k.file_len)))
    }

    /// The pieces, named: the kernel's room, the initrd (if any), the DTB.
    pub fn pieces(&self, k: &Kernel) -> Vec<(&'static str, Range)> {
        let mut v = alloc::vec![("kernel", self.kernel_room(k))];
        v.extend(self.initrd.map(|r| ("initramfs", r)));
        v.push(("device tree", self.dtb));
        v
    }
}

/// Why QEMU (and so the hypervisor) cannot place a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadError {
    /// The kernel counts more bytes than RAM has, or its file does not fit from its load
    /// address to the end of RAM.
    KernelTooLarge {
        /// Where it would go.
        at: Range,
        /// RAM.
        ram: Range,
    },
    /// No RAM is left after the kernel for the initrd.
    NoRoomForInitrd {
        /// Where the initrd would start.
        at: u64,
        /// RAM.
        ram: Range,
    },
    /// The initrd does not fit from its start to the end of RAM.
    InitrdTooLarge {
        /// Where it would go.
        at: Range,
        /// RAM.
        ram: Range,
    },
    /// The DTB does not fit after the initrd.
    NoRoomForDtb {
        /// Where it would go.
        at: Range,
        /// RAM.
        ram: Range,
    },
    /// An address overflows 64 bits.
    Overflow,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::KernelTooLarge { at, ram } => {
                write!(f, "the kernel would go at {at}, which does not fit in RAM {ram} (QEMU refuses it too)")
            }
            Self::NoRoomForInitrd { at, ram } => {
                write!(f, "no room for the initrd after the kernel: it would start at {at:#x}, RAM is {ram}")
            }
            Self::InitrdTooLarge { at, ram } => {
                write!(f, "the initrd would go at {at}, past the end of RAM {ram} (QEMU refuses it too)")
            }
            Self::NoRoomForDtb { at, ram } => write!(f, "the device tree would go at {at}, past the end of RAM {ram}"),
            Self::Overflow => write!(f, "an address overflows 64 bits"),
        }
    }
}

/// Where QEMU puts `input`'s kernel, initrd and DTB (the rules at the top of this module).
pub fn place(input: &LoadInput) -> Result<Placement, LoadError> {
    let ram = input.ram;
    let k = &input.kernel;
    let entry = ram.start.checked_add(k.load_offset()).ok_or(LoadError::Overflow)?;
    let kernel = Range::sized(entry, k.footprint()).ok_or(LoadError::Overflow)?;
    let file_end = entry.checked_add(k.file_len).ok_or(LoadError::Overflow)?;
    if k.footprint() > ram.len() || file_end > ram.end {
        return Err(LoadError::KernelTooLarge { at: Range::new(entry, kernel.end.max(file_end)), ram });
    }
    let low = ram.start + (ram.len() / 2).min(INITRD_OFFSET_MAX);
    let page = input.page.max(1);
    let initrd_start = align_up(low.max(kernel.end), page).ok_or(LoadError::Overflow)?;
    let initrd = match input.initrd_len {
        None => None,
        Some(_) if initrd_start >= ram.end => return Err(LoadError::NoRoomForInitrd { at: initrd_start, ram }),
        Some(len) => {
            let r = Range::sized(initrd_start, len).ok_or(LoadError::Overflow)?;
            if r.end > ram.end {
                return Err(LoadError::InitrdTooLarge { at: r, ram });
            }
            Some(r)
        }
    };
    let after = initrd.map_or(initrd_start, |r| r.end);
    let dtb_start = align_up(after, DTB_ALIGN).ok_or(LoadError::Overflow)?;
    let dtb = Range::sized(dtb_start, input.dtb_len).ok_or(LoadError::Overflow)?;
    if dtb_start >= ram.end || dtb.end > ram.end {
        return Err(LoadError::NoRoomForDtb { at: dtb, ram });
    }
    Ok(Placement { entry, kernel, initrd, dtb })
}

/// The RAM a guest is placed in ([`place_guest`]).
#[derive(Debug, Clone, Copy)]
pub struct GuestRam<'a> {
    /// The machine's RAM base (QEMU's loader starts there: the DTB's first RAM byte).
    pub base: u64,
    /// The guest's RAM ranges, in address order (not empty).
    pub ranges: &'a [Range],
    /// Memory nothing is placed in (firmware-reserved ranges).
    pub reserved: &'a [Range],
}

/// Later windows start at a 2 MiB boundary: an arm64 Image goes `text_offset` above a 2 MiB
/// aligned base (`Documentation/arch/arm64/booting.rst`).
pub const WINDOW_ALIGN: u64 = 2 << 20;

/// Why one window does not take the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowError {
    /// QEMU's rules give no place in it.
    Place(LoadError),
    /// A piece would go where it is not free guest RAM (firmware-reserved, or not the
    /// guest's).
    NotFree {
        /// Which piece.
        what: &'static str,
        /// Where it would go.
        at: Range,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Place(e) => write!(f, "{e}"),
            Self::NotFree { what, at } => {
                write!(
                    f,
                    "the {what} would go at {at}, which is not free guest RAM (firmware-reserved or not the guest's)"
                )
            }
        }
    }
}

/// Why no window takes the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestPlaceError {
    /// The guest has no RAM.
    NoRam,
    /// Every window was tried: each with why it did not hold the guest.
    Nowhere(Vec<(Range, WindowError)>),
}

impl fmt::Display for GuestPlaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRam => write!(f, "the guest has no RAM"),
            Self::Nowhere(tried) => {
                write!(f, "no range of the guest's RAM holds the guest as QEMU would place it:")?;
                for (i, (w, why)) in tried.iter().enumerate() {
                    write!(f, "{} from {w}: {why}", if i == 0 { "" } else { ";" })?;
                }
                Ok(())
            }
        }
    }
}

/// The windows [`place_guest`] tries, in order: QEMU's loader RAM (from the machine's RAM base
/// to the end of the guest's first range), then each later range from its first 2 MiB
/// boundary ([`WINDOW_ALIGN`]).
pub fn windows(ram: &GuestRam) -> Vec<Range> {
    let mut out = Vec::new();
    let Some(first) = ram.ranges.first() else { return out };
    out.push(Range::new(ram.base.min(first.start), first.end));
    for g in &ram.ranges[1..] {
        if let Some(start) = align_up(g.start, WINDOW_ALIGN).filter(|&s| s < g.end) {
            out.push(Range::new(start, g.end));
        }
    }
    out
}

/// Where the guest goes: QEMU's rules ([`place`], `what.ram` replaced by each window of
/// [`windows`] in turn) in the first window where every piece lands in one range of guest RAM,
/// clear of reserved memory. The first window is exactly QEMU's loader RAM, so a guest whose
/// RAM starts at the machine's RAM base goes where QEMU would put it; later windows serve a
/// guest whose first range cannot hold it (the hypervisor stayed low and left a hole above
/// the RAM base: the ZCU102 with a 1 GiB memslot pool). Returns the window and the placement.
pub fn place_guest(what: &LoadInput, ram: &GuestRam) -> Result<(Range, Placement), GuestPlaceError> {
    let windows = windows(ram);
    if windows.is_empty() {
        return Err(GuestPlaceError::NoRam);
    }
    let mut tried = Vec::new();
    for w in windows {
        let p = match place(&LoadInput { ram: w, ..*what }) {
            Ok(p) => p,
            Err(e) => {
                tried.push((w, WindowError::Place(e)));
                continue;
            }
        };
        let bad = p.pieces(&what.kernel).into_iter().find(|(_, at)| {
            !ram.ranges.iter().any(|r| r.contains(at.start, at.len())) || ram.reserved.iter().any(|r| r.overlaps(at))
        });
        match bad {
            None => return Ok((w, p)),
            Some((what, at)) => tried.push((w, WindowError::NotFree { what, at })),
        }
    }
    Err(GuestPlaceError::Nowhere(tried))
}

/// One copy: `len` bytes from `from` to `to` (the two may overlap: a memmove).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy {
    /// Source.
    pub from: u64,
    /// Destination.
    pub to: u64,
    /// Bytes.
    pub len: u64,
}

impl Copy {
    fn src(&self) -> Range {
        Range::new(self.from, self.from.saturating_add(self.len))
    }
    fn dst(&self) -> Range {
        Range::new(self.to, self.to.saturating_add(self.len))
    }
}

/// Why the copies cannot be ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderError {
    /// Two destinations overlap.
    DestinationsOverlap,
    /// The copies overwrite each other's sources in a cycle and no scratch space of this many
    /// bytes is free to break it.
    NoScratch {
        /// Bytes needed.
        len: u64,
    },
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DestinationsOverlap => write!(f, "two parts of the guest would go to overlapping places"),
            Self::NoScratch { len } => {
                write!(f, "the guest's parts overlap where they go and no free RAM of {len:#x} bytes is left to move one aside")
            }
        }
    }
}

/// Orders `copies` (destinations pairwise disjoint) so that, done one after the other as
/// memmoves, none overwrites a source another has yet to read. When they block each other in a
/// cycle, one is first moved aside into `scratch` (free memory, which must not hold anything
/// the copies need: the result never uses a byte of `scratch` that is a source or destination).
pub fn order_copies(copies: &[Copy], scratch: &[Range]) -> Result<Vec<Copy>, OrderError> {
    let copies: Vec<Copy> = copies.iter().copied().filter(|c| c.len != 0).collect();
    for (i, a) in copies.iter().enumerate() {
        if copies[..i].iter().any(|b| a.dst().overlaps(&b.dst())) {
            return Err(OrderError::DestinationsOverlap);
        }
    }
    let mut pending = copies;
    let mut out: Vec<Copy> = Vec::new();
    let mut done: Vec<Range> = Vec::new();
    while !pending.is_empty() {
        let free = (0..pending.len()).find(|&i| {
            let d = pending[i].dst();
            pending.iter().enumerate().all(|(j, o)| j == i || !d.overlaps(&o.src()))
        });
        match free {
            Some(i) => {
                let c = pending.remove(i);
                done.push(c.dst());
                if c.from != c.to {
                    out.push(c);
                }
            }
            None => {
                // Every copy waits for another: move aside a source that blocks the first one,
                // clear of every source and destination (the finished copies' too). Its new
                // source blocks nobody, so this happens at most once per copy.
                let d = pending[0].dst();
                let x = (1..pending.len()).find(|&j| d.overlaps(&pending[j].src())).unwrap_or(0);
                let c = pending[x];
                let mut busy: Vec<Range> = pending.iter().flat_map(|p| [p.src(), p.dst()]).collect();
                busy.extend_from_slice(&done);
                let at =
                    crate::range::place(scratch, c.len, 16, 0, &busy).ok_or(OrderError::NoScratch { len: c.len })?;
                out.push(Copy { from: c.from, to: at, len: c.len });
                pending[x].from = at;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use alloc::vec;
    use proptest::prelude::*;

    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    const BASE: u64 = 0x4000_0000;

    fn virt(mem: u64, kernel: Kernel, initrd: Option<u64>) -> Result<Placement, LoadError> {
        place(&LoadInput {
            ram: Range::new(BASE, BASE + mem),
            kernel,
            initrd_len: initrd,
            dtb_len: VIRT_DTB_BYTES,
            page: VIRT_PAGE,
        })
    }

    /// What QEMU 7.2 and 10.0.2 said (`info roms`, `-M virt -cpu max`) for a 20,000-byte raw
    /// binary, an Image of 100,000 bytes with text_offset 0 and image_size 3 MiB, a pre-3.17
    /// Image (image_size 0), Images with text_offset 0x1000 and 0x1ff000, one with image_size
    /// 200 MiB, and a 3,000,000-byte initrd: (mem, kernel, initrd?) -> (kernel, initrd, dtb).
    #[test]
    fn matches_what_qemu_did() {
        let raw = Kernel::raw(20_000);
        let img0 = Kernel::image(100_000, 0, 3 * MIB);
        let legacy = Kernel::image(100_000, 0, 0);
        let to1000 = Kernel::image(100_000, 0x1000, 3 * MIB);
        let to1ff = Kernel::image(100_000, 0x1f_f000, 3 * MIB);
        let big = Kernel::image(100_000, 0, 200 * MIB);
        let rd = Some(3_000_000);
        #[rustfmt::skip]
        type Row = (u64, Kernel, Option<u64>, u64, u64, u64);
        let table: &[Row] = &[
            (128 * MIB, raw, None, 0x4008_0000, 0, 0x4400_0000),
            (128 * MIB, raw, rd, 0x4008_0000, 0x4400_0000, 0x4440_0000),
            (256 * MIB, raw, None, 0x4008_0000, 0, 0x4800_0000),
            (256 * MIB, raw, rd, 0x4008_0000, 0x4800_0000, 0x4840_0000),
            (300 * MIB, raw, rd, 0x4008_0000, 0x4800_0000, 0x4840_0000),
            (16 * GIB, raw, None, 0x4008_0000, 0, 0x4800_0000),
            (16 * GIB, raw, rd, 0x4008_0000, 0x4800_0000, 0x4840_0000),
            (128 * MIB, img0, None, 0x4020_0000, 0, 0x4400_0000),
            (128 * MIB, img0, rd, 0x4020_0000, 0x4400_0000, 0x4440_0000),
            (GIB, img0, None, 0x4020_0000, 0, 0x4800_0000),
            (GIB, img0, rd, 0x4020_0000, 0x4800_0000, 0x4840_0000),
            (16 * GIB, img0, rd, 0x4020_0000, 0x4800_0000, 0x4840_0000),
            (128 * MIB, legacy, rd, 0x4008_0000, 0x4400_0000, 0x4440_0000),
            (256 * MIB, to1000, rd, 0x4000_1000, 0x4800_0000, 0x4840_0000),
            (256 * MIB, to1ff, rd, 0x401f_f000, 0x4800_0000, 0x4840_0000),
            (256 * MIB, big, None, 0x4020_0000, 0, 0x4ca0_0000),
            (256 * MIB, big, rd, 0x4020_0000, 0x4ca0_0000, 0x4ce0_0000),
            (16 * GIB, big, rd, 0x4020_0000, 0x4ca0_0000, 0x4ce0_0000),
        ];
        for &(mem, k, initrd, entry, rd_at, dtb) in table {
            let p = virt(mem, k, initrd).unwrap_or_else(|e| panic!("{mem:#x} {k:?}: {e}"));
            assert_eq!(p.entry, entry, "{mem:#x} {k:?}");
            assert_eq!(p.initrd.map_or(0, |r| r.start), rd_at, "{mem:#x} {k:?} {initrd:?}");
            assert_eq!(p.dtb, Range::new(dtb, dtb + MIB), "{mem:#x} {k:?} {initrd:?}");
        }
        // QEMU refused these.
        assert!(matches!(virt(128 * MIB, big, None), Err(LoadError::KernelTooLarge { .. })));
        assert!(matches!(virt(128 * MIB, raw, Some(70_000_000)), Err(LoadError::InitrdTooLarge { .. })));
        assert!(matches!(virt(256 * MIB, big, Some(70_000_000)), Err(LoadError::InitrdTooLarge { .. })));
    }

    #[test]
    fn classify_reads_the_header_as_qemu_does() {
        let mut f = vec![0u8; 64];
        assert_eq!(Kernel::classify(&f), Kernel::raw(64));
        f[0x38..0x3c].copy_from_slice(b"ARM\x64");
        f[8] = 0x10;
        f[16..24].copy_from_slice(&(5u64 << 20).to_le_bytes());
        assert_eq!(Kernel::classify(&f), Kernel::image(64, 0x10, 5 << 20));
        assert_eq!(Kernel::classify(&f).load_offset(), 0x20_0010);
        // The magic must be followed by something: a 60-byte file is raw to QEMU.
        assert_eq!(Kernel::classify(&f[..60]), Kernel::raw(60));
        assert_eq!(Kernel::classify(&[1, 2, 3]), Kernel::raw(3));
        assert_eq!(Kernel::classify(&[]), Kernel::raw(0));
        assert!(Kernel::image(64, 0x10, 5 << 20).is_image());
        assert!(!Kernel::raw(64).is_image());
        assert!(!Kernel::image(64, 0x10, 0).is_image(), "image_size 0: raw to QEMU");
    }

    #[test]
    fn small_ram_puts_the_initrd_halfway_and_refuses_what_does_not_fit() {
        let k = Kernel::raw(4096);
        let p = virt(64 * MIB, k, Some(MIB)).unwrap();
        assert_eq!(p.kernel_file(&k), Range::new(p.entry, p.entry + 4096));
        assert_eq!(p.initrd, Some(Range::new(BASE + 32 * MIB, BASE + 33 * MIB)));
        assert_eq!(p.dtb.start, BASE + 34 * MIB);
        // A kernel reaching past the halfway point pushes the initrd after it, page aligned.
        let k = Kernel::image(8192, 0, 40 * MIB + 1);
        let p = virt(64 * MIB, k, Some(MIB)).unwrap();
        assert_eq!(p.initrd.unwrap().start, BASE + 42 * MIB + 4096);
        assert!(matches!(virt(8 * MIB, Kernel::image(64, 0, 6 * MIB + 1), None), Err(LoadError::NoRoomForDtb { .. })));
        // A footprint of exactly the RAM's size is not refused as too large (QEMU compares
        // with >): what fails then is the DTB's room.
        let r = virt(8 * MIB, Kernel::image(64, 0, 8 * MIB), None);
        assert!(matches!(r, Err(LoadError::NoRoomForDtb { .. })), "{r:?}");
        assert!(matches!(
            virt(2 * MIB + 0x80000, Kernel::image(64, 0, 0x80000), Some(1)),
            Err(LoadError::NoRoomForInitrd { .. })
        ));
        // A DTB that starts in RAM but would end past it is refused too.
        let long_dtb = LoadInput {
            ram: Range::new(BASE, BASE + 64 * MIB),
            kernel: Kernel::raw(4096),
            initrd_len: None,
            dtb_len: 40 * MIB,
            page: VIRT_PAGE,
        };
        assert!(matches!(place(&long_dtb), Err(LoadError::NoRoomForDtb { .. })));
        let top = LoadInput {
            ram: Range::new(u64::MAX - MIB, u64::MAX),
            kernel: k,
            initrd_len: None,
            dtb_len: 1,
            page: VIRT_PAGE,
        };
        assert!(place(&top).is_err());
    }

    const GUEST_PAGE: u64 = VIRT_PAGE;

    fn guest(kernel: Kernel, initrd: Option<u64>) -> LoadInput {
        LoadInput { ram: Range::new(0, 0), kernel, initrd_len: initrd, dtb_len: MIB, page: GUEST_PAGE }
    }

    #[test]
    fn a_guest_whose_ram_starts_at_the_base_goes_where_qemu_puts_it() {
        let k = Kernel::image(100_000, 0, 3 * MIB);
        let ranges = [Range::new(BASE, BASE + GIB)];
        let ram = GuestRam { base: BASE, ranges: &ranges, reserved: &[] };
        let (w, p) = place_guest(&guest(k, Some(3_000_000)), &ram).unwrap();
        assert_eq!(w, ranges[0]);
        assert_eq!(Ok(p), virt(GIB, k, Some(3_000_000)));
        // The Pi 4: the first page is the spin table's, the loader still starts at 0.
        let ranges = [Range::new(0x1000, 0x3b40_0000)];
        let ram = GuestRam { base: 0, ranges: &ranges, reserved: &[Range::new(0, 0x1000)] };
        let (w, p) = place_guest(&guest(k, Some(MIB)), &ram).unwrap();
        assert_eq!((w.start, p.entry), (0, 2 * MIB));
    }

    #[test]
    fn a_first_range_too_small_moves_the_guest_to_a_later_2m_aligned_range() {
        // The ZCU102 with a 1 GiB slot pool: the hypervisor stayed at 0x200000 and the guest's
        // first range is [0, 0x200000); the next starts off a 2 MiB boundary.
        let k = Kernel::image(5 * MIB, 0, 8 * MIB);
        let ranges = [Range::new(0, 2 * MIB), Range::new(0x0220_0000 + 0x1000, GIB), Range::new(GIB + MIB, 2 * GIB)];
        let ram = GuestRam { base: 0, ranges: &ranges, reserved: &[] };
        let (w, p) = place_guest(&guest(k, Some(20 * MIB)), &ram).unwrap();
        assert_eq!(w, Range::new(0x0240_0000, GIB));
        assert_eq!(p.entry, 0x0240_0000 + 2 * MIB);
        assert_eq!(p.entry % WINDOW_ALIGN, 0);
        for (what, at) in p.pieces(&k) {
            assert!(ranges[1].contains(at.start, at.len()), "{what} at {at}");
        }
        assert_eq!(windows(&ram), [Range::new(0, 2 * MIB), w, Range::new(GIB + 2 * MIB, 2 * GIB)]);
    }

    #[test]
    fn reserved_memory_where_a_piece_would_go_moves_the_guest_on() {
        let k = Kernel::raw(MIB);
        let ranges = [Range::new(BASE, BASE + 256 * MIB), Range::new(2 * GIB, 3 * GIB)];
        // Firmware keeps the 4 MiB where QEMU would put the initrd in the first range.
        let reserved = [Range::new(BASE + 128 * MIB, BASE + 132 * MIB)];
        let ram = GuestRam { base: BASE, ranges: &ranges, reserved: &reserved };
        let (w, p) = place_guest(&guest(k, Some(MIB)), &ram).unwrap();
        assert_eq!(w, ranges[1]);
        assert!(p
            .pieces(&k)
            .iter()
            .all(|(_, at)| !at.overlaps(&reserved[0]) && ranges[1].contains(at.start, at.len())));
    }

    #[test]
    fn nothing_fitting_is_an_error_naming_every_range_tried() {
        let k = Kernel::image(MIB, 0, 64 * MIB);
        let ranges = [Range::new(0, 2 * MIB), Range::new(4 * MIB, 20 * MIB), Range::new(33 * MIB, 40 * MIB)];
        let ram = GuestRam { base: 0, ranges: &ranges, reserved: &[] };
        let e = place_guest(&guest(k, None), &ram).unwrap_err();
        let GuestPlaceError::Nowhere(tried) = &e else { panic!("{e:?}") };
        let at: Vec<Range> = tried.iter().map(|(w, _)| *w).collect();
        assert_eq!(at, [Range::new(0, 2 * MIB), Range::new(4 * MIB, 20 * MIB), Range::new(34 * MIB, 40 * MIB)]);
        assert!(tried.iter().all(|(_, why)| matches!(why, WindowError::Place(LoadError::KernelTooLarge { .. }))));
        let msg = e.to_string();
        assert!(msg.starts_with("no range of the guest's RAM holds the guest"), "{msg}");
        assert!(msg.contains("from [0x400000, 0x1400000): the kernel would go at"), "{msg}");
        // A window whose pieces land on a hole between ranges says so.
        let ranges = [Range::new(0, 100 * MIB), Range::new(101 * MIB, 300 * MIB)];
        let ram = GuestRam { base: 0, ranges: &ranges, reserved: &[] };
        let big = Kernel::image(MIB, 0, 99 * MIB);
        match place_guest(&guest(big, None), &ram) {
            Ok((w, p)) => assert!(w == Range::new(102 * MIB, 300 * MIB) && p.entry == 104 * MIB, "{w} {p:?}"),
            Err(e) => panic!("{e}"),
        }
        assert_eq!(
            place_guest(&guest(big, None), &GuestRam { base: 0, ranges: &[], reserved: &[] }),
            Err(GuestPlaceError::NoRam)
        );
    }

    /// Runs `order` on a model memory and checks every destination got its source's bytes.
    fn check_order(copies: &[Copy], scratch: &[Range], size: usize) {
        let mut mem: Vec<u8> = (0..size).map(|i| (i * 7 + i / 251) as u8).collect();
        let want: Vec<Vec<u8>> =
            copies.iter().map(|c| mem[c.from as usize..(c.from + c.len) as usize].to_vec()).collect();
        let order = order_copies(copies, scratch).unwrap();
        for c in &order {
            mem.copy_within(c.from as usize..(c.from + c.len) as usize, c.to as usize);
        }
        for (c, w) in copies.iter().zip(&want) {
            assert_eq!(&mem[c.to as usize..(c.to + c.len) as usize], &w[..], "{copies:?} -> {order:?}");
        }
    }

    #[test]
    fn copies_that_block_each_other_go_through_scratch() {
        // Swap two halves: each destination is the other's source.
        let swap = [Copy { from: 0, to: 100, len: 100 }, Copy { from: 100, to: 0, len: 100 }];
        check_order(&swap, &[Range::new(0, 1000)], 1000);
        assert_eq!(order_copies(&swap, &[Range::new(0, 200)]), Err(OrderError::NoScratch { len: 100 }));
        // A bundle-like case: the initramfs moves down over where the kernel came from.
        let bundle = [Copy { from: 4096, to: 512, len: 1000 }, Copy { from: 5120, to: 4096, len: 3000 }];
        check_order(&bundle, &[], 9000);
        let dup = [Copy { from: 0, to: 10, len: 10 }, Copy { from: 50, to: 15, len: 10 }];
        assert_eq!(order_copies(&dup, &[]), Err(OrderError::DestinationsOverlap));
    }

    proptest! {
        #[test]
        fn any_copies_with_disjoint_destinations_end_right(
            parts in proptest::collection::vec((0u64..3000, 0u64..3000, 1u64..400), 1..4),
        ) {
            let copies: Vec<Copy> = parts.iter().map(|&(f, t, l)| Copy { from: f, to: t, len: l }).collect();
            let disjoint = copies.iter().enumerate().all(|(i, a)| copies[..i].iter().all(|b| !a.dst().overlaps(&b.dst())));
            prop_assume!(disjoint);
            check_order(&copies, &[Range::new(0, 8000)], 8000);
        }
    }
}
