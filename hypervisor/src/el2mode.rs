//! How EL2 runs (nVHE or hVHE), decided once by the boot CPU (`el2::choose_mode`) and read by
//! everything that depends on it: EL2's own register layouts and the guest's EL1 registers
//! (`guest_el1`). Below both, so neither imports the other for it.

use core::sync::atomic::{AtomicU8, Ordering};
use rt::el2::{Mode, Why};

/// How EL2 runs, as the boot CPU chose it (0 before that). Written by the boot CPU with its MMU
/// off (so it is in memory, where CPUs started later read it with theirs off) and never again.
static MODE: AtomicU8 = AtomicU8::new(0);

fn encode(m: Mode) -> u8 {
    match m {
        Mode::Nvhe => 1,
        Mode::Hvhe(Why::Res1) => 2,
        Mode::Hvhe(Why::Forced) => 3,
    }
}

/// How EL2 runs on every CPU. Before the boot CPU chose (`el2::choose_mode`): the mode the
/// entry code left this CPU in.
pub fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        1 => Mode::Nvhe,
        2 => Mode::Hvhe(Why::Res1),
        3 => Mode::Hvhe(Why::Forced),
        _ => rt::entry::el2_mode_at_entry(),
    }
}

/// Records the boot CPU's choice (once, with its MMU off).
pub fn set(m: Mode) {
    MODE.store(encode(m), Ordering::Relaxed);
}
