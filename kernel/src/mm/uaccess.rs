//! Kernel access to user memory: copies made only with the unprivileged loads and stores
//! (`LDTRB` / `STTRB`), so the kernel gets exactly the running task's rights (PAN does not
//! apply to them, and a page the task may not write cannot be written for it either), and
//! never crash the kernel: a fault inside a copy is resolved like the task's own fault (a
//! demand-zero page, a spurious fault) and retried, or the copy stops and reports how much is
//! left (`EFAULT` for the system call).
//!
//! The copy routines are assembly between `__uaccess_start` and `__uaccess_end`; the exception
//! handler recognises a fault there ([`fixup`]) and resumes at `__uaccess_fixup`, which returns
//! the count of bytes not copied.

use abi::syscall::USER_END;

// What this block guarantees: each routine copies `len` bytes one at a time, the user side
// only through LDTRB/STTRB (EL0 permissions), and returns in x0 the bytes left (0: all copied).
// x2 always holds the bytes left, so `__uaccess_fixup` (where the exception handler resumes a
// faulting copy) returns exactly that. Neither uses the stack; both clobber x3 and the flags.
core::arch::global_asm!(
    r#"
.section .text.uaccess, "ax"
.global __uaccess_start
.global __uaccess_end
.global __uaccess_fixup
.global __uaccess_from_user
.global __uaccess_to_user
__uaccess_start:
// x0 = kernel destination, x1 = user source, x2 = length
__uaccess_from_user:
    cbz     x2, 2f
1:  ldtrb   w3, [x1]
    strb    w3, [x0], #1
    add     x1, x1, #1
    subs    x2, x2, #1
    b.ne    1b
2:  mov     x0, x2
    ret
// x0 = user destination, x1 = kernel source, x2 = length
__uaccess_to_user:
    cbz     x2, 4f
3:  ldrb    w3, [x1], #1
    sttrb   w3, [x0]
    add     x0, x0, #1
    subs    x2, x2, #1
    b.ne    3b
4:  mov     x0, x2
    ret
__uaccess_end:
__uaccess_fixup:
    mov     x0, x2
    ret
"#
);

extern "C" {
    fn __uaccess_start();
    fn __uaccess_end();
    fn __uaccess_fixup();
    fn __uaccess_from_user(dst: *mut u8, src: u64, len: usize) -> usize;
    fn __uaccess_to_user(dst: u64, src: *const u8, len: usize) -> usize;
}

/// Whether `[addr, addr + len)` is all user addresses.
pub fn user_range_ok(addr: u64, len: usize) -> bool {
    addr.checked_add(len as u64).is_some_and(|end| end <= USER_END)
}

/// Copies `dst.len()` bytes from user address `src` (the running task's rights).
///
/// # Errors
///
/// `Err(())` if any byte cannot be read (the copy stopped there).
pub fn copy_from_user(dst: &mut [u8], src: u64) -> Result<(), ()> {
    if !user_range_ok(src, dst.len()) {
        return Err(());
    }
    // SAFETY: `dst` is a kernel buffer of that length; the user side is accessed only with
    // unprivileged loads, whose faults the exception handler resolves or turns into an early
    // return through `__uaccess_fixup`.
    let left = unsafe { __uaccess_from_user(dst.as_mut_ptr(), src, dst.len()) };
    if left == 0 {
        Ok(())
    } else {
        Err(())
    }
}

/// Copies `src` to user address `dst` (the running task's rights).
///
/// # Errors
///
/// `Err(())` if any byte cannot be written (the copy stopped there).
pub fn copy_to_user(dst: u64, src: &[u8]) -> Result<(), ()> {
    if !user_range_ok(dst, src.len()) {
        return Err(());
    }
    // SAFETY: `src` is a kernel buffer of that length; the user side is written only with
    // unprivileged stores (as `copy_from_user`).
    let left = unsafe { __uaccess_to_user(dst, src.as_ptr(), src.len()) };
    if left == 0 {
        Ok(())
    } else {
        Err(())
    }
}

/// Reads a `u64` from user memory.
pub fn read_u64(addr: u64) -> Result<u64, ()> {
    let mut b = [0u8; 8];
    copy_from_user(&mut b, addr)?;
    Ok(u64::from_le_bytes(b))
}

/// Whether a fault at `elr` happened inside a user copy.
pub fn in_copy(elr: u64) -> bool {
    (__uaccess_start as *const () as u64..__uaccess_end as *const () as u64).contains(&elr)
}

/// Where a faulting copy resumes to report the bytes left.
pub fn fixup() -> u64 {
    __uaccess_fixup as *const () as u64
}
