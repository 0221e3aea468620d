//! The GRU's recurrent product, `dst += a · B` with a few rows `a` (the bundle's trajectories,
//! M = 20) and one fixed `B` (W_hh or its transpose) over every step of a direction.
//!
//! A general GEMM packs `B` on every call and its kernels are tuned for large `m`: at
//! 20 × 256 · 256 × 768 gemm 0.19's AVX2 path reaches 40–67 GFLOP/s against ~86 on the large
//! products, and the two recurrent products are half the fused pass. Here `B` is packed once
//! per direction into 16-column panels (each panel's `k` rows contiguous), and a register-blocked
//! kernel keeps up to 6 rows × 16 columns of accumulators in 12 AVX registers while it streams
//! the panel once per block of rows: ~80–90 GFLOP/s at m = 20 on a 2-core AMD EPYC without
//! AVX-512 (see `aware bench meta`).
//!
//! The kernel runs where the CPU has AVX2 and FMA but not AVX-512 (detected at run time); on
//! AVX-512 machines, gemm's `x86-v4` kernels run these products near peak, and elsewhere gemm
//! serves them. The two paths sum in different orders, so results agree to rounding (tested),
//! not bit for bit.
//!
//! Where gemm serves, a `B` stored transposed (back-propagation's `W_hhᵀ`) is copied once into
//! row-major order: gemm packs its right-hand side on every call, and packing one read with a
//! stride of `k` floats cost more than the product itself (20 × 768 · 768 × 256: 135 µs a call
//! against 57 µs from the row-major copy, on the Intel Xeon with AVX-512 of sessions 73–86, 400
//! such calls in every meta-training step's backward pass; the step went from 194–199 ms to
//! 158–163 ms; `experiment ood --quick --seed 157` gave the same report to the digit). An
//! AVX-512 kernel of 32-column panels was tried beside it (48 µs a call against gemm's 61 on
//! the forward product in isolation) and not kept: 1–2 % of the embedding and none of the
//! step, and different rounding.

use std::borrow::Cow;

/// Columns per panel: two 8-lane AVX registers.
const WIDTH: usize = 16;

/// A fixed right-hand side `B` (`k × n`, or stored `n × k` when `b_t`) for repeated
/// `dst += a · B` products.
pub(crate) struct Rhs<'a> {
    /// `B` as gemm reads it where it serves: a `B` stored transposed is copied row-major there
    /// (module docs).
    b: Cow<'a, [f32]>,
    b_t: bool,
    k: usize,
    n: usize,
    /// `B` in panels of [`WIDTH`] columns, `panel[(j·k + p)·WIDTH + c] = B[p][j·WIDTH + c]`
    /// (zero past `n`); `None` where the kernel does not run.
    panels: Option<Vec<f32>>,
}

impl<'a> Rhs<'a> {
    pub fn new(b: &'a [f32], b_t: bool, k: usize, n: usize) -> Self {
        assert!(b.len() >= k * n, "right-hand side too short");
        if kernel_available() && k > 0 && n > 0 {
            return Self { b: Cow::Borrowed(b), b_t, k, n, panels: Some(pack(b, b_t, k, n)) };
        }
        Self::for_gemm(b, b_t, k, n)
    }

    /// The right-hand side gemm multiplies by, `B` copied row-major where it is stored
    /// transposed.
    fn for_gemm(b: &'a [f32], b_t: bool, k: usize, n: usize) -> Self {
        let (b, b_t) =
            if b_t && k > 0 && n > 0 { (Cow::Owned(transpose(b, n, k)), false) } else { (Cow::Borrowed(b), b_t) };
        Self { b, b_t, k, n, panels: None }
    }

    /// `dst` (`m × n`) `+=` `a` (`m × k`) · `B`, row-major.
    pub fn mul_add(&self, dst: &mut [f32], a: &[f32], m: usize) {
        let (k, n) = (self.k, self.n);
        assert!(dst.len() >= m * n && a.len() >= m * k, "recurrent product operands too short");
        match &self.panels {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the panels exist only where `kernel_available` found AVX2 and FMA; the
            // assert above and the packing bound every index `avx2::mul_add` reaches.
            Some(panels) => unsafe { avx2::mul_add(dst, a, panels, m, n, k) },
            _ => crate::fused::matmul(dst, true, a, false, &self.b, self.b_t, m, n, k),
        }
    }
}

/// `b` (`rows × cols`, row-major) transposed: `cols × rows`, row-major.
fn transpose(b: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for (r, row) in b[..rows * cols].chunks_exact(cols).enumerate() {
        for (c, v) in row.iter().enumerate() {
            out[c * rows + r] = *v;
        }
    }
    out
}

/// `B` in panels of [`WIDTH`] columns (see [`Rhs`]); `k` and `n` are positive.
fn pack(b: &[f32], b_t: bool, k: usize, n: usize) -> Vec<f32> {
    let count = n.div_ceil(WIDTH);
    let mut out = vec![0.0; count * k * WIDTH];
    for (j, panel) in out.chunks_exact_mut(k * WIDTH).enumerate() {
        for (p, row) in panel.chunks_exact_mut(WIDTH).enumerate() {
            for (c, v) in row.iter_mut().enumerate() {
                let col = j * WIDTH + c;
                if col < n {
                    *v = if b_t { b[col * k + p] } else { b[p * n + col] };
                }
            }
        }
    }
    out
}

fn kernel_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx2_fma() && !std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CPU has AVX2 and FMA (detected once; the standard library caches the answer).
#[cfg(target_arch = "x86_64")]
pub(crate) fn avx2_fma() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::{
        __m256, _mm256_add_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps,
        _mm256_storeu_ps,
    };

    use super::WIDTH;

    /// Rows of accumulators per block: 6 × 2 registers, leaving the panel's two and a
    /// broadcast.
    const MAX_ROWS: usize = 6;

    /// `dst` (`m × n`) += `a` (`m × k`) · the packed `B`. Panel by panel (so each panel is read
    /// from cache once per block of rows), the rows split into equal blocks of at most
    /// [`MAX_ROWS`]: 20 rows run as four blocks of 5, not 6 + 6 + 6 + 2, whose last block would
    /// have too few independent accumulators to hide the FMA latency.
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; `dst.len() ≥ m·n`, `a.len() ≥ m·k`, and `panels` holds
    /// `⌈n/16⌉` panels of `k × 16`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn mul_add(dst: &mut [f32], a: &[f32], panels: &[f32], m: usize, n: usize, k: usize) {
        if m == 0 || k == 0 {
            return;
        }
        let rows_per_block = m.div_ceil(m.div_ceil(MAX_ROWS));
        for (j, panel) in panels.chunks_exact(k * WIDTH).enumerate() {
            let cols = (n - j * WIDTH).min(WIDTH);
            let mut i = 0;
            while i < m {
                let rows = (m - i).min(rows_per_block);
                // SAFETY: rows i..i + rows of dst start at (i·n + j·16) and span `cols` ≤ n − j·16
                // columns each; those of a span k; the panel spans k × 16.
                unsafe {
                    let c = dst.as_mut_ptr().add(i * n + j * WIDTH);
                    let a = a.as_ptr().add(i * k);
                    let b = panel.as_ptr();
                    match rows {
                        6 => block::<6>(c, n, a, k, b, cols),
                        5 => block::<5>(c, n, a, k, b, cols),
                        4 => block::<4>(c, n, a, k, b, cols),
                        3 => block::<3>(c, n, a, k, b, cols),
                        2 => block::<2>(c, n, a, k, b, cols),
                        _ => block::<1>(c, n, a, k, b, cols),
                    }
                }
                i += rows;
            }
        }
    }

    /// `R` rows × one panel: `c[r][0..cols] += Σ_p a[r][p] · b[p][0..cols]`.
    ///
    /// # Safety
    /// AVX2 and FMA; `c` is valid for `R` rows of stride `ldc` and `cols` ≤ 16 columns, `a` for
    /// `R` rows of stride `k`, `b` for `k × 16`.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    unsafe fn block<const R: usize>(c: *mut f32, ldc: usize, a: *const f32, k: usize, b: *const f32, cols: usize) {
        let mut acc: [[__m256; 2]; R] = [[_mm256_setzero_ps(); 2]; R];
        for p in 0..k {
            // SAFETY: p < k, so the panel's row p and each a[r][p] are in bounds (caller).
            unsafe {
                let b0 = _mm256_loadu_ps(b.add(p * WIDTH));
                let b1 = _mm256_loadu_ps(b.add(p * WIDTH + 8));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm256_broadcast_ss(&*a.add(r * k + p));
                    acc[0] = _mm256_fmadd_ps(x, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(x, b1, acc[1]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: row r of c holds `cols` writable floats (caller).
            unsafe {
                let row = c.add(r * ldc);
                if cols == WIDTH {
                    _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[0]));
                    _mm256_storeu_ps(row.add(8), _mm256_add_ps(_mm256_loadu_ps(row.add(8)), acc[1]));
                } else {
                    let mut sum = [0.0f32; WIDTH];
                    _mm256_storeu_ps(sum.as_mut_ptr(), acc[0]);
                    _mm256_storeu_ps(sum.as_mut_ptr().add(8), acc[1]);
                    for (q, v) in sum.iter().take(cols).enumerate() {
                        *row.add(q) += v;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    use super::*;

    /// Every row count a block takes (1 to 6, and 20 as 4 × 5), panels cut short, both storages
    /// of `B`, against the general GEMM. Where the CPU has AVX2 and FMA the kernel runs even if
    /// it also has AVX-512 (where [`Rhs::new`] leaves the product to gemm).
    #[test]
    fn agrees_with_the_general_product() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let shapes = [
            (1, 16, 3),
            (2, 20, 5),
            (5, 24, 9),
            (7, 8, 33),
            (13, 40, 17),
            (20, 768, 256),
            (20, 256, 768),
            (32, 17, 4),
            (41, 50, 1),
        ];
        for &(m, n, k) in &shapes {
            for b_t in [false, true] {
                let a: Vec<f32> = (0..m * k).map(|_| rng.random_range(-1.0..1.0)).collect();
                let b: Vec<f32> = (0..k * n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let start: Vec<f32> = (0..m * n).map(|_| rng.random_range(-1.0..1.0)).collect();
                let mut want = start.clone();
                crate::fused::matmul(&mut want, true, &a, false, &b, b_t, m, n, k);
                #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
                let mut rhs = Rhs::new(&b, b_t, k, n);
                #[cfg(target_arch = "x86_64")]
                if avx2_fma() {
                    rhs.panels = Some(pack(&b, b_t, k, n));
                }
                let mut got = start.clone();
                rhs.mul_add(&mut got, &a, m);
                // gemm's path, with a transposed B copied row-major.
                let by_gemm = Rhs::for_gemm(&b, b_t, k, n);
                let mut from_gemm = start.clone();
                by_gemm.mul_add(&mut from_gemm, &a, m);
                for (i, (g, w)) in from_gemm.iter().zip(&want).enumerate() {
                    let tol = 1e-5 * (k as f32).sqrt() * (1.0 + w.abs());
                    assert!((g - w).abs() <= tol, "gemm's path, m {m} n {n} k {k} b_t {b_t}: element {i}: {g} vs {w}");
                }
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let tol = 1e-5 * (k as f32).sqrt() * (1.0 + w.abs());
                    assert!((g - w).abs() <= tol, "m {m} n {n} k {k} b_t {b_t}: element {i}: {g} vs {w}");
                }
            }
        }
    }

    #[test]
    fn no_rows_leaves_dst_alone() {
        let b = vec![1.0; 4 * 20];
        let mut dst: Vec<f32> = vec![];
        Rhs::new(&b, false, 4, 20).mul_add(&mut dst, &[], 0);
        assert!(dst.is_empty());
        // No inner dimension, or no columns, stored either way: nothing to add, nothing to copy.
        for b_t in [false, true] {
            let mut dst = vec![2.0; 3 * 5];
            Rhs::new(&[], b_t, 0, 5).mul_add(&mut dst, &[], 3);
            assert_eq!(dst, vec![2.0; 15]);
            let mut none: Vec<f32> = vec![];
            Rhs::new(&[], b_t, 4, 0).mul_add(&mut none, &[0.0; 12], 3);
            assert!(none.is_empty());
        }
    }
}
