//! The benchmarks, as data: the machines each runs on, the fields compared, their time limits
//! and the boot words they need. `bench` runs them, `perf` runs their workloads, `plot` reads
//! their rows.

use crate::machine::Size;

/// A `virt` setup a guest benchmark runs on: its label, CPU model, GIC, vCPUs and the guest's RAM.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    pub label: &'static str,
    pub cpu: &'static str,
    pub gic: u8,
    pub smp: u32,
    pub mem: Size,
}

/// QEMU `max`: FEAT_BBM level 2, allow-listed for BBML2.
pub const MAX: Setup = Setup { label: "max", cpu: "max", gic: 3, smp: 4, mem: Size::gib(1) };
/// The Raspberry Pi 5 core: no FEAT_BBM.
pub const A76: Setup = Setup { label: "a76", cpu: "cortex-a76", gic: 2, smp: 4, mem: Size::gib(1) };
/// `max` and `cortex-a76` with 512 MiB, 1 GiB and 4 GiB of RAM (linear-map table pages).
pub const MEM_MATRIX: &[Setup] = &[
    Setup { label: "max-512M", mem: Size::mib(512), ..MAX },
    Setup { label: "a76-512M", mem: Size::mib(512), ..A76 },
    Setup { label: "max-1G", ..MAX },
    Setup { label: "a76-1G", ..A76 },
    Setup { label: "max-4G", mem: Size::gib(4), ..MAX },
    Setup { label: "a76-4G", mem: Size::gib(4), ..A76 },
];

/// An in-guest benchmark.
#[derive(Debug, Clone, Copy)]
pub struct GuestBench {
    pub name: &'static str,
    pub about: &'static str,
    pub machines: &'static [Setup],
    /// Fields shown in the side-by-side table (all fields are in the per-machine tables).
    pub compare: &'static [&'static str],
    /// Per-boot time limit.
    pub timeout_s: u64,
    /// Whether it has a Linux side (`--peer linux`: an EL0 workload of `lib/el0bench`).
    pub peer: bool,
    /// Whether its rows measure the hypervisor (its exits, its stage 2): it cannot run with
    /// the kernel alone (`--no-hypervisor`).
    pub hypervisor: bool,
}

/// Every in-guest benchmark, in the order of `abi::names::BENCHES` (the kernel's `bench=`
/// names; a test keeps them equal).
pub const GUEST_BENCHES: &[GuestBench] = &[
    GuestBench {
        name: "exits",
        about: "cost of a guest exit: null hypercall vs PSCI call forwarded to firmware",
        machines: &[MAX, A76],
        compare: &["median_ns", "median_insns", "vs_null"],
        timeout_s: 300,
        peer: false,
        hypervisor: true,
    },
    GuestBench {
        name: "linear-map",
        about: "linear-map table pages with and without BBML2 vs the limit; set_memory_ro/rw storm",
        machines: MEM_MATRIX,
        compare: &["table_pages", "median_ns", "tlbi_per_call"],
        timeout_s: 600,
        peer: false,
        hypervisor: false,
    },
    GuestBench {
        name: "contpte",
        about: "contpte convert (fold/unfold) and a one-page ro/rw workload, with and without the TLBI",
        machines: &[MAX, A76],
        compare: &["median_ns", "median_insns", "tlbi_per_op", "vs_with_tlbi_ns", "vs_with_tlbi_insns"],
        timeout_s: 600,
        peer: false,
        hypervisor: false,
    },
    GuestBench {
        name: "split",
        about: "stage-2 eager split for dirty logging, 64 GiB memslot: baseline walker, SKIP_LEVEL3, summary bit",
        // One CPU, 4 GiB: the hypervisor's frame pool follows RAM (256 MiB), the slot pool is 1 GiB.
        machines: &[Setup { label: "max-4G", smp: 1, mem: Size::gib(4), ..MAX }],
        compare: &[
            "median_us",
            "split_us",
            "split_visits_l3",
            "insns",
            "ratio",
            "split_ratio",
            "insn_ratio",
            "split_ns_per_visit",
            "split_insns_per_visit",
            "ns_per_pte",
            "insns_per_pte",
        ],
        timeout_s: 3600,
        peer: false,
        hypervisor: true,
    },
    GuestBench {
        name: "mprotect",
        about: "EL0 workload (lib/el0bench): null call, sched_yield, page fault, mmap+touch+munmap, mprotect NONE<->RW with and without flush elision, RO->RW with and without lazy relaxation (+ its faults); --peer linux",
        // A broadcast TLBI costs more with more CPUs: 1 and 4 vCPUs of each core.
        machines: &[
            Setup { label: "max-1cpu", smp: 1, ..MAX },
            Setup { label: "max-4cpu", ..MAX },
            Setup { label: "a76-1cpu", smp: 1, ..A76 },
            Setup { label: "a76-4cpu", ..A76 },
        ],
        compare: &["median_ns", "median_insns", "tlbi_per_step", "ratio_ns", "ratio_insns"],
        timeout_s: 1200,
        peer: true,
        hypervisor: false,
    },
    GuestBench {
        name: "percpu",
        about: "this_cpu_add/cmpxchg, context switch, counter storm, task create/exit, syscall workload: TPIDR_EL1 + preempt guard vs the per-CPU-root window, and the roots' memory",
        machines: &[
            Setup { label: "max-1cpu", smp: 1, ..MAX },
            Setup { label: "max-4cpu", ..MAX },
            Setup { label: "max-8cpu", smp: 8, ..MAX },
        ],
        compare: &["ns_per", "insns_per", "ratio_ns", "ratio_insns"],
        timeout_s: 1200,
        peer: false,
        hypervisor: false,
    },
];

/// Boot arguments a guest benchmark needs besides `bench=NAME`: the memslot pool for `split`,
/// and one iteration under `--icount` (its counts are deterministic; several without); the
/// rounds of an EL0 benchmark with a peer (both sides run as many).
pub fn extra_bootargs(name: &str, icount: bool) -> String {
    match (name, icount) {
        ("split", true) => " hyp.slotpool=1G split.iters=1".into(),
        ("split", false) => " hyp.slotpool=1G".into(),
        ("mprotect", _) => format!(" mprotect.rounds={EL0_ROUNDS}"),
        _ => String::new(),
    }
}

/// Rounds of the EL0 benchmark (`lib/el0bench`) on each side.
pub const EL0_ROUNDS: u64 = 100;

/// Host benchmarks.
pub const HOST_BENCHES: &[(&str, &str)] =
    &[("pgtable", "lib/pgtable against aarch64-paging: map 4 GiB, 10,000 random 4 KiB permission changes, unmap")];
