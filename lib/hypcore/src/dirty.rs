//! Dirty-bitmap arithmetic for dirty logging: bit `i` of the bitmap is page `i` of a memslot,
//! in 64-bit little-endian words (as KVM's `KVM_GET_DIRTY_LOG`).
//!
//! The hypervisor keeps the words in frames of its own pool; these functions decide what to
//! write, and [`ClearRequest`] checks a `DIRTY_LOG_CLEAR` and says, word by word, which pages to
//! write-protect.

use abi::error::HypError;

/// Words needed for `pages` bits.
pub fn words_for(pages: u64) -> u64 {
    pages.div_ceil(64)
}

/// The bits of word `w` that belong to a bitmap of `pages` pages: all ones except in the last
/// word of a bitmap whose page count is not a multiple of 64.
pub fn valid_bits(pages: u64, w: u64) -> u64 {
    let left = pages.saturating_sub(w.saturating_mul(64));
    if left >= 64 {
        u64::MAX
    } else {
        (1u64 << left) - 1
    }
}

/// Sets every bit of a bitmap of `pages` pages (manual-protect with initially-set: every page
/// counts as dirty until its first clear); the bits past the last page stay zero.
pub fn set_all(words: &mut [u64], pages: u64) {
    for (w, word) in words.iter_mut().enumerate() {
        *word = valid_bits(pages, w as u64);
    }
}

/// A checked `DIRTY_LOG_CLEAR`: `count` pages from page `first`, in a slot of `pages` pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClearRequest {
    /// First page (a multiple of 64).
    pub first: u64,
    /// Pages (a multiple of 64, unless the range ends at the slot's last page).
    pub count: u64,
}

impl ClearRequest {
    /// Checks the arguments against a slot of `pages` pages: `count` > 0, `first` a multiple of
    /// 64, the range inside the slot, and `count` a multiple of 64 unless it ends the slot.
    pub fn new(first: u64, count: u64, pages: u64) -> Result<ClearRequest, HypError> {
        if count == 0 {
            return Err(HypError::InvalidParameter);
        }
        if !first.is_multiple_of(64) {
            return Err(HypError::Misaligned);
        }
        let end = first.checked_add(count).ok_or(HypError::OutOfRange)?;
        if end > pages {
            return Err(HypError::OutOfRange);
        }
        if !count.is_multiple_of(64) && end != pages {
            return Err(HypError::Misaligned);
        }
        Ok(ClearRequest { first, count })
    }

    /// Bytes of the caller's mask.
    pub fn mask_bytes(&self) -> u64 {
        words_for(self.count) * 8
    }

    /// Words of the mask.
    pub fn mask_words(&self) -> u64 {
        words_for(self.count)
    }

    /// Mask word `w` as it applies: the bits past `count` are dropped.
    pub fn applied(&self, w: u64, mask_word: u64) -> u64 {
        mask_word & valid_bits(self.count, w)
    }

    /// The bitmap word that mask word `w` clears.
    pub fn bitmap_word(&self, w: u64) -> usize {
        (self.first / 64 + w) as usize
    }

    /// Where a run of whole mask words from word `w` on ends: the first word at or after `w`
    /// that is not all ones (`mask(w)` read once each) or not wholly inside the request. Words
    /// `w..end` clear their whole bitmap words and protect pages [`words_span`](Self::words_span)
    /// `(w, end)`, exactly what each would one by one, without the per-word work (a slot cleared
    /// whole is all such words).
    pub fn ones_run(&self, w: u64, mask: impl Fn(u64) -> u64) -> u64 {
        let whole = self.count / 64;
        let mut end = w;
        // Eight words at a time (their AND, one compare), then one by one where a group is not
        // all ones or the request ends: a cleared slot of 8 GiB has 32768 words.
        while end + 8 <= whole && (0..8).fold(u64::MAX, |all, k| all & mask(end + k)) == u64::MAX {
            end += 8;
        }
        while end < whole && mask(end) == u64::MAX {
            end += 1;
        }
        end
    }

    /// Pages `[lo, hi)` of the slot that the whole mask words `w..end` cover.
    pub fn words_span(&self, w: u64, end: u64) -> (u64, u64) {
        (self.first + w * 64, self.first + end * 64)
    }

    /// Pages `[lo, hi)` of the slot that mask word `w` (already [`applied`](Self::applied),
    /// non-zero) write-protects: from its first to its last set bit, as KVM does.
    pub fn protect_span(&self, w: u64, m: u64) -> (u64, u64) {
        let base = self.first + w * 64;
        (base + m.trailing_zeros() as u64, base + 64 - m.leading_zeros() as u64)
    }
}

/// Adds the span `[lo, hi)` of the next mask word to the current run of pages to write-protect:
/// a span that starts where the run ends extends it; any other span starts a new run, and the
/// finished run is returned. Contiguous words then cost one write-protect (one walk, one flush)
/// instead of one each, and exactly the same pages are protected.
pub fn extend_run(run: &mut Option<(u64, u64)>, span: (u64, u64)) -> Option<(u64, u64)> {
    match run {
        Some((_, hi)) if *hi == span.0 => {
            *hi = span.1;
            None
        }
        _ => run.replace(span),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_spans_make_one_run_and_a_gap_ends_it() {
        let mut run = None;
        let mut done = alloc::vec::Vec::new();
        for span in [(0, 64), (64, 128), (128, 130), (192, 256), (256, 320), (330, 331)] {
            done.extend(extend_run(&mut run, span));
        }
        done.extend(run);
        assert_eq!(done, [(0, 130), (192, 320), (330, 331)]);
    }

    #[test]
    fn last_word_of_an_odd_slot_is_exact() {
        let mut words = [0u64; 2];
        set_all(&mut words, 100);
        assert_eq!(words, [u64::MAX, (1 << 36) - 1]);
        set_all(&mut words, 128);
        assert_eq!(words, [u64::MAX, u64::MAX]);
        assert_eq!(valid_bits(0, 0), 0);
    }

    #[test]
    fn clear_arguments_are_checked_in_order() {
        assert_eq!(ClearRequest::new(0, 0, 128), Err(HypError::InvalidParameter));
        assert_eq!(ClearRequest::new(3, 64, 128), Err(HypError::Misaligned));
        assert_eq!(ClearRequest::new(64, 128, 128), Err(HypError::OutOfRange));
        assert_eq!(ClearRequest::new(u64::MAX - 63, 64, 128), Err(HypError::OutOfRange));
        assert_eq!(ClearRequest::new(0, 10, 128), Err(HypError::Misaligned));
        assert!(ClearRequest::new(64, 36, 100).is_ok(), "a partial count that ends the slot");
    }

    #[test]
    fn a_run_of_whole_words_ends_at_a_partial_word_or_the_request_end() {
        let c = ClearRequest::new(64, 64 * 4 + 36, 64 * 5 + 36).unwrap();
        let mask = [u64::MAX, u64::MAX, 7, u64::MAX, u64::MAX];
        let at = |w: u64| mask[w as usize];
        assert_eq!(c.ones_run(0, at), 2);
        assert_eq!(c.ones_run(2, at), 2, "a partial word starts no run");
        assert_eq!(c.ones_run(3, at), 4, "the last word is only partly inside the request");
        assert_eq!(c.words_span(0, 2), (64, 192));
        // The run's span is the spans of its words joined.
        assert_eq!(c.words_span(0, 2), (c.protect_span(0, u64::MAX).0, c.protect_span(1, u64::MAX).1));
        let exact = ClearRequest::new(0, 128, 128).unwrap();
        assert_eq!(exact.ones_run(0, |_| u64::MAX), 2);
        // Groups of eight and the words after them: a zero bit anywhere ends the run there.
        let big = ClearRequest::new(0, 64 * 40, 64 * 40).unwrap();
        for hole in [0, 3, 7, 8, 15, 16, 30, 39] {
            let at = |w: u64| if w == hole { !(1 << 9) } else { u64::MAX };
            assert_eq!(big.ones_run(0, at), hole, "hole at word {hole}");
            assert_eq!(big.ones_run(hole + 1, at), 40, "after the hole at word {hole}");
        }
        assert_eq!(big.ones_run(0, |_| u64::MAX), 40);
    }

    #[test]
    fn a_mask_word_protects_from_its_first_to_its_last_bit() {
        let c = ClearRequest::new(64, 36, 100).unwrap();
        assert_eq!(c.mask_words(), 1);
        assert_eq!(c.applied(0, u64::MAX), (1 << 36) - 1, "bits past the slot's end dropped");
        assert_eq!(c.bitmap_word(0), 1);
        assert_eq!(c.protect_span(0, 0b1010_0000), (64 + 5, 64 + 8));
        let c = ClearRequest::new(0, 130, 130).unwrap();
        assert_eq!((c.mask_words(), c.mask_bytes()), (3, 24), "130 pages: three words of mask");
    }
}
