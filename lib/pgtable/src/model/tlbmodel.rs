//! One CPU's model TLB: leaf entries bucketed by size and ordered by start (so overlap queries
//! and TLBIs by address touch only nearby entries), keyed so that a translation read twice from
//! the same descriptor is held once; walk-cache entries in a short list. Combined stage 1+2
//! entries have buckets of their own: a TLBI that can only remove those (`TLBI VMALLE1` under
//! stage 2) sweeps them alone, not the stage-2 entries beside them (hundreds of thousands in a
//! long random run).

use std::collections::BTreeMap;
use std::vec::Vec;

use super::state::{Cached, TlbEntry};

/// Entry sizes: 4 KiB, 64 KiB, 2 MiB, 32 MiB, 1 GiB.
const SIZES: [u64; 5] = [1 << 12, 1 << 16, 1 << 21, 1 << 25, 1 << 30];

/// (start, source table, source index, source value, shape bits).
type Key = (u64, u64, u64, u64, u8);

#[derive(Default)]
pub struct CpuTlb {
    leaves: [BTreeMap<Key, TlbEntry>; 5],
    /// Combined stage 1+2 leaf entries, bucketed the same way.
    combined: [BTreeMap<Key, TlbEntry>; 5],
    walks: Vec<TlbEntry>,
}

/// Which entries a sweep may remove: every kind, or only combined stage 1+2 leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Any entry.
    All,
    /// Only combined stage 1+2 leaf entries; the others are not looked at.
    CombinedOnly,
}

fn bucket(size: u64) -> usize {
    SIZES.iter().position(|&s| s == size).expect("leaf entry of a known size")
}

fn key(e: &TlbEntry) -> Key {
    let shape = match e.what {
        Cached::Leaf { contiguous_range, combined, .. } => contiguous_range as u8 | (combined as u8) << 1,
        Cached::Walk { .. } => 4,
    };
    (e.start, e.src.0, e.src.1 as u64, e.src.2, shape)
}

fn from(start: u64) -> Key {
    (start, 0, 0, 0, 0)
}

impl CpuTlb {
    pub fn insert(&mut self, e: TlbEntry) {
        match e.what {
            Cached::Walk { .. } => {
                if !self.walks.iter().any(|w| w.start == e.start && w.src == e.src) {
                    self.walks.push(e)
                }
            }
            Cached::Leaf { combined, .. } => {
                let buckets = if combined { &mut self.combined } else { &mut self.leaves };
                buckets[bucket(e.size)].insert(key(&e), e);
            }
        }
    }

    /// Every entry.
    pub fn iter(&self) -> impl Iterator<Item = &TlbEntry> {
        self.leaves.iter().chain(self.combined.iter()).flat_map(|b| b.values()).chain(self.walks.iter())
    }

    /// Entries overlapping `[s, e)`.
    pub fn overlapping(&self, s: u64, e: u64) -> impl Iterator<Item = &TlbEntry> {
        let leaves = self
            .leaves
            .iter()
            .zip(SIZES)
            .chain(self.combined.iter().zip(SIZES))
            .flat_map(move |(b, size)| b.range(from(s.saturating_sub(size - 1))..from(e)).map(|(_, v)| v));
        leaves.chain(self.walks.iter()).filter(move |x| x.start < e && s < x.start + x.size)
    }

    /// Keeps the entries for which `keep` holds, looking only at those overlapping `range`
    /// (every entry when `None`) and in `scope` (`keep` must hold for every entry outside it).
    pub fn retain(&mut self, range: Option<(u64, u64)>, scope: Scope, mut keep: impl FnMut(&TlbEntry) -> bool) {
        let others = match scope {
            Scope::All => Some(&mut self.leaves),
            Scope::CombinedOnly => None,
        };
        for (b, size) in
            others.into_iter().flat_map(|l| l.iter_mut().zip(SIZES)).chain(self.combined.iter_mut().zip(SIZES))
        {
            match range {
                None => b.retain(|_, v| keep(v)),
                Some((s, e)) => {
                    let gone: Vec<Key> = b
                        .range(from(s.saturating_sub(size - 1))..from(e))
                        .filter(|(_, v)| !keep(v))
                        .map(|(k, _)| *k)
                        .collect();
                    for k in gone {
                        b.remove(&k);
                    }
                }
            }
        }
        if scope == Scope::CombinedOnly {
            return;
        }
        self.walks.retain(|x| match range {
            Some((s, e)) if !(x.start < e && s < x.start + x.size) => true,
            _ => keep(x),
        });
    }
}
