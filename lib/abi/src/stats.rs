//! Summaries of repeated measurements: median and spread, never the mean of a skewed sample.
//! The kernel's benchmarks and the EL0 programs' summarise the same way, and the xtask reads
//! the fields [`timing_fields`] writes.

/// Median and spread of a sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Smallest.
    pub min: u64,
    /// 10th percentile.
    pub p10: u64,
    /// Median.
    pub median: u64,
    /// 90th percentile.
    pub p90: u64,
    /// Largest.
    pub max: u64,
}

impl Summary {
    /// Sorts `samples` and summarizes them (all zero for an empty sample).
    pub fn of(samples: &mut [u64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let at = |q: usize| samples[(samples.len() - 1) * q / 100];
        Self {
            n: samples.len(),
            min: samples[0],
            p10: at(10),
            median: at(50),
            p90: at(90),
            max: samples[samples.len() - 1],
        }
    }

    /// (p90 - p10) / median: how noisy the sample is.
    pub fn spread(&self) -> f64 {
        if self.median == 0 {
            0.0
        } else {
            (self.p90 - self.p10) as f64 / self.median as f64
        }
    }
}

/// optimised / baseline (0 when the baseline is 0).
pub fn ratio(optimised: u64, baseline: u64) -> f64 {
    if baseline == 0 {
        0.0
    } else {
        optimised as f64 / baseline as f64
    }
}

/// Writes a row's timing figures, the same in every benchmark: `median_ns`, `p10_ns`,
/// `p90_ns`, `spread` (of `ns`) and `median_insns` (of `insns`, 0 without `-icount`).
pub fn timing_fields<'r>(
    r: &'r mut crate::report::Record,
    ns: &Summary,
    insns: &Summary,
) -> &'r mut crate::report::Record {
    r.u64("median_ns", ns.median)
        .u64("p10_ns", ns.p10)
        .u64("p90_ns", ns.p90)
        .f64("spread", ns.spread(), 3)
        .u64("median_insns", insns.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_sample() {
        let mut v: [u64; 11] = [50, 0, 100, 10, 90, 20, 80, 30, 70, 40, 60];
        let s = Summary::of(&mut v);
        assert_eq!((s.n, s.min, s.p10, s.median, s.p90, s.max), (11, 0, 10, 50, 90, 100));
        assert_eq!(s.spread(), 1.6);
        assert_eq!(Summary::of(&mut []), Summary::default());
        assert_eq!(Summary::of(&mut [7]).p90, 7);
        assert_eq!(ratio(3, 4), 0.75);
        assert_eq!(ratio(3, 0), 0.0);
    }
}
