//! `test=mem-perms`: every permission `set_memory_*` sets must hold, through the mapping and,
//! under `rodata=full`, through the linear alias; the image must be W^X. Each denied access
//! must take the fault (caught and counted by [`crate::mm::fault`], not a crash) and each allowed
//! one must succeed. Prints one `mem_perms` record with the counts and the page-table facts, and
//! fails the run on the first broken expectation.

use crate::mm::fault::{
    probe_exec, probe_read, probe_write, sync_icache, Fault, EXEC_FAULTS, READ_FAULTS, WRITE_FAULTS,
};
use crate::mm::setmem::*;
use crate::mm::{info, TABLES};
use alloc::format;
use alloc::string::String;
use core::sync::atomic::Ordering;
use pgtable::kmem::Rodata;

/// A64 `RET`.
const RET: u32 = 0xd65f_03c0;

struct Checker {
    checks: u64,
}

impl Checker {
    fn denied(&mut self, what: &str, r: Result<(), Fault>, addr: u64, translation: bool) -> Result<(), String> {
        self.checks += 1;
        match r {
            Ok(()) => Err(format!("{what} at {addr:#x} succeeded but must fault")),
            Err(f) if f.far != addr => Err(format!("{what}: fault at FAR {:#x}, expected {addr:#x}", f.far)),
            Err(f) if translation && !f.is_translation() => {
                Err(format!("{what}: {} (ESR {:#x}), expected a translation fault", f.describe(), f.esr))
            }
            Err(f) if !translation && !f.is_permission() => {
                Err(format!("{what}: {} (ESR {:#x}), expected a permission fault", f.describe(), f.esr))
            }
            Err(f) => {
                rt::println!("kernel:   {what} at {addr:#x}: caught {} (ESR {:#x})", f.describe(), f.esr);
                Ok(())
            }
        }
    }
    fn allowed<T>(&mut self, what: &str, r: Result<T, Fault>, addr: u64) -> Result<T, String> {
        self.checks += 1;
        r.map_err(|f| format!("{what} at {addr:#x} faulted ({}, ESR {:#x}) but must succeed", f.describe(), f.esr))
    }
}

pub fn run() -> Result<(), String> {
    let mm = info();
    let full = mm.rodata == Rodata::Full;
    let (w0, r0, x0) = counts();
    let splits0 = TABLES.lock().as_ref().map(|t| t.kernel.stats().splits).unwrap_or(0);
    let mut c = Checker { checks: 0 };

    // A vmalloc page and its linear alias.
    let va = crate::mm::vmalloc(1, false)?;
    let alias = linear_alias(va).ok_or("vmalloc page has no translation")?;
    let (alias_level_before, _) = leaf_of(alias).ok_or("no linear alias")?;
    rt::println!("kernel: mem-perms: page {va:#x}, linear alias {alias:#x} (level {alias_level_before} leaf)");
    c.allowed("write to a fresh page", probe_write(va, 0x1111), va)?;

    // Bad requests are refused, each with its own error, and change nothing.
    match set_memory_ro(0x40_0000, 1) {
        Err(SetMemoryError::NotKernel { va: 0x40_0000, .. }) => c.checks += 1,
        other => return Err(format!("set_memory_ro on a user address: {other:?}")),
    }
    match set_memory_ro(va + 8, 1) {
        Err(SetMemoryError::Table { at, err: pgtable::Error::Misaligned { .. }, .. }) if at == va + 8 => c.checks += 1,
        other => return Err(format!("set_memory_ro on a misaligned address: {other:?}")),
    }
    c.allowed("write after refused set_memory calls", probe_write(va, 0x1111), va)?;

    set_memory_ro(va, 1)?;
    // The live splits one page going read-only caused (its alias's block under rodata=full;
    // later allocations of this test may land in other blocks, so count only these).
    let splits = TABLES.lock().as_ref().map(|t| t.kernel.stats().splits - splits0).unwrap_or(0);
    c.denied("write after set_memory_ro", probe_write(va, 0x2222), va, false)?;
    let v = c.allowed("read after set_memory_ro", probe_read(va), va)?;
    if v != 0x1111 {
        return Err(format!("read {v:#x} after a denied write, expected 0x1111"));
    }
    if full {
        c.denied("write through the linear alias after set_memory_ro", probe_write(alias, 0x3333), alias, false)?;
        let (lvl, _) = leaf_of(alias).unwrap();
        if lvl != 3 {
            return Err(format!("the alias of a read-only page is a level-{lvl} leaf, expected a page"));
        }
    } else {
        c.allowed(
            "write through the linear alias (alias permissions only with rodata=full)",
            probe_write(alias, 0x1111),
            alias,
        )?;
    }
    set_memory_rw(va, 1)?;
    c.allowed("write after set_memory_rw", probe_write(va, 0x4444), va)?;
    c.allowed("write through the linear alias after set_memory_rw", probe_write(alias, 0x5555), alias)?;
    if c.allowed("read back", probe_read(va), va)? != 0x5555 {
        return Err("the page and its linear alias disagree".into());
    }

    // Execute: a lone RET, made read-only and executable (W^X), then not executable.
    // SAFETY: `va` is our own mapped, writable page; one aligned 4-byte store.
    unsafe { (va as *mut u32).write_volatile(RET) };
    sync_icache(va, 4);
    c.denied("execute from a fresh (NX) page", probe_exec(va), va, false)?;
    set_memory_ro(va, 1)?;
    set_memory_x(va, 1)?;
    c.allowed("execute after set_memory_ro + set_memory_x", probe_exec(va), va)?;
    c.denied("execute through the linear alias (never executable)", probe_exec(alias), alias, false)?;
    set_memory_nx(va, 1)?;
    c.denied("execute after set_memory_nx", probe_exec(va), va, false)?;
    set_memory_rw(va, 1)?;
    c.allowed("write after set_memory_rw", probe_write(va, 0x6666), va)?;

    // Invalid / valid.
    set_memory_invalid(va, 1)?;
    c.denied("read after set_memory_invalid", probe_read(va).map(|_| ()), va, true)?;
    if full {
        c.denied("read through the linear alias after set_memory_invalid", probe_read(alias).map(|_| ()), alias, true)?;
    }
    set_memory_valid(va, 1)?;
    if c.allowed("read after set_memory_valid", probe_read(va), va)? != 0x6666 {
        return Err("contents lost across invalid/valid".into());
    }
    c.allowed("read through the alias after set_memory_valid", probe_read(alias), alias)?;

    // The image is W^X (unless rodata=off): write a word of text / rodata back to itself.
    let [start, text_end, ro_end, _] = mm.image;
    for (what, addr) in [("kernel text", start + 0x40), ("kernel rodata", text_end), ("kernel data", ro_end)] {
        // SAFETY: reading a word of our own mapped image.
        let word = unsafe { (addr as *const u64).read_volatile() };
        let writable = mm.rodata == Rodata::Off || addr >= ro_end;
        if writable {
            c.allowed(&format!("write to {what}"), probe_write(addr, word), addr)?;
        } else {
            c.denied(&format!("write to {what}"), probe_write(addr, word), addr, false)?;
        }
        let a = crate::mm::layout::image_linear_alias(addr);
        if full && addr < ro_end {
            c.denied(&format!("write to the linear alias of {what}"), probe_write(a, word), a, false)?;
        } else {
            c.allowed(&format!("write to the linear alias of {what}"), probe_write(a, word), a)?;
        }
    }

    // contpte: a folded vmalloc range unfolds on a one-page change and, with contpte on, folds
    // again once uniform; switched off at run time, it stays unfolded.
    let contpte_at_boot = crate::mm::contpte();
    let cva = crate::mm::vmalloc(16, true)?;
    let folded = |a: u64| leaf_of(a).map(|(_, c)| c).unwrap_or(false);
    let cpage = cva + 5 * crate::mm::frames::PAGE;
    if folded(cva) != contpte_at_boot {
        return Err(format!("a fresh 64 KiB vmalloc range folded: {}, contpte {contpte_at_boot}", folded(cva)));
    }
    crate::mm::set_contpte(true);
    crate::mm::setmem::set_memory_ro(cva, 16)?;
    crate::mm::setmem::set_memory_rw(cva, 16)?;
    let refolded_whole = folded(cva);
    set_memory_ro(cpage, 1)?;
    let unfolded = !folded(cva);
    c.denied("write to one read-only page of a 64 KiB range", probe_write(cpage, 1), cpage, false)?;
    c.allowed(
        "write to its neighbour",
        probe_write(cpage + crate::mm::frames::PAGE, 1),
        cpage + crate::mm::frames::PAGE,
    )?;
    set_memory_rw(cpage, 1)?;
    let refolded = folded(cva);
    crate::mm::set_contpte(false);
    set_memory_ro(cpage, 1)?;
    set_memory_rw(cpage, 1)?;
    let off_stays_unfolded = !folded(cva);
    crate::mm::set_contpte(contpte_at_boot);
    if !(refolded_whole && unfolded && refolded && off_stays_unfolded) {
        return Err(format!(
            "contpte: whole-range refold {refolded_whole}, unfolded by one page {unfolded}, refolded {refolded}, \
             contpte off stays unfolded {off_stays_unfolded}"
        ));
    }

    // vfree: the mapping goes away and the linear alias is read-write again for the frame's
    // next owner (here left read-only on purpose first).
    set_memory_ro(va, 1)?;
    crate::mm::vfree(va, 1)?;
    c.denied("read after vfree", probe_read(va).map(|_| ()), va, true)?;
    // The frame is free now (its next owner's; the kernel's frame cache keeps its list link in
    // the frame's first word): the write stores back what is there, testing only that it may.
    let keep = probe_read(alias).unwrap_or(0);
    c.allowed("write through the linear alias after vfree", probe_write(alias, keep), alias)?;
    crate::mm::vfree(cva, 16)?;

    let (w1, r1, x1) = counts();
    let table_pages = TABLES.lock().as_ref().map(|t| t.kernel.stats().table_pages).unwrap();
    let mut r = abi::report::Record::new("mem_perms");
    r.u64("checks", c.checks)
        .u64("write_faults", w1 - w0)
        .u64("read_faults", r1 - r0)
        .u64("exec_faults", x1 - x0)
        .str("rodata", mm.rodata.as_str())
        .bool("bbml2", mm.bbml2.enabled)
        .u64("alias_level_before", alias_level_before as u64)
        .u64("linear_splits", splits)
        .u64("table_pages", table_pages)
        .bool("contpte_refolded", refolded)
        .bool("contpte_off_stays_unfolded", off_stays_unfolded);
    rt::println!("{r}");
    rt::println!("kernel: mem-perms: {} checks passed", c.checks);
    Ok(())
}

fn counts() -> (u64, u64, u64) {
    (WRITE_FAULTS.load(Ordering::Relaxed), READ_FAULTS.load(Ordering::Relaxed), EXEC_FAULTS.load(Ordering::Relaxed))
}
