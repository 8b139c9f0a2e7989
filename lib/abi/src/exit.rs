//! Exit codes of a run (QEMU's exit status, through semihosting).
//!
//! 0 is success. A guest's own failure statuses pass through its exit hypercall unchanged (low
//! 8 bits, never turned into 0); the hypervisor's verdicts use the values below.

/// A kernel self-test or boot step failed and the kernel said so.
pub const GUEST_FAILURE: u32 = 1;
/// The kernel panicked.
pub const GUEST_PANIC: u32 = 2;
/// The kernel took an exception it did not expect.
pub const GUEST_EXCEPTION: u32 = 3;
/// The hypervisor stopped the guest: an access to memory it does not own, or an exit the
/// hypervisor cannot handle.
pub const GUEST_FAULT: u32 = 4;
/// The hypervisor itself panicked, failed to boot, or took an unexpected exception.
pub const HYP_FAULT: u32 = 5;

/// What an exit code means.
pub fn describe(code: i32) -> &'static str {
    match code {
        0 => "success",
        1 => "guest failure",
        2 => "guest panic",
        3 => "guest exception",
        4 => "guest fault stopped by the hypervisor",
        5 => "hypervisor fault",
        _ => "other",
    }
}
