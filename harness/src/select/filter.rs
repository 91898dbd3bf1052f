//! Filter expressions on trials, after nextest's filtersets (`-E`): `test(basic)`, `tag(al2023) & !provider(kind)`,
//! `scenario(#al2023-*) | file(#ci/**)`. A predicate's argument is a matcher: `=exact`, `~contains`, `/regex/`
//! or `#glob`; without a prefix each predicate has nextest's default for its kind (contains for names, glob for
//! scenarios and files, exact for tags, providers and versions). Operators: `|` `or` `+`, `&` `and`, `-`
//! (and not), `!` `not`, parentheses; `all()` and `none()`.
use std::fmt;

/// What a filter is matched against: one trial.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    /// `provider/v1.MINOR/scenario`, as cargo and nextest list it.
    pub name: &'a str,
    pub scenario: &'a str,
    /// The scenario file, relative to the working directory when it is under it.
    pub file: &'a str,
    pub provider: &'a str,
    /// The trial's Kubernetes version (`v1.36.3`); `version(v1.36)` matches its minor too.
    pub version: &'a str,
    pub tags: &'a [String],
}

/// A parsed filter expression.
#[derive(Debug, Clone)]
pub struct Filter {
    text: String,
    expr: Expr,
}

#[derive(Debug, Clone)]
enum Expr {
    All,
    None,
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Pred(Field, Matcher),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Test,
    Scenario,
    File,
    Tag,
    Provider,
    Version,
}

#[derive(Debug, Clone)]
enum Matcher {
    Equal(String),
    Contains(String),
    Regex(regex::Regex),
    Glob(globset::GlobMatcher),
}

impl Matcher {
    fn matches(&self, s: &str) -> bool {
        match self {
            Matcher::Equal(x) => s == x,
            Matcher::Contains(x) => s.contains(x.as_str()),
            Matcher::Regex(r) => r.is_match(s),
            Matcher::Glob(g) => g.is_match(s),
        }
    }
}

impl Field {
    fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "test" | "name" => Field::Test,
            "scenario" => Field::Scenario,
            "file" => Field::File,
            "tag" => Field::Tag,
            "provider" => Field::Provider,
            "version" => Field::Version,
            _ => return None,
        })
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for Filter {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let mut p = Parser { text, at: 0 };
        let expr = p.or()?;
        p.skip_space();
        if p.at < text.len() {
            return Err(p.error("unexpected text"));
        }
        Ok(Self {
            text: text.to_string(),
            expr,
        })
    }
}

impl Filter {
    pub fn matches(&self, c: &Candidate) -> bool {
        eval(&self.expr, c)
    }
}

fn eval(e: &Expr, c: &Candidate) -> bool {
    match e {
        Expr::All => true,
        Expr::None => false,
        Expr::Not(x) => !eval(x, c),
        Expr::And(a, b) => eval(a, c) && eval(b, c),
        Expr::Or(a, b) => eval(a, c) || eval(b, c),
        Expr::Pred(field, m) => match field {
            Field::Test => m.matches(c.name),
            Field::Scenario => m.matches(c.scenario),
            Field::File => m.matches(c.file),
            Field::Tag => c.tags.iter().any(|t| m.matches(t)),
            Field::Provider => m.matches(c.provider),
            Field::Version => m.matches(c.version) || m.matches(&crate::run::trials::minor(c.version)),
        },
    }
}

struct Parser<'a> {
    text: &'a str,
    at: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn error(&self, what: &str) -> String {
        format!(
            "filter '{}': {what} at column {} (e.g. test(basic) & tag(al2023), !provider(kind), scenario(#al2023-*))",
            self.text,
            self.at + 1
        )
    }

    /// Consumes `op` (a symbol, or a word followed by a space or parenthesis).
    fn eat(&mut self, ops: &[&str]) -> bool {
        self.skip_space();
        for op in ops {
            if let Some(after) = self.rest().strip_prefix(op) {
                let word = op.chars().all(|c| c.is_ascii_alphabetic());
                if !word || after.starts_with([' ', '(', '\t']) {
                    self.at += op.len();
                    return true;
                }
            }
        }
        false
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.eat(&["|", "+", "or"]) {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.not()?;
        loop {
            if self.eat(&["&", "and"]) {
                left = Expr::And(Box::new(left), Box::new(self.not()?));
            } else if self.eat(&["-"]) {
                left = Expr::And(Box::new(left), Box::new(Expr::Not(Box::new(self.not()?))));
            } else {
                return Ok(left);
            }
        }
    }

    fn not(&mut self) -> Result<Expr, String> {
        if self.eat(&["!", "not"]) {
            return Ok(Expr::Not(Box::new(self.not()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, String> {
        self.skip_space();
        if self.eat(&["("]) {
            let e = self.or()?;
            if !self.eat(&[")"]) {
                return Err(self.error("')' expected"));
            }
            return Ok(e);
        }
        let word: String = self.rest().chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        if word.is_empty() {
            return Err(self.error("a predicate expected"));
        }
        let start = self.at;
        self.at += word.len();
        self.skip_space();
        if !self.rest().starts_with('(') {
            self.at = start;
            return Err(self.error(&format!("'(' expected after '{word}'")));
        }
        self.at += 1;
        if !matches!(word.as_str(), "all" | "none") && Field::parse(&word).is_none() {
            self.at = start;
            return Err(self.error(&format!(
                "unknown predicate '{word}' (known: test, scenario, file, tag, provider, version, all, none)"
            )));
        }
        let arg = self.argument()?;
        match word.as_str() {
            "all" | "none" if arg.trim().is_empty() => Ok(if word == "all" { Expr::All } else { Expr::None }),
            _ => {
                let field = Field::parse(&word).ok_or_else(|| {
                    self.error(&format!(
                        "unknown predicate '{word}' (known: test, scenario, file, tag, provider, version, all, none)"
                    ))
                })?;
                Ok(Expr::Pred(field, self.matcher(field, arg.trim())?))
            }
        }
    }

    /// The text up to the closing parenthesis (a `/regex/` may hold one).
    fn argument(&mut self) -> Result<String, String> {
        let rest = self.rest();
        let trimmed = rest.trim_start();
        let end = if let Some(body) = trimmed.strip_prefix('/') {
            let lead = rest.len() - trimmed.len() + 1;
            let mut escaped = false;
            let close = body.char_indices().find(|&(_, c)| {
                let hit = c == '/' && !escaped;
                escaped = c == '\\' && !escaped;
                hit
            });
            let close = close.ok_or_else(|| self.error("unterminated /regex/"))?.0;
            let after = lead + close + 1;
            rest[after..].find(')').map(|i| after + i)
        } else {
            rest.find(')')
        };
        let end = end.ok_or_else(|| self.error("')' expected"))?;
        let arg = rest[..end].to_string();
        self.at += end + 1;
        Ok(arg)
    }

    fn matcher(&self, field: Field, arg: &str) -> Result<Matcher, String> {
        let glob = |g: &str| {
            globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .map(|g| Matcher::Glob(g.compile_matcher()))
                .map_err(|e| self.error(&format!("bad glob '{g}': {e}")))
        };
        if let Some(x) = arg.strip_prefix('=') {
            return Ok(Matcher::Equal(x.into()));
        }
        if let Some(x) = arg.strip_prefix('~') {
            return Ok(Matcher::Contains(x.into()));
        }
        if let Some(x) = arg.strip_prefix('#') {
            return glob(x);
        }
        if let Some(x) = arg.strip_prefix('/').and_then(|x| x.strip_suffix('/')) {
            return regex::Regex::new(x)
                .map(Matcher::Regex)
                .map_err(|e| self.error(&format!("bad regex /{x}/: {e}")));
        }
        if arg.is_empty() {
            return Err(self.error("an empty argument"));
        }
        match field {
            Field::Test => Ok(Matcher::Contains(arg.into())),
            Field::Scenario | Field::File => glob(arg),
            Field::Tag | Field::Provider | Field::Version => Ok(Matcher::Equal(arg.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate<'a>(name: &'a str, scenario: &'a str, tags: &'a [String]) -> Candidate<'a> {
        Candidate {
            name,
            scenario,
            file: "nodejoin/scenarios/al2023/x.yaml",
            provider: name.split('/').next().unwrap_or_default(),
            version: "v1.36.3",
            tags,
        }
    }

    fn matches(expr: &str, c: &Candidate) -> bool {
        expr.parse::<Filter>().unwrap_or_else(|e| panic!("{e}")).matches(c)
    }

    #[test]
    fn predicates_use_nextest_default_matchers() {
        let tags = vec!["al2023".to_string(), "karpenter".to_string()];
        let c = candidate("local/v1.36/al2023-karpenter", "al2023-karpenter", &tags);
        assert!(matches("test(karpenter)", &c), "contains by default");
        assert!(matches("test(=local/v1.36/al2023-karpenter)", &c));
        assert!(!matches("test(=karpenter)", &c));
        assert!(
            matches("test(/^local\\/v1\\.3[56]\\//)", &c),
            "a regex may hold '/' and ')'"
        );
        assert!(matches("scenario(al2023-*)", &c), "glob by default");
        assert!(!matches("scenario(al2023)", &c));
        assert!(matches("file(nodejoin/scenarios/**)", &c));
        assert!(!matches("file(nodejoin/*.yaml)", &c), "* does not cross /");
        assert!(matches("tag(al2023)", &c) && !matches("tag(al2)", &c), "tags are exact");
        assert!(matches("tag(#al*)", &c));
        assert!(matches("provider(local)", &c) && !matches("provider(kind)", &c));
        assert!(matches("version(v1.36)", &c) && matches("version(v1.36.3)", &c) && !matches("version(v1.3)", &c));
    }

    #[test]
    fn operators_combine_as_in_nextest() {
        let tags = vec!["al2023".to_string()];
        let c = candidate("kind/v1.36/basic", "basic", &tags);
        assert!(matches("tag(al2023) & provider(kind)", &c));
        assert!(matches("tag(al2023) and not provider(local)", &c));
        assert!(!matches("tag(al2023) - provider(kind)", &c));
        assert!(matches("provider(local) | test(basic)", &c));
        assert!(matches("provider(local) or test(basic)", &c));
        assert!(matches("provider(local) + test(basic)", &c));
        assert!(!matches("!(provider(local) | test(basic))", &c));
        assert!(matches("all()", &c) && !matches("none()", &c));
        // & binds tighter than |.
        assert!(matches("test(basic) | provider(local) & none()", &c));
    }

    #[test]
    fn bad_expressions_say_where_and_what() {
        for (bad, says) in [
            ("test(basic", "')' expected"),
            ("labels(x)", "unknown predicate 'labels'"),
            ("test(basic) &", "a predicate expected"),
            ("test basic", "'(' expected after 'test'"),
            ("test(/[/)", "bad regex"),
            ("test(a) test(b)", "unexpected text"),
            ("tag()", "an empty argument"),
        ] {
            let e = bad.parse::<Filter>().unwrap_err();
            assert!(e.contains(says) && e.contains("column"), "{bad}: {e}");
        }
    }
}
