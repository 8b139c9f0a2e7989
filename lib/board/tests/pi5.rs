//! Optional: the real Raspberry Pi 5 device tree (`broadcom/bcm2712-rpi-5-b.dtb`) from Debian's
//! arm64 kernel package in bookworm-backports, fetched at test time with `apt-get download`
//! into a private apt state under the target directory (never committed, reused once there).
//! When it cannot be fetched (no apt, no network) this test alone is skipped, and says so on
//! the terminal.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use board::{guest_dtb, Board, EnableMethod, GicVersion, GuestSpec, PsciMethod, PsciVersion, Region, Status};

const DTB: &str = "bcm2712-rpi-5-b.dtb";

fn say(msg: &str) {
    // Straight to the terminal: the test harness captures print!/eprint! of passing tests.
    let _ = writeln!(std::io::stderr(), "{msg}");
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let args: Vec<_> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
    let what = format!("{} … {}", cmd.get_program().to_string_lossy(), args[args.len().saturating_sub(2)..].join(" "));
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("{what} failed: {}", err.lines().last().unwrap_or("")));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Downloads (once) and returns the Pi 5 DTB.
fn fetch(dir: &Path) -> Result<Vec<u8>, String> {
    let cached = dir.join(DTB);
    if let Ok(d) = std::fs::read(&cached) {
        return Ok(d);
    }
    for sub in ["lists/partial", "cache/archives/partial", "etc/preferences.d", "dl"] {
        std::fs::create_dir_all(dir.join(sub)).map_err(|e| e.to_string())?;
    }
    let sources = dir.join("etc/sources.list");
    std::fs::write(
        &sources,
        "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
         http://deb.debian.org/debian bookworm-backports main\n",
    )
    .map_err(|e| e.to_string())?;
    let d = dir.display();
    let opts: Vec<String> = [
        "APT::Architecture=arm64".to_string(),
        "APT::Architectures=arm64".into(),
        format!("Dir::State::Lists={d}/lists"),
        "Dir::State::Status=/dev/null".into(),
        format!("Dir::Cache={d}/cache"),
        format!("Dir::Etc::SourceList={}", sources.display()),
        "Dir::Etc::SourceParts=/nonexistent".into(),
        "Dir::Etc::Preferences=/nonexistent".into(),
        format!("Dir::Etc::PreferencesParts={d}/etc/preferences.d"),
        "Debug::NoLocking=1".into(),
        "Acquire::Languages=none".into(),
        "Acquire::http::Timeout=30".into(),
        "Acquire::Retries=0".into(),
    ]
    .iter()
    .flat_map(|o| ["-o".to_string(), o.clone()])
    .collect();
    let apt = |tool: &str| {
        let mut c = Command::new("timeout");
        c.arg("300").arg(tool).args(&opts).current_dir(dir.join("dl"));
        c
    };
    run(apt("apt-get").arg("-q").arg("update"))?;
    // linux-image-arm64 is a meta package; its first dependency is the versioned image.
    let show = run(apt("apt-cache").args(["show", "linux-image-arm64"]))?;
    let image = show
        .lines()
        .find_map(|l| l.strip_prefix("Depends: "))
        .and_then(|deps| deps.split([' ', ',']).next())
        .ok_or("no Depends in `apt-cache show linux-image-arm64`")?
        .to_string();
    run(apt("apt-get").args(["-q", "download", &image]))?;
    let deb = std::fs::read_dir(dir.join("dl"))
        .map_err(|e| e.to_string())?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .ok_or("apt-get download left no .deb")?;
    let script = format!(
        "dpkg-deb --fsys-tarfile '{}' | tar -xO --wildcards '*/broadcom/{DTB}' > '{}.tmp' && mv '{}.tmp' '{}'",
        deb.display(),
        cached.display(),
        cached.display(),
        cached.display()
    );
    run(Command::new("sh").arg("-c").arg(&script))?;
    let _ = std::fs::remove_file(&deb);
    say(&format!("pi5: fetched {DTB} from {image} (bookworm-backports)"));
    std::fs::read(&cached).map_err(|e| e.to_string())
}

#[test]
fn raspberry_pi_5_device_tree() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("pi5-apt");
    let dtb = match fetch(&dir) {
        Ok(d) if !d.is_empty() => d,
        Ok(_) => return say("SKIPPED raspberry_pi_5_device_tree: empty DTB extracted"),
        Err(e) => {
            return say(&format!("SKIPPED raspberry_pi_5_device_tree (optional): cannot fetch the Pi 5 DTB: {e}"))
        }
    };
    let b = Board::from_dtb(&dtb).unwrap_or_else(|e| panic!("Pi 5 DTB: {e}"));
    assert_eq!(b.model.as_deref(), Some("Raspberry Pi 5"));
    assert_eq!(b.compatible, ["raspberrypi,5-model-b", "brcm,bcm2712"]);

    // The debug UART the firmware leaves on, through the alias and the soc bus ranges.
    let uart = b.console.as_ref().unwrap();
    assert_eq!(uart.path, "/soc@107c000000/serial@7d001000");
    assert_eq!((uart.base, uart.size), (0x10_7d00_1000, 0x200));
    assert_eq!(uart.options.as_deref(), Some("115200n8"));
    assert!(uart.from_stdout_path);
    assert_eq!(uart.clock_frequency, Some(9_216_000), "clk-uart fixed clock via `uartclk`");

    // GIC-400 behind the soc bus, with GICH/GICV.
    let gic = b.gic.as_ref().unwrap();
    assert_eq!((gic.version, gic.compatible.as_str()), (GicVersion::V2, "arm,gic-400"));
    assert_eq!(gic.distributor, Region::new(0x10_7fff_9000, 0x1000));
    assert_eq!(gic.cpu_interface, Some(Region::new(0x10_7fff_a000, 0x2000)));
    assert_eq!(gic.hyp_interface, Some(Region::new(0x10_7fff_c000, 0x2000)));
    assert_eq!(gic.vcpu_interface, Some(Region::new(0x10_7fff_e000, 0x2000)));

    let psci = b.psci.as_ref().unwrap();
    assert_eq!((psci.method, psci.version), (PsciMethod::Smc, PsciVersion::V1_0));
    assert_eq!(psci.function_ids, Default::default());

    // Four Cortex-A76 with the core number in Aff1.
    let mpidrs: Vec<u64> = b.cpus.iter().map(|c| c.mpidr).collect();
    assert_eq!(mpidrs, [0x000, 0x100, 0x200, 0x300]);
    assert!(b.cpus.iter().all(|c| c.enable_method == Some(EnableMethod::Psci)));
    assert!(b.cpus.iter().all(|c| c.compatible.as_deref() == Some("arm,cortex-a76")));

    // The kernel package's tree carries a placeholder RAM size the firmware overwrites, and
    // TF-A's memory below 0x80000.
    assert_eq!(b.memory, [Region::new(0, 0x2800_0000)]);
    let atf = &b.reserved_memory[0];
    assert_eq!((atf.path.as_str(), atf.no_map), ("/reserved-memory/atf@0", true));
    assert_eq!(atf.regions, [Region::new(0, 0x8_0000)]);
    let cma = &b.reserved_memory[1];
    assert!(cma.reusable && cma.regions.is_empty());
    let mmc = b.device("/soc@107c000000/mmc@fff000").unwrap();
    assert_eq!(mmc.regions, [Region::new(0x10_00ff_f000, 0x260), Region::new(0x10_00ff_f400, 0x200)]);
    assert_eq!(b.device("/soc@107c000000/serial@7d001000").unwrap().status, Status::Okay);
    assert!(b.device("/__symbols__").is_none());

    // The guest tree keeps `__symbols__` (which vm-fdt's writer would refuse to write) and
    // everything else; RAM above TF-A, the SD controller hidden.
    let spec = GuestSpec {
        memory: vec![Region::new(0x8_0000, 0x2800_0000 - 0x8_0000)],
        remove: vec!["/soc@107c000000/mmc@fff000".into()],
        psci_method: Some(PsciMethod::Smc),
        ..GuestSpec::default()
    };
    let out = guest_dtb(&dtb, &spec).unwrap();
    let g = Board::from_dtb(&out).unwrap();
    assert_eq!(g.memory, spec.memory);
    assert_eq!((&g.console, &g.gic, &g.cpus), (&b.console, &b.gic, &b.cpus));
    assert!(g.device("/soc@107c000000/mmc@fff000").is_none());
    let f = fdt::Fdt::new(&out).unwrap();
    assert!(f.find_node("/__symbols__").and_then(|n| n.property("uart10")).is_some());
}
