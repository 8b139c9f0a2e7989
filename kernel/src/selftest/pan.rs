//! `test=pan`: the user/kernel split from the kernel's side. With a user address space in
//! TTBR0, an ordinary EL1 load of a user page must fault when the CPU has FEAT_PAN (PSTATE.PAN
//! is set), while the unprivileged load the kernel's user copies use goes through; executing a
//! user page at EL1 must fault whatever PAN says (user pages are PXN). Prints one `pan` record.

use crate::mm::fault::{probe_exec, probe_read};
use crate::mm::frames::PAGE;
use crate::mm::uaccess;
use crate::mm::user::{self, UserSpace};
use aarch64_cpu::registers::{Readable, ID_AA64MMFR1_EL1};
use alloc::format;
use alloc::string::String;
use uspace::{Access, FaultKind, FaultOutcome, Mmap};

/// A64 `RET`.
const RET: u32 = 0xd65f_03c0;

pub fn run() -> Result<(), String> {
    let pan = (ID_AA64MMFR1_EL1.get() >> 20) & 0xf != 0;
    let space = UserSpace::new().map_err(|e| format!("pan: address space: {e}"))?;
    let rwx = abi::syscall::prot::READ | abi::syscall::prot::WRITE;
    let va = space.with(|s, t| s.mmap(t, Mmap::anon(0, PAGE, rwx, 0))).map_err(|e| format!("pan: mmap: {e}"))?;
    if space.fault(va, Access::Write, FaultKind::Translation) != FaultOutcome::Mapped {
        return Err("pan: the page was not populated".into());
    }
    let cpu = crate::arch::cpu::this_cpu();
    user::switch_to(cpu, Some(&space));
    let written = uaccess::copy_to_user(va, &RET.to_le_bytes());
    let privileged = probe_read(va);
    let unprivileged = uaccess::read_u64(va);
    // Make the page executable at EL0 only: EL1 must still not execute it (PXN; the fetch
    // faults before any instruction cache is consulted).
    let _ = space.with(|s, t| s.mprotect(t, va, PAGE, abi::syscall::prot::READ | abi::syscall::prot::EXEC));
    let exec = probe_exec(va);
    user::switch_to(cpu, None);
    drop(space);
    let mut r = abi::report::Record::new("pan");
    r.bool("pan", pan)
        .bool("privileged_load_faulted", privileged.is_err())
        .bool("unprivileged_load_ok", unprivileged.is_ok())
        .bool("unprivileged_store_ok", written.is_ok())
        .bool("privileged_exec_faulted", exec.is_err());
    rt::println!("{r}");
    if written.is_err() || unprivileged != Ok(RET as u64) {
        return Err(format!("pan: the kernel's user copies failed: store {written:?}, load {unprivileged:?}"));
    }
    if pan && privileged.is_ok() {
        return Err("pan: an ordinary EL1 load of a user page went through with FEAT_PAN".into());
    }
    if let Err(f) = privileged {
        if !f.is_permission() {
            return Err(format!("pan: the EL1 load took a {}, expected a permission fault", f.describe()));
        }
    }
    if exec.is_ok() {
        return Err("pan: EL1 executed a user page".into());
    }
    rt::println!(
        "kernel: pan: PAN {}, EL1 load of a user page {}, user copies work, EL1 never executes user pages",
        if pan { "on" } else { "not implemented" },
        if privileged.is_err() { "faults" } else { "goes through" }
    );
    Ok(())
}
