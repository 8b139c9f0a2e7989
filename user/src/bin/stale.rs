//! No stale translation survives an mprotect, across CPUs: one task per other CPU keeps
//! writing and reading a shared region while the main task cycles it through read-write,
//! read-only and PROT_NONE. Around each access a writer reads the epoch; if both reads show the
//! same settled epoch, the access happened entirely after the mprotect that set it returned:
//!
//! * read-only or PROT_NONE, a write that goes through is a **stale writable translation**;
//! * PROT_NONE, a read that goes through is a stale readable one;
//! * read-write (after PROT_NONE or read-only), an access that faults is a **missed upgrade**
//!   (with lazy relaxation a stale read-only entry may fault, but the kernel fixes that
//!   spurious fault and retries: the task never sees it).
//!
//! Arguments: `rounds=N` (default 60), `pages=N` (default 16). One `stale` record; exit status
//! 0 only if nothing was stale, nothing was missed and every task saw every phase.
#![cfg_attr(target_os = "none", no_std, no_main)]

use abi::report::Record;
use core::sync::atomic::{fence, AtomicU64, Ordering};
use user::fault::Prober;
use user::{map, prot, sys, PAGE_SIZE};

user::entry!(run);

const MAX_WRITERS: usize = 8;
/// Accesses every writer must make inside each settled phase before the next change.
const PER_PHASE: u64 = 24;

/// `phase << 1 | changing`: odd while the main task is inside an mprotect.
static EPOCH: AtomicU64 = AtomicU64::new(1);
static DONE: AtomicU64 = AtomicU64::new(0);
static REGION: AtomicU64 = AtomicU64::new(0);
static PAGES: AtomicU64 = AtomicU64::new(16);
static PROBES: [Prober; MAX_WRITERS] = [const { Prober::new() }; MAX_WRITERS];
/// Per writer: accesses made inside the current settled phase (reset by the main task).
static PROGRESS: [AtomicU64; MAX_WRITERS] = [const { AtomicU64::new(0) }; MAX_WRITERS];
static STALE_WRITE: AtomicU64 = AtomicU64::new(0);
static STALE_READ: AtomicU64 = AtomicU64::new(0);
static MISSED: AtomicU64 = AtomicU64::new(0);
static WRITES_OK: AtomicU64 = AtomicU64::new(0);
static FAULTED: AtomicU64 = AtomicU64::new(0);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    ReadWrite,
    ReadOnly,
    None,
}

/// The phase a settled epoch means (phases cycle RW, RO, RW, NONE).
fn phase(epoch: u64) -> Phase {
    match (epoch >> 1) % 4 {
        1 => Phase::ReadOnly,
        3 => Phase::None,
        _ => Phase::ReadWrite,
    }
}

extern "C" fn writer(id: u64) -> ! {
    let p = &PROBES[id as usize];
    if p.install().is_err() {
        sys::exit(3);
    }
    let (base, pages) = (REGION.load(Ordering::Acquire), PAGES.load(Ordering::Acquire));
    let mut i = id;
    while DONE.load(Ordering::Acquire) == 0 {
        i = (i + 7) % pages;
        let va = base + i * PAGE_SIZE + 8 * id;
        let e1 = EPOCH.load(Ordering::Acquire);
        let wrote = p.write(va, e1).is_ok();
        fence(Ordering::SeqCst);
        let read = p.read(va).is_ok();
        fence(Ordering::SeqCst);
        let e2 = EPOCH.load(Ordering::Acquire);
        if wrote {
            WRITES_OK.fetch_add(1, Ordering::Relaxed);
        } else {
            FAULTED.fetch_add(1, Ordering::Relaxed);
        }
        if e1 != e2 || e1 & 1 == 1 {
            continue;
        }
        match phase(e1) {
            Phase::ReadWrite if !(wrote && read) => {
                MISSED.fetch_add(1, Ordering::Relaxed);
            }
            Phase::ReadOnly | Phase::None if wrote => {
                STALE_WRITE.fetch_add(1, Ordering::Relaxed);
            }
            Phase::None if read => {
                STALE_READ.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
        PROGRESS[id as usize].fetch_add(1, Ordering::Release);
    }
    sys::exit(0)
}

/// `key=N` of the arguments (checked by the kernel against `abi::programs`), or `default`.
fn arg(args: &str, key: &str, default: u64) -> u64 {
    abi::programs::uint(args, key).unwrap_or(default)
}

fn run(args: &str) -> i32 {
    let rounds = arg(args, "rounds", 60);
    let pages = arg(args, "pages", 16).clamp(1, 4096);
    let ncpus = sys::sysctl(user::sysctl::NCPUS, abi::syscall::SYSCTL_GET).unwrap_or(1);
    let me = sys::getcpu();
    let rw = prot::READ | prot::WRITE;
    let Ok(base) = sys::mmap(0, pages * PAGE_SIZE, rw, map::PRIVATE | map::ANONYMOUS) else {
        user::println!("stale: mmap failed");
        return 2;
    };
    REGION.store(base, Ordering::Release);
    PAGES.store(pages, Ordering::Release);
    EPOCH.store(0, Ordering::Release);
    // One writer on every other CPU (on this one too if it is the only one).
    let mut tids = [0u64; MAX_WRITERS];
    let mut n = 0;
    for cpu in 0..ncpus.min(MAX_WRITERS as u64) {
        if cpu == me && ncpus > 1 {
            continue;
        }
        match user::thread::spawn(writer, n as u64, cpu) {
            Ok(t) => tids[n] = t,
            Err(e) => {
                user::println!("stale: spawn on CPU {cpu}: {}", abi::syscall::errno::name(e));
                return 2;
            }
        }
        n += 1;
    }
    let c0 = sys::counters();
    let mut stuck = 0;
    let mut epoch = 0u64;
    for _ in 0..rounds * 4 {
        // Let every writer make its accesses in the settled phase.
        let deadline = user::time::counter() + 5 * user::time::frequency();
        while PROGRESS[..n].iter().any(|p| p.load(Ordering::Acquire) < PER_PHASE) {
            if user::time::counter() > deadline {
                stuck += 1;
                break;
            }
            sys::yield_now();
        }
        // Change the phase: odd while mprotect runs, even once it returned.
        EPOCH.store(epoch | 1, Ordering::Release);
        epoch += 2;
        let p = match phase(epoch) {
            Phase::ReadWrite => rw,
            Phase::ReadOnly => prot::READ,
            Phase::None => prot::NONE,
        };
        if sys::mprotect(base, pages * PAGE_SIZE, p).is_err() {
            user::println!("stale: mprotect failed");
            return 2;
        }
        for pr in &PROGRESS[..n] {
            pr.store(0, Ordering::Release);
        }
        EPOCH.store(epoch, Ordering::Release);
    }
    DONE.store(1, Ordering::Release);
    let mut bad_exit = 0;
    for &t in &tids[..n] {
        let r = sys::wait(t);
        if r != Ok(0) {
            user::println!("stale: writer task {t} ended with {r:?}, expected Ok(0)");
            bad_exit += 1;
        }
    }
    let d = sys::counters().since(&c0);
    let (stale_w, stale_r, missed) =
        (STALE_WRITE.load(Ordering::Relaxed), STALE_READ.load(Ordering::Relaxed), MISSED.load(Ordering::Relaxed));
    let mut r = Record::new("stale");
    r.u64("cpus", ncpus)
        .u64("writers", n as u64)
        .u64("rounds", rounds)
        .u64("pages", pages)
        .u64("phase_changes", rounds * 4)
        .u64("writes_ok", WRITES_OK.load(Ordering::Relaxed))
        .u64("faulted", FAULTED.load(Ordering::Relaxed))
        .u64("stale_writes", stale_w)
        .u64("stale_reads", stale_r)
        .u64("missed", missed)
        .u64("stuck_phases", stuck)
        .u64("bad_exits", bad_exit)
        .u64("tlbi", d.space_tlbi)
        .u64("spurious_faults", d.faults_spurious)
        .u64("lazy_relaxed", d.lazy_relaxed)
        .u64("flushes_elided", d.flushes_elided)
        .u64("asid_rollovers", d.asid_rollovers);
    user::io::report(&r);
    user::println!(
        "stale: {n} writers, {} phase changes: {stale_w} stale writes, {stale_r} stale reads, {missed} missed upgrades, {} spurious faults",
        rounds * 4,
        d.faults_spurious
    );
    (stale_w + stale_r + missed + stuck + bad_exit > 0) as i32
}
