//! The few Linux system calls the program needs (arm64: number in x8, `svc #0`, result in x0,
//! negative errno on failure), the process entry point, and output without an allocator.

use core::fmt::Write;

const SYS_OPENAT: u64 = 56;
const SYS_CLOSE: u64 = 57;
const SYS_PREAD64: u64 = 67;
const SYS_WRITE: u64 = 64;
const SYS_EXIT_GROUP: u64 = 94;
const SYS_CLOCK_GETTIME: u64 = 113;
const SYS_MUNMAP: u64 = 215;
const SYS_MMAP: u64 = 222;
const SYS_MADVISE: u64 = 233;
const SYS_IOCTL: u64 = 29;
const SYS_GETDENTS64: u64 = 61;
const SYS_READ: u64 = 63;
const SYS_EXIT: u64 = 93;
const SYS_FUTEX: u64 = 98;
const SYS_SCHED_SETAFFINITY: u64 = 122;
const SYS_SCHED_GETAFFINITY: u64 = 123;
const SYS_SCHED_YIELD: u64 = 124;
const SYS_PRCTL: u64 = 167;
const SYS_GETCPU: u64 = 168;
const SYS_CLONE: u64 = 220;
const SYS_MPROTECT: u64 = 226;
const SYS_PERF_EVENT_OPEN: u64 = 241;

const AT_FDCWD: i64 = -100;
pub const O_RDONLY: u64 = 0;
pub const O_WRONLY: u64 = 1;
pub const O_RDWR: u64 = 2;
pub const O_SYNC: u64 = 0o4010000;
pub const PROT_READ: u64 = 1;
pub const PROT_RW: u64 = 3;
pub const MAP_SHARED: u64 = 1;
pub const MAP_PRIVATE: u64 = 2;
pub const MAP_ANONYMOUS: u64 = 0x20;
pub const MAP_POPULATE: u64 = 0x8000;
pub const MAP_LOCKED: u64 = 0x2000;
pub const MADV_NOHUGEPAGE: u64 = 15;
const CLOCK_MONOTONIC: u64 = 1;

pub(crate) fn syscall(n: u64, a: [u64; 6]) -> i64 {
    let r: i64;
    // SAFETY: a Linux system call; the kernel reads only what the arguments point to (each
    // caller passes valid buffers for its call) and clobbers only x0.
    unsafe {
        core::arch::asm!(
            "svc #0",
            in("x8") n,
            inlateout("x0") a[0] => r,
            in("x1") a[1], in("x2") a[2], in("x3") a[3], in("x4") a[4], in("x5") a[5],
            options(nostack),
        )
    };
    r
}

/// A failed call: the call's name and errno.
#[derive(Debug, Clone, Copy)]
pub struct Errno(pub &'static str, pub i64);

fn check(what: &'static str, r: i64) -> Result<u64, Errno> {
    if r < 0 {
        Err(Errno(what, -r))
    } else {
        Ok(r as u64)
    }
}

/// `openat(AT_FDCWD, path, flags)`; `path` must end with a NUL.
pub fn open(path: &[u8], flags: u64) -> Result<u64, Errno> {
    assert_eq!(path.last(), Some(&0), "paths are NUL-terminated");
    check("open", syscall(SYS_OPENAT, [AT_FDCWD as u64, path.as_ptr() as u64, flags, 0, 0, 0]))
}

pub fn close(fd: u64) {
    syscall(SYS_CLOSE, [fd, 0, 0, 0, 0, 0]);
}

/// Reads up to `buf.len()` bytes at `offset`.
pub fn pread(fd: u64, buf: &mut [u8], offset: u64) -> Result<u64, Errno> {
    check("pread", syscall(SYS_PREAD64, [fd, buf.as_mut_ptr() as u64, buf.len() as u64, offset, 0, 0]))
}

pub fn write_all(fd: u64, mut b: &[u8]) {
    while !b.is_empty() {
        let r = syscall(SYS_WRITE, [fd, b.as_ptr() as u64, b.len() as u64, 0, 0, 0]);
        if r <= 0 {
            return;
        }
        b = &b[r as usize..];
    }
}

pub fn mmap(len: u64, prot: u64, flags: u64, fd: i64, offset: u64) -> Result<u64, Errno> {
    check("mmap", syscall(SYS_MMAP, [0, len, prot, flags, fd as u64, offset]))
}

pub fn munmap(addr: u64, len: u64) -> Result<u64, Errno> {
    check("munmap", syscall(SYS_MUNMAP, [addr, len, 0, 0, 0, 0]))
}

pub fn mprotect(addr: u64, len: u64, prot: u64) -> Result<u64, Errno> {
    check("mprotect", syscall(SYS_MPROTECT, [addr, len, prot, 0, 0, 0]))
}

/// `read(fd, buf)`.
pub fn read(fd: u64, buf: &mut [u8]) -> Result<u64, Errno> {
    check("read", syscall(SYS_READ, [fd, buf.as_mut_ptr() as u64, buf.len() as u64, 0, 0, 0]))
}

/// `write(fd, buf)`, once.
pub fn write(fd: u64, buf: &[u8]) -> Result<u64, Errno> {
    check("write", syscall(SYS_WRITE, [fd, buf.as_ptr() as u64, buf.len() as u64, 0, 0, 0]))
}

pub fn ioctl(fd: u64, req: u64, arg: u64) -> Result<u64, Errno> {
    check("ioctl", syscall(SYS_IOCTL, [fd, req, arg, 0, 0, 0]))
}

/// Calls `f` with the name of every entry of the directory at `path` (NUL-terminated; `.`
/// and `..` included), read with `getdents64`. Names that are not UTF-8 are skipped.
pub fn for_each_dir_entry(path: &[u8], mut f: impl FnMut(&str)) -> Result<(), Errno> {
    let fd = open(path, O_RDONLY)?;
    let mut buf = [0u8; 4096];
    let result = loop {
        let n = match check(
            "getdents64",
            syscall(SYS_GETDENTS64, [fd, buf.as_mut_ptr() as u64, buf.len() as u64, 0, 0, 0]),
        ) {
            Ok(0) => break Ok(()),
            Ok(n) => n as usize,
            Err(e) => break Err(e),
        };
        // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name (NUL-terminated).
        let mut at = 0;
        while at + 19 <= n {
            let reclen = u16::from_le_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen < 19 || at + reclen > n {
                break;
            }
            let name = &buf[at + 19..at + reclen];
            let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            if let Ok(s) = core::str::from_utf8(&name[..len]) {
                f(s);
            }
            at += reclen;
        }
    };
    close(fd);
    result
}

/// `getcpu(&cpu, NULL, NULL)`: the CPU the caller runs on.
#[inline(always)]
pub fn getcpu() -> u64 {
    let mut cpu = 0u32;
    syscall(SYS_GETCPU, [&mut cpu as *mut u32 as u64, 0, 0, 0, 0, 0]);
    cpu as u64
}

pub fn sched_yield() {
    syscall(SYS_SCHED_YIELD, [0; 6]);
}

/// The calling thread's allowed CPUs (the first 64).
pub fn sched_getaffinity() -> Result<u64, Errno> {
    let mut mask = 0u64;
    check("sched_getaffinity", syscall(SYS_SCHED_GETAFFINITY, [0, 8, &mut mask as *mut u64 as u64, 0, 0, 0]))?;
    Ok(mask)
}

/// Limits the calling thread to the CPUs of `mask`.
pub fn sched_setaffinity(mask: u64) -> Result<u64, Errno> {
    check("sched_setaffinity", syscall(SYS_SCHED_SETAFFINITY, [0, 8, &mask as *const u64 as u64, 0, 0, 0]))
}

pub fn prctl(op: u64, a: u64) -> Result<u64, Errno> {
    check("prctl", syscall(SYS_PRCTL, [op, a, 0, 0, 0, 0]))
}
pub const PR_SET_THP_DISABLE: u64 = 41;

/// `perf_event_open(attr, pid, cpu, -1, 0)`.
pub fn perf_event_open(attr: &[u64; 17], pid: i64, cpu: i64) -> Result<u64, Errno> {
    check(
        "perf_event_open",
        syscall(SYS_PERF_EVENT_OPEN, [attr.as_ptr() as u64, pid as u64, cpu as u64, u64::MAX, 0, 0]),
    )
}

/// Waits while the futex word at `addr` holds `val`.
pub fn futex_wait(addr: &core::sync::atomic::AtomicU32, val: u32) {
    const FUTEX_WAIT: u64 = 0;
    syscall(SYS_FUTEX, [addr.as_ptr() as u64, FUTEX_WAIT, val as u64, 0, 0, 0]);
}

/// Ends the calling thread only (`exit`, not `exit_group`).
pub fn exit_thread(code: i32) -> ! {
    syscall(SYS_EXIT, [code as u64, 0, 0, 0, 0, 0]);
    loop {
        core::hint::spin_loop();
    }
}

/// Starts a thread of this process running `f` on the stack ending at `stack_top` (16-byte
/// aligned); `tid` holds the thread's id until it has ended (then 0, with a futex wake).
///
/// # Safety
///
/// The stack must stay unused by anything else until `tid` reads 0; `f` must not return and
/// must end with [`exit_thread`].
pub unsafe fn clone_thread(
    stack_top: u64,
    f: extern "C" fn() -> !,
    tid: &core::sync::atomic::AtomicU32,
) -> Result<u64, Errno> {
    const CLONE_VM: u64 = 0x100;
    const CLONE_FS: u64 = 0x200;
    const CLONE_FILES: u64 = 0x400;
    const CLONE_SIGHAND: u64 = 0x800;
    const CLONE_THREAD: u64 = 0x10000;
    const CLONE_SYSVSEM: u64 = 0x40000;
    const CLONE_PARENT_SETTID: u64 = 0x100000;
    const CLONE_CHILD_CLEARTID: u64 = 0x200000;
    let flags = CLONE_VM
        | CLONE_FS
        | CLONE_FILES
        | CLONE_SIGHAND
        | CLONE_THREAD
        | CLONE_SYSVSEM
        | CLONE_PARENT_SETTID
        | CLONE_CHILD_CLEARTID;
    let t = tid.as_ptr() as u64;
    let r: i64;
    // SAFETY: clone(flags, stack, parent_tid, tls, child_tid). The child starts on its own
    // stack with the parent's registers: x0 = 0 there, and it calls `f` (in x10), which never
    // returns; the parent gets the child's id in x0 and goes on. Per the caller, nothing else
    // uses the stack.
    unsafe {
        core::arch::asm!(
            "svc #0",
            "cbnz x0, 1f",
            "mov x29, xzr",
            "mov x30, xzr",
            "blr x10",
            "brk #0",
            "1:",
            in("x8") SYS_CLONE,
            inlateout("x0") flags => r,
            in("x1") stack_top,
            in("x2") t,
            in("x3") 0u64,
            in("x4") t,
            in("x10") f as usize as u64,
            options(nostack),
        )
    };
    check("clone", r)
}

pub fn madvise(addr: u64, len: u64, advice: u64) -> Result<u64, Errno> {
    check("madvise", syscall(SYS_MADVISE, [addr, len, advice, 0, 0, 0]))
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = [0i64; 2];
    syscall(SYS_CLOCK_GETTIME, [CLOCK_MONOTONIC, ts.as_mut_ptr() as u64, 0, 0, 0, 0]);
    ts[0] as u64 * 1_000_000_000 + ts[1] as u64
}

pub fn exit(code: i32) -> ! {
    syscall(SYS_EXIT_GROUP, [code as u64, 0, 0, 0, 0, 0]);
    loop {
        core::hint::spin_loop();
    }
}

/// A line of output built in a fixed buffer and written with one `write(2)`.
pub struct Line {
    buf: [u8; 2048],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Self::new()
    }
}

impl Line {
    pub const fn new() -> Self {
        Line { buf: [0; 2048], len: 0 }
    }
    /// Writes the line (with a newline) to stdout.
    pub fn emit(mut self) {
        let _ = self.write_str("\n");
        write_all(1, &self.buf[..self.len]);
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// `println!` to stdout.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {{
        let mut l = $crate::sys::Line::new();
        let _ = core::fmt::Write::write_fmt(&mut l, format_args!($($t)*));
        l.emit();
    }};
}

/// Arguments and environment, as NUL-terminated byte strings without the NUL.
pub struct Args {
    argv: &'static [*const u8],
    envp: *const *const u8,
}

unsafe fn c_str(p: *const u8) -> &'static [u8] {
    let mut n = 0;
    // SAFETY: the kernel put NUL-terminated strings on the initial stack, which lives as long
    // as the process.
    unsafe {
        while *p.add(n) != 0 {
            n += 1;
        }
        core::slice::from_raw_parts(p, n)
    }
}

impl Args {
    /// The arguments after the program name.
    pub fn args(&self) -> impl Iterator<Item = &'static [u8]> + '_ {
        // SAFETY: argv[1..argc] are the kernel's NUL-terminated strings.
        self.argv.iter().skip(1).map(|&p| unsafe { c_str(p) })
    }
    /// The value of environment variable `name`.
    pub fn env(&self, name: &[u8]) -> Option<&'static [u8]> {
        let mut p = self.envp;
        // SAFETY: envp is a NULL-terminated array of NUL-terminated strings on the initial stack.
        unsafe {
            while !(*p).is_null() {
                let s = c_str(*p);
                if s.len() > name.len() && s.starts_with(name) && s[name.len()] == b'=' {
                    return Some(&s[name.len() + 1..]);
                }
                p = p.add(1);
            }
        }
        None
    }
}

impl Args {
    /// The arguments and environment of a process whose initial stack is at `sp`.
    ///
    /// # Safety
    ///
    /// `sp` must be the stack pointer Linux entered the process with: argc at `[sp]`, then
    /// argv, NULL, envp, NULL.
    pub unsafe fn from_initial_stack(sp: *const u64) -> Args {
        // SAFETY: the initial stack layout of a Linux process, per the caller.
        unsafe {
            let argc = *sp as usize;
            let argv = core::slice::from_raw_parts(sp.add(1) as *const *const u8, argc);
            Args { argv, envp: sp.add(2 + argc) as *const *const u8 }
        }
    }
}
