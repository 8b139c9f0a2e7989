//! [`PercpuError`]: why setting up the per-CPU areas, or a dynamic per-CPU allocation, failed.

use crate::mm::MmError;
use alloc::string::{String, ToString};
use core::fmt;

/// Why a per-CPU area operation failed. `Display` is the message the boot, the system call's
/// log line or the self-test reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PercpuError {
    /// Mapping an area page or building the per-CPU roots failed.
    Mm(MmError),
    /// `alloc` before `init` mapped the areas.
    NotInitialised,
    /// No free run of `size` bytes is left in the areas (`in_use` of `capacity` bytes).
    Full { size: u64, in_use: u64, capacity: u64 },
    /// Another CPU is making the late mapping right now.
    LateInProgress,
    /// CPU `cpu`'s area has bad canaries or names another CPU (`found_cpu`); `want` is the
    /// canary it should hold.
    Canary { cpu: usize, lo: u64, hi: u64, found_cpu: u64, want: u64 },
}

impl fmt::Display for PercpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            PercpuError::Mm(e) => write!(f, "{e}"),
            PercpuError::NotInitialised => f.write_str("percpu::alloc before percpu::init"),
            PercpuError::Full { size, in_use, capacity } => {
                write!(f, "per-CPU areas full: {size} bytes asked, {in_use} in use of {capacity}")
            }
            PercpuError::LateInProgress => f.write_str("late mapping in progress"),
            PercpuError::Canary { cpu, lo, hi, found_cpu, want } => {
                write!(f, "CPU {cpu}'s area: canaries {lo:#x} {hi:#x}, cpu {found_cpu} (want {want:#x}, {cpu})")
            }
        }
    }
}

impl From<MmError> for PercpuError {
    fn from(e: MmError) -> Self {
        PercpuError::Mm(e)
    }
}

/// The boot and the self-tests report errors as text.
impl From<PercpuError> for String {
    fn from(e: PercpuError) -> String {
        e.to_string()
    }
}
