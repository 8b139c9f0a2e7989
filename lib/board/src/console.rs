//! The console UART: the one `/chosen/stdout-path` names, of a kind a driver in `rt::uart`
//! speaks, its clock and options.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{bad_prop, BoardError};
use crate::node::{required_reg, status};
use crate::tree::Tree;

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

pub(crate) type Console = (Option<String>, Option<Uart>, Option<String>);

pub(crate) fn parse_console(t: &Tree, chosen: Option<usize>) -> Result<Console, BoardError> {
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
