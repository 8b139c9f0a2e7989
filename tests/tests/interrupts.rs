//! Interrupts: the timer tick and SGIs between CPUs on GICv2 and GICv3, under the hypervisor
//! and alone at EL1 (`test=irq`, judged by exit code and the `irq` record's exact counts).

use tests::{boot, config, Run};

fn irq(cpu: &str, gic: u8, smp: u32, no_hypervisor: bool) -> Run {
    let run = boot(config(|c| {
        c.cpu = cpu.into();
        c.gic = gic;
        c.smp = smp;
        c.no_hypervisor = no_hypervisor;
        c.bootargs = "test=irq".into();
    }));
    run.expect_exit(0);
    let r = run.record("irq");
    assert_eq!(r.u64("gic"), Some(gic as u64), "{}", run.dump());
    assert_eq!(r.u64("cpus"), Some(smp as u64), "{}", run.dump());
    let ticks = r.u64s("ticks").unwrap();
    assert_eq!(ticks.len(), smp as usize);
    assert!(ticks.iter().all(|&t| t >= 20), "every CPU ticks\n{}", run.dump());
    assert_eq!(r.u64("early"), Some(0), "no timer interrupt before its time\n{}", run.dump());
    // One ping at a time to every other CPU, each answered once.
    let pings = r.u64s("pings").unwrap();
    assert_eq!(pings[0], 0);
    assert!(pings[1..].iter().all(|&p| p == 50), "{}", run.dump());
    assert_eq!(r.u64("pongs"), Some(50 * (smp as u64 - 1)), "{}", run.dump());
    assert_eq!(r.u64("unexpected"), Some(0), "{}", run.dump());
    run.expect_output(&format!("kernel: irq: GICv{gic}, {smp} CPUs"));
    run
}

#[test]
fn gicv3_on_max_under_the_hypervisor() {
    irq("max", 3, 4, false);
}

#[test]
fn gicv2_on_cortex_a76_under_the_hypervisor() {
    irq("cortex-a76", 2, 4, false);
}

#[test]
fn both_gics_without_the_hypervisor() {
    irq("max", 3, 2, true);
    irq("cortex-a76", 2, 3, true);
}
