//! The guest's vector and matrix state across traps to the hypervisor: SVE registers (Z, P,
//! FFR) at the largest vector length and SME's streaming registers and ZA array are loaded with
//! a pattern, the CPU traps to EL2 (HVC, and a trapped SMC the hypervisor forwards to the
//! firmware, and with a slot pool the dirty-log calls whose stage-2 work runs lib/pgtable's
//! vector routines), and everything must come back unchanged, in streaming mode too. The
//! hypervisor is built without FP; its vector routines save whole Z registers (writing a V
//! register would zero the upper bits of the matching Z register, which this test sees) and
//! keep to general registers in streaming mode. The routines' SVE mode is also run here at EL1.
//! Also: MTE's system registers are reachable on an MTE CPU (HCR_EL2.ATA).

use aarch64_cpu::registers::{Readable, ID_AA64PFR0_EL1, ID_AA64PFR1_EL1};
use alloc::format;
use alloc::string::String;
use alloc::vec;

/// `asm!` with what an SMCCC call through HVC or SMC may clobber (x1-x17; x0 is the caller's
/// in/out operand) and the scratch registers of the state tests (x9, x24; v0-v31, the low halves
/// of the Z registers the tests load) declared.
macro_rules! trap_asm {
    ($($t:tt)*) => {
        core::arch::asm!(
            $($t)*
            out("x1") _, out("x2") _, out("x3") _, out("x4") _, out("x5") _, out("x6") _, out("x7") _,
            out("x8") _, out("x9") _, out("x10") _, out("x11") _, out("x12") _, out("x13") _,
            out("x14") _, out("x15") _, out("x16") _, out("x17") _, out("x24") _,
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _, out("v6") _,
            out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _, out("v12") _,
            out("v13") _, out("v14") _, out("v15") _, out("v16") _, out("v17") _, out("v18") _,
            out("v19") _, out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _,
            out("v31") _,
        )
    };
}

/// The state tests' register images: Z0-Z31 from/to `[x20]`/`[x21]` and P0-P15 from/to
/// `[x22]`/`[x23]`, one vector (or predicate) length apart, as assembler text for `trap_asm!`.
macro_rules! load_z {
    () => {
        concat!(
            "ldr z0, [x20, #0, mul vl]\n",
            "ldr z1, [x20, #1, mul vl]\n",
            "ldr z2, [x20, #2, mul vl]\n",
            "ldr z3, [x20, #3, mul vl]\n",
            "ldr z4, [x20, #4, mul vl]\n",
            "ldr z5, [x20, #5, mul vl]\n",
            "ldr z6, [x20, #6, mul vl]\n",
            "ldr z7, [x20, #7, mul vl]\n",
            "ldr z8, [x20, #8, mul vl]\n",
            "ldr z9, [x20, #9, mul vl]\n",
            "ldr z10, [x20, #10, mul vl]\n",
            "ldr z11, [x20, #11, mul vl]\n",
            "ldr z12, [x20, #12, mul vl]\n",
            "ldr z13, [x20, #13, mul vl]\n",
            "ldr z14, [x20, #14, mul vl]\n",
            "ldr z15, [x20, #15, mul vl]\n",
            "ldr z16, [x20, #16, mul vl]\n",
            "ldr z17, [x20, #17, mul vl]\n",
            "ldr z18, [x20, #18, mul vl]\n",
            "ldr z19, [x20, #19, mul vl]\n",
            "ldr z20, [x20, #20, mul vl]\n",
            "ldr z21, [x20, #21, mul vl]\n",
            "ldr z22, [x20, #22, mul vl]\n",
            "ldr z23, [x20, #23, mul vl]\n",
            "ldr z24, [x20, #24, mul vl]\n",
            "ldr z25, [x20, #25, mul vl]\n",
            "ldr z26, [x20, #26, mul vl]\n",
            "ldr z27, [x20, #27, mul vl]\n",
            "ldr z28, [x20, #28, mul vl]\n",
            "ldr z29, [x20, #29, mul vl]\n",
            "ldr z30, [x20, #30, mul vl]\n",
            "ldr z31, [x20, #31, mul vl]\n",
        )
    };
}
macro_rules! store_z {
    () => {
        concat!(
            "str z0, [x21, #0, mul vl]\n",
            "str z1, [x21, #1, mul vl]\n",
            "str z2, [x21, #2, mul vl]\n",
            "str z3, [x21, #3, mul vl]\n",
            "str z4, [x21, #4, mul vl]\n",
            "str z5, [x21, #5, mul vl]\n",
            "str z6, [x21, #6, mul vl]\n",
            "str z7, [x21, #7, mul vl]\n",
            "str z8, [x21, #8, mul vl]\n",
            "str z9, [x21, #9, mul vl]\n",
            "str z10, [x21, #10, mul vl]\n",
            "str z11, [x21, #11, mul vl]\n",
            "str z12, [x21, #12, mul vl]\n",
            "str z13, [x21, #13, mul vl]\n",
            "str z14, [x21, #14, mul vl]\n",
            "str z15, [x21, #15, mul vl]\n",
            "str z16, [x21, #16, mul vl]\n",
            "str z17, [x21, #17, mul vl]\n",
            "str z18, [x21, #18, mul vl]\n",
            "str z19, [x21, #19, mul vl]\n",
            "str z20, [x21, #20, mul vl]\n",
            "str z21, [x21, #21, mul vl]\n",
            "str z22, [x21, #22, mul vl]\n",
            "str z23, [x21, #23, mul vl]\n",
            "str z24, [x21, #24, mul vl]\n",
            "str z25, [x21, #25, mul vl]\n",
            "str z26, [x21, #26, mul vl]\n",
            "str z27, [x21, #27, mul vl]\n",
            "str z28, [x21, #28, mul vl]\n",
            "str z29, [x21, #29, mul vl]\n",
            "str z30, [x21, #30, mul vl]\n",
            "str z31, [x21, #31, mul vl]\n",
        )
    };
}
macro_rules! load_p {
    () => {
        concat!(
            "ldr p0, [x22, #0, mul vl]\n",
            "ldr p1, [x22, #1, mul vl]\n",
            "ldr p2, [x22, #2, mul vl]\n",
            "ldr p3, [x22, #3, mul vl]\n",
            "ldr p4, [x22, #4, mul vl]\n",
            "ldr p5, [x22, #5, mul vl]\n",
            "ldr p6, [x22, #6, mul vl]\n",
            "ldr p7, [x22, #7, mul vl]\n",
            "ldr p8, [x22, #8, mul vl]\n",
            "ldr p9, [x22, #9, mul vl]\n",
            "ldr p10, [x22, #10, mul vl]\n",
            "ldr p11, [x22, #11, mul vl]\n",
            "ldr p12, [x22, #12, mul vl]\n",
            "ldr p13, [x22, #13, mul vl]\n",
            "ldr p14, [x22, #14, mul vl]\n",
            "ldr p15, [x22, #15, mul vl]\n",
        )
    };
}
macro_rules! store_p {
    () => {
        concat!(
            "str p0, [x23, #0, mul vl]\n",
            "str p1, [x23, #1, mul vl]\n",
            "str p2, [x23, #2, mul vl]\n",
            "str p3, [x23, #3, mul vl]\n",
            "str p4, [x23, #4, mul vl]\n",
            "str p5, [x23, #5, mul vl]\n",
            "str p6, [x23, #6, mul vl]\n",
            "str p7, [x23, #7, mul vl]\n",
            "str p8, [x23, #8, mul vl]\n",
            "str p9, [x23, #9, mul vl]\n",
            "str p10, [x23, #10, mul vl]\n",
            "str p11, [x23, #11, mul vl]\n",
            "str p12, [x23, #12, mul vl]\n",
            "str p13, [x23, #13, mul vl]\n",
            "str p14, [x23, #14, mul vl]\n",
            "str p15, [x23, #15, mul vl]\n",
        )
    };
}

/// CPACR_EL1: FP/SIMD, SVE and SME not trapped at EL1/EL0.
const CPACR_FPEN_ZEN_SMEN: u64 = (3 << 20) | (3 << 16) | (3 << 24);

fn pattern(buf: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for b in buf.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// Enables SVE and SME at EL1 with the largest vector lengths the hypervisor allows; returns
/// CPACR_EL1 as it was (for [`restore`]).
fn enable() -> u64 {
    // SAFETY: CPACR_EL1/ZCR_EL1/SMCR_EL1 only change what EL1/EL0 may use and the vector
    // lengths; written before any SVE/SME instruction runs (ISB). SMCR_EL1 is written only on a
    // CPU with SME.
    unsafe {
        let cpacr: u64;
        core::arch::asm!("mrs {}, cpacr_el1", out(reg) cpacr);
        core::arch::asm!("msr cpacr_el1, {}", "isb", in(reg) cpacr | CPACR_FPEN_ZEN_SMEN);
        core::arch::asm!("msr S3_0_C1_C2_0, {}", "isb", in(reg) 0xfu64); // ZCR_EL1.LEN = max
        if (ID_AA64PFR1_EL1.get() >> 24) & 0xf != 0 {
            core::arch::asm!("msr S3_0_C1_C2_6, {}", "isb", in(reg) 0xfu64); // SMCR_EL1.LEN = max
        }
        cpacr
    }
}

/// CPACR_EL1 back to `cpacr` (what [`enable`] found): SVE and SME trapped at EL0 again, and
/// the FP access the lazy switch (`sched::fpsimd`) last set, which it does not read back.
fn restore(cpacr: u64) {
    // SAFETY: only what EL1/EL0 may use changes; no SVE/SME instruction runs after (ISB).
    unsafe { core::arch::asm!("msr cpacr_el1, {}", "isb", in(reg) cpacr) };
}

/// `test=sve-state`: SVE (and SME when the CPU has it) state survives traps to the hypervisor.
///
/// Never inlined: the xtask allows FP/SVE/SME instructions only in functions named
/// `kernel::selftest::cpu_state::*` (`xtask/src/build.rs` `fp_simd_allowed`); inlined into the
/// self-test table's closure they would be refused.
#[inline(never)]
pub fn sve_state() -> Result<(), String> {
    if (ID_AA64PFR0_EL1.get() >> 32) & 0xf == 0 {
        return Err("test=sve-state needs a CPU with SVE (-cpu max)".into());
    }
    let cpacr = enable();
    let r = sve_rounds();
    restore(cpacr);
    r
}

/// The rounds of [`sve_state`] (SVE enabled).
#[inline(never)]
fn sve_rounds() -> Result<(), String> {
    let vl: u64;
    // SAFETY: SVE is enabled at EL1 (above); RDVL only reads the vector length.
    unsafe { core::arch::asm!(".arch_extension sve", "rdvl {}, #1", out(reg) vl) };
    let vl = vl as usize;
    let calls = dirty_log_calls(0)?;
    let rounds = 4 + calls.as_ref().map_or(0, |c| c.args.len() as u64);
    for round in 0..rounds {
        // Rounds 0-3: a null HVC, a trapped SMC; then (with a slot pool) the dirty-log calls
        // whose stage-2 work runs lib/pgtable's vector routines at EL2: the eager split's fill
        // of new tables, the clear's write-protect of runs of pages.
        let (args, checked) = match &calls {
            Some(c) if round >= 4 => (c.args[round as usize - 4], true),
            _ => ([abi::hypercall::VERSION, 0, 0, 0], false),
        };
        let mut ret: u64;
        let (zlen, plen) = (32 * vl, 17 * (vl / 8));
        let mut a = vec![0u8; zlen + plen];
        let mut b = vec![0u8; zlen + plen];
        pattern(&mut a, 0x5eed + round);
        // The FFR image is loaded through P0 (WRFFR): only its first 1/8 VL bytes matter.
        let (za, pa) = a.split_at_mut(zlen);
        let (zb, pb) = b.split_at_mut(zlen);
        let conduit_smc = round < 4 && round % 2 == 1;
        // SAFETY: SVE is enabled; the loads read `a` (32 Z images then 17 P images, the last
        // for FFR) and the stores write the same layout into `b`, both large enough for this
        // vector length; interrupts are masked so no EL1 handler runs (the kernel's vectors save
        // only the low 128 bits); the trap is an SMCCC call (HYP VERSION, or PSCI_VERSION
        // through a trapped SMC) that may clobber x0-x17, declared.
        unsafe {
            trap_asm!(
                ".arch_extension sve",
                "mrs x24, daif",
                "msr daifset, #0xf",
                load_z!(),
                "ldr p0, [x22, #16, mul vl]",
                "wrffr p0.b",
                load_p!(),
                "ldp x1, x2, [x27]",
                "ldr x3, [x27, #16]",
                "cbnz x25, 1f",
                "hvc #0",
                "b 2f",
                "1:",
                "smc #0",
                "2:",
                store_z!(),
                store_p!(),
                "rdffr p0.b",
                "str p0, [x23, #16, mul vl]",
                "msr daif, x24",
                in("x20") za.as_ptr(),
                in("x21") zb.as_mut_ptr(),
                in("x22") pa.as_ptr(),
                in("x23") pb.as_mut_ptr(),
                in("x25") conduit_smc as u64,
                in("x27") args[1..].as_ptr(),
                inout("x0") if conduit_smc { abi::psci::VERSION } else { args[0] } => ret,
            )
        };
        if checked && ret != 0 {
            return Err(format!("hypercall {:#x} in round {round} failed: {}", args[0], ret as i64));
        }
        // Z0-Z31 and P0-P15 must match exactly; FFR's image (loaded through WRFFR, which may
        // canonicalise it) is stored but not compared.
        let ffr_at = zlen + 16 * (vl / 8);
        let (x, y) = (&a[..ffr_at], &b[..ffr_at]);
        if let Some(i) = first_difference(x, y) {
            let what =
                if i < zlen { format!("z{} byte {}", i / vl, i % vl) } else { format!("p{}", (i - zlen) / (vl / 8)) };
            return Err(format!(
                "SVE state changed across a trap ({}): {what} was {:#04x}, came back {:#04x} (vector length {vl} bytes)",
                if conduit_smc { "SMC" } else { "HVC" },
                x[i],
                y[i]
            ));
        }
    }
    rt::println!("kernel: sve-state: Z0-Z31, P0-P15 and FFR at {} bits survived HVC and SMC traps", vl * 8);
    routines_keep_z(vl)?;
    if let Some(c) = calls {
        c.finish()?;
        rt::println!("kernel: sve-state: and the dirty-log enable (eager split) and clear (write-protect) hypercalls");
    }
    let sme = (ID_AA64PFR1_EL1.get() >> 24) & 0xf != 0;
    let svl = if sme { sme_state()? } else { 0 };
    let mut r = abi::report::Record::new("sve_state");
    r.u64("vl_bits", vl as u64 * 8)
        .bool("sme", sme)
        .u64("svl_bits", svl as u64 * 8)
        .u64("dirty_log_rounds", rounds - 4);
    rt::println!("{r}");
    Ok(())
}

/// The dirty-log hypercalls a state round makes (x0-x3 each), on two 2 MiB-backed memslots
/// this sets up: one whose eager-split enable fills new level-3 tables, one in manual-protect
/// mode with eager split whose two clears split (and fill) a block each and write-protect its
/// pages. `None` without a slot pool (`hyp.slotpool`).
struct DirtyLogCalls {
    args: [[u64; 4]; 3],
    slots: [u64; 2],
    _mask: alloc::vec::Vec<u64>,
}

const SLOT_BYTES: u64 = 4 << 20;

fn dirty_log_calls(set: u64) -> Result<Option<DirtyLogCalls>, String> {
    use abi::hypercall as hc;
    let base = crate::selftest::memslot::slot_window() + set * 2 * SLOT_BYTES;
    let e = |what: &str, err| format!("sve-state: {what}: {err}");
    let big = match crate::hyp::memslot_create(base, SLOT_BYTES, hc::MEMSLOT_BACKING_2M) {
        Ok(id) => id,
        Err(abi::error::HypError::NoMemory) => return Ok(None),
        Err(x) => return Err(e("memslot", x)),
    };
    let small = crate::hyp::memslot_create(base + SLOT_BYTES, SLOT_BYTES, hc::MEMSLOT_BACKING_2M)
        .map_err(|x| e("memslot", x))?;
    crate::hyp::dirty_log_enable(small, hc::DIRTY_LOG_MANUAL_PROTECT | hc::DIRTY_LOG_EAGER_SPLIT)
        .map_err(|x| e("enable", x))?;
    let mask = alloc::vec![!0u64; 8];
    let clear = crate::hyp::dirty_log_clear_args(small, &mask, 0, 512).map_err(|x| e("clear", x))?;
    let clear2 = crate::hyp::dirty_log_clear_args(small, &mask, 512, 512).map_err(|x| e("clear", x))?;
    Ok(Some(DirtyLogCalls {
        args: [[hc::DIRTY_LOG_ENABLE, big, hc::DIRTY_LOG_EAGER_SPLIT, 0], clear, clear2],
        slots: [big, small],
        _mask: mask,
    }))
}

impl DirtyLogCalls {
    fn finish(self) -> Result<(), String> {
        for id in self.slots {
            crate::hyp::dirty_log_disable(id).map_err(|x| format!("sve-state: disable: {x}"))?;
            crate::hyp::memslot_delete(id).map_err(|x| format!("sve-state: delete: {x}"))?;
        }
        Ok(())
    }
}

/// lib/pgtable's vector routines in their SVE mode (as the hypervisor runs them: Z registers
/// live), run here at EL1 with SVE enabled: they agree with their spec
/// (`pgtable::raw::check_against_spec`) and leave Z0-Z31 and P0-P15 as they found them. The
/// kernel's own code is softfloat, so between the load and the store nothing else touches those
/// registers; interrupts stay masked (a task switch would load Q registers only).
fn routines_keep_z(vl: usize) -> Result<(), String> {
    use pgtable::vector::{set, VectorUse};
    let (zlen, plen) = (32 * vl, 16 * (vl / 8));
    let mut a = vec![0u8; zlen + plen];
    let mut b = vec![0u8; zlen + plen];
    pattern(&mut a, 0x7e57);
    let (za, pa) = a.split_at(zlen);
    let (zb, pb) = b.split_at_mut(zlen);
    let daif: u64;
    // SAFETY: SVE is enabled at EL1 (`enable`); the loads read `a` (32 Z images, 16 P images
    // of this vector length); interrupts are masked until the store below; the vector
    // registers written are declared.
    unsafe {
        core::arch::asm!(
            ".arch_extension sve",
            "mrs {daif}, daif",
            "msr daifset, #0xf",
            load_z!(),
            load_p!(),
            daif = out(reg) daif,
            in("x20") za.as_ptr(),
            in("x22") pa.as_ptr(),
            out("v0") _, out("v1") _, out("v2") _, out("v3") _, out("v4") _, out("v5") _, out("v6") _,
            out("v7") _, out("v8") _, out("v9") _, out("v10") _, out("v11") _, out("v12") _,
            out("v13") _, out("v14") _, out("v15") _, out("v16") _, out("v17") _, out("v18") _,
            out("v19") _, out("v20") _, out("v21") _, out("v22") _, out("v23") _, out("v24") _,
            out("v25") _, out("v26") _, out("v27") _, out("v28") _, out("v29") _, out("v30") _,
            out("v31") _,
        )
    };
    set(VectorUse::Sve { sme: false, vl: vl as u64 });
    let r = pgtable::raw::check_against_spec(0x5eed_7e57, 256);
    set(VectorUse::Neon);
    // SAFETY: as above; the stores write `b` in the same layout; DAIF comes back.
    unsafe {
        core::arch::asm!(
            ".arch_extension sve",
            store_z!(),
            store_p!(),
            "msr daif, {daif}",
            daif = in(reg) daif,
            in("x21") zb.as_mut_ptr(),
            in("x23") pb.as_mut_ptr(),
        )
    };
    let n = r.map_err(|e| format!("pgtable's vector routines in SVE mode: {e}"))?;
    if let Some(i) = first_difference(&a, &b) {
        let what =
            if i < zlen { format!("z{} byte {}", i / vl, i % vl) } else { format!("p{}", (i - zlen) / (vl / 8)) };
        return Err(format!("pgtable's vector routines in SVE mode changed {what} (vector length {vl} bytes)"));
    }
    rt::println!("kernel: sve-state: pgtable's vector routines kept Z0-Z31 and P0-P15 ({n} comparisons with the spec)");
    Ok(())
}

/// SME: the streaming Z registers and the whole ZA array across an HVC made in streaming mode.
fn sme_state() -> Result<usize, String> {
    let svl: u64;
    // SAFETY: SME is enabled at EL1 (`enable`); RDSVL only reads the streaming vector length.
    unsafe { core::arch::asm!(".arch_extension sme", "rdsvl {}, #1", out(reg) svl) };
    let svl = svl as usize;
    let (zlen, zalen) = (32 * svl, svl * svl);
    let mut a = vec![0u8; zlen + zalen];
    let mut b = vec![0u8; zlen + zalen];
    pattern(&mut a, 0x5e5e);
    let (za, aa) = a.split_at_mut(zlen);
    let (zb, ab) = b.split_at_mut(zlen);
    let calls = dirty_log_calls(1)?;
    let (ncalls, args) = calls.as_ref().map_or((0u64, core::ptr::null()), |c| (c.args.len() as u64, c.args.as_ptr()));
    let ret: u64;
    // SAFETY: SME is enabled; SMSTART enters streaming mode with ZA on; the Z images are `svl`
    // bytes each (streaming vector length) and the ZA array `svl` rows of `svl` bytes, matching
    // the buffers; SMSTOP leaves streaming mode and turns ZA off before returning. Interrupts are
    // masked; the HVC may clobber x0-x17, declared.
    unsafe {
        trap_asm!(
            ".arch_extension sme",
            "mrs x24, daif",
            "msr daifset, #0xf",
            "smstart",
            load_z!(),
            "mov w12, #0",
            "mov x9, x22",
            "3:",
            "ldr za[w12, 0], [x9]",
            "add x9, x9, x26",
            "add w12, w12, #1",
            "cmp x12, x26",
            "b.ne 3b",
            "hvc #0",
            // The dirty-log calls (x25 of them, 32 bytes of x0-x3 each at x27), in streaming
            // mode: the hypervisor's vector routines must keep to general registers (or keep
            // the streaming state whole). Stops at the first that fails (x0 != 0).
            "cbz x25, 7f",
            "5:",
            "ldp x0, x1, [x27]",
            "ldp x2, x3, [x27, #16]",
            "hvc #0",
            "cbnz x0, 7f",
            "add x27, x27, #32",
            "subs x25, x25, #1",
            "b.ne 5b",
            "7:",
            store_z!(),
            "mov w12, #0",
            "mov x9, x23",
            "4:",
            "str za[w12, 0], [x9]",
            "add x9, x9, x26",
            "add w12, w12, #1",
            "cmp x12, x26",
            "b.ne 4b",
            "smstop",
            "msr daif, x24",
            in("x20") za.as_ptr(),
            in("x21") zb.as_mut_ptr(),
            in("x22") aa.as_ptr(),
            in("x23") ab.as_mut_ptr(),
            in("x26") svl,
            inout("x25") ncalls => _,
            inout("x27") args => _,
            inout("x0") abi::hypercall::VERSION => ret,
        )
    };
    if let Some(c) = calls {
        if ret != 0 {
            return Err(format!("a dirty-log call in streaming mode failed: {}", ret as i64));
        }
        c.finish()?;
    }
    if let Some(i) = first_difference(&a, &b) {
        let what = if i < zlen {
            format!("streaming z{} byte {}", i / svl, i % svl)
        } else {
            format!("ZA row {}", (i - zlen) / svl)
        };
        return Err(format!("SME state changed across an HVC in streaming mode: {what} (SVL {svl} bytes)"));
    }
    rt::println!(
        "kernel: sve-state: streaming Z0-Z31 and ZA ({svl}x{svl} bytes) survived an HVC in streaming mode{}",
        if ncalls > 0 { ", and the dirty-log calls" } else { "" }
    );
    tpidr2_state()?;
    Ok(svl)
}

/// SME's TPIDR2_EL0 is the guest's (EL1 reaches it: under FEAT_FGT the hypervisor sets
/// HFGRTR/HFGWTR_EL2.nTPIDR2_EL0, else the access traps to EL2) and survives an HVC.
fn tpidr2_state() -> Result<(), String> {
    const V: u64 = 0x7470_6964_7232_0001;
    let got: u64;
    // SAFETY: TPIDR2_EL0 (S3_3_C13_C0_5, by its encoding: the assembler may not know SME) is a
    // scratch register of SME's state no one else here uses; the HVC is the version call, which
    // only clobbers x0-x3.
    unsafe {
        core::arch::asm!(
            "msr S3_3_C13_C0_5, {v}",
            "hvc #0",
            "mrs {got}, S3_3_C13_C0_5",
            "msr S3_3_C13_C0_5, xzr",
            v = in(reg) V,
            got = out(reg) got,
            inout("x0") abi::hypercall::VERSION => _,
            out("x1") _, out("x2") _, out("x3") _,
            options(nostack),
        )
    };
    if got != V {
        return Err(format!("TPIDR2_EL0 changed across an HVC: {got:#x}, not {V:#x}"));
    }
    rt::println!("kernel: sve-state: TPIDR2_EL0 survived an HVC");
    Ok(())
}

/// `test=mte-regs`: MTE's EL1 registers are reachable (they trap unless HCR_EL2.ATA is set).
#[inline(never)]
pub fn mte_regs() -> Result<(), String> {
    let mte = (ID_AA64PFR1_EL1.get() >> 8) & 0xf;
    if mte < 2 {
        return Err(format!("test=mte-regs needs MTE with tags (ID_AA64PFR1_EL1.MTE = {mte}; boot with --mte)"));
    }
    let (gcr, rgsr): (u64, u64);
    // SAFETY: GCR_EL1 (exclude mask, RRND) and RGSR_EL1 (random tag seed) only affect tag
    // generation by IRG, which this kernel does not use; the values are restored.
    unsafe {
        core::arch::asm!("mrs {}, S3_0_C1_C0_6", out(reg) gcr);
        core::arch::asm!("msr S3_0_C1_C0_6, {}", "isb", in(reg) 0x1_fffeu64);
        let back: u64;
        core::arch::asm!("mrs {}, S3_0_C1_C0_6", out(reg) back);
        core::arch::asm!("mrs {}, S3_0_C1_C0_5", out(reg) rgsr);
        core::arch::asm!("msr S3_0_C1_C0_6, {}", "isb", in(reg) gcr);
        if back & 0x1_ffff != 0x1_fffe {
            return Err(format!("GCR_EL1 reads back {back:#x} after writing 0x1fffe"));
        }
    }
    rt::println!("kernel: mte-regs: GCR_EL1 and RGSR_EL1 ({rgsr:#x}) reachable at EL1 (MTE level {mte})");
    Ok(())
}
