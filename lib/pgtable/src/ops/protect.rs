//! `protect`: change the permissions of a range; `set_software_bits`.

use crate::addr::InputAddress;
use crate::attrs::{Attributes, Perms};
use crate::descriptor::{decode_leaf, encode_leaf, sw, validate, Desc};
use crate::frame::FrameAlloc;
use crate::regime::Regime;
use crate::table::{Ctx, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{walk, WalkFlags};
use crate::Error;

/// Software bits a permission change carries over (PROT_NONE follows the new permissions).
const SW_KEEP: u64 = sw::MASK & !sw::PROT_NONE;

/// `old` with new permissions, everything else (output, memory type, nG, contiguous bit,
/// software bits) kept.
pub(crate) fn with_perms(regime: Regime, level: usize, old: Desc, perms: Perms) -> Result<Desc, Error> {
    let attrs = decode_leaf(regime, old).with_perms(perms);
    let new = encode_leaf(regime, old.addr(), attrs, level, old.is_contiguous())?;
    Ok(new.with_sw_bits(SW_KEEP, old.sw_bits()))
}

impl<A: FrameAlloc> PageTable<A> {
    /// Sets the permissions of every mapping in `[start, start + size)` to `perms`
    /// (`Perms::NONE` makes them PROT_NONE; PROT_NONE -> accessible needs no TLBI). Blocks
    /// crossing the ends are split (live under BBML2, else with break-before-make); contiguous
    /// ranges crossing them are unfolded; a contiguous range entirely inside is rewritten as a
    /// whole and stays contiguous: under BBML2 in place, with one flush for the whole operation
    /// (range TLBI, per page, or whole context past the threshold), else with break-before-make
    /// on the group. Holes are skipped. Errors: range errors, `InvalidAttributes` (e.g. execute on
    /// device memory), `OutOfMemory` (splitting).
    pub fn protect<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
        perms: Perms,
    ) -> Result<(), Error> {
        let (s, e) = self.offsets(start, size)?;
        let (root, regime) = self.root_and_regime();
        validate(regime, Attributes::normal(perms))?;
        let mut ctx = self.ctx(tlb);
        let r = walk(&mut ctx, regime, root, s, e, WalkFlags::LEAF, &mut |ctx, en| {
            let mut d = en.desc;
            if !d.is_mapping(en.level) {
                return Ok(());
            }
            if !en.inside(s, e) {
                return ctx.split_one_level(en);
            }
            let level = en.level;
            let new = with_perms(regime, level, d, perms)?;
            if new == d {
                return Ok(());
            }
            if d.is_contiguous() {
                if Ctx::<A, T>::group_inside(en, s, e) {
                    return ctx.repaint_group(en, |o| with_perms(regime, level, o, perms).unwrap_or(o));
                }
                ctx.convert_group(en, false);
                d = ctx.read_desc(en.table, en.index);
            }
            let new = with_perms(regime, level, d, perms)?;
            ctx.write(en.table, en.index, new);
            ctx.record_leaf_change(en.off, level, d, new);
            Ok(())
        });
        ctx.finish();
        r
    }

    /// Sets the software bits selected by `mask` (of [`sw::DIRTY`], [`sw::WRITABLE`],
    /// [`sw::OWNER`]) to those of `value` in every mapping of the range. The hardware ignores
    /// these bits: no TLB maintenance. Blocks are not split (the bits apply to whole leaves).
    pub fn set_software_bits<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
        mask: u64,
        value: u64,
    ) -> Result<(), Error> {
        if mask & !SW_KEEP != 0 {
            return Err(Error::InvalidAttributes);
        }
        let (s, e) = self.offsets(start, size)?;
        let (root, regime) = self.root_and_regime();
        let mut ctx = self.ctx(tlb);
        let r = walk(&mut ctx, regime, root, s, e, WalkFlags::LEAF, &mut |ctx, en| {
            let d = en.desc;
            if d.is_mapping(en.level) {
                let new = d.with_sw_bits(mask, value);
                if new != d {
                    ctx.write(en.table, en.index, new);
                    ctx.record_leaf_change(en.off, en.level, d, new);
                }
            }
            Ok(())
        });
        ctx.finish();
        r
    }
}
