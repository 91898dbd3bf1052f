//! `--partition count:K/N` and `hash:K/N`, with nextest's meaning, so a CI matrix can shard `nodejoin run` and
//! `cargo nextest run --test scenarios` the same way: `hash` keeps a trial when xxh64 of its name (seed 0) modulo N
//! is K-1; `count` deals the trials out in turn, in name order, counting trials that run and ignored trials
//! apart (as nextest does within one test binary). Only trials the filter kept are dealt.
use std::fmt;
use std::str::FromStr;

/// A shard of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    pub kind: Kind,
    /// 1-based.
    pub shard: u64,
    pub total: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Count,
    Hash,
}

impl FromStr for Partition {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest, form) = if let Some(rest) = s.strip_prefix("count:") {
            (Kind::Count, rest, "count:K/N")
        } else if let Some(rest) = s.strip_prefix("hash:") {
            (Kind::Hash, rest, "hash:K/N")
        } else {
            return Err(format!(
                "partition '{s}' must begin with \"count:\" or \"hash:\" (count:K/N, hash:K/N)"
            ));
        };
        let bad = |why: String| format!("partition '{s}': {why} (expected {form})");
        let (k, n) = rest.split_once('/').ok_or_else(|| bad("no '/'".into()))?;
        let shard: u64 = k.parse().map_err(|_| bad(format!("shard '{k}' is not a number")))?;
        let total: u64 = n.parse().map_err(|_| bad(format!("total '{n}' is not a number")))?;
        if !(1..=total).contains(&shard) {
            return Err(bad(format!("shard {shard} is not between 1 and {total}")));
        }
        Ok(Self { kind, shard, total })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Count => "count",
            Kind::Hash => "hash",
        };
        write!(f, "{kind}:{}/{}", self.shard, self.total)
    }
}

impl Partition {
    /// Which of `trials` (name, ignored) this shard keeps, by index into `trials`.
    pub fn keeps(&self, trials: &[(&str, bool)]) -> Vec<bool> {
        let mut keep = vec![false; trials.len()];
        match self.kind {
            Kind::Hash => {
                for (i, (name, _)) in trials.iter().enumerate() {
                    keep[i] = xxhash_rust::xxh64::xxh64(name.as_bytes(), 0) % self.total == self.shard - 1;
                }
            }
            Kind::Count => {
                for ignored in [false, true] {
                    let mut order: Vec<usize> = (0..trials.len()).filter(|&i| trials[i].1 == ignored).collect();
                    order.sort_by(|&a, &b| trials[a].0.cmp(trials[b].0));
                    for (n, i) in order.into_iter().enumerate() {
                        keep[i] = n as u64 % self.total == self.shard - 1;
                    }
                }
            }
        }
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_nextest_does() {
        let p: Partition = "count:1/2".parse().unwrap();
        assert_eq!((p.kind, p.shard, p.total), (Kind::Count, 1, 2));
        assert_eq!("hash:3/3".parse::<Partition>().unwrap().to_string(), "hash:3/3");
        for bad in [
            "",
            "count",
            "count:",
            "count:1",
            "count:0/2",
            "count:3/2",
            "hash:a/2",
            "hash:1/b",
            "slice:1/2",
        ] {
            assert!(bad.parse::<Partition>().is_err(), "{bad} accepted");
        }
        assert!("hash:0/2".parse::<Partition>().unwrap_err().contains("between 1 and 2"));
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("local/v1.36/scenario-{i:02}")).collect()
    }

    /// Every trial in exactly one shard, for both kinds and several totals.
    #[test]
    fn shards_are_disjoint_and_cover_everything() {
        let names = names(23);
        let trials: Vec<(&str, bool)> = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i % 5 == 0))
            .collect();
        for kind in ["count", "hash"] {
            for total in 1..=4u64 {
                let mut seen = vec![0; trials.len()];
                for shard in 1..=total {
                    let p: Partition = format!("{kind}:{shard}/{total}").parse().unwrap();
                    for (i, k) in p.keeps(&trials).into_iter().enumerate() {
                        seen[i] += usize::from(k);
                    }
                }
                assert!(seen.iter().all(|&s| s == 1), "{kind} /{total}: {seen:?}");
            }
        }
    }

    /// `count` deals in name order, whatever order the trials come in, and ignored trials apart.
    #[test]
    fn count_deals_in_name_order_with_ignored_apart() {
        let trials = [("b", false), ("a", false), ("c", false), ("x", true), ("y", true)];
        let first: Partition = "count:1/2".parse().unwrap();
        assert_eq!(first.keeps(&trials), [false, true, true, true, false]);
    }

    /// `hash:K/N` is nextest's HashPartitioner: xxh64 of the trial name's bytes, seed 0, modulo N, is K-1. The
    /// shards below were computed apart from this crate (the xxh64 reference algorithm, in Python): another seed,
    /// hash or input (a name hashed through `Hash`, with its 0xff end) deals some of them elsewhere.
    #[test]
    fn hash_deals_each_name_where_nextest_does() {
        let known = [
            ("local/v1.36/basic-bootstrap-token", 3, 7),
            ("kind/v1.35/wrong-ca", 4, 7),
            ("k3s/v1.34/userdata-nodeadm-minimal", 2, 1),
            ("local/v1.36/al2023-terraform-mime", 3, 6),
            ("local/v1.36/scenario-00", 1, 1),
        ];
        for (name, of_4, of_7) in known {
            for (total, expected) in [(4, of_4), (7, of_7)] {
                let keeping: Vec<u64> = (1..=total)
                    .filter(|k| {
                        let p: Partition = format!("hash:{k}/{total}").parse().unwrap();
                        p.keeps(&[(name, false)])[0]
                    })
                    .collect();
                assert_eq!(keeping, [expected], "{name} in hash:K/{total}");
            }
        }
    }
}
