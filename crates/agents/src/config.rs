//! Checks on hyper-parameters read from a checkpoint: a value that would panic, abort or
//! poison the agent is refused, naming the field and the reason, before anything is built.

use serde::de::DeserializeOwned;

/// Widest hidden layer accepted.
pub const MAX_WIDTH: usize = 65_536;
/// Most hidden layers accepted.
pub const MAX_LAYERS: usize = 16;
/// Most weights between hidden layers accepted (512 MiB of f32 per network).
pub const MAX_WEIGHTS: usize = 1 << 27;
/// Largest capacity, batch or step count accepted.
pub const MAX_COUNT: usize = 1 << 30;

/// A hyper-parameter out of its range: `field` as written in `checkpoint.json` (`hidden[0]`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ConfigError {
    pub field: String,
    pub reason: String,
}

/// A configuration an agent is built from; [`crate::OpenCheckpoint::config`] reads only these,
/// and validates them.
pub trait Hyperparameters: DeserializeOwned {
    /// Every field within the range the agent can be built and trained with.
    fn validate(&self) -> Result<(), ConfigError>;
}

/// An f32 or f64, shown as written.
pub(crate) trait Number: Into<f64> + std::fmt::Display + Copy {}
impl<T: Into<f64> + std::fmt::Display + Copy> Number for T {}

fn fail(field: impl Into<String>, reason: impl Into<String>) -> Result<(), ConfigError> {
    Err(ConfigError { field: field.into(), reason: reason.into() })
}

/// `value` finite and `ok`, or an error saying it must be a finite number `want`.
fn number(field: &str, value: impl Number, ok: impl Fn(f64) -> bool, want: &str) -> Result<(), ConfigError> {
    let v: f64 = value.into();
    if v.is_finite() && ok(v) {
        return Ok(());
    }
    fail(field, format!("{value} must be a finite number{want}"))
}

/// Finite and within `[low, high]`.
pub(crate) fn in_range(field: &str, value: impl Number, low: f64, high: f64) -> Result<(), ConfigError> {
    number(field, value, |v| (low..=high).contains(&v), &format!(" in [{low}, {high}]"))
}

/// Finite and > 0.
pub(crate) fn positive(field: &str, value: impl Number) -> Result<(), ConfigError> {
    number(field, value, |v| v > 0.0, " > 0")
}

/// Finite and ≥ 0.
pub(crate) fn non_negative(field: &str, value: impl Number) -> Result<(), ConfigError> {
    number(field, value, |v| v >= 0.0, " ≥ 0")
}

/// Finite (any sign).
pub(crate) fn finite(field: &str, value: impl Number) -> Result<(), ConfigError> {
    number(field, value, |_| true, "")
}

/// A count in `1..=MAX_COUNT`.
pub(crate) fn count(field: &str, value: u64) -> Result<(), ConfigError> {
    if value == 0 {
        return fail(field, "must be ≥ 1");
    }
    if value > MAX_COUNT as u64 {
        return fail(field, format!("{value} exceeds the limit of {MAX_COUNT}"));
    }
    Ok(())
}

/// Hidden layer widths: at most [`MAX_LAYERS`], each in `1..=MAX_WIDTH`, within [`MAX_WEIGHTS`].
pub(crate) fn hidden(hidden: &[usize]) -> Result<(), ConfigError> {
    if hidden.len() > MAX_LAYERS {
        return fail("hidden", format!("{} layers exceed the limit of {MAX_LAYERS}", hidden.len()));
    }
    for (i, &w) in hidden.iter().enumerate() {
        if w == 0 {
            return fail(format!("hidden[{i}]"), "must be ≥ 1");
        }
        if w > MAX_WIDTH {
            return fail(format!("hidden[{i}]"), format!("{w} exceeds the limit of {MAX_WIDTH}"));
        }
    }
    weights("hidden", hidden)
}

/// The dense layers between consecutive `sizes` hold at most [`MAX_WEIGHTS`] weights.
pub(crate) fn weights(field: &str, sizes: &[usize]) -> Result<(), ConfigError> {
    let total = sizes.windows(2).try_fold(0usize, |sum, w| sum.checked_add(w[0].checked_mul(w[1])?));
    match total {
        Some(n) if n <= MAX_WEIGHTS => Ok(()),
        _ => fail(field, format!("{sizes:?} need more than the limit of {MAX_WEIGHTS} weights")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_layers_are_refused_naming_the_layer() {
        assert_eq!(hidden(&[64, 64]), Ok(()));
        assert_eq!(hidden(&[]), Ok(()));
        assert_eq!(hidden(&[0, 0]).unwrap_err().to_string(), "hidden[0]: must be ≥ 1");
        assert_eq!(hidden(&[8, 70_000]).unwrap_err().field, "hidden[1]");
        assert!(hidden(&[MAX_WIDTH, MAX_WIDTH]).unwrap_err().to_string().contains("weights"));
        assert!(hidden(&[8; MAX_LAYERS + 1]).unwrap_err().to_string().contains("layers"));
        assert_eq!(weights("w", &[usize::MAX, 2]).unwrap_err().field, "w");
    }

    #[test]
    fn ranges_refuse_non_finite_values() {
        assert_eq!(in_range("gamma", 0.0, 0.0, 1.0), Ok(()));
        assert_eq!(
            in_range("gamma", f64::NAN, 0.0, 1.0).unwrap_err().to_string(),
            "gamma: NaN must be a finite number in [0, 1]"
        );
        assert!(positive("lr", 0.0).is_err() && positive("lr", f64::INFINITY).is_err());
        assert_eq!(non_negative("x", -1.0f32).unwrap_err().to_string(), "x: -1 must be a finite number ≥ 0");
        assert!(finite("x", f64::NEG_INFINITY).is_err() && finite("x", -3.0).is_ok());
        assert_eq!(count("n", 0).unwrap_err().to_string(), "n: must be ≥ 1");
        assert!(count("n", MAX_COUNT as u64 + 1).is_err() && count("n", 1).is_ok());
    }
}
