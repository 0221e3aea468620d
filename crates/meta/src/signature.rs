//! Meta-training's auxiliary task: the embedding must tell what the app's trajectories looked
//! like, not only what the base learner's critic needed from them.
//!
//! Trained on the critic's gradient alone, an embedding keeps whatever separates the pool's apps
//! for the critic, and on the simulator that is mostly traffic level and app size (`experiment
//! fig6`'s `tracks`). A linear head reads the unit embedding and predicts the bundle's input
//! signature ([`crate::MetaLearner::signature`]: per feature, the mean and the spread of the
//! standardised ⟨state, action, reward⟩ steps), each component standardised across the pool.
//! Its squared error, weighted, joins the critic's gradient into the meta-learner, so that the
//! embedding's direction carries how busy each resource is, how the load moves and how the
//! fallback reacted, the things that set workloads apart beyond their size.

use rand::{Rng, RngExt};

/// A linear map from the unit embedding to the standardised signature, trained by Adam. Fitted
/// on at least one signature; every later call gives embeddings and signatures of the widths it
/// was fitted with (the driver's own, checked where they are made).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SignatureHead {
    embedding: usize,
    signature: usize,
    /// `[signature, embedding]`, row-major, then the bias.
    weights: Vec<f32>,
    bias: Vec<f32>,
    /// Per signature component, its mean and scale across the pool's apps.
    mean: Vec<f32>,
    scale: Vec<f32>,
    adam: Adam,
    /// The last step's mean squared error per component.
    pub last_loss: f32,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
    t: i32,
}

const LEARNING_RATE: f32 = 1e-2;
/// The smallest scale a signature component gets: one (nearly) constant across the pool is
/// centred, not blown up from its noise.
pub(crate) const MIN_SCALE: f32 = 0.05;

/// Per component of `rows` (at least one, all of one width), its mean across them and its
/// (population) standard deviation, at least `min_scale`: how each is standardised across a
/// pool of apps, here and in the OOD detector's input tests.
pub(crate) fn mean_and_scale(rows: &[&[f32]], min_scale: f32) -> (Vec<f32>, Vec<f32>) {
    let (n, width) = (rows.len() as f32, rows[0].len());
    let mean = crate::rows::column_mean(&rows.concat(), width);
    let scale = (0..width)
        .map(|j| (rows.iter().map(|v| (v[j] - mean[j]).powi(2)).sum::<f32>() / n).sqrt().max(min_scale))
        .collect();
    (mean, scale)
}

impl SignatureHead {
    /// Whether a head read back from elsewhere is one `fit` could have made for `embedding`-wide
    /// embeddings: its arrays of one signature's width, finite, scales positive.
    pub(crate) fn check(&self, embedding: usize, signature: usize) -> Result<(), String> {
        let s = self.signature;
        if s != signature {
            return Err(format!("signature head predicts {s} values, the meta-learner's signatures hold {signature}"));
        }
        let params = s * embedding + s;
        let fits = self.embedding == embedding
            && self.weights.len() == s * embedding
            && [self.bias.len(), self.mean.len(), self.scale.len()] == [s; 3]
            && self.adam.m.len() == params
            && self.adam.v.len() == params
            && self.adam.t >= 0;
        if !fits {
            return Err(format!("signature head of {} × {s} does not fit {embedding}-wide embeddings", self.embedding));
        }
        let values = self.weights.iter().chain(&self.bias).chain(&self.mean).chain(&self.adam.m).chain(&self.adam.v);
        if !values.chain(&self.scale).all(|v| v.is_finite()) || self.scale.iter().any(|v| *v <= 0.0) {
            return Err("signature head holds values that are not finite (or a scale ≤ 0)".into());
        }
        Ok(())
    }

    /// A head for `embedding`-wide embeddings, its targets standardised on the pool's
    /// `signatures` (one per app, all of one width; at least one).
    pub fn fit(embedding: usize, signatures: &[Vec<f32>], rng: &mut impl Rng) -> Self {
        let signature = signatures[0].len();
        let (mean, scale) = mean_and_scale(&signatures.iter().map(Vec::as_slice).collect::<Vec<_>>(), MIN_SCALE);
        let bound = (1.0 / embedding as f32).sqrt();
        let weights = (0..signature * embedding).map(|_| rng.random_range(-bound..bound)).collect();
        let params = signature * embedding + signature;
        Self {
            embedding,
            signature,
            weights,
            bias: vec![0.0; signature],
            mean,
            scale,
            adam: Adam { m: vec![0.0; params], v: vec![0.0; params], t: 0 },
            last_loss: 0.0,
        }
    }

    /// One step on a batch: `units[b]` the unit embedding of app b, `signatures[b]` its
    /// signature. Returns d(loss)/d(unit embedding) per app, the loss being the mean over the
    /// batch and the components of the squared standardised error; the head's own parameters
    /// take one Adam step on the same loss.
    pub fn step(&mut self, units: &[&[f32]], signatures: &[Vec<f32>]) -> Vec<Vec<f32>> {
        let (e, s) = (self.embedding, self.signature);
        let norm = 2.0 / (units.len() * s) as f32;
        let mut grad = vec![0.0f32; s * e + s];
        let mut loss = 0.0f32;
        let mut out = Vec::with_capacity(units.len());
        for (u, sig) in units.iter().zip(signatures) {
            let mut d_u = vec![0.0f32; e];
            for j in 0..s {
                let row = &self.weights[j * e..(j + 1) * e];
                let prediction = self.bias[j] + row.iter().zip(u.iter()).map(|(w, x)| w * x).sum::<f32>();
                let residual = prediction - (sig[j] - self.mean[j]) / self.scale[j];
                loss += residual * residual;
                let r = norm * residual;
                for k in 0..e {
                    grad[j * e + k] += r * u[k];
                    d_u[k] += r * row[k];
                }
                grad[s * e + j] += r;
            }
            out.push(d_u);
        }
        self.last_loss = loss / (units.len() * s) as f32;
        self.adam_step(&grad);
        out
    }

    fn adam_step(&mut self, grad: &[f32]) {
        let (b1, b2, eps) = (0.9f32, 0.999f32, 1e-8f32);
        self.adam.t += 1;
        let (c1, c2) = (1.0 - b1.powi(self.adam.t), 1.0 - b2.powi(self.adam.t));
        let split = self.weights.len();
        for (i, g) in grad.iter().enumerate() {
            let m = &mut self.adam.m[i];
            let v = &mut self.adam.v[i];
            *m = b1 * *m + (1.0 - b1) * g;
            *v = b2 * *v + (1.0 - b2) * g * g;
            let update = LEARNING_RATE * (*m / c1) / ((*v / c2).sqrt() + eps);
            if i < split {
                self.weights[i] -= update;
            } else {
                self.bias[i - split] -= update;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    /// The returned gradient is the loss's: a finite difference on the unit embedding agrees.
    #[test]
    fn the_embedding_gradient_is_the_losss_and_the_head_learns_a_linear_map() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let sigs: Vec<Vec<f32>> = (0..6).map(|i| vec![i as f32, (i * i) as f32 * 0.1, 1.0]).collect();
        let mut head = SignatureHead::fit(4, &sigs, &mut rng);
        let u = [0.5f32, -0.5, 0.5, 0.5];
        let loss = |h: &SignatureHead, u: &[f32]| {
            (0..3)
                .map(|j| {
                    let p = h.bias[j] + (0..4).map(|k| h.weights[j * 4 + k] * u[k]).sum::<f32>();
                    ((p - (sigs[2][j] - h.mean[j]) / h.scale[j]) as f64).powi(2)
                })
                .sum::<f64>()
                / 3.0
        };
        let frozen = head.clone();
        let d = head.step(&[&u], &sigs[2..3])[0].clone();
        for k in 0..4 {
            let (mut up, mut down) = (u, u);
            up[k] += 1e-3;
            down[k] -= 1e-3;
            let numeric = (loss(&frozen, &up) - loss(&frozen, &down)) / 2e-3;
            assert!((numeric - d[k] as f64).abs() < 1e-3, "component {k}: {numeric} vs {}", d[k]);
        }
        // Six apps whose signatures are a linear function of their embeddings: the head fits
        // them (the constant third component standardises to zero).
        let units: Vec<Vec<f32>> = (0..6)
            .map(|i| {
                let a = i as f32 * 0.5;
                vec![a.cos(), a.sin(), 0.0, 0.0]
            })
            .collect();
        let targets: Vec<Vec<f32>> = units.iter().map(|u| vec![2.0 * u[0] + 1.0, -u[1], 1.0]).collect();
        let mut head = SignatureHead::fit(4, &targets, &mut rng);
        let refs: Vec<&[f32]> = units.iter().map(Vec::as_slice).collect();
        head.step(&refs, &targets);
        let first = head.last_loss;
        for _ in 0..2_000 {
            head.step(&refs, &targets);
        }
        assert!(head.last_loss < 0.01 * first && head.last_loss < 1e-3, "{first} → {}", head.last_loss);
    }
}
