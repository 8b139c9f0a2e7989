//! `Board::from_dtb` on real DTBs dumped from QEMU's `virt` board at test time.

mod common;

use board::{Board, EnableMethod, GicVersion, PsciMethod, PsciVersion, Region, Status, WindowSpace};
use common::Qemu;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn mem_bytes(mem: &str) -> u64 {
    let (n, unit) = mem.split_at(mem.len() - 1);
    let n: u64 = n.parse().unwrap();
    match unit {
        "G" => n * GIB,
        "M" => n * MIB,
        _ => panic!("unit {unit}"),
    }
}

/// What every `virt` board has, whatever the configuration.
fn check_common(q: &Qemu, b: &Board) {
    let what = q.name();
    assert_eq!(b.memory, vec![Region::new(0x4000_0000, mem_bytes(q.mem))], "{what}");
    assert_eq!(b.model.as_deref(), Some("linux,dummy-virt"), "{what}");
    assert!(b.is_qemu_virt(), "{what}: QEMU's virt says so in its root compatible");
    assert_eq!(b.dtb_size, 1 << 20, "{what}: QEMU pads its DTB to 1 MiB");
    assert!(b.mem_reserve.is_empty() && b.reserved_memory.is_empty(), "{what}");

    let uart = b.console.as_ref().expect("console");
    assert_eq!(uart.path, "/pl011@9000000", "{what}");
    assert_eq!((uart.base, uart.size), (0x0900_0000, 0x1000), "{what}");
    assert!(uart.from_stdout_path, "{what}: /chosen/stdout-path names the PL011");
    assert_eq!(b.stdout_path.as_deref(), Some("/pl011@9000000"), "{what}");
    assert_eq!(uart.clock_frequency, Some(24_000_000), "{what}: apb-pclk fixed clock");

    let gic = b.gic.as_ref().expect("gic");
    assert_eq!(gic.path, "/intc@8000000", "{what}");
    assert_eq!(gic.distributor, Region::new(0x0800_0000, 0x10000), "{what}");
    match q.gic {
        3 => {
            assert_eq!(gic.version, GicVersion::V3, "{what}");
            assert_eq!(gic.compatible, "arm,gic-v3");
            assert_eq!(gic.redistributors[0], Region::new(0x080a_0000, 0xf6_0000), "{what}");
            // 0xf60000 / 128 KiB per redistributor = 123 CPUs; more spill into a high region.
            let regions = if q.smp > 123 { 2 } else { 1 };
            assert_eq!(gic.redistributors.len(), regions, "{what}");
            assert_eq!(gic.cpu_interface, None, "{what}");
        }
        _ => {
            assert_eq!(gic.version, GicVersion::V2, "{what}");
            assert_eq!(gic.compatible, "arm,cortex-a15-gic");
            assert!(gic.redistributors.is_empty());
            assert_eq!(gic.cpu_interface, Some(Region::new(0x0801_0000, 0x10000)), "{what}");
            if q.virtualization {
                assert_eq!(gic.hyp_interface, Some(Region::new(0x0803_0000, 0x10000)), "{what}");
                assert_eq!(gic.vcpu_interface, Some(Region::new(0x0804_0000, 0x10000)), "{what}");
            } else {
                assert_eq!((gic.hyp_interface, gic.vcpu_interface), (None, None), "{what}");
            }
        }
    }

    // QEMU's /timer: <PPI 13, PPI 14, PPI 11, PPI 10> = INTIDs 29, 30, 27, 26.
    let timer = b.timer.as_ref().expect("timer");
    assert_eq!(timer.path, "/timer", "{what}");
    assert_eq!((timer.secure_phys, timer.phys, timer.virt, timer.hyp_phys), (Some(29), Some(30), Some(27), Some(26)));
    // QEMU's /pmu: the overflow interrupt is PPI 7 = INTID 23.
    let pmu = b.pmu.as_ref().expect("pmu");
    assert_eq!((pmu.path.as_str(), pmu.interrupts.as_slice()), ("/pmu", &[23][..]), "{what}");

    let psci = b.psci.as_ref().expect("psci");
    let method = if q.virtualization { PsciMethod::Smc } else { PsciMethod::Hvc };
    assert_eq!(psci.method, method, "{what}: QEMU answers SMC itself only with EL2");
    assert_eq!(psci.path, "/psci");
    assert_eq!(psci.version, PsciVersion::V1_0, "{what}");
    assert_eq!(psci.compatible, ["arm,psci-1.0", "arm,psci-0.2", "arm,psci"]);
    assert_eq!(psci.function_ids.cpu_on, Some(0xc400_0003), "{what}");
    assert_eq!(psci.function_ids.cpu_off, Some(0x8400_0002), "{what}");

    assert_eq!(b.cpus.len(), q.smp as usize, "{what}");
    for (n, cpu) in b.cpus.iter().enumerate() {
        // GICv3 virt: 16 CPUs per cluster (Aff1); GICv2 allows at most 8 CPUs.
        let n = n as u64;
        assert_eq!(cpu.mpidr, ((n / 16) << 8) | (n % 16), "{what}: {}", cpu.path);
        assert_eq!(cpu.path, format!("/cpus/cpu@{n}"), "{what}");
        assert_eq!(cpu.status, Status::Okay);
        let expect_method = if q.smp > 1 { Some(EnableMethod::Psci) } else { None };
        assert_eq!(cpu.enable_method, expect_method, "{what}: no enable-method with one CPU");
        let compat = if q.cpu == "max" { "arm,cortex-a57" } else { "arm,cortex-a76" };
        assert_eq!(cpu.compatible.as_deref(), Some(compat), "{what}");
    }

    // Devices the hypervisor chooses from.
    let dev = |p: &str| b.device(p).unwrap_or_else(|| panic!("{what}: no device {p}"));
    assert_eq!(dev("/pl011@9000000").regions, [Region::new(0x0900_0000, 0x1000)]);
    assert_eq!(dev("/pl011@9000000").compatible, ["arm,pl011", "arm,primecell"]);
    assert_eq!(dev("/pl031@9010000").regions, [Region::new(0x0901_0000, 0x1000)]);
    assert_eq!(dev("/fw-cfg@9020000").regions, [Region::new(0x0902_0000, 0x18)]);
    assert_eq!(dev("/pl061@9030000").regions, [Region::new(0x0903_0000, 0x1000)]);
    assert_eq!(dev("/flash@0").regions, [Region::new(0, 0x400_0000), Region::new(0x400_0000, 0x400_0000)]);
    assert_eq!(dev("/pcie@10000000").regions, [Region::new(0x40_1000_0000, 0x1000_0000)]);
    assert_eq!(dev("/intc@8000000").regions[0], gic.distributor);
    // The GIC's MSI frames are children of its node: a GICv3's ITS, a GICv2's v2m frame.
    if q.gic == 3 {
        assert_eq!(dev("/intc@8000000/its@8080000").regions, [Region::new(0x0808_0000, 0x2_0000)], "{what}");
    } else {
        assert_eq!(dev("/intc@8000000/v2m@8020000").regions, [Region::new(0x0802_0000, 0x1000)], "{what}");
    }
    // The PCIe host bridge's windows: I/O, 32-bit and 64-bit memory (BARs go there).
    let w = &dev("/pcie@10000000").windows;
    let win = |space| w.iter().find(|x| x.space == space).map(|x| (x.region, x.bus_address));
    assert_eq!(w.len(), 3, "{what}: {w:?}");
    assert_eq!(win(WindowSpace::Io), Some((Region::new(0x3eff_0000, 0x1_0000), 0)));
    assert_eq!(win(WindowSpace::Mem32), Some((Region::new(0x1000_0000, 0x2eff_0000), 0x1000_0000)));
    assert_eq!(win(WindowSpace::Mem64), Some((Region::new(0x80_0000_0000, 0x80_0000_0000), 0x80_0000_0000)));
    assert!(b.devices.iter().filter(|d| d.path != "/pcie@10000000").all(|d| d.windows.is_empty()));
    let virtio: Vec<_> = b.devices.iter().filter(|d| d.path.starts_with("/virtio_mmio@")).collect();
    assert_eq!(virtio.len(), 32, "{what}");
    assert_eq!(virtio[0].regions, [Region::new(0x0a00_0000, 0x200)]);
    assert!(b.devices.iter().all(|d| d.status == Status::Okay));
    for p in ["/memory@40000000", "/cpus/cpu@0", "/chosen", "/psci", "/platform-bus@c000000"] {
        assert!(b.device(p).is_none(), "{what}: {p} is not an MMIO device");
    }
}

#[test]
fn gicv3_max_smp4_1g_with_el2() {
    let q = Qemu::default();
    let b = Board::from_dtb(&q.dtb()).unwrap();
    check_common(&q, &b);
    assert_eq!(b.bootargs, None);
    assert_eq!(b.initrd, None);
    assert_eq!(b.boot_cpuid_phys, 0);
}

#[test]
fn gicv2_cortex_a76_smp1_512m_without_el2() {
    let q = Qemu { gic: 2, virtualization: false, cpu: "cortex-a76", smp: 1, mem: "512M", ..Qemu::default() };
    check_common(&q, &Board::from_dtb(&q.dtb()).unwrap());
}

#[test]
fn gicv2_with_el2_has_gich_and_gicv() {
    let q = Qemu { gic: 2, cpu: "cortex-a76", ..Qemu::default() };
    check_common(&q, &Board::from_dtb(&q.dtb()).unwrap());
}

#[test]
fn four_gib_of_ram_needs_two_size_cells() {
    let q = Qemu { mem: "4G", ..Qemu::default() };
    let b = Board::from_dtb(&q.dtb()).unwrap();
    check_common(&q, &b);
    assert_eq!(b.memory[0].end(), 0x1_4000_0000);
}

#[test]
fn initrd_and_bootargs_from_chosen() {
    let q = Qemu { initrd: Some(4099), append: Some("a b c"), ..Qemu::default() };
    let b = Board::from_dtb(&q.dtb()).unwrap();
    check_common(&q, &b);
    assert_eq!(b.bootargs.as_deref(), Some("a b c"));
    let initrd = b.initrd.expect("initrd");
    assert_eq!(initrd.size, 4099);
    assert!(b.memory[0].contains(initrd.base) && b.memory[0].contains(initrd.end() - 1));
    assert_eq!(initrd.base % 4096, 0);
}

#[test]
fn many_cpus_use_aff1_and_a_second_redistributor_region() {
    let q = Qemu { smp: 130, ..Qemu::default() };
    let b = Board::from_dtb(&q.dtb()).unwrap();
    check_common(&q, &b);
    assert_eq!(b.cpus[16].path, "/cpus/cpu@16");
    assert_eq!(b.cpus[16].mpidr, 0x100, "unit address is the CPU index, reg the MPIDR");
    assert_eq!(b.cpu_by_mpidr(0x801).map(|c| c.path.as_str()), Some("/cpus/cpu@129"));
    let gic = b.gic.unwrap();
    assert_eq!(gic.redistributors[1], Region::new(0x40_0000_0000, 0x400_0000));
}

/// The configuration matrix the QEMU integration tests boot, every DTB parsed and checked.
#[test]
fn matrix_of_configurations() {
    let mut n = 0;
    for cpu in ["max", "cortex-a76"] {
        for gic in [2, 3] {
            for smp in [1, 4] {
                for mem in ["512M", "4G"] {
                    for virtualization in [false, true] {
                        let q = Qemu { gic, virtualization, cpu, smp, mem, ..Qemu::default() };
                        let dtb = q.dtb();
                        let b = Board::from_dtb(&dtb).unwrap_or_else(|e| panic!("{}: {e}", q.name()));
                        check_common(&q, &b);
                        // The raw-pointer constructor agrees.
                        // SAFETY: `dtb` is a live Vec holding the whole blob.
                        let via_ptr = unsafe { Board::from_ptr(dtb.as_ptr()) }.unwrap();
                        assert_eq!(via_ptr, b);
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 32);
}
