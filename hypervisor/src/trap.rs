//! Everything that enters EL2 after boot: guest calls (HVC, SMC), guest faults, and the
//! hypervisor's own unexpected exceptions.

use crate::counters::{self, Exit};
use crate::{exit, hypercall, psci};
use aarch64_cpu::registers::{Readable, ESR_EL2, FAR_EL2, HPFAR_EL2};
use rt::esr;
use rt::trap::vector;
use rt::TrapFrame;

/// Exit code when the guest touched memory it does not own (or another fatal guest fault).
pub const EXIT_GUEST_FAULT: u32 = abi::exit::GUEST_FAULT;
/// Exit code when the hypervisor itself took an unexpected exception or panicked.
pub const EXIT_HYP_FAULT: u32 = abi::exit::HYP_FAULT;

#[no_mangle]
extern "C" fn rt_exception(frame: &mut TrapFrame, vec: u64) {
    match vec {
        vector::LOWER64_SYNC => lower_sync(frame),
        _ => fatal(frame, vec),
    }
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
            let insn = esr::class(esr_v) == esr::EC_IABT_LOWER;
            counters::count(if insn { Exit::InstructionAbort } else { Exit::DataAbort });
            guest_abort(frame, esr_v, insn);
        }
        ec => {
            counters::count(if ec == esr::EC_SYSREG { Exit::SysReg } else { Exit::Other });
            rt::console::panic_print(format_args!(
                "hyp: guest exit not handled: {} (EC {ec:#04x}) ESR {esr_v:#x} at ELR {:#x}\n",
                esr::class_name(ec),
                frame.elr
            ));
            exit::exit(EXIT_GUEST_FAULT);
        }
    }
}

/// An SMCCC call from the guest (through HVC or SMC: the same function ids either way).
fn call(frame: &mut TrapFrame) {
    let fid = frame.x[0];
    let args = [frame.x[1], frame.x[2], frame.x[3]];
    let ret = if psci::is_psci(fid) {
        counters::count(Exit::Psci);
        psci::handle(fid, args)
    } else {
        counters::count(Exit::Hypercall);
        hypercall::handle(fid, args, frame)
    };
    frame.x[0..4].copy_from_slice(&ret);
}

/// A guest access that stage 2 refused: report it with the IPA and end the run.
fn guest_abort(frame: &TrapFrame, esr_v: u64, insn: bool) {
    let far = FAR_EL2.get();
    // HPFAR_EL2.FIPA holds IPA[47:12] in bits [43:4]; FAR gives the page offset.
    let ipa = ((HPFAR_EL2.get() & 0x0fff_ffff_fff0) << 8) | (far & 0xfff);
    let fsc = esr::fault_status(esr_v);
    let what = if insn {
        "instruction fetch"
    } else if esr::is_write(esr_v) {
        "write"
    } else {
        "read"
    };
    rt::console::panic_print(format_args!(
        "hyp: guest fault on CPU {}: {what} at IPA {ipa:#x} (guest VA {far:#x}, ELR {:#x}): stage-2 {} level {} — \
         the guest does not own this address\n",
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
        rt::backtrace::print(frame.x[29] as usize, |a| rt::console::panic_print(format_args!("hyp: {a}")));
    }
    exit::exit(EXIT_HYP_FAULT)
}
