//! The trace parser never panics, whatever the file holds (issue 19 hardening).

use aware_sim::parse_traces;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        if let Err(e) = parse_traces(&text, "t.csv") {
            let e = e.to_string();
            prop_assert!(e.starts_with("t.csv"), "{e}");
            prop_assert!(!e.contains('\n'), "{e}");
        }
    }

    /// CSV-shaped text with arbitrary numbers: parsed traces hold only finite rates ≤ 1e9/s.
    #[test]
    fn csv_shaped_text_yields_only_sane_rates(
        bom in any::<bool>(),
        azure in any::<bool>(),
        rows in prop::collection::vec(prop::collection::vec(
            prop_oneof![
                any::<f64>().prop_map(|v| v.to_string()),
                (0u64..1000).prop_map(|v| v.to_string()),
                "[-0-9.eE+a-z]{0,12}",
            ], 1..6), 0..6),
    ) {
        let mut text = String::new();
        if bom {
            text.push('\u{feff}');
        }
        if azure {
            text.push_str("HashOwner,HashApp,HashFunction,Trigger,1,2\n");
        }
        for row in &rows {
            let prefix = if azure { "o,a,f,http," } else { "" };
            text.push_str(&format!("{prefix}{}\n", row.join(",")));
        }
        if let Ok(traces) = parse_traces(&text, "t.csv") {
            for t in traces {
                prop_assert!(!t.rates.is_empty());
                prop_assert!(t.interval_s > 0.0 && t.interval_s.is_finite());
                prop_assert!(t.rates.iter().all(|r| r.is_finite() && *r >= 0.0 && *r <= 1e9), "{:?}", t.rates);
            }
        }
    }
}
