//! `remap`: map a range whatever is there, changing output addresses with break-before-make.

use crate::addr::{InputAddress, PhysAddr};
use crate::attrs::{Attributes, Constraints};
use crate::descriptor::{decode_leaf, encode_leaf, sw, Desc};
use crate::frame::FrameAlloc;
use crate::ops::map::summary_bits_to_clear;
use crate::table::{seeded_bug, Opts, PageTable};
use crate::tlb::TlbMaintenance;
use crate::walker::{Visit, WalkFlags};
use crate::Error;

impl<A: FrameAlloc, K: InputAddress> PageTable<A, K> {
    /// Maps `[start, start + size)` to `[pa, pa + size)` with `attrs` whether or not something
    /// is mapped there. Holes are filled as by [`map`](Self::map) (with `constraints`); existing
    /// leaves keep their size where the new output is aligned to it (else they are split) and
    /// lose the contiguous bit. A leaf whose output address, memory type or global bit changes
    /// goes through break-before-make (invalidate, TLBI, then write); a permission-only change
    /// is gathered like `protect`.
    ///
    /// # Errors
    /// As [`map`](Self::map), except `AlreadyMapped`. Entries changed before an error
    /// (`OutOfMemory` while splitting) keep their new mapping; the TLBs are consistent with the
    /// tables.
    pub fn remap<T: TlbMaintenance + ?Sized>(
        &mut self,
        tlb: &mut T,
        start: K,
        size: u64,
        pa: PhysAddr,
        attrs: Attributes,
        constraints: Constraints,
    ) -> Result<(), Error> {
        let (s, e, m) = self.map_args(start, size, pa, attrs, constraints)?;
        let regime = self.regime();
        // Blocks or writable leaves may land below existing tables: clear their summary bits on
        // the way.
        let clear = summary_bits_to_clear(attrs, constraints);
        let flags = if clear == 0 { WalkFlags::LEAF } else { WalkFlags::LEAF | WalkFlags::TABLE_PRE };
        self.run(tlb, Opts::DEFAULT, s, e, flags, |ctx, en| {
            if en.visit == Visit::TablePre {
                ctx.clear_table_summary(en, ctx.summary_to_clear(clear));
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
                if seeded_bug!(ctx, ElideTlbiOaChange) {
                    ctx.write(en.table, en.index, Desc::INVALID);
                } else {
                    ctx.break_entries(en.table, en.index, level, en.off, &[d]);
                }
                ctx.write(en.table, en.index, new);
            } else {
                ctx.write(en.table, en.index, new);
                ctx.record_leaf_change(en.off, level, d, new);
            }
            Ok(())
        })
    }
}
