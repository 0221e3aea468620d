//! Kubernetes resource quantities (`"15"`, `"15500m"`, `"1.5Gi"`, `"2e3"`), as
//! `k8s.io/apimachinery/pkg/api/resource` writes them: a signed decimal number and an optional
//! binary (`Ki`…`Ei`), decimal (`n`, `u`, `m`, `k`, `M`…`E`) or exponent (`e3`) suffix.

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    #[error("quantity {0:?} is not a number with an optional Kubernetes suffix")]
    Malformed(String),
    #[error("quantity {0:?} is out of range")]
    OutOfRange(String),
}

/// The quantity's value as a float (upstream `AsApproximateFloat64`).
pub fn parse(s: &str) -> Result<f64, QuantityError> {
    let malformed = || QuantityError::Malformed(s.to_string());
    let t = s.trim();
    if t.is_empty() || t.len() > 64 {
        return Err(malformed());
    }
    let number_end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || ((c == '+' || c == '-') && i == 0)))
        .map_or(t.len(), |(i, _)| i);
    let (number, suffix) = t.split_at(number_end);
    let digits = number.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits == "." || digits.matches('.').count() > 1 {
        return Err(malformed());
    }
    let value: f64 = number.parse().map_err(|_| malformed())?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => {
            let exp: i32 = e[1..].parse().map_err(|_| malformed())?;
            10f64.powi(exp)
        }
        _ => return Err(malformed()),
    };
    let v = value * factor;
    if v.is_finite() { Ok(v) } else { Err(QuantityError::OutOfRange(s.to_string())) }
}

/// The quantity in milli-units, rounded up as upstream's `MilliValue` does; refused beyond
/// `i64`.
pub fn parse_milli(s: &str) -> Result<i64, QuantityError> {
    milli(parse(s)?).ok_or_else(|| QuantityError::OutOfRange(s.to_string()))
}

/// A value in milli-units, rounded up (a float a hair above a whole milli-unit, as
/// `0.05 × 1000`, counts as that unit); `None` when not finite or beyond `i64`.
pub fn milli(v: f64) -> Option<i64> {
    let m = v * 1000.0;
    let r = m.round();
    let m = if (m - r).abs() <= 1e-9 * r.abs().max(1.0) { r } else { m.ceil() };
    (m.is_finite() && m.abs() < 9.2e18).then_some(m as i64)
}
