//! Builds the hypervisor and the kernel (for `aarch64-unknown-none-softfloat`) and the
//! chainloader (`aarch64-unknown-none`) and turns each ELF into a Linux arm64 Image: the PT_LOAD
//! segments laid out from the link address (0), with the header's `image_size` set to the end
//! of the BSS. The ELF is checked first: a position-independent image may only carry
//! `R_AARCH64_RELATIVE` dynamic relocations, the only kind `lib/rt` applies at boot; the
//! hypervisor's code may hold no FP/SIMD instruction outside lib/pgtable's vector routines
//! (which save and restore what they use), the kernel's none outside those, the functions that
//! save and load a task's EL0 FP/SIMD state and its CPU-state self-test ([`check_no_fp_simd`]).

use crate::provision::toolchain::{CrossToolchain, HYP_TARGET, TARGET};
use crate::workspace_root;
use anyhow::{bail, ensure, Context, Result};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, Rela, SectionHeader};
use object::{Endianness, Object, ObjectSymbol};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The bare-metal binaries and their targets: the two that boot, neither using FP/SIMD outside
/// named routines (softfloat: a trap to the hypervisor saves none of the guest's
/// FP/SIMD/SVE/SME state, the kernel leaves its tasks' EL0 FP/SIMD state in the registers, so a
/// trap saves none, as Linux; lib/pgtable's vector routines keep what they use), the serial
/// chainloader (`cargo xtask chainboot`, `cargo xtask flash --chainloader`) and the test guest
/// (`testguest/`, an Image and a raw binary).
pub const BINARIES: [(&str, &str); 4] =
    [("hypervisor", HYP_TARGET), ("kernel", HYP_TARGET), ("chainloader", TARGET), ("testguest", TARGET)];

/// lib/pgtable's vector routines (`lib/pgtable/src/vector.rs`: the protect's run and the new
/// table's fill), which save and restore every vector register they use (whole Z registers
/// where SVE state is live) and fall back to general registers in streaming mode.
pub const VECTOR_ROUTINES: &str = "__pgtable_vec_";

/// Where each binary may hold FP/SIMD instructions: in the hypervisor only in lib/pgtable's
/// vector routines ([`VECTOR_ROUTINES`]); in the kernel there, where it saves and loads a
/// task's EL0 FP/SIMD state (`kernel/src/sched/fpsimd.rs`) and in the self-test that fills the
/// vector registers (`kernel/src/selftest/cpu_state.rs`; its symbols are `kernel::kern::…`:
/// every module of the kernel sits in `kern`, behind one gate).
pub fn fp_simd_allowed(bin: &str) -> Option<&'static [&'static str]> {
    match bin {
        "hypervisor" => Some(&[VECTOR_ROUTINES]),
        "kernel" => {
            Some(&["__kernel_fp_save", "__kernel_fp_load", "kernel::kern::selftest::cpu_state::", VECTOR_ROUTINES])
        }
        _ => None,
    }
}

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

/// The test guest as an arm64 Image, written by every [`build`].
pub fn testguest_image() -> PathBuf {
    images_dir().join("testguest.img")
}

/// The test guest as a raw binary (the same bytes without the Image header: QEMU and the
/// hypervisor load it at RAM base + 0x80000), written by every [`build`].
pub fn testguest_raw() -> PathBuf {
    images_dir().join("testguest.bin")
}

/// An Image turned into a raw binary: the branch at offset 0 kept, the rest of the 64-byte
/// header (text_offset, image_size, flags, the project's stamp, the magic) zeroed, so no loader
/// takes it for an Image.
pub fn raw_binary(image: &[u8]) -> Vec<u8> {
    let mut raw = image.to_vec();
    let end = raw.len().min(abi::image::HEADER_SIZE);
    raw[8.min(end)..end].fill(0);
    raw
}

/// The environment variable naming the directory of the built EL0 programs, which the
/// kernel's build script embeds (`kernel/build.rs`).
pub const USER_DIR_VAR: &str = "PGTLAB_USER_DIR";

/// Where the cross build puts the EL0 programs (and the binaries).
pub fn cross_release_dir() -> PathBuf {
    cross_target_dir().join(TARGET).join("release")
}

/// Where the EL0 programs the kernel embeds go (stripped to their loadable segments).
pub fn el0_programs_dir() -> PathBuf {
    workspace_root().join("target/user")
}

/// Builds the EL0 programs (`user/`, release profile): static position-independent ELF files
/// in [`cross_release_dir`] (same flags and target directory as the binaries, so the standard
/// library built for one serves the other), then writes each, cut down to what a loader reads
/// ([`strip_to_segments`]), to [`el0_programs_dir`]. Returns that directory.
pub fn build_el0_programs(tc: &CrossToolchain) -> Result<PathBuf> {
    let mut cmd = tc.cargo("build", TARGET);
    cmd.current_dir(workspace_root()).args(["--release", "-p", "user"]);
    cmd.arg("--target-dir").arg(cross_target_dir());
    let status = crate::signals::status(&mut cmd)?;
    ensure!(status.success(), "building the EL0 programs failed ({status})");
    let bins = workspace_root().join("user/src/bin");
    std::fs::create_dir_all(el0_programs_dir())?;
    for e in std::fs::read_dir(&bins).with_context(|| format!("reading {}", bins.display()))? {
        let name = e?.file_name();
        let Some(name) = name.to_str().and_then(|n| n.strip_suffix(".rs")) else {
            continue;
        };
        let elf = cross_release_dir().join(name);
        let bytes = std::fs::read(&elf).with_context(|| format!("reading {}", elf.display()))?;
        let small = strip_to_segments(&bytes).with_context(|| format!("stripping {}", elf.display()))?;
        let dst = el0_programs_dir().join(name);
        crate::write_if_changed(&dst, &small)?;
    }
    Ok(el0_programs_dir())
}

/// An ELF file cut to its ELF header, program headers and loadable segments: section headers
/// (and with them symbols and debug information, which only tools read) dropped.
pub fn strip_to_segments(data: &[u8]) -> Result<Vec<u8>> {
    let file = ElfFile64::<Endianness>::parse(data).context("not a 64-bit ELF file")?;
    let endian = file.endian();
    let header = file.elf_header();
    let mut end = 64 + header.e_phnum(endian) as u64 * header.e_phentsize(endian) as u64;
    for ph in header.program_headers(endian, data)? {
        if ph.p_type(endian) == elf::PT_LOAD || ph.p_type(endian) == elf::PT_DYNAMIC {
            end = end.max(ph.p_offset(endian) + ph.p_filesz(endian));
        }
    }
    ensure!(end as usize <= data.len(), "a segment lies past the end of the file");
    let mut out = data[..end as usize].to_vec();
    // e_shoff, e_shentsize, e_shnum, e_shstrndx: no section headers.
    out[40..48].fill(0);
    out[58..64].fill(0);
    Ok(out)
}

/// Builds the binaries (release profile, with debug info) and writes their Images: one cargo
/// run per target.
pub fn build(tc: &CrossToolchain, features: &[String]) -> Result<Images> {
    let t0 = Instant::now();
    let names: Vec<String> = BINARIES.iter().map(|(b, t)| format!("{b} ({t})")).collect();
    eprintln!("xtask: building the EL0 programs, {} with {}", names.join(" + "), tc.description);
    // The kernel embeds the EL0 programs: they come first.
    let el0 = build_el0_programs(tc)?;
    for target in [HYP_TARGET, TARGET] {
        let mut cmd = tc.cargo("build", target);
        cmd.env(USER_DIR_VAR, &el0);
        cmd.current_dir(workspace_root()).arg("--release");
        for (bin, _) in BINARIES.iter().filter(|(_, t)| *t == target) {
            cmd.args(["-p", bin]);
        }
        cmd.arg("--target-dir").arg(cross_target_dir());
        if !features.is_empty() {
            cmd.arg("--features").arg(features.join(","));
        }
        let status = crate::signals::status(&mut cmd)?;
        ensure!(status.success(), "cross build for {target} failed ({status})");
    }
    std::fs::create_dir_all(images_dir())?;
    let mut paths = Vec::new();
    for (bin, target) in BINARIES {
        let elf = cross_target_dir().join(target).join("release").join(bin);
        let img = images_dir().join(format!("{bin}.img"));
        let bytes = std::fs::read(&elf).with_context(|| format!("reading {}", elf.display()))?;
        if let Some(allowed) = fp_simd_allowed(bin) {
            check_no_fp_simd(&bytes, bin, allowed).with_context(|| format!("checking {}", elf.display()))?;
        }
        let image = elf_to_image(&bytes).with_context(|| format!("turning {} into an Image", elf.display()))?;
        // Other runs may be booting this Image right now: never truncate it under them.
        crate::write_if_changed(&img, &image)?;
        if bin == "testguest" {
            crate::write_if_changed(&testguest_raw(), &raw_binary(&image))?;
        }
        paths.push((img, elf));
    }
    eprintln!("xtask: images in {} ({:.1} s)", images_dir().display(), t0.elapsed().as_secs_f64());
    let (k, h) = (paths[1].clone(), paths[0].clone());
    Ok(Images { hypervisor: h.0, hypervisor_elf: h.1, kernel: k.0, kernel_elf: k.1 })
}

/// Where the Linux guest's programs are built (their own flags: static Linux executables).
pub fn user_target_dir() -> PathBuf {
    workspace_root().join("target/cross-user")
}

/// Rustflags of the Linux guest's programs: static, non-PIE executables Linux loads at the
/// linker's default address, entered at `_start` (`linux-user/src/sys.rs`).
fn user_rustflags(tc: &CrossToolchain) -> String {
    let mut f = vec!["-C relocation-model=static".to_string(), "-C link-arg=--gc-sections".to_string()];
    if let Some(l) = &tc.linker {
        f.push(format!("-C linker={}", l.display()));
    }
    f.join(" ")
}

/// A cargo command for the Linux guest's programs (`linux-user`).
pub fn user_cargo(tc: &CrossToolchain, subcommand: &str) -> Command {
    let mut cmd = tc.cargo(subcommand, TARGET);
    cmd.env(format!("CARGO_TARGET_{}_RUSTFLAGS", TARGET.to_uppercase().replace('-', "_")), user_rustflags(tc));
    cmd.current_dir(workspace_root()).args(["--release", "-p", "linux-user"]);
    cmd.arg("--target-dir").arg(user_target_dir());
    cmd
}

/// The Linux guest's programs (`linux-user`'s binaries).
pub const LINUX_PROGRAMS: [&str; 3] = ["pgtlab-dirty", "pgtlab-bench", "pgtlab-kvmprobe"];

/// Builds the Linux guest's programs; returns each of [`LINUX_PROGRAMS`] (name, path), checked
/// to be a static arm64 Linux executable.
pub fn linux_user(tc: &CrossToolchain) -> Result<Vec<(&'static str, PathBuf)>> {
    let status = crate::signals::status(&mut user_cargo(tc, "build"))?;
    ensure!(status.success(), "cross build of linux-user failed ({status})");
    let mut out = Vec::new();
    for name in LINUX_PROGRAMS {
        let bin = user_target_dir().join(TARGET).join("release").join(name);
        let data = std::fs::read(&bin).with_context(|| format!("reading {}", bin.display()))?;
        let file = ElfFile64::<Endianness>::parse(&*data).with_context(|| format!("{name} is not a 64-bit ELF"))?;
        let h = file.elf_header();
        let e = file.endian();
        ensure!(
            h.e_machine(e) == elf::EM_AARCH64 && h.e_type(e) == elf::ET_EXEC,
            "{name} must be a static AArch64 executable (ET_EXEC)"
        );
        ensure!(
            !h.program_headers(e, &*data)?.iter().any(|p| p.p_type(e) == elf::PT_INTERP),
            "{name} must not ask for a dynamic loader"
        );
        out.push((name, bin));
    }
    Ok(out)
}

/// Whether an A64 instruction word touches FP/SIMD state: every encoding with bits 27:26 =
/// 0b11 (scalar FP and Advanced SIMD data processing, and the SIMD&FP loads and stores, V = 1),
/// SVE (bits 28:25 = 0b0010), SME (bit 31 set, bits 28:25 = 0b0000), and MRS/MSR of FPCR and
/// FPSR.
pub fn is_fp_simd(w: u32) -> bool {
    let op1 = (w >> 25) & 0xf;
    let sysreg_fp = (w & 0xffd0_0000) == 0xd510_0000 && matches!((w >> 5) & 0x7fff, 0x5a20 | 0x5a21);
    (w >> 26) & 3 == 3 || op1 == 0b0010 || (w >> 31 == 1 && op1 == 0) || sysreg_fp
}

/// Bytes of the arm64 Image header at the start of text (the image is linked at 0).
const IMAGE_HEADER_LEN: u64 = 64;

/// The hypervisor must never touch the guest's FP/SIMD/SVE/SME registers, nor the kernel its
/// tasks' (outside the functions that switch them): both are built for a softfloat target, and
/// their exception vectors do not save those registers. This scans every executable section for
/// an instruction that would break that promise, outside the functions whose names start with
/// one of `allowed` (`bin` names the binary in the message).
pub fn check_no_fp_simd(data: &[u8], bin: &str, allowed: &[&str]) -> Result<()> {
    let file = ElfFile64::<Endianness>::parse(data).context("not a 64-bit ELF file")?;
    let endian = file.endian();
    let mut found = Vec::new();
    for section in file.elf_section_table().iter() {
        let exec = u64::from(elf::SHF_EXECINSTR);
        if section.sh_type(endian) != elf::SHT_PROGBITS || section.sh_flags(endian) & exec == 0 {
            continue;
        }
        let base = section.sh_addr(endian);
        let bytes = section.data(endian, data).map_err(|_| anyhow::anyhow!("section data out of bounds"))?;
        for (i, w) in bytes.chunks_exact(4).enumerate() {
            let addr = base + 4 * i as u64;
            // The arm64 Image header (linked at 0) is data: its magic "ARMd" decodes as SIMD.
            if addr < IMAGE_HEADER_LEN {
                continue;
            }
            let w = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            if is_fp_simd(w) {
                found.push((addr, w));
            }
        }
    }
    let mut found = found.into_iter().filter_map(|(addr, w)| {
        let sym = symbol_at(&file, addr).unwrap_or_else(|| "?".into());
        (!allowed.iter().any(|a| sym.starts_with(a))).then_some((addr, w, sym))
    });
    if let Some((addr, w, sym)) = found.next() {
        bail!(
            "the {bin} has {} FP/SIMD instruction(s) where none may be, the first {w:#010x} at {addr:#x} ({sym}): it \
             must not touch the FP/SVE/SME registers of what it runs (build it for {HYP_TARGET}; no f32/f64 outside \
             software floating point)",
            found.count() + 1
        );
    }
    Ok(())
}

fn symbol_at(file: &ElfFile64<Endianness>, addr: u64) -> Option<String> {
    file.symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.address() <= addr)
        .max_by_key(|s| s.address())
        .and_then(|s| s.name().ok().map(demangle))
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
    if let Some(pe) = pe_layout(&file, end)? {
        image.resize(abi::pe::padded_len(image.len()), 0);
        abi::pe::write(&mut image, &pe).map_err(|e| anyhow::anyhow!("writing the PE/COFF header: {e}"))?;
    }
    abi::image::ImageHeader::patch(&mut image, end).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(image)
}

/// Where a binary that is an EFI application too has its sections and its EFI entry
/// (`abi::pe`): it says so by reserving the first page's rest for the PE header (symbol
/// `__pe_header` at 0x40, up to `__pe_header_end` = 0x1000) and naming its entry `__efi_entry`.
/// `None` for a binary that reserves no such page (an Image only).
pub fn pe_layout(file: &ElfFile64<Endianness>, image_end: u64) -> Result<Option<abi::pe::Layout>> {
    let sym = |name: &str| file.symbols().find(|s| s.name() == Ok(name)).map(|s| s.address());
    let Some(header) = sym("__pe_header") else {
        return Ok(None);
    };
    ensure!(
        header == u64::from(abi::pe::PE_OFFSET) && sym("__pe_header_end") == Some(u64::from(abi::pe::HEADERS_SIZE)),
        "__pe_header at {header:#x}, __pe_header_end at {:?}: the PE header's page must be [0x40, 0x1000) (lib/rt/link.ld \
         puts .text.pe_header right after the Image header)",
        sym("__pe_header_end")
    );
    let entry = sym("__efi_entry").context("__pe_header without __efi_entry: where would firmware enter it?")?;
    let text_end = sym("__text_end").context("no __text_end symbol")?;
    let fit = |v: u64, what: &str| u32::try_from(v).with_context(|| format!("{what} {v:#x} is beyond 4 GiB"));
    Ok(Some(abi::pe::Layout {
        text_end: fit(text_end, "__text_end")?,
        image_end: fit(image_end, "__image_end")?,
        entry: fit(entry, "__efi_entry")?,
    }))
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

    /// The build's output folders are inside the workspace's target/ (so `cargo clean` and a
    /// fresh clone start without them) and distinct: the EL0 programs, the cross builds and the
    /// Images never overwrite each other.
    #[test]
    fn output_folders_are_distinct_and_under_target() {
        let target = workspace_root().join("target");
        let dirs = [el0_programs_dir(), cross_target_dir(), images_dir()];
        for (i, d) in dirs.iter().enumerate() {
            assert!(d.starts_with(&target) && d != &target, "{}", d.display());
            assert!(dirs[i + 1..].iter().all(|o| o != d), "{}", d.display());
        }
    }

    /// The FP/SIMD check names the function each instruction is in by `symbol_at`: the text
    /// symbol at or below the address (of this test's own executable, an ELF the host has:
    /// the lookup does not depend on the architecture), and none below the first one.
    #[test]
    fn symbol_at_names_the_function_an_address_is_in() {
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let file = ElfFile64::<Endianness>::parse(&*exe).expect("the test executable is a 64-bit ELF");
        let text = || file.symbols().filter(|s| s.kind() == object::SymbolKind::Text);
        let f = text()
            .find(|s| s.size() > 4 && s.name().is_ok_and(|n| demangle(n).ends_with("build::elf_to_image")))
            .expect("elf_to_image among the executable's symbols");
        // Aliases at the same address are all right answers.
        let names: Vec<String> =
            text().filter(|s| s.address() == f.address()).filter_map(|s| s.name().ok().map(demangle)).collect();
        for addr in [f.address(), f.address() + 2, f.address() + f.size() - 1] {
            let got = symbol_at(&file, addr).expect("a symbol");
            assert!(names.contains(&got), "{addr:#x}: {got:?} is not one of {names:?}");
        }
        let lowest = text().map(|s| s.address()).min().unwrap();
        assert_eq!(symbol_at(&file, lowest.saturating_sub(1)).filter(|_| lowest > 0), None);
    }

    #[test]
    fn demangles_legacy_names() {
        assert_eq!(demangle("_ZN10hypervisor4trap5fatal17h0123456789abcdefE"), "hypervisor::trap::fatal");
        assert_eq!(demangle("rt_main"), "rt_main");
    }

    #[test]
    fn fp_simd_instructions_are_recognised() {
        for w in [
            0xad00_07e0u32, // stp q0, q1, [sp]
            0x3dc0_0020,    // ldr q0, [x1]
            0x1e60_2820,    // fadd d0, d1, d0
            0x4e20_1c00,    // and v0.16b, v0.16b, v0.16b
            0x9e67_0000,    // fmov d0, x0
            0xd53b_4400,    // mrs x0, fpcr
            0xd51b_4420,    // msr fpsr, x0
            0x0420_3000,    // SVE: mov z0.d, z0.d (orr)
            0xc000_0000,    // SME: zero {za}
        ] {
            assert!(is_fp_simd(w), "{w:#010x}");
        }
        for w in [
            0xa900_07e0u32, // stp x0, x1, [sp]
            0xf940_0020,    // ldr x0, [x1]
            0x8b01_0000,    // add x0, x0, x1
            0xd503_201f,    // nop
            0x9400_0000,    // bl
            0xd53b_d040,    // mrs x0, tpidr_el0
            0xd51c_1140,    // msr cptr_el2, x0
            0xd518_1200,    // msr zcr_el1, x0 (a system register, not an SVE instruction)
            0xc8df_fc20,    // ldar x0, [x1]
            0xf8a0_0020,    // ldadd x0, x0, [x1]
        ] {
            assert!(!is_fp_simd(w), "{w:#010x}");
        }
    }

    #[test]
    fn a_raw_binary_keeps_the_branch_and_no_header() {
        let mut image = vec![0xaau8; 4096];
        image[0..4].copy_from_slice(&0x1400_0010u32.to_le_bytes());
        image[0x38..0x3c].copy_from_slice(&abi::image::MAGIC.to_le_bytes());
        let raw = raw_binary(&image);
        assert_eq!(raw.len(), image.len());
        assert_eq!(raw[..8], image[..8], "the branch to the entry stays");
        assert!(raw[8..64].iter().all(|&b| b == 0), "no header field left");
        assert_eq!(raw[64..], image[64..]);
        assert!(abi::image::ImageHeader::parse(&raw).is_err(), "no loader takes it for an Image");
    }

    #[test]
    fn refuses_non_elf() {
        assert!(elf_to_image(b"not an elf").is_err());
        assert!(strip_to_segments(b"not an elf").is_err());
    }

    #[test]
    fn stripping_keeps_the_segments_and_drops_the_sections() {
        // The host's own test binary is an ELF64 file with plenty of sections.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let Ok(orig) = ElfFile64::<Endianness>::parse(&*me) else {
            return;
        };
        let s = strip_to_segments(&me).unwrap();
        let f = ElfFile64::<Endianness>::parse(&*s).unwrap();
        assert_eq!(f.elf_header().e_shnum(f.endian()), 0);
        assert_eq!(f.elf_header().e_shoff(f.endian()), 0);
        // Past the ELF header (whose section-header fields were cleared) nothing changed, and
        // every loadable byte is still there.
        assert!(s[64..] == me[64..s.len()], "bytes kept as they were");
        for ph in orig.elf_header().program_headers(orig.endian(), &*me).unwrap() {
            if ph.p_type(orig.endian()) == elf::PT_LOAD {
                assert!(ph.p_offset(orig.endian()) + ph.p_filesz(orig.endian()) <= s.len() as u64);
            }
        }
    }
}
