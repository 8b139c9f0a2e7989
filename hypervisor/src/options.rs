//! Boot arguments: words starting with `hyp.` are the hypervisor's, the rest is the guest's
//! command line.
//!
//! * `hyp.test=el2-fault`: after setup, read an unmapped address at EL2 (tests the fatal
//!   exception report).
//! * `hyp.conduit=hvc|smc`: the PSCI conduit written into the guest's DTB (default: the host
//!   DTB's). Both trap to EL2 either way.

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
            Some(_) => o.unknown.push(String::from(w)),
        }
    }
    o.guest_bootargs = guest.join(" ");
    for w in &o.unknown {
        rt::println!("hyp: warning: unknown hypervisor option {w:?} ignored");
    }
    o
}
