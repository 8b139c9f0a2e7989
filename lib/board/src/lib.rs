//! Device tree (DTB) -> [`Board`]: what the hypervisor needs to know about the machine, and
//! [`guest_dtb`]: the tree the guest gets.
//!
//! Parsing goes through the `fdt` crate, after this crate has checked the whole blob (header,
//! block bounds, every token of the structure block, every name), so no input — truncated,
//! corrupted or hostile — makes it panic: `fdt` 0.1.5 alone panics on malformed blobs. Every
//! problem is a [`BoardError`] naming the node and property. [`FdtWriter`] writes blobs;
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

pub mod diff;
mod error;
mod guest;
mod tree;
mod validate;
mod writer;

use alloc::string::{String, ToString};
use alloc::vec::Vec;

pub use error::BoardError;
pub use guest::{dangling_cpu_refs, guest_dtb, CpuRef, ExtraDevice, GuestSpec, CPU_REFS};
pub use validate::{total_size as dtb_total_size, FDT_MAGIC, MAX_DTB_SIZE};
pub use writer::FdtWriter;

use error::{bad_prop, missing_prop};
use tree::Tree;

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

/// A node's `status` property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// No `status`, or `"okay"` / `"ok"`.
    Okay,
    /// `"disabled"`.
    Disabled,
    /// Anything else (`"reserved"`, `"fail"`, `"fail-sss"`, ...).
    Other(String),
}

impl Status {
    /// Is the device usable (`Okay`)?
    pub fn is_okay(&self) -> bool {
        matches!(self, Status::Okay)
    }
}

/// Which UART a console is: the register interface its driver speaks (`rt::uart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UartKind {
    /// ARM PL011 (`arm,pl011`): QEMU `virt`, the Pi 5's debug UART, the Pi 4's `uart0`.
    Pl011,
    /// The i.MX UART (`fsl,imx21-uart`, `fsl,imx6q-uart`, `fsl,imx8mp-uart`, ...).
    Imx,
    /// The Cadence UART (`cdns,uart-r1p8`, `cdns,uart-r1p12`, `xlnx,xuartps`): Zynq, ZynqMP.
    Cadence,
    /// A 16550/8250 (`ns16550a`, `ns16550`, `snps,dw-apb-uart`, and the Pi's mini UART
    /// `brcm,bcm2835-aux-uart`, a 16550 subset): register `n` at `base + (n << reg_shift)`,
    /// accessed `reg_io_width` bytes wide (1 or 4).
    Ns16550 {
        /// `reg-shift` (the mini UART: 2).
        reg_shift: u8,
        /// `reg-io-width` (1 or 4).
        reg_io_width: u8,
    },
}

impl UartKind {
    /// A short name for messages.
    pub const fn name(self) -> &'static str {
        match self {
            UartKind::Pl011 => "PL011",
            UartKind::Imx => "i.MX UART",
            UartKind::Cadence => "Cadence UART",
            UartKind::Ns16550 { .. } => "16550",
        }
    }
}

/// The UART compatibles this project drives (first match of a node's `compatible` list).
const UART_KINDS: &[(&str, UartKind)] = &[
    ("arm,pl011", UartKind::Pl011),
    ("fsl,imx8mp-uart", UartKind::Imx),
    ("fsl,imx6q-uart", UartKind::Imx),
    ("fsl,imx21-uart", UartKind::Imx),
    ("cdns,uart-r1p12", UartKind::Cadence),
    ("cdns,uart-r1p8", UartKind::Cadence),
    ("xlnx,xuartps", UartKind::Cadence),
    ("brcm,bcm2835-aux-uart", UartKind::Ns16550 { reg_shift: 2, reg_io_width: 4 }),
    ("snps,dw-apb-uart", UartKind::Ns16550 { reg_shift: 0, reg_io_width: 1 }),
    ("ns16550a", UartKind::Ns16550 { reg_shift: 0, reg_io_width: 1 }),
    ("ns16550", UartKind::Ns16550 { reg_shift: 0, reg_io_width: 1 }),
    ("ns16450", UartKind::Ns16550 { reg_shift: 0, reg_io_width: 1 }),
];

/// The console UART.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uart {
    /// Which driver.
    pub kind: UartKind,
    /// Node path, e.g. `/pl011@9000000`.
    pub path: String,
    /// MMIO base (CPU physical address).
    pub base: u64,
    /// MMIO size.
    pub size: u64,
    /// UART reference clock in Hz: the node's `clock-frequency`, else the `clock-frequency` of
    /// the fixed clock its `clocks` (`uartclk` entry) points at. `None` when neither is given.
    pub clock_frequency: Option<u32>,
    /// Options after `:` in `/chosen/stdout-path` (e.g. `115200n8`), when this UART was
    /// chosen from it.
    pub options: Option<String>,
    /// `true` when `/chosen/stdout-path` named this UART; `false` when it is the first PL011
    /// of the tree (fallback).
    pub from_stdout_path: bool,
}

/// GIC architecture version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GicVersion {
    /// GICv2 (`arm,cortex-a15-gic`, `arm,gic-400`, ...).
    V2,
    /// GICv3 (`arm,gic-v3`).
    V3,
}

/// The interrupt controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gic {
    /// Node path, e.g. `/intc@8000000`.
    pub path: String,
    /// Architecture version.
    pub version: GicVersion,
    /// The `compatible` string that matched.
    pub compatible: String,
    /// GICD.
    pub distributor: Region,
    /// GICR regions (v3 only; empty for v2).
    pub redistributors: Vec<Region>,
    /// GICC (required for v2, optional legacy interface for v3).
    pub cpu_interface: Option<Region>,
    /// GICH (virtual interface control), when the hardware has virtualization extensions.
    pub hyp_interface: Option<Region>,
    /// GICV (virtual CPU interface).
    pub vcpu_interface: Option<Region>,
}

/// PSCI conduit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PsciMethod {
    /// `HVC #0`.
    Hvc,
    /// `SMC #0`.
    Smc,
}

impl PsciMethod {
    /// The device-tree spelling, `"hvc"` or `"smc"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PsciMethod::Hvc => "hvc",
            PsciMethod::Smc => "smc",
        }
    }
}

/// Highest PSCI version the node's `compatible` claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PsciVersion {
    /// `arm,psci`: function ids come from the node.
    V0_1,
    /// `arm,psci-0.2`.
    V0_2,
    /// `arm,psci-1.0`.
    V1_0,
}

/// PSCI 0.1 function ids given as node properties (QEMU also gives them with 1.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PsciFunctionIds {
    /// `cpu_suspend`.
    pub cpu_suspend: Option<u32>,
    /// `cpu_off`.
    pub cpu_off: Option<u32>,
    /// `cpu_on`.
    pub cpu_on: Option<u32>,
    /// `migrate`.
    pub migrate: Option<u32>,
}

/// The PSCI node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Psci {
    /// Node path, e.g. `/psci`.
    pub path: String,
    /// Conduit.
    pub method: PsciMethod,
    /// All `compatible` strings.
    pub compatible: Vec<String>,
    /// Highest version claimed by `compatible`.
    pub version: PsciVersion,
    /// 0.1-style function ids, if given.
    pub function_ids: PsciFunctionIds,
}

/// The architected generic timer (`arm,armv7-timer` / `arm,armv8-timer`): the GIC interrupt
/// ids of its per-CPU timers, in the binding's order. Each is a PPI (INTID 16-31) on real
/// machines; `None` when the node lists fewer interrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timer {
    /// Node path, e.g. `/timer`.
    pub path: String,
    /// Secure EL1 physical timer.
    pub secure_phys: Option<u32>,
    /// Non-secure EL1 physical timer (CNTP).
    pub phys: Option<u32>,
    /// EL1 virtual timer (CNTV).
    pub virt: Option<u32>,
    /// EL2 physical timer (CNTHP).
    pub hyp_phys: Option<u32>,
}

/// The CPUs' performance monitors (`arm,armv8-pmuv3`, or a core's own `arm,cortex-a76-pmu`,
/// `arm,neoverse-n1-pmu`, ...): the GIC interrupt ids of their overflow interrupt, in the
/// binding's order. One PPI (INTID 16-31) serves every CPU (QEMU `virt`: PPI 7 = INTID 23);
/// some SoCs give one SPI per CPU instead, in the order of `interrupt-affinity`. Empty when the
/// node lists none (counting works, overflow interrupts do not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pmu {
    /// Node path, e.g. `/pmu`.
    pub path: String,
    /// The overflow interrupts' INTIDs.
    pub interrupts: Vec<u32>,
}

/// How a secondary CPU is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnableMethod {
    /// `"psci"`: PSCI CPU_ON.
    Psci,
    /// `"spin-table"`, with `cpu-release-addr`.
    SpinTable {
        /// Release address, if given.
        release_addr: Option<u64>,
    },
    /// Anything else.
    Other(String),
}

/// One CPU node under `/cpus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpu {
    /// Node path, e.g. `/cpus/cpu@0`. Note QEMU numbers the unit address by CPU index,
    /// which differs from `reg` beyond 16 CPUs.
    pub path: String,
    /// MPIDR affinity bits from `reg`.
    pub mpidr: u64,
    /// `enable-method` (QEMU gives none with a single CPU).
    pub enable_method: Option<EnableMethod>,
    /// First `compatible` string (e.g. `arm,cortex-a76`).
    pub compatible: Option<String>,
    /// `status`.
    pub status: Status,
}

/// One child of `/reserved-memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedMemory {
    /// Node path.
    pub path: String,
    /// Static regions from `reg` (empty for a dynamically placed `size` node).
    pub regions: Vec<Region>,
    /// `no-map`: must not be mapped at all.
    pub no_map: bool,
    /// `reusable`: the OS may use it until its owner claims it.
    pub reusable: bool,
    /// First `compatible` string, if any.
    pub compatible: Option<String>,
}

/// A memory-mapped device: any node with a `reg` the CPU can reach, at the top level or nested
/// under nodes whose `ranges` translate their children's addresses (buses, and devices with
/// sub-devices such as a GICv3's ITS or a GICv2m frame under the GIC node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// Node path.
    pub path: String,
    /// `compatible` strings.
    pub compatible: Vec<String>,
    /// `reg`, translated to CPU physical addresses.
    pub regions: Vec<Region>,
    /// Address windows the device forwards to devices behind it: a PCI host bridge's `ranges`
    /// (I/O, 32-bit and 64-bit memory), in which the OS places the BARs of PCI devices. Empty
    /// for other devices.
    pub windows: Vec<Window>,
    /// `status`.
    pub status: Status,
}

/// What a PCI host bridge window carries (`ranges` entry, bits 25:24 of the child address's
/// first cell).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpace {
    /// Configuration space (code 0; rare in `ranges`).
    Config,
    /// I/O port space, memory-mapped on arm64 (code 1).
    Io,
    /// 32-bit memory space (code 2).
    Mem32,
    /// 64-bit memory space (code 3).
    Mem64,
}

/// One window of a PCI host bridge: CPU addresses `region` reach bus address `bus_address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// CPU physical addresses of the window.
    pub region: Region,
    /// Address on the PCI bus of the window's first byte.
    pub bus_address: u64,
    /// Address space.
    pub space: WindowSpace,
    /// Prefetchable memory (bit 30 of the first cell).
    pub prefetchable: bool,
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

impl Board {
    /// Parses a DTB. Never panics; `dtb` may be longer than the blob's `totalsize`.
    pub fn from_dtb(dtb: &[u8]) -> Result<Board, BoardError> {
        let checked = validate::check(dtb)?;
        let bytes = checked.bytes();
        let header = validate::header(bytes)?;
        let mem_reserve = validate::mem_reserve(bytes, &header)?.into_iter().map(|(b, s)| Region::new(b, s)).collect();
        let fdt = fdt::Fdt::new(bytes).map_err(|_| BoardError::BadHeader {
            field: "magic",
            value: 0,
            why: "rejected by the fdt parser",
        })?;
        let t = Tree::build(&fdt)?;
        // Most fundamental first: the first error reported is the one that matters most.
        let memory = parse_memory(&t)?;
        let reserved_memory = parse_reserved(&t)?;
        let cpus = parse_cpus(&t)?;
        let gic = parse_gic(&t)?;
        let psci = parse_psci(&t)?;
        let timer = parse_timer(&t)?;
        let pmu = parse_pmu(&t)?;
        let chosen = t.find_path("/chosen").filter(|&c| t.nodes[c].parent == Some(0));
        let (bootargs, initrd) = match chosen {
            Some(c) => parse_chosen(&t, c)?,
            None => (None, None),
        };
        let (stdout_path, console, console_problem) = parse_console(&t, chosen)?;
        let devices = parse_devices(&t)?;
        Ok(Board {
            model: t.prop_str(0, "model").ok().flatten().map(String::from),
            compatible: strings(t.prop_strs(0, "compatible").ok().flatten()),
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

    /// The CPU whose `reg` is `mpidr` (affinity bits only).
    pub fn cpu_by_mpidr(&self, mpidr: u64) -> Option<&Cpu> {
        self.cpus.iter().find(|c| c.mpidr == mpidr)
    }

    /// Every range that must not be handed out as free RAM: `/memreserve/` entries and the
    /// static regions of `/reserved-memory` children.
    pub fn reserved_regions(&self) -> impl Iterator<Item = Region> + '_ {
        let rm = self.reserved_memory.iter().flat_map(|r| r.regions.iter().copied());
        self.mem_reserve.iter().copied().chain(rm)
    }

    /// The static regions of `/reserved-memory` children marked `no-map`: memory that must
    /// never be mapped at all (on the Pi 5, TF-A's below 0x80000), not merely left unallocated.
    pub fn no_map_regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.reserved_memory.iter().filter(|r| r.no_map).flat_map(|r| r.regions.iter().copied())
    }

    /// The device whose node path is `path`.
    pub fn device(&self, path: &str) -> Option<&Device> {
        self.devices.iter().find(|d| d.path == path)
    }

    /// Memory the boot firmware keeps for CPUs started by spin-table: for each CPU's
    /// `cpu-release-addr`, the `/memreserve/` entry that holds it (the firmware's spin loop
    /// lives there too: the Pi 4's page 0), else its 4 KiB page. Neither a guest nor anything
    /// else may have it while a CPU may still be spinning there. Page-aligned, no duplicates.
    pub fn spin_table_regions(&self) -> Vec<Region> {
        let mut out: Vec<Region> = Vec::new();
        for c in &self.cpus {
            let Some(EnableMethod::SpinTable { release_addr: Some(a) }) = c.enable_method else { continue };
            let r = match self.mem_reserve.iter().find(|r| r.contains(a)) {
                Some(r) => {
                    let base = r.base & !0xfff;
                    Region::new(base, (r.end().saturating_add(0xfff) & !0xfff) - base)
                }
                None => Region::new(a & !0xfff, 0x1000),
            };
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }

    /// Whether any CPU starts by spin-table.
    pub fn has_spin_table(&self) -> bool {
        self.cpus.iter().any(|c| matches!(c.enable_method, Some(EnableMethod::SpinTable { .. })))
    }

    /// The power-off and reset the board offers without PSCI firmware: the Broadcom PM
    /// watchdog (`brcm,bcm2835-pm-wdt`, `brcm,bcm2835-pm`, `brcm,bcm2711-pm`: the Pi 3 and 4),
    /// its register block (the first `reg`, "pm").
    pub fn pm_watchdog(&self) -> Option<Region> {
        const PM: &[&str] = &["brcm,bcm2835-pm-wdt", "brcm,bcm2835-pm", "brcm,bcm2711-pm"];
        self.devices
            .iter()
            .find(|d| d.status.is_okay() && d.compatible.iter().any(|c| PM.contains(&c.as_str())))
            .and_then(|d| d.regions.first().copied())
    }
}

fn strings(v: Option<Vec<&str>>) -> Vec<String> {
    v.unwrap_or_default().into_iter().map(String::from).collect()
}

fn status(t: &Tree, i: usize) -> Status {
    match t.prop_str(i, "status").ok().flatten() {
        None | Some("okay") | Some("ok") => Status::Okay,
        Some("disabled") => Status::Disabled,
        Some(other) => Status::Other(other.to_string()),
    }
}

fn base_name(name: &str) -> &str {
    name.split('@').next().unwrap_or(name)
}

fn prop_is(t: &Tree, i: usize, prop: &str, value: &str) -> bool {
    t.prop(i, prop).is_some_and(|v| v.strip_suffix(&[0]) == Some(value.as_bytes()))
}

fn regions(t: &Tree, i: usize, pairs: Vec<(u64, u64)>) -> Result<Vec<Region>, BoardError> {
    pairs
        .into_iter()
        .map(|(b, s)| match b.checked_add(s) {
            Some(_) => Ok(Region::new(b, s)),
            None => Err(bad_prop(t.path(i), "reg", "range wraps past 2^64")),
        })
        .collect()
}

/// `reg` translated to CPU addresses; missing or unreachable is an error.
fn required_reg(t: &Tree, i: usize) -> Result<Vec<Region>, BoardError> {
    if !t.has_prop(i, "reg") {
        return Err(missing_prop(t.path(i), "reg"));
    }
    let pairs = t
        .reg_phys(i)?
        .ok_or_else(|| bad_prop(t.path(i), "reg", "not reachable from the CPU: a parent bus lacks matching ranges"))?;
    let regs = regions(t, i, pairs)?;
    if regs.is_empty() {
        return Err(bad_prop(t.path(i), "reg", "empty"));
    }
    Ok(regs)
}

pub(crate) fn is_memory_node(t: &Tree, i: usize) -> bool {
    t.nodes[i].parent == Some(0)
        && (prop_is(t, i, "device_type", "memory")
            || (base_name(t.nodes[i].name) == "memory" && !t.has_prop(i, "device_type")))
}

fn parse_memory(t: &Tree) -> Result<Vec<Region>, BoardError> {
    let mut found = false;
    let mut out = Vec::new();
    for i in t.children(0) {
        if !is_memory_node(t, i) || status(t, i) == Status::Disabled {
            continue;
        }
        found = true;
        let pairs = t.addr_size_pairs(i, "reg")?.ok_or_else(|| missing_prop(t.path(i), "reg"))?;
        out.extend(regions(t, i, pairs)?.into_iter().filter(|r| r.size != 0));
    }
    if !found {
        return Err(BoardError::MissingNode { node: String::from("/memory") });
    }
    out.sort();
    Ok(out)
}

fn parse_reserved(t: &Tree) -> Result<Vec<ReservedMemory>, BoardError> {
    let Some(rm) = t.find_path("/reserved-memory").filter(|&i| t.nodes[i].name == "reserved-memory") else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for c in t.children(rm) {
        let pairs = t.addr_size_pairs(c, "reg")?.unwrap_or_default();
        out.push(ReservedMemory {
            path: t.path(c).to_string(),
            regions: regions(t, c, pairs)?,
            no_map: t.has_prop(c, "no-map"),
            reusable: t.has_prop(c, "reusable"),
            compatible: t.prop_strs(c, "compatible").ok().flatten().and_then(|v| v.first().map(|s| s.to_string())),
        });
    }
    Ok(out)
}

fn parse_chosen(t: &Tree, c: usize) -> Result<(Option<String>, Option<Region>), BoardError> {
    let bootargs = t.prop_str(c, "bootargs")?.map(String::from);
    let start = t.prop_u32_or_u64(c, "linux,initrd-start")?;
    let end = t.prop_u32_or_u64(c, "linux,initrd-end")?;
    let initrd = match (start, end) {
        (None, None) => None,
        (Some(_), None) => return Err(missing_prop(t.path(c), "linux,initrd-end")),
        (None, Some(_)) => return Err(missing_prop(t.path(c), "linux,initrd-start")),
        (Some(s), Some(e)) if e < s => {
            return Err(bad_prop(t.path(c), "linux,initrd-end", "smaller than linux,initrd-start"))
        }
        (Some(s), Some(e)) => Some(Region::new(s, e - s)),
    };
    Ok((bootargs, initrd))
}

/// The driver for node `i`, if any of its compatibles is one this project drives (the
/// 16550's `reg-shift` and `reg-io-width` from the node when it gives them).
fn uart_kind(t: &Tree, i: usize) -> Option<UartKind> {
    let compat = t.prop_strs(i, "compatible").ok().flatten()?;
    let kind = compat.iter().find_map(|c| UART_KINDS.iter().find(|(k, _)| k == c).map(|(_, kind)| *kind))?;
    Some(match kind {
        UartKind::Ns16550 { reg_shift, reg_io_width } => UartKind::Ns16550 {
            reg_shift: t.prop_u32(i, "reg-shift").ok().flatten().map_or(reg_shift, |v| v.min(4) as u8),
            reg_io_width: match t.prop_u32(i, "reg-io-width").ok().flatten() {
                Some(4) => 4,
                Some(_) => 1,
                None => reg_io_width,
            },
        },
        k => k,
    })
}

type Console = (Option<String>, Option<Uart>, Option<String>);

fn parse_console(t: &Tree, chosen: Option<usize>) -> Result<Console, BoardError> {
    let mut stdout_path = None;
    let mut problem = None;
    if let Some(c) = chosen {
        let (prop, value) = match t.prop_str(c, "stdout-path")? {
            Some(v) => ("stdout-path", Some(v)),
            None => ("linux,stdout-path", t.prop_str(c, "linux,stdout-path")?),
        };
        if let Some(value) = value {
            stdout_path = Some(value.to_string());
            let (path, options) = match value.split_once(':') {
                Some((p, o)) => (p, Some(o)),
                None => (value, None),
            };
            let Some(node) = t.resolve(path)? else {
                return Err(bad_prop(t.path(c), prop, "names no node (neither a path nor an alias)"));
            };
            match uart_kind(t, node) {
                Some(kind) => {
                    let uart = uart(t, node, kind, options.map(String::from), true)?;
                    return Ok((stdout_path, Some(uart), None));
                }
                None => {
                    let compat = t.prop_strs(node, "compatible").ok().flatten().unwrap_or_default().join("\", \"");
                    problem = Some(alloc::format!(
                        "/chosen/{prop} names {} (compatible \"{compat}\"), a UART no driver here speaks \
                         (PL011, i.MX, Cadence, 16550/8250)",
                        t.path(node)
                    ));
                }
            }
        }
    }
    let first = (0..t.nodes.len())
        .filter_map(|i| uart_kind(t, i).map(|k| (i, k)))
        .min_by_key(|&(i, k)| (!status(t, i).is_okay(), k != UartKind::Pl011, i));
    let console = first.map(|(i, k)| uart(t, i, k, None, false)).transpose()?;
    Ok((stdout_path, console, problem))
}

fn uart(
    t: &Tree,
    i: usize,
    kind: UartKind,
    options: Option<String>,
    from_stdout_path: bool,
) -> Result<Uart, BoardError> {
    let reg = required_reg(t, i)?[0];
    let clock_frequency = match t.prop_u32(i, "clock-frequency")? {
        Some(f) => Some(f),
        None => clock_from_provider(t, i),
    };
    Ok(Uart {
        kind,
        path: t.path(i).to_string(),
        base: reg.base,
        size: reg.size,
        clock_frequency,
        options,
        from_stdout_path,
    })
}

/// `clock-frequency` of the fixed clock feeding `uartclk` (or the first clock).
fn clock_from_provider(t: &Tree, i: usize) -> Option<u32> {
    let clocks = t.prop(i, "clocks")?;
    let names = t.prop_strs(i, "clock-names").ok().flatten().unwrap_or_default();
    let want = names.iter().position(|n| *n == "uartclk").unwrap_or(0);
    let cells: Vec<u32> = clocks.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect();
    let mut pos = 0;
    for index in 0.. {
        let provider = t.by_phandle(*cells.get(pos)?)?;
        let clock_cells = t.prop_u32(provider, "#clock-cells").ok().flatten().unwrap_or(0);
        if index == want {
            return match clock_cells {
                0 => t.prop_u32(provider, "clock-frequency").ok().flatten(),
                _ => None,
            };
        }
        pos = pos.checked_add(1)?.checked_add(clock_cells as usize)?;
    }
    None
}

const GIC_V2: &[&str] = &["arm,cortex-a15-gic", "arm,gic-400", "arm,cortex-a9-gic", "arm,cortex-a7-gic"];
const GIC_V3: &[&str] = &["arm,gic-v3"];

/// The interrupt controller: the root's `interrupt-parent` if it is a GIC, else the first GIC;
/// and whether it is a GICv3.
pub(crate) fn find_gic(t: &Tree) -> Option<(usize, bool)> {
    let is_gic = |i: usize| t.is_compatible(i, GIC_V2) || t.is_compatible(i, GIC_V3);
    let preferred = t
        .prop(0, "interrupt-parent")
        .and_then(|v| <[u8; 4]>::try_from(v).ok())
        .and_then(|p| t.by_phandle(u32::from_be_bytes(p)))
        .filter(|&i| is_gic(i));
    let i = preferred.or_else(|| (0..t.nodes.len()).find(|&i| is_gic(i)))?;
    Some((i, t.is_compatible(i, GIC_V3)))
}

fn parse_gic(t: &Tree) -> Result<Option<Gic>, BoardError> {
    let Some((i, v3)) = find_gic(t) else {
        return Ok(None);
    };
    let compat = t.prop_strs(i, "compatible")?.unwrap_or_default();
    let list = if v3 { GIC_V3 } else { GIC_V2 };
    let compatible = compat.iter().find(|c| list.contains(c)).map(|s| s.to_string()).unwrap_or_default();
    let regs = required_reg(t, i)?;
    let path = t.path(i);
    let gic = if v3 {
        let n = t.prop_u32(i, "#redistributor-regions")?.unwrap_or(1) as usize;
        if n == 0 {
            return Err(bad_prop(path, "#redistributor-regions", "must be at least 1"));
        }
        if regs.len() < 1 + n {
            return Err(bad_prop(path, "reg", "fewer entries than 1 distributor + #redistributor-regions"));
        }
        Gic {
            path: path.to_string(),
            version: GicVersion::V3,
            compatible,
            distributor: regs[0],
            redistributors: regs[1..1 + n].to_vec(),
            cpu_interface: regs.get(1 + n).copied(),
            hyp_interface: regs.get(2 + n).copied(),
            vcpu_interface: regs.get(3 + n).copied(),
        }
    } else {
        if regs.len() < 2 {
            return Err(bad_prop(path, "reg", "GICv2 needs distributor and CPU interface entries"));
        }
        Gic {
            path: path.to_string(),
            version: GicVersion::V2,
            compatible,
            distributor: regs[0],
            redistributors: Vec::new(),
            cpu_interface: Some(regs[1]),
            hyp_interface: regs.get(2).copied(),
            vcpu_interface: regs.get(3).copied(),
        }
    };
    Ok(Some(gic))
}

const TIMER: &[&str] = &["arm,armv8-timer", "arm,armv7-timer"];

/// The interrupt controller node of node `i` (its own or an ancestor's `interrupt-parent`).
pub(crate) fn interrupt_parent(t: &Tree, mut i: usize) -> Option<usize> {
    loop {
        if let Some(p) = t.prop(i, "interrupt-parent").and_then(|v| <[u8; 4]>::try_from(v).ok()) {
            return t.by_phandle(u32::from_be_bytes(p));
        }
        i = t.nodes[i].parent?;
    }
}

/// GIC interrupt ids of node `i`'s `interrupts`: each specifier is `<type number flags>` (plus
/// a PPI partition cell on some GICv3 trees), type 0 = SPI (INTID 32 + number), 1 = PPI
/// (INTID 16 + number).
fn gic_interrupts(t: &Tree, i: usize) -> Result<Vec<u32>, BoardError> {
    let path = t.path(i);
    let Some(v) = t.prop(i, "interrupts") else {
        return Err(missing_prop(path, "interrupts"));
    };
    let parent = interrupt_parent(t, i).ok_or_else(|| bad_prop(path, "interrupts", "no interrupt-parent"))?;
    let is_gic = t.is_compatible(parent, GIC_V2) || t.is_compatible(parent, GIC_V3);
    if !is_gic {
        return Err(bad_prop(path, "interrupts", "the interrupt parent is not a GIC"));
    }
    let cells = t.prop_u32(parent, "#interrupt-cells")?.unwrap_or(3) as usize;
    if !(3..=4).contains(&cells) {
        return Err(bad_prop(t.path(parent), "#interrupt-cells", "a GIC takes 3 or 4 cells"));
    }
    if v.len() % (4 * cells) != 0 {
        return Err(bad_prop(path, "interrupts", "not a whole number of interrupt specifiers"));
    }
    let cell = |k: usize| u32::from_be_bytes([v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]]);
    let mut out = Vec::new();
    for spec in 0..v.len() / (4 * cells) {
        let (kind, number) = (cell(spec * cells), cell(spec * cells + 1));
        let intid = match kind {
            0 if number < 988 => 32 + number,
            1 if number < 16 => 16 + number,
            _ => return Err(bad_prop(path, "interrupts", "neither an SPI nor a PPI in range")),
        };
        out.push(intid);
    }
    Ok(out)
}

/// The generic timer's node.
pub(crate) fn find_timer(t: &Tree) -> Option<usize> {
    (0..t.nodes.len()).find(|&i| t.is_compatible(i, TIMER))
}

fn parse_timer(t: &Tree) -> Result<Option<Timer>, BoardError> {
    let Some(i) = find_timer(t) else {
        return Ok(None);
    };
    let ids = gic_interrupts(t, i)?;
    Ok(Some(Timer {
        path: t.path(i).to_string(),
        secure_phys: ids.first().copied(),
        phys: ids.get(1).copied(),
        virt: ids.get(2).copied(),
        hyp_phys: ids.get(3).copied(),
    }))
}

/// `arm,armv8-pmuv3`, or an Arm core's own PMU compatible (`arm,cortex-a76-pmu`,
/// `arm,neoverse-n1-pmu`; not the cluster's `arm,dsu-pmu` nor an SMMU's PMCG).
fn is_pmu_compatible(c: &str) -> bool {
    c == "arm,armv8-pmuv3" || (["arm,cortex-", "arm,neoverse-"].iter().any(|p| c.starts_with(p)) && c.ends_with("-pmu"))
}

fn parse_pmu(t: &Tree) -> Result<Option<Pmu>, BoardError> {
    let found = (0..t.nodes.len())
        .find(|&i| t.prop_strs(i, "compatible").ok().flatten().is_some_and(|c| c.iter().any(|c| is_pmu_compatible(c))));
    let Some(i) = found else {
        return Ok(None);
    };
    let interrupts = if t.prop(i, "interrupts").is_some() { gic_interrupts(t, i)? } else { Vec::new() };
    Ok(Some(Pmu { path: t.path(i).to_string(), interrupts }))
}

const PSCI: &[&str] = &["arm,psci", "arm,psci-0.2", "arm,psci-1.0"];

pub(crate) fn find_psci(t: &Tree) -> Option<usize> {
    (0..t.nodes.len()).find(|&i| t.is_compatible(i, PSCI))
}

fn parse_psci(t: &Tree) -> Result<Option<Psci>, BoardError> {
    let Some(i) = find_psci(t) else {
        return Ok(None);
    };
    let path = t.path(i);
    let method = match t.prop_str(i, "method")? {
        Some("hvc") => PsciMethod::Hvc,
        Some("smc") => PsciMethod::Smc,
        Some(_) => return Err(bad_prop(path, "method", "neither \"hvc\" nor \"smc\"")),
        None => return Err(missing_prop(path, "method")),
    };
    let compatible = t.prop_strs(i, "compatible")?.unwrap_or_default();
    let version = compatible
        .iter()
        .filter_map(|c| match *c {
            "arm,psci" => Some(PsciVersion::V0_1),
            "arm,psci-0.2" => Some(PsciVersion::V0_2),
            "arm,psci-1.0" => Some(PsciVersion::V1_0),
            _ => None,
        })
        .max()
        .unwrap_or(PsciVersion::V0_1);
    Ok(Some(Psci {
        path: path.to_string(),
        method,
        compatible: compatible.into_iter().map(String::from).collect(),
        version,
        function_ids: PsciFunctionIds {
            cpu_suspend: t.prop_u32(i, "cpu_suspend")?,
            cpu_off: t.prop_u32(i, "cpu_off")?,
            cpu_on: t.prop_u32(i, "cpu_on")?,
            migrate: t.prop_u32(i, "migrate")?,
        },
    }))
}

fn parse_cpus(t: &Tree) -> Result<Vec<Cpu>, BoardError> {
    let cpus = t
        .find_path("/cpus")
        .filter(|&i| t.nodes[i].name == "cpus")
        .ok_or_else(|| BoardError::MissingNode { node: String::from("/cpus") })?;
    let cells = t.cells(cpus)?;
    if cells.size != 0 {
        return Err(bad_prop(t.path(cpus), "#size-cells", "must be 0 under /cpus"));
    }
    let mut out = Vec::new();
    for c in t.children(cpus) {
        let is_cpu = match t.prop(c, "device_type") {
            Some(_) => prop_is(t, c, "device_type", "cpu"),
            None => base_name(t.nodes[c].name) == "cpu",
        };
        if !is_cpu {
            continue;
        }
        let pairs = t.addr_size_pairs(c, "reg")?.ok_or_else(|| missing_prop(t.path(c), "reg"))?;
        let &(mpidr, _) = pairs.first().ok_or_else(|| bad_prop(t.path(c), "reg", "empty"))?;
        let enable_method = match t.prop_str(c, "enable-method")? {
            None => None,
            Some("psci") => Some(EnableMethod::Psci),
            Some("spin-table") => {
                Some(EnableMethod::SpinTable { release_addr: t.prop_u32_or_u64(c, "cpu-release-addr")? })
            }
            Some(other) => Some(EnableMethod::Other(other.to_string())),
        };
        out.push(Cpu {
            path: t.path(c).to_string(),
            mpidr,
            enable_method,
            compatible: t.prop_strs(c, "compatible").ok().flatten().and_then(|v| v.first().map(|s| s.to_string())),
            status: status(t, c),
        });
    }
    if out.is_empty() {
        return Err(BoardError::MissingNode { node: String::from("/cpus/cpu@*") });
    }
    Ok(out)
}

const BUSES: &[&str] = &["simple-bus", "simple-mfd", "arm,amba-bus"];
const NOT_DEVICES: &[&str] = &[
    "memory",
    "reserved-memory",
    "cpus",
    "chosen",
    "aliases",
    "__symbols__",
    "__overrides__",
    "__fixups__",
    "__local_fixups__",
];

fn parse_devices(t: &Tree) -> Result<Vec<Device>, BoardError> {
    let mut out = Vec::new();
    for c in t.children(0) {
        if NOT_DEVICES.contains(&base_name(t.nodes[c].name)) || is_memory_node(t, c) {
            continue;
        }
        collect_devices(t, c, &mut out)?;
    }
    Ok(out)
}

fn collect_devices(t: &Tree, i: usize, out: &mut Vec<Device>) -> Result<(), BoardError> {
    let pci = is_pci_bridge(t, i);
    if t.has_prop(i, "reg") {
        if let Some(pairs) = t.reg_phys(i)? {
            out.push(Device {
                path: t.path(i).to_string(),
                compatible: strings(t.prop_strs(i, "compatible").ok().flatten()),
                regions: regions(t, i, pairs)?,
                windows: if pci { pci_windows(t, i)? } else { Vec::new() },
                status: status(t, i),
            });
        }
    }
    // Children are memory-mapped only where this node translates their addresses (`ranges`,
    // empty = identity). Children of a PCI bridge are PCI functions addressed in configuration
    // space (3 address cells): what the CPU reaches of them are the bridge's windows.
    if (t.has_prop(i, "ranges") || t.is_compatible(i, BUSES)) && !pci {
        for c in t.children(i) {
            collect_devices(t, c, out)?;
        }
    }
    Ok(())
}

/// A PCI host bridge: `device_type = "pci"` (or `"pciex"`), or 3 address cells for its
/// children (the PCI bus binding).
fn is_pci_bridge(t: &Tree, i: usize) -> bool {
    prop_is(t, i, "device_type", "pci")
        || prop_is(t, i, "device_type", "pciex")
        || t.prop_u32(i, "#address-cells").ok().flatten() == Some(3)
}

/// The windows of a PCI host bridge's `ranges`: (3-cell PCI address, parent address, size)
/// entries, the parent address translated on to the CPU. A window the CPU cannot reach (a
/// parent bus without a matching `ranges`) is left out.
fn pci_windows(t: &Tree, i: usize) -> Result<Vec<Window>, BoardError> {
    let Some(v) = t.prop(i, "ranges") else {
        return Ok(Vec::new());
    };
    let path = t.path(i);
    let own = t.cells(i)?;
    let parent = t.nodes[i].parent.ok_or_else(|| bad_prop(path, "ranges", "the root cannot be a PCI bridge"))?;
    let up = t.cells(parent)?;
    if own.addr != 3 || own.size == 0 || own.size > 2 || up.addr == 0 || up.addr > 2 {
        return Err(bad_prop(
            path,
            "ranges",
            "a PCI bridge needs 3 address cells, 1-2 size cells and a 1-2 cell parent",
        ));
    }
    let entry = ((own.addr + up.addr + own.size) * 4) as usize;
    if !v.len().is_multiple_of(entry) {
        return Err(bad_prop(path, "ranges", "length not a multiple of the entry size"));
    }
    let mut out = Vec::new();
    for e in v.chunks_exact(entry) {
        let hi = tree::read_cells(e, 1).unwrap_or(0) as u32;
        let bus_address = tree::read_cells(&e[4..], 2).unwrap_or(0);
        let parent_addr = tree::read_cells(&e[12..], up.addr).unwrap_or(0);
        let size = tree::read_cells(&e[12 + up.addr as usize * 4..], own.size).unwrap_or(0);
        if size == 0 {
            continue;
        }
        if parent_addr.checked_add(size).is_none() {
            return Err(bad_prop(path, "ranges", "window wraps past 2^64"));
        }
        let Some(cpu) = t.translate(i, parent_addr, size)? else {
            continue;
        };
        let space = match (hi >> 24) & 3 {
            0 => WindowSpace::Config,
            1 => WindowSpace::Io,
            2 => WindowSpace::Mem32,
            _ => WindowSpace::Mem64,
        };
        out.push(Window { region: Region::new(cpu, size), bus_address, space, prefetchable: hi & (1 << 30) != 0 });
    }
    Ok(out)
}
