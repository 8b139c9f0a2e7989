//! The generic timer's counter and nanoseconds, converted in one place (the kernel's tick and
//! clocks, the hypervisor's timings, the EL0 programs' timings; QEMU `virt` counts at 62.5 MHz,
//! 16 ns a tick).

const NS_PER_S: u128 = 1_000_000_000;

/// Counter ticks to nanoseconds at `freq` Hz (rounded down; a zero frequency counts as 1 Hz).
pub fn ticks_to_ns(ticks: u64, freq: u64) -> u64 {
    (ticks as u128 * NS_PER_S / freq.max(1) as u128).min(u64::MAX as u128) as u64
}

/// Nanoseconds to counter ticks at `freq` Hz (rounded up, so a wait is never short; saturating).
pub fn ns_to_ticks(ns: u64, freq: u64) -> u64 {
    (ns as u128 * freq.max(1) as u128).div_ceil(NS_PER_S).min(u64::MAX as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_the_safe_way_and_saturate() {
        let f = 62_500_000;
        assert_eq!(ticks_to_ns(1, f), 16);
        assert_eq!(ticks_to_ns(f, f), 1_000_000_000);
        assert_eq!(ns_to_ticks(16, f), 1);
        assert_eq!(ns_to_ticks(17, f), 2, "up: never wake early");
        assert_eq!(ns_to_ticks(0, f), 0);
        assert_eq!(ticks_to_ns(u64::MAX, 1), u64::MAX);
        assert_eq!(ns_to_ticks(u64::MAX, u64::MAX), u64::MAX);
        assert_eq!(ticks_to_ns(5, 0), 5_000_000_000, "no frequency: 1 Hz");
        for t in [0u64, 1, 7, 1 << 40] {
            assert!(ns_to_ticks(ticks_to_ns(t, f), f) <= t);
        }
    }
}
