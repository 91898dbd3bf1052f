//! A text substitution applied to what a scenario feeds a node: how the mutation catalogue plants a deliberate
//! regression in generated user data. Never read from YAML.

/// Replace the one occurrence of `find` with `replace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextPatch {
    pub find: String,
    pub replace: String,
}

impl TextPatch {
    pub fn new(find: &str, replace: &str) -> Self {
        Self {
            find: find.into(),
            replace: replace.into(),
        }
    }

    /// `text` patched; an error when `find` occurs other than exactly once (a patch that silently did nothing,
    /// or did it in several places, would make its verdict meaningless).
    pub fn apply(&self, text: &str) -> Result<String, String> {
        match text.matches(&self.find).count() {
            1 => Ok(text.replacen(&self.find, &self.replace, 1)),
            0 => Err(format!("{:?} does not occur", self.find)),
            n => Err(format!("{:?} occurs {n} times (it must occur once)", self.find)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_exactly_once_or_says_why_not() {
        let p = TextPatch::new("--max-pods=29", "--max-pods=27");
        assert_eq!(p.apply("a --max-pods=29 b").unwrap(), "a --max-pods=27 b");
        assert!(p.apply("nothing").unwrap_err().contains("does not occur"));
        assert!(p
            .apply("--max-pods=29 --max-pods=29")
            .unwrap_err()
            .contains("occurs 2 times"));
    }
}
