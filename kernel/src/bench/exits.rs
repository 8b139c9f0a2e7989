//! `bench=exits`: what a guest exit costs. A null hypercall (handled entirely at EL2) against a
//! PSCI_VERSION call (trapped, then forwarded by the hypervisor to the firmware), interleaved.

use crate::arch::power::Host;
use crate::perf::Pmu;
use crate::{arch::machine::KERNEL, arch::smccc};
use abi::stats::{ratio, timing_fields, Summary};
use alloc::string::String;
use alloc::vec::Vec;

const ROUNDS: usize = 2000;

pub fn run() -> Result<(), String> {
    if KERNEL.get().unwrap().host != Host::Hypervisor {
        return Err("bench=exits needs the hypervisor".into());
    }
    let pmu = Pmu::enable();
    let calls: [(&str, u64); 2] =
        [("null hypercall", abi::hypercall::VERSION), ("PSCI_VERSION forwarded", abi::psci::VERSION)];
    let mut ns: [Vec<u64>; 2] = [Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS)];
    let mut insns: [Vec<u64>; 2] = [Vec::with_capacity(ROUNDS), Vec::with_capacity(ROUNDS)];
    for _ in 0..ROUNDS {
        for (i, (_, fid)) in calls.iter().enumerate() {
            let (t, n, _) = pmu.measure(|| smccc::call(*fid, 0, 0, 0));
            ns[i].push(t);
            insns[i].push(n);
        }
    }
    let base = Summary::of(&mut ns[0]).median;
    for (i, (name, _)) in calls.iter().enumerate() {
        let t = Summary::of(&mut ns[i]);
        let n = Summary::of(&mut insns[i]);
        let mut r = abi::report::Record::new("bench");
        r.str("bench", "exits").str("case", name).u64("n", t.n as u64);
        timing_fields(&mut r, &t, &n).f64("vs_null", ratio(t.median, base), 3);
        rt::println!("{r}");
    }
    Ok(())
}
