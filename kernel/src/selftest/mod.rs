//! Self-tests chosen on the command line (`test=NAME`), for the integration tests:
//!
//! * `test=panic`: a Rust panic (message, backtrace, non-zero exit).
//! * `test=undef`: an undefined instruction (exception report, non-zero exit).
//! * `test=touch-hyp`: read the first address of the hypervisor's memory (right above guest
//!   RAM, or a hole in it); with `hyp.on-fault=stop` the hypervisor must report the IPA and end
//!   the run.
//! * `test=stray-access`: the same read with the hypervisor's default `hyp.on-fault=inject`: it
//!   must come back to this kernel as a synchronous external abort, which the fault catcher
//!   sees.
//! * `test=power-hidden`: the board's power controller, which the hypervisor keeps to end the
//!   run (the Pi 4's PM watchdog), is disabled in this guest's DTB and its registers are not
//!   the guest's: a read of them comes back as a synchronous external abort, as in
//!   `stray-access`.
//! * `test=sve-state`: SVE (and SME) registers at the largest vector length survive traps to
//!   the hypervisor; `test=mte-regs`: MTE's registers are reachable (`cpu_state`).
//! * `test=mem-perms`: `set_memory_*` permissions hold through the mapping and the linear alias
//!   (denied accesses are caught and counted), the image is W^X (`mem_perms`).
//! * `test=memslot-errors`, `test=dirty-log`, `test=memslot-nopool`: the hypervisor's memslots and dirty logging
//!   (`memslot`).
//! * `test=pmu`: the PMU driver's checks on the CPU (`perf::selftest`).
//! * `test=irq`: the timer tick and SGIs on every CPU (`irq`).
//! * `test=pan`: EL1 may not read user pages with ordinary loads (PAN) nor execute them (`pan`).
//! * `test=pgtable-groups`: `lib/pgtable`'s assembly for groups of 16 descriptors (the protect's
//!   runs, the contpte fold and unfold) does on this CPU what its portable spec does, on every
//!   drawn case (`pgtable::raw::check_against_spec`).
//! * `test=bad-calls`: hypercalls and PSCI calls with wrong ids and arguments must each return
//!   the documented error, and the hypervisor must keep running.
//! * `test=smccc`, `test=storm`, `test=cpu-cycle`, `test=pool-calls`, `test=touch`,
//!   `test=exit-claim`: the SMCCC rules, call storms, CPU cycles and the hypervisor's memory
//!   (`calls`).
//!
//! Several run in order with `test=a,b`; one that ends the run ([`ENDS_RUN`]) must come last.

pub mod calls;
mod cpu_state;
mod irq;
mod mem_perms;
pub mod memslot;
mod pan;

use crate::arch::machine::KERNEL;
use alloc::format;
use alloc::string::String;
use kcore::options::{Options, TestOptions};

/// What runs each self-test (its parameters are the argument), in the order of
/// `abi::names::SELFTESTS` (the names `test=` accepts: add a new one there and here);
/// checked against that list at compile time.
type Runner = fn(&TestOptions) -> Result<(), String>;
const RUNNERS: [(&str, Runner); 24] = [
    ("panic", |_| panic!("deliberate panic (test=panic)")),
    ("undef", |_| {
        // SAFETY: deliberately executes a permanently undefined instruction; the exception
        // handler reports it and ends the run.
        unsafe { core::arch::asm!("udf #0") };
        Ok(())
    }),
    ("bad-return", |_| {
        // SAFETY: deliberately returns to address 1, as a corrupted frame record would (the
        // fatal report must say so: ELR == x30, outside the text); the run ends there.
        unsafe { core::arch::asm!("mov x30, #1", "ret", options(noreturn)) }
    }),
    ("touch-hyp", |_| touch_hole()),
    ("stray-access", |_| stray_access()),
    ("power-hidden", |_| power_hidden()),
    ("sve-state", |_| cpu_state::sve_state()),
    ("mte-regs", |_| cpu_state::mte_regs()),
    ("touch", |o| Err(calls::touch(o)?)),
    ("exit-claim", |_| calls::exit_claim()),
    ("bad-calls", |_| bad_calls()),
    ("smccc", |_| calls::smccc_rules()),
    ("storm", |_| calls::storm()),
    ("cpu-cycle", |_| calls::cpu_cycle()),
    ("pool-calls", |o| calls::pool_calls(o)),
    ("mem-perms", |_| mem_perms::run()),
    ("memslot-errors", |_| memslot::errors()),
    ("dirty-log", memslot::dirty),
    ("memslot-nopool", |_| memslot::no_pool()),
    ("pmu", |_| crate::perf::selftest::run()),
    ("irq", |_| irq::run()),
    ("pan", |_| pan::run()),
    ("percpu", |_| crate::percpu::selftest::run()),
    ("pgtable-groups", |_| pgtable_groups()),
];
const _: () = assert!(abi::names::table_matches(&RUNNERS, abi::names::SELFTESTS));

/// Runs the self-tests `test=` named, in order.
pub fn run(o: &Options) -> Result<(), String> {
    for &name in &o.tests.names {
        rt::println!("kernel: self-test {name}");
        // The boot-word table accepts only NAMES, and RUNNERS has each.
        let (_, run) = RUNNERS.iter().find(|(n, _)| *n == name).ok_or_else(|| format!("unknown self-test {name:?}"))?;
        run(&o.tests)?;
    }
    Ok(())
}

/// The first byte of the hypervisor's memory: a hole in guest RAM, or (the hypervisor moves
/// itself to the top of RAM) the first byte above it.
pub fn hypervisor_memory() -> Result<u64, String> {
    let mem = &KERNEL.get().unwrap().board.memory;
    if KERNEL.get().unwrap().host != crate::arch::power::Host::Hypervisor {
        return Err("no hypervisor memory to touch: not running under the hypervisor".into());
    }
    mem.windows(2)
        .find(|w| w[0].end() < w[1].base)
        .map(|w| w[0].end())
        .or_else(|| mem.last().map(|r| r.end()))
        .ok_or_else(|| "no guest RAM".into())
}

fn touch_hole() -> Result<(), String> {
    let hole = hypervisor_memory()?;
    // Not RAM: map its first page (stage 1 only) so the access reaches stage 2.
    let va = crate::mm::map_phys_page(hole)?;
    rt::println!("kernel: reading {hole:#x} (mapped at {va:#x}), the first byte of the hypervisor's memory");
    // SAFETY: deliberately reads memory the guest does not own; the hypervisor must stop it.
    let v = unsafe { core::ptr::read_volatile(va as *const u64) };
    Err(format!("read {hole:#x} returned {v:#x}: the hypervisor did not stop an access to its memory"))
}

fn stray_access() -> Result<(), String> {
    let hole = hypervisor_memory()?;
    expect_external_abort(hole, "the hypervisor's memory", "stray access")
}

/// `test=power-hidden`: the PM watchdog's node is in this guest's DTB, disabled, and a read of
/// its RSTC register (harmless: a read) is refused by the hypervisor.
fn power_hidden() -> Result<(), String> {
    let k = KERNEL.get().unwrap();
    if k.host != crate::arch::power::Host::Hypervisor {
        return Err("test=power-hidden needs the hypervisor".into());
    }
    let pm = k.board.devices.iter().find(|d| d.is_compatible(board::PM_WATCHDOG)).ok_or(
        "power-hidden: the DTB has no PM watchdog node (a board without one keeps no power controller from its guest)",
    )?;
    if pm.status.is_okay() {
        return Err(format!("power-hidden: {} is enabled in the guest's DTB: the guest would drive it", pm.path));
    }
    let base = pm.regions.first().ok_or_else(|| format!("power-hidden: {} has no reg", pm.path))?.base;
    // RSTC, the watchdog's reset control (offset 0x1c of the "pm" block).
    expect_external_abort(base + 0x1c, &format!("{}'s RSTC", pm.path), "power-hidden")?;
    rt::println!("kernel: power-hidden: {} is disabled and its registers are the hypervisor's", pm.path);
    Ok(())
}

/// Reads 4 bytes at `hole` (`what` for messages), mapped for this read, and expects a synchronous external
/// abort at it, caught by the kernel's fault handler (said on a line starting with `label`).
fn expect_external_abort(hole: u64, what: &str, label: &str) -> Result<(), String> {
    let va = crate::mm::map_phys_page(hole & !0xfff)? + (hole & 0xfff);
    rt::println!("kernel: reading {hole:#x} (mapped at {va:#x}), {what}, expecting an external abort");
    // 32 bits: a device register answers such a read (QEMU's Pi 4 PM block refuses 64-bit ones).
    match crate::mm::fault::probe_read32(va) {
        Ok(v) => Err(format!("read {hole:#x} returned {v:#x}: no abort reached the guest")),
        Err(f) if f.is_external_abort() && f.far == va => {
            rt::println!(
                "kernel: {label}: synchronous external abort caught by the kernel's handler (ESR {:#x}, FAR {:#x})",
                f.esr,
                f.far
            );
            Ok(())
        }
        Err(f) => Err(format!(
            "read {hole:#x}: expected an external abort at FAR {va:#x}, got {} (ESR {:#x}, FAR {:#x})",
            f.describe(),
            f.esr,
            f.far
        )),
    }
}

fn expect(what: &str, got: u64, want: i64) -> Result<(), String> {
    if got as i64 == want {
        Ok(())
    } else {
        Err(format!("{what}: returned {} ({}), expected {want}", got as i64, abi::error::name(got as i64)))
    }
}

/// `test=pgtable-groups`: 2000 drawn cases of each group operation, assembly against spec.
fn pgtable_groups() -> Result<(), String> {
    let n = pgtable::raw::check_against_spec(0x9e37_79b9_7f4a_7c15, 2000)?;
    rt::println!("kernel: pgtable-groups: {n} comparisons of the assembly with its spec agree");
    Ok(())
}

fn bad_calls() -> Result<(), String> {
    use crate::arch::smccc::call;
    use abi::{error, hypercall as hc, psci};
    let k = KERNEL.get().unwrap();
    if k.host != crate::arch::power::Host::Hypervisor {
        return Err("test=bad-calls needs the hypervisor".into());
    }
    let me = { rt::mpidr_affinity() };
    let entry = crate::mm::layout::image_phys(rt::start::secondary_entry_addr() as u64);
    let hole = k.board.memory.windows(2).find(|w| w[0].end() < w[1].base).map(|w| w[0].end()).unwrap_or(0);
    let v = call(hc::VERSION, 0, 0, 0);
    expect("VERSION", v[0], error::SUCCESS)?;
    if v[1] != hc::ABI_VERSION {
        return Err(format!("VERSION: ABI {} , expected {}", v[1], hc::ABI_VERSION));
    }
    expect("unknown vendor call", call(0xc600_00ff, 1, 2, 3)[0], error::NOT_SUPPORTED)?;
    expect("unknown owner", call(0x1234_5678, 0, 0, 0)[0], error::NOT_SUPPORTED)?;
    expect("unknown PSCI function", call(0x8400_001f, 0, 0, 0)[0], psci::NOT_SUPPORTED)?;
    expect("CPU_ON unknown MPIDR", call(psci::CPU_ON_64, 0xff_00ff_00ff, entry, 0)[0], psci::INVALID_PARAMETERS)?;
    expect("CPU_ON already-on CPU", call(psci::CPU_ON_64, me, entry, 0)[0], psci::ALREADY_ON)?;
    if hole != 0 {
        let other = k.board.cpus.iter().map(|c| c.mpidr).find(|m| *m != me).unwrap_or(me);
        expect("CPU_ON entry in hypervisor memory", call(psci::CPU_ON_64, other, hole, 0)[0], psci::INVALID_ADDRESS)?;
        expect("CPU_ON misaligned entry", call(psci::CPU_ON_64, other, entry + 2, 0)[0], psci::INVALID_ADDRESS)?;
    }
    // A storm of arbitrary ids and arguments (skipping the calls that end the run or stop a CPU).
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut n = 0;
    for _ in 0..2000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let owner = [0x8000_0000u64, 0x8400_0000, 0xc400_0000, 0xc600_0000, 0x8600_0000, 0xc500_0000][(x % 6) as usize];
        let fid = owner | ((x >> 8) & 0x3f);
        if [hc::EXIT, psci::SYSTEM_OFF, psci::SYSTEM_RESET, psci::CPU_OFF, psci::CPU_SUSPEND_32, psci::CPU_SUSPEND_64]
            .contains(&fid)
            || fid == psci::CPU_ON_32
            || fid == psci::CPU_ON_64
            || fid == hc::COUNTERS_REPORT
        {
            continue;
        }
        call(fid, x, x.rotate_left(17), !x);
        n += 1;
    }
    rt::println!("kernel: bad-calls: {n} arbitrary calls and 8 checked ones answered, hypervisor still running");
    Ok(())
}
