//! Everything that enters EL2 after boot: guest calls (HVC, SMC), guest faults, and the
//! hypervisor's own unexpected exceptions.

use crate::counters::{self, Exit};
use crate::{exit, hypercall, psci};
use aarch64_cpu::registers::{Readable, Writeable, ESR_EL2, FAR_EL2, HPFAR_EL2};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use hypcore::fault::GuestAbort;
use rt::esr;
use rt::trap::vector;
use rt::TrapFrame;

/// Exit code when the guest touched memory it does not own (or another fatal guest fault).
pub const EXIT_GUEST_FAULT: u32 = abi::exit::GUEST_FAULT;
/// Exit code when the hypervisor itself took an unexpected exception or panicked.
pub const EXIT_HYP_FAULT: u32 = abi::exit::HYP_FAULT;

/// First vector of exceptions from a lower EL in AArch32 (synchronous, IRQ, FIQ, SError).
const LOWER32_FIRST: u64 = 12;

#[no_mangle]
extern "C" fn rt_exception(frame: &mut TrapFrame, vec: u64) {
    if vec >= vector::LOWER64_SYNC {
        // Where the guest was: what the xtask reads when a run hangs (`cpu::GUEST_PCS`).
        crate::cpu::note_guest_pc(frame.elr);
    }
    match vec {
        vector::LOWER64_SYNC => lower_sync(frame),
        // The guest runs AArch64 only; anything from an AArch32 guest (EL0 or EL1) is the
        // guest's doing, not the hypervisor's: a stage-2 abort is reported with its IPA like
        // any other, every other exception stops the guest (exit 4), never as a hypervisor
        // fault.
        LOWER32_FIRST => lower_sync(frame),
        v if v > LOWER32_FIRST => aarch32_guest(frame, v),
        _ => fatal(frame, vec),
    }
}

/// An asynchronous exception from a guest running AArch32: stop it (GUEST_FAULT).
fn aarch32_guest(frame: &TrapFrame, vec: u64) -> ! {
    counters::count(Exit::Other);
    rt::console::panic_print(format_args!(
        "hyp: guest exit not handled: {} exception from a guest in AArch32 state on CPU {} (ELR {:#x}, SPSR {:#x}): \
         the guest must run AArch64\n",
        vector::kind(vec),
        crate::cpu::current(),
        frame.elr,
        frame.spsr
    ));
    exit::exit(EXIT_GUEST_FAULT)
}

fn lower_sync(frame: &mut TrapFrame) {
    let esr_v = ESR_EL2.get();
    match esr::class(esr_v) {
        esr::EC_HVC64 => {
            counters::count(Exit::Hvc);
            call(frame);
        }
        esr::EC_SMC64 => {
            counters::count(Exit::Smc);
            // A trapped SMC returns to itself: step over it.
            frame.elr += 4;
            call(frame);
        }
        esr::EC_DABT_LOWER | esr::EC_IABT_LOWER => {
            // Decoded once: every handler below reads the same typed abort.
            let Some(abort) = GuestAbort::decode(esr_v, FAR_EL2.get(), HPFAR_EL2.get()) else {
                unreachable!("a lower-EL abort class decodes")
            };
            counters::count(if abort.insn { Exit::InstructionAbort } else { Exit::DataAbort });
            if !abort.insn && dirty_log_fault(&abort) {
                return;
            }
            if abort.insn && in_split(&abort) {
                return;
            }
            if !abort.insn && emulated_mmio(frame, &abort) {
                return;
            }
            guest_abort(frame, &abort);
        }
        ec => {
            counters::count(if ec == esr::EC_SYSREG { Exit::SysReg } else { Exit::Other });
            // SPSR_EL2.M[4]: the guest was in AArch32 state.
            let aarch32 =
                if frame.spsr & 0x10 != 0 { " from a guest in AArch32 state (it must run AArch64)" } else { "" };
            rt::console::panic_print(format_args!(
                "hyp: guest exit not handled: {} (EC {ec:#04x}){aarch32} ESR {esr_v:#x} at ELR {:#x}\n",
                esr::class_name(ec),
                frame.elr
            ));
            exit::exit(EXIT_GUEST_FAULT);
        }
    }
}

/// An SMCCC call from the guest (through HVC or SMC: the same function ids either way). Only W0
/// is the function id (the upper half of x0 is ignored); a 32-bit call (SMC32, bit 30 clear)
/// passes its arguments in W1..W3, so the upper halves of x1..x3 are ignored too.
fn call(frame: &mut TrapFrame) {
    let fid = abi::hypercall::function_id(frame.x[0]);
    let mut args = [frame.x[1], frame.x[2], frame.x[3]];
    if !abi::hypercall::is_smc64(fid) {
        args = args.map(|a| a & 0xffff_ffff);
    }
    let ret = if psci::is_psci(fid) {
        counters::count(Exit::Psci);
        psci::handle(fid, args)
    } else {
        counters::count(Exit::Hypercall);
        hypercall::handle(fid, args, frame)
    };
    frame.x[0..4].copy_from_slice(&ret);
}

/// A stage-2 permission fault on a write may be dirty logging's, and a translation fault in a
/// memslot may have hit an entry another CPU is splitting (break-before-make leaves it invalid
/// for a moment): let `memslot` handle them. Returns true when handled (the guest then retries
/// the access).
fn dirty_log_fault(abort: &GuestAbort) -> bool {
    if abort.is_translation() {
        // HPFAR_EL2 holds the IPA of a translation fault.
        return abort.hpfar_ipa().is_some_and(crate::dirtylog::handle_translation_fault);
    }
    if !abort.is_write_permission() {
        return false;
    }
    let Some(ipa) = fault_ipa(abort) else {
        // The guest's stage 1 changed under us: let it retry (it faults again if it must).
        return true;
    };
    if crate::migrate::park(ipa) {
        // Held during a stop-and-copy; the write retries now.
        return true;
    }
    crate::dirtylog::handle_write_fault(ipa)
}

/// The IPA of a stage-2 abort: from HPFAR_EL2 where it is valid (`GuestAbort::hpfar_ipa`),
/// else by translating FAR_EL2 through the guest's stage 1 with `AT S1E1R` (as KVM does).
/// `None` if that translation fails now.
fn fault_ipa(abort: &GuestAbort) -> Option<u64> {
    use aarch64_cpu::registers::PAR_EL1;
    if let Some(ipa) = abort.hpfar_ipa() {
        return Some(ipa);
    }
    let far = abort.far;
    let saved = PAR_EL1.get();
    // SAFETY: `AT S1E1R` (no aarch64-cpu wrapper) translates FAR through the guest's EL1&0 stage 1
    // (its registers are live at EL2; with E2H = 1 and TGE = 0 the instruction still names the
    // EL1&0 regime, and PAR_EL1 has no EL2 twin to be redirected to) and writes only PAR_EL1,
    // which is saved and restored around it; the ISB makes PAR_EL1 reflect the result.
    unsafe { core::arch::asm!("at s1e1r, {}", "isb", in(reg) far, options(nostack, preserves_flags)) };
    let par = PAR_EL1.get();
    PAR_EL1.set(saved);
    if par & 1 != 0 {
        return None;
    }
    Some((par & 0x000f_ffff_ffff_f000) | (far & 0xfff))
}

/// `hyp.on-fault=stop`: a stray guest access ends the run (else it is injected into the guest).
static STOP_ON_FAULT: AtomicBool = AtomicBool::new(false);
/// Injections reported on the console so far (the first [`INJECT_REPORTS`] are).
static INJECT_REPORTED: AtomicU64 = AtomicU64::new(0);
const INJECT_REPORTS: u64 = 8;

/// Chooses what a stray guest access does: end the run (`true`) or abort in the guest.
pub fn set_stop_on_fault(stop: bool) {
    STOP_ON_FAULT.store(stop, Ordering::Relaxed);
}

/// An instruction fetch that hit a block another CPU is splitting (break-before-make leaves the
/// entry invalid for a moment): it translates again now, so the guest retries. Data accesses
/// get the same treatment in [`dirty_log_fault`].
fn in_split(abort: &GuestAbort) -> bool {
    abort.is_translation() && abort.hpfar_ipa().is_some_and(crate::dirtylog::handle_translation_fault)
}

/// A load or store to the hypervisor's control page (`migrate`), emulated; HPFAR_EL2 holds the
/// IPA of the translation fault. Returns whether it was one.
fn emulated_mmio(frame: &mut TrapFrame, abort: &GuestAbort) -> bool {
    if !abort.is_translation() {
        return false;
    }
    abort.hpfar_ipa().is_some_and(|ipa| crate::migrate::mmio(frame, abort.esr, ipa))
}

/// A guest access that stage 2 refused (no RAM, no device there): by default the guest takes a
/// synchronous external abort, as a bus error on hardware would give it; with
/// `hyp.on-fault=stop` the run ends with the IPA reported.
fn guest_abort(frame: &mut TrapFrame, abort: &GuestAbort) {
    let (far, esr_v, insn) = (abort.far, abort.esr, abort.insn);
    let fsc = esr::fault_status(esr_v);
    // An IPA that cannot be found is reported as such rather than guessed.
    let ipa = fault_ipa(abort).unwrap_or(u64::MAX);
    let what = abort.access();
    // An AArch32 kernel at EL1 cannot be given an AArch64 exception entry: stop it instead.
    let aarch32_el1 = frame.spsr & 0x10 != 0 && frame.spsr & 0xf != 0;
    if !STOP_ON_FAULT.load(Ordering::Relaxed) && !aarch32_el1 {
        counters::count(Exit::InjectedAbort);
        if INJECT_REPORTED.fetch_add(1, Ordering::Relaxed) < INJECT_REPORTS {
            rt::println!(
                "hyp: guest {what} at IPA {ipa:#x} (VA {far:#x}, ELR {:#x}) on CPU {}: nothing there, \
                 injected a synchronous external abort into the guest",
                frame.elr,
                crate::cpu::current()
            );
        }
        crate::inject::external_abort(frame, esr_v, far, insn);
        return;
    }
    rt::console::panic_print(format_args!(
        "hyp: guest fault on CPU {}: {what} at IPA {ipa:#x} (guest VA {far:#x}, ELR {:#x}): stage-2 {} level {} — \
         the guest does not own this address (hyp.on-fault=stop)\n",
        crate::cpu::current(),
        frame.elr,
        esr::fault_status_name(fsc),
        esr::fault_level(fsc),
    ));
    let mut r = abi::report::Record::new("guest_fault");
    r.hex("ipa", ipa).hex("far", far).hex("elr", frame.elr).hex("esr", esr_v).str("access", what);
    rt::console::panic_print(format_args!("{r}\n"));
    exit::exit(EXIT_GUEST_FAULT);
}

/// An exception the hypervisor did not expect: report and stop.
fn fatal(frame: &TrapFrame, vec: u64) -> ! {
    let esr_v = ESR_EL2.get();
    let ec = esr::class(esr_v);
    rt::console::panic_print(format_args!(
        "hyp: FATAL: unexpected {} exception from {} on CPU {}\n\
         hyp:   EC {ec:#04x} ({}) ESR {esr_v:#x} FAR {:#x} ELR {:#x} SPSR {:#x}\n",
        vector::kind(vec),
        vector::source(vec),
        crate::cpu::current(),
        esr::class_name(ec),
        FAR_EL2.get(),
        frame.elr,
        frame.spsr,
    ));
    if vec < vector::LOWER64_SYNC {
        let base = rt::start::image_layout().start as u64;
        rt::console::panic_print(format_args!("hyp:   at image+{:#x}\n", frame.elr.wrapping_sub(base)));
        rt::backtrace::print(frame.x[29] as usize, |a| rt::console::panic_print(format_args!("hyp: {a}")));
    }
    exit::exit(EXIT_HYP_FAULT)
}
