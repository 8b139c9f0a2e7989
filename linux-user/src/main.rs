//! `pgtlab-dirty`: a Linux user program that writes known pages at a known rate while the
//! hypervisor runs dirty logging and pre-copy migration underneath the guest (`hyp.migrate`,
//! hypervisor/src/migrate.rs).
//!
//! It locks `pages=N` anonymous pages in memory, finds their guest-physical addresses in
//! `/proc/self/pagemap`, maps the hypervisor's control page through `/dev/mem` (its address is
//! the `pgtlab_ctl` environment variable the kernel command line sets), registers the pages
//! there, then writes them round-robin at `rate=R` pages per second: each write stores the next
//! value of a counter in the page's first word, which is how the hypervisor tells a written page
//! from a clean one. Between writes it counts units of CPU work: the work rate before the run
//! (baseline, `baseline_ms`) against the rate during it is the guest's slowdown. It starts the
//! run (`scenario=1|2`, `threshold=PAGES`, `rounds=N`), keeps writing until the hypervisor says
//! the run is over, and prints a `linux_dirty` report record. Exit status 0 when the hypervisor
//! found the mirror equal to the guest's memory and no written page missing from a bitmap.
// A bare-metal binary: on the host (`cargo clippy --workspace`, `cargo test --workspace`) it is
// only the stub `main` at the end; every other item is `#[cfg(target_os = "none")]`.
#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
use core::sync::atomic::{compiler_fence, Ordering};
#[cfg(target_os = "none")]
use linux_user::sys::{self, Args, Errno};
#[cfg(target_os = "none")]
use linux_user::{entry, say};

#[cfg(target_os = "none")]
entry!(main);

#[cfg(target_os = "none")]
use abi::control::{reg, state};

#[cfg(target_os = "none")]
const PAGE: u64 = abi::PAGE_SIZE;
#[cfg(target_os = "none")]
const MAX_PAGES: usize = abi::control::MAX_WATCH;

#[cfg(target_os = "none")]
struct Params {
    pages: u64,
    rate: u64,
    scenario: u64,
    threshold: u64,
    rounds: u64,
    baseline_ms: u64,
    timeout_s: u64,
}

#[cfg(target_os = "none")]
fn number(s: &[u8]) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix(b"0x") {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    u64::from_str_radix(core::str::from_utf8(digits).ok()?, radix).ok()
}

#[cfg(target_os = "none")]
fn parse(args: &Args) -> Result<Params, &'static [u8]> {
    let mut p =
        Params { pages: 256, rate: 4000, scenario: 1, threshold: 512, rounds: 30, baseline_ms: 500, timeout_s: 120 };
    for a in args.args() {
        let Some(eq) = a.iter().position(|&c| c == b'=') else { return Err(a) };
        let v = number(&a[eq + 1..]).ok_or(a)?;
        match &a[..eq] {
            b"pages" if (1..=MAX_PAGES as u64).contains(&v) => p.pages = v,
            b"rate" if v > 0 => p.rate = v,
            b"scenario" if v == 1 || v == 2 => p.scenario = v,
            b"threshold" => p.threshold = v,
            b"rounds" if v > 0 => p.rounds = v,
            b"baseline_ms" => p.baseline_ms = v,
            b"timeout_s" if v > 0 => p.timeout_s = v,
            _ => return Err(a),
        }
    }
    Ok(p)
}

#[cfg(target_os = "none")]
struct Control(u64);

#[cfg(target_os = "none")]
impl Control {
    fn read(&self, off: u64) -> u64 {
        // SAFETY: the control page is mapped (device memory through /dev/mem) for the process's
        // life; the hypervisor emulates each 64-bit access.
        unsafe { core::ptr::read_volatile((self.0 + off) as *const u64) }
    }
    fn write(&self, off: u64, v: u64) {
        // SAFETY: as `read`.
        unsafe { core::ptr::write_volatile((self.0 + off) as *mut u64, v) }
    }
}

/// The pages and their guest-physical addresses.
#[cfg(target_os = "none")]
struct Pages {
    base: u64,
    n: u64,
    ipa: [u64; MAX_PAGES],
}

#[cfg(target_os = "none")]
fn pages(n: u64) -> Result<Pages, Errno> {
    let len = n * PAGE;
    let flags = sys::MAP_PRIVATE | sys::MAP_ANONYMOUS | sys::MAP_POPULATE | sys::MAP_LOCKED;
    let base = sys::mmap(len, sys::PROT_RW, flags, -1, 0)?;
    // Huge pages would be fine for the hypervisor, but a collapse would move them.
    let _ = sys::madvise(base, len, sys::MADV_NOHUGEPAGE);
    let mut p = Pages { base, n, ipa: [0; MAX_PAGES] };
    let fd = sys::open(b"/proc/self/pagemap\0", sys::O_RDONLY)?;
    for i in 0..n {
        let va = base + i * PAGE;
        // SAFETY: `va` is a page of the mapping just made, present (MAP_POPULATE) and locked.
        unsafe { core::ptr::write_volatile(va as *mut u64, 0) };
        let mut e = [0u8; 8];
        sys::pread(fd, &mut e, va / PAGE * 8)?;
        let e = u64::from_le_bytes(e);
        let pfn = e & ((1 << 55) - 1);
        if e >> 63 == 0 || pfn == 0 {
            sys::close(fd);
            return Err(Errno("pagemap (no PFN: not present, or not root)", 0));
        }
        p.ipa[i as usize] = pfn * PAGE;
    }
    sys::close(fd);
    Ok(p)
}

#[cfg(target_os = "none")]
fn control(addr: u64) -> Result<Control, Errno> {
    let fd = sys::open(b"/dev/mem\0", sys::O_RDWR | sys::O_SYNC)?;
    let va = sys::mmap(PAGE, sys::PROT_RW, sys::MAP_SHARED, fd as i64, addr)?;
    sys::close(fd);
    Ok(Control(va))
}

/// What a phase of writing measured.
#[cfg(target_os = "none")]
#[derive(Default)]
struct Phase {
    writes: u64,
    work: u64,
    ns: u64,
}

/// Writes pages round-robin at `rate` pages/s, counting work units in between, until `done`
/// says stop (checked every millisecond).
#[cfg(target_os = "none")]
fn write_phase(p: &Pages, rate: u64, seq: &mut u64, next: &mut u64, mut done: impl FnMut(u64) -> bool) -> Phase {
    let t0 = sys::now_ns();
    let mut ph = Phase::default();
    let mut last_check = t0;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    loop {
        let now = sys::now_ns();
        let elapsed = now - t0;
        let due = (elapsed as u128 * rate as u128 / 1_000_000_000) as u64;
        while ph.writes < due {
            *seq += 1;
            let va = p.base + (*next % p.n) * PAGE;
            // SAFETY: a page of our locked mapping.
            unsafe { core::ptr::write_volatile(va as *mut u64, *seq) };
            *next += 1;
            ph.writes += 1;
        }
        // One unit of work: a short, memory-free computation.
        for _ in 0..256 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        compiler_fence(Ordering::SeqCst);
        ph.work += 1;
        if now - last_check >= 1_000_000 {
            last_check = now;
            if done(elapsed) {
                break;
            }
        }
    }
    ph.ns = sys::now_ns() - t0;
    if x == 0 {
        ph.work += 1;
    }
    ph
}

/// Per second, in thousandths (no floats needed in the report).
#[cfg(target_os = "none")]
fn per_s_milli(count: u64, ns: u64) -> u64 {
    (count as u128 * 1_000_000_000_000 / ns.max(1) as u128) as u64
}

#[cfg(target_os = "none")]
fn milli(v: u64) -> Milli {
    Milli(v)
}

/// A fixed-point number with three decimals.
#[cfg(target_os = "none")]
struct Milli(u64);

#[cfg(target_os = "none")]
impl core::fmt::Display for Milli {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

#[cfg(target_os = "none")]
pub fn main(args: &Args) -> i32 {
    let p = match parse(args) {
        Ok(p) => p,
        Err(bad) => {
            say!(
                "pgtlab-dirty: bad argument {:?} (pages=1..4096 rate=PAGES/S scenario=1|2 threshold=PAGES rounds=N baseline_ms=MS timeout_s=S)",
                core::str::from_utf8(bad).unwrap_or("?")
            );
            return 2;
        }
    };
    let Some(ctl_addr) = args.env(abi::control::CMDLINE_WORD.as_bytes()).and_then(number) else {
        say!("pgtlab-dirty: no pgtlab_ctl in the environment: boot the hypervisor with hyp.migrate");
        return 2;
    };
    let run = || -> Result<i32, Errno> {
        let pg = pages(p.pages)?;
        let ctl = control(ctl_addr)?;
        if ctl.read(reg::MAGIC) != abi::control::MAGIC {
            say!("pgtlab-dirty: no hypervisor control page at {ctl_addr:#x}");
            return Ok(2);
        }
        for i in 0..p.pages {
            ctl.write(reg::WATCH, pg.ipa[i as usize]);
        }
        ctl.write(reg::THRESHOLD, p.threshold);
        ctl.write(reg::MAX_ROUNDS, p.rounds);
        say!(
            "pgtlab-dirty: {} pages at VA {:#x} (first IPA {:#x}), writing {} pages/s; scenario {}",
            p.pages,
            pg.base,
            pg.ipa[0],
            p.rate,
            p.scenario
        );
        let (mut seq, mut next) = (0u64, 0u64);
        let base = write_phase(&pg, p.rate, &mut seq, &mut next, |ns| ns >= p.baseline_ms * 1_000_000);
        ctl.write(reg::START, p.scenario);
        let timeout = p.timeout_s * 1_000_000_000;
        let mut timed_out = false;
        let during = write_phase(&pg, p.rate, &mut seq, &mut next, |ns| {
            let st = ctl.read(reg::STATE);
            timed_out = ns > timeout;
            st == state::DONE || st == state::FAILED || timed_out
        });
        let (run_state, verdict, rounds) = (ctl.read(reg::STATE), ctl.read(reg::VERDICT), ctl.read(reg::ROUNDS));
        let base_work = per_s_milli(base.work, base.ns);
        let during_work = per_s_milli(during.work, during.ns);
        say!(
            "@@report {{\"kind\":\"linux_dirty\",\"scenario\":{},\"pages\":{},\"rate_target\":{},\"baseline_writes_per_s\":{},\
             \"writes_per_s\":{},\"writes\":{},\"baseline_work_per_s\":{},\"work_per_s\":{},\"slowdown\":{},\
             \"migration_ms\":{},\"rounds\":{},\"state\":{},\"verdict\":{},\"timed_out\":{}}}",
            p.scenario,
            p.pages,
            p.rate,
            milli(per_s_milli(base.writes, base.ns)),
            milli(per_s_milli(during.writes, during.ns)),
            during.writes,
            milli(base_work),
            milli(during_work),
            milli((base_work as u128 * 1000 / during_work.max(1) as u128) as u64),
            during.ns / 1_000_000,
            rounds,
            run_state,
            verdict,
            timed_out
        );
        let _ = sys::munmap(pg.base, p.pages * PAGE);
        Ok(if verdict == abi::control::verdict::EQUAL && !timed_out { 0 } else { 1 })
    };
    match run() {
        Ok(code) => code,
        Err(Errno(what, e)) => {
            say!("pgtlab-dirty: {what} failed (errno {e})");
            3
        }
    }
}

/// The host build: says where this binary runs and exits with `USAGE`.
#[cfg(not(target_os = "none"))]
fn main() {
    eprintln!("pgtlab-dirty runs on aarch64-unknown-none: the Linux guest runs it (`cargo xtask run --guest linux`)");
    std::process::exit(abi::exit::USAGE as i32);
}
