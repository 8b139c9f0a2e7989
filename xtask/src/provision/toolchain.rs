//! Finding a toolchain that builds `aarch64-unknown-none`, without ever downloading one
//! (`rustup target add` hangs without network). In order:
//!
//! 1. the active toolchain already has the target's standard library installed;
//! 2. the active toolchain has `rust-src`: build core/alloc with `-Z build-std`
//!    (`RUSTC_BOOTSTRAP=1` on a stable toolchain);
//! 3. Debian's `rustc-web` + `cargo-web` + `rust-web-src` (`/usr/bin/rustc`, `/usr/bin/cargo`,
//!    `/usr/lib/rustlib/src/rust`), installed with apt when running as root, with `-Z build-std`.
//!
//! The linker is `ld.lld` (Debian's `lld`, installed the same way) unless the toolchain ships
//! `rust-lld`.

use crate::provision::system::{apt_install, which};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bare-metal target of the kernel (EL1; uses FP/SIMD like any kernel may).
pub const TARGET: &str = "aarch64-unknown-none";
/// The hypervisor's target: no FP/SIMD at all, so a trap to EL2 never touches the guest's
/// FP, SVE or SME registers (writing a V register would zero the upper bits of its Z
/// register) and the exception vectors need not save them.
pub const HYP_TARGET: &str = "aarch64-unknown-none-softfloat";

/// How the target's `core`/`alloc` are obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Std {
    /// Installed with the toolchain (`rustup target add` was done earlier).
    Prebuilt,
    /// Built from source with `-Z build-std`.
    BuildStd { bootstrap: bool },
}

/// A toolchain able to build the bare-metal binaries.
#[derive(Debug, Clone)]
pub struct CrossToolchain {
    pub cargo: PathBuf,
    pub rustc: PathBuf,
    pub std: Std,
    /// `Some(path)` for `-C linker=…`; `None` to use the toolchain's own rust-lld.
    pub linker: Option<PathBuf>,
    /// One line for the user: which of the three ways was taken.
    pub description: String,
}

fn output(cmd: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).env_remove("RUSTC_WORKSPACE_WRAPPER").output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn has_prebuilt_core(rustc: &Path) -> bool {
    [TARGET, HYP_TARGET].iter().all(|target| {
        let Some(libdir) = output(rustc, &["--print", "target-libdir", "--target", target]) else {
            return false;
        };
        std::fs::read_dir(&libdir)
            .map(|it| it.flatten().any(|e| e.file_name().to_string_lossy().starts_with("libcore-")))
            .unwrap_or(false)
    })
}

fn rust_src(rustc: &Path) -> Option<PathBuf> {
    let sysroot = output(rustc, &["--print", "sysroot"])?;
    let src = Path::new(&sysroot).join("lib/rustlib/src/rust/library");
    src.join("core/src/lib.rs").is_file().then_some(src)
}

fn rust_lld(rustc: &Path) -> bool {
    let Some(sysroot) = output(rustc, &["--print", "sysroot"]) else {
        return false;
    };
    let Some(host) =
        output(rustc, &["-vV"]).and_then(|v| v.lines().find_map(|l| l.strip_prefix("host: ").map(str::to_string)))
    else {
        return false;
    };
    Path::new(&sysroot).join("lib/rustlib").join(host).join("bin/rust-lld").is_file()
}

fn is_nightly(rustc: &Path) -> bool {
    output(rustc, &["-V"]).map(|v| v.contains("nightly") || v.contains("-dev")).unwrap_or(false)
}

fn find_ld_lld() -> Option<PathBuf> {
    which("ld.lld").or_else(|| {
        // Debian also installs versioned names only in some releases.
        (11..=20).rev().find_map(|v| which(&format!("ld.lld-{v}")))
    })
}

fn linker(rustc: &Path) -> Result<Option<PathBuf>> {
    if let Some(l) = find_ld_lld() {
        return Ok(Some(l));
    }
    if rust_lld(rustc) {
        return Ok(None);
    }
    apt_install(&["lld"], "the ld.lld linker")?;
    find_ld_lld().map(Some).context("lld was installed but ld.lld is not on PATH")
}

const DEBIAN_RUSTC: &str = "/usr/bin/rustc";
const DEBIAN_CARGO: &str = "/usr/bin/cargo";
const DEBIAN_PACKAGES: [&str; 3] = ["rustc-web", "cargo-web", "rust-web-src"];

/// Finds (installing Debian packages if root) a toolchain for [`TARGET`].
pub fn find() -> Result<CrossToolchain> {
    // The active toolchain: what `cargo xtask` itself runs with (through rustup's proxies,
    // honouring rust-toolchain.toml).
    let active_rustc = std::env::var_os("RUSTC").map(PathBuf::from).or_else(|| which("rustc"));
    let active_cargo = std::env::var_os("CARGO").map(PathBuf::from).or_else(|| which("cargo"));
    if let (Some(rustc), Some(cargo)) = (active_rustc, active_cargo) {
        if has_prebuilt_core(&rustc) {
            return Ok(CrossToolchain {
                linker: linker(&rustc)?,
                description: format!(
                    "active toolchain ({}) with its installed {TARGET} and {HYP_TARGET} standard libraries",
                    version(&rustc)
                ),
                cargo,
                rustc,
                std: Std::Prebuilt,
            });
        }
        if rust_src(&rustc).is_some() {
            let bootstrap = !is_nightly(&rustc);
            return Ok(CrossToolchain {
                linker: linker(&rustc)?,
                description: format!("active toolchain ({}) with rust-src and -Z build-std", version(&rustc)),
                cargo,
                rustc,
                std: Std::BuildStd { bootstrap },
            });
        }
    }
    let debian_ready = || {
        Path::new(DEBIAN_RUSTC).is_file()
            && Path::new(DEBIAN_CARGO).is_file()
            && rust_src(Path::new(DEBIAN_RUSTC)).is_some()
    };
    if !debian_ready() {
        apt_install(
            &DEBIAN_PACKAGES,
            &format!("a toolchain for {TARGET} (the active one has neither its standard library nor rust-src)"),
        )
        .map_err(|e| {
            e.context(format!(
                "no toolchain can build {TARGET}. Either `rustup target add {TARGET}` (needs network), \
                 or `rustup component add rust-src`, or install Debian's toolchain"
            ))
        })?;
        if !debian_ready() {
            bail!("installed {} but {DEBIAN_RUSTC} has no rust-src under its sysroot", DEBIAN_PACKAGES.join(" "));
        }
    }
    let rustc = PathBuf::from(DEBIAN_RUSTC);
    Ok(CrossToolchain {
        linker: linker(&rustc)?,
        description: format!("Debian's toolchain ({}) with rust-web-src and -Z build-std", version(&rustc)),
        cargo: PathBuf::from(DEBIAN_CARGO),
        rustc,
        std: Std::BuildStd { bootstrap: true },
    })
}

fn version(rustc: &Path) -> String {
    output(rustc, &["-V"]).unwrap_or_else(|| rustc.display().to_string())
}

impl CrossToolchain {
    /// A `cargo` command set up for `target` ([`TARGET`] or [`HYP_TARGET`]): the right rustc,
    /// build-std flags and rustflags.
    pub fn cargo(&self, subcommand: &str, target: &str) -> Command {
        let mut c = if subcommand == "clippy" {
            clippy_of(&self.cargo)
        } else {
            let mut c = Command::new(&self.cargo);
            c.arg(subcommand);
            c
        };
        // The rustup proxy's choice must not leak into a foreign cargo, and the rustc must be
        // the one that matched (rustup's proxies come first on PATH).
        c.env("RUSTC", &self.rustc);
        c.env_remove("RUSTC_WORKSPACE_WRAPPER");
        c.env_remove("RUSTC_WRAPPER");
        if self.cargo.starts_with("/usr/bin") {
            c.env_remove("RUSTUP_TOOLCHAIN");
        }
        c.args(["--target", target]);
        if let Std::BuildStd { bootstrap } = self.std {
            if bootstrap {
                c.env("RUSTC_BOOTSTRAP", "1");
            }
            c.args(["-Z", "build-std=core,alloc,compiler_builtins", "-Z", "build-std-features=compiler-builtins-mem"]);
        }
        let mut flags = vec![
            "-C relocation-model=pie".to_string(),
            "-C link-arg=-pie".to_string(),
            "-C link-arg=--no-dynamic-linker".to_string(),
            "-C link-arg=-znorelro".to_string(),
            "-C link-arg=--gc-sections".to_string(),
            "-C force-frame-pointers=yes".to_string(),
        ];
        if let Some(l) = &self.linker {
            flags.push(format!("-C linker={}", l.display()));
        }
        c.env(format!("CARGO_TARGET_{}_RUSTFLAGS", target.to_uppercase().replace('-', "_")), flags.join(" "));
        c
    }
}

/// `cargo clippy` with `cargo`'s own toolchain's clippy. Not `cargo clippy` itself: cargo looks
/// for `cargo-clippy` in `~/.cargo/bin` before PATH, so with Debian's cargo first on PATH and
/// rustup installed it would run rustup's clippy, another compiler version than the one that
/// built the dependencies (E0514). `cargo-clippy` runs the cargo named by `CARGO`.
pub fn clippy_of(cargo: &Path) -> Command {
    let mut c = Command::new(cargo.with_file_name("cargo-clippy"));
    c.arg("clippy").env("CARGO", cargo);
    c
}
