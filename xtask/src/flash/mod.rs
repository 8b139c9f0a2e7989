//! `cargo xtask flash`: puts the hypervisor and the kernel (or the serial chainloader) where a
//! Raspberry Pi 5's firmware boots them, in one of three ways:
//!
//! * `--boot-dir DIR`: a mounted boot partition. Writes the file the firmware boots (the hypervisor; `machine::Card::kernel`), [`GUEST`]
//!   (the kernel, loaded by the firmware as the initramfs) and [`CMDLINE`], and the pgtlab section
//!   of `config.txt` ([`config_txt`]); a file that was there first is kept as `NAME.pgtlab-backup`.
//!   `--uninstall` puts everything back.
//! * `--image FILE`: a complete SD card image ([`fat`]), with the files of `--firmware DIR` if
//!   given (the firmware files cannot be fetched here; the Pi 5 needs at least its DTB,
//!   `bcm2712-rpi-5-b.dtb`, on the card).
//! * `--device /dev/sdX`: that image written to a card, after the checks of [`device`] and a
//!   question (`--yes` for scripts), then read back and compared.

pub mod config_txt;
pub mod device;
pub mod fat;
pub mod layouts;

use anyhow::{bail, ensure, Context, Result};
use config_txt::Section;
use fat::File;
use std::io::{IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// Which board the card is for: its row's card layout (`crate::machine::Card`: the file its
/// firmware boots, the DTB it loads).
pub use crate::machine::Card as Pi;

/// The Pi 5's card (the default of `flash --board`).
pub fn pi5() -> Pi {
    crate::machine::with_card("pi5").expect("the Pi 5 has a card").1
}

/// The guest kernel, which the firmware loads as the initramfs for the hypervisor.
pub const GUEST: &str = "pgtlab-kernel.img";
/// TF-A's BL31 on the card (config.txt `armstub=`).
pub const ARMSTUB: &str = "pgtlab-bl31.bin";
/// The boot arguments (the firmware puts its line in `/chosen/bootargs`).
pub const CMDLINE: &str = "pgtlab-cmdline.txt";
/// The firmware's configuration file.
pub const CONFIG: &str = "config.txt";
/// The fastest rate a PL011 reaches from the 9.216 MHz reference clock the Pi 5's DTB gives its
/// debug UART (clock / 16).
pub const MAX_DEBUG_UART_BAUD: u32 = 576_000;
/// The largest card image `--size-mib` builds (it is built in memory): a boot partition holds
/// the firmware and a few Images, and Raspberry Pi OS makes its own 512 MiB.
pub const MAX_SIZE_MIB: u64 = 4096;
/// Suffix of the copy kept of a file that was there before.
pub const BACKUP: &str = ".pgtlab-backup";

/// What goes on the card besides the firmware's files.
#[derive(Debug, Clone)]
pub struct Boot {
    /// The contents of the file the firmware boots (the hypervisor or the chainloader).
    pub kernel: Vec<u8>,
    /// [`GUEST`]'s contents (`None` with the chainloader).
    pub guest: Option<Vec<u8>>,
    /// The boot arguments.
    pub bootargs: String,
    /// `init_uart_baud` when not 115200.
    pub baud: Option<u32>,
    /// Which Pi.
    pub pi: Pi,
    /// The armstub ([`ARMSTUB`], config.txt `armstub=`): TF-A's BL31 for the board.
    pub armstub: Option<Vec<u8>>,
}

impl Boot {
    /// The config.txt section that boots it.
    pub fn section(&self) -> Section {
        Section {
            kernel: self.pi.kernel.into(),
            initramfs: self.guest.as_ref().map(|_| GUEST.to_string()),
            cmdline: CMDLINE.into(),
            baud: self.baud,
            armstub: self.armstub.as_ref().map(|_| ARMSTUB.to_string()),
        }
    }

    /// The files it writes, config.txt aside.
    pub fn files(&self) -> Vec<File> {
        let mut v = vec![File { path: self.pi.kernel.into(), data: self.kernel.clone() }];
        if let Some(g) = &self.guest {
            v.push(File { path: GUEST.into(), data: g.clone() });
        }
        if let Some(a) = &self.armstub {
            v.push(File { path: ARMSTUB.into(), data: a.clone() });
        }
        // The firmware puts its own words in front of this line: the marker ends them.
        let line = format!("{} {}", bootargs::FIRMWARE_MARKER, self.bootargs.trim());
        v.push(File { path: CMDLINE.into(), data: format!("{}\n", line.trim_end()).into_bytes() });
        v
    }
}

/// Every file under `dir`, paths relative to it with `/`.
pub fn files_under(dir: &Path) -> Result<Vec<File>> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let e = e?;
            let p = e.path();
            let t = e.file_type()?;
            if t.is_dir() {
                todo.push(p);
            } else if !t.is_file() {
                // A FIFO or a device would block the read or never end; a link could lead anywhere.
                return Err(anyhow::Error::new(crate::error::Refused(format!(
                    "{}: not a regular file (a FIFO, device, socket or symbolic link): a card takes files",
                    p.display()
                ))));
            } else {
                let rel = p.strip_prefix(dir)?.to_string_lossy().replace('\\', "/");
                out.push(File {
                    path: rel,
                    data: std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?,
                });
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The files of a card image: the firmware's (if any), with ours replacing any of the same name
/// and config.txt (the firmware's, or a new one) with the section.
pub fn image_files(boot: &Boot, firmware: Option<&Path>) -> Result<Vec<File>> {
    let mut files = match firmware {
        Some(d) => files_under(d)?,
        None => Vec::new(),
    };
    let ours = boot.files();
    let config = match files.iter().position(|f| f.path.eq_ignore_ascii_case(CONFIG)) {
        Some(i) => String::from_utf8(files.remove(i).data).context("the firmware's config.txt is not text")?,
        None => String::new(),
    };
    files.retain(|f| !ours.iter().any(|o| o.path.eq_ignore_ascii_case(&f.path)));
    files.extend(ours);
    files.push(File { path: CONFIG.into(), data: config_txt::apply(&config, &boot.section())?.into_bytes() });
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// A warning when the Pi 5's DTB is missing from `paths`.
pub fn dtb_warning<'a>(paths: impl Iterator<Item = &'a str>) -> Option<String> {
    dtb_warning_for(pi5(), paths)
}

/// A warning when `pi`'s DTB is missing from `paths`.
pub fn dtb_warning_for<'a>(pi: Pi, mut paths: impl Iterator<Item = &'a str>) -> Option<String> {
    let dtb = pi.dtb;
    let name = pi.short;
    (!paths.any(|p| p.eq_ignore_ascii_case(dtb))).then(|| {
        format!(
            "warning: no {dtb} on the card. The {name}'s firmware hands the kernel the DTB it loads from the \
             card; without it the hypervisor gets none and cannot even find its UART. Add --firmware DIR with \
             it (from Raspberry Pi OS's boot partition, or Debian's linux-image-arm64 package: \
             /usr/lib/linux-image-*/broadcom/{dtb}; `cargo xtask test` leaves one in target/downloads/debian-arm64/)"
        )
    })
}

/// What [`install_boot_dir`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    /// Files written.
    pub written: Vec<String>,
    /// Backups made now (`NAME.pgtlab-backup`), of files that were there before.
    pub backed_up: Vec<String>,
    /// The user's config.txt lines the section overrides (line number, text).
    pub overridden: Vec<(usize, String)>,
}

fn backup_once(path: &Path, done: &mut Vec<String>) -> Result<()> {
    let backup = PathBuf::from(format!("{}{BACKUP}", path.display()));
    if path.exists() && !backup.exists() {
        std::fs::copy(path, &backup).with_context(|| format!("backing up {}", path.display()))?;
        done.push(backup.file_name().unwrap_or_default().to_string_lossy().into_owned());
    }
    Ok(())
}

/// Writes `data` to `path` through a temporary file and a rename, so a full card or a pulled
/// card never leaves half a file under the real name.
fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = PathBuf::from(format!("{}.pgtlab-new", path.display()));
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(data).with_context(|| format!("writing {}", tmp.display()))?;
    f.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// `--boot-dir`: writes the files and the config.txt section into a mounted boot partition. A
/// file that was there before pgtlab came is kept once as `NAME.pgtlab-backup`.
pub fn install_boot_dir(dir: &Path, boot: &Boot) -> Result<Installed> {
    ensure!(dir.is_dir(), "{} is not a directory (give the mounted boot partition)", dir.display());
    let mut out = Installed::default();
    let config_path = dir.join(CONFIG);
    let config = match std::fs::read(&config_path) {
        Ok(b) => String::from_utf8(b).context("config.txt is not text")?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).context("reading config.txt"),
    };
    // Refuse a broken section before anything is written.
    let new_config = config_txt::apply(&config, &boot.section())?;
    out.overridden = config_txt::overridden(&new_config);
    // Once the section is there, the files are pgtlab's own: no backups of them.
    let first = config_txt::section_of(&config)?.is_none();
    for f in boot.files() {
        let p = dir.join(&f.path);
        if first {
            backup_once(&p, &mut out.backed_up)?;
        }
        write_atomic(&p, &f.data)?;
        out.written.push(f.path);
    }
    if boot.guest.is_none() && dir.join(GUEST).exists() {
        std::fs::remove_file(dir.join(GUEST))?;
    }
    if first {
        backup_once(&config_path, &mut out.backed_up)?;
    }
    write_atomic(&config_path, new_config.as_bytes())?;
    out.written.push(CONFIG.into());
    Ok(out)
}

/// `--boot-dir --uninstall`: removes the section and pgtlab's files, and puts back what the
/// backups hold. Returns what it did, one line each.
pub fn uninstall_boot_dir(dir: &Path) -> Result<Vec<String>> {
    let mut done = Vec::new();
    let config_path = dir.join(CONFIG);
    if let Ok(text) = std::fs::read_to_string(&config_path) {
        let without = config_txt::remove(&text)?;
        if without != text {
            write_atomic(&config_path, without.as_bytes())?;
            done.push(format!("removed the pgtlab section from {CONFIG}"));
        }
    }
    let kernels = crate::machine::MACHINES.iter().filter_map(|m| m.card.map(|c| c.kernel));
    for name in kernels.chain([GUEST, CMDLINE]) {
        let p = dir.join(name);
        let backup = dir.join(format!("{name}{BACKUP}"));
        if backup.exists() {
            std::fs::rename(&backup, &p)?;
            done.push(format!("restored {name} from {name}{BACKUP}"));
        } else if p.exists() {
            std::fs::remove_file(&p)?;
            done.push(format!("removed {name}"));
        }
    }
    let _ = std::fs::remove_file(dir.join(format!("{CONFIG}{BACKUP}")));
    Ok(done)
}

/// `cargo xtask flash` options.
#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["boot_dir", "device", "image"])))]
pub struct Args {
    /// A mounted boot partition to install into.
    #[arg(long)]
    pub boot_dir: Option<PathBuf>,
    /// A whole SD card (e.g. /dev/sdb) to overwrite with a new boot image.
    #[arg(long)]
    pub device: Option<PathBuf>,
    /// An SD card image file to write (for dd, or a card writer).
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// A directory of firmware files to put on the image too (at least bcm2712-rpi-5-b.dtb;
    /// e.g. a copy of Raspberry Pi OS's boot partition). Its config.txt is kept, with the
    /// pgtlab section added.
    #[arg(long, conflicts_with = "boot_dir")]
    pub firmware: Option<PathBuf>,
    /// Which Raspberry Pi: pi5 (kernel_2712.img) or pi4 (kernel8.img, entered at EL2 with
    /// arm_64bit=1; console on the mini UART).
    #[arg(long, default_value = "pi5")]
    pub board: String,
    /// What boots the card: `pi` (a Raspberry Pi's firmware and config.txt, `--board`), `uboot`
    /// (U-Boot's distro boot finds boot.scr: it loads the hypervisor and the guest and describes
    /// the guest in /chosen/module@ nodes), `efi` (an EFI system partition: the hypervisor as
    /// EFI/BOOT/BOOTAA64.EFI, the guest and command line beside it).
    #[arg(long, default_value = "pi", value_parser = ["pi", "uboot", "efi"])]
    pub layout: String,
    /// The Pi's armstub (config.txt `armstub=`, entered at EL3 before the hypervisor): `tfa`
    /// for Debian's TF-A BL31 for the board (Pi 4: PSCI from EL3 instead of the spin table), or
    /// a file.
    #[arg(long)]
    pub armstub: Option<String>,
    /// Install the serial chainloader instead (then `cargo xtask chainboot --serial DEV`).
    #[arg(long)]
    pub chainloader: bool,
    /// Kernel command line (words starting with `hyp.` go to the hypervisor).
    #[arg(long, default_value = "")]
    pub bootargs: String,
    /// Debug UART baud rate for the firmware (config.txt `init_uart_baud`); 115200 by default.
    #[arg(long, value_parser = crate::chainboot::link::baud_arg)]
    pub baud: Option<u32>,
    /// Image size in MiB (default: what the files need, at least 64; at most 4096).
    #[arg(long, value_parser = clap::value_parser!(u64).range(fat::MIN_SIZE >> 20..=MAX_SIZE_MIB))]
    pub size_mib: Option<u64>,
    /// Do not ask before overwriting the --device.
    #[arg(long)]
    pub yes: bool,
    /// With --boot-dir: remove what an earlier flash installed and restore the backups.
    #[arg(long, requires = "boot_dir")]
    pub uninstall: bool,
}

/// Runs `cargo xtask flash`.
pub fn cli(a: Args) -> Result<()> {
    let refuse = |why: String| anyhow::Error::new(crate::error::Refused(why));
    if a.uninstall && a.boot_dir.is_none() {
        return Err(refuse(
            "--uninstall undoes an install into a mounted boot partition: give --boot-dir DIR (a card or an image \
             is written whole; there is nothing to undo there)"
                .into(),
        ));
    }
    crate::launch::check_line("--bootargs", &a.bootargs)?;
    if let Some(dir) = &a.boot_dir {
        if !dir.is_dir() {
            return Err(refuse(format!(
                "--boot-dir {}: not a directory (give the mounted boot partition)",
                dir.display()
            )));
        }
    }
    if let Some(path) = &a.image {
        check_image_target(path).map_err(refuse)?;
    }
    if let (true, Some(dir)) = (a.uninstall, &a.boot_dir) {
        let done = uninstall_boot_dir(dir)?;
        if done.is_empty() {
            eprintln!("xtask: nothing of pgtlab's in {}: nothing to undo", dir.display());
        }
        for line in done {
            eprintln!("xtask: {line}");
        }
        return Ok(());
    }
    if let Some(b) = a.baud {
        if b > MAX_DEBUG_UART_BAUD {
            eprintln!(
                "xtask: warning: the Pi 5's debug UART runs from a 9.216 MHz clock in its DTB, which divides down to \
                 {MAX_DEBUG_UART_BAUD} baud at most; {b} works only if the firmware clocks it faster (not tried on a board)"
            );
        }
    }
    let pi = crate::machine::with_card(&a.board)?.1;
    let tc = crate::provision::toolchain::find()?;
    let images = crate::build::build(&tc, &[])?;
    if a.layout != "pi" {
        return layout_cli(&a);
    }
    let armstub = match a.armstub.as_deref() {
        None => None,
        Some("tfa") => Some(std::fs::read(armstub_tfa(pi)?)?),
        Some(file) => Some(std::fs::read(file).with_context(|| format!("--armstub {file}"))?),
    };
    let boot = Boot {
        armstub,
        pi,
        kernel: std::fs::read(if a.chainloader {
            crate::build::chainloader_image()
        } else {
            images.hypervisor.clone()
        })?,
        guest: if a.chainloader { None } else { Some(std::fs::read(&images.kernel)?) },
        bootargs: a.bootargs.clone(),
        baud: a.baud.filter(|&b| b != 115_200),
    };
    let what = if a.chainloader { "the serial chainloader" } else { "the hypervisor and the kernel" };
    if let Some(dir) = &a.boot_dir {
        let done = install_boot_dir(dir, &boot)?;
        eprintln!("xtask: installed {what} in {}: {}", dir.display(), done.written.join(", "));
        for b in &done.backed_up {
            eprintln!("xtask: kept what was there before as {b}");
        }
        for (line, text) in &done.overridden {
            eprintln!("xtask: note: config.txt line {line} `{text}` is overridden by the pgtlab section");
        }
        let names: Vec<String> =
            std::fs::read_dir(dir)?.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        if let Some(w) = dtb_warning_for(pi, names.iter().map(String::as_str)) {
            eprintln!("xtask: {w}");
        }
        return Ok(());
    }
    let files = image_files(&boot, a.firmware.as_deref())?;
    let image = sized_image(&files, a.size_mib)?;
    let info = fat::read(&image)?;
    if let Some(path) = &a.image {
        crate::write_file(path, &image)?;
        eprintln!("xtask: wrote {} ({} MiB SD card image with {what})", path.display(), image.len() >> 20);
    } else if let Some(dev) = &a.device {
        write_device(dev, &image, a.yes)?;
    }
    print_summary(&info);
    if let Some(w) = dtb_warning_for(pi, info.files.iter().map(|f| f.path.as_str())) {
        eprintln!("xtask: {w}");
    }
    Ok(())
}

/// The FAT32 image of `files`: `size_mib` MiB, or what the files need. A size they do not fit
/// in is refused with the size that fits.
fn sized_image(files: &[fat::File], size_mib: Option<u64>) -> Result<Vec<u8>> {
    let need = fat::size_for(files);
    // Bounded by clap (64 to MAX_SIZE_MIB): no overflow.
    let size = size_mib.map_or(need, |m| m << 20);
    ensure!(
        size <= MAX_SIZE_MIB << 20,
        "the files need a {} MiB image, more than the {MAX_SIZE_MIB} MiB this builds",
        size >> 20
    );
    fat::build(files, size).map_err(|e| match size_mib {
        Some(m) => anyhow::Error::new(crate::error::Refused(format!(
            "--size-mib {m}: the files ({} MiB) do not fit in a FAT32 image that size ({e:#}); leave --size-mib out \
             ({} MiB fits them) or give more",
            files.iter().map(|f| f.data.len() as u64).sum::<u64>().div_ceil(1 << 20),
            need >> 20
        ))),
        None => e,
    })
}

/// Debian's TF-A BL31 for `pi` (`crate::provision::firmware`). On a Pi 4 it brings PSCI (the
/// firmware alone holds the CPUs in a spin table); the Pi 5's firmware runs its own TF-A
/// already, which this one (upstream TF-A's port) replaces.
pub fn armstub_tfa(pi: Pi) -> Result<PathBuf> {
    match pi.tfa {
        Some(plat) => crate::provision::firmware::get(crate::provision::firmware::bl31(plat)),
        None => crate::error::refuse(format!("--armstub tfa: Debian's TF-A has no port for the {}", pi.short)),
    }
}

/// `flash --layout uboot|efi`: a disk image (or card) for a board that boots U-Boot or UEFI
/// (`layouts`), with the hypervisor and the kernel as its guest.
fn layout_cli(a: &Args) -> Result<()> {
    let refuse = |why: String| anyhow::Error::new(crate::error::Refused(why));
    if a.boot_dir.is_some() || a.firmware.is_some() || a.chainloader || a.armstub.is_some() || a.baud.is_some() {
        return Err(refuse(format!(
            "--layout {}: --boot-dir, --firmware, --chainloader, --armstub and --baud are for a Pi's card",
            a.layout
        )));
    }
    let tc = crate::provision::toolchain::find()?;
    let images = crate::build::build(&tc, &[])?;
    let (hyp, kernel) = (std::fs::read(&images.hypervisor)?, std::fs::read(&images.kernel)?);
    let mut files = if a.layout == "uboot" {
        layouts::uboot_files(&layouts::UbootGuest {
            hypervisor: hyp,
            kernel,
            initrd: None,
            guest_cmdline: String::new(),
            bootargs: a.bootargs.clone(),
        })
    } else {
        layouts::efi_files(&hyp, &kernel, &format!("{} {}", bootargs::FIRMWARE_MARKER, a.bootargs.trim()))
    };
    files.sort_by(|x, y| x.path.cmp(&y.path));
    let image = sized_image(&files, a.size_mib)?;
    let info = fat::read(&image)?;
    if let Some(path) = &a.image {
        crate::write_file(path, &image)?;
        eprintln!("xtask: wrote {} ({} MiB disk image, {} layout)", path.display(), image.len() >> 20, a.layout);
    } else if let Some(dev) = &a.device {
        write_device(dev, &image, a.yes)?;
    }
    print_summary(&info);
    Ok(())
}

/// `--image FILE` writes a regular file (a new one, or one it replaces whole). Anything else is
/// refused: a block device is a disk, which only `--device` writes, after its checks and a
/// question; a character device, a FIFO or a socket is no card image.
pub fn check_image_target(path: &Path) -> std::result::Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let t = match std::fs::metadata(path) {
        Ok(m) => m.file_type(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("--image {}: {e}", path.display())),
    };
    let what = if t.is_file() {
        return Ok(());
    } else if t.is_block_device() {
        "a block device (a disk): write a card with --device, which checks that it is a removable card nothing \
         uses and asks first"
    } else if t.is_dir() {
        "a directory (a mounted boot partition goes with --boot-dir)"
    } else if t.is_char_device() {
        "a character device, not a file"
    } else {
        "a FIFO or socket, not a file"
    };
    Err(format!("--image {} is {what}", path.display()))
}

/// Prints what an image holds.
pub fn print_summary(info: &fat::ImageInfo) {
    let (t, start, count) = info.partitions[0];
    eprintln!(
        "xtask: partition 1: type {t:#04x} at sector {start}, {} MiB, {} label {}, {} files:",
        (u64::from(count) * 512) >> 20,
        info.fs_type.trim(),
        info.label,
        info.files.len()
    );
    for f in &info.files {
        eprintln!("xtask:   {:>10}  {}", f.data.len(), f.path);
    }
    if let Some(lines) =
        info.file(CONFIG).and_then(|f| config_txt::section_of(&String::from_utf8_lossy(&f.data)).ok().flatten())
    {
        eprintln!("xtask: config.txt section:");
        for l in lines {
            eprintln!("xtask:   {l}");
        }
    }
}

fn write_device(dev: &Path, image: &[u8], yes: bool) -> Result<()> {
    let real = std::fs::canonicalize(dev).with_context(|| format!("{} does not exist", dev.display()))?;
    let disk = device::inspect(&device::Host::real(), &real, image.len() as u64)?;
    if !yes {
        ensure!(
            std::io::stdin().is_terminal(),
            "not asking on a non-interactive run: add --yes to write {}",
            real.display()
        );
        eprint!("{}", disk.question(image.len() as u64));
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if answer.trim() != "yes" {
            bail!("not written (the answer was not `yes`)");
        }
    }
    use std::os::unix::fs::OpenOptionsExt;
    // O_EXCL on a block device: the kernel refuses it while anything has it mounted or open.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_EXCL)
        .open(&real)
        .with_context(|| format!("opening {} for writing (mounted, or not yours? try sudo)", real.display()))?;
    let t0 = std::time::Instant::now();
    for (i, chunk) in image.chunks(4 << 20).enumerate() {
        f.write_all(chunk).with_context(|| format!("writing {}", real.display()))?;
        eprint!("\rxtask: writing {}: {} of {} MiB", real.display(), (i + 1) * 4, image.len() >> 20);
    }
    f.sync_all().context("flushing the card")?;
    eprintln!(" ({:.1} s)", t0.elapsed().as_secs_f64());
    f.seek(SeekFrom::Start(0))?;
    let mut back = vec![0u8; image.len()];
    f.read_exact(&mut back).context("reading the card back")?;
    ensure!(back == image, "the card does not read back what was written: it may be failing");
    eprintln!("xtask: {} written and read back; put the card in the Pi 5", real.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `--size-mib` the files do not fit in is refused (exit 64) with the size that fits; one
    /// they fit in gives an image of exactly that size.
    #[test]
    fn a_card_size_the_files_do_not_fit_in_is_refused_with_one_that_fits() {
        let files = vec![fat::File { path: "kernel8.img".into(), data: vec![0xa5; 70 << 20] }];
        let e = sized_image(&files, Some(64)).unwrap_err();
        assert_eq!(crate::error::code_of(&e), 64, "{e:#}");
        let need = fat::size_for(&files) >> 20;
        let msg = format!("{e:#}");
        assert!(msg.starts_with("--size-mib 64: the files (70 MiB) do not fit"), "{msg}");
        assert!(msg.contains(&format!("({need} MiB fits them)")), "{msg}");
        assert_eq!(sized_image(&files, Some(need)).unwrap().len() as u64, need << 20);
        assert_eq!(sized_image(&files, None).unwrap().len() as u64, need << 20);
    }

    fn boot() -> Boot {
        Boot {
            kernel: vec![1; 1000],
            guest: Some(vec![2; 2000]),
            bootargs: " test=x ".into(),
            baud: None,
            pi: pi5(),
            armstub: None,
        }
    }

    #[test]
    fn image_files_keep_the_firmwares_and_its_config() {
        let fw = tempfile::tempdir().unwrap();
        std::fs::write(fw.path().join("config.txt"), "dtparam=audio=on\n[pi4]\narm_boost=1\n").unwrap();
        std::fs::write(fw.path().join(pi5().dtb), b"dtb").unwrap();
        std::fs::write(fw.path().join("kernel_2712.img"), b"raspberry pi os linux").unwrap();
        std::fs::create_dir(fw.path().join("overlays")).unwrap();
        std::fs::write(fw.path().join("overlays/uart0.dtbo"), b"o").unwrap();
        let files = image_files(&boot(), Some(fw.path())).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, [pi5().dtb, CONFIG, pi5().kernel, "overlays/uart0.dtbo", CMDLINE, GUEST]);
        let get = |n: &str| &files.iter().find(|f| f.path == n).unwrap().data;
        assert_eq!(get(pi5().kernel), &vec![1; 1000], "ours replaces the firmware directory's kernel");
        let config = String::from_utf8(get(CONFIG).clone()).unwrap();
        assert!(config.starts_with("dtparam=audio=on\n[pi4]\narm_boost=1\n\n# >>> pgtlab"), "{config}");
        assert_eq!(get(CMDLINE), b"pgtlab test=x\n");
        assert!(dtb_warning(names.into_iter()).is_none());
        let bare = image_files(&boot(), None).unwrap();
        assert!(dtb_warning(bare.iter().map(|f| f.path.as_str())).unwrap().contains(pi5().dtb));
    }

    #[test]
    fn boot_dir_twice_then_uninstall() {
        let d = tempfile::tempdir().unwrap();
        let user = "# my settings\ndtparam=i2c_arm=on\nkernel=kernel_2712.img\n";
        std::fs::write(d.path().join(CONFIG), user).unwrap();
        std::fs::write(d.path().join(pi5().kernel), b"linux").unwrap();
        let first = install_boot_dir(d.path(), &boot()).unwrap();
        assert_eq!(first.backed_up, [format!("{}{BACKUP}", pi5().kernel), format!("{CONFIG}{BACKUP}")]);
        assert_eq!(first.overridden, [(3, "kernel=kernel_2712.img".to_string())]);
        let second = install_boot_dir(d.path(), &boot()).unwrap();
        assert!(second.backed_up.is_empty(), "the backups keep what was there before pgtlab");
        let config = std::fs::read_to_string(d.path().join(CONFIG)).unwrap();
        assert_eq!(config.matches(config_txt::BEGIN).count(), 1, "{config}");
        assert!(config.starts_with(user));
        assert_eq!(std::fs::read(d.path().join(format!("{}{BACKUP}", pi5().kernel))).unwrap(), b"linux");
        assert_eq!(std::fs::read(d.path().join(GUEST)).unwrap(), vec![2; 2000]);
        // Switching to the chainloader drops the guest file and the initramfs line.
        let loader = Boot { guest: None, ..boot() };
        install_boot_dir(d.path(), &loader).unwrap();
        assert!(!d.path().join(GUEST).exists());
        assert!(!std::fs::read_to_string(d.path().join(CONFIG)).unwrap().contains("initramfs"));
        let done = uninstall_boot_dir(d.path()).unwrap();
        assert!(done.iter().any(|l| l.contains("restored kernel_2712.img")), "{done:?}");
        assert_eq!(std::fs::read_to_string(d.path().join(CONFIG)).unwrap(), user);
        assert_eq!(std::fs::read(d.path().join(pi5().kernel)).unwrap(), b"linux");
        let left: Vec<String> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
    }

    #[test]
    fn an_image_goes_only_into_a_regular_file() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(check_image_target(&d.path().join("new.img")), Ok(()));
        std::fs::write(d.path().join("old.img"), b"x").unwrap();
        assert_eq!(check_image_target(&d.path().join("old.img")), Ok(()));
        assert!(check_image_target(d.path()).unwrap_err().contains("directory"));
        assert!(check_image_target(Path::new("/dev/null")).unwrap_err().contains("character device"));
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path in our own temporary directory.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(check_image_target(&fifo).unwrap_err().contains("FIFO"));
        // Any block device there is (a loop device, a disk) is refused, not written.
        let block = std::fs::read_dir("/dev").unwrap().flatten().map(|e| e.path()).find(|p| {
            use std::os::unix::fs::FileTypeExt;
            std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device())
        });
        if let Some(b) = block {
            assert!(check_image_target(&b).unwrap_err().contains("--device"), "{}", b.display());
        }
    }

    #[test]
    fn boot_dir_refuses_a_broken_section_without_writing() {
        let d = tempfile::tempdir().unwrap();
        let broken = format!("a=1\n{}\nkernel=x\n", config_txt::BEGIN);
        std::fs::write(d.path().join(CONFIG), &broken).unwrap();
        assert!(install_boot_dir(d.path(), &boot()).is_err());
        assert_eq!(std::fs::read_to_string(d.path().join(CONFIG)).unwrap(), broken);
        assert!(!d.path().join(pi5().kernel).exists(), "nothing written");
    }

    /// `--armstub`: the file on the card and `armstub=` with `enable_gic=1` in the section (TF-A's
    /// Pi 4 port asks for both); none without it.
    #[test]
    fn an_armstub_goes_on_the_card_and_into_config_txt() {
        let b = Boot { pi: crate::machine::with_card("pi4").unwrap().1, armstub: Some(vec![7; 100]), ..boot() };
        let files = image_files(&b, None).unwrap();
        assert!(files.iter().any(|f| f.path == ARMSTUB && f.data == [7; 100]));
        let config = String::from_utf8(files.iter().find(|f| f.path == CONFIG).unwrap().data.clone()).unwrap();
        for line in ["armstub=pgtlab-bl31.bin", "enable_gic=1", "kernel=kernel8.img"] {
            assert!(config.lines().any(|l| l == line), "{line} in\n{config}");
        }
        let plain = image_files(&boot(), None).unwrap();
        assert!(plain.iter().all(|f| f.path != ARMSTUB));
        let config = String::from_utf8(plain.iter().find(|f| f.path == CONFIG).unwrap().data.clone()).unwrap();
        assert!(!config.contains("armstub") && !config.contains("enable_gic"), "{config}");
        let no_port = Pi { tfa: None, ..pi5() };
        assert!(armstub_tfa(no_port).unwrap_err().to_string().contains("no port for the Pi 5"));
    }
}
