//! The boot on {max, cortex-a76} x {GICv2, GICv3} x {1, 4 CPUs} x {512 MiB, 4 GiB}, and a wider
//! set of what users try (3 and 8 CPUs, 128 MiB and 16 GiB, Cortex-A53/A57/A72, Neoverse-N1,
//! A64FX: no FEAT_BBM, so no BBML2): the hypervisor boots at EL2 with `hyp.check-stage2` (nothing
//! it keeps translates in stage 2), builds the guest, and the kernel brings up every CPU at EL1
//! and prints a correct banner for each; the run exits 0. The rest of the matrix runs under
//! `cargo xtask test --long` (tests named `long_*`).

use tests::{boot, config};

fn check(cpu: &str, gic: u8, smp: u32, mem: &str) {
    let run = boot(config(|c| {
        c.cpu = cpu.into();
        c.gic = gic;
        c.smp = smp;
        c.mem = Some(tests::mem(mem));
        c.bootargs = "hyp.check-stage2".into();
    }));
    run.expect_exit(0);
    run.expect_output("hyp: check-stage2: nothing of the");
    run.expect_output(&format!("kernel: {smp} of {smp} CPUs online"));
    let hyp = run.record("hyp_boot");
    assert_eq!(hyp.u64("cpus"), Some(smp as u64), "{}", run.dump());
    // The guest gets --mem exactly, from the RAM base; the hypervisor's share (the region
    // around its image and, from 2 GiB, RAM/16 of page-table frames) comes on top.
    let guest = hyp.u64("guest_ram_bytes").unwrap();
    let total = tests::mem(mem).bytes();
    assert_eq!(guest, total, "guest RAM {guest:#x}, --mem {total:#x}\n{}", run.dump());
    assert_eq!(hyp.u64s("guest_ram"), Some(vec![0x4000_0000, 0x4000_0000 + total]), "{}", run.dump());
    let kept = hyp.u64("hyp_reserved_bytes").expect("hyp_boot reports hyp_reserved_bytes");
    assert!(kept <= total / 8 + (32 << 20), "the hypervisor keeps too much: {kept:#x} on {total:#x}\n{}", run.dump());
    run.expect_output(&format!("kernel: pgtlab kernel, {smp} CPUs, {} MiB RAM in 1 ranges", total >> 20));
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
            other => {
                let core = match other {
                    "cortex-a76" => "Cortex-A76",
                    "cortex-a72" => "Cortex-A72",
                    "cortex-a57" => "Cortex-A57",
                    "cortex-a53" => "Cortex-A53",
                    "cortex-a35" => "Cortex-A35",
                    "neoverse-n1" => "Neoverse-N1",
                    "a64fx" => "A64FX",
                    _ => unreachable!("{other}"),
                };
                assert_eq!(b.str("core"), Some(core), "{}", run.dump());
                assert_eq!(b.u64("bbm"), Some(0), "{core} has no FEAT_BBM");
                assert_eq!(b.bool("bbml2"), Some(false));
            }
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

macro_rules! long_matrix {
    ($($name:ident: $cpu:expr, $gic:expr, $smp:expr, $mem:expr;)*) => {
        $(#[test] #[ignore = "--long"] fn $name() { check($cpu, $gic, $smp, $mem); })*
    };
}

matrix! {
    max_gicv3_3cpu_512m: "max", 3, 3, "512M";
    max_gicv2_8cpu_1g: "max", 2, 8, "1G";
    a53_gicv2_1cpu_128m: "cortex-a53", 2, 1, "128M";
    a57_gicv3_2cpu_1g: "cortex-a57", 3, 2, "1G";
    a72_gicv2_3cpu_512m: "cortex-a72", 2, 3, "512M";
    n1_gicv3_3cpu_16g: "neoverse-n1", 3, 3, "16G";
    a64fx_gicv3_2cpu_1g: "a64fx", 3, 2, "1G";
}

long_matrix! {
    long_max_gicv3_8cpu_16g: "max", 3, 8, "16G";
    long_max_gicv3_1cpu_128m: "max", 3, 1, "128M";
    long_a76_gicv2_8cpu_4g: "cortex-a76", 2, 8, "4G";
    long_a76_gicv3_3cpu_16g: "cortex-a76", 3, 3, "16G";
    long_a53_gicv3_8cpu_4g: "cortex-a53", 3, 8, "4G";
    long_a53_gicv2_4cpu_16g: "cortex-a53", 2, 4, "16G";
    long_a57_gicv2_8cpu_128m: "cortex-a57", 2, 8, "128M";
    long_a72_gicv3_8cpu_16g: "cortex-a72", 3, 8, "16G";
    long_a35_gicv2_2cpu_256m: "cortex-a35", 2, 2, "256M";
    long_n1_gicv2_8cpu_1g: "neoverse-n1", 2, 8, "1G";
    long_a64fx_gicv3_8cpu_16g: "a64fx", 3, 8, "16G";
    long_a64fx_gicv3_3cpu_128m: "a64fx", 3, 3, "128M";
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
