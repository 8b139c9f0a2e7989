//! `/cpus`: each CPU's MPIDR and enable method (PSCI or spin-table), and the memory a
//! spin-table's firmware keeps.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::{bad_prop, missing_prop, BoardError};
use crate::node::{base_name, prop_is, status, Status};
use crate::tree::Tree;
use crate::{Board, Region};

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

impl Board {
    /// The CPU whose `reg` is `mpidr` (affinity bits only).
    pub fn cpu_by_mpidr(&self, mpidr: u64) -> Option<&Cpu> {
        self.cpus.iter().find(|c| c.mpidr == mpidr)
    }

    /// Memory the boot firmware keeps for CPUs started by spin-table: for each CPU's
    /// `cpu-release-addr`, the `/memreserve/` entry that holds it (the firmware's spin loop
    /// lives there too: the Pi 4's page 0), else its 4 KiB page. Neither a guest nor anything
    /// else may have it while a CPU may still be spinning there. Page-aligned, no duplicates.
    pub fn spin_table_regions(&self) -> Vec<Region> {
        let release = self.cpus.iter().filter_map(|c| match c.enable_method {
            Some(EnableMethod::SpinTable { release_addr: Some(a) }) => Some(a),
            _ => None,
        });
        crate::scan::spin_table_regions(&self.mem_reserve, release)
    }

    /// Whether any CPU starts by spin-table.
    pub fn has_spin_table(&self) -> bool {
        self.cpus.iter().any(|c| matches!(c.enable_method, Some(EnableMethod::SpinTable { .. })))
    }
}

pub(crate) fn parse_cpus(t: &Tree) -> Result<Vec<Cpu>, BoardError> {
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
        let status = status(t, c);
        // A CPU that failed ("fail", "fail-sss") is not there; a disabled one is a CPU waiting
        // to be started by its enable-method (the spec's quiescent CPU), there if it has one.
        let present = match status {
            Status::Okay => true,
            Status::Disabled => enable_method.is_some(),
            Status::Other(_) => false,
        };
        if !present {
            continue;
        }
        out.push(Cpu {
            path: t.path(c).to_string(),
            mpidr,
            enable_method,
            compatible: t.prop_strs(c, "compatible").ok().flatten().and_then(|v| v.first().map(|s| s.to_string())),
            status,
        });
    }
    if out.is_empty() {
        return Err(BoardError::MissingNode { node: String::from("/cpus/cpu@*") });
    }
    Ok(out)
}
