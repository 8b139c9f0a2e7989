//! The Linux arm64 `Image` header (Documentation/arch/arm64/booting.rst).
//!
//! ```text
//! 0x00 code0 / code1   (this project's: code0 `ccmp` whose low half is "MZ" (`crate::pe`), code1 a
//!                      branch to the real entry)
//! 0x08 text_offset     u64 LE: offset from a 2 MiB aligned base where the image must sit
//! 0x10 image_size      u64 LE: bytes the image needs in memory, BSS included
//! 0x18 flags           u64 LE: bit 0 big-endian, bits 1-2 page size (1 = 4K), bit 3 anywhere
//! 0x20 res2            (0 here)
//! 0x28 res3            this project's stamp: u32 "PGTL" + u32 CRC-32 of the file
//! 0x30 res4            this project's stamp: u64 file length in bytes
//! 0x38 magic           "ARM\x64"
//! 0x3c res5            PE header offset: 0, or 0x40 in an Image that is an EFI application too
//!                      (the hypervisor's, `crate::pe`)
//! ```
//! QEMU only hands x0 = DTB (and loads `-initrd`) to a file with this header, so both binaries
//! carry it; the hypervisor uses [`ImageHeader::parse`] to load the guest kernel and the xtask
//! uses [`ImageHeader::patch`] to write `image_size` and the stamp once the ELF is linked.
//!
//! The stamp (in fields Linux leaves 0) lets the loader refuse a truncated or corrupted file of
//! this project's, which would otherwise start and run into zeros; a Linux Image has no stamp and
//! is checked for the rest only. Every check uses checked arithmetic: `text_offset + image_size`
//! may not overflow.

/// Size of the header.
pub const HEADER_SIZE: usize = 64;
/// `ARM\x64`, little-endian, at offset 0x38.
pub const MAGIC: u32 = 0x644d_5241;
/// Offset of the magic.
pub const MAGIC_OFFSET: usize = 0x38;
/// Flag: 4 KiB pages.
pub const FLAG_PAGE_4K: u64 = 1 << 1;
/// Flag: may be placed anywhere in physical memory (2 MiB aligned base + text_offset).
pub const FLAG_ANYWHERE: u64 = 1 << 3;
/// Bits 1-2 of the flags.
const PAGE_SIZE_MASK: u64 = 0b11 << 1;

/// A parsed, validated header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageHeader {
    /// Where the image wants to sit above a 2 MiB aligned base.
    pub text_offset: u64,
    /// Bytes the image occupies once loaded, BSS included.
    pub image_size: u64,
    /// Endianness, page size and placement flags.
    pub flags: u64,
}

/// Why a buffer is not a bootable arm64 Image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageError {
    /// Fewer than 64 bytes.
    TooShort {
        /// Bytes given.
        len: usize,
    },
    /// The magic at 0x38 is not `ARM\x64`.
    BadMagic {
        /// The word found at 0x38.
        found: u32,
    },
    /// Bit 0 of the flags says big-endian.
    BigEndian,
    /// The page-size field names a granule other than 4 KiB (or "unspecified" is fine).
    UnsupportedPageSize {
        /// Flags bits 1-2.
        field: u64,
    },
    /// `image_size` is smaller than the file, or zero.
    BadImageSize {
        /// The header's `image_size`.
        image_size: u64,
        /// Bytes of the file.
        file_len: usize,
    },
    /// `text_offset` is not 4 KiB aligned or not below 2 MiB.
    BadTextOffset {
        /// The header's `text_offset`.
        text_offset: u64,
    },
    /// `text_offset + image_size` does not fit in 64 bits.
    SizeOverflow {
        /// The header's `text_offset`.
        text_offset: u64,
        /// The header's `image_size`.
        image_size: u64,
    },
    /// The stamp says the file is longer than what was given.
    Truncated {
        /// Bytes given.
        file_len: usize,
        /// Bytes the stamp says the file has.
        stamped: u64,
    },
    /// A stamped Image names a PE header (code0 "MZ", res5 not 0) that is not a loadable
    /// arm64 EFI application's.
    BadPe(crate::pe::PeError),
    /// The file's CRC-32 differs from the stamp's.
    Corrupted {
        /// The stamp's CRC-32.
        stamped: u32,
        /// The file's.
        found: u32,
    },
}

impl core::fmt::Display for ImageError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::TooShort { len } => {
                write!(f, "{len} bytes is shorter than the 64-byte Image header")
            }
            Self::BadMagic { found } => {
                write!(f, "no arm64 Image magic at 0x38 (found {found:#010x}, want {MAGIC:#010x} \"ARMd\")")
            }
            Self::BigEndian => write!(f, "big-endian Image: only little-endian kernels are supported"),
            Self::UnsupportedPageSize { field } => {
                write!(f, "Image page-size field {field} is not 4 KiB (1) or unspecified (0)")
            }
            Self::BadImageSize { image_size, file_len } => {
                write!(f, "Image image_size {image_size:#x} is smaller than the file ({file_len:#x} bytes)")
            }
            Self::BadTextOffset { text_offset } => {
                write!(f, "Image text_offset {text_offset:#x} is not 4 KiB aligned below 2 MiB")
            }
            Self::SizeOverflow { text_offset, image_size } => {
                write!(f, "Image text_offset {text_offset:#x} + image_size {image_size:#x} overflows 64 bits")
            }
            Self::Truncated { file_len, stamped } => {
                write!(f, "Image truncated: {file_len} bytes given, its header says the file has {stamped}")
            }
            Self::BadPe(e) => write!(f, "Image's PE/COFF header: {e}"),
            Self::Corrupted { stamped, found } => {
                write!(f, "Image corrupted: CRC-32 {found:#010x}, its header says {stamped:#010x}")
            }
        }
    }
}

/// "PGTL", little-endian, at 0x28: the file carries this project's stamp.
pub const STAMP_MAGIC: u32 = 0x4c54_4750;
/// Offset of the stamp (magic, CRC-32, file length).
pub const STAMP_OFFSET: usize = 0x28;

fn read_u64(b: &[u8], off: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(v)
}

fn read_u32(b: &[u8], off: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[off..off + 4]);
    u32::from_le_bytes(v)
}

/// CRC-32 (`crate::crc32`: IEEE 802.3, reflected, as zlib) of `data` with the stamp's CRC field
/// read as zeros.
pub fn stamp_crc(data: &[u8]) -> u32 {
    stamp_crc_with(data, crate::crc32::table)
}

/// [`stamp_crc`] computed with `engine`: the bytes before the CRC field, as many zeros as the
/// field has in `data`, the bytes after it.
pub fn stamp_crc_with(data: &[u8], engine: crate::crc32::Engine) -> u32 {
    let field = (STAMP_OFFSET + 4).min(data.len())..(STAMP_OFFSET + 8).min(data.len());
    let mut c = crate::crc32::Crc32::new();
    c.update_with(&data[..field.start], engine);
    c.update_with(&[0; 4][..field.len()], engine);
    c.update_with(&data[field.end..], engine);
    c.value()
}

impl ImageHeader {
    /// Validates the header of a whole Image file (`file` is the complete image, so its length can
    /// be checked against `image_size`). A pre-3.17 header with `image_size == 0` is refused: the
    /// loader could not know how much memory the BSS needs.
    pub fn parse(file: &[u8]) -> Result<Self, ImageError> {
        Self::parse_with(file, crate::crc32::table)
    }

    /// [`ImageHeader::parse`] with the stamp's CRC-32 computed by `engine` (a CPU's CRC32
    /// instructions: `rt::crc::engine`).
    pub fn parse_with(file: &[u8], engine: crate::crc32::Engine) -> Result<Self, ImageError> {
        if file.len() < HEADER_SIZE {
            return Err(ImageError::TooShort { len: file.len() });
        }
        let mut m = [0u8; 4];
        m.copy_from_slice(&file[MAGIC_OFFSET..MAGIC_OFFSET + 4]);
        let found = u32::from_le_bytes(m);
        if found != MAGIC {
            return Err(ImageError::BadMagic { found });
        }
        let h = Self { text_offset: read_u64(file, 8), image_size: read_u64(file, 16), flags: read_u64(file, 24) };
        if h.flags & 1 != 0 {
            return Err(ImageError::BigEndian);
        }
        let page = (h.flags & PAGE_SIZE_MASK) >> 1;
        if page > 1 {
            return Err(ImageError::UnsupportedPageSize { field: page });
        }
        if h.image_size == 0 || h.image_size < file.len() as u64 {
            return Err(ImageError::BadImageSize { image_size: h.image_size, file_len: file.len() });
        }
        if !h.text_offset.is_multiple_of(4096) || h.text_offset >= 2 << 20 {
            return Err(ImageError::BadTextOffset { text_offset: h.text_offset });
        }
        if h.text_offset.checked_add(h.image_size).is_none() {
            return Err(ImageError::SizeOverflow { text_offset: h.text_offset, image_size: h.image_size });
        }
        if read_u32(file, STAMP_OFFSET) == STAMP_MAGIC {
            let stamped = read_u64(file, STAMP_OFFSET + 8);
            if (file.len() as u64) < stamped {
                return Err(ImageError::Truncated { file_len: file.len(), stamped });
            }
            // Bytes past the stamped length (padding of a loader) are not the file's.
            let len = usize::try_from(stamped).unwrap_or(usize::MAX).min(file.len());
            let (stamped, found) = (read_u32(file, STAMP_OFFSET + 4), stamp_crc_with(&file[..len], engine));
            if stamped != found {
                return Err(ImageError::Corrupted { stamped, found });
            }
            if crate::pe::has_dos_magic(file) && read_u32(file, crate::pe::LFANEW_OFFSET) != 0 {
                crate::pe::parse(&file[..len]).map_err(ImageError::BadPe)?;
            }
        }
        Ok(h)
    }

    /// `text_offset + image_size`: the bytes from a 2 MiB aligned base the image occupies
    /// (cannot overflow: [`ImageHeader::parse`] checked it).
    pub fn footprint(&self) -> u64 {
        self.text_offset.saturating_add(self.image_size)
    }

    /// Whether the image may sit at any 2 MiB aligned base (flag bit 3).
    pub fn anywhere(&self) -> bool {
        self.flags & FLAG_ANYWHERE != 0
    }

    /// Writes `image_size` into a linked image's header (the linker cannot: the size includes the
    /// BSS, which a raw binary does not contain) and the stamp (file length and CRC-32).
    /// Validates the result.
    pub fn patch(file: &mut [u8], image_size: u64) -> Result<Self, ImageError> {
        if file.len() < HEADER_SIZE {
            return Err(ImageError::TooShort { len: file.len() });
        }
        file[16..24].copy_from_slice(&image_size.to_le_bytes());
        file[STAMP_OFFSET..STAMP_OFFSET + 4].copy_from_slice(&STAMP_MAGIC.to_le_bytes());
        let len = file.len() as u64;
        file[STAMP_OFFSET + 8..STAMP_OFFSET + 16].copy_from_slice(&len.to_le_bytes());
        let crc = stamp_crc(file);
        file[STAMP_OFFSET + 4..STAMP_OFFSET + 8].copy_from_slice(&crc.to_le_bytes());
        Self::parse(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stamp's CRC by its definition: every byte in turn, the field's read as 0.
    fn stamp_crc_by_bytes(data: &[u8]) -> u32 {
        let mut c = crate::crc32::Crc32::new();
        for (i, &b) in data.iter().enumerate() {
            c.byte(if (STAMP_OFFSET + 4..STAMP_OFFSET + 8).contains(&i) { 0 } else { b });
        }
        c.value()
    }

    #[test]
    fn the_stamp_crc_skips_exactly_the_field_at_any_length() {
        let data: [u8; 100] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        for len in 0..data.len() {
            assert_eq!(stamp_crc(&data[..len]), stamp_crc_by_bytes(&data[..len]), "{len} bytes");
        }
    }

    #[test]
    fn an_engine_that_splits_its_input_gives_the_tables_crc() {
        // Any engine sees the file in three pieces (before, in, after the field): one that
        // mixed up the pieces' order or lengths would differ from the definition.
        fn halves(state: u32, bytes: &[u8]) -> u32 {
            let (a, b) = bytes.split_at(bytes.len() / 2);
            crate::crc32::table(crate::crc32::table(state, a), b)
        }
        let data: [u8; 300] = core::array::from_fn(|i| (i * 13 + 5) as u8);
        assert_eq!(stamp_crc_with(&data, halves), stamp_crc_by_bytes(&data));
    }

    fn header(text_offset: u64, size: u64, flags: u64, len: usize) -> [u8; 128] {
        let mut b = [0u8; 128];
        b[8..16].copy_from_slice(&text_offset.to_le_bytes());
        b[16..24].copy_from_slice(&size.to_le_bytes());
        b[24..32].copy_from_slice(&flags.to_le_bytes());
        b[MAGIC_OFFSET..MAGIC_OFFSET + 4].copy_from_slice(&MAGIC.to_le_bytes());
        let _ = len;
        b
    }

    #[test]
    fn accepts_a_good_header() {
        let b = header(0, 0x10000, FLAG_PAGE_4K | FLAG_ANYWHERE, 128);
        let h = ImageHeader::parse(&b).unwrap();
        assert!(h.anywhere());
        assert_eq!(h.image_size, 0x10000);
    }

    #[test]
    fn refuses_bad_headers() {
        assert_eq!(ImageHeader::parse(&[0u8; 10]), Err(ImageError::TooShort { len: 10 }));
        let mut b = header(0, 0x10000, FLAG_PAGE_4K, 128);
        b[MAGIC_OFFSET] = b'X';
        assert!(matches!(ImageHeader::parse(&b), Err(ImageError::BadMagic { .. })));
        let b = header(0, 0x10000, 1, 128);
        assert_eq!(ImageHeader::parse(&b), Err(ImageError::BigEndian));
        let b = header(0, 0x10000, 2 << 1, 128);
        assert_eq!(ImageHeader::parse(&b), Err(ImageError::UnsupportedPageSize { field: 2 }));
        let b = header(0, 64, FLAG_PAGE_4K, 128);
        assert!(matches!(ImageHeader::parse(&b), Err(ImageError::BadImageSize { .. })));
        let b = header(0x123, 0x10000, FLAG_PAGE_4K, 128);
        assert!(matches!(ImageHeader::parse(&b), Err(ImageError::BadTextOffset { .. })));
        let b = header(2 << 20, 0x10000, FLAG_PAGE_4K, 128);
        assert!(matches!(ImageHeader::parse(&b), Err(ImageError::BadTextOffset { .. })));
    }

    #[test]
    fn patch_writes_the_size_and_the_stamp() {
        let mut b = header(0, 0, FLAG_PAGE_4K, 128);
        assert!(ImageHeader::parse(&b).is_err());
        let h = ImageHeader::patch(&mut b, 0x2000).unwrap();
        assert_eq!(h.image_size, 0x2000);
        assert_eq!(read_u32(&b, STAMP_OFFSET), STAMP_MAGIC);
        assert_eq!(read_u64(&b, STAMP_OFFSET + 8), 128);
    }

    #[test]
    fn overflowing_sizes_are_refused() {
        let b = header(0x1000, 0xffff_ffff_ffff_f000, FLAG_PAGE_4K, 128);
        assert_eq!(
            ImageHeader::parse(&b),
            Err(ImageError::SizeOverflow { text_offset: 0x1000, image_size: 0xffff_ffff_ffff_f000 })
        );
        let b = header(0x1000, 0xffff_ffff_ffff_efff, FLAG_PAGE_4K, 128);
        assert_eq!(ImageHeader::parse(&b).unwrap().footprint(), u64::MAX);
    }

    #[test]
    fn stamped_images_refuse_truncation_and_corruption() {
        let mut file = [0u8; 4096];
        file[..128].copy_from_slice(&header(0, 0, FLAG_PAGE_4K, 4096));
        for (i, x) in file.iter_mut().enumerate().skip(128) {
            *x = (i * 7) as u8;
        }
        ImageHeader::patch(&mut file, 0x10000).unwrap();
        assert!(ImageHeader::parse(&file).is_ok());
        for cut in [64, 1000, 4095] {
            assert_eq!(
                ImageHeader::parse(&file[..cut]),
                Err(ImageError::Truncated { file_len: cut, stamped: 4096 }),
                "cut at {cut}"
            );
        }
        // A loader's padding after the file is not part of it.
        let mut padded = file.to_vec();
        padded.extend_from_slice(&[0xff; 100]);
        assert!(ImageHeader::parse(&padded).is_ok());
        let mut bad = file;
        bad[2000] ^= 0x10;
        assert!(matches!(ImageHeader::parse(&bad), Err(ImageError::Corrupted { .. })));
        // CRC-32 of "123456789" is the standard check value (with no stamp field inside).
        assert_eq!(stamp_crc(b"123456789"), 0xcbf4_3926);
    }

    /// What `cargo xtask mutants --host rt` found untested.
    #[test]
    fn the_crc_skips_its_own_field_and_nothing_else() {
        let mut data = [0x5au8; 128];
        let c = stamp_crc(&data);
        for i in STAMP_OFFSET + 4..STAMP_OFFSET + 8 {
            data[i] ^= 0xff;
            assert_eq!(stamp_crc(&data), c, "byte {i:#x} is the CRC field");
        }
        for i in [STAMP_OFFSET, STAMP_OFFSET + 3, STAMP_OFFSET + 8, STAMP_OFFSET + 15] {
            let mut d = data;
            d[i] ^= 1;
            assert_ne!(stamp_crc(&d), c, "byte {i:#x} is covered");
        }
    }

    #[test]
    fn an_image_size_equal_to_the_file_is_accepted_and_flags_mean_4k_pages() {
        let b = header(0, 128, FLAG_PAGE_4K, 128);
        assert_eq!(ImageHeader::parse(&b).unwrap().image_size, 128);
        assert_eq!(ImageHeader::parse(&b[..127]).unwrap().image_size, 128);
        assert!(!ImageHeader::parse(&b).unwrap().anywhere(), "4 KiB pages, not bit 3");
        assert_eq!(ImageHeader::patch(&mut [0u8; 10], 0x1000), Err(ImageError::TooShort { len: 10 }));
        let mut just_a_header = [0u8; HEADER_SIZE];
        just_a_header.copy_from_slice(&b[..HEADER_SIZE]);
        assert_eq!(ImageHeader::patch(&mut just_a_header, 0x1000).unwrap().image_size, 0x1000);
        // booting.rst: flags bits 1-2 are the page size, 1 meaning 4 KiB.
        assert_eq!((FLAG_PAGE_4K & PAGE_SIZE_MASK) >> 1, 1);
        extern crate std;
        use std::string::ToString;
        assert!(ImageError::Corrupted { stamped: 1, found: 2 }.to_string().contains("0x00000002"));
    }

    /// A stamped Image that says it is a PE file (MZ, res5 set) must be a good one; one with
    /// res5 = 0 (the kernel's: the MZ no-op alone) is an Image only.
    #[test]
    fn a_stamped_image_naming_a_pe_header_is_checked() {
        let mut file = [0u8; 4096];
        file[..128].copy_from_slice(&header(0, 0, FLAG_PAGE_4K, 4096));
        file[0..4].copy_from_slice(&crate::pe::MZ_NOP.to_le_bytes());
        ImageHeader::patch(&mut file, 0x10000).unwrap();
        file[crate::pe::LFANEW_OFFSET] = 0x40;
        assert_eq!(
            ImageHeader::patch(&mut file, 0x10000),
            Err(ImageError::BadPe(crate::pe::PeError::BadPeOffset { offset: 0x40 }))
        );
    }

    /// A stamp whose CRC field reads 0 is checked like any other: 0 is a CRC value, not "none"
    /// (seeded bug `image-crc-zero-skips-check` of `cargo xtask mutants`).
    #[test]
    fn a_stamped_crc_of_zero_is_checked_too() {
        let mut file = [0u8; 4096];
        file[..128].copy_from_slice(&header(0, 0, FLAG_PAGE_4K, 4096));
        ImageHeader::patch(&mut file, 0x10000).unwrap();
        let found = stamp_crc(&file);
        assert_ne!(found, 0);
        file[STAMP_OFFSET + 4..STAMP_OFFSET + 8].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(ImageHeader::parse(&file), Err(ImageError::Corrupted { stamped: 0, found }));
    }
}
