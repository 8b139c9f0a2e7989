//! `pgtlab-dirty` on Linux: its parameters, the control page, the write loop and its report
//! (the binary's description is in `main.rs`).

use core::sync::atomic::{compiler_fence, Ordering};
use linux_user::sys::{self, Args, Errno};
use linux_user::{entry, say};

entry!(main);

use abi::control::{reg, state};

const PAGE: u64 = abi::PAGE_SIZE;
const MAX_PAGES: usize = abi::control::MAX_WATCH;

struct Params {
    pages: u64,
    rate: u64,
    scenario: u64,
    threshold: u64,
    rounds: u64,
    baseline_ms: u64,
    timeout_s: u64,
}

fn number(s: &[u8]) -> Option<u64> {
    let (digits, radix) = match s.strip_prefix(b"0x") {
        Some(h) => (h, 16),
        None => (s, 10),
    };
    u64::from_str_radix(core::str::from_utf8(digits).ok()?, radix).ok()
}

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

struct Control(u64);

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
struct Pages {
    base: u64,
    n: u64,
    ipa: [u64; MAX_PAGES],
}

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

fn control(addr: u64) -> Result<Control, Errno> {
    let fd = sys::open(b"/dev/mem\0", sys::O_RDWR | sys::O_SYNC)?;
    let va = sys::mmap(PAGE, sys::PROT_RW, sys::MAP_SHARED, fd as i64, addr)?;
    sys::close(fd);
    Ok(Control(va))
}

/// What a phase of writing measured.
#[derive(Default)]
struct Phase {
    writes: u64,
    work: u64,
    ns: u64,
}

/// Writes pages round-robin at `rate` pages/s, counting work units in between, until `done`
/// says stop (checked every millisecond).
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
fn per_s_milli(count: u64, ns: u64) -> u64 {
    (count as u128 * 1_000_000_000_000 / ns.max(1) as u128) as u64
}

fn milli(v: u64) -> Milli {
    Milli(v)
}

/// A fixed-point number with three decimals.
struct Milli(u64);

impl core::fmt::Display for Milli {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

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
