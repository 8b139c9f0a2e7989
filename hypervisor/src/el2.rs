//! EL2 configuration of one physical CPU before it enters the guest, and the entry itself.

use aarch64_cpu::registers::*;

/// SCTLR_EL1 with its RES1 bits set and the MMU, caches and alignment checks off: the state the
/// Linux boot protocol promises a kernel.
const SCTLR_EL1_BOOT: u64 = 0x30d0_0800;

/// Traps and controls for running the guest at EL1 on this CPU. `vttbr` = 0 leaves stage 2 off.
pub fn setup_cpu(vttbr: u64, vtcr: u64, gic_v3: bool) {
    VTCR_EL2.set(vtcr);
    VTTBR_EL2.set(vttbr);
    // EL1 is AArch64; SMC traps to EL2 (the guest's PSCI conduit, whatever its DTB says);
    // pointer-authentication keys and instructions do not trap; physical IRQ/FIQ go straight to
    // EL1 (IMO = FMO = 0: the guest owns the GIC and the timers).
    let mut hcr =
        HCR_EL2::RW::EL1IsAarch64 + HCR_EL2::TSC::EnableTrapEl1SmcToEl2 + HCR_EL2::API::SET + HCR_EL2::APK::SET;
    if vttbr != 0 {
        hcr += HCR_EL2::VM::Enable;
    }
    HCR_EL2.write(hcr);
    // The guest uses the physical counter and timer directly, with no offset.
    CNTHCTL_EL2.write(CNTHCTL_EL2::EL1PCTEN::SET + CNTHCTL_EL2::EL1PCEN::SET);
    CNTVOFF_EL2.set(0);
    let midr = MIDR_EL1.get();
    // SAFETY: VPIDR_EL2 (what the guest reads as MIDR_EL1) is not in aarch64-cpu; writing the
    // real MIDR only makes the guest see the CPU it runs on.
    unsafe { core::arch::asm!("msr vpidr_el2, {}", in(reg) midr, options(nomem, nostack, preserves_flags)) };
    VMPIDR_EL2.set(MPIDR_EL1.get());
    // Give the guest every PMU counter and trap none of them; its counters may count at EL2.
    MDCR_EL2.set(pmu::mdcr_el2_for_guest(pmu::PmuRegs::pmcr(&pmu::hw::SysRegs)));
    SCTLR_EL1.set(SCTLR_EL1_BOOT);
    if gic_v3 {
        // Let EL1 use the GICv3 system-register interface.
        ICC_SRE_EL2.write(ICC_SRE_EL2::SRE::SET + ICC_SRE_EL2::ENABLE::SET);
    }
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
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
