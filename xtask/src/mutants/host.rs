//! `cargo xtask mutants --host [CRATE ...] [-- ARGS]`: cargo-mutants on the host crates, one at a
//! time, with `.cargo/mutants.toml`; a summary per crate, and the missed mutants that
//! `xtask/mutants/host-missed.txt` does not explain.
//!
//! `host-missed.txt` holds one surviving mutant a line, as cargo-mutants names it without its
//! line and column (`lib/abi/src/exit.rs: replace describe -> &'static str with ""`), then ` # `
//! and why it cannot matter (or why no test can see it). Blank lines and lines starting with `#`
//! are comments.

use super::HOST_CRATES;
use crate::error::check_failed;
use crate::workspace_root;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where a crate's cargo-mutants output goes (`mutants.out/` inside).
pub fn out_dir(krate: &str) -> PathBuf {
    workspace_root().join("target/mutants/host").join(krate)
}

/// The explanations file.
pub fn explained_file() -> PathBuf {
    workspace_root().join("xtask/mutants/host-missed.txt")
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// `cargo mutants` works, or is installed with cargo (saying so).
fn ensure_cargo_mutants() -> Result<()> {
    let ok = |c: &mut Command| c.stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if ok(cargo().args(["mutants", "--version"])) {
        return Ok(());
    }
    eprintln!("xtask: installing cargo-mutants with `cargo install cargo-mutants --locked` (it is missing)");
    let mut install = cargo();
    install.args(["install", "cargo-mutants", "--locked"]);
    let status = crate::signals::status(&mut install)?;
    if !status.success() || !ok(cargo().args(["mutants", "--version"])) {
        bail!("cargo-mutants could not be installed; install it by hand: cargo install cargo-mutants");
    }
    Ok(())
}

/// Counts of one crate's run, from its `mutants.out/outcomes.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    pub caught: usize,
    pub missed: Vec<String>,
    pub timeout: usize,
    pub unviable: usize,
}

impl Summary {
    /// Caught share of the viable mutants (timeouts count as caught: the mutant made a test hang).
    pub fn caught_pct(&self) -> f64 {
        let viable = self.caught + self.timeout + self.missed.len();
        if viable == 0 {
            return 100.0;
        }
        100.0 * (self.caught + self.timeout) as f64 / viable as f64
    }
}

/// Reads cargo-mutants' `outcomes.json`.
pub fn read_outcomes(json: &str) -> Result<Summary> {
    let v: serde_json::Value = serde_json::from_str(json).context("parsing outcomes.json")?;
    let mut s = Summary::default();
    for o in v["outcomes"].as_array().context("outcomes.json has no outcomes")? {
        let Some(m) = o["scenario"].get("Mutant") else { continue }; // the baseline
        let summary = o["summary"].as_str().unwrap_or("");
        match summary {
            "CaughtMutant" => s.caught += 1,
            "MissedMutant" => s.missed.push(mutant_name(m)),
            "Timeout" => s.timeout += 1,
            "Unviable" => s.unviable += 1,
            other => bail!("outcomes.json: unknown outcome {other:?}"),
        }
    }
    Ok(s)
}

/// A mutant's name as `host-missed.txt` lists it: file, then cargo-mutants' description (no
/// line or column, which move with every edit above).
fn mutant_name(m: &serde_json::Value) -> String {
    let file = m["file"].as_str().unwrap_or("?");
    let name = m["name"].as_str().unwrap_or("?");
    // `name` is "FILE:LINE:COL: description".
    let desc = name.splitn(4, ':').nth(3).map_or(name, str::trim);
    format!("{file}: {desc}")
}

/// The explained mutants: name -> reason.
pub fn read_explained(text: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for (n, l) in text.lines().enumerate() {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let Some((name, why)) = l.split_once(" # ") else {
            bail!("host-missed.txt line {}: no ` # reason`", n + 1);
        };
        if why.trim().is_empty() {
            bail!("host-missed.txt line {}: an empty reason", n + 1);
        }
        out.insert(name.trim().to_string(), why.trim().to_string());
    }
    Ok(out)
}

/// The crates `names` stand for (none: every host crate), or a usage error for one that is not.
pub fn crates(names: &[String]) -> Result<Vec<&str>> {
    let crates: Vec<&str> =
        if names.is_empty() { HOST_CRATES.to_vec() } else { names.iter().map(String::as_str).collect() };
    for c in &crates {
        if !HOST_CRATES.contains(c) {
            return Err(anyhow::Error::new(crate::error::Refused(format!(
                "{c:?} is not a host crate cargo-mutants covers (one of: {})",
                HOST_CRATES.join(", ")
            ))));
        }
    }
    Ok(crates)
}

/// Runs cargo-mutants on `names` (none: every host crate) with `extra` arguments.
pub fn run(names: &[String], extra: &[String]) -> Result<()> {
    let crates = crates(names)?;
    ensure_cargo_mutants()?;
    let explained = read_explained(&std::fs::read_to_string(explained_file()).unwrap_or_default())?;
    let mut rows = Vec::new();
    for c in &crates {
        let out = out_dir(c);
        std::fs::create_dir_all(&out)?;
        eprintln!("xtask: cargo mutants -p {c} {} (output {})", extra.join(" "), out.display());
        let mut cmd = cargo();
        cmd.current_dir(workspace_root()).args(["mutants", "--package", c, "--output"]).arg(&out).args(extra);
        let mut child = crate::signals::supervised(&mut cmd).context("running cargo mutants")?;
        let status = child.wait()?;
        if crate::signals::caught().is_some() {
            return Err(anyhow::Error::new(crate::error::ExitWith(crate::error::Verdict::new(
                abi::exit::INTERRUPTED,
                "the xtask was stopped during cargo mutants",
            ))));
        }
        // cargo-mutants exits 2 when mutants were missed, 3 on timeouts: read its outcomes instead.
        let json = out.join("mutants.out/outcomes.json");
        let s = read_outcomes(
            &std::fs::read_to_string(&json)
                .with_context(|| format!("cargo mutants ended with {status} and wrote no {}", json.display()))?,
        )?;
        rows.push((c.to_string(), s));
    }
    report(&rows, &explained)
}

/// Prints the summary of `rows` and fails on a missed mutant `explained` does not list.
fn report(rows: &[(String, Summary)], explained: &BTreeMap<String, String>) -> Result<()> {
    println!(
        "{:<10} {:>7} {:>7} {:>8} {:>9} {:>8}  caught",
        "crate", "caught", "missed", "timeout", "unviable", "explained"
    );
    let mut unexplained = Vec::new();
    for (c, s) in rows {
        let ex = s.missed.iter().filter(|m| explained.contains_key(*m)).count();
        println!(
            "{c:<10} {:>7} {:>7} {:>8} {:>9} {:>8}  {:.1} %",
            s.caught,
            s.missed.len(),
            s.timeout,
            s.unviable,
            ex,
            s.caught_pct()
        );
        unexplained.extend(s.missed.iter().filter(|m| !explained.contains_key(*m)).cloned());
    }
    if !unexplained.is_empty() {
        println!("\nmissed and not explained in {}:", explained_file().display());
        for m in &unexplained {
            println!("  {m}");
        }
        return Err(check_failed(format!(
            "{} missed mutant(s): kill each with a test, or explain it in xtask/mutants/host-missed.txt",
            unexplained.len()
        )));
    }
    Ok(())
}

/// The summary of a finished run in `dir` (`mutants.out/` inside), for the notes and README.
pub fn summary_of(dir: &Path) -> Result<Summary> {
    read_outcomes(&std::fs::read_to_string(dir.join("mutants.out/outcomes.json"))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_counted_and_missed_mutants_named_without_their_line() {
        let json = r#"{"outcomes":[
            {"scenario":"Baseline","summary":"Success"},
            {"scenario":{"Mutant":{"file":"lib/x/src/a.rs","name":"lib/x/src/a.rs:10:5: replace f -> bool with true"}},"summary":"MissedMutant"},
            {"scenario":{"Mutant":{"file":"lib/x/src/a.rs","name":"lib/x/src/a.rs:11:5: replace g -> bool with true"}},"summary":"CaughtMutant"},
            {"scenario":{"Mutant":{"file":"lib/x/src/a.rs","name":"lib/x/src/a.rs:12:5: replace h with ()"}},"summary":"Timeout"},
            {"scenario":{"Mutant":{"file":"lib/x/src/a.rs","name":"lib/x/src/a.rs:13:5: replace i -> T with Default::default()"}},"summary":"Unviable"}
        ]}"#;
        let s = read_outcomes(json).unwrap();
        assert_eq!(s.missed, vec!["lib/x/src/a.rs: replace f -> bool with true".to_string()]);
        assert_eq!((s.caught, s.timeout, s.unviable), (1, 1, 1));
        assert!((s.caught_pct() - 200.0 / 3.0).abs() < 1e-9);
        assert!(read_outcomes(r#"{"outcomes":[{"scenario":{"Mutant":{}},"summary":"Odd"}]}"#).is_err());
    }

    #[test]
    fn explanations_need_a_reason_and_unexplained_missed_mutants_fail() {
        let e = read_explained("# comment\n\nlib/x/src/a.rs: replace f -> bool with true # logging only\n").unwrap();
        assert_eq!(e.len(), 1);
        assert!(read_explained("lib/x/src/a.rs: replace f -> bool with true\n").is_err());
        assert!(read_explained("lib/x/src/a.rs: replace f -> bool with true #  \n").is_err());
        let s = Summary { missed: vec!["lib/x/src/a.rs: replace f -> bool with true".into()], ..Summary::default() };
        assert!(report(&[("x".into(), s.clone())], &e).is_ok());
        let err = report(&[("x".into(), s)], &BTreeMap::new()).unwrap_err();
        assert_eq!(crate::error::code_of(&err), abi::exit::CHECK_FAILED);
    }

    #[test]
    fn the_explanations_file_parses() {
        read_explained(&std::fs::read_to_string(explained_file()).unwrap()).unwrap();
    }
}
