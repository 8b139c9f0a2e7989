//! Tasks sharing this address space: each gets a stack of its own from `mmap`.

use abi::syscall::{map, prot};

/// Bytes of stack per spawned task.
pub const STACK: u64 = 64 * 1024;

/// Starts `entry(arg)` as a new task on CPU `cpu` (`abi::syscall::ANY_CPU`: any), with a fresh
/// stack; returns its task id.
pub fn spawn(entry: extern "C" fn(u64) -> !, arg: u64, cpu: u64) -> Result<u64, i64> {
    let stack = crate::sys::mmap(0, STACK, prot::READ | prot::WRITE, map::PRIVATE | map::ANONYMOUS)?;
    crate::sys::spawn(entry, stack + STACK, arg, cpu)
}
