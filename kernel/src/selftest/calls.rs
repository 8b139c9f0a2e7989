//! Self-tests of the hypervisor's SMCCC interface as a guest sees it:
//!
//! * `test=smccc`: one check per rule of the SMC Calling Convention and `lib/abi`'s hypercall
//!   document: only W0 is the function id; REVISION answers major.minor; CALL_COUNT is not
//!   supported; SMCCC_ARCH_FEATURES and PSCI_FEATURES say "not supported" exactly for the calls
//!   that answer NOT_SUPPORTED; a 32-bit call reads 32-bit arguments.
//! * `test=storm`: every CPU at once makes thousands of calls with random 64-bit x0..x7 (upper
//!   halves set, W0 mostly a real function id); each must answer a documented code.
//! * `test=cpu-cycle`: CPU_OFF / CPU_ON cycles of a CPU that is off (boot with `cycle.cpu=N`:
//!   CPU N is never started, on any machine; or with `bbml2_test_disallow_cpu=N` on a BBML2
//!   machine: the refused CPU powers itself off), with
//!   CPU_ON to the CPU while it is still starting, AFFINITY_INFO answering ON and OFF, and
//!   CPU_ON_32 with the upper halves of its arguments set.
//! * `test=pool-calls`: memslots and dirty-log buffers placed over the hypervisor's frame pool
//!   and slot pool (`pools.frame=IPA pools.slot=IPA`) are refused with DENIED.
//! * `test=touch` (`touch.ipa=IPA`): read that IPA; the hypervisor must stop the guest (exit 4)
//!   and report that IPA. `test=exit-claim`: exit with status 5, which a guest may not claim:
//!   the run must end with 1.

use crate::arch::smccc::{self, call, Conduit};
use crate::{arch::machine::KERNEL, hyp, work};
use abi::hypercall::{self as hc, function_id, is_smc64};
use abi::{error, psci};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use kcore::options::TestOptions;

/// Upper-half garbage for "only W0 counts" and "32-bit calls read 32-bit arguments".
const JUNK: u64 = 0xdead_beef_0000_0000;

fn me() -> u64 {
    rt::mpidr_affinity()
}

/// One SMCCC call with all of x0..x7 chosen, through the conduit; returns x0..x3 (the storm
/// never asks for a call that writes guest memory: no memslot exists for it to use).
fn call8(r: [u64; 8]) -> [u64; 4] {
    rt::smccc::call(smccc::conduit(), r)
}

/// x0 of a call as the caller reads it: W0 sign-extended for a 32-bit call.
fn ret0(fid: u64, x0: u64) -> i64 {
    if is_smc64(fid) {
        x0 as i64
    } else {
        i64::from(x0 as u32 as i32)
    }
}

struct Rules {
    n: u32,
}

impl Rules {
    fn check(&mut self, rule: &str, ok: bool, detail: impl FnOnce() -> String) -> Result<(), String> {
        self.n += 1;
        if ok {
            Ok(())
        } else {
            Err(format!("smccc: {rule}: {}", detail()))
        }
    }
}

fn needs_hypervisor(what: &str) -> Result<(), String> {
    match KERNEL.get() {
        Some(k) if k.host == crate::arch::power::Host::Hypervisor => Ok(()),
        _ => Err(format!("test={what} needs the hypervisor")),
    }
}

/// PSCI functions that end the run or stop this CPU: only their PSCI_FEATURES is checked.
const PSCI_NEVER_CALLED: [u64; 5] =
    [psci::CPU_OFF, psci::SYSTEM_OFF, psci::SYSTEM_RESET, psci::SYSTEM_RESET2_32, psci::SYSTEM_RESET2_64];

/// `test=smccc`.
pub fn smccc_rules() -> Result<(), String> {
    needs_hypervisor("smccc")?;
    let mut r = Rules { n: 0 };
    let me = me();
    let entry = crate::smp::secondary_entry_pa();

    // Only W0 is the function id.
    for fid in [hc::VERSION, hc::CALL_UID, hc::REVISION, hc::SMCCC_VERSION, psci::VERSION, psci::FEATURES] {
        let plain = call(fid, psci::CPU_ON_64, 0, 0);
        let junk = call(fid | JUNK, psci::CPU_ON_64, 0, 0);
        r.check("only W0 is the function id", plain == junk, || {
            format!("{fid:#x} answers {plain:x?}, with the upper half of x0 set {junk:x?}")
        })?;
    }
    r.check("CALL_UID is this hypervisor's", call(hc::CALL_UID, 0, 0, 0) == hc::UID, || "wrong UID".into())?;
    // REVISION: x0 = major, x1 = minor of this ABI.
    let rev = call(hc::REVISION, 0, 0, 0);
    r.check("REVISION answers major.minor", rev[0] == hc::ABI_VERSION && rev[1] == 0, || format!("{rev:x?}"))?;
    let v = call(hc::VERSION, 0, 0, 0);
    r.check("VERSION answers SUCCESS and the ABI version", v[0] == 0 && v[1] == hc::ABI_VERSION, || format!("{v:x?}"))?;
    let cc = call(hc::CALL_COUNT, 0, 0, 0)[0] as i64;
    r.check("CALL_COUNT is not supported", cc == error::NOT_SUPPORTED, || format!("{cc}"))?;
    r.check("SMCCC_VERSION is 1.1", call(hc::SMCCC_VERSION, 0, 0, 0)[0] == 0x1_0001, || "not 1.1".into())?;

    // SMCCC_ARCH_FEATURES agrees with what each arch call answers.
    for f in [
        hc::SMCCC_VERSION,
        hc::SMCCC_ARCH_FEATURES,
        hc::SMCCC_ARCH_SOC_ID,
        hc::SMCCC_ARCH_WORKAROUND_1,
        hc::SMCCC_ARCH_WORKAROUND_2,
        hc::SMCCC_ARCH_WORKAROUND_3,
    ] {
        let feat = ret0(hc::SMCCC_ARCH_FEATURES, call(hc::SMCCC_ARCH_FEATURES, f, 0, 0)[0]);
        let ans = ret0(f, call(f, hc::SMCCC_VERSION, 0, 0)[0]);
        let unsupported = ans == error::NOT_SUPPORTED;
        r.check("SMCCC_ARCH_FEATURES matches the call", (feat == error::NOT_SUPPORTED) == unsupported, || {
            format!("ARCH_FEATURES({f:#x}) = {feat}, the call answers {ans}")
        })?;
    }

    // PSCI_FEATURES agrees with what each PSCI function answers (the ones that would end the run
    // or stop this CPU are only asked about).
    for base in [0x8400_0000u64, 0xc400_0000] {
        for n in 0..=0x1f {
            let f = base | n;
            let feat = ret0(psci::FEATURES, call(psci::FEATURES, f, 0, 0)[0]);
            if PSCI_NEVER_CALLED.contains(&f) {
                let implemented = matches!(f, psci::CPU_OFF | psci::SYSTEM_OFF | psci::SYSTEM_RESET);
                r.check("PSCI_FEATURES of a call that ends the run", (feat == 0) == implemented, || {
                    format!("PSCI_FEATURES({f:#x}) = {feat}")
                })?;
                continue;
            }
            // Safe arguments: CPU_ON targets this CPU (ALREADY_ON), AFFINITY_INFO asks about it,
            // CPU_SUSPEND asks for standby (returns at once), the rest get zeros.
            let ans = match f {
                psci::CPU_ON_32 | psci::CPU_ON_64 => call(f, me, entry, 0),
                psci::AFFINITY_INFO_32 | psci::AFFINITY_INFO_64 => call(f, me, 0, 0),
                psci::FEATURES => call(f, psci::VERSION, 0, 0),
                _ => call(f, 0, 0, 0),
            };
            let ans = ret0(f, ans[0]);
            r.check(
                "PSCI_FEATURES matches the call",
                (feat == psci::NOT_SUPPORTED) == (ans == psci::NOT_SUPPORTED),
                || format!("PSCI_FEATURES({f:#x}) = {feat}, the call answers {ans}"),
            )?;
        }
    }
    let s = ret0(psci::CPU_SUSPEND_64, call(psci::CPU_SUSPEND_64, 1 << 16, entry, 0)[0]);
    r.check("CPU_SUSPEND refuses a power-down state", s == psci::INVALID_PARAMETERS, || format!("{s}"))?;
    for reserved in [1 << 17, 1 << 23, 1 << 26, 1 << 31] {
        let s = ret0(psci::CPU_SUSPEND_64, call(psci::CPU_SUSPEND_64, reserved, entry, 0)[0]);
        r.check("CPU_SUSPEND refuses reserved power_state bits", s == psci::INVALID_PARAMETERS, || {
            format!("power_state {reserved:#x} answered {s}")
        })?;
    }
    let s = ret0(psci::CPU_SUSPEND_64, call(psci::CPU_SUSPEND_64, 0, 0, 0)[0]);
    r.check("CPU_SUSPEND to standby succeeds", s == psci::SUCCESS, || format!("{s}"))?;
    // The entry point is checked before the target's state: this CPU (ALREADY_ON otherwise)
    // with an entry outside the guest's RAM, or not 4-byte aligned.
    for bad in [1 << 47, entry + 2] {
        let on = ret0(psci::CPU_ON_64, call(psci::CPU_ON_64, me, bad, 0)[0]);
        r.check("CPU_ON refuses an entry outside RAM or unaligned", on == psci::INVALID_ADDRESS, || {
            format!("CPU_ON entry {bad:#x} answered {on}")
        })?;
    }
    let f = ret0(psci::FEATURES, call(psci::FEATURES, hc::SMCCC_VERSION, 0, 0)[0]);
    r.check("PSCI_FEATURES(SMCCC_VERSION) says SMCCC 1.1 is there", f == 0, || format!("{f}"))?;

    // A 32-bit call reads W1..W3.
    let a = ret0(psci::AFFINITY_INFO_32, call(psci::AFFINITY_INFO_32, me | JUNK, JUNK, 0)[0]);
    r.check("AFFINITY_INFO_32 reads a 32-bit target", a == 0, || format!("answered {a}, not ON (0)"))?;
    let on = ret0(psci::CPU_ON_32, call(psci::CPU_ON_32, me | JUNK, entry | JUNK, JUNK)[0]);
    r.check("CPU_ON_32 reads a 32-bit target and entry", on == psci::ALREADY_ON, || {
        format!("CPU_ON_32 of this CPU with junk upper halves answered {on}, not ALREADY_ON")
    })?;
    let on = call(psci::CPU_ON_64, me | JUNK, entry, 0)[0] as i64;
    r.check("CPU_ON_64 reads all 64 bits of its target", on == psci::INVALID_PARAMETERS, || format!("{on}"))?;
    rt::println!("kernel: smccc: {} rules held", r.n);
    Ok(())
}

/// Function ids (W0) the storm aims at: every call the hypervisor implements, a few it does not.
const STORM_IDS: [u64; 24] = [
    hc::VERSION,
    hc::COUNTERS_RESET,
    hc::MEMSLOT_CREATE,
    hc::MEMSLOT_DELETE,
    hc::DIRTY_LOG_ENABLE,
    hc::DIRTY_LOG_DISABLE,
    hc::DIRTY_LOG_GET,
    hc::DIRTY_LOG_CLEAR,
    hc::WALKER_MODE,
    hc::COUNTER_READ,
    hc::END,
    hc::CALL_UID,
    hc::CALL_COUNT,
    hc::REVISION,
    hc::SMCCC_VERSION,
    hc::SMCCC_ARCH_FEATURES,
    hc::SMCCC_ARCH_WORKAROUND_1,
    psci::VERSION,
    psci::CPU_SUSPEND_64,
    psci::CPU_ON_32,
    psci::CPU_ON_64,
    psci::AFFINITY_INFO_32,
    psci::FEATURES,
    psci::MIGRATE_INFO_TYPE,
];

/// Calls the storm never makes: they end the run, stop the CPU, or print a report.
const STORM_NEVER: [u64; 8] = [
    hc::EXIT,
    hc::COUNTERS_REPORT,
    psci::CPU_OFF,
    psci::SYSTEM_OFF,
    psci::SYSTEM_RESET,
    psci::SYSTEM_RESET2_32,
    psci::SYSTEM_RESET2_64,
    psci::SYSTEM_SUSPEND_64,
];

const STORM_CALLS: u64 = 3000;
static STORM_DONE: AtomicU64 = AtomicU64::new(0);
static STORM_BAD: AtomicU64 = AtomicU64::new(0);
static STORM_FIRST_BAD: AtomicU64 = AtomicU64::new(0);

/// Implemented ids: any documented answer. Others: exactly NOT_SUPPORTED.
fn storm_answer_ok(fid: u64, x0: u64) -> bool {
    let r = ret0(fid, x0);
    let implemented = hc::Call::from_id(fid).is_some()
        || matches!(fid, hc::CALL_UID | hc::REVISION | hc::SMCCC_VERSION | hc::SMCCC_ARCH_FEATURES)
        || psci_implemented(fid);
    if implemented {
        // Success values (versions, UID words, AFFINITY_INFO states) or a documented error.
        r >= error::BUSY.min(psci::INVALID_ADDRESS)
    } else {
        r == error::NOT_SUPPORTED
    }
}

/// What the hypervisor's PSCI emulation implements (its PSCI_FEATURES answers 0).
pub fn psci_implemented(fid: u64) -> bool {
    matches!(
        fid,
        psci::VERSION
            | psci::CPU_SUSPEND_32
            | psci::CPU_SUSPEND_64
            | psci::CPU_ON_32
            | psci::CPU_ON_64
            | psci::AFFINITY_INFO_32
            | psci::AFFINITY_INFO_64
            | psci::MIGRATE_INFO_TYPE
            | psci::FEATURES
    )
}

fn storm_share(me: usize, _n: usize) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ (me as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut done = 0;
    while done < STORM_CALLS {
        let pick = next();
        let w0 = if pick % 10 < 7 { STORM_IDS[(pick >> 8) as usize % STORM_IDS.len()] } else { next() & 0xffff_ffff };
        if STORM_NEVER.contains(&w0) {
            continue;
        }
        // Upper half of x0 always set; x1..x7 arbitrary 64-bit values.
        let mut regs = [0u64; 8];
        regs[0] = (next() | 1 << 63) & !0xffff_ffff | w0;
        for r in regs.iter_mut().skip(1) {
            *r = next();
        }
        let ans = call8(regs);
        if !storm_answer_ok(function_id(regs[0]), ans[0]) && STORM_BAD.fetch_add(1, Ordering::Relaxed) == 0 {
            STORM_FIRST_BAD.store(regs[0], Ordering::Relaxed);
        }
        done += 1;
    }
    STORM_DONE.fetch_add(done, Ordering::Relaxed);
}

/// `test=storm`.
pub fn storm() -> Result<(), String> {
    needs_hypervisor("storm")?;
    let cpus = work::cpus();
    STORM_DONE.store(0, Ordering::Relaxed);
    work::run_everywhere(cpus, storm_share)?;
    let bad = STORM_BAD.load(Ordering::Relaxed);
    if bad != 0 {
        return Err(format!(
            "storm: {bad} calls answered an undocumented code (first: x0 = {:#x})",
            STORM_FIRST_BAD.load(Ordering::Relaxed)
        ));
    }
    rt::println!(
        "kernel: storm: {} calls with random x0..x7 from {cpus} CPUs at once answered, hypervisor still running",
        STORM_DONE.load(Ordering::Relaxed)
    );
    Ok(())
}

/// The mailbox a cycled CPU and this test share: word 0 = "I am up" (the CPU writes 1 with its
/// MMU off), word 1 = "you may power off" (this test writes 1). A cache line of its own.
#[repr(C, align(256))]
struct Mailbox([u64; 2]);
static mut MAILBOX: Mailbox = Mailbox([0; 2]);

// Entry of a CPU cycled by `test=cpu-cycle` (MMU and caches off, x0 = the mailbox's address):
// say "up", wait for the release, then PSCI CPU_OFF through the conduit its name says. Uses
// x0, x1, x9 only and no stack; CPU_OFF does not return (if it does, the CPU parks).
core::arch::global_asm!(
    r#"
.section .text.selftest_cycle, "ax"
.global selftest_cycle_entry_hvc
.global selftest_cycle_entry_smc
selftest_cycle_entry_hvc:
    mov     x9, #1
    b       1f
selftest_cycle_entry_smc:
    mov     x9, #0
1:  mov     x1, #1
    str     x1, [x0]
    dsb     sy
2:  ldr     x1, [x0, #8]
    cbz     x1, 2b
    movz    x0, #0x0002
    movk    x0, #0x8400, lsl #16
    cbz     x9, 3f
    hvc     #0
    b       4f
3:  smc     #0
4:  wfe
    b       4b
"#
);

extern "C" {
    fn selftest_cycle_entry_hvc();
    fn selftest_cycle_entry_smc();
}

fn mailbox_word(i: usize) -> u64 {
    let p = core::ptr::addr_of!(MAILBOX) as *const u64;
    // SAFETY: the other CPU writes with its MMU off (to memory); drop this CPU's stale line
    // first (the line holds nothing this CPU wrote since its last clean).
    unsafe {
        rt::cache::invalidate_to_poc(p as u64, 16);
        core::ptr::read_volatile(p.add(i))
    }
}

fn set_mailbox(up: u64, release: u64) {
    let p = core::ptr::addr_of_mut!(MAILBOX) as *mut u64;
    // SAFETY: this test owns the mailbox; the other CPU only reads word 1 and writes word 0
    // while this one waits; cleaned to memory for a reader with its MMU off.
    unsafe {
        core::ptr::write_volatile(p, up);
        core::ptr::write_volatile(p.add(1), release);
    }
    rt::cache::clean_invalidate_to_poc(p as u64, 16);
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) -> Result<(), String> {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    let deadline = CNTPCT_EL0.get() + 10 * CNTFRQ_EL0.get();
    while !cond() {
        if CNTPCT_EL0.get() > deadline {
            return Err(format!("cpu-cycle: {what} did not happen within 10 s"));
        }
        core::hint::spin_loop();
    }
    Ok(())
}

const AFF_ON: i64 = 0;
const AFF_OFF: i64 = 1;

/// `test=cpu-cycle`.
pub fn cpu_cycle() -> Result<(), String> {
    needs_hypervisor("cpu-cycle")?;
    let k = KERNEL.get().unwrap();
    let affinity = |mpidr: u64| call(psci::AFFINITY_INFO_64, mpidr, 0, 0)[0] as i64;
    let states: Vec<(u64, i64)> =
        k.board.cpus.iter().take(rt::MAX_CPUS).map(|c| (c.mpidr, affinity(c.mpidr))).collect();
    let on = states.iter().filter(|(_, s)| *s == AFF_ON).count();
    let off: Vec<u64> = states.iter().filter(|(_, s)| *s == AFF_OFF).map(|(m, _)| *m).collect();
    if on != work::cpus() {
        return Err(format!("cpu-cycle: AFFINITY_INFO says {on} CPUs are on, {} are online", work::cpus()));
    }
    let Some(&target) = off.first() else {
        return Err(
            "cpu-cycle: no CPU is off (boot with cycle.cpu=N, or bbml2_test_disallow_cpu=N on a BBML2 machine)".into(),
        );
    };
    // The started CPU's MMU is off: PSCI wants the entry's physical address.
    let entry = crate::mm::layout::image_phys(match smccc::conduit() {
        Conduit::Hvc => selftest_cycle_entry_hvc as *const () as u64,
        Conduit::Smc => selftest_cycle_entry_smc as *const () as u64,
    });
    let mailbox = hyp::virt_to_phys(core::ptr::addr_of!(MAILBOX) as u64).ok_or("cpu-cycle: mailbox not mapped")?;
    const CYCLES: u32 = 8;
    let (mut pending, mut already) = (0, 0);
    for i in 0..CYCLES {
        set_mailbox(0, 0);
        // Odd cycles: CPU_ON_32 with junk in the upper halves of every argument.
        let r = if i % 2 == 1 {
            ret0(psci::CPU_ON_32, call(psci::CPU_ON_32, target | JUNK, entry | JUNK, mailbox | JUNK)[0])
        } else {
            call(psci::CPU_ON_64, target, entry, mailbox)[0] as i64
        };
        if r != psci::SUCCESS {
            return Err(format!("cpu-cycle {i}: CPU_ON of {target:#x} answered {r}"));
        }
        // At once again: the CPU is starting (or already up, waiting for its release).
        match call(psci::CPU_ON_64, target, entry, mailbox)[0] as i64 {
            psci::ON_PENDING => pending += 1,
            psci::ALREADY_ON => already += 1,
            other => return Err(format!("cpu-cycle {i}: CPU_ON of a starting CPU answered {other}")),
        }
        wait_for("the cycled CPU's hello", || mailbox_word(0) == 1)?;
        let again = call(psci::CPU_ON_64, target, entry, mailbox)[0] as i64;
        if again != psci::ALREADY_ON {
            return Err(format!("cpu-cycle {i}: CPU_ON of a running CPU answered {again}"));
        }
        if affinity(target) != AFF_ON {
            return Err(format!("cpu-cycle {i}: AFFINITY_INFO of a running CPU is not ON"));
        }
        set_mailbox(1, 1);
        wait_for("AFFINITY_INFO OFF after CPU_OFF", || affinity(target) == AFF_OFF)?;
    }
    rt::println!(
        "kernel: cpu-cycle: {CYCLES} CPU_OFF/CPU_ON cycles of CPU {target:#x}; CPU_ON while it started: \
         {pending} ON_PENDING, {already} ALREADY_ON; AFFINITY_INFO answered ON and OFF"
    );
    Ok(())
}

/// `test=pool-calls`.
pub fn pool_calls(o: &TestOptions) -> Result<(), String> {
    needs_hypervisor("pool-calls")?;
    let Some((frame, slot)) = o.pools else {
        return Err("test=pool-calls needs pools.frame=IPA and pools.slot=IPA".into());
    };
    let base = crate::selftest::memslot::slot_window();
    let id =
        hyp::memslot_create(base, 2 << 20, hc::MEMSLOT_BACKING_4K).map_err(|e| format!("pool-calls: create: {e}"))?;
    hyp::dirty_log_enable(id, 0).map_err(|e| format!("pool-calls: enable: {e}"))?;
    let mut n = 0;
    for (what, ipa) in [("frame pool", frame), ("slot pool", slot)] {
        let ipa = ipa & !0xfff;
        for backing in [hc::MEMSLOT_BACKING_4K, hc::MEMSLOT_BACKING_2M] {
            let size = hc::backing_size(backing).unwrap_or(4096);
            let r = hyp::raw(hc::MEMSLOT_CREATE, ipa & !(size - 1), size, backing);
            if r != error::DENIED {
                return Err(format!("pool-calls: a memslot over the {what} ({ipa:#x}) answered {r}, not DENIED"));
            }
            n += 1;
        }
        let r = hyp::raw(hc::DIRTY_LOG_GET, id, ipa, 512 / 8);
        if r != error::DENIED {
            return Err(format!("pool-calls: a dirty bitmap into the {what} ({ipa:#x}) answered {r}, not DENIED"));
        }
        let r = hyp::raw(hc::DIRTY_LOG_CLEAR, id, ipa, 64 << 32);
        if r != error::DENIED {
            return Err(format!("pool-calls: a clear mask in the {what} ({ipa:#x}) answered {r}, not DENIED"));
        }
        n += 2;
    }
    hyp::dirty_log_disable(id).map_err(|e| format!("pool-calls: disable: {e}"))?;
    hyp::memslot_delete(id).map_err(|e| format!("pool-calls: delete: {e}"))?;
    rt::println!("kernel: pool-calls: {n} memslots and buffers over the frame pool and the slot pool refused (DENIED)");
    Ok(())
}

/// `test=touch`.
pub fn touch(o: &TestOptions) -> Result<String, String> {
    let ipa = o.touch_ipa.ok_or("test=touch needs touch.ipa=IPA")?;
    let va = crate::mm::map_phys_page(ipa)?;
    rt::println!("kernel: touch: reading IPA {ipa:#x} (mapped at {va:#x})");
    // SAFETY: deliberately reads an IPA the guest may not own; the hypervisor must stop it.
    let v = unsafe { core::ptr::read_volatile(va as *const u64) };
    Err(format!("touch: reading IPA {ipa:#x} returned {v:#x}: nothing stopped it"))
}

/// `test=exit-claim`.
pub fn exit_claim() -> ! {
    rt::println!("kernel: exit-claim: exiting with status 5 (a hypervisor fault, which a guest may not claim)");
    crate::arch::power::exit(abi::exit::HYP_FAULT)
}
