//! Builds the hypervisor and the kernel for `aarch64-unknown-none` and turns each ELF into a
//! Linux arm64 Image: the PT_LOAD segments laid out from the link address (0), with the header's
//! `image_size` set to the end of the BSS. The ELF is checked first: a position-independent image
//! may only carry `R_AARCH64_RELATIVE` dynamic relocations, the only kind `lib/rt` applies at boot.

use crate::toolchain::{CrossToolchain, TARGET};
use crate::workspace_root;
use anyhow::{bail, ensure, Context, Result};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader};
use object::{Endianness, Object, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The bare-metal binaries: the two that boot, and the serial chainloader (`cargo xtask
/// chainboot`, `cargo xtask flash --chainloader`).
pub const BINARIES: [&str; 3] = ["hypervisor", "kernel", "chainloader"];

/// Built images and their ELF files (the ELF files have the symbols for backtraces).
#[derive(Debug, Clone)]
pub struct Images {
    pub hypervisor: PathBuf,
    pub kernel: PathBuf,
    pub hypervisor_elf: PathBuf,
    pub kernel_elf: PathBuf,
}

/// Where the cross build puts its output (apart from the host build: another rustc).
pub fn cross_target_dir() -> PathBuf {
    workspace_root().join("target/cross")
}

/// Where the Images go.
pub fn images_dir() -> PathBuf {
    workspace_root().join("target/images")
}

/// The chainloader's Image, written by every [`build`].
pub fn chainloader_image() -> PathBuf {
    images_dir().join("chainloader.img")
}

/// Builds the binaries (release profile, with debug info) and writes their Images.
pub fn build(tc: &CrossToolchain, features: &[String]) -> Result<Images> {
    let t0 = Instant::now();
    eprintln!("xtask: building {} for {TARGET} with {}", BINARIES.join(" + "), tc.description);
    let mut cmd = tc.cargo("build");
    cmd.current_dir(workspace_root()).arg("--release");
    for bin in BINARIES {
        cmd.args(["-p", bin]);
    }
    cmd.arg("--target-dir").arg(cross_target_dir());
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    let status = cmd.status().with_context(|| format!("running {}", tc.cargo.display()))?;
    ensure!(status.success(), "cross build failed ({status})");
    let out = cross_target_dir().join(TARGET).join("release");
    std::fs::create_dir_all(images_dir())?;
    let mut paths = Vec::new();
    for bin in BINARIES {
        let elf = out.join(bin);
        let img = images_dir().join(format!("{bin}.img"));
        let bytes = std::fs::read(&elf).with_context(|| format!("reading {}", elf.display()))?;
        let image = elf_to_image(&bytes).with_context(|| format!("turning {} into an Image", elf.display()))?;
        std::fs::write(&img, &image)?;
        paths.push((img, elf));
    }
    eprintln!("xtask: images in {} ({:.1} s)", images_dir().display(), t0.elapsed().as_secs_f64());
    let (k, h) = (paths[1].clone(), paths[0].clone());
    Ok(Images { hypervisor: h.0, hypervisor_elf: h.1, kernel: k.0, kernel_elf: k.1 })
}

/// ELF (linked at 0 with lib/rt/link.ld) -> arm64 Image bytes.
pub fn elf_to_image(data: &[u8]) -> Result<Vec<u8>> {
    let file = ElfFile64::<Endianness>::parse(data).context("not a 64-bit ELF file")?;
    let endian = file.endian();
    let header = file.elf_header();
    ensure!(header.e_machine(endian) == elf::EM_AARCH64, "not an AArch64 ELF");
    check_relocations(&file)?;
    let mut image = Vec::new();
    for ph in header.program_headers(endian, data)? {
        if ph.p_type(endian) != elf::PT_LOAD || ph.p_filesz(endian) == 0 {
            continue;
        }
        let vaddr = ph.p_vaddr(endian) as usize;
        let bytes = ph.data(endian, data).map_err(|_| anyhow::anyhow!("segment data out of bounds"))?;
        if image.len() < vaddr + bytes.len() {
            image.resize(vaddr + bytes.len(), 0);
        }
        image[vaddr..vaddr + bytes.len()].copy_from_slice(bytes);
    }
    let end = file
        .symbols()
        .find(|s| s.name() == Ok("__image_end"))
        .context("no __image_end symbol: was the image linked with lib/rt/link.ld?")?
        .address();
    ensure!(end as usize >= image.len(), "__image_end {end:#x} lies before the end of the loaded data");
    rt::image::ImageHeader::patch(&mut image, end).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(image)
}

fn check_relocations(file: &ElfFile64<Endianness>) -> Result<()> {
    let endian = file.endian();
    let data = file.data();
    for section in file.elf_section_table().iter() {
        if section.sh_type(endian) != elf::SHT_RELA || section.sh_flags(endian) & u64::from(elf::SHF_ALLOC) == 0 {
            continue;
        }
        let relas: &[elf::Rela64<Endianness>] =
            section.data_as_array(endian, data).map_err(|_| anyhow::anyhow!("bad .rela.dyn"))?;
        for r in relas {
            let ty = r.r_type(endian, false);
            if ty != elf::R_AARCH64_RELATIVE {
                bail!(
                    "dynamic relocation of type {ty} at {:#x} (symbol #{}): only R_AARCH64_RELATIVE can be \
                     applied at boot; a symbol the image needs is probably undefined",
                    r.r_offset(endian),
                    r.r_sym(endian, false)
                );
            }
        }
    }
    Ok(())
}

/// Maps `image+0x…` offsets in a backtrace to function names, using the ELF's symbols.
pub fn symbolize(elf_path: &Path, offset: u64) -> Option<String> {
    let data = std::fs::read(elf_path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let mut best: Option<(u64, String)> = None;
    for s in file.symbols() {
        if s.kind() != object::SymbolKind::Text || s.address() > offset {
            continue;
        }
        let size = s.size();
        if size != 0 && offset >= s.address() + size {
            continue;
        }
        if best.as_ref().map(|(a, _)| s.address() > *a).unwrap_or(true) {
            best = Some((s.address(), s.name().ok()?.to_string()));
        }
    }
    best.map(|(addr, name)| format!("{}+{:#x}", demangle(&name), offset - addr))
}

fn demangle(name: &str) -> String {
    // `{:#}` leaves out the hash suffix; works for both legacy and v0 mangling.
    format!("{:#}", rustc_demangle::demangle(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_legacy_names() {
        assert_eq!(demangle("_ZN10hypervisor4trap5fatal17h0123456789abcdefE"), "hypervisor::trap::fatal");
        assert_eq!(demangle("rt_main"), "rt_main");
    }

    #[test]
    fn refuses_non_elf() {
        assert!(elf_to_image(b"not an elf").is_err());
    }
}
