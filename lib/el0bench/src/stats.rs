//! Medians and spreads of repeated measurements (as the kernel's benchmarks summarise them).

/// Median and spread of a sample.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// 10th percentile.
    pub p10: u64,
    /// Median.
    pub median: u64,
    /// 90th percentile.
    pub p90: u64,
}

impl Summary {
    /// Sorts `samples` and summarises them (all zero for none).
    pub fn of(samples: &mut [u64]) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        samples.sort_unstable();
        let at = |q: usize| samples[(samples.len() - 1) * q / 100];
        Summary { n: samples.len(), p10: at(10), median: at(50), p90: at(90) }
    }

    /// (p90 - p10) / median.
    pub fn spread(&self) -> f64 {
        if self.median == 0 {
            0.0
        } else {
            (self.p90 - self.p10) as f64 / self.median as f64
        }
    }
}

/// `a / b` (0 when `b` is 0).
pub fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}
