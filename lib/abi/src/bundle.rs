//! The guest bundle: one file carrying a guest's kernel, its initramfs and its command line
//! through the single initrd slot a boot loader offers (QEMU `-initrd`; on the Raspberry Pi 5
//! `initramfs bundle.img followkernel` in config.txt). The xtask writes it
//! (`cargo xtask run --guest K --guest-initrd I --guest-append "…"`), the hypervisor unpacks it:
//! the kernel is copied to where the boot protocol wants it, the initramfs stays where the boot
//! loader put it (inside guest RAM, named in the guest's `/chosen`), the command line becomes
//! the guest's `bootargs` (followed by the non-`hyp.` words of the boot loader's command line).
//!
//! Layout, little-endian, offsets from the bundle's first byte:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0x00 | 8 | magic `"PGTLBNDL"` |
//! | 0x08 | 4 | version, 1 |
//! | 0x0c | 4 | reserved, 0 |
//! | 0x10 | 8 | total size in bytes (header and every part) |
//! | 0x18 | 16 | kernel: offset, size (size > 0) |
//! | 0x28 | 16 | initramfs: offset, size (0, 0: none) |
//! | 0x38 | 16 | command line: offset, size (0, 0: none; UTF-8, no NUL) |
//! | 0x48 | 4096 - 0x48 | reserved, 0 |
//!
//! Every part starts on a [`ALIGN`] boundary after the [`HEADER_SIZE`]-byte header, in the order
//! kernel, initramfs, command line, and lies inside the total size; parts never overlap. The
//! kernel is an arm64 Linux `Image` (magic `ARMd` at 0x38) or a raw binary, which is loaded as
//! QEMU loads one (RAM base + 0x80000, x0 = DTB).

/// First bytes of a bundle.
pub const MAGIC: [u8; 8] = *b"PGTLBNDL";
/// The format version this code reads and writes.
pub const VERSION: u32 = 1;
/// Bytes of the header (the first part starts here).
pub const HEADER_SIZE: u64 = 4096;
/// Alignment of every part.
pub const ALIGN: u64 = 4096;

/// One part: `size` bytes at `offset` from the bundle's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// Offset from the bundle's first byte.
    pub offset: u64,
    /// Length in bytes.
    pub size: u64,
}

impl Part {
    fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)
    }

    /// The part's bytes in `bundle` (which [`parse`] accepted).
    pub fn bytes<'a>(&self, bundle: &'a [u8]) -> &'a [u8] {
        &bundle[self.offset as usize..(self.offset + self.size) as usize]
    }
}

/// A checked bundle header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bundle {
    /// Bytes the bundle occupies.
    pub total_size: u64,
    /// The guest kernel.
    pub kernel: Part,
    /// The initramfs, if any.
    pub initrd: Option<Part>,
    /// The command line, if any.
    pub cmdline: Option<Part>,
}

/// Why bytes are not a usable bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BundleError {
    /// Fewer bytes than a header.
    TooShort {
        /// Bytes there are.
        len: u64,
    },
    /// No bundle magic.
    BadMagic,
    /// A version this code does not read.
    Version(u32),
    /// A reserved field is not 0.
    Reserved {
        /// Offset of the first non-zero reserved byte.
        offset: u64,
    },
    /// The header claims more bytes than the boot loader handed over (a truncated file), or
    /// fewer than its own header.
    TotalSize {
        /// Bytes the header claims.
        claimed: u64,
        /// Bytes available.
        len: u64,
    },
    /// The kernel part is empty.
    NoKernel,
    /// A part is not [`ALIGN`]ed, starts inside the header, ends past the total size, or
    /// overlaps the part before it.
    BadPart {
        /// `"kernel"`, `"initrd"` or `"cmdline"`.
        part: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// The command line is not UTF-8 or contains a NUL.
    BadCmdline,
}

impl core::fmt::Display for BundleError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TooShort { len } => write!(f, "{len} bytes: shorter than a {HEADER_SIZE}-byte bundle header"),
            Self::BadMagic => write!(f, "no bundle magic \"PGTLBNDL\""),
            Self::Version(v) => write!(f, "bundle version {v}, this hypervisor reads version {VERSION}"),
            Self::Reserved { offset } => write!(f, "reserved header byte at {offset:#x} is not 0"),
            Self::TotalSize { claimed, len } => {
                write!(f, "the header claims {claimed} bytes but {len} were loaded (a truncated or padded-short file?)")
            }
            Self::NoKernel => write!(f, "the bundle has no kernel"),
            Self::BadPart { part, why } => write!(f, "bundle {part} part: {why}"),
            Self::BadCmdline => write!(f, "the bundle's command line is not UTF-8 without NUL"),
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32_at(b, at)) | (u64::from(u32_at(b, at + 4)) << 32)
}

/// Whether `bytes` start with the bundle magic (the rest may still be wrong: [`parse`]).
pub fn is_bundle(bytes: &[u8]) -> bool {
    bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] == MAGIC
}

/// Checks the header of the bundle held in `bytes` (the whole region the boot loader filled; it
/// may be longer than the bundle) and every part's place. Never panics.
pub fn parse(bytes: &[u8]) -> Result<Bundle, BundleError> {
    let len = bytes.len() as u64;
    if len < HEADER_SIZE {
        return Err(if is_bundle(bytes) { BundleError::TooShort { len } } else { BundleError::BadMagic });
    }
    if !is_bundle(bytes) {
        return Err(BundleError::BadMagic);
    }
    let version = u32_at(bytes, 8);
    if version != VERSION {
        return Err(BundleError::Version(version));
    }
    let reserved = (0x0c..0x10).chain(0x48..HEADER_SIZE as usize);
    if let Some(offset) = reserved.into_iter().find(|&i| bytes[i] != 0) {
        return Err(BundleError::Reserved { offset: offset as u64 });
    }
    let total_size = u64_at(bytes, 0x10);
    if total_size > len || total_size < HEADER_SIZE {
        return Err(BundleError::TotalSize { claimed: total_size, len });
    }
    let part = |at: usize| Part { offset: u64_at(bytes, at), size: u64_at(bytes, at + 8) };
    let (kernel, initrd, cmdline) = (part(0x18), part(0x28), part(0x38));
    if kernel.size == 0 {
        return Err(BundleError::NoKernel);
    }
    let mut floor = HEADER_SIZE;
    let mut check = |name: &'static str, p: Part| -> Result<Option<Part>, BundleError> {
        if p.size == 0 {
            return if p.offset == 0 {
                Ok(None)
            } else {
                Err(BundleError::BadPart { part: name, why: "empty with an offset" })
            };
        }
        let bad = |why| BundleError::BadPart { part: name, why };
        if !p.offset.is_multiple_of(ALIGN) {
            return Err(bad("offset not 4 KiB aligned"));
        }
        if p.offset < floor {
            return Err(bad("starts inside the header or the part before it"));
        }
        let end = p.end().filter(|&e| e <= total_size).ok_or(bad("ends past the bundle's total size"))?;
        floor = end;
        Ok(Some(p))
    };
    check("kernel", kernel)?;
    let initrd = check("initrd", initrd)?;
    let cmdline = check("cmdline", cmdline)?;
    if let Some(c) = cmdline {
        match core::str::from_utf8(c.bytes(bytes)) {
            Ok(s) if !s.contains('\0') => {}
            _ => return Err(BundleError::BadCmdline),
        }
    }
    Ok(Bundle { total_size, kernel, initrd, cmdline })
}

impl Bundle {
    /// The command line ("" without one). `bytes` is what [`parse`] accepted.
    pub fn cmdline_str<'a>(&self, bytes: &'a [u8]) -> &'a str {
        self.cmdline.map(|c| core::str::from_utf8(c.bytes(bytes)).unwrap_or("")).unwrap_or("")
    }
}

/// The length [`write`] gives a bundle of parts that long (0: no such part): what a loader must
/// make room for, known before the bundle is written.
pub fn len(kernel: u64, initrd: u64, cmdline: u64) -> u64 {
    let mut end = HEADER_SIZE;
    for part in [kernel, initrd, cmdline] {
        if part != 0 {
            end = end.div_ceil(ALIGN) * ALIGN + part;
        }
    }
    end
}

/// Writes a bundle (host side).
#[cfg(feature = "std")]
pub fn write(kernel: &[u8], initrd: Option<&[u8]>, cmdline: Option<&str>) -> Result<std::vec::Vec<u8>, BundleError> {
    use std::vec::Vec;
    if kernel.is_empty() {
        return Err(BundleError::NoKernel);
    }
    if cmdline.is_some_and(|c| c.contains('\0')) {
        return Err(BundleError::BadCmdline);
    }
    let mut out = std::vec![0u8; HEADER_SIZE as usize];
    let place = |out: &mut Vec<u8>, data: &[u8]| -> (u64, u64) {
        if data.is_empty() {
            return (0, 0);
        }
        let at = (out.len() as u64).div_ceil(ALIGN) * ALIGN;
        out.resize(at as usize, 0);
        out.extend_from_slice(data);
        (at, data.len() as u64)
    };
    let k = place(&mut out, kernel);
    let i = place(&mut out, initrd.unwrap_or(&[]));
    let c = place(&mut out, cmdline.unwrap_or("").as_bytes());
    let total = out.len() as u64;
    out[..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&VERSION.to_le_bytes());
    for (at, v) in [(0x10, total), (0x18, k.0), (0x20, k.1), (0x28, i.0), (0x30, i.1), (0x38, c.0), (0x40, c.1)] {
        out[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

#[cfg(all(test, feature = "std"))]
mod tests {
    #[test]
    fn len_is_what_write_writes() {
        for (k, i, c) in [(1usize, 0usize, 0usize), (4096, 1, 0), (5000, 0, 7), (4095, 8193, 4096), (1, 1, 1)] {
            let cmd = "x".repeat(c);
            let b = super::write(
                &std::vec![1u8; k],
                (i > 0).then(|| std::vec![2u8; i]).as_deref(),
                (c > 0).then_some(cmd.as_str()),
            )
            .unwrap();
            assert_eq!(super::len(k as u64, i as u64, c as u64), b.len() as u64, "{k} {i} {c}");
        }
    }

    use super::*;
    use std::vec::Vec;

    fn sample() -> Vec<u8> {
        write(&[0xaa; 5000], Some(&[0xbb; 300]), Some("console=ttyAMA0 panic=-1")).unwrap()
    }

    #[test]
    fn round_trip() {
        let b = sample();
        let h = parse(&b).unwrap();
        assert_eq!(h.total_size, b.len() as u64);
        assert_eq!(h.kernel, Part { offset: 4096, size: 5000 });
        assert_eq!(h.initrd, Some(Part { offset: 3 * 4096, size: 300 }));
        assert_eq!(h.cmdline.unwrap().offset, 4 * 4096);
        assert_eq!(h.kernel.bytes(&b), &[0xaa; 5000][..]);
        assert_eq!(h.initrd.unwrap().bytes(&b), &[0xbb; 300][..]);
        assert_eq!(h.cmdline_str(&b), "console=ttyAMA0 panic=-1");
        // The boot loader may hand over more than the bundle (a page-rounded initrd).
        let mut padded = b.clone();
        padded.resize(b.len() + 4096, 0x77);
        assert_eq!(parse(&padded), Ok(h));
        // Kernel only.
        let k = write(&[1; 10], None, None).unwrap();
        let h = parse(&k).unwrap();
        assert_eq!((h.initrd, h.cmdline, h.cmdline_str(&k)), (None, None, ""));
        assert!(!is_bundle(b"ARMd") && is_bundle(&k));
    }

    fn set(b: &mut [u8], at: usize, v: u64) {
        b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn little_endian_words_read_at_their_offset() {
        let b: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
        assert_eq!(u64_at(&b, 0), 0x0807_0605_0403_0201);
        assert_eq!(u64_at(&b, 8), 0x100f_0e0d_0c0b_0a09);
        assert_eq!(u32_at(&b, 4), 0x0807_0605);
    }

    #[test]
    fn every_malformation_is_an_error() {
        let good = sample();
        let len = good.len() as u64;
        assert_eq!(parse(&good[..100]), Err(BundleError::TooShort { len: 100 }));
        assert_eq!(parse(&[0u8; 8192]), Err(BundleError::BadMagic));
        assert_eq!(parse(b"ARMd"), Err(BundleError::BadMagic));
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut b = good.clone();
            f(&mut b);
            parse(&b)
        };
        assert_eq!(bad(&|b| b[8] = 2), Err(BundleError::Version(2)));
        assert_eq!(bad(&|b| b[0x0d] = 1), Err(BundleError::Reserved { offset: 0x0d }));
        assert_eq!(bad(&|b| b[0xfff] = 1), Err(BundleError::Reserved { offset: 0xfff }));
        // Truncated: the header claims more than was loaded.
        assert_eq!(parse(&good[..good.len() - 1]), Err(BundleError::TotalSize { claimed: len, len: len - 1 }));
        assert_eq!(bad(&|b| set(b, 0x10, 100)), Err(BundleError::TotalSize { claimed: 100, len }));
        assert_eq!(bad(&|b| set(b, 0x20, 0)), Err(BundleError::NoKernel));
        // The header alone is not too short; a total size of just the header leaves no room.
        assert_eq!(parse(&good[..4096]), Err(BundleError::TotalSize { claimed: len, len: 4096 }));
        let part = |p, why| Err(BundleError::BadPart { part: p, why });
        assert_eq!(bad(&|b| set(b, 0x10, 4096)), part("kernel", "ends past the bundle's total size"));
        assert_eq!(bad(&|b| set(b, 0x18, 4097)), part("kernel", "offset not 4 KiB aligned"));
        assert_eq!(bad(&|b| set(b, 0x18, 0)), part("kernel", "starts inside the header or the part before it"));
        assert_eq!(bad(&|b| set(b, 0x28, 4096)), part("initrd", "starts inside the header or the part before it"));
        assert_eq!(bad(&|b| set(b, 0x30, u64::MAX)), part("initrd", "ends past the bundle's total size"));
        assert_eq!(bad(&|b| set(b, 0x40, len)), part("cmdline", "ends past the bundle's total size"));
        assert_eq!(bad(&|b| set(b, 0x40, 0)), part("cmdline", "empty with an offset"));
        // One byte past the total size, inside the page padding a loader may add, is past it
        // (seeded bug `bundle-part-ends-in-padding` of `cargo xtask mutants`).
        let csize = u64::from_le_bytes(good[0x40..0x48].try_into().unwrap());
        assert!(!len.is_multiple_of(4096), "the sample ends inside a page");
        assert_eq!(bad(&|b| set(b, 0x40, csize + 1)), part("cmdline", "ends past the bundle's total size"));
        let c = 4 * 4096;
        assert_eq!(bad(&|b| b[c] = 0), Err(BundleError::BadCmdline));
        assert_eq!(bad(&|b| b[c] = 0xff), Err(BundleError::BadCmdline));
        assert_eq!(write(&[], None, None), Err(BundleError::NoKernel));
        // Every error says something.
        extern crate std;
        use std::string::ToString;
        for e in [BundleError::BadMagic, BundleError::NoKernel, BundleError::Version(2), BundleError::BadCmdline] {
            assert!(e.to_string().len() > 10, "{e:?}");
        }
        assert_eq!(write(&[1], None, Some("a\0b")), Err(BundleError::BadCmdline));
    }
}
