//! `testguest=entry-el2` / `testguest=entry-el1`: the test guest as a hostile but legal boot
//! loader. Entered at EL2 (QEMU `virtualization=on`), it leaves the control registers in states
//! the Linux arm64 boot protocol allows but a pristine QEMU never shows, then enters the Image
//! QEMU's loader put at `testguest.next` exactly as the protocol says (MMU off, x0 = the DTB it
//! was given, x1 = x2 = x3 = 0, D, A, I, F masked), in the thread mode (SP_EL0) with PAN and
//! UAO set where they exist. Its own words come before the `pgtlab` marker; the words after it
//! are the next Image's.
//!
//! * `entry-el2` enters the next Image at EL2 (the hypervisor). Everything at EL2 is left
//!   hostile: HCR_EL2 with E2H and TGE set where FEAT_VHE allows (`testguest.e2h=0` keeps E2H
//!   0 and sets TGE alone) and trap bits (TSC, TWI, TWE, TID3, TACR, TSW, TTLB, TVM, TRVM, AMO,
//!   IMO, FMO, DC); CPTR_EL2 trapping FP/SIMD, SVE, SME, CPACR accesses (and trace, activity
//!   monitors where they exist), in the layout E2H gives it; a 128-bit ZCR_EL2/SMCR_EL2;
//!   MDCR_EL2 trapping debug and PMU accesses and routing debug exceptions to EL2 (TDE) with one
//!   counter left to EL1; CNTHCTL_EL2 giving EL1 no physical counter or timer, with an event
//!   stream; CNTVOFF_EL2 nonzero; HSTR_EL2 trapping AArch32 CP15; HCRX_EL2 0; every
//!   fine-grained trap register 0 (their `n` bits trap); ICC_SRE_EL2 0 and ICH_HCR_EL2 trapping
//!   the guest's ICC accesses where the GICv3 interface exists; SCTLR_EL2 with alignment checks,
//!   WXN and (E2H = 1) SPAN clear; VTTBR_EL2, TPIDR_EL2, MAIR/TCR/TTBR0_EL2, VPIDR/VMPIDR_EL2
//!   and VBAR_EL2 garbage. EL1 gets the hostile EL1 state below, for the guest behind.
//! * `entry-el1` enters the next Image at EL1 (the kernel alone) with EL2 left as the boot
//!   protocol requires of a kernel entered at EL1 (`rt::el2::guest_controls`: nothing trapped
//!   that is not handled, HCR_EL2 with HCD so HVC is undefined), but 128-bit ZCR_EL2/SMCR_EL2,
//!   and EL1 hostile on every CPU. The shim stays at EL2 as the kernel's firmware: its image is
//!   reserved in the device tree (`/reserved-memory`, written over the one it was given), SMC
//!   traps to it (HCR_EL2.TSC: "handled transparently", as the protocol allows), it forwards
//!   every call to QEMU's PSCI and turns CPU_ON into a start of its own entry, which leaves the
//!   new CPU hostile too and enters the kernel there at EL1 (QEMU's PSCI would start it at EL2,
//!   where the kernel does not run). EL1 hostile: SCTLR_EL1 with alignment checks,
//!   WXN, SA0 and SPAN clear; CPACR_EL1 trapping FP/SIMD, SVE, SME and trace; MDSCR_EL1 with
//!   software step, kernel debug and monitor debug events on; CNTKCTL_EL1 giving EL0 the
//!   physical counter and both timers but not the virtual counter, with an event stream; the OS
//!   lock open (so the debug state acts);
//!   PMUSERENR_EL0 letting EL0 program the PMU; the virtual and physical timers firing (enabled,
//!   unmasked, compare value 0); TCR/MAIR/TTBR0/TTBR1_EL1, VBAR_EL1, TPIDR_EL0/EL1, TPIDRRO_EL0,
//!   SP_EL0, CONTEXTIDR_EL1, ESR/FAR/ELR/SPSR_EL1 and PAR_EL1 garbage.
//!
//! With `entry-el2` only the boot CPU goes through here: the hypervisor starts the others
//! through QEMU's PSCI from EL2, which resets them. With `entry-el1` every CPU does.

use alloc::format;
use alloc::string::String;
use board::Board;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use rt::features::{Features, IdRegs};
use rt::{read_sysreg, write_sysreg};

/// Garbage for registers whose value the next Image must not use (an address no RAM is at).
const GARBAGE: u64 = 0xdead_0000_0000_0000;

/// SPSR_EL2.M for EL2t / EL1t (SP_EL0), D, A, I, F masked.
const SPSR_EL2T: u64 = 0x3c8;
const SPSR_EL1T: u64 = 0x3c4;
/// SPSR PAN (22) and UAO (23).
const SPSR_PAN: u64 = 1 << 22;
const SPSR_UAO: u64 = 1 << 23;

/// HCR_EL2 bits of the hostile EL2 entry (besides E2H/TGE).
const HCR_TRAPS: u64 = (1 << 12) // DC: EL1&0 stage 1 off is cacheable
    | (1 << 13) // TWI
    | (1 << 14) // TWE
    | (1 << 18) // TID3
    | (1 << 19) // TSC
    | (1 << 21) // TACR
    | (1 << 22) // TSW
    | (1 << 25) // TTLB
    | (1 << 26) // TVM
    | (1 << 30) // TRVM
    | (0b111 << 3) // FMO, IMO, AMO
    | rt::el2::hcr::RW;
/// HCR_EL2.HCD: HVC is undefined at EL1 (no one answers it at EL2 after `entry-el1`).
const HCR_HCD: u64 = 1 << 29;

/// What to do.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Enter the next Image at EL2.
    El2,
    /// Enter the next Image at EL1.
    El1,
}

/// Runs the shim: checks where the next Image is, leaves the registers hostile and enters it.
/// Returns only with a reason it cannot.
pub fn run(kind: Kind, b: &Board, dtb: usize, args: &bootargs::Args) -> Result<core::convert::Infallible, String> {
    use aarch64_cpu::registers::{CurrentEL, Readable};
    let el = CurrentEL.read(CurrentEL::EL);
    if el != 2 {
        return Err(format!("the entry modes run at EL2 (QEMU virtualization=on), not EL{el}"));
    }
    let next = args.uint("testguest.next").ok_or("the entry modes need testguest.next=ADDR (the next Image)")?;
    check_next(b, next)?;
    let ids = IdRegs::read();
    let f = Features::from_ids(&ids);
    if rt::entry::e2h_now() {
        return Err("HCR_EL2.E2H is RES1 on this CPU: the entry test needs one where it is writable".into());
    }
    let e2h = kind == Kind::El2 && f.vhe && args.choice("testguest.e2h") != Some("0");
    if kind == Kind::El1 {
        reserve_self(b, dtb)?;
        for (i, c) in b.cpus.iter().enumerate().take(rt::MAX_CPUS) {
            MPIDRS[i].store(c.mpidr & rt::MPIDR_AFF_MASK, Ordering::Relaxed);
        }
        RESIDENT.store(true, Ordering::Relaxed);
    }
    hostile_el1(&f);
    let (hcr, cnthctl, sctlr, cptr, spsr) = match kind {
        Kind::El2 => hostile_el2(&f, e2h),
        Kind::El1 => legal_el2_for_el1(&f),
    };
    // Garbage vectors, unless the shim stays to answer the kernel's SMCs.
    let vbar = if kind == Kind::El1 { rt::trap::vectors_el2() } else { GARBAGE | 0x800 };
    let mut r = abi::report::Record::new("entry_shim");
    r.str("enters", if kind == Kind::El2 { "el2" } else { "el1" })
        .hex("next", next)
        .hex("hcr_el2", hcr)
        .hex("cptr_el2", cptr)
        .hex("cnthctl_el2", cnthctl)
        .hex("sctlr_el2", sctlr)
        .hex("spsr_el2", spsr);
    rt::println!("{r}");
    rt::println!("testguest: entering {next:#x} at EL{} with hostile registers", if kind == Kind::El2 { 2 } else { 1 });
    rt::console::flush();
    // SAFETY: the registers written are the boot protocol's to choose (the next Image must
    // write every one it relies on); `next` holds an arm64 Image in RAM (checked), which QEMU's
    // loader wrote (no cache holds stale lines: this image never cached it, its MMU being off).
    // From the HCR_EL2 write on no FP/SIMD instruction runs (CPTR_EL2 may already trap them, in
    // the layout the new E2H gives it): the block ends in `eret`.
    unsafe {
        core::arch::asm!(
            "msr hcr_el2, {hcr}",
            "isb",
            "msr cnthctl_el2, {cnthctl}",
            "msr sctlr_el2, {sctlr}",
            "msr vbar_el2, {vbar}",
            "msr cptr_el2, {cptr}",
            "isb",
            "msr spsr_el2, {spsr}",
            "msr elr_el2, {next}",
            "mov x1, xzr",
            "mov x2, xzr",
            "mov x3, xzr",
            "isb",
            "eret",
            hcr = in(reg) hcr,
            cnthctl = in(reg) cnthctl,
            sctlr = in(reg) sctlr,
            vbar = in(reg) vbar,
            cptr = in(reg) cptr,
            spsr = in(reg) spsr,
            next = in(reg) next,
            in("x0") dtb,
            options(noreturn),
        )
    }
}

/// The next Image: 2 MiB aligned, in RAM, with the arm64 Image magic.
fn check_next(b: &Board, next: u64) -> Result<(), String> {
    if !next.is_multiple_of(2 << 20) {
        return Err(format!("testguest.next={next:#x} is not 2 MiB aligned (the boot protocol's placement)"));
    }
    if !b.memory.iter().any(|m| m.base <= next && next + 64 <= m.end()) {
        return Err(format!("testguest.next={next:#x} is not in RAM"));
    }
    // SAFETY: `next` + 0x38 lies in RAM (checked above); a 4-byte aligned read.
    let magic = unsafe { core::ptr::read_volatile((next + 0x38) as *const u32) };
    if magic != 0x644d_5241 {
        return Err(format!("no arm64 Image at testguest.next={next:#x} (magic {magic:#x}): load it there"));
    }
    Ok(())
}

/// EL1's registers, left for the next Image (or the guest behind it), at EL2 with E2H = 0 (the
/// `*_EL1` names are EL1's).
fn hostile_el1(f: &Features) {
    use rt::el1::sctlr;
    // MMU off, little-endian (the protocol's), but alignment checks, WXN, EL0 stack checks, PAN
    // set on exception entry (SPAN = 0).
    write_sysreg!("sctlr_el1", sctlr::RES1 | sctlr::A | sctlr::SA | sctlr::SA0 | sctlr::WXN | sctlr::I);
    // FPEN = ZEN = SMEN = 0 (all trapped), TTA = 1.
    write_sysreg!("cpacr_el1", 1 << 28);
    // SS (0), KDE (13), MDE (15); the OS lock open (it may reset locked, which would hide them).
    write_sysreg!("mdscr_el1", (1 << 0) | (1 << 13) | (1 << 15));
    write_sysreg!("oslar_el1", 0);
    // EL0PCTEN (0), EVNTEN (2), EL0VTEN (8), EL0PTEN (9); EL0VCTEN (1) clear.
    write_sysreg!("cntkctl_el1", (1 << 0) | (1 << 2) | (1 << 8) | (1 << 9));
    if f.pmu {
        write_sysreg!("pmuserenr_el0", 0b1111);
    }
    // Both timers firing from the start.
    write_sysreg!("cntv_cval_el0", 0);
    write_sysreg!("cntv_ctl_el0", 1);
    write_sysreg!("cntp_cval_el0", 0);
    write_sysreg!("cntp_ctl_el0", 1);
    // TBI0/TBI1 (37, 38), A1 (22), EPD0 (7), EPD1 (23), T0SZ = T1SZ = 25.
    write_sysreg!("tcr_el1", (1 << 37) | (1 << 38) | (1 << 22) | (1 << 7) | (1 << 23) | (25 << 16) | 25);
    write_sysreg!("mair_el1", 0x0404_0404_0404_0404);
    write_sysreg!("ttbr0_el1", GARBAGE | 0x1000);
    write_sysreg!("ttbr1_el1", GARBAGE | 0x2000);
    write_sysreg!("vbar_el1", GARBAGE | 0x1800);
    write_sysreg!("tpidr_el1", GARBAGE | 1);
    write_sysreg!("tpidr_el0", GARBAGE | 2);
    write_sysreg!("tpidrro_el0", GARBAGE | 3);
    write_sysreg!("sp_el0", GARBAGE | 0x10);
    write_sysreg!("contextidr_el1", 0x55);
    write_sysreg!("esr_el1", 0x9600_0045);
    write_sysreg!("far_el1", GARBAGE | 4);
    write_sysreg!("elr_el1", GARBAGE | 8);
    write_sysreg!("spsr_el1", 0x3c5);
    write_sysreg!("par_el1", GARBAGE | 0x801);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// Untraps SVE and SME at EL2 (E2H = 0 layout) and sets 128-bit vector lengths.
fn short_vectors(f: &Features, smcr_bits: u64) {
    write_sysreg!("cptr_el2", rt::el2::cptr_guest(rt::el2::Mode::Nvhe, f));
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    if f.sve {
        write_sysreg!("S3_4_C1_C2_0", 0); // ZCR_EL2.LEN = 0: 128 bits
    }
    if f.sme {
        write_sysreg!("S3_4_C1_C2_6", smcr_bits); // SMCR_EL2.LEN = 0
    }
}

/// EL2 hostile (`entry-el2`). Writes what keeps its layout now and returns what the final
/// block writes: (HCR_EL2, CNTHCTL_EL2, SCTLR_EL2, CPTR_EL2, SPSR_EL2), the last four in the
/// layout `e2h` gives them.
fn hostile_el2(f: &Features, e2h: bool) -> (u64, u64, u64, u64, u64) {
    use rt::el2::{cptr, hcr, sctlr};
    short_vectors(f, 0);
    // TPMCR (5), TPM (6), TDE (8), TDA (9), TDOSA (10), TDRA (11); HPMN = 1 where counters exist.
    let hpmn = f.pmu_counters.min(1);
    write_sysreg!("mdcr_el2", hpmn | (1 << 5) | (1 << 6) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11));
    write_sysreg!("cntvoff_el2", 0x1234_5678);
    write_sysreg!("hstr_el2", 0xbfef);
    write_sysreg!("vttbr_el2", (7 << 48) | 0xde_ad00_0000);
    write_sysreg!("tpidr_el2", GARBAGE | 5);
    write_sysreg!("mair_el2", 0x0404_0404_0404_0404);
    write_sysreg!("tcr_el2", 0x8000_0000 | 32);
    write_sysreg!("ttbr0_el2", GARBAGE | 0x3000);
    write_sysreg!("vpidr_el2", 0x4100_0000 | 0xd0c0);
    write_sysreg!("vmpidr_el2", 0x8000_0000 | 0x0303);
    if f.hcx {
        write_sysreg!("S3_4_C1_C2_2", 0); // HCRX_EL2
    }
    if f.fgt {
        write_sysreg!("S3_4_C1_C1_4", 0); // HFGRTR_EL2
        write_sysreg!("S3_4_C1_C1_5", 0); // HFGWTR_EL2
        write_sysreg!("S3_4_C1_C1_6", 0); // HFGITR_EL2
        write_sysreg!("S3_4_C3_C1_4", 0); // HDFGRTR_EL2
        write_sysreg!("S3_4_C3_C1_5", 0); // HDFGWTR_EL2
    }
    if f.gic_sysregs {
        write_sysreg!("S3_4_C12_C9_5", 0); // ICC_SRE_EL2: SRE = Enable = 0 (where not RAO)
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        if read_sysreg!("S3_4_C12_C9_5") & 1 != 0 {
            write_sysreg!("S3_4_C12_C11_0", (1 << 10) | (1 << 11) | (1 << 12)); // ICH_HCR_EL2: TC, TALL0, TALL1
        }
    }
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    let trace = (read_sysreg!("id_aa64dfr0_el1") >> 4) & 0xf != 0;
    let (hcr_v, sctlr_v, cptr_v) = if e2h {
        let mut c = cptr::TCPAC | if trace { cptr::TTA_E2H } else { 0 };
        if f.amu {
            c |= cptr::TAM;
        }
        // The SCTLR_EL1 layout: its RES1 bits, SPAN = 0, alignment checks, WXN.
        (HCR_TRAPS | hcr::E2H | hcr::TGE, rt::el1::sctlr::RES1 | sctlr::A | sctlr::SA | sctlr::WXN, c)
    } else {
        let mut c = cptr::RES1 | cptr::TFP | cptr::TZ | cptr::TSM | cptr::TCPAC | if trace { cptr::TTA } else { 0 };
        if f.amu {
            c |= cptr::TAM;
        }
        (HCR_TRAPS | hcr::TGE, sctlr::RES1 | sctlr::A | sctlr::SA | sctlr::WXN, c)
    };
    let mut spsr = SPSR_EL2T;
    if e2h && f.pan {
        spsr |= SPSR_PAN;
    }
    if f.uao {
        spsr |= SPSR_UAO;
    }
    // CNTHCTL_EL2: EVNTEN (2) alone: no EL1 (or EL0) access to the physical counter or timer in
    // either layout.
    (hcr_v, 1 << 2, sctlr_v, cptr_v, spsr)
}

/// EL2 as the boot protocol requires of a kernel entered at EL1 (`entry-el1`), with the shim
/// answering SMC and 128-bit vector lengths. Returns (HCR_EL2, CNTHCTL_EL2, SCTLR_EL2,
/// CPTR_EL2, SPSR_EL2).
fn legal_el2_for_el1(f: &Features) -> (u64, u64, u64, u64, u64) {
    use rt::el2::{guest_controls, hcr, Mode};
    let c = guest_controls(Mode::Nvhe, f);
    rt::entry::el2(&c);
    rt::entry::el2_gic(f, f.gic_sysregs);
    let mut smcr = 0;
    if f.sme_fa64 {
        smcr |= rt::el2::SMCR_FA64;
    }
    if f.sme2 {
        smcr |= rt::el2::SMCR_EZT0;
    }
    short_vectors(f, smcr);
    write_sysreg!("vpidr_el2", read_sysreg!("midr_el1"));
    write_sysreg!("vmpidr_el2", read_sysreg!("mpidr_el1"));
    // SMC traps to the shim (`monitor_call`), HVC is undefined (the shim answers no HVC).
    let h = c.hcr | hcr::TSC | HCR_HCD;
    let mut spsr = SPSR_EL1T;
    if f.pan {
        spsr |= SPSR_PAN;
    }
    if f.uao {
        spsr |= SPSR_UAO;
    }
    (h, c.cnthctl, rt::el2::SCTLR_MMU_OFF, c.cptr, spsr)
}

/// Whether the shim stays at EL2 as the kernel's firmware (`entry-el1`).
static RESIDENT: AtomicBool = AtomicBool::new(false);
/// MPIDR affinity of each CPU index (the device tree's order), for CPU_ON.
static MPIDRS: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(u64::MAX) }; rt::MAX_CPUS];
/// Per CPU index: the kernel's entry point and context id of its CPU_ON (0: none yet). Written
/// and read with the MMU off (straight to memory).
static STARTS: [(AtomicU64, AtomicU64); rt::MAX_CPUS] =
    [const { (AtomicU64::new(0), AtomicU64::new(0)) }; rt::MAX_CPUS];

/// Puts a `/reserved-memory` node over this image (code, data, BSS: stacks and heap) into the
/// device tree at `dtb`, written over the old one (the tree it came from is QEMU's, with room to
/// spare), so the kernel leaves the resident shim alone.
fn reserve_self(b: &Board, dtb: usize) -> Result<(), String> {
    // SAFETY: x0 pointed at the DTB (boot protocol); nothing else writes it.
    let old = unsafe { board::dtb_at(dtb as *const u8) }.map_err(|e| format!("device tree: {e}"))?;
    let room = old.len();
    let l = rt::start::image_layout();
    let spec = board::GuestSpec {
        memory: b.memory.clone(),
        initrd: b.initrd,
        reserved: alloc::vec![board::Region::new(l.start as u64, (l.end - l.start) as u64)],
        ..Default::default()
    };
    let new = board::guest_dtb(old, &spec).map_err(|e| format!("device tree with the shim reserved: {e}"))?;
    if new.len() > room {
        return Err(format!("the device tree with the shim reserved takes {} bytes, {room} are there", new.len()));
    }
    // SAFETY: [dtb, dtb + room) is the old tree (read into `new` and `b` already); `new` is a
    // separate heap buffer no longer than it.
    unsafe { core::ptr::copy_nonoverlapping(new.as_ptr(), dtb as *mut u8, new.len()) };
    Ok(())
}

/// An exception from EL1 while the shim is resident: an SMC (trapped by HCR_EL2.TSC) is
/// forwarded to QEMU's PSCI, CPU_ON turned into a start at the shim's own entry (the kernel's
/// entry and context kept for [`secondary`]). Returns whether it was one.
pub fn monitor_call(frame: &mut rt::TrapFrame, esr: u64) -> bool {
    if !RESIDENT.load(Ordering::Relaxed) || rt::esr::class(esr) != 0x17 {
        return false;
    }
    // A trapped SMC returns to itself: step over it.
    frame.elr += 4;
    let mut r = [0u64; 8];
    r.copy_from_slice(&frame.x[..8]);
    let fid = r[0] & 0xffff_ffff;
    if fid == abi::psci::CPU_ON_32 || fid == abi::psci::CPU_ON_64 {
        let target = r[1] & rt::MPIDR_AFF_MASK;
        let Some(idx) = MPIDRS.iter().position(|m| m.load(Ordering::Relaxed) == target) else {
            frame.x[0] = abi::psci::INVALID_PARAMETERS as u64;
            return true;
        };
        STARTS[idx].0.store(r[2], Ordering::Relaxed);
        STARTS[idx].1.store(r[3], Ordering::Relaxed);
        r[2] = rt::start::secondary_entry_addr() as u64;
        r[3] = idx as u64;
    }
    let out = rt::smccc::call(rt::smccc::Conduit::Smc, r);
    frame.x[..4].copy_from_slice(&out);
    true
}

/// A CPU the kernel started (through [`monitor_call`]), at the shim's entry at EL2: EL2 as for
/// the boot CPU, EL1 hostile, then the kernel's entry at EL1 with its context id. Returns only
/// for a CPU the shim did not start for the kernel.
pub fn secondary(cpu: usize) {
    let Some((entry, ctx)) = STARTS.get(cpu).map(|(e, c)| (e.load(Ordering::Relaxed), c.load(Ordering::Relaxed)))
    else {
        return;
    };
    if !RESIDENT.load(Ordering::Relaxed) || entry == 0 {
        return;
    }
    let f = Features::from_ids(&IdRegs::read());
    hostile_el1(&f);
    let (hcr, cnthctl, sctlr, cptr, spsr) = legal_el2_for_el1(&f);
    rt::println!("testguest: CPU {cpu} enters {entry:#x} at EL1 with hostile registers");
    // SAFETY: as for the boot CPU in `run`: the kernel asked for this entry point with CPU_ON.
    unsafe {
        core::arch::asm!(
            "msr hcr_el2, {hcr}",
            "isb",
            "msr cnthctl_el2, {cnthctl}",
            "msr sctlr_el2, {sctlr}",
            "msr vbar_el2, {vbar}",
            "msr cptr_el2, {cptr}",
            "msr spsr_el2, {spsr}",
            "msr elr_el2, {entry}",
            "isb",
            "eret",
            hcr = in(reg) hcr,
            cnthctl = in(reg) cnthctl,
            sctlr = in(reg) sctlr,
            vbar = in(reg) rt::trap::vectors_el2(),
            cptr = in(reg) cptr,
            spsr = in(reg) spsr,
            entry = in(reg) entry,
            in("x0") ctx,
            options(noreturn),
        )
    }
}
