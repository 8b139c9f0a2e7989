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

const AT_FDCWD: i64 = -100;
pub const O_RDONLY: u64 = 0;
pub const O_RDWR: u64 = 2;
pub const O_SYNC: u64 = 0o4010000;
pub const PROT_RW: u64 = 3;
pub const MAP_SHARED: u64 = 1;
pub const MAP_PRIVATE: u64 = 2;
pub const MAP_ANONYMOUS: u64 = 0x20;
pub const MAP_POPULATE: u64 = 0x8000;
pub const MAP_LOCKED: u64 = 0x2000;
pub const MADV_NOHUGEPAGE: u64 = 15;
const CLOCK_MONOTONIC: u64 = 1;

fn syscall(n: u64, a: [u64; 6]) -> i64 {
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

pub fn munmap(addr: u64, len: u64) {
    syscall(SYS_MUNMAP, [addr, len, 0, 0, 0, 0]);
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

// What this block guarantees: at `_start` the kernel left argc at [sp], then argv, NULL, envp,
// NULL; x0 gets that stack address and `start` never returns (it calls exit_group).
core::arch::global_asm!(".globl _start", "_start:", "mov x0, sp", "mov x29, xzr", "mov x30, xzr", "bl {start}", "b .", start = sym start);

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

extern "C" fn start(sp: *const u64) -> ! {
    // SAFETY: the initial stack layout of a Linux process (see the block above).
    let args = unsafe {
        let argc = *sp as usize;
        let argv = core::slice::from_raw_parts(sp.add(1) as *const *const u8, argc);
        Args { argv, envp: sp.add(2 + argc) as *const *const u8 }
    };
    exit(crate::main(&args))
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    say!("pgtlab-dirty: panic: {info}");
    exit(101)
}
