//! Single-character mutations of the tokens recorded from every real client: each must be refused, and the
//! strategy is aimed so that most mutated tokens still parse and get as far as the signature comparison (a
//! mutation refused by the parser proves little about the verifier).
//!
//! The one family of changes that is accepted is asserted exactly, both ways: flipping the case of a hex letter in
//! a percent-escape of the query (`%2F` / `%2f`). Both decode to the same byte, so the request STS would check is
//! the same one, byte for byte (RFC 3986 §2.1 makes the two spellings equivalent).
use super::*;
use crate::aws::sigv4::tests::{golden_store, GOLDEN_KEY};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;
use std::collections::BTreeMap;

const CLUSTER: &str = "golden-cluster";

/// The parts of a presigned URL a mutation can land in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Scheme,
    Host,
    Path,
    /// `?`, `&`, `=`.
    Separator,
    ParamName,
    /// The values of Action and Version.
    Operation,
    Algorithm,
    /// The access key id in X-Amz-Credential.
    CredentialKey,
    /// Date, region, service and terminator of X-Amz-Credential.
    CredentialScope,
    Date,
    Expires,
    /// `host;x-k8s-aws-id`: what binds the token to a cluster.
    SignedHeaders,
    SecurityToken,
    Signature,
}

const PARTS: [Part; 14] = [
    Part::Scheme,
    Part::Host,
    Part::Path,
    Part::Separator,
    Part::ParamName,
    Part::Operation,
    Part::Algorithm,
    Part::CredentialKey,
    Part::CredentialScope,
    Part::Date,
    Part::Expires,
    Part::SignedHeaders,
    Part::SecurityToken,
    Part::Signature,
];

/// The parts whose mutations can pass the parser, so each must be seen reaching the signature comparison.
const SIGNED_PARTS: [Part; 5] = [
    Part::CredentialKey,
    Part::Date,
    Part::Expires,
    Part::SecurityToken,
    Part::Signature,
];

/// One real client's token, decoded, with the byte offsets of each part.
struct Golden {
    client: &'static str,
    url: String,
    date: SystemTime,
    parts: BTreeMap<Part, Vec<usize>>,
}

fn goldens() -> Vec<Golden> {
    REFERENCE_CLIENTS
        .iter()
        .map(|(client, token)| {
            let parsed = parse(token.trim()).unwrap_or_else(|e| panic!("{client}: {e}"));
            let parts = parts_of(&parsed.url);
            Golden {
                client,
                date: parsed.presigned.date,
                url: parsed.url,
                parts,
            }
        })
        .collect()
}

/// Labels every byte of `url` with its part.
fn parts_of(url: &str) -> BTreeMap<Part, Vec<usize>> {
    let mut out: BTreeMap<Part, Vec<usize>> = BTreeMap::new();
    let mut put = |part: Part, range: std::ops::Range<usize>| out.entry(part).or_default().extend(range);
    let host_start = "https://".len();
    let path_start = url[host_start..].find('/').map_or(url.len(), |i| host_start + i);
    let query_start = url.find('?').unwrap_or(url.len());
    put(Part::Scheme, 0..host_start);
    put(Part::Host, host_start..path_start);
    put(Part::Path, path_start..query_start);
    put(Part::Separator, query_start..query_start + 1);
    let mut at = query_start + 1;
    for pair in url[at..].split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        put(Part::ParamName, at..at + name.len());
        put(Part::Separator, at + name.len()..at + name.len() + 1);
        let v = at + name.len() + 1;
        let value_part = match name {
            "Action" | "Version" => Part::Operation,
            "X-Amz-Algorithm" => Part::Algorithm,
            "X-Amz-Credential" => {
                let key_len = value.find("%2F").unwrap_or(value.len());
                put(Part::CredentialKey, v..v + key_len);
                put(Part::CredentialScope, v + key_len..v + value.len());
                at += pair.len() + 1;
                if at <= url.len() {
                    put(Part::Separator, at - 1..at);
                }
                continue;
            }
            "X-Amz-Date" => Part::Date,
            "X-Amz-Expires" => Part::Expires,
            "X-Amz-SignedHeaders" => Part::SignedHeaders,
            "X-Amz-Security-Token" => Part::SecurityToken,
            "X-Amz-Signature" => Part::Signature,
            other => panic!("unexpected parameter {other} in a recorded token"),
        };
        put(value_part, v..v + value.len());
        at += pair.len() + 1;
        if at <= url.len() {
            put(Part::Separator, at - 1..at);
        }
    }
    out
}

/// What replaces the chosen byte.
#[derive(Debug, Clone)]
enum Replacement {
    /// A character of the same class (digit, hex letter, letter of the same case): what keeps a date, a
    /// signature or a key well-formed, so the token gets past the parser.
    SameClass(Index),
    /// Any character that may appear in a query.
    Plausible(Index),
    /// The same letter in the other case (hex digits of the signature, escapes, names).
    FlipCase,
    /// Anything, including bytes that are not UTF-8.
    Byte(u8),
    /// The character after the original in [`PLAUSIBLE`] (the first one for characters not in it).
    Next,
}

const PLAUSIBLE: &[u8] = b"0123456789abcdefABCDEFghijklmnopqrstuvwxyzGHIJKLMNOPQRSTUVWXYZ-_.~%+/=&;";

/// The characters of `c`'s class.
fn class_of(c: u8) -> &'static [u8] {
    match c {
        b'0'..=b'9' => b"0123456789",
        b'a'..=b'f' => b"abcdef",
        b'A'..=b'F' => b"ABCDEF",
        b'g'..=b'z' => b"ghijklmnopqrstuvwxyz",
        b'G'..=b'Z' => b"GHIJKLMNOPQRSTUVWXYZ",
        _ => PLAUSIBLE,
    }
}

/// The byte that replaces `old`; never `old` itself.
fn replacement(old: u8, r: &Replacement) -> u8 {
    let new = match r {
        Replacement::SameClass(i) => *i.get(class_of(old)),
        Replacement::Plausible(i) => *i.get(PLAUSIBLE),
        Replacement::FlipCase if old.is_ascii_alphabetic() => old ^ 0x20,
        Replacement::FlipCase => b'0',
        Replacement::Byte(b) => *b,
        Replacement::Next => old,
    };
    if new != old {
        return new;
    }
    // The next character of the class: a deterministic stand-in when the draw repeated the original.
    let class = class_of(old);
    match class.iter().position(|c| *c == old) {
        Some(at) => class[(at + 1) % class.len()],
        None => class[0],
    }
}

/// The one accepted change: the case of a hex letter in a percent-escape of the query.
fn is_escape_case_flip(url: &[u8], pos: usize, new: u8) -> bool {
    let in_query = url.iter().position(|c| *c == b'?').is_some_and(|q| pos > q);
    let escaped = (pos >= 1 && url[pos - 1] == b'%') || (pos >= 2 && url[pos - 2] == b'%');
    in_query && escaped && url[pos].is_ascii_alphabetic() && url[pos].is_ascii_hexdigit() && new == url[pos] ^ 0x20
}

/// How far a mutated token got.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// Refused before any key or signature was looked at.
    Unparsed,
    /// Refused by a check on the key, its session token or the time.
    Credentials(String),
    /// The signature was recomputed and did not match.
    SignatureMismatch,
    Accepted,
}

impl Verdict {
    fn reached_signature(&self) -> bool {
        matches!(self, Verdict::SignatureMismatch | Verdict::Accepted)
    }
}

fn reencode(url: &[u8]) -> String {
    format!(
        "{PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
    )
}

fn far() -> SystemTime {
    SystemTime::now() + Duration::from_secs(10 * 365 * 86400)
}

/// Verifies `url` twice: against the golden credentials at the golden token's time (what a forger faces), and
/// against a store and a clock that let every check but the signature pass (the key and session token the
/// mutated token names, with the golden secret; its own X-Amz-Date as now). The second verdict shows whether
/// the signature alone refuses the change.
fn judge(golden: &Golden, url: &[u8]) -> (Verdict, Verdict) {
    let Ok(token) = parse(&reencode(url)) else {
        return (Verdict::Unparsed, Verdict::Unparsed);
    };
    let verdict = |r: Result<Arc<IssuedCredentials>, Rejected>| match r {
        Ok(_) => Verdict::Accepted,
        Err(Rejected::SignatureMismatch { .. }) => Verdict::SignatureMismatch,
        Err(e) => Verdict::Credentials(e.to_string()),
    };
    let plain = verdict(verify(&token, CLUSTER, &golden_store(far()), golden.date));
    let store = golden_store(far());
    let mut lenient = (*store.lookup(GOLDEN_KEY).expect("the golden key")).clone();
    lenient.access_key_id = token.presigned.credential.access_key_id.clone();
    if let Some(t) = &token.presigned.security_token {
        lenient.session_token = t.clone();
    }
    store.insert(lenient);
    let signature_only = verdict(verify(
        &token,
        CLUSTER,
        &store,
        token.presigned.date + Duration::from_secs(1),
    ));
    (plain, signature_only)
}

/// Counts of what the mutations ran into, for the assertions on coverage and for the numbers in reports.
#[derive(Debug, Default)]
struct Tally {
    cases: usize,
    unparsed: usize,
    credentials: usize,
    reached_signature: usize,
    accepted: usize,
    reached_by_part: BTreeMap<Part, usize>,
}

impl Tally {
    fn record(&mut self, part: Part, plain: &Verdict, signature_only: &Verdict) {
        self.cases += 1;
        match plain {
            Verdict::Unparsed => self.unparsed += 1,
            Verdict::Accepted => self.accepted += 1,
            _ => {}
        }
        if matches!(signature_only, Verdict::Credentials(_)) {
            self.credentials += 1;
        }
        if signature_only.reached_signature() {
            self.reached_signature += 1;
            *self.reached_by_part.entry(part).or_default() += 1;
        }
    }
}

/// Checks one mutation: refused both ways unless it is an escape's case flip, which must pass both ways.
fn check(golden: &Golden, pos: usize, new: u8, tally: &mut Tally, part: Part) -> Result<(), TestCaseError> {
    let mut url = golden.url.clone().into_bytes();
    let neutral = is_escape_case_flip(&url, pos, new);
    url[pos] = new;
    let (plain, signature_only) = judge(golden, &url);
    tally.record(part, &plain, &signature_only);
    let shown = String::from_utf8_lossy(&url);
    if neutral {
        prop_assert_eq!(
            &plain,
            &Verdict::Accepted,
            "{}: case flip at {} refused: {}",
            golden.client,
            pos,
            shown
        );
        prop_assert_eq!(&signature_only, &Verdict::Accepted);
    } else {
        prop_assert_ne!(
            &plain,
            &Verdict::Accepted,
            "{}: byte {} -> {:?} accepted: {}",
            golden.client,
            pos,
            new as char,
            shown
        );
        prop_assert_ne!(
            &signature_only,
            &Verdict::Accepted,
            "{}: byte {} -> {:?} accepted: {}",
            golden.client,
            pos,
            new as char,
            shown
        );
        // Whatever gets past the parser with a lenient store and clock is refused by the signature itself.
        prop_assert!(
            !matches!(signature_only, Verdict::Credentials(_)),
            "{}: {:?} refused {} for another reason than the signature",
            golden.client,
            part,
            shown
        );
    }
    Ok(())
}

#[test]
fn unmutated_tokens_verify_in_both_setups() {
    for g in goldens() {
        let (plain, signature_only) = judge(&g, g.url.as_bytes());
        assert_eq!(
            (plain, signature_only),
            (Verdict::Accepted, Verdict::Accepted),
            "{}",
            g.client
        );
        let covered: usize = g.parts.values().map(Vec::len).sum();
        assert_eq!(covered, g.url.len(), "{}: every byte has a part", g.client);
        for p in PARTS {
            assert!(g.parts.get(&p).is_some_and(|v| !v.is_empty()), "{}: no {p:?}", g.client);
        }
    }
}

/// Random single-byte replacements, a part drawn first so short parts (the date, X-Amz-Expires) get as many
/// cases as the long ones (the session token), and mostly a replacement of the same class so the token parses.
#[test]
fn every_single_byte_replacement_of_a_real_token_is_refused() {
    let goldens = goldens();
    // Three cases in four go to the parts a mutation of which can pass the parser; the rest to any part.
    let part = prop_oneof![
        3 => proptest::sample::select(SIGNED_PARTS.to_vec()),
        1 => proptest::sample::select(PARTS.to_vec()),
    ];
    let strategy = (
        0..goldens.len(),
        part,
        any::<Index>(),
        prop_oneof![
            5 => any::<Index>().prop_map(Replacement::SameClass),
            1 => any::<Index>().prop_map(Replacement::Plausible),
            2 => Just(Replacement::FlipCase),
            1 => any::<u8>().prop_map(Replacement::Byte),
        ],
    );
    let tally = RefCell::new(Tally::default());
    let mut runner = TestRunner::new(Config {
        cases: 1500,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |(g, part, offset, r)| {
        let golden = &goldens[g];
        let positions = &golden.parts[&part];
        let pos = positions[offset.index(positions.len())];
        let new = replacement(golden.url.as_bytes()[pos], &r);
        check(golden, pos, new, &mut tally.borrow_mut(), part)
    });
    let t = tally.into_inner();
    println!("random replacements: {t:?}");
    if let Err(e) = result {
        panic!("{e}");
    }
    // The strategy is worth something only if most cases get to the signature comparison.
    assert!(t.reached_signature * 2 >= t.cases, "{t:?}");
    for p in SIGNED_PARTS {
        assert!(
            t.reached_by_part.get(&p).copied().unwrap_or(0) > 0,
            "no {p:?} case reached the signature: {t:?}"
        );
    }
}

/// Every byte of every real token, replaced by its neighbour in [`PLAUSIBLE`] and by its other case: no position
/// is left to chance.
#[test]
fn every_position_of_every_real_token_is_covered() {
    let mut t = Tally::default();
    for g in goldens() {
        for (&part, positions) in &g.parts {
            for &pos in positions {
                let old = g.url.as_bytes()[pos];
                let next = replacement(old, &Replacement::Next);
                for new in [replacement(old, &Replacement::FlipCase), next] {
                    if let Err(e) = check(&g, pos, new, &mut t, part) {
                        panic!("{e}");
                    }
                }
            }
        }
    }
    println!("every position: {t:?}");
    // Exactly the escapes' hex letters flip to an accepted token: %2F four times in the credential, %3B in the
    // signed headers, %2F %2B %3D %3D %3D in the session token (`2` and `3` have no case): 10 per token.
    assert_eq!(t.accepted, 3 * 10, "{t:?}");
    for p in SIGNED_PARTS {
        assert!(t.reached_by_part.get(&p).copied().unwrap_or(0) > 0, "{p:?}: {t:?}");
    }
}

/// The cluster name is not in the URL: it is the value of the signed `x-k8s-aws-id` header the verifier supplies.
/// Any one-character change of it, case included, is a signature mismatch.
#[test]
fn every_single_character_change_of_the_cluster_id_is_refused() {
    let goldens = goldens();
    let strategy = (0..goldens.len(), 0..CLUSTER.len(), 0x21u8..0x7f);
    let reached = RefCell::new(0usize);
    let mut runner = TestRunner::new(Config {
        cases: 300,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&strategy, |(g, pos, new)| {
        let golden = &goldens[g];
        let mut id = CLUSTER.as_bytes().to_vec();
        prop_assume!(id[pos] != new);
        id[pos] = new;
        let id = String::from_utf8(id).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let token = parse(&reencode(golden.url.as_bytes())).map_err(TestCaseError::fail)?;
        let r = verify(&token, &id, &golden_store(far()), golden.date);
        prop_assert_eq!(
            r.err(),
            Some(Rejected::SignatureMismatch { cluster: id.clone() }),
            "{}",
            golden.client
        );
        *reached.borrow_mut() += 1;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    println!("cluster id changes refused by the signature: {}", reached.borrow());
    assert!(*reached.borrow() >= 250);
}
