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
}

impl Class {
    pub const ALL: [Class; 7] = [
        Class::TlbAsid,
        Class::EoiGic,
        Class::CrossCpu,
        Class::SyscallErrors,
        Class::Judging,
        Class::Parsers,
        Class::HypChecks,
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
        file: "hypervisor/src/psci.rs",
        original: "    if !guest::is_guest_ram(entry, 4) || !entry.is_multiple_of(4) {",
        replacement: "    if !entry.is_multiple_of(4) {",
        tests: &[SMCCC],
        missed_because: None,
    },
    Seed {
        id: "cpu-suspend-reserved-bits",
        class: Class::HypChecks,
        bug: "PSCI CPU_SUSPEND accepts a power_state with reserved bits set",
        file: "hypervisor/src/psci.rs",
        original: "    if power_state & 0xfcfe_0000 != 0 || power_state & (1 << 16) != 0 {",
        replacement: "    if power_state & (1 << 16) != 0 {",
        tests: &[SMCCC],
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
];
