//! The per-CPU tick: the EL1 virtual timer (CNTV_*_EL0, its PPI from the device tree's
//! `/timer` node), programmed one-shot to the earlier of the next tick and the earliest wake-up
//! the scheduler asked for on this CPU ([`set_wakeup`]), so a sleeping task wakes on time rather
//! than on the next tick. The hypervisor leaves the virtual counter unoffset (CNTVOFF_EL2 = 0),
//! so virtual and physical counts agree.
//!
//! The tick handler counts, moves the next tick forward (skipping ticks missed while IRQs were
//! masked: they are counted as missed, not replayed) and calls the hook the scheduler installed
//! ([`set_hook`]), which only sets flags (see the nesting rules in `irq`).

use aarch64_cpu::registers::{Readable, Writeable, CNTFRQ_EL0, CNTVCT_EL0, CNTV_CTL_EL0, CNTV_CVAL_EL0};
use board::Board;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The virtual timer's INTID.
static INTID: AtomicU64 = AtomicU64::new(0);
/// Counter ticks per timer tick (0: ticking stopped).
static PERIOD: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];
/// Counter value of each CPU's next tick.
static NEXT_TICK: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(u64::MAX) }; rt::MAX_CPUS];
/// Counter value of each CPU's earliest requested wake-up (u64::MAX: none).
static WAKEUP: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(u64::MAX) }; rt::MAX_CPUS];
/// Ticks taken, per CPU.
pub static TICKS: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];
/// Ticks skipped because the CPU had IRQs masked past them.
pub static MISSED: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];
/// Timer interrupts taken before anything was due (neither a tick nor a wake-up), per CPU.
pub static EARLY: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];
/// Latest a tick was handled after it was due, in counter ticks, per CPU.
pub static MAX_LATE: [AtomicU64; rt::MAX_CPUS] = [const { AtomicU64::new(0) }; rt::MAX_CPUS];
/// `fn(cpu, now)` called at each timer interrupt (tick or wake-up), as an address.
static HOOK: AtomicUsize = AtomicUsize::new(0);

/// Reads the timer's interrupt from the device tree (the EL1 virtual timer's PPI).
pub fn init(board: &Board) -> Result<(), super::IrqError> {
    let t = board.timer.as_ref().ok_or(super::IrqError::NoTimer)?;
    let intid = t.virt.ok_or(super::IrqError::NoVirtualTimer)?;
    if !(16..32).contains(&intid) {
        return Err(super::IrqError::TimerNotPpi { intid });
    }
    INTID.store(intid as u64, Ordering::Relaxed);
    super::set_handler(intid, on_interrupt);
    Ok(())
}

/// Counter frequency in Hz.
pub fn frequency() -> u64 {
    CNTFRQ_EL0.get().max(1)
}

/// The counter now.
pub fn now() -> u64 {
    CNTVCT_EL0.get()
}

/// Nanoseconds to counter ticks (rounded up).
pub fn ns_to_ticks(ns: u64) -> u64 {
    abi::time::ns_to_ticks(ns, frequency())
}

/// Counter ticks to nanoseconds.
pub fn ticks_to_ns(t: u64) -> u64 {
    abi::time::ticks_to_ns(t, frequency())
}

/// Installs the scheduler's `fn(cpu, now)`.
pub fn set_hook(f: fn(usize, u64)) {
    HOOK.store(f as usize, Ordering::Release);
}

/// Starts ticking at `hz` on this CPU (`cpu`).
pub fn start(cpu: usize, hz: u64) {
    let period = (frequency() / hz.max(1)).max(1);
    PERIOD[cpu].store(period, Ordering::Relaxed);
    NEXT_TICK[cpu].store(now() + period, Ordering::Relaxed);
    super::enable_private(cpu, INTID.load(Ordering::Relaxed) as u32);
    program(cpu);
}

/// Stops ticking on this CPU (`cpu`): the timer is disabled and its interrupt masked.
pub fn stop(cpu: usize) {
    PERIOD[cpu].store(0, Ordering::Relaxed);
    NEXT_TICK[cpu].store(u64::MAX, Ordering::Relaxed);
    CNTV_CTL_EL0.write(CNTV_CTL_EL0::ENABLE::CLEAR + CNTV_CTL_EL0::IMASK::SET);
    super::disable_private(cpu, INTID.load(Ordering::Relaxed) as u32);
}

/// Asks for a timer interrupt on this CPU (`cpu`) no later than counter value `at` (kept until
/// it has passed; the earliest request wins).
pub fn set_wakeup(cpu: usize, at: u64) {
    WAKEUP[cpu].fetch_min(at, Ordering::Relaxed);
    program(cpu);
}

/// Programs the compare value for the earlier of the next tick and the wake-up.
fn program(cpu: usize) {
    let at = NEXT_TICK[cpu].load(Ordering::Relaxed).min(WAKEUP[cpu].load(Ordering::Relaxed));
    if at == u64::MAX {
        CNTV_CTL_EL0.write(CNTV_CTL_EL0::ENABLE::CLEAR + CNTV_CTL_EL0::IMASK::SET);
        return;
    }
    CNTV_CVAL_EL0.set(at);
    CNTV_CTL_EL0.write(CNTV_CTL_EL0::ENABLE::SET + CNTV_CTL_EL0::IMASK::CLEAR);
}

fn on_interrupt(_intid: u32, cpu: usize) {
    let t = now();
    let period = PERIOD[cpu].load(Ordering::Relaxed);
    let next = NEXT_TICK[cpu].load(Ordering::Relaxed);
    let wakeup = WAKEUP[cpu].load(Ordering::Relaxed);
    let tick_due = period != 0 && t >= next;
    if tick_due {
        TICKS[cpu].fetch_add(1, Ordering::Relaxed);
        MAX_LATE[cpu].fetch_max(t - next, Ordering::Relaxed);
        let missed = (t - next) / period;
        MISSED[cpu].fetch_add(missed, Ordering::Relaxed);
        NEXT_TICK[cpu].store(next + (missed + 1) * period, Ordering::Relaxed);
    }
    if wakeup <= t {
        WAKEUP[cpu].store(u64::MAX, Ordering::Relaxed);
    } else if !tick_due {
        EARLY[cpu].fetch_add(1, Ordering::Relaxed);
    }
    match HOOK.load(Ordering::Acquire) {
        0 => {}
        f => {
            // SAFETY: only `set_hook` stores here, always a `fn(usize, u64)`.
            let f = unsafe { core::mem::transmute::<usize, fn(usize, u64)>(f) };
            f(cpu, t);
        }
    }
    program(cpu);
}
