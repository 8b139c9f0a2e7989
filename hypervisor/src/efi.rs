//! The hypervisor started by UEFI firmware: the Image is an EFI application too (`rt::pe`, the
//! PE/COFF header the xtask writes into the page reserved here), entered at `__efi_entry` with
//! the MMU and caches on, boot services running, x0 = the image handle, x1 = the system table.
//!
//! What it does before the normal boot, as Linux's EFI stub does for Linux:
//! 1. the device tree from the EFI configuration table; the command line from the load
//!    options (`hypcore::efi::command_line`), else from `pgtlab-cmdline.txt` beside the image on
//!    its volume;
//! 2. the guest (what QEMU's `-initrd` carries: a guest bundle or a lone kernel) from the initrd
//!    media device path (LoadFile2, `LINUX_EFI_INITRD_MEDIA_GUID`, which EDK2 offers for
//!    `-initrd`), else from `pgtlab-kernel.img` beside the image;
//! 3. pages for a copy of the image (2 MiB aligned, as the booting protocol wants), the initrd
//!    and the device tree: where QEMU's loader would put them (`hypcore::load::place`) when
//!    that memory is free, anywhere else otherwise;
//! 4. `ExitBootServices`; RAM from the final memory map (`hypcore::efi::ram_from_map`:
//!    runtime-services, reserved and device memory become holes), written into the device tree
//!    with the command line and the initrd (`board::guest_dtb`);
//! 5. everything it wrote cleaned to the point of coherency, interrupts masked, the MMU and the
//!    data cache off (booting.rst; Linux's `efi_enter_kernel`), and the copy entered at its
//!    Image entry with x0 = the device tree: the boot goes on as from any boot loader.
//!
//! A failure before `ExitBootServices` is printed on the firmware's console and returned to it
//! as an EFI status (the boot manager then tries its next option); after it, there is no way
//! back: the failure is printed on the UART the device tree names and the CPU stops.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use hypcore::range::Range;
use uefi::boot::{self, AllocateType, MemoryType};
use uefi::mem::memory_map::MemoryMap;
use uefi::proto::device_path::{DevicePath, DeviceSubType, DeviceType};
use uefi::proto::loaded_image::LoadedImage;
use uefi::proto::media::file::{File, FileAttribute, FileMode};
use uefi::proto::media::load_file::LoadFile2;
use uefi::{CStr16, Guid, Handle, Status};

// The PE header's page ([0x40, 0x1000): "PE\0\0" then zeros, filled by the xtask, `rt::pe`)
// and, right after it at 0x1000, the EFI entry point: the firmware's calling convention (x0 =
// image handle, x1 = system table, a stack, return address in x30). It applies the image's
// relocations for where the firmware loaded it (the BSS is the loader's, zero-filled per the
// PE header) and calls `pgtlab_efi_main`, which returns only on a failure before
// ExitBootServices (its EFI status goes back to the firmware in x0).
core::arch::global_asm!(
    r#"
.section .text.pe_header, "ax"
.balign 8
.global __pe_header
__pe_header:
    .ascii  "PE\0\0"
    .fill   {headers} - {pe} - 4, 1, 0
.global __pe_header_end
__pe_header_end:
.global __efi_entry
__efi_entry:
    stp     x29, x30, [sp, #-32]!
    mov     x29, sp
    stp     x0, x1, [sp, #16]
    bl      pgtlab_efi_relocate
    ldp     x0, x1, [sp, #16]
    bl      pgtlab_efi_main
    ldp     x29, x30, [sp], #32
    ret
"#,
    headers = const rt::pe::HEADERS_SIZE,
    pe = const rt::pe::PE_OFFSET,
);

/// The EFI configuration table's device tree (`EFI_DTB_TABLE_GUID`).
const DTB_TABLE: Guid = uefi::guid!("b1b621d5-f19c-41a5-830b-d9152c69aae0");
/// The vendor media device path under which EDK2 (and U-Boot) offer the initrd to Linux's EFI
/// stub through LoadFile2 (`LINUX_EFI_INITRD_MEDIA_GUID`).
const INITRD_MEDIA: Guid = uefi::guid!("5568e427-68fc-4f3d-ac74-ca555231cc68");
/// Beside the image on its volume: the guest and the command line (the names `cargo xtask
/// flash` gives them on a Pi's card too).
const GUEST_FILE: &str = "pgtlab-kernel.img";
const CMDLINE_FILE: &str = "pgtlab-cmdline.txt";
const MIB2: u64 = 2 << 20;

/// Applies the relocations for the address the firmware loaded the image at (the image was
/// linked at 0): every relocated slot then holds its address here. Runs before any Rust code
/// that follows a pointer stored in data.
#[no_mangle]
extern "C" fn pgtlab_efi_relocate() {
    // SAFETY: the firmware loaded the whole image (its sections writable where relocations
    // lie: .data); only this CPU runs it; nothing computed a pointer from data yet.
    unsafe { rt::start::relocate(rt::start::image_layout().start) }
}

macro_rules! efi_print {
    ($($arg:tt)*) => {
        uefi::system::with_stdout(|o| { let _ = write!(o, $($arg)*); let _ = o.write_str("\r\n"); })
    };
}

/// The EFI application's main function (see the module's documentation).
#[no_mangle]
extern "C" fn pgtlab_efi_main(image: *mut core::ffi::c_void, st: *const core::ffi::c_void) -> usize {
    // SAFETY: x0 at the entry: the image handle the firmware gave this application.
    let Some(image) = (unsafe { Handle::from_ptr(image) }) else {
        return Status::INVALID_PARAMETER.0;
    };
    // SAFETY: the firmware's system table and our image handle, as the entry received them;
    // the uefi crate keeps them for its calls until ExitBootServices.
    unsafe {
        uefi::table::set_system_table(st.cast());
        boot::set_image_handle(image);
    }
    crate::mem::init_heap();
    match prepare(image) {
        Ok(p) => enter(p),
        Err(e) => {
            efi_print!("hyp: EFI: {e}");
            Status::LOAD_ERROR.0
        }
    }
}

/// What is ready before ExitBootServices.
struct Prepared {
    /// The firmware's device tree (a copy).
    dtb: Vec<u8>,
    cmdline: Option<String>,
    /// Pages for the image's copy (2 MiB aligned), the initrd (filled), the device tree.
    image_to: u64,
    initrd: Option<Range>,
    dtb_room: Range,
}

fn prepare(image: Handle) -> Result<Prepared, String> {
    use aarch64_cpu::registers::{CurrentEL, Readable};
    use alloc::format;
    let el = CurrentEL.read(CurrentEL::EL);
    if el != 2 {
        return Err(format!("started at EL{el}: the hypervisor needs EL2 (QEMU: -M virt,virtualization=on)"));
    }
    let dtb = firmware_dtb()?;
    let board = board::Board::from_dtb(&dtb).map_err(|e| format!("the firmware's device tree: {e}"))?;
    let loaded = boot::open_protocol_exclusive::<LoadedImage>(image).map_err(|e| format!("LoadedImage: {e:?}"))?;
    let mut cmdline = match hypcore::efi::command_line(loaded.load_options_as_bytes().unwrap_or(&[])) {
        Ok(Some(o)) => {
            if !o.dropped.is_empty() {
                efi_print!("hyp: EFI: {} dropped (the initrd comes through LoadFile2)", o.dropped.join(" "));
            }
            Some(o.cmdline)
        }
        Ok(None) => None,
        Err(e) => {
            efi_print!("hyp: EFI: load options ignored: {e}");
            None
        }
    };
    let dir = image_dir(&loaded);
    let device = loaded.device();
    drop(loaded);
    if cmdline.is_none() {
        if let Some(text) = read_beside(image, device, &dir, CMDLINE_FILE)? {
            let text = String::from_utf8(text).map_err(|_| format!("{dir}{CMDLINE_FILE} is not UTF-8 text"))?;
            cmdline = Some(text.split_ascii_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    // The guest: from LoadFile2, else the file beside the image.
    let from_loadfile2 = initrd_size()?;
    let guest_len = match from_loadfile2 {
        Some(n) => Some(n),
        None => size_beside(image, device, &dir, GUEST_FILE)?,
    };
    // Where QEMU's loader would put the image, the initrd and the device tree.
    let layout = rt::start::image_layout();
    let (file_len, image_len) = (file_len(), (layout.end - layout.start) as u64);
    let ram = board.memory.first().map(|m| Range::new(m.base, m.end())).ok_or("the device tree lists no memory")?;
    let dtb_len = (dtb.len() as u64 + (64 << 10)).max(hypcore::load::VIRT_DTB_BYTES).next_multiple_of(4096);
    let want = hypcore::load::place(&hypcore::load::LoadInput {
        ram,
        kernel: hypcore::load::Kernel::image(file_len, 0, image_len),
        initrd_len: guest_len,
        dtb_len,
        page: hypcore::load::VIRT_PAGE,
    })
    .ok();
    let image_to = pages(want.map(|p| p.kernel), image_len, MIB2)?;
    let initrd = match guest_len {
        None => None,
        Some(len) => {
            let at = pages(want.and_then(|p| p.initrd), len, 4096)?;
            let r = Range::new(at, at + len);
            // SAFETY: pages this application just allocated, `len` bytes long.
            let buf = unsafe { core::slice::from_raw_parts_mut(at as *mut u8, len as usize) };
            if from_loadfile2.is_some() {
                load_initrd(buf)?;
                efi_print!("hyp: EFI: initrd ({len} bytes) from LoadFile2 at {r}");
            } else {
                read_into(image, device, &dir, GUEST_FILE, buf)?;
                efi_print!("hyp: EFI: guest {dir}{GUEST_FILE} ({len} bytes) at {r}");
            }
            Some(r)
        }
    };
    let dtb_at = pages(want.map(|p| Range::new(p.dtb.start, p.dtb.start + dtb_len)), dtb_len, MIB2)?;
    Ok(Prepared { dtb, cmdline, image_to, initrd, dtb_room: Range::new(dtb_at, dtb_at + dtb_len) })
}

/// The image file's length: its header's stamp (`rt::image`), what the firmware loaded (the
/// PE sections' file data; the BSS after it).
fn file_len() -> u64 {
    let at = rt::start::image_layout().start + rt::image::STAMP_OFFSET + 8;
    // SAFETY: the running image's header, loaded with it (the headers are the PE file's first
    // page); the stamp's length field is 8-byte aligned.
    unsafe { (at as *const u64).read() }
}

/// `len` bytes of pages (loader data) at `want` if that memory is free, else anywhere `align`
/// aligned.
fn pages(want: Option<Range>, len: u64, align: u64) -> Result<u64, String> {
    let n = len.div_ceil(4096) as usize;
    if let Some(w) = want.filter(|w| w.start.is_multiple_of(align)) {
        if let Ok(p) = boot::allocate_pages(AllocateType::Address(w.start), MemoryType::LOADER_DATA, n) {
            return Ok(p.as_ptr() as u64);
        }
    }
    // Anywhere: `align - 4 KiB` more, the unaligned head and tail left allocated (loader data,
    // RAM once boot services end).
    let extra = (align.saturating_sub(4096) / 4096) as usize;
    let p = boot::allocate_pages(AllocateType::AnyPages, MemoryType::LOADER_DATA, n + extra)
        .map_err(|e| alloc::format!("no {len} bytes of memory: {e:?}"))?;
    Ok((p.as_ptr() as u64).next_multiple_of(align))
}

fn firmware_dtb() -> Result<Vec<u8>, String> {
    let at = uefi::system::with_config_table(|t| t.iter().find(|e| e.guid == DTB_TABLE).map(|e| e.address as usize));
    let at = at.ok_or(
        "no device tree in the EFI configuration table (an ACPI-only firmware? QEMU virt: -M virt,acpi=off gives \
         EDK2's device tree)",
    )?;
    // SAFETY: the firmware's configuration table points at a device tree it keeps in memory
    // until ExitBootServices; only its header is read to learn its length (checked: at most
    // board::MAX_DTB_SIZE).
    let blob = unsafe { board::dtb_at(at as *const u8) }.map_err(|e| alloc::format!("device tree at {at:#x}: {e}"))?;
    Ok(blob.to_vec())
}

/// The initrd media device path: a vendor media node with `INITRD_MEDIA`, then the end node.
fn initrd_media_path() -> [u8; 24] {
    let mut p = [0u8; 24];
    p[0] = DeviceType::MEDIA.0;
    p[1] = DeviceSubType::MEDIA_VENDOR.0;
    p[2..4].copy_from_slice(&20u16.to_le_bytes());
    p[4..20].copy_from_slice(&INITRD_MEDIA.to_bytes());
    p[20..24].copy_from_slice(&[0x7f, 0xff, 4, 0]);
    p
}

/// Calls LoadFile2 on the handle that has the initrd media path: with `buf` `None` for the
/// size; `Ok(None)` when no handle has it (no initrd given).
fn load_file2(buf: Option<&mut [u8]>) -> Result<Option<u64>, String> {
    let bytes = initrd_media_path();
    // SAFETY: `bytes` is a well-formed device path (one vendor node and the end node).
    let mut path: &DevicePath = unsafe { DevicePath::from_ffi_ptr(bytes.as_ptr().cast()) };
    let Ok(handle) = boot::locate_device_path::<LoadFile2>(&mut path) else {
        return Ok(None);
    };
    let mut lf = boot::open_protocol_exclusive::<LoadFile2>(handle).map_err(|e| alloc::format!("LoadFile2: {e:?}"))?;
    let raw = (&mut *lf as *mut LoadFile2).cast::<uefi_raw::protocol::media::LoadFile2Protocol>();
    let (ptr, mut size) = match buf {
        Some(b) => (b.as_mut_ptr(), b.len()),
        None => (core::ptr::null_mut(), 0),
    };
    // SAFETY: `raw` is the protocol the firmware installed (LoadFile2 is its transparent
    // wrapper); the device path is what remains of the one it was found under (the end node,
    // as the initrd's LoadFile2 wants it); the buffer is `size` bytes of
    // our pages (or none, to learn the size).
    let status = unsafe { ((*raw).load_file)(raw, path.as_ffi_ptr().cast(), false.into(), &mut size, ptr.cast()) };
    match status {
        Status::SUCCESS | Status::BUFFER_TOO_SMALL => Ok(Some(size as u64)),
        s => Err(alloc::format!("loading the initrd through LoadFile2: {s:?}")),
    }
}

fn initrd_size() -> Result<Option<u64>, String> {
    load_file2(None)
}

fn load_initrd(buf: &mut [u8]) -> Result<(), String> {
    let want = buf.len() as u64;
    match load_file2(Some(buf))? {
        Some(n) if n == want => Ok(()),
        n => Err(alloc::format!("LoadFile2 gave {n:?} bytes of the initrd, {want} announced")),
    }
}

/// The folder of the image's file on its volume (`\EFI\BOOT\`), from its device path's file
/// path nodes; `\` without one.
fn image_dir(loaded: &LoadedImage) -> String {
    let mut path = String::new();
    if let Some(fp) = loaded.file_path() {
        for node in fp.node_iter() {
            if node.device_type() == DeviceType::MEDIA && node.sub_type() == DeviceSubType::MEDIA_FILE_PATH {
                path.push_str(&hypcore::efi::ucs2_path(node.data()));
            }
        }
    }
    String::from(hypcore::efi::dir_of(&path))
}

fn open_beside(
    image: Handle,
    device: Option<Handle>,
    dir: &str,
    name: &str,
) -> Result<Option<uefi::proto::media::file::RegularFile>, String> {
    if device.is_none() {
        return Ok(None);
    }
    let Ok(mut fs) = boot::get_image_file_system(image) else {
        return Ok(None);
    };
    let mut vol = fs.open_volume().map_err(|e| alloc::format!("opening the image's volume: {e:?}"))?;
    let full = alloc::format!("{dir}{name}");
    let mut buf = [0u16; 256];
    let path = CStr16::from_str_with_buf(&full, &mut buf).map_err(|_| alloc::format!("{full}: path too long"))?;
    match vol.open(path, FileMode::Read, FileAttribute::empty()) {
        Ok(f) => Ok(f.into_regular_file()),
        Err(e) if e.status() == Status::NOT_FOUND => Ok(None),
        Err(e) => Err(alloc::format!("opening {full}: {e:?}")),
    }
}

fn size_beside(image: Handle, device: Option<Handle>, dir: &str, name: &str) -> Result<Option<u64>, String> {
    let Some(mut f) = open_beside(image, device, dir, name)? else {
        return Ok(None);
    };
    f.set_position(uefi::proto::media::file::RegularFile::END_OF_FILE).map_err(|e| alloc::format!("{name}: {e:?}"))?;
    f.get_position().map(Some).map_err(|e| alloc::format!("{name}: {e:?}"))
}

fn read_into(image: Handle, device: Option<Handle>, dir: &str, name: &str, buf: &mut [u8]) -> Result<(), String> {
    let mut f = open_beside(image, device, dir, name)?.ok_or_else(|| alloc::format!("{dir}{name} went away"))?;
    let mut at = 0;
    while at < buf.len() {
        let n = f.read(&mut buf[at..]).map_err(|e| alloc::format!("reading {dir}{name}: {e:?}"))?;
        if n == 0 {
            return Err(alloc::format!("{dir}{name}: {at} of {} bytes read", buf.len()));
        }
        at += n;
    }
    Ok(())
}

fn read_beside(image: Handle, device: Option<Handle>, dir: &str, name: &str) -> Result<Option<Vec<u8>>, String> {
    let Some(len) = size_beside(image, device, dir, name)? else {
        return Ok(None);
    };
    let mut v = alloc::vec![0u8; len as usize];
    read_into(image, device, dir, name, &mut v)?;
    Ok(Some(v))
}

/// After ExitBootServices: the device tree with the RAM, the command line and the initrd, the
/// image copied, caches cleaned, the MMU off, the copy entered. Never returns.
fn enter(p: Prepared) -> ! {
    // SAFETY: nothing of boot services is used after this (no protocol is open: `prepare`
    // dropped them; the console is the UART from here on).
    let map = unsafe { boot::exit_boot_services(None) };
    let descs: Vec<hypcore::efi::Descriptor> = map
        .entries()
        .map(|d| hypcore::efi::Descriptor { ty: d.ty.0, start: d.phys_start, pages: d.page_count, attr: d.att.bits() })
        .collect();
    let fail = |what: &str| -> ! {
        if let Ok(b) = board::Board::from_dtb(&p.dtb) {
            if let Some(u) = b.console {
                // SAFETY: the device tree's console UART; boot services (the firmware's use of
                // it) have ended.
                unsafe { rt::console::init(u.kind, u.base as usize) };
            }
        }
        rt::console::panic_print(format_args!("hyp: EFI: after ExitBootServices: {what}\n"));
        loop {
            aarch64_cpu::asm::wfe();
        }
    };
    let ram = match hypcore::efi::ram_from_map(&descs) {
        Ok(r) => r,
        Err(e) => fail(&alloc::format!("{e}")),
    };
    let spec = board::GuestSpec {
        memory: ram.iter().map(|r| board::Region::new(r.start, r.len())).collect(),
        bootargs: p.cmdline.clone(),
        initrd: p.initrd.map(|r| board::Region::new(r.start, r.len())),
        ..Default::default()
    };
    let dtb = match board::guest_dtb(&p.dtb, &spec) {
        Ok(d) if d.len() as u64 <= p.dtb_room.len() => d,
        Ok(d) => fail(&alloc::format!("the device tree ({} bytes) outgrew its room {}", d.len(), p.dtb_room)),
        Err(e) => fail(&alloc::format!("writing the device tree: {e}")),
    };
    // SAFETY: the device tree's pages were allocated for it (`dtb_room`, long enough: checked).
    unsafe { core::ptr::copy_nonoverlapping(dtb.as_ptr(), p.dtb_room.start as *mut u8, dtb.len()) };
    rt::cache::clean_to_poc(p.dtb_room.start, dtb.len() as u64);
    if let Some(i) = p.initrd {
        rt::cache::clean_to_poc(i.start, i.len());
    }
    let layout = rt::start::image_layout();
    let file = file_len();
    // The file (everything up to the BSS): the copy's `__rt_entry` applies the relocations for
    // its own address and clears its BSS. Only BSS statics have been written since the entry.
    // SAFETY: `image_to` is pages allocated for the image's whole footprint, clear of it.
    unsafe { core::ptr::copy_nonoverlapping(layout.start as *const u8, p.image_to as *mut u8, file as usize) };
    rt::cache::clean_to_poc(p.image_to, file);
    // This code, which runs on after the MMU is off, at the point of coherency too.
    rt::cache::clean_to_poc(layout.start as u64, (layout.text_end - layout.start) as u64);
    // SAFETY: the firmware is gone; the copy is complete and at the point of coherency, and so
    // is this code; interrupts are masked before the MMU and the data cache go off (EL2's
    // SCTLR: M and C), the I-cache is invalidated (stale lines of the copy's addresses), and
    // nothing after the write touches memory: the branch enters the copy's Image entry with
    // x0 = the device tree and x1-x3 = 0, as a boot loader does.
    unsafe {
        core::arch::asm!(
            "msr daifset, #0xf",
            "ic iallu",
            "dsb sy",
            "isb",
            "mrs x9, sctlr_el2",
            "bic x9, x9, #1",
            "bic x9, x9, #4",
            "msr sctlr_el2, x9",
            "isb",
            "mov x1, xzr",
            "mov x2, xzr",
            "mov x3, xzr",
            "br x4",
            in("x4") p.image_to,
            in("x0") p.dtb_room.start,
            options(noreturn),
        )
    }
}
