//! The transfer header the host sends first. Little-endian, 60 bytes:
//!
//! ```text
//!  0  magic            "pgtlabCB"
//!  8  version          1
//! 12  flags            bit 0: the Images are sent DEFLATE-compressed (RFC 1951, no wrapper)
//! 16  hyp_len          bytes of the hypervisor Image file
//! 20  hyp_wire_len     bytes of it on the wire (hyp_len when not compressed)
//! 24  hyp_text_offset  its header's text_offset (where it sits above a 2 MiB aligned base)
//! 28  hyp_image_size   its header's image_size (memory it needs from there, BSS included)
//! 32  hyp_crc          CRC-32 of the hypervisor Image file (as it is once inflated)
//! 36  kernel_len       bytes of the guest kernel Image file
//! 40  kernel_wire_len  bytes of it on the wire
//! 44  kernel_crc       its CRC-32
//! 48  args_len         bytes of the boot arguments (0: keep the firmware's), never compressed
//! 52  args_crc         their CRC-32
//! 56  header_crc       CRC-32 of bytes 0..56
//! ```
//!
//! Compression halves the transfer of this project's Images (about 2:1): 23 s instead of 45 s
//! at 115200 baud. The CRC-32s cover the inflated files, so they check the inflater too.

use abi::crc32::crc32;
use core::fmt;

/// First bytes of every transfer.
pub const MAGIC: [u8; 8] = *b"pgtlabCB";
/// Protocol version this crate speaks.
pub const VERSION: u32 = 1;
/// Bytes of an encoded [`Header`].
pub const HEADER_LEN: usize = 60;
/// Longest boot-argument string accepted.
pub const MAX_ARGS: u32 = 4096;
/// [`Header::flags`]: the Images are DEFLATE streams.
pub const FLAG_DEFLATE: u32 = 1;
/// Smallest file that can hold an arm64 Image header.
const MIN_IMAGE: u32 = 64;
/// Offset of the header's own CRC.
const CRC_AT: usize = HEADER_LEN - 4;

/// What the host is about to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    /// [`FLAG_DEFLATE`] or 0.
    pub flags: u32,
    /// Bytes of the hypervisor Image file.
    pub hyp_len: u32,
    /// Bytes of it on the wire.
    pub hyp_wire_len: u32,
    /// The hypervisor Image header's `text_offset`.
    pub hyp_text_offset: u32,
    /// The hypervisor Image header's `image_size`.
    pub hyp_image_size: u32,
    /// CRC-32 of the hypervisor Image file.
    pub hyp_crc: u32,
    /// Bytes of the guest kernel Image file.
    pub kernel_len: u32,
    /// Bytes of it on the wire.
    pub kernel_wire_len: u32,
    /// CRC-32 of the guest kernel Image file.
    pub kernel_crc: u32,
    /// Bytes of the boot arguments.
    pub args_len: u32,
    /// CRC-32 of the boot arguments.
    pub args_crc: u32,
}

/// Why a header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderError {
    /// The first 8 bytes are not [`MAGIC`].
    BadMagic,
    /// Another protocol version.
    Version {
        /// The version the host sent.
        found: u32,
    },
    /// The header's own CRC does not match: it was damaged on the way.
    Checksum {
        /// CRC-32 the header carries.
        expected: u32,
        /// CRC-32 of what arrived.
        found: u32,
    },
    /// An Image shorter than its 64-byte header.
    TooShort {
        /// `"hypervisor"` or `"kernel"`.
        what: &'static str,
        /// Its length.
        len: u32,
    },
    /// The hypervisor's `image_size` is smaller than its file.
    ImageSize {
        /// `hyp_image_size`.
        image_size: u32,
        /// `hyp_len`.
        len: u32,
    },
    /// `text_offset` not 4 KiB aligned below 2 MiB.
    TextOffset {
        /// The value sent.
        text_offset: u32,
    },
    /// Boot arguments longer than [`MAX_ARGS`].
    ArgsTooLong {
        /// Their length.
        len: u32,
    },
    /// Flag bits this loader does not know.
    Flags {
        /// The flags sent.
        flags: u32,
    },
    /// Wire and file lengths that cannot both be right (uncompressed but different; or empty).
    WireLength {
        /// `"hypervisor"` or `"kernel"`.
        what: &'static str,
        /// Bytes on the wire.
        wire: u32,
        /// Bytes of the file.
        len: u32,
    },
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BadMagic => write!(f, "header: no magic"),
            Self::Version { found } => {
                write!(f, "header: protocol version {found}, this loader speaks {VERSION}: rebuild it (cargo xtask flash --chainloader)")
            }
            Self::Checksum { expected, found } => {
                write!(f, "header: checksum {found:#010x}, header says {expected:#010x}: damaged on the line")
            }
            Self::TooShort { what, len } => {
                write!(f, "header: the {what} is {len} bytes, shorter than an Image header")
            }
            Self::ImageSize { image_size, len } => {
                write!(f, "header: hypervisor image_size {image_size:#x} is smaller than its file ({len:#x} bytes)")
            }
            Self::TextOffset { text_offset } => {
                write!(f, "header: hypervisor text_offset {text_offset:#x} is not 4 KiB aligned below 2 MiB")
            }
            Self::ArgsTooLong { len } => write!(f, "header: {len} bytes of boot arguments (at most {MAX_ARGS})"),
            Self::Flags { flags } => write!(f, "header: unknown flags {flags:#x}"),
            Self::WireLength { what, wire, len } => {
                write!(f, "header: the {what} is {len} bytes but {wire} on the wire, without compression")
            }
        }
    }
}

fn put(b: &mut [u8; HEADER_LEN], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn get(b: &[u8; HEADER_LEN], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

impl Header {
    /// The 48 bytes on the wire.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..8].copy_from_slice(&MAGIC);
        for (i, v) in [
            VERSION,
            self.flags,
            self.hyp_len,
            self.hyp_wire_len,
            self.hyp_text_offset,
            self.hyp_image_size,
            self.hyp_crc,
            self.kernel_len,
            self.kernel_wire_len,
            self.kernel_crc,
            self.args_len,
            self.args_crc,
        ]
        .into_iter()
        .enumerate()
        {
            put(&mut b, 8 + 4 * i, v);
        }
        let c = crc32(&b[..CRC_AT]);
        put(&mut b, CRC_AT, c);
        b
    }

    /// Checks and decodes 48 bytes from the wire.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, HeaderError> {
        if b[..8] != MAGIC {
            return Err(HeaderError::BadMagic);
        }
        let (expected, found) = (get(b, CRC_AT), crc32(&b[..CRC_AT]));
        if expected != found {
            return Err(HeaderError::Checksum { expected, found });
        }
        let version = get(b, 8);
        if version != VERSION {
            return Err(HeaderError::Version { found: version });
        }
        let h = Header {
            flags: get(b, 12),
            hyp_len: get(b, 16),
            hyp_wire_len: get(b, 20),
            hyp_text_offset: get(b, 24),
            hyp_image_size: get(b, 28),
            hyp_crc: get(b, 32),
            kernel_len: get(b, 36),
            kernel_wire_len: get(b, 40),
            kernel_crc: get(b, 44),
            args_len: get(b, 48),
            args_crc: get(b, 52),
        };
        if h.flags & !FLAG_DEFLATE != 0 {
            return Err(HeaderError::Flags { flags: h.flags });
        }
        for (what, wire, len) in
            [("hypervisor", h.hyp_wire_len, h.hyp_len), ("kernel", h.kernel_wire_len, h.kernel_len)]
        {
            if wire == 0 || (!h.compressed() && wire != len) {
                return Err(HeaderError::WireLength { what, wire, len });
            }
        }
        for (what, len) in [("hypervisor", h.hyp_len), ("kernel", h.kernel_len)] {
            if len < MIN_IMAGE {
                return Err(HeaderError::TooShort { what, len });
            }
        }
        if h.hyp_image_size < h.hyp_len {
            return Err(HeaderError::ImageSize { image_size: h.hyp_image_size, len: h.hyp_len });
        }
        if !h.hyp_text_offset.is_multiple_of(4096) || h.hyp_text_offset >= 2 << 20 {
            return Err(HeaderError::TextOffset { text_offset: h.hyp_text_offset });
        }
        if h.args_len > MAX_ARGS {
            return Err(HeaderError::ArgsTooLong { len: h.args_len });
        }
        Ok(h)
    }

    /// Bytes that follow the header: arguments, hypervisor, kernel, as sent.
    pub fn payload_len(&self) -> u64 {
        u64::from(self.args_len) + u64::from(self.hyp_wire_len) + u64::from(self.kernel_wire_len)
    }

    /// Whether the Images come DEFLATE-compressed.
    pub fn compressed(&self) -> bool {
        self.flags & FLAG_DEFLATE != 0
    }
}

/// Finds [`MAGIC`] in a byte stream, one byte at a time.
#[derive(Debug, Clone, Default)]
pub struct MagicScanner {
    matched: usize,
}

impl MagicScanner {
    /// A scanner that has seen nothing.
    pub const fn new() -> Self {
        Self { matched: 0 }
    }

    /// Feeds one byte; true when it completes the magic (the scanner then starts over).
    pub fn push(&mut self, b: u8) -> bool {
        // The magic has no proper prefix that is also a suffix except through its own first
        // byte, so on a mismatch the byte can only restart a match.
        if b == MAGIC[self.matched] {
            self.matched += 1;
        } else {
            self.matched = usize::from(b == MAGIC[0]);
        }
        if self.matched == MAGIC.len() {
            self.matched = 0;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            flags: FLAG_DEFLATE,
            hyp_wire_len: 119_809,
            kernel_wire_len: 142_091,
            hyp_len: 242_768,
            hyp_text_offset: 0,
            hyp_image_size: 0x4b_e000,
            hyp_crc: 0x1234_5678,
            kernel_len: 280_824,
            kernel_crc: 0x9abc_def0,
            args_len: 11,
            args_crc: 0x0bad_cafe,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        let b = h.encode();
        assert_eq!(&b[..8], b"pgtlabCB");
        assert_eq!(Header::decode(&b), Ok(h));
        assert_eq!(h.payload_len(), 11 + 119_809 + 142_091);
        assert!(h.compressed());
    }

    #[test]
    fn every_damaged_byte_is_caught() {
        let good = sample().encode();
        for i in 0..HEADER_LEN {
            for bit in 0..8 {
                let mut b = good;
                b[i] ^= 1 << bit;
                assert!(Header::decode(&b).is_err(), "flip of bit {bit} in byte {i} accepted");
            }
        }
    }

    #[test]
    fn refuses_inconsistent_headers() {
        let with = |f: fn(&mut Header)| {
            let mut h = sample();
            f(&mut h);
            Header::decode(&h.encode())
        };
        assert_eq!(with(|h| h.kernel_len = 10), Err(HeaderError::TooShort { what: "kernel", len: 10 }));
        assert_eq!(with(|h| h.hyp_len = 63), Err(HeaderError::TooShort { what: "hypervisor", len: 63 }));
        assert!(matches!(with(|h| h.hyp_image_size = 100), Err(HeaderError::ImageSize { .. })));
        assert!(matches!(with(|h| h.hyp_text_offset = 0x800), Err(HeaderError::TextOffset { .. })));
        assert!(matches!(with(|h| h.hyp_text_offset = 2 << 20), Err(HeaderError::TextOffset { .. })));
        assert_eq!(with(|h| h.args_len = MAX_ARGS + 1), Err(HeaderError::ArgsTooLong { len: MAX_ARGS + 1 }));
        assert!(with(|h| h.args_len = MAX_ARGS).is_ok());
        assert_eq!(with(|h| h.flags = 2), Err(HeaderError::Flags { flags: 2 }));
        assert!(matches!(with(|h| h.kernel_wire_len = 0), Err(HeaderError::WireLength { what: "kernel", .. })));
        assert!(matches!(
            with(|h| {
                h.flags = 0;
                h.hyp_wire_len = h.hyp_len + 1;
                h.kernel_wire_len = h.kernel_len;
            }),
            Err(HeaderError::WireLength { what: "hypervisor", .. })
        ));
        assert!(with(|h| {
            h.flags = 0;
            h.hyp_wire_len = h.hyp_len;
            h.kernel_wire_len = h.kernel_len;
        })
        .is_ok());
        // The limits themselves are accepted: the smallest image, an image_size of exactly the
        // file's length.
        assert!(with(|h| h.kernel_len = MIN_IMAGE).is_ok());
        assert!(with(|h| h.hyp_len = MIN_IMAGE).is_ok());
        assert!(with(|h| h.hyp_image_size = h.hyp_len).is_ok());
        assert!(matches!(with(|h| h.hyp_image_size = h.hyp_len - 1), Err(HeaderError::ImageSize { .. })));
        // Each refusal says what and by how much.
        extern crate std;
        use std::string::ToString;
        let e = with(|h| h.kernel_len = 10).unwrap_err().to_string();
        assert!(e.contains("kernel") && e.contains("10"), "{e}");
        let mut b = sample().encode();
        put(&mut b, 8, 2);
        let c = crc32(&b[..CRC_AT]);
        put(&mut b, CRC_AT, c);
        assert_eq!(Header::decode(&b), Err(HeaderError::Version { found: 2 }));
    }

    #[test]
    fn scanner_finds_the_magic_after_noise() {
        let mut s = MagicScanner::new();
        let stream: &[u8] = b"\r\nxx ppgtlab pgtlabCpgtlabCB";
        let hits: usize = stream.iter().filter(|&&b| s.push(b)).count();
        assert_eq!(hits, 1);
        let mut s = MagicScanner::new();
        let end = stream.iter().position(|&b| s.push(b)).unwrap();
        assert_eq!(end, stream.len() - 1);
        // Back to back.
        let mut s = MagicScanner::new();
        assert_eq!([MAGIC, MAGIC].concat().iter().filter(|&&b| s.push(b)).count(), 2);
    }
}
