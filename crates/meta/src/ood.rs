//! Out-of-distribution detection on embeddings: a workload whose embedding lies farther from the
//! training pool's embeddings than the pool's own members lie from each other is one the
//! meta-learner has not seen anything like; the lifecycle then keeps the fallback acting.
//!
//! The score of an embedding is its mean Euclidean distance to its k nearest pool embeddings;
//! the threshold is the `quantile` of the pool members' own leave-one-out scores, so that by
//! construction about (1 − quantile) of workloads like the pool's are flagged.

use serde::{Deserialize, Serialize};

use crate::MetaError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OodDetector {
    pool: Vec<Vec<f32>>,
    k: usize,
    threshold: f32,
}

fn distance(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>().sqrt()
}

/// Mean of the k smallest distances from `e` to the pool, skipping the member `skip`.
fn knn_score(pool: &[Vec<f32>], e: &[f32], k: usize, skip: Option<usize>) -> f32 {
    let mut d: Vec<f32> =
        pool.iter().enumerate().filter(|(i, _)| Some(*i) != skip).map(|(_, p)| distance(p, e)).collect();
    let k = k.min(d.len()).max(1);
    d.select_nth_unstable_by(k - 1, f32::total_cmp);
    d[..k].iter().sum::<f32>() / k as f32
}

impl OodDetector {
    /// Fits on the training pool's embeddings. Needs more than `k` of them, all finite and of
    /// one size, `k` ≥ 1 and `quantile` in (0, 1].
    pub fn fit(pool: Vec<Vec<f32>>, k: usize, quantile: f64) -> Result<Self, MetaError> {
        let bad = |field: &'static str, reason: String| Err(MetaError::Config { field, reason });
        if k == 0 {
            return bad("ood.k", "must be at least 1".into());
        }
        if !(quantile > 0.0 && quantile <= 1.0) {
            return bad("ood.quantile", format!("{quantile} is not in (0, 1]"));
        }
        if pool.len() <= k {
            return bad("ood.pool", format!("{} embeddings, more than k = {k} needed", pool.len()));
        }
        let width = pool[0].len();
        if let Some(i) = pool.iter().position(|e| e.len() != width || e.iter().any(|v| !v.is_finite())) {
            return bad("ood.pool", format!("embedding {i} is not {width} finite values"));
        }
        let mut scores: Vec<f32> = (0..pool.len()).map(|i| knn_score(&pool, &pool[i], k, Some(i))).collect();
        scores.sort_by(f32::total_cmp);
        let at = ((quantile * scores.len() as f64).ceil() as usize).clamp(1, scores.len()) - 1;
        Ok(Self { threshold: scores[at], pool, k })
    }

    /// The embedding's mean distance to its k nearest pool embeddings.
    pub fn score(&self, embedding: &[f32]) -> Result<f32, MetaError> {
        let width = self.pool[0].len();
        if embedding.len() != width {
            return Err(MetaError::Features { got: embedding.len(), expected: width });
        }
        if let Some(v) = embedding.iter().find(|v| !v.is_finite()) {
            return Err(MetaError::Embedding(format!("holds {v}")));
        }
        Ok(knn_score(&self.pool, embedding, self.k, None))
    }

    /// Pool member `i`'s leave-one-out score (its distance to the k nearest *other* members):
    /// the scores the threshold is the quantile of.
    pub fn pool_score(&self, i: usize) -> Option<f32> {
        (i < self.pool.len()).then(|| knn_score(&self.pool, &self.pool[i], self.k, Some(i)))
    }

    /// True when the embedding is farther from the pool than the threshold.
    pub fn is_out_of_distribution(&self, embedding: &[f32]) -> Result<bool, MetaError> {
        Ok(self.score(embedding)? > self.threshold)
    }

    pub fn threshold(&self) -> f32 {
        self.threshold
    }

    /// That a detector read back from a file could have been fitted: more than k pool
    /// embeddings, all of `width` finite values, and a finite threshold.
    pub fn check(&self, width: usize) -> Result<(), MetaError> {
        let bad = |reason: String| Err(MetaError::Config { field: "ood", reason });
        if self.k == 0 || self.pool.len() <= self.k {
            return bad(format!("{} pool embeddings with k = {}: more than k, k ≥ 1 needed", self.pool.len(), self.k));
        }
        if let Some(i) = self.pool.iter().position(|e| e.len() != width || e.iter().any(|v| !v.is_finite())) {
            return bad(format!("pool embedding {i} is not {width} finite values"));
        }
        if !self.threshold.is_finite() {
            return bad(format!("threshold {} is not finite", self.threshold));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    fn cluster(rng: &mut Pcg64Mcg, centre: &[f32], n: usize) -> Vec<Vec<f32>> {
        (0..n).map(|_| centre.iter().map(|c| c + rng.random_range(-0.5f32..0.5)).collect()).collect()
    }

    #[test]
    fn workloads_unlike_the_pool_are_flagged_and_like_it_mostly_not() {
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let (a, b, far) = ([0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 1.0, 0.0], [0.0, 4.0, 0.0, 3.0]);
        let mut pool = cluster(&mut rng, &a, 100);
        pool.extend(cluster(&mut rng, &b, 100));
        let detector = OodDetector::fit(pool, 5, 0.95).unwrap();
        let rate = |points: Vec<Vec<f32>>| {
            points.iter().filter(|p| detector.is_out_of_distribution(p).unwrap()).count() as f64 / points.len() as f64
        };
        let in_family = rate([cluster(&mut rng, &a, 100), cluster(&mut rng, &b, 100)].concat());
        let unseen = rate(cluster(&mut rng, &far, 100));
        assert!(in_family <= 0.10, "{in_family} of in-family embeddings flagged");
        assert!(unseen >= 0.90, "{unseen} of unseen-family embeddings flagged");
    }

    #[test]
    fn bad_pools_and_embeddings_are_refused() {
        let e = OodDetector::fit(vec![vec![0.0]; 3], 3, 0.9).unwrap_err();
        assert_eq!(e.to_string(), "meta-learner ood.pool: 3 embeddings, more than k = 3 needed");
        let e = OodDetector::fit(vec![vec![0.0], vec![f32::NAN], vec![1.0]], 1, 0.9).unwrap_err();
        assert_eq!(e.to_string(), "meta-learner ood.pool: embedding 1 is not 1 finite values");
        assert!(OodDetector::fit(vec![vec![0.0]; 4], 1, 0.0).is_err());
        let d = OodDetector::fit(vec![vec![0.0], vec![1.0], vec![2.0]], 1, 1.0).unwrap();
        assert_eq!(d.threshold(), 1.0);
        assert!(d.score(&[0.0, 1.0]).is_err());
        assert!(d.score(&[f32::INFINITY]).is_err());
        assert!(!d.is_out_of_distribution(&[1.5]).unwrap());
        assert!(d.is_out_of_distribution(&[3.5]).unwrap());
    }
}
