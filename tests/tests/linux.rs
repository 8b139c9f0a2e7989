//! Debian's arm64 Linux (6.1, cloud flavour, busybox initramfs) as the guest: it reaches user
//! space on every machine of the matrix, sees exactly the RAM the hypervisor gives it, gets a
//! bus error (not a dead machine) for a stray access, is reported failed when it panics, and
//! runs under dirty logging with pre-copy migration into a second memory image. The default
//! run boots a76 (fast under TCG); the rest of the matrix runs with `cargo xtask test --long`.

use tests::{boot, linux_config, Run};

/// Boots Linux with `init_args` on `cpu`/`gic`/`smp`; checks the marker, the guest's view of
/// its CPUs and RAM against what the hypervisor reports.
fn linux(cpu: &str, gic: u8, smp: u32, mem: &str, init_args: &str, bootargs: &str) -> Run {
    let run = boot(linux_config(init_args, |c| {
        c.cpu = cpu.into();
        c.gic = gic;
        c.smp = smp;
        c.mem = Some(tests::mem(mem));
        c.bootargs = bootargs.into();
    }));
    run.expect_output(xtask::linux::MARKER);
    let hyp = run.record("hyp_boot");
    assert_eq!(hyp.bool("bundle"), Some(true), "{}", run.dump());
    let lg = run.record("linux_guest");
    let guest_cpus = if bootargs.contains("hyp.migrate") { smp - 1 } else { smp };
    assert_eq!(lg.u64("cpus"), Some(guest_cpus as u64), "every CPU reached Linux\n{}", run.dump());
    // RAM exactly as the hypervisor gives it: one range, no hole, nothing more or less.
    let ram = hyp.u64s("guest_ram").unwrap();
    assert_eq!(ram.len(), 2, "the guest's RAM is one range\n{}", run.dump());
    let want = format!("{:x}-{:x}", ram[0], ram[1] - 1);
    assert_eq!(lg.str("ram"), Some(want.as_str()), "Linux's System RAM\n{}", run.dump());
    run
}

fn matrix_row(cpu: &str, gic: u8, smp: u32) {
    let run = linux(cpu, gic, smp, "1G", "", "");
    run.expect_exit(0);
    run.expect_output("hyp: guest called PSCI SYSTEM_OFF");
    if cpu == "max" {
        let f = run.record("linux_guest").str("features").unwrap().to_string();
        assert!(f.contains("sve") && f.contains("paca"), "SVE and pointer auth reach Linux: {f}");
        assert_eq!(run.record("linux_guest").u64("sve_default_vl"), Some(64));
    }
}

#[test]
fn a76_gicv3_1cpu_reaches_user_space_and_a_stray_access_is_a_bus_error() {
    let run = linux("cortex-a76", 3, 1, "1G", "pgtlab_test=stray", "");
    run.expect_exit(0);
    let hyp_start = run.record("hyp_boot").u64("hyp_start").unwrap();
    let stray = run.record("linux_stray");
    assert_eq!(stray.u64("addr"), Some(hyp_start), "the first byte above guest RAM is the hypervisor's");
    assert_eq!(stray.u64("status"), Some(128 + 7), "busybox devmem died of SIGBUS\n{}", run.dump());
    run.expect_output("injected a synchronous external abort into the guest");
    assert_eq!(run.record("hyp_exits").u64("injected_abort"), Some(1), "{}", run.dump());
}

#[test]
fn a76_gicv2_4cpus_reaches_user_space() {
    matrix_row("cortex-a76", 2, 4);
}

#[test]
fn a_linux_panic_is_reported_as_a_reset_not_success() {
    let run = linux("cortex-a76", 3, 1, "1G", "pgtlab_test=panic", "");
    run.expect_exit(abi::exit::GUEST_RESET as i32);
    run.expect_output("Kernel panic - not syncing: sysrq triggered crash");
    run.expect_output("hyp: guest called PSCI SYSTEM_RESET");
}

/// Dirty logging with pre-copy migration under the running guest: every watched page the
/// program wrote is in a bitmap, the mirror equals the guest's memory at the stop.
fn migration(scenario: u64, threshold: u64) {
    let args = format!("pgtlab_test=dirty pgtlab_dirty_args=\"scenario={scenario} threshold={threshold} rounds=8\"");
    let run = linux("cortex-a76", 3, 3, "512M", &args, "hyp.migrate");
    run.expect_exit(0);
    let s = run.record("migrate_summary");
    assert_eq!(s.u64("scenario"), Some(scenario));
    assert_eq!(s.bool("mirror_equal"), Some(true), "{}", run.dump());
    assert_eq!(s.u64("missed"), Some(0), "{}", run.dump());
    assert_eq!(s.u64("mismatched_pages"), Some(0));
    let per_round = s.u64s("pages_per_round").unwrap();
    assert!(per_round.len() >= 2, "a full copy then at least one dirty round: {per_round:?}");
    assert!(s.u64("faults").unwrap() > 0, "the guest's writes faulted: {}", run.dump());
    // Every watched page was written at 4000 pages/s: round 1 saw all 256 of them dirty.
    let r1 = run.records("migrate_round").into_iter().find(|r| r.u64("round") == Some(1)).unwrap();
    assert_eq!(r1.u64("watched_dirty"), Some(256), "{}", run.dump());
    let d = run.record("linux_dirty");
    assert_eq!(d.u64("verdict"), Some(1), "{}", run.dump());
    assert_eq!(run.record("linux_dirty_exit").u64("status"), Some(0), "{}", run.dump());
    assert!(d.f64("writes_per_s").unwrap() > 1000.0, "the program kept writing: {}", run.dump());
}

#[test]
fn dirty_logging_scenario_1_pre_copy_under_linux() {
    migration(1, 512);
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn dirty_logging_scenario_2_pre_copy_under_linux() {
    migration(2, 64);
}

macro_rules! long_matrix {
    ($($name:ident: $cpu:expr, $gic:expr, $smp:expr;)*) => {
        $(#[test] #[ignore = "long: cargo xtask test --long"] fn $name() { matrix_row($cpu, $gic, $smp); })*
    };
}

long_matrix! {
    a76_gicv2_1cpu: "cortex-a76", 2, 1;
    a76_gicv3_4cpus: "cortex-a76", 3, 4;
    max_gicv2_1cpu: "max", 2, 1;
    max_gicv2_4cpus: "max", 2, 4;
    max_gicv3_1cpu: "max", 3, 1;
    max_gicv3_4cpus: "max", 3, 4;
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn max_with_mte_linux_uses_its_tags() {
    let run = boot(linux_config("", |c| {
        c.smp = 1;
        c.mte = true;
    }));
    run.expect_exit(0);
    let f = run.record("linux_guest").str("features").unwrap().to_string();
    assert!(f.split(' ').any(|x| x == "mte"), "Linux found MTE: {f}\n{}", run.dump());
}

/// Each Linux peer of `bench mprotect --peer linux,linux-newest` (Debian's 6.12 and its newest
/// cloud kernel) boots under the hypervisor as the bench boots it (`bench::peer_config`) and
/// runs the EL0 benchmark to its end: status 0 and every row of the workload, labelled by the
/// kernel it ran on. About 30 s a boot under TCG.
fn peer_runs_the_el0_bench(peer: xtask::bench::Peer, cpu: &str, smp: u32) {
    let p = xtask::bench::linux_guest(peer).unwrap_or_else(|e| panic!("the Linux peer is not available: {e:#}"));
    let ours = xtask::launch::Launch { cpu: cpu.into(), smp, mem: Some(tests::mem("1G")), ..Default::default() };
    let mut cfg = xtask::bench::peer_config(&ours, &p.guest);
    cfg.bootargs = cfg.bootargs.replace(&format!("rounds={}", xtask::bench::EL0_ROUNDS), "rounds=10");
    let run = boot(cfg);
    run.expect_exit(0);
    assert_eq!(run.record("linux_bench_exit").u64("status"), Some(0), "{}", run.dump());
    let kernel = run.record("linux_guest").str("kernel").unwrap_or("").to_string();
    let version = p.label.strip_prefix("linux-").unwrap();
    assert!(kernel.starts_with(&format!("{version}.")), "{} ran Linux {kernel}\n{}", p.label, run.dump());
    let rows = run.records("bench");
    assert!(rows.iter().all(|r| r.str("peer") == Some("linux")), "{}", run.dump());
    assert!(rows.iter().any(|r| r.str("row") == Some("NONE->RW 512 pages")), "{}", run.dump());
}

#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_both_linux_peers_run_the_el0_bench_on_max_and_a76() {
    for peer in [xtask::bench::Peer::Linux, xtask::bench::Peer::LinuxNewest] {
        for (cpu, smp) in [("max", 4), ("cortex-a76", 1)] {
            peer_runs_the_el0_bench(peer, cpu, smp);
        }
    }
}

/// Each Linux peer of `bench split --peer linux,linux-newest`: KVM's dirty_log_perf_test, built
/// from the peer kernel's own Debian source with the xtask's patch, runs in that Linux booted
/// alone at EL2 (QEMU 10, `-icount shift=0`) as the bench runs it, and every run of the bench
/// (2M and 1G backings, enable and manual clear) ends with status 0, the eager split on at the
/// bench's chunk, a figure read (the parser's checks), on the Linux version of the label. The
/// first run builds each test (about a minute each: unpacking the source, headers, the test);
/// then about 5-10 min a peer under TCG.
#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_both_linux_peers_run_kvms_dirty_log_benchmark() {
    use xtask::bench::dirty_log;
    for peer in [xtask::bench::Peer::Linux, xtask::bench::Peer::LinuxNewest] {
        let p = dirty_log::prepare(peer).unwrap_or_else(|e| panic!("the Linux peer {peer:?} is not available: {e:#}"));
        let version = p.peer.label.strip_prefix("linux-").unwrap();
        assert!(p.source.starts_with(&format!("linux-source-{version}=")), "{} built from {}", p.peer.label, p.source);
        let figures =
            dirty_log::measure(&p, true, tests::images()).unwrap_or_else(|e| panic!("{}: {e:#}", p.peer.label));
        let runs: Vec<dirty_log::Run> = figures.iter().map(|f| f.run).collect();
        assert_eq!(runs, dirty_log::RUNS, "{}", p.peer.label);
        let rows = dirty_log::rows(&p, &figures, true);
        assert!(rows.iter().all(|r| r["insns_per_pte"].as_f64().is_some_and(|v| v > 0.0)), "{rows:?}");
    }
}
