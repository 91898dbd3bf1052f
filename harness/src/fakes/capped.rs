//! Logs a node writes to by calling the fakes (its calls, IMDS requests, token reviews). A run keeps them while
//! it lasts and a node under test controls how fast they grow, so each source keeps its first entries up to a
//! cap and only counts the rest: a node in a retry storm costs the root process a bounded amount of memory, and
//! never another node its log. The count of what was cut goes into the report.
use std::collections::HashMap;
use std::hash::Hash;

/// What an entry costs to keep: the bytes of what a node sent in it (its text fields), each field already cut
/// to its own bound ([`clip`]).
pub trait Weigh {
    fn weight(&self) -> usize;
}

/// What one source has logged: its first entries, and how many more it sent.
#[derive(Debug)]
struct Kept<T> {
    entries: Vec<T>,
    bytes: usize,
    dropped: u64,
}

/// Entries by source (an instance, an address), at most `cap` kept for each.
#[derive(Debug)]
pub struct Capped<K, T> {
    by: HashMap<K, Kept<T>>,
    cap: usize,
}

impl<K: Eq + Hash, T: Clone + Weigh> Capped<K, T> {
    pub fn new(cap: usize) -> Self {
        Self {
            by: HashMap::new(),
            cap,
        }
    }

    /// Logs `entry` for `source`, or counts it once `source` has `cap` entries or [`SOURCE_BYTES`] of them.
    pub fn push(&mut self, source: K, entry: T) {
        let kept = self.by.entry(source).or_insert_with(|| Kept {
            entries: Vec::new(),
            bytes: 0,
            dropped: 0,
        });
        let weight = entry.weight().saturating_add(ENTRY_OVERHEAD);
        if kept.entries.len() < self.cap && kept.bytes.saturating_add(weight) <= SOURCE_BYTES {
            kept.bytes += weight;
            kept.entries.push(entry);
        } else {
            kept.dropped += 1;
        }
    }

    /// `source`'s kept entries, oldest first.
    pub fn of(&self, source: &K) -> Vec<T> {
        self.by.get(source).map(|k| k.entries.clone()).unwrap_or_default()
    }

    /// How many of `source`'s entries were counted but not kept.
    pub fn dropped(&self, source: &K) -> u64 {
        self.by.get(source).map_or(0, |k| k.dropped)
    }

    /// Forgets `source` (its node is gone; an address may be given to the next node).
    pub fn forget(&mut self, source: &K) {
        self.by.remove(source);
    }

    /// Every kept entry, in no particular order of sources.
    pub fn all(&self) -> impl Iterator<Item = &T> {
        self.by.values().flat_map(|k| k.entries.iter())
    }
}

impl<K: Eq + Hash, T: Clone + Weigh> Default for Capped<K, T> {
    fn default() -> Self {
        Self::new(CAP)
    }
}

/// What a report or log says of `dropped` entries of `what` cut from a source (nothing when none were).
pub fn cut_note(dropped: u64, what: &str) -> Option<String> {
    (dropped > 0).then(|| {
        format!(
            "({dropped} more {what} past the first {CAP} or {} MiB were counted, not kept)",
            SOURCE_BYTES >> 20
        )
    })
}

/// Entries kept per source: far more than any bootstrap makes (a node joins in tens of calls), few enough that a
/// storm costs megabytes.
pub const CAP: usize = 20_000;

/// Bytes kept per source, entries' text and [`ENTRY_OVERHEAD`] each: a storm of long requests costs a few
/// megabytes too, not the sum of what was sent.
pub const SOURCE_BYTES: usize = 8 << 20;

/// What an entry costs besides its text (its times, address, status), counted against [`SOURCE_BYTES`].
const ENTRY_OVERHEAD: usize = 128;

/// The most of one node-sent text field a log keeps (a call's action, an IMDS path): far more than any real one.
pub const ENTRY_TEXT: usize = 256;

/// The most of a logged decision's reason kept (it may quote what the node sent: a token's parts, a CSR's names).
pub const REASON_TEXT: usize = 2 << 10;

/// `text` cut to at most `most` bytes (at a character boundary), saying how much was cut.
pub fn clip(text: &str, most: usize) -> String {
    if text.len() <= most {
        return text.to_string();
    }
    let mut end = most;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Weigh for i32 {
        fn weight(&self) -> usize {
            4
        }
    }

    impl Weigh for String {
        fn weight(&self) -> usize {
            self.len()
        }
    }

    #[test]
    fn each_source_keeps_its_first_entries_and_counts_the_rest() {
        let mut log = Capped::new(3);
        for i in 0..10 {
            log.push("storm", i);
        }
        log.push("quiet", 100);
        assert_eq!(log.of(&"storm"), vec![0, 1, 2]);
        assert_eq!(log.dropped(&"storm"), 7);
        assert_eq!(log.of(&"quiet"), vec![100], "a storm never cuts another source");
        assert_eq!(log.dropped(&"quiet"), 0);
        log.forget(&"storm");
        assert!(log.of(&"storm").is_empty());
        assert_eq!(log.all().count(), 1);
        assert_eq!(cut_note(0, "calls"), None);
        assert_eq!(
            cut_note(7, "calls").as_deref(),
            Some("(7 more calls past the first 20000 or 8 MiB were counted, not kept)")
        );
    }

    #[test]
    fn a_source_keeps_bytes_up_to_its_budget_and_counts_the_rest() {
        // A flood of long entries (each well under the count cap) stops being kept at the byte budget.
        let mut log = Capped::new(CAP);
        let long = "x".repeat(64 << 10);
        for _ in 0..1000 {
            log.push("flood", long.clone());
        }
        let kept = log.of(&"flood");
        let bytes: usize = kept.iter().map(|e| e.len() + ENTRY_OVERHEAD).sum();
        assert!(bytes <= SOURCE_BYTES, "{bytes}");
        assert!(kept.len() < 1000 && !kept.is_empty());
        assert_eq!(log.dropped(&"flood") as usize, 1000 - kept.len());
    }

    #[test]
    fn a_clipped_text_says_what_was_cut_and_stays_valid_utf8() {
        assert_eq!(clip("short", 256), "short");
        let cut = clip(&"é".repeat(200), 255);
        assert!(cut.ends_with("… (146 bytes cut)"), "{cut}");
        assert!(cut.len() < 300);
    }
}
