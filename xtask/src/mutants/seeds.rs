//! The seeded bugs of `cargo xtask mutants`: realistic mistakes in the bare-metal binaries, the
//! libraries whose decisions they run, and the judging, each one small patch (file, the exact
//! original text, its replacement) and the tests that should see it. `mutants::tests` keeps
//! every patch applicable and every named test present: a change to a patched line fails
//! `cargo xtask test` until the seed is brought along (loudly, never counted as caught).
//!
//! `missed_because` says, for a bug no test catches, why (what QEMU cannot show and which model
//! would); it is printed in place of the catching test and does not make the bug count as caught.

use std::fmt;
use std::path::Path;

/// The classes of bugs issue 25 lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// TLB maintenance and ASID decisions.
    TlbAsid,
    /// Interrupt acknowledge / EOI and GIC programming.
    EoiGic,
    /// Waking and calling other CPUs.
    CrossCpu,
    /// System-call argument checks and error returns.
    SyscallErrors,
    /// The verdict of a run and the test harness.
    Judging,
    /// Parsers of untrusted input (boot words, Images, bundles, DTBs, ELF).
    Parsers,
    /// The hypervisor's checks of what a guest asks for (memslots, buffers, PSCI, its DTB).
    HypChecks,
    /// Where the guest and the hypervisor go: QEMU's loader rules, the move to the top of RAM,
    /// the memory plan (rounding, inclusive bounds, what is left out of RAM).
    Placement,
}

impl Class {
    pub const ALL: [Class; 8] = [
        Class::TlbAsid,
        Class::EoiGic,
        Class::CrossCpu,
        Class::SyscallErrors,
        Class::Judging,
        Class::Parsers,
        Class::HypChecks,
        Class::Placement,
    ];

    /// The name `cargo xtask mutants CLASS` takes.
    pub fn name(self) -> &'static str {
        match self {
            Class::TlbAsid => "tlb-asid",
            Class::EoiGic => "eoi-gic",
            Class::CrossCpu => "cross-cpu",
            Class::SyscallErrors => "syscall",
            Class::Judging => "judging",
            Class::Parsers => "parsers",
            Class::HypChecks => "hyp-checks",
            Class::Placement => "placement",
        }
    }
}

/// A test that should catch a seeded bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Test {
    /// A QEMU integration test: `tests/tests/FILE.rs`, function `name`.
    Qemu { file: &'static str, name: &'static str },
    /// A host test of crate `krate` by its exact name: a unit test of its library
    /// (`module::tests::name`, with `::`) or a function of one of its `tests/` files (`name`).
    Host { krate: &'static str, name: &'static str },
}

const fn q(file: &'static str, name: &'static str) -> Test {
    Test::Qemu { file, name }
}

const fn h(krate: &'static str, name: &'static str) -> Test {
    Test::Host { krate, name }
}

impl fmt::Display for Test {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Test::Qemu { file, name } => write!(f, "{file}::{name}"),
            Test::Host { krate, name } => write!(f, "{krate}: {name}"),
        }
    }
}

impl Test {
    /// A file-name-safe form.
    pub fn slug(&self) -> String {
        self.to_string().replace([':', ' ', '/'], "_")
    }

    /// A QEMU test (needs the Images).
    pub fn is_qemu(&self) -> bool {
        matches!(self, Test::Qemu { .. })
    }

    /// Whether the test's function is in the tree at `root`.
    pub fn exists(&self, root: &Path) -> Result<(), String> {
        let (dir, fname) = match self {
            Test::Qemu { file, name } => (root.join(format!("tests/tests/{file}.rs")), *name),
            Test::Host { krate, name } => {
                let dir = if *krate == "xtask" || *krate == "tests" {
                    root.join(krate)
                } else {
                    root.join("lib").join(krate)
                };
                (dir, name.rsplit("::").next().unwrap_or(name))
            }
        };
        let needle = format!("fn {fname}(");
        if grep(&dir, &needle) {
            Ok(())
        } else {
            Err(format!("test {self}: no `{needle}` under {}", dir.display()))
        }
    }
}

fn grep(p: &Path, needle: &str) -> bool {
    if p.is_file() {
        return std::fs::read_to_string(p).is_ok_and(|t| t.contains(needle));
    }
    std::fs::read_dir(p).is_ok_and(|d| {
        d.flatten().any(|e| {
            let p = e.path();
            (p.is_dir() && e.file_name() != "target") || p.extension().is_some_and(|x| x == "rs")
        } && grep(&e.path(), needle))
    })
}

/// One seeded bug.
#[derive(Debug)]
pub struct Seed {
    /// Short name (`cargo xtask mutants ID`).
    pub id: &'static str,
    pub class: Class,
    /// The bug, as a reviewer would describe it.
    pub bug: &'static str,
    /// File from the workspace root.
    pub file: &'static str,
    /// Exact text, present exactly once in the file.
    pub original: &'static str,
    pub replacement: &'static str,
    /// The tests that should see it.
    pub tests: &'static [Test],
    /// For a bug no test here can catch: why, and what would.
    pub missed_because: Option<&'static str>,
}

const USER_MAX: Test = q("user", "selftest_on_max_with_gicv3");
const USER_A76: Test = q("user", "selftest_on_cortex_a76_with_gicv2_and_both_mechanisms_off");
const IRQ_V3: Test = q("interrupts", "gicv3_on_max_under_the_hypervisor");
const IRQ_V2: Test = q("interrupts", "gicv2_on_cortex_a76_under_the_hypervisor");
const MEMSLOT_ERRORS: Test = q("hypercalls", "every_bad_memslot_argument_returns_its_error_code");
const SMCCC: Test = q("runs", "smccc_rules_and_a_storm_from_every_cpu_over_both_conduits");
const PERCPU_STRESS: Test = q("percpu", "stress_on_4_cpus_baseline_and_window_in_one_boot");
const VERDICTS: Test = h("xtask", "supervise::judge::tests::the_verdict_table_exhaustively");
/// Every interleaving of a parked CPU and the CPU that wakes it (`hypcore::park`).
const PARK_INTERLEAVINGS: Test =
    h("hypcore", "park::tests::no_interleaving_loses_the_wake_up_or_leaves_the_gic_changed");

/// The table.
pub const SEEDS: &[Seed] = &[
    // ---- TLB maintenance and ASIDs ----
    Seed {
        id: "asid-rollover-flush-cpu0-only",
        class: Class::TlbAsid,
        bug: "the kernel honours the roll-over's local flush on CPU 0 only",
        file: "lib/pgtable/src/asid.rs",
        original: "        if sw.flush_local {",
        replacement: "        if sw.flush_local && cpu == 0 {",
        tests: &[h("pgtable", "model::uspace_scenarios::asid_rollover_with_two_cpus_is_clean"), h("pgtable", "model::uspace_scenarios::random_sequences_over_more_spaces_than_asids")],
        missed_because: None,
    },
    Seed {
        id: "asid-flush-only-on-new-context",
        class: Class::TlbAsid,
        bug: "after a roll-over a CPU flushes only when its process needed a new ASID",
        file: "lib/pgtable/src/asid.rs",
        original: "        let flush_local = pool.flush_pending & (1 << cpu) != 0;",
        replacement: "        let flush_local = new_context && pool.flush_pending & (1 << cpu) != 0;",
        tests: &[
            h("pgtable", "asid::tests::a_cpu_flushes_after_a_rollover_into_a_space_already_renumbered"),
            h("pgtable", "asid::tests::every_cpu_flushes_once_per_rollover_before_new_asids"),
            h("pgtable", "model::uspace_scenarios::asid_rollover_with_two_cpus_is_clean"),
        ],
        missed_because: None,
    },
    Seed {
        id: "spurious-fault-fix-no-tlbi",
        class: Class::TlbAsid,
        bug: "a spurious permission fault is counted and retried without invalidating the stale entry",
        file: "lib/pgtable/src/table.rs",
        original: "        tlb.tlbi(Tlbi { op: TlbiOp::Vae1 { asid, va }, leaf_only: true, sh: Shareability::Local });\n",
        replacement: "        let _ = (asid, va);\n",
        tests: &[h("pgtable", "model::uspace_scenarios::lazy_relaxation_is_accepted_and_its_spurious_faults_are_fixed"), h("pgtable", "model::uspace_scenarios::random_sequences_over_more_spaces_than_asids")],
        missed_because: None,
    },
    Seed {
        id: "shootdown-without-tlbi",
        class: Class::TlbAsid,
        bug: "the per-CPU window's shootdown runs on every CPU but forgets its TLBI",
        file: "kernel/src/irq/call.rs",
        original: "        tlb.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: None }, leaf_only: false, sh: Shareability::Local });\n",
        replacement: "",
        tests: &[PERCPU_STRESS],
        missed_because: None,
    },
    Seed {
        id: "lazy-relax-flag-ignored",
        class: Class::TlbAsid,
        bug: "the lazy_relax switch is never handed to the page table (sysctl has no effect)",
        file: "kernel/src/mm/user.rs",
        original: "        pt.policy_mut().lazy_relax = LAZY_RELAX.load(Ordering::Relaxed);",
        replacement: "        pt.policy_mut().lazy_relax = true;",
        tests: &[USER_A76, q("user", "mprotect_benchmark_counts_its_tlbis")],
        missed_because: None,
    },
    // ---- EOI and the GIC ----
    Seed {
        id: "eoi-drops-sgi-source",
        class: Class::EoiGic,
        bug: "GICv2: the EOI writes the INTID without the SGI's source-CPU bits",
        file: "lib/gic/src/v2.rs",
        original: "        self.regs.write(Reg::CEoir, a.iar);",
        replacement: "        self.regs.write(Reg::CEoir, a.intid);",
        tests: &[h("gic", "tests::gicv2_ends_each_sgi_with_its_source_cpu"), IRQ_V2],
        missed_because: None,
    },
    Seed {
        id: "sgi-never-eoied-v3",
        class: Class::EoiGic,
        bug: "GICv3: SGIs are handled but never EOI'd (only PPIs and SPIs are)",
        file: "lib/gic/src/v3.rs",
        original: "        self.regs.write(Reg::IccEoir1, a.iar as u64);",
        replacement: "        if a.intid >= 16 {\n            self.regs.write(Reg::IccEoir1, a.iar as u64);\n        }",
        tests: &[h("gic", "tests::gicv3_finds_each_redistributor_and_takes_sgis_by_mpidr"), IRQ_V3],
        missed_because: None,
    },
    Seed {
        id: "v2-intid-keeps-source-bits",
        class: Class::EoiGic,
        bug: "GICv2: the INTID is taken from IAR whole, source-CPU bits included",
        file: "lib/gic/src/v2.rs",
        original: "    iar & 0x3ff\n",
        replacement: "    iar\n",
        tests: &[h("gic", "tests::gicv2_ends_each_sgi_with_its_source_cpu"), IRQ_V2],
        missed_because: None,
    },
    Seed {
        id: "v2-sgi-target-list-shift",
        class: Class::EoiGic,
        bug: "GICv2: GICD_SGIR's CPU target list written one bit too low",
        file: "lib/gic/src/v2.rs",
        original: "((target_list as u32) << 16) | (sgi & 0xf)",
        replacement: "((target_list as u32) << 15) | (sgi & 0xf)",
        tests: &[h("gic", "tests::gicv2_sgis_follow_a_dsb_and_reach_the_named_cpus_only"), IRQ_V2],
        missed_because: None,
    },
    Seed {
        id: "v3-private-enabled-on-cpu0",
        class: Class::EoiGic,
        bug: "GICv3: every CPU's SGIs and PPIs are enabled in CPU 0's redistributor",
        file: "lib/gic/src/v3.rs",
        original: "        let rd = self.rd_of(cpu);\n        self.regs.write(Reg::SIpriority(rd, intid), priority as u64);",
        replacement: "        let rd = self.rd_of(0);\n        self.regs.write(Reg::SIpriority(rd, intid), priority as u64);",
        tests: &[h("gic", "tests::gicv3_finds_each_redistributor_and_takes_sgis_by_mpidr"), IRQ_V3],
        missed_because: None,
    },
    Seed {
        id: "priority-at-the-mask",
        class: Class::EoiGic,
        bug: "interrupts enabled at the priority mask itself, so never signalled",
        file: "lib/gic/src/lib.rs",
        original: "pub const PRIORITY: u8 = 0xa0;",
        replacement: "pub const PRIORITY: u8 = 0xf0;",
        tests: &[h("gic", "tests::one_priority_level_no_nesting_until_the_eoi"), IRQ_V3],
        missed_because: None,
    },
    Seed {
        id: "v2-distributor-left-off",
        class: Class::EoiGic,
        bug: "GICv2: the distributor is disabled for set-up and never enabled again",
        file: "lib/gic/src/v2.rs",
        original: "        self.regs.write(Reg::DCtlr, 1);\n",
        replacement: "",
        tests: &[h("gic", "tests::gicv2_ends_each_sgi_with_its_source_cpu"), IRQ_V2],
        missed_because: None,
    },
    Seed {
        id: "v2-sgis-left-pending",
        class: Class::EoiGic,
        bug: "GICv2: init clears banked pending state with GICD_ICPENDR0 only, which leaves SGIs pending",
        file: "lib/gic/src/v2.rs",
        original: "            self.regs.write(Reg::DCpendsgir(sgi), 0xff);\n",
        replacement: "",
        tests: &[h("gic", "tests::gicv2_init_clears_what_the_firmware_left_pending_and_active")],
        missed_because: None,
    },
    Seed {
        id: "v2-firmware-active-priority-kept",
        class: Class::EoiGic,
        bug: "GICv2: init leaves GICC_APRn as firmware left it (a stale running priority)",
        file: "lib/gic/src/v2.rs",
        original: "            self.regs.write(Reg::CApr(n), 0);\n",
        replacement: "",
        tests: &[h("gic", "tests::gicv2_init_clears_what_the_firmware_left_pending_and_active")],
        missed_because: None,
    },
    Seed {
        id: "v3-only-ap1r0-zeroed",
        class: Class::EoiGic,
        bug: "GICv3: init zeroes ICC_AP1R0_EL1 only, whatever ICC_CTLR_EL1.PRIbits says",
        file: "lib/gic/src/v3.rs",
        original: "        for n in 0..active_priority_registers(self.regs.read(Reg::IccCtlr)) {",
        replacement: "        for n in 0..1 {",
        tests: &[h("gic", "tests::gicv3_init_clears_what_the_firmware_left_pending_and_active")],
        missed_because: None,
    },
    Seed {
        id: "v3-banked-cleared-before-rwp",
        class: Class::EoiGic,
        bug: "GICv3: banked interrupts deactivated before GICR_CTLR.RWP says their disable took effect",
        file: "lib/gic/src/v3.rs",
        original: "        self.wait_rwp_rd(rd);\n",
        replacement: "",
        tests: &[h("gic", "tests::gicv3_init_clears_what_the_firmware_left_pending_and_active")],
        missed_because: None,
    },
    Seed {
        id: "v3-ap1r-count-ignores-preemption-cap",
        class: Class::EoiGic,
        bug: "GICv3: 2^PRIbits active priority bits counted, 8 of them (ICC_AP1R4..7, which do not exist)",
        file: "lib/gic/src/v3.rs",
        original: "(1usize << bits.min(7)) / 32",
        replacement: "(1usize << bits) / 32",
        tests: &[h("gic", "tests::active_priority_registers_follow_the_priority_bits")],
        missed_because: None,
    },
    // ---- Cross-CPU wake and calls ----
    Seed {
        id: "wake-sets-flag-not-sgi",
        class: Class::CrossCpu,
        bug: "waking a task on another CPU sets that CPU's need_resched flag instead of sending it the SGI",
        file: "kernel/src/sched/mod.rs",
        original: "        irq::send_sgi(1 << cpu, Sgi::Reschedule);\n    }\n    fn local(&self, cpu: usize) {",
        replacement: "        crate::arch::cpu::set_need_resched(cpu, true);\n    }\n    fn local(&self, cpu: usize) {",
        tests: &[USER_MAX, q("user", "cross_cpu_wakes_come_by_sgi_not_by_the_tick")],
        missed_because: None,
    },
    Seed {
        id: "call-waits-in-wfi",
        class: Class::CrossCpu,
        bug: "a CPU making an IPI call sleeps in WFI until its own next interrupt instead of polling for the answer",
        file: "kernel/src/irq/call.rs",
        original: "        core::hint::spin_loop();\n    }\n    FUNC.store(0, Ordering::Release);",
        replacement: "        super::wait_for_interrupt();\n    }\n    FUNC.store(0, Ordering::Release);",
        tests: &[q("user", "function_call_ipis_come_by_sgi_not_by_the_tick")],
        missed_because: None,
    },
    Seed {
        id: "call-ipi-to-self",
        class: Class::CrossCpu,
        bug: "a function call by IPI also waits for the calling CPU, which has IRQs masked",
        file: "kernel/src/irq/call.rs",
        original: "    let others = cpus & !(1 << me);",
        replacement: "    let others = cpus;",
        tests: &[PERCPU_STRESS],
        missed_because: None,
    },
    Seed {
        id: "finish-switch-requeues-every-ready-task",
        class: Class::CrossCpu,
        bug: "a ready task switched away from is queued again even when it stays on this CPU",
        file: "lib/kcore/src/sched/mod.rs",
        original: "        let hand_over = p.state() == State::Ready && p.cpu() != cpu;",
        replacement: "        let hand_over = p.state() == State::Ready;",
        tests: &[h("kcore", "sched::tests::a_task_woken_before_its_switch_is_requeued_once"), h("kcore", "sched::tests::cpus_in_threads_never_run_a_task_twice_or_pick_one_not_ready"), USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "secondary-not-counted-online",
        class: Class::CrossCpu,
        bug: "the boot CPU stops waiting for a started CPU before it is online",
        file: "kernel/src/smp.rs",
        original: "            if ONLINE.load(Ordering::Acquire) != before {",
        replacement: "            if ONLINE.load(Ordering::Acquire) >= before {",
        tests: &[q("runs", "cpu_off_on_cycles_and_cpu_on_to_a_starting_cpu")],
        missed_because: None,
    },
    // ---- System-call error paths ----
    Seed {
        id: "clock-efault-ignored",
        class: Class::SyscallErrors,
        bug: "clock() ignores a failed copy to user memory and returns 0",
        file: "kernel/src/syscall/mod.rs",
        original: "    uaccess::copy_to_user(out, &ns.to_le_bytes()).map_err(|()| errno::EFAULT)?;",
        replacement: "    let _ = uaccess::copy_to_user(out, &ns.to_le_bytes());",
        tests: &[USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "counters-size-zero",
        class: Class::SyscallErrors,
        bug: "counters() accepts a size of 0 (copies nothing, returns 0)",
        file: "kernel/src/syscall/mod.rs",
        original: "    if size == 0 || !size.is_multiple_of(8) {",
        replacement: "    if !size.is_multiple_of(8) {",
        tests: &[USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "write-to-stdin",
        class: Class::SyscallErrors,
        bug: "write() accepts every fd up to 2, stdin included",
        file: "kernel/src/syscall/mod.rs",
        original: "    if fd != 1 && fd != 2 {",
        replacement: "    if fd > 2 {",
        tests: &[USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "spawn-stack-unaligned",
        class: Class::SyscallErrors,
        bug: "spawn() forgets the 16-byte alignment check of the stack",
        file: "kernel/src/syscall/mod.rs",
        original: "    if !(sc::USER_START..=sc::USER_END).contains(&stack) || !stack.is_multiple_of(16) {",
        replacement: "    if !(sc::USER_START..=sc::USER_END).contains(&stack) {",
        tests: &[USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "fault-return-any-mode",
        class: Class::SyscallErrors,
        bug: "fault_return() takes any mode (an unknown one retries)",
        file: "kernel/src/syscall/mod.rs",
        original: "    if ![sc::RETRY, sc::SKIP, sc::RETURN_TO_LR].contains(&how) {\n        return Err(errno::EINVAL);\n    }\n",
        replacement: "",
        tests: &[USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "sysctl-read-only-writable",
        class: Class::SyscallErrors,
        bug: "sysctl() lets a task \"set\" a read-only knob (returns the value, no EPERM)",
        file: "kernel/src/syscall/mod.rs",
        original: "    let read_only = |v: u64| if value == sc::SYSCTL_GET { Ok(v) } else { Err(errno::EPERM) };",
        replacement: "    let read_only = |v: u64| -> Result<u64, i64> { Ok(v) };",
        tests: &[USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "unknown-syscall-returns-0",
        class: Class::SyscallErrors,
        bug: "an unknown system call number returns 0 instead of ENOSYS",
        file: "kernel/src/syscall/mod.rs",
        original: "        _ => Err(errno::ENOSYS),",
        replacement: "        _ => Ok(0),",
        tests: &[USER_MAX],
        missed_because: None,
    },
    Seed {
        id: "mmap-length-zero",
        class: Class::SyscallErrors,
        bug: "mmap() accepts a length of 0",
        file: "lib/uspace/src/space.rs",
        original: "        if p & !prot::ALL != 0 || fd != u64::MAX || offset != 0 || len == 0 {",
        replacement: "        if p & !prot::ALL != 0 || fd != u64::MAX || offset != 0 {",
        tests: &[h("uspace", "tests::mmap_arguments"), USER_MAX],
        missed_because: None,
    },
    // ---- Judging ----
    Seed {
        id: "final-zero-overrides-qemu-status",
        class: Class::Judging,
        bug: "a final `@@exit 0` line overrides a non-zero QEMU status",
        file: "xtask/src/supervise/judge.rs",
        original: "    if code != 0 {\n        return Verdict::new(\n            exit::UNKNOWN_EXIT,",
        replacement: "    if code != 0 && said != 0 {\n        return Verdict::new(\n            exit::UNKNOWN_EXIT,",
        tests: &[VERDICTS],
        missed_because: None,
    },
    Seed {
        id: "first-final-line-wins",
        class: Class::Judging,
        bug: "the first final line is taken as the run's (a guest's own line beats the hypervisor's)",
        file: "xtask/src/supervise/judge.rs",
        original: "    let Some(&said) = watch.finals.last() else {",
        replacement: "    let Some(&said) = watch.finals.first() else {",
        tests: &[h("xtask", "supervise::judge::tests::the_last_final_line_is_the_runs")],
        missed_because: None,
    },
    Seed {
        id: "timeout-hides-panic",
        class: Class::Judging,
        bug: "a run that panicked and then hung is judged a timeout, not a panic",
        file: "xtask/src/supervise/judge.rs",
        original: "    if o.timed_out {\n        if let Some(p) = panic_detail() {\n            return Verdict::new(exit::GUEST_PANIC, p);\n        }\n",
        replacement: "    if o.timed_out {\n",
        tests: &[VERDICTS],
        missed_because: None,
    },
    Seed {
        id: "qemu-signal-message-prefix",
        class: Class::Judging,
        bug: "QEMU's \"terminating on signal\" message is looked for at the line's start (QEMU prefixes its name)",
        file: "xtask/src/supervise/judge.rs",
        original: "m.contains(\"terminating on signal\")",
        replacement: "m.starts_with(\"terminating on signal\")",
        tests: &[VERDICTS],
        missed_because: None,
    },
    Seed {
        id: "reset-is-success",
        class: Class::Judging,
        bug: "a guest reset counts as success",
        file: "xtask/src/error.rs",
        original: "        self.code == exit::SUCCESS\n    }",
        replacement: "        self.code == exit::SUCCESS || self.code == exit::GUEST_RESET\n    }",
        tests: &[VERDICTS],
        missed_because: None,
    },
    Seed {
        id: "final-line-key-unchecked",
        class: Class::Judging,
        bug: "a final line counts without the run's key: a line the guest prints (or Linux echoes) decides the run",
        file: "xtask/src/supervise/judge.rs",
        original: "                Judging::Keyed(k) => f.key == Some(k),",
        replacement: "                Judging::Keyed(_) => true,",
        tests: &[
            h("xtask", "supervise::judge::tests::only_the_final_line_with_the_runs_key_counts"),
            q("judging", "a_planted_final_line_does_not_switch_off_the_panic_watch"),
        ],
        missed_because: None,
    },
    Seed {
        id: "alone-line-decides",
        class: Class::Judging,
        bug: "alone, the guest's final line decides the run instead of how QEMU's machine ended",
        file: "xtask/src/supervise/judge.rs",
        original: "    if o.judging == Judging::Alone {",
        replacement: "    if o.judging == Judging::Alone && watch.finals.is_empty() {",
        tests: &[
            h("xtask", "supervise::judge::tests::alone_the_machines_end_decides"),
            q("judging", "a_guest_cannot_forge_the_verdict"),
        ],
        missed_because: None,
    },
    Seed {
        id: "final-line-meaning-unchecked",
        class: Class::Judging,
        bug: "a final line is read by its code alone: `@@exit 0 (guest panic)` passes as success",
        file: "lib/abi/src/exit.rs",
        original: "    let rest = rest.strip_prefix('(')?.strip_prefix(meaning)?.strip_prefix(')')?;",
        replacement: "    let _ = meaning;\n    let rest = rest.strip_prefix('(')?.split_once(')')?.1;",
        tests: &[
            h("abi", "exit::tests::final_line_reads_back"),
            h("xtask", "supervise::judge::tests::no_final_line_is_never_success_whatever_qemu_says"),
        ],
        missed_because: None,
    },
    Seed {
        id: "harness-two-final-lines",
        class: Class::Judging,
        bug: "the QEMU tests' expect_exit accepts a run with two final lines",
        file: "tests/src/lib.rs",
        original: "        assert!(finals.len() <= 1, \"one final line per run, not {finals:?}\\n{}\", self.dump());\n",
        replacement: "",
        tests: &[h("tests", "judging::expect_exit_fails_on_another_code_a_timeout_a_signal_or_two_final_lines")],
        missed_because: None,
    },
    Seed {
        id: "tally-ignores-failures",
        class: Class::Judging,
        bug: "`cargo xtask test` does not count failed tests from cargo's result lines",
        file: "xtask/src/test.rs",
        original: "                \"failed\" => self.failed += n,",
        replacement: "                \"failed\" => {}",
        tests: &[h("xtask", "test::tests::tally_counts_cargo_result_lines")],
        missed_because: None,
    },
    // ---- Parsers ----
    Seed {
        id: "bootargs-duplicate-vs-previous-only",
        class: Class::Parsers,
        bug: "a boot word given twice is noticed only when the two are next to each other",
        file: "lib/bootargs/src/lib.rs",
        original: "        if let Some((_, first, _)) = args.given.iter().find(|(n, _, _)| *n == word.name) {",
        replacement: "        if let Some((_, first, _)) = args.given.last().filter(|(n, _, _)| *n == word.name) {",
        tests: &[h("bootargs", "tests::duplicates_are_refused_even_with_the_same_value")],
        missed_because: None,
    },
    Seed {
        id: "bootargs-list-item-vs-previous-only",
        class: Class::Parsers,
        bug: "an item listed twice in one word is noticed only when the two are next to each other",
        file: "lib/bootargs/src/lib.rs",
        original: "                    if chosen.contains(x) {",
        replacement: "                    if chosen.last() == Some(x) {",
        tests: &[h("bootargs", "tests::duplicates_are_refused_even_with_the_same_value")],
        missed_because: None,
    },
    Seed {
        id: "image-crc-zero-skips-check",
        class: Class::Parsers,
        bug: "an Image whose stamped CRC-32 is 0 is not checked",
        file: "lib/abi/src/image.rs",
        original: "            if stamped != found {",
        replacement: "            if stamped != 0 && stamped != found {",
        tests: &[
            h("abi", "image::tests::stamped_images_refuse_truncation_and_corruption"),
            h("abi", "image::tests::a_stamped_crc_of_zero_is_checked_too"),
        ],
        missed_because: None,
    },
    Seed {
        id: "bundle-part-ends-in-padding",
        class: Class::Parsers,
        bug: "a bundle part may end in the padding past the bundle's total size",
        file: "lib/abi/src/bundle.rs",
        original: "        let end = p.end().filter(|&e| e <= total_size).ok_or(bad(\"ends past the bundle's total size\"))?;",
        replacement: "        let end = p\n            .end()\n            .filter(|&e| e <= total_size.next_multiple_of(ALIGN))\n            .ok_or(bad(\"ends past the bundle's total size\"))?;",
        tests: &[h("abi", "bundle::tests::every_malformation_is_an_error")],
        missed_because: None,
    },
    Seed {
        id: "dtb-child-larger-than-window",
        class: Class::Parsers,
        bug: "a DTB node's reg is translated when it starts in its parent's ranges window but ends past it",
        file: "lib/board/src/tree.rs",
        original: "addr >= *c && addr - c < *len && size <= len - (addr - c)",
        replacement: "addr >= *c && addr - c < *len",
        tests: &[h("board", "devices_on_nested_simple_buses_are_translated")],
        missed_because: None,
    },
    Seed {
        id: "elf-segment-past-the-file",
        class: Class::Parsers,
        bug: "an ELF segment is accepted when it starts in the file but its bytes run past the end",
        file: "lib/uspace/src/elf.rs",
        original: "let in_file = off.checked_add(filesz).is_some_and(|e| e <= file.len() as u64);",
        replacement: "let in_file = off <= file.len() as u64;",
        tests: &[h("uspace", "elf::tests::refuses_what_a_loader_cannot_trust")],
        missed_because: None,
    },
    // ---- The hypervisor's checks ----
    Seed {
        id: "memslot-device-overlap-last-entry-only",
        class: Class::HypChecks,
        bug: "MEMSLOT_CREATE's overlap walk keeps only the last entry's answer (a device under the slot's start passes)",
        file: "hypervisor/src/memslot.rs",
        original: "                if e.desc.is_mapping(e.level) {\n                    out.push(",
        replacement: "                out.clear();\n                if e.desc.is_mapping(e.level) {\n                    out.push(",
        tests: &[MEMSLOT_ERRORS],
        missed_because: None,
    },
    Seed {
        id: "memslot-over-guest-ram",
        class: Class::HypChecks,
        bug: "MEMSLOT_CREATE does not refuse a slot over the guest's RAM",
        file: "hypervisor/src/memslot.rs",
        original: "        .chain(crate::guest::ram().iter().map(|&range| Taken { kind: Kind::GuestRam, range }))\n",
        replacement: "",
        tests: &[MEMSLOT_ERRORS],
        missed_because: Some(
            "masked, not reachable: the guest's RAM is mapped in stage 2 before the guest runs, so \
             the walk for mapped entries that follows refuses the same slot with the same OVERLAP; \
             the check only names the reason first (a guest able to unmap its own RAM would make \
             it observable)",
        ),
    },
    Seed {
        id: "memslot-limit-off-by-one",
        class: Class::HypChecks,
        bug: "one memslot more than MAX_MEMSLOTS is accepted",
        file: "lib/hypcore/src/slot/mod.rs",
        original: "if slots >= hc::MAX_MEMSLOTS",
        replacement: "if slots > hc::MAX_MEMSLOTS",
        tests: &[MEMSLOT_ERRORS, h("hypcore", "slot::tests::registry_and_pool_limits")],
        missed_because: None,
    },
    Seed {
        id: "guest-buffer-unaligned",
        class: Class::HypChecks,
        bug: "a guest buffer the hypervisor writes is not checked for 8-byte alignment",
        file: "hypervisor/src/memslot.rs",
        original: "    if !addr.is_multiple_of(8) {\n        return Err(HypError::Misaligned);\n    }\n",
        replacement: "",
        tests: &[MEMSLOT_ERRORS],
        missed_because: None,
    },
    Seed {
        id: "hyp-owns-skips-first-range",
        class: Class::HypChecks,
        bug: "the check of the hypervisor's own ranges skips the first one (its image)",
        file: "hypervisor/src/memslot.rs",
        original: "        self.hyp.iter().any(|h| !h.is_empty() && h.overlaps(r))",
        replacement: "        self.hyp.iter().skip(1).any(|h| !h.is_empty() && h.overlaps(r))",
        tests: &[MEMSLOT_ERRORS, q("runs", "the_hypervisors_pools_are_out_of_the_guests_reach")],
        missed_because: None,
    },
    Seed {
        id: "cpu-on-entry-outside-ram",
        class: Class::HypChecks,
        bug: "PSCI CPU_ON accepts an entry point outside the guest's RAM",
        file: "lib/hypcore/src/psci.rs",
        original: "        if !self.entry_in_ram || !self.entry.is_multiple_of(4) {",
        replacement: "        if !self.entry.is_multiple_of(4) {",
        tests: &[h("hypcore", "psci::tests::cpu_on_refuses_a_cpu_the_guest_does_not_have_then_an_entry_outside_its_ram"), SMCCC],
        missed_because: None,
    },
    Seed {
        id: "cpu-suspend-reserved-bits",
        class: Class::HypChecks,
        bug: "PSCI CPU_SUSPEND accepts a power_state with reserved bits set",
        file: "lib/hypcore/src/psci.rs",
        original: "    if power_state & 0xfcfe_0000 != 0 || power_state & (1 << 16) != 0 {",
        replacement: "    if power_state & (1 << 16) != 0 {",
        tests: &[h("hypcore", "psci::tests::cpu_suspend_takes_standby_states_and_refuses_power_down_and_reserved_bits"), SMCCC],
        missed_because: None,
    },
    Seed {
        id: "cpu-map-kept-for-removed-cpu",
        class: Class::HypChecks,
        bug: "the guest DTB keeps the cpu-map entry of a CPU the hypervisor removed",
        file: "lib/board/src/guest.rs",
        original: "            if how == CpuRef::Owner || !keep.iter().any(|&k| k) {",
        replacement: "            if how == CpuRef::Owner && keep.len() > 1 || !keep.iter().any(|&k| k) && how != CpuRef::Owner {",
        tests: &[
            h("board", "a_cpu_kept_by_the_hypervisor_leaves_the_tree_with_its_cpu_map_entry"),
            h("board", "a_trimmed_tree_keeps_no_reference_to_a_removed_cpu"),
            q("guest_view", "a_cpu_the_hypervisor_keeps_is_the_only_cpu_difference"),
        ],
        missed_because: None,
    },
    Seed {
        id: "hvhe-guest-el1-through-el1-names",
        class: Class::HypChecks,
        bug: "under hVHE the guest's EL1 registers are written through the *_EL1 names (which reach *_EL2)",
        file: "hypervisor/src/guest_el1.rs",
        original: "                if crate::el2mode::mode().e2h() {\n                    rt::write_sysreg!($el12, v);",
        replacement: "                if false {\n                    rt::write_sysreg!($el12, v);",
        tests: &[q("hvhe", "hvhe_injects_an_abort_through_the_guests_el12_registers")],
        missed_because: None,
    },
    Seed {
        id: "entry-fine-grained-traps-left",
        class: Class::HypChecks,
        bug: "the fine-grained trap registers a boot loader left are not written (their n-bits keep trapping)",
        file: "lib/rt/src/entry.rs",
        original: "    if let Some(g) = c.fgt {",
        replacement: "    if let Some(g) = c.fgt.filter(|_| false) {",
        tests: &[q("entry", "hypervisor_entered_with_fine_grained_traps_set_on_qemu_10")],
        missed_because: None,
    },
    Seed {
        id: "entry-el1-debug-state-left",
        class: Class::HypChecks,
        bug: "the kernel keeps the MDSCR_EL1 a boot loader left (software step armed kills every EL0 task)",
        file: "lib/rt/src/entry.rs",
        original: "    write_sysreg!(\"mdscr_el1\", crate::el1::MDSCR_ENTRY);",
        replacement: "",
        tests: &[q("entry", "hypervisor_entered_with_tge_and_every_trap_set_gicv2")],
        missed_because: None,
    },
    Seed {
        id: "kvm-model-inner-run-unkeyed",
        class: Class::Judging,
        bug: "inside the KVM host model the inner run is judged without the run's key: a guest's final line decides",
        file: "xtask/src/supervise/kvm_model/judge.rs",
        original: "    let mut o = Outcome { limit: outer.limit, elapsed: outer.elapsed, judging, ..Outcome::default() };",
        replacement: "    let _ = judging;\n    let mut o = Outcome { limit: outer.limit, elapsed: outer.elapsed, judging: Judging::Unverified, ..Outcome::default() };",
        tests: &[h("xtask", "supervise::kvm_model::judge::tests::the_run_s_key_decides_inside_the_model_as_outside")],
        missed_because: None,
    },
    Seed {
        id: "kvm-model-events-any-source",
        class: Class::Judging,
        bug: "the inner machine's SHUTDOWN event is taken from any console line, the guest's own too",
        file: "xtask/src/supervise/kvm_model/judge.rs",
        original: "        if let Some(event) = l.strip_prefix(&tag.events()) {",
        replacement: "        if let Some(event) = l.strip_prefix(&tag.events()).or_else(|| l.find(\"]@ \").map(|i| &l[i + 3..])) {",
        tests: &[h("xtask", "supervise::kvm_model::judge::tests::a_guest_alone_is_judged_by_the_inner_machine_s_end")],
        missed_because: None,
    },
    Seed {
        id: "kvm-board-model-allowed",
        class: Class::Parsers,
        bug: "--accel kvm takes a board model, which KVM cannot run (QEMU fails late, or runs virt's CPU on a board)",
        file: "xtask/src/launch/mod.rs",
        original: "        if !self.accel.tcg && !model.kvm {",
        replacement: "        if !self.accel.tcg && model.kvm && !model.kvm {",
        tests: &[h("xtask", "launch::tests::kvm_takes_the_hosts_cpu_and_refuses_tcg_options")],
        missed_because: None,
    },
    Seed {
        id: "compare-across-accelerators",
        class: Class::Parsers,
        bug: "--compare takes a TCG run against a real core's: an emulator's figures read as a change of the code",
        file: "xtask/src/plot/compare.rs",
        original: "        if was != accel {",
        replacement: "        if was != accel && false {",
        tests: &[h("xtask", "plot::compare::tests::runs_on_two_accelerators_do_not_compare_and_two_hosts_do")],
        missed_because: None,
    },
    Seed {
        id: "guest-cpus-beyond-the-tree",
        class: Class::HypChecks,
        bug: "hyp.cpus beyond the device tree's CPUs is taken: the guest is promised CPUs the machine has not",
        file: "lib/hypcore/src/options.rs",
        original: "        Some(n) if n > dt => Err(",
        replacement: "        Some(n) if n > dt && false => Err(",
        tests: &[
            h("hypcore", "options::tests::the_guest_gets_the_cpus_asked_for_or_a_refusal"),
            q("runs", "unknown_duplicated_or_bad_boot_words_stop_the_boot_naming_the_word"),
        ],
        missed_because: None,
    },
    // ---- Between CPUs: orders of stores, barriers, the wake-up (host tests) ----
    Seed {
        id: "park-offer-published-first",
        class: Class::CrossCpu,
        bug: "a parked CPU publishes its offer before it resets the last wake-up's sent/woke flags",
        file: "lib/hypcore/src/park.rs",
        original: "        self.sent.store(false, SeqCst);\n        self.woke.store(false, SeqCst);\n        self.iface.store(iface, SeqCst);\n",
        replacement: "        self.iface.store(iface, SeqCst);\n        self.sent.store(false, SeqCst);\n        self.woke.store(false, SeqCst);\n",
        tests: &[h("hypcore", "park::tests::an_offer_is_visible_only_after_the_last_wake_ups_flags_are_cleared")],
        missed_because: None,
    },
    Seed {
        id: "cpu-on-starting-before-entry",
        class: Class::CrossCpu,
        bug: "CPU_ON marks the CPU Starting before it writes the entry and context the CPU then reads",
        file: "lib/hypcore/src/psci.rs",
        original: "        self.entry.store(entry, Ordering::Relaxed);\n        self.context.store(context, Ordering::Relaxed);\n        self.state.store(CpuState::Starting as u8, Ordering::SeqCst);",
        replacement: "        self.state.store(CpuState::Starting as u8, Ordering::SeqCst);\n        self.entry.store(entry, Ordering::Relaxed);\n        self.context.store(context, Ordering::Relaxed);",
        tests: &[h("hypcore", "psci::tests::the_entry_and_context_are_written_before_the_cpu_can_see_it_may_start")],
        missed_because: None,
    },
    Seed {
        id: "cpu-on-starting-relaxed",
        class: Class::CrossCpu,
        bug: "CPU_ON publishes Starting with a relaxed store (the entry written before may not be visible)",
        file: "lib/hypcore/src/psci.rs",
        original: "        self.state.store(CpuState::Starting as u8, Ordering::SeqCst);",
        replacement: "        self.state.store(CpuState::Starting as u8, Ordering::Relaxed);",
        tests: &[h("hypcore", "psci::tests::the_entry_and_context_are_written_before_the_cpu_can_see_it_may_start")],
        missed_because: None,
    },
    Seed {
        id: "wake-sgi-not-read-back",
        class: Class::CrossCpu,
        bug: "the waker says the wake SGI is sent without reading the distributor back (the write may still be on its way)",
        file: "lib/hypcore/src/park.rs",
        original: "    // it returns, the SGI is pending in the distributor, before the waker says it is sent.\n    gic.read(Reg::DCtlr);\n",
        replacement: "    // it returns, the SGI is pending in the distributor, before the waker says it is sent.\n",
        tests: &[h("hypcore", "park::tests::send_returns_once_the_sgi_is_in_the_distributor"), PARK_INTERLEAVINGS],
        missed_because: None,
    },
    Seed {
        id: "waker-marks-sent-before-sgi",
        class: Class::CrossCpu,
        bug: "the waker marks the SGI sent when it takes the offer, before sending it",
        file: "lib/hypcore/src/park.rs",
        original: "                Some(b) => {\n                    self.iface = b;\n                    (W::Send, Action::Next)",
        replacement: "                Some(b) => {\n                    self.iface = b;\n                    self.hs.mark_sent();\n                    (W::Send, Action::Next)",
        tests: &[PARK_INTERLEAVINGS],
        missed_because: None,
    },
    Seed {
        id: "parked-cpu-no-isb-after-imo",
        class: Class::CrossCpu,
        bug: "a parked CPU routes IRQs to EL2 (HCR_EL2.IMO) and waits in WFI without an ISB between",
        file: "lib/hypcore/src/park.rs",
        original: "            (P::Sync, _) => (P::Offer, Action::Isb),",
        replacement: "            (P::Sync, _) => (P::Offer, Action::Next),",
        tests: &[PARK_INTERLEAVINGS],
        missed_because: None,
    },
    Seed {
        id: "parked-cpu-trusts-one-wfi",
        class: Class::CrossCpu,
        bug: "a parked CPU takes the end of one WFI as its start, without looking again at its state",
        file: "lib/hypcore/src/park.rs",
        original: "                (false, true) => (P::Check, Action::Wfi),",
        replacement: "                (false, true) => (P::Withdraw, Action::Wfi),",
        tests: &[PARK_INTERLEAVINGS],
        missed_because: None,
    },
    Seed {
        id: "wake-sgi-in-flight-left",
        class: Class::CrossCpu,
        bug: "a woken CPU gives its GIC back without clearing a wake SGI that has not reached its interface yet",
        file: "lib/hypcore/src/park.rs",
        original: "    gic.write(Reg::DCpendsgir(WAKE_SGI), 0xff);\n",
        replacement: "",
        tests: &[h("hypcore", "park::tests::close_clears_a_wake_sgi_that_has_not_reached_the_cpu_interface"), PARK_INTERLEAVINGS],
        missed_because: None,
    },
    Seed {
        id: "spin-release-clean-before-write",
        class: Class::CrossCpu,
        bug: "the release from a spin table cleans the release word to the point of coherency before writing it",
        file: "lib/hypcore/src/park.rs",
        original: "[Release::SpinMpidr, Release::MarkReleased, Release::WriteEntry, Release::CleanToPoc, Release::Dsb, Release::Sev]",
        replacement: "[Release::SpinMpidr, Release::MarkReleased, Release::CleanToPoc, Release::WriteEntry, Release::Dsb, Release::Sev]",
        tests: &[h("hypcore", "park::tests::the_spin_table_release_lets_the_cpu_go_only_once_what_it_reads_is_in_memory")],
        missed_because: None,
    },
    // ---- PSCI's answers and dirty logging's clear (host tests) ----
    Seed {
        id: "cpu-on-one-past-the-last-cpu",
        class: Class::HypChecks,
        bug: "PSCI CPU_ON starts the CPU one past the guest's last (`hyp.cpus`)",
        file: "lib/hypcore/src/psci.rs",
        original: ".filter(|&i| Some(i) != self.kept && i < self.guest_cpus)",
        replacement: ".filter(|&i| Some(i) != self.kept && i <= self.guest_cpus)",
        tests: &[h("hypcore", "psci::tests::cpu_on_starts_the_guests_last_cpu_and_refuses_the_one_after_it")],
        missed_because: None,
    },
    Seed {
        id: "affinity-info-off-pending-swapped",
        class: Class::HypChecks,
        bug: "AFFINITY_INFO answers OFF for a CPU being started and ON_PENDING for one that is off",
        file: "lib/hypcore/src/psci.rs",
        original: "        CpuState::Off => p::AFFINITY_OFF,\n        CpuState::Starting => p::AFFINITY_ON_PENDING,",
        replacement: "        CpuState::Off => p::AFFINITY_ON_PENDING,\n        CpuState::Starting => p::AFFINITY_OFF,",
        tests: &[h("hypcore", "psci::tests::affinity_info_is_the_cpus_state_at_level_0_only")],
        missed_because: None,
    },
    Seed {
        id: "dirty-clear-protects-before-clearing",
        class: Class::HypChecks,
        bug: "DIRTY_LOG_CLEAR write-protects a word's pages before it clears their dirty bits (a write between is lost)",
        file: "lib/hypcore/src/dirty.rs",
        original: "            clear_bits(req.bitmap_word(w), m);\n            (w + 1, req.protect_span(w, m))",
        replacement: "            let span = req.protect_span(w, m);\n            let _ = protect(span.0, span.1);\n            clear_bits(req.bitmap_word(w), m);\n            (w + 1, span)",
        tests: &[h("hypcore", "dirty::tests::a_clear_clears_exactly_the_masked_bits_before_protecting_their_pages")],
        missed_because: None,
    },
    Seed {
        id: "dirty-clear-one-page-past-the-slot",
        class: Class::HypChecks,
        bug: "DIRTY_LOG_CLEAR accepts a range that ends one page past the slot",
        file: "lib/hypcore/src/dirty.rs",
        original: "        if end > pages {",
        replacement: "        if end > pages + 1 {",
        tests: &[h("hypcore", "dirty::tests::clear_arguments_are_checked_in_order")],
        missed_because: None,
    },
    Seed {
        id: "dirty-get-cleaned-before-copy",
        class: Class::HypChecks,
        bug: "DIRTY_LOG_GET cleans the guest's buffer to the point of coherency before copying the bitmap into it",
        file: "lib/hypcore/src/dirty.rs",
        original: "pub const GET_STEPS: [BufferStep; 3] = [BufferStep::Check, BufferStep::Access, BufferStep::CleanInvalidate];",
        replacement: "pub const GET_STEPS: [BufferStep; 3] = [BufferStep::Check, BufferStep::CleanInvalidate, BufferStep::Access];",
        tests: &[h("hypcore", "dirty::tests::a_guest_buffer_is_at_the_point_of_coherency_when_either_side_reads_it")],
        missed_because: None,
    },
    // ---- Device trees: status, rounding, cells (host tests) ----
    Seed {
        id: "dtb-memory-status-fail-counted",
        class: Class::Parsers,
        bug: "a memory node with status \"fail\" (only \"disabled\" is skipped) counts as RAM",
        file: "lib/board/src/memory.rs",
        original: "        if !is_memory_node(t, i) || !available(t, i) {",
        replacement: "        if !is_memory_node(t, i) || crate::node::status(t, i) == crate::node::Status::Disabled {",
        tests: &[h("board", "a_memory_node_that_is_not_okay_is_not_ram")],
        missed_because: None,
    },
    Seed {
        id: "dtb-disabled-reserved-memory-kept",
        class: Class::Parsers,
        bug: "a /reserved-memory region whose node is disabled is still kept out of RAM",
        file: "lib/board/src/memory.rs",
        original: "    for c in t.children(rm).filter(|&c| available(t, c)) {",
        replacement: "    for c in t.children(rm) {",
        tests: &[h("board", "a_reserved_memory_region_that_is_not_okay_reserves_nothing")],
        missed_because: None,
    },
    Seed {
        id: "dtb-failed-cpu-kept",
        class: Class::Parsers,
        bug: "a CPU node with status \"fail\" is one of the board's CPUs",
        file: "lib/board/src/cpus.rs",
        original: "            Status::Other(_) => false,",
        replacement: "            Status::Other(_) => true,",
        tests: &[h("board", "a_cpu_that_failed_is_not_there_and_a_disabled_one_is_when_it_can_be_started")],
        missed_because: None,
    },
    Seed {
        id: "dtb-spin-table-end-rounded-down",
        class: Class::Parsers,
        bug: "the spin-table memory a /memreserve/ entry holds ends at the page boundary below its end",
        file: "lib/board/src/scan.rs",
        original: "Region::new(base, (r.end().saturating_add(0xfff) & !0xfff) - base)",
        replacement: "Region::new(base, (r.end() & !0xfff) - base)",
        tests: &[h("board", "spin_table_memory_is_rounded_out_to_whole_pages")],
        missed_because: None,
    },
    Seed {
        id: "guest-dtb-gicv3-gicc-dropped",
        class: Class::Parsers,
        bug: "hiding EL2 from the guest drops a GICv3's legacy CPU interface with GICH and GICV",
        file: "lib/board/src/guest.rs",
        original: "let keep = if v3 { 2 + t.prop_u32(i, \"#redistributor-regions\")?.unwrap_or(1) as usize } else { 2 };",
        replacement: "let keep = if v3 { 1 + t.prop_u32(i, \"#redistributor-regions\")?.unwrap_or(1) as usize } else { 2 };",
        tests: &[h("board", "hiding_el2_keeps_a_gicv3s_cpu_interface")],
        missed_because: None,
    },
    Seed {
        id: "guest-dtb-initrd-width-by-start",
        class: Class::Parsers,
        bug: "the guest's initrd gets one cell when it starts below 4 GiB, though it ends above",
        file: "lib/board/src/guest.rs",
        original: "if initrd_width == Some(4) && r.end() <= u64::from(u32::MAX) {",
        replacement: "if initrd_width == Some(4) && r.base <= u64::from(u32::MAX) {",
        tests: &[h("board", "an_initrd_crossing_4g_gets_two_cells_from_a_one_cell_host")],
        missed_because: None,
    },
    // ---- Placement: the loader's rules, the move home, the memory plan (host tests) ----
    Seed {
        id: "plan-region-start-rounded-up",
        class: Class::Placement,
        bug: "the hypervisor's region starts at the 2 MiB boundary above its image, not below",
        file: "lib/hypcore/src/plan.rs",
        original: "let hyp = Range::new(align_down(img.start, BLOCK_2M), hyp_end);",
        replacement: "let hyp = Range::new(align_up(img.start, BLOCK_2M).unwrap_or(img.start), hyp_end);",
        tests: &[h("hypcore", "the_region_starts_on_the_2m_boundary_below_the_image_and_its_pool_on_the_page_after_it")],
        missed_because: None,
    },
    Seed {
        id: "plan-frames-on-the-images-last-page",
        class: Class::Placement,
        bug: "the frame pool after the image starts at the page boundary below the image's end (its last page)",
        file: "lib/hypcore/src/plan.rs",
        original: "let image_end = align_up(img.end, PAGE).ok_or(too_large(\"image end\", img.end))?;",
        replacement: "let image_end = align_down(img.end, PAGE);",
        tests: &[h("hypcore", "the_region_starts_on_the_2m_boundary_below_the_image_and_its_pool_on_the_page_after_it")],
        missed_because: None,
    },
    Seed {
        id: "plan-spare-keeps-reserved",
        class: Class::Placement,
        bug: "with hyp.guest-mem, RAM above the guest's share is taken as frames with the reserved memory in it",
        file: "lib/hypcore/src/plan.rs",
        original: "            for a in &avoid {\n                above = range::subtract(&above, *a);\n            }\n",
        replacement: "",
        tests: &[h("hypcore", "spare_ram_above_the_guests_share_leaves_out_reserved_memory_and_the_initrd")],
        missed_because: None,
    },
    Seed {
        id: "home-top-is-the-largest-range",
        class: Class::Placement,
        bug: "the hypervisor moves to the top of the largest RAM range instead of the one that ends highest",
        file: "lib/hypcore/src/home.rs",
        original: "input.ram.iter().max_by_key(|r| r.end)",
        replacement: "input.ram.iter().max_by_key(|r| r.len())",
        tests: &[h("hypcore", "the_top_of_ram_is_the_range_that_ends_highest_even_when_it_is_the_smaller")],
        missed_because: None,
    },
    Seed {
        id: "home-ignores-a-pools-alignment",
        class: Class::Placement,
        bug: "the room left above the hypervisor's region for a 1 GiB aligned slot pool is its size, not what its alignment takes",
        file: "lib/hypcore/src/home.rs",
        original: "top.checked_sub(size).map_or(0, |s| top - align_down(s, align))",
        replacement: "top.checked_sub(size).map_or(0, |_| size)",
        tests: &[h("hypcore", "the_region_goes_right_below_a_slot_pool_aligned_below_a_top_that_is_not")],
        missed_because: None,
    },
    Seed {
        id: "load-initrd-to-the-last-byte-refused",
        class: Class::Placement,
        bug: "an initrd that ends on the last byte of RAM is refused as too large",
        file: "lib/hypcore/src/load.rs",
        original: "            if r.end > ram.end {\n                return Err(LoadError::InitrdTooLarge",
        replacement: "            if r.end >= ram.end {\n                return Err(LoadError::InitrdTooLarge",
        tests: &[h("hypcore", "an_initrd_or_a_dtb_that_ends_on_the_last_byte_of_ram_fits")],
        missed_because: None,
    },
    Seed {
        id: "load-scratch-over-a-finished-copy",
        class: Class::Placement,
        bug: "the scratch space that breaks a cycle of copies may overwrite a copy already done",
        file: "lib/hypcore/src/load.rs",
        original: "                busy.extend_from_slice(&done);\n",
        replacement: "",
        tests: &[h("hypcore", "scratch_space_for_a_cycle_never_overwrites_a_copy_already_done")],
        missed_because: None,
    },
    // ---- TLB maintenance: barriers, bounds, ASIDs (host tests) ----
    Seed {
        id: "tlbi-completed-by-dsb-ishst",
        class: Class::TlbAsid,
        bug: "a finished gather waits for its TLBIs with DSB ISHST (a store-only barrier completes no TLBI)",
        file: "lib/pgtable/src/gather.rs",
        original: "                emit_invalidation(regime, &req, policy, tlb);\n                tlb.dsb(Barrier::Ish);",
        replacement: "                emit_invalidation(regime, &req, policy, tlb);\n                tlb.dsb(Barrier::IshSt);",
        tests: &[h("pgtable", "gather::tests::a_finished_gather_brackets_its_tlbis_with_the_barriers_they_need")],
        missed_because: None,
    },
    Seed {
        id: "new-entries-without-isb",
        class: Class::TlbAsid,
        bug: "a gather that only added entries ends with DSB ISHST and no ISB",
        file: "lib/pgtable/src/gather.rs",
        original: "                tlb.dsb(Barrier::IshSt);\n                tlb.isb();\n            }\n        }",
        replacement: "                tlb.dsb(Barrier::IshSt);\n            }\n        }",
        tests: &[h("pgtable", "gather::tests::a_finished_gather_brackets_its_tlbis_with_the_barriers_they_need")],
        missed_because: None,
    },
    Seed {
        id: "stage2-vmalle1-before-ipa-tlbi-completes",
        class: Class::TlbAsid,
        bug: "stage 2's one-page flush drops the combined stage-1+2 entries without a DSB ISH after the IPA TLBI",
        file: "lib/pgtable/src/gather.rs",
        original: "        if let Regime::Stage2 { vmid } = regime {\n            tlb.dsb(Barrier::Ish);\n            tlb.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: Some(vmid) }, leaf_only: false, sh });\n            return 2;",
        replacement: "        if let Regime::Stage2 { vmid } = regime {\n            tlb.tlbi(Tlbi { op: TlbiOp::Vmalle1 { vmid: Some(vmid) }, leaf_only: false, sh });\n            return 2;",
        tests: &[h("pgtable", "gather::tests::stage2_drops_combined_entries_only_after_its_ipa_tlbis_completed")],
        missed_because: None,
    },
    Seed {
        id: "removed-table-at-range-end-covered",
        class: Class::TlbAsid,
        bug: "a removed table that begins where the flushed range ends counts as covered by its leaf TLBIs",
        file: "lib/pgtable/src/gather.rs",
        original: "        let inside = off >= start && off < end;",
        replacement: "        let inside = off >= start && off <= end;",
        tests: &[h("pgtable", "gather::tests::a_removed_table_just_past_the_range_gets_its_own_tlbi")],
        missed_because: None,
    },
    Seed {
        id: "asid-reserved-copy-not-renumbered",
        class: Class::TlbAsid,
        bug: "a space renumbered from a CPU's reserved ASID leaves that reservation in the old generation",
        file: "lib/pgtable/src/asid.rs",
        original: "                if *r == id {\n                    *r = new_id;\n                    hit = true;",
        replacement: "                if *r == id {\n                    hit = true;",
        tests: &[h("pgtable", "asid::tests::a_space_kept_across_two_rollovers_keeps_the_number_its_cpu_runs_it_with")],
        missed_because: None,
    },
    Seed {
        id: "asid-retired-locally",
        class: Class::TlbAsid,
        bug: "a retired ASID is invalidated on this CPU only (TLBI ASIDE1, not ASIDE1IS)",
        file: "lib/pgtable/src/asid.rs",
        original: "        tlb.tlbi(Tlbi { op: TlbiOp::Aside1 { asid }, leaf_only: false, sh: Shareability::InnerShareable });",
        replacement: "        tlb.tlbi(Tlbi { op: TlbiOp::Aside1 { asid }, leaf_only: false, sh: Shareability::Local });",
        tests: &[h("pgtable", "asid::tests::the_flush_of_a_rollover_and_of_a_retired_asid_complete_where_they_must")],
        missed_because: None,
    },
    Seed {
        id: "read-only-split-past-its-range",
        class: Class::TlbAsid,
        bug: "a read-only split takes a block crossing its range's end into its run (pages past the end become read-only)",
        file: "lib/pgtable/src/ops/split.rs",
        original: "            if off + size > e_end || off < s {",
        replacement: "            if off > e_end || off < s {",
        tests: &[h("pgtable", "ops::tests::a_read_only_split_protects_nothing_past_its_range")],
        missed_because: None,
    },
    Seed {
        id: "direct-path-root-index-9-bits",
        class: Class::TlbAsid,
        bug: "the direct path indexes stage 2's 1024-entry concatenated root with 9 bits",
        file: "lib/pgtable/src/ops/direct.rs",
        original: "    if level == start {\n        i\n    } else {",
        replacement: "    if level == 0 {\n        i\n    } else {",
        tests: &[h("pgtable", "ops::tests::a_direct_protect_above_512g_of_ipa_reaches_its_own_entry")],
        missed_because: None,
    },
    // ---- The verdict (host tests) ----
    Seed {
        id: "judge-qemu-refused-after-output",
        class: Class::Judging,
        bug: "QEMU's stderr messages make a run that printed its output \"QEMU refused\"",
        file: "xtask/src/supervise/judge.rs",
        original: "if code != 0 && o.console_lines == 0 && !o.qemu_messages.is_empty() {",
        replacement: "if code != 0 && !o.qemu_messages.is_empty() {",
        tests: &[h("xtask", "supervise::judge::tests::qemu_messages_after_the_guest_ran_are_no_refusal")],
        missed_because: None,
    },
];
