//! Guest kernel memory: the BBML2 decision and its boot arguments, the linear map's
//! shape per `rodata=` mode, and `set_memory_*` permissions that really hold (denied accesses
//! are caught and counted by the kernel, through the mapping and the linear alias).

use tests::{boot, config, Run};

fn perms(cpu: &str, bootargs: &str) -> Run {
    let run = boot(config(|c| {
        c.cpu = cpu.into();
        c.gic = if cpu == "max" { 3 } else { 2 };
        c.bootargs = format!("test=mem-perms {bootargs}");
    }));
    run.expect_exit(0);
    run.expect_output("kernel: mem-perms:");
    run
}

/// Faults the test must have taken: (write, read, exec).
fn faults(run: &Run) -> (u64, u64, u64) {
    let r = run.record("mem_perms");
    (r.u64("write_faults").unwrap(), r.u64("read_faults").unwrap(), r.u64("exec_faults").unwrap())
}

#[test]
fn max_rodata_full_uses_bbml2_blocks_and_alias_permissions() {
    let run = perms("max", "");
    let b = run.records("banner");
    assert!(b.iter().all(|b| b.bool("bbml2") == Some(true) && b.str("rodata") == Some("full")), "{}", run.dump());
    run.expect_output("bbml2 yes (BBM level 2 on an allow-listed core)");
    run.expect_output("linear map blocks");
    let r = run.record("mem_perms");
    // The page's alias sat in a 2 MiB block and was split live, once, at the range end.
    assert_eq!(r.u64("alias_level_before"), Some(2), "{}", run.dump());
    assert_eq!(r.u64("linear_splits"), Some(1), "{}", run.dump());
    // write: page RO, alias RO, text, text alias, rodata, rodata alias, one page of a 64 KiB
    // range; read: page and alias invalid, page after vfree; exec: NX page, alias, after nx.
    assert_eq!(faults(&run), (7, 3, 3), "{}", run.dump());
    // A block-mapped linear map needs a handful of table pages, not hundreds.
    assert!(b[0].u64("linear_table_pages").unwrap() <= 4, "{}", run.dump());
}

#[test]
fn a76_never_takes_the_bbml2_path() {
    let run = perms("cortex-a76", "");
    for b in run.records("banner") {
        assert_eq!(b.bool("bbml2"), Some(false), "{}", run.dump());
        assert_eq!(b.bool("bbml2_capable"), Some(false));
        // PTE-only: one table page per 2 MiB of RAM.
        assert!(b.u64("linear_table_pages").unwrap() > 400, "{}", run.dump());
    }
    run.expect_output("bbml2 no (no FEAT_BBM)");
    run.expect_output("linear map PTE-only");
    let r = run.record("mem_perms");
    assert_eq!(r.u64("alias_level_before"), Some(3));
    assert_eq!(r.u64("linear_splits"), Some(0), "without BBML2 nothing is split live\n{}", run.dump());
    assert_eq!(faults(&run), (7, 3, 3), "{}", run.dump());
}

#[test]
fn a76_forced_bbml2_is_refused_without_the_override() {
    let run = perms("cortex-a76", "bbml2=on");
    run.expect_output("kernel: bbml2=on refused: no FEAT_BBM (add bbml2_unsafe_override to force it)");
    for b in run.records("banner") {
        assert_eq!(b.bool("bbml2"), Some(false), "{}", run.dump());
    }
    run.expect_output("linear map PTE-only");
}

#[test]
fn a76_forced_bbml2_with_the_unsafe_override() {
    let run = perms("cortex-a76", "bbml2=on bbml2_unsafe_override");
    run.expect_output("bbml2=on FORCED by bbml2_unsafe_override");
    // Forced for the system, forced for every CPU: the late CPUs join too (the one rule,
    // `pgtable::kmem::late_cpu_accepted`).
    run.expect_output(&format!("kernel: {n} of {n} CPUs online", n = run.cfg.smp));
    for b in run.records("banner") {
        assert_eq!(b.bool("bbml2"), Some(true), "{}", run.dump());
    }
    assert_eq!(run.record("mem_perms").u64("linear_splits"), Some(1));
}

#[test]
fn max_bbml2_off_is_pte_only() {
    let run = perms("max", "bbml2=off");
    run.expect_output("bbml2 no (bbml2=off)");
    run.expect_output("linear map PTE-only");
    assert_eq!(run.record("mem_perms").u64("linear_splits"), Some(0));
    assert_eq!(faults(&run), (7, 3, 3), "{}", run.dump());
}

#[test]
fn rodata_on_keeps_blocks_and_leaves_the_alias_writable() {
    let run = perms("cortex-a76", "rodata=on");
    run.expect_output("rodata=on | linear map blocks");
    let r = run.record("mem_perms");
    assert_eq!(r.u64("linear_splits"), Some(0), "{}", run.dump());
    // Only the pages themselves, text and rodata deny writes; the aliases allow them.
    assert_eq!(faults(&run), (4, 2, 3), "{}", run.dump());
}

#[test]
fn rodata_off_leaves_the_image_writable() {
    let run = perms("max", "rodata=off");
    run.expect_output("rodata=off");
    assert_eq!(faults(&run), (2, 2, 3), "{}", run.dump());
}

#[test]
fn contpte_unfolds_refolds_and_switches_off_at_run_time() {
    for (cpu, args) in [("max", ""), ("cortex-a76", ""), ("max", "contpte=off")] {
        let run = perms(cpu, args);
        let r = run.record("mem_perms");
        assert_eq!(r.bool("contpte_refolded"), Some(true), "{}", run.dump());
        assert_eq!(r.bool("contpte_off_stays_unfolded"), Some(true), "{}", run.dump());
        let on = args != "contpte=off";
        assert!(run.records("banner").iter().all(|b| b.bool("contpte") == Some(on)), "{}", run.dump());
        run.expect_output(if on { "contpte on" } else { "contpte off" });
    }
}

#[test]
fn bad_memory_boot_arguments_fail_the_boot() {
    for arg in ["bbml2=maybe", "rodata=partial", "contpte=2"] {
        let run = boot(config(|c| c.bootargs = arg.into()));
        run.expect_exit(abi::exit::GUEST_FAILURE as i32);
        run.expect_output(&format!("bad boot argument {arg:?}"));
    }
}

#[test]
fn unarmed_permission_faults_stay_fatal() {
    // test=undef still ends the run: only faults a probe armed are caught.
    let run = boot(config(|c| c.bootargs = "test=undef".into()));
    run.expect_exit(abi::exit::GUEST_EXCEPTION as i32);
}

#[test]
fn a_late_cpu_that_disagrees_about_bbml2_is_refused() {
    // QEMU's CPUs are all alike: the test argument makes CPU 2 look not allowed.
    let run = boot(config(|c| c.bootargs = "bbml2_test_disallow_cpu=2".into()));
    run.expect_exit(0);
    run.expect_output("kernel: CPU 2 refused: the system uses BBML2 but this CPU");
    run.expect_output("kernel: 3 of 4 CPUs online");
    let cpus: Vec<u64> = run.records("banner").iter().map(|b| b.u64("cpu").unwrap()).collect();
    assert!(!cpus.contains(&2), "{}", run.dump());
    // Without BBML2 in use every CPU may join.
    let run = boot(config(|c| c.bootargs = "bbml2=off bbml2_test_disallow_cpu=2".into()));
    run.expect_exit(0);
    run.expect_output("kernel: 4 of 4 CPUs online");
}

#[test]
fn the_bbml2_allow_list_decides_through_the_boots_own_check() {
    // QEMU's only BBM-2 CPU is allow-listed: feed the boot's decision other MIDRs.
    for (midr, core) in
        [("0x410fd823", None), ("0x410fd822", Some("Cortex-X4 r0p2")), ("0x410fd0c0", Some("Neoverse-N1 r0p0"))]
    {
        let allowed = core.is_none();
        let run = boot(config(|c| {
            c.smp = 1;
            c.bootargs = format!("bbml2_test_midr={midr}");
        }));
        run.expect_exit(0);
        let b = run.record("banner");
        assert_eq!(b.bool("bbml2"), Some(allowed), "MIDR {midr}\n{}", run.dump());
        run.expect_output(&match core {
            None => "bbml2 yes (BBM level 2 on an allow-listed core)".to_string(),
            Some(core) => format!("bbml2 no (CPU {core} not on the BBML2 allow-list)"),
        });
        run.expect_output(if allowed { "linear map blocks" } else { "linear map PTE-only" });
    }
}

/// lib/pgtable's assembly for groups of 16 descriptors (the protect's runs, the contpte fold
/// and unfold) agrees with its portable spec on the CPU, on every drawn case; the host tests
/// only ever run the spec.
#[test]
fn pgtable_group_assembly_agrees_with_its_spec_on_the_cpu() {
    let run = boot(config(|c| c.bootargs = "test=pgtable-groups".into()));
    run.expect_exit(0);
    run.expect_output("kernel: pgtable-groups: 6250 comparisons of the assembly with its spec agree");
}
