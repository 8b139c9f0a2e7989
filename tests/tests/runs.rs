//! Trustworthy runs: every way a run can end has its own exit code and a message that says
//! why; no input hangs the machine; bad input is refused with the word or field named; the
//! SMCCC interface follows its documents; what the hypervisor keeps is out of the guest's reach.

use abi::exit;
use std::time::{Duration, Instant};
use tests::{boot, boot_with, config, images, scratch_dir, try_boot, xtask_cli, Run};

fn expect(run: &Run, code: u32, lines: &[&str]) {
    run.expect_exit(code as i32);
    for l in lines {
        run.expect_output(l);
    }
}

#[test]
fn unknown_duplicated_or_bad_boot_words_stop_the_boot_naming_the_word() {
    let kernel: [(&str, &[&str]); 4] = [
        (
            "bbml=off",
            &["unknown boot argument \"bbml=off\" (did you mean \"bbml2\"?); the kernel accepts: bbml2=auto|on|off"],
        ),
        ("test=panic test=undef", &["boot argument given twice: \"test=panic\" and \"test=undef\""]),
        ("test=panic,undef", &["test=panic ends the run, so undef would never run; put it last"]),
        ("split.iters=0x", &["bad boot argument \"split.iters=0x\": no number"]),
    ];
    for (args, lines) in kernel {
        let run = boot(config(|c| c.bootargs = args.into()));
        expect(&run, exit::GUEST_FAILURE, lines);
        assert!(!run.outcome.output.contains("self-test"), "no test may run\n{}", run.dump());
    }
    let hyp: [(&str, &[&str]); 7] = [
        // The boot loader's marker twice would make `test=irq` the boot loader's, ignored.
        ("pgtlab test=irq pgtlab", &["the word \"pgtlab\" is given twice", "(the words between the two, \"test=irq\""]),
        (
            "hyp.conduit=foo",
            &["bad boot argument \"hyp.conduit=foo\": \"foo\" is not one of them; it takes one of hvc, smc"],
        ),
        ("hyp.pool=18446744073709551615", &["18446744073709551615 is out of range; it takes a size from 16M to 1T"]),
        ("hyp.slotpool=18446744073709551615", &["\"hyp.slotpool=18446744073709551615\"", "out of range"]),
        ("hyp.check-splt", &["unknown boot argument \"hyp.check-splt\" (did you mean \"hyp.check-split\"?)"]),
        ("hyp.guest-mem=0", &["\"hyp.guest-mem=0\"", "out of range"]),
        // More CPUs than the machine has: refused, never quietly fewer.
        ("hyp.cpus=5", &["hyp.cpus=5: the device tree has 4 CPUs; give at most 4"]),
    ];
    for (args, lines) in hyp {
        // hyp.guest-mem is the xtask's (--mem), and it refuses hyp.cpus beyond --smp: given on
        // QEMU's command line by hand here.
        let run = if args.starts_with("hyp.guest-mem") || args.starts_with("hyp.cpus") {
            tests::boot_with_append(config(|_| {}), args)
        } else {
            boot(config(|c| c.bootargs = args.into()))
        };
        expect(&run, exit::HYP_FAULT, lines);
        assert!(!run.outcome.output.contains("kernel:"), "the guest may not start\n{}", run.dump());
    }
    // A pool no machine can hold: the xtask says so before QEMU starts, with the plan's reason.
    let refused = try_boot(config(|c| c.bootargs = "hyp.pool=1T".into())).err().expect("refused");
    assert!(refused.contains("--mem 1G: no machine up to"), "{refused}");
    assert!(refused.contains("hyp.pool (beyond the hypervisor's region): no 2 MiB-aligned free stretch"), "{refused}");
    // Without a hypervisor, a hypervisor word is nobody's.
    let run = boot(config(|c| {
        c.no_hypervisor = true;
        c.bootargs = "hyp.pool=16M".into();
    }));
    expect(&run, exit::GUEST_FAILURE, &["\"hyp.pool=16M\": a hypervisor word, and no hypervisor took it"]);
}

#[test]
fn bad_guest_images_are_refused_not_hung() {
    let kernel = std::fs::read(&images().kernel).unwrap();
    let dir = scratch_dir();
    let mut overflow = kernel.clone();
    overflow[8..16].copy_from_slice(&0x1000u64.to_le_bytes());
    overflow[16..24].copy_from_slice(&0xffff_ffff_ffff_f000u64.to_le_bytes());
    let mut corrupt = kernel.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0x40;
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("overflow", overflow, "text_offset 0x1000 + image_size 0xfffffffffffff000 overflows 64 bits"),
        ("trunc100k", kernel[..100_000].to_vec(), "Image truncated: 100000 bytes given"),
        ("trunc1k", kernel[..1000].to_vec(), "Image truncated: 1000 bytes given"),
        ("corrupt", corrupt, "Image corrupted: CRC-32"),
    ];
    for (name, bytes, line) in cases {
        let path = dir.join(format!("guest-{name}.img"));
        std::fs::write(&path, bytes).unwrap();
        let run = boot(config(|c| {
            c.smp = 1;
            c.guest_image = Some(path.clone());
        }));
        expect(&run, exit::HYP_FAULT, &["hyp: boot failed: the initrd is not a bootable arm64 Image", line]);
        if name == "corrupt" {
            // The same kernel in a guest bundle: the message names the bundle's kernel.
            let run = boot(config(|c| {
                c.smp = 1;
                c.guest = Some(xtask::launch::Guest { kernel: path, initrd: None, append: "quiet".into() });
            }));
            let first = "hyp: boot failed: the guest bundle's kernel is not a bootable arm64 Image";
            expect(&run, exit::HYP_FAULT, &[first, line]);
        }
    }
}

#[test]
fn the_kernel_refuses_to_start_at_el2() {
    let run = boot(config(|c| {
        c.kernel_at_el2 = true;
        c.smp = 1;
    }));
    expect(&run, exit::GUEST_FAILURE, &["kernel: boot failed: started at EL2: this kernel runs at EL1 only"]);
}

#[test]
fn unusable_configurations_are_refused_before_qemu_starts() {
    let e = try_boot(config(|c| c.cpu = "cortex-a15".into())).err().expect("cortex-a15 refused");
    assert!(e.contains("AArch32-only") && e.contains("cortex-a76") && e.contains("a64fx"), "{e}");
    let e = try_boot(config(|c| c.mem = Some(tests::mem("2048G")))).err().expect("--mem 2048G refused");
    assert!(e.contains("takes at most 1048576 MiB"), "{e}");
    // QEMU's own refusal has its own code, not "guest failure".
    let run = boot(config(|c| c.qemu_args = vec!["-device".into(), "no-such-device".into()]));
    run.expect_exit(exit::QEMU_REFUSED as i32);
    assert!(run.verdict().reason.contains("no-such-device"), "{}", run.verdict());
}

#[test]
fn cli_usage_errors_and_qemu_refusals_have_their_own_codes() {
    let (code, out) = xtask_cli(&["run", "--cpu", "cortex-a15"]);
    assert_eq!(code, exit::USAGE as i32, "{out}");
    assert!(out.contains("AArch32-only") && out.contains("neoverse-n1"), "{out}");
    let (code, out) = xtask_cli(&["run", "--mem", "0"]);
    assert_eq!(code, exit::USAGE as i32, "{out}");
    let (code, out) = xtask_cli(&["run", "--no-such-option"]);
    assert_eq!(code, exit::USAGE as i32, "{out}");
    let (code, out) = xtask_cli(&["perf", "mem-perms", "--mechanism", "bbml2=auto"]);
    assert_eq!(code, exit::USAGE as i32, "{out}");
    assert!(out.contains("\"auto\" is not one of on, off"), "{out}");
    let (code, out) = xtask_cli(&["perf", "no-such-scenario"]);
    assert_eq!(code, exit::USAGE as i32, "{out}");
}

/// Flags that cannot be honoured are refused with the reason and the way that works, never
/// ignored: each of these was once accepted and silently not honoured (or exited 70).
#[test]
fn flags_that_cannot_be_honoured_are_refused() {
    let fifo_dir = tests::scratch_dir().join(format!("fw-fifo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fifo_dir);
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let fifo = std::ffi::CString::new(fifo_dir.join("pipe").to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let image = tests::scratch_dir().join("refused.img");
    let img = image.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--gdb-port", "5000"], "--gdb"),
        (&["run", "--mem", "0x40000000"], "1024M if you meant bytes"),
        (&["run", "--bootargs", "a\n@@exit 0 (success)"], "control character"),
        (&["run", "--bootargs", "hyp.cpus=8", "--smp", "2"], "at most 2"),
        (&["run", "--bootargs", "hyp.key=0x1"], "the xtask's to choose"),
        (&["run", "--board", "pi4", "--no-hypervisor"], "start at EL2"),
        (&["run", "--board", "pi5"], "flash --board pi5"),
        (&["run", "--accel", "kvm", "--icount", "0"], "--icount"),
        (&["run", "--qemu-arg", "-monitor stdio"], "not passed on"),
        (&["chainboot", "--serial", "/dev/null", "--cpu", "max"], "give --qemu"),
        (&["chainboot", "--serial", "/dev/null", "--board", "nosuch"], "give --qemu"),
        (&["test", ""], "empty filter"),
        (&["bench", "summary", "--compare", "target/bench/x.jsonl"], "compares nothing"),
        (&["flash", "--image", img, "--uninstall"], "--boot-dir"),
        (&["flash", "--image", img, "--bootargs", "a\nb"], "control character"),
        (&["flash", "--image", img, "--firmware", fifo_dir.to_str().unwrap()], "not a regular file"),
        (&["mutants", "--", "--foo"], "give --host"),
        (&["test", "--partition", "3/2"], "1 <= K <= N"),
    ];
    for (args, says) in cases {
        let (code, out) = xtask_cli(args);
        assert_eq!(code, exit::USAGE as i32, "{args:?}\n{out}");
        assert!(out.contains(says), "{args:?}: {says:?}\n{out}");
    }
    assert!(!image.exists(), "no card image written by a refused flash");
    let (code, out) = xtask_cli(&["mutants", "--host", "--list"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("host crates for cargo-mutants") && !out.contains("installing"), "{out}");
    let _ = std::fs::remove_dir_all(&fifo_dir);
}

#[test]
fn cargo_xtask_run_returns_the_guests_code() {
    for (args, code, line) in [
        ("test=panic", exit::GUEST_PANIC, "deliberate panic (test=panic)"),
        ("test=touch-hyp hyp.on-fault=stop", exit::GUEST_FAULT, "the guest does not own this address"),
        ("test=exit-claim", exit::GUEST_FAILURE, "status 5: not a guest outcome (0-3), reported as 1"),
    ] {
        let (got, out) = xtask_cli(&["run", "--smp", "1", "--bootargs", args]);
        assert_eq!(got, code as i32, "{args}\n{out}");
        assert!(out.contains(line), "{args}\n{out}");
        assert!(out.contains(&format!("xtask: exit {code} (")), "{args}\n{out}");
    }
}

/// The QEMU process whose command line contains `needle` (under this user), if any.
fn qemu_pid(needle: &str) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        (cmd.contains("qemu-system-aarch64") && cmd.contains(needle)).then_some(pid)
    })
}

/// Local addresses listening on `port` (from /proc/net/tcp and tcp6), as hex address strings.
fn listeners(port: u16) -> Vec<String> {
    let mut v = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(f).unwrap_or_default().lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // local_address "ADDR:PORT", state 0A = LISTEN.
            if cols.len() > 3 && cols[3] == "0A" && cols[1].ends_with(&format!(":{port:04X}")) {
                v.push(cols[1].to_string());
            }
        }
    }
    v
}

#[test]
fn gdb_listens_on_localhost_only_and_a_sigterm_is_not_success() {
    let port = 20_000 + (std::process::id() % 20_000) as u16;
    let port_s = port.to_string();
    let child = std::thread::spawn(move || xtask_cli(&["run", "--smp", "1", "--gdb", "--gdb-port", &port_s]));
    let t0 = Instant::now();
    let needle = format!("tcp:127.0.0.1:{port}");
    let pid = loop {
        if let Some(pid) = qemu_pid(&needle) {
            if !listeners(port).is_empty() {
                break pid;
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "QEMU with gdb on port {port} never listened");
        std::thread::sleep(Duration::from_millis(100));
    };
    // 127.0.0.1 is 0100007F in /proc/net/tcp; nothing on 0.0.0.0 or ::.
    let l = listeners(port);
    assert_eq!(l, vec![format!("0100007F:{port:04X}")], "gdb must listen on localhost only");
    // SAFETY: kill(2) only sends a signal; `pid` is the QEMU this test started (found above by
    // its unique gdb port). Not the `kill` program: a minimal machine may not have one.
    let sent = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
    let (code, out) = child.join().unwrap();
    assert_eq!(code, exit::KILLED as i32, "{out}");
    assert!(out.contains("terminating on signal 15"), "{out}");
}

#[test]
fn a_run_past_its_time_limit_has_its_own_code() {
    let port = 40_000 + (std::process::id() % 20_000) as u16;
    let (code, out) = xtask_cli(&["run", "--smp", "1", "--gdb", "--gdb-port", &port.to_string(), "--timeout", "1"]);
    assert_eq!(code, exit::TIMED_OUT as i32, "{out}");
    assert!(out.contains("no end after the 1 s time limit"), "{out}");
}

#[test]
fn a_guest_cannot_claim_a_hypervisor_verdict() {
    let run = boot(config(|c| c.bootargs = "test=exit-claim".into()));
    expect(
        &run,
        exit::GUEST_FAILURE,
        &["hyp: guest exit hypercall, status 5: not a guest outcome (0-3), reported as 1"],
    );
}

#[test]
fn smccc_rules_and_a_storm_from_every_cpu_over_both_conduits() {
    for conduit in ["hvc", "smc"] {
        let run = boot(config(|c| c.bootargs = format!("hyp.conduit={conduit} test=smccc,storm")));
        expect(
            &run,
            exit::SUCCESS,
            &["kernel: smccc: 93 rules held", "kernel: storm: 12000 calls with random x0..x7 from 4 CPUs"],
        );
    }
}

#[test]
fn cpu_off_on_cycles_and_cpu_on_to_a_starting_cpu() {
    // CPU 2 is refused (BBML2 disagreement) and powers itself off; the test cycles it.
    let run = boot(config(|c| c.bootargs = "bbml2_test_disallow_cpu=2 test=cpu-cycle,smccc".into()));
    expect(&run, exit::SUCCESS, &["kernel: CPU 2 refused", "kernel: cpu-cycle: 8 CPU_OFF/CPU_ON cycles of CPU 0x2"]);
    let line = run.outcome.output.lines().find(|l| l.contains("cpu-cycle: 8")).unwrap();
    assert!(line.contains("AFFINITY_INFO answered ON and OFF"), "{line}");
    // Every cycle asked CPU_ON of a CPU still starting and got ON_PENDING or ALREADY_ON.
    let before = |word: &str| -> u32 {
        let head = &line[..line.find(word).unwrap_or_else(|| panic!("{word} in {line}"))];
        head.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert_eq!(before(" ON_PENDING") + before(" ALREADY_ON"), 8, "{line}");
}

#[test]
fn more_cpus_than_supported_are_trimmed_from_the_guest() {
    let run = boot(config(|c| {
        c.smp = 12;
        c.mem = Some(tests::mem("512M"));
    }));
    expect(&run, exit::SUCCESS, &[
        "hyp: the device tree has 12 CPUs and this hypervisor runs at most 8: the guest's device tree lists the first 8",
        "kernel: pgtlab kernel, 8 CPUs",
        "kernel: 8 of 8 CPUs online",
    ]);
    assert_eq!(run.record("hyp_boot").u64("guest_cpus"), Some(8));
    let run = boot(config(|c| {
        c.smp = 12;
        c.mem = Some(tests::mem("512M"));
        c.no_hypervisor = true;
    }));
    expect(&run, exit::SUCCESS, &["kernel: 8 of 8 CPUs online (the device tree has 12; this kernel runs at most 8"]);
}

#[test]
fn memory_too_small_or_taken_is_explained() {
    // The xtask gives QEMU the hypervisor's share on top of --mem; a machine given less (a
    // board, QEMU run by hand: a later -m wins) makes the hypervisor explain.
    let small = ["-m".to_string(), "32M".to_string()];
    let run = boot_with(
        config(|c| {
            c.mem = Some(tests::mem("32M"));
            c.smp = 1;
        }),
        &small,
    );
    expect(&run, exit::HYP_FAULT, &["lies inside the hypervisor's region", "RAM is too small"]);
    let run = boot_with(
        config(|c| {
            c.mem = Some(tests::mem("2G"));
            c.smp = 1;
            c.bootargs = "hyp.slotpool=1G hyp.pool=1G".into();
        }),
        &["-m".to_string(), "2G".to_string()],
    );
    // The memslot pool takes the top GiB first; a 1 GiB frame pool then has no room below it.
    expect(
        &run,
        exit::HYP_FAULT,
        &[
            "hyp.pool (beyond the hypervisor's region): no 2 MiB-aligned free stretch",
            "in the way:",
            "the memslot pool",
        ],
    );
}

#[test]
fn the_hypervisors_pools_are_out_of_the_guests_reach() {
    // 3 GiB: the frame pool (192 MiB) has a part at the top of RAM, the slot pool below it.
    let cfg = |args: String| {
        config(move |c| {
            c.mem = Some(tests::mem("3G"));
            c.smp = 2;
            c.bootargs = format!("hyp.slotpool=64M {args}");
        })
    };
    let plan = boot(cfg(String::new()));
    plan.expect_exit(0);
    let hb = plan.record("hyp_boot");
    let (frames, slot, hyp_end) =
        (hb.u64("frame_pool_high").unwrap(), hb.u64("slotpool").unwrap(), hb.u64("hyp_end").unwrap());
    assert!(frames != 0 && slot != 0, "{}", plan.dump());
    let run = boot(cfg(format!("test=pool-calls pools.frame={frames:#x} pools.slot={slot:#x}")));
    expect(
        &run,
        exit::SUCCESS,
        &["kernel: pool-calls: 8 memslots and buffers over the frame pool and the slot pool refused (DENIED)"],
    );
    // Touch each: the last page of the hypervisor's region (its low frame pool), the high frame
    // pool, the slot pool. Each is stopped with exit 4 and its own IPA.
    for ipa in [hyp_end - 4096, frames, slot + (32 << 20)] {
        let run = boot(cfg(format!("test=touch touch.ipa={ipa:#x} hyp.on-fault=stop")));
        run.expect_exit(exit::GUEST_FAULT as i32);
        assert_eq!(run.record("guest_fault").u64("ipa"), Some(ipa), "{}", run.dump());
    }
}

#[test]
fn an_aarch32_guest_is_stopped_as_the_guests_doing_not_a_hypervisor_fault() {
    let run = boot(config(|c| {
        c.smp = 1;
        c.bootargs = "hyp.test=aarch32-abort".into();
    }));
    run.expect_exit(exit::GUEST_FAULT as i32);
    let hyp_start = run.record("hyp_boot").u64("hyp_start").unwrap();
    assert_eq!(run.record("guest_fault").u64("ipa"), Some(hyp_start), "{}", run.dump());
    let run = boot(config(|c| {
        c.smp = 1;
        c.bootargs = "hyp.test=aarch32-hvc".into();
    }));
    expect(&run, exit::GUEST_FAULT, &["HVC (AArch32) (EC 0x12) from a guest in AArch32 state (it must run AArch64)"]);
}

#[test]
fn a_boot_loaders_words_before_the_marker_are_listed_and_ignored() {
    // As on a Pi 5: the firmware's words first, then `pgtlab` (cargo xtask flash writes it), ours.
    let run = boot(config(|c| {
        c.smp = 1;
        c.bootargs = "coherent_pool=1M 8250.nr_uarts=1 pgtlab hyp.check-stage2 contpte=on".into();
    }));
    expect(
        &run,
        exit::SUCCESS,
        &[
            "hyp: 2 words before \"pgtlab\" are the boot loader's, ignored: coherent_pool=1M 8250.nr_uarts=1",
            "bootargs \"contpte=on\"",
        ],
    );
    // Without the marker they are ours, and refused.
    let run = boot(config(|c| {
        c.smp = 1;
        c.bootargs = "coherent_pool=1M contpte=on".into();
    }));
    expect(&run, exit::GUEST_FAILURE, &["unknown boot argument \"coherent_pool=1M\"", "before the word \"pgtlab\""]);
}

/// Inputs the xtask must refuse as usage errors (64), before it builds or boots anything, each
/// with a message that names what is wrong (issue 20's table: each once crashed, hung, wrote
/// somewhere it should not, or went on silently).
#[test]
fn bad_command_lines_are_refused_before_anything_runs() {
    let dir = scratch_dir().join(format!("cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |n: &str| dir.join(n).display().to_string();
    // An x86-64 ELF, a PE file, a gzip file that holds no Image.
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[18] = 62;
    std::fs::write(path("x86.elf"), &elf).unwrap();
    let mut pe = vec![0u8; 256];
    pe[..2].copy_from_slice(b"MZ");
    pe[0x3c] = 0x80;
    pe[0x80..0x84].copy_from_slice(b"PE\0\0");
    std::fs::write(path("app.efi"), &pe).unwrap();
    let fifo = std::ffi::CString::new(path("initrd.fifo")).unwrap();
    let _ = std::fs::remove_file(path("initrd.fifo"));
    // SAFETY: mkfifo on a path in the test's own scratch directory.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let wall = "{\"bench\":\"mprotect\",\"machine\":\"max-1cpu\",\"case\":\"x\",\"median_ns\":1,\"icount\":false}\n";
    std::fs::write(path("wall.jsonl"), wall).unwrap();
    std::fs::write(path("empty.jsonl"), "").unwrap();
    std::fs::write(path("banner.jsonl"), "{\"kind\":\"banner\",\"cpu\":0}\n").unwrap();
    let huge = "18446744073709551615";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["run".into(), "--timeout".into(), huge.into()], "more than a year"),
        (
            vec!["console".into(), "--serial".into(), "unix:/nonexistent".into(), "--timeout".into(), huge.into()],
            "more than a year",
        ),
        (vec!["chainboot".into(), "--qemu".into(), "--ready-timeout".into(), huge.into()], "more than a year"),
        (
            vec!["flash".into(), "--image".into(), "/dev/null".into(), "--size-mib".into(), "40000".into()],
            "40000 is not in 64..=4096",
        ),
        (
            vec!["flash".into(), "--image".into(), path("card.img"), "--size-mib".into(), "17592186044480".into()],
            "is not in 64..=4096",
        ),
        (
            vec!["flash".into(), "--image".into(), path("card.img"), "--size-mib".into(), "1".into()],
            "1 is not in 64..=4096",
        ),
        (vec!["flash".into(), "--image".into(), "/dev/null".into()], "is a character device"),
        (vec!["flash".into(), "--image".into(), path("initrd.fifo")], "FIFO"),
        (vec!["flash".into(), "--boot-dir".into(), path("missing"), "--uninstall".into()], "not a directory"),
        (vec!["chainboot".into(), "--qemu".into(), "--baud".into(), "0".into()], "0 baud is not a rate"),
        (vec!["run".into(), "--guest".into(), path("x86.elf")], "an ELF file for x86-64"),
        (vec!["run".into(), "--guest".into(), path("app.efi")], "needs UEFI firmware"),
        (
            vec!["run".into(), "--guest".into(), path("x86.elf"), "--guest-initrd".into(), path("initrd.fifo")],
            "not a regular file",
        ),
        (vec!["run".into(), "--guest".into(), "/dev/zero".into()], "not a regular file"),
        (vec!["run".into(), "--gdb".into(), "--gdb-port".into(), "0".into()], "0 is not in 1..=65535"),
        (
            vec!["bench".into(), "mprotect".into(), "--icount".into(), "--compare".into(), path("wall.jsonl")],
            "a wall-time run cannot be compared",
        ),
        (vec!["bench".into(), "mprotect".into(), "--compare".into(), path("empty.jsonl")], "no rows of benchmark"),
        (vec!["bench".into(), "mprotect".into(), "--compare".into(), path("banner.jsonl")], "not a benchmark row"),
        (vec!["bench".into(), "nosuch".into()], "unknown benchmark \"nosuch\""),
    ];
    for (args, says) in cases {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let t0 = Instant::now();
        let (code, out) = xtask_cli(&a);
        assert_eq!(code, exit::USAGE as i32, "{a:?}: exit {code}\n{out}");
        assert!(out.contains(says), "{a:?}: the message should say {says:?}\n{out}");
        assert!(!out.contains("xtask: building"), "{a:?}: refused before building\n{out}");
        assert!(t0.elapsed() < Duration::from_secs(120), "{a:?} took {:?}", t0.elapsed());
    }
    assert!(!dir.join("card.img").exists(), "nothing written");
}

/// The pids of processes whose parent is `parent` and whose command line contains `needle`.
fn children_of(parent: u32, needle: &str) -> Vec<u32> {
    let Ok(d) = std::fs::read_dir("/proc") else { return Vec::new() };
    d.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid: u32 = stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse().ok()?;
            let cmd = String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).ok()?).replace('\0', " ");
            (ppid == parent && cmd.contains(needle)).then_some(pid)
        })
        .collect()
}

/// Whether process `pid` is gone (or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| matches!(s.rsplit(')').next().and_then(|r| r.split_whitespace().next()), Some("Z" | "X")))
        .unwrap_or(true)
}

/// Every way the xtask ends takes its QEMU with it: SIGTERM, SIGHUP and SIGINT (also when the
/// shell that started the xtask in the background set SIGINT to be ignored) end QEMU and the
/// xtask with the code `interrupted`; SIGKILL, which nothing can catch, still takes QEMU down
/// (PR_SET_PDEATHSIG). The xtask waits in `--gdb` mode: QEMU is up, paused, costing nothing.
#[test]
fn a_signal_to_the_xtask_ends_its_qemu_and_says_so() {
    let bin = tests::xtask_bin().display().to_string();
    for (i, sig) in [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGKILL].into_iter().enumerate() {
        let port = 30_000 + (std::process::id() % 5_000) as u16 * 4 + i as u16;
        // Started by a non-interactive shell in the background: SIGINT (and SIGQUIT) ignored.
        let script = format!("\"$0\" run --smp 1 --gdb --gdb-port {port} & echo $!; wait $!; echo \"exit $?\"");
        let mut sh = std::process::Command::new("sh")
            .args(["-c", &script, &bin])
            .current_dir(xtask::workspace_root())
            .env_remove("XTASK_QEMU")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(sh.stdout.take().unwrap()));
        let xtask: u32 = lines.next().unwrap().unwrap().trim().parse().unwrap();
        let t0 = Instant::now();
        let needle = format!("tcp:127.0.0.1:{port}");
        let qemu = loop {
            if let Some(&q) = children_of(xtask, &needle).first() {
                break q;
            }
            assert!(t0.elapsed() < Duration::from_secs(300), "the xtask never started QEMU");
            std::thread::sleep(Duration::from_millis(100));
        };
        // SAFETY: kill(2) on the xtask this test started.
        assert_eq!(unsafe { libc::kill(xtask as libc::pid_t, sig) }, 0);
        // The shell's own line; QEMU may print its "terminating on signal" line first (it
        // shares the xtask's stdout), so read up to the shell's.
        let said = lines.by_ref().map(|l| l.unwrap()).find(|l| l.starts_with("exit ")).unwrap_or_default();
        let _ = sh.wait();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut sh.stderr.take().unwrap(), &mut err).unwrap();
        if sig == libc::SIGKILL {
            assert_eq!(said, "exit 137", "{err}");
        } else {
            assert_eq!(said, format!("exit {}", exit::INTERRUPTED), "signal {sig}\n{err}");
            assert!(err.contains("received: ending every process the xtask started"), "{err}");
        }
        let t0 = Instant::now();
        while !gone(qemu) {
            assert!(t0.elapsed() < Duration::from_secs(30), "QEMU {qemu} outlived the xtask (signal {sig})");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `--qemu-arg` gives QEMU a device a test suite needs (kvm-unit-tests' pci-test needs
/// `pci-testdev`); the hypervisor gives the guest the PCI windows it sits behind.
#[test]
fn a_device_a_test_suite_needs_reaches_qemu() {
    let run = boot(config(|c| {
        c.smp = 1;
        c.qemu_args = xtask::launch::qemu_arg::parse("-device pci-testdev").unwrap();
    }));
    run.expect_exit(0);
    assert!(run.cfg.describe().contains("qemu-arg=-device"), "{}", run.dump());
}
