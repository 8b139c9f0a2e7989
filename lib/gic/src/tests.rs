//! The drivers against the fake GIC.

use crate::fake::FakeGic;
use crate::v2::GicV2;
use crate::v3::{self, GicV3};
use crate::{handle_pending, Handled, PRIORITY};
use std::vec::Vec;

const RESCHEDULE: u32 = 0;
const CALL: u32 = 3;
const TIMER: u32 = 27;

fn v2_up(fake: &FakeGic, cpus: usize) -> GicV2<&FakeGic> {
    let g = GicV2::new(fake);
    fake.on(0);
    g.init_distributor();
    for c in 0..cpus {
        fake.as_cpu(c, || {
            g.init_cpu(c);
            for i in [RESCHEDULE, CALL, TIMER] {
                g.enable_private(i, PRIORITY);
            }
        });
    }
    g
}

fn v3_up(fake: &FakeGic, cpus: usize) -> GicV3<&FakeGic> {
    let g = GicV3::new(fake, fake.regions());
    fake.on(0);
    g.init_distributor();
    for c in 0..cpus {
        fake.as_cpu(c, || {
            g.init_cpu(c, fake.mpidr(c)).unwrap();
            for i in [RESCHEDULE, CALL, TIMER] {
                g.enable_private(c, i, PRIORITY);
            }
        });
    }
    g
}

#[test]
fn gicv2_ends_each_sgi_with_its_source_cpu() {
    let fake = FakeGic::v2(3);
    let g = v2_up(&fake, 3);
    // CPUs 1 and 2 both call CPU 0: one SGI, two sources, two interrupts.
    fake.as_cpu(1, || g.send_sgi(1 << 0, CALL));
    fake.as_cpu(2, || g.send_sgi(1 << 0, CALL));
    assert_eq!(fake.pending(0), [(CALL, 1), (CALL, 2)]);
    let mut seen = Vec::new();
    let h = fake.as_cpu(0, || {
        handle_pending(&g, 0, |i| {
            seen.push(i);
            true
        })
    });
    assert_eq!(h, Handled { sgi: 2, ppi: 0, unexpected: 0 });
    assert_eq!(seen, [CALL, CALL]);
    assert!(fake.active(0).is_empty() && fake.pending(0).is_empty());
    fake.verdict().unwrap();
    // And again: nothing was left active, so the next one is taken too.
    fake.as_cpu(2, || g.send_sgi(1, CALL));
    assert_eq!(fake.as_cpu(0, || handle_pending(&g, 0, |_| true)).sgi, 1);
    fake.verdict().unwrap();
}

/// What the driver must not do (and QEMU's TCG would let pass): end a GICv2 SGI by its INTID
/// alone. The fake keeps it active, so the CPU takes nothing more, and says why.
#[test]
fn the_fake_gicv2_catches_an_eoi_without_the_source() {
    use super::{Acked, CpuInterface};
    struct DropsSource<'a>(GicV2<&'a FakeGic>);
    impl CpuInterface for DropsSource<'_> {
        fn ack(&self) -> Option<Acked> {
            self.0.ack()
        }
        fn eoi(&self, a: Acked) {
            self.0.eoi(Acked { intid: a.intid, iar: a.intid });
        }
        fn disable_private(&self, cpu: usize, intid: u32) {
            CpuInterface::disable_private(&self.0, cpu, intid)
        }
    }
    let fake = FakeGic::v2(2);
    let g = DropsSource(v2_up(&fake, 2));
    fake.as_cpu(1, || g.0.send_sgi(1, CALL));
    let h = fake.as_cpu(0, || handle_pending(&g, 0, |_| true));
    assert_eq!(h.sgi, 1);
    let v = fake.verdict().unwrap_err();
    assert!(v.contains("(INTID 3, source 0) but its running interrupt is INTID 3 from source 1"), "{v}");
    // Still active: the timer is not taken any more.
    fake.raise(0, TIMER);
    assert_eq!(fake.as_cpu(0, || handle_pending(&g, 0, |_| true)).total(), 0);
}

#[test]
fn nothing_pending_is_never_ended() {
    let fake = FakeGic::v2(2);
    let g = v2_up(&fake, 2);
    assert_eq!(fake.as_cpu(0, || handle_pending(&g, 0, |_| panic!("nothing is pending"))).total(), 0);
    let fake3 = FakeGic::v3(&[0, 1], false);
    let g3 = v3_up(&fake3, 2);
    assert_eq!(fake3.as_cpu(1, || handle_pending(&g3, 1, |_| panic!("nothing is pending"))).total(), 0);
    for f in [&fake, &fake3] {
        assert_eq!(f.eois(), 0);
        f.verdict().unwrap();
    }
}

#[test]
fn an_interrupt_without_a_handler_is_disabled_and_ended() {
    let fake = FakeGic::v2(1);
    let g = v2_up(&fake, 1);
    fake.raise(0, TIMER);
    let h = fake.as_cpu(0, || handle_pending(&g, 0, |_| false));
    assert_eq!(h, Handled { sgi: 0, ppi: 0, unexpected: 1 });
    assert!(!fake.banked_enabled(0, TIMER));
    assert_eq!(fake.eois(), 1);
    fake.verdict().unwrap();
}

#[test]
fn gicv2_sgis_follow_a_dsb_and_reach_the_named_cpus_only() {
    let fake = FakeGic::v2(4);
    let g = v2_up(&fake, 4);
    fake.as_cpu(0, || g.send_sgi(0b1010, RESCHEDULE));
    assert_eq!(fake.sgis(), [(0, 1, RESCHEDULE), (0, 3, RESCHEDULE)]);
    fake.verdict().unwrap();
    // A CPU that never initialised its interface gets nothing (its bit is unknown).
    let fake = FakeGic::v2(4);
    let g = v2_up(&fake, 2);
    fake.as_cpu(0, || g.send_sgi(0b1100, RESCHEDULE));
    assert!(fake.sgis().is_empty());
}

#[test]
fn the_fake_catches_an_sgi_without_a_dsb() {
    use super::v2::{Reg, Regs};
    let fake = FakeGic::v2(2);
    let _g = v2_up(&fake, 2);
    (&fake).write(Reg::DSgir, super::v2::sgir(0b10, CALL));
    assert!(fake.verdict().unwrap_err().contains("without a DSB ISHST"));
}

#[test]
fn gicv3_finds_each_redistributor_and_takes_sgis_by_mpidr() {
    // The Pi 5's way (core number in Aff1) and a wide cluster (Aff0 up to 17: the range
    // selector), with and without the VLPI frames.
    for (mpidrs, vlpis) in
        [(&[0x0, 0x100, 0x200, 0x300][..], false), (&[0x0, 0x1, 0x10, 0x11, 0x1_0000_0005][..], true)]
    {
        let fake = FakeGic::v3(mpidrs, vlpis);
        let n = mpidrs.len();
        let g = v3_up(&fake, n);
        for from in 0..n {
            for to in 0..n {
                fake.as_cpu(from, || g.send_sgi(1 << to, CALL));
                assert_eq!(fake.pending(to), [(CALL, 0)], "{mpidrs:x?}: {from} -> {to}");
                let mut seen = 0;
                let h = fake.as_cpu(to, || {
                    handle_pending(&g, to, |i| {
                        seen += (i == CALL) as u32;
                        true
                    })
                });
                assert_eq!((h.sgi, seen), (1, 1));
            }
        }
        fake.verdict().unwrap();
    }
}

#[test]
fn sgi1r_encodes_every_affinity_field() {
    // Aff3 0x12, Aff2 0x34, Aff1 0x56, Aff0 0x27 (range 2, bit 7), SGI 5.
    let v = v3::sgi1r(0x12_0034_5627, 5);
    assert_eq!(v, (0x12 << 48) | (2 << 44) | (0x34 << 32) | (5 << 24) | (0x56 << 16) | (1 << 7));
}

#[test]
fn gicv3_without_a_redistributor_for_the_cpu_is_an_error() {
    let fake = FakeGic::v3(&[0, 1], false);
    let g = GicV3::new(&fake, fake.regions());
    fake.on(0);
    g.init_distributor();
    let e = fake.as_cpu(0, || g.init_cpu(0, 0x300)).unwrap_err();
    assert_eq!(e, super::v3::NoRedistributor { mpidr: 0x300 });
    assert_eq!(std::format!("{e}"), "no GICv3 redistributor for MPIDR 0x300");
}

#[test]
fn one_priority_level_no_nesting_until_the_eoi() {
    let fake = FakeGic::v3(&[0, 1], false);
    let g = v3_up(&fake, 2);
    fake.raise(0, TIMER);
    fake.as_cpu(1, || g.send_sgi(1, RESCHEDULE));
    // Taken one after the other, each ended before the next is acknowledged.
    let mut order = Vec::new();
    let h = fake.as_cpu(0, || {
        handle_pending(&g, 0, |i| {
            order.push((i, fake.active(0).len()));
            true
        })
    });
    assert_eq!(h, Handled { sgi: 1, ppi: 1, unexpected: 0 });
    assert_eq!(order, [(RESCHEDULE, 1), (TIMER, 1)]);
    fake.verdict().unwrap();
}

/// Boot: every shared interrupt GICD_TYPER says the distributor has (96 lines: SPIs 32-95,
/// in ICENABLER1 and 2) is disabled, on both GICs, whatever the firmware left enabled.
#[test]
fn the_distributor_starts_with_every_spi_disabled() {
    let fake = FakeGic::v2(1);
    let g = GicV2::new(&fake);
    assert_eq!(g.lines(), 96);
    for n in [1, 2] {
        super::v2::Regs::write(&&fake, super::v2::Reg::DIsenabler(n), u32::MAX);
    }
    assert_eq!(fake.spis_enabled().len(), 64);
    g.init_distributor();
    assert_eq!(fake.spis_enabled(), Vec::<u32>::new(), "GICv2");
    let fake3 = FakeGic::v3(&[0], false);
    let g3 = GicV3::new(&fake3, fake3.regions());
    assert_eq!(g3.lines(), 96);
    for n in [1, 2] {
        super::v3::Regs::write(&&fake3, super::v3::Reg::DIsenabler(n), u32::MAX as u64);
    }
    assert_eq!(fake3.spis_enabled().len(), 64);
    g3.init_distributor();
    assert_eq!(fake3.spis_enabled(), Vec::<u32>::new(), "GICv3");
}

/// An interrupt with no handler is disabled on GICv3 too (in its redistributor), and the
/// counts add up: two SGIs and a PPI handled, one unexpected.
#[test]
fn gicv3_disables_an_interrupt_without_a_handler_and_counts_all() {
    let fake = FakeGic::v3(&[0, 1], false);
    let g = v3_up(&fake, 2);
    fake.as_cpu(1, || g.send_sgi(0b1, RESCHEDULE));
    fake.as_cpu(1, || g.send_sgi(0b1, CALL));
    fake.raise(0, TIMER);
    fake.raise(0, 26);
    fake.as_cpu(0, || g.enable_private(0, 26, PRIORITY));
    let h = fake.as_cpu(0, || handle_pending(&g, 0, |i| i != 26));
    assert_eq!(h, Handled { sgi: 2, ppi: 1, unexpected: 1 });
    assert_eq!(h.total(), 4);
    assert!(!fake.banked_enabled(0, 26), "disabled after it came with no handler");
    assert!(fake.banked_enabled(0, TIMER));
    assert_eq!(fake.eois(), 4);
    fake.verdict().unwrap();
}

/// GICR_TYPER's affinity: Aff3 in bits [31:24] (MPIDR [39:32]), Aff2.Aff1.Aff0 below.
#[test]
fn typer_affinity_packs_aff3_above_aff2_aff1_aff0() {
    assert_eq!(v3::typer_affinity(0x12_0034_5627), 0x1234_5627);
    assert_eq!(v3::typer_affinity(0x8000_0000 | 0x0102_0304_0506), 0x0204_0506, "U/MT and RES bits dropped");
}

/// The GICv3 register bits are the architecture's (GIC architecture specification, GICD_CTLR,
/// GICR_WAKER, GICR_TYPER, GICR_CTLR, ICC_CTLR_EL1): the fake uses the driver's names, so a
/// wrong number would pass against it unseen.
#[test]
fn gicv3_register_bits_are_the_architectures() {
    assert_eq!(
        (v3::GICD_CTLR_ENABLE_G1, v3::GICD_CTLR_ENABLE_G1A, v3::GICD_CTLR_ARE, v3::GICD_CTLR_RWP),
        (0x1, 0x2, 0x10, 0x8000_0000)
    );
    assert_eq!((v3::WAKER_PROCESSOR_SLEEP, v3::WAKER_CHILDREN_ASLEEP), (0x2, 0x4));
    assert_eq!((v3::TYPER_VLPIS, v3::TYPER_LAST), (0x2, 0x10));
    assert_eq!((v3::GICR_CTLR_RWP, v3::ICC_CTLR_PRIBITS_SHIFT), (0x8, 8));
    assert_eq!((v3::FRAMES_2, v3::FRAMES_4), (2 << 16, 4 << 16));
}

/// The SGI, PPI and SPI the firmware leaves behind.
const LEFT_SGI: u32 = CALL;
const LEFT_PPI: u32 = TIMER;
const LEFT_SPI: u32 = 40;
/// The firmware's priority for them: above the kernel's ([`PRIORITY`]), so a running priority
/// it leaves blocks the kernel's interrupts.
const FIRMWARE_PRIORITY: u8 = 0x80;

/// What firmware (or a kexec'd-from kernel) leaves on each CPU of `fake` through the same
/// driver, `cpus` of them: on every CPU SGI [`LEFT_SGI`] pending (on GICv2 from two source
/// CPUs), PPI [`LEFT_PPI`] acknowledged and never ended, and pending again; SPI [`LEFT_SPI`]
/// acknowledged by CPU 0, never ended, and pending again. The interfaces and the distributor
/// stay on.
fn firmware_leaves(fake: &FakeGic, cpus: usize) {
    use super::CpuInterface;
    fn leave(fake: &FakeGic, gic: &impl CpuInterface, c: usize, cpus: usize, send: &dyn Fn(usize, usize)) {
        fake.raise(c, LEFT_PPI);
        let a = fake.as_cpu(c, || gic.ack()).expect("the firmware takes its PPI");
        assert_eq!(a.intid, LEFT_PPI);
        fake.raise(c, LEFT_PPI);
        if c == 0 {
            fake.raise(0, LEFT_SPI);
            assert_eq!(fake.as_cpu(0, || gic.ack()).map(|a| a.intid), Some(LEFT_SPI), "the SPI preempts");
            fake.raise(0, LEFT_SPI);
        }
        for from in [1, 2] {
            send(from % cpus, c);
        }
    }
    fake.set_spi_priority(LEFT_SPI, FIRMWARE_PRIORITY - 0x40);
    if fake.version() == super::fake::Version::V2 {
        let fw = GicV2::new(fake);
        fake.on(0);
        fw.init_distributor();
        for c in 0..cpus {
            fake.as_cpu(c, || {
                fw.init_cpu(c);
                fw.enable_private(LEFT_SGI, FIRMWARE_PRIORITY);
                fw.enable_private(LEFT_PPI, FIRMWARE_PRIORITY);
            });
        }
        super::v2::Regs::write(&fake, super::v2::Reg::DIsenabler(1), 1 << (LEFT_SPI - 32));
        for c in 0..cpus {
            leave(fake, &fw, c, cpus, &|from, to| fake.as_cpu(from, || fw.send_sgi(1 << to, LEFT_SGI)));
        }
    } else {
        let fw = GicV3::new(fake, fake.regions());
        fake.on(0);
        fw.init_distributor();
        for c in 0..cpus {
            fake.as_cpu(c, || {
                fw.init_cpu(c, fake.mpidr(c)).unwrap();
                fw.enable_private(c, LEFT_SGI, FIRMWARE_PRIORITY);
                fw.enable_private(c, LEFT_PPI, FIRMWARE_PRIORITY);
            });
        }
        super::v3::Regs::write(&fake, super::v3::Reg::DIsenabler(1), 1 << (LEFT_SPI - 32));
        for c in 0..cpus {
            leave(fake, &fw, c, cpus, &|from, to| fake.as_cpu(from, || fw.send_sgi(1 << to, LEFT_SGI)));
        }
    }
    // What the test starts from.
    for c in 0..cpus {
        assert!(fake.active(c).contains(&(LEFT_PPI, 0)));
        assert!(fake.pending(c).iter().any(|&(i, _)| i == LEFT_PPI));
        assert!(fake.pending(c).iter().any(|&(i, _)| i == LEFT_SGI));
        assert_ne!(fake.active_priorities(c), 0);
    }
    assert_eq!((fake.spis_pending(), fake.spis_active()), (std::vec![LEFT_SPI], std::vec![LEFT_SPI]));
    fake.verdict().unwrap();
}

/// After the kernel's `init_distributor` and `init_cpu` (and its enables, [`v2_up`] /
/// [`v3_up`]) on what [`firmware_leaves`]: nothing pending or active, no active priority, nothing
/// fires when the kernel enables its interrupts, and an SGI sent afterwards is taken (the
/// firmware's running priority is gone), with no rule of the fake broken.
fn nothing_left(fake: &FakeGic, gic: &impl super::CpuInterface, cpus: usize, send: &dyn Fn(usize, usize)) {
    for c in 0..cpus {
        assert_eq!(fake.pending(c), [], "CPU {c}: pending");
        assert_eq!(fake.active(c), [], "CPU {c}: active");
        assert_eq!(fake.active_priorities(c), 0, "CPU {c}: active priorities");
    }
    assert_eq!((fake.spis_pending(), fake.spis_active()), (Vec::new(), Vec::new()), "SPIs");
    for c in 0..cpus {
        assert_eq!(fake.as_cpu(c, || handle_pending(gic, c, |_| true)).total(), 0, "CPU {c}: fired when enabled");
    }
    for c in 0..cpus {
        send((c + 1) % cpus, c);
        let h = fake.as_cpu(c, || handle_pending(gic, c, |i| i == CALL));
        assert_eq!(h, Handled { sgi: 1, ppi: 0, unexpected: 0 }, "CPU {c}: the SGI after init");
    }
    fake.verdict().unwrap();
}

/// Firmware left an SGI pending from two sources, a PPI active (acknowledged, not ended) and
/// pending, an SPI pending and active: the kernel's init deactivates and clears them all and
/// zeroes the active priorities (GICv2: GICD_ICACTIVERn, GICD_ICPENDRn, GICD_CPENDSGIRn for
/// the SGIs, GICC_APRn).
#[test]
fn gicv2_init_clears_what_the_firmware_left_pending_and_active() {
    let fake = FakeGic::v2(3);
    firmware_leaves(&fake, 3);
    let g = v2_up(&fake, 3);
    nothing_left(&fake, &g, 3, &|from, to| fake.as_cpu(from, || g.send_sgi(1 << to, CALL)));
}

/// The same on GICv3 (GICD_ICACTIVERn / ICPENDRn, GICR_ICACTIVER0 / ICPENDR0, ICC_AP1Rn_EL1),
/// with 5, 6, 7 and 8 bits of priority: the firmware's active priority lands in ICC_AP1R0 (5
/// bits), AP1R1 (6: level 0x80 >> 2 = 32) or AP1R2 (7, 8: level 64).
#[test]
fn gicv3_init_clears_what_the_firmware_left_pending_and_active() {
    for bits in [5, 6, 7, 8] {
        let fake = FakeGic::v3(&[0, 1, 2], false).with_priority_bits(bits);
        firmware_leaves(&fake, 3);
        let g = v3_up(&fake, 3);
        nothing_left(&fake, &g, 3, &|from, to| fake.as_cpu(from, || g.send_sgi(1 << to, CALL)));
    }
}

/// ICC_AP1Rn_EL1 the CPU interface implements, from ICC_CTLR_EL1.PRIbits (bits [10:8], the
/// number of priority bits minus one): 1 up to 5 bits, 2 for 6, 4 for 7 and 8 (at most 7
/// preemption bits); the other fields do not count.
#[test]
fn active_priority_registers_follow_the_priority_bits() {
    let regs = |bits: u64| v3::active_priority_registers((bits - 1) << 8);
    assert_eq!([4, 5, 6, 7, 8].map(regs), [1, 1, 2, 4, 4]);
    assert_eq!(v3::active_priority_registers(0xffff_f8ff), 1, "only bits [10:8]");
    assert_eq!(v3::active_priority_registers((5 << 8) | 0xff), 2);
}

/// The fake holds the drivers to the architecture's rules for the new registers: an
/// unimplemented ICC_AP1Rn_EL1 is UNDEFINED, an active priority register takes 0 only with
/// nothing active, state is cleared only of disabled interrupts, on GICv3 once RWP read 0.
#[test]
fn the_fake_catches_out_of_order_or_undefined_clears() {
    use super::v3::{Reg, Regs};
    let fake = FakeGic::v3(&[0], false);
    let _g = v3_up(&fake, 1);
    (&fake).write(Reg::IccAp1r(1), 0);
    assert!(fake.verdict().unwrap_err().contains("UNDEFINED with 5 bits"));

    let fake = FakeGic::v3(&[0], false);
    firmware_leaves(&fake, 1);
    (&fake).write(Reg::IccAp1r(0), 0);
    assert!(fake.verdict().unwrap_err().contains("still active"));

    let fake = FakeGic::v3(&[0], false);
    firmware_leaves(&fake, 1);
    let rd = fake.regions()[0].0;
    (&fake).write(Reg::SIcactiver0(rd), u32::MAX as u64);
    assert!(fake.verdict().unwrap_err().contains("still enabled"));

    let fake = FakeGic::v3(&[0], false);
    firmware_leaves(&fake, 1);
    (&fake).write(Reg::SIcenabler0(rd), u32::MAX as u64);
    (&fake).write(Reg::SIcpendr0(rd), u32::MAX as u64);
    assert!(fake.verdict().unwrap_err().contains("before RWP read 0"));

    // GICv2: ICPENDR0 leaves SGIs pending (GICD_CPENDSGIRn clears them).
    use super::v2::Reg as R2;
    let fake = FakeGic::v2(3);
    firmware_leaves(&fake, 3);
    super::v2::Regs::write(&&fake, R2::DIcenabler(0), u32::MAX);
    super::v2::Regs::write(&&fake, R2::DIcpendr(0), u32::MAX);
    assert_eq!(fake.pending(0), [(LEFT_SGI, 1), (LEFT_SGI, 2)]);
    fake.verdict().unwrap();
}
