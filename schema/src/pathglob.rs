//! Path globs of `dev.watch`: which files of a server's source tree are
//! watched (VS Code's and mcp-hub's `dev.watch`).
//!
//! A glob is a path relative to `dev.cwd`, `/`-separated, matched segment
//! by segment:
//! - `*` any run of characters within a segment, `?` one character,
//!   `[abc]` / `[a-z]` / `[!a-z]` (or `[^a-z]`) one character of a class;
//! - `**` as a whole segment: any number of segments, none included;
//! - `{a,b}` alternatives (nested braces too); `\` escapes the next
//!   character.
//!
//! So `*.py` is the Python files of `dev.cwd` itself and `src/**/*.py` those
//! anywhere under `src`. A glob whose last segment has no wildcard names a
//! file or a directory, and a directory stands for everything under it
//! (`src` watches all of `src`).
//!
//! [`DEFAULT_IGNORED`] are directories never looked into unless a glob
//! names them in a segment of its own (`vendor/node_modules/x/**`): what
//! package managers, version control and builds write is not source.
//!
//! Pure: nothing here touches the file system.

use std::fmt;

/// Directory names never watched unless a glob names them: dependencies,
/// version control, and the usual build and cache outputs.
pub const DEFAULT_IGNORED: [&str; 13] = [
    "node_modules",
    ".git",
    "target",
    "dist",
    "build",
    "out",
    "__pycache__",
    ".venv",
    "venv",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
];

/// Why a glob cannot be used (reads after "invalid glob: ").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("the glob is empty")]
    Empty,
    #[error("\"{0}\" is absolute; a glob is relative to dev.cwd (set dev.cwd to its directory)")]
    Absolute(String),
    #[error(
        "\"{0}\" leaves dev.cwd with `..`; a glob is relative to dev.cwd (set dev.cwd to a directory above)"
    )]
    Parent(String),
    #[error("\"{0}\" has an unclosed `[`")]
    UnclosedClass(String),
    #[error("\"{0}\" has an unclosed `{{`")]
    UnclosedBrace(String),
    #[error("\"{0}\" has an unmatched `}}`")]
    UnmatchedBrace(String),
    #[error("\"{0}\" ends with a lone `\\`")]
    TrailingEscape(String),
    #[error("\"{0}\" has `**` inside a segment; write it as a segment of its own (`src/**/x`)")]
    StarStarInSegment(String),
    #[error("\"{0}\" expands to more than 64 alternatives")]
    TooManyAlternatives(String),
}

/// Bound on the alternatives a glob's braces expand to.
const MAX_ALTERNATIVES: usize = 64;

/// One parsed glob (see the module docs).
#[derive(Clone, PartialEq, Eq)]
pub struct PathGlob {
    text: String,
    /// Brace alternatives, each a list of segments.
    alternatives: Vec<Vec<Segment>>,
}

impl fmt::Debug for PathGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PathGlob({:?})", self.text)
    }
}

impl fmt::Display for PathGlob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: any number of segments.
    Any,
    /// A segment without wildcards.
    Literal(String),
    /// A segment with `*`, `?` or classes.
    Pattern(Vec<Tok>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Char(char),
    /// `?`
    One,
    /// `*`
    Star,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl PathGlob {
    /// Parses `text` (see the module docs).
    pub fn parse(text: &str) -> Result<PathGlob, GlobError> {
        let own = || text.to_owned();
        if text.trim().is_empty() {
            return Err(GlobError::Empty);
        }
        if text.starts_with('/') {
            return Err(GlobError::Absolute(own()));
        }
        let mut alternatives = Vec::new();
        for alternative in expand_braces(text)? {
            let mut segments = Vec::new();
            for part in alternative.split('/') {
                match part {
                    "" | "." => {}
                    ".." => return Err(GlobError::Parent(own())),
                    "**" => {
                        // `a/**/**/b` is `a/**/b`.
                        if segments.last() != Some(&Segment::Any) {
                            segments.push(Segment::Any);
                        }
                    }
                    _ if part.contains("**") && !part.contains("\\*") => {
                        return Err(GlobError::StarStarInSegment(own()));
                    }
                    _ => segments.push(segment(part, text)?),
                }
            }
            // A named file or directory: everything under it too.
            if matches!(segments.last(), Some(Segment::Literal(_))) {
                segments.push(Segment::Any);
            }
            if segments.is_empty() {
                return Err(GlobError::Empty);
            }
            if !alternatives.contains(&segments) {
                alternatives.push(segments);
            }
        }
        Ok(PathGlob {
            text: text.to_owned(),
            alternatives,
        })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the relative path `segments` (a file under `dev.cwd`) matches.
    pub fn matches(&self, segments: &[&str]) -> bool {
        self.alternatives.iter().any(|p| match_from(p, segments))
    }

    /// Whether some path under the directory `dir` (relative, as segments)
    /// may match: whether the directory is worth watching.
    pub fn may_match_under(&self, dir: &[&str]) -> bool {
        self.alternatives.iter().any(|p| prefix_from(p, dir))
    }

    /// Whether a segment of the glob is the literal name `name` (which
    /// lifts [`DEFAULT_IGNORED`] for it).
    pub fn names(&self, name: &str) -> bool {
        self.alternatives
            .iter()
            .flatten()
            .any(|s| matches!(s, Segment::Literal(l) if l == name))
    }
}

/// Whether `segments` (a path relative to `dev.cwd`) is watched by `globs`:
/// some glob matches it and no directory on the way is ignored
/// ([`DEFAULT_IGNORED`]) unless a glob names it.
pub fn watched(globs: &[PathGlob], segments: &[&str]) -> bool {
    let dirs = &segments[..segments.len().saturating_sub(1)];
    !dirs.iter().any(|d| ignored_dir(globs, d)) && globs.iter().any(|g| g.matches(segments))
}

/// Whether the directory `dir` (relative, as segments) may hold watched
/// files: not ignored, and some glob may match below it.
pub fn worth_watching(globs: &[PathGlob], dir: &[&str]) -> bool {
    !dir.iter().any(|d| ignored_dir(globs, d)) && globs.iter().any(|g| g.may_match_under(dir))
}

fn ignored_dir(globs: &[PathGlob], name: &str) -> bool {
    DEFAULT_IGNORED.contains(&name) && !globs.iter().any(|g| g.names(name))
}

fn match_from(pattern: &[Segment], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((Segment::Any, rest)) => (0..=path.len()).any(|i| match_from(rest, &path[i..])),
        Some((seg, rest)) => match path.split_first() {
            Some((first, more)) => seg_matches(seg, first) && match_from(rest, more),
            None => false,
        },
    }
}

/// Whether some extension of `dir` matches `pattern`.
fn prefix_from(pattern: &[Segment], dir: &[&str]) -> bool {
    match (pattern.split_first(), dir.split_first()) {
        (_, None) => !pattern.is_empty(),
        (None, Some(_)) => false,
        (Some((Segment::Any, _)), Some(_)) => true,
        (Some((seg, rest)), Some((first, more))) => {
            seg_matches(seg, first) && prefix_from(rest, more)
        }
    }
}

fn seg_matches(seg: &Segment, name: &str) -> bool {
    match seg {
        Segment::Any => true,
        Segment::Literal(l) => l == name,
        Segment::Pattern(toks) => {
            let chars: Vec<char> = name.chars().collect();
            toks_match(toks, &chars)
        }
    }
}

/// Wildcard match with single-star backtracking (O(|toks|·|name|)).
fn toks_match(toks: &[Tok], name: &[char]) -> bool {
    let (mut ti, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < name.len() {
        let step = match toks.get(ti) {
            Some(Tok::Char(c)) => *c == name[ni],
            Some(Tok::One) => true,
            Some(Tok::Class { negated, ranges }) => {
                let inside = ranges
                    .iter()
                    .any(|(lo, hi)| *lo <= name[ni] && name[ni] <= *hi);
                inside != *negated
            }
            Some(Tok::Star) | None => false,
        };
        if step {
            ti += 1;
            ni += 1;
        } else if let Some(Tok::Star) = toks.get(ti) {
            star = Some((ti, ni));
            ti += 1;
        } else if let Some((st, sn)) = star {
            ti = st + 1;
            ni = sn + 1;
            star = Some((st, sn + 1));
        } else {
            return false;
        }
    }
    toks[ti..].iter().all(|t| *t == Tok::Star)
}

/// One segment (no `/`, braces expanded) as tokens, or a literal.
fn segment(part: &str, whole: &str) -> Result<Segment, GlobError> {
    let mut toks = Vec::new();
    let mut chars = part.chars().peekable();
    let mut wild = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => toks.push(Tok::Char(next)),
                None => return Err(GlobError::TrailingEscape(whole.to_owned())),
            },
            '*' => {
                wild = true;
                if toks.last() != Some(&Tok::Star) {
                    toks.push(Tok::Star);
                }
            }
            '?' => {
                wild = true;
                toks.push(Tok::One);
            }
            '[' => {
                wild = true;
                let negated = matches!(chars.peek(), Some('!' | '^'));
                if negated {
                    chars.next();
                }
                let mut ranges = Vec::new();
                let mut first = true;
                loop {
                    let Some(c) = chars.next() else {
                        return Err(GlobError::UnclosedClass(whole.to_owned()));
                    };
                    // `]` right after `[` (or `[!`) is a member.
                    if c == ']' && !first {
                        break;
                    }
                    first = false;
                    let lo = if c == '\\' {
                        chars
                            .next()
                            .ok_or_else(|| GlobError::UnclosedClass(whole.to_owned()))?
                    } else {
                        c
                    };
                    let mut ahead = chars.clone();
                    if ahead.next() == Some('-') && ahead.peek().is_some_and(|c| *c != ']') {
                        chars.next();
                        let hi = chars
                            .next()
                            .ok_or_else(|| GlobError::UnclosedClass(whole.to_owned()))?;
                        ranges.push((lo.min(hi), lo.max(hi)));
                    } else {
                        ranges.push((lo, lo));
                    }
                }
                toks.push(Tok::Class { negated, ranges });
            }
            other => toks.push(Tok::Char(other)),
        }
    }
    if wild {
        Ok(Segment::Pattern(toks))
    } else {
        let literal = toks
            .into_iter()
            .map(|t| match t {
                Tok::Char(c) => c,
                _ => unreachable!("a segment without wildcards has only characters"),
            })
            .collect();
        Ok(Segment::Literal(literal))
    }
}

/// `text` with its `{a,b}` alternatives expanded (escapes kept for
/// [`segment`]); `[...]` classes are not split.
fn expand_braces(text: &str) -> Result<Vec<String>, GlobError> {
    let too_many = || GlobError::TooManyAlternatives(text.to_owned());
    let chars: Vec<char> = text.chars().collect();
    // Find the first top-level `{` and its matching `}`.
    let mut i = 0;
    let mut open = None;
    let mut in_class = false;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '{' if !in_class => {
                open = Some(i);
                break;
            }
            '}' if !in_class => return Err(GlobError::UnmatchedBrace(text.to_owned())),
            _ => {}
        }
        i += 1;
    }
    let Some(start) = open else {
        return Ok(vec![text.to_owned()]);
    };
    let mut depth = 0;
    let mut parts = Vec::new();
    let mut from = start + 1;
    let mut end = None;
    let mut j = start + 1;
    while j < chars.len() {
        match chars[j] {
            '\\' => j += 1,
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            '}' => {
                parts.push(chars[from..j].iter().collect::<String>());
                end = Some(j);
                break;
            }
            ',' if depth == 0 => {
                parts.push(chars[from..j].iter().collect::<String>());
                from = j + 1;
            }
            _ => {}
        }
        j += 1;
    }
    let Some(end) = end else {
        return Err(GlobError::UnclosedBrace(text.to_owned()));
    };
    let head: String = chars[..start].iter().collect();
    let tail: String = chars[end + 1..].iter().collect();
    let mut out = Vec::new();
    for part in parts {
        for expanded in expand_braces(&format!("{head}{part}{tail}"))? {
            if out.len() >= MAX_ALTERNATIVES {
                return Err(too_many());
            }
            out.push(expanded);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(text: &str) -> PathGlob {
        PathGlob::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn segs(path: &str) -> Vec<&str> {
        path.split('/').collect()
    }

    fn m(glob: &str, path: &str) -> bool {
        g(glob).matches(&segs(path))
    }

    #[test]
    fn stars_questions_and_classes_stay_within_a_segment() {
        assert!(m("*.py", "server.py"));
        assert!(!m("*.py", "src/server.py"), "`*` never crosses a `/`");
        assert!(m("src/*.py", "src/server.py"));
        assert!(m("src/?.py", "src/a.py"));
        assert!(!m("src/?.py", "src/ab.py"));
        assert!(m("[a-c]x.ts", "bx.ts"));
        assert!(!m("[a-c]x.ts", "dx.ts"));
        assert!(m("[!a-c]x.ts", "dx.ts"));
        assert!(m("[^a-c]x.ts", "dx.ts"));
        assert!(m("[]]", "]"));
        assert!(m("\\*.py", "*.py"));
        assert!(!m("\\*.py", "a.py"));
    }

    #[test]
    fn double_star_spans_any_number_of_segments() {
        for path in ["src/a.py", "src/x/a.py", "src/x/y/z/a.py"] {
            assert!(m("src/**/*.py", path), "{path}");
        }
        assert!(!m("src/**/*.py", "lib/a.py"));
        assert!(m("**/*.py", "a.py"));
        assert!(m("**/*.py", "deep/er/a.py"));
        assert!(m("**", "anything/at/all"));
        assert!(m("a/**/b/*.c", "a/b/x.c"));
        assert!(m("a/**/b/*.c", "a/q/r/b/x.c"));
    }

    #[test]
    fn a_named_directory_or_file_stands_for_what_is_under_it() {
        assert!(m("src", "src/a.py"));
        assert!(m("src", "src/x/y.ts"));
        assert!(m("server.py", "server.py"));
        assert!(!m("src", "srcx/a.py"));
        assert!(
            !m("src/*.py", "src/x/a.py"),
            "a wildcard last segment stays exact"
        );
    }

    #[test]
    fn braces_are_alternatives() {
        assert!(m("src/**/*.{ts,tsx}", "src/a/b.tsx"));
        assert!(m("src/**/*.{ts,tsx}", "src/b.ts"));
        assert!(!m("src/**/*.{ts,tsx}", "src/b.js"));
        assert!(m("{lib,src}/*.py", "lib/a.py"));
        assert!(m("a{b,c{d,e}}f", "acef"));
        assert_eq!(g("{a,a}/x").alternatives.len(), 1);
    }

    #[test]
    fn directories_worth_watching_are_those_a_glob_may_reach() {
        let globs = [g("src/**/*.py"), g("tests/*.py")];
        assert!(worth_watching(&globs, &[]));
        assert!(worth_watching(&globs, &["src"]));
        assert!(worth_watching(&globs, &["src", "deep", "er"]));
        assert!(worth_watching(&globs, &["tests"]));
        assert!(!worth_watching(&globs, &["tests", "fixtures"]));
        assert!(!worth_watching(&globs, &["docs"]));
    }

    #[test]
    fn ignored_directories_are_skipped_unless_named() {
        let everything = [g("**/*.js")];
        assert!(watched(&everything, &segs("lib/a.js")));
        for dir in [
            "node_modules",
            ".git",
            "target",
            "dist",
            "build",
            "__pycache__",
        ] {
            let path = format!("{dir}/a.js");
            assert!(!watched(&everything, &segs(&path)), "{path}");
            assert!(!worth_watching(&everything, &[dir]));
            let deep = format!("lib/{dir}/x/a.js");
            assert!(!watched(&everything, &segs(&deep)), "{deep}");
        }
        let named = [g("vendor/node_modules/pkg/**/*.js")];
        assert!(watched(&named, &segs("vendor/node_modules/pkg/a.js")));
        assert!(worth_watching(&named, &["vendor", "node_modules"]));
        // A file named like an ignored directory is not a directory.
        assert!(watched(&[g("build")], &segs("build")));
    }

    #[test]
    fn invalid_globs_say_why() {
        let err = |text: &str| PathGlob::parse(text).unwrap_err();
        assert_eq!(err(""), GlobError::Empty);
        assert_eq!(err("  "), GlobError::Empty);
        assert!(matches!(err("/abs/*.py"), GlobError::Absolute(_)));
        assert!(matches!(err("../x/*.py"), GlobError::Parent(_)));
        assert!(matches!(err("src/[ab.py"), GlobError::UnclosedClass(_)));
        assert!(matches!(err("src/{a,b.py"), GlobError::UnclosedBrace(_)));
        assert!(matches!(err("src/a}.py"), GlobError::UnmatchedBrace(_)));
        assert!(matches!(err("src\\"), GlobError::TrailingEscape(_)));
        assert!(matches!(err("src/a**.py"), GlobError::StarStarInSegment(_)));
        let many = "{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}";
        assert!(matches!(err(many), GlobError::TooManyAlternatives(_)));
        assert!(err("src/[ab.py").to_string().contains("unclosed `[`"));
        assert!(PathGlob::parse("./src/*.py").is_ok());
    }
}
