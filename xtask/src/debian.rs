//! Files from Debian's arm64 packages, fetched with the machine's own apt configuration: the
//! archive the machine already uses (its `sources.list`, `sources.list.d/*.list` and
//! `*.sources`), never a host written here. apt runs with a private state under `target/`
//! (`-o Dir::State::Lists=…`, `APT::Architecture=arm64`), so the machine's own package lists
//! and installed packages are never touched, and apt checks the archive's signatures and the
//! package's checksum as always. Results are cached: once a file is there, no network is used.
//!
//! Today one file: the Raspberry Pi 5's device tree, `broadcom/bcm2712-rpi-5-b.dtb`, from the
//! `<codename>-backports` arm64 kernel (Debian 12's own 6.1 kernel predates it).

use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One `deb` entry of the machine's apt sources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The archive's URI.
    pub uri: String,
    /// Its suites.
    pub suites: Vec<String>,
    /// Its `Signed-By` keyring, if any.
    pub signed_by: Option<String>,
}

/// `VERSION_CODENAME` of an os-release file.
pub fn codename(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|l| {
        let v = l.strip_prefix("VERSION_CODENAME=")?.trim().trim_matches('"');
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// Parses one-line (`deb [opts] URI SUITE COMPONENTS`) sources.
pub fn parse_list(text: &str) -> Vec<Source> {
    text.lines()
        .filter_map(|l| {
            let l = l.split('#').next()?.trim();
            let rest = l.strip_prefix("deb ").or_else(|| l.strip_prefix("deb\t"))?.trim();
            let (opts, rest) = match rest.strip_prefix('[') {
                Some(r) => {
                    let (o, r) = r.split_once(']')?;
                    (o, r.trim())
                }
                None => ("", rest),
            };
            let signed_by = opts.split_whitespace().find_map(|o| o.strip_prefix("signed-by=")).map(|s| s.to_string());
            let mut w = rest.split_whitespace();
            Some(Source { uri: w.next()?.to_string(), suites: vec![w.next()?.to_string()], signed_by })
        })
        .collect()
}

/// Parses deb822 (`.sources`) stanzas; `Enabled: no` ones and non-`deb` types are left out.
pub fn parse_deb822(text: &str) -> Vec<Source> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        let types = field("Types").unwrap_or_default();
        if !types.split_whitespace().any(|t| t == "deb") || field("Enabled").is_some_and(|e| e == "no") {
            continue;
        }
        let suites: Vec<String> = field("Suites").unwrap_or_default().split_whitespace().map(String::from).collect();
        for uri in field("URIs").unwrap_or_default().split_whitespace() {
            out.push(Source { uri: uri.to_string(), suites: suites.clone(), signed_by: field("Signed-By") });
        }
    }
    out
}

/// Every `deb` source of the apt configuration under `etc_apt` (`/etc/apt`).
pub fn machine_sources(etc_apt: &Path) -> Vec<Source> {
    let mut out = Vec::new();
    if let Ok(t) = std::fs::read_to_string(etc_apt.join("sources.list")) {
        out.extend(parse_list(&t));
    }
    let mut parts: Vec<PathBuf> =
        std::fs::read_dir(etc_apt.join("sources.list.d")).into_iter().flatten().flatten().map(|e| e.path()).collect();
    parts.sort();
    for p in parts {
        let Ok(t) = std::fs::read_to_string(&p) else { continue };
        match p.extension().and_then(|e| e.to_str()) {
            Some("list") => out.extend(parse_list(&t)),
            Some("sources") => out.extend(parse_deb822(&t)),
            _ => {}
        }
    }
    out
}

/// A one-line sources.list for `suite` from the machine's archive for `codename`: every source
/// that carries the release itself (`bookworm`, not `bookworm-security` or a third party's
/// suite), with its keyring.
pub fn sources_for(sources: &[Source], codename: &str, suite: &str) -> Result<String> {
    let lines: Vec<String> = sources
        .iter()
        .filter(|s| s.suites.iter().any(|x| x == codename))
        .map(|s| {
            let key = s.signed_by.as_deref().map(|k| format!(" signed-by={k}")).unwrap_or_default();
            format!("deb [arch=arm64{key}] {} {suite} main\n", s.uri)
        })
        .collect();
    ensure!(
        !lines.is_empty(),
        "the machine's apt sources have no archive for `{codename}` to take {suite} from (see /etc/apt/sources.list*)"
    );
    Ok(lines.concat())
}

/// Where downloads are cached: `target/downloads`.
pub fn cache_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::workspace_root().join("target"));
    target.join("downloads")
}

fn run(cmd: &mut Command) -> Result<String> {
    let what = format!("{:?}", cmd.get_program());
    let out = cmd.output().with_context(|| format!("running {what}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("{what} failed ({}): {}", out.status, err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(""));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The Pi 5's DTB from Debian's backports arm64 kernel, cached under [`cache_dir`].
pub fn pi5_dtb() -> Result<PathBuf> {
    file_from_kernel_package("broadcom/bcm2712-rpi-5-b.dtb")
}

/// A file of the `<codename>-backports` `linux-image-arm64` kernel package (its path under
/// `/usr/lib/linux-image-*/`), cached.
pub fn file_from_kernel_package(path: &str) -> Result<PathBuf> {
    let dir = cache_dir().join("debian-arm64");
    let name = Path::new(path).file_name().context("no file name")?.to_string_lossy().into_owned();
    let cached = dir.join(&name);
    if cached.is_file() {
        return Ok(cached);
    }
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let code = codename(&os_release).context("/etc/os-release has no VERSION_CODENAME: not a Debian-like machine")?;
    let suite = format!("{code}-backports");
    let list = sources_for(&machine_sources(Path::new("/etc/apt")), &code, &suite)?;
    for sub in ["lists/partial", "cache/archives/partial", "etc/preferences.d", "dl"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::write(dir.join("etc/sources.list"), list)?;
    let d = dir.display();
    let opts: Vec<String> = [
        "APT::Architecture=arm64".to_string(),
        "APT::Architectures=arm64".into(),
        format!("Dir::State::Lists={d}/lists"),
        "Dir::State::Status=/dev/null".into(),
        format!("Dir::Cache={d}/cache"),
        format!("Dir::Etc::SourceList={d}/etc/sources.list"),
        "Dir::Etc::SourceParts=/nonexistent".into(),
        format!("Dir::Etc::PreferencesParts={d}/etc/preferences.d"),
        "Debug::NoLocking=1".into(),
        "Acquire::Languages=none".into(),
        "Acquire::http::Timeout=60".into(),
        "Acquire::Retries=3".into(),
    ]
    .iter()
    .flat_map(|o| ["-o".to_string(), o.clone()])
    .collect();
    let apt = |tool: &str| {
        let mut c = Command::new(tool);
        c.args(&opts).current_dir(dir.join("dl")).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    eprintln!("xtask: fetching {path} from {suite}'s arm64 kernel with the machine's apt sources");
    run(apt("apt-get").args(["-q", "update"]))?;
    // linux-image-arm64 is a meta package; its first dependency is the versioned image.
    let show = run(apt("apt-cache").args(["show", "linux-image-arm64"]))?;
    let image = show
        .lines()
        .find_map(|l| l.strip_prefix("Depends: "))
        .and_then(|deps| deps.split([' ', ',']).next())
        .context("`apt-cache show linux-image-arm64` names no kernel package")?
        .to_string();
    for e in std::fs::read_dir(dir.join("dl"))?.flatten() {
        let _ = std::fs::remove_file(e.path());
    }
    run(apt("apt-get").args(["-q", "download", &image]))?;
    let deb = std::fs::read_dir(dir.join("dl"))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .context("apt-get download left no .deb")?;
    let tmp = dir.join(format!("{name}.part"));
    let script = format!(
        "set -o pipefail; dpkg-deb --fsys-tarfile '{}' | tar -xO --wildcards '*/{path}' > '{}'",
        deb.display(),
        tmp.display()
    );
    run(Command::new("bash").arg("-c").arg(&script)).with_context(|| format!("{image} has no {path}"))?;
    ensure!(std::fs::metadata(&tmp)?.len() > 0, "{image} gave an empty {path}");
    std::fs::rename(&tmp, &cached)?;
    std::fs::write(dir.join(format!("{name}.source")), format!("{image} ({suite})\n"))?;
    let _ = std::fs::remove_file(&deb);
    eprintln!("xtask: {} from {image}", cached.display());
    Ok(cached)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEB822: &str = "Types: deb\nURIs: http://archive.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://archive.example/debian-security\nSuites: bookworm-security\nComponents: main\n\nTypes: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\nTypes: deb\nEnabled: no\nURIs: http://off.example/debian\nSuites: bookworm\n";

    #[test]
    fn reads_both_source_formats() {
        let s = parse_deb822(DEB822);
        assert_eq!(s.len(), 2, "deb-src and disabled stanzas are left out: {s:?}");
        assert_eq!(s[0].uri, "http://archive.example/debian");
        assert_eq!(s[0].suites, ["bookworm", "bookworm-updates"]);
        assert_eq!(s[0].signed_by.as_deref(), Some("/usr/share/keyrings/debian-archive-keyring.gpg"));
        let l = parse_list(
            "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://m.example/debian bookworm main contrib\ndeb-src http://x/ bookworm main\ndeb http://n.example/ nodistro main # node\n",
        );
        assert_eq!(
            l,
            [
                Source {
                    uri: "http://m.example/debian".into(),
                    suites: vec!["bookworm".into()],
                    signed_by: Some("/k.gpg".into())
                },
                Source { uri: "http://n.example/".into(), suites: vec!["nodistro".into()], signed_by: None },
            ]
        );
    }

    #[test]
    fn backports_come_from_the_machines_own_archive() {
        let mut s = parse_deb822(DEB822);
        s.extend(parse_list("deb https://third.example/apt cloud-sdk-bookworm main\n"));
        let list = sources_for(&s, "bookworm", "bookworm-backports").unwrap();
        assert_eq!(
            list,
            "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://archive.example/debian bookworm-backports main\n"
        );
        let e = sources_for(&s, "trixie", "trixie-backports").unwrap_err().to_string();
        assert!(e.contains("no archive for `trixie`"), "{e}");
    }

    #[test]
    fn machine_sources_reads_the_directory() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sources.list.d")).unwrap();
        std::fs::write(d.path().join("sources.list.d/debian.sources"), DEB822).unwrap();
        std::fs::write(d.path().join("sources.list.d/x.list.disabled"), "deb http://no/ bookworm main\n").unwrap();
        std::fs::write(d.path().join("sources.list"), "deb http://one.example/debian bookworm main\n").unwrap();
        let s = machine_sources(d.path());
        let uris: Vec<&str> = s.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(
            uris,
            ["http://one.example/debian", "http://archive.example/debian", "http://archive.example/debian-security"]
        );
        assert_eq!(codename("NAME=\"Debian\"\nVERSION_CODENAME=bookworm\n").as_deref(), Some("bookworm"));
        assert_eq!(codename("NAME=x\n"), None);
    }
}
