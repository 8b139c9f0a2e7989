//! A writer for the cpio "newc" format (`070701`), the format Linux unpacks an initramfs from
//! (Documentation/driver-api/early-userspace/buffer-format.rst): per entry a 110-byte ASCII
//! header of 13 eight-digit hex fields, the NUL-terminated name, padding to 4 bytes, the data,
//! padding to 4 bytes; the archive ends with an entry named `TRAILER!!!`. Written by hand so an
//! initramfs (device nodes included) is built without root and without a `cpio` binary.

use anyhow::{bail, Result};

/// File type bits of `mode`.
pub const S_IFDIR: u32 = 0o040000;
/// Regular file.
pub const S_IFREG: u32 = 0o100000;
/// Symbolic link.
pub const S_IFLNK: u32 = 0o120000;
/// Character device.
pub const S_IFCHR: u32 = 0o020000;

/// An archive being built, entries in the order added (a directory before what is in it).
#[derive(Debug, Default)]
pub struct Archive {
    out: Vec<u8>,
    next_ino: u32,
    names: std::collections::BTreeSet<String>,
}

fn pad4(v: &mut Vec<u8>) {
    while !v.len().is_multiple_of(4) {
        v.push(0);
    }
}

impl Archive {
    /// An empty archive.
    pub fn new() -> Self {
        Archive { out: Vec::new(), next_ino: 1, names: Default::default() }
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) -> Result<()> {
        if name.is_empty() || name.starts_with('/') || name.contains('\0') || name.split('/').any(|c| c == "..") {
            bail!("cpio entry name {name:?} must be relative, without NUL or ..");
        }
        if name != "TRAILER!!!" && !self.names.insert(name.to_string()) {
            bail!("cpio entry {name:?} added twice");
        }
        if let Some((dir, _)) = name.rsplit_once('/') {
            if name != "TRAILER!!!" && !self.names.contains(dir) {
                bail!("cpio entry {name:?}: add its directory {dir:?} first");
            }
        }
        let size = u32::try_from(data.len()).map_err(|_| anyhow::anyhow!("{name}: over 4 GiB"))?;
        let ino = if name == "TRAILER!!!" { 0 } else { self.next_ino };
        self.next_ino += 1;
        let nlink = if mode & 0o170000 == S_IFDIR { 2 } else { 1 };
        let fields = [ino, mode, 0, 0, nlink, 0, size, 0, 0, rdev.0, rdev.1, name.len() as u32 + 1, 0];
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        pad4(&mut self.out);
        self.out.extend_from_slice(data);
        pad4(&mut self.out);
        Ok(())
    }

    /// A directory (`perm` e.g. 0o755).
    pub fn dir(&mut self, name: &str, perm: u32) -> Result<()> {
        self.entry(name, S_IFDIR | perm, (0, 0), &[])
    }

    /// A regular file.
    pub fn file(&mut self, name: &str, perm: u32, data: &[u8]) -> Result<()> {
        self.entry(name, S_IFREG | perm, (0, 0), data)
    }

    /// A symbolic link to `target`.
    pub fn symlink(&mut self, name: &str, target: &str) -> Result<()> {
        self.entry(name, S_IFLNK | 0o777, (0, 0), target.as_bytes())
    }

    /// A character device node.
    pub fn char_dev(&mut self, name: &str, perm: u32, major: u32, minor: u32) -> Result<()> {
        self.entry(name, S_IFCHR | perm, (major, minor), &[])
    }

    /// The finished archive (with its trailer).
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]).expect("the trailer is always valid");
        self.out
    }
}

/// One entry read back (tests, and `cargo xtask` checks of what it built).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub mode: u32,
    pub rdev: (u32, u32),
    pub data: Vec<u8>,
}

/// Reads a newc archive back, checking every header, up to the trailer.
pub fn read(mut b: &[u8]) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    let total = b.len();
    loop {
        let at = total - b.len();
        if b.len() < 110 || &b[..6] != b"070701" {
            bail!("no newc header at offset {at}");
        }
        let field = |i: usize| -> Result<u32> {
            let s = std::str::from_utf8(&b[6 + 8 * i..14 + 8 * i])?;
            Ok(u32::from_str_radix(s, 16)?)
        };
        let (mode, size, rdev, namesize) =
            (field(1)?, field(6)? as usize, (field(9)?, field(10)?), field(11)? as usize);
        let name_end = 110 + namesize;
        if namesize == 0 || b.len() < name_end || b[name_end - 1] != 0 {
            bail!("bad name at offset {at}");
        }
        let name = std::str::from_utf8(&b[110..name_end - 1])?.to_string();
        let data_at = name_end.div_ceil(4) * 4;
        if b.len() < data_at + size {
            bail!("{name}: data runs past the archive");
        }
        let data = b[data_at..data_at + size].to_vec();
        b = &b[((data_at + size).div_ceil(4) * 4).min(b.len())..];
        if name == "TRAILER!!!" {
            return Ok(out);
        }
        out.push(Entry { name, mode, rdev, data });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_layout_is_newc() {
        let mut a = Archive::new();
        a.file("init", 0o755, b"#!/bin/sh\n").unwrap();
        let b = a.finish();
        // magic, ino 1, mode 0100755, uid, gid, nlink 1, mtime, size 10, dev, rdev, namesize 5.
        let h = std::str::from_utf8(&b[..110]).unwrap();
        assert_eq!(&h[..6], "070701");
        assert_eq!(&h[6..14], "00000001");
        assert_eq!(&h[14..22], "000081ED");
        assert_eq!(&h[38..46], "00000001");
        assert_eq!(&h[54..62], "0000000A");
        assert_eq!(&h[94..102], "00000005");
        assert_eq!(&b[110..115], b"init\0");
        // 115 -> padded to 116, then 10 bytes of data, padded to 128.
        assert_eq!(&b[116..126], b"#!/bin/sh\n");
        assert_eq!(&b[128..134], b"070701");
        assert_eq!(b.len() % 4, 0);
    }

    #[test]
    fn round_trip_with_dirs_links_and_devices() {
        let mut a = Archive::new();
        a.dir("bin", 0o755).unwrap();
        a.dir("dev", 0o755).unwrap();
        a.file("bin/busybox", 0o755, &[7u8; 1001]).unwrap();
        a.symlink("bin/sh", "busybox").unwrap();
        a.char_dev("dev/console", 0o600, 5, 1).unwrap();
        let e = read(&a.finish()).unwrap();
        let names: Vec<_> = e.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["bin", "dev", "bin/busybox", "bin/sh", "dev/console"]);
        assert_eq!(e[0].mode, S_IFDIR | 0o755);
        assert_eq!((e[2].mode, e[2].data.len()), (S_IFREG | 0o755, 1001));
        assert_eq!((e[3].mode & 0o170000, e[3].data.as_slice()), (S_IFLNK, &b"busybox"[..]));
        assert_eq!((e[4].mode, e[4].rdev), (S_IFCHR | 0o600, (5, 1)));
    }

    #[test]
    fn refuses_bad_names_and_orphans() {
        let mut a = Archive::new();
        assert!(a.file("/init", 0o755, b"").is_err());
        assert!(a.file("a/../b", 0o755, b"").is_err());
        assert!(a.file("bin/sh", 0o755, b"").is_err(), "directory bin not added");
        a.file("init", 0o755, b"").unwrap();
        assert!(a.file("init", 0o755, b"").is_err(), "twice");
        assert!(read(b"070702").is_err());
        let mut b = Archive::new().finish();
        b.truncate(50);
        assert!(read(&b).is_err());
    }
}
