//! `remap`: map a range whatever is there, changing output addresses with break-before-make.

use crate::addr::{InputAddress, PhysAddr};
use crate::attrs::{Attributes, Constraints};
use crate::descriptor::{decode_leaf, encode_leaf, sw, Desc};
use crate::frame::FrameAlloc;
use crate::table::{seeded_bug, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{walk, Visit, WalkFlags};
use crate::Error;

impl<A: FrameAlloc> PageTable<A> {
    /// Maps `[start, start + size)` to `[pa, pa + size)` with `attrs` whether or not something
    /// is mapped there. Holes are filled as by [`map`](Self::map) (with `constraints`); existing
    /// leaves keep their size where the new output is aligned to it (else they are split) and
    /// lose the contiguous bit. A leaf whose output address, memory type or global bit changes
    /// goes through break-before-make (invalidate, TLBI, then write); a permission-only change
    /// is gathered like `protect`.
    pub fn remap<I: InputAddress, T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: I,
        size: u64,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(), Error> {
        let (s, e, m) = self.map_args(start, size, pa, attrs, constraints)?;
        let (root, regime) = self.root_and_regime();
        let mut ctx = self.ctx(tlb);
        // Blocks may land below existing tables: clear their "no blocks" summary on the way.
        let flags = if constraints.no_blocks { WalkFlags::LEAF } else { WalkFlags::LEAF | WalkFlags::TABLE_PRE };
        let r = walk(&mut ctx, regime, root, s, e, flags, &mut |ctx, en| {
            if en.visit == Visit::TablePre {
                ctx.clear_table_summary(en);
                return Ok(());
            }
            let mut d = en.desc;
            let level = en.level;
            if !d.is_mapping(level) {
                return ctx.map_into_empty(en, &m);
            }
            let out = m.out(en.off.max(s));
            if !en.inside(s, e) || out % en.size() != 0 {
                return ctx.split_one_level(en);
            }
            if d.is_contiguous() {
                ctx.convert_group(en, false);
                d = ctx.read_desc(en.table, en.index);
            }
            let new = encode_leaf(regime, PhysAddr::new(out), attrs, level, false)?
                .with_sw_bits(sw::MASK & !sw::PROT_NONE, d.sw_bits());
            if new == d {
                return Ok(());
            }
            let old_attrs = decode_leaf(regime, d);
            let bbm = d.is_valid()
                && (d.addr().as_u64() != out || old_attrs.mem != attrs.mem || ctx.is_global(d) != ctx.is_global(new));
            if bbm && ctx.live {
                ctx.write(en.table, en.index, Desc::INVALID);
                if !seeded_bug!(ctx, ElideTlbiOaChange) {
                    let global = ctx.is_global(d);
                    ctx.flush_now(en.off, en.size(), en.size(), true, global);
                }
                ctx.write(en.table, en.index, new);
            } else {
                ctx.write(en.table, en.index, new);
                ctx.record_leaf_change(en.off, level, d, new);
            }
            Ok(())
        });
        ctx.finish();
        r
    }
}
