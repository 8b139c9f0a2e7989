//! Power: the PSCI node (CPU start/stop, power-off and reset through firmware), and what a
//! board without PSCI firmware offers instead (the Broadcom PM watchdog).

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{bad_prop, missing_prop, BoardError};
use crate::tree::Tree;
use crate::{Board, Device, Region};

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

/// The compatibles of the Broadcom PM block, whose watchdog powers off and resets a board
/// without PSCI firmware (the Pi 3 and 4).
pub const PM_WATCHDOG: &[&str] = &["brcm,bcm2835-pm-wdt", "brcm,bcm2835-pm", "brcm,bcm2711-pm"];

impl Board {
    /// The Broadcom PM watchdog's node (any of [`PM_WATCHDOG`]), when it is enabled: what
    /// powers off and resets the board without PSCI firmware.
    pub fn pm_watchdog_device(&self) -> Option<&Device> {
        self.devices.iter().find(|d| d.status.is_okay() && d.is_compatible(PM_WATCHDOG))
    }

    /// The power-off and reset the board offers without PSCI firmware: the Broadcom PM
    /// watchdog ([`Board::pm_watchdog_device`]), its register block (the first `reg`, "pm").
    pub fn pm_watchdog(&self) -> Option<Region> {
        self.pm_watchdog_device().and_then(|d| d.regions.first().copied())
    }
}

const PSCI: &[&str] = &["arm,psci", "arm,psci-0.2", "arm,psci-1.0"];

/// The PSCI node, whatever its `status` (the guest's tree rewrites it: [`crate::guest_dtb`]).
pub(crate) fn find_psci(t: &Tree) -> Option<usize> {
    (0..t.nodes.len()).find(|&i| t.is_compatible(i, PSCI))
}

/// The board's PSCI: its node, when available (a disabled one is no firmware to call).
pub(crate) fn parse_psci(t: &Tree) -> Result<Option<Psci>, BoardError> {
    let Some(i) = find_psci(t).filter(|&i| crate::node::available(t, i)) else {
        return Ok(None);
    };
    let path = &t.path(i);
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
