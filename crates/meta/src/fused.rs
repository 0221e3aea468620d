//! The meta-learner's forward and backward passes on plain floats: the same network as
//! [`crate::MetaNet`] (tested against it and against burn's autodiff), written for speed.
//!
//! burn builds a tensor per operation; over 2 layers × 100 steps × ~20 element-wise operations
//! that bookkeeping, and autodiff's graph of it, cost 4× PyTorch on a meta-training step. Here
//! each layer is three large GEMMs (the input projection of every step of both directions, and
//! in the backward pass the weight and input gradients over every step at once) plus one small
//! GEMM per step and direction (against a weight packed once per direction:
//! [`crate::panel`]), with each step's gate arithmetic fused into one loop (compiled for AVX2
//! where the CPU has it). The forward pass keeps the gates it needs for back-propagation
//! through time.

use rand::RngExt;
use rand_pcg::Pcg64Mcg;

use crate::MetaConfig;
use crate::panel::Rhs;

/// `dst` (m × n) = `a` (m × k) · `b` (k × n), or `dst +=` it when `accumulate`. `a_t` says `a` is
/// stored transposed (k × m), `b_t` that `b` is (n × k). Row-major throughout.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul(
    dst: &mut [f32],
    accumulate: bool,
    a: &[f32],
    a_t: bool,
    b: &[f32],
    b_t: bool,
    m: usize,
    n: usize,
    k: usize,
) {
    assert!(dst.len() >= m * n && a.len() >= m * k && b.len() >= k * n, "matmul operands too short");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            dst[..m * n].fill(0.0);
        }
        return;
    }
    let (a_cs, a_rs) = if a_t { (m as isize, 1) } else { (1, k as isize) };
    let (b_cs, b_rs) = if b_t { (k as isize, 1) } else { (1, n as isize) };
    let parallelism = match rayon::current_num_threads() {
        0 | 1 => gemm::Parallelism::None,
        t => gemm::Parallelism::Rayon(t),
    };
    // SAFETY: the asserts above bound every index the strides reach: dst is m × n row-major
    // (column stride 1, row stride n); a's element (i, p) is at i·k + p, or p·m + i transposed;
    // b's element (p, j) is at p·n + j, or j·k + p transposed. dst does not overlap a or b
    // (distinct borrows).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// tanh as a rational function of odd degree 13 over even degree 6, clamped where it rounds to
/// ±1 in f32: Eigen's `generic_fast_tanh_float`, the approximation PyTorch's CPU kernels use too.
/// Branch-free, so the gate loops vectorise; within 5e-7 of `f32::tanh` (a few ulp; tested).
#[inline(always)]
fn tanh(x: f32) -> f32 {
    const CLAMP: f32 = 7.905_311;
    const A: [f32; 7] =
        [4.893_524_6e-3, 6.372_619_3e-4, 1.485_722_4e-5, 5.122_297e-8, -8.604_672e-11, 2.000_188e-13, -2.760_768_5e-16];
    const B: [f32; 4] = [4.893_525e-3, 2.268_434_6e-3, 1.185_347_1e-4, 1.198_258_4e-6];
    let x = x.clamp(-CLAMP, CLAMP);
    let x2 = x * x;
    let mut p = A[6];
    for a in A[..6].iter().rev() {
        p = p * x2 + a;
    }
    let q = ((B[3] * x2 + B[2]) * x2 + B[1]) * x2 + B[0];
    x * p / q
}

/// σ(x) = ½ + ½·tanh(x/2), exactly; so it vectorises as tanh does.
#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    0.5 + 0.5 * tanh(0.5 * x)
}

/// Where each parameter tensor lives in the flat parameter vector.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub hidden: usize,
    pub fc: usize,
    pub embedding: usize,
    /// Per GRU layer: its input width and the offsets of `[2, in, G]`, `[2, G]`, `[2, H, G]`,
    /// `[2, G]`.
    pub layers: Vec<(usize, [usize; 4])>,
    /// Offsets of W1 `[2H, fc]`, b1, W2 `[fc, E]`, b2.
    pub head: [usize; 4],
    /// What the embedding layer's outputs pass through.
    pub output: crate::EmbeddingOutput,
    pub len: usize,
}

impl Layout {
    pub fn new(c: &MetaConfig) -> Self {
        let (h, g) = (c.hidden, 3 * c.hidden);
        let mut at = 0;
        let mut take = |n: usize| {
            let o = at;
            at += n;
            o
        };
        let layers = (0..c.layers)
            .map(|l| {
                let input = if l == 0 { c.features } else { 2 * h };
                (input, [take(2 * input * g), take(2 * g), take(2 * h * g), take(2 * g)])
            })
            .collect();
        let head = [take(2 * h * c.fc), take(c.fc), take(c.fc * c.embedding), take(c.embedding)];
        Self { hidden: h, fc: c.fc, embedding: c.embedding, layers, head, output: c.output, len: at }
    }

    /// PyTorch's initialisation, uniform in ±1/√fan_in (fan_in = H for the GRU, the layer's
    /// input for dense layers), drawn in layout order.
    pub fn init(&self, seed: u64) -> Vec<f32> {
        let mut rng = <Pcg64Mcg as rand::SeedableRng>::seed_from_u64(seed);
        let mut p = vec![0.0; self.len];
        let mut fill = |from: usize, to: usize, fan_in: usize| {
            let k = 1.0 / (fan_in as f32).sqrt();
            p[from..to].iter_mut().for_each(|v| *v = rng.random_range(-k..k));
        };
        let h = self.hidden;
        for &(_, o) in &self.layers {
            fill(o[0], o[3] + 6 * h, h);
        }
        let [w1, b1, w2, b2] = self.head;
        fill(w1, b1, 2 * h);
        fill(b1, w2, 2 * h);
        fill(w2, b2, self.fc);
        fill(b2, self.len, self.fc);
        p
    }
}

/// A batch in the fused pass's terms: `x` `[T, N, F]`, `mask` `[T, N]` (1 where the step
/// exists), and per bundle its first row and row count.
#[derive(Debug, Clone)]
pub(crate) struct Input<'a> {
    pub x: &'a [f32],
    pub mask: &'a [f32],
    pub steps: usize,
    pub rows: usize,
    pub groups: &'a [(usize, usize)],
}

/// What one GRU layer's forward pass keeps for its backward pass.
struct LayerTape {
    /// The layer's input `[T, N, in]` (after dropout).
    input: Vec<f32>,
    /// Per direction `[T, N, H]` each (indexed by time, not step): the state before the step,
    /// the gates r and z, the candidate n and the hidden product's n-part (W_hn h + b_hn).
    before: [Vec<f32>; 2],
    r: [Vec<f32>; 2],
    z: [Vec<f32>; 2],
    n: [Vec<f32>; 2],
    hn: [Vec<f32>; 2],
}

/// Everything the backward pass needs.
pub(crate) struct Tape {
    layers: Vec<LayerTape>,
    /// Dropout masks (already scaled by 1/keep) on each layer's output but the last: `[T, N, 2H]`.
    dropped: Vec<Option<Vec<f32>>>,
    pooled: Vec<f32>,
    a1: Vec<f32>,
    h1: Vec<f32>,
    fc_dropped: Option<Vec<f32>>,
    a2: Vec<f32>,
    steps: usize,
    rows: usize,
    mask: Vec<f32>,
    groups: Vec<(usize, usize)>,
}

/// A dropout mask scaled by 1/keep, or `None` when there is none to apply.
fn dropout_mask(len: usize, p: f64, rng: Option<&mut Pcg64Mcg>) -> Option<Vec<f32>> {
    let rng = rng?;
    if p <= 0.0 {
        return None;
    }
    let keep = 1.0 - p;
    let scale = (1.0 / keep) as f32;
    Some((0..len).map(|_| if rng.random_bool(keep) { scale } else { 0.0 }).collect())
}

/// One row of a forward step: the gates `r`, `z` and the candidate `c` from the row's input
/// projection `pr` and state projection `hr` (`[r | z | n]` parts of H each), then, when the row
/// steps (`on`), its state moved to `c + z·(state − c)`.
#[inline(always)]
fn forward_row_body(pr: &[f32], hr: &[f32], r: &mut [f32], z: &mut [f32], c: &mut [f32], state: &mut [f32], on: bool) {
    let h = state.len();
    let (pr, hr) = (&pr[..3 * h], &hr[..3 * h]);
    let (r, z, c) = (&mut r[..h], &mut z[..h], &mut c[..h]);
    for j in 0..h {
        r[j] = sigmoid(pr[j] + hr[j]);
        z[j] = sigmoid(pr[h + j] + hr[h + j]);
        c[j] = tanh(pr[2 * h + j] + r[j] * hr[2 * h + j]);
    }
    if on {
        for j in 0..h {
            state[j] = c[j] + z[j] * (state[j] - c[j]);
        }
    }
}

/// One row of a backward step from the state's gradient `dh` and what the forward pass saved
/// (`[r, z, n, hn, before]`): the gradients of the input projection (`rp`), of the state
/// projection (`rh`), and the direct part of the previous state's (`dh_prev`, to which the
/// recurrent product is added after).
#[inline(always)]
fn backward_row_body(dh: &[f32], saved: [&[f32]; 5], rp: &mut [f32], rh: &mut [f32], dh_prev: &mut [f32]) {
    let h = dh.len();
    let [r, z, c, hn, prev] = saved.map(|v| &v[..h]);
    let (rp, rh, dh_prev) = (&mut rp[..3 * h], &mut rh[..3 * h], &mut dh_prev[..h]);
    for j in 0..h {
        let (r, z, c, hn, prev, dhv) = (r[j], z[j], c[j], hn[j], prev[j], dh[j]);
        let da_n = dhv * (1.0 - z) * (1.0 - c * c);
        let da_z = dhv * (prev - c) * z * (1.0 - z);
        let da_r = da_n * hn * r * (1.0 - r);
        rp[j] = da_r;
        rp[h + j] = da_z;
        rp[2 * h + j] = da_n;
        rh[j] = da_r;
        rh[h + j] = da_z;
        rh[2 * h + j] = da_n * r;
        dh_prev[j] = dhv * z;
    }
}

/// The row functions compiled for AVX2 and FMA, so their loops run 8 lanes wide where the CPU
/// has them (the crate's baseline is SSE2's 4). Element-wise arithmetic without contraction:
/// the same floats either way.
#[cfg(target_arch = "x86_64")]
mod wide {
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn forward_row(
        pr: &[f32],
        hr: &[f32],
        r: &mut [f32],
        z: &mut [f32],
        c: &mut [f32],
        state: &mut [f32],
        on: bool,
    ) {
        super::forward_row_body(pr, hr, r, z, c, state, on)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn backward_row(dh: &[f32], saved: [&[f32]; 5], rp: &mut [f32], rh: &mut [f32], dh_prev: &mut [f32]) {
        super::backward_row_body(dh, saved, rp, rh, dh_prev)
    }
}

fn forward_row(pr: &[f32], hr: &[f32], r: &mut [f32], z: &mut [f32], c: &mut [f32], state: &mut [f32], on: bool) {
    #[cfg(target_arch = "x86_64")]
    if crate::panel::avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA (detected).
        return unsafe { wide::forward_row(pr, hr, r, z, c, state, on) };
    }
    forward_row_body(pr, hr, r, z, c, state, on)
}

fn backward_row(dh: &[f32], saved: [&[f32]; 5], rp: &mut [f32], rh: &mut [f32], dh_prev: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::panel::avx2_fma() {
        // SAFETY: the CPU has AVX2 and FMA (detected).
        return unsafe { wide::backward_row(dh, saved, rp, rh, dh_prev) };
    }
    backward_row_body(dh, saved, rp, rh, dh_prev)
}

/// One bidirectional layer forward over `x` (`[T, N, in]`); returns outputs `[T, N, 2H]` (forward
/// ⊕ backward at each time), the final states `[N, 2H]` and, when `keep`, the tape.
fn layer_forward(
    p: &[f32],
    offsets: [usize; 4],
    input: usize,
    h: usize,
    inp: &Input,
    x: Vec<f32>,
    keep: bool,
) -> (Vec<f32>, Vec<f32>, Option<LayerTape>) {
    let (t_len, n, g) = (inp.steps, inp.rows, 3 * h);
    let mut out = vec![0.0; t_len * n * 2 * h];
    let mut last = vec![0.0; n * 2 * h];
    let per = || [vec![0.0; t_len * n * h], vec![0.0; t_len * n * h]];
    let mut tape =
        keep.then(|| LayerTape { input: Vec::new(), before: per(), r: per(), z: per(), n: per(), hn: per() });
    let (mut r, mut z, mut c) = (vec![0.0; h], vec![0.0; h], vec![0.0; h]);
    let mut proj = vec![0.0; t_len * n * g];
    let mut hp = vec![0.0; n * g];
    let mut state = vec![0.0; n * h];
    for d in 0..2 {
        let wi = &p[offsets[0] + d * input * g..offsets[0] + (d + 1) * input * g];
        let bi = &p[offsets[1] + d * g..offsets[1] + (d + 1) * g];
        let wh = &p[offsets[2] + d * h * g..offsets[2] + (d + 1) * h * g];
        let bh = &p[offsets[3] + d * g..offsets[3] + (d + 1) * g];
        // Every step's input projection at once, bias first.
        for row in proj.chunks_exact_mut(g) {
            row.copy_from_slice(bi);
        }
        matmul(&mut proj, true, &x, false, wi, false, t_len * n, g, input);
        state.fill(0.0);
        let wh = Rhs::new(wh, false, h, g);
        for s in 0..t_len {
            let t = if d == 0 { s } else { t_len - 1 - s };
            for row in hp.chunks_exact_mut(g) {
                row.copy_from_slice(bh);
            }
            wh.mul_add(&mut hp, &state, n);
            let base = t * n * h;
            if let Some(tape) = tape.as_mut() {
                tape.before[d][base..base + n * h].copy_from_slice(&state);
            }
            for i in 0..n {
                let pr = &proj[(t * n + i) * g..(t * n + i + 1) * g];
                let hr = &hp[i * g..(i + 1) * g];
                let row = &mut state[i * h..(i + 1) * h];
                let on = inp.mask[t * n + i] != 0.0;
                match tape.as_mut() {
                    Some(tape) => {
                        let at = base + i * h;
                        let (r, z, c) =
                            (&mut tape.r[d][at..at + h], &mut tape.z[d][at..at + h], &mut tape.n[d][at..at + h]);
                        forward_row(pr, hr, r, z, c, row, on);
                        tape.hn[d][at..at + h].copy_from_slice(&hr[2 * h..]);
                    }
                    None => forward_row(pr, hr, &mut r, &mut z, &mut c, row, on),
                }
                let o = (t * n + i) * 2 * h + d * h;
                out[o..o + h].copy_from_slice(row);
            }
        }
        for i in 0..n {
            last[i * 2 * h + d * h..i * 2 * h + (d + 1) * h].copy_from_slice(&state[i * h..(i + 1) * h]);
        }
    }
    if let Some(tape) = tape.as_mut() {
        tape.input = x;
    }
    (out, last, tape)
}

/// The embeddings `[B, E]` of a batch, and the tape for [`backward`]. `rng` draws dropout masks
/// (training); `None` runs without dropout and keeps no tape (inference: the tape it returns
/// cannot be back-propagated).
pub(crate) fn forward(
    layout: &Layout,
    p: &[f32],
    dropout: f64,
    inp: &Input,
    mut rng: Option<&mut Pcg64Mcg>,
) -> (Vec<f32>, Tape) {
    let (h, fc, e) = (layout.hidden, layout.fc, layout.embedding);
    let (t_len, n) = (inp.steps, inp.rows);
    let mut x = inp.x.to_vec();
    let mut tapes = Vec::with_capacity(layout.layers.len());
    let mut dropped = Vec::with_capacity(layout.layers.len());
    let mut last = Vec::new();
    for (l, &(input, offsets)) in layout.layers.iter().enumerate() {
        let (mut out, fin, tape) = layer_forward(p, offsets, input, h, inp, x, rng.is_some());
        tapes.extend(tape);
        last = fin;
        let deeper = l + 1 < layout.layers.len();
        let mask = if deeper { dropout_mask(t_len * n * 2 * h, dropout, rng.as_deref_mut()) } else { None };
        if let Some(m) = &mask {
            out.iter_mut().zip(m).for_each(|(v, k)| *v *= k);
        }
        dropped.push(mask);
        x = out;
    }
    let b = inp.groups.len();
    let mut pooled = vec![0.0; b * 2 * h];
    for (bi, &(first, count)) in inp.groups.iter().enumerate() {
        let row = &mut pooled[bi * 2 * h..(bi + 1) * 2 * h];
        for i in first..first + count {
            row.iter_mut().zip(&last[i * 2 * h..(i + 1) * 2 * h]).for_each(|(a, v)| *a += v / count as f32);
        }
    }
    let [w1, b1, w2, b2] = layout.head;
    let dense = |x: &[f32], w: usize, bias: usize, rows: usize, i: usize, o: usize| {
        let mut a = Vec::with_capacity(rows * o);
        for _ in 0..rows {
            a.extend_from_slice(&p[bias..bias + o]);
        }
        matmul(&mut a, true, x, false, &p[w..w + i * o], false, rows, o, i);
        a
    };
    let a1 = dense(&pooled, w1, b1, b, 2 * h, fc);
    let mut h1: Vec<f32> = a1.iter().map(|v| v.max(0.0)).collect();
    let fc_dropped = dropout_mask(b * fc, dropout, rng);
    if let Some(m) = &fc_dropped {
        h1.iter_mut().zip(m).for_each(|(v, k)| *v *= k);
    }
    let a2 = dense(&h1, w2, b2, b, fc, e);
    let embedding = a2.iter().map(|v| layout.output.apply(*v)).collect();
    let tape = Tape {
        layers: tapes,
        dropped,
        pooled,
        a1,
        h1,
        fc_dropped,
        a2,
        steps: t_len,
        rows: n,
        mask: inp.mask.to_vec(),
        groups: inp.groups.to_vec(),
    };
    (embedding, tape)
}

/// Adds to `grad` (the layout's length) the gradient of the loss whose gradient with respect to
/// the embeddings is `d_embedding` (`[B, E]`).
pub(crate) fn backward(layout: &Layout, p: &[f32], tape: &Tape, d_embedding: &[f32], grad: &mut [f32]) {
    let (h, fc, e) = (layout.hidden, layout.fc, layout.embedding);
    let g = 3 * h;
    let (t_len, n, b) = (tape.steps, tape.rows, tape.groups.len());
    let [w1, b1, w2, b2] = layout.head;
    // Head: e = out(a2) (out: the layout's output, ReLU or none), a2 = h1·W2 + b2,
    // h1 = drop(relu(a1)), a1 = pooled·W1 + b1.
    let da2: Vec<f32> =
        d_embedding.iter().zip(&tape.a2).map(|(d, a)| if layout.output.passes(*a) { *d } else { 0.0 }).collect();
    matmul(&mut grad[w2..w2 + fc * e], true, &tape.h1, true, &da2, false, fc, e, b);
    for row in da2.chunks_exact(e) {
        grad[b2..b2 + e].iter_mut().zip(row).for_each(|(g, d)| *g += d);
    }
    let mut da1 = vec![0.0; b * fc];
    matmul(&mut da1, false, &da2, false, &p[w2..w2 + fc * e], true, b, fc, e);
    for (k, d) in da1.iter_mut().enumerate() {
        let keep = tape.fc_dropped.as_ref().map_or(1.0, |m| m[k]);
        *d = if tape.a1[k] > 0.0 { *d * keep } else { 0.0 };
    }
    matmul(&mut grad[w1..w1 + 2 * h * fc], true, &tape.pooled, true, &da1, false, 2 * h, fc, b);
    for row in da1.chunks_exact(fc) {
        grad[b1..b1 + fc].iter_mut().zip(row).for_each(|(g, d)| *g += d);
    }
    let mut dpooled = vec![0.0; b * 2 * h];
    matmul(&mut dpooled, false, &da1, false, &p[w1..w1 + 2 * h * fc], true, b, 2 * h, fc);
    let mut dlast = vec![0.0; n * 2 * h];
    for (bi, &(first, count)) in tape.groups.iter().enumerate() {
        for i in first..first + count {
            dlast[i * 2 * h..(i + 1) * 2 * h]
                .iter_mut()
                .zip(&dpooled[bi * 2 * h..(bi + 1) * 2 * h])
                .for_each(|(d, v)| *d = v / count as f32);
        }
    }
    // GRU layers, last to first: the last layer's gradient enters through its final states,
    // the others' through their outputs at every step.
    let mut d_out: Option<Vec<f32>> = None;
    let mut dh = vec![0.0; n * h];
    let mut dp = vec![0.0; t_len * n * g];
    let mut dhp = vec![0.0; t_len * n * g];
    let mut dh_prev = vec![0.0; n * h];
    for l in (0..layout.layers.len()).rev() {
        let (input, o) = layout.layers[l];
        let lt = &tape.layers[l];
        let mut d_input = vec![0.0; t_len * n * input];
        for d in 0..2 {
            let wh = &p[o[2] + d * h * g..o[2] + (d + 1) * h * g];
            let wi = &p[o[0] + d * input * g..o[0] + (d + 1) * input * g];
            let wh_t = Rhs::new(wh, true, g, h);
            dh.fill(0.0);
            if d_out.is_none() {
                for i in 0..n {
                    dh[i * h..(i + 1) * h].copy_from_slice(&dlast[i * 2 * h + d * h..i * 2 * h + (d + 1) * h]);
                }
            }
            // Steps in reverse order of the direction's own processing.
            for s in (0..t_len).rev() {
                let t = if d == 0 { s } else { t_len - 1 - s };
                if let Some(dout) = &d_out {
                    for i in 0..n {
                        let src = &dout[(t * n + i) * 2 * h + d * h..(t * n + i) * 2 * h + (d + 1) * h];
                        dh[i * h..(i + 1) * h].iter_mut().zip(src).for_each(|(a, v)| *a += v);
                    }
                }
                let base = t * n * h;
                let step_dp = &mut dp[t * n * g..(t + 1) * n * g];
                let step_dhp = &mut dhp[t * n * g..(t + 1) * n * g];
                for i in 0..n {
                    let on = tape.mask[t * n + i] != 0.0;
                    let rp = &mut step_dp[i * g..(i + 1) * g];
                    let rh = &mut step_dhp[i * g..(i + 1) * g];
                    if !on {
                        rp.fill(0.0);
                        rh.fill(0.0);
                        dh_prev[i * h..(i + 1) * h].copy_from_slice(&dh[i * h..(i + 1) * h]);
                        continue;
                    }
                    let at = base + i * h;
                    let saved = [&lt.r[d], &lt.z[d], &lt.n[d], &lt.hn[d], &lt.before[d]].map(|v| &v[at..at + h]);
                    backward_row(&dh[i * h..(i + 1) * h], saved, rp, rh, &mut dh_prev[i * h..(i + 1) * h]);
                }
                // dh_prev += dhp · W_hhᵀ for the rows that stepped (masked rows' dhp is zero).
                wh_t.mul_add(&mut dh_prev, step_dhp, n);
                std::mem::swap(&mut dh, &mut dh_prev);
            }
            // Weight and bias gradients over every step at once.
            matmul(
                &mut grad[o[2] + d * h * g..o[2] + (d + 1) * h * g],
                true,
                &lt.before[d],
                true,
                &dhp,
                false,
                h,
                g,
                t_len * n,
            );
            matmul(
                &mut grad[o[0] + d * input * g..o[0] + (d + 1) * input * g],
                true,
                &lt.input,
                true,
                &dp,
                false,
                input,
                g,
                t_len * n,
            );
            for row in dhp.chunks_exact(g) {
                grad[o[3] + d * g..o[3] + (d + 1) * g].iter_mut().zip(row).for_each(|(a, v)| *a += v);
            }
            for row in dp.chunks_exact(g) {
                grad[o[1] + d * g..o[1] + (d + 1) * g].iter_mut().zip(row).for_each(|(a, v)| *a += v);
            }
            if l > 0 {
                matmul(&mut d_input, true, &dp, false, wi, true, t_len * n, input, g);
            }
        }
        if l > 0 {
            if let Some(m) = &tape.dropped[l - 1] {
                d_input.iter_mut().zip(m).for_each(|(v, k)| *v *= k);
            }
            d_out = Some(d_input);
        }
    }
}

/// Adam (PyTorch's defaults: β 0.9 / 0.999, ε 1e-8) over one flat parameter vector.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Adam {
    m: Vec<f32>,
    v: Vec<f32>,
    t: i32,
}

impl Adam {
    pub fn new(len: usize) -> Self {
        Self { m: vec![0.0; len], v: vec![0.0; len], t: 0 }
    }

    /// Whether moments read back from elsewhere fit `len` parameters: finite, second moments
    /// not negative, a step count not negative.
    pub fn check(&self, len: usize) -> Result<(), String> {
        if self.m.len() != len || self.v.len() != len || self.t < 0 {
            return Err(format!(
                "optimiser holds {} and {} moments at step {}, {len} parameters",
                self.m.len(),
                self.v.len(),
                self.t
            ));
        }
        if !self.m.iter().chain(&self.v).all(|x| x.is_finite()) || self.v.iter().any(|x| *x < 0.0) {
            return Err("optimiser moments are not finite (second moments ≥ 0)".into());
        }
        Ok(())
    }

    pub fn step(&mut self, p: &mut [f32], grad: &[f32], lr: f64) {
        const B1: f32 = 0.9;
        const B2: f32 = 0.999;
        const EPS: f32 = 1e-8;
        self.t += 1;
        let c1 = 1.0 - B1.powi(self.t);
        let c2 = 1.0 - B2.powi(self.t);
        let step = lr as f32 / c1;
        let c2_sqrt = c2.sqrt();
        for (((w, g), m), v) in p.iter_mut().zip(grad).zip(&mut self.m).zip(&mut self.v) {
            *m = B1 * *m + (1.0 - B1) * g;
            *v = B2 * *v + (1.0 - B2) * g * g;
            *w -= step * *m / (v.sqrt() / c2_sqrt + EPS);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_tanh_and_sigmoid_are_within_a_few_ulp() {
        let mut worst = (0.0f32, 0.0f32);
        for i in -200_000..=200_000 {
            let x = i as f32 / 10_000.0;
            let e = (tanh(x) - x.tanh()).abs();
            let s = (sigmoid(x) - 1.0 / (1.0 + (-x).exp())).abs();
            worst = (worst.0.max(e), worst.1.max(s));
        }
        assert!(worst.0 < 5e-7 && worst.1 < 5e-7, "worst errors: tanh {}, sigmoid {}", worst.0, worst.1);
        assert_eq!((tanh(1e30), tanh(-1e30), tanh(0.0)), (1.0, -1.0, 0.0));
        assert!(tanh(f32::NAN).is_nan());
    }
}
