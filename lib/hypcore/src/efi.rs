//! What the hypervisor's EFI entry decides without hardware (`hypervisor/src/efi.rs` does the
//! firmware calls): which memory of the UEFI memory map is RAM once boot services have ended,
//! and what the load options say.
//!
//! **Memory.** After `ExitBootServices` the RAM the hypervisor and its guest may use is what the
//! map calls loader code and data, boot-services code and data (the firmware's until then) and
//! conventional memory, where the firmware says it can be mapped write-back
//! (`EFI_MEMORY_WB`), as Linux's EFI stub takes it. Everything else (runtime-services code and
//! data, reserved, unusable, ACPI, MMIO, persistent memory, memory the firmware has not
//! accepted) is not RAM: the device tree the entry passes on lists the RAM ranges only
//! ([`ram_from_map`]), with holes where those regions lie, so neither the hypervisor's frame
//! pool nor the guest ever reaches them, and the memory nodes the firmware's device tree had
//! (all of RAM, runtime regions included) are replaced.
//!
//! **Load options.** The command line comes from the loaded image's load options when they are
//! UCS-2 text ([`command_line`]); a boot manager's binary data there (EDK2's auto-created boot
//! options carry a GUID) is not a command line. `initrd=` words name a file for Linux's EFI
//! stub: the hypervisor takes its initrd from the initrd media device path (LoadFile2), which
//! EDK2 offers for the same file, and drops them.

use crate::range::Range;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

/// A UEFI page.
pub const EFI_PAGE: u64 = 4096;
/// `EFI_MEMORY_WB`: the region can be mapped write-back cacheable.
pub const MEMORY_WB: u64 = 0x8;

/// The UEFI memory types (UEFI 2.10, 7.2 `EFI_MEMORY_TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MemoryType {
    /// EfiReservedMemoryType.
    Reserved = 0,
    /// EfiLoaderCode.
    LoaderCode = 1,
    /// EfiLoaderData.
    LoaderData = 2,
    /// EfiBootServicesCode.
    BootServicesCode = 3,
    /// EfiBootServicesData.
    BootServicesData = 4,
    /// EfiRuntimeServicesCode.
    RuntimeServicesCode = 5,
    /// EfiRuntimeServicesData.
    RuntimeServicesData = 6,
    /// EfiConventionalMemory.
    Conventional = 7,
    /// EfiUnusableMemory.
    Unusable = 8,
    /// EfiACPIReclaimMemory.
    AcpiReclaim = 9,
    /// EfiACPIMemoryNVS.
    AcpiNvs = 10,
    /// EfiMemoryMappedIO.
    Mmio = 11,
    /// EfiMemoryMappedIOPortSpace.
    MmioPortSpace = 12,
    /// EfiPalCode.
    PalCode = 13,
    /// EfiPersistentMemory.
    Persistent = 14,
    /// EfiUnacceptedMemoryType.
    Unaccepted = 15,
}

impl MemoryType {
    /// The type of a descriptor's `Type` field; `None` for OEM/OS-defined or unknown types.
    pub fn from_raw(t: u32) -> Option<MemoryType> {
        use MemoryType::*;
        const ALL: [MemoryType; 16] = [
            Reserved,
            LoaderCode,
            LoaderData,
            BootServicesCode,
            BootServicesData,
            RuntimeServicesCode,
            RuntimeServicesData,
            Conventional,
            Unusable,
            AcpiReclaim,
            AcpiNvs,
            Mmio,
            MmioPortSpace,
            PalCode,
            Persistent,
            Unaccepted,
        ];
        ALL.get(t as usize).copied()
    }

    /// Whether memory of this type is free RAM once boot services have ended.
    pub fn is_ram_after_exit(self) -> bool {
        use MemoryType::*;
        matches!(self, LoaderCode | LoaderData | BootServicesCode | BootServicesData | Conventional)
    }
}

/// One descriptor of the memory map, as read from the firmware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// `Type` (raw: a firmware may use OEM values).
    pub ty: u32,
    /// `PhysicalStart`.
    pub start: u64,
    /// `NumberOfPages` (4 KiB each).
    pub pages: u64,
    /// `Attribute`.
    pub attr: u64,
}

impl Descriptor {
    /// Its physical range; `None` when it overflows 64 bits.
    pub fn range(&self) -> Option<Range> {
        let len = self.pages.checked_mul(EFI_PAGE)?;
        Range::sized(self.start, len)
    }
}

/// Why a memory map cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapError {
    /// A descriptor whose start is not page aligned or whose end overflows.
    BadDescriptor {
        /// The descriptor.
        desc: Descriptor,
    },
    /// Two descriptors cover the same memory.
    Overlap {
        /// One of them.
        a: Range,
        /// The other.
        b: Range,
    },
    /// No RAM at all.
    NoRam,
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadDescriptor { desc } => write!(
                f,
                "UEFI memory map: descriptor type {} at {:#x}, {} pages: not page aligned or past 64 bits",
                desc.ty, desc.start, desc.pages
            ),
            Self::Overlap { a, b } => write!(f, "UEFI memory map: {a} and {b} overlap"),
            Self::NoRam => write!(f, "UEFI memory map: no write-back RAM free after boot services"),
        }
    }
}

/// The RAM of a memory map once boot services have ended: the ranges of RAM types
/// ([`MemoryType::is_ram_after_exit`]) mappable write-back, sorted, adjacent ones merged. The
/// map is checked whole first: every descriptor page aligned and inside 64 bits, no two
/// overlapping (a firmware bug the hypervisor cannot resolve: which type would be right?).
pub fn ram_from_map(map: &[Descriptor]) -> Result<Vec<Range>, MapError> {
    let mut all: Vec<(Range, &Descriptor)> = Vec::with_capacity(map.len());
    for d in map {
        match d.range() {
            Some(r) if d.start.is_multiple_of(EFI_PAGE) => {
                if !r.is_empty() {
                    all.push((r, d))
                }
            }
            _ => return Err(MapError::BadDescriptor { desc: *d }),
        }
    }
    all.sort_by_key(|(r, _)| r.start);
    for w in all.windows(2) {
        if w[0].0.overlaps(&w[1].0) {
            return Err(MapError::Overlap { a: w[0].0, b: w[1].0 });
        }
    }
    let mut ram: Vec<Range> = Vec::new();
    for (r, d) in all {
        let usable = MemoryType::from_raw(d.ty).is_some_and(MemoryType::is_ram_after_exit) && d.attr & MEMORY_WB != 0;
        if !usable {
            continue;
        }
        match ram.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => ram.push(r),
        }
    }
    if ram.is_empty() {
        return Err(MapError::NoRam);
    }
    Ok(ram)
}

/// What the load options hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// The command line: the words, `initrd=` ones removed, joined by one space.
    pub cmdline: String,
    /// The `initrd=` words removed (Linux's stub reads those files; the hypervisor takes the
    /// initrd from the initrd media device path instead).
    pub dropped: Vec<String>,
}

/// Why the load options are not taken as a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionsError {
    /// An odd number of bytes: not UCS-2.
    OddLength {
        /// Bytes.
        len: usize,
    },
    /// A character other than printable ASCII, tab or a line end before the terminating NUL:
    /// binary data (a boot manager's), not a command line.
    NotText {
        /// Its index (in characters).
        at: usize,
        /// Its value.
        ch: u16,
    },
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OddLength { len } => write!(f, "{len} bytes of load options: not UCS-2 text"),
            Self::NotText { at, ch } => {
                write!(f, "load options character {at} is {ch:#06x}: binary data, not a command line")
            }
        }
    }
}

/// The command line in a loaded image's load options (UCS-2, little-endian, up to the first
/// NUL or the end): `Ok(None)` when there are none (no bytes, or only a NUL), an error when
/// they are not text ([`OptionsError`]: the caller then says so and boots without them).
pub fn command_line(options: &[u8]) -> Result<Option<LoadOptions>, OptionsError> {
    if !options.len().is_multiple_of(2) {
        return Err(OptionsError::OddLength { len: options.len() });
    }
    let mut text = String::new();
    for (i, c) in options.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).enumerate() {
        match c {
            0 => break,
            0x20..=0x7e => text.push(char::from(c as u8)),
            0x09 | 0x0a | 0x0d => text.push(' '),
            _ => return Err(OptionsError::NotText { at: i, ch: c }),
        }
    }
    let (dropped, kept): (Vec<&str>, Vec<&str>) = text.split_ascii_whitespace().partition(|w| w.starts_with("initrd="));
    if kept.is_empty() && dropped.is_empty() {
        return Ok(None);
    }
    Ok(Some(LoadOptions { cmdline: kept.join(" "), dropped: dropped.into_iter().map(String::from).collect() }))
}

/// A device path's file path node text (UCS-2, little-endian, NUL-terminated), as UTF-8;
/// characters outside ASCII become `?` (FAT names this project writes are ASCII).
pub fn ucs2_path(data: &[u8]) -> String {
    data.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|&c| c != 0)
        .map(|c| if (0x20..0x7f).contains(&c) { char::from(c as u8) } else { '?' })
        .collect()
}

/// The folder part of an EFI file path, with its trailing `\` (`\EFI\BOOT\BOOTAA64.EFI` ->
/// `\EFI\BOOT\`); `\` (the volume's root) for a bare name or none.
pub fn dir_of(path: &str) -> &str {
    match path.rfind('\\') {
        Some(i) => &path[..=i],
        None => "\\",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    fn d(ty: MemoryType, start: u64, pages: u64) -> Descriptor {
        Descriptor { ty: ty as u32, start, pages, attr: MEMORY_WB | 0x1 | 0x2 | 0x4 }
    }

    /// EDK2 on QEMU `virt` with 1 GiB: loader, boot-services and free memory interleaved with
    /// runtime regions near the top, the flash and the device memory it maps as MMIO.
    #[test]
    fn runtime_and_reserved_regions_become_holes_and_the_rest_merges() {
        use MemoryType::*;
        let g = 0x4000_0000u64;
        let map = [
            Descriptor { ty: Mmio as u32, start: 0x0400_0000, pages: 0x1000, attr: 0x1 | (1 << 63) },
            d(Conventional, g, 0x200),
            d(LoaderData, g + 0x20_0000, 0x100),
            d(Conventional, g + 0x30_0000, 0x3_0000),
            d(BootServicesData, g + 0x3030_0000, 0x10),
            d(RuntimeServicesData, g + 0x3031_0000, 0x20),
            d(BootServicesCode, g + 0x3033_0000, 0x10),
            d(RuntimeServicesCode, g + 0x3034_0000, 0x10),
            d(AcpiReclaim, g + 0x3035_0000, 0x1),
            d(Reserved, g + 0x3035_1000, 0x1),
            d(LoaderCode, g + 0x3035_2000, 0xfcae),
        ];
        let ram = ram_from_map(&map).unwrap();
        assert_eq!(
            ram,
            vec![
                Range::new(g, g + 0x3031_0000),
                Range::new(g + 0x3033_0000, g + 0x3034_0000),
                Range::new(g + 0x3035_2000, g + 0x4000_0000),
            ]
        );
        // The order of the descriptors does not matter.
        let mut rev = map;
        rev.reverse();
        assert_eq!(ram_from_map(&rev).unwrap(), ram);
    }

    #[test]
    fn memory_without_write_back_or_of_unknown_type_is_no_ram() {
        let g = 0x8000_0000u64;
        let mut uncached = d(MemoryType::Conventional, g + 0x10_0000, 0x100);
        uncached.attr = 0x1;
        let oem = Descriptor { ty: 0x8000_0001, ..d(MemoryType::Conventional, g + 0x20_0000, 0x100) };
        let persistent = d(MemoryType::Persistent, g + 0x30_0000, 0x100);
        let unaccepted = d(MemoryType::Unaccepted, g + 0x40_0000, 0x100);
        let map = [d(MemoryType::Conventional, g, 0x100), uncached, oem, persistent, unaccepted];
        assert_eq!(ram_from_map(&map).unwrap(), vec![Range::new(g, g + 0x10_0000)]);
        assert_eq!(ram_from_map(&map[1..]), Err(MapError::NoRam));
        assert_eq!(ram_from_map(&[]), Err(MapError::NoRam));
    }

    #[test]
    fn a_broken_map_is_refused() {
        let a = d(MemoryType::Conventional, 0x4000_0000, 0x100);
        let over = d(MemoryType::RuntimeServicesData, 0x400f_f000, 2);
        assert_eq!(
            ram_from_map(&[a, over]),
            Err(MapError::Overlap { a: Range::new(0x4000_0000, 0x4010_0000), b: Range::new(0x400f_f000, 0x4010_1000) })
        );
        let unaligned = d(MemoryType::Conventional, 0x4000_0800, 1);
        assert_eq!(ram_from_map(&[unaligned]), Err(MapError::BadDescriptor { desc: unaligned }));
        let huge = d(MemoryType::Conventional, 0xffff_ffff_ffff_0000, 0x100);
        assert_eq!(ram_from_map(&[huge]), Err(MapError::BadDescriptor { desc: huge }));
        // An empty descriptor is no RAM and overlaps nothing.
        assert_eq!(ram_from_map(&[a, d(MemoryType::Conventional, 0x4008_0000, 0)]).unwrap().len(), 1);
    }

    fn ucs2(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(|c| c.to_le_bytes()).collect()
    }

    #[test]
    fn load_options_are_the_command_line_without_initrd_words() {
        // EDK2's QEMU loader: -append then " initrd=initrd" when -initrd is given, NUL-terminated.
        let o = command_line(&ucs2("hyp.guest-mem=1024M test=smccc initrd=initrd\0")).unwrap().unwrap();
        assert_eq!(o.cmdline, "hyp.guest-mem=1024M test=smccc");
        assert_eq!(o.dropped, ["initrd=initrd"]);
        let o = command_line(&ucs2("a\tb\r\nc\0garbage\u{1}")).unwrap().unwrap();
        assert_eq!(o.cmdline, "a b c", "whitespace of any kind separates words; the NUL ends the text");
        assert_eq!(command_line(&[]), Ok(None));
        assert_eq!(command_line(&ucs2("\0")), Ok(None));
        assert_eq!(command_line(&ucs2("   ")), Ok(None));
        assert_eq!(command_line(&ucs2("initrd=x")).unwrap().unwrap().cmdline, "");
    }

    #[test]
    fn the_image_folder_comes_from_its_file_path() {
        let p = ucs2_path(&ucs2("\\EFI\\BOOT\\BOOTAA64.EFI\0junk"));
        assert_eq!(p, "\\EFI\\BOOT\\BOOTAA64.EFI");
        assert_eq!(dir_of(&p), "\\EFI\\BOOT\\");
        assert_eq!(dir_of("hyp.efi"), "\\");
        assert_eq!(dir_of(""), "\\");
        assert_eq!(dir_of("\\x"), "\\");
        assert_eq!(ucs2_path(&ucs2("a\u{e9}b")), "a?b");
        assert_eq!(ucs2_path(&[0x41, 0, 0x42]), "A", "an odd last byte is no character");
    }

    #[test]
    fn binary_load_options_are_not_a_command_line() {
        // EDK2's auto-created boot options carry a GUID as their optional data.
        let guid = [0x7f, 0x1b, 0x84, 0x1c, 0x60, 0x1f, 0x4d, 0x4c, 0x8d, 0x27, 0xce, 0x20, 0xbf, 0xc0, 0xe8, 0x02];
        assert!(matches!(command_line(&guid), Err(OptionsError::NotText { at: 0, .. })));
        assert_eq!(command_line(&[0x41, 0, 0x42]), Err(OptionsError::OddLength { len: 3 }));
        assert_eq!(command_line(&ucs2("ab\u{e9}")), Err(OptionsError::NotText { at: 2, ch: 0xe9 }));
    }
}
