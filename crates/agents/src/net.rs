//! The multilayer perceptron every network is built from, and tensor conversions.

use burn::module::{Module, Param};
use burn::nn::{Linear, LinearConfig, Relu};
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};

/// The nonlinearity between hidden layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Activation {
    #[default]
    Relu,
    /// Stable-Baselines3's default for on-policy MLPs (and CleanRL's PPO).
    Tanh,
}

impl Activation {
    fn apply(self, x: Tensor<2>) -> Tensor<2> {
        match self {
            Activation::Relu => Relu::new().forward(x),
            Activation::Tanh => x.tanh(),
        }
    }

    fn apply_in_place(self, v: &mut [f32]) {
        match self {
            Activation::Relu => v.iter_mut().for_each(|x| *x = x.max(0.0)),
            Activation::Tanh => v.iter_mut().for_each(|x| *x = x.tanh()),
        }
    }
}

/// Dense layers with ReLU (or tanh) between them; the output layer is linear (callers add tanh
/// or softmax as their algorithm needs).
#[derive(Module, Debug)]
pub struct Mlp {
    layers: Vec<Linear>,
    /// Not a parameter: checkpoints record it through the algorithm's hyper-parameters.
    #[module(skip)]
    activation: Activation,
}

impl Mlp {
    /// `sizes` = [input, hidden…, output], ReLU between layers.
    pub fn new(sizes: &[usize], device: &Device) -> Self {
        Self::with_activation(sizes, Activation::Relu, device)
    }

    /// `sizes` = [input, hidden…, output] with the given nonlinearity between layers.
    pub fn with_activation(sizes: &[usize], activation: Activation, device: &Device) -> Self {
        assert!(sizes.len() >= 2, "an MLP needs input and output sizes");
        let layers = sizes.windows(2).map(|w| LinearConfig::new(w[0], w[1]).init(device)).collect();
        Self { layers, activation }
    }

    /// Width of the first layer's input.
    pub fn input_dim(&self) -> usize {
        self.layers[0].weight.val().dims()[0]
    }

    pub fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        let last = self.layers.len() - 1;
        for (i, layer) in self.layers.iter().enumerate() {
            x = layer.forward(x);
            if i < last {
                x = self.activation.apply(x);
            }
        }
        x
    }
}

/// An MLP's weights copied out of burn for batched serving: each layer is one GEMM written
/// straight over its broadcast bias, then ReLU in place. burn's path allocates a tensor per
/// operation and spends more than half of a 1,000-observation forward outside the
/// multiplication; this one runs the same GEMM at about twice the speed (`aware bench agents`).
/// Results agree with [`Mlp::forward`] to float rounding, not bit for bit.
#[derive(Debug)]
pub struct FrozenMlp {
    layers: Vec<FrozenLinear>,
    activation: Activation,
    /// Activation buffers kept between calls: a fresh megabyte per layer per call costs page
    /// faults comparable to the multiplication itself.
    scratch: std::sync::Mutex<[Vec<f32>; 2]>,
}

impl FrozenMlp {
    /// Its layers, first to last.
    pub fn layers(&self) -> &[FrozenLinear] {
        &self.layers
    }

    /// What runs between its layers.
    pub fn activation(&self) -> Activation {
        self.activation
    }

    pub fn input_dim(&self) -> usize {
        self.layers[0].2
    }

    pub fn output_dim(&self) -> usize {
        self.layers.last().expect("at least one layer").3
    }

    /// Outputs for `n` row-major inputs (the caller has checked them).
    pub fn forward(&self, input: &[f32], n: usize) -> Vec<f32> {
        assert_eq!(input.len(), n * self.input_dim(), "input does not match the first layer");
        let last = self.layers.len() - 1;
        let mut guard = self.scratch.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let [x, out] = &mut *guard;
        x.clear();
        x.extend_from_slice(input);
        for (i, (w, b, k, m)) in self.layers.iter().enumerate() {
            out.clear();
            for _ in 0..n {
                out.extend_from_slice(b);
            }
            // SAFETY: `out` is n × m, `x` is n × k and `w` is k × m, all row-major and
            // contiguous, matching the strides given; the buffers do not overlap.
            unsafe {
                gemm::gemm(
                    n,
                    *m,
                    *k,
                    out.as_mut_ptr(),
                    1,
                    *m as isize,
                    true,
                    x.as_ptr(),
                    1,
                    *k as isize,
                    w.as_ptr(),
                    1,
                    *m as isize,
                    1.0,
                    1.0,
                    false,
                    false,
                    false,
                    gemm::Parallelism::None,
                );
            }
            if i < last {
                self.activation.apply_in_place(out);
            }
            std::mem::swap(x, out);
        }
        x.clone()
    }
}

/// One dense layer as plain floats: (weights `[inputs, outputs]` row-major, bias, inputs, outputs).
pub type FrozenLinear = (Vec<f32>, Vec<f32>, usize, usize);

/// A plain-f32 copy of one linear layer.
pub fn frozen_linear(l: &Linear) -> FrozenLinear {
    let [k, m] = l.weight.val().dims();
    let bias = l.bias.as_ref().map(|b| b.val().into_data().try_to_vec::<f32>().expect("f32"));
    (values(l.weight.val()), bias.unwrap_or_else(|| vec![0.0; m]), k, m)
}

/// Two layers reading the same input as one, outputs side by side (`a`'s first).
pub fn side_by_side(a: FrozenLinear, b: FrozenLinear) -> FrozenLinear {
    assert_eq!(a.2, b.2, "both layers must read the same input");
    let (k, ma, mb) = (a.2, a.3, b.3);
    let mut w = Vec::with_capacity(k * (ma + mb));
    for r in 0..k {
        w.extend_from_slice(&a.0[r * ma..(r + 1) * ma]);
        w.extend_from_slice(&b.0[r * mb..(r + 1) * mb]);
    }
    (w, [a.1, b.1].concat(), k, ma + mb)
}

impl FrozenMlp {
    /// A chain of dense layers with ReLU between them (none after the last).
    pub fn from_layers(layers: Vec<FrozenLinear>) -> Self {
        Self::from_layers_with(layers, Activation::Relu)
    }

    /// A chain of dense layers with `activation` between them (none after the last).
    pub fn from_layers_with(layers: Vec<FrozenLinear>, activation: Activation) -> Self {
        assert!(!layers.is_empty(), "at least one layer");
        assert!(layers.windows(2).all(|w| w[0].3 == w[1].2), "layer sizes must chain");
        FrozenMlp { layers, activation, scratch: Default::default() }
    }
}

impl Mlp {
    /// The layers as plain floats, for chaining into a [`FrozenMlp`].
    pub fn frozen_layers(&self) -> Vec<FrozenLinear> {
        self.layers.iter().map(frozen_linear).collect()
    }

    /// A plain-f32 copy of the weights for fast batched inference.
    pub fn frozen(&self) -> FrozenMlp {
        FrozenMlp::from_layers_with(self.frozen_layers(), self.activation)
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
    Mlp { layers, activation: online.activation }
}

/// Every float parameter's values, in the module's order (one vector per parameter tensor).
pub fn parameters<M: Module>(module: &M) -> Vec<Vec<f32>> {
    struct Collect(Vec<Vec<f32>>);
    impl burn::module::ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().into_data().try_into_vec::<f32>().expect("f32 parameters"));
        }
    }
    let mut out = Collect(Vec::new());
    module.visit(&mut out);
    out.0
}

/// burn's id of every float parameter, in the module's order.
pub(crate) fn parameter_ids<M: Module>(module: &M) -> Vec<burn::module::ParamId> {
    struct Ids(Vec<burn::module::ParamId>);
    impl burn::module::ModuleVisitor for Ids {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.id);
        }
    }
    let mut out = Ids(Vec::new());
    module.visit(&mut out);
    out.0
}

/// How many values each float parameter holds, in the module's order.
pub(crate) fn parameter_sizes<M: Module>(module: &M) -> Vec<usize> {
    struct Sizes(Vec<usize>);
    impl burn::module::ModuleVisitor for Sizes {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.push(param.val().shape().num_elements());
        }
    }
    let mut out = Sizes(Vec::new());
    module.visit(&mut out);
    out.0
}

/// `module` with its float parameters' values replaced by `values` (as [`parameters`] lists
/// them: one vector per parameter, in order, each of the parameter's size and finite); ids,
/// shapes and gradient tracking are kept.
pub fn with_parameters<M: Module>(module: M, values: Vec<Vec<f32>>) -> Result<M, String> {
    let sizes = parameter_sizes(&module);
    if values.len() != sizes.len() {
        return Err(format!("{} parameter tensors given, the network has {}", values.len(), sizes.len()));
    }
    if let Some(i) = values.iter().zip(&sizes).position(|(v, n)| v.len() != *n || v.iter().any(|x| !x.is_finite())) {
        return Err(format!("parameter {i} is not {} finite values", sizes[i]));
    }
    struct Replace(std::vec::IntoIter<Vec<f32>>);
    impl burn::module::ModuleMapper for Replace {
        fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
            let (id, tensor, mapper) = param.consume();
            let require_grad = tensor.is_require_grad();
            let (shape, device) = (tensor.shape(), tensor.device());
            let values = self.0.next().expect("one vector per parameter, checked");
            let mut replaced = Tensor::<D>::from_data(TensorData::new(values, shape), &device);
            if require_grad {
                replaced = replaced.require_grad();
            }
            Param::from_mapped_value(id, replaced, mapper)
        }
    }
    Ok(module.map(&mut Replace(values.into_iter())))
}

/// Builds a network with burn's random generator seeded `seed`, holding a process-wide lock:
/// the generator is global, so two agents built at once on two threads (parallel tests, or
/// several runs in one process) would otherwise draw from each other's sequence and the same
/// seed would not give the same weights. burn initialises parameters lazily, at first use, so
/// every parameter is touched before the lock is released.
pub(crate) fn seeded<M: burn::module::Module>(seed: u64, build: impl FnOnce() -> M) -> M {
    struct Touch;
    impl burn::module::ModuleVisitor for Touch {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<burn::tensor::Tensor<D>>) {
            let _ = param.val();
        }
    }
    static INIT: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = INIT.lock().unwrap_or_else(|e| e.into_inner());
    burn::tensor::Device::default().seed(seed);
    let module = build();
    module.visit(&mut Touch);
    module
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frozen_forward_matches_burn() {
        let d = Device::default();
        let mlp = Mlp::new(&[5, 32, 16, 3], &d);
        let x: Vec<f32> = (0..7 * 5).map(|i| ((i * 37) % 11) as f32 / 5.0 - 1.0).collect();
        let ours = mlp.frozen().forward(&x, 7);
        let burn = values(mlp.forward(matrix(&x, 7, 5, &d)));
        assert_eq!(ours.len(), burn.len());
        for (a, b) in ours.iter().zip(&burn) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

    #[test]
    fn frozen_forward_matches_burn_with_tanh() {
        let d = Device::default();
        let mlp = Mlp::with_activation(&[4, 16, 2], Activation::Tanh, &d);
        let x: Vec<f32> = (0..3 * 4).map(|i| ((i * 5) % 7) as f32 / 3.0 - 1.0).collect();
        let ours = mlp.frozen().forward(&x, 3);
        let burn = values(mlp.forward(matrix(&x, 3, 4, &d)));
        let relu =
            values(Mlp { layers: mlp.layers.clone(), activation: Activation::Relu }.forward(matrix(&x, 3, 4, &d)));
        assert_ne!(burn, relu, "the activation is applied");
        for (a, b) in ours.iter().zip(&burn) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
    }

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
