//! Names the kernel and the host tools must agree on, each listed once: the kernel takes its
//! boot-word choices from here and checks its dispatch tables against them at compile time
//! ([`table_matches`]); the xtask's tables are checked against them by host tests.

/// `bench=`: the kernel's in-guest benchmarks (`cargo xtask bench NAME` boots them).
pub const BENCHES: &[&str] = &["exits", "linear-map", "contpte", "split", "mprotect", "percpu"];

/// `test=`: the kernel's self-tests, in the order they are listed (`cargo xtask perf` runs some
/// of them as scenarios).
pub const SELFTESTS: &[&str] = &[
    "panic",
    "undef",
    "bad-return",
    "touch-hyp",
    "stray-access",
    "power-hidden",
    "sve-state",
    "mte-regs",
    "touch",
    "exit-claim",
    "bad-calls",
    "smccc",
    "storm",
    "cpu-cycle",
    "pool-calls",
    "mem-perms",
    "memslot-errors",
    "dirty-log",
    "memslot-nopool",
    "pmu",
    "irq",
    "pan",
    "percpu",
    "pgtable-groups",
];

/// Self-tests that end the run (whatever follows them would never run).
pub const SELFTESTS_ENDING_RUN: &[&str] = &["panic", "undef", "bad-return", "touch-hyp", "touch", "exit-claim"];

/// Whether two strings are equal (usable in constants).
pub const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `table`'s names are exactly `names`, in order: a dispatch table written beside the
/// one list, checked in a constant (`const _: () = assert!(table_matches(...))`) so a name
/// added to one and not the other does not compile.
pub const fn table_matches<T>(table: &[(&str, T)], names: &[&str]) -> bool {
    if table.len() != names.len() {
        return false;
    }
    let mut i = 0;
    while i < names.len() {
        if !same(table[i].0, names[i]) {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_unique_and_tables_are_checked() {
        for list in [BENCHES, SELFTESTS] {
            for (i, a) in list.iter().enumerate() {
                assert!(!list[i + 1..].contains(a), "{a} twice");
            }
        }
        assert!(SELFTESTS_ENDING_RUN.iter().all(|t| SELFTESTS.contains(t)));
        assert!(table_matches(&[("exits", 1), ("split", 2)], &["exits", "split"]));
        assert!(!table_matches(&[("exits", 1), ("split", 2)], &["exits", "splitt"]));
        assert!(!table_matches(&[("exits", 1)], &["exits", "split"]));
        assert!(same("", "") && !same("a", "ab"));
    }
}
