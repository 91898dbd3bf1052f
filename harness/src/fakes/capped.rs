//! Logs a node writes to by calling the fakes (its calls, IMDS requests, token reviews). A run keeps them while
//! it lasts and a node under test controls how fast they grow, so each source keeps its first entries up to a
//! cap and only counts the rest: a node in a retry storm costs the root process a bounded amount of memory, and
//! never another node its log. The count of what was cut goes into the report.
use std::collections::HashMap;
use std::hash::Hash;

/// What one source has logged: its first entries, and how many more it sent.
#[derive(Debug)]
struct Kept<T> {
    entries: Vec<T>,
    dropped: u64,
}

/// Entries by source (an instance, an address), at most `cap` kept for each.
#[derive(Debug)]
pub struct Capped<K, T> {
    by: HashMap<K, Kept<T>>,
    cap: usize,
}

impl<K: Eq + Hash, T: Clone> Capped<K, T> {
    pub fn new(cap: usize) -> Self {
        Self {
            by: HashMap::new(),
            cap,
        }
    }

    /// Logs `entry` for `source`, or counts it once `source` has `cap` entries.
    pub fn push(&mut self, source: K, entry: T) {
        let kept = self.by.entry(source).or_insert_with(|| Kept {
            entries: Vec::new(),
            dropped: 0,
        });
        if kept.entries.len() < self.cap {
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

impl<K: Eq + Hash, T: Clone> Default for Capped<K, T> {
    fn default() -> Self {
        Self::new(CAP)
    }
}

/// What a report or log says of `dropped` entries of `what` cut from a source (nothing when none were).
pub fn cut_note(dropped: u64, what: &str) -> Option<String> {
    (dropped > 0).then(|| format!("({dropped} more {what} past the first {CAP} were counted, not kept)"))
}

/// Entries kept per source: far more than any bootstrap makes (a node joins in tens of calls), few enough that a
/// storm costs megabytes.
pub const CAP: usize = 20_000;

#[cfg(test)]
mod tests {
    use super::*;

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
            Some("(7 more calls past the first 20000 were counted, not kept)")
        );
    }
}
