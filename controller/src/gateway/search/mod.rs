//! Tool search: a BM25 index over the tools of the live union, for
//! `search_tools` (`--expose search`). Pure: built from the tool
//! definitions, queried with plain words, no I/O.
//!
//! Each tool becomes one document made of its fields: name, title, server
//! name, description, and its parameters (names, descriptions without their
//! examples, enum values; one level into nested objects). Identifiers
//! glued in lowercase (`worklog`) also count as their words, where both
//! halves are words the catalog uses. [`words::Terms`] turns text into
//! terms: identifier splitting, stop words, English stemming, one spelling
//! for words that mean the same. The `bm25` crate embeds the documents
//! (term-frequency saturation, length normalization) and scores a query
//! against them (idf). A query also counts each pair of its adjacent words
//! glued (`time zone` → `timezone`).
//!
//! Fields weigh differently by repetition: a field of weight `w` is written
//! `w` times into the document. That is BM25F with one length
//! normalization for all fields: weighted term frequencies add up before
//! saturation, so a name word counts more than a description word, yet a
//! word in every field does not count without bound. (Scoring each field on
//! its own and adding the weighted scores ranked worse on the labeled set.)
//!
//! The index is rebuilt whenever the union changes; a query tokenizes a few
//! words and scores only the tools that share a term with it. `eval.rs`
//! measures the ranking on a labeled catalog and query set.
//!
//! - [`words`]: text to search terms.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt;

use bm25::{Embedder, EmbedderBuilder, Scorer, Tokenizer};
use rmcp::model::Tool;
use serde_json::{Map, Value};

pub mod words;

#[cfg(test)]
mod eval;

use words::Terms;

/// One searchable tool.
#[derive(Debug, Clone, Copy)]
pub struct SearchEntry<'a> {
    /// The name the agent endpoint exposes (`server__tool`).
    pub exposed: &'a str,
    /// The server that offers the tool.
    pub server: &'a str,
    /// The tool's definition as the server listed it.
    pub tool: &'a Tool,
}

/// A tool that matched a query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Position of the tool among the entries given to [`ToolIndex::build`].
    pub index: usize,
    /// BM25 score: higher is better; comparable only within one query.
    pub score: f32,
}

/// The ranking's knobs: how many times each field is written into a tool's
/// document (see the module doc), and BM25's `k1` (term-frequency
/// saturation) and `b` (length normalization).
#[derive(Debug, Clone, Copy)]
struct Tuning {
    name: usize,
    title: usize,
    server: usize,
    description: usize,
    parameter_name: usize,
    parameter_text: usize,
    k1: f32,
    b: f32,
}

/// The name says most about what a tool does; the server name is how agents
/// scope a request ("on GitHub"). A high `k1` keeps those repetitions
/// counting, a high `b` keeps a long parameter list from outscoring a short
/// precise tool. Chosen on the labeled set (`eval.rs`), where neighbouring
/// settings (name 2–4, server 1–3, `k1` 2–4, `b` 0.75–0.9) rank within two
/// queries of this one.
const TUNING: Tuning = Tuning {
    name: 3,
    title: 1,
    server: 2,
    description: 1,
    parameter_name: 1,
    parameter_text: 1,
    k1: 3.0,
    b: 0.9,
};

/// A search index over a fixed set of tools; immutable once built, so it is
/// shared across sessions as is (`Send + Sync`).
pub struct ToolIndex {
    embedder: Embedder<u64, Terms>,
    scorer: Scorer<usize, u64>,
    exposed: Vec<String>,
    servers: Vec<String>,
}

impl fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolIndex")
            .field("tools", &self.exposed.len())
            .field("avgdl", &self.embedder.avgdl())
            .finish_non_exhaustive()
    }
}

impl ToolIndex {
    /// Indexes `entries`; a [`Hit`] refers to them by position.
    pub fn build<'a>(entries: impl IntoIterator<Item = SearchEntry<'a>>) -> ToolIndex {
        let entries: Vec<SearchEntry<'a>> = entries.into_iter().collect();
        let terms = Terms::default();
        let mut documents: Vec<String> = entries.iter().map(|e| document(e, &TUNING)).collect();
        // Glued identifiers split at the words of the whole catalog.
        let vocabulary: HashSet<String> =
            documents.iter().flat_map(|d| terms.tokenize(d)).collect();
        for (entry, text) in entries.iter().zip(&mut documents) {
            text.push_str(&glued_parts(entry, &terms, &vocabulary, &TUNING));
        }
        let exposed = entries.iter().map(|e| e.exposed.to_owned()).collect();
        let servers = entries.iter().map(|e| e.server.to_owned()).collect();
        let corpus: Vec<&str> = documents.iter().map(String::as_str).collect();
        let embedder =
            EmbedderBuilder::<u64, Terms>::with_tokenizer_and_fit_to_corpus(terms, &corpus)
                .k1(TUNING.k1)
                .b(TUNING.b)
                .build();
        let mut scorer = Scorer::new();
        for (index, text) in documents.iter().enumerate() {
            // The crate keeps an entry per occurrence of a term, all with one
            // value, and scans them per query term: one per term scores the
            // same, sooner.
            let mut embedding = embedder.embed(text);
            embedding.0.sort_unstable_by_key(|t| t.index);
            embedding.0.dedup_by_key(|t| t.index);
            scorer.upsert(&index, embedding);
        }
        ToolIndex {
            embedder,
            scorer,
            exposed,
            servers,
        }
    }

    /// The best matches for `query`, best first, at most `limit`; only the
    /// tools of `server` when given. A query with no searchable word (blank,
    /// or only stop words) matches nothing, as does a tool that shares no
    /// term with the query. Equal scores keep the order of the entries.
    pub fn search(&self, query: &str, limit: usize, server: Option<&str>) -> Vec<Hit> {
        if limit == 0 {
            return Vec::new();
        }
        let query = self.embedder.embed(&with_compounds(query));
        if query.is_empty() {
            return Vec::new();
        }
        let mut hits: Vec<Hit> = self
            .scorer
            .matches(&query)
            .into_iter()
            .filter(|m| server.is_none_or(|s| self.servers[m.id] == s))
            .map(|m| Hit {
                index: m.id,
                score: m.score,
            })
            .collect();
        hits.sort_by(|a, b| match b.score.total_cmp(&a.score) {
            Ordering::Equal => a.index.cmp(&b.index),
            other => other,
        });
        hits.truncate(limit);
        hits
    }

    /// The exposed name of the tool at `index`, as given to [`Self::build`].
    pub fn exposed(&self, index: usize) -> Option<&str> {
        self.exposed.get(index).map(String::as_str)
    }

    /// How many tools the index holds.
    pub fn len(&self) -> usize {
        self.exposed.len()
    }

    /// Whether the index holds no tool.
    pub fn is_empty(&self) -> bool {
        self.exposed.is_empty()
    }
}

/// `query` and each pair of its adjacent words written as one: tool
/// authors glue words that agents write apart (`timezone`, `worklog`,
/// `filesystem`). A glued pair that no tool has matches nothing.
fn with_compounds(query: &str) -> String {
    let words = words::split_words(query);
    let mut text = query.to_owned();
    for pair in words.windows(2) {
        text.push(' ');
        text.push_str(&pair[0]);
        text.push_str(&pair[1]);
    }
    text
}

/// The text of one tool's document: each field repeated by its weight.
fn document(entry: &SearchEntry<'_>, tuning: &Tuning) -> String {
    let tool = entry.tool;
    let mut doc = Document::default();
    doc.add(&tool.name, tuning.name);
    let annotated = tool.annotations.as_ref().and_then(|a| a.title.as_deref());
    for title in tool.title.as_deref().into_iter().chain(annotated) {
        doc.add(title, tuning.title);
    }
    doc.add(entry.server, tuning.server);
    if let Some(description) = &tool.description {
        doc.add(description, tuning.description);
    }
    parameters(&tool.input_schema, 1, tuning, &mut doc);
    doc.0
}

/// Adds the parameters of the object schema `schema`: names, descriptions
/// and string enum values, and those of the objects they hold (an object
/// parameter or an array of objects) down to `depth` more levels.
fn parameters(schema: &Map<String, Value>, depth: usize, tuning: &Tuning, doc: &mut Document) {
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return;
    };
    for (name, property) in properties {
        doc.add(name, tuning.parameter_name);
        let Value::Object(property) = property else {
            continue;
        };
        if let Some(Value::String(description)) = property.get("description") {
            doc.add(&without_examples(description), tuning.parameter_text);
        }
        if let Some(Value::Array(values)) = property.get("enum") {
            for value in values.iter().filter_map(Value::as_str) {
                doc.add(value, tuning.parameter_text);
            }
        }
        if depth > 0 {
            parameters(property, depth - 1, tuning, doc);
            if let Some(Value::Object(items)) = property.get("items") {
                parameters(items, depth - 1, tuning, doc);
            }
        }
    }
}

/// The halves of the identifiers of `entry` (tool and server name) that are
/// glued words ([`Terms::split_glued`]), weighted as the identifier.
fn glued_parts(
    entry: &SearchEntry<'_>,
    terms: &Terms,
    vocabulary: &HashSet<String>,
    tuning: &Tuning,
) -> String {
    let mut doc = Document::default();
    for (identifier, weight) in [
        (entry.tool.name.as_ref(), tuning.name),
        (entry.server, tuning.server),
    ] {
        for word in words::split_words(identifier) {
            if let Some((head, tail)) = terms.split_glued(&word, vocabulary) {
                doc.add(head, weight);
                doc.add(tail, weight);
            }
        }
    }
    doc.0
}

/// A parameter's description without its examples (from "e.g." to the end
/// of the parenthesis or sentence): example values (`'Asia/Tokyo'`,
/// `'PROJ-123'`) say what an argument looks like, not what the tool does.
fn without_examples(description: &str) -> String {
    let mut text = String::new();
    let mut rest = description;
    while let Some((at, marker)) = find_example(rest) {
        text.push_str(&rest[..at]);
        let example = &rest[at + marker..];
        let end = example
            .find([')', ']'])
            .or_else(|| example.find(". "))
            .unwrap_or(example.len());
        rest = &example[end..];
    }
    text.push_str(rest);
    text
}

/// Where the first "e.g." (in any case, dotted or not) of `text` starts,
/// and the length of that marker.
fn find_example(text: &str) -> Option<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    ["e.g.", "e.g,", "eg.", "eg,", "for example", "for instance"]
        .iter()
        .filter_map(|marker| {
            let at = lower.match_indices(marker).map(|(at, _)| at).find(|&at| {
                // A word of its own: not the "eg" of "integer."
                at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric()
            })?;
            Some((at, marker.len()))
        })
        .min()
}

/// A document's text under construction.
#[derive(Default)]
struct Document(String);

impl Document {
    fn add(&mut self, text: &str, weight: usize) {
        for _ in 0..weight {
            self.0.push_str(text);
            // A separator no word contains, so fields never fuse.
            self.0.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn tool(name: &str, description: Option<&str>, schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            panic!("schema must be an object")
        };
        let mut tool = Tool::default();
        tool.name = Cow::Owned(name.to_owned());
        tool.description = description.map(|d| Cow::Owned(d.to_owned()));
        tool.input_schema = Arc::new(schema);
        tool
    }

    /// `(server, tool)` pairs with their exposed names.
    struct Fixture {
        tools: Vec<(String, String, Tool)>,
    }

    impl Fixture {
        fn new(tools: Vec<(&str, Tool)>) -> Fixture {
            Fixture {
                tools: tools
                    .into_iter()
                    .map(|(server, tool)| {
                        (server.to_owned(), format!("{server}__{}", tool.name), tool)
                    })
                    .collect(),
            }
        }

        fn index(&self) -> ToolIndex {
            ToolIndex::build(
                self.tools
                    .iter()
                    .map(|(server, exposed, tool)| SearchEntry {
                        exposed,
                        server,
                        tool,
                    }),
            )
        }

        fn names(&self, hits: &[Hit]) -> Vec<&str> {
            hits.iter()
                .map(|h| self.tools[h.index].1.as_str())
                .collect()
        }
    }

    fn fixture() -> Fixture {
        let empty = json!({"type": "object"});
        Fixture::new(vec![
            (
                "time",
                tool(
                    "get_current_time",
                    Some("Get current time in a specific timezone"),
                    json!({"type": "object", "properties": {
                        "timezone": {"type": "string", "description": "IANA timezone name"}}}),
                ),
            ),
            (
                "github",
                tool(
                    "createIssue",
                    Some("Open a new issue in a repository"),
                    empty.clone(),
                ),
            ),
            (
                "github",
                tool(
                    "list-issues",
                    Some("List issues of a repository"),
                    empty.clone(),
                ),
            ),
            (
                "jira",
                tool("create_issue", Some("Create a Jira ticket"), empty.clone()),
            ),
            ("notes", tool("archive_everything", None, empty.clone())),
            (
                "files",
                tool(
                    "write",
                    Some("Write text to disk"),
                    json!({"type": "object", "properties": {
                        "path": {"type": "string"},
                        "options": {"type": "object", "properties": {
                            "encoding": {"type": "string", "description": "Character set such as latin1"}}},
                        "mode": {"type": "string", "enum": ["overwrite", "append"]}}}),
                ),
            ),
        ])
    }

    #[test]
    fn the_best_match_comes_first_and_hits_name_their_entry() {
        let fixture = fixture();
        let index = fixture.index();
        assert_eq!(index.len(), 6);
        let hits = index.search("what time is it?", 5, None);
        assert_eq!(fixture.names(&hits), ["time__get_current_time"]);
        assert_eq!(index.exposed(hits[0].index), Some("time__get_current_time"));
        assert_eq!(index.exposed(99), None);
        let hits = index.search("createIssue", 5, None);
        let mut first_two = fixture.names(&hits)[..2].to_vec();
        first_two.sort_unstable();
        assert_eq!(first_two, ["github__createIssue", "jira__create_issue"]);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
    }

    #[test]
    fn the_server_filter_keeps_only_that_servers_tools() {
        let fixture = fixture();
        let index = fixture.index();
        let hits = index.search("create issue", 10, Some("jira"));
        assert_eq!(fixture.names(&hits), ["jira__create_issue"]);
        let hits = index.search("issues", 10, Some("github"));
        assert_eq!(
            fixture.names(&hits),
            ["github__list-issues", "github__createIssue"]
        );
        assert!(index.search("issues", 10, Some("nobody")).is_empty());
    }

    #[test]
    fn the_limit_bounds_the_hits() {
        let fixture = fixture();
        let index = fixture.index();
        assert_eq!(index.search("issue", 10, None).len(), 3);
        assert_eq!(index.search("issue", 2, None).len(), 2);
        assert!(index.search("issue", 0, None).is_empty());
    }

    #[test]
    fn a_blank_or_stop_word_query_matches_nothing() {
        let index = fixture().index();
        for query in ["", "   ", "?!", "what is it"] {
            assert!(index.search(query, 10, None).is_empty(), "{query:?}");
        }
        assert!(index.search("xylophone", 10, None).is_empty());
    }

    #[test]
    fn a_tool_without_description_is_found_by_its_name() {
        let fixture = fixture();
        let index = fixture.index();
        let hits = index.search("archive", 10, None);
        assert_eq!(fixture.names(&hits), ["notes__archive_everything"]);
    }

    #[test]
    fn server_names_parameters_and_enum_values_are_searchable() {
        let fixture = fixture();
        let index = fixture.index();
        assert_eq!(
            fixture.names(&index.search("jira", 10, None)),
            ["jira__create_issue"]
        );
        for query in ["timezone", "path", "append mode", "latin1 encoding"] {
            let hits = index.search(query, 1, None);
            assert_eq!(hits.len(), 1, "{query}");
            let expected = if query == "timezone" {
                "time__get_current_time"
            } else {
                "files__write"
            };
            assert_eq!(fixture.names(&hits), [expected], "{query}");
        }
    }

    #[test]
    fn examples_in_parameter_descriptions_are_left_out() {
        assert_eq!(
            without_examples("IANA timezone name (e.g., 'America/New_York'). Use 'UTC'."),
            "IANA timezone name (). Use 'UTC'."
        );
        assert_eq!(
            without_examples("Branch to push to, e.g. 'main'. Must exist"),
            "Branch to push to, . Must exist"
        );
        assert_eq!(
            without_examples("Time spent, for example '1h 30m'"),
            "Time spent, "
        );
        assert_eq!(
            without_examples("An integer, leg, egg"),
            "An integer, leg, egg"
        );
    }

    #[test]
    fn words_glued_in_a_name_or_written_apart_in_a_query_still_meet() {
        let empty = json!({"type": "object"});
        let fixture = Fixture::new(vec![
            (
                "jira",
                tool("add_worklog", Some("Record time spent"), empty.clone()),
            ),
            ("git", tool("git_log", Some("Show the log"), empty.clone())),
            (
                "git",
                tool("git_status", Some("The working tree"), empty.clone()),
            ),
            (
                "time",
                tool("now", Some("Current time in a timezone"), empty.clone()),
            ),
            ("clock", tool("zone_names", None, empty.clone())),
        ]);
        let index = fixture.index();
        let first = |query| fixture.names(&index.search(query, 1, None));
        // Not adjacent in the query: the name's own halves match.
        assert_eq!(first("log hours of work"), ["jira__add_worklog"]);
        assert_eq!(first("worklog"), ["jira__add_worklog"]);
        assert_eq!(first("current time zone"), ["time__now"]);
    }

    #[test]
    fn equal_scores_keep_the_entry_order() {
        let empty = json!({"type": "object"});
        let fixture = Fixture::new(vec![
            ("right", tool("ping", None, empty.clone())),
            ("left", tool("ping", None, empty.clone())),
        ]);
        let hits = fixture.index().search("ping", 10, None);
        assert_eq!(fixture.names(&hits), ["right__ping", "left__ping"]);
        assert_eq!(hits[0].score, hits[1].score);
    }

    #[test]
    fn an_empty_index_finds_nothing() {
        let index = ToolIndex::build([]);
        assert!(index.is_empty());
        assert!(index.search("anything", 10, None).is_empty());
    }

    #[test]
    fn the_index_is_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<ToolIndex>();
    }
}
