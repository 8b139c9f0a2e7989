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

/// One step of the hypervisor's use of a guest's buffer (a bitmap it writes, a mask it reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferStep {
    /// The buffer is checked: guest RAM, aligned, long enough.
    Check,
    /// The hypervisor copies its words to it (GET) or reads the words from it (CLEAR).
    Access,
    /// `DC CIVAC` over it to the point of coherency: the guest may run with its MMU, and so its
    /// data caches, off, reading and writing memory itself.
    CleanInvalidate,
}

/// DIRTY_LOG_GET, in order: the bitmap is copied into the guest's buffer, then cleaned to the
/// point of coherency (a guest with its caches off reads memory, not the hypervisor's lines).
pub const GET_STEPS: [BufferStep; 3] = [BufferStep::Check, BufferStep::Access, BufferStep::CleanInvalidate];

/// DIRTY_LOG_CLEAR's mask, in order: cleaned and invalidated to the point of coherency before
/// it is read (a guest with its caches off wrote memory; a line the hypervisor still holds would
/// hide what it wrote).
pub const CLEAR_STEPS: [BufferStep; 3] = [BufferStep::Check, BufferStep::CleanInvalidate, BufferStep::Access];

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

/// The loop of a `DIRTY_LOG_CLEAR` over its mask words (`mask(w)`, the caller's memory: the
/// guest may change it meanwhile): each word's decision comes from one read of it, and the
/// bits it clears are cleared in the slot's bitmap (`clear_bits(bitmap word, bits)`) before
/// `protect(lo, hi)` write-protects the pages `[lo, hi)` that hold them, as KVM orders them (a
/// write between the two is then on a page still writable, and comes after the clear: the
/// caller copies the page after this returns; in the other order a write faulting in between
/// would set its bit and the clear would drop it). Each word protects from its first to its
/// last set bit, as KVM does; whole words go in runs ([`ClearRequest::ones_run`]); spans that
/// touch are protected together ([`extend_run`]). Stops at the first error of `protect`.
pub fn clear<E>(
    req: &ClearRequest,
    mask: impl Fn(u64) -> u64,
    mut clear_bits: impl FnMut(usize, u64),
    mut protect: impl FnMut(u64, u64) -> Result<(), E>,
) -> Result<(), E> {
    let mut run = None;
    let mut w = 0;
    while w < req.mask_words() {
        // Whole words (a slot cleared whole is all such words): their bitmap words cleared and
        // their pages added to the run together; else one word, from its first to its last bit.
        let end = req.ones_run(w, &mask);
        let (next, span) = if end > w {
            for k in w..end {
                clear_bits(req.bitmap_word(k), u64::MAX);
            }
            (end, req.words_span(w, end))
        } else {
            let m = req.applied(w, mask(w));
            if m == 0 {
                w += 1;
                continue;
            }
            clear_bits(req.bitmap_word(w), m);
            (w + 1, req.protect_span(w, m))
        };
        w = next;
        if let Some((lo, hi)) = extend_run(&mut run, span) {
            protect(lo, hi)?;
        }
    }
    match run {
        Some((lo, hi)) => protect(lo, hi),
        None => Ok(()),
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
        // The last page is inside, the page after it is not.
        assert!(ClearRequest::new(64, 64, 128).is_ok());
        assert_eq!(ClearRequest::new(64, 37, 100), Err(HypError::OutOfRange), "one page past the slot");
        assert_eq!(ClearRequest::new(128, 64, 128), Err(HypError::OutOfRange), "starts at the end");
        assert_eq!(ClearRequest::new(64, 128, 191), Err(HypError::OutOfRange), "whole words, one page past");
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

    extern crate std;
    use alloc::vec::Vec;
    use core::cell::{Cell, RefCell};
    use proptest::prelude::*;

    /// What [`clear`] did: the bitmap after it, the ranges it protected in order, and every
    /// page protected while its bit (one the clear clears) was still set.
    struct Cleared {
        words: Vec<u64>,
        protected: Vec<(u64, u64)>,
        early: Vec<u64>,
    }

    fn run(req: &ClearRequest, bitmap: &[u64], mask: impl Fn(u64) -> u64, clears: &dyn Fn(u64) -> bool) -> Cleared {
        let words = RefCell::new(bitmap.to_vec());
        let mut protected = Vec::new();
        let mut early = Vec::new();
        let r: Result<(), ()> = clear(
            req,
            mask,
            |i, bits| words.borrow_mut()[i] &= !bits,
            |lo, hi| {
                for p in lo..hi {
                    let set = words.borrow()[(p / 64) as usize] & (1 << (p % 64)) != 0;
                    if set && clears(p) {
                        early.push(p);
                    }
                }
                protected.push((lo, hi));
                Ok(())
            },
        );
        r.unwrap();
        Cleared { words: words.into_inner(), protected, early }
    }

    /// The pages a word's span covers, as KVM protects them: its first to its last set bit.
    fn spans(req: &ClearRequest, mask: &[u64]) -> Vec<u64> {
        let mut out = Vec::new();
        for w in 0..req.mask_words() {
            let m = req.applied(w, mask[w as usize]);
            if m != 0 {
                let (lo, hi) = req.protect_span(w, m);
                out.extend(lo..hi);
            }
        }
        out
    }

    fn check(pages: u64, first: u64, count: u64, bitmap: &[u64], mask: &[u64]) -> Result<(), TestCaseError> {
        let req = ClearRequest::new(first, count, pages).unwrap();
        let bit = |v: &[u64], p: u64| v[(p / 64) as usize] & (1 << (p % 64)) != 0;
        let in_mask = |p: u64| p >= first && p < first + count && bit(mask, p - first);
        let c = run(&req, bitmap, |w| mask[w as usize], &|p| in_mask(p) && bit(bitmap, p));
        prop_assert!(c.early.is_empty(), "pages protected before their bits were cleared: {:?}", c.early);
        for p in 0..words_for(pages) * 64 {
            let want = bit(bitmap, p) && !in_mask(p);
            prop_assert_eq!(bit(&c.words, p), want, "page {} (first {}, count {})", p, first, count);
        }
        let mut got: Vec<u64> = c.protected.iter().flat_map(|&(lo, hi)| lo..hi).collect();
        got.sort_unstable();
        prop_assert_eq!(&got, &spans(&req, mask), "protected pages (first {}, count {})", first, count);
        // One call per stretch of touching spans: in order, none touching the next.
        for pair in c.protected.windows(2) {
            prop_assert!(pair[0].1 < pair[1].0, "{:?}", c.protected);
        }
        prop_assert!(c.protected.iter().all(|&(lo, hi)| lo < hi && lo >= first && hi <= first + count));
        Ok(())
    }

    fn mask_word() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0u64), Just(u64::MAX), Just(1u64), Just(1u64 << 63), any::<u64>()]
    }

    proptest! {
        #[test]
        fn a_clear_clears_exactly_the_masked_bits_before_protecting_their_pages(
            pages in 1u64..900,
            first_word in 0u64..14,
            count in 1u64..900,
            bitmap in proptest::collection::vec(any::<u64>(), 15),
            mask in proptest::collection::vec(mask_word(), 15),
        ) {
            let first = (first_word * 64).min((pages - 1) / 64 * 64);
            let count = if (count % 64 == 0 && first + count <= pages) || first + count == pages {
                count
            } else {
                pages - first
            };
            check(pages, first, count, &bitmap, &mask)?;
        }
    }

    #[test]
    fn a_guest_buffer_is_at_the_point_of_coherency_when_either_side_reads_it() {
        let at = |steps: &[BufferStep], s: BufferStep| steps.iter().position(|&x| x == s).unwrap();
        for steps in [&GET_STEPS, &CLEAR_STEPS] {
            assert_eq!(steps[0], BufferStep::Check, "nothing touches an unchecked buffer");
            assert_eq!(steps.len(), 3);
        }
        // The guest reads what GET wrote: the clean comes after the copy.
        assert!(at(&GET_STEPS, BufferStep::Access) < at(&GET_STEPS, BufferStep::CleanInvalidate));
        // The hypervisor reads what the guest wrote: the invalidate comes before the read.
        assert!(at(&CLEAR_STEPS, BufferStep::CleanInvalidate) < at(&CLEAR_STEPS, BufferStep::Access));
    }

    #[test]
    fn whole_words_and_partial_words_at_the_slots_end() {
        let ones = [u64::MAX; 15];
        // A slot cleared whole: one run, every bit cleared, the odd last word exact.
        check(900, 0, 900, &ones, &ones).unwrap();
        check(900, 64, 900 - 64, &ones, &ones).unwrap();
        // Runs broken by a word with a hole, a zero word, a single bit at each end.
        let mut mask = ones;
        mask[3] = !(1 << 7);
        mask[5] = 0;
        mask[8] = 1;
        mask[9] = 1 << 63;
        check(900, 0, 900, &ones, &mask).unwrap();
        check(640, 64, 576, &ones, &mask).unwrap();
    }

    /// The guest may rewrite its mask while the hypervisor reads it: whatever a word reads at
    /// each look, a bit is never cleared without its page being write-protected after.
    #[test]
    fn a_mask_changing_under_the_clear_never_clears_a_bit_it_does_not_protect() {
        for seed in 0..64u64 {
            let reads = Cell::new(seed);
            let flip = |w: u64| {
                let n = reads.get();
                reads.set(n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407));
                match (n >> 33) % 4 {
                    0 => 0,
                    1 => u64::MAX,
                    2 => (n >> 7) ^ w,
                    _ => u64::MAX << (n % 64),
                }
            };
            let req = ClearRequest::new(0, 64 * 12, 64 * 12).unwrap();
            let bitmap = [u64::MAX; 12];
            let c = run(&req, &bitmap, flip, &|_| false);
            let protected = |p: u64| c.protected.iter().any(|&(lo, hi)| p >= lo && p < hi);
            for p in 0..64 * 12 {
                if c.words[(p / 64) as usize] & (1 << (p % 64)) == 0 {
                    assert!(protected(p), "seed {seed}: page {p}'s bit cleared, page left writable");
                }
            }
        }
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
