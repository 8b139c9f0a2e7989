//! A page table wired to the model.

use std::cell::RefCell;
use std::rc::Rc;
use std::string::String;

use super::memory::ModelFrames;
use super::recorder::ModelTlb;
use super::state::Model;
use crate::addr::{InputAddress, VirtAddr};
#[cfg(any(test, feature = "seeded-bugs"))]
use crate::mutation::Mutation;
use crate::regime::Regime;
use crate::tlb::{TlbCounters, TlbFeatures};
use crate::{Config, PageTable, SplitOpts};

/// A table whose frames and TLB maintenance go through one model; `K` is the table's input
/// address type ([`VirtAddr`] for stage 1, `IntermPhysAddr` for stage 2).
pub struct Harness<K: InputAddress = VirtAddr> {
    /// The table under test: its frames are the model's memory.
    pub pt: PageTable<ModelFrames, K>,
    /// The TLB maintenance to pass to `pt`'s operations: it goes to the model.
    pub tlb: ModelTlb,
    pub(crate) model: Rc<RefCell<Model>>,
    /// What `split` calls of the scenarios pass (SKIP_LEVEL3 by default).
    pub(crate) split_opts: SplitOpts,
}

impl<K: InputAddress> Harness<K> {
    /// A new, not yet live table of `regime`; `bbml2`: the CPUs have FEAT_BBM level 2 (and
    /// the table is created with it); `range`: they have FEAT_TLBIRANGE. Panics when `regime`
    /// does not translate addresses of type `K`.
    pub fn new(regime: Regime, bbml2: bool, range: bool) -> Self {
        let model = Rc::new(RefCell::new(Model::new(regime)));
        model.borrow_mut().bbml2 = bbml2;
        let frames = ModelFrames { model: model.clone(), limit: None };
        let pt = PageTable::with_config(regime, Config { bbml2 }, frames).expect("root");
        model.borrow_mut().set_root(pt.root());
        let tlb = ModelTlb { model: model.clone(), features: TlbFeatures { range }, counters: TlbCounters::default() };
        Harness { pt, tlb, model, split_opts: SplitOpts::to(3) }
    }

    /// Seeds a bug (`seeded-bugs` feature).
    #[cfg(any(test, feature = "seeded-bugs"))]
    pub fn mutate(&mut self, m: Mutation) {
        self.pt.seed_bug(m);
    }

    /// Installs the table: from now on the model TLBs cache and every rule applies.
    pub fn go_live(&mut self) {
        self.pt.set_live(&mut self.tlb);
        self.model.borrow_mut().live = true;
    }

    /// Runs the end-of-operation checks; returns every violation found so far.
    pub fn check(&mut self) -> Result<(), String> {
        let mut m = self.model.borrow_mut();
        m.check_quiescent();
        if m.violations.is_empty() {
            Ok(())
        } else {
            Err(m.violations.join("\n"))
        }
    }
}
