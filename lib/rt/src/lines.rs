//! Which cache lines a maintenance operation over `[start, start + len)` visits, in the order
//! `cache`'s loop issues them: rounds of [`ROUND`] lines while a whole round is left (ranges of
//! MiBs: the hypervisor's region, a guest's kernel), then single lines. Pure arithmetic, tested
//! on the host: every line overlapping the range exactly once, none outside it.

/// Lines per unrolled round.
pub const ROUND: u64 = 8;

/// The lines to visit: from `first`, `rounds` rounds of [`ROUND`] lines, then `singles` lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lines {
    /// The first line's address.
    pub first: u64,
    /// Whole rounds of [`ROUND`] lines.
    pub rounds: u64,
    /// Lines after the rounds (fewer than [`ROUND`]).
    pub singles: u64,
}

/// The lines (of `line` bytes, a power of two) overlapping `[start, start + len)`, the range
/// clipped at the top of the address space.
pub const fn lines(start: u64, len: u64, line: u64) -> Lines {
    let first = start & !(line - 1);
    let end = start.saturating_add(len);
    let n = if len > 0 && end > first { (end - first).div_ceil(line) } else { 0 };
    Lines { first, rounds: n / ROUND, singles: n % ROUND }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn visited(l: Lines, line: u64) -> Vec<u64> {
        (0..l.rounds * ROUND + l.singles).map(|i| l.first + i * line).collect()
    }

    #[test]
    fn every_overlapping_line_once_and_no_other() {
        for line in [16u64, 64, 128] {
            for start in 0x1000..0x1000 + 2 * line {
                for len in 0..(ROUND + 3) * line {
                    let got = visited(lines(start, len, line), line);
                    let want: Vec<u64> = (start / line - 2..(start + len) / line + 2)
                        .map(|i| i * line)
                        .filter(|&a| len > 0 && a < start + len && a + line > start)
                        .collect();
                    assert_eq!(got, want, "start {start:#x} len {len:#x} line {line}");
                }
            }
        }
    }

    #[test]
    fn long_ranges_go_in_rounds_and_the_top_of_memory_is_clipped() {
        assert_eq!(
            lines(0x4000_0000, 22 << 20, 64),
            Lines { first: 0x4000_0000, rounds: (22 << 20) / 64 / 8, singles: 0 }
        );
        let top = lines(u64::MAX - 100, 1000, 64);
        assert_eq!(top.first, (u64::MAX - 100) & !63);
        assert_eq!(top.rounds * ROUND + top.singles, 2);
    }
}
