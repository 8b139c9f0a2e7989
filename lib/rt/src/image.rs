//! The Linux arm64 `Image` header (Documentation/arch/arm64/booting.rst).
//!
//! ```text
//! 0x00 code0 / code1   (a branch to the real entry)
//! 0x08 text_offset     u64 LE: offset from a 2 MiB aligned base where the image must sit
//! 0x10 image_size      u64 LE: bytes the image needs in memory, BSS included
//! 0x18 flags           u64 LE: bit 0 big-endian, bits 1-2 page size (1 = 4K), bit 3 anywhere
//! 0x20 res2..res4
//! 0x38 magic           "ARM\x64"
//! 0x3c res5            (PE header offset, 0 here)
//! ```
//! QEMU only hands x0 = DTB (and loads `-initrd`) to a file with this header, so both binaries
//! carry it; the hypervisor uses [`ImageHeader::parse`] to load the guest kernel and the xtask
//! uses [`ImageHeader::patch`] to write `image_size` once the ELF is linked.

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
        }
    }
}

fn read_u64(b: &[u8], off: usize) -> u64 {
    let mut v = [0u8; 8];
    v.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(v)
}

impl ImageHeader {
    /// Validates the header of a whole Image file (`file` is the complete image, so its length can
    /// be checked against `image_size`). A pre-3.17 header with `image_size == 0` is refused: the
    /// loader could not know how much memory the BSS needs.
    pub fn parse(file: &[u8]) -> Result<Self, ImageError> {
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
        Ok(h)
    }

    /// Whether the image may sit at any 2 MiB aligned base (flag bit 3).
    pub fn anywhere(&self) -> bool {
        self.flags & FLAG_ANYWHERE != 0
    }

    /// Writes `image_size` into a linked image's header (the linker cannot: the size includes the
    /// BSS, which a raw binary does not contain). Validates the result.
    pub fn patch(file: &mut [u8], image_size: u64) -> Result<Self, ImageError> {
        if file.len() < HEADER_SIZE {
            return Err(ImageError::TooShort { len: file.len() });
        }
        file[16..24].copy_from_slice(&image_size.to_le_bytes());
        Self::parse(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn patch_writes_the_size() {
        let mut b = header(0, 0, FLAG_PAGE_4K, 128);
        assert!(ImageHeader::parse(&b).is_err());
        let h = ImageHeader::patch(&mut b, 0x2000).unwrap();
        assert_eq!(h.image_size, 0x2000);
    }
}
