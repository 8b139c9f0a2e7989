//! The PE/COFF header that makes an arm64 Image an EFI application too, as Linux's EFI stub
//! does (Linux `arch/arm64/kernel/efi-header.S` for the layout; the PE/COFF specification for
//! the fields): the Image's first instruction reads "MZ" in its low half (`ccmp x18, #0, #0xd,
//! pl`, a no-op), the DOS header's `e_lfanew` at 0x3c (the Image header's `res5`) points at the
//! PE header right after the 64-byte Image header, and every Image field stays as it was, so
//! QEMU's loader, U-Boot's `booti`, the Pi firmware and the chainloader still see an Image.
//!
//! ```text
//! 0x000            Image header (code0 = "MZ" no-op, code1 = branch to the entry, ..., 0x3c = 0x40)
//! 0x040            "PE\0\0", COFF header, PE32+ optional header (6 data directories, all empty)
//! 0x0f8            section table: .text, .data
//! ..0x1000         headers end (SizeOfHeaders); the binary reserves this page (`__pe_header`)
//! 0x1000           .text: code, from the EFI entry point on (RX)
//! text_end         .data: read-only data, data, BSS (RW; the BSS is zero-filled by the loader)
//! ```
//!
//! The image relocates itself (`rt::start`: its `R_AARCH64_RELATIVE` entries), so it needs
//! no base relocations and carries none; `IMAGE_FILE_RELOCS_STRIPPED` stays clear, so a loader
//! may put it anywhere. The xtask writes the header into the page the binary reserved once the
//! ELF is linked ([`write`], which also pads the file to [`FILE_ALIGN`]), before the project's
//! stamp; [`parse`] checks it, for this project's Images and for any other (Linux's).

/// The Image's first instruction: `ccmp x18, #0, #0xd, pl`, whose low half is "MZ" (the DOS
/// signature) and which changes nothing but the flags.
pub const MZ_NOP: u32 = 0xfa40_5a4d;
/// "MZ".
pub const DOS_MAGIC: u16 = 0x5a4d;
/// Offset of `e_lfanew`, the PE header's offset.
pub const LFANEW_OFFSET: usize = 0x3c;
/// Where this project's PE header goes: right after the Image header.
pub const PE_OFFSET: u32 = 0x40;
/// "PE\0\0".
pub const PE_MAGIC: u32 = 0x0000_4550;
/// IMAGE_FILE_MACHINE_ARM64.
pub const MACHINE_ARM64: u16 = 0xaa64;
/// PE32+.
pub const PE32PLUS_MAGIC: u16 = 0x20b;
/// IMAGE_SUBSYSTEM_EFI_APPLICATION.
pub const SUBSYSTEM_EFI_APPLICATION: u16 = 10;
/// Sections start on 4 KiB (EFI pages), as the image's own W^X split does.
pub const SECTION_ALIGN: u32 = 0x1000;
/// Section data in the file is aligned to 512 bytes (the smallest the specification allows).
pub const FILE_ALIGN: u32 = 0x200;
/// Bytes of the headers (the first page): the first section starts here.
pub const HEADERS_SIZE: u32 = SECTION_ALIGN;

const COFF_SIZE: usize = 20;
const OPTIONAL_SIZE: usize = 112 + 8 * DATA_DIRS as usize;
const SECTION_SIZE: usize = 40;
/// Export, import, resource, exception, certificate, base relocation: all empty.
const DATA_DIRS: u32 = 6;
/// IMAGE_FILE_EXECUTABLE_IMAGE | LINE_NUMS_STRIPPED | DEBUG_STRIPPED.
const CHARACTERISTICS: u16 = 0x0002 | 0x0004 | 0x0200;
/// IMAGE_FILE_RELOCS_STRIPPED: the image could only run at its ImageBase.
const RELOCS_STRIPPED: u16 = 0x0001;
/// IMAGE_DLLCHARACTERISTICS_NX_COMPAT: no section is both writable and executable.
const NX_COMPAT: u16 = 0x0100;
const SCN_CODE: u32 = 0x20;
const SCN_INITIALIZED_DATA: u32 = 0x40;
const SCN_EXECUTE: u32 = 0x2000_0000;
const SCN_READ: u32 = 0x4000_0000;
const SCN_WRITE: u32 = 0x8000_0000;

/// Where things are in a linked image (offsets from its first byte, the link address 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// End of text ([`HEADERS_SIZE`], `text_end`) is code.
    pub text_end: u32,
    /// End of the image in memory, BSS included (`__image_end`).
    pub image_end: u32,
    /// The EFI entry point, inside text.
    pub entry: u32,
}

/// What [`parse`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeInfo {
    /// Offset of "PE\0\0".
    pub pe_offset: u32,
    /// AddressOfEntryPoint.
    pub entry: u32,
    /// SizeOfImage.
    pub size_of_image: u32,
    /// NumberOfSections.
    pub sections: u16,
}

/// Why a PE header cannot be written or is not a loadable EFI application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeError {
    /// The file does not start with "MZ".
    NoDosMagic,
    /// `e_lfanew` points outside the file, or not at "PE\0\0".
    BadPeOffset {
        /// `e_lfanew`.
        offset: u32,
    },
    /// Not an arm64 PE32+ EFI application.
    NotArm64EfiApp {
        /// The field that says so.
        field: &'static str,
        /// Its value.
        value: u32,
    },
    /// A header field out of its bounds (a section outside the file or the image, the entry
    /// point outside code, the headers not fitting their room).
    Bad {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u32,
        /// What it must satisfy.
        why: &'static str,
    },
    /// The space the binary reserved for the header is not there or not empty.
    NoRoom,
}

impl core::fmt::Display for PeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::NoDosMagic => write!(f, "no \"MZ\" at offset 0: not a PE/COFF file"),
            Self::BadPeOffset { offset } => {
                write!(f, "PE header offset {offset:#x} (at 0x3c) does not lead to \"PE\\0\\0\"")
            }
            Self::NotArm64EfiApp { field, value } => {
                write!(f, "not an arm64 PE32+ EFI application: {field} is {value:#x}")
            }
            Self::Bad { field, value, why } => write!(f, "PE header field {field} = {value:#x}: {why}"),
            Self::NoRoom => write!(
                f,
                "the binary reserves no empty page for the PE header at 0x40 (\"PE\\0\\0\" then zeros up to 0x1000)"
            ),
        }
    }
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn bad(field: &'static str, value: u32, why: &'static str) -> PeError {
    PeError::Bad { field, value, why }
}

/// Whether `file` starts as an Image that is also a PE file (its first instruction's low half
/// is "MZ").
pub fn has_dos_magic(file: &[u8]) -> bool {
    file.len() >= 2 && u16_at(file, 0) == DOS_MAGIC
}

/// The file length a PE image of `len` bytes is padded to (with zeros): a multiple of
/// [`FILE_ALIGN`], so the last section's file data is whole.
pub fn padded_len(len: usize) -> usize {
    len.next_multiple_of(FILE_ALIGN as usize)
}

/// Writes the PE header into the page the binary reserved at [`PE_OFFSET`] (it must hold
/// "PE\0\0" followed by zeros up to [`HEADERS_SIZE`]) and `e_lfanew`; `file` must already be
/// padded ([`padded_len`]). Checks the result with [`parse`]. The first instruction must already
/// be [`MZ_NOP`].
pub fn write(file: &mut [u8], l: &Layout) -> Result<PeInfo, PeError> {
    let hs = HEADERS_SIZE as usize;
    if file.len() < hs || u32_at(file, PE_OFFSET as usize) != PE_MAGIC {
        return Err(PeError::NoRoom);
    }
    if file[PE_OFFSET as usize + 4..hs].iter().any(|&b| b != 0) || u32_at(file, LFANEW_OFFSET) != 0 {
        return Err(PeError::NoRoom);
    }
    if u32_at(file, 0) != MZ_NOP {
        return Err(PeError::NoDosMagic);
    }
    let len = u32::try_from(file.len()).map_err(|_| bad("file length", u32::MAX, "the file must be below 4 GiB"))?;
    if !len.is_multiple_of(FILE_ALIGN) {
        return Err(bad("file length", len, "padded to FileAlignment (pe::padded_len)"));
    }
    if l.text_end < HEADERS_SIZE || !l.text_end.is_multiple_of(SECTION_ALIGN) || l.text_end > len {
        return Err(bad("text end", l.text_end, "4 KiB aligned, after the headers, inside the file"));
    }
    if l.image_end < len || !l.image_end.is_multiple_of(SECTION_ALIGN) {
        return Err(bad("image end", l.image_end, "4 KiB aligned, at or after the file's end"));
    }
    let text = l.text_end - HEADERS_SIZE;
    let (data_raw, data_mem) = (len - l.text_end, l.image_end - l.text_end);
    let mut h = [0u8; 4 + COFF_SIZE + OPTIONAL_SIZE + 2 * SECTION_SIZE];
    let mut at = 0;
    let mut put = |bytes: &[u8]| {
        h[at..at + bytes.len()].copy_from_slice(bytes);
        at += bytes.len();
    };
    put(&PE_MAGIC.to_le_bytes());
    // COFF header.
    put(&MACHINE_ARM64.to_le_bytes());
    put(&2u16.to_le_bytes()); // NumberOfSections
    put(&[0; 12]); // TimeDateStamp, PointerToSymbolTable, NumberOfSymbols
    put(&(OPTIONAL_SIZE as u16).to_le_bytes());
    put(&CHARACTERISTICS.to_le_bytes());
    // Optional header (PE32+).
    put(&PE32PLUS_MAGIC.to_le_bytes());
    put(&[0, 0]); // linker version
    put(&text.to_le_bytes()); // SizeOfCode
    put(&data_raw.to_le_bytes()); // SizeOfInitializedData
    put(&(data_mem - data_raw).to_le_bytes()); // SizeOfUninitializedData
    put(&l.entry.to_le_bytes()); // AddressOfEntryPoint
    put(&HEADERS_SIZE.to_le_bytes()); // BaseOfCode
    put(&0u64.to_le_bytes()); // ImageBase
    put(&SECTION_ALIGN.to_le_bytes());
    put(&FILE_ALIGN.to_le_bytes());
    put(&[0; 12]); // OS, image and subsystem versions
    put(&0u32.to_le_bytes()); // Win32VersionValue
    put(&l.image_end.to_le_bytes()); // SizeOfImage
    put(&HEADERS_SIZE.to_le_bytes()); // SizeOfHeaders
    put(&0u32.to_le_bytes()); // CheckSum
    put(&SUBSYSTEM_EFI_APPLICATION.to_le_bytes());
    put(&NX_COMPAT.to_le_bytes());
    put(&[0; 32]); // stack and heap reserve/commit
    put(&0u32.to_le_bytes()); // LoaderFlags
    put(&DATA_DIRS.to_le_bytes());
    put(&[0; 8 * DATA_DIRS as usize]);
    // Sections: name, VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData, 12 bytes
    // of relocations and line numbers (none), Characteristics.
    for (name, vsize, va, raw, flags) in [
        (*b".text\0\0\0", text, HEADERS_SIZE, text, SCN_CODE | SCN_EXECUTE | SCN_READ),
        (*b".data\0\0\0", data_mem, l.text_end, data_raw, SCN_INITIALIZED_DATA | SCN_READ | SCN_WRITE),
    ] {
        put(&name);
        put(&vsize.to_le_bytes());
        put(&va.to_le_bytes());
        put(&raw.to_le_bytes());
        put(&(if raw == 0 { 0 } else { va }).to_le_bytes());
        put(&[0; 12]);
        put(&flags.to_le_bytes());
    }
    let o = PE_OFFSET as usize;
    file[o..o + h.len()].copy_from_slice(&h);
    file[LFANEW_OFFSET..LFANEW_OFFSET + 4].copy_from_slice(&PE_OFFSET.to_le_bytes());
    parse(file)
}

/// Checks that `file` is a loadable arm64 EFI application: "MZ", `e_lfanew` leading to "PE\0\0"
/// inside the headers, machine arm64, PE32+, subsystem EFI application, headers that fit
/// `SizeOfHeaders`, sections aligned, inside `SizeOfImage` and (their file data) inside the
/// file, the entry point inside an executable section, base relocations not stripped.
pub fn parse(file: &[u8]) -> Result<PeInfo, PeError> {
    if !has_dos_magic(file) || file.len() < 0x40 {
        return Err(PeError::NoDosMagic);
    }
    let pe = u32_at(file, LFANEW_OFFSET);
    let p = pe as usize;
    if p < 0x40 || p.checked_add(4 + COFF_SIZE).is_none_or(|e| e > file.len()) || u32_at(file, p) != PE_MAGIC {
        return Err(PeError::BadPeOffset { offset: pe });
    }
    let coff = p + 4;
    let machine = u16_at(file, coff);
    if machine != MACHINE_ARM64 {
        return Err(PeError::NotArm64EfiApp { field: "Machine", value: machine.into() });
    }
    let sections = u16_at(file, coff + 2);
    let opt_size = u16_at(file, coff + 16) as usize;
    let characteristics = u16_at(file, coff + 18);
    if characteristics & RELOCS_STRIPPED != 0 {
        return Err(bad("Characteristics", characteristics.into(), "relocations stripped: it could not be moved"));
    }
    let opt = coff + COFF_SIZE;
    if opt_size < 112 || opt + opt_size > file.len() {
        return Err(bad("SizeOfOptionalHeader", opt_size as u32, "at least 112 bytes, inside the file"));
    }
    let magic = u16_at(file, opt);
    if magic != PE32PLUS_MAGIC {
        return Err(PeError::NotArm64EfiApp { field: "optional header magic", value: magic.into() });
    }
    let subsystem = u16_at(file, opt + 68);
    if subsystem != SUBSYSTEM_EFI_APPLICATION {
        return Err(PeError::NotArm64EfiApp { field: "Subsystem", value: subsystem.into() });
    }
    let entry = u32_at(file, opt + 16);
    let (section_align, file_align) = (u32_at(file, opt + 32), u32_at(file, opt + 36));
    if !section_align.is_power_of_two() || section_align < 0x1000 {
        return Err(bad("SectionAlignment", section_align, "a power of two, at least 4 KiB"));
    }
    if !file_align.is_power_of_two() || !(0x200..=0x10000).contains(&file_align) || file_align > section_align {
        return Err(bad("FileAlignment", file_align, "a power of two from 512 to 64 KiB, at most SectionAlignment"));
    }
    let (size_of_image, size_of_headers) = (u32_at(file, opt + 56), u32_at(file, opt + 60));
    let dirs = u32_at(file, opt + 108);
    if u64::from(dirs) * 8 + 112 > opt_size as u64 {
        return Err(bad("NumberOfRvaAndSizes", dirs, "more directories than the optional header holds"));
    }
    let table = opt + opt_size;
    let table_end = table + usize::from(sections) * SECTION_SIZE;
    if sections == 0 || table_end > size_of_headers as usize || table_end > file.len() {
        return Err(bad("NumberOfSections", sections.into(), "at least one, the table inside SizeOfHeaders"));
    }
    if !size_of_headers.is_multiple_of(file_align) || size_of_headers >= size_of_image {
        return Err(bad("SizeOfHeaders", size_of_headers, "a multiple of FileAlignment, below SizeOfImage"));
    }
    if !size_of_image.is_multiple_of(section_align) {
        return Err(bad("SizeOfImage", size_of_image, "a multiple of SectionAlignment"));
    }
    let mut entry_ok = false;
    for s in (table..table_end).step_by(SECTION_SIZE) {
        let (vsize, va, raw, ptr) =
            (u32_at(file, s + 8), u32_at(file, s + 12), u32_at(file, s + 16), u32_at(file, s + 20));
        let flags = u32_at(file, s + 36);
        if !va.is_multiple_of(section_align) || va < size_of_headers {
            return Err(bad("section VirtualAddress", va, "aligned to SectionAlignment, after the headers"));
        }
        if u64::from(va) + u64::from(vsize.max(raw)) > u64::from(size_of_image) {
            return Err(bad("section VirtualSize", vsize, "the section must end inside SizeOfImage"));
        }
        if raw != 0
            && (!ptr.is_multiple_of(file_align)
                || !raw.is_multiple_of(file_align)
                || u64::from(ptr) + u64::from(raw) > file.len() as u64)
        {
            return Err(bad("section SizeOfRawData", raw, "aligned to FileAlignment, its data inside the file"));
        }
        if flags & SCN_EXECUTE != 0 && flags & SCN_WRITE != 0 {
            return Err(bad("section Characteristics", flags, "writable and executable"));
        }
        if flags & SCN_EXECUTE != 0 && (va..va.saturating_add(vsize)).contains(&entry) {
            entry_ok = true;
        }
    }
    if !entry_ok {
        return Err(bad("AddressOfEntryPoint", entry, "inside an executable section"));
    }
    Ok(PeInfo { pe_offset: pe, entry, size_of_image, sections })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// A linked image as the hypervisor's: the MZ no-op, a branch, the Image magic, the reserved
    /// page, code from 0x1000 and data after `text_end`.
    fn linked(len: usize) -> Vec<u8> {
        let mut f = std::vec![0x11u8; len];
        f.resize(padded_len(len), 0);
        f[0..4].copy_from_slice(&MZ_NOP.to_le_bytes());
        f[4..8].copy_from_slice(&0x1400_0400u32.to_le_bytes());
        f[8..0x40].fill(0);
        f[0x38..0x3c].copy_from_slice(&crate::image::MAGIC.to_le_bytes());
        f[0x40..0x44].copy_from_slice(&PE_MAGIC.to_le_bytes());
        f[0x44..0x1000.min(len)].fill(0);
        f
    }

    const L: Layout = Layout { text_end: 0x3000, image_end: 0x6000, entry: 0x1000 };

    #[test]
    fn writes_a_header_that_parses_and_leaves_the_image_fields() {
        let mut f = linked(0x4321);
        let before = f.clone();
        let info = write(&mut f, &L).unwrap();
        assert_eq!(f.len(), 0x4400, "padded to the file alignment");
        assert_eq!(info, PeInfo { pe_offset: 0x40, entry: 0x1000, size_of_image: 0x6000, sections: 2 });
        assert_eq!(&f[0..2], b"MZ");
        assert_eq!(f[..0x3c], before[..0x3c], "the Image header's fields are untouched");
        assert_eq!(u32_at(&f, 0x3c), 0x40);
        assert_eq!(f[0x1000..], before[0x1000..], "code and data untouched");
        assert!(f[0x4321..].iter().all(|&b| b == 0));
        // .data: raw [0x3000, 0x4400), in memory up to 0x6000 (the BSS).
        let s = 0x40 + 4 + COFF_SIZE + OPTIONAL_SIZE + SECTION_SIZE;
        assert_eq!(&f[s..s + 5], b".data");
        assert_eq!((u32_at(&f, s + 8), u32_at(&f, s + 12), u32_at(&f, s + 16)), (0x3000, 0x3000, 0x1400));
        // The headers end before the first page ends, as the room the binary reserved.
        assert!(s + SECTION_SIZE <= HEADERS_SIZE as usize);
        assert_eq!(crate::image::ImageHeader::patch(&mut f, 0x6000).map(|h| h.image_size), Ok(0x6000));
    }

    #[test]
    fn write_refuses_a_binary_without_the_reserved_page_or_the_mz_no_op() {
        let mut f = linked(0x2000);
        f[0x40] = 0;
        assert_eq!(write(&mut f, &L), Err(PeError::NoRoom));
        let mut f = linked(0x2000);
        f[0x800] = 1;
        assert_eq!(write(&mut f, &L), Err(PeError::NoRoom), "something else lives in the page");
        let mut f = linked(0x2000);
        f[0..4].copy_from_slice(&0x1400_0010u32.to_le_bytes());
        assert_eq!(write(&mut f, &L), Err(PeError::NoDosMagic));
        assert_eq!(write(&mut linked(0x800), &L), Err(PeError::NoRoom));
        let mut f = linked(0x2000);
        f.push(0);
        assert!(matches!(write(&mut f, &L), Err(PeError::Bad { field: "file length", .. })));
    }

    #[test]
    fn write_refuses_layouts_the_loader_could_not_follow() {
        for (l, field) in [
            (Layout { text_end: 0x2800, ..L }, "text end"),
            (Layout { text_end: 0x800, ..L }, "text end"),
            (Layout { text_end: 0x5000, ..L }, "text end"),
            (Layout { image_end: 0x4000, ..L }, "image end"),
            (Layout { image_end: 0x6800, ..L }, "image end"),
            (Layout { entry: 0x3000, ..L }, "AddressOfEntryPoint"),
            (Layout { entry: 0x800, ..L }, "AddressOfEntryPoint"),
        ] {
            match write(&mut linked(0x4321), &l) {
                Err(PeError::Bad { field: f, .. }) => assert_eq!(f, field, "{l:?}"),
                other => panic!("{l:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn parse_refuses_broken_headers() {
        let mut good = linked(0x4321);
        write(&mut good, &L).unwrap();
        let set = |off: usize, v: u32| {
            let mut f = good.clone();
            f[off..off + 4].copy_from_slice(&v.to_le_bytes());
            f
        };
        let opt = 0x40 + 4 + COFF_SIZE;
        let text = opt + OPTIONAL_SIZE;
        assert_eq!(parse(&good[..0x30]), Err(PeError::NoDosMagic));
        assert_eq!(parse(&set(0, 0x1400_0010)), Err(PeError::NoDosMagic));
        assert_eq!(parse(&set(LFANEW_OFFSET, 0)), Err(PeError::BadPeOffset { offset: 0 }));
        assert_eq!(parse(&set(LFANEW_OFFSET, 0x100_0000)), Err(PeError::BadPeOffset { offset: 0x100_0000 }));
        assert_eq!(parse(&set(LFANEW_OFFSET, 0x80)), Err(PeError::BadPeOffset { offset: 0x80 }));
        assert!(matches!(parse(&set(0x44, 0x8664)), Err(PeError::NotArm64EfiApp { field: "Machine", .. })));
        assert!(matches!(parse(&set(opt + 68, 11)), Err(PeError::NotArm64EfiApp { field: "Subsystem", .. })));
        assert!(matches!(parse(&set(opt, 0x10b)), Err(PeError::NotArm64EfiApp { .. })));
        let stripped = {
            let mut f = good.clone();
            f[0x44 + 18] |= 1;
            f
        };
        assert!(matches!(parse(&stripped), Err(PeError::Bad { field: "Characteristics", .. })));
        assert!(matches!(parse(&set(opt + 16, 0x3000)), Err(PeError::Bad { field: "AddressOfEntryPoint", .. })));
        assert!(matches!(parse(&set(opt + 32, 0x800)), Err(PeError::Bad { field: "SectionAlignment", .. })));
        assert!(matches!(parse(&set(opt + 36, 0x100)), Err(PeError::Bad { field: "FileAlignment", .. })));
        assert!(matches!(parse(&set(opt + 56, 0x5000)), Err(PeError::Bad { field: "section VirtualSize", .. })));
        assert!(matches!(parse(&set(opt + 56, 0x6100)), Err(PeError::Bad { field: "SizeOfImage", .. })));
        assert!(matches!(parse(&set(opt + 60, 0x100)), Err(PeError::Bad { field: "NumberOfSections", .. })));
        assert!(matches!(parse(&set(opt + 108, 20)), Err(PeError::Bad { field: "NumberOfRvaAndSizes", .. })));
        assert!(matches!(parse(&set(text + 12, 0x1800)), Err(PeError::Bad { field: "section VirtualAddress", .. })));
        assert!(matches!(parse(&set(text + 16, 0x8000)), Err(PeError::Bad { .. })));
        // The data section's bytes past the end of the file.
        assert!(matches!(parse(&good[..0x4200]), Err(PeError::Bad { field: "section SizeOfRawData", .. })));
        assert!(matches!(
            parse(&set(text + 36, SCN_CODE | SCN_EXECUTE | SCN_WRITE)),
            Err(PeError::Bad { field: "section Characteristics", .. })
        ));
    }
}
