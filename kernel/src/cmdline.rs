//! The kernel's boot arguments. [`WORDS`] is every word the kernel accepts (add one there, one
//! line); an unknown, duplicated or malformed word stops the boot with a message that names it
//! and lists the accepted ones (`lib/bootargs`), so a typo never boots the default
//! configuration silently. `hyp.` words are the hypervisor's: it takes them off the command line
//! before the kernel sees it, so one reaching the kernel means no hypervisor ran.

use bootargs::{Args, Table, Word};
use spin::Once;

/// Every word the kernel accepts.
pub const WORDS: &[Word] = &[
    Word::choice("bbml2", &["auto", "on", "off"], "BBML2 linear map: auto (allow-listed cores), on, off"),
    Word::flag("bbml2_unsafe_override", "with bbml2=on: force BBML2 on a core that is not allowed"),
    Word::uint("bbml2_test_disallow_cpu", 0, rt::MAX_CPUS as u64 - 1, "treat CPU N as not allowed (tests)"),
    Word::uint("bbml2_test_midr", 0, u32::MAX as u64, "feed this MIDR to the BBML2 allow-list check (tests)"),
    Word::choice("rodata", &["full", "on", "off"], "image and linear-alias permissions"),
    Word::choice("contpte", &["on", "off"], "contiguous PTE ranges"),
    Word::list("test", crate::selftest::NAMES, "self-tests, in order (one that ends the run must be last)"),
    Word::choice("bench", abi::names::BENCHES, "in-guest benchmark"),
    Word::uint("dirty.seed", 0, u64::MAX, "test=dirty-log: random seed"),
    Word::uint("touch.ipa", 0, u64::MAX, "test=touch: the IPA to read"),
    Word::uint("pools.frame", 0, u64::MAX, "test=pool-calls: an IPA in the hypervisor's frame pool"),
    Word::uint("pools.slot", 0, u64::MAX, "test=pool-calls: an IPA in the hypervisor's slot pool"),
    Word::uint("split.iters", 1, 1_000_000, "bench=split: iterations"),
    Word::uint("split.gib", 1, 1024, "bench=split: memslot size in GiB"),
    Word::uint("split.chunk", 2, 1 << 20, "bench=split: eager-split chunk in MiB"),
    Word::text("perf.events", "count PMU events around the scenario: NAME|0xN[:el0+el1+el2],... (may be empty)"),
    Word::text("perf.scenario", "with perf.events: the label of the records"),
    Word::choice("perf.walker", &["baseline", "skip_level3", "summary"], "with perf.events: the split walker"),
    Word::flag("perf.list", "list the PMU events of this CPU, counted here or not"),
    Word::text("user", "EL0 programs run concurrently: NAME[:ARGS][+NAME[:ARGS]...] (ARGS: key=value,...)"),
    Word::uint("tick_hz", 1, 10_000, "the scheduler's timer tick (default 100)"),
    Word::choice(
        "flush_elision",
        &["on", "off"],
        "user mprotect/munmap: no TLBI for entries that need none (default on)",
    ),
    Word::choice("lazy_relax", &["on", "off"], "user RO->RW, NX->X upgrades without a broadcast TLBI (default on)"),
    Word::uint("asid_bits", 2, 16, "use at most N ASID bits, to force ASID roll-overs (tests)"),
    Word::uint("mprotect.rounds", 1, 1_000_000, "bench=mprotect: rounds per row (default 100)"),
    Word::choice(
        "percpu_tables",
        &["on", "off"],
        "per-CPU TTBR1 roots and the this_cpu window at one fixed VA (default on; switchable at run time)",
    ),
    Word::uint("percpu.rounds", 1, 64, "bench=percpu: rounds (default 20, 3 under -icount)"),
    Word::choice(
        "percpu.seed",
        &["no-guard", "window-plain", "no-sync-cpu1"],
        "seed a per-CPU bug the tests must catch (tests only)",
    ),
];

/// The kernel's table for `lib/bootargs`.
pub const TABLE: Table = Table {
    owner: "kernel",
    words: WORDS,
    foreign: &[("hyp.", "a hypervisor word, and no hypervisor took it off the command line (--no-hypervisor?)")],
};

static ARGS: Once<Args> = Once::new();

/// Checks the command line (once, at boot); the error names the refused word.
/// Words a boot loader put before `bootargs::FIRMWARE_MARKER` (the kernel alone on a board) are
/// listed once and ignored.
pub fn init(cmdline: &str) -> Result<&'static Args, alloc::string::String> {
    let (firmware, ours) = bootargs::split_firmware(cmdline).map_err(|e| alloc::format!("{e}"))?;
    if !firmware.is_empty() {
        rt::println!(
            "kernel: {} words before {:?} are the boot loader's, ignored: {}",
            firmware.len(),
            bootargs::FIRMWARE_MARKER,
            firmware.join(" ")
        );
    }
    let a = bootargs::parse_words(ours, &TABLE).map_err(|e| alloc::format!("{e}"))?;
    crate::selftest::check_order(a.list("test"))?;
    Ok(ARGS.call_once(|| a))
}

/// The checked boot arguments (empty before [`init`]).
pub fn args() -> &'static Args {
    static EMPTY: Once<Args> = Once::new();
    ARGS.get().unwrap_or_else(|| EMPTY.call_once(Args::default))
}
