//! The one guest: its memory (all RAM the hypervisor does not own), its kernel (an arm64 Image
//! from the initrd, loaded with the Linux boot protocol), its DTB, and its stage-2 tables.

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
    NoRoom { what: &'static str, size: u64 },
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoInitrd => write!(
                f,
                "no initrd in /chosen: give the guest kernel Image as the initrd (QEMU -initrd, Pi 5 `initramfs … followkernel`)"
            ),
            Self::InitrdOutsideRam { start, end } => write!(f, "initrd [{start:#x}, {end:#x}) is not in RAM"),
            Self::BadImage(e) => write!(f, "the initrd is not a bootable arm64 Image: {e}"),
            Self::NoRoom { what, size } => write!(f, "no room in guest RAM for the {what} ({size:#x} bytes)"),
        }
    }
}

/// Where the guest kernel was put.
#[derive(Debug, Clone, Copy)]
pub struct LoadedKernel {
    pub entry: u64,
    pub image_size: u64,
}

impl LoadedKernel {
    pub fn range(&self) -> Range {
        Range::new(self.entry, self.entry + self.image_size)
    }
}

/// Copies the Image held in `initrd` into guest RAM (Linux boot protocol: a 2 MiB aligned base
/// plus text_offset), zeroes its BSS, and cleans it to the point of coherency.
pub fn load_kernel(initrd: Range, reserved: &[Range]) -> Result<LoadedKernel, LoadError> {
    let ram = ram();
    if !ram.iter().any(|r| r.contains(initrd.start, initrd.len())) {
        return Err(LoadError::InitrdOutsideRam { start: initrd.start, end: initrd.end });
    }
    // SAFETY: the initrd lies in guest RAM, which the hypervisor maps and nothing else uses yet.
    let file = unsafe { core::slice::from_raw_parts(initrd.start as *const u8, initrd.len() as usize) };
    let h = ImageHeader::parse(file).map_err(LoadError::BadImage)?;
    let need = h.footprint();
    let mut avoid = alloc::vec![initrd];
    avoid.extend_from_slice(reserved);
    let base = place(ram, need, BLOCK_2M, 0, &avoid).ok_or(LoadError::NoRoom { what: "kernel", size: need })?;
    let entry = base + h.text_offset;
    // SAFETY: [entry, entry + image_size) is guest RAM not overlapping the initrd (place() avoided
    // it), so the copy cannot clobber its own source; nothing else uses that memory yet.
    unsafe {
        core::ptr::copy_nonoverlapping(initrd.start as *const u8, entry as *mut u8, file.len());
        core::ptr::write_bytes((entry + file.len() as u64) as *mut u8, 0, (h.image_size - file.len() as u64) as usize);
    }
    crate::el2::clean_dcache_range(entry, h.image_size);
    Ok(LoadedKernel { entry, image_size: h.image_size })
}

/// Writes the guest DTB into guest RAM (8-byte aligned, not crossing a 2 MiB boundary, as the
/// boot protocol asks), away from the kernel and the initrd. Returns its address.
pub fn place_dtb(dtb: &[u8], avoid: &[Range]) -> Result<u64, LoadError> {
    let size = align_up(dtb.len() as u64, PAGE).unwrap_or(u64::MAX);
    let at = place(ram(), size, PAGE, BLOCK_2M, avoid).ok_or(LoadError::NoRoom { what: "device tree", size })?;
    // SAFETY: [at, at + len) is guest RAM that place() kept clear of the kernel and the initrd.
    unsafe { core::ptr::copy_nonoverlapping(dtb.as_ptr(), at as *mut u8, dtb.len()) };
    crate::el2::clean_dcache_range(at, dtb.len() as u64);
    Ok(at)
}
