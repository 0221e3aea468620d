//! The multilayer perceptron every network is built from, and tensor conversions.

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig, Relu};
use burn::tensor::{Device, Tensor, TensorData};

/// Dense layers with ReLU between them; the output layer is linear (callers add tanh or
/// softmax as their algorithm needs).
#[derive(Module, Debug)]
pub struct Mlp {
    layers: Vec<Linear>,
    activation: Relu,
}

impl Mlp {
    /// `sizes` = [input, hidden…, output].
    pub fn new(sizes: &[usize], device: &Device) -> Self {
        assert!(sizes.len() >= 2, "an MLP needs input and output sizes");
        let layers = sizes.windows(2).map(|w| LinearConfig::new(w[0], w[1]).init(device)).collect();
        Self { layers, activation: Relu::new() }
    }

    pub fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = self.activation.forward(x);
            }
        }
        x
    }
}

/// A row-major `[rows, cols]` tensor from a flat slice.
pub fn matrix(values: &[f32], rows: usize, cols: usize, device: &Device) -> Tensor<2> {
    Tensor::<2>::from_data(TensorData::new(values.to_vec(), [rows, cols]), device)
}

/// The tensor's values, row-major.
pub fn values(t: Tensor<2>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 tensor")
}

/// One linear layer averaged toward `online` (detached: targets take no gradients).
pub fn mix_linear(t: Linear, o: &Linear, tau: f32) -> Linear {
    let mix2 = |t: Tensor<2>, o: Tensor<2>| (t.mul_scalar(1.0 - tau) + o.mul_scalar(tau)).detach();
    let mix1 = |t: Tensor<1>, o: Tensor<1>| (t.mul_scalar(1.0 - tau) + o.mul_scalar(tau)).detach();
    Linear {
        weight: Param::from_tensor(mix2(t.weight.val(), o.weight.val())),
        bias: match (t.bias, &o.bias) {
            (Some(tb), Some(ob)) => Some(Param::from_tensor(mix1(tb.val(), ob.val()))),
            _ => None,
        },
    }
}

/// Polyak averaging toward `online`: `target ← τ·online + (1 − τ)·target`, layer by layer.
/// Target networks take no gradients, so the result's parameters are detached.
pub fn soft_update(target: Mlp, online: &Mlp, tau: f32) -> Mlp {
    let layers = target.layers.into_iter().zip(&online.layers).map(|(t, o)| mix_linear(t, o, tau)).collect();
    Mlp { layers, activation: Relu::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soft_update_interpolates_and_full_tau_copies() {
        let d = Device::default();
        let (a, b) = (Mlp::new(&[3, 4, 2], &d), Mlp::new(&[3, 4, 2], &d));
        let x = matrix(&[0.3, -0.2, 0.9], 1, 3, &d);
        let copy = soft_update(a.clone(), &b, 1.0);
        assert_eq!(values(copy.forward(x.clone())), values(b.forward(x.clone())));
        let same = soft_update(a.clone(), &b, 0.0);
        assert_eq!(values(same.forward(x.clone())), values(a.forward(x.clone())));
        let half = soft_update(a.clone(), &b, 0.5);
        let wa = values(a.layers[0].weight.val());
        let wb = values(b.layers[0].weight.val());
        let wh = values(half.layers[0].weight.val());
        for k in 0..wa.len() {
            assert!((wh[k] - 0.5 * (wa[k] + wb[k])).abs() < 1e-6);
        }
    }
}
