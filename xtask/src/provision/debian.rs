//! Files from Debian's arm64 packages, fetched with the machine's own apt configuration: the
//! archive the machine already uses (its `sources.list`, `sources.list.d/*.list` and
//! `*.sources`), never a host written here. apt runs with a private state under `target/`
//! (`-o Dir::State::Lists=…`, `APT::Architecture=arm64`), so the machine's own package lists
//! and installed packages are never touched, and apt checks the archive's signatures and the
//! package's checksum as always. Results are cached: once a file is there, no network is used.
//!
//! Three uses: the boards' device trees (Pi 5, Pi 4, ZCU102, i.MX 8M Plus EVK) and a kernel
//! that boots on QEMU's board models, from the `<codename>-backports` arm64 kernel (Debian 12's
//! own 6.1 kernel predates the Pi 5), [`file_from_kernel_package`]; the Linux guest's kernel
//! and busybox from the machine's own suites ([`Apt::new`]); and a QEMU new enough for the
//! board models from `<codename>-backports` for the host's architecture
//! ([`Apt::backports`], `crate::provision::qemu_pkg`).

use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// A one-line sources.list for `suite` (packages of `arch`) from the machine's archive for
/// `codename`: every source
/// that carries the release itself (`bookworm`, not `bookworm-security` or a third party's
/// suite), with its keyring.
pub fn sources_for(sources: &[Source], codename: &str, suite: &str, arch: &str) -> Result<String> {
    let lines: Vec<String> = sources
        .iter()
        .filter(|s| s.suites.iter().any(|x| x == codename))
        .map(|s| {
            let key = s.signed_by.as_deref().map(|k| format!(" signed-by={k}")).unwrap_or_default();
            format!("deb [arch={arch}{key}] {} {suite} main\n", s.uri)
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

/// The Pi 5's DTB from Debian's backports arm64 kernel, cached under [`cache_dir`].
pub fn pi5_dtb() -> Result<PathBuf> {
    file_from_kernel_package("broadcom/bcm2712-rpi-5-b.dtb")
}

/// What is taken from the backports arm64 kernel package, in one download: the boards' device
/// trees (paths under `/usr/lib/linux-image-*/`) and the kernel Image (`vmlinuz`), which boots
/// on QEMU's board models (Debian 12's own 6.1 kernel predates the Pi 5 and lacks drivers the
/// boards' consoles need).
pub const KERNEL_PACKAGE_FILES: [&str; 5] = [
    "broadcom/bcm2712-rpi-5-b.dtb",
    "broadcom/bcm2711-rpi-4-b.dtb",
    "xilinx/zynqmp-zcu102-rev1.0.dtb",
    "freescale/imx8mp-evk.dtb",
    "vmlinuz",
];

/// The directory of [`file_from_kernel_package`]'s files.
pub fn kernel_package_dir() -> PathBuf {
    cache_dir().join("debian-arm64")
}

/// A file of the `<codename>-backports` `linux-image-arm64` kernel package (a path under
/// `/usr/lib/linux-image-*/`, or `vmlinuz` for the kernel Image), cached under
/// [`kernel_package_dir`] by its file name. One download extracts every file of
/// [`KERNEL_PACKAGE_FILES`]; the `.deb` is not kept.
pub fn file_from_kernel_package(path: &str) -> Result<PathBuf> {
    // One fetch at a time (tests ask from several threads); the second finds the file cached.
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = kernel_package_dir();
    let name = Path::new(path).file_name().context("no file name")?.to_string_lossy().into_owned();
    let cached = dir.join(&name);
    if cached.is_file() {
        return Ok(cached);
    }
    let apt = Apt::backports(&dir.join("apt"), "arm64")?;
    eprintln!("xtask: fetching {path} from {}'s arm64 kernel with the machine's apt sources", apt.suite_name());
    let deb = apt.fetch("linux-image-arm64", true)?;
    let image = deb.file_name().and_then(|n| n.to_str()).unwrap_or("?").split('_').next().unwrap_or("?").to_string();
    let mut wanted: Vec<&str> = KERNEL_PACKAGE_FILES.to_vec();
    if !wanted.contains(&path) {
        wanted.push(path);
    }
    for want in wanted {
        let file = Path::new(want).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let got = if want == "vmlinuz" {
            extract_vmlinuz(&deb, &dir.join(&file))
        } else {
            extract(&deb, &format!("*/{want}"), &dir.join(&file))
        };
        match got {
            Ok(()) => std::fs::write(dir.join(format!("{file}.source")), format!("{image} ({})\n", apt.suite_name()))?,
            Err(e) if want == path => return Err(e.context(format!("{image} has no {path}"))),
            Err(e) => eprintln!("xtask: warning: {e:#}"),
        }
    }
    let _ = std::fs::remove_file(&deb);
    eprintln!("xtask: {} from {image}", cached.display());
    Ok(cached)
}

// ---------------------------------------------------------------------------------------------
// Packages of the machine's own (default) suites, with a private apt state: Debian's arm64
// kernel and busybox for the Linux guest (`crate::linux`). Every apt command runs under a time
// limit: without network the fetch fails with a message saying what was tried, it never hangs.

/// Longest one apt command may take.
const APT_TIMEOUT: Duration = Duration::from_secs(120);

/// A private apt state: the machine's own sources (its default suites), or one suite of the
/// machine's archive (`<codename>-backports`) written into a sources list of its own; packages
/// of one architecture (`arm64` for the guests, the host's for QEMU).
#[derive(Debug, Clone)]
pub struct Apt {
    dir: PathBuf,
    arch: String,
    /// `Some(suite)`: the sources list under `dir` names only that suite (or those suites).
    suite: Option<String>,
    /// `APT::Default-Release`: the suite whose packages are preferred.
    default_release: Option<String>,
}

/// The machine's release codename (`/etc/os-release`'s `VERSION_CODENAME`).
fn machine_codename() -> Result<String> {
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    codename(&os_release).context("/etc/os-release has no VERSION_CODENAME: not a Debian-like machine")
}

/// Runs `cmd` with a time limit; returns stdout, or an error with the last lines of stderr.
pub(crate) fn run_limited(cmd: &mut Command, what: &str) -> Result<String> {
    let t0 = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("{what}: cannot start {:?}", cmd.get_program()))?;
    let out = child.stdout.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let err = child.stderr.take().map(|mut s| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = std::io::Read::read_to_end(&mut s, &mut v);
            v
        })
    });
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if t0.elapsed() > APT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what}: no answer after {} s (is the package registry reachable?)", APT_TIMEOUT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.map(|h| h.join().unwrap_or_default()).unwrap_or_default();
    let stderr = err.map(|h| h.join().unwrap_or_default()).unwrap_or_default();
    if !status.success() {
        let e = String::from_utf8_lossy(&stderr);
        let tail: Vec<&str> = e.lines().filter(|l| !l.trim().is_empty()).rev().take(3).collect();
        bail!("{what} failed ({status}): {}", tail.into_iter().rev().collect::<Vec<_>>().join(" | "));
    }
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// The suites that carry Debian's newest arm64 packages, tried in order: each a name and the
/// suites of its apt state (a backports suite needs its release's packages too; its own are
/// preferred). The KVM host model's kernel and QEMU and TF-A's newer ports come from here.
pub const NEWEST_SUITES: [(&str, &[&str]); 2] =
    [("sid", &["sid"]), ("trixie-backports", &["trixie", "trixie-backports"])];

impl Apt {
    /// The apt state under `dir` (created as needed) for arm64 packages of the machine's own
    /// suites.
    pub fn new(dir: &Path) -> Result<Apt> {
        Self::create(dir, "arm64", None)
    }

    /// The apt state under `dir` for `arch` packages of the machine's own suites (its apt
    /// sources as they are); a `status` file already there is kept (the packages apt plans
    /// against as installed).
    pub fn machine_suites(dir: &Path, arch: &str) -> Result<Apt> {
        Self::create(dir, arch, None)
    }

    /// The one apt state for arm64 packages of the machine's own suites: the Linux guest's kernel
    /// and busybox, EDK2 and U-Boot all come through it, so its package lists are fetched once.
    pub fn machine_arm64() -> Result<Apt> {
        Self::new(&cache_dir().join("linux").join("apt"))
    }

    /// The apt state under `dir` for `arch` packages of `<codename>-backports` from the
    /// machine's own archive (`/etc/os-release`'s codename, `/etc/apt`'s sources).
    pub fn backports(dir: &Path, arch: &str) -> Result<Apt> {
        let code = machine_codename()?;
        Self::suite(dir, arch, &format!("{code}-backports"))
    }

    /// The apt state under `dir` for `arch` packages of `suite` (e.g. `sid`) from the machine's
    /// own archive: the one that carries the machine's release serves the others too.
    pub fn suite(dir: &Path, arch: &str, suite: &str) -> Result<Apt> {
        Self::suites(dir, arch, &[suite])
    }

    /// [`Apt::suite`] with several suites (e.g. `trixie` and `trixie-backports`, whose packages
    /// need the release's), the last one preferred (`APT::Default-Release`: a backports suite's
    /// packages are otherwise taken only when asked by name).
    pub fn suites(dir: &Path, arch: &str, suites: &[&str]) -> Result<Apt> {
        let code = machine_codename()?;
        let sources = machine_sources(Path::new("/etc/apt"));
        let list = suites.iter().map(|s| sources_for(&sources, &code, s, arch)).collect::<Result<Vec<_>>>()?.concat();
        let mut apt = Self::create(dir, arch, Some(suites.join(" + ")))?;
        if suites.len() > 1 {
            apt.default_release = suites.last().map(|s| s.to_string());
        }
        crate::write_if_changed(&dir.join("sources.list"), list.as_bytes())?;
        Ok(apt)
    }

    fn create(dir: &Path, arch: &str, suite: Option<String>) -> Result<Apt> {
        for sub in ["lists/partial", "cache/archives/partial", "debs"] {
            std::fs::create_dir_all(dir.join(sub)).with_context(|| format!("creating {}", dir.join(sub).display()))?;
        }
        let status = dir.join("status");
        if !status.exists() {
            std::fs::write(&status, "")?;
        }
        Ok(Apt { dir: dir.to_path_buf(), arch: arch.to_string(), suite, default_release: None })
    }

    /// What the packages come from, for messages: the suite, or "the machine's suites".
    pub fn suite_name(&self) -> &str {
        self.suite.as_deref().unwrap_or("the machine's suites")
    }

    fn options(&self) -> Vec<String> {
        let d = self.dir.display();
        let mut o = vec![
            format!("APT::Architecture={}", self.arch),
            format!("APT::Architectures::={}", self.arch),
            format!("Dir::State::Lists={d}/lists"),
            format!("Dir::State::status={d}/status"),
            format!("Dir::Cache={d}/cache"),
            "Debug::NoLocking=1".into(),
            "Acquire::Languages=none".into(),
            "Acquire::http::Timeout=30".into(),
            "Acquire::https::Timeout=30".into(),
            "Acquire::Retries=1".into(),
        ];
        if let Some(r) = &self.default_release {
            o.push(format!("APT::Default-Release={r}"));
        }
        if self.suite.is_some() {
            o.push(format!("Dir::Etc::SourceList={d}/sources.list"));
            o.push("Dir::Etc::SourceParts=/nonexistent".into());
        }
        if crate::provision::system::is_root() {
            // Downloads land in our directory, which apt's sandbox user may not write.
            o.push("APT::Sandbox::User=root".into());
        }
        o.into_iter().flat_map(|x| ["-o".to_string(), x]).collect()
    }

    fn apt(&self, tool: &str) -> Result<Command> {
        let path = crate::provision::system::which(tool)
            .with_context(|| format!("{tool} not found: the Linux guest comes from Debian's arm64 packages"))?;
        let mut c = Command::new(path);
        c.args(self.options()).current_dir(self.dir.join("debs")).env("DEBIAN_FRONTEND", "noninteractive");
        Ok(c)
    }

    fn has_lists(&self) -> bool {
        std::fs::read_dir(self.dir.join("lists"))
            .map(|it| it.flatten().any(|e| e.file_name().to_string_lossy().contains("_Packages")))
            .unwrap_or(false)
    }

    /// `apt-get update` into the private lists. One at a time in this process: a state may be
    /// shared by several users ([`Apt::machine_arm64`]), and apt runs without its own locks here.
    pub fn update(&self) -> Result<()> {
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
        let arch = &self.arch;
        eprintln!(
            "xtask: apt-get update ({arch} package lists from this machine's apt sources, kept in {})",
            self.dir.display()
        );
        run_limited(self.apt("apt-get")?.args(["-q", "update"]), &format!("apt-get update ({arch})"))?;
        if !self.has_lists() {
            bail!("apt-get update left no {arch} package list: do this machine's apt sources carry {arch} packages?");
        }
        Ok(())
    }

    /// The package a meta package (e.g. `linux-image-cloud-arm64`) depends on first.
    pub fn first_dependency(&self, meta: &str) -> Result<String> {
        let out = run_limited(self.apt("apt-cache")?.args(["depends", meta]), &format!("apt-cache depends {meta}"))?;
        first_depends_line(&out).with_context(|| format!("apt-cache depends {meta}: no dependency listed"))
    }

    /// Downloads `package` (if not there yet) and returns its `.deb`.
    pub fn download(&self, package: &str) -> Result<PathBuf> {
        self.download_to(package, &self.debs_dir())
    }

    /// Downloads `package` into `debs` (if not there yet; created as needed) and returns its
    /// `.deb`: a caller that shares this state's lists keeps its downloads apart.
    pub fn download_to(&self, package: &str, debs: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(debs).with_context(|| format!("creating {}", debs.display()))?;
        let find = || -> Option<PathBuf> {
            std::fs::read_dir(debs).ok()?.flatten().map(|e| e.path()).find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
            })
        };
        if let Some(p) = find() {
            return Ok(p);
        }
        eprintln!("xtask: apt-get download {package} ({}, {})", self.arch, self.suite_name());
        let mut c = self.apt("apt-get")?;
        c.current_dir(debs).args(["-q", "download", package]);
        run_limited(&mut c, &format!("apt-get download {package}"))?;
        find().with_context(|| format!("apt-get download {package} left no .deb in {}", debs.display()))
    }

    /// Downloads version `version` of `package` into `debs` (if not there yet; created as
    /// needed) and returns its `.deb`; an error when the archive no longer offers that version.
    pub fn download_version_to(&self, package: &str, version: &str, debs: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(debs).with_context(|| format!("creating {}", debs.display()))?;
        // apt names the file NAME_VERSION_ARCH.deb, an epoch's colon written %3a.
        let prefix = format!("{package}_{}_", version.replace(':', "%3a"));
        let find = || -> Option<PathBuf> {
            std::fs::read_dir(debs).ok()?.flatten().map(|e| e.path()).find(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
            })
        };
        if let Some(p) = find() {
            return Ok(p);
        }
        eprintln!("xtask: apt-get download {package}={version} ({}, {})", self.arch, self.suite_name());
        let mut c = self.apt("apt-get")?;
        c.current_dir(debs).args(["-q", "download", &format!("{package}={version}")]);
        run_limited(&mut c, &format!("apt-get download {package}={version}"))?;
        find().with_context(|| format!("apt-get download {package}={version} left no .deb in {}", debs.display()))
    }

    /// The package lists, fetched with `apt-get update` when there are none yet.
    pub fn ensure_lists(&self) -> Result<()> {
        if self.has_lists() {
            return Ok(());
        }
        self.update()
    }

    /// `apt-cache depends PACKAGE`'s output.
    pub fn depends(&self, package: &str) -> Result<String> {
        run_limited(self.apt("apt-cache")?.args(["depends", package]), &format!("apt-cache depends {package}"))
    }

    /// `apt-get -s install --no-install-recommends PACKAGES`' output against this state's
    /// (empty) list of installed packages: every package the install would unpack, one `Inst`
    /// line each.
    pub fn simulate_install(&self, packages: &[&str]) -> Result<String> {
        let mut c = self.apt("apt-get")?;
        c.args(["-s", "-q", "install", "--no-install-recommends"]).args(packages);
        run_limited(&mut c, &format!("apt-get -s install {}", packages.join(" ")))
    }

    /// Downloads `NAME=VERSION` packages in one `apt-get download`, into [`Apt::debs_dir`].
    pub fn download_versions(&self, specs: &[String]) -> Result<()> {
        eprintln!("xtask: apt-get download of {} packages ({}, {})", specs.len(), self.arch, self.suite_name());
        let mut c = self.apt("apt-get")?;
        c.args(["-q", "download"]).args(specs);
        run_limited(&mut c, &format!("apt-get download ({} packages)", specs.len()))?;
        Ok(())
    }

    /// Where downloaded `.deb` files land.
    pub fn debs_dir(&self) -> PathBuf {
        self.dir.join("debs")
    }

    /// Resolves (a meta package to its first dependency, when `meta`) and downloads, refreshing
    /// the lists first when there are none, and once more when the lists are stale.
    pub fn fetch(&self, package: &str, meta: bool) -> Result<PathBuf> {
        if !self.has_lists() {
            self.update()?;
        }
        let attempt = || -> Result<PathBuf> {
            let name = if meta { self.first_dependency(package)? } else { package.to_string() };
            self.download(&name)
        };
        match attempt() {
            Ok(p) => Ok(p),
            Err(first) => {
                eprintln!("xtask: {first:#}; refreshing the arm64 package lists and trying again");
                self.update()?;
                attempt()
            }
        }
    }
}

/// Where a Debian kernel package keeps its Image: newer packaging (Linux 7.x's, and
/// bookworm-backports' 6.12.95 cloud kernel) under `usr/lib/modules/`, older under `boot/`.
pub const IMAGE_MEMBERS: [&str; 2] = ["./usr/lib/modules/*/vmlinuz", "./boot/vmlinuz-*"];

/// Extracts `deb`'s `vmlinuz` to `dest` from wherever [`IMAGE_MEMBERS`] says it may be (the
/// error of the last place tried if none holds it).
pub fn extract_vmlinuz(deb: &Path, dest: &Path) -> Result<()> {
    extract(deb, IMAGE_MEMBERS[0], dest).or_else(|_| extract(deb, IMAGE_MEMBERS[1], dest))
}

/// Extracts one file of a `.deb` (`member` as in the package, e.g. `./bin/busybox`; `*`
/// wildcards allowed) to `dest`, with `dpkg-deb --fsys-tarfile | tar`.
pub fn extract(deb: &Path, member: &str, dest: &Path) -> Result<()> {
    for tool in ["dpkg-deb", "tar"] {
        if crate::provision::system::which(tool).is_none() {
            bail!("{tool} not found: it unpacks Debian's packages (install dpkg and tar)");
        }
    }
    let tmp = dest.with_extension("part");
    let script = "dpkg-deb --fsys-tarfile \"$1\" | tar -xO --wildcards \"$2\" > \"$3\"";
    let mut c = Command::new("sh");
    c.args(["-c", script, "sh"]).arg(deb).arg(member).arg(&tmp);
    run_limited(&mut c, &format!("unpacking {member} from {}", deb.display()))?;
    let len = std::fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0);
    if len == 0 {
        let _ = std::fs::remove_file(&tmp);
        bail!("{} has no {member}", deb.display());
    }
    std::fs::rename(&tmp, dest)?;
    Ok(())
}

/// The first `Depends:` of `apt-cache depends` output (its `Recommends:` and others skipped).
fn first_depends_line(out: &str) -> Option<String> {
    out.lines().find_map(|l| l.trim().strip_prefix("Depends: ")).map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_dependency_of_a_meta_package() {
        let out =
            "linux-image-cloud-arm64\n  Recommends: x\n  Depends: linux-image-6.12.9-cloud-arm64 \n  Depends: y\n";
        assert_eq!(first_depends_line(out).as_deref(), Some("linux-image-6.12.9-cloud-arm64"));
        assert_eq!(first_depends_line("linux-image-cloud-arm64\n  Recommends: x\n"), None);
    }

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
        let list = sources_for(&s, "bookworm", "bookworm-backports", "arm64").unwrap();
        assert_eq!(
            list,
            "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://archive.example/debian bookworm-backports main\n"
        );
        let e = sources_for(&s, "trixie", "trixie-backports", "amd64").unwrap_err().to_string();
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
