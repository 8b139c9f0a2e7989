//! Bringing up the other CPUs with PSCI CPU_ON.

use crate::arch::cpuinfo::CpuInfo;
use crate::arch::machine::KERNEL;
use crate::arch::power::Host;
use crate::arch::smccc;
use crate::mm;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

static ONLINE: AtomicUsize = AtomicUsize::new(1);

/// How long the boot CPU waits for the others, in counter ticks per second (CNTFRQ).
const WAIT_SECONDS: u64 = 10;

/// Why the other CPUs did not all come up ([`start_secondaries`]). `Display` is the boot's
/// message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmpError {
    /// PSCI CPU_ON refused CPU `idx` with `code`.
    CpuOn { idx: usize, mpidr: u64, code: i64 },
    /// CPU `idx` did not count itself online within [`WAIT_SECONDS`].
    Timeout { idx: usize, mpidr: u64 },
    /// CPU `idx` refused itself but PSCI AFFINITY_INFO did not say it was off in time (`state`:
    /// the last answer).
    NotOff { idx: usize, mpidr: u64, state: i64 },
    /// These CPUs refused to join without being asked to (BBML2 disagreement).
    Refused { cpus: Vec<usize> },
    /// `online` CPUs came up but only `parked` parked in the work loop in time.
    NotParked { online: usize, parked: usize },
    /// `cycle.cpu=idx` named the boot CPU, which cannot be left off.
    BootCpuLeftOff { idx: usize },
}

impl fmt::Display for SmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmpError::CpuOn { idx, mpidr, code } => {
                write!(f, "PSCI CPU_ON for CPU {idx} (MPIDR {mpidr:#x}) failed: {code}")
            }
            SmpError::Timeout { idx, mpidr } => {
                write!(f, "CPU {idx} (MPIDR {mpidr:#x}) did not come up within {WAIT_SECONDS} s")
            }
            SmpError::NotOff { idx, mpidr, state } => write!(
                f,
                "CPU {idx} (MPIDR {mpidr:#x}) refused to come up but was not off within {WAIT_SECONDS} s (AFFINITY_INFO {state})"
            ),
            SmpError::Refused { cpus } => write!(
                f,
                "CPU(s) {cpus:?} refused to join: a run with fewer CPUs than the device tree lists is a failure \
                 unless asked for (bbml2=off lets every CPU join; bbml2_test_disallow_cpu=N refuses one on purpose)"
            ),
            SmpError::NotParked { online, parked } => {
                write!(f, "{online} CPUs online but only {parked} parked within {WAIT_SECONDS} s")
            }
            SmpError::BootCpuLeftOff { idx } => {
                write!(f, "cycle.cpu={idx} names the boot CPU, which cannot be left off")
            }
        }
    }
}

/// The boot reports errors as text.
impl From<SmpError> for String {
    fn from(e: SmpError) -> String {
        e.to_string()
    }
}

/// Starts every CPU of the DTB (one at a time, so banners come out in order); returns how many
/// are online. A CPU that PSCI refuses or that does not show up in time is an error; a CPU that
/// refuses itself with its MMU off (BBML2 disagreement, see `mm::early::accept_cpu`) is
/// reported here and not counted, and is an error too unless `bbml2_test_disallow_cpu` asked
/// for it. CPU `leave_off` (`cycle.cpu=N`) is not started: it stays off for `test=cpu-cycle`.
pub fn start_secondaries(leave_off: Option<usize>) -> Result<usize, SmpError> {
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    let k = KERNEL.get().unwrap();
    let me = rt::mpidr_affinity();
    let entry = secondary_entry_pa();
    let mut unasked = Vec::new();
    for (idx, cpu) in k.board.cpus.iter().enumerate().take(rt::MAX_CPUS) {
        if cpu.mpidr == me {
            if leave_off == Some(idx) {
                return Err(SmpError::BootCpuLeftOff { idx });
            }
            continue;
        }
        if leave_off == Some(idx) {
            rt::println!("kernel: CPU {idx} (MPIDR {:#x}) left off at boot (cycle.cpu={idx})", cpu.mpidr);
            continue;
        }
        let before = ONLINE.load(Ordering::Acquire);
        let r = smccc::call(abi::psci::CPU_ON_64, cpu.mpidr, entry, idx as u64)[0] as i64;
        if r != abi::psci::SUCCESS {
            return Err(SmpError::CpuOn { idx, mpidr: cpu.mpidr, code: r });
        }
        let deadline = CNTPCT_EL0.get() + WAIT_SECONDS * CNTFRQ_EL0.get();
        loop {
            if ONLINE.load(Ordering::Acquire) != before {
                break;
            }
            if let Some((why, midr)) = crate::mm::early::refusal_of(idx) {
                rt::println!(
                    "kernel: CPU {idx} refused: the system uses BBML2 but this CPU ({}, MIDR {midr:#x}) is not allowed: {why}; it powers off",
                    pgtable::cpu::Midr(midr),
                );
                wait_until_off(idx, cpu.mpidr, deadline)?;
                // Fewer CPUs than the device tree lists is a failure, unless the user asked.
                if why != crate::mm::early::RefusalReason::TestDisallowed {
                    unasked.push(idx);
                }
                break;
            }
            if CNTPCT_EL0.get() > deadline {
                return Err(SmpError::Timeout { idx, mpidr: cpu.mpidr });
            }
            core::hint::spin_loop();
        }
    }
    if !unasked.is_empty() {
        return Err(SmpError::Refused { cpus: unasked });
    }
    // A CPU counts itself online just before it parks in `work::secondary_loop`: wait until each
    // has parked, so `work::cpus()` (what the self-tests run on) agrees with the CPUs online.
    let online = ONLINE.load(Ordering::Acquire);
    let deadline = CNTPCT_EL0.get() + WAIT_SECONDS * CNTFRQ_EL0.get();
    while crate::work::cpus() < online {
        if CNTPCT_EL0.get() > deadline {
            return Err(SmpError::NotParked { online, parked: crate::work::cpus() });
        }
        core::hint::spin_loop();
    }
    Ok(online)
}

/// Waits until PSCI AFFINITY_INFO says the refused CPU `idx` is off. It records its refusal
/// before it calls CPU_OFF, so the refusal alone does not say it is off yet; whatever runs
/// next (a self-test that counts the CPUs that are on, a CPU_ON of it) must find it off.
/// Waits until `deadline` (the CPU's own 10 s start window) at most.
fn wait_until_off(idx: usize, mpidr: u64, deadline: u64) -> Result<(), SmpError> {
    use aarch64_cpu::registers::{Readable, CNTPCT_EL0};
    loop {
        let state = smccc::call(abi::psci::AFFINITY_INFO_64, mpidr, 0, 0)[0] as i64;
        if state == abi::psci::AFFINITY_OFF {
            return Ok(());
        }
        if CNTPCT_EL0.get() > deadline {
            return Err(SmpError::NotOff { idx, mpidr, state });
        }
        core::hint::spin_loop();
    }
}

/// Where a CPU started by PSCI CPU_ON begins: `rt`'s secondary entry at its physical address
/// (the CPU starts with its MMU off).
pub fn secondary_entry_pa() -> u64 {
    crate::mm::layout::image_phys(rt::start::secondary_entry_addr() as u64)
}

/// A CPU started by PSCI, MMU off, at the image's physical address (see `mm::early`).
#[no_mangle]
extern "C" fn rt_secondary_main(cpu: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL1};
    VBAR_EL1.set(rt::trap::vectors_el1());
    rt::entry::el1(&rt::features::Features::from_ids(&rt::features::IdRegs::read()));
    crate::mm::early::secondary(cpu, rt::pc_relative!(secondary_high))
}

/// A CPU started by PSCI, at the image's virtual address with its MMU on.
extern "C" fn secondary_high(cpu: usize) -> ! {
    use aarch64_cpu::registers::{Writeable, VBAR_EL1};
    VBAR_EL1.set(rt::trap::vectors_el1());
    set_this_cpu(cpu);
    crate::mm::secondary_mmu_on();
    crate::percpu::init_cpu(cpu);
    if let Err(e) = crate::irq::init_cpu(cpu) {
        rt::console::panic_print(format_args!("kernel: CPU {cpu}: {e}\n"));
        crate::arch::power::exit(abi::exit::GUEST_FAILURE);
    }
    banner(cpu);
    ONLINE.fetch_add(1, Ordering::AcqRel);
    crate::work::secondary_loop()
}

/// Points TPIDR_EL1 at this CPU's per-CPU area (boot CPU 0, others their PSCI context id),
/// whose first word is its index, and SP_EL0 at its idle thread's info (`sync`).
pub fn set_this_cpu(cpu: usize) {
    crate::percpu::set_base(cpu);
    crate::arch::sync::set_thread(crate::arch::sync::idle_thread(cpu));
}

/// Prints this CPU's banner line and report record.
pub fn banner(cpu: usize) {
    let i = CpuInfo::read();
    let k = KERNEL.get().expect("banner after boot");
    let decision = mm::bbml2_decision();
    let pa_bits =
        i.pa_bits().map_or_else(|| alloc::format!("reserved PARange {}", i.parange), |b| alloc::format!("{b}-bit PA"));
    rt::println!(
        "kernel: CPU {cpu} up at EL{} | MIDR {:#010x} ({}) | MPIDR {:#x} | BBM level {} | {} MiB | bbml2 {} ({decision}) | {} | tlbi-range {} | PMUv{} | {pa_bits}",
        i.el,
        i.midr.0,
        i.midr,
        i.mpidr,
        i.bbm(),
        k.mem_bytes >> 20,
        if decision.enabled { "yes" } else { "no" },
        mm::banner_modes(),
        if i.tlbi_range() { "yes" } else { "no" },
        i.pmuver,
    );
    let mut r = abi::report::Record::new("banner");
    r.u64("cpu", cpu as u64)
        .u64("el", i.el)
        .hex("midr", i.midr.0)
        .str("core", i.midr.name())
        .hex("mpidr", i.mpidr)
        .u64("bbm", i.bbm().into())
        .u64("mem_mib", k.mem_bytes >> 20)
        .bool("bbml2", decision.enabled)
        .bool("bbml2_capable", i.bbml2().is_ok())
        .str("rodata", mm::info().rodata.as_str())
        .bool("contpte", mm::contpte())
        .u64("linear_table_pages", mm::info().linear_table_pages)
        .bool("tlbi_range", i.tlbi_range())
        .u64("pmuver", i.pmuver)
        .bool("hypervisor", k.host == Host::Hypervisor);
    rt::println!("{r}");
}
