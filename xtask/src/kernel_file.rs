//! What a `--guest FILE` is, said before QEMU starts, and a compressed kernel unpacked as QEMU
//! unpacks one.
//!
//! The hypervisor (and QEMU's own loader) boots an arm64 Image (header magic `ARM\x64` at
//! 0x38) or a raw binary (anything else, loaded at RAM base + 0x80000). Files that are neither
//! would be loaded as raw binaries and fault at their first instruction, with nothing on the
//! console until the time limit; so the xtask looks first:
//!
//! * an arm64 Image (with or without an EFI stub: `MZ` at 0 and the magic at 0x38) boots;
//! * a gzip file (most distributions' `vmlinuz`) is unpacked as QEMU does for `-kernel` (at
//!   most [`MAX_UNPACKED`] bytes), and must hold an arm64 Image;
//! * an EFI zboot image (`MZ` + `zimg`, Fedora's `vmlinuz`) with a gzip payload is unpacked
//!   the same way; other payloads are refused with their name;
//! * an ELF file is refused, naming its machine (an arm64 ELF: turn it into an Image or a raw
//!   binary; QEMU gives an ELF `-kernel` no device tree);
//! * a PE file (`MZ`, and `PE\0\0` where its offset at 0x3c points) without the Image header
//!   is refused (it needs UEFI firmware);
//! * a guest bundle (`abi::bundle`, which the xtask writes under `target/guest/`) is refused:
//!   it is the hypervisor's initrd, made from a kernel, an initrd and a command line;
//! * anything else is a raw binary, and the run says so.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// The most a compressed kernel may unpack to (QEMU's `LOAD_IMAGE_MAX_GUNZIP_BYTES`).
pub const MAX_UNPACKED: usize = 64 << 20;

/// What a guest kernel file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// An arm64 Image (with or without an EFI stub).
    Image,
    /// gzip-compressed.
    Gzip,
    /// An EFI zboot image whose payload is compressed with this (e.g. `gzip`, `zstd`), at
    /// (offset, size) in the file.
    Zboot { compression: String, offset: usize, size: usize },
    /// An ELF file for this machine (`e_machine`).
    Elf { machine: u16 },
    /// A PE/COFF file that is not an arm64 Image.
    Pe,
    /// A guest bundle (`abi::bundle::MAGIC`).
    Bundle,
    /// None of the above: loaded as a raw binary.
    Raw,
}

/// Looks at the first bytes of a file.
pub fn identify(bytes: &[u8]) -> Kind {
    let at = |o: usize, n: usize| bytes.get(o..o + n);
    let u32_at = |o: usize| at(o, 4).map(|b| u32::from_le_bytes(b.try_into().unwrap()));
    // QEMU's rule, as the hypervisor reads it (`hypcore::load::Kernel::classify`): the magic
    // followed by something (a file that ends with the magic is a raw binary).
    if hypcore::load::Kernel::classify(bytes).has_magic() {
        return Kind::Image;
    }
    if at(0, 2) == Some(&[0x1f, 0x8b]) {
        return Kind::Gzip;
    }
    if abi::bundle::is_bundle(bytes) {
        return Kind::Bundle;
    }
    if at(0, 4) == Some(b"\x7fELF") {
        let machine = at(18, 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
        return Kind::Elf { machine };
    }
    if at(0, 2) == Some(b"MZ") {
        // EFI zboot (Linux drivers/firmware/efi/libstub/zboot-header.S): "zimg" at 4, payload
        // offset and size at 8 and 12, the compression's name at 24.
        if let (Some(b"zimg"), Some(offset), Some(size), Some(name)) = (at(4, 4), u32_at(8), u32_at(12), at(24, 32)) {
            let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
            return Kind::Zboot {
                compression: String::from_utf8_lossy(&name[..end]).into_owned(),
                offset: offset as usize,
                size: size as usize,
            };
        }
        // A PE file: `e_lfanew` leads to "PE\0\0". "MZ" alone is code (this project's raw
        // binaries start with the Image's "MZ" no-op, `abi::pe::MZ_NOP`).
        let pe = u32_at(abi::pe::LFANEW_OFFSET).and_then(|o| at(o as usize, 4));
        if pe == Some(b"PE\0\0") {
            return Kind::Pe;
        }
    }
    Kind::Raw
}

/// The name of an ELF machine, for messages.
fn machine_name(m: u16) -> String {
    match m {
        3 => "x86 (32-bit)".into(),
        40 => "32-bit Arm".into(),
        62 => "x86-64".into(),
        183 => "AArch64".into(),
        243 => "RISC-V".into(),
        m => format!("machine {m}"),
    }
}

/// Unpacks gzip data, refusing more than [`MAX_UNPACKED`] bytes.
pub fn gunzip(data: &[u8]) -> Result<Vec<u8>> {
    gunzip_limited(data, MAX_UNPACKED)
}

/// [`gunzip`] with another limit.
fn gunzip_limited(data: &[u8], limit: usize) -> Result<Vec<u8>> {
    // RFC 1952: ID1 ID2 CM FLG MTIME(4) XFL OS, then optional fields per FLG.
    anyhow::ensure!(data.len() >= 18 && data[..2] == [0x1f, 0x8b], "not gzip data");
    anyhow::ensure!(data[2] == 8, "gzip compression method {} (only deflate exists)", data[2]);
    let flg = data[3];
    let mut p = 10;
    if flg & 0x04 != 0 {
        let xlen = u16::from_le_bytes([data[p], *data.get(p + 1).context("truncated gzip header")?]) as usize;
        p += 2 + xlen;
    }
    for bit in [0x08, 0x10] {
        if flg & bit != 0 {
            let end = data.get(p..).and_then(|d| d.iter().position(|&c| c == 0)).context("truncated gzip header")?;
            p += end + 1;
        }
    }
    if flg & 0x02 != 0 {
        p += 2;
    }
    let body = data.get(p..).context("truncated gzip header")?;
    let out = miniz_oxide::inflate::decompress_to_vec_with_limit(body, limit).map_err(|e| match e.status {
        miniz_oxide::inflate::TINFLStatus::HasMoreOutput => {
            anyhow::anyhow!("it unpacks to more than {} MiB (QEMU's limit too)", limit >> 20)
        }
        s => anyhow::anyhow!("damaged gzip data ({s:?})"),
    })?;
    Ok(out)
}

/// The kernel file QEMU (or the hypervisor) should be given for `--guest PATH`: the file itself
/// when it is an Image or a raw binary (saying so for a raw one), an unpacked copy under
/// `target/guest/` when it is compressed; an error (a usage refusal, the caller's) when it is
/// something no arm64 loader boots.
pub fn prepare(path: &Path) -> Result<PathBuf> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let unpacked = match identify(&bytes) {
        Kind::Image => return Ok(path.to_path_buf()),
        Kind::Raw => {
            eprintln!(
                "xtask: --guest {}: no arm64 Image header: loaded as a raw binary (at RAM base + 0x80000, as QEMU \
                 loads one)",
                path.display()
            );
            return Ok(path.to_path_buf());
        }
        Kind::Elf { machine: 183 } => bail!(
            "--guest {}: an AArch64 ELF file: give the kernel as an arm64 Image or a raw binary (e.g. `objcopy -O \
             binary`); QEMU hands an ELF -kernel no device tree",
            path.display()
        ),
        Kind::Elf { machine } => {
            bail!("--guest {}: an ELF file for {}, not an arm64 kernel", path.display(), machine_name(machine))
        }
        Kind::Pe => bail!(
            "--guest {}: a PE/EFI executable without the arm64 Image header: it needs UEFI firmware; give an arm64 \
             Image",
            path.display()
        ),
        Kind::Bundle => bail!(
            "--guest {}: a guest bundle (what the xtask makes of --guest, --guest-initrd and --guest-append for the \
             hypervisor): give the kernel itself with --guest",
            path.display()
        ),
        Kind::Gzip => gunzip(&bytes).with_context(|| format!("--guest {}: gzip file", path.display()))?,
        Kind::Zboot { compression, offset, size } => {
            let payload = bytes.get(offset..offset.saturating_add(size)).with_context(|| {
                format!("--guest {}: EFI zboot image with its payload past the end", path.display())
            })?;
            if compression != "gzip" {
                bail!(
                    "--guest {}: an EFI zboot image with a {compression} payload: unpack it first (only gzip is \
                     unpacked here, as by QEMU)",
                    path.display()
                );
            }
            gunzip(payload).with_context(|| format!("--guest {}: the zboot image's gzip payload", path.display()))?
        }
    };
    if identify(&unpacked) != Kind::Image {
        bail!("--guest {}: unpacked, it is not an arm64 Image (no ARM\\x64 magic)", path.display());
    }
    let dir = crate::workspace_root().join("target/guest");
    std::fs::create_dir_all(&dir)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "kernel".into());
    let out = dir.join(format!("{name}.unpacked.img"));
    crate::write_if_changed(&out, &unpacked)?;
    eprintln!(
        "xtask: --guest {}: compressed arm64 Image, unpacked ({} KiB) into {}",
        path.display(),
        unpacked.len() >> 10,
        out.display()
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Vec<u8> {
        let mut i = vec![0u8; 8192];
        i[abi::image::MAGIC_OFFSET..abi::image::MAGIC_OFFSET + 4].copy_from_slice(&abi::image::MAGIC.to_le_bytes());
        i[100] = 7;
        i
    }

    fn gzip(data: &[u8], flags: u8) -> Vec<u8> {
        let mut g = vec![0x1f, 0x8b, 8, flags, 0, 0, 0, 0, 0, 3];
        if flags & 0x08 != 0 {
            g.extend_from_slice(b"vmlinux\0");
        }
        g.extend(miniz_oxide::deflate::compress_to_vec(data, 6));
        g.extend_from_slice(&[0; 8]); // CRC-32 and size (not checked: the Image is)
        g
    }

    #[test]
    fn kinds() {
        assert_eq!(identify(&image()), Kind::Image);
        let mut efi = image();
        efi[..2].copy_from_slice(b"MZ");
        assert_eq!(identify(&efi), Kind::Image, "an Image with an EFI stub is an Image");
        assert_eq!(identify(&gzip(b"x", 0)), Kind::Gzip);
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[18] = 62;
        assert_eq!(identify(&elf), Kind::Elf { machine: 62 });
        let mut pe = vec![0u8; 128];
        pe[..2].copy_from_slice(b"MZ");
        assert_eq!(identify(&pe), Kind::Raw, "MZ without a PE header: code (a raw binary's MZ no-op)");
        pe[0x3c] = 0x40;
        pe[0x40..0x44].copy_from_slice(b"PE\0\0");
        assert_eq!(identify(&pe), Kind::Pe);
        pe[0x3c] = 0x7e;
        assert_eq!(identify(&pe), Kind::Raw, "e_lfanew past the end");
        pe[0x3c] = 0x40;
        pe[4..8].copy_from_slice(b"zimg");
        pe[8..12].copy_from_slice(&64u32.to_le_bytes());
        pe[12..16].copy_from_slice(&32u32.to_le_bytes());
        pe[24..28].copy_from_slice(b"zstd");
        assert_eq!(identify(&pe), Kind::Zboot { compression: "zstd".into(), offset: 64, size: 32 });
        assert_eq!(identify(&[0x14, 0, 0, 0x10]), Kind::Raw);
        let mut bundle = vec![0u8; 4096];
        bundle[..8].copy_from_slice(&abi::bundle::MAGIC);
        assert_eq!(identify(&bundle), Kind::Bundle);
        assert_eq!(identify(&[]), Kind::Raw);
        // A file that ends with the magic is raw to QEMU and to the hypervisor: raw here too.
        assert_eq!(identify(&image()[..60]), Kind::Raw);
        assert_eq!(identify(&image()[..61]), Kind::Image);
    }

    #[test]
    fn gzip_unpacks_with_or_without_a_name_and_refuses_damage_and_bombs() {
        for flags in [0, 0x08] {
            assert_eq!(gunzip(&gzip(&image(), flags)).unwrap(), image());
        }
        let mut bad = gzip(&image(), 0);
        bad.truncate(20);
        assert!(gunzip(&bad).is_err());
        let big = gzip(&vec![0u8; (1 << 20) + 1], 0);
        assert!(format!("{:#}", gunzip_limited(&big, 1 << 20).unwrap_err()).contains("more than 1 MiB"));
        assert_eq!(MAX_UNPACKED, 64 << 20, "QEMU's LOAD_IMAGE_MAX_GUNZIP_BYTES");
    }

    #[test]
    fn prepare_says_what_it_cannot_boot() {
        let d = tempfile::tempdir().unwrap();
        let write = |n: &str, b: &[u8]| {
            let p = d.path().join(n);
            std::fs::write(&p, b).unwrap();
            p
        };
        let mut x86 = vec![0u8; 64];
        x86[..4].copy_from_slice(b"\x7fELF");
        x86[18] = 62;
        assert!(format!("{:#}", prepare(&write("x86.elf", &x86)).unwrap_err()).contains("ELF file for x86-64"));
        x86[18] = 183;
        assert!(format!("{:#}", prepare(&write("a.elf", &x86)).unwrap_err()).contains("AArch64 ELF"));
        let mut pe = vec![0u8; 128];
        pe[..2].copy_from_slice(b"MZ");
        pe[0x3c] = 0x40;
        pe[0x40..0x44].copy_from_slice(b"PE\0\0");
        assert!(format!("{:#}", prepare(&write("a.efi", &pe)).unwrap_err()).contains("UEFI"));
        let img = write("Image", &image());
        assert_eq!(prepare(&img).unwrap(), img);
        let out = prepare(&write("vmlinuz-gz", &gzip(&image(), 0x08))).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), image());
        assert!(format!("{:#}", prepare(&write("notimage.gz", &gzip(b"hello", 0))).unwrap_err())
            .contains("not an arm64 Image"));
    }
}
