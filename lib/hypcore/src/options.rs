//! The hypervisor's boot words (`hyp.…`): the table `lib/bootargs` checks them against, and the
//! ones the memory plan reads. Here, not in the binary, because the xtask reads the same words
//! to size the machine (`crate::share`): one table for both.
//!
//! SIZE is bytes, or a number with `K`, `M`, `G` or `T`.

use bootargs::{Table, Word};

/// 1 MiB.
const M: u64 = 1 << 20;

/// `hyp.guest-mem`: the word the xtask adds so the guest gets exactly `--mem`.
pub const GUEST_MEM: &str = "hyp.guest-mem";
/// `hyp.slotpool=`: the memslot pool's size, the one word the hypervisor reads before it moves
/// itself (where the pool goes decides where it goes).
pub const SLOTPOOL: &str = "hyp.slotpool";

/// `hyp.key`: the run's key, which the xtask chooses for each run and the hypervisor prints in
/// its final line (`abi::exit::KeyedFinalLine`); the guest never sees it.
pub const KEY: &str = "hyp.key";

/// Every word the hypervisor accepts (add one here, one line, and read it in the hypervisor's
/// `options.rs`).
pub const WORDS: &[Word] = &[
    Word::choice(
        "hyp.conduit",
        &["hvc", "smc"],
        "PSCI conduit written into the guest's DTB (default: HVC on QEMU's virt, as QEMU gives an EL1 guest; \
         else the host's)",
    ),
    Word::size(
        "hyp.pool",
        crate::plan::FRAME_POOL_MIN,
        1 << 40,
        "page-table frame pool (default 16M below 2G of RAM, else RAM/16 up to 512M)",
    ),
    Word::size(SLOTPOOL, 2 * M, 1 << 40, "memory backing memslots, from the top of RAM (default none)"),
    Word::size(
        GUEST_MEM,
        M,
        1 << 50,
        "the guest's RAM: the first SIZE bytes of the machine's memory, the rest the hypervisor's (cargo xtask run \
         sets it to --mem; default: all RAM the hypervisor does not need)",
    ),
    Word::uint(
        "hyp.cpus",
        1,
        64,
        "CPUs the guest gets (the first N of the device tree, at most the hypervisor's limit; default all): fewer \
         CPUs on a board whose CPU count is fixed (the Pi 4)",
    ),
    Word::uint(
        KEY,
        0,
        u64::MAX,
        "the run's key, printed in the final line (the xtask sets it, new for each run, and accepts no final line \
         without it; the guest never sees it)",
    ),
    Word::choice(
        "hyp.e2h",
        &["1"],
        "run EL2 with HCR_EL2.E2H = 1 (hVHE: the EL1 register layouts at EL2, the guest's EL1 state through the \
         *_EL12 registers) on a CPU where E2H can be cleared; where it cannot (RES1) that is the mode anyway",
    ),
    Word::flag("hyp.check-split", "check every page after each eager split against the slot's pool mapping"),
    Word::flag("hyp.check-stage2", "at boot, check that nothing the hypervisor keeps translates in stage 2"),
    Word::flag(
        "hyp.migrate",
        "dirty logging under the running guest as live migration does: the last CPU copies into a second memory \
         image, the guest gets a control page (pgtlab_ctl=ADDR on its command line)",
    ),
    Word::choice(
        "hyp.on-fault",
        &["inject", "stop"],
        "a guest access to an address nothing owns: inject a synchronous external abort into the guest (default) or \
         stop the run with exit 4 and the IPA",
    ),
    Word::choice(
        "hyp.test",
        &["el2-fault", "aarch32-abort", "aarch32-hvc"],
        "el2-fault: read an unmapped address at EL2 after setup; aarch32-abort / aarch32-hvc: run a guest in \
         AArch32 that reads the hypervisor's memory / calls HVC",
    ),
];

/// The hypervisor's table for `lib/bootargs`.
pub const TABLE: Table = Table { owner: "hypervisor", words: WORDS, foreign: &[] };

/// The words the memory plan reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanWords {
    /// `hyp.pool=`.
    pub pool: Option<u64>,
    /// `hyp.slotpool=`.
    pub slotpool: Option<u64>,
    /// `hyp.migrate`.
    pub migrate: bool,
    /// `hyp.guest-mem=`.
    pub guest_mem: Option<u64>,
}

impl PlanWords {
    /// Reads them from checked words.
    pub fn from_args(a: &bootargs::Args) -> PlanWords {
        PlanWords {
            pool: a.size("hyp.pool"),
            slotpool: a.size(SLOTPOOL),
            migrate: a.flag("hyp.migrate"),
            guest_mem: a.size(GUEST_MEM),
        }
    }

    /// Checks the `hyp.` words of `cmdline` (the others are the guest's) against [`TABLE`] and
    /// reads the plan's.
    pub fn parse(cmdline: &str) -> Result<PlanWords, bootargs::Error> {
        let a = bootargs::parse_words(cmdline.split_ascii_whitespace().filter(|w| w.starts_with("hyp.")), &TABLE)?;
        Ok(PlanWords::from_args(&a))
    }
}

/// How many CPUs the guest gets: `asked` (`hyp.cpus`) or every CPU of the device tree (`dt`),
/// at most `limit` (the hypervisor's). Asking for more than the device tree has, or than the
/// hypervisor runs, is refused: the guest would silently get fewer than its command line says.
/// (More CPUs in the device tree than the limit is not the user's doing: the first `limit` run.)
pub fn guest_cpus(dt: usize, limit: usize, asked: Option<usize>) -> Result<usize, alloc::string::String> {
    match asked {
        Some(n) if n > dt => Err(alloc::format!(
            "hyp.cpus={n}: the device tree has {dt} CPU{}; give at most {dt}",
            if dt == 1 { "" } else { "s" }
        )),
        Some(n) if n > limit => {
            Err(alloc::format!("hyp.cpus={n}: this hypervisor runs at most {limit} CPUs; give at most {limit}"))
        }
        Some(n) => Ok(n),
        None => Ok(dt.min(limit)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_gets_the_cpus_asked_for_or_a_refusal() {
        assert_eq!(guest_cpus(4, 8, None), Ok(4));
        assert_eq!(guest_cpus(12, 8, None), Ok(8), "a larger device tree runs its first 8");
        assert_eq!(guest_cpus(4, 8, Some(4)), Ok(4), "the bound itself is accepted");
        assert_eq!(guest_cpus(4, 8, Some(1)), Ok(1));
        let e = guest_cpus(4, 8, Some(5)).unwrap_err();
        assert!(e.contains("hyp.cpus=5") && e.contains("has 4 CPUs"), "{e}");
        assert!(guest_cpus(1, 8, Some(2)).unwrap_err().contains("has 1 CPU;"));
        let e = guest_cpus(12, 8, Some(9)).unwrap_err();
        assert!(e.contains("at most 8"), "{e}");
        assert_eq!(guest_cpus(12, 8, Some(8)), Ok(8));
    }

    #[test]
    fn plan_words_are_read_and_checked() {
        let w = PlanWords::parse("quiet hyp.pool=64M hyp.migrate hyp.guest-mem=1G test=x").unwrap();
        assert_eq!(w, PlanWords { pool: Some(64 << 20), slotpool: None, migrate: true, guest_mem: Some(1 << 30) });
        assert!(PlanWords::parse("hyp.guest-mem=1G hyp.guest-mem=2G").is_err());
        assert!(PlanWords::parse("hyp.pol=64M").is_err());
        assert_eq!(PlanWords::parse("").unwrap(), PlanWords::default());
        // The ranges' ends: a 2 MiB slot pool and a 1 TiB frame pool are accepted, less or
        // more refused.
        assert_eq!(PlanWords::parse("hyp.slotpool=2M").unwrap().slotpool, Some(2 << 20));
        assert!(PlanWords::parse("hyp.slotpool=1M").is_err());
        assert_eq!(PlanWords::parse("hyp.pool=1T").unwrap().pool, Some(1 << 40));
        assert!(PlanWords::parse("hyp.pool=2T").is_err());
    }
}
