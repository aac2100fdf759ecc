//! Text to search terms: identifiers split into words, English stop words
//! dropped, the rest stemmed, so that `getCurrentTime`, `get_current_time`
//! and "gets the current times" share their terms.

use std::collections::{HashMap, HashSet};
use std::fmt;

use rust_stemmers::{Algorithm, Stemmer};

/// The words of `text`, lowercased: runs of letters and digits, cut again
/// where an identifier changes case or between letters and digits
/// (`getHTTPHeaders2` → `get http headers 2`).
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = run.chars().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            if is_boundary(&chars, i) {
                words.push(chars[start..i].iter().collect::<String>().to_lowercase());
                start = i;
            }
        }
        if start < chars.len() {
            words.push(chars[start..].iter().collect::<String>().to_lowercase());
        }
    }
    words
}

/// Whether a word of `chars` ends before `chars[i]`.
fn is_boundary(chars: &[char], i: usize) -> bool {
    let (prev, cur) = (chars[i - 1], chars[i]);
    let lower = |j: usize| chars.get(j).is_some_and(|c| c.is_lowercase());
    let lower_to_upper = prev.is_lowercase() && cur.is_uppercase();
    // The last capital of an acronym starts the next word (`HTTPServer`),
    // unless only a plural `s` follows (`PRs`, `listURLs`).
    let plural = chars.get(i + 1) == Some(&'s') && !lower(i + 2);
    let acronym_end = prev.is_uppercase() && cur.is_uppercase() && lower(i + 1) && !plural;
    let digits = prev.is_ascii_digit() != cur.is_ascii_digit();
    lower_to_upper || acronym_end || digits
}

/// Function words that say nothing about what a tool does. A short list of
/// our own: agents phrase queries as requests ("what is the time in ..."),
/// and these would otherwise match every description.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be",
    "been", "being", "but", "by", "can", "could", "did", "do", "does", "doing", "e", "each", "eg",
    "etc", "for", "from", "g", "had", "has", "have", "having", "he", "her", "here", "him", "his",
    "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "let", "may", "me",
    "might", "must", "my", "of", "on", "or", "other", "our", "ours", "please", "s", "shall", "she",
    "should", "so", "some", "such", "t", "than", "that", "the", "their", "them", "then", "there",
    "these", "they", "this", "those", "to", "too", "us", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you",
    "your", "yours",
];

/// Words that agents and tool authors use for the same thing: the
/// abbreviations of tool catalogs and the verbs that name one action, each
/// written as one spelling on both sides. Any inflection of a word on the
/// left maps (by stem) to the words on the right.
const SAME: &[(&str, &str)] = &[
    ("args", "arguments"),
    ("auth", "authentication"),
    ("bug", "issue"),
    ("cfg", "configuration"),
    ("config", "configuration"),
    ("db", "database"),
    ("dir", "directory"),
    ("display", "show"),
    ("download", "fetch"),
    ("env", "environment"),
    ("erase", "delete"),
    ("exec", "run"),
    ("execute", "run"),
    ("find", "search"),
    ("folder", "directory"),
    ("img", "image"),
    ("info", "information"),
    ("js", "javascript"),
    ("make", "create"),
    ("modify", "update"),
    ("msg", "message"),
    ("param", "parameter"),
    ("photo", "image"),
    ("picture", "image"),
    ("pr", "pull request"),
    ("prs", "pull requests"),
    ("remove", "delete"),
    ("repo", "repository"),
    ("retrieve", "get"),
    ("save", "write"),
    ("ticket", "issue"),
    ("tz", "timezone"),
    ("uri", "url"),
    ("var", "variable"),
    ("view", "show"),
];

/// The tokenizer of the index: [`split_words`], minus [`STOP_WORDS`],
/// stemmed with Snowball English (Porter 2), [`SAME`] words made one — the
/// same for documents and queries, so the two meet on stems.
pub struct Terms {
    stemmer: Stemmer,
    same: HashMap<String, Vec<String>>,
}

impl Default for Terms {
    fn default() -> Self {
        let stemmer = Stemmer::create(Algorithm::English);
        let same = SAME
            .iter()
            .map(|(word, canonical)| {
                let stems = canonical
                    .split(' ')
                    .map(|w| stemmer.stem(w).into_owned())
                    .collect();
                (stemmer.stem(word).into_owned(), stems)
            })
            .collect();
        Terms { stemmer, same }
    }
}

impl Terms {
    /// `word` (one word of [`split_words`]) cut in two where both halves are
    /// terms of `vocabulary`, at least 3 letters each; the most even cut
    /// when several fit. Identifiers glued without case or separator
    /// (`worklog`, `sequentialthinking`) so meet queries that write their
    /// words apart.
    pub fn split_glued<'w>(
        &self,
        word: &'w str,
        vocabulary: &HashSet<String>,
    ) -> Option<(&'w str, &'w str)> {
        let known = |part: &str| match bm25::Tokenizer::tokenize(self, part).as_slice() {
            [term] => vocabulary.contains(term),
            _ => false,
        };
        let chars = word.chars().count();
        word.char_indices()
            .enumerate()
            .filter(|(i, _)| *i >= 3 && chars - i >= 3)
            .map(|(i, (at, _))| (i.min(chars - i), at))
            .filter(|(_, at)| known(&word[..*at]) && known(&word[*at..]))
            .max_by_key(|(shorter, _)| *shorter)
            .map(|(_, at)| (&word[..at], &word[at..]))
    }
}

impl fmt::Debug for Terms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Terms(english)")
    }
}

impl bm25::Tokenizer for Terms {
    fn tokenize(&self, text: &str) -> Vec<String> {
        let mut terms = Vec::new();
        // A URL stands for the word "url": its host and path are arguments,
        // not what a tool does (`https://example.com` is no `example`).
        let text: Vec<&str> = text
            .split_whitespace()
            .map(|w| if w.contains("://") { "url" } else { w })
            .collect();
        for word in split_words(&text.join(" ")) {
            if STOP_WORDS.binary_search(&word.as_str()).is_ok() {
                continue;
            }
            let stem = self.stemmer.stem(&word);
            match self.same.get(stem.as_ref()) {
                Some(canonical) => terms.extend(canonical.iter().cloned()),
                None => terms.push(stem.into_owned()),
            }
        }
        terms
    }
}

#[cfg(test)]
mod tests {
    use bm25::Tokenizer;

    use super::*;

    fn split(text: &str) -> Vec<String> {
        split_words(text)
    }

    #[test]
    fn identifiers_in_every_case_style_split_into_the_same_words() {
        for name in [
            "getCurrentTime",
            "get_current_time",
            "get-current-time",
            "GetCurrentTime",
            "GET_CURRENT_TIME",
            "get current time",
        ] {
            assert_eq!(split(name), ["get", "current", "time"], "{name}");
        }
        assert_eq!(split("list-issues"), ["list", "issues"]);
    }

    #[test]
    fn acronyms_end_where_the_next_word_starts() {
        assert_eq!(split("HTTPServer"), ["http", "server"]);
        assert_eq!(split("parseJSONResponse"), ["parse", "json", "response"]);
        assert_eq!(split("getURL"), ["get", "url"]);
        assert_eq!(split("PRs"), ["prs"]);
        assert_eq!(split("listURLsNow"), ["list", "urls", "now"]);
    }

    #[test]
    fn digits_are_words_of_their_own() {
        assert_eq!(split("base64Decode"), ["base", "64", "decode"]);
        assert_eq!(split("getV2Items"), ["get", "v", "2", "items"]);
        assert_eq!(split("24-hour"), ["24", "hour"]);
    }

    #[test]
    fn punctuation_and_separators_split_and_vanish() {
        assert_eq!(
            split("github__create_issue: Create (a) new issue!"),
            ["github", "create", "issue", "create", "a", "new", "issue"]
        );
        assert_eq!(split("  --__  "), Vec::<String>::new());
        assert_eq!(split("Zürich"), ["zürich"]);
    }

    #[test]
    fn stop_words_are_sorted_for_the_binary_search() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn glued_words_split_where_both_halves_are_known_terms() {
        let terms = Terms::default();
        let vocabulary: HashSet<String> = terms
            .tokenize("add work logs; sequential thinking; the data base; github")
            .into_iter()
            .collect();
        let split = |word| terms.split_glued(word, &vocabulary);
        assert_eq!(split("worklog"), Some(("work", "log")));
        assert_eq!(
            split("sequentialthinking"),
            Some(("sequential", "thinking"))
        );
        assert_eq!(split("database"), Some(("data", "base")));
        // Halves that are not terms, or too short, or a stop word: no cut.
        assert_eq!(split("github"), None);
        assert_eq!(split("adlog"), None);
        assert_eq!(split("thelog"), None);
        assert_eq!(split("work"), None);
    }

    #[test]
    fn words_for_the_same_thing_become_one_term() {
        let terms = Terms::default();
        assert_eq!(
            terms.tokenize("Remove folders"),
            terms.tokenize("delete directory")
        );
        assert_eq!(
            terms.tokenize("merge PRs"),
            terms.tokenize("merge pull requests")
        );
        assert_eq!(terms.tokenize("executing"), terms.tokenize("run"));
        assert_eq!(terms.tokenize("repo"), ["repositori"]);
    }

    #[test]
    fn terms_drop_stop_words_and_stem() {
        let terms = Terms::default();
        assert_eq!(
            terms.tokenize("What is the time in Tokyo?"),
            ["time", "tokyo"]
        );
        assert_eq!(
            terms.tokenize("listDirectories"),
            terms.tokenize("list directory")
        );
        assert_eq!(terms.tokenize("running files"), ["run", "file"]);
        assert_eq!(
            terms.tokenize("fetch https://example.com/a?b=c now"),
            ["fetch", "url", "now"]
        );
    }
}
