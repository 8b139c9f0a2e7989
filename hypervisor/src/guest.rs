//! The one guest: its memory (all RAM the hypervisor does not own, or exactly `hyp.guest-mem`),
//! its kernel, initramfs and command line (from the boot loader's initrd: a guest bundle,
//! `abi::bundle`, or a lone kernel), its DTB, and its stage-2 tables.
//!
//! The guest goes exactly where QEMU's loader would put it on a machine with the guest's RAM
//! (`hypcore::load`): an arm64 Image at the RAM base + `text_offset` (+ 2 MiB below 4 KiB), a
//! raw binary at the RAM base + 0x80000, the initramfs at min(RAM / 2, 128 MiB) or after the
//! kernel, the DTB 2 MiB aligned after it, with as much room as QEMU's own DTB has. It starts
//! at EL1 with x0 = the DTB. What the boot loader and the hypervisor left in the guest's RAM
//! (the bundle, the boot loader's DTB, the hypervisor's first copy of itself) is zeroed, as
//! QEMU's RAM is at power-on.

use crate::mem::Range;
use alloc::string::String;
use alloc::vec::Vec;
use hypcore::load::{self, Copy, Kernel, LoadInput};
use rt::image::ImageHeader;
use spin::Once;

static GUEST_RAM: Once<Vec<Range>> = Once::new();

/// Whether `[addr, addr + len)` lies inside the guest's RAM.
pub fn is_guest_ram(addr: u64, len: u64) -> bool {
    GUEST_RAM.get().is_some_and(|ram| ram.iter().any(|r| r.contains(addr, len)))
}

/// The guest's RAM ranges (set once at boot).
pub fn ram() -> &'static [Range] {
    GUEST_RAM.get().map(|v| v.as_slice()).unwrap_or(&[])
}

pub fn set_ram(ranges: Vec<Range>) {
    GUEST_RAM.call_once(|| ranges);
}

/// Where the guest kernel came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelFile {
    /// The initrd itself.
    Initrd,
    /// The kernel of a guest bundle (the initrd).
    BundleKernel,
    /// A boot loader's `/chosen/module@…` kernel.
    Module,
}

/// Why the guest could not be set up.
#[derive(Debug)]
pub enum LoadError {
    NoInitrd,
    InitrdOutsideRam {
        start: u64,
        end: u64,
    },
    /// The guest kernel file has an Image header that does not hold.
    BadImage {
        what: KernelFile,
        e: rt::image::ImageError,
    },
    BadBundle(abi::bundle::BundleError),
    /// QEMU's rule gives no place in free guest RAM, in any of its ranges
    /// (`hypcore::load::place_guest`).
    Placement(load::GuestPlaceError),
    Copies(load::OrderError),
    DtbTooLarge {
        size: u64,
        room: u64,
    },
    /// A `/chosen/module@…` file outside the guest's RAM.
    ModuleOutsideRam {
        path: String,
        start: u64,
        end: u64,
    },
    /// A guest bundle given as the kernel module.
    BundleAsModule {
        path: String,
    },
    /// A `multiboot,device-tree` module: the guest's device tree is the board's.
    GuestDeviceTree {
        path: String,
    },
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoInitrd => write!(
                f,
                "no initrd in /chosen: give the guest kernel Image as the initrd (QEMU -initrd, Pi 5 `initramfs … followkernel`)"
            ),
            Self::InitrdOutsideRam { start, end } => write!(f, "initrd [{start:#x}, {end:#x}) is not in RAM"),
            Self::BadImage { what: KernelFile::Initrd, e } => {
                write!(f, "the initrd is not a bootable arm64 Image (nor a guest bundle): {e}")
            }
            Self::BadImage { what: KernelFile::BundleKernel, e } => {
                write!(f, "the guest bundle's kernel is not a bootable arm64 Image: {e}")
            }
            Self::BadImage { what: KernelFile::Module, e } => {
                write!(f, "the boot loader's kernel module is not a bootable arm64 Image: {e}")
            }
            Self::BadBundle(e) => write!(f, "the initrd is a guest bundle but a broken one: {e}"),
            Self::Placement(e) => write!(f, "placing the guest as QEMU would: {e}"),
            Self::Copies(e) => write!(f, "{e}"),
            Self::ModuleOutsideRam { path, start, end } => {
                write!(f, "{path}: the file at [{start:#x}, {end:#x}) is not in the guest's RAM")
            }
            Self::BundleAsModule { path } => write!(
                f,
                "{path} is a guest bundle: give it as the initrd, or its kernel and initramfs as multiboot,kernel and \
                 multiboot,ramdisk modules"
            ),
            Self::GuestDeviceTree { path } => write!(
                f,
                "{path}: a multiboot,device-tree module is not taken: the guest's device tree is the board's, changed \
                 as docs/ARCHITECTURE.md lists"
            ),
            Self::DtbTooLarge { size, room } => {
                write!(f, "the guest's device tree ({size:#x} bytes) is larger than its room ({room:#x} bytes)")
            }
        }
    }
}

/// How the guest kernel is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// An arm64 Image (Linux boot protocol).
    Image,
    /// A raw binary (or an Image without `image_size`), placed like QEMU places one.
    Raw,
}

/// Where the guest kernel was put.
#[derive(Debug, Clone, Copy)]
pub struct LoadedKernel {
    pub entry: u64,
    /// What it may use from `entry`: `image_size` (BSS included) or the file's length.
    pub image_size: u64,
    /// The file's bytes from `entry`: what was loaded (the rest of `image_size`, the BSS, the
    /// kernel clears itself, as with QEMU's loader or a firmware's).
    pub file_len: u64,
    pub kind: KernelKind,
}

impl LoadedKernel {
    /// The file where it was loaded.
    pub fn file(&self) -> Range {
        Range::new(self.entry, self.entry + self.file_len)
    }
}

/// What the boot loader's initrd holds, read in place.
#[derive(Debug, Clone)]
pub struct Contents {
    /// Where the kernel file is now, and what it is.
    pub kernel_at: u64,
    pub kernel: Kernel,
    /// Where the initramfs is now, if there is one.
    pub initramfs: Option<Range>,
    /// The bundle's command line ("" without one).
    pub cmdline: String,
    /// Whether the initrd was a guest bundle (else a lone kernel).
    pub bundle: bool,
}

/// What the guest got.
#[derive(Debug, Clone)]
pub struct GuestBoot {
    pub kernel: LoadedKernel,
    /// The initramfs, where QEMU would have put it.
    pub initrd: Option<Range>,
    /// The DTB's room: where it goes, as long as the boot loader's DTB (QEMU's: 1 MiB).
    pub dtb: Range,
    /// The bundle's command line ("" without one).
    pub cmdline: String,
    /// Whether the initrd was a guest bundle (else a lone kernel).
    pub bundle: bool,
}

/// Reads the boot loader's initrd in place: a guest bundle (kernel, initramfs, command line) or
/// a lone kernel; checks a kernel with the arm64 magic as an Image (this project's stamp
/// included), as QEMU would load it.
pub fn inspect(initrd: Range) -> Result<Contents, LoadError> {
    let ram = ram();
    if !ram.iter().any(|r| r.contains(initrd.start, initrd.len())) {
        return Err(LoadError::InitrdOutsideRam { start: initrd.start, end: initrd.end });
    }
    // SAFETY: the initrd lies in guest RAM, which the hypervisor maps and nothing else uses yet.
    let file = unsafe { core::slice::from_raw_parts(initrd.start as *const u8, initrd.len() as usize) };
    let (kernel_at, kbytes, initramfs, cmdline, bundle) = if abi::bundle::is_bundle(file) {
        let b = abi::bundle::parse(file).map_err(LoadError::BadBundle)?;
        let initramfs = b.initrd.map(|p| Range::new(initrd.start + p.offset, initrd.start + p.offset + p.size));
        (initrd.start + b.kernel.offset, b.kernel.bytes(file), initramfs, String::from(b.cmdline_str(file)), true)
    } else {
        (initrd.start, file, None, String::new(), false)
    };
    let kernel = Kernel::classify(kbytes);
    if kernel.is_image() {
        // The checks QEMU does not make (sizes, page size, endianness, this project's stamp).
        let what = if bundle { KernelFile::BundleKernel } else { KernelFile::Initrd };
        ImageHeader::parse_with(kbytes, rt::crc::engine()).map_err(|e| LoadError::BadImage { what, e })?;
    }
    Ok(Contents { kernel_at, kernel, initramfs, cmdline, bundle })
}

/// The guest as the boot loader handed it over: the `/chosen/module@…` files when the device
/// tree has module nodes (Xen's convention, `board::modules`: kernel, initramfs, the kernel
/// node's `bootargs`), else the initrd ([`inspect`]). Also returns the memory they occupy
/// (zeroed once the guest is in place).
pub fn from_boot_loader(board: &board::Board) -> Result<(Contents, Vec<Range>), LoadError> {
    let Some(m) = &board.modules else {
        let i = board.initrd.ok_or(LoadError::NoInitrd)?;
        let r = Range::new(i.base, i.end());
        return Ok((inspect(r)?, alloc::vec![r]));
    };
    if let Some(dt) = &m.device_tree {
        return Err(LoadError::GuestDeviceTree { path: dt.path.clone() });
    }
    let mut files = Vec::new();
    for md in [Some(&m.kernel), m.ramdisk.as_ref()].into_iter().flatten() {
        let r = Range::new(md.region.base, md.region.end());
        if !ram().iter().any(|g| g.contains(r.start, r.len())) {
            return Err(LoadError::ModuleOutsideRam { path: md.path.clone(), start: r.start, end: r.end });
        }
        files.push(r);
    }
    let k = files[0];
    // SAFETY: the kernel module lies in guest RAM (checked above), which the hypervisor maps and
    // nothing else uses yet.
    let kbytes = unsafe { core::slice::from_raw_parts(k.start as *const u8, k.len() as usize) };
    if abi::bundle::is_bundle(kbytes) {
        return Err(LoadError::BundleAsModule { path: m.kernel.path.clone() });
    }
    let kernel = Kernel::classify(kbytes);
    if kernel.is_image() {
        ImageHeader::parse_with(kbytes, rt::crc::engine())
            .map_err(|e| LoadError::BadImage { what: KernelFile::Module, e })?;
    }
    let contents = Contents {
        kernel_at: k.start,
        kernel,
        initramfs: files.get(1).copied(),
        cmdline: m.bootargs.clone().unwrap_or_default(),
        bundle: false,
    };
    Ok((contents, files))
}

/// Where QEMU's rule puts the guest's parts (`hypcore::load::place_guest`) with a DTB of
/// `dtb_len` bytes; nothing is copied.
fn place(c: &Contents, base: u64, reserved: &[Range], dtb_len: u64) -> Result<load::Placement, LoadError> {
    let what = LoadInput {
        ram: Range::new(0, 0),
        kernel: c.kernel,
        initrd_len: c.initramfs.map(|r| r.len()),
        dtb_len,
        page: load::VIRT_PAGE,
    };
    let (_, p) =
        load::place_guest(&what, &load::GuestRam { base, ranges: ram(), reserved }).map_err(LoadError::Placement)?;
    Ok(p)
}

/// Where the initramfs goes with a DTB of `dtb_len` bytes ([`load`] puts it there).
pub fn initrd_at(c: &Contents, base: u64, reserved: &[Range], dtb_len: u64) -> Result<Option<Range>, LoadError> {
    Ok(place(c, base, reserved, dtb_len)?.initrd)
}

/// Puts the kernel and the initramfs where QEMU would (`hypcore::load::place_guest`: QEMU's
/// loader RAM from the machine's RAM `base` to the end of the guest's first range, else a
/// later range of guest RAM), clear of `reserved` memory, and returns where the DTB goes
/// (`dtb_len` bytes).
pub fn load(c: &Contents, base: u64, reserved: &[Range], dtb_len: u64) -> Result<GuestBoot, LoadError> {
    let p = place(c, base, reserved, dtb_len)?;
    let kernel_room = p.kernel_room(&c.kernel);
    let mut copies = alloc::vec![Copy { from: c.kernel_at, to: p.entry, len: c.kernel.file_len }];
    if let (Some(src), Some(dst)) = (c.initramfs, p.initrd) {
        copies.push(Copy { from: src.start, to: dst.start, len: src.len() });
    }
    let mut scratch: Vec<Range> = ram().to_vec();
    for r in reserved {
        scratch = hypcore::range::subtract(&scratch, *r);
    }
    for cp in load::order_copies(&copies, &scratch).map_err(LoadError::Copies)? {
        // SAFETY: every source and destination is guest RAM (checked above, or scratch taken
        // from guest RAM), which only the boot CPU touches now; order_copies ordered the copies
        // so none overwrites a source still to be read; move_bytes handles overlap.
        unsafe { crate::mem::move_bytes(cp.to, cp.from, cp.len) };
    }
    // The BSS is not written: what lies there is what QEMU's loader leaves (zeros, or what the
    // boot loader and the hypervisor wrote, which `scrub` zeroes). The guest starts with its
    // MMU off: what was written goes to the point of coherency.
    crate::el2::clean_dcache_range(p.entry, c.kernel.file_len);
    if let Some(i) = p.initrd {
        crate::el2::clean_dcache_range(i.start, i.len());
    }
    let kind = if c.kernel.is_image() { KernelKind::Image } else { KernelKind::Raw };
    Ok(GuestBoot {
        kernel: LoadedKernel { entry: p.entry, image_size: kernel_room.len(), file_len: c.kernel.file_len, kind },
        initrd: p.initrd,
        dtb: p.dtb,
        cmdline: c.cmdline.clone(),
        bundle: c.bundle,
    })
}

/// Writes the guest DTB at the start of its room, and the room's length as its `totalsize`
/// (the rest zeroed: free space, as QEMU's own blob has).
pub fn write_dtb(dtb: &[u8], room: Range) -> Result<(), LoadError> {
    if dtb.len() as u64 > room.len() || room.len() > u64::from(u32::MAX) || dtb.len() < 8 {
        return Err(LoadError::DtbTooLarge { size: dtb.len() as u64, room: room.len() });
    }
    // SAFETY: `room` is guest RAM clear of the kernel and the initramfs (load checked it).
    unsafe {
        crate::mem::copy_fast(room.start, dtb.as_ptr() as u64, dtb.len() as u64);
        crate::mem::zero(room.start + dtb.len() as u64, room.len() - dtb.len() as u64);
        // `totalsize`, big-endian, at offset 4.
        core::ptr::write_volatile((room.start + 4) as *mut [u8; 4], (room.len() as u32).to_be_bytes());
    }
    crate::el2::clean_dcache_range(room.start, room.len());
    Ok(())
}

/// Zeroes what the boot loader and the hypervisor left in the guest's RAM (`dirty`), except
/// what the guest was given (`keep`): the guest finds zeros there, as in QEMU's RAM at reset.
/// Returns the bytes zeroed.
pub fn scrub(dirty: &[Range], keep: &[Range]) -> u64 {
    let mut left: Vec<Range> = Vec::new();
    for d in dirty {
        for g in ram() {
            let lo = d.start.max(g.start);
            let hi = d.end.min(g.end);
            if lo < hi {
                left.push(Range::new(lo, hi));
            }
        }
    }
    for k in keep {
        left = hypcore::range::subtract(&left, *k);
    }
    let mut n = 0;
    for r in &left {
        // SAFETY: guest RAM (clipped above) that holds nothing the guest was given.
        unsafe { crate::mem::zero(r.start, r.len()) };
        crate::el2::clean_dcache_range(r.start, r.len());
        n += r.len();
    }
    n
}
