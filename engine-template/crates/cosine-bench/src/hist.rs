//! A log-linear latency histogram (about 1.5 % relative error), mergeable across threads.

/// Latency histogram in nanoseconds.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    sum: u128,
    max: u64,
}

const SUB: u64 = 64;

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros() as u64; // >= 6
    let shift = exp - 6;
    let sub = (v >> shift) - SUB; // 0..64
    ((exp - 5) * SUB + sub) as usize
}

fn lower(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let exp = i / SUB + 5;
    let sub = i % SUB;
    (SUB + sub) << (exp - 6)
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: vec![0; (64 - 5) * SUB as usize], count: 0, sum: 0, max: 0 }
    }
}

impl Histogram {
    /// Records one latency.
    pub fn record(&mut self, ns: u64) {
        self.buckets[index(ns)] += 1;
        self.count += 1;
        self.sum += ns as u128;
        self.max = self.max.max(ns);
    }
    /// Adds another histogram.
    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
    }
    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }
    /// Mean in nanoseconds.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
    /// The `q`-quantile (0..=1) in nanoseconds.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let target = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= target {
                return lower(i).min(self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn quantiles_are_close() {
        let mut h = Histogram::default();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.02, "{p50}");
        let p99 = h.quantile(0.99) as f64;
        assert!((p99 - 990_000.0).abs() / 990_000.0 < 0.02, "{p99}");
        for i in 0..3000 {
            assert!(lower(i) <= lower(i + 1));
            assert_eq!(index(lower(i)), i);
        }
    }
}
