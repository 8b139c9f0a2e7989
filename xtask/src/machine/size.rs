//! `--mem` as a typed size, parsed once: a whole number of MiB, never 0, with a unit.

use crate::error::Refused;
use std::fmt;
use std::str::FromStr;

/// A RAM size: a whole, non-zero number of MiB (QEMU's `-m` takes MiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(u64);

/// One MiB.
pub const MIB: u64 = 1 << 20;
/// One GiB.
pub const GIB: u64 = 1 << 30;

impl Size {
    /// `n` MiB (`n` > 0).
    pub const fn mib(n: u64) -> Size {
        assert!(n > 0 && n <= u64::MAX >> 20, "a size is at least 1 MiB");
        Size(n << 20)
    }

    /// `n` GiB (`n` > 0).
    pub const fn gib(n: u64) -> Size {
        Size::mib(n << 10)
    }

    /// `bytes` when it is a whole, non-zero number of MiB.
    pub fn from_bytes(bytes: u64) -> Option<Size> {
        (bytes != 0 && bytes.is_multiple_of(MIB)).then_some(Size(bytes))
    }

    /// Bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// MiB.
    pub const fn in_mib(self) -> u64 {
        self.0 >> 20
    }

    /// A `--mem` value: a number with `K`, `M`, `G` or `T` (checked, no overflow), not 0, a
    /// whole number of MiB. A bare number is refused: QEMU would read MiB, the boot arguments
    /// bytes, so it means two things.
    pub fn parse(s: &str) -> Result<Size, Refused> {
        let refuse = |why: String| Refused(format!("--mem {s}: {why}"));
        if s.is_empty() {
            return Err(refuse("give a size with a unit, e.g. 512M or 1G".into()));
        }
        if s.bytes().last().is_some_and(|c| c.is_ascii_digit()) {
            // A suggestion that keeps the size the user most likely meant: QEMU reads a bare
            // number as MiB, but a large one is most likely bytes.
            let hint = match bootargs::parse_size(s) {
                Ok(0) => "a machine needs some RAM, e.g. 512M".to_string(),
                Ok(b) if b >= MIB && b.is_multiple_of(MIB) => format!("{}M if you meant bytes", b >> 20),
                Ok(b) if b < 1 << 20 => format!("{s}M if you meant MiB"),
                _ => "e.g. 512M or 1G".to_string(),
            };
            return Err(refuse(format!("give a unit (K, M, G or T): {hint}")));
        }
        let bytes = bootargs::parse_size(s).map_err(|e| refuse(e.to_string()))?;
        if bytes == 0 {
            return Err(refuse("a machine needs some RAM (QEMU would silently use 128M)".into()));
        }
        Size::from_bytes(bytes).ok_or_else(|| refuse("not a whole number of MiB".into()))
    }
}

impl FromStr for Size {
    type Err = Refused;
    fn from_str(s: &str) -> Result<Size, Refused> {
        Size::parse(s)
    }
}

impl fmt::Display for Size {
    /// `4G` when a whole number of GiB, else `N M`: the form QEMU and the boot words take.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(GIB) {
            write!(f, "{}G", self.0 >> 30)
        } else {
            write!(f, "{}M", self.0 >> 20)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_need_a_unit_and_refuse_zero_overflow_and_parts_of_a_mib() {
        assert_eq!(Size::parse("1G"), Ok(Size::gib(1)));
        assert_eq!(Size::parse("512M"), Ok(Size::mib(512)));
        assert_eq!(Size::parse("16g"), Ok(Size::gib(16)));
        assert_eq!(Size::parse("2048M").unwrap().to_string(), "2G");
        assert_eq!(Size::parse("1536M").unwrap().to_string(), "1536M");
        let e = |s: &str| Size::parse(s).unwrap_err().0;
        assert!(e("0M").contains("needs some RAM"), "{}", e("0M"));
        assert!(e("1000K").contains("whole number of MiB"));
        assert!(
            e("99999999999T").contains("too large") || e("99999999999T").contains("overflow"),
            "{}",
            e("99999999999T")
        );
        assert!(e("abc").contains("not a number") || e("abc").contains("invalid"), "{}", e("abc"));
        assert!(e("").contains("with a unit"));
    }

    /// A bare number gets a suggestion that keeps its size: `0` none at all, a byte count the
    /// MiB it is, a small number itself in MiB (never `0x40000000M`, 1 PiB).
    #[test]
    fn a_bare_number_is_refused_with_a_suggestion_that_keeps_its_size() {
        let e = |s: &str| Size::parse(s).unwrap_err().0;
        assert!(e("0").contains("needs some RAM") && !e("0").contains("0M"), "{}", e("0"));
        assert!(e("0x40000000").contains("1024M if you meant bytes"), "{}", e("0x40000000"));
        assert!(e("1073741824").contains("1024M if you meant bytes"), "{}", e("1073741824"));
        assert!(e("1024").contains("1024M if you meant MiB"), "{}", e("1024"));
        assert!(e("12345").contains("12345M if you meant MiB"), "{}", e("12345"));
    }
}
