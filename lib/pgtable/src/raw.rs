//! Groups of 16 descriptors read and written through a table's own memory with paired loads and
//! stores (`LDP` / `STP`: each 64-bit element single-copy atomic, as a plain aligned load or store
//! is), for the loops whose cost is a few instructions per entry: the protect's run of like
//! pages, the contpte fold and unfold. A volatile access per entry (the frame edge's
//! `read_desc` / `write_desc`) cannot be paired by the compiler, and its address arithmetic
//! doubles the count; here each group is one block of assembly on aarch64.
//!
//! Every function here checks all 16 entries first and writes only when every one passes (all
//! 16 or none), so the caller's portable loop takes over, from the same entry, wherever a
//! group does not qualify; a walker on another CPU sees each entry either old or new, as with
//! single stores. Only allocators that let the library bypass `read_desc` / `write_desc`
//! ([`crate::FrameAlloc::direct`]) get these paths; the model checker's does not, so it checks
//! the portable loops, and these functions are held to the portable spec below them
//! (`portable`, used off aarch64: the host tests compare both on every case they draw).

use crate::descriptor::CONT_BIT;

/// The group's 16 entries from the table at operand `$r` into x0-x15 (eight paired loads).
#[cfg(target_arch = "aarch64")]
macro_rules! load16 {
    ($r:literal) => {
        concat!(
            "ldp x0, x1, [{",
            $r,
            "}]\n",
            "ldp x2, x3, [{",
            $r,
            "}, #16]\n",
            "ldp x4, x5, [{",
            $r,
            "}, #32]\n",
            "ldp x6, x7, [{",
            $r,
            "}, #48]\n",
            "ldp x8, x9, [{",
            $r,
            "}, #64]\n",
            "ldp x10, x11, [{",
            $r,
            "}, #80]\n",
            "ldp x12, x13, [{",
            $r,
            "}, #96]\n",
            "ldp x14, x15, [{",
            $r,
            "}, #112]"
        )
    };
}

/// x0-x15 back into the group at operand `$r` (eight paired stores).
#[cfg(target_arch = "aarch64")]
macro_rules! store16 {
    ($r:literal) => {
        concat!(
            "stp x0, x1, [{",
            $r,
            "}]\n",
            "stp x2, x3, [{",
            $r,
            "}, #16]\n",
            "stp x4, x5, [{",
            $r,
            "}, #32]\n",
            "stp x6, x7, [{",
            $r,
            "}, #48]\n",
            "stp x8, x9, [{",
            $r,
            "}, #64]\n",
            "stp x10, x11, [{",
            $r,
            "}, #80]\n",
            "stp x12, x13, [{",
            $r,
            "}, #96]\n",
            "stp x14, x15, [{",
            $r,
            "}, #112]"
        )
    };
}

/// One instruction per entry register: `$insn` with `x\i` for x0, x1, ... x15 (the
/// assembler's `.irp`: sixteen instructions).
#[cfg(target_arch = "aarch64")]
macro_rules! each16 {
    ($insn:literal) => {
        concat!(".irp i, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n", $insn, "\n.endr")
    };
}

/// x0-x15 folded into x16 with `$op` (`orr`, `and`), two interleaved chains through x16 and
/// x17 so neighbouring instructions do not wait on each other: fifteen instructions.
#[cfg(target_arch = "aarch64")]
macro_rules! reduce16 {
    ($op:literal) => {
        concat!(
            $op,
            " x16, x0, x1\n",
            $op,
            " x17, x2, x3\n",
            $op,
            " x16, x16, x4\n",
            $op,
            " x17, x17, x5\n",
            $op,
            " x16, x16, x6\n",
            $op,
            " x17, x17, x7\n",
            $op,
            " x16, x16, x8\n",
            $op,
            " x17, x17, x9\n",
            $op,
            " x16, x16, x10\n",
            $op,
            " x17, x17, x11\n",
            $op,
            " x16, x16, x12\n",
            $op,
            " x17, x17, x13\n",
            $op,
            " x16, x16, x14\n",
            $op,
            " x17, x17, x15\n",
            $op,
            " x16, x16, x17"
        )
    };
}

/// Entries per group.
pub(crate) const GROUP: usize = 16;

/// The protect's run: from `p` on, whole groups of 16 entries whose bits selected by `mask`
/// all equal `kind` get `flip` (each entry `d` becomes `d ^ flip`), until `end` or the first
/// group with another entry (left unwritten). Returns where it stopped. Per group: 8 paired
/// loads, 31 instructions of check (an XOR with the kind each, their OR, one test), 16 XORs,
/// 8 paired stores and the loop's 3: 4.3 instructions per entry. Where the binary allows vector
/// registers (`crate::vector`), the NEON routine instead: 1.9 per entry, the same groups.
///
/// # Safety
/// `[p, end)` lies inside one table's memory the caller may read and write (a multiple of 16
/// entries apart is not required: the last partial group is left alone).
#[inline(always)]
pub(crate) unsafe fn flip_groups(p: *mut u64, end: *mut u64, kind: u64, mask: u64, flip: u64) -> *mut u64 {
    #[cfg(target_arch = "aarch64")]
    {
        if (end as usize).saturating_sub(p as usize) < GROUP * 8 {
            return p;
        }
        // The last pointer a whole group starts at.
        let last = end.wrapping_sub(GROUP);
        match crate::vector::path() {
            crate::vector::Path::Scalar => {}
            crate::vector::Path::Q => {
                let mut save = crate::vector::SaveArea::<{ crate::vector::FLIP_REGS * 16 }>::new();
                // SAFETY: as the assembly below (the same groups, all 16 checked before any is
                // written); the routine restores the Q registers it uses from `save`, and the
                // binary's mode says Q registers are the whole live vector state.
                return unsafe { crate::vector::__pgtable_vec_flip_q(p, last, kind, mask, kind ^ flip, save.ptr()) };
            }
            crate::vector::Path::Z { .. } => {
                let mut save = crate::vector::SaveArea::<{ crate::vector::FLIP_REGS * crate::vector::Z_BYTES }>::new();
                // SAFETY: as above, with whole Z registers saved (the mode's vector length is at
                // most `Z_BYTES`, and SVE is untrapped here).
                return unsafe { crate::vector::__pgtable_vec_flip_z(p, last, kind, mask, kind ^ flip, save.ptr()) };
            }
        }
        let out: *mut u64;
        // SAFETY: per the caller, every group read and written lies inside `[p, end)`: a group
        // starts at `q <= last = end - 16`. Registers x0-x17 are scratch; the stores happen only
        // after all 16 loads of the group passed the check.
        unsafe {
            core::arch::asm!(
                "2:",
                load16!("q"),
                each16!("eor x\\i, x\\i, {kind}"),
                reduce16!("orr"),
                "tst x16, {mask}",
                "b.ne 3f",
                // (d ^ kind) ^ (kind ^ flip) = d ^ flip.
                each16!("eor x\\i, x\\i, {nk}"),
                store16!("q"),
                "add {q}, {q}, #128",
                "cmp {q}, {last}",
                "b.ls 2b",
                "3:",
                q = inout(reg) p => out,
                last = in(reg) last,
                kind = in(reg) kind,
                mask = in(reg) mask,
                nk = in(reg) kind ^ flip,
                out("x0") _, out("x1") _, out("x2") _, out("x3") _, out("x4") _, out("x5") _,
                out("x6") _, out("x7") _, out("x8") _, out("x9") _, out("x10") _, out("x11") _,
                out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _, out("x17") _,
                options(nostack)
            )
        };
        out
    }
    #[cfg(not(target_arch = "aarch64"))]
    // SAFETY: as this function's own contract.
    unsafe {
        portable::flip_groups(p, end, kind, mask, flip)
    }
}

/// The contpte unfold of a group of 16 level-3 entries at `p` (aligned to the group), when all
/// 16 are valid pages with the contiguous bit: clears it in each and returns true. Otherwise
/// writes nothing and returns false (PROT_NONE members, holes: the caller's loop). 49
/// instructions.
///
/// # Safety
/// `p` points to 16 entries of a level-3 table's memory the caller may read and write.
#[inline(always)]
pub(crate) unsafe fn unfold16(p: *mut u64) -> bool {
    #[cfg(target_arch = "aarch64")]
    {
        let ok: u64;
        // SAFETY: per the caller, the 16 entries from `p` are ours to read and write; x0-x17
        // are scratch; nothing is stored unless every entry passed.
        unsafe {
            core::arch::asm!(
                "mov {ok}, #0",
                load16!("p"),
                reduce16!("and"),
                // Every bit of `need` (valid, page, contiguous) set in every entry.
                "bics xzr, {need}, x16",
                "b.ne 3f",
                each16!("and x\\i, x\\i, {keep}"),
                store16!("p"),
                "mov {ok}, #1",
                "3:",
                p = in(reg) p,
                ok = out(reg) ok,
                need = in(reg) 3 | CONT_BIT,
                keep = in(reg) !CONT_BIT,
                out("x0") _, out("x1") _, out("x2") _, out("x3") _, out("x4") _, out("x5") _,
                out("x6") _, out("x7") _, out("x8") _, out("x9") _, out("x10") _, out("x11") _,
                out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _, out("x17") _,
                options(nostack)
            )
        };
        ok != 0
    }
    #[cfg(not(target_arch = "aarch64"))]
    // SAFETY: as this function's own contract.
    unsafe {
        portable::unfold16(p)
    }
}

/// The contpte fold of a group of 16 level-3 entries at `p` (aligned to the group), when the
/// head is a valid page without the contiguous bit, its output aligned to 64 KiB, and entry k
/// is exactly the head plus k pages (every other bit equal, software bits included): sets the
/// contiguous bit in each and returns true. Otherwise writes nothing and returns false (the
/// caller's check takes the cases this one leaves: PROT_NONE groups, members whose software
/// bits differ). 72 instructions.
///
/// # Safety
/// As [`unfold16`].
#[inline(always)]
pub(crate) unsafe fn fold16(p: *mut u64) -> bool {
    #[cfg(target_arch = "aarch64")]
    {
        let ok: u64;
        // SAFETY: as in `unfold16`. Entry k - entry k-1 == 4096 for every k, with a head whose
        // output bits 15:12 are clear, means entry k == head + k * 4096 with no carry out of the
        // output address: every other bit equal.
        unsafe {
            core::arch::asm!(
                "mov {ok}, #0",
                load16!("p"),
                "and x16, x0, #3",
                "cmp x16, #3",
                "b.ne 3f",
                "tst x0, #0x10000000000000",
                "b.ne 3f",
                "tst x0, #0xf000",
                "b.ne 3f",
                "mov x17, #4096",
                "sub x16, x1, x0",
                "cmp x16, x17",
                "sub x16, x2, x1",
                "ccmp x16, x17, #0, eq",
                "sub x16, x3, x2",
                "ccmp x16, x17, #0, eq",
                "sub x16, x4, x3",
                "ccmp x16, x17, #0, eq",
                "sub x16, x5, x4",
                "ccmp x16, x17, #0, eq",
                "sub x16, x6, x5",
                "ccmp x16, x17, #0, eq",
                "sub x16, x7, x6",
                "ccmp x16, x17, #0, eq",
                "sub x16, x8, x7",
                "ccmp x16, x17, #0, eq",
                "sub x16, x9, x8",
                "ccmp x16, x17, #0, eq",
                "sub x16, x10, x9",
                "ccmp x16, x17, #0, eq",
                "sub x16, x11, x10",
                "ccmp x16, x17, #0, eq",
                "sub x16, x12, x11",
                "ccmp x16, x17, #0, eq",
                "sub x16, x13, x12",
                "ccmp x16, x17, #0, eq",
                "sub x16, x14, x13",
                "ccmp x16, x17, #0, eq",
                "sub x16, x15, x14",
                "ccmp x16, x17, #0, eq",
                "b.ne 3f",
                each16!("orr x\\i, x\\i, #0x10000000000000"),
                store16!("p"),
                "mov {ok}, #1",
                "3:",
                p = in(reg) p,
                ok = out(reg) ok,
                out("x0") _, out("x1") _, out("x2") _, out("x3") _, out("x4") _, out("x5") _,
                out("x6") _, out("x7") _, out("x8") _, out("x9") _, out("x10") _, out("x11") _,
                out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _, out("x17") _,
                options(nostack)
            )
        };
        ok != 0
    }
    #[cfg(not(target_arch = "aarch64"))]
    // SAFETY: as this function's own contract.
    unsafe {
        portable::fold16(p)
    }
}

const _: () = assert!(CONT_BIT == 0x10000000000000, "the assembly above writes the contiguous bit as 1 << 52");

/// What the assembly does, written plainly: the spec the host tests check it by (off aarch64
/// these are the functions).
#[cfg_attr(target_arch = "aarch64", allow(dead_code))]
pub(crate) mod portable {
    use super::{CONT_BIT, GROUP};

    /// # Safety
    /// As [`super::flip_groups`].
    pub(crate) unsafe fn flip_groups(mut p: *mut u64, end: *mut u64, kind: u64, mask: u64, flip: u64) -> *mut u64 {
        while (end as usize).saturating_sub(p as usize) >= GROUP * 8 {
            // SAFETY: the group lies inside `[p, end)` (caller's contract).
            let g = unsafe { read(p) };
            if g.iter().any(|d| (d ^ kind) & mask != 0) {
                break;
            }
            // SAFETY: as above.
            unsafe { write(p, g.map(|d| d ^ flip)) };
            p = p.wrapping_add(GROUP);
        }
        p
    }

    /// # Safety
    /// As [`super::unfold16`].
    pub(crate) unsafe fn unfold16(p: *mut u64) -> bool {
        // SAFETY: the caller's 16 entries.
        let g = unsafe { read(p) };
        if !g.iter().all(|d| d & (3 | CONT_BIT) == 3 | CONT_BIT) {
            return false;
        }
        // SAFETY: as above.
        unsafe { write(p, g.map(|d| d & !CONT_BIT)) };
        true
    }

    /// # Safety
    /// As [`super::fold16`].
    pub(crate) unsafe fn fold16(p: *mut u64) -> bool {
        // SAFETY: the caller's 16 entries.
        let g = unsafe { read(p) };
        let head = g[0];
        if head & 3 != 3 || head & CONT_BIT != 0 || head & 0xf000 != 0 {
            return false;
        }
        if !g.iter().enumerate().all(|(k, d)| *d == head.wrapping_add(k as u64 * 4096)) {
            return false;
        }
        // SAFETY: as above.
        unsafe { write(p, g.map(|d| d | CONT_BIT)) };
        true
    }

    /// # Safety
    /// 16 readable entries from `p`.
    unsafe fn read(p: *mut u64) -> [u64; GROUP] {
        // SAFETY: per the caller; volatile, as every descriptor access.
        core::array::from_fn(|k| unsafe { p.add(k).read_volatile() })
    }

    /// # Safety
    /// 16 writable entries from `p`.
    unsafe fn write(p: *mut u64, g: [u64; GROUP]) {
        for (k, d) in g.into_iter().enumerate() {
            // SAFETY: per the caller; each store single-copy atomic.
            unsafe { p.add(k).write_volatile(d) };
        }
    }
}

/// A table's 4 KiB, aligned as one.
#[repr(C, align(4096))]
struct Table([u64; 512]);

/// Checks the functions above (and the fill of a new table) against their portable spec on `cases` drawn cases each (from
/// `seed`): groups of every kind the callers meet (alike runs, holes, a member of another kind,
/// output addresses in and out of sequence, contiguous bits), each run on two copies of one
/// buffer, one by the function and one by the spec; the buffers and results must be equal.
/// On aarch64 this holds the assembly to the spec on the CPU (the kernel's `test=pgtable-groups`);
/// elsewhere both sides are the spec. Returns the number of comparisons.
///
/// # Errors
/// The first case where they differ, described.
pub fn check_against_spec(seed: u64, cases: u32) -> Result<u64, alloc::string::String> {
    use alloc::format;
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    const N: usize = 5 * GROUP + 5;
    let mut compared = 0;
    for case in 0..cases {
        // A run of one kind (valid or PROT_NONE pages, random attributes), then disturbed.
        let kind = (next() & 0xffff_0000_0000_0fff & !CONT_BIT) | if case % 3 == 0 { 0 } else { 3 };
        let mut a = [0u64; N];
        for (k, d) in a.iter_mut().enumerate() {
            *d = kind | ((next() & 0xf_ffff) << 12) | ((k as u64 & 1) << 12);
        }
        for _ in 0..(next() % 4) {
            let at = (next() as usize) % N;
            a[at] = match next() % 4 {
                0 => 0,
                1 => a[at] ^ (1 << (next() % 12)),
                2 => a[at] ^ (1 << (48 + next() % 16)),
                _ => a[at] ^ ((next() & 0xff) << 12),
            };
        }
        let mask = if case % 5 == 0 { !0xffff_ffff_f000 & !crate::descriptor::PERM_BITS } else { !0xffff_ffff_f000 };
        let flip = next() & (crate::descriptor::PERM_BITS | 1);
        let start = (next() as usize) % 5;
        let (mut x, mut y) = (a, a);
        let px = x.as_mut_ptr();
        let py = y.as_mut_ptr();
        // SAFETY: both ranges lie inside their own local buffer.
        let (sx, sy) = unsafe {
            (
                flip_groups(px.add(start), px.add(N), kind, mask, flip).offset_from(px),
                portable::flip_groups(py.add(start), py.add(N), kind, mask, flip).offset_from(py),
            )
        };
        if (sx, x) != (sy, y) {
            return Err(format!(
                "flip_groups case {case}: stopped at {sx} (spec {sy}); entries {:x?} (spec {:x?})",
                &x[..],
                &y[..]
            ));
        }
        compared += 1;
        // A group of 16 pages: folded or not, in sequence or not, disturbed or not.
        let head = (next() & 0xffff_0000_0000_0fff & !(CONT_BIT | 2)) | 3 | ((next() & 0xfff_fff0) << 12);
        let cont = if case % 2 == 0 { CONT_BIT } else { 0 };
        let mut g: [u64; GROUP] = core::array::from_fn(|k| head.wrapping_add(k as u64 * 4096) | cont);
        if next() % 3 == 0 {
            let at = (next() as usize) % GROUP;
            g[at] = match next() % 5 {
                0 => 0,
                1 => g[at] ^ 1,
                2 => g[at] ^ 2,
                3 => g[at] ^ (1 << (55 + next() % 4)),
                _ => g[at] ^ CONT_BIT,
            };
        }
        type Group = unsafe fn(*mut u64) -> bool;
        for (f, spec) in [(unfold16 as Group, portable::unfold16 as Group), (fold16, portable::fold16)] {
            let (mut x, mut y) = (g, g);
            // SAFETY: 16 entries of local buffers.
            let (rx, ry) = unsafe { (f(x.as_mut_ptr()), spec(y.as_mut_ptr())) };
            if (rx, x) != (ry, y) {
                return Err(format!("fold/unfold case {case}: {rx} (spec {ry}); {x:x?} (spec {y:x?}) from {g:x?}"));
            }
            compared += 1;
        }
        // A new level-3 table: 512 entries from a head and a step (`fill_unlinked`, the vector
        // fill where the binary's mode allows it), against the portable fill.
        if case % 8 == 0 {
            let first = next() & !0xfff | 0x743;
            let step = if case % 16 == 0 { 4096 } else { next() };
            let mut x = alloc::boxed::Box::new(Table([next(); 512]));
            let mut y = alloc::boxed::Box::new(Table([0u64; 512]));
            // SAFETY: two whole 4 KiB local buffers, nothing else reads them.
            unsafe {
                crate::frame::fill_unlinked(x.0.as_mut_ptr(), first, step);
                crate::frame::portable_fill(y.0.as_mut_ptr(), first, step);
            }
            if let Some(k) = (0..512).find(|&k| x.0[k] != y.0[k]) {
                return Err(format!(
                    "fill case {case} (first {first:#x}, step {step:#x}): entry {k} is {:#x} (spec {:#x})",
                    x.0[k], y.0[k]
                ));
            }
            compared += 1;
        }
    }
    Ok(compared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_agrees_with_itself_and_does_what_it_says() {
        assert_eq!(check_against_spec(7, 200).unwrap(), 625);
        // Alike groups flip, a different entry stops the run at its group.
        let kind = 0x0060_0000_0000_0743;
        let mut t: [u64; 40] = core::array::from_fn(|k| kind | ((k as u64 + 1) << 12));
        t[20] = 0;
        let p = t.as_mut_ptr();
        // SAFETY: inside `t`.
        let stop = unsafe { portable::flip_groups(p, p.add(40), kind, !0xffff_ffff_f000, 0x80).offset_from(p) };
        assert_eq!(stop, 16, "the second group holds a hole");
        assert!(t[..16].iter().all(|d| d & 0x80 != 0) && t[16..].iter().all(|d| *d == 0 || d & 0x80 == 0));
        // A folded group unfolds; a hole in it leaves it to the caller.
        let mut g: [u64; 16] = core::array::from_fn(|k| 0x0010_0000_4000_0743 + k as u64 * 4096);
        // SAFETY: 16 entries of `g`.
        assert!(unsafe { portable::unfold16(g.as_mut_ptr()) } && g.iter().all(|d| d & CONT_BIT == 0));
        // SAFETY: as above.
        assert!(unsafe { portable::fold16(g.as_mut_ptr()) } && g.iter().all(|d| d & CONT_BIT != 0));
        g[3] = 0;
        // SAFETY: as above.
        assert!(!unsafe { portable::unfold16(g.as_mut_ptr()) });
    }
}
