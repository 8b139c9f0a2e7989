//! The instruction-counting QEMU plugin (`xtask/plugin/insncount.c`): built with the host C
//! compiler, loaded with `--count-insns`, and its output read back.
//!
//! The plugin counts TLBI, DSB and ISB instructions executed by the guest, and all instructions
//! (per translation block), per vCPU and per exception level, in total and in windows the guest
//! marks (`HINT #126` / `HINT #127`, see
//! `kernel/src/perf/mod.rs`). The EL is taken from where the code lives: the hypervisor's
//! image (loaded by QEMU at RAM base + 2 MiB and run identity mapped) is EL2, the rest EL1.
//! The hypervisor may move itself at boot; the range follows it: the hypervisor executes
//! `HINT #125` at its symbol `pgtlab_el2_home_mark` first thing on every boot, and the plugin,
//! told that symbol's image offset (`el2mark=`), moves the range to where it saw the hint.
//! EL0 code (the kernel's EL0 programs, a Linux guest's user space) is recognised by its
//! addresses too: [`el0_code`].
//!
//! QEMU's plugin API changed under the plugin: QEMU 9.0 refuses API 1 (the only one 7.2 has)
//! and from 9.1 on `qemu_plugin_insn_data` copies into a buffer instead of returning a pointer.
//! So the one source is built once per API ([`api_for`] picks it from the QEMU binary's
//! version), into its own library `target/plugin/libinsncount-apiN.so`.

use crate::build::Images;
use crate::machine::{QemuModel, GIB};
use crate::provision::qemu_pkg::Version;
use crate::provision::system::which;
use crate::workspace_root;
use abi::programs::{MMAP_BASE, PROGRAM_BASE};
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugin API version the library is built for when `qemu` loads it (the one place that
/// decides; `insncount.c` says what each API changed). QEMU loads a plugin whose version lies in
/// its own [min, cur] and refuses any other with a message naming both: 7.2 to 8.2 take 1,
/// 9.0 only 2, 9.1 to 10.x 2 up to 3, 4 or 5. The library asks for the lowest API whose
/// `qemu_plugin_insn_data` is the one that QEMU has.
pub fn api_for(qemu: Version) -> Result<u32> {
    Ok(match qemu {
        v if v < Version(7, 2, 0) => bail!("QEMU {v}: the instruction-counting plugin needs QEMU 7.2 or newer"),
        v if v < Version(9, 0, 0) => 1,
        v if v < Version(9, 1, 0) => 2,
        v if v < Version(11, 0, 0) => 3,
        v => bail!(
            "QEMU {v}: the instruction-counting plugin knows QEMU's plugin API up to QEMU 10.x (API 5); \
             QEMU 11's API 6 is not compatible with it: check xtask/plugin/insncount.c's declarations \
             against its qemu-plugin.h and extend xtask/src/plugin.rs `api_for`"
        ),
    })
}

/// Builds the plugin for the QEMU at `qemu` (its API: [`api_for`]) if its source is newer than
/// the library; returns the library's path.
pub fn build(qemu: &Path) -> Result<PathBuf> {
    let v = crate::provision::qemu_pkg::version_of(qemu)?;
    let api = api_for(v).with_context(|| format!("--count-insns with {}", qemu.display()))?;
    build_api(api)
}

/// Builds the plugin for plugin API `api` (1, 2 or 3: `insncount.c` refuses others).
pub fn build_api(api: u32) -> Result<PathBuf> {
    let src = workspace_root().join("xtask/plugin/insncount.c");
    let dir = workspace_root().join("target/plugin");
    let lib = dir.join(format!("libinsncount-api{api}.so"));
    let newer = |a: &Path, b: &Path| -> bool {
        let m = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        match (m(a), m(b)) {
            (Some(a), Some(b)) => a > b,
            _ => true,
        }
    };
    if lib.is_file() && !newer(&src, &lib) {
        return Ok(lib);
    }
    std::fs::create_dir_all(&dir)?;
    if ["cc", "gcc", "clang"].into_iter().all(|c| which(c).is_none()) {
        crate::provision::system::apt_install(&["gcc"], "a C compiler (for the instruction-counting plugin)")?;
    }
    let cc = ["cc", "gcc", "clang"]
        .into_iter()
        .find_map(which)
        .context("no host C compiler (cc, gcc or clang) to build the instruction-counting plugin")?;
    let out = Command::new(&cc)
        // No libc headers or start files needed (the plugin declares what it uses), so a bare
        // `gcc` without libc6-dev builds it.
        .args(["-shared", "-fPIC", "-nostdlib", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-DINSNCOUNT_API={api}"))
        .arg("-o")
        .arg(&lib)
        .arg(&src)
        .output()
        .with_context(|| format!("running {}", cc.display()))?;
    ensure!(out.status.success(), "building {} failed:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    eprintln!("xtask: built the instruction-counting plugin for QEMU's plugin API {api}: {}", lib.display());
    Ok(lib)
}

/// Where the hypervisor's code runs at EL2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct El2Code {
    /// Its Image as QEMU loads it: `[lo, hi)`.
    pub lo: u64,
    /// End of the image (`image_size` from `lo`).
    pub hi: u64,
    /// Image offset of `pgtlab_el2_home_mark` (the `HINT #125` the plugin follows when the
    /// hypervisor moves itself).
    pub mark: u64,
}

/// The symbol whose `HINT #125` tells the plugin where the hypervisor runs.
pub const HOME_MARK_SYMBOL: &str = "pgtlab_el2_home_mark";

/// Where QEMU loads an Image with `text_offset` 0 on the model: its RAM base + 2 MiB (QEMU's boot
/// stub sits at the base; `hypcore::load`).
pub fn image_base(model: &QemuModel) -> u64 {
    model.ram.base + (2 << 20)
}

/// The hypervisor's code range at EL2 on the model (its Image's `image_size` from the load
/// address) and the offset of its home mark (from the ELF's symbols).
pub fn el2_range(images: &Images, model: &QemuModel) -> Result<El2Code> {
    let bytes =
        std::fs::read(&images.hypervisor).with_context(|| format!("reading {}", images.hypervisor.display()))?;
    ensure!(
        bytes.len() >= 64 && &bytes[0x38..0x3c] == b"ARMd",
        "{} is not an arm64 Image",
        images.hypervisor.display()
    );
    let size = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    let elf = std::fs::read(&images.hypervisor_elf)
        .with_context(|| format!("reading {}", images.hypervisor_elf.display()))?;
    let file = object::File::parse(&*elf).context("the hypervisor ELF")?;
    use object::{Object, ObjectSymbol};
    let mark = file
        .symbols()
        .find(|s| s.name() == Ok(HOME_MARK_SYMBOL))
        .map(|s| s.address())
        .with_context(|| format!("no symbol {HOME_MARK_SYMBOL} in {}", images.hypervisor_elf.display()))?;
    ensure!(mark != 0 && mark < size, "{HOME_MARK_SYMBOL} at {mark:#x} is outside the image");
    let lo = image_base(model);
    Ok(El2Code { lo, hi: lo + size, mark })
}

/// Where EL0 code lives on the model with RAM below 64 GiB: from 64 GiB to the top of a 48-bit
/// TTBR0 (the kernel's mmap area from 64 GiB and its stacks near 128 TiB, a Linux guest's
/// libraries and PIE programs), and low: the kernel's EL0 programs load at `uspace`'s
/// [`PROGRAM_BASE`] (4 MiB), a static Linux program at its link address (4 MiB too). The
/// kernel runs in the upper half, at RAM addresses only with its MMU off, the hypervisor in
/// RAM. Where RAM starts at 1 GiB (`virt`, the i.MX 8M Plus) the whole first GiB is EL0's; only
/// QEMU's few-instruction boot stub at address 0 runs there, before any window. Where RAM
/// starts at 0 (the Pi 4, the ZCU102) EL0's low range is [4 MiB, 64 MiB): below it run QEMU's
/// boot stub and spin-table loop and the guest kernel's MMU-off start (loaded at RAM base +
/// 2 MiB), above it the hypervisor's code from the top of RAM before its mark (as on `virt`,
/// EL1's). A Linux guest's MMU-off code past 4 MiB counts as EL0 there.
pub fn el0_code(model: &QemuModel) -> [(u64, u64); 2] {
    let low = if model.ram.base >= GIB { (0, GIB) } else { (PROGRAM_BASE, 64 << 20) };
    [low, (MMAP_BASE, 1 << 48)]
}

/// The `-plugin` argument: the library, the output file, the EL2 code (none without the
/// hypervisor; it must come first, the range the mark moves), then the model's [`el0_code`].
pub fn qemu_arg(lib: &Path, out: &Path, el2: Option<El2Code>, model: &QemuModel) -> String {
    let mut a = format!("{},out={}", lib.display(), out.display());
    if let Some(e) = el2 {
        a += &format!(",el2={:#x}-{:#x},el2mark={:#x}", e.lo, e.hi, e.mark);
    }
    for (lo, hi) in el0_code(model) {
        a += &format!(",el0={lo:#x}-{hi:#x}");
    }
    a
}

/// One line of the plugin's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Count {
    /// `None`: since boot; `Some(w)`: window `w`.
    pub window: Option<u32>,
    pub vcpu: u32,
    pub el: u8,
    pub tlbi: u64,
    pub dsb: u64,
    pub isb: u64,
    /// Instructions executed (counted per translation block).
    pub insns: u64,
}

/// Everything the plugin wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub lines: Vec<Count>,
    pub windows: u32,
    /// The plugin API the library was built for (and QEMU loaded it with).
    pub api: u32,
}

impl Counts {
    /// Window `w`'s counts at `el`, summed over vCPUs.
    pub fn window_el(&self, w: u32, el: u8) -> (u64, u64, u64) {
        self.lines
            .iter()
            .filter(|c| c.window == Some(w) && c.el == el)
            .fold((0, 0, 0), |a, c| (a.0 + c.tlbi, a.1 + c.dsb, a.2 + c.isb))
    }

    /// Window `w`'s lines (per vCPU and EL).
    pub fn window(&self, w: u32) -> impl Iterator<Item = &Count> {
        self.lines.iter().filter(move |c| c.window == Some(w))
    }
}

/// Parses the plugin's output file.
pub fn parse(text: &str) -> Result<Counts> {
    let mut counts = Counts::default();
    let mut ended = false;
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("plugin output line {}", i + 1))?;
        let num = |k: &str| v.get(k).and_then(|x| x.as_u64());
        match v.get("kind").and_then(|k| k.as_str()) {
            Some("insn_count") => {
                let window = match v.get("scope").and_then(|s| s.as_str()) {
                    Some("total") => None,
                    Some("window") => Some(num("window").context("window line without its number")? as u32),
                    other => bail!("plugin output line {}: scope {other:?}", i + 1),
                };
                counts.lines.push(Count {
                    window,
                    vcpu: num("vcpu").context("vcpu")? as u32,
                    el: num("el").context("el")? as u8,
                    tlbi: num("tlbi").context("tlbi")?,
                    dsb: num("dsb").context("dsb")?,
                    isb: num("isb").context("isb")?,
                    insns: num("insns").context("insns")?,
                });
            }
            Some("insn_count_end") => {
                ensure!(num("dropped_windows") == Some(0), "the plugin dropped windows (more than 256)");
                ensure!(num("unclosed") == Some(0), "a window was opened and never closed");
                counts.windows = num("windows").context("windows")? as u32;
                counts.api = num("api").context("api")? as u32;
                let unread = num("unread").context("unread")?;
                ensure!(
                    unread == 0,
                    "the plugin (built for plugin API {}) could not read the bytes of {unread} instructions: \
                     a library built for another API than this QEMU's (xtask/src/plugin.rs `api_for`)",
                    counts.api
                );
                ended = true;
            }
            other => bail!("plugin output line {}: kind {other:?}", i + 1),
        }
    }
    ensure!(ended, "the plugin's output has no end line (QEMU did not exit cleanly?)");
    // Every run executes code: none counted is a plugin that did not instrument, not a result.
    ensure!(
        counts.lines.iter().any(|c| c.window.is_none() && c.insns > 0),
        "the plugin (built for plugin API {}) counted no instruction at all",
        counts.api
    );
    Ok(counts)
}

/// Reads and parses `path`.
pub fn read(path: &Path) -> Result<Counts> {
    parse(&std::fs::read_to_string(path).with_context(|| format!("reading the plugin's output {}", path.display()))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_parsed_and_checked() {
        let text = "{\"kind\":\"insn_count\",\"scope\":\"total\",\"vcpu\":0,\"el\":1,\"tlbi\":3,\"dsb\":4,\"isb\":5,\"insns\":50}\n\
                    {\"kind\":\"insn_count\",\"scope\":\"window\",\"window\":0,\"vcpu\":0,\"el\":1,\"tlbi\":1,\"dsb\":2,\"isb\":3,\"insns\":9}\n\
                    {\"kind\":\"insn_count\",\"scope\":\"window\",\"window\":0,\"vcpu\":2,\"el\":1,\"tlbi\":0,\"dsb\":1,\"isb\":0,\"insns\":7}\n\
                    {\"kind\":\"insn_count_end\",\"windows\":1,\"dropped_windows\":0,\"unclosed\":0,\"api\":3,\"unread\":0}\n";
        let c = parse(text).unwrap();
        assert_eq!(c.windows, 1);
        assert_eq!(c.window_el(0, 1), (1, 3, 3));
        assert_eq!(c.window_el(0, 2), (0, 0, 0));
        assert_eq!(c.window(0).count(), 2);
        assert_eq!(c.window(0).map(|l| l.insns).sum::<u64>(), 16);
        let cut = text.lines().take(3).collect::<Vec<_>>().join("\n");
        assert!(parse(&cut).is_err(), "no end line");
        let unclosed = text.replace("\"unclosed\":0", "\"unclosed\":1");
        assert!(parse(&unclosed).is_err());
        assert_eq!(c.api, 3);
        let unread = text.replace("\"unread\":0", "\"unread\":12");
        assert!(format!("{:#}", parse(&unread).unwrap_err()).contains("12 instructions"));
        // A plugin that counted nothing (no translation block instrumented) is an error.
        let end = text.lines().last().unwrap();
        assert!(format!("{:#}", parse(end).unwrap_err()).contains("no instruction at all"));
    }

    #[test]
    fn the_api_follows_the_qemu_version() {
        // Declared API within what each QEMU accepts (insncount.c): 7.2 [0, 1], 9.0 [2, 2],
        // 9.1 [2, 3], 10.0 [2, 4]; insn_data copies from API 3 on (QEMU 9.1).
        assert!(api_for(Version(7, 1, 0)).is_err());
        assert_eq!(api_for(Version(7, 2, 0)).unwrap(), 1);
        assert_eq!(api_for(Version(8, 2, 2)).unwrap(), 1);
        assert_eq!(api_for(Version(9, 0, 2)).unwrap(), 2);
        assert_eq!(api_for(Version(9, 1, 0)).unwrap(), 3);
        assert_eq!(api_for(Version(10, 0, 2)).unwrap(), 3);
        assert_eq!(api_for(Version(10, 2, 0)).unwrap(), 3);
        assert!(format!("{:#}", api_for(Version(11, 0, 0)).unwrap_err()).contains("api_for"));
    }

    fn m(name: &str) -> &'static QemuModel {
        crate::machine::find(name).unwrap().model()
    }

    #[test]
    fn qemu_argument() {
        let el2 = El2Code { lo: 0x4020_0000, hi: 0x406b_f000, mark: 0x1234 };
        let a = qemu_arg(Path::new("/p/lib.so"), Path::new("/t/o.jsonl"), Some(el2), m("virt"));
        let el0 = ",el0=0x0-0x40000000,el0=0x1000000000-0x1000000000000";
        assert_eq!(a, format!("/p/lib.so,out=/t/o.jsonl,el2=0x40200000-0x406bf000,el2mark=0x1234{el0}"));
        assert_eq!(qemu_arg(Path::new("l"), Path::new("o"), None, m("virt")), format!("l,out=o{el0}"));
        // RAM from 0: EL0's low range starts where the programs load, above the guest's start.
        let pi4 = ",el0=0x400000-0x4000000,el0=0x1000000000-0x1000000000000";
        assert_eq!(qemu_arg(Path::new("l"), Path::new("o"), None, m("pi4")), format!("l,out=o{pi4}"));
        assert_eq!(el0_code(m("imx8mp-evk")), el0_code(m("virt")));
        assert_eq!((image_base(m("virt")), image_base(m("pi4"))), (0x4020_0000, 0x20_0000));
    }
}
