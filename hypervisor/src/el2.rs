//! EL2 configuration of one physical CPU before it enters the guest, and the entry itself.

use crate::cpu::{self, CpuState, CPUS};
use aarch64_cpu::registers::*;
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

/// Configures EL2 on this CPU (`cpu`) for the guest and marks it on.
pub fn prepare_cpu(cpu: usize) {
    let c = CONFIG.get().expect("EL2 configuration is set before any CPU enters the guest");
    cpu::set_guest_pc_slot(cpu);
    setup_cpu(c.vttbr, c.vtcr, c.gic_v3);
    CPUS[cpu].set_state(CpuState::On);
}

/// Configures EL2 on this CPU and enters the guest at `entry` with `x0`.
pub fn start_cpu(cpu: usize, entry: u64, x0: u64) -> ! {
    prepare_cpu(cpu);
    enter_guest(entry, x0, cpu)
}

/// SCTLR_EL1 with its RES1 bits set and the MMU, caches and alignment checks off: the state the
/// Linux boot protocol promises a kernel.
const SCTLR_EL1_BOOT: u64 = 0x30d0_0800;

/// Reads a system register by its generic name (`S3_<op1>_C<n>_C<m>_<op2>`): the assembler
/// knows SVE/SME registers by name only with those features enabled, which the hypervisor's
/// (FP-free) target does not have.
macro_rules! read_sysreg {
    ($name:literal) => {{
        let v: u64;
        // SAFETY: reads a system register; no memory or flag effects.
        unsafe { core::arch::asm!(concat!("mrs {}, ", $name), out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }};
}

/// Writes a system register by its generic name (see [`read_sysreg`]).
macro_rules! write_sysreg {
    ($name:literal, $v:expr) => {{
        let v: u64 = $v;
        // SAFETY: the caller writes an EL2 control register that exists on this CPU (checked from
        // the ID registers) with a value that only changes what the guest may use; no memory
        // effect.
        unsafe { core::arch::asm!(concat!("msr ", $name, ", {}"), in(reg) v, options(nomem, nostack, preserves_flags)) };
    }};
}

/// This CPU's ID registers, as [`rt::features`] decodes them.
pub fn id_regs() -> rt::features::IdRegs {
    let pfr1 = ID_AA64PFR1_EL1.get();
    let sme = (pfr1 >> 24) & 0xf != 0;
    let pmcr = read_sysreg!("pmcr_el0");
    rt::features::IdRegs {
        pfr0: ID_AA64PFR0_EL1.get(),
        pfr1,
        mmfr0: ID_AA64MMFR0_EL1.get(),
        mmfr1: ID_AA64MMFR1_EL1.get(),
        dfr0: ID_AA64DFR0_EL1.get(),
        isar2: read_sysreg!("S3_0_C0_C6_2"),
        // ID_AA64SMFR0_EL1 is RES0 without SME; read it only where it exists.
        smfr0: if sme { read_sysreg!("S3_0_C0_C4_5") } else { 0 },
        pmu_counters: (pmcr >> 11) & 0x1f,
    }
}

/// Traps and controls for running the guest at EL1 on this CPU. `vttbr` = 0 leaves stage 2 off.
/// Everything the CPU has is the guest's, untrapped: FP/SIMD, SVE and SME at the largest vector
/// length the CPU implements (the hypervisor itself never touches those registers), MTE's tags,
/// every PMU counter, the physical and virtual timers and counters.
pub fn setup_cpu(vttbr: u64, vtcr: u64, gic_v3: bool) {
    let ids = id_regs();
    let features = rt::features::Features::from_ids(&ids);
    let ctl = rt::features::guest_controls(&features);
    VTCR_EL2.set(vtcr);
    VTTBR_EL2.set(vttbr);
    // EL1 is AArch64; SMC traps to EL2 (the guest's PSCI conduit, whatever its DTB says);
    // pointer-authentication keys and instructions do not trap; physical IRQ/FIQ go straight to
    // EL1 (IMO = FMO = 0: the guest owns the GIC and the timers); on an MTE CPU, ATA gives EL1
    // its allocation tags.
    let mut hcr =
        HCR_EL2::RW::EL1IsAarch64 + HCR_EL2::TSC::EnableTrapEl1SmcToEl2 + HCR_EL2::API::SET + HCR_EL2::APK::SET;
    if vttbr != 0 {
        hcr += HCR_EL2::VM::Enable;
    }
    HCR_EL2.set(hcr.value | ctl.hcr);
    // FP/SIMD, SVE and SME untrapped first: ZCR_EL2 and SMCR_EL2 are only reachable then.
    CPTR_EL2.set(ctl.cptr);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    if let Some(zcr) = ctl.zcr {
        write_sysreg!("S3_4_C1_C2_0", zcr); // ZCR_EL2
    }
    if let Some(smcr) = ctl.smcr {
        write_sysreg!("S3_4_C1_C2_6", smcr); // SMCR_EL2
    }
    if let Some(hcrx) = ctl.hcrx {
        write_sysreg!("S3_4_C1_C2_2", hcrx); // HCRX_EL2
    }
    if let Some(hfg) = ctl.hfg {
        write_sysreg!("S3_4_C1_C1_4", hfg); // HFGRTR_EL2
        write_sysreg!("S3_4_C1_C1_5", hfg); // HFGWTR_EL2
        write_sysreg!("S3_4_C1_C1_6", 0); // HFGITR_EL2
        write_sysreg!("S3_4_C3_C1_4", 0); // HDFGRTR_EL2
        write_sysreg!("S3_4_C3_C1_5", 0); // HDFGWTR_EL2
    }
    // No AArch32 system-register traps (HSTR_EL2 resets to an UNKNOWN value).
    write_sysreg!("hstr_el2", 0);
    // The guest uses the physical counter and timer directly, with no offset.
    CNTHCTL_EL2.write(CNTHCTL_EL2::EL1PCTEN::SET + CNTHCTL_EL2::EL1PCEN::SET);
    CNTVOFF_EL2.set(0);
    let midr = MIDR_EL1.get();
    // VPIDR_EL2 (what the guest reads as MIDR_EL1) is not in aarch64-cpu; writing the real MIDR
    // only makes the guest see the CPU it runs on.
    write_sysreg!("vpidr_el2", midr);
    VMPIDR_EL2.set(MPIDR_EL1.get());
    // Every PMU counter (HPMN = PMCR_EL0.N), profiling and trace buffers the guest's.
    MDCR_EL2.set(ctl.mdcr);
    SCTLR_EL1.set(SCTLR_EL1_BOOT);
    if gic_v3 {
        // Let EL1 use the GICv3 system-register interface.
        ICC_SRE_EL2.write(ICC_SRE_EL2::SRE::SET + ICC_SRE_EL2::ENABLE::SET);
    }
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    if !REPORTED.swap(true, core::sync::atomic::Ordering::Relaxed) {
        report(&ids, &features, &ctl);
    }
}

static REPORTED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// One `hyp_features` record: what the guest gets (printed by the first CPU set up).
fn report(ids: &rt::features::IdRegs, f: &rt::features::Features, ctl: &rt::features::Controls) {
    let mut r = abi::report::Record::new("hyp_features");
    r.bool("sve", f.sve)
        .bool("sme", f.sme)
        .bool("sme_fa64", f.sme_fa64)
        .bool("sme2", f.sme2)
        .bool("mte2", f.mte2)
        .bool("fgt", f.fgt)
        .bool("hcx", f.hcx)
        .u64("pmu_counters", f.pmu_counters)
        .hex("cptr_el2", ctl.cptr)
        .hex("hcr_el2_extra", ctl.hcr)
        .hex("mdcr_el2", ctl.mdcr)
        .hex("id_aa64pfr0", ids.pfr0)
        .hex("id_aa64pfr1", ids.pfr1)
        .hex("id_aa64mmfr0", ids.mmfr0)
        .hex("id_aa64mmfr1", ids.mmfr1)
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
