//! Disk layouts for boards that boot through U-Boot or UEFI rather than a Pi's firmware: the
//! same FAT image (`super::fat`), other files.
//!
//! * **U-Boot** ([`uboot_files`]): `boot.scr` (a legacy U-Boot script image, [`uimage_script`])
//!   that U-Boot's distro boot finds on the first partition, the hypervisor and the guest's
//!   files beside it. The script loads them, describes the guest in `/chosen/module@…` nodes
//!   (Xen's convention: `multiboot,kernel` with the guest's `bootargs`, `multiboot,ramdisk`)
//!   in U-Boot's device tree, puts the hypervisor's words in `/chosen/bootargs` and `booti`s the
//!   hypervisor with that tree.
//! * **UEFI** ([`efi_files`]): the hypervisor as `EFI/BOOT/BOOTAA64.EFI` (the removable-media
//!   path every UEFI boot manager tries), and beside it `pgtlab-kernel.img` (the guest, as
//!   QEMU's `-initrd` carries it: a guest bundle or a lone kernel) and `pgtlab-cmdline.txt` (the
//!   command line when the boot manager passes none), which the hypervisor's EFI entry reads
//!   from its own volume.

use super::fat::File;

/// The hypervisor on a U-Boot disk.
pub const UBOOT_HYPERVISOR: &str = "pgtlab-hyp.img";
/// The guest kernel on a U-Boot disk.
pub const UBOOT_KERNEL: &str = "pgtlab-kernel.img";
/// The guest's initramfs on a U-Boot disk.
pub const UBOOT_INITRD: &str = "pgtlab-initrd.img";
/// The boot script U-Boot's distro boot looks for.
pub const UBOOT_SCRIPT: &str = "boot.scr";
/// The folder of the removable-media boot path.
pub const EFI_DIR: &str = "EFI/BOOT";
/// The EFI application the boot manager starts from removable media (arm64).
pub const EFI_APP: &str = "EFI/BOOT/BOOTAA64.EFI";
/// Beside it: the guest (`hypervisor/src/efi.rs` reads these names).
pub const EFI_GUEST: &str = "EFI/BOOT/pgtlab-kernel.img";
/// Beside it: the command line.
pub const EFI_CMDLINE: &str = "EFI/BOOT/pgtlab-cmdline.txt";

/// Legacy image header magic (U-Boot `include/image.h`).
const IH_MAGIC: u32 = 0x2705_1956;
/// `IH_OS_LINUX`, `IH_ARCH_ARM64`, `IH_TYPE_SCRIPT`, `IH_COMP_NONE`.
const IH_OS_LINUX: u8 = 5;
const IH_ARCH_ARM64: u8 = 22;
const IH_TYPE_SCRIPT: u8 = 6;
const HEADER: usize = 64;

/// A U-Boot script image (what `mkimage -A arm64 -T script -C none` makes): the 64-byte legacy
/// header (big-endian; header and data CRC-32s), then the data: the script's length, a zero
/// ending the length list, the script.
pub fn uimage_script(name: &str, script: &str) -> Vec<u8> {
    let mut data = Vec::new();
    data.extend_from_slice(&(script.len() as u32).to_be_bytes());
    data.extend_from_slice(&0u32.to_be_bytes());
    data.extend_from_slice(script.as_bytes());
    let mut h = [0u8; HEADER];
    h[0..4].copy_from_slice(&IH_MAGIC.to_be_bytes());
    // 4..8 header CRC (below), 8..12 time (0: reproducible).
    h[12..16].copy_from_slice(&(data.len() as u32).to_be_bytes());
    // 16..24 load and entry address: 0 for a script.
    h[24..28].copy_from_slice(&abi::crc32::crc32(&data).to_be_bytes());
    h[28] = IH_OS_LINUX;
    h[29] = IH_ARCH_ARM64;
    h[30] = IH_TYPE_SCRIPT;
    h[31] = 0;
    let n = name.as_bytes();
    h[32..32 + n.len().min(31)].copy_from_slice(&n[..n.len().min(31)]);
    let hcrc = abi::crc32::crc32(&h);
    h[4..8].copy_from_slice(&hcrc.to_be_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(&data);
    out
}

/// The script of a U-Boot script image, its header and CRCs checked (the reader's side of
/// [`uimage_script`], for the tests and `flash`'s summary).
pub fn read_uimage_script(image: &[u8]) -> Result<String, String> {
    if image.len() < HEADER + 8 {
        return Err(format!("{} bytes: shorter than a script image", image.len()));
    }
    let be = |o: usize| u32::from_be_bytes([image[o], image[o + 1], image[o + 2], image[o + 3]]);
    if be(0) != IH_MAGIC {
        return Err("no U-Boot image magic".into());
    }
    let mut h = [0u8; HEADER];
    h.copy_from_slice(&image[..HEADER]);
    h[4..8].fill(0);
    if abi::crc32::crc32(&h) != be(4) {
        return Err("header CRC-32 mismatch".into());
    }
    if (image[29], image[30], image[31]) != (IH_ARCH_ARM64, IH_TYPE_SCRIPT, 0) {
        return Err("not an uncompressed arm64 script image".into());
    }
    let data = &image[HEADER..];
    if data.len() != be(12) as usize || abi::crc32::crc32(data) != be(24) {
        return Err("data length or CRC-32 mismatch".into());
    }
    let len = be(HEADER) as usize;
    if be(HEADER + 4) != 0 || data.len() != 8 + len {
        return Err("more than one image in a script".into());
    }
    String::from_utf8(data[8..].to_vec()).map_err(|_| "the script is not UTF-8".into())
}

/// What a U-Boot disk boots: the hypervisor's words, the guest and its command line.
#[derive(Debug, Clone)]
pub struct UbootGuest {
    /// The hypervisor Image.
    pub hypervisor: Vec<u8>,
    /// The guest kernel (an arm64 Image or a raw binary).
    pub kernel: Vec<u8>,
    /// Its initramfs.
    pub initrd: Option<Vec<u8>>,
    /// The guest's command line (the kernel module's `bootargs`).
    pub guest_cmdline: String,
    /// The hypervisor's words (`/chosen/bootargs`).
    pub bootargs: String,
}

/// A U-Boot command argument in double quotes (U-Boot's hush: `"` and `\` escaped, `$` too so
/// nothing is expanded).
fn quoted(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$') {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

/// The boot script: loads the hypervisor at `${kernel_addr_r}`, the guest kernel at
/// `${ramdisk_addr_r}` and its initramfs at the next 2 MiB boundary after it, describes them
/// in `/chosen/module@…` nodes of the device tree at `${fdt_addr}` (U-Boot's, as `booti`
/// passes it: `/chosen` gets 2-cell addresses and sizes for them) and `booti`s the hypervisor.
/// Distro boot sets `devtype`, `devnum` and `distro_bootpart` for the partition it found the
/// script on.
pub fn uboot_script(g: &UbootGuest) -> String {
    let mut s = String::from(
        "# pgtlab: the hypervisor, and its guest in /chosen/module@ nodes (Xen's convention: multiboot,kernel,\n\
         # multiboot,ramdisk). Written by `cargo xtask flash --layout uboot`.\n\
         echo pgtlab: loading the hypervisor and its guest from ${devtype} ${devnum}:${distro_bootpart}\n\
         setenv pg_part ${devtype} ${devnum}:${distro_bootpart}\n",
    );
    s += &format!("load ${{pg_part}} ${{kernel_addr_r}} {UBOOT_HYPERVISOR}\n");
    s += "setexpr pg_kaddr ${ramdisk_addr_r} + 0\n";
    s += &format!("load ${{pg_part}} ${{pg_kaddr}} {UBOOT_KERNEL}\n");
    s += "setenv pg_ksize ${filesize}\n";
    s += "fdt addr ${fdt_addr}\nfdt resize 8192\n";
    s += "fdt set /chosen \\#address-cells <2>\nfdt set /chosen \\#size-cells <2>\n";
    s += "fdt mknode /chosen module@${pg_kaddr}\n";
    s += "fdt set /chosen/module@${pg_kaddr} compatible \"multiboot,kernel\" \"multiboot,module\"\n";
    s += "fdt set /chosen/module@${pg_kaddr} reg <0 0x${pg_kaddr} 0 0x${pg_ksize}>\n";
    if !g.guest_cmdline.trim().is_empty() {
        s += &format!("fdt set /chosen/module@${{pg_kaddr}} bootargs {}\n", quoted(g.guest_cmdline.trim()));
    }
    if g.initrd.is_some() {
        s += "setexpr pg_raddr ${pg_kaddr} + ${pg_ksize}\nsetexpr pg_raddr ${pg_raddr} + 1fffff\n";
        // Rounded down to 2 MiB by dividing and multiplying (values are hex): hush takes `&` for
        // its own syntax.
        s += "setexpr pg_raddr ${pg_raddr} / 200000\nsetexpr pg_raddr ${pg_raddr} * 200000\n";
        s += &format!("load ${{pg_part}} ${{pg_raddr}} {UBOOT_INITRD}\n");
        s += "fdt mknode /chosen module@${pg_raddr}\n";
        s += "fdt set /chosen/module@${pg_raddr} compatible \"multiboot,ramdisk\" \"multiboot,module\"\n";
        s += "fdt set /chosen/module@${pg_raddr} reg <0 0x${pg_raddr} 0 0x${filesize}>\n";
    }
    let words = format!("{} {}", bootargs::FIRMWARE_MARKER, g.bootargs.trim());
    s += &format!("fdt set /chosen bootargs {}\n", quoted(words.trim_end()));
    s += "booti ${kernel_addr_r} - ${fdt_addr}\n";
    s
}

/// The files of a U-Boot disk.
pub fn uboot_files(g: &UbootGuest) -> Vec<File> {
    let mut v = vec![
        File { path: UBOOT_SCRIPT.into(), data: uimage_script("pgtlab", &uboot_script(g)) },
        File { path: UBOOT_HYPERVISOR.into(), data: g.hypervisor.clone() },
        File { path: UBOOT_KERNEL.into(), data: g.kernel.clone() },
    ];
    if let Some(i) = &g.initrd {
        v.push(File { path: UBOOT_INITRD.into(), data: i.clone() });
    }
    v
}

/// The files of an EFI system partition: the hypervisor as the removable-media boot
/// application, the guest (a guest bundle or a lone kernel) and the command line beside it.
pub fn efi_files(hypervisor: &[u8], guest: &[u8], bootargs: &str) -> Vec<File> {
    vec![
        File { path: EFI_APP.into(), data: hypervisor.to_vec() },
        File { path: EFI_CMDLINE.into(), data: format!("{}\n", bootargs.trim()).into_bytes() },
        File { path: EFI_GUEST.into(), data: guest.to_vec() },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_image_reads_back_and_refuses_damage() {
        let img = uimage_script("pgtlab", "echo hi\n");
        assert_eq!(img.len(), 64 + 8 + 8);
        assert_eq!(read_uimage_script(&img).unwrap(), "echo hi\n");
        for at in [2, 5, 29, 40, 66, 75] {
            let mut bad = img.clone();
            bad[at] ^= 1;
            assert!(read_uimage_script(&bad).is_err(), "byte {at} changed");
        }
        assert!(read_uimage_script(&img[..70]).is_err());
        // The header CRC covers the name, the data CRC the length list and the script.
        assert_eq!(&img[32..38], b"pgtlab");
    }

    #[test]
    fn the_script_describes_the_guest_in_module_nodes() {
        let g = UbootGuest {
            hypervisor: vec![1],
            kernel: vec![2],
            initrd: Some(vec![3]),
            guest_cmdline: "console=ttyAMA0 \"x\"".into(),
            bootargs: "hyp.cpus=2".into(),
        };
        let s = uboot_script(&g);
        for line in [
            "load ${pg_part} ${kernel_addr_r} pgtlab-hyp.img",
            "fdt set /chosen/module@${pg_kaddr} compatible \"multiboot,kernel\" \"multiboot,module\"",
            "fdt set /chosen/module@${pg_kaddr} bootargs \"console=ttyAMA0 \\\"x\\\"\"",
            "fdt set /chosen/module@${pg_raddr} compatible \"multiboot,ramdisk\" \"multiboot,module\"",
            "fdt set /chosen bootargs \"pgtlab hyp.cpus=2\"",
            "booti ${kernel_addr_r} - ${fdt_addr}",
        ] {
            assert!(s.lines().any(|l| l == line), "{line:?} in\n{s}");
        }
        let names: Vec<String> = uboot_files(&g).into_iter().map(|f| f.path).collect();
        assert_eq!(names, ["boot.scr", "pgtlab-hyp.img", "pgtlab-kernel.img", "pgtlab-initrd.img"]);
        let no_rd = uboot_script(&UbootGuest { initrd: None, guest_cmdline: String::new(), ..g });
        assert!(!no_rd.contains("pg_raddr") && !no_rd.contains("/chosen/module@${pg_kaddr} bootargs"));
        assert_eq!(quoted("a$b"), "\"a\\$b\"");
    }

    #[test]
    fn the_efi_layout_puts_the_guest_beside_the_application() {
        let f = efi_files(b"MZ", b"guest", " hyp.cpus=1 ");
        let names: Vec<&str> = f.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["EFI/BOOT/BOOTAA64.EFI", "EFI/BOOT/pgtlab-cmdline.txt", "EFI/BOOT/pgtlab-kernel.img"]);
        assert_eq!(f[1].data, b"hyp.cpus=1\n");
        assert!(f.iter().all(|x| x.path.starts_with(EFI_DIR)));
    }
}
