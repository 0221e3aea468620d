//! The meta-learner's network: a bidirectional multi-layer GRU stepping over time, its final
//! forward and backward states concatenated, averaged over each bundle's trajectories, then two
//! dense layers (AWARE: 2 layers of 256, FC 256 → FC 64), the first with ReLU, the second's
//! output as it is ([`EmbeddingOutput::Linear`], the default) or through a ReLU too.
//!
//! The GRU is PyTorch's (`torch.nn.GRU`, gates r, z, n with the reset gate applied after the
//! hidden product), written so that the work batches: the input projections of every step of
//! both directions are one matrix product per layer, and each time step is one batched product
//! of the two directions' hidden states. Padded steps are masked: a trajectory's state stays as
//! it was, so its final forward state is the one at its own last step and its backward pass
//! starts from zero at its own end.

use crate::bundle::Packed;
use crate::fused::Layout;
use crate::{Bundle, EmbeddingOutput, MetaConfig};
use burn::module::{Module, Param};
use burn::nn::{Dropout, DropoutConfig, Linear};
use burn::tensor::activation::{relu, sigmoid};
use burn::tensor::{Device, Tensor, TensorData};

fn param<const D: usize>(values: &[f32], shape: [usize; D], device: &Device) -> Param<Tensor<D>> {
    Param::from_tensor(Tensor::<D>::from_data(TensorData::new(values.to_vec(), shape), device))
}

/// One bidirectional GRU layer; index 0 of every weight is the forward direction, 1 the backward.
#[derive(Module, Debug)]
pub struct BiGruLayer {
    /// `[2, input, 3·hidden]`, gates in PyTorch's order r, z, n.
    input_weight: Param<Tensor<3>>,
    /// `[2, 1, 3·hidden]`.
    input_bias: Param<Tensor<3>>,
    /// `[2, hidden, 3·hidden]`.
    hidden_weight: Param<Tensor<3>>,
    /// `[2, 1, 3·hidden]`.
    hidden_bias: Param<Tensor<3>>,
    #[module(skip)]
    hidden: usize,
}

impl BiGruLayer {
    fn new(p: &[f32], input: usize, hidden: usize, o: [usize; 4], device: &Device) -> Self {
        let g = 3 * hidden;
        Self {
            input_weight: param(&p[o[0]..o[1]], [2, input, g], device),
            input_bias: param(&p[o[1]..o[2]], [2, 1, g], device),
            hidden_weight: param(&p[o[2]..o[3]], [2, hidden, g], device),
            hidden_bias: param(&p[o[3]..o[3] + 2 * g], [2, 1, g], device),
            hidden,
        }
    }

    /// Runs both directions over `x` (`[T, N, input]`, time-major) with `mask` (`[2, T, N, 1]`:
    /// the forward mask and the time-reversed one). Returns the per-step outputs
    /// `[T, N, 2·hidden]` (forward ⊕ backward, in time order) when `outputs` is asked for, and
    /// the final states `[N, 2·hidden]`.
    fn forward(&self, x: Tensor<3>, mask: &Tensor<4>, outputs: bool) -> (Option<Tensor<3>>, Tensor<2>) {
        let [t_len, n, input] = x.dims();
        let (h, g) = (self.hidden, 3 * self.hidden);
        let device = x.device();
        // Both directions' inputs, the backward one reversed in time, projected in one product.
        let both = Tensor::stack::<4>(vec![x.clone(), x.flip([0])], 0).reshape([2, t_len * n, input]);
        let projected = (both.matmul(self.input_weight.val()) + self.input_bias.val()).reshape([2, t_len, n, g]);
        let hidden_weight = self.hidden_weight.val();
        let hidden_bias = self.hidden_bias.val();
        let mut state = Tensor::<3>::zeros([2, n, h], &device);
        let mut steps = Vec::with_capacity(if outputs { t_len } else { 0 });
        for t in 0..t_len {
            let p = projected.clone().slice([0..2, t..t + 1, 0..n, 0..g]).reshape([2, n, g]);
            let m = mask.clone().slice([0..2, t..t + 1, 0..n, 0..1]).reshape([2, n, 1]);
            let hp = state.clone().matmul(hidden_weight.clone()) + hidden_bias.clone();
            let rz = sigmoid(p.clone().narrow(2, 0, 2 * h) + hp.clone().narrow(2, 0, 2 * h));
            let r = rz.clone().narrow(2, 0, h);
            let z = rz.narrow(2, h, h);
            let candidate = (p.narrow(2, 2 * h, h) + r * hp.narrow(2, 2 * h, h)).tanh();
            let next = candidate.clone() + z * (state.clone() - candidate);
            // Padded steps keep the state: h ← h + m·(h′ − h).
            state = state.clone() + m * (next - state);
            if outputs {
                steps.push(state.clone());
            }
        }
        let last = |s: Tensor<3>| {
            let forward = s.clone().narrow(0, 0, 1).reshape([n, h]);
            let backward = s.narrow(0, 1, 1).reshape([n, h]);
            Tensor::cat(vec![forward, backward], 1)
        };
        let out = outputs.then(|| {
            let all = Tensor::stack::<4>(steps, 1); // [2, T, N, H]
            let forward = all.clone().narrow(0, 0, 1).reshape([t_len, n, h]);
            let backward = all.narrow(0, 1, 1).reshape([t_len, n, h]).flip([0]);
            Tensor::cat(vec![forward, backward], 2)
        });
        (out, last(state))
    }
}

/// The whole meta-learner network.
#[derive(Module, Debug)]
pub struct MetaNet {
    layers: Vec<BiGruLayer>,
    hidden_fc: Linear,
    embedding_fc: Linear,
    dropout: Dropout,
    #[module(skip)]
    output: EmbeddingOutput,
}

/// A batch of bundles as tensors: `x` `[T, N, F]` time-major over every trajectory of every
/// bundle (N = Σ M_b), `mask` `[2, T, N, 1]` forward and time-reversed, `pool` `[B, N]` the
/// averaging over each bundle's own rows.
#[derive(Debug, Clone)]
pub struct Batch {
    pub x: Tensor<3>,
    pub mask: Tensor<4>,
    pub pool: Tensor<2>,
}

impl Batch {
    /// Lays bundles side by side (padded to the longest). All must have the same features.
    pub fn new(bundles: &[&Bundle], device: &Device) -> Self {
        let p = Packed::new(bundles);
        let (t_len, n) = (p.steps, p.rows);
        let mut pool = vec![0.0f32; p.groups.len() * n];
        for (bi, &(first, count)) in p.groups.iter().enumerate() {
            pool[bi * n + first..bi * n + first + count].fill(1.0 / count as f32);
        }
        let mask = Tensor::<2>::from_data(TensorData::new(p.mask, [t_len, n]), device);
        let mask = Tensor::stack::<3>(vec![mask.clone(), mask.flip([0])], 0).reshape([2, t_len, n, 1]);
        Self {
            x: Tensor::from_data(TensorData::new(p.x, [t_len, n, p.features]), device),
            mask,
            pool: Tensor::from_data(TensorData::new(pool, [p.groups.len(), n]), device),
        }
    }
}

impl MetaNet {
    /// The network with PyTorch's initialisation drawn from `seed`.
    pub fn new(config: &MetaConfig, seed: u64, device: &Device) -> Self {
        Self::from_params(config, &Layout::new(config).init(seed), device)
    }

    /// The network holding `params`, laid out as [`crate::MetaLearner::params`] are.
    pub fn from_params(config: &MetaConfig, params: &[f32], device: &Device) -> Self {
        let layout = Layout::new(config);
        assert_eq!(params.len(), layout.len, "parameter vector does not match the configuration");
        let h = config.hidden;
        let layers = layout.layers.iter().map(|&(input, o)| BiGruLayer::new(params, input, h, o, device)).collect();
        let [w1, b1, w2, b2] = layout.head;
        let (fc, e) = (config.fc, config.embedding);
        Self {
            layers,
            hidden_fc: Linear {
                weight: param(&params[w1..b1], [2 * h, fc], device),
                bias: Some(param(&params[b1..w2], [fc], device)),
            },
            embedding_fc: Linear {
                weight: param(&params[w2..b2], [fc, e], device),
                bias: Some(param(&params[b2..b2 + e], [e], device)),
            },
            dropout: DropoutConfig::new(config.dropout).init(),
            output: config.output,
        }
    }

    /// One embedding per bundle of the batch: `[B, embedding]`.
    pub fn forward(&self, batch: &Batch) -> Tensor<2> {
        let mut x = batch.x.clone();
        let mut last = None;
        for (i, layer) in self.layers.iter().enumerate() {
            let deeper = i + 1 < self.layers.len();
            let (out, state) = layer.forward(x.clone(), &batch.mask, deeper);
            last = Some(state);
            if let Some(out) = out {
                // PyTorch's GRU applies dropout to every layer's output but the last's.
                x = self.dropout.forward(out);
            }
        }
        let last = last.expect("a meta-learner has at least one GRU layer");
        let pooled = batch.pool.clone().matmul(last);
        let hidden = self.dropout.forward(relu(self.hidden_fc.forward(pooled)));
        let embedding = self.embedding_fc.forward(hidden);
        match self.output {
            EmbeddingOutput::Linear => embedding,
            EmbeddingOutput::Relu => relu(embedding),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn flat<const D: usize>(p: &Param<Tensor<D>>) -> Vec<f32> {
        p.val().into_data().try_to_vec::<f32>().unwrap()
    }

    fn sigmoid(x: f32) -> f32 {
        1.0 / (1.0 + (-x).exp())
    }

    /// PyTorch's GRU equations, one direction, one trajectory at its own length, scalar loops.
    fn reference_direction(
        xs: &[Vec<f32>],
        wi: &[f32],
        bi: &[f32],
        wh: &[f32],
        bh: &[f32],
        h_len: usize,
    ) -> Vec<Vec<f32>> {
        let g = 3 * h_len;
        let input = xs[0].len();
        let mut h = vec![0.0f32; h_len];
        let mut out = Vec::new();
        for x in xs {
            let mut pi = bi.to_vec();
            let mut ph = bh.to_vec();
            for j in 0..g {
                pi[j] += (0..input).map(|k| x[k] * wi[k * g + j]).sum::<f32>();
                ph[j] += (0..h_len).map(|k| h[k] * wh[k * g + j]).sum::<f32>();
            }
            let next: Vec<f32> = (0..h_len)
                .map(|j| {
                    let r = sigmoid(pi[j] + ph[j]);
                    let z = sigmoid(pi[h_len + j] + ph[h_len + j]);
                    let n = (pi[2 * h_len + j] + r * ph[2 * h_len + j]).tanh();
                    (1.0 - z) * n + z * h[j]
                })
                .collect();
            h = next;
            out.push(h.clone());
        }
        out
    }

    /// One bidirectional layer over one trajectory: per-step outputs and final state.
    fn reference_layer(layer: &BiGruLayer, xs: &[Vec<f32>]) -> (Vec<Vec<f32>>, Vec<f32>) {
        let h = layer.hidden;
        let g = 3 * h;
        let input = xs[0].len();
        let (wi, bi, wh, bh) =
            (flat(&layer.input_weight), flat(&layer.input_bias), flat(&layer.hidden_weight), flat(&layer.hidden_bias));
        let dir = |d: usize, seq: &[Vec<f32>]| {
            reference_direction(
                seq,
                &wi[d * input * g..(d + 1) * input * g],
                &bi[d * g..(d + 1) * g],
                &wh[d * h * g..(d + 1) * h * g],
                &bh[d * g..(d + 1) * g],
                h,
            )
        };
        let forward = dir(0, xs);
        let reversed: Vec<Vec<f32>> = xs.iter().rev().cloned().collect();
        let mut backward = dir(1, &reversed);
        backward.reverse();
        let outputs = forward.iter().zip(&backward).map(|(f, b)| [f.as_slice(), b.as_slice()].concat()).collect();
        let last = [forward.last().unwrap().as_slice(), backward[0].as_slice()].concat();
        (outputs, last)
    }

    fn reference_embedding(net: &MetaNet, trajectories: &[Vec<Vec<f32>>]) -> Vec<f32> {
        let mut pooled: Vec<f32> = Vec::new();
        for traj in trajectories {
            let mut xs = traj.clone();
            let mut last = Vec::new();
            for layer in &net.layers {
                let (out, l) = reference_layer(layer, &xs);
                xs = out;
                last = l;
            }
            if pooled.is_empty() {
                pooled = vec![0.0; last.len()];
            }
            for (p, v) in pooled.iter_mut().zip(&last) {
                *p += v / trajectories.len() as f32;
            }
        }
        let dense = |l: &Linear, x: &[f32], out: EmbeddingOutput| -> Vec<f32> {
            let w = l.weight.val().into_data().try_to_vec::<f32>().unwrap();
            let b = l.bias.as_ref().unwrap().val().into_data().try_to_vec::<f32>().unwrap();
            let o = b.len();
            (0..o).map(|j| out.apply(b[j] + (0..x.len()).map(|k| x[k] * w[k * o + j]).sum::<f32>())).collect()
        };
        dense(&net.embedding_fc, &dense(&net.hidden_fc, &pooled, EmbeddingOutput::Relu), net.output)
    }

    /// Deterministic trajectories of the given lengths, values in [−1, 1].
    pub(crate) fn trajectories(lengths: &[usize], features: usize, salt: usize) -> Vec<Vec<Vec<f32>>> {
        lengths
            .iter()
            .enumerate()
            .map(|(m, &len)| {
                (0..len)
                    .map(|t| {
                        (0..features)
                            .map(|f| (((m * 37 + t * 11 + f * 5 + salt * 13) % 17) as f32 / 8.0) - 1.0)
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    fn small() -> MetaConfig {
        MetaConfig { hidden: 6, fc: 5, embedding: 4, ..MetaConfig::aware(3) }
    }

    #[test]
    fn embedding_is_pytorchs_gru_with_padding_masked() {
        let d = Device::default();
        for output in [EmbeddingOutput::Linear, EmbeddingOutput::Relu] {
            let net = MetaNet::new(&MetaConfig { output, ..small() }, 3, &d);
            // Uneven lengths: the shorter trajectories are padded in the batch and must read as
            // if run alone at their own length (the backward direction starting at their own end).
            let a = trajectories(&[5, 2, 4], 3, 0);
            let b = trajectories(&[3, 3], 3, 1);
            let (ba, bb) = (Bundle::new(&a).unwrap(), Bundle::new(&b).unwrap());
            let out = net.forward(&Batch::new(&[&ba, &bb], &d)).into_data().try_to_vec::<f32>().unwrap();
            let expected = [reference_embedding(&net, &a), reference_embedding(&net, &b)].concat();
            assert_eq!(out.len(), expected.len());
            assert!(expected.iter().any(|v| *v > 0.0), "a ReLU-dead embedding would test nothing: {expected:?}");
            match output {
                // The linear output's negative components are what it adds: they must show.
                EmbeddingOutput::Linear => assert!(expected.iter().any(|v| *v < 0.0), "{expected:?}"),
                EmbeddingOutput::Relu => assert!(expected.iter().all(|v| *v >= 0.0), "{expected:?}"),
            }
            for (i, (x, y)) in out.iter().zip(&expected).enumerate() {
                assert!((x - y).abs() < 1e-5, "{output:?} component {i}: {x} vs reference {y}");
            }
        }
    }

    #[test]
    fn a_bundle_embeds_alike_alone_and_in_a_batch_and_in_any_order() {
        let d = Device::default();
        let net = MetaNet::new(&small(), 9, &d);
        let a = trajectories(&[4, 7, 1], 3, 2);
        let mut shuffled = a.clone();
        shuffled.rotate_left(1);
        let other = Bundle::new(&trajectories(&[9], 3, 5)).unwrap();
        let alone = net.forward(&Batch::new(&[&Bundle::new(&a).unwrap()], &d));
        let batched = net.forward(&Batch::new(&[&other, &Bundle::new(&shuffled).unwrap()], &d));
        let alone = alone.into_data().try_to_vec::<f32>().unwrap();
        let batched = batched.into_data().try_to_vec::<f32>().unwrap();
        for (x, y) in alone.iter().zip(&batched[4..]) {
            assert!((x - y).abs() < 1e-5, "{alone:?} vs {batched:?}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_weights() {
        let d = Device::default();
        let (a, b, c) = (MetaNet::new(&small(), 4, &d), MetaNet::new(&small(), 4, &d), MetaNet::new(&small(), 5, &d));
        let w = |n: &MetaNet| flat(&n.layers[1].hidden_weight);
        assert_eq!(w(&a), w(&b));
        assert_ne!(w(&a), w(&c));
    }
}
