//! The project's test guest (`testguest/`) on the machine plain QEMU gives it and on the one the
//! hypervisor gives it: as a raw binary and as an arm64 Image, GICv2/v3, 1-8 CPUs, with and
//! without MTE, 128 MiB to 16 GiB. It checks its DTB lies above its image, BSS and stacks, its
//! RAM is `--mem` and reads as zero wherever nothing was loaded, PSCI's version and features, the timer, the GIC, its command line, its load
//! address; the test also holds the record of what it found under the hypervisor equal to plain
//! QEMU's (but for the command line: alone, the xtask adds `pgtlab_alone=1`).

use std::path::PathBuf;
use tests::{boot, Config};
use xtask::launch::{Guest, Launch};

fn config(raw: bool, gic: u8, smp: u32, mem: &str, mte: bool, initrd: bool) -> Launch {
    let kernel: PathBuf = if raw { xtask::build::testguest_raw() } else { xtask::build::testguest_image() };
    let initrd = initrd.then(|| {
        let p = tests::scratch_dir().join("testguest-initrd.img");
        xtask::write_if_changed(&p, &[0x5a; 100_000]).unwrap();
        p
    });
    let load = if raw { "raw" } else { "image" };
    Launch {
        gic,
        smp,
        mem: Some(tests::mem(mem)),
        mte,
        guest: Some(Guest {
            kernel,
            initrd,
            append: format!("testguest=view testguest.mem={mem} testguest.smp={smp} testguest.load={load}"),
        }),
        ..Config::default()
    }
}

/// Runs the test guest on both machines; each must pass every check, and find the same.
fn same_on_both(cfg: Launch) {
    let mut found = Vec::new();
    for no_hypervisor in [true, false] {
        let run = boot(Launch { no_hypervisor, ..cfg.clone() });
        run.expect_exit(0);
        run.expect_output("checks passed");
        assert!(!run.outcome.output.contains("FAILED"), "{}", run.dump());
        let r = run.record("testguest_view");
        // Alone, the xtask adds its word for a guest that must print the run's final line.
        let mut want = cfg.guest.as_ref().unwrap().append.clone();
        if no_hypervisor {
            want.push_str(" pgtlab_alone=1");
        }
        assert_eq!(r.str("bootargs"), Some(want.as_str()), "{}", run.dump());
        let mut fields = r.fields.clone();
        fields.remove("bootargs");
        found.push((fields, run.dump()));
    }
    assert_eq!(found[0].0, found[1].0, "plain QEMU:\n{}\nhypervisor:\n{}", found[0].1, found[1].1);
}

#[test]
fn testguest_raw_gicv2_one_cpu_128m() {
    same_on_both(config(true, 2, 1, "128M", false, false));
}

#[test]
fn testguest_image_gicv3_four_cpus_1g_mte_initramfs() {
    same_on_both(config(false, 3, 4, "1G", true, true));
}

#[test]
fn testguest_raw_gicv3_eight_cpus_16g() {
    same_on_both(config(true, 3, 8, "16G", false, true));
}

#[test]
fn testguest_image_gicv2_eight_cpus_256m_mte() {
    same_on_both(config(false, 2, 8, "256M", true, false));
}

/// Both forms, both GICs, 1-8 CPUs, MTE or not, 128M-4G (`--long`).
#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_testguest_every_configuration() {
    for raw in [true, false] {
        for gic in [2, 3] {
            for smp in [1, 2, 3, 5, 8] {
                let mem = ["128M", "512M", "4G"][smp as usize % 3];
                same_on_both(config(raw, gic, smp, mem, smp % 2 == 1, smp > 2));
            }
        }
    }
}

/// A guest that fails a check and then waits without a word: at the time limit (12 s here: the
/// guest prints its line within about a second, the rest is margin for a loaded machine) the
/// verdict carries its last lines and where each vCPU was (CPU 0 in the guest's code at EL1, the
/// CPU it never started off). Seen failing without the QMP sampling (no CPU in the verdict).
#[test]
fn testguest_hanging_after_a_failed_check_is_shown_where_it_stopped() {
    let guest = xtask::build::testguest_raw();
    let (code, out) = tests::xtask_cli(&[
        "run",
        "--guest",
        guest.to_str().unwrap(),
        "--guest-append",
        "testguest=hang",
        "--smp",
        "2",
        "--mem",
        "256M",
        "--timeout",
        "12",
    ]);
    assert_eq!(code, abi::exit::TIMED_OUT as i32, "{out}");
    let verdict = out.lines().find(|l| l.starts_with("xtask: exit 66")).unwrap_or_else(|| panic!("no verdict\n{out}"));
    assert!(verdict.contains("last lines: ") && verdict.contains("testguest: check hang: FAILED"), "{verdict}");
    assert!(verdict.contains("CPU 0 at EL1 0x4008"), "{verdict}");
    assert!(verdict.contains("CPU 1 off"), "{verdict}");
}
