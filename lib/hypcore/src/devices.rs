//! The board's devices between the hypervisor and the guest: how the machine is switched off
//! ([`PowerOff`]), which devices the hypervisor keeps for itself ([`kept`]: the power
//! controller it ends the run with, when that is a device and not firmware), and so which
//! device pages the guest's stage 2 maps ([`guest_devices`]) and which nodes its DTB disables
//! ([`hide_kept`]). One decision, used by the stage-2 mapping, the guest's DTB and the power-off.
//!
//! A kept device's registers are never mapped for the guest: a guest that could write the Pi 4's
//! PM watchdog could reset the board behind the hypervisor. Its node is disabled in the guest's
//! DTB, so the guest's drivers (Linux's `bcm2835-pm`) do not probe it and take an abort.

use crate::range::Range;
use crate::PAGE;
use alloc::string::String;
use alloc::vec::Vec;
use board::{Board, Device, GuestSpec, Region};

/// How the hypervisor switches the machine off at the end of a run, decided by the DTB alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerOff {
    /// PSCI firmware (the DTB has a PSCI node): SYSTEM_OFF / SYSTEM_RESET.
    Psci,
    /// No PSCI, a Broadcom PM watchdog (the Pi 4): its register block ("pm").
    PmWatchdog(Region),
    /// Nothing the hypervisor knows.
    None,
}

impl PowerOff {
    /// The board's power-off: PSCI firmware first, else the PM watchdog, else none.
    pub fn of(board: &Board) -> PowerOff {
        if board.psci.is_some() {
            PowerOff::Psci
        } else if let Some(r) = board.pm_watchdog() {
            PowerOff::PmWatchdog(r)
        } else {
            PowerOff::None
        }
    }
}

/// The devices the hypervisor keeps for itself: the PM watchdog when it is the power-off
/// ([`PowerOff::of`]). The guest's stage 2 maps none of their registers and its DTB has their
/// nodes disabled.
pub fn kept(board: &Board) -> Vec<&Device> {
    match PowerOff::of(board) {
        PowerOff::PmWatchdog(_) => board.pm_watchdog_device().into_iter().collect(),
        PowerOff::Psci | PowerOff::None => Vec::new(),
    }
}

/// Disables the nodes of the [`kept`] devices in the guest's DTB.
pub fn hide_kept(board: &Board, spec: &mut GuestSpec) {
    for d in kept(board) {
        if !spec.disable.contains(&d.path) {
            spec.disable.push(d.path.clone());
        }
    }
}

/// The registers of the [`kept`] devices, page-rounded, with their node paths: what the
/// guest's stage 2 must not translate (`hyp.check-stage2` walks them).
pub fn kept_pages(board: &Board) -> Vec<(String, Range)> {
    kept(board).into_iter().flat_map(|d| d.regions.iter().map(|r| (d.path.clone(), pages(r)))).collect()
}

/// `r` rounded out to whole pages.
fn pages(r: &Region) -> Range {
    Range::new(r.base & !(PAGE - 1), r.end().saturating_add(PAGE - 1) & !(PAGE - 1))
}

/// The device regions the guest may touch: every enabled DTB device outside RAM (sub-devices
/// such as the GIC's ITS or v2m frame included) and the windows of PCI host bridges, minus the
/// GIC's hypervisor control interface and virtual CPU interface and the [`kept`] devices' pages
/// (they are the hypervisor's), and minus `hyp` (the hypervisor's region). Page-rounded,
/// sorted, touching or overlapping pages merged (named by the first device).
pub fn guest_devices(board: &Board, hyp: Range) -> Vec<(String, Range)> {
    let mut hidden: Vec<Range> = Vec::new();
    if let Some(g) = &board.gic {
        for r in [g.hyp_interface, g.vcpu_interface].into_iter().flatten() {
            hidden.push(Range::new(r.base, r.end()));
        }
    }
    hidden.extend(kept_pages(board).into_iter().map(|(_, r)| r));
    let ram: Vec<Range> = board.memory.iter().map(|r| Range::new(r.base, r.end())).collect();
    let mut found: Vec<(String, Range)> = Vec::new();
    for d in board.devices.iter().filter(|d| d.status.is_okay()) {
        // A PCI host bridge's windows are where the guest places its devices' BARs.
        for r in d.regions.iter().chain(d.windows.iter().map(|w| &w.region)) {
            // Stage 2 maps pages: round out, so devices sharing a page (virtio-mmio slots are
            // 0x200 apart) end up in one mapping.
            let range = pages(r);
            if range.is_empty()
                || range.overlaps(&hyp)
                || hidden.iter().any(|h| h.overlaps(&range))
                || ram.iter().any(|m| m.overlaps(&range))
            {
                continue;
            }
            found.push((d.path.clone(), range));
        }
    }
    found.sort_by_key(|(_, r)| r.start);
    let mut out: Vec<(String, Range)> = Vec::new();
    for (path, r) in found {
        match out.last_mut() {
            Some((_, last)) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push((path, r)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdtb::{cells, one_cpu, root_with_memory};
    use alloc::vec;
    use board::FdtWriter;

    const PM: u64 = 0xfe10_0000;
    const ASB: u64 = 0xfe00_a000;
    const UART: u64 = 0xfe21_5040;
    const CLOCKS: u64 = 0xfe10_1000;

    /// A Pi 4-like tree: spin-table CPUs, the devices under a `soc` bus translating
    /// 0x7e000000 to 0xfe000000, the PM block (watchdog, "asb") beside a clock controller and
    /// the mini UART; `psci` adds a PSCI node (firmware that powers off).
    fn pi4_like(psci: bool) -> Vec<u8> {
        let mut w = FdtWriter::new();
        root_with_memory(&mut w, 1, 1, &[0, 0x3c00_0000]);
        let spin = [("enable-method", b"spin-table\0".to_vec()), ("cpu-release-addr", cells(&[0, 0xd8]))];
        one_cpu(&mut w, &spin);
        if psci {
            w.begin_node("psci").unwrap();
            w.property("compatible", b"arm,psci-1.0\0").unwrap();
            w.property("method", b"smc\0").unwrap();
            w.end_node().unwrap();
        }
        w.begin_node("soc").unwrap();
        w.property("compatible", b"simple-bus\0").unwrap();
        w.property("#address-cells", &cells(&[1])).unwrap();
        w.property("#size-cells", &cells(&[1])).unwrap();
        w.property("ranges", &cells(&[0x7e00_0000, 0xfe00_0000, 0x0180_0000])).unwrap();
        w.begin_node("watchdog@7e100000").unwrap();
        w.property("compatible", b"brcm,bcm2711-pm\0brcm,bcm2835-pm-wdt\0").unwrap();
        w.property("reg", &cells(&[0x7e10_0000, 0x114, 0x7e00_a000, 0x24])).unwrap();
        w.property("#power-domain-cells", &cells(&[1])).unwrap();
        w.end_node().unwrap();
        w.begin_node("cprman@7e101000").unwrap();
        w.property("compatible", b"brcm,bcm2711-cprman\0").unwrap();
        w.property("reg", &cells(&[0x7e10_1000, 0x2000])).unwrap();
        w.end_node().unwrap();
        w.begin_node("serial@7e215040").unwrap();
        w.property("compatible", b"brcm,bcm2835-aux-uart\0").unwrap();
        w.property("reg", &cells(&[0x7e21_5040, 0x40])).unwrap();
        w.end_node().unwrap();
        w.end_node().unwrap();
        w.end_node().unwrap();
        w.finish().unwrap()
    }

    const HYP: Range = Range::new(0x3a00_0000, 0x3c00_0000);

    fn mapped(devs: &[(String, Range)], addr: u64) -> bool {
        devs.iter().any(|(_, r)| r.contains(addr, 4))
    }

    #[test]
    fn the_pm_watchdog_that_powers_off_is_the_hypervisors() {
        let b = Board::from_dtb(&pi4_like(false)).unwrap();
        assert_eq!(PowerOff::of(&b), PowerOff::PmWatchdog(Region::new(PM, 0x114)));
        let paths: Vec<&str> = kept(&b).iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["/soc/watchdog@7e100000"]);
        let devs = guest_devices(&b, HYP);
        // Neither of the PM block's register pages (the watchdog's, its "asb"), and only those.
        assert!(!mapped(&devs, PM) && !mapped(&devs, PM + 0x1c) && !mapped(&devs, ASB), "{devs:?}");
        assert!(mapped(&devs, CLOCKS) && mapped(&devs, UART), "{devs:?}");
        let pages: Vec<Range> = kept_pages(&b).into_iter().map(|(_, r)| r).collect();
        assert_eq!(pages, [Range::new(PM, PM + PAGE), Range::new(ASB, ASB + PAGE)]);
    }

    #[test]
    fn with_psci_firmware_the_pm_block_stays_the_guests() {
        let b = Board::from_dtb(&pi4_like(true)).unwrap();
        assert_eq!(PowerOff::of(&b), PowerOff::Psci);
        assert!(kept(&b).is_empty() && kept_pages(&b).is_empty());
        let devs = guest_devices(&b, HYP);
        assert!(mapped(&devs, PM) && mapped(&devs, ASB), "{devs:?}");
        let mut spec = GuestSpec::default();
        hide_kept(&b, &mut spec);
        assert!(spec.disable.is_empty());
    }

    /// The guest's tree, as the hypervisor writes it (the plan's spec, the kept devices
    /// hidden): the PM watchdog's node is there, disabled; the other devices are untouched.
    #[test]
    fn the_guest_dtb_has_the_kept_watchdog_disabled() {
        for psci in [false, true] {
            let host = pi4_like(psci);
            let b = Board::from_dtb(&host).unwrap();
            let mut spec = GuestSpec {
                memory: vec![Region::new(0x1000, 0x3000_0000)],
                psci_method: Some(board::PsciMethod::Hvc),
                ..GuestSpec::default()
            };
            hide_kept(&b, &mut spec);
            hide_kept(&b, &mut spec);
            let guest = Board::from_dtb(&board::guest_dtb(&host, &spec).unwrap()).unwrap();
            let wdt = guest.device("/soc/watchdog@7e100000").expect("the node stays");
            assert_eq!(wdt.status.is_okay(), psci, "{wdt:?}");
            assert_eq!(guest.pm_watchdog().is_none(), !psci);
            assert!(guest.devices.iter().filter(|d| !d.is_compatible(board::PM_WATCHDOG)).all(|d| d.status.is_okay()));
        }
    }

    #[test]
    fn devices_are_page_rounded_merged_and_kept_off_ram_and_the_hypervisor() {
        let b = Board::from_dtb(&pi4_like(true)).unwrap();
        let devs = guest_devices(&b, Range::new(UART & !(PAGE - 1), (UART & !(PAGE - 1)) + PAGE));
        assert!(!mapped(&devs, UART), "{devs:?}");
        // The PM page and the clock controller's two pages touch: one mapping.
        assert!(devs.contains(&(String::from("/soc/watchdog@7e100000"), Range::new(PM, CLOCKS + 0x2000))), "{devs:?}");
        assert!(devs.iter().all(|(_, r)| r.start % PAGE == 0 && r.end % PAGE == 0 && r.start >= 0x3c00_0000));
    }
}
