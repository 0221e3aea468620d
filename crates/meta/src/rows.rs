//! Per-component arithmetic over a batch of rows of one width, kept flat and row-major
//! (`[B, width]`): embeddings, their gradients, the pool's signatures.

/// The mean of each component over the rows of `flat` (at least one row).
pub(crate) fn column_mean(flat: &[f32], width: usize) -> Vec<f32> {
    let n = (flat.len() / width) as f32;
    let mut sum = vec![0.0f32; width];
    for row in flat.chunks_exact(width) {
        sum.iter_mut().zip(row).for_each(|(s, v)| *s += v);
    }
    sum.into_iter().map(|s| s / n).collect()
}

/// Subtracts `centre` (one row) from every row of `flat`.
pub(crate) fn subtract(flat: &mut [f32], centre: &[f32]) {
    flat.chunks_exact_mut(centre.len()).for_each(|row| row.iter_mut().zip(centre).for_each(|(v, c)| *v -= c));
}

/// Subtracts the rows' own mean from every row of `flat` (at least one row).
pub(crate) fn remove_column_mean(flat: &mut [f32], width: usize) {
    let mean = column_mean(flat, width);
    subtract(flat, &mean);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn means_are_per_component_and_removing_them_leaves_zero_mean_rows() {
        let mut rows = vec![1.0, 10.0, 3.0, 20.0, 5.0, 60.0];
        assert_eq!(column_mean(&rows, 2), vec![3.0, 30.0]);
        remove_column_mean(&mut rows, 2);
        assert_eq!(rows, vec![-2.0, -20.0, 0.0, -10.0, 2.0, 30.0]);
        subtract(&mut rows, &[1.0, -1.0]);
        assert_eq!(rows, vec![-3.0, -19.0, -1.0, -9.0, 1.0, 31.0]);
    }
}
