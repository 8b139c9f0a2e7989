//! The Raspberry Pi `config.txt` section `cargo xtask flash` owns: between two marker lines,
//! rewritten in place on every flash (so flashing twice leaves one section), appended at the end
//! the first time. The user's other lines are kept byte for byte, line endings included.
//!
//! The section starts with `[all]` so a conditional section the user's file ends in (`[pi4]`,
//! `[cm5]`, ...) does not swallow it; since the firmware takes the last value of a setting, the
//! section wins over earlier lines that set the same things ([`overridden`] lists them).

use std::fmt;

/// First line of the section.
pub const BEGIN: &str = "# >>> pgtlab: written by `cargo xtask flash`; this block is replaced on every flash";
/// Last line of the section.
pub const END: &str = "# <<< pgtlab";

/// What the section boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// `kernel=`: the file the firmware starts (the hypervisor, or the chainloader).
    pub kernel: String,
    /// `initramfs FILE followkernel`: the guest kernel, handed to the hypervisor as its initrd.
    pub initramfs: Option<String>,
    /// `cmdline=`: the file whose line becomes `/chosen/bootargs`.
    pub cmdline: String,
    /// `init_uart_baud=` when not the firmware's 115200.
    pub baud: Option<u32>,
    /// `armstub=`: firmware the Pi's boot firmware starts at EL3 before the kernel (TF-A's BL31:
    /// PSCI from EL3 instead of the spin table), with `enable_gic=1` as TF-A's Pi 4 port asks.
    pub armstub: Option<String>,
}

impl Section {
    /// The section's lines, markers included.
    pub fn lines(&self) -> Vec<String> {
        let mut l = vec![
            BEGIN.to_string(),
            "[all]".into(),
            "# 64-bit, entered at EL2 with x0 = the DTB".into(),
            "arm_64bit=1".into(),
            "# The console: the debug UART (its DTB alias is serial10), with the firmware's own messages".into(),
            "enable_uart=1".into(),
            "uart_2ndstage=1".into(),
        ];
        if let Some(b) = self.baud {
            l.push(format!("init_uart_baud={b}"));
        }
        l.extend([
            "# Not a Linux kernel: boot it without the firmware's compatibility check".into(),
            "os_check=0".into(),
            format!("kernel={}", self.kernel),
        ]);
        if let Some(i) = &self.initramfs {
            l.push(format!("initramfs {i} followkernel"));
        }
        if let Some(a) = &self.armstub {
            l.push("# TF-A's BL31 at EL3: PSCI for the CPUs, then the kernel at EL2 (x0 = the DTB it patched)".into());
            l.push(format!("armstub={a}"));
            l.push("enable_gic=1".into());
        }
        l.push(format!("cmdline={}", self.cmdline));
        l.push(END.to_string());
        l
    }
}

/// Why a config.txt was not edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// A begin marker without its end (or the other way round): the user edited it.
    Unbalanced {
        /// 1-based line of the marker.
        line: usize,
        /// Which marker.
        marker: &'static str,
    },
    /// Two sections.
    Twice {
        /// 1-based line of the second begin marker.
        line: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Unbalanced { line, marker } => write!(
                f,
                "config.txt line {line} has the pgtlab {marker} marker without its partner: fix or delete the block by hand, nothing was changed"
            ),
            ConfigError::Twice { line } => {
                write!(f, "config.txt has a second pgtlab block at line {line}: keep one by hand, nothing was changed")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// Lines of `text` with their endings.
fn split(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

fn bare(line: &str) -> &str {
    line.trim_end_matches(['\r', '\n'])
}

/// The section's line range `[begin, end]` (0-based, inclusive), if there is one.
fn find(lines: &[&str]) -> Result<Option<(usize, usize)>, ConfigError> {
    let mut begin = None;
    let mut found = None;
    for (i, l) in lines.iter().enumerate() {
        match bare(l).trim() {
            BEGIN => {
                if let Some(b) = begin {
                    return Err(ConfigError::Unbalanced { line: b + 1, marker: "begin" });
                }
                if found.is_some() {
                    return Err(ConfigError::Twice { line: i + 1 });
                }
                begin = Some(i);
            }
            END => match begin.take() {
                Some(b) => found = Some((b, i)),
                None => return Err(ConfigError::Unbalanced { line: i + 1, marker: "end" }),
            },
            _ => {}
        }
    }
    if let Some(b) = begin {
        return Err(ConfigError::Unbalanced { line: b + 1, marker: "begin" });
    }
    Ok(found)
}

/// `existing` with the section in place (replacing the old one, or appended).
pub fn apply(existing: &str, section: &Section) -> Result<String, ConfigError> {
    let lines = split(existing);
    let eol = if existing.contains("\r\n") { "\r\n" } else { "\n" };
    let block: String = section.lines().iter().map(|l| format!("{l}{eol}")).collect();
    Ok(match find(&lines)? {
        Some((b, e)) => format!("{}{block}{}", lines[..b].concat(), lines[e + 1..].concat()),
        None => {
            let mut out = existing.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push_str(eol);
            }
            if !out.is_empty() {
                out.push_str(eol);
            }
            out.push_str(&block);
            out
        }
    })
}

/// `existing` without the section (and without the blank line [`apply`] put before it).
pub fn remove(existing: &str) -> Result<String, ConfigError> {
    let lines = split(existing);
    Ok(match find(&lines)? {
        Some((mut b, e)) => {
            if b > 0 && bare(lines[b - 1]).is_empty() && e + 1 == lines.len() {
                b -= 1;
            }
            format!("{}{}", lines[..b].concat(), lines[e + 1..].concat())
        }
        None => existing.to_string(),
    })
}

/// The section's lines as found in `text` (markers included), if it has one.
pub fn section_of(text: &str) -> Result<Option<Vec<String>>, ConfigError> {
    let lines = split(text);
    Ok(find(&lines)?.map(|(b, e)| lines[b..=e].iter().map(|l| bare(l).to_string()).collect()))
}

/// Settings the section decides: a user's line setting one of these is overridden.
const KEYS: [&str; 8] =
    ["arm_64bit", "enable_uart", "uart_2ndstage", "init_uart_baud", "os_check", "kernel", "initramfs", "cmdline"];

/// The user's lines (outside the section) that set what the section sets, with their 1-based
/// line numbers: the section, being last, overrides them.
pub fn overridden(existing: &str) -> Vec<(usize, String)> {
    let lines = split(existing);
    let skip = find(&lines).ok().flatten();
    lines
        .iter()
        .enumerate()
        .filter(|(i, _)| skip.is_none_or(|(b, e)| *i < b || *i > e))
        .filter_map(|(i, l)| {
            let t = bare(l).trim();
            let key = t.split(['=', ' ', '\t']).next()?;
            (!t.starts_with('#') && KEYS.contains(&key)).then(|| (i + 1, t.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hyp() -> Section {
        Section {
            armstub: None,
            kernel: "kernel_2712.img".into(),
            initramfs: Some("pgtlab-kernel.img".into()),
            cmdline: "pgtlab-cmdline.txt".into(),
            baud: None,
        }
    }

    const USER: &str = "# Raspberry Pi OS\ndtparam=audio=on\ncamera_auto_detect=1\n\n[cm5]\ndtoverlay=dwc2,dr_mode=host\n\n[pi4]\nkernel=kernel8.img\narm_64bit=1";

    #[test]
    fn section_has_what_the_board_needs() {
        let l = hyp().lines();
        for want in [
            "[all]",
            "arm_64bit=1",
            "enable_uart=1",
            "uart_2ndstage=1",
            "os_check=0",
            "kernel=kernel_2712.img",
            "initramfs pgtlab-kernel.img followkernel",
            "cmdline=pgtlab-cmdline.txt",
        ] {
            assert!(l.iter().any(|x| x == want), "{want} missing from {l:#?}");
        }
        assert_eq!((l.first().unwrap().as_str(), l.last().unwrap().as_str()), (BEGIN, END));
        assert_eq!(l[1], "[all]", "the section resets any conditional filter first");
        let loader = Section { kernel: "kernel_2712.img".into(), initramfs: None, baud: Some(921_600), ..hyp() };
        let l = loader.lines();
        assert!(!l.iter().any(|x| x.starts_with("initramfs")));
        assert!(l.contains(&"init_uart_baud=921600".to_string()));
    }

    #[test]
    fn twice_leaves_one_section_and_the_users_lines() {
        let once = apply(USER, &hyp()).unwrap();
        let twice = apply(&once, &hyp()).unwrap();
        assert_eq!(once, twice, "a second flash changes nothing");
        assert_eq!(twice.matches(BEGIN).count(), 1);
        assert!(twice.starts_with(USER), "the user's lines come first, unchanged");
        assert!(twice[USER.len()..].starts_with("\n\n# >>> pgtlab"), "{twice}");
        // A changed section replaces the old one in place.
        let other = Section { kernel: "loader.img".into(), initramfs: None, ..hyp() };
        let changed = apply(&twice, &other).unwrap();
        assert_eq!(changed.matches(BEGIN).count(), 1);
        assert!(changed.contains("kernel=loader.img") && !changed.contains("followkernel"));
        assert_eq!(section_of(&changed).unwrap().unwrap(), other.lines());
        // Lines after the section (added by the user later) stay after it.
        let later = format!("{twice}dtparam=i2c_arm=on\n");
        let re = apply(&later, &other).unwrap();
        assert!(re.ends_with(&format!("{END}\ndtparam=i2c_arm=on\n")), "{re}");
        assert_eq!(remove(&once).unwrap(), format!("{USER}\n"));
    }

    #[test]
    fn keeps_crlf_and_handles_empty_files() {
        let crlf = "a=1\r\nb=2\r\n";
        let out = apply(crlf, &hyp()).unwrap();
        assert!(out.starts_with(crlf));
        assert!(!out.replace("\r\n", "").contains('\n'), "every new line ends in CRLF: {out:?}");
        assert_eq!(apply(&out, &hyp()).unwrap(), out);
        let fresh = apply("", &hyp()).unwrap();
        assert!(fresh.starts_with(BEGIN));
        assert_eq!(remove(&fresh).unwrap(), "");
    }

    #[test]
    fn refuses_a_broken_section() {
        let once = apply(USER, &hyp()).unwrap();
        let no_end = once.replace(END, "# something else");
        assert!(matches!(apply(&no_end, &hyp()), Err(ConfigError::Unbalanced { marker: "begin", .. })));
        let no_begin = once.replace(BEGIN, "#");
        assert!(matches!(apply(&no_begin, &hyp()), Err(ConfigError::Unbalanced { marker: "end", .. })));
        let two = format!("{once}{}", hyp().lines().join("\n"));
        assert!(matches!(apply(&two, &hyp()), Err(ConfigError::Twice { .. })));
        assert!(ConfigError::Twice { line: 3 }.to_string().contains("nothing was changed"));
    }

    #[test]
    fn lists_the_users_lines_the_section_overrides() {
        let once = apply(USER, &hyp()).unwrap();
        assert_eq!(overridden(&once), [(9, "kernel=kernel8.img".to_string()), (10, "arm_64bit=1".to_string())]);
        assert!(overridden("# kernel=x\ndtoverlay=y\n").is_empty());
    }
}
