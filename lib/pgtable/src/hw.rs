//! The target implementation of [`TlbMaintenance`]: real TLBI / DSB / ISB instructions, each
//! counted in global atomic counters (all CPUs) readable with [`HwTlb::counters`] (barriers
//! issued through [`dsb_uncounted`] are counted by their issuer instead).
//!
//! Regimes: the EL2 forms (VAE2IS, ALLE2IS) and the stage-2 forms (IPAS2E1IS, VMALLS12E1IS,
//! VMALLE1IS for a guest) must be issued at EL2; the stage-2 forms act on the VMID currently in
//! VTTBR_EL2, which must be the VMID named in the operation (the hypervisor loads VTTBR_EL2
//! before maintaining a guest's stage 2). The EL1 forms are issued by the kernel at EL1.

use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::tlb::{
    Barrier, Shareability, TlbCounters, TlbFeatures, TlbMaintenance, Tlbi, TlbiOp, TlbiRange, BARRIER_KINDS, TLBI_KINDS,
};

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);
static TLBI_COUNT: [AtomicU64; TLBI_KINDS] = [ZERO; TLBI_KINDS];
static DSB_COUNT: [AtomicU64; BARRIER_KINDS] = [ZERO; BARRIER_KINDS];
static ISB_COUNT: AtomicU64 = AtomicU64::new(0);

/// TLB maintenance by instruction.
#[derive(Clone, Copy, Debug, Default)]
pub struct HwTlb {
    features: TlbFeatures,
}

impl HwTlb {
    /// Reads ID_AA64ISAR0_EL1 for FEAT_TLBIRANGE.
    pub fn detect() -> Self {
        let isar0: u64;
        // SAFETY: reading an ID register has no side effects and is permitted at EL1 and EL2.
        unsafe { asm!("mrs {}, id_aa64isar0_el1", out(reg) isar0, options(nomem, nostack, preserves_flags)) };
        HwTlb { features: TlbFeatures { range: crate::cpu::has_tlbi_range(isar0) } }
    }

    /// Snapshot of the counters of every CPU since boot.
    pub fn counters() -> TlbCounters {
        let mut c = TlbCounters::default();
        for (dst, src) in c.tlbi.iter_mut().zip(TLBI_COUNT.iter()) {
            *dst = src.load(Ordering::Relaxed);
        }
        for (dst, src) in c.dsb.iter_mut().zip(DSB_COUNT.iter()) {
            *dst = src.load(Ordering::Relaxed);
        }
        c.isb = ISB_COUNT.load(Ordering::Relaxed);
        c
    }
}

/// Issues `barrier` without counting it in [`HwTlb::counters`]: only for a
/// [`TlbMaintenance`] whose owner counts its barriers itself (a CPU's own tally, added to these
/// counters wherever they are read), where the shared atomic counters cost more than the
/// barrier's own instruction.
#[inline(always)]
pub fn dsb_uncounted(barrier: Barrier) {
    // SAFETY: barriers only order and complete memory accesses and TLB maintenance; no
    // memory is accessed. Not `nomem`: the compiler must not move descriptor stores across
    // them.
    unsafe {
        match barrier {
            // Waits for every earlier access and TLBI, system wide.
            Barrier::Sy => asm!("dsb sy", options(nostack, preserves_flags)),
            // Waits for earlier accesses and for TLBI ...IS to complete on every CPU of the
            // inner-shareable domain.
            Barrier::Ish => asm!("dsb ish", options(nostack, preserves_flags)),
            // Earlier descriptor stores are visible to every walker in the domain before any
            // later TLBI executes.
            Barrier::IshSt => asm!("dsb ishst", options(nostack, preserves_flags)),
            // Completes local TLBIs and accesses of this CPU.
            Barrier::Nsh => asm!("dsb nsh", options(nostack, preserves_flags)),
            // Earlier stores visible to this CPU's walker.
            Barrier::NshSt => asm!("dsb nshst", options(nostack, preserves_flags)),
        }
    }
}

/// Xt for the by-VA forms: ASID in 63:48, VA[55:12] in 43:0.
const fn va_operand(asid: u16, va: u64) -> u64 {
    ((asid as u64) << 48) | ((va >> 12) & ((1 << 44) - 1))
}

/// Xt for the by-IPA forms: IPA[51:12] in 39:0 (NS = 0: non-secure IPA space).
const fn ipa_operand(ipa: u64) -> u64 {
    (ipa >> 12) & ((1 << 40) - 1)
}

/// Xt for the range forms: ASID 63:48, TG 47:46 (0b01: 4 KiB), SCALE 45:44, NUM 43:39,
/// TTL 38:37 (0: no hint), BaseADDR 36:0 (address >> 12).
const fn range_operand(asid: u16, base: u64, r: TlbiRange) -> u64 {
    ((asid as u64) << 48)
        | (0b01 << 46)
        | (((r.scale as u64) & 3) << 44)
        | (((r.num as u64) & 31) << 39)
        | ((base >> 12) & ((1 << 37) - 1))
}

/// Emits `tlbi <op>, xt` (or the SYS encoding for the FEAT_TLBIRANGE forms, so no assembler
/// feature flag is needed). A TLBI only starts the invalidation: it is complete, and ordered
/// after earlier descriptor writes, only with the DSBs the library issues around it.
macro_rules! tlbi_xt {
    ($insn:literal, $xt:expr) => {
        // SAFETY: TLB invalidation never changes memory or registers visible to the program; at
        // worst it costs later page-table walks. The caller runs at the exception level the
        // operation belongs to (module documentation).
        unsafe { asm!(concat!($insn, ", {}"), in(reg) $xt, options(nostack, preserves_flags)) }
    };
}
macro_rules! tlbi_all {
    ($insn:literal) => {
        // SAFETY: as for `tlbi_xt`; these forms take no operand.
        unsafe { asm!($insn, options(nostack, preserves_flags)) }
    };
}

// Inlined: where the operation is known (a gather's one range or whole-ASID operation), the
// match folds to its instruction and operand.
#[inline(always)]
fn issue(t: &Tlbi) {
    let is = matches!(t.sh, Shareability::InnerShareable);
    let leaf = t.leaf_only;
    match (t.op, leaf, is) {
        (TlbiOp::Vae1 { asid, va }, false, true) => tlbi_xt!("tlbi vae1is", va_operand(asid, va.as_u64())),
        (TlbiOp::Vae1 { asid, va }, true, true) => tlbi_xt!("tlbi vale1is", va_operand(asid, va.as_u64())),
        (TlbiOp::Vae1 { asid, va }, false, false) => tlbi_xt!("tlbi vae1", va_operand(asid, va.as_u64())),
        (TlbiOp::Vae1 { asid, va }, true, false) => tlbi_xt!("tlbi vale1", va_operand(asid, va.as_u64())),
        (TlbiOp::Vaae1 { va }, false, true) => tlbi_xt!("tlbi vaae1is", va_operand(0, va.as_u64())),
        (TlbiOp::Vaae1 { va }, true, true) => tlbi_xt!("tlbi vaale1is", va_operand(0, va.as_u64())),
        (TlbiOp::Vaae1 { va }, false, false) => tlbi_xt!("tlbi vaae1", va_operand(0, va.as_u64())),
        (TlbiOp::Vaae1 { va }, true, false) => tlbi_xt!("tlbi vaale1", va_operand(0, va.as_u64())),
        // TLBI RVAE1IS = SYS #0, C8, C2, #1; RVALE1IS #5; RVAE1 = C8, C6, #1; RVALE1 #5.
        (TlbiOp::Rvae1 { asid, base, range }, false, true) => {
            tlbi_xt!("sys #0, c8, c2, #1", range_operand(asid, base.as_u64(), range))
        }
        (TlbiOp::Rvae1 { asid, base, range }, true, true) => {
            tlbi_xt!("sys #0, c8, c2, #5", range_operand(asid, base.as_u64(), range))
        }
        (TlbiOp::Rvae1 { asid, base, range }, false, false) => {
            tlbi_xt!("sys #0, c8, c6, #1", range_operand(asid, base.as_u64(), range))
        }
        (TlbiOp::Rvae1 { asid, base, range }, true, false) => {
            tlbi_xt!("sys #0, c8, c6, #5", range_operand(asid, base.as_u64(), range))
        }
        // TLBI RVAAE1IS = SYS #0, C8, C2, #3; RVAALE1IS #7; local C8, C6.
        (TlbiOp::Rvaae1 { base, range }, false, true) => {
            tlbi_xt!("sys #0, c8, c2, #3", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Rvaae1 { base, range }, true, true) => {
            tlbi_xt!("sys #0, c8, c2, #7", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Rvaae1 { base, range }, false, false) => {
            tlbi_xt!("sys #0, c8, c6, #3", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Rvaae1 { base, range }, true, false) => {
            tlbi_xt!("sys #0, c8, c6, #7", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Aside1 { asid }, _, true) => tlbi_xt!("tlbi aside1is", (asid as u64) << 48),
        (TlbiOp::Aside1 { asid }, _, false) => tlbi_xt!("tlbi aside1", (asid as u64) << 48),
        (TlbiOp::Vmalle1 { .. }, _, true) => tlbi_all!("tlbi vmalle1is"),
        (TlbiOp::Vmalle1 { .. }, _, false) => tlbi_all!("tlbi vmalle1"),
        (TlbiOp::Vae2 { va }, false, true) => tlbi_xt!("tlbi vae2is", va_operand(0, va.as_u64())),
        (TlbiOp::Vae2 { va }, true, true) => tlbi_xt!("tlbi vale2is", va_operand(0, va.as_u64())),
        (TlbiOp::Vae2 { va }, false, false) => tlbi_xt!("tlbi vae2", va_operand(0, va.as_u64())),
        (TlbiOp::Vae2 { va }, true, false) => tlbi_xt!("tlbi vale2", va_operand(0, va.as_u64())),
        // TLBI RVAE2IS = SYS #4, C8, C2, #1; RVALE2IS #5; local C8, C6.
        (TlbiOp::Rvae2 { base, range }, false, true) => {
            tlbi_xt!("sys #4, c8, c2, #1", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Rvae2 { base, range }, true, true) => {
            tlbi_xt!("sys #4, c8, c2, #5", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Rvae2 { base, range }, false, false) => {
            tlbi_xt!("sys #4, c8, c6, #1", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Rvae2 { base, range }, true, false) => {
            tlbi_xt!("sys #4, c8, c6, #5", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Alle2, _, true) => tlbi_all!("tlbi alle2is"),
        (TlbiOp::Alle2, _, false) => tlbi_all!("tlbi alle2"),
        (TlbiOp::Ipas2e1 { ipa, .. }, false, true) => tlbi_xt!("tlbi ipas2e1is", ipa_operand(ipa.as_u64())),
        (TlbiOp::Ipas2e1 { ipa, .. }, true, true) => tlbi_xt!("tlbi ipas2le1is", ipa_operand(ipa.as_u64())),
        (TlbiOp::Ipas2e1 { ipa, .. }, false, false) => tlbi_xt!("tlbi ipas2e1", ipa_operand(ipa.as_u64())),
        (TlbiOp::Ipas2e1 { ipa, .. }, true, false) => tlbi_xt!("tlbi ipas2le1", ipa_operand(ipa.as_u64())),
        // TLBI RIPAS2E1IS = SYS #4, C8, C0, #2; RIPAS2LE1IS #6; local C8, C4.
        (TlbiOp::Ripas2e1 { base, range, .. }, false, true) => {
            tlbi_xt!("sys #4, c8, c0, #2", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Ripas2e1 { base, range, .. }, true, true) => {
            tlbi_xt!("sys #4, c8, c0, #6", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Ripas2e1 { base, range, .. }, false, false) => {
            tlbi_xt!("sys #4, c8, c4, #2", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Ripas2e1 { base, range, .. }, true, false) => {
            tlbi_xt!("sys #4, c8, c4, #6", range_operand(0, base.as_u64(), range))
        }
        (TlbiOp::Vmalls12e1 { .. }, _, true) => tlbi_all!("tlbi vmalls12e1is"),
        (TlbiOp::Vmalls12e1 { .. }, _, false) => tlbi_all!("tlbi vmalls12e1"),
    }
}

impl TlbMaintenance for HwTlb {
    #[inline(always)]
    fn tlbi(&mut self, op: Tlbi) {
        TLBI_COUNT[op.kind()].fetch_add(1, Ordering::Relaxed);
        issue(&op);
    }

    /// Counted once; the by-VA forms of EL1&0 user pages (an mprotect or munmap of a range
    /// without range TLBIs) from a loop that steps the operand, others one by one.
    fn tlbi_series(&mut self, first: Tlbi, stride: u64, count: u64) {
        TLBI_COUNT[first.kind()].fetch_add(count, Ordering::Relaxed);
        let step = stride >> 12;
        if let (TlbiOp::Vae1 { asid, va }, Shareability::InnerShareable) = (first.op, first.sh) {
            let mut x = va_operand(asid, va.as_u64());
            let end = x + count * step;
            if first.leaf_only {
                while x < end {
                    tlbi_xt!("tlbi vale1is", x);
                    x += step;
                }
            } else {
                while x < end {
                    tlbi_xt!("tlbi vae1is", x);
                    x += step;
                }
            }
            return;
        }
        for i in 0..count {
            issue(&first.advanced(i * stride));
        }
    }

    fn dsb(&mut self, barrier: Barrier) {
        DSB_COUNT[barrier.kind()].fetch_add(1, Ordering::Relaxed);
        dsb_uncounted(barrier);
    }

    fn isb(&mut self) {
        ISB_COUNT.fetch_add(1, Ordering::Relaxed);
        // SAFETY: context synchronization only: later instructions are fetched and translated
        // after completed TLB maintenance and system-register writes take effect.
        unsafe { asm!("isb", options(nostack, preserves_flags)) }
    }

    fn features(&self) -> TlbFeatures {
        self.features
    }
}
