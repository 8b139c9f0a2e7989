//! EL2 on each physical CPU: how it runs (nVHE or hVHE, decided once by the boot CPU), every
//! EL2 control register written at entry and again before the guest, and the guest's entry.
//! The values are `rt::el2`'s (host-tested per feature and per mode); this file only decides
//! when they are written.

use crate::cpu::{self, CpuState, CPUS};
use crate::el2mode::{self, mode};
use crate::guest_el1;
use aarch64_cpu::registers::*;
use rt::el2::{Mode, Why};
use rt::features::{Features, IdRegs};
use spin::Once;

/// What every CPU needs to configure EL2 the same way (set once by the boot CPU).
pub struct Config {
    /// The guest's stage-2 root and VMID.
    pub vttbr: u64,
    /// The stage-2 translation control.
    pub vtcr: u64,
    /// Whether the GIC is a GICv3 (its system-register interface is given to the guest).
    pub gic_v3: bool,
}

static CONFIG: Once<Config> = Once::new();

/// Records the configuration every CPU applies before it enters the guest (boot CPU, once).
pub fn set_config(c: Config) {
    CONFIG.call_once(|| c);
}

/// This CPU's features.
pub fn features() -> Features {
    Features::from_ids(&IdRegs::read())
}

/// First thing on the boot CPU, before anything relies on EL2's state: every EL2 control in
/// the mode the entry code found (nVHE unless E2H is RES1), traps off, stage 2 off.
pub fn entry_boot() {
    let f = features();
    rt::entry::el2(&rt::el2::guest_controls(rt::entry::el2_mode_at_entry(), &f));
    set_vector_use(&f);
}

/// lib/pgtable's vector routines keep what the guest may hold: whole Z registers where SVE is
/// implemented (CPTR_EL2 hands it to the guest untrapped; EL2's vector length, ZCR_EL2.LEN at
/// its largest, bounds the guest's), and the scalar loop while the guest's PSTATE.SM is set
/// where SME is; else the Q registers (SME without SVE: none). Every CPU writes the same controls (`rt::el2`), so the
/// boot CPU decides for all.
fn set_vector_use(f: &Features) {
    use pgtable::vector::VectorUse;
    let v = if f.sve {
        // SAFETY: SVE is implemented, and CPTR_EL2 (just written) leaves it untrapped at EL2.
        VectorUse::Sve { sme: f.sme, vl: unsafe { pgtable::vector::sve_vl() } }
    } else if f.sme {
        // Streaming Z registers without SVE's saves: no vector routine.
        VectorUse::Scalar
    } else {
        VectorUse::Neon
    };
    pgtable::vector::set(v);
}

/// The boot CPU, once its boot words are read and before it builds its EL2 table: EL2 runs
/// with E2H = 1 where it stayed 1 at entry (RES1) or `force_e2h` asks for it, else E2H = 0.
/// Switching rewrites every layout-dependent register at once (`rt::entry::el2`, HCR_EL2
/// first). Returns the mode, for the boot line.
pub fn choose_mode(force_e2h: bool) -> Mode {
    let f = features();
    let mut m = rt::el2::decide(rt::entry::e2h_now(), force_e2h);
    if m == Mode::Hvhe(Why::Forced) && !f.vhe {
        rt::println!("hyp: warning: hyp.e2h=1 on a CPU without FEAT_VHE: E2H stays 0");
        m = Mode::Nvhe;
    }
    if m.e2h() != rt::entry::e2h_now() {
        rt::entry::el2(&rt::el2::guest_controls(m, &f));
    }
    el2mode::set(m);
    m
}

/// First thing on a CPU started after the boot CPU (MMU off): EL2 in the boot CPU's mode, every
/// control written. A CPU whose E2H is RES1 under an nVHE boot CPU cannot run this hypervisor:
/// the error says so (the caller stops the run).
pub fn entry_secondary() -> Result<(), &'static str> {
    let m = mode();
    rt::el2::secondary(m, rt::entry::e2h_now())?;
    rt::entry::el2(&rt::el2::guest_controls(m, &features()));
    Ok(())
}

/// Configures EL2 on this CPU (`cpu`) for the guest and marks it on.
pub fn prepare_cpu(cpu: usize) {
    let c = CONFIG.get().expect("EL2 configuration is set before any CPU enters the guest");
    setup_cpu(c.vttbr, c.vtcr, c.gic_v3);
    cpu::set_guest_pc_slot(cpu);
    CPUS[cpu].set_state(CpuState::On);
}

/// Configures EL2 on this CPU and enters the guest at `entry` with `x0`.
pub fn start_cpu(cpu: usize, entry: u64, x0: u64) -> ! {
    prepare_cpu(cpu);
    enter_guest(entry, x0, cpu)
}

/// Traps and controls for running the guest at EL1 on this CPU, in the chosen mode. `vttbr` = 0
/// leaves stage 2 off. Everything the CPU has is the guest's, untrapped (`rt::el2::guest_controls`);
/// the guest's SCTLR_EL1 is the boot protocol's (MMU off), its MIDR/MPIDR the CPU's own.
pub fn setup_cpu(vttbr: u64, vtcr: u64, gic_v3: bool) {
    let ids = IdRegs::read();
    let features = Features::from_ids(&ids);
    let ctl = rt::el2::guest_controls(mode(), &features);
    rt::entry::el2(&ctl);
    rt::entry::el2_gic(&features, gic_v3);
    VTCR_EL2.set(vtcr);
    VTTBR_EL2.set(vttbr);
    // VPIDR_EL2 (what the guest reads as MIDR_EL1) is not in aarch64-cpu; writing the real MIDR
    // only makes the guest see the CPU it runs on.
    rt::write_sysreg!("vpidr_el2", MIDR_EL1.get());
    VMPIDR_EL2.set(MPIDR_EL1.get());
    guest_el1::sctlr::write(rt::el1::SCTLR_MMU_OFF);
    HCR_EL2.set(rt::el2::hcr_guest(ctl.mode, &features, vttbr != 0));
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    if !REPORTED.swap(true, core::sync::atomic::Ordering::Relaxed) {
        report(&ids, &features, &ctl);
    }
}

static REPORTED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// One `hyp_features` record: what the guest gets and how EL2 runs (printed by the first CPU
/// set up).
fn report(ids: &IdRegs, f: &Features, ctl: &rt::el2::Controls) {
    let mut r = abi::report::Record::new("hyp_features");
    r.str("el2_mode", ctl.mode.name())
        .bool("sve", f.sve)
        .bool("sme", f.sme)
        .bool("sme_fa64", f.sme_fa64)
        .bool("sme2", f.sme2)
        .bool("mte2", f.mte2)
        .bool("fgt", f.fgt)
        .bool("hcx", f.hcx)
        .u64("pmu_counters", f.pmu_counters)
        .hex("cptr_el2", ctl.cptr)
        .hex("hcr_el2", ctl.hcr)
        .hex("cnthctl_el2", ctl.cnthctl)
        .hex("mdcr_el2", ctl.mdcr)
        .hex("id_aa64pfr0", ids.pfr0)
        .hex("id_aa64pfr1", ids.pfr1)
        .hex("id_aa64mmfr0", ids.mmfr0)
        .hex("id_aa64mmfr1", ids.mmfr1)
        .hex("id_aa64mmfr3", ids.mmfr3)
        .hex("id_aa64mmfr4", ids.mmfr4)
        .hex("id_aa64dfr0", ids.dfr0)
        .hex("id_aa64isar2", ids.isar2)
        .hex("id_aa64smfr0", ids.smfr0);
    rt::println!("{r}");
}

/// Enters the guest at EL1h at `entry` with x0 = `x0`, all other registers zero and DAIF
/// masked, as the Linux boot protocol requires. The EL2 stack restarts at this CPU's top: the
/// hypervisor's next entry (a trap) starts from an empty stack.
pub fn enter_guest(entry: u64, x0: u64, cpu: usize) -> ! {
    SPSR_EL2.write(
        SPSR_EL2::D::Masked + SPSR_EL2::A::Masked + SPSR_EL2::I::Masked + SPSR_EL2::F::Masked + SPSR_EL2::M::EL1h,
    );
    ELR_EL2.set(entry);
    let (_, top) = rt::start::stack_bounds(cpu);
    // SAFETY: ELR/SPSR are set for an EL1h entry; the EL2 stack is reset to this CPU's own boot
    // stack (nothing on it is needed any more); general registers other than x0 are cleared so
    // no hypervisor value leaks to the guest.
    unsafe {
        core::arch::asm!(
            "mov sp, x1",
            "mov x1, xzr", "mov x2, xzr", "mov x3, xzr", "mov x4, xzr", "mov x5, xzr",
            "mov x6, xzr", "mov x7, xzr", "mov x8, xzr", "mov x9, xzr", "mov x10, xzr",
            "mov x11, xzr", "mov x12, xzr", "mov x13, xzr", "mov x14, xzr", "mov x15, xzr",
            "mov x16, xzr", "mov x17, xzr", "mov x18, xzr", "mov x19, xzr", "mov x20, xzr",
            "mov x21, xzr", "mov x22, xzr", "mov x23, xzr", "mov x24, xzr", "mov x25, xzr",
            "mov x26, xzr", "mov x27, xzr", "mov x28, xzr", "mov x29, xzr", "mov x30, xzr",
            "eret",
            in("x0") x0,
            in("x1") top,
            options(noreturn),
        )
    }
}

/// Cleans `[start, start + len)` from the data cache to the point of coherency, so a guest that
/// starts with its MMU (and so its caches) off sees what the hypervisor wrote.
pub fn clean_dcache_range(start: u64, len: u64) {
    rt::cache::clean_to_poc(start, len);
    rt::cache::invalidate_icache_all();
}

/// Whether this CPU can run EL1 in AArch32 (ID_AA64PFR0_EL1.EL1 == 2).
pub fn has_aarch32_el1() -> bool {
    (ID_AA64PFR0_EL1.get() >> 4) & 0xf == 2
}

/// `hyp.test=aarch32-*`: enters a guest that runs AArch32 at EL1 (SVC mode, A32, interrupts
/// masked) at `entry` with r1 = `r1`, so its first exception to EL2 comes through the "lower EL,
/// AArch32" vectors. Call after [`setup_cpu`]; the caller checked [`has_aarch32_el1`].
pub fn enter_aarch32_guest(entry: u64, r1: u64) -> ! {
    HCR_EL2.modify(HCR_EL2::RW::AllLowerELsAreAarch32);
    // M[4] = 1: AArch32; M[3:0] = 0b0011: SVC; A, I, F masked (bits 8, 7, 6); T = 0: A32.
    SPSR_EL2.set(0b1_0011 | 0b111 << 6);
    ELR_EL2.set(entry);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    // SAFETY: ELR/SPSR/HCR are set for an AArch32 EL1 entry at test code the caller wrote into
    // guest RAM; the guest's first exception comes back through the EL2 vectors (which keep
    // their own stack).
    unsafe { core::arch::asm!("eret", in("x1") r1, options(noreturn)) }
}
