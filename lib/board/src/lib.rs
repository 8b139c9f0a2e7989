//! Device tree (DTB) -> [`Board`]: what the hypervisor needs to know about the machine, and
//! [`guest_dtb`]: the tree the guest gets.
//!
//! One walk over the blob checks all of it (header, block bounds, every token of the structure
//! block, every name) and builds the node tree the parsers read, so no input — truncated,
//! corrupted or hostile — makes it panic. Every problem is a [`BoardError`] naming the node and
//! property. [`FdtWriter`] writes blobs;
//! [`guest_dtb`] uses it to derive the guest's tree from the host's.
//!
//! ```no_run
//! # fn demo(dtb: &[u8]) -> Result<(), board::BoardError> {
//! let board = board::Board::from_dtb(dtb)?;
//! let uart = board.console.as_ref().expect("no UART");
//! let ram: u64 = board.memory.iter().map(|r| r.size).sum();
//! # let _ = (uart, ram); Ok(()) }
//! ```

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

mod chosen;
mod console;
mod cpus;
mod devices;
pub mod diff;
mod error;
mod gic;
mod guest;
mod memory;
pub mod modules;
mod node;
mod power;
mod scan;
mod timer;
mod tree;
mod validate;
mod writer;

use alloc::string::String;
use alloc::vec::Vec;

pub use console::{Uart, UartKind};
pub use cpus::{Cpu, EnableMethod};
pub use devices::{Device, Window, WindowSpace};
pub use error::BoardError;
pub use gic::{Gic, GicVersion};
pub use guest::{dangling_cpu_refs, guest_dtb, CpuRef, ExtraDevice, GuestSpec, CPU_REFS};
pub use memory::ReservedMemory;
pub use node::Status;
pub use power::{Psci, PsciFunctionIds, PsciMethod, PsciVersion, PM_WATCHDOG};
pub use scan::MemFacts;
pub use timer::{Pmu, Timer};
pub use validate::{total_size as dtb_total_size, used_len as dtb_used_len, FDT_MAGIC, MAX_DTB_SIZE};
pub use writer::FdtWriter;

/// A physical address range `[base, base + size)`; `base + size` never wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Region {
    /// First byte.
    pub base: u64,
    /// Length in bytes.
    pub size: u64,
}

impl Region {
    /// A region; callers keep `base + size` from wrapping.
    pub const fn new(base: u64, size: u64) -> Self {
        Self { base, size }
    }

    /// One past the last byte (saturating at `u64::MAX`).
    pub const fn end(&self) -> u64 {
        self.base.saturating_add(self.size)
    }

    /// Does the region contain `addr`?
    pub const fn contains(&self, addr: u64) -> bool {
        addr >= self.base && addr - self.base < self.size
    }

    /// Do the two regions share a byte?
    pub const fn overlaps(&self, other: &Region) -> bool {
        self.size != 0 && other.size != 0 && self.base < other.end() && other.base < self.end()
    }
}

/// What the hypervisor needs to know about the machine, decoded from its DTB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    /// Root `model`.
    pub model: Option<String>,
    /// Root `compatible`.
    pub compatible: Vec<String>,
    /// RAM: every `reg` entry of every top-level memory node (zero-sized entries dropped),
    /// sorted by base.
    pub memory: Vec<Region>,
    /// Children of `/reserved-memory`.
    pub reserved_memory: Vec<ReservedMemory>,
    /// `/memreserve/` entries of the header block.
    pub mem_reserve: Vec<Region>,
    /// Console UART: the one `/chosen/stdout-path` names, else the first UART of the tree this
    /// project drives (and then [`Board::console_problem`] says why not the named one).
    pub console: Option<Uart>,
    /// Why `/chosen/stdout-path`'s UART is not the console (a UART no driver here speaks,
    /// naming its node and compatible), for the console that does exist to print.
    pub console_problem: Option<String>,
    /// `/chosen/stdout-path` as written.
    pub stdout_path: Option<String>,
    /// Interrupt controller (the root's `interrupt-parent` if that is a GIC, else the first GIC).
    pub gic: Option<Gic>,
    /// PSCI node.
    pub psci: Option<Psci>,
    /// The generic timer's interrupts.
    pub timer: Option<Timer>,
    /// The PMU node's interrupts.
    pub pmu: Option<Pmu>,
    /// CPUs in tree order.
    pub cpus: Vec<Cpu>,
    /// `/chosen/bootargs`.
    pub bootargs: Option<String>,
    /// The guest as a boot loader described it in `/chosen/module@…` nodes (Xen's convention,
    /// [`modules`]); `None` without any.
    pub modules: Option<modules::GuestModules>,
    /// `/chosen/linux,initrd-start` .. `linux,initrd-end`.
    pub initrd: Option<Region>,
    /// Other MMIO devices, so the hypervisor can decide what the guest may touch.
    pub devices: Vec<Device>,
    /// Header `boot_cpuid_phys`.
    pub boot_cpuid_phys: u32,
    /// Header `totalsize`: bytes the DTB occupies in memory.
    pub dtb_size: usize,
}

/// The DTB a boot loader left at `ptr` (x0 of the arm64 boot protocol) as a slice: reads the
/// header first, checks the magic and that `totalsize` is at most [`MAX_DTB_SIZE`], then takes
/// `totalsize` bytes. A null `ptr` is an error.
///
/// # Safety
///
/// `ptr` must be null or point to at least 8 readable bytes; if those start with the FDT magic,
/// the `totalsize` bytes (at most [`MAX_DTB_SIZE`]) from `ptr` must be readable and not written
/// for as long as the slice lives. No alignment is required.
pub unsafe fn dtb_at<'a>(ptr: *const u8) -> Result<&'a [u8], BoardError> {
    if ptr.is_null() {
        return Err(BoardError::BadHeader { field: "address", value: 0, why: "no device tree (null pointer in x0)" });
    }
    let mut head = [0u8; 8];
    // SAFETY: the caller guarantees 8 readable bytes at `ptr`; `head` is a distinct local.
    unsafe { core::ptr::copy_nonoverlapping(ptr, head.as_mut_ptr(), head.len()) };
    let size = validate::total_size(&head)?;
    if size > MAX_DTB_SIZE {
        return Err(BoardError::BadHeader {
            field: "totalsize",
            value: size as u64,
            why: "larger than the 2 MiB limit",
        });
    }
    // SAFETY: the magic matched and `size` <= MAX_DTB_SIZE, so the caller guarantees `size`
    // readable bytes at `ptr` that stay unmodified while the slice lives; u8 has no alignment
    // requirement.
    Ok(unsafe { core::slice::from_raw_parts(ptr, size) })
}

/// The root compatible of the device tree QEMU writes for its `virt` machine.
pub const QEMU_VIRT: &str = "linux,dummy-virt";

impl Board {
    /// Whether this is QEMU's `virt` machine with the device tree QEMU wrote ([`QEMU_VIRT`]):
    /// PSCI over HVC for a guest without EL2, a TCG PMU, QEMU's power-off. A board's device
    /// tree on QEMU (a board model) is a board's.
    pub fn is_qemu_virt(&self) -> bool {
        self.compatible.iter().any(|c| c == QEMU_VIRT)
    }

    /// The files of the `/chosen/module@…` nodes ([`Board::modules`]): where the boot loader
    /// put the guest.
    pub fn module_regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.modules.iter().flat_map(|m| {
            [Some(&m.kernel), m.ramdisk.as_ref(), m.device_tree.as_ref()].into_iter().flatten().map(|x| x.region)
        })
    }

    /// Parses a DTB. Never panics; `dtb` may be longer than the blob's `totalsize`.
    pub fn from_dtb(dtb: &[u8]) -> Result<Board, BoardError> {
        let validate::Parsed { bytes, header, tree: t } = validate::parse(dtb)?;
        let mem_reserve = validate::mem_reserve(bytes, &header)?.into_iter().map(|(b, s)| Region::new(b, s)).collect();
        // Most fundamental first: the first error reported is the one that matters most.
        let memory = memory::parse_memory(&t)?;
        let reserved_memory = memory::parse_reserved(&t)?;
        let cpus = cpus::parse_cpus(&t)?;
        let gic = gic::parse_gic(&t)?;
        let psci = power::parse_psci(&t)?;
        let timer = timer::parse_timer(&t)?;
        let pmu = timer::parse_pmu(&t)?;
        let chosen = t.find_path("/chosen").filter(|&c| t.nodes[c].parent() == Some(0));
        let (bootargs, initrd) = match chosen {
            Some(c) => chosen::parse_chosen(&t, c)?,
            None => (None, None),
        };
        let modules = match chosen {
            Some(c) => modules::parse_modules(&t, c)?,
            None => None,
        };
        let (stdout_path, console, console_problem) = console::parse_console(&t, chosen)?;
        let devices = devices::parse_devices(&t)?;
        Ok(Board {
            model: t.prop_str(0, "model").ok().flatten().map(String::from),
            compatible: node::strings(t.prop_strs(0, "compatible").ok().flatten()),
            memory,
            reserved_memory,
            mem_reserve,
            console,
            console_problem,
            stdout_path,
            gic,
            psci,
            timer,
            pmu,
            cpus,
            bootargs,
            modules,
            initrd,
            devices,
            boot_cpuid_phys: header.boot_cpuid_phys,
            dtb_size: header.totalsize,
        })
    }

    /// Parses the DTB at `ptr` (as handed over in x0 at boot): [`dtb_at`], then
    /// [`Board::from_dtb`].
    ///
    /// # Safety
    ///
    /// As [`dtb_at`].
    pub unsafe fn from_ptr(ptr: *const u8) -> Result<Board, BoardError> {
        // SAFETY: forwarded from the caller.
        Self::from_dtb(unsafe { dtb_at(ptr) }?)
    }
}
