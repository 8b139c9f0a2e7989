//! Exceptions the hypervisor makes the guest take: a synchronous external abort for an access
//! stage 2 refused, delivered to the guest's own EL1 vectors exactly as the hardware would have
//! delivered a bus error (the guest then handles it: Linux sends SIGBUS to a user program, or
//! reports the kernel's fault; our kernel's fault catcher sees it).
//!
//! Exception entry is emulated as the architecture defines it (`hypcore::exception`, host-tested):
//! the guest's ESR_EL1, FAR_EL1, ELR_EL1 and SPSR_EL1 are written (through `guest_el1`: the
//! `*_EL12` registers under hVHE), and the guest resumes at its vector with PSTATE as an
//! exception to EL1 leaves it.

use crate::guest_el1;
use hypcore::exception::external_abort_entry;
use rt::TrapFrame;

/// Makes the guest take a synchronous external abort for the access that just trapped (FAR_EL2
/// = `far`): it resumes in its own abort handler.
pub fn external_abort(frame: &mut TrapFrame, esr_el2: u64, far: u64, insn: bool) {
    let e =
        external_abort_entry(esr_el2, frame.elr, frame.spsr, guest_el1::vbar::read(), guest_el1::sctlr::read(), insn);
    guest_el1::esr::write(e.esr);
    guest_el1::far::write(far);
    guest_el1::elr::write(e.elr);
    guest_el1::spsr::write(e.spsr_el1);
    frame.elr = e.pc;
    frame.spsr = e.pstate;
}
