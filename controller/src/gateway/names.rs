//! Names the agent endpoint exposes: `server__tool`, sanitized, at most 64
//! characters (or the client's `--max-name-len`), a short hash suffix on a
//! collision.
//!
//! Tool `t` of server `s` is `s__t`, sanitized to `[A-Za-z0-9_-]` and at
//! most `max_len` characters. Only names that collide after sanitizing or
//! truncation change further: each colliding name that was altered gets the
//! suffix `_xxxx` (4 hex digits of sha256 of `s` NUL `t`), so its final
//! name depends only on its own pair. Prompts follow the same rule.

use std::collections::{BTreeMap, HashMap};

use steward_schema::canonical::sha256_hex;

/// The longest exposed name, unless a client asks for less.
pub const MAX_LEN: usize = 64;
/// Between the server and the tool name.
pub const SEPARATOR: &str = "__";

/// `s__t` sanitized and truncated, and whether that changed anything.
fn base(server: &str, item: &str, max_len: usize) -> (String, bool) {
    let raw = format!("{server}{SEPARATOR}{item}");
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut altered = name != raw;
    if name.len() > max_len {
        name.truncate(max_len);
        altered = true;
    }
    (name, altered)
}

/// The stable suffix of a pair.
fn suffix(server: &str, item: &str) -> String {
    let digest = sha256_hex(format!("{server}\0{item}").as_bytes());
    format!("_{}", &digest[..4])
}

fn with_suffix(mut name: String, server: &str, item: &str, max_len: usize) -> String {
    let suffix = suffix(server, item);
    name.truncate(max_len.saturating_sub(suffix.len()));
    name.push_str(&suffix);
    name
}

/// The exposed name of every `(server, item)` pair, in input order, each at
/// most `max_len` characters.
pub fn assign<'a>(
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    max_len: usize,
) -> Vec<String> {
    let pairs: Vec<(&str, &str)> = pairs.into_iter().collect();
    let bases: Vec<(String, bool)> = pairs.iter().map(|(s, t)| base(s, t, max_len)).collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (name, _) in &bases {
        *count.entry(name.as_str()).or_default() += 1;
    }
    let mut names: Vec<String> = pairs
        .iter()
        .zip(&bases)
        .map(|((s, t), (name, altered))| {
            if *altered && count[name.as_str()] > 1 {
                with_suffix(name.clone(), s, t, max_len)
            } else {
                name.clone()
            }
        })
        .collect();
    // Two pairs whose names are still equal (an unaltered name equal to a
    // suffixed one, or duplicates a server itself listed): later ones get
    // the suffix, or are dropped by the caller if they repeat exactly.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for (i, name) in names.iter_mut().enumerate() {
        if seen.contains_key(name.as_str()) {
            let (s, t) = pairs[i];
            let candidate = with_suffix(name.clone(), s, t, max_len);
            if !seen.contains_key(&candidate) {
                *name = candidate;
            }
        }
        seen.insert(name.clone(), i);
    }
    names
}

/// Up to `max` known names close to `name` (by edit distance or as a
/// substring), closest first.
pub fn close_names<'a>(
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
    max: usize,
) -> Vec<String> {
    let lower = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = known
        .into_iter()
        .filter_map(|candidate| {
            let c = candidate.to_lowercase();
            let distance = steward_schema::validate::text_distance(&lower, &c);
            let limit = (lower.chars().count() / 3).max(2);
            if distance <= limit {
                Some((distance, candidate))
            } else if c.contains(&lower) || lower.contains(&c) {
                Some((limit + 1, candidate))
            } else {
                // `time__now` asked as `now`: the part after the server.
                let tail = c.rsplit(SEPARATOR).next().unwrap_or(&c);
                (tail == lower).then_some((0, candidate))
            }
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(max)
        .map(|(_, c)| c.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_server_double_underscore_tool() {
        assert_eq!(
            assign([("time", "now"), ("git", "log")], MAX_LEN),
            ["time__now", "git__log"]
        );
    }

    #[test]
    fn sanitizing_replaces_characters_outside_the_set() {
        assert_eq!(
            assign([("my.srv", "get time")], MAX_LEN),
            ["my_srv__get_time"]
        );
        assert_eq!(assign([("a-b", "c_d")], MAX_LEN), ["a-b__c_d"]);
    }

    #[test]
    fn names_are_at_most_64_characters() {
        let long = "t".repeat(100);
        let names = assign([("srv", long.as_str())], MAX_LEN);
        assert_eq!(names[0].len(), MAX_LEN);
        assert!(names[0].starts_with("srv__ttt"));
    }

    #[test]
    fn a_collision_after_sanitizing_gets_a_stable_suffix_on_the_altered_name() {
        let names = assign([("my_srv", "x"), ("my.srv", "x")], MAX_LEN);
        assert_eq!(names[0], "my_srv__x", "the unaltered name is kept");
        assert_eq!(names[1], format!("my_srv__x{}", suffix("my.srv", "x")));
        // The suffix depends on the pair only: the same in another order.
        let again = assign([("my.srv", "x"), ("my_srv", "x")], MAX_LEN);
        assert_eq!(again[0], names[1]);
        assert_eq!(again[1], names[0]);
        assert_ne!(names[0], names[1]);
    }

    #[test]
    fn a_collision_after_truncation_gets_suffixes_within_the_limit() {
        let a = format!("{}a", "t".repeat(70));
        let b = format!("{}b", "t".repeat(70));
        let names = assign([("s", a.as_str()), ("s", b.as_str())], MAX_LEN);
        assert_ne!(names[0], names[1]);
        for name in &names {
            assert_eq!(name.len(), MAX_LEN);
            assert!(
                name.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            );
        }
        assert!(names[0].ends_with(&suffix("s", &a)));
    }

    #[test]
    fn a_client_limit_shortens_names_with_the_same_suffix_rule() {
        let a = format!("{}a", "t".repeat(60));
        let b = format!("{}b", "t".repeat(60));
        let names = assign([("s", a.as_str()), ("s", b.as_str()), ("x", "y")], 30);
        assert_eq!(names[0].len(), 30);
        assert!(names[0].ends_with(&suffix("s", &a)));
        assert!(names[1].ends_with(&suffix("s", &b)));
        assert_eq!(names[2], "x__y", "a short name is not touched");
        // The default limit leaves the long ones distinct without a suffix.
        assert_eq!(assign([("s", a.as_str())], MAX_LEN)[0], format!("s__{a}"));
    }

    #[test]
    fn the_suffix_is_four_hex_digits_of_sha256_of_server_nul_tool() {
        let digest = sha256_hex(b"my.srv\0x");
        assert_eq!(suffix("my.srv", "x"), format!("_{}", &digest[..4]));
    }

    #[test]
    fn close_names_find_typos_and_bare_tool_names() {
        let known = ["time__now", "time__convert", "git__log"];
        assert_eq!(close_names("time__nwo", known, 3), ["time__now"]);
        assert_eq!(close_names("now", known, 3), ["time__now"]);
        assert!(close_names("zzzzzzzz", known, 3).is_empty());
    }
}
