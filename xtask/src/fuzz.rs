//! `cargo xtask fuzz [TARGET] [--time S]`: the `fuzz` crate's targets under libFuzzer
//! (coverage-guided, through cargo-fuzz in `fuzz/libfuzzer/`), each for `S` seconds, seeded with
//! the built Images, QEMU's DTBs and sample command lines; prints the executions per target
//! and in total. A crash is a finding: libFuzzer saves the input under
//! `fuzz/libfuzzer/artifacts/TARGET/` and the command fails (CHECK_FAILED).
//!
//! cargo-fuzz comes from crates.io (`cargo install cargo-fuzz`, once, saying so); libFuzzer's
//! flags need a nightly compiler, so the stable one is told to allow them (RUSTC_BOOTSTRAP=1).
//! `cargo xtask test` runs the same targets for a moment without libFuzzer (the `fuzz`
//! crate's unit tests).

use crate::error::check_failed;
use crate::provision::{system, toolchain};
use crate::{build, workspace_root};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// The libFuzzer targets (binaries of `fuzz/libfuzzer`, functions of the `fuzz` crate).
pub const TARGETS: [(&str, &str); 5] = [
    ("image_header", "the arm64 Image header parser (the hypervisor's guest loader)"),
    ("dtb", "the DTB parser (lib/board), as both binaries run it at boot"),
    ("guest_dtb", "the guest-DTB writer on every DTB the parser accepts; the output must parse"),
    ("bootargs", "the strict boot-argument and size parsers (lib/bootargs)"),
    ("efi", "what the hypervisor's UEFI entry reads: its PE header, load options, the memory map"),
];

fn fuzz_dir() -> PathBuf {
    workspace_root().join("fuzz/libfuzzer")
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `cargo fuzz` works, or is installed with cargo (saying so).
fn ensure_cargo_fuzz() -> Result<()> {
    let ok = |c: &mut Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if ok(cargo().args(["fuzz", "--version"])) {
        return Ok(());
    }
    eprintln!("xtask: installing cargo-fuzz with `cargo install cargo-fuzz --locked` (it is missing)");
    let mut install = cargo();
    install.args(["install", "cargo-fuzz", "--locked"]);
    let status = crate::signals::status(&mut install)?;
    if !status.success() || !ok(cargo().args(["fuzz", "--version"])) {
        bail!("cargo-fuzz could not be installed; install it by hand: cargo install cargo-fuzz");
    }
    Ok(())
}

/// Writes seeds into the corpus of `target` (kept between runs, outside git).
fn seed(target: &str, corpus: &Path, images: &build::Images, qemu: &Path) -> Result<()> {
    std::fs::create_dir_all(corpus)?;
    let put = |name: &str, bytes: &[u8]| std::fs::write(corpus.join(name), bytes);
    match target {
        "image_header" => {
            put("seed-kernel.img", &std::fs::read(&images.kernel)?)?;
            put("seed-hypervisor.img", &std::fs::read(&images.hypervisor)?)?;
        }
        "dtb" | "guest_dtb" => {
            for (i, m) in ["virt,gic-version=3,virtualization=on", "virt,gic-version=2"].iter().enumerate() {
                let f = corpus.join(format!("seed-qemu-{i}.dtb"));
                let status = Command::new(qemu)
                    .args([
                        "-M",
                        &format!("{m},dumpdtb={}", f.display()),
                        "-cpu",
                        "max",
                        "-smp",
                        "4",
                        "-display",
                        "none",
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()?;
                if status.success() {
                    // Cut QEMU's 1 MiB padding to the tree's own size.
                    let d = std::fs::read(&f)?;
                    if let Ok(n) = board_total_size(&d) {
                        std::fs::write(&f, &d[..n])?;
                    }
                }
            }
        }
        _ => {
            put("seed-1", b"bbml2=on test=panic,undef hyp.pool=16M")?;
            put("seed-2", b"split.iters=0x10 hyp.slotpool=1T test=smccc test=storm")?;
        }
    }
    Ok(())
}

/// The DTB header's totalsize (big-endian u32 at 4), if the blob is long enough.
fn board_total_size(d: &[u8]) -> Result<usize> {
    let b: [u8; 4] = d.get(4..8).context("short DTB")?.try_into()?;
    let n = u32::from_be_bytes(b) as usize;
    anyhow::ensure!(n <= d.len(), "totalsize beyond the file");
    Ok(n)
}

/// libFuzzer's final count of executions in its output.
pub fn executions(output: &str) -> Option<u64> {
    output.lines().find_map(|l| l.trim().strip_prefix("stat::number_of_executed_units:")?.trim().parse().ok())
}

/// Runs `which` (or every target) for `secs` seconds each.
pub fn run(which: Option<&str>, secs: u64) -> Result<()> {
    let targets: Vec<&str> = match which {
        Some(t) if TARGETS.iter().any(|(n, _)| *n == t) => vec![t],
        Some(t) => {
            let list: Vec<String> = TARGETS.iter().map(|(n, d)| format!("  {n}: {d}")).collect();
            return Err(anyhow::Error::new(crate::error::Refused(format!(
                "unknown fuzz target {t:?}; known:\n{}",
                list.join("\n")
            ))));
        }
        None => TARGETS.iter().map(|(n, _)| *n).collect(),
    };
    ensure_cargo_fuzz()?;
    let tc = toolchain::find()?;
    let qemu = system::qemu()?;
    let images = build::build(&tc, &[])?;
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for t in &targets {
        let corpus = fuzz_dir().join("corpus").join(t);
        seed(t, &corpus, &images, &qemu)?;
        eprintln!("xtask: fuzz {t} for {secs} s (libFuzzer; first build takes minutes)");
        let t0 = Instant::now();
        let mut child = cargo()
            .current_dir(workspace_root())
            .env("RUSTC_BOOTSTRAP", "1")
            .args(["fuzz", "run", t, "--fuzz-dir"])
            .arg(fuzz_dir())
            .arg(&corpus)
            .args(["--", &format!("-max_total_time={secs}"), "-print_final_stats=1"])
            .stderr(Stdio::piped())
            .spawn()
            .context("running cargo fuzz")?;
        let mut out = String::new();
        for line in BufReader::new(child.stderr.take().expect("piped")).lines() {
            let line = line?;
            // libFuzzer's periodic lines are many: show the milestones only.
            if !line.starts_with('#') || line.contains("DONE") || line.contains("INITED") {
                eprintln!("{line}");
            }
            out.push_str(&line);
            out.push('\n');
        }
        let ok = child.wait()?.success();
        let n = executions(&out).unwrap_or(0);
        rows.push((t.to_string(), n, t0.elapsed().as_secs_f64(), ok));
        if !ok {
            failed.push(t.to_string());
        }
    }
    println!("\n{:<14} {:>14} {:>9}  result", "target", "executions", "seconds");
    for (t, n, s, ok) in &rows {
        println!("{t:<14} {n:>14} {s:>9.1}  {}", if *ok { "no finding" } else { "FINDING (see artifacts/)" });
    }
    let total: u64 = rows.iter().map(|r| r.1).sum();
    println!("{:<14} {total:>14}", "total");
    if !failed.is_empty() {
        return Err(check_failed(format!(
            "fuzz findings in {}: inputs under fuzz/libfuzzer/artifacts/",
            failed.join(", ")
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_libfuzzers_execution_count() {
        let out = "Done 551629 runs in 6 second(s)\nstat::number_of_executed_units: 551629\nstat::x: 1\n";
        assert_eq!(super::executions(out), Some(551_629));
        assert_eq!(super::executions("nothing"), None);
        let names: Vec<&str> = super::TARGETS.iter().map(|t| t.0).collect();
        let lib: Vec<&str> = fuzz_names();
        assert_eq!(names, lib, "xtask and the fuzz crate list the same targets");
    }

    fn fuzz_names() -> Vec<&'static str> {
        // The `fuzz` crate is not a dependency of the xtask: read its list from the source.
        let src = include_str!("../../fuzz/src/lib.rs");
        let start = src.find("pub const TARGETS").unwrap();
        let body = &src[start..src[start..].find(";\n").unwrap() + start];
        body.split("(\"").skip(1).map(|s| &s[..s.find('"').unwrap()]).collect()
    }
}
