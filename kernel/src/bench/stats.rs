//! Summaries of repeated measurements: median and spread, never the mean of a skewed sample.

/// Median and spread of a sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub min: u64,
    pub p10: u64,
    pub median: u64,
    pub p90: u64,
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
pub fn timing_fields<'r>(r: &'r mut abi::report::Record, ns: &Summary, insns: &Summary) -> &'r mut abi::report::Record {
    r.u64("median_ns", ns.median)
        .u64("p10_ns", ns.p10)
        .u64("p90_ns", ns.p90)
        .f64("spread", ns.spread(), 3)
        .u64("median_insns", insns.median)
}
