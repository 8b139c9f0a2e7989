//! The serial chainloader in QEMU (`-cpu cortex-a76 -M virt,gic-version=2`, its PL011 on a unix socket)
//! against the xtask's host side: a transfer with a damaged byte is refused and nothing starts;
//! the real hypervisor and kernel then go through, boot, and the run's final line reaches the
//! host with its code, which is also QEMU's exit status. Under `--long`: the Pi 4's model
//! (`raspi4b` with the board's DTB), the loader on the mini UART its stdout-path names.

use ::chainboot as chainboot_proto;
use std::time::Duration;
use tests::{images, qemu_for, with_dtb};
use xtask::chainboot::{self, ConsoleEnd, Payload, Sent, Session, Tamper};
use xtask::launch::Launch;

/// A minimal valid arm64 Image of `len` bytes.
fn tiny_image(len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
    v[0x38..0x3c].copy_from_slice(&abi::image::MAGIC.to_le_bytes());
    v[24..32].copy_from_slice(&(abi::image::FLAG_PAGE_4K | abi::image::FLAG_ANYWHERE).to_le_bytes());
    v[8..16].fill(0);
    abi::image::ImageHeader::patch(&mut v, len as u64 + 0x1000).unwrap();
    v
}

/// The loader in QEMU on `cfg`'s machine with `ram` (`chainboot --qemu --ram`; `None`: the
/// machine's default).
fn start(cfg: &Launch, ram: Option<&str>) -> (chainboot::qemu::LoaderVm, Session, u64) {
    // The build that writes the chainloader's Image comes first: QEMU reads it at start.
    images();
    let ram = chainboot::board_ram(cfg, ram.map(tests::mem)).expect("the board's RAM");
    let mut vm = chainboot::qemu::start(&qemu_for(cfg.machine), cfg, ram, &xtask::build::chainloader_image())
        .expect("QEMU with the loader");
    let link = vm.link().expect("the serial line");
    (vm, Session::new(link, |_| {}, false), xtask::launch::new_key().expect("a run key"))
}

/// The Images under test, with the boot words `bootargs`.
fn real(compress: bool, bootargs: &str) -> Payload {
    Payload {
        hypervisor: std::fs::read(&images().hypervisor).unwrap(),
        kernel: std::fs::read(&images().kernel).unwrap(),
        bootargs: bootargs.into(),
        compress,
    }
}

fn dump(s: &Session) -> String {
    format!("--- serial ---\n{}\n--- end ---", s.log.join("\n"))
}

#[test]
fn refuses_a_damaged_transfer_then_boots_hypervisor_and_kernel() {
    let cfg = Launch { cpu: "cortex-a76".into(), gic: 2, smp: 2, ..Default::default() };
    let (mut vm, mut s, key) = start(&cfg, Some("1G"));
    s.wait_ready(Some(Duration::from_secs(60))).expect("ready");
    assert!(s.log.iter().any(|l| l.starts_with("chainloader: ") && l.contains("at EL2")), "{}", dump(&s));

    // One inverted byte in the kernel: the CRC catches it, nothing starts, the loader waits again.
    let small =
        Payload { hypervisor: tiny_image(4096), kernel: tiny_image(8192), bootargs: "a b".into(), compress: false };
    match s.send(&small, Some(Tamper::FlipKernelByte(5000))).expect("transfer") {
        Sent::Refused(why) => {
            assert!(why.starts_with("checksum: the kernel arrived with CRC-32"), "{why}\n{}", dump(&s));
            assert!(why.contains("nothing was started"), "{why}");
        }
        other => panic!("a damaged kernel was not refused: {other:?}\n{}", dump(&s)),
    }
    s.wait_ready(Some(Duration::from_secs(30))).expect("ready again after the refusal");

    let sent = s.send(&real(true, &format!("hyp.key={key:#x}")), None).expect("transfer");
    let Sent::Booted { entry, .. } = sent else { panic!("{sent:?}\n{}", dump(&s)) };
    eprintln!("chainboot over QEMU's PL011: {}", chainboot::rate_line(&sent, 115_200, true));
    let end = s.console(Some(Duration::from_secs(120)), Some(key));
    assert_eq!(end, ConsoleEnd::Exit(0), "{}", dump(&s));
    // The hypervisor runs where the loader put it, from the DTB the loader wrote, and finds the
    // kernel the loader received (the DTB's initrd): the guest comes up.
    let dtb = s.log.iter().find_map(|l| match chainboot_proto::Status::parse(l) {
        Some(chainboot_proto::Status::Boot { dtb, .. }) => Some(dtb),
        _ => None,
    });
    let out = s.log.join("\n");
    let banner = format!("hyp: pgtlab hypervisor at EL2, image [{entry:#x}, ");
    assert!(out.contains(&banner), "{banner}\n{}", dump(&s));
    assert!(out.contains(&format!("DTB {:#x} (", dtb.unwrap())), "{}", dump(&s));
    assert!(out.contains("kernel: 2 of 2 CPUs online"), "{}", dump(&s));
    let status = vm.child.wait().expect("QEMU exits");
    assert_eq!(status.code(), Some(0), "{}", dump(&s));
}

/// The host dies half way: the loader gives up after its byte time-out, says how far it got,
/// and takes the next transfer (uncompressed this time, 4 CPUs, 4 GiB).
#[test]
#[ignore = "long: cargo xtask test --long"]
fn survives_a_host_that_stops_half_way() {
    let cfg = Launch { cpu: "cortex-a76".into(), gic: 2, smp: 4, ..Default::default() };
    let (mut vm, mut s, key) = start(&cfg, Some("4G"));
    s.wait_ready(Some(Duration::from_secs(60))).expect("ready");
    let real = real(false, &format!("hyp.key={key:#x}"));
    let half = (real.hypervisor.len() / 2) as u64;
    match s.send(&real, Some(Tamper::StopAfter(half))).expect("transfer") {
        Sent::TimedOut { received, total } => {
            // Payload bytes, as the host counted them when it stopped: the boot words first.
            assert_eq!(received, half, "{}", dump(&s));
            assert_eq!(total, (real.bootargs.len() + real.hypervisor.len() + real.kernel.len()) as u64);
        }
        other => panic!("no time-out: {other:?}\n{}", dump(&s)),
    }
    s.wait_ready(Some(Duration::from_secs(30))).expect("ready again after the time-out");
    let sent = s.send(&real, None).expect("transfer");
    assert!(matches!(sent, Sent::Booted { .. }), "{sent:?}\n{}", dump(&s));
    eprintln!("chainboot over QEMU's PL011, uncompressed: {}", chainboot::rate_line(&sent, 115_200, true));
    assert_eq!(s.console(Some(Duration::from_secs(180)), Some(key)), ConsoleEnd::Exit(0), "{}", dump(&s));
    assert!(s.log.join("\n").contains("kernel: 4 of 4 CPUs online"), "{}", dump(&s));
    assert_eq!(vm.child.wait().unwrap().code(), Some(0));
}

/// The Pi 4: the loader receives through the mini UART (QEMU's second serial port, the DTB's
/// stdout-path), keeps the spin-table CPUs' page 0, and hands the board's DTB on; the
/// hypervisor starts all four CPUs and powers off through the PM watchdog. Long: QEMU's mini
/// UART model takes input only as its main loop polls (~3 KiB/s, about 3 minutes).
#[test]
#[ignore = "long: cargo xtask test --long"]
fn long_pi4_chainboot_boots_hypervisor_and_kernel() {
    let cfg = with_dtb(Launch::for_machine(tests::machine("pi4")));
    let (mut vm, mut s, key) = start(&cfg, None);
    s.wait_ready(Some(Duration::from_secs(60))).expect("ready");
    let out = s.log.join("\n");
    assert!(out.contains("chainloader: Raspberry Pi 4 Model B at EL2"), "{}", dump(&s));
    assert!(out.contains("console /soc/serial@7e215040"), "not the mini UART: {}", dump(&s));
    let sent = s.send(&real(true, &format!("hyp.key={key:#x}")), None).expect("transfer");
    assert!(matches!(sent, Sent::Booted { .. }), "{sent:?}\n{}", dump(&s));
    eprintln!("chainboot over QEMU's mini UART: {}", chainboot::rate_line(&sent, 115_200, true));
    assert_eq!(s.console(Some(Duration::from_secs(180)), Some(key)), ConsoleEnd::Exit(0), "{}", dump(&s));
    let out = s.log.join("\n");
    assert!(out.contains("Raspberry Pi 4 Model B"), "{}", dump(&s));
    assert!(out.contains("kernel: 4 of 4 CPUs online"), "{}", dump(&s));
    assert_eq!(vm.child.wait().unwrap().code(), Some(0), "{}", dump(&s));
}
