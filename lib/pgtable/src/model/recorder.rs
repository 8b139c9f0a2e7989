//! The recording TLB-maintenance implementation.

use std::cell::RefCell;
use std::rc::Rc;

use super::state::Model;
use crate::tlb::{Barrier, TlbFeatures, TlbMaintenance, Tlbi};

/// Sends every TLBI, DSB and ISB to the model (and counts them).
#[derive(Clone)]
pub struct ModelTlb {
    pub(crate) model: Rc<RefCell<Model>>,
    /// What the model's CPUs implement (FEAT_TLBIRANGE).
    pub features: TlbFeatures,
    /// Every TLBI, DSB and ISB issued, by kind.
    pub counters: crate::tlb::TlbCounters,
}

impl TlbMaintenance for ModelTlb {
    fn tlbi(&mut self, op: Tlbi) {
        self.counters.count_tlbi(&op);
        self.model.borrow_mut().tlbi(op)
    }
    fn dsb(&mut self, barrier: Barrier) {
        self.counters.dsb[barrier.kind()] += 1;
        self.model.borrow_mut().dsb(barrier)
    }
    fn isb(&mut self) {
        self.counters.isb += 1;
        self.model.borrow_mut().isb()
    }
    fn features(&self) -> TlbFeatures {
        self.features
    }
}
