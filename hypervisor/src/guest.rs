//! The one guest: its memory (all RAM the hypervisor does not own), its kernel, initramfs and
//! command line (from the boot loader's initrd: a guest bundle, `abi::bundle`, or a lone kernel),
//! its DTB, and its stage-2 tables.
//!
//! The kernel is an arm64 Image, loaded with the Linux boot protocol (a 2 MiB aligned base plus
//! `text_offset`), or a raw binary without the Image header, loaded as QEMU loads one: at the
//! guest's RAM base + 0x80000. Either way it starts at EL1 with x0 = the guest's DTB.

use crate::mem::{align_up, Range, BLOCK_2M, PAGE};
use alloc::vec::Vec;
use hypcore::range::place;
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

/// Why the guest could not be set up.
#[derive(Debug)]
pub enum LoadError {
    NoInitrd,
    InitrdOutsideRam { start: u64, end: u64 },
    BadImage(rt::image::ImageError),
    BadBundle(abi::bundle::BundleError),
    NoRoom { what: &'static str, size: u64 },
    RawInTheWay { at: u64, size: u64 },
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoInitrd => write!(
                f,
                "no initrd in /chosen: give the guest kernel Image as the initrd (QEMU -initrd, Pi 5 `initramfs … followkernel`)"
            ),
            Self::InitrdOutsideRam { start, end } => write!(f, "initrd [{start:#x}, {end:#x}) is not in RAM"),
            Self::BadImage(e) => write!(f, "the initrd is not a bootable arm64 Image (nor a guest bundle): {e}"),
            Self::BadBundle(e) => write!(f, "the initrd is a guest bundle but a broken one: {e}"),
            Self::RawInTheWay { at, size } => write!(
                f,
                "the raw guest binary ({size:#x} bytes) goes at {at:#x} (RAM base + 0x80000, as QEMU loads one), \
                 which is not free guest RAM (the initrd or reserved memory is there)"
            ),
            Self::NoRoom { what, size } => write!(f, "no room in guest RAM for the {what} ({size:#x} bytes)"),
        }
    }
}

/// How the guest kernel is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// An arm64 Image (Linux boot protocol).
    Image,
    /// A raw binary, placed like QEMU places one.
    Raw,
}

/// Where QEMU puts a raw AArch64 `-kernel` binary: RAM base + 512 KiB.
pub const RAW_LOAD_OFFSET: u64 = 0x8_0000;

/// Where the guest kernel was put.
#[derive(Debug, Clone, Copy)]
pub struct LoadedKernel {
    pub entry: u64,
    pub image_size: u64,
    pub kind: KernelKind,
}

impl LoadedKernel {
    pub fn range(&self) -> Range {
        Range::new(self.entry, self.entry + self.image_size)
    }
}

/// What the boot loader's initrd gave the guest.
#[derive(Debug, Clone)]
pub struct GuestBoot {
    pub kernel: LoadedKernel,
    /// The initramfs, left where the boot loader put it (inside the bundle).
    pub initrd: Option<Range>,
    /// The bundle's command line ("" without one).
    pub cmdline: alloc::string::String,
    /// Whether the initrd was a guest bundle (else a lone kernel).
    pub bundle: bool,
}

/// Unpacks the boot loader's initrd: a guest bundle (kernel, initramfs, command line) or a lone
/// kernel. The kernel is copied to its load address, away from the initrd and `reserved`.
pub fn load(initrd: Range, reserved: &[Range]) -> Result<GuestBoot, LoadError> {
    let ram = ram();
    if !ram.iter().any(|r| r.contains(initrd.start, initrd.len())) {
        return Err(LoadError::InitrdOutsideRam { start: initrd.start, end: initrd.end });
    }
    // SAFETY: the initrd lies in guest RAM, which the hypervisor maps and nothing else uses yet.
    let file = unsafe { core::slice::from_raw_parts(initrd.start as *const u8, initrd.len() as usize) };
    let mut avoid = alloc::vec![initrd];
    avoid.extend_from_slice(reserved);
    if !abi::bundle::is_bundle(file) {
        let kernel = load_kernel(file, &avoid)?;
        return Ok(GuestBoot { kernel, initrd: None, cmdline: alloc::string::String::new(), bundle: false });
    }
    let b = abi::bundle::parse(file).map_err(LoadError::BadBundle)?;
    let kernel = load_kernel(b.kernel.bytes(file), &avoid)?;
    let initrd_part = b.initrd.map(|p| Range::new(initrd.start + p.offset, initrd.start + p.offset + p.size));
    Ok(GuestBoot { kernel, initrd: initrd_part, cmdline: b.cmdline_str(file).into(), bundle: true })
}

/// Copies `file` into guest RAM as its kind asks (an Image: 2 MiB aligned base + text_offset,
/// BSS zeroed; a raw binary: RAM base + 0x80000), away from `avoid`, and cleans it to the point
/// of coherency.
fn load_kernel(file: &[u8], avoid: &[Range]) -> Result<LoadedKernel, LoadError> {
    let ram = ram();
    let (entry, image_size, kind) = match ImageHeader::parse(file) {
        Ok(h) => {
            let need = h.footprint();
            let base = place(ram, need, BLOCK_2M, 0, avoid).ok_or(LoadError::NoRoom { what: "kernel", size: need })?;
            (base + h.text_offset, h.image_size, KernelKind::Image)
        }
        Err(rt::image::ImageError::BadMagic { .. }) => {
            let base = ram.first().map_or(0, |r| r.start);
            let at = base + RAW_LOAD_OFFSET;
            let size = file.len() as u64;
            let r = Range::new(at, at + size);
            if !ram.iter().any(|g| g.contains(at, size)) || avoid.iter().any(|a| a.overlaps(&r)) {
                return Err(LoadError::RawInTheWay { at, size });
            }
            (at, size, KernelKind::Raw)
        }
        Err(e) => return Err(LoadError::BadImage(e)),
    };
    // SAFETY: [entry, entry + image_size) is guest RAM clear of `avoid` (the initrd holding the
    // source among them), so the copy cannot clobber its own source; nothing else uses it yet.
    unsafe {
        crate::mem::copy_fast(entry, file.as_ptr() as u64, file.len() as u64);
        core::ptr::write_bytes((entry + file.len() as u64) as *mut u8, 0, (image_size - file.len() as u64) as usize);
    }
    crate::el2::clean_dcache_range(entry, image_size);
    Ok(LoadedKernel { entry, image_size, kind })
}

/// Writes the guest DTB into guest RAM (8-byte aligned, not crossing a 2 MiB boundary, as the
/// boot protocol asks), away from the kernel and the initrd. Returns its address.
pub fn place_dtb(dtb: &[u8], avoid: &[Range]) -> Result<u64, LoadError> {
    let size = align_up(dtb.len() as u64, PAGE).unwrap_or(u64::MAX);
    // Never at address 0: x0 = 0 means "no device tree" to every arm64 kernel (on a board
    // whose RAM starts at 0, e.g. the ZCU102, the first free page can be 0).
    let mut avoid = avoid.to_vec();
    avoid.push(Range::new(0, PAGE));
    let at = place(ram(), size, PAGE, BLOCK_2M, &avoid).ok_or(LoadError::NoRoom { what: "device tree", size })?;
    // SAFETY: [at, at + len) is guest RAM that place() kept clear of the kernel and the initrd.
    unsafe { core::ptr::copy_nonoverlapping(dtb.as_ptr(), at as *mut u8, dtb.len()) };
    crate::el2::clean_dcache_range(at, dtb.len() as u64);
    Ok(at)
}
