//! The `recommend` input parser and the policy registry: arbitrary input never panics, quantity
//! strings parse as Kubernetes writes them, names round-trip.

use aware_baselines::dry_run::{parse_input, run};
use aware_baselines::quantity;
use aware_baselines::{Baseline, BaselineError, BaselineKind};
use aware_core::Profile;
use proptest::prelude::*;
use serde_json::Value;

fn example() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/recommend-input.json")).unwrap()
}

/// Replaces the value at a random place in the JSON tree with `v`.
fn mutate(doc: &mut Value, mut pick: usize, v: Value) {
    fn walk(node: &mut Value, pick: &mut usize, v: &Value) -> bool {
        if *pick == 0 {
            *node = v.clone();
            return true;
        }
        *pick -= 1;
        match node {
            Value::Array(a) => a.iter_mut().any(|c| walk(c, pick, v)),
            Value::Object(o) => o.values_mut().any(|c| walk(c, pick, v)),
            _ => false,
        }
    }
    pick %= 400;
    walk(doc, &mut pick, &v);
}

fn arbitrary_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::num::f64::ANY.prop_filter("JSON numbers are finite", |f| f.is_finite()).prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        Just(serde_json::json!({"maxReplicas": 3, "metrics": [{"type": "Pods"}]})),
        Just(
            serde_json::json!([{"spec": {"containerName": "app"}, "status": {"cpuHistogram": {"bucketWeights": {"-7": 3}}}}])
        ),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Arbitrary text: an error or an input, never a panic.
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = parse_input(&text, "in.json");
    }

    /// The example with one value anywhere replaced by an arbitrary one (or an optional field
    /// added): parsing and, when it parses, running every policy never panics.
    #[test]
    fn mutated_example_never_panics(pick in 0usize..400, v in arbitrary_value(), field in 0usize..4) {
        let mut doc: Value = serde_json::from_str(&example()).unwrap();
        match field {
            0 => mutate(&mut doc, pick, v),
            1 => { doc["hpa"] = v; }
            2 => { doc["vpa_checkpoints"] = v; }
            _ => { doc["unlisted_pod_metrics"] = v; }
        }
        if let Ok(input) = parse_input(&doc.to_string(), "in.json") {
            for kind in BaselineKind::ALL {
                let _ = run(kind, &Profile::default(), &input, "in.json");
            }
        }
    }

    /// Quantities: arbitrary text never panics; plain decimals and suffixes scale exactly.
    #[test]
    fn quantities(text in ".{0,20}", whole in 0u32..1_000_000, frac in 0u32..1000) {
        let _ = quantity::parse(&text);
        let s = format!("{whole}.{frac:03}");
        prop_assert_eq!(quantity::parse_milli(&s).unwrap(), whole as i64 * 1000 + frac as i64);
        prop_assert_eq!(quantity::parse_milli(&format!("{whole}m")).unwrap(), whole as i64);
        prop_assert_eq!(quantity::parse(&format!("{whole}Ki")).unwrap(), whole as f64 * 1024.0);
    }
}

#[test]
fn quantity_table() {
    for (s, want) in
        [("15", 15000), ("15500m", 15500), ("0.05", 50), ("1k", 1_000_000), ("2e3", 2_000_000), ("+1", 1000)]
    {
        assert_eq!(quantity::parse_milli(s).unwrap(), want, "{s}");
    }
    for bad in ["", "m", "1.2.3", "12q", "1e", "--1", "Mi"] {
        assert!(quantity::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn baseline_kinds_round_trip_and_build() {
    for kind in BaselineKind::ALL {
        assert_eq!(kind.to_string().parse::<BaselineKind>().unwrap(), kind);
    }
    assert!(matches!("static".parse::<BaselineKind>(), Err(BaselineError::UnknownKind(_))));
    let p = Profile::default();
    assert!(matches!(Baseline::build(BaselineKind::Aimd, &p, None), Err(BaselineError::MissingSlo)));
    let mut b = Baseline::build(BaselineKind::Mpa, &p, None).unwrap();
    assert_eq!(b.kind(), BaselineKind::Mpa);
    assert_eq!(b.recommender().name(), "mpa");
    assert!(b.details().get("hpa").is_some() && b.details().get("vpa").is_some());
}

#[test]
fn parse_errors_name_file_line_and_field() {
    let err = parse_input(r#"{"observation": {"app": 3}}"#, "x.json").unwrap_err().to_string();
    assert!(err.starts_with("x.json:1:"), "{err}");
    assert!(err.contains("observation.app"), "{err}");
}

/// Only white space may follow the object: trailing text is refused with its position.
#[test]
fn trailing_text_after_the_object_is_refused() {
    let valid = example();
    assert!(parse_input(&format!("{valid}\n  \n"), "in.json").is_ok());
    let lines = valid.lines().count();
    for tail in [" garbage", "\n{}", "\n]", " 1"] {
        let err = parse_input(&format!("{}{tail}", valid.trim_end()), "in.json").unwrap_err().to_string();
        assert!(err.starts_with(&format!("in.json:{}:", lines + tail.matches('\n').count())), "{tail:?}: {err}");
        assert!(err.ends_with(": unexpected text after the JSON object"), "{tail:?}: {err}");
    }
}

/// A truncated file, a file holding something other than an object, and an array where an
/// object belongs read as a user would say it: no `?` for a field, no internal type names.
#[test]
fn malformed_files_are_described_in_the_users_terms() {
    let valid = example();
    let cut = &valid[..valid.len() / 2];
    let err = parse_input(cut, "in.json").unwrap_err().to_string();
    assert!(err.starts_with("in.json:") && err.ends_with(": unexpected end of file"), "{err}");
    assert!(!err.contains('?') && !err.contains("EOF"), "{err}");
    for empty in ["", "  \n", "{"] {
        let err = parse_input(empty, "in.json").unwrap_err().to_string();
        assert!(err.ends_with(": unexpected end of file"), "{empty:?}: {err}");
    }
    for not_object in ["[]", "[{}]", "\n  [1, 2]", "\"text\"", "3", "null", "garbage"] {
        let err = parse_input(not_object, "in.json").unwrap_err().to_string();
        assert_eq!(err, "in.json: expected a JSON object", "{not_object:?}");
    }
    // An array, or a number, where an object belongs: the field named, no internal type.
    for v in [serde_json::json!([]), serde_json::json!(3)] {
        let mut doc: Value = serde_json::from_str(&valid).unwrap();
        doc["observation"] = v.clone();
        let err = parse_input(&doc.to_string(), "in.json").unwrap_err().to_string();
        assert!(err.contains(": observation: ") && err.contains("expected a JSON object"), "{v}: {err}");
        assert!(!err.contains("struct"), "{v}: {err}");
    }
    // A key that does not parse is placed at its object, not at `?`.
    let err = parse_input(r#"{"observation": {app: 1}}"#, "in.json").unwrap_err().to_string();
    assert!(err.starts_with("in.json:1:") && err.contains(": observation: ") && !err.contains('?'), "{err}");
}

/// A quantity too large to hold in milli-units is called too large, not "not positive".
#[test]
fn a_quantity_too_large_is_named_as_such() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/recommend-hpa-v2.json");
    let text = std::fs::read_to_string(path)
        .unwrap()
        .replace(r#""averageValue": "15""#, r#""averageValue": "9999999999999Ei""#);
    let err = match parse_input(&text, "in.json") {
        Err(e) => e.to_string(),
        Ok(input) => run(BaselineKind::Mpa, &Profile::default(), &input, "in.json").unwrap_err().to_string(),
    };
    assert!(err.contains("averageValue") && err.contains("is too large"), "{err}");
    assert!(!err.contains("positive"), "{err}");
}

/// `docs/examples/recommend-hpa-v2.json` uses every optional field of the interface; the
/// failed and terminating pods are ignored, the HPA takes the larger of its two metrics, and the
/// VPA starts from the checkpoint.
#[test]
fn full_example_runs() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/recommend-hpa-v2.json"))
            .unwrap();
    let input = parse_input(&text, "recommend-hpa-v2.json").unwrap();
    let out = run(BaselineKind::Mpa, &Profile::default(), &input, "recommend-hpa-v2.json").unwrap();
    let hpa = &out.details["hpa"];
    assert_eq!(hpa["error"], Value::Null, "{hpa}");
    // web container: (0.45 + 0.52 + 0.40) / 1.5 cores = 91 % of requests at a 70 % target.
    assert_eq!(hpa["utilizations"][0], 91, "{hpa}");
    // qps: (18 + 21.5 + 17 + 30 unlisted) / 4 = 21.625 against 15 → ratio 1.44 × 3 ready pods.
    assert_eq!(hpa["average_values"][1], 21.625, "{hpa}");
    assert_eq!(hpa["metric_replicas"], 5, "{hpa}");
    let list = out.details["vpa"]["container_recommendations"].as_array().unwrap();
    let names: Vec<&str> = list.iter().map(|c| c["container_name"].as_str().unwrap()).collect();
    assert_eq!(names, ["envoy", "web"]);
}

/// A case of a bad observation: what it is, how the example is changed, the field named.
type Case = (&'static str, fn(&mut Value), &'static str);

fn example_v2() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/recommend-hpa-v2.json")).unwrap()
}

/// Values no cluster reports are refused naming their place in the file, one line each: a
/// container's request above its limit, a negative custom metric or utilisation, usage no pod
/// can hold, two pods of one name.
#[test]
fn observations_no_cluster_reports_are_refused_by_field() {
    let cases: [(fn() -> String, Case); 6] = [
        (
            example_v2,
            (
                "container request above its limit",
                |o| o["pods"][0]["containers"][0]["requests"]["cpu_millicores"] = 2000.into(),
                "observation.pods[0].containers[0].requests.cpu_millicores",
            ),
        ),
        (
            example,
            (
                "negative custom metric",
                |o| o["pods"][0]["custom_metrics"] = serde_json::json!({"qps": -1000.0}),
                "observation.pods[0].custom_metrics.qps",
            ),
        ),
        (example, ("negative io utilisation", |o| o["io_utilisation"] = (-2.0).into(), "io_utilisation")),
        (
            example,
            (
                "absurd cpu usage",
                |o| o["pods"][0]["cpu_usage_cores"] = 1e300.into(),
                "observation.pods[0].cpu_usage_cores",
            ),
        ),
        (
            example,
            ("duplicate pod", |o| o["pods"][1]["name"] = o["pods"][0]["name"].clone(), "observation.pods[1].name"),
        ),
        (example, ("negative arrival rate", |o| o["arrival_rate"] = (-1.0).into(), "arrival_rate")),
    ];
    for text in [example(), example_v2()] {
        let clean = parse_input(&text, "in.json");
        assert!(clean.is_ok(), "the examples themselves are accepted: {:?}", clean.err());
    }
    for (text, (what, change, field)) in cases {
        let mut doc: Value = serde_json::from_str(&text()).unwrap();
        change(&mut doc["observation"]);
        let err = match parse_input(&doc.to_string(), "in.json") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{what}: accepted"),
        };
        assert!(err.starts_with("in.json") && err.contains(field) && !err.contains('\n'), "{what}: {err}");
    }
}

/// A pod's `resources` and the template are sums over containers, one of which may have a
/// request and no limit: a summed request above the summed limit is a valid pod.
#[test]
fn summed_requests_above_summed_limits_are_a_valid_pod() {
    let mut doc: Value = serde_json::from_str(&example_v2()).unwrap();
    let pod = &mut doc["observation"]["pods"][0];
    // web: 1000 m requested, no limit; envoy: 100 m requested, 200 m limit.
    pod["containers"][0]["requests"]["cpu_millicores"] = 1000.into();
    pod["containers"][0]["limits"]["cpu_millicores"] = 0.into();
    pod["containers"][1]["limits"]["cpu_millicores"] = 200.into();
    pod["resources"]["requests"]["cpu_millicores"] = 1100.into();
    pod["resources"]["limits"]["cpu_millicores"] = 200.into();
    doc["observation"]["template"]["requests"]["cpu_millicores"] = 1100.into();
    doc["observation"]["template"]["limits"]["cpu_millicores"] = 200.into();
    let checked = parse_input(&doc.to_string(), "in.json");
    assert!(checked.is_ok(), "{:?}", checked.err());
}
