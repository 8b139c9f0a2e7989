//! Running one function on every online CPU at once (for tests where several vCPUs write).
//!
//! Secondary CPUs, once up, wait in [`secondary_loop`]; [`run_everywhere`] publishes a function
//! and a generation number, wakes them with SEV, runs the function on the calling CPU too and
//! waits until every waiting CPU has finished.

use alloc::string::{String, ToString};
use core::fmt;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);
/// The published `fn(cpu, participants)`, as an address.
static FUNC: AtomicUsize = AtomicUsize::new(0);
static PARTICIPANTS: AtomicUsize = AtomicUsize::new(1);
static DONE: AtomicUsize = AtomicUsize::new(0);
/// Secondary CPUs waiting in [`secondary_loop`].
static WAITING: AtomicUsize = AtomicUsize::new(0);
/// Their CPU indices, as a bit set.
static WAITING_MASK: AtomicU64 = AtomicU64::new(0);
/// A `fn(cpu) -> !` every waiting CPU moves on to for good (0: none yet), as an address.
static HANDOVER: AtomicUsize = AtomicUsize::new(0);

/// Parks a secondary CPU until work is published; never returns.
pub fn secondary_loop() -> ! {
    let mut seen = GENERATION.load(Ordering::Acquire);
    WAITING_MASK.fetch_or(1 << crate::arch::cpu::this_cpu(), Ordering::AcqRel);
    let me = WAITING.fetch_add(1, Ordering::AcqRel) + 1;
    loop {
        let h = HANDOVER.load(Ordering::Acquire);
        if h != 0 {
            // SAFETY: only `hand_over` stores here, always a `fn(usize) -> !`.
            let f = unsafe { core::mem::transmute::<usize, fn(usize) -> !>(h) };
            f(crate::arch::cpu::this_cpu());
        }
        let g = GENERATION.load(Ordering::Acquire);
        if g != seen {
            seen = g;
            let n = PARTICIPANTS.load(Ordering::Acquire);
            if me < n {
                let addr = FUNC.load(Ordering::Acquire);
                // SAFETY: FUNC holds a `fn(usize, usize)` stored by run_everywhere before it
                // bumped GENERATION (release/acquire).
                let f: fn(usize, usize) = unsafe { core::mem::transmute::<usize, fn(usize, usize)>(addr) };
                f(me, n);
            }
            DONE.fetch_add(1, Ordering::AcqRel);
        }
        aarch64_cpu::asm::wfe();
    }
}

/// CPUs available to [`run_everywhere`] (this one included).
pub fn cpus() -> usize {
    if HANDOVER.load(Ordering::Acquire) != 0 {
        return 1;
    }
    WAITING.load(Ordering::Acquire) + 1
}

/// Sends every waiting CPU to `f(cpu)` for good (the scheduler); returns their indices as a
/// bit set. [`run_everywhere`] has only this CPU from then on.
pub fn hand_over(f: fn(usize) -> !) -> u64 {
    HANDOVER.store(f as usize, Ordering::Release);
    aarch64_cpu::asm::sev();
    WAITING_MASK.load(Ordering::Acquire)
}

/// Why [`run_everywhere`] did not run its function on every CPU asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkError {
    /// `asked` CPUs asked for (0, or more than the `available` ones).
    Cpus { asked: usize, available: usize },
    /// The other CPUs did not all finish within 60 s.
    Timeout,
}

impl fmt::Display for WorkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkError::Cpus { asked, available } => write!(f, "{asked} CPUs asked for, {available} available"),
            WorkError::Timeout => f.write_str("secondary CPUs did not finish within 60 s"),
        }
    }
}

/// The self-tests report errors as text.
impl From<WorkError> for String {
    fn from(e: WorkError) -> String {
        e.to_string()
    }
}

/// Runs `f(index, n)` on `n` CPUs (this one is index 0), returns when all are done.
pub fn run_everywhere(n: usize, f: fn(usize, usize)) -> Result<(), WorkError> {
    let waiting = cpus() - 1;
    if n == 0 || n > waiting + 1 {
        return Err(WorkError::Cpus { asked: n, available: waiting + 1 });
    }
    FUNC.store(f as usize, Ordering::Release);
    PARTICIPANTS.store(n, Ordering::Release);
    DONE.store(0, Ordering::Release);
    GENERATION.fetch_add(1, Ordering::AcqRel);
    aarch64_cpu::asm::sev();
    f(0, n);
    use aarch64_cpu::registers::{Readable, CNTFRQ_EL0, CNTPCT_EL0};
    let deadline = CNTPCT_EL0.get() + 60 * CNTFRQ_EL0.get();
    while DONE.load(Ordering::Acquire) < waiting {
        if CNTPCT_EL0.get() > deadline {
            return Err(WorkError::Timeout);
        }
        core::hint::spin_loop();
    }
    Ok(())
}
