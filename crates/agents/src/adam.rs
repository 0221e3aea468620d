//! Adam over a module's parameters in one pass per parameter tensor, with subnormal moments
//! flushed to zero.
//!
//! burn's `Adam` computes each parameter's update as a dozen tensor operations, each a fresh
//! tensor. That is slow, and on x86 it can be very slow: the moments of a weight whose
//! gradient is exactly zero (every weight into a dead ReLU unit) decay by β₁ = 0.9 per step into
//! subnormal floats within a few hundred steps, and Intel cores multiply subnormals through
//! microcode assists at about a hundred times the normal cost. Over `aware demo` on an Intel
//! Xeon, burn's Adam spent about 60 % of the run on such arithmetic (6 min 53 s idle; with
//! this optimiser 2 min 3 s, with the same report). AMD's cores pay far less, which is why the
//! demo's time differed so much between machines.
//!
//! [`Adam`] does burn's arithmetic in burn's order, element by element in one loop (so the two
//! agree bit for bit while no moment and no step is subnormal: tested), and replaces a
//! subnormal moment or step by 0. A subnormal is below 1.2e-38, so a flushed step changes a
//! weight only if the weight is itself within about 2⁻¹⁰⁰ of zero. Rust leaves the processor's
//! flush-to-zero flags alone (setting them is undefined behaviour), so the flush is explicit.
//! Gradient clipping by norm, per parameter tensor, is burn's own. Unlike burn's
//! `ModuleOptimizer`, parameters keep no gradient-checkpointing strategy or distributed flag
//! and are not moved between devices: the agents train on one CPU device without either.

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, Param, ParamId};
use burn::optim::GradientsParams;
use burn::optim::grad_clipping::GradientClipping;
use burn::tensor::{Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// burn's default first- and second-moment decay rates.
const BETA_1: f32 = 0.9;
const BETA_2: f32 = 0.999;

/// Adam (β 0.9 / 0.999, ε configurable; burn's default is 1e-5) with optional per-tensor
/// gradient-norm clipping, stepping a burn module in place of `burn::optim::Adam`.
#[derive(Debug, Clone)]
pub struct Adam {
    epsilon: f32,
    /// Each tensor's gradient is clipped to this L2 norm first (burn's `GradientClipping::Norm`).
    clip_norm: Option<f32>,
    moments: HashMap<ParamId, Moments>,
}

/// One parameter tensor's optimiser state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    /// Steps taken (burn's `time`).
    time: i32,
    first: Vec<f32>,
    second: Vec<f32>,
}

/// An [`Adam`]'s state written down without burn's parameter ids, which a module rebuilt
/// elsewhere does not share: the moments of each parameter of the module it steps, in the
/// module's own order (`None` for one it has not stepped yet).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdamState {
    epsilon: f32,
    clip_norm: Option<f32>,
    moments: Vec<Option<Moments>>,
}

#[cfg(test)]
impl AdamState {
    pub(crate) fn moments_mut(&mut self) -> &mut Vec<Option<Moments>> {
        &mut self.moments
    }
}

impl Default for Adam {
    /// burn's `AdamConfig::new()`: ε 1e-5, no clipping.
    fn default() -> Self {
        Self::new(1e-5, None)
    }
}

impl Adam {
    /// ε as given; `clip_norm` clips each parameter tensor's gradient to that L2 norm first
    /// (burn's `GradientClippingConfig::Norm`).
    pub fn new(epsilon: f32, clip_norm: Option<f32>) -> Self {
        Self { epsilon, clip_norm, moments: HashMap::new() }
    }

    /// One step of every parameter of `module` that has a gradient in `grads`; the others are
    /// left as they are.
    pub fn step<M: Module>(&mut self, learning_rate: f64, module: M, mut grads: GradientsParams) -> M {
        module.map(&mut Step { adam: self, grads: &mut grads, learning_rate: learning_rate as f32 })
    }

    /// The state, written in the parameter order of `module` (the module this optimiser steps).
    pub fn state<M: Module>(&self, module: &M) -> AdamState {
        let moments = crate::net::parameter_ids(module).iter().map(|id| self.moments.get(id).cloned()).collect();
        AdamState { epsilon: self.epsilon, clip_norm: self.clip_norm, moments }
    }

    /// The optimiser `state` describes, stepping `module` (the same architecture as the one the
    /// state was written for: one entry per parameter, each moment the parameter's size).
    pub fn from_state<M: Module>(state: AdamState, module: &M) -> Result<Self, String> {
        let ids = crate::net::parameter_ids(module);
        let sizes = crate::net::parameter_sizes(module);
        if state.moments.len() != ids.len() {
            return Err(format!(
                "optimiser holds moments for {} parameters, the network has {}",
                state.moments.len(),
                ids.len()
            ));
        }
        let valid = |v: f32| v.is_finite();
        let mut moments = HashMap::new();
        for (i, (entry, (id, size))) in state.moments.into_iter().zip(ids.into_iter().zip(sizes)).enumerate() {
            let Some(m) = entry else { continue };
            if m.first.len() != size || m.second.len() != size || m.time < 1 {
                return Err(format!("optimiser moments of parameter {i} do not fit its {size} values"));
            }
            if !m.first.iter().chain(&m.second).copied().all(valid) || m.second.iter().any(|v| *v < 0.0) {
                return Err(format!("optimiser moments of parameter {i} are not finite (second moments ≥ 0)"));
            }
            moments.insert(id, m);
        }
        if !(state.epsilon.is_finite() && state.epsilon > 0.0)
            || state.clip_norm.is_some_and(|c| !(c.is_finite() && c > 0.0))
        {
            return Err(format!(
                "optimiser ε {} or clipping norm {:?} is not a positive number",
                state.epsilon, state.clip_norm
            ));
        }
        Ok(Self { epsilon: state.epsilon, clip_norm: state.clip_norm, moments })
    }

    /// The update of one flat tensor: burn's `AdaptiveMomentum::transform` then `p − lr·u`.
    fn update(&mut self, id: ParamId, param: &mut [f32], grad: &[f32], learning_rate: f32) {
        let moments = self.moments.entry(id).or_insert_with(|| Moments {
            time: 0,
            first: vec![0.0; param.len()],
            second: vec![0.0; param.len()],
        });
        let first_step = moments.time == 0;
        assert!(
            moments.first.len() == param.len() && grad.len() == param.len(),
            "a parameter changed size between optimiser steps"
        );
        moments.time += 1;
        let bias_correction2_sqrt = (1.0 - BETA_2.powi(moments.time)).sqrt();
        let combined = bias_correction2_sqrt / (1.0 - BETA_1.powi(moments.time));
        let epsilon = self.epsilon * bias_correction2_sqrt;
        let (f1, f2) = (1.0 - BETA_1, 1.0 - BETA_2);
        let flush = |x: f32| if x.abs() < f32::MIN_POSITIVE { 0.0 } else { x };
        let rows = param.iter_mut().zip(grad).zip(moments.first.iter_mut().zip(moments.second.iter_mut()));
        for ((p, &g), (m, v)) in rows {
            // burn: the first step sets the moments from the gradient alone.
            let (m1, v1) =
                if first_step { (g * f1, (g * g) * f2) } else { (*m * BETA_1 + g * f1, *v * BETA_2 + (g * g) * f2) };
            *m = flush(m1);
            *v = flush(v1);
            let delta = flush((*m * combined) / (v.sqrt() + epsilon) * learning_rate);
            *p -= delta;
        }
    }
}

/// The mapper that walks a module's parameters for one [`Adam::step`].
struct Step<'a> {
    adam: &'a mut Adam,
    grads: &'a mut GradientsParams,
    learning_rate: f32,
}

impl ModuleMapper for Step<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let (id, tensor, mapper) = param.consume();
        let Some(grad) = self.grads.remove::<D>(id) else {
            return Param::from_mapped_value(id, tensor, mapper);
        };
        let grad = match self.adam.clip_norm {
            Some(norm) => GradientClipping::Norm(norm).clip_gradient(grad),
            None => grad,
        };
        let require_grad = tensor.is_require_grad();
        let inner = tensor.inner();
        let (shape, device) = (inner.shape(), inner.device());
        let mut values = inner.into_data().try_into_vec::<f32>().expect("f32 parameters");
        let grad = grad.into_data().try_into_vec::<f32>().expect("f32 gradients");
        self.adam.update(id, &mut values, &grad, self.learning_rate);
        let mut updated = Tensor::from_inner(Tensor::<D>::from_data(TensorData::new(values, shape), &device));
        if require_grad {
            updated = updated.require_grad();
        }
        Param::from_mapped_value(id, updated, mapper)
    }
}

#[cfg(test)]
mod tests {
    use burn::optim::AdamConfig;
    use burn::tensor::Device;

    use super::*;
    use crate::net::{Mlp, matrix, values};

    fn loss_grads(net: &Mlp, scale: f32) -> GradientsParams {
        let device = Device::default().autodiff();
        let x = matrix(&[0.3, -0.2, 0.9, 0.1, 0.5, -0.7], 2, 3, &device).mul_scalar(scale);
        let loss = net.forward(x).powf_scalar(2.0).mean();
        GradientsParams::from_grads(loss.backward(), net)
    }

    /// Every parameter's bits, in the module's order.
    fn weights(net: &Mlp) -> Vec<u32> {
        struct Bits(Vec<u32>);
        impl burn::module::ModuleVisitor for Bits {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let data = param.val().into_data().try_into_vec::<f32>().expect("f32 parameters");
                self.0.extend(data.iter().map(|v| v.to_bits()));
            }
        }
        let mut bits = Bits(Vec::new());
        net.visit(&mut bits);
        bits.0
    }

    /// Bit for bit burn's Adam, with and without clipping, over many steps.
    #[test]
    fn matches_burns_adam_bit_for_bit() {
        for clip in [None, Some(0.05)] {
            let device = Device::default().autodiff();
            let start = crate::net::seeded(4, || Mlp::new(&[3, 16, 16, 2], &device));
            let mut burn_config = AdamConfig::new().with_epsilon(1e-5);
            if let Some(norm) = clip {
                burn_config = burn_config
                    .with_grad_clipping(Some(burn::optim::grad_clipping::GradientClippingConfig::Norm(norm)));
            }
            let mut theirs = burn_config.init();
            let mut ours = Adam::new(1e-5, clip);
            let (mut a, mut b) = (start.clone(), start);
            for step in 0..60 {
                let scale = 1.0 + step as f32 / 10.0;
                a = theirs.step(3e-3, a.clone(), loss_grads(&a, scale));
                b = ours.step(3e-3, b.clone(), loss_grads(&b, scale));
                assert_eq!(weights(&a), weights(&b), "step {step}, clipping {clip:?}");
            }
        }
    }

    /// Learning happens: the loss falls, and parameters keep their gradient tracking.
    #[test]
    fn it_descends_the_loss() {
        let device = Device::default().autodiff();
        let mut net = crate::net::seeded(5, || Mlp::new(&[3, 8, 1], &device));
        let x = || matrix(&[0.3, -0.2, 0.9, 0.1, 0.5, -0.7], 2, 3, &device);
        let y = || matrix(&[1.0, -1.0], 2, 1, &device);
        let loss = |net: &Mlp| (net.forward(x()) - y()).powf_scalar(2.0).mean();
        let first = values(loss(&net).reshape([1, 1]).detach())[0];
        let mut adam = Adam::default();
        for _ in 0..200 {
            let grads = GradientsParams::from_grads(loss(&net).backward(), &net);
            net = adam.step(1e-2, net.clone(), grads);
        }
        let last = values(loss(&net).reshape([1, 1]).detach())[0];
        assert!(last < first * 0.01, "loss {first} → {last}");
    }

    /// A weight whose gradient is zero has its moments decay to exactly 0, never through the
    /// subnormal range; everything else is unchanged.
    #[test]
    fn subnormal_moments_are_flushed_to_zero() {
        let mut adam = Adam::default();
        let id = ParamId::new();
        let mut p = vec![0.5f32, -0.25];
        adam.update(id, &mut p, &[1e-3, 2e-3], 1e-3);
        let mut reached_zero = false;
        for _ in 0..2_000 {
            adam.update(id, &mut p, &[0.0, 2e-3], 1e-3);
            let m = &adam.moments[&id];
            assert!(m.first.iter().chain(&m.second).all(|x| *x == 0.0 || x.is_normal()), "{m:?}");
            reached_zero |= m.first[0] == 0.0;
        }
        assert!(reached_zero, "the first moment never reached zero");
        assert!(p.iter().all(|x| x.is_normal()));
    }
}
