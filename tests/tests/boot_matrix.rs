//! The boot on {max, cortex-a76} x {GICv2, GICv3} x {1, 4 CPUs} x {512 MiB, 4 GiB}: the
//! hypervisor boots at EL2, builds the guest, and the kernel brings up every CPU at EL1 and
//! prints a correct banner for each; the run exits 0.

use tests::{boot, config, mem_bytes};

fn check(cpu: &str, gic: u8, smp: u32, mem: &str) {
    let run = boot(config(|c| {
        c.cpu = cpu.into();
        c.gic = gic;
        c.smp = smp;
        c.mem = mem.into();
    }));
    run.expect_exit(0);
    run.expect_output(&format!("kernel: {smp} of {smp} CPUs online"));
    let hyp = run.record("hyp_boot");
    assert_eq!(hyp.u64("cpus"), Some(smp as u64), "{}", run.dump());
    // The guest gets all RAM but what the hypervisor reports it keeps: the region around its
    // image and, where it has them, its page-table frame pool and memslot backing pool.
    let guest = hyp.u64("guest_ram_bytes").unwrap();
    let total = mem_bytes(mem);
    let kept = hyp.u64("hyp_reserved_bytes").expect("hyp_boot reports hyp_reserved_bytes");
    assert_eq!(guest, total - kept, "guest RAM {guest:#x} of {total:#x}, hypervisor keeps {kept:#x}\n{}", run.dump());
    assert!(kept <= total / 8 + (32 << 20), "the hypervisor keeps too much: {kept:#x} of {total:#x}\n{}", run.dump());
    let banners = run.records("banner");
    assert_eq!(banners.len(), smp as usize, "one banner per CPU\n{}", run.dump());
    let mut cpus: Vec<u64> = banners.iter().map(|b| b.u64("cpu").unwrap()).collect();
    cpus.sort();
    assert_eq!(cpus, (0..smp as u64).collect::<Vec<_>>());
    for b in banners {
        assert_eq!(b.u64("el"), Some(1), "the kernel runs at EL1\n{}", run.dump());
        assert_eq!(b.bool("hypervisor"), Some(true), "{}", run.dump());
        assert_eq!(b.u64("mem_mib"), Some(guest >> 20));
        match cpu {
            "max" => {
                assert_eq!(b.u64("bbm"), Some(2), "-cpu max advertises BBM level 2");
                assert_eq!(b.bool("bbml2"), Some(true));
            }
            "cortex-a76" => {
                assert_eq!(b.str("core"), Some("Cortex-A76"));
                assert_eq!(b.u64("bbm"), Some(0), "Cortex-A76 has no FEAT_BBM");
                assert_eq!(b.bool("bbml2"), Some(false));
            }
            _ => unreachable!(),
        }
    }
    // Every secondary CPU came through the hypervisor's PSCI emulation.
    let exits = run.record("hyp_exits");
    assert!(exits.u64("psci").unwrap() >= (smp as u64 - 1), "{}", run.dump());
}

macro_rules! matrix {
    ($($name:ident: $cpu:expr, $gic:expr, $smp:expr, $mem:expr;)*) => {
        $(#[test] fn $name() { check($cpu, $gic, $smp, $mem); })*
    };
}

matrix! {
    max_gicv2_1cpu_512m: "max", 2, 1, "512M";
    max_gicv2_1cpu_4g: "max", 2, 1, "4G";
    max_gicv2_4cpu_512m: "max", 2, 4, "512M";
    max_gicv2_4cpu_4g: "max", 2, 4, "4G";
    max_gicv3_1cpu_512m: "max", 3, 1, "512M";
    max_gicv3_1cpu_4g: "max", 3, 1, "4G";
    max_gicv3_4cpu_512m: "max", 3, 4, "512M";
    max_gicv3_4cpu_4g: "max", 3, 4, "4G";
    a76_gicv2_1cpu_512m: "cortex-a76", 2, 1, "512M";
    a76_gicv2_1cpu_4g: "cortex-a76", 2, 1, "4G";
    a76_gicv2_4cpu_512m: "cortex-a76", 2, 4, "512M";
    a76_gicv2_4cpu_4g: "cortex-a76", 2, 4, "4G";
    a76_gicv3_1cpu_512m: "cortex-a76", 3, 1, "512M";
    a76_gicv3_1cpu_4g: "cortex-a76", 3, 1, "4G";
    a76_gicv3_4cpu_512m: "cortex-a76", 3, 4, "512M";
    a76_gicv3_4cpu_4g: "cortex-a76", 3, 4, "4G";
}
