//! Perf counters: the PMU driver on the CPU (overflow, exact instruction counts, EL filters,
//! honest "not counted here"), and the project's own TLBI/DSB/ISB counters checked against an
//! independent count, taken by the QEMU plugin from the instructions the guest executes.
//!
//! The own counts come from `perf.events=` (kernel `perf::scenario`): per EL, `lib/pgtable`'s
//! TLB maintenance, cache maintenance (`rt::cache`), the PMU driver and the kernel's other
//! ISBs. The plugin counts the same window (marked with `HINT #126/#127`) per vCPU and EL.
//! Workloads that run on one CPU must match exactly; the small contpte and split runs are in the
//! default suite, the bigger ones under `cargo xtask test --long` (ignored otherwise).

use tests::{boot, boot_counting, config, Run};
use xtask::launch::Launch;
use xtask::plugin::Counts;

fn pmu_selftest(cpu: &str, icount: bool) -> Run {
    let run = boot(config(|c| {
        c.cpu = cpu.into();
        c.gic = if cpu == "max" { 3 } else { 2 };
        c.smp = 1;
        c.icount = icount.then_some(0);
        c.bootargs = "test=pmu".into();
    }));
    run.expect_exit(0);
    run.expect_output("kernel: pmu: driver checks passed");
    run
}

#[test]
fn pmu_driver_on_max_64_bit_counters_exact_instructions_el_filters() {
    let run = pmu_selftest("max", true);
    let r = run.record("pmu_selftest");
    assert_eq!(r.bool("long_counters"), Some(true), "max has PMUv3p5\n{}", run.dump());
    assert_eq!(r.str("swincr_after_wrap"), Some("0x100000010"));
    assert_eq!(r.u64("wraps_seen"), Some(0), "64-bit counters do not wrap at 2^32");
    assert_eq!(r.str("overflow_irq"), Some("64-bit counters: not armed"), "{}", run.dump());
    assert_eq!(r.u64("insns_2000_extra"), Some(4000), "{}", run.dump());
    assert_eq!(r.u64("counted_events_checked"), Some(2), "CPU_CYCLES and INST_RETIRED");
    assert_eq!(r.u64("el2_over_el1_loop"), Some(0));
    assert!(r.u64("el2_over_hypercall").unwrap() > 0, "{}", run.dump());
}

#[test]
fn pmu_driver_on_a76_32_bit_counters_wrap_accounting() {
    let run = pmu_selftest("cortex-a76", true);
    let r = run.record("pmu_selftest");
    assert_eq!(r.bool("long_counters"), Some(false), "the A76 is PMUv3p1: 32-bit event counters");
    assert_eq!(r.str("swincr_after_wrap"), Some("0x100000010"));
    assert_eq!(r.u64("wraps_seen"), Some(1), "the overflow flag was seen and folded in once\n{}", run.dump());
    // With the overflow interrupt (the device tree's PPI 7) armed, its handler folds the wrap in
    // before any read.
    assert_eq!((r.u64("overflow_irqs"), r.u64("irq_wraps_before_read")), (Some(1), Some(1)), "{}", run.dump());
    assert_eq!(r.u64("insns_2000_extra"), Some(4000), "{}", run.dump());
}

#[test]
fn without_icount_qemu_does_not_count_instructions_and_says_so() {
    let run = pmu_selftest("cortex-a76", false);
    let r = run.record("pmu_selftest");
    assert_eq!(r.str("inst_retired"), Some("not implemented here (PMCEID0/1)"), "{}", run.dump());
    assert_eq!(r.str("filtered_event"), Some("CPU_CYCLES"));
    assert_eq!(r.u64("el2_over_el1_loop"), Some(0), "cycles filtered to EL2 stop at EL1");
    // SW_INCR aside, QEMU really counts CPU_CYCLES only here (its PMCEID also lists the STALL
    // events, which read 0: the driver calls them not counted).
    assert_eq!(r.u64("counted_events_checked"), Some(1), "{}", run.dump());
}

/// The own counts of `el` (`tlbi`, `dsb`, `isb`) from the `perf` records.
fn own(run: &Run, el: &str) -> (u64, u64, u64) {
    let get = |name: &str| {
        run.records("perf")
            .iter()
            .find(|r| r.str("source") == Some("own") && r.str("el") == Some(el) && r.str("counter") == Some(name))
            .and_then(|r| r.u64("value"))
            .unwrap_or_else(|| panic!("no own {name} at {el}\n{}", run.dump()))
    };
    (get("tlbi"), get("dsb"), get("isb"))
}

/// A table of both counts per EL, and per vCPU from the plugin.
fn table(run: &Run, c: &Counts) -> String {
    let mut t = String::from("el   source  tlbi  dsb  isb\n");
    for el in [1u8, 2] {
        let o = own(run, &format!("el{el}"));
        let p = c.window_el(0, el);
        t += &format!("el{el}  own     {} {} {}\nel{el}  plugin  {} {} {}\n", o.0, o.1, o.2, p.0, p.1, p.2);
    }
    for l in c.window(0) {
        t += &format!("vcpu{} el{}: tlbi {} dsb {} isb {}\n", l.vcpu, l.el, l.tlbi, l.dsb, l.isb);
    }
    t
}

/// Boots `workload` with its window marked and checks the own counts against the plugin's,
/// per EL: TLBI and DSB always, ISB too when `isb` (a workload whose other CPUs spin on a lock
/// executes ISBs in `spin_loop` that no counter keeps).
fn agree(cpu: &str, mem: &str, smp: u32, workload: &str, isb: bool) {
    agree_on(
        config(|c| {
            c.cpu = cpu.into();
            c.gic = if cpu == "max" { 3 } else { 2 };
            c.mem = Some(tests::mem(mem));
            c.smp = smp;
        }),
        workload,
        isb,
    );
}

/// [`agree`] on the machine `base` describes; returns the plugin's counts.
fn agree_on(mut base: Launch, workload: &str, isb: bool) -> Counts {
    let cpu = base.cpu.clone();
    // The whole workload in the name: two runs of one workload (the small and the big split)
    // must not share an output file.
    let name = format!("agree-{}-{cpu}-{}", base.machine, workload.replace([' ', '='], "-"));
    base.bootargs = format!("{workload} perf.events= perf.scenario=agree");
    let (run, counts) = boot_counting(base, &name);
    run.expect_exit(0);
    assert_eq!(counts.windows, 1, "one marked window\n{}", run.dump());
    let t = table(&run, &counts);
    eprintln!("{workload} on {cpu}:\n{t}");
    for el in [1u8, 2] {
        let o = own(&run, &format!("el{el}"));
        let p = counts.window_el(0, el);
        assert_eq!(o.0, p.0, "TLBIs at EL{el} differ\n{t}");
        assert_eq!(o.1, p.1, "DSBs at EL{el} differ\n{t}");
        if isb {
            assert_eq!(o.2, p.2, "ISBs at EL{el} differ\n{t}");
        }
    }
    counts
}

/// The plugin on a board model: the Pi 4 needs QEMU 10 (plugin API 2 to 4; the library is
/// built for API 3, whose `qemu_plugin_insn_data` copies), where the one built for QEMU 7.2's
/// API 1 is refused. The contpte benchmark on one of the Pi's four CPUs: the own counters and
/// the plugin agree per EL, and the counts are those of a real run: TLBIs, DSBs and ISBs at
/// EL1 in the window, the hypervisor's own at EL2 since boot, every vCPU seen, and no
/// instruction whose bytes the plugin could not read (`Counts` refuses that).
#[test]
fn own_counters_agree_with_the_plugin_on_pi4_under_qemu_10() {
    let counts = agree_on(Launch::for_machine(tests::machine("pi4")), "hyp.cpus=1 bench=contpte", true);
    assert_eq!(counts.api, 3, "QEMU 10 takes plugin API 2 to 4: the library is built for 3");
    let (tlbi, dsb, isb) = counts.window_el(0, 1);
    assert!(tlbi > 1000 && dsb > 1000 && isb > 1000, "contpte's window at EL1: tlbi {tlbi} dsb {dsb} isb {isb}");
    let total = |el: u8| counts.lines.iter().filter(move |c| c.window.is_none() && c.el == el);
    assert!(total(2).any(|c| c.tlbi > 0 && c.dsb > 0 && c.isb > 0), "the hypervisor's own at EL2: {counts:?}");
    let vcpus: std::collections::BTreeSet<u32> = counts.lines.iter().map(|c| c.vcpu).collect();
    assert_eq!(vcpus.len(), 4, "the Pi's four vCPUs all ran (the three spare ones in the spin-table loop)");
}

#[test]
fn own_counters_agree_with_the_plugin_on_contpte() {
    agree("max", "1G", 1, "bench=contpte", true);
}

#[test]
fn own_counters_agree_with_the_plugin_on_a_small_split_with_cache_maintenance() {
    agree("max", "4G", 1, "bench=split hyp.slotpool=1G split.gib=1 split.iters=1", true);
}

#[test]
fn own_counters_agree_with_the_plugin_on_el0_programs() {
    // The mprotect benchmark: an EL0 program (its ISBs, when it reads the counters, are EL0's:
    // the plugin's EL0 ranges) making system calls whose TLB maintenance the kernel counts,
    // with the scheduler's, the GIC's and the idle wait's barriers.
    agree("max", "1G", 1, "bench=mprotect mprotect.rounds=2", true);
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_own_counters_agree_on_linear_map_max_and_a76() {
    agree("max", "1G", 1, "bench=linear-map", true);
    agree("cortex-a76", "1G", 1, "bench=linear-map", true);
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_own_counters_agree_on_contpte_a76_and_a_big_split() {
    agree("cortex-a76", "1G", 1, "bench=contpte", true);
    agree("max", "4G", 1, "bench=split hyp.slotpool=1G split.gib=8 split.iters=1", true);
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_own_counters_agree_on_dirty_log_with_four_cpus() {
    agree("max", "3G", 4, "test=dirty-log hyp.slotpool=1G", false);
}
