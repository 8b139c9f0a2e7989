//! How much RAM QEMU gets: `--mem` is the guest's RAM, exactly; under the hypervisor QEMU gets
//! the hypervisor's share on top, found by `hypcore::share` (the hypervisor's own boot
//! decisions run on the host: QEMU's loader, the move to the top of RAM, the memory plan), and
//! the hypervisor is told `hyp.guest-mem=` so its plan gives the guest exactly `--mem`.

use crate::build::Images;
use crate::qemu::QemuConfig;
use hypcore::load::{self, Kernel};
use hypcore::options::{PlanWords, GUEST_MEM};
use hypcore::share::{self, ShareInput};
use std::path::Path;

/// What QEMU is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineMem {
    /// The guest's RAM (`--mem`).
    pub guest: u64,
    /// QEMU's `-m`: the guest's and, under the hypervisor, its share.
    pub total: u64,
    /// Under the hypervisor: the part of its share that is its memslot pool and second memory
    /// image (asked for with `hyp.slotpool=` / `hyp.migrate`).
    pub pools: u64,
}

impl MachineMem {
    /// The hypervisor's share (0 without it).
    pub fn hypervisor(&self) -> u64 {
        self.total - self.guest
    }

    /// The line `cargo xtask run` prints.
    pub fn describe(&self) -> String {
        if self.total == self.guest {
            return format!("QEMU gets {} MiB of RAM (--mem), all the kernel's", self.total >> 20);
        }
        let pools = if self.pools > 0 {
            format!(", of which {} MiB for the memslot pool and second memory image", self.pools >> 20)
        } else {
            String::new()
        };
        format!(
            "QEMU gets {} MiB of RAM: {} MiB for the guest (--mem) + {} MiB for the hypervisor (its image and \
             page-table frames{pools})",
            self.total >> 20,
            self.guest >> 20,
            self.hypervisor() >> 20
        )
    }
}

/// The words of `bootargs` the xtask itself sets: refused when the user gives them.
pub fn check_bootargs(bootargs: &str) -> Result<(), String> {
    match bootargs.split_ascii_whitespace().find(|w| w.split('=').next() == Some(GUEST_MEM)) {
        Some(w) => Err(format!("--bootargs {w}: the guest's RAM is --mem (the xtask passes {GUEST_MEM} itself)")),
        None => Ok(()),
    }
}

/// Bytes of `path`.
fn file_len(path: &Path) -> Result<u64, String> {
    std::fs::metadata(path).map(|m| m.len()).map_err(|e| format!("{}: {e}", path.display()))
}

/// The machine for `cfg`: `--mem`, plus the hypervisor's share when it runs. `initrd` is the
/// file QEMU loads as the hypervisor's initrd (the guest bundle or the guest kernel).
pub fn machine_mem(cfg: &QemuConfig, images: &Images, initrd: &Path) -> Result<MachineMem, String> {
    let guest = crate::qemu::parse_mem(&cfg.mem)?;
    // A board model's RAM is the model's (the Pi 4's is fixed, the ZCU102's DTB is only right
    // up to 2 GiB): the guest gets what the hypervisor leaves of it, as on the board.
    if cfg.no_hypervisor || cfg.kernel_at_el2 || cfg.board != crate::board::Board::Virt {
        return Ok(MachineMem { guest, total: guest, pools: 0 });
    }
    let hyp = std::fs::read(&images.hypervisor).map_err(|e| format!("{}: {e}", images.hypervisor.display()))?;
    // A malformed hyp. word is the hypervisor's to refuse (exit 5, with its message): size the
    // machine as if it were not there.
    let words = PlanWords::parse(&cfg.bootargs).unwrap_or_default();
    let input = ShareInput {
        layout: &share::virt_layout,
        guest_mem: guest,
        hypervisor: Kernel::classify(&hyp),
        initrd_len: file_len(initrd)?,
        dtb_len: load::VIRT_DTB_BYTES,
        page: load::VIRT_PAGE,
        reserved: vec![],
        no_map: vec![],
        pool: words.pool,
        slotpool: words.slotpool,
        mirror: words.migrate,
    };
    let s = share::machine_for_guest(&input).map_err(|e| format!("--mem {}: {e}", cfg.mem))?;
    Ok(MachineMem { guest, total: s.machine_mem, pools: s.plan.slotpool.len() + s.plan.mirror.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xtask_owns_guest_mem() {
        assert!(check_bootargs("hyp.pool=64M quiet").is_ok());
        let e = check_bootargs("quiet hyp.guest-mem=1G").unwrap_err();
        assert!(e.contains("--mem"), "{e}");
        let m = MachineMem { guest: 1 << 30, total: (1 << 30) + (22 << 20), pools: 0 };
        assert_eq!(
            m.describe(),
            "QEMU gets 1046 MiB of RAM: 1024 MiB for the guest (--mem) + 22 MiB for the hypervisor (its image and \
             page-table frames)"
        );
    }
}
