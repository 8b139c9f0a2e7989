//! EL1 exceptions.
//!
//! * **From EL0**: system calls (`syscall`), page faults (resolved by the address space:
//!   demand-zero, spurious; else the task's own fault: its fault handler if it has one, or it
//!   is ended with a report), IRQs; every other exception ends the task with a report. The way
//!   back to EL0 is the preemption point (`sched::return_to_user`).
//! * **At EL1**: IRQs (only in the idle wait: see `irq`), faults inside a user copy (resolved
//!   like the task's fault, or the copy stops: `mm::uaccess`), faults a memory probe armed
//!   (`mm::fault`). Every other exception is reported with its class, ESR, FAR, ELR, the CPU,
//!   the running task, SP and every register (and, for an ELR outside the text, whether a
//!   return or a branch got there) and a backtrace, and ends the run with a failure status.

use crate::arch::power;
use crate::mm::uaccess;
use crate::sched;
use aarch64_cpu::registers::{Readable, ESR_EL1, FAR_EL1};
use rt::esr;
use rt::trap::vector;
use rt::TrapFrame;
use uspace::{Access, FaultKind, FaultOutcome};

/// A system call from EL0 (`SVC #0`): the vectors saved only what a function call may clobber
/// (x0-x18, x30), x19, and ELR, SPSR, SP_EL0 (`lib/rt` trap.rs). Returns whether the whole frame
/// was rewritten (a resumed context: then the vectors restore every register from it). This
/// path is what a null system call costs (`cargo xtask bench mprotect`).
#[no_mangle]
extern "C" fn rt_syscall(frame: &mut TrapFrame) -> u64 {
    let area = crate::percpu::this_area();
    // The null system call without a detour when nothing waits to run here: it reads this
    // CPU's static area only, so SP_EL0 may keep the user's stack pointer (restored as it is).
    let done = crate::syscall::count_and_null(area, frame);
    if done && area.need_resched.load(core::sync::atomic::Ordering::Relaxed) == 0 {
        return 0;
    }
    sched::enter_from_user_on(area);
    syscall_rest(frame, done)
}

/// What [`rt_syscall`] does beyond the null system call (SP_EL0 is the running task's thread
/// info by now): the call (unless done), then the way back to EL0 (the preemption point).
#[inline(never)]
fn syscall_rest(frame: &mut TrapFrame, done: bool) -> u64 {
    let whole = !done && crate::syscall::dispatch(frame);
    sched::return_to_user();
    whole as u64
}

/// A synchronous exception from EL0 other than a system call (the whole frame saved), with its
/// ESR_EL1.
#[no_mangle]
extern "C" fn rt_el0_sync(frame: &mut TrapFrame, esr_v: u64) {
    sched::enter_from_user();
    lower_sync(frame, esr_v);
    sched::return_to_user();
}

/// An instruction or data abort from EL0 (a page fault), with only the registers of a system
/// call saved (`lib/rt` trap.rs): resolved by the address space (0: then those registers come
/// back), or the task's own fault, returned as [`uspace::Denial::code`] before anything else is
/// done (the vectors then save the rest of the frame and call [`rt_el0_abort_denied`]).
#[no_mangle]
extern "C" fn rt_el0_abort(_frame: &mut TrapFrame, esr_v: u64) -> u64 {
    let area = crate::percpu::this_area();
    let entry = sched::enter_from_user_on(area);
    let far = FAR_EL1.get();
    let access = abort_access(esr_v);
    // The common case first, alone: a translation fault at level 3 (the page's level-3 table
    // exists) that is a first touch the region allows (`UserSpace::first_touch`). IRQs stay
    // masked and nothing schedules until the return: `area` is still this CPU's.
    let level3 = esr::FaultStatus::of(esr_v) == esr::FaultStatus::Translation(3);
    if level3 && sched::with_running_from_user(entry, |t| t.process.mm.first_touch(far, access, &area.first_touch)) {
        sched::return_to_user_on(area);
        return 0;
    }
    el0_abort_rest(esr_v, far, access)
}

/// [`rt_el0_abort`] for a fault that is not a first touch the region allows (or whose first
/// touch found no frame, or was declined): the address space's whole decision.
#[cold]
#[inline(never)]
fn el0_abort_rest(esr_v: u64, far: u64, access: Access) -> u64 {
    let out = sched::with_running(|t| t.process.mm.fault(far, access, fault_kind(esr_v)));
    match out.expect("an exception from EL0 has a task") {
        FaultOutcome::Mapped | FaultOutcome::Spurious | FaultOutcome::Retry => {
            sched::return_to_user();
            0
        }
        FaultOutcome::Denied(why) => why.code(),
    }
}

/// The end of [`rt_el0_abort`] for a fault that is the task's (`code`: its
/// [`uspace::Denial::code`]), with the whole frame saved now. FAR_EL1 still holds the address:
/// nothing between took an exception (IRQs masked, the address space's fault handling touches
/// kernel memory only).
#[no_mangle]
extern "C" fn rt_el0_abort_denied(frame: &mut TrapFrame, esr_v: u64, code: u64) {
    let why = uspace::Denial::from_code(code).expect("rt_el0_abort returned a denial's code");
    task_fault(frame, esr_v, FAR_EL1.get(), &alloc::format!("{why}"));
    sched::return_to_user();
}

/// The access of an instruction or data abort.
fn abort_access(esr_v: u64) -> Access {
    if esr::class(esr_v) == esr::EC_IABT_LOWER {
        Access::Exec
    } else if esr::is_write(esr_v) {
        Access::Write
    } else {
        Access::Read
    }
}

#[no_mangle]
extern "C" fn rt_exception(frame: &mut TrapFrame, vec: u64) {
    // Not taken from EL0 for synchronous exceptions in the kernel (`rt_syscall`, `rt_el0_abort`,
    // `rt_el0_sync`).
    if vec == vector::LOWER64_SYNC {
        sched::enter_from_user();
        let esr_v = ESR_EL1.get();
        if esr::class(esr_v) == esr::EC_SVC64 {
            if !crate::syscall::count_and_null(crate::percpu::this_area(), frame) {
                crate::syscall::dispatch(frame);
            }
        } else {
            lower_sync(frame, esr_v);
        }
        sched::return_to_user();
        return;
    }
    other_vector(frame, vec);
}

/// Every vector but a synchronous exception from EL0.
#[inline(never)]
fn other_vector(frame: &mut TrapFrame, vec: u64) {
    match vec {
        vector::CUR_SPX_IRQ => {
            crate::irq::handle(crate::arch::cpu::this_cpu());
            // A preemptible section may be switched out here (see `sync`).
            sched::preempt::from_irq();
        }
        vector::LOWER64_IRQ => {
            sched::enter_from_user();
            crate::irq::handle(crate::arch::cpu::this_cpu());
            sched::return_to_user();
        }
        vector::CUR_SPX_SYNC => {
            let (esr_v, far) = (ESR_EL1.get(), FAR_EL1.get());
            if crate::mm::fault::try_catch(frame, esr_v, far)
                || user_copy_fault(frame, esr_v, far)
                || crate::arch::power::hvc_probe_undefined(frame, esr_v)
            {
                return;
            }
            fatal(frame, vec, esr_v);
        }
        _ => fatal(frame, vec, ESR_EL1.get()),
    }
}

/// What kind of fault a data or instruction abort's status code says.
fn fault_kind(esr_v: u64) -> FaultKind {
    match esr::FaultStatus::of(esr_v) {
        esr::FaultStatus::Translation(_) => FaultKind::Translation,
        esr::FaultStatus::Permission(_) => FaultKind::Permission,
        _ => FaultKind::Other,
    }
}

/// A fault of an unprivileged load or store in a user copy: resolve it like the task's own
/// (and retry), or make the copy stop and report the bytes left.
fn user_copy_fault(frame: &mut TrapFrame, esr_v: u64, far: u64) -> bool {
    if esr::class(esr_v) != esr::EC_DABT_CUR || !uaccess::in_copy(frame.elr) {
        return false;
    }
    let Some(t) = sched::current() else {
        frame.elr = uaccess::fixup();
        return true;
    };
    let access = if esr::is_write(esr_v) { Access::Write } else { Access::Read };
    match t.process.mm.fault(far, access, fault_kind(esr_v)) {
        FaultOutcome::Mapped | FaultOutcome::Spurious | FaultOutcome::Retry => {}
        FaultOutcome::Denied(_) => frame.elr = uaccess::fixup(),
    }
    true
}

/// A synchronous exception from EL0 other than a system call.
#[inline(never)]
fn lower_sync(frame: &mut TrapFrame, esr_v: u64) {
    let ec = esr::class(esr_v);
    match ec {
        // The first FP/SIMD instruction of a task that does not own this CPU's registers.
        esr::EC_SVE_SIMD_FP => {
            let cpu = crate::arch::cpu::this_cpu();
            sched::with_running(|t| sched::fpsimd::trap(cpu, t)).expect("an exception from EL0 has a task");
        }
        esr::EC_DABT_LOWER | esr::EC_IABT_LOWER => {
            let far = FAR_EL1.get();
            let access = abort_access(esr_v);
            let out = sched::with_running(|t| t.process.mm.fault(far, access, fault_kind(esr_v)));
            match out.expect("an exception from EL0 has a task") {
                FaultOutcome::Mapped | FaultOutcome::Spurious | FaultOutcome::Retry => {}
                FaultOutcome::Denied(why) => task_fault(frame, esr_v, far, &alloc::format!("{why}")),
            }
        }
        _ => {
            // Undefined instruction, alignment of PC or SP, a trapped system register, ...
            task_fault(frame, esr_v, FAR_EL1.get(), "exception the task may not take");
        }
    }
}

/// The running task's own fault: to its fault handler if it has one (and is not in it), else
/// it is ended with a report.
fn task_fault(frame: &mut TrapFrame, esr_v: u64, far: u64, why: &str) {
    let t = sched::current().expect("a faulting task");
    {
        let mut f = t.fault.lock();
        if f.entry != 0 && f.saved.is_none() {
            let fp = crate::sched::fpsimd::task_state(&t);
            f.saved = Some(alloc::boxed::Box::new((frame.clone(), fp)));
            let pc = frame.elr;
            frame.x[0] = far;
            frame.x[1] = esr_v;
            frame.x[2] = pc;
            frame.x[3] = f.cookie;
            frame.elr = f.entry;
            frame.sp_el0 = (frame.sp_el0 - abi::syscall::FAULT_RED_ZONE) & !15;
            return;
        }
    }
    let ec = esr::class(esr_v);
    let fsc = esr::fault_status(esr_v);
    let abort = matches!(ec, esr::EC_IABT_LOWER | esr::EC_DABT_LOWER);
    let access = match ec {
        esr::EC_IABT_LOWER => "instruction fetch",
        esr::EC_DABT_LOWER if esr::is_write(esr_v) => "write",
        esr::EC_DABT_LOWER => "read",
        _ => "-",
    };
    // FAR is meaningful for aborts only.
    let far = if abort { far } else { 0 };
    if abort {
        rt::println!(
            "kernel: task {} ({}) killed: {} ({}), {access} at {far:#x}: {why}; pc {:#x}, ESR {esr_v:#x}",
            t.tid,
            t.process.name,
            esr::class_name(ec),
            esr::fault_status_name(fsc),
            frame.elr,
        );
    } else {
        rt::println!(
            "kernel: task {} ({}) killed: {}: {why}; pc {:#x}, ESR {esr_v:#x}",
            t.tid,
            t.process.name,
            esr::class_name(ec),
            frame.elr,
        );
    }
    let mut r = abi::report::Record::new("task_fault");
    r.u64("tid", t.tid)
        .u64("pid", t.process.pid)
        .str("name", &t.process.name)
        .hex("esr", esr_v)
        .str("class", esr::class_name(ec))
        .hex("far", far)
        .hex("pc", frame.elr)
        .str("access", access)
        .str("why", why);
    rt::println!("{r}");
    user_backtrace(frame);
    drop(t);
    sched::kill_current()
}

/// The task's frame-pointer chain, read with its own rights.
fn user_backtrace(frame: &TrapFrame) {
    let mut fp = frame.x[29];
    rt::println!("kernel:   user backtrace: {:#x}", frame.elr);
    for _ in 0..8 {
        if fp == 0 || !fp.is_multiple_of(16) {
            break;
        }
        let (Ok(next), Ok(lr)) = (uaccess::read_u64(fp), uaccess::read_u64(fp + 8)) else {
            break;
        };
        if lr == 0 {
            break;
        }
        rt::println!("kernel:     {:#x}", lr.wrapping_sub(4));
        if next <= fp {
            break;
        }
        fp = next;
    }
}

fn fatal(frame: &TrapFrame, vec: u64, esr_v: u64) -> ! {
    let ec = esr::class(esr_v);
    let layout = rt::start::image_layout();
    let base = layout.start as u64;
    rt::console::panic_print(format_args!(
        "kernel: FATAL: unexpected {} exception from {}\n\
         kernel:   EC {ec:#04x} ({}) ESR {esr_v:#x} FAR {:#x} ELR {:#x} SPSR {:#x}\n\
         kernel:   at image+{:#x}\n",
        vector::kind(vec),
        vector::source(vec),
        esr::class_name(ec),
        FAR_EL1.get(),
        frame.elr,
        frame.spsr,
        frame.elr.wrapping_sub(base),
    ));
    report_context(frame, vec, layout.start as u64..layout.text_end as u64);
    rt::backtrace::print(frame.x[29] as usize, |a| rt::console::panic_print(format_args!("kernel: {a}")));
    power::exit(abi::exit::GUEST_EXCEPTION)
}

/// The rest of a fatal report: which CPU and task, the interrupted SP and every register, and,
/// when ELR lies outside the kernel's text (a branch or a return to a bad address, where the
/// backtrace from x29 may find nothing), where x30 points: after a `BLR` it is the caller, after
/// a `RET` it is the bad address itself, so a corrupted frame record shows as ELR == x30.
fn report_context(frame: &TrapFrame, vec: u64, text: core::ops::Range<u64>) {
    let p = |a: core::fmt::Arguments| rt::console::panic_print(a);
    let base = text.start;
    let cpu = crate::arch::cpu::this_cpu();
    // Nothing here allocates or waits for a lock: the exception may have come from inside either.
    match sched::try_current_tid() {
        Some(t) => p(format_args!("kernel:   CPU {cpu}, task {t}")),
        None => p(format_args!("kernel:   CPU {cpu}, task none (or its lock is held)")),
    }
    // Current EL with SPx: the vectors took the frame right below the interrupted SP.
    if vec / 4 == vector::CUR_SPX_SYNC / 4 {
        p(format_args!(", SP {:#x}", frame as *const TrapFrame as u64 + rt::trap::EL1_FRAME_SIZE as u64));
    }
    p(format_args!(", SP_EL0 {:#x}\n", frame.sp_el0));
    for (i, pair) in frame.x.chunks(4).enumerate() {
        p(format_args!("kernel:  "));
        for (j, r) in pair.iter().enumerate() {
            p(format_args!(" x{:<2} {r:#018x}", 4 * i + j));
        }
        p(format_args!("\n"));
    }
    let lr = frame.x[30];
    if !text.contains(&frame.elr) {
        let how = if lr == frame.elr {
            "a return (RET) to it: x30 held it"
        } else {
            "a branch (after a BLR, x30 is the caller)"
        };
        if text.contains(&lr) {
            p(format_args!(
                "kernel:   ELR is outside the kernel's text: {how}; x30 {lr:#x} (image+{:#x})\n",
                lr - base
            ));
        } else {
            p(format_args!("kernel:   ELR is outside the kernel's text: {how}; x30 {lr:#x} (outside the text)\n"));
        }
    }
}
