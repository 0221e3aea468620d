//! The generated CRD against the manifests it must accept and the malformed ones it must reject,
//! validated with a standard JSON-Schema validator (no API server here).

use std::path::{Path, PathBuf};

use aware_kube::{
    MultidimPodAutoscaler, PROFILE_ANNOTATION, QUANTITY_PATTERN, crd, crd_yaml, json_schema_for_validation,
    open_api_v3_schema,
};
use serde_json::{Value, json};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn validator() -> jsonschema::Validator {
    let schema = json_schema_for_validation(&open_api_v3_schema());
    jsonschema::validator_for(&schema).expect("the translated schema is a valid JSON Schema")
}

/// Errors as `instance path: message`, empty when valid.
fn errors(v: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    v.iter_errors(doc).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn mpa_manifests() -> Vec<(PathBuf, Value)> {
    let mut files = Vec::new();
    for dir in [root().join("deploy"), root().join("deploy/examples"), root().join("crates/kube/tests/upstream")] {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for path in files {
        for doc in yaml_docs(&path) {
            if doc["kind"] == "MultidimPodAutoscaler" {
                out.push((path.clone(), doc));
            }
        }
    }
    out
}

#[test]
fn every_manifest_in_deploy_and_upstream_validates_and_parses() {
    let v = validator();
    let manifests = mpa_manifests();
    let names: Vec<String> =
        manifests.iter().map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert!(names.contains(&"hamster-mpa.yaml".to_string()), "upstream example missing: {names:?}");
    assert!(manifests.len() >= 3, "{names:?}");
    for (path, doc) in &manifests {
        let errs = errors(&v, doc);
        assert!(errs.is_empty(), "{}: {errs:?}", path.display());
        let mpa: MultidimPodAutoscaler =
            serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // The profile annotation, where present, is a valid AWARE profile.
        mpa.profile().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

#[test]
fn deploy_crd_yaml_is_the_generated_one() {
    let path = root().join("deploy/crd.yaml");
    if std::env::var("AWARE_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, crd_yaml()).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        on_disk,
        crd_yaml(),
        "deploy/crd.yaml is stale: regenerate it with `aware crd > deploy/crd.yaml` (or AWARE_BLESS=1 cargo test -p aware-kube --test crd_schema)"
    );
}

#[test]
fn crd_names_and_subresources_match_upstream() {
    let crd = serde_json::to_value(crd()).unwrap();
    assert_eq!(crd["metadata"]["name"], "multidimpodautoscalers.autoscaling.k8s.io");
    assert_eq!(crd["spec"]["group"], "autoscaling.k8s.io");
    assert_eq!(crd["spec"]["names"]["kind"], "MultidimPodAutoscaler");
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["mpa"]));
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert_eq!(version["subresources"]["status"], json!({}));
}

#[test]
fn schema_enumerates_update_mode_and_types_replicas_and_quantities_as_upstream() {
    let s = open_api_v3_schema();
    let spec = &s["properties"]["spec"]["properties"];
    // Upstream's modes in upstream's order; kube also admits `null` for the optional field.
    let modes: Vec<&Value> = spec["policy"]["properties"]["updateMode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| !m.is_null())
        .collect();
    assert_eq!(
        modes,
        [&json!("Off"), &json!("Initial"), &json!("Recreate"), &json!("InPlaceOrRecreate"), &json!("Auto")]
    );
    let global = &spec["constraints"]["properties"]["global"]["properties"];
    assert_eq!(global["minReplicas"]["type"], "integer");
    assert_eq!(global["maxReplicas"]["type"], "integer");
    let min_allowed = &spec["resourcePolicy"]["properties"]["containerPolicies"]["items"]["properties"]["minAllowed"];
    let quantity = &min_allowed["additionalProperties"];
    assert_eq!(quantity["x-kubernetes-int-or-string"], true);
    assert_eq!(quantity["anyOf"], json!([{"type": "integer"}, {"type": "string"}]));
    // Quantities inside embedded autoscaling/v2 types get the same treatment.
    let metric_target =
        &spec["goals"]["properties"]["metrics"]["items"]["properties"]["resource"]["properties"]["target"];
    assert_eq!(metric_target["properties"]["averageValue"]["x-kubernetes-int-or-string"], true);
    assert_eq!(metric_target["properties"]["averageValue"]["pattern"], QUANTITY_PATTERN);
}

/// Every int-or-string node is a quantity with upstream's schema: typed alternatives and the
/// quantity pattern (kube's structural rewrite must not leave `anyOf: [{}, {}]` behind).
#[test]
fn every_int_or_string_node_is_a_typed_quantity() {
    fn walk(node: &Value, path: String, bad: &mut Vec<String>, seen: &mut usize) {
        match node {
            Value::Object(map) => {
                if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                    *seen += 1;
                    if map.get("anyOf") != Some(&json!([{"type": "integer"}, {"type": "string"}]))
                        || map.get("pattern").and_then(Value::as_str) != Some(QUANTITY_PATTERN)
                    {
                        bad.push(path.clone());
                    }
                }
                for (k, v) in map {
                    walk(v, format!("{path}.{k}"), bad, seen);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, format!("{path}[{i}]"), bad, seen);
                }
            }
            _ => {}
        }
    }
    let (mut bad, mut seen) = (Vec::new(), 0);
    walk(&open_api_v3_schema(), String::new(), &mut bad, &mut seen);
    assert!(seen >= 10, "only {seen} int-or-string nodes: the schema lost its quantities");
    assert!(bad.is_empty(), "int-or-string nodes without the quantity schema: {bad:?}");
}

/// Every property path upstream's generated CRD defines exists in ours (spec and status).
#[test]
fn every_upstream_field_exists_in_the_generated_schema() {
    let upstream = yaml_docs(&root().join("crates/kube/tests/upstream/mpa-v1alpha1-crd.yaml")).remove(0);
    let theirs = &upstream["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let ours = open_api_v3_schema();
    let mut missing = Vec::new();
    fn walk(theirs: &Value, ours: &Value, path: String, missing: &mut Vec<String>) {
        if let Some(props) = theirs["properties"].as_object() {
            for (k, sub) in props {
                let p = format!("{path}.{k}");
                match ours["properties"].get(k) {
                    Some(o) => walk(sub, o, p, missing),
                    None => missing.push(p),
                }
            }
        }
        if theirs.get("items").is_some() {
            walk(&theirs["items"], &ours["items"], format!("{path}[]"), missing);
        }
        if theirs["additionalProperties"].is_object() {
            walk(&theirs["additionalProperties"], &ours["additionalProperties"], format!("{path}{{}}"), missing);
        }
    }
    walk(&theirs["properties"]["spec"], &ours["properties"]["spec"], "spec".into(), &mut missing);
    walk(&theirs["properties"]["status"], &ours["properties"]["status"], "status".into(), &mut missing);
    assert!(missing.is_empty(), "fields upstream has and we lack: {missing:?}");
    // And upstream's update modes are a subset of ours.
    let theirs_modes =
        theirs["properties"]["spec"]["properties"]["policy"]["properties"]["updateMode"]["enum"].as_array().unwrap();
    let ours_modes =
        ours["properties"]["spec"]["properties"]["policy"]["properties"]["updateMode"]["enum"].as_array().unwrap();
    for m in theirs_modes {
        assert!(ours_modes.contains(m), "{m} missing");
    }
}

fn hamster() -> Value {
    let mut docs = yaml_docs(&root().join("crates/kube/tests/upstream/hamster-mpa.yaml"));
    docs.remove(0)
}

/// Applies `edit` to the upstream example and returns the validator's errors.
fn rejected(edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut doc = hamster();
    edit(&mut doc);
    errors(&validator(), &doc)
}

fn assert_rejected_at(errs: &[String], path: &str) {
    assert!(errs.iter().any(|e| e.starts_with(path)), "expected an error at {path}, got {errs:?}");
}

#[test]
fn malformed_manifests_are_rejected_with_the_field_named() {
    let errs = rejected(|d| d["spec"]["policy"] = json!({"updateMode": "Sometimes"}));
    assert_rejected_at(&errs, "/spec/policy/updateMode");

    let errs = rejected(|d| d["spec"]["constraints"]["global"]["maxReplicas"] = json!("ten"));
    assert_rejected_at(&errs, "/spec/constraints/global/maxReplicas");

    let errs = rejected(|d| d["spec"]["constraints"]["global"]["maxReplicas"] = json!(2.5));
    assert_rejected_at(&errs, "/spec/constraints/global/maxReplicas");

    let errs = rejected(|d| d["spec"]["constraints"]["global"]["minReplicas"] = json!(1u64 << 40));
    assert_rejected_at(&errs, "/spec/constraints/global/minReplicas");

    let errs = rejected(|d| d["spec"]["resourcePolicy"]["containerPolicies"][0]["minAllowed"]["cpu"] = json!("lots"));
    assert_rejected_at(&errs, "/spec/resourcePolicy/containerPolicies/0/minAllowed/cpu");

    let errs = rejected(|d| d["spec"]["resourcePolicy"]["containerPolicies"][0]["maxAllowed"]["memory"] = json!(true));
    assert_rejected_at(&errs, "/spec/resourcePolicy/containerPolicies/0/maxAllowed/memory");

    let errs = rejected(|d| {
        d["spec"].as_object_mut().unwrap().remove("scaleTargetRef");
    });
    assert!(errs.iter().any(|e| e.contains("scaleTargetRef")), "{errs:?}");

    // The README's outdated layout: an unknown field under strict validation.
    let errs = rejected(|d| d["spec"]["constraints"]["minReplicas"] = json!(1));
    assert!(errs.iter().any(|e| e.starts_with("/spec/constraints") && e.contains("minReplicas")), "{errs:?}");

    let errs = rejected(|d| d["spec"]["recommenders"] = json!([{"name": "a"}, {"name": "b"}]));
    assert_rejected_at(&errs, "/spec/recommenders");

    let errs =
        rejected(|d| d["spec"]["goals"]["metrics"][0]["resource"]["target"]["averageUtilization"] = json!("30%"));
    assert_rejected_at(&errs, "/spec/goals/metrics/0/resource/target/averageUtilization");

    // Integers and quantity strings are both fine where upstream takes int-or-string.
    assert!(
        rejected(|d| d["spec"]["resourcePolicy"]["containerPolicies"][0]["maxAllowed"]["cpu"] = json!(2)).is_empty()
    );
    assert!(
        rejected(|d| d["spec"]["resourcePolicy"]["containerPolicies"][0]["maxAllowed"]["cpu"] = json!("1500m"))
            .is_empty()
    );
}

#[test]
fn serde_rejects_a_bad_update_mode_naming_the_field() {
    let mut doc = hamster();
    doc["spec"]["policy"] = json!({"updateMode": "Sometimes"});
    let err = serde_path_to_error::deserialize::<_, MultidimPodAutoscaler>(doc).unwrap_err();
    assert_eq!(err.path().to_string(), "spec.policy.updateMode");
}

#[test]
fn profile_annotation_errors_name_the_object_and_field() {
    let mut doc = hamster();
    doc["metadata"]["annotations"] = json!({PROFILE_ANNOTATION: "reward:\n  alpha: 7\n"});
    let mpa: MultidimPodAutoscaler = serde_json::from_value(doc).unwrap();
    let err = mpa.profile().unwrap_err().to_string();
    assert!(err.contains("default/hamster-mpa") && err.contains("reward.alpha"), "{err}");
    // Replica bounds come from constraints.global.
    let ok: MultidimPodAutoscaler = serde_json::from_value(hamster()).unwrap();
    let p = ok.profile().unwrap();
    assert_eq!((p.bounds.min_replicas, p.bounds.max_replicas), (1, 6));
}

/// The example ConfigMap's backend configuration is one `aware controller --prometheus` reads.
#[test]
fn the_example_prometheus_configuration_parses() {
    let path = root().join("deploy/examples/prometheus-config.yaml");
    let docs = yaml_docs(&path);
    let text = docs[0]["data"]["prometheus.yaml"].as_str().expect("data.prometheus.yaml");
    let config =
        aware_kube::PrometheusConfig::parse(text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.apps.is_empty() && config.url.starts_with("http://"));
}
