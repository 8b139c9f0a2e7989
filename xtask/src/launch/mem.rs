//! How much RAM QEMU gets. `--mem` is the guest's RAM, exactly, on every machine: its memory
//! node says so and its kernel sees it. Alone, that is QEMU's `-m`. Under the hypervisor QEMU
//! gets the hypervisor's share on top, found by `hypcore::share` (the hypervisor's own boot
//! decisions run on the host: QEMU's loader, the move to the top of RAM, the memory plan, on
//! the machine's RAM layout and with the board DTB's reserved memory), and the hypervisor is
//! told `hyp.guest-mem=` so its plan gives the guest exactly `--mem`.
//!
//! A model whose RAM is fixed (the Pi 4) has one answer: the guest gets what the hypervisor
//! leaves; `--mem` may only ask for that. Without `--mem` a model whose RAM is chosen gives the
//! guest its default ([`Ram::default_guest`] on `virt`) or, on a board, the most the model
//! holds.

use crate::error::Refused;
use crate::machine::{Dtb, QemuModel, RamSize, Size, MIB};
use hypcore::load::{self, Kernel};
use hypcore::options::PlanWords;
use hypcore::range::Range;
use hypcore::share::{self, ShareInput};

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
    /// The hypervisor runs (and is told `hyp.guest-mem=`).
    pub hypervisor: bool,
    /// Bytes of the guest's RAM span that the board's device tree keeps from every kernel
    /// (`no-map` reserved memory, spin tables: firmware's), which the hypervisor's plan leaves
    /// out: its kernel counts that much less than `guest`.
    pub withheld: u64,
    /// `guest` is what `--mem` asked for (else the model's default or the most it gives).
    pub asked: bool,
}

impl MachineMem {
    /// The hypervisor's share (0 without it).
    pub fn hypervisor_bytes(&self) -> u64 {
        self.total - self.guest
    }

    /// Where the guest's size came from, as the run's line says it: `--mem`, or the default
    /// (virt's, or on a board the most it gives).
    fn source(&self) -> &'static str {
        if self.asked {
            "--mem"
        } else {
            "the default; --mem sets it"
        }
    }

    /// The line `cargo xtask run` prints.
    pub fn describe(&self) -> String {
        if !self.hypervisor {
            return if self.total == self.guest {
                format!("QEMU gets {} MiB of RAM ({}), all the guest's", self.total >> 20, self.source())
            } else {
                format!(
                    "QEMU gets {} MiB of RAM, of which the guest sees {} MiB (the rest is the board's co-processor's)",
                    self.total >> 20,
                    self.guest >> 20
                )
            };
        }
        let pools = if self.pools > 0 {
            format!(", of which {} MiB for the memslot pool and second memory image", self.pools >> 20)
        } else {
            String::new()
        };
        let withheld = if self.withheld > 0 {
            format!(
                ", of which the board's device tree keeps {} KiB from every kernel (no-map reserved memory: the guest's \
                 kernel counts {} KiB)",
                self.withheld >> 10,
                (self.guest - self.withheld) >> 10
            )
        } else {
            String::new()
        };
        format!(
            "QEMU gets {} MiB of RAM: {} MiB for the guest ({}{withheld}) + {} MiB for the hypervisor (its image and \
             page-table frames{pools})",
            self.total >> 20,
            self.guest >> 20,
            self.source(),
            self.hypervisor_bytes() >> 20
        )
    }
}

/// What the sizing needs to know of a run.
pub struct MemInput<'a> {
    /// `--board`'s name, for messages.
    pub name: &'a str,
    /// Its model.
    pub model: &'a QemuModel,
    /// `--mem`, if given.
    pub guest: Option<Size>,
    /// The hypervisor's Image (`None`: the guest runs alone).
    pub hypervisor: Option<&'a [u8]>,
    /// Bytes of the file QEMU loads as the hypervisor's initrd.
    pub initrd_len: u64,
    /// The board's DTB file as QEMU is given it (`-dtb`), when the model takes one.
    pub dtb: Option<&'a [u8]>,
    /// The `hyp.` words that size the hypervisor's share.
    pub words: PlanWords,
}

/// The DTB QEMU places for a `-dtb` file of `len` bytes: `load_device_tree` (QEMU's
/// `system/device_tree.c`, 7.2 to 10.0) opens it into a buffer of `(len + 10000) * 2` bytes,
/// and `arm_load_dtb` loads that whole buffer.
pub fn loaded_dtb_len(file_len: u64) -> u64 {
    (file_len + 10_000) * 2
}

/// The machine for `input`, or why the model cannot give the guest what was asked.
pub fn machine_mem(input: &MemInput) -> Result<MachineMem, Refused> {
    let ram = input.model.ram;
    let name = input.name;
    let Some(hyp) = input.hypervisor else {
        // Alone: the guest's RAM is the machine's.
        return match ram.size {
            RamSize::UpTo(max) => {
                let guest = input.guest.map_or_else(|| default_alone(input.model), Size::bytes);
                if guest > max {
                    return Err(Refused(format!(
                        "--mem {}: --board {name} takes at most {} MiB of RAM",
                        Size::from_bytes(guest).map_or(guest.to_string(), |s| s.to_string()),
                        max >> 20
                    )));
                }
                Ok(MachineMem {
                    guest,
                    total: guest,
                    pools: 0,
                    hypervisor: false,
                    withheld: 0,
                    asked: input.guest.is_some(),
                })
            }
            RamSize::Fixed { total, usable } => match input.guest {
                Some(g) if g.bytes() != usable => Err(Refused(format!(
                    "--mem {g}: --board {name} always has {} MiB of RAM, of which software sees {} MiB: leave \
                     --mem out (or give --mem {}M)",
                    total >> 20,
                    usable >> 20,
                    usable >> 20
                ))),
                _ => Ok(MachineMem {
                    guest: usable,
                    total,
                    pools: 0,
                    hypervisor: false,
                    withheld: 0,
                    asked: input.guest.is_some(),
                }),
            },
        };
    };
    let (reserved, no_map) = match input.dtb {
        Some(d) => reserved_of(d).map_err(|e| Refused(format!("--board {name}: its device tree: {e}")))?,
        None => (vec![], vec![]),
    };
    let dtb_len = match (input.model.dtb, input.dtb) {
        (Dtb::Debian(_), Some(d)) => loaded_dtb_len(d.len() as u64),
        _ => load::VIRT_DTB_BYTES,
    };
    let layout = |size: u64| ram.layout(size);
    let share_input = |guest_mem: u64| ShareInput {
        layout: &layout,
        guest_mem,
        hypervisor: Kernel::classify(hyp),
        initrd_len: input.initrd_len,
        dtb_len,
        page: load::VIRT_PAGE,
        reserved: reserved.clone(),
        no_map: no_map.clone(),
        pool: input.words.pool,
        slotpool: input.words.slotpool,
        mirror: input.words.migrate,
    };
    let pools = |p: &hypcore::plan::MemoryPlan| p.slotpool.len() + p.mirror.len();
    let guest = match input.guest {
        Some(g) => g.bytes(),
        None => match ram.default_guest {
            Some(d) => d.bytes(),
            None => {
                largest_guest(&share_input, ram.max(), matches!(ram.size, RamSize::Fixed { .. })).ok_or_else(|| {
                    Refused(format!(
                        "--board {name}: no guest fits beside the hypervisor in the model's {} MiB",
                        ram.max() >> 20
                    ))
                })?
            }
        },
    };
    let asked = Size::from_bytes(guest).map_or(guest.to_string(), |s| s.to_string());
    // The plan leaves the board's no-map regions out of the guest's RAM, inside its span.
    let withheld = |p: &hypcore::plan::MemoryPlan| guest.saturating_sub(hypcore::range::total(&p.guest_ram));
    match ram.size {
        RamSize::UpTo(max) => {
            let s =
                share::machine_for_guest(&share_input(guest)).map_err(|e| Refused(format!("--mem {asked}: {e}")))?;
            if s.machine_mem > max {
                let most = largest_guest(&share_input, max, false)
                    .map_or(String::new(), |g| format!(": at most {} MiB for the guest", g >> 20));
                return Err(Refused(format!(
                    "--mem {asked}: with the hypervisor's {} MiB on top that is {} MiB, and --board {name} takes at most \
                     {} MiB{most}",
                    (s.machine_mem - guest) >> 20,
                    s.machine_mem >> 20,
                    max >> 20
                )));
            }
            Ok(MachineMem {
                guest,
                total: s.machine_mem,
                pools: pools(&s.plan),
                hypervisor: true,
                withheld: withheld(&s.plan),
                asked: input.guest.is_some(),
            })
        }
        RamSize::Fixed { total, .. } => match share::boot_plan(&share_input(guest), total) {
            Ok((_, plan)) => Ok(MachineMem {
                guest,
                total,
                pools: pools(&plan),
                hypervisor: true,
                withheld: withheld(&plan),
                asked: input.guest.is_some(),
            }),
            Err(why) => {
                let most = largest_guest(&share_input, total, true).map_or(String::new(), |g| {
                    format!("; the guest gets at most {} MiB there (--mem {}M)", g >> 20, g >> 20)
                });
                Err(Refused(format!(
                    "--mem {asked}: --board {name} always has {} MiB of RAM: {why}{most}",
                    total >> 20
                )))
            }
        },
    }
}

/// The guest's RAM alone when `--mem` is not given: the model's default, else all it holds.
fn default_alone(model: &QemuModel) -> u64 {
    model.ram.default_guest.map_or(model.ram.max(), Size::bytes)
}

/// The largest guest (whole MiB) the hypervisor can give on a machine of at most `machine`
/// bytes (exactly `machine` when `fixed`).
fn largest_guest<'a>(share_input: &dyn Fn(u64) -> ShareInput<'a>, machine: u64, fixed: bool) -> Option<u64> {
    let fits = |mib: u64| {
        let input = share_input(mib * MIB);
        if fixed {
            share::boot_plan(&input, machine).is_ok()
        } else {
            share::machine_for_guest_within(&input, machine).is_ok()
        }
    };
    let (mut lo, mut hi) = (0u64, machine / MIB);
    // Invariant: `lo` fits (or is 0), `hi + 1` does not.
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    (lo > 0).then_some(lo * MIB)
}

/// The DTB's reserved memory as the hypervisor's plan takes it (`hypcore::plan::PlanInput::
/// from_board`): `no-map` regions and the firmware's spin-table memory are nobody's, the other
/// reservations stay in the guest's RAM with nothing placed in them.
fn reserved_of(dtb: &[u8]) -> Result<(Vec<Range>, Vec<Range>), String> {
    let b = board::Board::from_dtb(dtb).map_err(|e| e.to_string())?;
    let region = |r: board::Region| Range::new(r.base, r.end());
    let no_map: Vec<board::Region> = b.no_map_regions().collect();
    let reserved = b.reserved_regions().filter(|r| !no_map.contains(r)).map(region).collect();
    let nobodys = no_map.into_iter().chain(b.spin_table_regions()).map(region).collect();
    Ok((reserved, nobodys))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{find, GIB};

    /// A 4.8 MiB hypervisor Image header (its BSS included).
    fn hyp() -> Vec<u8> {
        let mut f = vec![0u8; 4096];
        f[16..24].copy_from_slice(&0x4d_6000u64.to_le_bytes());
        f[0x38..0x3c].copy_from_slice(b"ARM\x64");
        f
    }

    fn input<'a>(name: &'a str, guest: Option<Size>, hyp: Option<&'a [u8]>) -> MemInput<'a> {
        MemInput {
            name,
            model: find(name).unwrap().model(),
            guest,
            hypervisor: hyp,
            initrd_len: 6 << 20,
            dtb: None,
            words: PlanWords::default(),
        }
    }

    #[test]
    fn virt_gives_the_guest_mem_and_the_hypervisor_its_share_on_top() {
        let h = hyp();
        let m = machine_mem(&input("virt", None, Some(&h))).unwrap();
        assert_eq!(m.guest, GIB, "virt's default guest: 1 GiB");
        assert!(m.total > GIB && m.total - GIB <= 23 * MIB, "{m:?}");
        assert!(m.describe().starts_with(&format!(
            "QEMU gets {} MiB of RAM: 1024 MiB for the guest (the default; --mem sets it) + ",
            m.total >> 20
        )));
        let alone = machine_mem(&input("virt", Some(Size::mib(2048)), None)).unwrap();
        assert_eq!((alone.guest, alone.total), (2 * GIB, 2 * GIB));
        assert_eq!(alone.describe(), "QEMU gets 2048 MiB of RAM (--mem), all the guest's");
        let default = machine_mem(&input("virt", None, None)).unwrap();
        assert!(default.describe().ends_with("(the default; --mem sets it), all the guest's"), "{default:?}");
        let asked = machine_mem(&input("virt", Some(Size::gib(1)), Some(&h))).unwrap();
        assert!(asked.describe().contains("1024 MiB for the guest (--mem)"), "{}", asked.describe());
        let four = machine_mem(&input("virt", Some(Size::gib(4)), Some(&h))).unwrap();
        assert!(
            four.hypervisor_bytes() > 256 * MIB && four.hypervisor_bytes() < 300 * MIB,
            "RAM/16 of frames: {four:?}"
        );
    }

    /// On a board model whose RAM is chosen, `--mem` is the guest's too; the machine may not
    /// outgrow the model, and the refusal says how much the guest can have.
    #[test]
    fn a_board_gives_the_guest_mem_or_says_how_much_it_can() {
        let h = hyp();
        let m = machine_mem(&input("imx8mp-evk", Some(Size::gib(1)), Some(&h))).unwrap();
        assert_eq!(m.guest, GIB);
        assert!(m.total > GIB && m.total <= GIB + 23 * MIB, "{m:?}");
        let e = machine_mem(&input("imx8mp-evk", Some(Size::gib(3)), Some(&h))).unwrap_err().0;
        assert!(e.contains("takes at most 3072 MiB") && e.contains("at most"), "{e}");
        // Without --mem: the most the model holds, which is exactly what the refusal offers.
        let most = machine_mem(&input("zcu102", None, Some(&h))).unwrap();
        assert!(most.total <= 2 * GIB && most.guest > 1900 * MIB, "{most:?}");
        let one_more = Size::from_bytes(most.guest + MIB).unwrap();
        let e = machine_mem(&input("zcu102", Some(one_more), Some(&h))).unwrap_err().0;
        assert!(e.contains(&format!("at most {} MiB for the guest", most.guest >> 20)), "{e}");
        // Alone, the board's RAM is the guest's.
        let alone = machine_mem(&input("zcu102", Some(Size::gib(1)), None)).unwrap();
        assert_eq!((alone.guest, alone.total), (GIB, GIB));
        assert!(machine_mem(&input("zcu102", Some(Size::gib(3)), None)).unwrap_err().0.contains("at most 2048"));
    }

    /// The Pi 4's RAM is fixed: the guest gets what is left, and `--mem` may only ask for it.
    #[test]
    fn a_fixed_board_has_one_answer() {
        let h = hyp();
        let m = machine_mem(&input("pi4", None, Some(&h))).unwrap();
        assert_eq!(m.total, 2 * GIB);
        assert!(m.guest < 960 * MIB && m.guest > 900 * MIB, "{m:?}");
        assert!(machine_mem(&input("pi4", Some(Size::from_bytes(m.guest).unwrap()), Some(&h))).is_ok());
        let e = machine_mem(&input("pi4", Some(Size::gib(1)), Some(&h))).unwrap_err().0;
        assert!(e.contains(&format!("at most {} MiB", m.guest >> 20)), "{e}");
        let alone = machine_mem(&input("pi4", None, None)).unwrap();
        assert_eq!((alone.guest, alone.total), (960 * MIB, 2 * GIB));
        assert!(alone.describe().contains("the guest sees 960 MiB"), "{}", alone.describe());
        assert!(machine_mem(&input("pi4", Some(Size::gib(1)), None)).unwrap_err().0.contains("--mem 960M"));
    }

    /// The line says how much of the guest's RAM the board keeps and what its kernel counts
    /// (the boards test holds the figure to the ZCU102's plan and its kernel).
    #[test]
    fn memory_the_board_keeps_from_the_guest_is_said() {
        let m = MachineMem {
            guest: GIB,
            total: GIB + 22 * MIB,
            pools: 0,
            hypervisor: true,
            withheld: 512 << 10,
            asked: true,
        };
        assert!(m.describe().contains("1024 MiB for the guest (--mem, of which the board's device tree keeps 512 KiB"));
        assert!(m.describe().contains("counts 1048064 KiB"), "{}", m.describe());
        let plain = MachineMem { withheld: 0, ..m };
        assert!(!plain.describe().contains("keeps"), "{}", plain.describe());
    }

    #[test]
    fn qemu_opens_a_dtb_file_into_twice_its_size_and_more() {
        assert_eq!(loaded_dtb_len(50_000), 120_000);
    }
}
