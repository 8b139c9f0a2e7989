//! Boot arguments: words starting with `hyp.` are the hypervisor's, the rest is the guest's
//! command line.
//!
//! * `hyp.test=el2-fault`: after setup, read an unmapped address at EL2 (tests the fatal
//!   exception report).
//! * `hyp.conduit=hvc|smc`: the PSCI conduit written into the guest's DTB (default: the host
//!   DTB's). Both trap to EL2 either way.
//! * `hyp.pool=SIZE`: the hypervisor's page-table frame pool (default: 16 MiB below 2 GiB of
//!   RAM, else RAM / 16 up to 512 MiB; a 64 GiB memslot of 4 KiB pages needs ~130 MiB).
//! * `hyp.slotpool=SIZE`: physical memory reserved (from the top of RAM) to back memslots,
//!   mapped repeatedly (default none: MEMSLOT_CREATE answers NO_MEMORY). 1 GiB or more is
//!   1 GiB aligned, so 1 GiB blocks can map it.
//! * `hyp.check-split`: after every eager split, check each new page against the memslot's
//!   pool mapping (tests).
//!
//! SIZE is bytes, or a number with `K`, `M` or `G`.

use alloc::string::String;
use alloc::vec::Vec;

#[derive(Debug, Clone, Default)]
pub struct Options {
    pub guest_bootargs: String,
    pub test_el2_fault: bool,
    /// PSCI conduit for the guest's DTB; `None` keeps the host's.
    pub conduit: Option<board::PsciMethod>,
    /// Address the el2-fault test reads.
    pub fault_addr: u64,
    /// `hyp.pool=`.
    pub pool: Option<u64>,
    /// `hyp.slotpool=`.
    pub slotpool: Option<u64>,
    /// `hyp.check-split`.
    pub check_split: bool,
    /// Words we did not understand (reported, never silently dropped).
    pub unknown: Vec<String>,
}

pub fn parse(bootargs: &str) -> Options {
    let mut o = Options { fault_addr: 0xdead_0000, ..Default::default() };
    let mut guest = Vec::new();
    for w in bootargs.split_ascii_whitespace() {
        match w.strip_prefix("hyp.") {
            None => guest.push(w),
            Some("test=el2-fault") => o.test_el2_fault = true,
            Some("conduit=hvc") => o.conduit = Some(board::PsciMethod::Hvc),
            Some("conduit=smc") => o.conduit = Some(board::PsciMethod::Smc),
            Some("check-split") => o.check_split = true,
            Some(x) if x.starts_with("pool=") => match parse_size(&x[5..]) {
                Some(v) => o.pool = Some(v),
                None => o.unknown.push(String::from(w)),
            },
            Some(x) if x.starts_with("slotpool=") => match parse_size(&x[9..]) {
                Some(v) => o.slotpool = Some(v),
                None => o.unknown.push(String::from(w)),
            },
            Some(_) => o.unknown.push(String::from(w)),
        }
    }
    o.guest_bootargs = guest.join(" ");
    for w in &o.unknown {
        rt::println!("hyp: warning: unknown hypervisor option {w:?} ignored");
    }
    o
}

/// `123`, `64K`, `16M`, `1G` (bytes).
pub fn parse_size(s: &str) -> Option<u64> {
    let (num, shift) = match s.as_bytes().last()? {
        b'K' | b'k' => (&s[..s.len() - 1], 10),
        b'M' | b'm' => (&s[..s.len() - 1], 20),
        b'G' | b'g' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = num.parse().ok()?;
    n.checked_mul(1 << shift)
}
