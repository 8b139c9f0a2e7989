//! `cargo xtask flash --device`: which disks may be overwritten. Everything is read from sysfs
//! and the mount table (paths in [`Host`], so tests give fake ones): a whole disk (not a
//! partition) that is removable (or an SD card in an MMC slot, which Linux does not mark
//! removable), with nothing on it mounted, used as swap or held by device mapper / RAID, that
//! does not hold `/`, and that is large enough.

use anyhow::{Context, Result};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where the system's facts are read from.
#[derive(Debug, Clone)]
pub struct Host {
    /// `/sys`.
    pub sys: PathBuf,
    /// `/proc/self/mountinfo`.
    pub mountinfo: PathBuf,
    /// `/proc/swaps`.
    pub swaps: PathBuf,
}

impl Host {
    /// The running system.
    pub fn real() -> Self {
        Host { sys: "/sys".into(), mountinfo: "/proc/self/mountinfo".into(), swaps: "/proc/swaps".into() }
    }
}

/// A disk that may be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// Kernel name (`sdb`, `mmcblk0`).
    pub name: String,
    /// `vendor model` as sysfs has them.
    pub model: String,
    /// Bytes.
    pub size: u64,
    /// Why it counts as removable media.
    pub removable: &'static str,
}

impl Disk {
    /// `/dev/NAME`.
    pub fn dev(&self) -> PathBuf {
        Path::new("/dev").join(&self.name)
    }

    /// The question asked before writing.
    pub fn question(&self, image_len: u64) -> String {
        format!(
            "Write the {} MiB pgtlab boot image to {} ({}, {}, {})? Everything on it will be lost. Type yes: ",
            image_len >> 20,
            self.dev().display(),
            self.model,
            human(self.size),
            self.removable
        )
    }
}

/// `31.9 GB (29.7 GiB)`.
pub fn human(bytes: u64) -> String {
    format!("{:.1} GB ({:.1} GiB)", bytes as f64 / 1e9, bytes as f64 / (1u64 << 30) as f64)
}

/// Why a disk is not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No such block device.
    NotFound(String),
    /// A partition: the whole disk must be given.
    Partition {
        /// The partition.
        part: String,
        /// Its disk.
        disk: String,
    },
    /// Not removable media.
    NotRemovable {
        /// The disk.
        name: String,
        /// Its model.
        model: String,
        /// Its size.
        size: u64,
    },
    /// It holds the running system's root file system.
    HoldsRoot {
        /// The disk.
        name: String,
        /// The device mounted at `/`.
        via: String,
    },
    /// Something on it is mounted.
    Mounted {
        /// The disk.
        name: String,
        /// The device that is mounted.
        what: String,
        /// Where.
        at: String,
    },
    /// Used as swap.
    Swap {
        /// The disk.
        name: String,
        /// The swap device.
        what: String,
    },
    /// Held by device mapper, RAID or similar.
    Held {
        /// The disk.
        name: String,
        /// The holder.
        by: String,
    },
    /// Smaller than the image.
    TooSmall {
        /// The disk.
        name: String,
        /// Its size.
        size: u64,
        /// The image's.
        need: u64,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotFound(n) => write!(f, "/dev/{n} is not a block device this system knows (see `lsblk`)"),
            Refusal::Partition { part, disk } => {
                write!(f, "/dev/{part} is a partition of /dev/{disk}: give the whole disk, --device /dev/{disk}")
            }
            Refusal::NotRemovable { name, model, size } => write!(
                f,
                "/dev/{name} ({model}, {}) is not removable media: refusing to overwrite what may be a system disk",
                human(*size)
            ),
            Refusal::HoldsRoot { name, via } => {
                write!(f, "/dev/{name} holds the running system's root file system (/ is on {via}): refusing")
            }
            Refusal::Mounted { name, what, at } => {
                write!(f, "{what} on /dev/{name} is mounted at {at}: unmount it first (`umount {at}`)")
            }
            Refusal::Swap { name, what } => {
                write!(f, "{what} on /dev/{name} is in use as swap: `swapoff {what}` first")
            }
            Refusal::Held { name, by } => {
                write!(f, "/dev/{name} is in use by {by} (device mapper, LVM, RAID or encryption): release it first")
            }
            Refusal::TooSmall { name, size, need } => {
                write!(f, "/dev/{name} has {} but the image needs {}", human(*size), human(*need))
            }
        }
    }
}

impl std::error::Error for Refusal {}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// Disk name -> its partitions' names, and each `maj:min` -> the disk or partition with it.
struct Blocks {
    sys: PathBuf,
    disks: Vec<(String, Vec<String>)>,
    devnums: Vec<(String, String)>,
}

impl Blocks {
    fn scan(sys: &Path) -> Result<Blocks> {
        let block = sys.join("block");
        let mut disks = Vec::new();
        let mut devnums = Vec::new();
        let entries = std::fs::read_dir(&block).with_context(|| format!("reading {}", block.display()))?;
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(d) = read(&e.path().join("dev")) {
                devnums.push((d, name.clone()));
            }
            let mut parts = Vec::new();
            for p in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
                let pname = p.file_name().to_string_lossy().into_owned();
                if p.path().join("partition").exists() {
                    if let Some(d) = read(&p.path().join("dev")) {
                        devnums.push((d, pname.clone()));
                    }
                    parts.push(pname);
                }
            }
            disks.push((name, parts));
        }
        Ok(Blocks { sys: sys.to_path_buf(), disks, devnums })
    }

    /// The disk a disk or partition name belongs to.
    fn disk_of(&self, name: &str) -> Option<&str> {
        self.disks.iter().find(|(d, parts)| d == name || parts.iter().any(|p| p == name)).map(|(d, _)| d.as_str())
    }

    /// Every physical disk under a block device (through device-mapper / RAID `slaves`).
    fn disks_under(&self, name: &str, out: &mut BTreeSet<String>, depth: usize) {
        let Some(disk) = self.disk_of(name) else { return };
        let slaves = self.sys.join("block").join(disk).join("slaves");
        let mut any = false;
        if depth < 8 {
            for s in std::fs::read_dir(slaves).into_iter().flatten().flatten() {
                any = true;
                self.disks_under(&s.file_name().to_string_lossy(), out, depth + 1);
            }
        }
        if !any {
            out.insert(disk.to_string());
        }
    }

    /// The physical disks a mount (by `maj:min`, else by its source device) lives on.
    fn disks_of_mount(&self, devnum: &str, source: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let by_num = self.devnums.iter().find(|(d, _)| d == devnum).map(|(_, n)| n.clone());
        let by_source = source.strip_prefix("/dev/").map(|s| s.rsplit('/').next().unwrap_or(s).to_string());
        for n in [by_num, by_source].into_iter().flatten() {
            self.disks_under(&n, &mut out, 0);
        }
        out
    }
}

/// One line of mountinfo: (maj:min, mount point, source).
fn mounts(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let dash = f.iter().position(|x| *x == "-")?;
            Some((f.get(2)?.to_string(), unescape(f.get(4)?), f.get(dash + 2)?.to_string()))
        })
        .collect()
}

/// mountinfo writes space, tab, newline and backslash as octal escapes.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let oct: String = chars.clone().take(3).collect();
            if let Ok(v) = u8::from_str_radix(&oct, 8) {
                out.push(v as char);
                chars.nth(2);
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Checks that `dev` (`/dev/sdb`, already resolved from any symlink) may be overwritten with an
/// image of `need` bytes.
pub fn inspect(host: &Host, dev: &Path, need: u64) -> Result<Disk> {
    let name = dev.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let blocks = Blocks::scan(&host.sys)?;
    let dir = host.sys.join("block").join(&name);
    if !dir.is_dir() {
        return Err(match blocks.disk_of(&name) {
            Some(disk) => Refusal::Partition { part: name.clone(), disk: disk.to_string() },
            None => Refusal::NotFound(name),
        }
        .into());
    }
    let vendor = read(&dir.join("device/vendor")).unwrap_or_default();
    let model = read(&dir.join("device/model")).or_else(|| read(&dir.join("device/name"))).unwrap_or_default();
    let model = match (vendor.is_empty(), model.is_empty()) {
        (true, true) => String::from("unknown model"),
        _ => format!("{vendor} {model}").trim().to_string(),
    };
    let size = read(&dir.join("size")).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0) * 512;
    let removable = if read(&dir.join("removable")).as_deref() == Some("1") {
        "removable"
    } else if read(&dir.join("device/type")).as_deref() == Some("SD") {
        "SD card"
    } else {
        return Err(Refusal::NotRemovable { name, model, size }.into());
    };
    let mountinfo = std::fs::read_to_string(&host.mountinfo)
        .with_context(|| format!("reading the mount table {}", host.mountinfo.display()))?;
    let table = mounts(&mountinfo);
    for (num, at, source) in &table {
        if at == "/" && blocks.disks_of_mount(num, source).contains(&name) {
            return Err(Refusal::HoldsRoot { name, via: source.clone() }.into());
        }
    }
    for (num, at, source) in &table {
        if blocks.disks_of_mount(num, source).contains(&name) {
            return Err(Refusal::Mounted { name, what: source.clone(), at: at.clone() }.into());
        }
    }
    let swaps = std::fs::read_to_string(&host.swaps).unwrap_or_default();
    for line in swaps.lines().skip(1) {
        let what = line.split_whitespace().next().unwrap_or_default();
        if blocks.disks_of_mount("", what).contains(&name) {
            return Err(Refusal::Swap { name, what: what.to_string() }.into());
        }
    }
    let parts = blocks.disks.iter().find(|(d, _)| *d == name).map(|(_, p)| p.clone()).unwrap_or_default();
    for holders in std::iter::once(dir.join("holders")).chain(parts.iter().map(|p| dir.join(p).join("holders"))) {
        if let Some(h) = std::fs::read_dir(holders).into_iter().flatten().flatten().next() {
            return Err(Refusal::Held { name, by: h.file_name().to_string_lossy().into_owned() }.into());
        }
    }
    if size < need {
        return Err(Refusal::TooSmall { name, size, need }.into());
    }
    Ok(Disk { name, model, size, removable })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake /sys and /proc: sda (fixed, root on sda2), sdb (a USB card reader, sdb1),
    /// mmcblk0 (an SD card in a laptop slot), nvme0n1 under dm-0 (LVM).
    struct Fake {
        dir: tempfile::TempDir,
    }

    impl Fake {
        fn new() -> Fake {
            let f = Fake { dir: tempfile::tempdir().unwrap() };
            f.disk("sda", "8:0", "0", "ATA", "Samsung SSD 870", 1_000_000_000, &[("sda1", "8:1"), ("sda2", "8:2")]);
            f.disk("sdb", "8:16", "1", "Generic", "STORAGE DEVICE", 62_333_952, &[("sdb1", "8:17")]);
            f.disk("mmcblk0", "179:0", "0", "", "", 31_116_288, &[("mmcblk0p1", "179:1")]);
            f.put("sys/block/mmcblk0/device/type", "SD");
            f.put("sys/block/mmcblk0/device/name", "SC32G");
            f.disk("nvme0n1", "259:0", "0", "", "WD Blue", 500_000_000, &[("nvme0n1p1", "259:1")]);
            f.disk("dm-0", "254:0", "0", "", "", 400_000_000, &[]);
            f.put("sys/block/dm-0/slaves/nvme0n1p1/.keep", "");
            f.put("sys/block/nvme0n1/nvme0n1p1/holders/dm-0/.keep", "");
            f.mounts("22 1 8:2 / / rw - ext4 /dev/sda2 rw\n23 22 0:21 / /proc rw - proc proc rw\n");
            f.put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
            f
        }
        fn put(&self, rel: &str, text: &str) {
            let p = self.dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        #[allow(clippy::too_many_arguments)]
        fn disk(&self, n: &str, dev: &str, rem: &str, vendor: &str, model: &str, sectors: u64, parts: &[(&str, &str)]) {
            self.put(&format!("sys/block/{n}/dev"), dev);
            self.put(&format!("sys/block/{n}/removable"), rem);
            self.put(&format!("sys/block/{n}/size"), &sectors.to_string());
            if !vendor.is_empty() {
                self.put(&format!("sys/block/{n}/device/vendor"), vendor);
            }
            if !model.is_empty() {
                self.put(&format!("sys/block/{n}/device/model"), model);
            }
            for (p, d) in parts {
                self.put(&format!("sys/block/{n}/{p}/dev"), d);
                self.put(&format!("sys/block/{n}/{p}/partition"), "1");
            }
        }
        fn mounts(&self, text: &str) {
            self.put("proc/self/mountinfo", text);
        }
        fn host(&self) -> Host {
            let d = self.dir.path();
            Host { sys: d.join("sys"), mountinfo: d.join("proc/self/mountinfo"), swaps: d.join("proc/swaps") }
        }
        fn check(&self, dev: &str) -> Result<Disk, Refusal> {
            inspect(&self.host(), Path::new(dev), 64 << 20).map_err(|e| e.downcast::<Refusal>().expect("a refusal"))
        }
    }

    #[test]
    fn a_card_reader_and_an_sd_slot_are_accepted() {
        let f = Fake::new();
        let d = f.check("/dev/sdb").unwrap();
        assert_eq!((d.model.as_str(), d.size, d.removable), ("Generic STORAGE DEVICE", 62_333_952 * 512, "removable"));
        let q = d.question(64 << 20);
        assert!(q.contains("/dev/sdb (Generic STORAGE DEVICE, 31.9 GB (29.7 GiB), removable)"), "{q}");
        let m = f.check("/dev/mmcblk0").unwrap();
        assert_eq!((m.model.as_str(), m.removable), ("SC32G", "SD card"));
    }

    #[test]
    fn refusals() {
        let f = Fake::new();
        assert_eq!(f.check("/dev/sdz"), Err(Refusal::NotFound("sdz".into())));
        assert_eq!(f.check("/dev/sdb1"), Err(Refusal::Partition { part: "sdb1".into(), disk: "sdb".into() }));
        assert!(matches!(f.check("/dev/nvme0n1"), Err(Refusal::NotRemovable { .. })));
        // A fixed disk that claims to be removable but holds / (some USB-booted systems).
        f.put("sys/block/sda/removable", "1");
        assert_eq!(f.check("/dev/sda"), Err(Refusal::HoldsRoot { name: "sda".into(), via: "/dev/sda2".into() }));
        // A mounted partition.
        f.mounts("22 1 8:2 / / rw - ext4 /dev/sda2 rw\n40 22 8:17 / /media/u/boot\\040fs rw - vfat /dev/sdb1 rw\n");
        assert_eq!(
            f.check("/dev/sdb"),
            Err(Refusal::Mounted { name: "sdb".into(), what: "/dev/sdb1".into(), at: "/media/u/boot fs".into() })
        );
        // Swap.
        f.mounts("22 1 8:2 / / rw - ext4 /dev/sda2 rw\n");
        f.put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n/dev/sdb1 partition 1 0 -2\n");
        assert_eq!(f.check("/dev/sdb"), Err(Refusal::Swap { name: "sdb".into(), what: "/dev/sdb1".into() }));
        f.put("proc/swaps", "Filename\tType\tSize\tUsed\tPriority\n");
        // Held by device mapper (an open LUKS volume, LVM).
        f.put("sys/block/sdb/sdb1/holders/dm-3/.keep", "");
        assert_eq!(f.check("/dev/sdb"), Err(Refusal::Held { name: "sdb".into(), by: "dm-3".into() }));
        std::fs::remove_dir_all(f.dir.path().join("sys/block/sdb/sdb1/holders")).unwrap();
        // Too small.
        f.put("sys/block/sdb/size", "1000");
        assert!(matches!(f.check("/dev/sdb"), Err(Refusal::TooSmall { size: 512_000, .. })));
    }

    #[test]
    fn root_through_device_mapper_is_found() {
        let f = Fake::new();
        f.put("sys/block/nvme0n1/removable", "1");
        f.mounts("22 1 254:0 / / rw - ext4 /dev/mapper/vg-root rw\n");
        assert_eq!(
            f.check("/dev/nvme0n1"),
            Err(Refusal::HoldsRoot { name: "nvme0n1".into(), via: "/dev/mapper/vg-root".into() })
        );
        // btrfs reports an anonymous 0:N device: the source path decides.
        f.mounts("22 1 0:31 / / rw - btrfs /dev/sdb1 rw\n");
        assert!(matches!(f.check("/dev/sdb"), Err(Refusal::HoldsRoot { .. })));
    }

    #[test]
    fn refusals_read_well() {
        let r = Refusal::NotRemovable { name: "sda".into(), model: "ATA X".into(), size: 1 << 30 };
        assert!(r.to_string().contains("is not removable media"));
        let r = Refusal::Partition { part: "sdb1".into(), disk: "sdb".into() };
        assert!(r.to_string().contains("--device /dev/sdb"));
    }
}
