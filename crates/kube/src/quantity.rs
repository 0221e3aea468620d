//! Kubernetes resource quantities (`500m`, `1.5`, `128Mi`, `1e3`) to and from the integer units
//! `aware-core` uses (millicores, bytes). Grammar and suffixes from apimachinery
//! `pkg/api/resource/quantity.go`; values round up as `Quantity.MilliValue()` / `Value()` do.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {reason}")]
pub struct QuantityError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses a quantity into a value scaled by `10^scale` (3 for milli-units, 0 for units),
/// rounding up like apimachinery's `ScaledValue`. Negative quantities are rejected: no resource
/// `aware` sets can be negative.
pub fn parse_scaled(text: &str, scale: i32) -> Result<u64, QuantityError> {
    let err = |reason| QuantityError { text: text.to_string(), reason };
    let s = text.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return Err(err("negative quantities are not allowed here"));
    }
    let number_end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(err("expected a number"));
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // (base, exponent): binary suffixes multiply by 2^(10k), decimal ones shift the exponent.
    let (binary, exp10): (u32, i32) = match suffix {
        "" => (0, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        "Ki" => (10, 0),
        "Mi" => (20, 0),
        "Gi" => (30, 0),
        "Ti" => (40, 0),
        "Pi" => (50, 0),
        "Ei" => (60, 0),
        other if other.starts_with(['e', 'E']) => {
            let e: i32 = other[1..].parse().map_err(|_| err("bad exponent"))?;
            (0, e)
        }
        _ => return Err(err("unknown suffix")),
    };
    // mantissa = int_part.frac_part as an integer, with the decimal point moved into exp10.
    let digits = format!("{int_part}{frac_part}");
    let mantissa: u128 = digits.parse().map_err(|_| err("number too large"))?;
    let exp = exp10 - frac_part.len() as i32 + scale;
    let shifted =
        mantissa.checked_shl(binary).filter(|v| v >> binary == mantissa).ok_or_else(|| err("number too large"))?;
    let value = if exp >= 0 {
        10u128.checked_pow(exp as u32).and_then(|p| shifted.checked_mul(p)).ok_or_else(|| err("number too large"))?
    } else {
        let p = 10u128.checked_pow((-exp) as u32);
        match p {
            Some(p) => shifted.div_ceil(p),
            None => u128::from(shifted > 0),
        }
    };
    u64::try_from(value).map_err(|_| err("number too large"))
}

/// CPU quantity → millicores (rounded up, as `MilliValue()`).
pub fn cpu_millicores(q: &Quantity) -> Result<u64, QuantityError> {
    parse_scaled(&q.0, 3)
}

/// Memory quantity → bytes (rounded up, as `Value()`).
pub fn memory_bytes(q: &Quantity) -> Result<u64, QuantityError> {
    parse_scaled(&q.0, 0)
}

/// Millicores as the canonical quantity string (`250m`, `2`).
pub fn cpu_quantity(millicores: u64) -> Quantity {
    if millicores.is_multiple_of(1000) {
        Quantity(format!("{}", millicores / 1000))
    } else {
        Quantity(format!("{millicores}m"))
    }
}

/// Bytes as the canonical quantity string (`128Mi`, `1Gi`, or plain bytes).
pub fn memory_quantity(bytes: u64) -> Quantity {
    for (suffix, shift) in [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return Quantity(format!("{}{suffix}", bytes >> shift));
        }
    }
    Quantity(bytes.to_string())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn upstream_examples() {
        assert_eq!(parse_scaled("100m", 3), Ok(100));
        assert_eq!(parse_scaled("1", 3), Ok(1000));
        assert_eq!(parse_scaled("1.5", 3), Ok(1500));
        assert_eq!(parse_scaled("0.1m", 3), Ok(1)); // rounds up, as apimachinery does
        assert_eq!(parse_scaled("50Mi", 0), Ok(50 << 20));
        assert_eq!(parse_scaled("1.5Gi", 0), Ok(1536 << 20));
        assert_eq!(parse_scaled("1e3", 0), Ok(1000));
        assert_eq!(parse_scaled("1k", 0), Ok(1000));
        assert_eq!(parse_scaled("12E-1", 0), Ok(2));
        assert!(parse_scaled("-1", 0).is_err());
        assert!(parse_scaled("lots", 0).is_err());
        assert!(parse_scaled("1Xi", 0).is_err());
    }

    proptest! {
        #[test]
        fn cpu_round_trips(m in 0u64..10_000_000) {
            prop_assert_eq!(cpu_millicores(&cpu_quantity(m)), Ok(m));
        }

        #[test]
        fn memory_round_trips(b in 0u64..(1u64 << 50)) {
            prop_assert_eq!(memory_bytes(&memory_quantity(b)), Ok(b));
        }

        #[test]
        fn never_panics(s in "\\PC{0,12}") {
            let _ = parse_scaled(&s, 3);
        }
    }
}
