//! JSON Schema (Draft 2020-12) validation of a parsed [`Document`], phrased
//! for the person who wrote the file.
//!
//! This module owns turning `jsonschema` errors into [`Violation`]s: a JSON
//! pointer, the source position of the offending value (or key, for unknown
//! properties) and a lowercase message saying what was expected and what was
//! found. Its one piece of judgement is `anyOf`/`oneOf`, which `jsonschema`
//! reports as "not valid under any of the schemas": we pick the alternative
//! the user most plausibly meant and report *its* errors (recursively), or,
//! when no alternative accepts the value's type, list the types they accept.
//!
//! Schemas come from schemars 1.x: `$defs` + local `$ref`s (resolved by
//! `jsonschema` itself, offline), `Option<T>` as `type: [T, "null"]` or
//! `anyOf: [T, {type: null}]` (messages leave `null` out unless it is the only
//! choice), untagged enums as `anyOf`, tagged enums as `oneOf` of objects
//! fixing the tag with `const`.

use std::cmp::Reverse;
use std::path::PathBuf;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::diagnostic::{Diagnostic, Pos, pointer_join};
use crate::jsonc::Document;

/// Strings longer than this (in characters) are named by type, not quoted.
const SHORT_STRING: usize = 40;
/// At most this many allowed property names are listed after "unknown property".
const LIST_PROPERTIES: usize = 8;
/// At most this many enum values are listed.
const LIST_VALUES: usize = 12;
/// How many `$ref`s/subschemas deep descriptions look.
const DESCRIBE_DEPTH: usize = 8;

/// A compiled schema, ready to check documents.
#[derive(Debug, Clone)]
pub struct SchemaValidator {
    validator: Validator,
    /// The schema itself: error locations point into it (for property names,
    /// `items` descriptions, alternative labels).
    schema: Value,
}

/// The schema itself is not valid JSON Schema (a programming error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON Schema at '{pointer}': {message}")]
pub struct SchemaError {
    /// Location in the schema of the problem.
    pub pointer: String,
    pub message: String,
}

/// One way a document breaks its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer of the offending value (of the object, for a missing property).
    pub pointer: String,
    /// Where it is written: the value, or the key for an unknown property.
    pub pos: Option<Pos>,
    /// Lowercase fragment: what was expected, what was found.
    pub message: String,
}

impl Violation {
    pub fn into_diagnostic(self, file: impl Into<PathBuf>) -> Diagnostic {
        Diagnostic::new(file, self.pos, self.pointer, self.message)
    }
}

/// A violation before it is placed in the source.
struct Found {
    pointer: String,
    /// Locate the member's key rather than its value.
    at_key: bool,
    message: String,
}

impl Found {
    fn value(pointer: &str, message: String) -> Self {
        Found {
            pointer: pointer.to_owned(),
            at_key: false,
            message,
        }
    }
}

impl SchemaValidator {
    /// Compile `schema` (Draft 2020-12 unless it says otherwise in `$schema`).
    /// Only local references are resolved; anything else is a [`SchemaError`].
    pub fn new(schema: &Value) -> Result<Self, SchemaError> {
        Self::build(schema, true)
    }

    /// A schema written by others, such as a tool's `inputSchema`: its draft
    /// as its `$schema` says (else 2020-12), `format` an annotation only
    /// (its server decides what a format accepts).
    pub fn foreign(schema: &Value) -> Result<Self, SchemaError> {
        Self::build(schema, false)
    }

    fn build(schema: &Value, ours: bool) -> Result<Self, SchemaError> {
        let mut options = jsonschema::options().should_validate_formats(ours);
        if ours {
            options = options.with_draft(jsonschema::Draft::Draft202012);
        }
        let validator = options.build(schema).map_err(|e| SchemaError {
            pointer: e.instance_path().as_str().to_owned(),
            message: e.to_string(),
        })?;
        Ok(SchemaValidator {
            validator,
            schema: schema.clone(),
        })
    }

    /// Compile the schema schemars generates for `T`.
    pub fn for_type<T: schemars::JsonSchema>() -> Result<Self, SchemaError> {
        Self::new(schemars::schema_for!(T).as_value())
    }

    /// Whether `value` is valid (no explanation: for callers that fall back
    /// to [`check`](Self::check) to report problems).
    pub fn is_valid(&self, value: &Value) -> bool {
        self.validator.is_valid(value)
    }

    /// Every violation in `doc`, sorted by position, deduplicated.
    pub fn check(&self, doc: &Document) -> Vec<Violation> {
        let mut found = Vec::new();
        for error in self.validator.iter_errors(&doc.value) {
            self.explain(&error, &mut found);
        }
        let mut violations: Vec<Violation> = found
            .into_iter()
            .map(|f| Violation {
                pos: if f.at_key {
                    doc.key_position(&f.pointer)
                } else {
                    doc.position(&f.pointer)
                },
                pointer: f.pointer,
                message: f.message,
            })
            .collect();
        violations.sort_by(|a, b| {
            (a.pos.is_none(), a.pos, &a.pointer, &a.message).cmp(&(
                b.pos.is_none(),
                b.pos,
                &b.pointer,
                &b.message,
            ))
        });
        violations.dedup();
        violations
    }

    /// Every violation in `value` as `(pointer, message)`, without positions
    /// (for a value that is part of a document: the caller places them).
    pub fn violations(&self, value: &Value) -> Vec<(String, String)> {
        let mut found = Vec::new();
        for error in self.validator.iter_errors(value) {
            self.explain(&error, &mut found);
        }
        let mut out: Vec<(String, String)> =
            found.into_iter().map(|f| (f.pointer, f.message)).collect();
        out.sort();
        out.dedup();
        out
    }

    /// The schema object at `pointer` (a location `jsonschema` reported).
    fn schema_at(&self, pointer: &str) -> Option<&Value> {
        self.schema.pointer(pointer)
    }

    /// The schema object holding the keyword an error came from.
    fn keyword_parent(&self, error: &ValidationError<'_>) -> Option<&Value> {
        let path = error.schema_path().as_str();
        let parent = &path[..path.rfind('/')?];
        self.schema_at(parent)
    }

    /// The target of a schema's local `$ref` (`#/...`), if it has one.
    fn ref_target(&self, schema: &Value) -> Option<&Value> {
        let r = schema.get("$ref")?.as_str()?;
        self.schema.pointer(r.strip_prefix('#')?)
    }

    /// Follow local `$ref`s of a schema that has no `type` of its own.
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        let mut schema = schema;
        for _ in 0..DESCRIBE_DEPTH {
            if schema.get("type").is_some() {
                break;
            }
            match self.ref_target(schema) {
                Some(target) => schema = target,
                None => break,
            }
        }
        schema
    }

    fn explain(&self, error: &ValidationError<'_>, out: &mut Vec<Found>) {
        let path = error.instance_path().as_str();
        let instance: &Value = error.instance();
        let msg = |message: String| Found::value(path, message);
        match error.kind() {
            ValidationErrorKind::Type { kind } => {
                let nouns = self.type_error_nouns(error, kind);
                out.push(msg(format!(
                    "expected {}, found {}",
                    join_or(nouns),
                    found(instance)
                )));
            }
            ValidationErrorKind::Required { property } => {
                out.push(msg(format!("missing required property {property}")));
            }
            ValidationErrorKind::Enum { options } => {
                let options = options.as_array().map(Vec::as_slice).unwrap_or_default();
                out.push(msg(expected_values(options.iter(), instance)));
            }
            ValidationErrorKind::Constant { expected_value } => {
                out.push(msg(expected_values([&**expected_value], instance)));
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                let allowed = self
                    .keyword_parent(error)
                    .map(|s| self.property_names(s, false, 0))
                    .unwrap_or_default();
                self.unknown_properties(path, instance, unexpected, &allowed, out);
            }
            ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                let allowed = self
                    .keyword_parent(error)
                    .map(|s| self.property_names(s, true, 0))
                    .unwrap_or_default();
                self.unknown_properties(path, instance, unexpected, &allowed, out);
            }
            ValidationErrorKind::AnyOf { context }
            | ValidationErrorKind::OneOfNotValid { context } => {
                self.explain_alternatives(error, context, out);
            }
            ValidationErrorKind::OneOfMultipleValid { context } => {
                let labels = self.matching_labels(error, context);
                out.push(msg(format!(
                    "expected exactly one alternative to match, found {} that match: {}",
                    labels.len(),
                    labels.join(", ")
                )));
            }
            ValidationErrorKind::Minimum { limit } => {
                out.push(msg(format!("expected at least {limit}, found {instance}")));
            }
            ValidationErrorKind::Maximum { limit } => {
                out.push(msg(format!("expected at most {limit}, found {instance}")));
            }
            ValidationErrorKind::ExclusiveMinimum { limit } => {
                out.push(msg(format!("expected more than {limit}, found {instance}")));
            }
            ValidationErrorKind::ExclusiveMaximum { limit } => {
                out.push(msg(format!("expected less than {limit}, found {instance}")));
            }
            ValidationErrorKind::MultipleOf { multiple_of, .. } => {
                out.push(msg(format!(
                    "expected a multiple of {multiple_of}, found {instance}"
                )));
            }
            ValidationErrorKind::MinLength { limit } => {
                let len = instance.as_str().map_or(0, |s| s.chars().count());
                out.push(msg(format!(
                    "expected at least {}, found {}",
                    counted(*limit, "character"),
                    counted(len as u64, "character")
                )));
            }
            ValidationErrorKind::MaxLength { limit } => {
                let len = instance.as_str().map_or(0, |s| s.chars().count());
                out.push(msg(format!(
                    "expected at most {}, found {}",
                    counted(*limit, "character"),
                    counted(len as u64, "character")
                )));
            }
            ValidationErrorKind::MinItems { limit } => {
                out.push(msg(format!(
                    "expected at least {}, found {}",
                    counted(*limit, "item"),
                    len_of(instance)
                )));
            }
            ValidationErrorKind::MaxItems { limit } => {
                out.push(msg(format!(
                    "expected at most {}, found {}",
                    counted(*limit, "item"),
                    len_of(instance)
                )));
            }
            ValidationErrorKind::AdditionalItems { limit } => {
                out.push(msg(format!(
                    "expected at most {}, found {}",
                    counted(*limit as u64, "item"),
                    len_of(instance)
                )));
            }
            ValidationErrorKind::MinProperties { limit } => {
                out.push(msg(format!(
                    "expected at least {}, found {}",
                    counted_properties(*limit),
                    len_of(instance)
                )));
            }
            ValidationErrorKind::MaxProperties { limit } => {
                out.push(msg(format!(
                    "expected at most {}, found {}",
                    counted_properties(*limit),
                    len_of(instance)
                )));
            }
            ValidationErrorKind::Pattern { pattern } => {
                out.push(msg(format!(
                    "expected a string matching /{pattern}/, found {}",
                    found(instance)
                )));
            }
            ValidationErrorKind::Format { format } => {
                out.push(msg(format!(
                    "expected a string in {format} format, found {}",
                    found(instance)
                )));
            }
            ValidationErrorKind::UniqueItems => {
                let dup = duplicate_item(instance).map_or_else(
                    || "duplicates".to_owned(),
                    |v| format!("{} more than once", found(v)),
                );
                out.push(msg(format!("expected unique items, found {dup}")));
            }
            ValidationErrorKind::Contains => {
                let what = self
                    .schema_at(error.schema_path().as_str())
                    .map(|s| self.nouns(s, false, 0))
                    .filter(|n| !n.is_empty())
                    .map_or_else(
                        || "matching the schema".to_owned(),
                        |n| format!("that is {}", join_or(n)),
                    );
                out.push(msg(format!(
                    "expected at least one item {what}, found none"
                )));
            }
            ValidationErrorKind::Not { .. } => {
                out.push(msg(format!(
                    "expected a value the schema does not exclude, found {}",
                    found(instance)
                )));
            }
            ValidationErrorKind::FalseSchema => {
                out.push(msg(format!(
                    "expected no value here, found {}",
                    found(instance)
                )));
            }
            ValidationErrorKind::PropertyNames { error: inner } => {
                let name = inner.instance().as_str().unwrap_or_default().to_owned();
                let pointer = pointer_join(path, &name);
                let mut inner_found = Vec::new();
                self.explain(inner, &mut inner_found);
                for f in inner_found {
                    out.push(Found {
                        pointer: pointer.clone(),
                        at_key: true,
                        message: format!(
                            "invalid property name {}: {}",
                            Value::from(name.as_str()),
                            f.message
                        ),
                    });
                }
            }
            ValidationErrorKind::UnevaluatedItems { unexpected } => {
                out.push(msg(format!(
                    "expected no further items, found {}",
                    counted(unexpected.len() as u64, "unexpected item")
                )));
            }
            ValidationErrorKind::ContentEncoding { content_encoding } => {
                out.push(msg(format!(
                    "expected {content_encoding}-encoded content, found {}",
                    found(instance)
                )));
            }
            ValidationErrorKind::FromUtf8 { .. } => {
                out.push(msg(
                    "expected encoded content that decodes to UTF-8 text".into()
                ));
            }
            ValidationErrorKind::ContentMediaType { content_media_type } => {
                out.push(msg(format!(
                    "expected content of media type {content_media_type}, found {}",
                    found(instance)
                )));
            }
            ValidationErrorKind::BacktrackLimitExceeded { error } => {
                out.push(msg(format!("could not check the pattern: {error}")));
            }
            ValidationErrorKind::RegexEngineFailure { message } => {
                out.push(msg(format!("could not check the pattern: {message}")));
            }
            ValidationErrorKind::Custom { message, .. } => out.push(msg(message.clone())),
            ValidationErrorKind::Referencing(e) => {
                out.push(msg(format!("could not resolve a schema reference: {e}")));
            }
        }
    }

    /// One violation per unexpected property, at its key.
    fn unknown_properties(
        &self,
        path: &str,
        instance: &Value,
        unexpected: &[String],
        allowed: &[String],
        out: &mut Vec<Found>,
    ) {
        // Suggest only names the object does not already use.
        let candidates: Vec<&str> = allowed
            .iter()
            .map(String::as_str)
            .filter(|name| instance.get(name).is_none())
            .collect();
        for name in unexpected {
            let quoted = Value::from(name.as_str());
            let message = match did_you_mean(name, &candidates) {
                Some(s) => format!(
                    "unknown property {quoted}; did you mean {}?",
                    Value::from(s)
                ),
                None if !allowed.is_empty() && allowed.len() <= LIST_PROPERTIES => format!(
                    "unknown property {quoted}; expected one of {}",
                    allowed
                        .iter()
                        .map(|a| Value::from(a.as_str()).to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => format!("unknown property {quoted}"),
            };
            out.push(Found {
                pointer: pointer_join(path, name),
                at_key: true,
                message,
            });
        }
    }

    /// Property names a schema declares (`properties`); with `deep`, also
    /// those of the subschemas evaluated with it (for `unevaluatedProperties`).
    fn property_names(&self, schema: &Value, deep: bool, depth: usize) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        if depth > DESCRIBE_DEPTH {
            return names;
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            names.extend(props.keys().cloned());
        }
        if deep {
            let mut subs: Vec<&Value> = Vec::new();
            for key in ["allOf", "anyOf", "oneOf"] {
                if let Some(items) = schema.get(key).and_then(Value::as_array) {
                    subs.extend(items);
                }
            }
            for key in ["then", "else"] {
                subs.extend(schema.get(key));
            }
            subs.extend(self.ref_target(schema));
            for sub in subs {
                for name in self.property_names(sub, true, depth + 1) {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        names
    }

    /// Noun phrases for what a `type` error expected ("a string", "an array
    /// of strings"), in the schema's order.
    fn type_error_nouns(&self, error: &ValidationError<'_>, kind: &TypeKind) -> Vec<String> {
        if let Some(parent) = self.keyword_parent(error) {
            let nouns = self.nouns(parent, false, 0);
            if !nouns.is_empty() {
                return nouns;
            }
        }
        let names: Vec<&str> = match kind {
            TypeKind::Single(t) => vec![t.as_str()],
            TypeKind::Multiple(set) => set.iter().map(|t| t.as_str()).collect(),
        };
        type_nouns(&names, false)
    }

    /// What a schema accepts, as noun phrases; empty when it does not say.
    fn nouns(&self, schema: &Value, plural: bool, depth: usize) -> Vec<String> {
        if depth > DESCRIBE_DEPTH {
            return Vec::new();
        }
        let schema = self.resolve(schema);
        let names: Vec<&str> = match schema.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.is_empty() {
            let mut nouns = type_nouns(&names, plural);
            // Say what an array holds: "an array of strings".
            if let Some(items) = schema.get("items").filter(|i| i.is_object()) {
                let inner = self.nouns(items, true, depth + 1);
                if !inner.is_empty() {
                    let array = type_noun("array", plural);
                    for noun in &mut nouns {
                        if *noun == array {
                            *noun = format!("{array} of {}", join_or(inner.clone()));
                        }
                    }
                }
            }
            return nouns;
        }
        let values: Vec<&Value> = match (schema.get("const"), schema.get("enum")) {
            (Some(c), _) => vec![c],
            (None, Some(Value::Array(vs))) => vs.iter().collect(),
            _ => Vec::new(),
        };
        if !values.is_empty() {
            let names: Vec<&str> = values.iter().map(|v| json_type(v)).collect();
            return type_nouns(&names, plural);
        }
        let mut nouns = Vec::new();
        for key in ["anyOf", "oneOf"] {
            for branch in schema
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for noun in self.nouns(branch, plural, depth + 1) {
                    if !nouns.contains(&noun) {
                        nouns.push(noun);
                    }
                }
            }
        }
        nouns
    }

    /// `anyOf` / `oneOf` with no matching alternative: report the errors of
    /// the alternative the user most plausibly meant.
    fn explain_alternatives(
        &self,
        error: &ValidationError<'_>,
        context: &[Vec<ValidationError<'static>>],
        out: &mut Vec<Found>,
    ) {
        let path = error.instance_path().as_str();
        let instance: &Value = error.instance();
        let rejections: Vec<Option<Vec<String>>> = context
            .iter()
            .map(|branch| self.type_rejection(branch, path, instance))
            .collect();
        let accepting: Vec<usize> = (0..context.len())
            .filter(|&i| rejections[i].is_none() && !context[i].is_empty())
            .collect();
        if accepting.is_empty() {
            let mut nouns: Vec<String> = Vec::new();
            for noun in rejections.into_iter().flatten().flatten() {
                if !nouns.contains(&noun) {
                    nouns.push(noun);
                }
            }
            let expected = if nouns.is_empty() {
                "a value matching one of the alternatives".to_owned()
            } else {
                join_or(nouns)
            };
            out.push(Found::value(
                path,
                format!("expected {expected}, found {}", found(instance)),
            ));
            return;
        }
        // Tagged enums: every alternative of the right type rejects the same
        // property (the tag) by `const`/`enum` — list every allowed tag.
        let tags: Vec<Option<&ValidationError<'static>>> = accepting
            .iter()
            .map(|&i| tag_mismatch(&context[i], path))
            .collect();
        if let Some(found) = merged_tag_mismatch(&tags) {
            out.push(found);
            return;
        }
        // Alternatives that differ only in one required property each
        // (untagged structs given an empty object): name them all.
        if accepting.len() > 1 {
            let missing: Option<Vec<&Value>> = accepting
                .iter()
                .map(|&i| match context[i].as_slice() {
                    [only] if only.instance_path().as_str() == path => match only.kind() {
                        ValidationErrorKind::Required { property } => Some(property),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            if let Some(mut missing) = missing {
                missing.dedup();
                let names: Vec<String> = missing.iter().map(|p| p.to_string()).collect();
                out.push(Found::value(
                    path,
                    format!("missing required property {}", join_or(names)),
                ));
                return;
            }
        }
        let best = accepting
            .iter()
            .zip(&tags)
            .min_by_key(|&(&i, tag)| {
                let branch = &context[i];
                let depth = branch
                    .iter()
                    .map(|e| depth_below(e.instance_path().as_str(), path))
                    .max()
                    .unwrap_or(0);
                (tag.is_some(), Reverse(depth), branch.len(), i)
            })
            .map(|(&i, _)| i);
        if let Some(best) = best {
            for e in &context[best] {
                self.explain(e, out);
            }
        }
    }

    /// `Some(what the branch accepts)` when a branch rejects the instance by
    /// its JSON type (at the alternative's own location); `None` otherwise.
    fn type_rejection(
        &self,
        branch: &[ValidationError<'static>],
        path: &str,
        instance: &Value,
    ) -> Option<Vec<String>> {
        for e in branch.iter().filter(|e| e.instance_path().as_str() == path) {
            match e.kind() {
                ValidationErrorKind::Type { kind } => return Some(self.type_error_nouns(e, kind)),
                ValidationErrorKind::Constant { expected_value }
                    if !same_kind(expected_value, instance) =>
                {
                    return Some(type_nouns(&[json_type(expected_value)], false));
                }
                ValidationErrorKind::Enum { options }
                    if options
                        .as_array()
                        .is_some_and(|o| !o.iter().any(|o| same_kind(o, instance))) =>
                {
                    let names: Vec<&str> = options
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(json_type)
                        .collect();
                    return Some(type_nouns(&names, false));
                }
                ValidationErrorKind::AnyOf { context }
                | ValidationErrorKind::OneOfNotValid { context } => {
                    let mut nouns = Vec::new();
                    for sub in context {
                        for noun in self.type_rejection(sub, path, instance)? {
                            if !nouns.contains(&noun) {
                                nouns.push(noun);
                            }
                        }
                    }
                    return Some(nouns);
                }
                _ => {}
            }
        }
        None
    }

    /// Labels of the `oneOf` alternatives that all matched.
    fn matching_labels(
        &self,
        error: &ValidationError<'_>,
        context: &[Vec<ValidationError<'static>>],
    ) -> Vec<String> {
        let branches = self
            .schema_at(error.schema_path().as_str())
            .and_then(Value::as_array);
        context
            .iter()
            .enumerate()
            .filter(|(_, errors)| errors.is_empty())
            .map(|(i, _)| {
                let label = branches.and_then(|b| b.get(i)).and_then(|branch| {
                    let named = branch
                        .get("title")
                        .and_then(Value::as_str)
                        .or_else(|| {
                            branch
                                .get("$ref")
                                .and_then(Value::as_str)
                                .and_then(|r| r.rsplit('/').next())
                        })
                        .map(str::to_owned);
                    named.or_else(|| {
                        let nouns = self.nouns(branch, false, 0);
                        (!nouns.is_empty()).then(|| join_or(nouns))
                    })
                });
                match label {
                    Some(label) => format!("#{} ({label})", i + 1),
                    None => format!("#{}", i + 1),
                }
            })
            .collect()
    }
}

/// The error by which a branch rejects the alternative's value, or one of its
/// direct properties, with `const`/`enum`: how a wrong tag of a tagged enum
/// shows, or a wrong value of an enum whose variants are documented (schemars
/// renders those as `oneOf` of one `const` each).
fn tag_mismatch<'e>(
    branch: &'e [ValidationError<'static>],
    path: &str,
) -> Option<&'e ValidationError<'static>> {
    branch.iter().find(|e| {
        matches!(
            e.kind(),
            ValidationErrorKind::Constant { .. } | ValidationErrorKind::Enum { .. }
        ) && depth_below(e.instance_path().as_str(), path) <= 1
    })
}

/// When every alternative rejects the same value by `const`/`enum` (each
/// alternative fixing its own tag or value): one message listing every
/// allowed value, at that value.
fn merged_tag_mismatch(tags: &[Option<&ValidationError<'static>>]) -> Option<Found> {
    if tags.len() < 2 {
        return None;
    }
    let first = (*tags.first()?)?;
    let at = first.instance_path().as_str();
    let mut values: Vec<&Value> = Vec::new();
    for tag in tags {
        let tag = (*tag).filter(|t| t.instance_path().as_str() == at)?;
        let tag_values: Vec<&Value> = match tag.kind() {
            ValidationErrorKind::Constant { expected_value } => vec![&**expected_value],
            ValidationErrorKind::Enum { options } => {
                options.as_array().into_iter().flatten().collect()
            }
            _ => Vec::new(),
        };
        for v in tag_values {
            if !values.contains(&v) {
                values.push(v);
            }
        }
    }
    Some(Found::value(at, expected_values(values, first.instance())))
}

/// How many pointer tokens `pointer` has below `base`.
fn depth_below(pointer: &str, base: &str) -> usize {
    pointer
        .strip_prefix(base)
        .map_or(0, |rest| rest.matches('/').count())
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether two values have the same JSON type (all numbers are one type).
fn same_kind(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn type_noun(name: &str, plural: bool) -> String {
    let (one, many) = match name {
        "string" => ("a string", "strings"),
        "integer" => ("an integer", "integers"),
        "number" => ("a number", "numbers"),
        "boolean" => ("a boolean", "booleans"),
        "object" => ("an object", "objects"),
        "array" => ("an array", "arrays"),
        "null" => ("null", "nulls"),
        other => return other.to_owned(),
    };
    if plural { many } else { one }.to_owned()
}

/// Noun phrases for JSON type names, deduplicated; `integer` is dropped when
/// `number` (which includes it) is there too.
fn type_nouns(names: &[&str], plural: bool) -> Vec<String> {
    let has_number = names.contains(&"number");
    let mut nouns: Vec<String> = Vec::new();
    for name in names {
        if *name == "integer" && has_number {
            continue;
        }
        let noun = type_noun(name, plural);
        if !nouns.contains(&noun) {
            nouns.push(noun);
        }
    }
    nouns
}

/// "a", "a or b", "a, b or c"; `null` is left out unless it is all there is.
fn join_or(mut nouns: Vec<String>) -> String {
    if nouns.len() > 1 {
        nouns.retain(|n| n != "null" && n != "nulls");
    }
    match nouns.as_slice() {
        [] => "a value".to_owned(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// How to name a value the user wrote: short scalars verbatim, the rest by type.
/// A value as messages name it (`"abc"`, `5`, `an object`…).
pub(crate) fn describe(v: &Value) -> String {
    found(v)
}

fn found(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() <= SHORT_STRING => v.to_string(),
        Value::String(_) => "a string".to_owned(),
        Value::Array(a) if a.is_empty() => "an empty array".to_owned(),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(o) if o.is_empty() => "an empty object".to_owned(),
        Value::Object(_) => "an object".to_owned(),
        other => other.to_string(),
    }
}

/// `expected one of "a", "b", found "c"` (with a suggestion when close).
fn expected_values<'v>(options: impl IntoIterator<Item = &'v Value>, instance: &Value) -> String {
    let options: Vec<&Value> = options.into_iter().collect();
    let mut listed: Vec<String> = options
        .iter()
        .take(LIST_VALUES)
        .map(|v| {
            let s = v.to_string();
            if s.chars().count() > SHORT_STRING {
                found(v)
            } else {
                s
            }
        })
        .collect();
    if options.len() > LIST_VALUES {
        listed.push(format!("... ({} more)", options.len() - LIST_VALUES));
    }
    let expected = match listed.as_slice() {
        [one] => one.clone(),
        _ => format!("one of {}", listed.join(", ")),
    };
    let mut message = format!("expected {expected}, found {}", found(instance));
    if let Some(s) = instance.as_str() {
        let strings: Vec<&str> = options.iter().filter_map(|v| v.as_str()).collect();
        if let Some(close) = did_you_mean(s, &strings).filter(|c| *c != s) {
            message.push_str(&format!("; did you mean {}?", Value::from(close)));
        }
    }
    message
}

fn counted(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn counted_properties(n: u64) -> String {
    if n == 1 {
        "1 property".to_owned()
    } else {
        format!("{n} properties")
    }
}

fn len_of(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    }
}

fn duplicate_item(v: &Value) -> Option<&Value> {
    let items = v.as_array()?;
    items
        .iter()
        .enumerate()
        .find(|(i, item)| items[..*i].contains(item))
        .map(|(_, item)| item)
}

/// The closest candidate within a small edit distance (case-insensitive;
/// at most 1 edit for names of 3 characters or fewer, else at most 2).
pub(crate) fn did_you_mean<'c>(name: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let name_lc: Vec<char> = name.to_lowercase().chars().collect();
    let limit = if name_lc.len() <= 3 { 1 } else { 2 };
    candidates
        .iter()
        .map(|c| {
            let c_lc: Vec<char> = c.to_lowercase().chars().collect();
            (edit_distance(&name_lc, &c_lc), *c)
        })
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// The [`edit_distance`] of two strings, in characters (case-sensitive).
pub fn text_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    edit_distance(&a, &b)
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    d[0] = (0..=m).collect();
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[n][m]
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use schemars::JsonSchema;
    use serde::Deserialize;

    use serde_json::json;

    use super::*;
    use crate::jsonc::parse;

    /// A socket: `{host, port}` or `{path}`.
    #[derive(JsonSchema, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Socket {
        host: Option<String>,
        #[schemars(range(min = 1, max = 65535))]
        port: Option<u32>,
        path: Option<String>,
    }

    /// A path string or a socket object.
    #[derive(JsonSchema, Deserialize)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum SocketField {
        Path(String),
        Object(Socket),
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Transport {
        Stdio,
        Tcp,
        Socket,
    }

    /// Internally tagged enum (schemars: `oneOf` of objects with a `const` tag).
    #[derive(JsonSchema, Deserialize)]
    #[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
    #[allow(dead_code)]
    enum Auth {
        Token { token: String },
        Oauth { client: String, scopes: Vec<String> },
        None,
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Server {
        command: String,
        args: Option<Vec<String>>,
        env: Option<BTreeMap<String, String>>,
        transport: Option<Transport>,
        socket: Option<SocketField>,
        #[schemars(range(min = 1))]
        timeout: Option<u64>,
        auth: Option<Auth>,
        #[schemars(length(min = 2, max = 8), regex(pattern = r"^[a-z]+$"))]
        name: Option<String>,
        #[schemars(length(min = 1))]
        include_tools: Option<Vec<String>>,
        #[schemars(url)]
        home_page: Option<String>,
        trust: Option<bool>,
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code)]
    struct File {
        #[serde(rename = "$schema")]
        schema: Option<String>,
        mcp_servers: BTreeMap<String, Server>,
        version: Option<u32>,
    }

    fn validator() -> SchemaValidator {
        SchemaValidator::for_type::<File>().expect("schema compiles")
    }

    /// `(pointer, "line:column", message)` for every violation in `text`.
    fn check(text: &str) -> Vec<(String, String, String)> {
        let doc = parse(text).expect("test input parses");
        validator()
            .check(&doc)
            .into_iter()
            .map(|v| {
                let at = v
                    .pos
                    .map_or("-".into(), |p| format!("{}:{}", p.line, p.column));
                (v.pointer, at, v.message)
            })
            .collect()
    }

    fn server(body: &str) -> Vec<(String, String, String)> {
        check(&format!("{{\"mcpServers\": {{\"s\": {{{body}}}}}}}"))
    }

    /// Untagged enum of two structs (schemars: `anyOf` of two `$ref`s).
    #[derive(JsonSchema, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Stdio {
        command: String,
        args: Option<Vec<String>>,
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Http {
        url: String,
        headers: Option<BTreeMap<String, String>>,
    }

    #[derive(JsonSchema, Deserialize)]
    #[serde(untagged)]
    #[allow(dead_code)]
    enum Entry {
        Stdio(Stdio),
        Http(Http),
    }

    fn violations(validator: &SchemaValidator, text: &str) -> Vec<(String, String, String)> {
        let doc = parse(text).expect("test input parses");
        validator
            .check(&doc)
            .into_iter()
            .map(|v| {
                let at = v
                    .pos
                    .map_or("-".into(), |p| format!("{}:{}", p.line, p.column));
                (v.pointer, at, v.message)
            })
            .collect()
    }

    fn v(pointer: &str, at: &str, message: &str) -> (String, String, String) {
        (pointer.into(), at.into(), message.into())
    }

    fn with_schema(schema: Value, text: &str) -> Vec<(String, String, String)> {
        violations(
            &SchemaValidator::new(&schema).expect("schema compiles"),
            text,
        )
    }

    #[test]
    fn valid_documents_have_no_violations() {
        let text = r#"{
  "$schema": "./x.json",
  // comments are fine
  "mcpServers": {
    "a": {"command": "npx", "args": ["-y", "s"], "env": {"A": "1"}, "transport": "tcp",
          "socket": {"host": "h", "port": 9}, "timeout": 5, "auth": {"type": "none"},
          "name": "abc", "includeTools": ["t"], "homePage": "https://x.dev", "trust": null},
    "b": {"command": "y", "socket": "/tmp/s", "auth": {"type": "oauth", "client": "c", "scopes": []}}
  },
  "version": 1
}"#;
        assert_eq!(check(text), vec![]);
    }

    #[test]
    fn type_errors_name_the_expected_type_and_the_value_found() {
        let text = r#"{
  "mcpServers": {
    "a": {
      "command": "npx",
      "args": "-y server",
      "timeout": "10",
      "trust": "yes",
      "env": {"A": 1, "B": ["x"]},
      "socket": 5,
      "homePage": 42,
      "name": "a very long name that is not quoted in the message at all"
    }
  },
  "version": 1.5
}"#;
        assert_eq!(
            check(text),
            vec![
                v(
                    "/mcpServers/a/args",
                    "5:15",
                    "expected an array of strings, found \"-y server\""
                ),
                v(
                    "/mcpServers/a/timeout",
                    "6:18",
                    "expected an integer, found \"10\""
                ),
                v(
                    "/mcpServers/a/trust",
                    "7:16",
                    "expected a boolean, found \"yes\""
                ),
                v("/mcpServers/a/env/A", "8:20", "expected a string, found 1"),
                v(
                    "/mcpServers/a/env/B",
                    "8:28",
                    "expected a string, found an array"
                ),
                v(
                    "/mcpServers/a/socket",
                    "9:17",
                    "expected a string or an object, found 5"
                ),
                v(
                    "/mcpServers/a/homePage",
                    "10:19",
                    "expected a string, found 42"
                ),
                v(
                    "/mcpServers/a/name",
                    "11:15",
                    "expected a string matching /^[a-z]+$/, found a string"
                ),
                v(
                    "/mcpServers/a/name",
                    "11:15",
                    "expected at most 8 characters, found 57 characters"
                ),
                v("/version", "14:14", "expected an integer, found 1.5"),
            ]
        );
        assert_eq!(
            check("[]"),
            vec![v("", "1:1", "expected an object, found an empty array")]
        );
        assert_eq!(
            check(r#"{"mcpServers": {"a": "npx"}}"#),
            vec![v(
                "/mcpServers/a",
                "1:22",
                "expected an object, found \"npx\""
            )]
        );
    }

    #[test]
    fn null_is_named_only_when_it_is_all_that_is_allowed() {
        assert_eq!(
            with_schema(json!({"type": "null"}), "1"),
            vec![v("", "1:1", "expected null, found 1")]
        );
        assert_eq!(
            with_schema(json!({"type": ["string", "null", "integer"]}), "true"),
            vec![v("", "1:1", "expected a string or an integer, found true")]
        );
        assert_eq!(
            with_schema(json!({"type": ["integer", "number"]}), "{}"),
            vec![v("", "1:1", "expected a number, found an empty object")]
        );
        // Option<Enum> given the wrong type: anyOf [$ref, null].
        assert_eq!(
            server(r#""command": "x", "transport": 1, "auth": []"#),
            vec![
                v(
                    "/mcpServers/s/transport",
                    "1:52",
                    "expected a string, found 1"
                ),
                v(
                    "/mcpServers/s/auth",
                    "1:63",
                    "expected an object, found an empty array"
                ),
            ]
        );
    }

    #[test]
    fn missing_required_property_points_at_the_object() {
        let text = "{\n  \"mcpServers\": {\n    \"a\": {\n      \"args\": []\n    }\n  }\n}";
        assert_eq!(
            check(text),
            vec![v(
                "/mcpServers/a",
                "3:10",
                "missing required property \"command\""
            )]
        );
        assert_eq!(
            check("{}"),
            vec![v("", "1:1", "missing required property \"mcpServers\"")]
        );
    }

    #[test]
    fn enum_and_const_list_the_allowed_values() {
        assert_eq!(
            server(r#""command": "x", "transport": "udp""#),
            vec![v(
                "/mcpServers/s/transport",
                "1:52",
                "expected one of \"stdio\", \"tcp\", \"socket\", found \"udp\""
            )]
        );
        assert_eq!(
            server(r#""command": "x", "transport": "Tcp""#),
            vec![v(
                "/mcpServers/s/transport",
                "1:52",
                "expected one of \"stdio\", \"tcp\", \"socket\", found \"Tcp\"; did you mean \"tcp\"?"
            )]
        );
        assert_eq!(
            with_schema(json!({"const": "v1"}), r#""v2""#),
            vec![v(
                "",
                "1:1",
                "expected \"v1\", found \"v2\"; did you mean \"v1\"?"
            )]
        );
        assert_eq!(
            with_schema(json!({"enum": [1, 2, null]}), "3"),
            vec![v("", "1:1", "expected one of 1, 2, null, found 3")]
        );
    }

    #[test]
    fn unknown_property_suggests_a_close_name_at_the_key() {
        let text = r#"{
  "mcpServers": {
    "a": {
      "comand": "npx",
      "socket": {"path": "/s", "prot": 1, "zzz": 2},
      "enviroment": {}
    }
  },
  "verison": 1
}"#;
        assert_eq!(
            check(text),
            vec![
                v(
                    "/mcpServers/a",
                    "3:10",
                    "missing required property \"command\""
                ),
                v(
                    "/mcpServers/a/comand",
                    "4:7",
                    "unknown property \"comand\"; did you mean \"command\"?"
                ),
                v(
                    "/mcpServers/a/socket/prot",
                    "5:32",
                    "unknown property \"prot\"; did you mean \"port\"?"
                ),
                v(
                    "/mcpServers/a/socket/zzz",
                    "5:43",
                    "unknown property \"zzz\"; expected one of \"host\", \"path\", \"port\""
                ),
                v(
                    "/mcpServers/a/enviroment",
                    "6:7",
                    "unknown property \"enviroment\""
                ),
                v(
                    "/verison",
                    "9:3",
                    "unknown property \"verison\"; did you mean \"version\"?"
                ),
            ]
        );
        // A name the object already uses is not suggested again.
        assert_eq!(
            server(r#""command": "x", "comand": "y""#),
            vec![v(
                "/mcpServers/s/comand",
                "1:39",
                "unknown property \"comand\""
            )]
        );
        // Keys needing pointer escapes.
        assert_eq!(
            server(r#""command": "x", "a/b~": 1"#),
            vec![v(
                "/mcpServers/s/a~1b~0",
                "1:39",
                "unknown property \"a/b~\""
            )]
        );
    }

    #[test]
    fn untagged_string_or_object_reports_the_alternative_of_the_same_type() {
        // Object given: the object alternative's errors, not "not valid under any".
        assert_eq!(
            server(r#""command": "x", "socket": {"host": 1, "port": 70000}"#),
            vec![
                v(
                    "/mcpServers/s/socket/host",
                    "1:58",
                    "expected a string, found 1"
                ),
                v(
                    "/mcpServers/s/socket/port",
                    "1:69",
                    "expected at most 65535, found 70000"
                ),
            ]
        );
        // Neither type: list what the alternatives accept (null left out).
        assert_eq!(
            server(r#""command": "x", "socket": [1]"#),
            vec![v(
                "/mcpServers/s/socket",
                "1:49",
                "expected a string or an object, found an array"
            )]
        );
        assert_eq!(server(r#""command": "x", "socket": "/tmp/sock""#), vec![]);
    }

    #[test]
    fn tagged_enum_reports_the_variant_its_tag_names() {
        let text = r#"{"mcpServers": {"s": {"command": "x", "auth": {
  "type": "oauth",
  "client": "c",
  "scopes": ["a", 2]
}}}}"#;
        assert_eq!(
            check(text),
            vec![v(
                "/mcpServers/s/auth/scopes/1",
                "4:19",
                "expected a string, found 2"
            )]
        );
        assert_eq!(
            server(r#""command": "x", "auth": {"type": "oauth", "client": "c", "scope": []}"#),
            vec![
                v(
                    "/mcpServers/s/auth",
                    "1:47",
                    "missing required property \"scopes\""
                ),
                v(
                    "/mcpServers/s/auth/scope",
                    "1:80",
                    "unknown property \"scope\"; did you mean \"scopes\"?"
                ),
            ]
        );
        // A wrong tag: every tag is listed, at the tag.
        assert_eq!(
            server(r#""command": "x", "auth": {"type": "tokn", "token": "t"}"#),
            vec![v(
                "/mcpServers/s/auth/type",
                "1:56",
                "expected one of \"token\", \"oauth\", \"none\", found \"tokn\"; did you mean \"token\"?"
            )]
        );
        assert_eq!(
            server(r#""command": "x", "auth": {"type": "none", "token": "t"}"#),
            vec![v(
                "/mcpServers/s/auth/token",
                "1:64",
                "unknown property \"token\"; expected one of \"type\""
            )]
        );
        assert_eq!(
            server(r#""command": "x", "auth": {"token": "t"}"#),
            vec![v(
                "/mcpServers/s/auth",
                "1:47",
                "missing required property \"type\""
            )]
        );
        assert_eq!(
            server(r#""command": "x", "auth": "token""#),
            vec![v(
                "/mcpServers/s/auth",
                "1:47",
                "expected an object, found \"token\""
            )]
        );
    }

    /// Documented variants: schemars renders `oneOf` of one `const` each.
    #[derive(JsonSchema, Deserialize)]
    #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
    #[allow(dead_code)]
    enum Level {
        /// Trusted.
        TrustFolder,
        /// Parent trusted.
        TrustParent,
        /// Not trusted.
        DoNotTrust,
    }

    #[test]
    fn documented_enum_variants_list_every_value() {
        let trust = SchemaValidator::for_type::<BTreeMap<String, Level>>().unwrap();
        assert_eq!(
            violations(
                &trust,
                r#"{"/a": "TRUST_FOLDR", "/b": 1, "/c": "DO_NOT_TRUST"}"#
            ),
            vec![
                v(
                    "/~1a",
                    "1:8",
                    "expected one of \"TRUST_FOLDER\", \"TRUST_PARENT\", \"DO_NOT_TRUST\", found \"TRUST_FOLDR\"; did you mean \"TRUST_FOLDER\"?"
                ),
                v("/~1b", "1:29", "expected a string, found 1"),
            ]
        );
    }

    #[test]
    fn untagged_structs_report_the_alternative_that_got_furthest() {
        let entries = SchemaValidator::for_type::<BTreeMap<String, Entry>>().unwrap();
        let check = |text: &str| violations(&entries, text);
        assert_eq!(
            check(r#"{"a": {"command": "x", "args": [1, "b", true]}}"#),
            vec![
                v("/a/args/0", "1:33", "expected a string, found 1"),
                v("/a/args/2", "1:41", "expected a string, found true"),
            ]
        );
        assert_eq!(
            check(r#"{"a": {"url": "u", "headers": {"h": 1}}}"#),
            vec![v("/a/headers/h", "1:37", "expected a string, found 1")]
        );
        assert_eq!(
            check(r#"{"a": {}}"#),
            vec![v(
                "/a",
                "1:7",
                "missing required property \"command\" or \"url\""
            )]
        );
        assert_eq!(
            check(r#"{"a": {"commnd": "x"}}"#),
            vec![
                v("/a", "1:7", "missing required property \"command\""),
                v(
                    "/a/commnd",
                    "1:8",
                    "unknown property \"commnd\"; did you mean \"command\"?"
                ),
            ]
        );
        assert_eq!(
            check(r#"{"a": "x"}"#),
            vec![v("/a", "1:7", "expected an object, found \"x\"")]
        );
    }

    #[test]
    fn one_of_matching_several_alternatives_says_which() {
        let schema = json!({
            "$defs": {"Name": {"type": "string"}},
            "oneOf": [
                {"$ref": "#/$defs/Name"},
                {"type": "integer"},
                {"title": "short text", "type": "string", "maxLength": 3}
            ]
        });
        assert_eq!(
            with_schema(schema.clone(), r#""ab""#),
            vec![v(
                "",
                "1:1",
                "expected exactly one alternative to match, found 2 that match: #1 (Name), #3 (short text)"
            )]
        );
        assert_eq!(with_schema(schema.clone(), "1"), vec![]);
        assert_eq!(
            with_schema(schema, "true"),
            vec![v("", "1:1", "expected a string or an integer, found true")]
        );
        assert_eq!(
            with_schema(
                json!({"oneOf": [{"type": "number"}, {"type": "integer"}]}),
                "1"
            ),
            vec![v(
                "",
                "1:1",
                "expected exactly one alternative to match, found 2 that match: #1 (a number), #2 (an integer)"
            )]
        );
    }

    #[test]
    fn limits_formats_and_other_keywords_read_naturally() {
        let schema = json!({
            "type": "object",
            "properties": {
                "min": {"minimum": 1}, "max": {"maximum": 10}, "xmin": {"exclusiveMinimum": 0},
                "xmax": {"exclusiveMaximum": 10}, "mult": {"multipleOf": 5},
                "minlen": {"minLength": 1}, "maxlen": {"maxLength": 1},
                "minitems": {"minItems": 2}, "maxitems": {"maxItems": 1},
                "minprops": {"minProperties": 1}, "maxprops": {"maxProperties": 1},
                "email": {"format": "email"}, "unique": {"uniqueItems": true},
                "contains": {"contains": {"type": "integer"}}, "not": {"not": {"type": "string"}},
                "never": false, "names": {"propertyNames": {"pattern": "^[a-z]+$"}}
            }
        });
        let text = r#"{
"min": 0, "max": 11, "xmin": 0, "xmax": 10, "mult": 7,
"minlen": "", "maxlen": "ab", "minitems": [1], "maxitems": [1, 2],
"minprops": {}, "maxprops": {"a": 1, "b": 2},
"email": "nope", "unique": ["a", "b", "a"], "contains": ["x"], "not": "s",
"never": 1, "names": {"ok": 1, "Bad": 2}
}"#;
        assert_eq!(
            with_schema(schema, text),
            vec![
                v("/min", "2:8", "expected at least 1, found 0"),
                v("/max", "2:18", "expected at most 10, found 11"),
                v("/xmin", "2:30", "expected more than 0, found 0"),
                v("/xmax", "2:41", "expected less than 10, found 10"),
                v("/mult", "2:53", "expected a multiple of 5, found 7"),
                v(
                    "/minlen",
                    "3:11",
                    "expected at least 1 character, found 0 characters"
                ),
                v(
                    "/maxlen",
                    "3:25",
                    "expected at most 1 character, found 2 characters"
                ),
                v("/minitems", "3:43", "expected at least 2 items, found 1"),
                v("/maxitems", "3:60", "expected at most 1 item, found 2"),
                v("/minprops", "4:13", "expected at least 1 property, found 0"),
                v("/maxprops", "4:29", "expected at most 1 property, found 2"),
                v(
                    "/email",
                    "5:10",
                    "expected a string in email format, found \"nope\""
                ),
                v(
                    "/unique",
                    "5:28",
                    "expected unique items, found \"a\" more than once"
                ),
                v(
                    "/contains",
                    "5:57",
                    "expected at least one item that is an integer, found none"
                ),
                v(
                    "/not",
                    "5:71",
                    "expected a value the schema does not exclude, found \"s\""
                ),
                v("/never", "6:10", "expected no value here, found 1"),
                v(
                    "/names/Bad",
                    "6:32",
                    "invalid property name \"Bad\": expected a string matching /^[a-z]+$/, found \"Bad\""
                ),
            ]
        );
    }

    #[test]
    fn unevaluated_properties_suggest_names_from_every_subschema() {
        let schema = json!({
            "$defs": {"Base": {"properties": {"description": {"type": "string"}}}},
            "allOf": [{"$ref": "#/$defs/Base"}],
            "properties": {"command": {"type": "string"}},
            "unevaluatedProperties": false
        });
        assert_eq!(
            with_schema(schema, r#"{"command": "x", "descripton": "d"}"#),
            vec![v(
                "/descripton",
                "1:18",
                "unknown property \"descripton\"; did you mean \"description\"?"
            )]
        );
    }

    #[test]
    fn refs_resolve_under_a_root_id() {
        // The shape `schemas::map_of` generates: a root `$id`, entries by `$ref`.
        let entry = serde_json::to_value(schemars::schema_for!(Server)).unwrap();
        let mut defs = entry["$defs"].as_object().cloned().unwrap_or_default();
        let mut entry = entry.as_object().cloned().unwrap();
        entry.remove("$defs");
        entry.remove("$schema");
        defs.insert("Server".into(), Value::Object(entry));
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://steward.dev/schemas/v1alpha1/x.schema.json",
            "type": "object",
            "properties": {"$schema": {"type": "string"}},
            "additionalProperties": {"$ref": "#/$defs/Server"},
            "$defs": defs,
        });
        assert_eq!(
            with_schema(
                schema,
                r#"{"a": {"comand": "x", "socket": {"prot": 1}, "auth": {"type": "nne"}}}"#
            ),
            vec![
                v("/a", "1:7", "missing required property \"command\""),
                v(
                    "/a/comand",
                    "1:8",
                    "unknown property \"comand\"; did you mean \"command\"?"
                ),
                v(
                    "/a/socket/prot",
                    "1:34",
                    "unknown property \"prot\"; did you mean \"port\"?"
                ),
                v(
                    "/a/auth/type",
                    "1:63",
                    "expected one of \"token\", \"oauth\", \"none\", found \"nne\"; did you mean \"none\"?"
                ),
            ]
        );
    }

    #[test]
    fn violations_are_sorted_by_position_and_become_diagnostics() {
        let text =
            "{\n  \"version\": -1,\n  \"mcpServers\": {\"b\": {\"command\": 1}, \"a\": {}}\n}";
        let doc = parse(text).unwrap();
        let found = validator().check(&doc);
        let rendered: Vec<String> = found
            .into_iter()
            .map(|v| v.into_diagnostic("/ws/.mcp.json").to_string())
            .collect();
        assert_eq!(
            rendered,
            vec![
                "/ws/.mcp.json:2:14: expected at least 0, found -1 (at /version)",
                "/ws/.mcp.json:3:35: expected a string, found 1 (at /mcpServers/b/command)",
                "/ws/.mcp.json:3:44: missing required property \"command\" (at /mcpServers/a)",
            ]
        );
    }

    #[test]
    fn invalid_schemas_are_errors() {
        let err = SchemaValidator::new(&json!({"type": "nope"})).unwrap_err();
        assert!(err.to_string().starts_with("invalid JSON Schema"), "{err}");
        assert!(SchemaValidator::new(&json!({"$ref": "https://example.com/s.json"})).is_err());
        assert!(SchemaValidator::new(&json!({"$ref": "#/$defs/Missing"})).is_err());
    }

    #[test]
    fn did_you_mean_uses_a_small_edit_distance() {
        let names = ["command", "args", "env", "cwd", "httpUrl"];
        assert_eq!(did_you_mean("comand", &names), Some("command"));
        assert_eq!(did_you_mean("cmomand", &names), Some("command"));
        assert_eq!(did_you_mean("Command", &names), Some("command"));
        assert_eq!(did_you_mean("httpURL", &names), Some("httpUrl"));
        assert_eq!(did_you_mean("arg", &names), Some("args"));
        assert_eq!(did_you_mean("cmd", &names), Some("cwd"));
        assert_eq!(did_you_mean("xyz", &names), None);
        assert_eq!(did_you_mean("commandline", &names), None);
        assert_eq!(edit_distance(&['a', 'b'], &['b', 'a']), 1);
    }
}
