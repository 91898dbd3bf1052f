//! How Karpenter resolves an EC2NodeClass's `kubelet` for the instance type it launches, before writing it into
//! the NodeConfig, following aws/karpenter-provider-aws at 1d927085 (2026-08-21): `pkg/cel/environment.go` (the
//! variables, `min`/`max`, the result's type and rounding), `pkg/providers/instancetype/types.go` (`pods()`,
//! podsPerCore, the maxPods expression) and `pkg/providers/amifamily/resolver.go` (what reaches the user data).
//! With the `NodeClassCEL` feature gate, `maxPods` may be a CEL expression and a `kubeReserved`/`systemReserved`
//! value too; Karpenter evaluates them itself, so nodeadm gets numbers and quantities, never an expression.
use cel::{Context, Program, Value};
use serde_json::{Map, Value as Json};

/// What Karpenter knows about the instance type it launches (its CEL variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceFacts {
    pub instance_type: String,
    pub vcpus: u32,
    pub memory_mib: u32,
    pub default_enis: u32,
    pub ips_per_eni: u32,
    /// The ENI-limited pod count (`default_enis × (ips_per_eni − 1) + 2`).
    pub eni_max_pods: u32,
}

/// The reservation maps an expression may appear in.
const RESERVED: [&str; 2] = ["kubeReserved", "systemReserved"];

/// Whether `kubelet` holds an expression: a string `maxPods`, or a reserved value that is not a quantity.
pub fn has_expressions(kubelet: &Map<String, Json>) -> bool {
    kubelet.get("maxPods").is_some_and(Json::is_string)
        || RESERVED.iter().any(|r| {
            kubelet
                .get(*r)
                .and_then(Json::as_object)
                .is_some_and(|m| m.values().any(|v| v.as_str().is_some_and(|s| !is_quantity(s))))
        })
}

/// The kubelet map as Karpenter writes it for this instance type: `maxPods` set (a static value kept, else the pod
/// count or the expression's value, both capped by `podsPerCore × vcpus`), reserved expressions replaced by
/// quantities. A maxPods expression that fails is an error (Karpenter marks the node class not ready and launches
/// nothing); a reserved entry that fails or comes out negative is dropped, as Karpenter logs and drops it.
pub fn resolve(kubelet: &Map<String, Json>, facts: &InstanceFacts) -> Result<Map<String, Json>, String> {
    let mut out = kubelet.clone();
    let per_core = kubelet.get("podsPerCore").and_then(Json::as_u64).filter(|p| *p > 0);
    let cap = |count: i64| match per_core {
        Some(p) => count.min(p.saturating_mul(u64::from(facts.vcpus)).min(i64::MAX as u64) as i64),
        None => count,
    };
    let default_pods = cap(i64::from(facts.eni_max_pods));
    let max_pods = match kubelet.get("maxPods") {
        Some(Json::String(expr)) => {
            let v =
                evaluate(expr, facts, default_pods).map_err(|e| format!("karpenter.kubelet.maxPods `{expr}`: {e}"))?;
            if !(0..=i64::from(i32::MAX)).contains(&v) {
                return Err(format!(
                    "karpenter.kubelet.maxPods `{expr}` gives {v} for {}: Karpenter takes 0 to {} and launches \
                     nothing otherwise",
                    facts.instance_type,
                    i32::MAX
                ));
            }
            cap(v)
        }
        Some(other) => other.as_i64().unwrap_or(default_pods),
        None => default_pods,
    };
    if !matches!(kubelet.get("maxPods"), Some(Json::Number(_))) {
        out.insert("maxPods".into(), max_pods.into());
    }
    for key in RESERVED {
        let Some(Json::Object(map)) = kubelet.get(key) else {
            continue;
        };
        let mut resolved = Map::new();
        for (resource, value) in map {
            match value.as_str() {
                Some(s) if !is_quantity(s) => {
                    if let Some(q) = evaluate(s, facts, max_pods)
                        .ok()
                        .filter(|v| *v >= 0)
                        .and_then(|v| quantity(resource, v))
                    {
                        resolved.insert(resource.clone(), Json::String(q));
                    }
                }
                _ => {
                    resolved.insert(resource.clone(), value.clone());
                }
            }
        }
        out.insert(key.into(), Json::Object(resolved));
    }
    Ok(out)
}

/// Checks every expression compiles (what Karpenter's validation does before it launches anything).
pub fn check(kubelet: &Map<String, Json>) -> Result<(), String> {
    let mut exprs: Vec<(String, &str)> = Vec::new();
    if let Some(Json::String(e)) = kubelet.get("maxPods") {
        exprs.push(("maxPods".into(), e));
    }
    for key in RESERVED {
        for (resource, v) in kubelet.get(key).and_then(Json::as_object).into_iter().flatten() {
            if let Some(s) = v.as_str().filter(|s| !is_quantity(s)) {
                if quantity(resource, 0).is_none() {
                    return Err(format!(
                        "karpenter.kubelet.{key}.{resource}: Karpenter reserves cpu, memory, ephemeral-storage and \
                         pid only"
                    ));
                }
                exprs.push((format!("{key}.{resource}"), s));
            }
        }
    }
    for (field, e) in exprs {
        Program::compile(e).map_err(|err| format!("karpenter.kubelet.{field} `{e}` does not compile: {err}"))?;
    }
    Ok(())
}

/// An expression's value: an int, or a double truncated toward zero (±Inf and NaN refused).
fn evaluate(expr: &str, facts: &InstanceFacts, max_pods: i64) -> Result<i64, String> {
    let program = Program::compile(expr).map_err(|e| format!("does not compile: {e}"))?;
    let mut ctx = Context::default();
    ctx.add_variable_from_value("vcpus", i64::from(facts.vcpus));
    ctx.add_variable_from_value("memory_mib", i64::from(facts.memory_mib));
    ctx.add_variable_from_value("default_enis", i64::from(facts.default_enis));
    ctx.add_variable_from_value("ips_per_eni", i64::from(facts.ips_per_eni));
    ctx.add_variable_from_value("max_pods", max_pods);
    ctx.add_variable_from_value("instance_type", facts.instance_type.clone());
    ctx.add_function("min", |a: Value, b: Value| pick(a, b, std::cmp::Ordering::Less))
        .map_err(|e| e.to_string())?;
    ctx.add_function("max", |a: Value, b: Value| pick(a, b, std::cmp::Ordering::Greater))
        .map_err(|e| e.to_string())?;
    match program.execute(&ctx).map_err(|e| e.to_string())? {
        Value::Int(i) => Ok(i),
        Value::UInt(u) => i64::try_from(u).map_err(|_| format!("{u} is out of range")),
        Value::Float(f) if f.is_finite() => Ok(f as i64),
        Value::Float(f) => Err(format!("the result {f} is not a finite number")),
        other => Err(format!("expression must return int or double, not {other:?}")),
    }
}

/// Karpenter's two-argument `min`/`max`: int with int gives an int, a double on either side a double.
fn pick(a: Value, b: Value, want: std::cmp::Ordering) -> Result<Value, cel::ExecutionError> {
    let as_f64 = |v: &Value| match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Float(f) => Some(*f),
        _ => None,
    };
    match (&a, &b) {
        (Value::Int(x), Value::Int(y)) => Ok(Value::Int(if x.cmp(y) == want { *x } else { *y })),
        _ => match (as_f64(&a), as_f64(&b)) {
            (Some(x), Some(y)) => {
                let first = x.partial_cmp(&y) == Some(want);
                Ok(Value::Float(if first { x } else { y }))
            }
            _ => Err(cel::ExecutionError::function_error("min/max", "takes numbers")),
        },
    }
}

/// An expression's value as the quantity Karpenter writes: cpu in millicores rounded up to 10m, memory in MiB
/// rounded up to 16Mi, ephemeral storage in GiB, pids as a number; `None` for another resource.
fn quantity(resource: &str, v: i64) -> Option<String> {
    let up = |v: i64, to: i64| v.checked_add(to - 1).map(|s| s / to * to).unwrap_or(v);
    Some(match resource {
        "cpu" => format!("{}m", up(v, 10)),
        "memory" => format!("{}Mi", up(v, 16)),
        "ephemeral-storage" => format!("{v}Gi"),
        "pid" => v.to_string(),
        _ => return None,
    })
}

/// Whether `s` is a Kubernetes quantity (`100m`, `1Gi`, `1.5`, `2e3`): a value Karpenter keeps as given.
pub fn is_quantity(s: &str) -> bool {
    let s = s.trim();
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let suffixes = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E",
    ];
    let number = suffixes.iter().find_map(|x| body.strip_suffix(x)).unwrap_or(body);
    let (mantissa, exponent) = match number.split_once(['e', 'E']) {
        Some((m, e)) if !body.ends_with('E') => (m, Some(e)),
        _ => (number, None),
    };
    let digits = |d: &str| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some((a, b)) => (digits(a) || a.is_empty()) && (digits(b) || b.is_empty()) && !(a.is_empty() && b.is_empty()),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m5_large() -> InstanceFacts {
        InstanceFacts {
            instance_type: "m5.large".into(),
            vcpus: 2,
            memory_mib: 8192,
            default_enis: 3,
            ips_per_eni: 10,
            eni_max_pods: 29,
        }
    }

    fn kubelet(v: Json) -> Map<String, Json> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn karpenters_own_examples() {
        // pkg/cel/environment_test.go and launchtemplate/suite_test.go at 1d927085.
        let f = m5_large();
        assert_eq!(evaluate("((default_enis - 1) * (ips_per_eni - 1)) + 2", &f, 29), Ok(20));
        assert_eq!(
            evaluate("min(250, ((default_enis-1)*(ips_per_eni-1))*16+2)", &f, 29),
            Ok(250)
        );
        assert_eq!(
            evaluate("max(vcpus, 60.5)", &InstanceFacts { vcpus: 4, ..f.clone() }, 29),
            Ok(60)
        );
        assert!(evaluate("100.0 / 0.0", &f, 29).is_err());
        assert!(evaluate("'a'", &f, 29).unwrap_err().contains("int or double"));
        // cel-go refuses `int * double` when it compiles; the cel crate refuses it when it evaluates.
        assert!(evaluate("vcpus * 2.5", &f, 29).is_err());
        let r = resolve(
            &kubelet(json!({"maxPods": "min(110, 20 * 2)",
                "kubeReserved": {"cpu": "vcpus * 30", "memory": "memory_mib / 100"},
                "systemReserved": {"cpu": "70 + vcpus", "memory": "max_pods * 11", "ephemeral-storage": "1 + 1",
                    "pid": "max_pods * 10"}})),
            &f,
        )
        .unwrap();
        assert_eq!(r["maxPods"], json!(40));
        assert_eq!(r["kubeReserved"], json!({"cpu": "60m", "memory": "96Mi"}));
        // 440 is a multiple of 16 already; 72m rounds up to 80m.
        assert_eq!(
            r["systemReserved"],
            json!({"cpu": "80m", "memory": "448Mi", "ephemeral-storage": "2Gi", "pid": "400"})
        );
    }

    #[test]
    fn pods_per_core_caps_the_count_and_static_values_stay() {
        let f = m5_large();
        let r = resolve(&kubelet(json!({"podsPerCore": 4})), &f).unwrap();
        assert_eq!(r["maxPods"], json!(8), "min(4 × 2 vCPUs, 29)");
        let r = resolve(&kubelet(json!({"podsPerCore": 4, "maxPods": "max_pods + 100"})), &f).unwrap();
        assert_eq!(
            r["maxPods"],
            json!(8),
            "the expression sees 8 and its 108 is capped again"
        );
        let r = resolve(
            &kubelet(json!({"maxPods": 50, "kubeReserved": {"cpu": "100m", "memory": "-1 * vcpus"}})),
            &f,
        )
        .unwrap();
        assert_eq!(r["maxPods"], json!(50));
        assert_eq!(
            r["kubeReserved"],
            json!({"cpu": "100m"}),
            "a negative result is dropped"
        );
        let r = resolve(&kubelet(json!({})), &f).unwrap();
        assert_eq!(r["maxPods"], json!(29));
    }

    #[test]
    fn a_bad_max_pods_expression_launches_nothing() {
        let f = m5_large();
        let e = resolve(&kubelet(json!({"maxPods": "max_pods - 100"})), &f).unwrap_err();
        assert!(e.contains("gives -71"), "{e}");
        assert!(check(&kubelet(json!({"maxPods": "max_pods *"})))
            .unwrap_err()
            .contains("does not compile"));
        assert!(check(&kubelet(json!({"kubeReserved": {"gpu": "vcpus"}})))
            .unwrap_err()
            .contains("cpu, memory"));
        assert!(check(&kubelet(
            json!({"maxPods": "max_pods - 1", "kubeReserved": {"cpu": "vcpus * 30"}})
        ))
        .is_ok());
    }

    #[test]
    fn quantities_are_not_expressions() {
        for q in ["100m", "1Gi", "1.5", "2e3", ".5", "+3", "1E", "250Mi", "0"] {
            assert!(is_quantity(q), "{q}");
        }
        for e in [
            "vcpus * 30",
            "memory_mib / 100",
            "1 + 1",
            "max_pods*11",
            "",
            "Gi",
            "1.2.3",
        ] {
            assert!(!is_quantity(e), "{e}");
        }
        assert!(has_expressions(&kubelet(json!({"maxPods": "max_pods"}))));
        assert!(has_expressions(&kubelet(
            json!({"systemReserved": {"cpu": "vcpus * 30"}})
        )));
        assert!(!has_expressions(&kubelet(
            json!({"maxPods": 42, "kubeReserved": {"cpu": "80m"}})
        )));
    }
}
