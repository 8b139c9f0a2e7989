//! Debian's newest arm64 cloud kernel: the one rule that picks it, for the KVM host model's
//! outer Linux ([`super::kvm_model`]) and for the newest Linux guest (`--guest linux-newest`,
//! the peer `bench mprotect --peer linux-newest`).
//!
//! The kernel is the first suite of [`SUITES`] whose `linux-image-cloud-arm64` depends on a
//! versioned cloud kernel of at least [`MIN_KERNEL`]; the package holding its Image is found
//! from the package lists (the versioned `linux-image-*`, or since Linux 7.x the
//! `linux-binary-*` it depends on), never named here. Each suite has a private apt state
//! (`apt-SUITE` under the caller's directory: the KVM host model's, so both share its lists).

use super::debian::{self, Apt};
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};

/// The suites tried, in order, the newest kernel first (`debian::NEWEST_SUITES`, which TF-A's
/// newer ports come from too).
pub const SUITES: [(&str, &[&str]); 2] = debian::NEWEST_SUITES;
/// The oldest Linux taken as the newest kernel: the first whose KVM runs a guest at EL2
/// (`kvm-arm.mode=nested`: 6.16), which the KVM host model needs.
pub const MIN_KERNEL: (u32, u32) = (6, 16);
/// The kernel's meta package (its versioned dependency is the kernel).
pub const KERNEL_META: &str = "linux-image-cloud-arm64";

/// The newest cloud kernel of one suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudKernel {
    /// The suite's name (of [`SUITES`]).
    pub suite: String,
    /// The versioned kernel package (`linux-image-7.2.13+deb14-cloud-arm64`).
    pub image_package: String,
    /// The package that holds the Image: `linux-binary-…` (Linux 7.x), else `image_package`.
    pub binary_package: String,
    /// Its Linux version (major, minor).
    pub version: (u32, u32),
}

/// The apt state of `suite` (its `suites`) under `dir`, with its package lists.
pub fn apt(dir: &Path, suite: &str, suites: &[&str]) -> Result<Apt> {
    let apt = Apt::suites(&dir.join(format!("apt-{suite}")), "arm64", suites)?;
    apt.ensure_lists()?;
    Ok(apt)
}

/// The cloud kernel `apt`'s lists (of `suite`) offer, refused when older than [`MIN_KERNEL`].
pub fn in_suite(apt: &Apt, suite: &str) -> Result<CloudKernel> {
    let image_package = kernel_package(&apt.depends(KERNEL_META)?)
        .with_context(|| format!("{KERNEL_META} of {suite} depends on no versioned cloud kernel"))?;
    from_lists(suite, &image_package, &apt.depends(&image_package)?)
}

/// [`in_suite`]'s decision from `apt-cache depends` of the versioned kernel (`image_depends`).
pub fn from_lists(suite: &str, image_package: &str, image_depends: &str) -> Result<CloudKernel> {
    let version = kernel_version(image_package).with_context(|| format!("no version in {image_package:?}"))?;
    ensure!(
        version >= MIN_KERNEL,
        "its kernel {image_package} is older than Linux {}.{} (no nested virtualisation in KVM)",
        MIN_KERNEL.0,
        MIN_KERNEL.1
    );
    // Since Linux 7.x Debian keeps the Image in linux-binary-*, which linux-image-* depends on.
    let binary_package = binary_package(image_depends, image_package).unwrap_or(image_package.to_string());
    Ok(CloudKernel { suite: suite.to_string(), image_package: image_package.to_string(), binary_package, version })
}

/// The newest cloud kernel: the first suite of [`SUITES`] that has one (apt states under
/// `dir`), with its apt state; the error names why each suite was passed over.
pub fn newest(dir: &Path) -> Result<(CloudKernel, Apt)> {
    let mut tried = Vec::new();
    for (suite, suites) in SUITES {
        match apt(dir, suite, suites).and_then(|a| Ok((in_suite(&a, suite)?, a))) {
            Ok(found) => return Ok(found),
            Err(e) => tried.push(format!("{suite}: {e:#}")),
        }
    }
    bail!(
        "no suite of the machine's archive has a cloud kernel of Linux {}.{}+ ({})",
        MIN_KERNEL.0,
        MIN_KERNEL.1,
        tried.join("; ")
    )
}

/// Extracts the kernel Image of `deb` (the `binary_package`'s `.deb`) to `dest`: Linux 7.x's
/// `usr/lib/modules/*/vmlinuz`, or the older `boot/vmlinuz-*`; refused unless an arm64 Image.
pub fn extract_image(deb: &Path, dest: &Path) -> Result<()> {
    let name = deb.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    debian::extract_vmlinuz(deb, dest).with_context(|| format!("{name} holds no kernel Image"))?;
    let head = std::fs::read(dest)?;
    if !is_arm64_image(&head) {
        let _ = std::fs::remove_file(dest);
        bail!("{name}'s vmlinuz is not an arm64 Image (no ARMd magic)");
    }
    Ok(())
}

/// An arm64 Image's header: the `ARMd` magic at 0x38.
pub fn is_arm64_image(head: &[u8]) -> bool {
    head.len() > 64 && &head[0x38..0x3c] == b"ARMd"
}

/// Downloads the newest kernel's Image package into `debs` (apt states under `dir`; their lists
/// refreshed once when the download fails) and extracts its Image to `dest`; returns the kernel and the package file's name (without
/// `.deb`: `linux-binary-7.2.13+deb14-cloud-arm64_7.2.13-1_arm64`). The `.deb` is removed.
pub fn fetch_newest_image(dir: &Path, debs: &Path, dest: &Path) -> Result<(CloudKernel, String)> {
    let (k, apt) = newest(dir)?;
    let (k, deb) = match apt.download_to(&k.binary_package, debs) {
        Ok(deb) => (k, deb),
        Err(first) => {
            // Lists older than the archive name a kernel it no longer has: refresh, look again.
            eprintln!("xtask: {first:#}; refreshing the {} package lists and trying again", k.suite);
            apt.update()?;
            let k = in_suite(&apt, &k.suite)?;
            let deb = apt.download_to(&k.binary_package, debs)?;
            (k, deb)
        }
    };
    let package = deb.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    extract_image(&deb, dest)?;
    let _ = std::fs::remove_file(&deb);
    Ok((k, package))
}

/// The versioned cloud kernel `apt-cache depends linux-image-cloud-arm64` names
/// (`linux-image-7.2.13+deb14-cloud-arm64`): its first `Depends:` of that shape (the meta
/// package may depend on `linux-base-*` first).
pub fn kernel_package(depends: &str) -> Option<String> {
    depends.lines().find_map(|l| {
        let p = l.trim().strip_prefix("Depends: ")?.trim();
        let v = p.strip_prefix("linux-image-")?;
        (v.starts_with(|c: char| c.is_ascii_digit()) && p.ends_with("-cloud-arm64")).then(|| p.to_string())
    })
}

/// `linux-binary-VERSION` among `apt-cache depends linux-image-VERSION`'s dependencies: the
/// package that holds the Image (Debian's 7.x kernels), or `None` (the Image is in `image`).
pub fn binary_package(depends: &str, image: &str) -> Option<String> {
    let want = format!("linux-binary-{}", image.strip_prefix("linux-image-")?);
    depends.lines().find_map(|l| {
        let p = l.trim().strip_prefix("Depends: ")?.trim();
        (p == want).then(|| p.to_string())
    })
}

/// The Linux version (major, minor) of a kernel package name (`linux-image-7.2.13+deb14-…`,
/// `linux-binary-…`, or a `.deb`'s name `linux-image-6.12.9+bpo-cloud-arm64_6.12.9-1_arm64`).
pub fn kernel_version(package: &str) -> Option<(u32, u32)> {
    let v = package.strip_prefix("linux-image-").or_else(|| package.strip_prefix("linux-binary-"))?;
    let mut n = v.split(|c: char| !c.is_ascii_digit());
    Some((n.next()?.parse().ok()?, n.next()?.parse().ok()?))
}

/// Where the newest kernel's apt states are kept: the KVM host model's directory (its
/// `kvm_model::dir`), so the model and the newest Linux guest share one set of lists.
pub fn shared_dir() -> PathBuf {
    debian::cache_dir().join("kvm-model")
}

#[cfg(test)]
mod tests {
    use super::*;

    const IMAGE_DEPENDS: &str = "linux-image-7.2.13+deb14-cloud-arm64\n  PreDepends: linux-base\n |Depends: dracut\n  Depends: linux-base-7.2.13+deb14-cloud-arm64\n  Depends: linux-binary-7.2.13+deb14-cloud-arm64\n  Depends: linux-modules-7.2.13+deb14-cloud-arm64\n";

    #[test]
    fn the_kernel_is_found_from_the_package_lists() {
        let sid = "linux-image-cloud-arm64\n  Depends: linux-base-cloud-arm64\n  Depends: linux-image-7.2.13+deb14-cloud-arm64\n";
        assert_eq!(kernel_package(sid).as_deref(), Some("linux-image-7.2.13+deb14-cloud-arm64"));
        let bpo = "linux-image-cloud-arm64\n  Depends: linux-image-6.18.5+deb13-cloud-arm64\n  Recommends: x\n";
        assert_eq!(kernel_package(bpo).as_deref(), Some("linux-image-6.18.5+deb13-cloud-arm64"));
        assert_eq!(kernel_package("x\n  Depends: linux-image-cloud-arm64-dbg\n"), None);
        assert_eq!(
            binary_package(IMAGE_DEPENDS, "linux-image-7.2.13+deb14-cloud-arm64").as_deref(),
            Some("linux-binary-7.2.13+deb14-cloud-arm64")
        );
        assert_eq!(binary_package("y\n  Depends: linux-base\n", "linux-image-6.18.5+deb13-cloud-arm64"), None);
        let other = "y\n  Depends: linux-binary-7.2.12+deb14-cloud-arm64\n  Depends: linux-binary-7.2.13+deb14-arm64\n";
        assert_eq!(
            binary_package(other, "linux-image-7.2.13+deb14-cloud-arm64"),
            None,
            "only its own version and flavour"
        );
        assert_eq!(kernel_version("linux-image-7.2.13+deb14-cloud-arm64"), Some((7, 2)));
        assert_eq!(kernel_version("linux-binary-6.16.1-cloud-arm64"), Some((6, 16)));
        assert_eq!(kernel_version("linux-image-6.12.9+bpo-cloud-arm64_6.12.9-1~bpo12+1_arm64"), Some((6, 12)));
        assert_eq!(kernel_version("busybox-static_1.35"), None);
        assert!(kernel_version("linux-image-6.12.9+bpo-cloud-arm64").unwrap() < MIN_KERNEL);
        assert!(kernel_version("linux-image-6.16.1-cloud-arm64").unwrap() >= MIN_KERNEL);
        assert!((7, 0) >= MIN_KERNEL, "a new major number is newer whatever its minor");
    }

    #[test]
    fn the_newest_kernel_is_its_image_package_or_too_old() {
        let k = from_lists("sid", "linux-image-7.2.13+deb14-cloud-arm64", IMAGE_DEPENDS).unwrap();
        assert_eq!(
            k,
            CloudKernel {
                suite: "sid".into(),
                image_package: "linux-image-7.2.13+deb14-cloud-arm64".into(),
                binary_package: "linux-binary-7.2.13+deb14-cloud-arm64".into(),
                version: (7, 2),
            }
        );
        // Before 7.x the Image is in the versioned package itself.
        let old = from_lists("trixie-backports", "linux-image-6.18.5+deb13-cloud-arm64", "x\n  Depends: linux-base\n");
        assert_eq!(old.unwrap().binary_package, "linux-image-6.18.5+deb13-cloud-arm64");
        let e = from_lists("bookworm-backports", "linux-image-6.12.9+bpo-cloud-arm64", IMAGE_DEPENDS).unwrap_err();
        assert!(e.to_string().contains("older than Linux 6.16"), "{e}");
    }

    #[test]
    fn only_an_arm64_image_is_taken() {
        let mut head = vec![0u8; 128];
        assert!(!is_arm64_image(&head));
        head[0x38..0x3c].copy_from_slice(b"ARMd");
        assert!(is_arm64_image(&head));
        assert!(!is_arm64_image(&head[..0x3c]), "too short for a header");
    }
}
