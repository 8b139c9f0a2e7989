//! Keeps a CPU switching between address spaces: yields for `ms=N` milliseconds (default 200),
//! checking its own memory stays its own. With several of these and `asid_bits=` small, ASIDs
//! roll over while other programs run. With `left=N` it also keeps going while more than N
//! programs of the boot's list have not ended (started or not): N spinners given `left=N` run
//! exactly as long as the other programs, however slowly the machine runs them.
#![cfg_attr(target_os = "none", no_std, no_main)]

use user::{map, prot, sys, PAGE_SIZE};

user::entry!(run);

fn run(args: &str) -> i32 {
    let ms: u64 = abi::programs::uint(args, "ms").unwrap_or(200);
    let left = abi::programs::uint(args, "left");
    let others_run =
        || left.is_some_and(|n| sys::sysctl(user::sysctl::PROGRAMS_LEFT, abi::syscall::SYSCTL_GET).unwrap_or(0) > n);
    let Ok(page) = sys::mmap(0, PAGE_SIZE, prot::READ | prot::WRITE, map::PRIVATE | map::ANONYMOUS) else {
        return 2;
    };
    let t0 = sys::clock(abi::syscall::clock::MONOTONIC).unwrap_or(0);
    let mut k: u64 = 0;
    loop {
        k += 1;
        // SAFETY: this program's own read-write page.
        unsafe { core::ptr::write_volatile(page as *mut u64, k) };
        sys::yield_now();
        // SAFETY: as above.
        if unsafe { core::ptr::read_volatile(page as *const u64) } != k {
            user::println!("spin: my page changed under me");
            return 1;
        }
        if sys::clock(abi::syscall::clock::MONOTONIC).unwrap_or(0) > t0 + ms * 1_000_000 && !others_run() {
            break;
        }
    }
    0
}
