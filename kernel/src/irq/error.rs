//! [`IrqError`]: why setting up interrupts, or a cross-CPU call, failed.

use alloc::string::{String, ToString};
use core::fmt;

/// Why the interrupt controller, the timer's interrupt or a cross-CPU call could not be set up
/// or completed. `Display` is the message the boot or the self-test reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqError {
    /// The device tree names no interrupt controller.
    NoController,
    /// A GICv2 node without its CPU interface registers.
    NoCpuInterface,
    /// Mapping the controller's registers failed.
    Map(crate::mm::MmError),
    /// `init_cpu` before `init` (no controller yet).
    NotInitialised,
    /// This CPU's interface could not be set up: no GICv3 redistributor matches its MPIDR.
    CpuInterface { cpu: usize, why: gic::v3::NoRedistributor },
    /// An interrupt wired as a PPI that is not one (16..32).
    NotPpi { intid: u32 },
    /// The device tree has no `/timer` node.
    NoTimer,
    /// The `/timer` node lists no virtual timer interrupt.
    NoVirtualTimer,
    /// The virtual timer's interrupt is not a PPI.
    TimerNotPpi { intid: u32 },
    /// The CPUs in `left` did not run a cross-CPU call within 10 s.
    CallTimeout { left: u64 },
}

impl fmt::Display for IrqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IrqError::NoController => f.write_str("device tree has no interrupt controller"),
            IrqError::NoCpuInterface => f.write_str("GICv2 without a CPU interface"),
            IrqError::Map(e) => write!(f, "{e}"),
            IrqError::NotInitialised => f.write_str("irq::init_cpu before irq::init"),
            IrqError::CpuInterface { cpu, why } => write!(f, "CPU {cpu}: {why}"),
            IrqError::NotPpi { intid } => write!(f, "interrupt {intid} is not a PPI"),
            IrqError::NoTimer => f.write_str("device tree has no /timer node (arm,armv8-timer)"),
            IrqError::NoVirtualTimer => f.write_str("the /timer node lists no virtual timer interrupt"),
            IrqError::TimerNotPpi { intid } => write!(f, "the virtual timer's interrupt {intid} is not a PPI"),
            IrqError::CallTimeout { left } => write!(f, "CPUs {left:#x} did not answer a call within 10 s"),
        }
    }
}

impl From<crate::mm::MmError> for IrqError {
    fn from(e: crate::mm::MmError) -> Self {
        IrqError::Map(e)
    }
}

/// The boot and the self-tests report errors as text.
impl From<IrqError> for String {
    fn from(e: IrqError) -> String {
        e.to_string()
    }
}
