//! EL0 programs: static ELF64 AArch64 executables, either fixed (`ET_EXEC`) or position
//! independent (`ET_DYN`, a static PIE whose only dynamic relocations are
//! `R_AARCH64_RELATIVE`, which the loader applies for the address it picks).
//!
//! [`Program::parse`] checks everything a loader relies on before anything is mapped: the
//! header (class, endianness, machine, type, sizes), every program header inside the file,
//! loadable segments page-congruent (`p_vaddr ≡ p_offset mod 4096`), within their file, not
//! overlapping each other (at page granularity), never writable and executable at once, the
//! entry point inside an executable segment, no interpreter and no thread-local storage, and
//! each relocation of a known kind landing inside a loaded segment.

use alloc::vec::Vec;
use core::fmt;

use abi::syscall::PAGE_SIZE;

/// A loadable segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Link-time address of its first byte (add the load bias).
    pub vaddr: u64,
    /// Bytes in memory (the part past `file_len` is zero).
    pub mem_len: u64,
    /// Where its bytes start in the file.
    pub file_off: u64,
    /// Bytes taken from the file.
    pub file_len: u64,
    /// Readable.
    pub read: bool,
    /// Writable.
    pub write: bool,
    /// Executable.
    pub exec: bool,
}

impl Segment {
    /// First page (link-time address).
    pub fn page_start(&self) -> u64 {
        self.vaddr & !(PAGE_SIZE - 1)
    }
    /// One past its last page (link-time address).
    pub fn page_end(&self) -> u64 {
        (self.vaddr + self.mem_len).div_ceil(PAGE_SIZE) * PAGE_SIZE
    }
}

/// A parsed program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Position independent (`ET_DYN`): loaded at a bias the loader picks.
    pub pie: bool,
    /// Entry point (link-time address).
    pub entry: u64,
    /// Loadable segments, by address.
    pub segments: Vec<Segment>,
    /// `R_AARCH64_RELATIVE` relocations: (link-time address of the 8-byte slot, addend).
    pub relocations: Vec<(u64, u64)>,
}

/// Why a program was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfError {
    /// Shorter than what it says it holds (or than an ELF header).
    Truncated,
    /// Not `\x7fELF`, ELF64, little-endian, version 1.
    NotElf64Le,
    /// Not AArch64.
    WrongMachine,
    /// Neither `ET_EXEC` nor `ET_DYN`.
    WrongType,
    /// A header size or count the loader does not understand.
    BadHeader,
    /// No loadable segment.
    NoSegments,
    /// A segment is not page-congruent, has `filesz > memsz`, or wraps.
    BadSegment,
    /// Two segments share a page.
    Overlap,
    /// A segment is writable and executable.
    WriteAndExecute,
    /// The entry point is not in an executable segment.
    BadEntry,
    /// A dynamic interpreter, thread-local storage, or a dynamic section the loader cannot
    /// follow.
    Unsupported,
    /// A relocation of another kind than `R_AARCH64_RELATIVE`, or outside the segments.
    BadRelocation,
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ElfError::Truncated => "truncated",
            ElfError::NotElf64Le => "not a little-endian ELF64 file",
            ElfError::WrongMachine => "not an AArch64 program",
            ElfError::WrongType => "neither an executable nor a position-independent executable",
            ElfError::BadHeader => "bad ELF header sizes",
            ElfError::NoSegments => "no loadable segment",
            ElfError::BadSegment => "a segment is not page-congruent, larger in the file than in memory, or wraps",
            ElfError::Overlap => "two segments share a page",
            ElfError::WriteAndExecute => "a segment is writable and executable",
            ElfError::BadEntry => "the entry point is not in an executable segment",
            ElfError::Unsupported => "needs an interpreter, thread-local storage or unsupported dynamic data",
            ElfError::BadRelocation => "a relocation the loader cannot apply",
        })
    }
}

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const PT_TLS: u32 = 7;
const DT_NULL: u64 = 0;
const DT_RELA: u64 = 7;
const DT_RELASZ: u64 = 8;
const DT_RELAENT: u64 = 9;
const DT_REL: u64 = 17;
const DT_JMPREL: u64 = 23;
const R_AARCH64_RELATIVE: u64 = 1027;
/// Largest program image accepted (link-time span of its segments).
pub const MAX_SPAN: u64 = 1 << 30;

fn u16_at(d: &[u8], off: u64) -> Result<u16, ElfError> {
    let o = usize::try_from(off).map_err(|_| ElfError::Truncated)?;
    let b = d.get(o..o.checked_add(2).ok_or(ElfError::Truncated)?).ok_or(ElfError::Truncated)?;
    Ok(u16::from_le_bytes([b[0], b[1]]))
}
fn u32_at(d: &[u8], off: u64) -> Result<u32, ElfError> {
    let o = usize::try_from(off).map_err(|_| ElfError::Truncated)?;
    let b = d.get(o..o.checked_add(4).ok_or(ElfError::Truncated)?).ok_or(ElfError::Truncated)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
fn u64_at(d: &[u8], off: u64) -> Result<u64, ElfError> {
    let o = usize::try_from(off).map_err(|_| ElfError::Truncated)?;
    let b = d.get(o..o.checked_add(8).ok_or(ElfError::Truncated)?).ok_or(ElfError::Truncated)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Ok(u64::from_le_bytes(a))
}

impl Program {
    /// Parses and checks `file`.
    ///
    /// # Errors
    ///
    /// The first [`ElfError`] found.
    pub fn parse(file: &[u8]) -> Result<Program, ElfError> {
        if file.len() < 64 {
            return Err(ElfError::Truncated);
        }
        if &file[0..4] != b"\x7fELF" || file[4] != 2 || file[5] != 1 || file[6] != 1 {
            return Err(ElfError::NotElf64Le);
        }
        let ty = u16_at(file, 16)?;
        let pie = match ty {
            2 => false,
            3 => true,
            _ => return Err(ElfError::WrongType),
        };
        if u16_at(file, 18)? != 183 {
            return Err(ElfError::WrongMachine);
        }
        let entry = u64_at(file, 24)?;
        let phoff = u64_at(file, 32)?;
        let (phentsize, phnum) = (u16_at(file, 54)? as u64, u16_at(file, 56)? as u64);
        if phentsize != 56 || phnum == 0 || phnum > 64 {
            return Err(ElfError::BadHeader);
        }
        let mut segments = Vec::new();
        let mut dynamic = None;
        for i in 0..phnum {
            let ph = phoff.checked_add(i * phentsize).ok_or(ElfError::Truncated)?;
            let p_type = u32_at(file, ph)?;
            let flags = u32_at(file, ph + 4)?;
            let (off, vaddr) = (u64_at(file, ph + 8)?, u64_at(file, ph + 16)?);
            let (filesz, memsz) = (u64_at(file, ph + 32)?, u64_at(file, ph + 40)?);
            match p_type {
                PT_LOAD => {
                    if memsz == 0 {
                        continue;
                    }
                    let in_file = off.checked_add(filesz).is_some_and(|e| e <= file.len() as u64);
                    let congruent = vaddr % PAGE_SIZE == off % PAGE_SIZE;
                    let fits = vaddr.checked_add(memsz).is_some_and(|e| e <= MAX_SPAN || !pie);
                    if filesz > memsz || !congruent || !fits || vaddr.checked_add(memsz + PAGE_SIZE).is_none() {
                        return Err(ElfError::BadSegment);
                    }
                    if !in_file {
                        return Err(ElfError::Truncated);
                    }
                    let s = Segment {
                        vaddr,
                        mem_len: memsz,
                        file_off: off,
                        file_len: filesz,
                        read: flags & 4 != 0,
                        write: flags & 2 != 0,
                        exec: flags & 1 != 0,
                    };
                    if s.write && s.exec {
                        return Err(ElfError::WriteAndExecute);
                    }
                    segments.push(s);
                }
                PT_DYNAMIC => dynamic = Some((off, filesz)),
                PT_INTERP | PT_TLS => return Err(ElfError::Unsupported),
                _ => {}
            }
        }
        if segments.is_empty() {
            return Err(ElfError::NoSegments);
        }
        segments.sort_by_key(|s| s.vaddr);
        for w in segments.windows(2) {
            if w[1].page_start() < w[0].page_end() {
                return Err(ElfError::Overlap);
            }
        }
        let span = segments.last().unwrap().page_end() - segments[0].page_start();
        if span > MAX_SPAN {
            return Err(ElfError::BadSegment);
        }
        if !segments.iter().any(|s| s.exec && entry >= s.vaddr && entry < s.vaddr + s.mem_len) {
            return Err(ElfError::BadEntry);
        }
        let relocations = match dynamic {
            Some((off, len)) => relocations(file, off, len, &segments)?,
            None => Vec::new(),
        };
        Ok(Program { pie, entry, segments, relocations })
    }

    /// The file offset of link-time address `va`, if a segment holds it in the file.
    fn file_offset(segments: &[Segment], va: u64) -> Option<u64> {
        segments.iter().find(|s| va >= s.vaddr && va < s.vaddr + s.file_len).map(|s| s.file_off + (va - s.vaddr))
    }
}

/// The `R_AARCH64_RELATIVE` entries the dynamic section at `[off, off + len)` points at.
fn relocations(file: &[u8], off: u64, len: u64, segs: &[Segment]) -> Result<Vec<(u64, u64)>, ElfError> {
    let (mut rela, mut relasz, mut relaent) = (None, 0, 24);
    let mut k = 0;
    while k + 16 <= len {
        let tag = u64_at(file, off + k)?;
        let val = u64_at(file, off + k + 8)?;
        match tag {
            DT_NULL => break,
            DT_RELA => rela = Some(val),
            DT_RELASZ => relasz = val,
            DT_RELAENT => relaent = val,
            DT_REL | DT_JMPREL => return Err(ElfError::Unsupported),
            _ => {}
        }
        k += 16;
    }
    let Some(rela) = rela else {
        return Ok(Vec::new());
    };
    if relaent != 24 || relasz % 24 != 0 {
        return Err(ElfError::Unsupported);
    }
    let at = Program::file_offset(segs, rela).ok_or(ElfError::BadRelocation)?;
    let mut out = Vec::new();
    for i in 0..relasz / 24 {
        let e = at + i * 24;
        let (r_off, info, addend) = (u64_at(file, e)?, u64_at(file, e + 8)?, u64_at(file, e + 16)?);
        if info & 0xffff_ffff != R_AARCH64_RELATIVE {
            return Err(ElfError::BadRelocation);
        }
        let inside =
            segs.iter().any(|s| r_off >= s.vaddr && r_off.checked_add(8).is_some_and(|e| e <= s.vaddr + s.mem_len));
        if !inside || r_off % 8 != 0 {
            return Err(ElfError::BadRelocation);
        }
        out.push((r_off, addend));
    }
    Ok(out)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use alloc::vec;

    /// A minimal static PIE: text at 0 (RX, with the entry), data at 0x1000 (RW, 0x10 bytes in
    /// the file, 0x2000 in memory) holding one relocated pointer and a dynamic section.
    pub fn tiny_pie() -> Vec<u8> {
        let mut f = vec![0u8; 0x1100];
        f[0..4].copy_from_slice(b"\x7fELF");
        f[4] = 2;
        f[5] = 1;
        f[6] = 1;
        f[16..18].copy_from_slice(&3u16.to_le_bytes());
        f[18..20].copy_from_slice(&183u16.to_le_bytes());
        f[24..32].copy_from_slice(&0x100u64.to_le_bytes()); // entry
        f[32..40].copy_from_slice(&64u64.to_le_bytes()); // phoff
        f[54..56].copy_from_slice(&56u16.to_le_bytes());
        f[56..58].copy_from_slice(&3u16.to_le_bytes());
        let ph = |f: &mut Vec<u8>, i: usize, ty: u32, flags: u32, off: u64, va: u64, fsz: u64, msz: u64| {
            let b = 64 + i * 56;
            f[b..b + 4].copy_from_slice(&ty.to_le_bytes());
            f[b + 4..b + 8].copy_from_slice(&flags.to_le_bytes());
            f[b + 8..b + 16].copy_from_slice(&off.to_le_bytes());
            f[b + 16..b + 24].copy_from_slice(&va.to_le_bytes());
            f[b + 32..b + 40].copy_from_slice(&fsz.to_le_bytes());
            f[b + 40..b + 48].copy_from_slice(&msz.to_le_bytes());
        };
        ph(&mut f, 0, PT_LOAD, 5, 0, 0, 0x200, 0x200);
        ph(&mut f, 1, PT_LOAD, 6, 0x1000, 0x1000, 0x100, 0x2000);
        ph(&mut f, 2, PT_DYNAMIC, 6, 0x1040, 0x1040, 0x40, 0x40);
        f[0x100..0x104].copy_from_slice(&0xd65f_03c0u32.to_le_bytes()); // RET
                                                                        // Relocation table at 0x1010: slot 0x1008 = bias + 0x100 (a pointer to the entry).
        f[0x1010..0x1018].copy_from_slice(&0x1008u64.to_le_bytes());
        f[0x1018..0x1020].copy_from_slice(&R_AARCH64_RELATIVE.to_le_bytes());
        f[0x1020..0x1028].copy_from_slice(&0x100u64.to_le_bytes());
        // Dynamic section: DT_RELA 0x1010, DT_RELASZ 24, DT_RELAENT 24, DT_NULL.
        for (i, (t, v)) in [(DT_RELA, 0x1010u64), (DT_RELASZ, 24), (DT_RELAENT, 24), (DT_NULL, 0)].iter().enumerate() {
            let b = 0x1040 + i * 16;
            f[b..b + 8].copy_from_slice(&t.to_le_bytes());
            f[b + 8..b + 16].copy_from_slice(&v.to_le_bytes());
        }
        f
    }

    #[test]
    fn parses_a_static_pie() {
        let p = Program::parse(&tiny_pie()).unwrap();
        assert!(p.pie);
        assert_eq!(p.entry, 0x100);
        assert_eq!(p.segments.len(), 2);
        assert!(p.segments[0].exec && !p.segments[0].write);
        assert!(p.segments[1].write && !p.segments[1].exec);
        assert_eq!(p.segments[1].page_end(), 0x3000);
        assert_eq!(p.relocations, [(0x1008, 0x100)]);
    }

    #[test]
    fn refuses_what_a_loader_cannot_trust() {
        let good = tiny_pie();
        let bad = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = good.clone();
            f(&mut v);
            Program::parse(&v).unwrap_err()
        };
        assert_eq!(Program::parse(&good[..40]), Err(ElfError::Truncated));
        assert_eq!(bad(&|v| v[0] = 0), ElfError::NotElf64Le);
        assert_eq!(bad(&|v| v[4] = 1), ElfError::NotElf64Le);
        assert_eq!(bad(&|v| v[18] = 62), ElfError::WrongMachine);
        assert_eq!(bad(&|v| v[16] = 1), ElfError::WrongType);
        assert_eq!(bad(&|v| v[54] = 32), ElfError::BadHeader);
        assert_eq!(
            bad(&|v| v[24..32].copy_from_slice(&0x300u64.to_le_bytes())),
            ElfError::BadEntry,
            "entry in no segment"
        );
        assert_eq!(bad(&|v| v[24..32].copy_from_slice(&0x1000u64.to_le_bytes())), ElfError::BadEntry, "entry in data");
        assert_eq!(bad(&|v| v[64 + 56 + 4] = 7), ElfError::WriteAndExecute);
        assert_eq!(bad(&|v| v[64 + 56 + 16] = 0x10), ElfError::BadSegment, "not page-congruent");
        assert_eq!(
            bad(&|v| v[64 + 56 + 32..64 + 56 + 40].copy_from_slice(&0x3000u64.to_le_bytes())),
            ElfError::BadSegment
        );
        assert_eq!(
            bad(&|v| v[64 + 56 + 8..64 + 56 + 16].copy_from_slice(&0x10_0000u64.to_le_bytes())),
            ElfError::Truncated,
            "bytes past the end of the file"
        );
        // Each identification byte on its own; 64 bytes are enough to be judged by them.
        assert_eq!(bad(&|v| v[5] = 2), ElfError::NotElf64Le, "big-endian");
        assert_eq!(bad(&|v| v[6] = 0), ElfError::NotElf64Le, "ELF version");
        assert_eq!(Program::parse(&[0u8; 64]), Err(ElfError::NotElf64Le));
        // ET_EXEC is taken as well as ET_DYN (loaded where it says, not moved).
        let mut exec = good.clone();
        exec[16] = 2;
        assert!(Program::parse(&exec).is_ok_and(|p| !p.pie), "ET_EXEC");
        // Between 1 and 64 program headers.
        assert_eq!(bad(&|v| v[56..58].copy_from_slice(&0u16.to_le_bytes())), ElfError::BadHeader);
        assert_eq!(bad(&|v| v[56..58].copy_from_slice(&65u16.to_le_bytes())), ElfError::BadHeader);
        let mut most = good.clone();
        most[56..58].copy_from_slice(&64u16.to_le_bytes()); // the 61 more are PT_NULL (zeros)
        assert!(Program::parse(&most).is_ok(), "64 program headers are allowed");
        // Starts inside the file, ends past it (seeded bug `elf-segment-past-the-file`).
        let past = (good.len() as u64 - 0x1000 + 1).to_le_bytes();
        assert_eq!(
            bad(&|v| v[64 + 56 + 32..64 + 56 + 40].copy_from_slice(&past)),
            ElfError::Truncated,
            "a segment's last byte past the end of the file"
        );
        assert_eq!(bad(&|v| v[64 + 112] = PT_INTERP as u8), ElfError::Unsupported);
        assert_eq!(bad(&|v| v[0x1018] = 1), ElfError::BadRelocation, "R_AARCH64_ABS64");
        assert_eq!(bad(&|v| v[0x1010..0x1018].copy_from_slice(&0x9000u64.to_le_bytes())), ElfError::BadRelocation);
        assert_eq!(bad(&|v| v[64] = 6), ElfError::BadEntry, "text not loadable: no segment for the entry");
        // Two segments in one page.
        assert_eq!(bad(&|v| v[64 + 56 + 16..64 + 56 + 24].copy_from_slice(&0x0u64.to_le_bytes())), ElfError::Overlap);
    }

    /// `tiny_pie` without its dynamic section, of type `ty`, every address moved up by `by`.
    fn moved(ty: u16, by: u64) -> Vec<u8> {
        let mut v = tiny_pie();
        v[16..18].copy_from_slice(&ty.to_le_bytes());
        v[56..58].copy_from_slice(&2u16.to_le_bytes());
        let add = |v: &mut Vec<u8>, at: usize| {
            let x = u64::from_le_bytes(v[at..at + 8].try_into().unwrap()) + by;
            v[at..at + 8].copy_from_slice(&x.to_le_bytes());
        };
        add(&mut v, 24);
        add(&mut v, 64 + 16);
        add(&mut v, 64 + 56 + 16);
        v
    }

    #[test]
    fn where_segments_may_lie_and_what_their_flags_say() {
        let p = Program::parse(&tiny_pie()).unwrap();
        let rwx = |s: &Segment| (s.read, s.write, s.exec);
        assert_eq!(p.segments.iter().map(rwx).collect::<Vec<_>>(), [(true, false, true), (true, true, false)]);
        // A PIE must fit below MAX_SPAN, even when its segments' span is small.
        assert!(Program::parse(&moved(3, MAX_SPAN - 0x3000)).is_ok());
        assert_eq!(Program::parse(&moved(3, MAX_SPAN - 0x2000)), Err(ElfError::BadSegment));
        // An ET_EXEC loads where it says, above MAX_SPAN too.
        let p = Program::parse(&moved(2, 4 << 30)).unwrap();
        assert_eq!((p.pie, p.segments[0].vaddr, p.entry), (false, 4 << 30, (4 << 30) + 0x100));
        use std::string::ToString;
        assert!(
            ElfError::WriteAndExecute.to_string().contains("writable and executable"),
            "{}",
            ElfError::WriteAndExecute
        );
        // ... but not where its last page would wrap: one byte at 2^64 - 4097 leaves no page.
        let mut v = moved(2, 0);
        let b = 64 + 56;
        v[b + 8..b + 16].copy_from_slice(&0x1fffu64.to_le_bytes());
        v[b + 16..b + 24].copy_from_slice(&(u64::MAX - 4096).to_le_bytes());
        v[b + 32..b + 48].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(Program::parse(&v), Err(ElfError::BadSegment));
    }

    #[test]
    fn the_dynamic_section_and_its_relocations() {
        let good = tiny_pie();
        let put = |v: &mut Vec<u8>, at: usize, x: u64| v[at..at + 8].copy_from_slice(&x.to_le_bytes());
        let with = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = good.clone();
            f(&mut v);
            Program::parse(&v).map(|p| p.relocations)
        };
        let dynamic = 0x1040;
        assert_eq!(with(&|_| ()), Ok(std::vec![(0x1008, 0x100)]));
        // A second entry is read 24 bytes on.
        let two = with(&|v| {
            put(v, dynamic + 16 + 8, 48);
            put(v, 0x1028, 0x1000);
            put(v, 0x1030, R_AARCH64_RELATIVE);
            put(v, 0x1038, 0x100);
        });
        assert_eq!(two, Ok(std::vec![(0x1008, 0x100), (0x1000, 0x100)]));
        assert_eq!(with(&|v| put(v, dynamic + 16 + 8, 25)), Err(ElfError::Unsupported), "RELASZ not a multiple");
        assert_eq!(with(&|v| put(v, dynamic + 32 + 8, 16)), Err(ElfError::Unsupported), "RELAENT 16");
        assert_eq!(with(&|v| put(v, dynamic + 32, DT_REL)), Err(ElfError::Unsupported), "REL entries");
        assert_eq!(with(&|v| put(v, dynamic + 32, DT_JMPREL)), Err(ElfError::Unsupported), "PLT relocations");
        // Nothing after DT_NULL counts.
        let after_null = with(&|v| {
            v[64 + 112 + 32..64 + 112 + 40].copy_from_slice(&0x50u64.to_le_bytes());
            put(v, dynamic + 64, DT_REL);
        });
        assert_eq!(after_null, Ok(std::vec![(0x1008, 0x100)]));
        // The table is found through the segment that holds its address in the file: data
        // linked at 0x2000 but stored at 0x1000, and not in the part that is only memory.
        let moved_data = |v: &mut Vec<u8>| {
            put(v, 64 + 56 + 16, 0x2000);
            put(v, 64 + 112 + 16, 0x2040);
            put(v, 0x1010, 0x2008);
            put(v, dynamic + 8, 0x2010);
        };
        assert_eq!(with(&moved_data), Ok(std::vec![(0x2008, 0x100)]));
        assert_eq!(with(&|v| put(v, dynamic + 8, 0x1100)), Err(ElfError::BadRelocation), "past the file part");
    }

    #[test]
    fn span_and_entry_limits() {
        let good = tiny_pie();
        let put = |v: &mut Vec<u8>, at: usize, x: u64| v[at..at + 8].copy_from_slice(&x.to_le_bytes());
        // The data segment grown to end exactly at MAX_SPAN: allowed; a page more is not, for
        // an ET_EXEC too (whose addresses are not limited, its span is).
        let mut v = good.clone();
        put(&mut v, 64 + 56 + 40, MAX_SPAN - 0x1000);
        assert!(Program::parse(&v).is_ok());
        let mut v = moved(2, 0);
        put(&mut v, 64 + 56 + 40, MAX_SPAN);
        assert_eq!(Program::parse(&v), Err(ElfError::BadSegment));
        // The entry must be inside the text: its last byte is 0x1ff.
        let mut v = good.clone();
        put(&mut v, 24, 0x200);
        assert_eq!(Program::parse(&v), Err(ElfError::BadEntry));
    }

    #[test]
    fn never_panics_on_garbage() {
        let good = tiny_pie();
        let mut x: u64 = 0x1234_5678_9abc_def1;
        for _ in 0..20_000 {
            let mut v = good.clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize) % v.len().min(0x1100);
                v[at] = (x >> 32) as u8;
            }
            let cut = (x >> 40) as usize % (v.len() + 1);
            let _ = Program::parse(&v);
            let _ = Program::parse(&v[..cut]);
        }
    }
}
