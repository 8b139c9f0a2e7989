//! A simulated PMU for the host tests: counters that wrap at 32 bits (or 64 with PMCR.LP) and
//! raise their overflow flags, PMCEID as given, SW_INCR.

use crate::{pmcr, PmuRegs, CYCLE_IDX};
use std::cell::{Cell, RefCell};

pub struct SimPmu {
    pub pmuver: u8,
    pub pmcr: Cell<u64>,
    pub pmceid: [u64; 2],
    pub evtyper: RefCell<[u64; 31]>,
    pub evcntr: RefCell<[u64; 31]>,
    pub ccntr: Cell<u64>,
    pub ccfiltr: Cell<u64>,
    pub cnten: Cell<u32>,
    pub inten: Cell<u32>,
    pub ovs: Cell<u32>,
    /// Calls of `without_irqs` still open (to check the service runs masked).
    pub masked: Cell<u32>,
    /// Runs at every counter read made with interrupts unmasked: events that arrive while the
    /// reader is between its steps, and the interrupt they raise (tests the read/interrupt race).
    pub on_read: RefCell<Option<Box<dyn Fn()>>>,
}

impl SimPmu {
    /// A PMU with `n` counters; PMUv3p5 (64-bit counters) when `pmuver >= 6`.
    pub fn new(pmuver: u8, n: u8, pmceid: [u64; 2]) -> Self {
        SimPmu {
            pmuver,
            pmcr: Cell::new((n as u64) << 11),
            pmceid,
            evtyper: RefCell::new([0; 31]),
            evcntr: RefCell::new([0; 31]),
            ccntr: Cell::new(0),
            ccfiltr: Cell::new(0),
            cnten: Cell::new(0),
            inten: Cell::new(0),
            ovs: Cell::new(0),
            masked: Cell::new(0),
            on_read: RefCell::new(None),
        }
    }

    fn width_mask(&self) -> u64 {
        if self.pmcr.get() & pmcr::LP != 0 {
            u64::MAX
        } else {
            0xffff_ffff
        }
    }

    /// `count` events numbered `event` happen.
    pub fn tick(&self, event: u16, count: u64) {
        if self.pmcr.get() & pmcr::E == 0 {
            return;
        }
        let mask = self.width_mask();
        for i in 0..31 {
            if self.cnten.get() & (1 << i) != 0 && self.evtyper.borrow()[i] & 0xffff == event as u64 {
                let mut c = self.evcntr.borrow_mut();
                let old = c[i] & mask;
                let new = old.wrapping_add(count) & mask;
                if new < old || count > mask {
                    self.ovs.set(self.ovs.get() | (1 << i));
                }
                c[i] = new;
            }
        }
        if event == crate::events::CPU_CYCLES && self.cnten.get() & (1 << CYCLE_IDX) != 0 {
            let old = self.ccntr.get();
            let new = old.wrapping_add(count);
            if new < old {
                self.ovs.set(self.ovs.get() | (1 << CYCLE_IDX));
            }
            self.ccntr.set(new);
        }
    }

    fn maybe_irq(&self) {
        if self.masked.get() == 0 {
            if let Some(h) = self.on_read.borrow().as_ref() {
                h();
            }
        }
    }
}

impl PmuRegs for &SimPmu {
    fn pmuver(&self) -> u8 {
        self.pmuver
    }
    fn pmcr(&self) -> u64 {
        self.pmcr.get()
    }
    fn set_pmcr(&self, v: u64) {
        let n = self.pmcr.get() & (0x1f << 11);
        self.pmcr.set((v & !(0x1f << 11) & !(pmcr::P | pmcr::C)) | n);
        if v & pmcr::P != 0 {
            *self.evcntr.borrow_mut() = [0; 31];
        }
    }
    fn pmceid(&self) -> [u64; 2] {
        self.pmceid
    }
    fn evtyper(&self, n: u8) -> u64 {
        self.evtyper.borrow()[n as usize]
    }
    fn set_evtyper(&self, n: u8, v: u64) {
        self.evtyper.borrow_mut()[n as usize] = v;
    }
    fn evcntr(&self, n: u8) -> u64 {
        self.maybe_irq();
        self.evcntr.borrow()[n as usize] & self.width_mask()
    }
    fn set_evcntr(&self, n: u8, v: u64) {
        self.evcntr.borrow_mut()[n as usize] = v & self.width_mask();
    }
    fn ccntr(&self) -> u64 {
        self.ccntr.get()
    }
    fn set_ccfiltr(&self, v: u64) {
        self.ccfiltr.set(v);
    }
    fn cnten(&self) -> u32 {
        self.cnten.get()
    }
    fn set_cnten(&self, mask: u32, on: bool) {
        self.cnten.set(if on { self.cnten.get() | mask } else { self.cnten.get() & !mask });
    }
    fn set_inten(&self, mask: u32, on: bool) {
        self.inten.set(if on { self.inten.get() | mask } else { self.inten.get() & !mask });
    }
    fn ovs(&self) -> u32 {
        self.ovs.get()
    }
    fn clear_ovs(&self, mask: u32) {
        self.ovs.set(self.ovs.get() & !mask);
    }
    fn swinc(&self, mask: u32) {
        let width = self.width_mask();
        for i in 0..31 {
            if mask & (1 << i) != 0 && self.cnten.get() & (1 << i) != 0 && self.evtyper.borrow()[i] & 0xffff == 0 {
                let mut c = self.evcntr.borrow_mut();
                let new = c[i].wrapping_add(1) & width;
                if new == 0 {
                    self.ovs.set(self.ovs.get() | (1 << i));
                }
                c[i] = new;
            }
        }
    }
    fn sync(&self) {}
    fn without_irqs<T>(&self, f: impl FnOnce() -> T) -> T {
        self.masked.set(self.masked.get() + 1);
        let r = f();
        self.masked.set(self.masked.get() - 1);
        r
    }
}
