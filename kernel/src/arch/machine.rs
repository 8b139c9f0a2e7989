//! What the boot CPU found, for every CPU afterwards: the device tree's board, who runs the
//! kernel (the host), how much RAM. Set once by `main` before the other CPUs start.

use super::power::Host;
use board::Board;
use spin::Once;

/// What every CPU needs to know after boot.
pub struct Kernel {
    /// The machine as its device tree describes it.
    pub board: Board,
    /// Who ends the run.
    pub host: Host,
    /// RAM, all ranges.
    pub mem_bytes: u64,
}

/// Set once by the boot CPU.
pub static KERNEL: Once<Kernel> = Once::new();
