//! A complete SD card image in memory: an MBR partition table with one FAT32 partition (type
//! 0x0C, from 1 MiB), formatted and filled by the `fatfs` crate: no root, no loop device, no
//! mtools. [`read`] takes an image apart again (for the summary after writing, and the tests).
//! The image is reproducible: fixed volume id, disk signature and file times (1980-01-01, the
//! first FAT date).

use anyhow::{bail, ensure, Context, Result};
use std::io::{Cursor, Read, Write};

/// First sector of the partition (1 MiB, as card partitioning tools align it).
pub const PART_START: u64 = 2048;
/// Bytes per sector.
pub const SECTOR: u64 = 512;
/// MBR partition type: FAT32 with LBA addressing.
pub const TYPE_FAT32_LBA: u8 = 0x0c;
/// Volume label.
pub const LABEL: &[u8; 11] = b"PGTLAB-BOOT";
/// Disk signature written into the MBR ("pgtl").
pub const DISK_SIGNATURE: u32 = 0x6c74_6770;
/// FAT32 needs at least 65525 clusters; keep a margin.
const MIN_CLUSTERS: u64 = 66_000;
/// Smallest image.
pub const MIN_SIZE: u64 = 64 << 20;

/// Every file time: 1980-01-01 00:00, so an image depends on its files alone.
#[derive(Debug)]
struct FixedTime;

static FIXED_TIME: FixedTime = FixedTime;

impl fatfs::TimeProvider for FixedTime {
    fn get_current_date(&self) -> fatfs::Date {
        fatfs::Date { year: 1980, month: 1, day: 1 }
    }
    fn get_current_date_time(&self) -> fatfs::DateTime {
        fatfs::DateTime { date: self.get_current_date(), time: fatfs::Time { hour: 0, min: 0, sec: 0, millis: 0 } }
    }
}

/// One file for the image: a path with `/` between directories, and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Path inside the partition, e.g. `overlays/uart0.dtbo`.
    pub path: String,
    /// Contents.
    pub data: Vec<u8>,
}

/// The image size for `files`: room for them twice over plus 32 MiB, at least [`MIN_SIZE`],
/// in whole MiB.
pub fn size_for(files: &[File]) -> u64 {
    let content: u64 = files.iter().map(|f| f.data.len() as u64 + 4096).sum();
    let size = (content * 2 + (32 << 20)).max(MIN_SIZE);
    size.div_ceil(1 << 20) << 20
}

/// The cluster size that gives FAT32 enough clusters on `bytes`.
fn cluster_size(bytes: u64) -> u32 {
    let mut c = 32 * 1024;
    while c > 512 && bytes / u64::from(c) < MIN_CLUSTERS {
        c /= 2;
    }
    c
}

fn mbr(total_sectors: u64) -> Result<[u8; 512]> {
    let mut m = [0u8; 512];
    m[440..444].copy_from_slice(&DISK_SIGNATURE.to_le_bytes());
    let e = &mut m[446..462];
    e[0] = 0x00; // not marked active: the Pi's firmware does not look
    e[1..4].copy_from_slice(&[0xfe, 0xff, 0xff]); // CHS unused (LBA only)
    e[4] = TYPE_FAT32_LBA;
    e[5..8].copy_from_slice(&[0xfe, 0xff, 0xff]);
    e[8..12].copy_from_slice(&(PART_START as u32).to_le_bytes());
    let count = u32::try_from(total_sectors - PART_START).context("image larger than 2 TiB")?;
    e[12..16].copy_from_slice(&count.to_le_bytes());
    m[510] = 0x55;
    m[511] = 0xaa;
    Ok(m)
}

/// Builds an image of `size` bytes (a multiple of 1 MiB) holding `files`.
pub fn build(files: &[File], size: u64) -> Result<Vec<u8>> {
    ensure!(size.is_multiple_of(1 << 20) && size >= MIN_SIZE, "image size {size} is not whole MiB of at least 64");
    let part_len = size - PART_START * SECTOR;
    let mut part = Cursor::new(vec![0u8; part_len as usize]);
    fatfs::format_volume(
        &mut part,
        fatfs::FormatVolumeOptions::new()
            .fat_type(fatfs::FatType::Fat32)
            .bytes_per_cluster(cluster_size(part_len))
            .volume_label(*LABEL)
            .volume_id(DISK_SIGNATURE),
    )
    .context("formatting the FAT32 partition")?;
    {
        part.set_position(0);
        let options = fatfs::FsOptions::new().time_provider(&FIXED_TIME);
        let fs = fatfs::FileSystem::new(&mut part, options).context("opening the new FAT32 volume")?;
        write_files(&fs, files)?;
        fs.unmount().context("closing the FAT32 volume")?;
    }
    let mut part = part.into_inner();
    // fatfs leaves the BPB's hidden-sector count at 0; a partition says where it starts.
    patch_hidden_sectors(&mut part)?;
    let mut image = Vec::with_capacity(size as usize);
    image.extend_from_slice(&mbr(size / SECTOR)?);
    image.resize((PART_START * SECTOR) as usize, 0);
    image.extend_from_slice(&part);
    Ok(image)
}

fn write_files<T: fatfs::ReadWriteSeek>(fs: &fatfs::FileSystem<T>, files: &[File]) -> Result<()> {
    let root = fs.root_dir();
    for f in files {
        let parts: Vec<&str> = f.path.split('/').filter(|p| !p.is_empty()).collect();
        let Some((name, dirs)) = parts.split_last() else { bail!("empty file name") };
        let mut dir = root.clone();
        for d in dirs {
            dir = match dir.open_dir(d) {
                Ok(x) => x,
                Err(_) => dir.create_dir(d).with_context(|| format!("creating {d}/ for {}", f.path))?,
            };
        }
        let mut file = dir.create_file(name).with_context(|| format!("creating {}", f.path))?;
        file.truncate()?;
        file.write_all(&f.data).with_context(|| format!("writing {} ({} bytes)", f.path, f.data.len()))?;
    }
    Ok(())
}

fn patch_hidden_sectors(part: &mut [u8]) -> Result<()> {
    let backup = u64::from(u16::from_le_bytes([part[50], part[51]]));
    for sector in [0, backup] {
        let at = (sector * SECTOR) as usize + 28;
        part[at..at + 4].copy_from_slice(&(PART_START as u32).to_le_bytes());
    }
    Ok(())
}

/// An image taken apart.
#[derive(Debug, Clone)]
pub struct ImageInfo {
    /// MBR partition entries in use: (type, first sector, sectors).
    pub partitions: Vec<(u8, u32, u32)>,
    /// The first partition's file system as the BPB names it (`FAT32   `).
    pub fs_type: String,
    /// Its volume label.
    pub label: String,
    /// Its BPB's hidden-sector count.
    pub hidden_sectors: u32,
    /// Bytes per cluster.
    pub cluster_size: u32,
    /// Every file, sorted by path.
    pub files: Vec<File>,
}

impl ImageInfo {
    /// The file at `path`.
    pub fn file(&self, path: &str) -> Option<&File> {
        self.files.iter().find(|f| f.path == path)
    }
}

/// Reads an image back: the MBR checked by hand, then the first partition through `fatfs`.
pub fn read(image: &[u8]) -> Result<ImageInfo> {
    ensure!(image.len() >= 512 && image[510..512] == [0x55, 0xaa], "no MBR signature 55 aa in sector 0");
    let mut partitions = Vec::new();
    for e in image[446..510].chunks_exact(16) {
        let lba = u32::from_le_bytes(e[8..12].try_into()?);
        let count = u32::from_le_bytes(e[12..16].try_into()?);
        if e[4] != 0 {
            partitions.push((e[4], lba, count));
        }
    }
    let &(_, lba, count) = partitions.first().context("the MBR lists no partition")?;
    let (start, end) = (u64::from(lba) * SECTOR, (u64::from(lba) + u64::from(count)) * SECTOR);
    ensure!(end <= image.len() as u64, "partition 1 ends at {end:#x}, past the image ({:#x})", image.len());
    let part = &image[start as usize..end as usize];
    let fs_type = String::from_utf8_lossy(&part[82..90]).to_string();
    let hidden_sectors = u32::from_le_bytes(part[28..32].try_into()?);
    let fs = fatfs::FileSystem::new(Cursor::new(part.to_vec()), fatfs::FsOptions::new())
        .context("partition 1 is not a FAT file system")?;
    let label = fs.volume_label();
    let cluster_size = fs.cluster_size();
    let mut files = Vec::new();
    let mut todo = vec![(String::new(), fs.root_dir())];
    while let Some((prefix, dir)) = todo.pop() {
        for e in dir.iter() {
            let e = e?;
            let name = e.file_name();
            if name == "." || name == ".." {
                continue;
            }
            let path = format!("{prefix}{name}");
            if e.is_dir() {
                todo.push((format!("{path}/"), e.to_dir()));
            } else {
                let mut data = Vec::new();
                e.to_file().read_to_end(&mut data)?;
                files.push(File { path, data });
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(ImageInfo { partitions, fs_type, label, hidden_sectors, cluster_size, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<File> {
        vec![
            File { path: "config.txt".into(), data: b"arm_64bit=1\n".to_vec() },
            File { path: "kernel_2712.img".into(), data: (0..300_000u32).map(|i| (i % 251) as u8).collect() },
            File { path: "overlays/README".into(), data: b"x".to_vec() },
            File { path: "overlays/deep/er.dtbo".into(), data: vec![7; 5000] },
            File { path: "empty".into(), data: vec![] },
        ]
    }

    #[test]
    fn builds_and_reads_back() {
        let size = size_for(&files());
        assert_eq!(size, MIN_SIZE);
        let img = build(&files(), size).unwrap();
        assert_eq!(img.len() as u64, size);
        let info = read(&img).unwrap();
        assert_eq!(info.partitions, [(TYPE_FAT32_LBA, 2048, (size / 512 - 2048) as u32)]);
        assert_eq!(info.fs_type, "FAT32   ");
        assert_eq!(info.label, "PGTLAB-BOOT");
        assert_eq!(info.hidden_sectors, 2048);
        assert_eq!(info.cluster_size, 512);
        let mut want = files();
        want.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(info.files, want);
        // Reproducible.
        assert_eq!(build(&files(), size).unwrap(), img);
        // The backup boot sector (sector 6 of the partition) says the same.
        let p = (PART_START * SECTOR) as usize;
        assert_eq!(img[p + 6 * 512 + 28..p + 6 * 512 + 32], 2048u32.to_le_bytes());
        assert_eq!(img[440..444], DISK_SIGNATURE.to_le_bytes());
    }

    #[test]
    fn bigger_content_gets_a_bigger_image_and_clusters() {
        let big = vec![File { path: "big.bin".into(), data: vec![1; 80 << 20] }];
        let size = size_for(&big);
        assert!(size >= 192 << 20 && size.is_multiple_of(1 << 20));
        assert_eq!(cluster_size(size), 2048);
        assert!(build(&files(), 63 << 20).is_err());
    }

    #[test]
    fn read_refuses_what_is_not_an_image() {
        assert!(read(&[0u8; 4096]).unwrap_err().to_string().contains("no MBR"));
        let mut img = build(&files(), MIN_SIZE).unwrap();
        img.truncate(1 << 20);
        assert!(read(&img).unwrap_err().to_string().contains("past the image"));
    }
}
