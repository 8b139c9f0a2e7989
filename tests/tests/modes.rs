//! Other ways to boot.

use tests::{boot, config};

#[test]
fn kernel_alone_without_hypervisor() {
    let run = boot(config(|c| c.no_hypervisor = true));
    run.expect_exit(0);
    run.expect_output("on bare QEMU (no hypervisor)");
    run.expect_output("kernel: 4 of 4 CPUs online");
    assert!(run.records("hyp_boot").is_empty(), "no hypervisor ran\n{}", run.dump());
    let banners = run.records("banner");
    assert_eq!(banners.len(), 4);
    for b in banners {
        assert_eq!(b.bool("hypervisor"), Some(false));
        assert_eq!(b.u64("mem_mib"), Some(1024), "the kernel alone sees all RAM");
    }
}

#[test]
fn bootargs_reach_the_guest_without_the_hypervisors_words() {
    let run = boot(config(|c| c.bootargs = "hyp.check-split contpte=on rodata=full".into()));
    run.expect_exit(0);
    run.expect_output("bootargs \"contpte=on rodata=full\"");
}

#[test]
fn eight_cpus_under_icount() {
    let run = boot(config(|c| {
        c.smp = 8;
        c.icount = Some(0);
    }));
    run.expect_exit(0);
    run.expect_output("kernel: 8 of 8 CPUs online");
    assert_eq!(run.records("banner").len(), 8);
}

#[test]
fn psci_over_hvc_and_smc_both_trap_to_the_hypervisor() {
    for (conduit, shown) in [("hvc", "Hvc"), ("smc", "Smc")] {
        let run = boot(config(|c| c.bootargs = format!("hyp.conduit={conduit}")));
        run.expect_exit(0);
        run.expect_output(&format!("PSCI over {shown}, under the pgtlab hypervisor"));
        run.expect_output("kernel: 4 of 4 CPUs online");
        let exits = run.record("hyp_exits");
        let (hvc, smc) = (exits.u64("hvc").unwrap(), exits.u64("smc").unwrap());
        match conduit {
            "hvc" => assert!(hvc >= 4 && smc == 0, "hvc {hvc} smc {smc}\n{}", run.dump()),
            // One HVC either way: the kernel's first act, asking EL2 who it is
            // (`power::probe_hypervisor`, before it has read the conduit from the DTB).
            _ => assert!(smc >= 4 && hvc == 1, "hvc {hvc} smc {smc}\n{}", run.dump()),
        }
    }
}
