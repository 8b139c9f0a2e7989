//! The loader's answers: one line each, `@@chainboot WORD ...`, printed on the console among
//! whatever else the board says. [`Status`]'s `Display` writes a line (without the newline) and
//! [`Status::parse`] reads one back, so both sides use the one format.

use core::fmt;

/// Prefix of every status line.
pub const PREFIX: &str = "@@chainboot ";

/// One status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status<'a> {
    /// Waiting for a transfer.
    Ready {
        /// Protocol version the loader speaks.
        version: u32,
        /// RAM the loader can place images in, in MiB.
        ram_mib: u64,
    },
    /// The header is good; send the rest. Addresses are where the loader will put each part.
    Accept {
        /// Base of the hypervisor Image (its entry point is base + text_offset).
        hypervisor: u64,
        /// Where the kernel Image (the hypervisor's initrd) goes.
        kernel: u64,
        /// Where the DTB goes.
        dtb: u64,
    },
    /// Nothing is started; the loader waits for the next transfer.
    Refuse(&'a str),
    /// The host stopped sending in the middle of a transfer.
    Timeout {
        /// Payload bytes that arrived.
        received: u64,
        /// Payload bytes announced.
        total: u64,
    },
    /// Everything checked: the loader jumps to the hypervisor now.
    Boot {
        /// The hypervisor's entry point.
        entry: u64,
        /// The DTB handed over in x0.
        dtb: u64,
    },
}

impl fmt::Display for Status<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(PREFIX)?;
        match *self {
            Status::Ready { version, ram_mib } => write!(f, "ready v{version} ram={ram_mib}MiB"),
            Status::Accept { hypervisor, kernel, dtb } => {
                write!(f, "accept hypervisor={hypervisor:#x} kernel={kernel:#x} dtb={dtb:#x}")
            }
            Status::Refuse(why) => write!(f, "refuse {why}"),
            Status::Timeout { received, total } => write!(f, "timeout {received} of {total} bytes"),
            Status::Boot { entry, dtb } => write!(f, "boot entry={entry:#x} dtb={dtb:#x}"),
        }
    }
}

fn field<'a>(words: &mut core::str::SplitAsciiWhitespace<'a>, key: &str) -> Option<&'a str> {
    words.next()?.strip_prefix(key)?.strip_prefix('=')
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

impl<'a> Status<'a> {
    /// Reads a status line (surrounding whitespace and a `\r` allowed); `None` for any other line.
    pub fn parse(line: &'a str) -> Option<Status<'a>> {
        let rest = line.trim().strip_prefix(PREFIX.trim_end())?;
        let rest = rest.strip_prefix(' ')?;
        let (word, args) = rest.split_once(' ').unwrap_or((rest, ""));
        let mut w = args.split_ascii_whitespace();
        match word {
            "ready" => {
                let version = w.next()?.strip_prefix('v')?.parse().ok()?;
                let ram_mib = field(&mut w, "ram")?.strip_suffix("MiB")?.parse().ok()?;
                Some(Status::Ready { version, ram_mib })
            }
            "accept" => Some(Status::Accept {
                hypervisor: hex(field(&mut w, "hypervisor")?)?,
                kernel: hex(field(&mut w, "kernel")?)?,
                dtb: hex(field(&mut w, "dtb")?)?,
            }),
            "refuse" => Some(Status::Refuse(args.trim())),
            "timeout" => {
                let received = w.next()?.parse().ok()?;
                (w.next()? == "of").then_some(())?;
                let total = w.next()?.parse().ok()?;
                Some(Status::Timeout { received, total })
            }
            "boot" => Some(Status::Boot { entry: hex(field(&mut w, "entry")?)?, dtb: hex(field(&mut w, "dtb")?)? }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::format;

    #[test]
    fn every_status_reads_back() {
        for s in [
            Status::Ready { version: 1, ram_mib: 1024 },
            Status::Accept { hypervisor: 0x4080_0000, kernel: 0x7ff0_0000, dtb: 0x7fe0_0000 },
            Status::Refuse("checksum: kernel crc32 0x1 but the header says 0x2"),
            Status::Timeout { received: 12, total: 500_000 },
            Status::Boot { entry: 0x4080_0000, dtb: 0x7fe0_0000 },
        ] {
            let line = format!("{s}\r\n");
            assert!(line.starts_with("@@chainboot "));
            assert_eq!(Status::parse(&line), Some(s), "{line:?}");
        }
    }

    #[test]
    fn other_lines_are_not_status() {
        for line in [
            "",
            "hyp: pgtlab hypervisor at EL2",
            "@@chainboot",
            "@@chainbootready v1 ram=1MiB",
            "@@chainboot ready",
            "@@chainboot ready vX ram=1MiB",
            "@@chainboot accept hypervisor=12 kernel=0x1 dtb=0x2",
            "@@chainboot hello",
            "@@report {\"kind\":\"x\"}",
        ] {
            assert_eq!(Status::parse(line), None, "{line:?}");
        }
    }
}
