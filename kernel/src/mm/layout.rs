//! The kernel's virtual address layout (TTBR1_EL1, the upper 256 TiB) and the image's two
//! addresses.
//!
//! ```text
//! 0xffff_0000_0000_0000  unmapped (catches small offsets from a null upper-half pointer)
//! 0xffff_0000_1000_0000  MMIO window: device registers (console UART first, then the GIC)
//! 0xffff_0000_2000_0000  the kernel image (text RX, rodata R, data/BSS RW + NX)
//! 0xffff_0000_4000_0000  vmalloc area: task kernel stacks, pages whose permissions change
//! 0xffff_4000_0000_0000  scratch tables of the benchmarks (never installed)
//! 0xffff_7e80_0000_0000  test=percpu's late mapping (a top-level slot of its own, 253)
//! 0xffff_7f00_0000_0000  per-CPU areas, 2 MiB apart (slot 254; [`AREAS_BASE`])
//! 0xffff_7f80_0000_0000  the per-CPU window: this CPU's area, in its own root only (slot 255)
//! 0xffff_8000_0000_0000  linear map: physical address pa at LINEAR_BASE + pa
//! ```
//!
//! TTBR0_EL1 (the lower 256 TiB) belongs to user space: a task's table while it runs, the
//! empty reserved table otherwise, and the identity map of the image only while a CPU turns
//! its MMU on (see `mm::early`).
//!
//! The image is loaded at some physical address (QEMU: RAM base + 2 MiB, under the hypervisor:
//! wherever it loads the kernel) and runs there until its MMU is on; from then on it runs at
//! [`KIMAGE_VA`]. [`image_phys`] converts back.

use core::sync::atomic::{AtomicU64, Ordering};

/// Linear map: physical address `pa` is at `LINEAR_BASE + pa`.
pub const LINEAR_BASE: u64 = 0xffff_8000_0000_0000;
/// The vmalloc area.
pub const VMALLOC_START: u64 = 0xffff_0000_4000_0000;
/// End of the vmalloc area.
pub const VMALLOC_END: u64 = 0xffff_4000_0000_0000;
/// Scratch tables of the benchmarks map RAM at `SCRATCH_BASE + pa` (never installed in a TTBR,
/// so nothing walks them; the VA range is unused by the kernel's own table). The per-CPU slots
/// 253-255 lie inside that range: no clash while RAM stays below 126 TiB.
pub const SCRATCH_BASE: u64 = 0xffff_4000_0000_0000;
/// Where the image's first byte (its header) is mapped.
pub const KIMAGE_VA: u64 = 0xffff_0000_2000_0000;
/// Most bytes the image may span.
pub const KIMAGE_MAX: u64 = VMALLOC_START - KIMAGE_VA;
/// Device registers: mapped one after the other from here by `mm::ioremap`.
pub const MMIO_START: u64 = 0xffff_0000_1000_0000;
/// End of the MMIO window.
pub const MMIO_END: u64 = KIMAGE_VA;
/// Lowest upper-half (TTBR1) address.
pub const UPPER: u64 = 0xffff_0000_0000_0000;
/// Where CPU 0's per-CPU area is mapped globally (top-level slot 254 of the upper half).
pub const AREAS_BASE: u64 = 0xffff_7f00_0000_0000;
/// Virtual span of one per-CPU area: one level-3 table's worth (the window is one such table).
pub const AREA_SPAN: u64 = 2 << 20;
/// The per-CPU window: this CPU's area, at the same address on every CPU (top-level slot 255,
/// mapped only in each CPU's own root: `mm::roots`).
pub const WINDOW_VA: u64 = 0xffff_7f80_0000_0000;
/// Where `percpu::late_map` maps its page: top-level slot 253 of the upper half, empty until
/// then.
pub const LATE_VA: u64 = 0xffff_7e80_0000_0000;

/// Physical address of the image's first byte, recorded before the MMU goes on.
static IMAGE_PHYS: AtomicU64 = AtomicU64::new(0);

/// Records where the image was loaded (boot CPU, MMU still off).
pub fn set_image_phys(pa: u64) {
    IMAGE_PHYS.store(pa, Ordering::Relaxed);
}

/// Physical address of the image's first byte.
pub fn image_base_phys() -> u64 {
    IMAGE_PHYS.load(Ordering::Relaxed)
}

/// `KIMAGE_VA - image_base_phys()`: what to add to an image address to get its virtual one.
pub fn image_delta() -> u64 {
    KIMAGE_VA.wrapping_sub(image_base_phys())
}

/// The physical address of an address inside the image as mapped at [`KIMAGE_VA`].
pub fn image_phys(va: u64) -> u64 {
    va - KIMAGE_VA + image_base_phys()
}

/// The linear-map alias of an address inside the image.
pub fn image_linear_alias(va: u64) -> u64 {
    LINEAR_BASE + image_phys(va)
}

/// Whether `va` lies in the linear map.
pub fn is_linear(va: u64) -> bool {
    va >= LINEAR_BASE
}

/// Whether `va` lies in the vmalloc area.
pub fn is_vmalloc(va: u64) -> bool {
    (VMALLOC_START..VMALLOC_END).contains(&va)
}
