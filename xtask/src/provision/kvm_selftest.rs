//! KVM's `dirty_log_perf_test` (the kernel's `tools/testing/selftests/kvm`), built here as a
//! static aarch64 program for a Linux peer of `cargo xtask bench split` to run inside itself.
//!
//! The source is Debian's `linux-source-X.Y` of the very version the peer's kernel package has
//! (its `.deb`'s `_VERSION_`), fetched with a private apt state; the compiler is
//! [`super::cross_gcc`]'s. The tarball is unpacked without the trees the test never reads
//! (drivers, sound, filesystems, networking, documentation), the kernel's UAPI headers are made
//! (`make headers`), [`PATCH`] is applied, and the test is built with `-static`. Only the program
//! is kept: `target/downloads/dirty-log/<package>_<version>-<patch>/dirty_log_perf_test`, keyed
//! by the source's version and the patch's hash; the tree and the `.deb` are removed.
//!
//! Why a patch ([`PATCH`], written here and applied at build time): the test has no option for
//! KVM's eager split, and KVM takes `KVM_CAP_ARM_EAGER_SPLIT_CHUNK_SIZE` only while the VM has
//! no memslot; the test's library adds the first one right after it creates the VM. The patch
//! enables the capability between the two when the environment variable [`CHUNK_ENV`] holds a
//! chunk size, and prints [`CHUNK_LINE`] with it, so a run shows it was on; and it makes the
//! test's idle vCPU thread yield instead of spinning (see [`PATCH`]).

use super::debian::{cache_dir, Apt};
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable with the eager split's chunk size in bytes (unset: no eager split).
pub const CHUNK_ENV: &str = "PGTLAB_EAGER_SPLIT_CHUNK";
/// What the patched library prints once the capability is on, followed by the chunk in bytes.
pub const CHUNK_LINE: &str = "pgtlab: eager split chunk ";
/// The test's directory in the tree and its program.
pub const TEST_DIR: &str = "tools/testing/selftests/kvm";
pub const TEST: &str = "dirty_log_perf_test";

/// One change of the patch: in `file`, the one line whose text is `anchor` (trimmed), inside
/// the function whose definition starts with `function`, gets `lines` after it (indented as
/// it) or, with `replace`, that replacement of its text.
#[derive(Debug, Clone, Copy)]
pub struct Hunk {
    pub file: &'static str,
    pub function: &'static str,
    pub anchor: &'static str,
    pub edit: Edit,
}

#[derive(Debug, Clone, Copy)]
pub enum Edit {
    /// Lines inserted after the anchor.
    After(&'static [&'static str]),
    /// The anchor's text replaced (its indentation kept).
    Replace(&'static str),
}

/// The patch.
///
/// 1. `__vm_create` (the library): the eager split's chunk from [`CHUNK_ENV`] between creating
///    the VM and adding its first memslot (KVM refuses it later), and [`CHUNK_LINE`].
/// 2. `vcpu_worker` (the test): the vCPU thread waits for the next iteration with
///    `sched_yield()` instead of an empty busy loop. On the peer's one CPU the busy loop would
///    take the CPU from the main thread whenever that one is preempted inside a timed ioctl,
///    and under `-icount` its instructions are the clock: it would be timed with the ioctl.
pub const PATCH: [Hunk; 2] = [
    Hunk {
        file: "tools/testing/selftests/kvm/lib/kvm_util.c",
        function: "struct kvm_vm *__vm_create(",
        anchor: "vm = ____vm_create(shape);",
        edit: Edit::After(&[
            "/* pgtlab: the eager split's chunk, which KVM takes only before the first memslot. */",
            "if (getenv(\"PGTLAB_EAGER_SPLIT_CHUNK\")) {",
            "\tunsigned long long chunk = strtoull(getenv(\"PGTLAB_EAGER_SPLIT_CHUNK\"), NULL, 0);",
            "",
            "\tvm_enable_cap(vm, KVM_CAP_ARM_EAGER_SPLIT_CHUNK_SIZE, chunk);",
            "\tprintf(\"pgtlab: eager split chunk %llu\\n\", chunk);",
            "}",
        ]),
    },
    Hunk {
        file: "tools/testing/selftests/kvm/dirty_log_perf_test.c",
        function: "static void vcpu_worker(",
        anchor: "READ_ONCE(iteration) >= 0 && !READ_ONCE(host_quit)) {}",
        edit: Edit::Replace("READ_ONCE(iteration) >= 0 && !READ_ONCE(host_quit)) sched_yield(); /* pgtlab */"),
    },
];

/// `source` (the text of `h.file`) with hunk `h` applied. Refused when the anchor is missing,
/// there more than once, outside its function, or the file is patched already.
pub fn apply(h: &Hunk, source: &str) -> Result<String> {
    ensure!(!source.contains("pgtlab"), "{} is patched already", h.file);
    let hits: Vec<usize> = source.lines().enumerate().filter(|(_, l)| l.trim() == h.anchor).map(|(i, _)| i).collect();
    let &[at] = hits.as_slice() else {
        bail!("{}: {} lines `{}` (one expected): the test changed", h.file, hits.len(), h.anchor);
    };
    let lines: Vec<&str> = source.lines().collect();
    // The anchor belongs to the last function definition that starts before it (a line at
    // column 0 with a parenthesis).
    let owner = lines[..at].iter().rposition(|l| l.starts_with(|c: char| c.is_ascii_alphabetic()) && l.contains('('));
    ensure!(
        owner.is_some_and(|o| lines[o].starts_with(h.function)),
        "{}: `{}` is not in {}...) but in {:?}: the test changed",
        h.file,
        h.anchor,
        h.function,
        owner.map(|o| lines[o]).unwrap_or("no function")
    );
    let indent: String = lines[at].chars().take_while(|c| c.is_whitespace()).collect();
    let mut out = String::with_capacity(source.len() + 512);
    for (i, l) in lines.iter().enumerate() {
        if i != at {
            out.push_str(l);
            out.push('\n');
            continue;
        }
        match h.edit {
            Edit::After(add) => {
                out.push_str(l);
                out.push('\n');
                for a in add {
                    if !a.is_empty() {
                        out.push_str(&indent);
                        out.push_str(a);
                    }
                    out.push('\n');
                }
            }
            Edit::Replace(with) => {
                out.push_str(&indent);
                out.push_str(with);
                out.push('\n');
            }
        }
    }
    Ok(out)
}

/// Applies [`PATCH`] to the kernel tree at `tree`.
pub fn patch_tree(tree: &Path) -> Result<()> {
    for h in &PATCH {
        let file = tree.join(h.file);
        let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        std::fs::write(&file, apply(h, &text)?)?;
    }
    Ok(())
}

/// FNV-1a of the patch and the build's flags: part of the cache key, so a change of either
/// builds again.
pub fn build_key() -> String {
    let text = format!("{PATCH:?}\n{:?}", make_flags(Path::new("/"), "X"));
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    format!("{:08x}", h >> 32)
}

/// The test's `make` arguments (besides `-C`): arm64, the cross compiler, static, the output.
fn make_flags(out: &Path, cross_compile: &str) -> Vec<String> {
    vec![
        "ARCH=arm64".into(),
        format!("CROSS_COMPILE={cross_compile}"),
        "EXTRA_CFLAGS=-static".into(),
        "LDFLAGS=-static".into(),
        format!("OUTPUT={}", out.display()),
        format!("{}/{TEST}", out.display()),
    ]
}

/// Directories of the kernel tree left out when unpacking (the test, its library and the UAPI
/// headers need none of them).
pub const LEFT_OUT: [&str; 8] = ["drivers", "sound", "fs", "net", "Documentation", "rust", "samples", "firmware"];

/// The Debian version in a `.deb`'s file name (`NAME_VERSION_ARCH`): `6.12.95-1~bpo12+1`.
pub fn deb_version(deb_stem: &str) -> Option<&str> {
    let mut parts = deb_stem.split('_');
    let (_, v, _) = (parts.next()?, parts.next()?, parts.next()?);
    (!v.is_empty() && parts.next().is_none()).then_some(v)
}

/// A built test and where it came from.
#[derive(Debug, Clone)]
pub struct Built {
    pub program: PathBuf,
    /// `linux-source-X.Y=VERSION`.
    pub source: String,
}

fn dir() -> PathBuf {
    cache_dir().join("dirty-log")
}

/// The test built from `linux-source-{major}.{minor}` version `version` (from the first of
/// `apts` that offers it), cached.
pub fn dirty_log_perf_test(
    (major, minor): (u32, u32),
    version: &str,
    apts: &mut dyn Iterator<Item = Result<Apt>>,
) -> Result<Built> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let package = format!("linux-source-{major}.{minor}");
    let source = format!("{package}={version}");
    let out_dir = dir().join(format!("{package}_{version}-{}", build_key()));
    let program = out_dir.join(TEST);
    if program.is_file() {
        return Ok(Built { program, source });
    }
    for tool in ["make", "cc", "xz", "tar", "dpkg-deb"] {
        if crate::provision::system::which(tool).is_none() {
            bail!("{tool} not found: building KVM's {TEST} needs make, a host C compiler (cc), xz, tar and dpkg-deb");
        }
    }
    let gcc = super::cross_gcc::gcc().context("the aarch64 C compiler for KVM's selftest")?;
    let debs = dir().join("debs");
    let mut tried = Vec::new();
    let mut deb = None;
    for apt in apts {
        match apt.and_then(|a| a.download_version_to(&package, version, &debs)) {
            Ok(d) => {
                deb = Some(d);
                break;
            }
            Err(e) => tried.push(format!("{e:#}")),
        }
    }
    let deb = deb.with_context(|| {
        format!("no suite offers {source}, the version of the peer's kernel ({})", tried.join("; "))
    })?;
    let work = dir().join(format!("build-{package}"));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    let built = build(&deb, &work, &out_dir, &gcc);
    let _ = std::fs::remove_dir_all(&work);
    built.with_context(|| format!("building KVM's {TEST} from {source}"))?;
    let _ = std::fs::remove_file(&deb);
    std::fs::write(out_dir.join("source"), format!("{source}\n{}\n", gcc.packages.join("\n")))?;
    eprintln!("xtask: built {} from {source}", program.display());
    Ok(Built { program, source })
}

/// Unpacks `deb`'s tarball under `work`, makes the headers, patches, builds the test into
/// `out_dir`.
fn build(deb: &Path, work: &Path, out_dir: &Path, gcc: &super::cross_gcc::Gcc) -> Result<()> {
    eprintln!("xtask: unpacking {} (without {})", deb.display(), LEFT_OUT.join(", "));
    let mut c = Command::new("sh");
    let excludes: Vec<String> = LEFT_OUT.iter().map(|d| format!("--exclude=*/{d}")).collect();
    c.args([
        "-c",
        "deb=$1; dest=$2; shift 2; dpkg-deb --fsys-tarfile \"$deb\" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' \
         | xz -dc | tar -x --anchored --wildcards --no-wildcards-match-slash \"$@\" -C \"$dest\"",
        "sh",
    ])
    .arg(deb)
    .arg(work)
    .args(&excludes);
    run(&mut c, "unpacking the kernel source")?;
    let tree = std::fs::read_dir(work)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("linux-source-")))
        .with_context(|| format!("{} holds no linux-source-* tree", deb.display()))?;
    patch_tree(&tree)?;
    eprintln!("xtask: making the kernel's UAPI headers");
    run(Command::new("make").arg("-C").arg(&tree).args(["ARCH=arm64", "headers", "-j2"]), "make headers")?;
    eprintln!("xtask: building {TEST} (static, aarch64)");
    std::fs::create_dir_all(out_dir)?;
    let mut m = Command::new("make");
    m.arg("-C").arg(tree.join(TEST_DIR)).args(make_flags(out_dir, &gcc.cross_compile())).arg("-j2").envs(gcc.env());
    run(&mut m, &format!("make {TEST}"))?;
    let program = out_dir.join(TEST);
    super::cross_gcc::check_static_aarch64(&program)?;
    // Only the program is kept.
    for e in std::fs::read_dir(out_dir)?.flatten() {
        if e.file_name() != TEST {
            let p = e.path();
            let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
        }
    }
    Ok(())
}

/// Runs `c`; on failure the error carries the last lines of its output.
fn run(c: &mut Command, what: &str) -> Result<()> {
    let out = c.stdin(std::process::Stdio::null()).output().with_context(|| format!("{what}: cannot start"))?;
    if !out.status.success() {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        bail!("{what} failed ({}):\n{}", out.status, tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stand-ins for the two files, written here: the functions the hunks go in, with another
    /// one before each.
    const LIB: &str = "struct kvm_vm *____vm_create(struct vm_shape shape)\n{\n\treturn vm;\n}\n\nstruct kvm_vm *__vm_create(struct vm_shape shape, u32 nr_runnable_vcpus,\n\t\t\t   u64 nr_extra_pages)\n{\n\tstruct kvm_vm *vm;\n\n\tvm = ____vm_create(shape);\n\n\tvm_userspace_mem_region_add(vm, VM_MEM_SRC_ANONYMOUS, 0, 0, nr_pages, flags);\n\treturn vm;\n}\n";
    const TESTC: &str = "static void help(void)\n{\n}\n\nstatic void vcpu_worker(struct memstress_vcpu_args *vcpu_args)\n{\n\twhile (!READ_ONCE(host_quit)) {\n\t\twhile (current_iteration == READ_ONCE(iteration) &&\n\t\t       READ_ONCE(iteration) >= 0 && !READ_ONCE(host_quit)) {}\n\t}\n}\n";

    #[test]
    fn the_patch_enables_the_eager_split_between_the_vm_and_its_first_memslot() {
        let p = apply(&PATCH[0], LIB).unwrap();
        let vm = p.find("vm = ____vm_create(shape);").unwrap();
        let cap = p.find("vm_enable_cap(vm, KVM_CAP_ARM_EAGER_SPLIT_CHUNK_SIZE, chunk);").expect(&p);
        let slot = p.find("vm_userspace_mem_region_add").unwrap();
        assert!(vm < cap && cap < slot, "{p}");
        assert!(p.contains(&format!("\tif (getenv(\"{CHUNK_ENV}\")) {{\n")), "indented as the anchor: {p}");
        assert!(p.contains(&format!("\t\tprintf(\"{CHUNK_LINE}%llu\\n\", chunk);\n")), "{p}");
        // Everything else is as it was: the output is the file with exactly those lines added.
        let Edit::After(added) = PATCH[0].edit else { panic!("hunk 1 inserts") };
        let block: String = added.iter().map(|a| if a.is_empty() { "\n".into() } else { format!("\t{a}\n") }).collect();
        let anchor = "\tvm = ____vm_create(shape);\n";
        assert_eq!(p, LIB.replacen(anchor, &format!("{anchor}{block}"), 1));
        let w = apply(&PATCH[1], TESTC).unwrap();
        assert!(
            w.contains("\t\t       READ_ONCE(iteration) >= 0 && !READ_ONCE(host_quit)) sched_yield(); /* pgtlab */\n"),
            "{w}"
        );
        assert!(!w.contains("{}"), "{w}");
        assert_eq!(w.lines().count(), TESTC.lines().count());
    }

    #[test]
    fn the_patch_is_refused_where_the_source_changed() {
        let h = &PATCH[0];
        let e = apply(h, &LIB.replace(h.anchor, "vm = vm_create_bare(shape);")).unwrap_err().to_string();
        assert!(e.contains("0 lines"), "{e}");
        let twice = LIB.replace("\treturn vm;\n}\n\nstruct", "\tvm = ____vm_create(shape);\n}\n\nstruct");
        assert!(apply(h, &twice).unwrap_err().to_string().contains("2 lines"));
        let moved = LIB.replace("struct kvm_vm *__vm_create(", "struct kvm_vm *vm_create_other(");
        let e = apply(h, &moved).unwrap_err().to_string();
        assert!(e.contains("is not in") && e.contains("vm_create_other"), "{e}");
        let p = apply(h, LIB).unwrap();
        assert!(apply(h, &p).unwrap_err().to_string().contains("patched already"));
        let e = apply(&PATCH[1], &TESTC.replace(") {}", ") { cpu_relax(); }")).unwrap_err().to_string();
        assert!(e.contains("0 lines"), "{e}");
    }

    #[test]
    fn a_debs_version_and_the_cache_key() {
        assert_eq!(deb_version("linux-source-6.12_6.12.95-1~bpo12+1_all"), Some("6.12.95-1~bpo12+1"));
        assert_eq!(deb_version("linux-binary-7.2.13+deb14-cloud-arm64_7.2.13-1_arm64"), Some("7.2.13-1"));
        assert_eq!(deb_version("linux-source-7.2"), None);
        assert_eq!(build_key().len(), 8);
        assert_eq!(build_key(), build_key(), "the same patch, the same key");
    }
}
