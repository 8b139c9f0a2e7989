//! The per-CPU interrupt sources: the architected generic timer and the PMU.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::error::BoardError;
use crate::gic::gic_interrupts;
use crate::tree::Tree;

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

const TIMER: &[&str] = &["arm,armv8-timer", "arm,armv7-timer"];

/// The generic timer's node.
pub(crate) fn find_timer(t: &Tree) -> Option<usize> {
    (0..t.nodes.len()).find(|&i| t.is_compatible(i, TIMER) && crate::node::available(t, i))
}

pub(crate) fn parse_timer(t: &Tree) -> Result<Option<Timer>, BoardError> {
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

pub(crate) fn parse_pmu(t: &Tree) -> Result<Option<Pmu>, BoardError> {
    let found = (0..t.nodes.len()).find(|&i| {
        crate::node::available(t, i)
            && t.prop_strs(i, "compatible").ok().flatten().is_some_and(|c| c.iter().any(|c| is_pmu_compatible(c)))
    });
    let Some(i) = found else {
        return Ok(None);
    };
    let interrupts = if t.prop(i, "interrupts").is_some() { gic_interrupts(t, i)? } else { Vec::new() };
    Ok(Some(Pmu { path: t.path(i).to_string(), interrupts }))
}
