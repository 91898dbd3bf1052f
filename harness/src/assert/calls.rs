//! Checks on what a node called: an allowlist, an exact multiset, exact and maximum counts, and nothing of a kind
//! once the Node is Ready. Every violation lists the offending calls.
use super::Check;
use crate::fakes::calls::{glob, Call};
use crate::scenario::model::CallExpectation;
use std::time::Instant;

/// How many listed calls a failing check quotes.
const QUOTE: usize = 12;

fn quote(calls: &[&Call], since: Instant) -> String {
    let mut lines: Vec<String> = calls.iter().take(QUOTE).map(|c| c.line(since)).collect();
    if calls.len() > QUOTE {
        lines.push(format!("... and {} more", calls.len() - QUOTE));
    }
    lines.join("\n")
}

/// One line per distinct call with its count, most frequent first: the report's summary.
pub fn summary(calls: &[Call]) -> String {
    let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
    for c in calls {
        *counts.entry(c.key()).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut shown: Vec<String> = v.iter().take(SUMMARY_KINDS).map(|(k, n)| format!("{n}x {k}")).collect();
    if v.len() > SUMMARY_KINDS {
        let rest: usize = v[SUMMARY_KINDS..].iter().map(|(_, n)| n).sum();
        shown.push(format!(
            "{rest} more of {} other kinds (all in calls.log)",
            v.len() - SUMMARY_KINDS
        ));
    }
    shown.join(", ")
}

/// How many kinds of call a summary names (the most frequent); the node's calls.log has every one.
const SUMMARY_KINDS: usize = 5;

/// The checks of `want` on `calls` (in order); `since` is when the node booted, `ready_at` when it was Ready.
pub fn checks(
    node: &str,
    calls: &[Call],
    want: &CallExpectation,
    since: Instant,
    ready_at: Option<Instant>,
) -> Vec<Check> {
    let mut out = Vec::new();
    let matching = |p: &str| -> Vec<&Call> { calls.iter().filter(|c| glob(p, &c.key())).collect() };
    if !want.allow.is_empty() {
        let outside: Vec<&Call> = calls
            .iter()
            .filter(|c| !want.allow.iter().any(|p| glob(p, &c.key())))
            .collect();
        out.push(Check::new(
            super::registry::CALLS_ALLOWED.on(node),
            outside.is_empty(),
            format!("only {}", want.allow.join(", ")),
            if outside.is_empty() {
                format!("{} calls, all allowed", calls.len())
            } else {
                format!(
                    "{} calls outside the allowlist:\n{}",
                    outside.len(),
                    quote(&outside, since)
                )
            },
        ));
    }
    if !want.exactly.is_empty() {
        let mut wrong = Vec::new();
        for (p, n) in &want.exactly {
            let got = matching(p).len() as u32;
            if got != *n {
                wrong.push(format!("{p}: {got} (want {n})"));
            }
        }
        let uncovered: Vec<&Call> = calls
            .iter()
            .filter(|c| !want.exactly.keys().any(|p| glob(p, &c.key())))
            .collect();
        let passed = wrong.is_empty() && uncovered.is_empty();
        let mut actual = if passed {
            format!("{} calls: {}", calls.len(), summary(calls))
        } else {
            wrong.join("; ")
        };
        if !uncovered.is_empty() {
            actual.push_str(&format!("\nnot in the multiset:\n{}", quote(&uncovered, since)));
        }
        out.push(Check::new(
            super::registry::CALLS_EXACTLY.on(node),
            passed,
            want.exactly
                .iter()
                .map(|(p, n)| format!("{n}x {p}"))
                .collect::<Vec<_>>()
                .join(", "),
            actual,
        ));
    }
    for (p, n) in &want.count {
        let m = matching(p);
        out.push(Check::new(
            super::registry::CALLS.on_with(node, p),
            m.len() as u32 == *n,
            format!("exactly {n}"),
            if m.is_empty() {
                "none".to_string()
            } else {
                format!("{}:\n{}", m.len(), quote(&m, since))
            },
        ));
    }
    for (p, n) in &want.max {
        let m = matching(p);
        out.push(Check::new(
            super::registry::CALLS.on_with(node, format!("{p} at most {n}")),
            m.len() as u32 <= *n,
            format!("at most {n}"),
            if m.len() as u32 <= *n {
                format!("{}", m.len())
            } else {
                format!("{} (over budget):\n{}", m.len(), quote(&m, since))
            },
        ));
    }
    if !want.none_after_ready.is_empty() {
        let (passed, actual) = match ready_at {
            None => (false, "the Node never became Ready".to_string()),
            Some(r) => {
                let late: Vec<&Call> = calls
                    .iter()
                    .filter(|c| c.started > r && want.none_after_ready.iter().any(|p| glob(p, &c.key())))
                    .collect();
                (
                    late.is_empty(),
                    if late.is_empty() {
                        "none".to_string()
                    } else {
                        format!("{} after Ready:\n{}", late.len(), quote(&late, since))
                    },
                )
            }
        };
        out.push(Check::new(
            super::registry::NO_CALLS_AFTER_READY.on(node),
            passed,
            format!(
                "none of {} once Ready (watched for {} after Ready)",
                want.none_after_ready.join(", "),
                humantime::format_duration(want.after_ready_window)
            ),
            actual,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::time::{Duration, SystemTime};

    fn call(service: &'static str, action: &str, started: Instant) -> Call {
        Call {
            at: SystemTime::now(),
            started,
            service,
            action: action.into(),
            status: 200,
            latency: Duration::from_millis(1),
            source: "10.0.0.1".parse().unwrap(),
            instance_id: Some("i-1".into()),
            fault: None,
        }
    }

    fn calls(t0: Instant) -> Vec<Call> {
        vec![
            call("imds", "PUT /latest/api/token", t0),
            call("imds", "GET /latest/meta-data/mac", t0),
            call("imds", "GET /latest/meta-data/mac", t0),
            call("ec2", "DescribeInstances", t0 + Duration::from_secs(1)),
            call("eks", "DescribeCluster", t0 + Duration::from_secs(5)),
        ]
    }

    #[test]
    fn a_summary_names_the_five_most_frequent_kinds_and_counts_the_rest() {
        let t0 = Instant::now();
        let mut c = calls(t0);
        for path in ["a", "b", "c", "d"] {
            c.push(call("imds", &format!("GET /latest/meta-data/{path}"), t0));
        }
        assert_eq!(
            summary(&c),
            "2x imds GET /latest/meta-data/mac, 1x ec2 DescribeInstances, 1x eks DescribeCluster, \
             1x imds GET /latest/meta-data/a, 1x imds GET /latest/meta-data/b, \
             3 more of 3 other kinds (all in calls.log)"
        );
    }

    #[test]
    fn allowlist_and_multiset() {
        let t0 = Instant::now();
        let c = calls(t0);
        let want = CallExpectation {
            allow: vec!["imds *".into(), "ec2 *".into()],
            exactly: BTreeMap::from([
                ("imds PUT *".into(), 1),
                ("imds GET *".into(), 2),
                ("ec2 DescribeInstances".into(), 1),
            ]),
            ..Default::default()
        };
        let checks = checks("n", &c, &want, t0, None);
        assert_eq!(checks.len(), 2);
        assert!(!checks[0].passed, "DescribeCluster is not allowed");
        assert!(checks[0].actual.contains("eks DescribeCluster"), "{}", checks[0].actual);
        assert!(!checks[1].passed);
        assert!(checks[1].actual.contains("not in the multiset"), "{}", checks[1].actual);
        let mut ok = want.clone();
        ok.exactly.insert("eks DescribeCluster".into(), 1);
        ok.allow.push("eks DescribeCluster".into());
        assert!(checks_pass(&c, &ok, t0));
        ok.exactly.insert("imds GET *".into(), 3);
        assert!(!checks_pass(&c, &ok, t0), "a wrong count fails");
    }

    fn checks_pass(c: &[Call], want: &CallExpectation, t0: Instant) -> bool {
        checks("n", c, want, t0, None).iter().all(|x| x.passed)
    }

    #[test]
    fn counts_budgets_and_after_ready() {
        let t0 = Instant::now();
        let c = calls(t0);
        let want = CallExpectation {
            count: BTreeMap::from([("eks DescribeCluster".into(), 1)]),
            max: BTreeMap::from([("imds *".into(), 2)]),
            none_after_ready: vec!["eks *".into()],
            ..Default::default()
        };
        let got = checks("n", &c, &want, t0, Some(t0 + Duration::from_secs(2)));
        assert!(got[0].passed, "{:?}", got[0]);
        assert!(!got[1].passed, "3 IMDS calls exceed a budget of 2");
        assert!(got[1].actual.contains("over budget"));
        assert!(!got[2].passed, "DescribeCluster came after Ready");
        assert!(got[2].actual.contains("eks DescribeCluster"));
        let never = checks("n", &c, &want, t0, None);
        assert_eq!(never[2].actual, "the Node never became Ready");
        let later = checks("n", &c, &want, t0, Some(t0 + Duration::from_secs(10)));
        assert!(later[2].passed);
        assert_eq!(
            summary(&c),
            "2x imds GET /latest/meta-data/mac, 1x ec2 DescribeInstances, 1x eks DescribeCluster, 1x imds PUT /latest/api/token"
        );
    }
}
