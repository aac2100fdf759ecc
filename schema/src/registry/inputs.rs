//! The values a registry entry asks for — environment variables, headers,
//! arguments, URL and value-template variables — as *questions* with a key
//! the user can name (`--set KEY=VALUE`), and how each is answered: what
//! the user set, else the publisher's `value`, else its `default`, else
//! asked (or an error when nobody can be asked). Secrets (`isSecret`) are
//! never taken from the command line; they are stored and written as
//! `${secret:NAME}`.
//!
//! Keys: an environment variable's or header's name, a named argument's
//! flag without its dashes (`--port` → `port`), a positional argument's
//! `valueHint`, a template variable's name.

use std::collections::{BTreeMap, BTreeSet};

use super::server::{Argument, ArgumentKind, Input, KeyValueInput};

/// Where an answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Env(String),
    Header(String),
    /// An argument of the runtime (`runtime: true`) or the package.
    Argument {
        runtime: bool,
        index: usize,
    },
    /// A variable of a value template or of a remote's URL.
    Variable,
}

/// One value the entry may need.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub key: String,
    pub target: Target,
    pub input: Input,
    /// May be given several times (`--set KEY=a --set KEY=b`).
    pub repeated: bool,
}

impl Question {
    /// Whether the publisher's value uses variables (`{name}`) it defines.
    pub fn is_template(&self) -> bool {
        self.input
            .value
            .as_deref()
            .is_some_and(|v| !template_names(v, &self.input.variables).is_empty())
    }

    /// What the question is, for a prompt or an error.
    pub fn label(&self) -> String {
        let what = match &self.target {
            Target::Env(_) => "environment variable",
            Target::Header(_) => "header",
            Target::Argument { .. } => "argument",
            Target::Variable => "value",
        };
        match &self.input.description {
            Some(d) if !d.trim().is_empty() => format!("{} ({what}: {})", self.key, d.trim()),
            _ => format!("{} ({what})", self.key),
        }
    }
}

/// How a question was answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Literal values (one unless the question is repeated).
    Values(Vec<String>),
    /// The publisher's value, its `{variables}` still to be substituted.
    Template(String),
    /// Secret `name`, written as `${secret:name}`.
    Secret(String),
    /// Left out.
    Omitted,
}

/// Where an answer came from (shown in the plan).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `--set`, or an earlier add (the lock file).
    Given,
    /// The publisher's fixed `value`.
    Publisher,
    Default,
    /// Asked at the terminal, or read with `--secrets-stdin`.
    Asked,
    /// A secret already in the store.
    Stored,
    /// A dry run: it would be asked for.
    WouldAsk,
    Omitted,
}

impl Origin {
    pub fn word(self) -> &'static str {
        match self {
            Origin::Given => "given",
            Origin::Publisher => "publisher's value",
            Origin::Default => "default",
            Origin::Asked => "asked",
            Origin::Stored => "already stored",
            Origin::WouldAsk => "would be asked for",
            Origin::Omitted => "not set",
        }
    }
}

/// What is known before anyone is asked.
#[derive(Debug, Clone, Default)]
pub struct Given {
    /// `--set KEY=VALUE` (and, on update, what was given before).
    pub set: BTreeMap<String, Vec<String>>,
    /// Keys whose secret value is at hand (`--secrets-stdin`).
    pub secret_values: BTreeSet<String>,
    /// Secret names the store already holds.
    pub stored: BTreeSet<String>,
    /// Secret names bound to keys before (update): key → name.
    pub secret_names: BTreeMap<String, String>,
    /// Whether a terminal can be asked.
    pub interactive: bool,
}

/// What to do about one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Answered(Answer, Origin),
    /// Ask the terminal for a value (`required`: an empty answer is refused).
    AskValue {
        required: bool,
    },
    /// Ask the terminal for a secret's value, stored as `name`.
    AskSecret {
        name: String,
        required: bool,
    },
}

/// Why the answers cannot be decided. Messages read after "failed to".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error(
        "take {key} from --set: it is a secret, and secrets are never read from the command line; give it at the prompt or as a KEY=VALUE line with --secrets-stdin"
    )]
    SecretOnCommandLine { key: String },
    #[error("use --set {key}: the entry has no such value (its values are: {known})")]
    UnknownKey { key: String, known: String },
    #[error("use --set {key}: it takes one value, and it was given {count}")]
    NotRepeated { key: String, count: usize },
    #[error("use {key}={value:?}: {why}")]
    Invalid {
        key: String,
        value: String,
        why: String,
    },
    #[error(
        "add the server without {}: {} (not interactive: give {})",
        missing.join(", "),
        if missing.len() == 1 { "it is required" } else { "they are required" },
        hint
    )]
    Missing { missing: Vec<String>, hint: String },
}

/// The questions of an entry's environment variables, headers and
/// arguments, and of the variables their templates use. A variable is
/// listed once even if several values use it.
pub fn questions(
    runtime_args: &[Argument],
    package_args: &[Argument],
    env: &[KeyValueInput],
    headers: &[KeyValueInput],
    url_vars: &BTreeMap<String, Input>,
) -> Vec<Question> {
    let mut out: Vec<Question> = Vec::new();
    let mut vars: Vec<(String, Input)> = Vec::new();
    let add_vars = |input: &Input, vars: &mut Vec<(String, Input)>| {
        for (name, v) in &input.variables {
            if !vars.iter().any(|(n, _)| n == name) {
                vars.push((name.clone(), v.clone()));
            }
        }
    };
    for (runtime, list) in [(true, runtime_args), (false, package_args)] {
        for (index, arg) in list.iter().enumerate() {
            let key = argument_key(arg, index, runtime);
            add_vars(&arg.input, &mut vars);
            out.push(Question {
                key,
                target: Target::Argument { runtime, index },
                input: arg.input.clone(),
                repeated: arg.is_repeated,
            });
        }
    }
    for (list, header) in [(env, false), (headers, true)] {
        for kv in list {
            add_vars(&kv.input, &mut vars);
            out.push(Question {
                key: kv.name.clone(),
                target: if header {
                    Target::Header(kv.name.clone())
                } else {
                    Target::Env(kv.name.clone())
                },
                input: kv.input.clone(),
                repeated: false,
            });
        }
    }
    for (name, v) in url_vars {
        if !vars.iter().any(|(n, _)| n == name) {
            vars.push((name.clone(), v.clone()));
        }
    }
    for (name, input) in vars {
        out.push(Question {
            key: name,
            target: Target::Variable,
            input,
            repeated: false,
        });
    }
    out
}

/// An argument's key: a named one's flag without dashes, a positional
/// one's `valueHint`, else its place (`arg1`, `runtime-arg1`: 1-based).
fn argument_key(arg: &Argument, index: usize, runtime: bool) -> String {
    let named = arg
        .name
        .as_deref()
        .map(|n| n.trim_start_matches('-'))
        .filter(|n| !n.is_empty() && arg.kind == ArgumentKind::Named);
    let hint = arg.value_hint.as_deref().filter(|h| !h.is_empty());
    match named.or(hint) {
        Some(key) => key.to_owned(),
        None if runtime => format!("runtime-arg{}", index + 1),
        None => format!("arg{}", index + 1),
    }
}

/// The `{name}`s of `template` that `variables` defines, in order.
pub fn template_names(template: &str, variables: &BTreeMap<String, Input>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                let name = &after[..close];
                if variables.contains_key(name) && !out.iter().any(|n| n == name) {
                    out.push(name.to_owned());
                }
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
}

/// `template` with each `{name}` that `values` has replaced; other braces
/// stay as written.
pub fn substitute(template: &str, values: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => match values(&after[..close]) {
                Some(v) => {
                    out.push_str(&v);
                    rest = &after[close + 1..];
                }
                None => {
                    out.push('{');
                    rest = after;
                }
            },
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `value` fits the question's `choices` and `format`; why not.
pub fn check_value(input: &Input, value: &str) -> Result<(), String> {
    if let Some(choices) = input.choices.as_ref().filter(|c| !c.is_empty())
        && !choices.iter().any(|c| c == value)
    {
        return Err(format!("expected one of {}", choices.join(", ")));
    }
    match input.format.as_deref() {
        Some("number") if !value.parse::<f64>().is_ok_and(f64::is_finite) => {
            Err("expected a number".to_owned())
        }
        Some("boolean") if value != "true" && value != "false" => {
            Err("expected true or false".to_owned())
        }
        _ => Ok(()),
    }
}

/// Decides every question: `secret_name(key)` names the secret a key's
/// value is stored as. Variables are decided only when a value that is
/// used needs them. Errors when a value given is wrong, or (not
/// interactive) when a required one has no answer.
pub fn decide(
    questions: &[Question],
    given: &Given,
    secret_name: &dyn Fn(&str) -> String,
) -> Result<Vec<(Question, Decision)>, InputError> {
    let known: BTreeSet<&str> = questions.iter().map(|q| q.key.as_str()).collect();
    for (key, values) in &given.set {
        if !known.contains(key.as_str()) {
            return Err(InputError::UnknownKey {
                key: key.clone(),
                known: if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.iter().copied().collect::<Vec<_>>().join(", ")
                },
            });
        }
        for q in questions.iter().filter(|q| &q.key == key) {
            if q.input.is_secret {
                return Err(InputError::SecretOnCommandLine { key: key.clone() });
            }
            if !q.repeated && values.len() > 1 {
                return Err(InputError::NotRepeated {
                    key: key.clone(),
                    count: values.len(),
                });
            }
            for value in values {
                check_value(&q.input, value).map_err(|why| InputError::Invalid {
                    key: key.clone(),
                    value: value.clone(),
                    why,
                })?;
            }
        }
    }
    // The values first; then the variables the chosen templates use.
    let mut decided: Vec<(Question, Decision)> = Vec::new();
    let mut needed: BTreeSet<String> = BTreeSet::new();
    for q in questions.iter().filter(|q| q.target != Target::Variable) {
        let d = decide_one(q, given, secret_name);
        if let Decision::Answered(Answer::Template(t), _) = &d {
            needed.extend(template_names(t, &q.input.variables));
        }
        decided.push((q.clone(), d));
    }
    for q in questions.iter().filter(|q| q.target == Target::Variable) {
        // URL variables are always needed; template variables when used.
        let used = needed.contains(&q.key) || !is_template_variable(questions, &q.key);
        if used {
            decided.push((q.clone(), decide_one(q, given, secret_name)));
        }
    }
    if !given.interactive {
        let missing: Vec<String> = decided
            .iter()
            .filter(|(_, d)| {
                matches!(
                    d,
                    Decision::AskValue { required: true }
                        | Decision::AskSecret { required: true, .. }
                )
            })
            .map(|(q, _)| q.label())
            .collect();
        if !missing.is_empty() {
            let secrets = decided
                .iter()
                .any(|(_, d)| matches!(d, Decision::AskSecret { required: true, .. }));
            let values = decided
                .iter()
                .any(|(_, d)| matches!(d, Decision::AskValue { required: true }));
            let hint = match (values, secrets) {
                (true, true) => {
                    "values with --set KEY=VALUE and secrets as KEY=VALUE lines on stdin with --secrets-stdin"
                }
                (false, true) => "secrets as KEY=VALUE lines on stdin with --secrets-stdin",
                _ => "values with --set KEY=VALUE",
            };
            return Err(InputError::Missing {
                missing,
                hint: hint.to_owned(),
            });
        }
        // Nobody to ask: optional values stay out.
        for (_, d) in &mut decided {
            if matches!(d, Decision::AskValue { .. } | Decision::AskSecret { .. }) {
                *d = Decision::Answered(Answer::Omitted, Origin::Omitted);
            }
        }
    }
    Ok(decided)
}

/// Whether `key` is a variable of some value template (not of the URL).
fn is_template_variable(questions: &[Question], key: &str) -> bool {
    questions
        .iter()
        .filter(|q| q.target != Target::Variable)
        .any(|q| q.input.variables.contains_key(key))
}

fn decide_one(q: &Question, given: &Given, secret_name: &dyn Fn(&str) -> String) -> Decision {
    let input = &q.input;
    if input.is_secret && input.value.is_none() {
        let name = given
            .secret_names
            .get(&q.key)
            .cloned()
            .unwrap_or_else(|| secret_name(&q.key));
        if given.secret_values.contains(&q.key) {
            return Decision::Answered(Answer::Secret(name), Origin::Asked);
        }
        if given.stored.contains(&name) {
            return Decision::Answered(Answer::Secret(name), Origin::Stored);
        }
        return Decision::AskSecret {
            name,
            required: input.is_required,
        };
    }
    if let Some(values) = given.set.get(&q.key) {
        return Decision::Answered(Answer::Values(values.clone()), Origin::Given);
    }
    if let Some(value) = &input.value {
        return Decision::Answered(Answer::Template(value.clone()), Origin::Publisher);
    }
    if let Some(default) = &input.default {
        return Decision::Answered(Answer::Values(vec![default.clone()]), Origin::Default);
    }
    if input.is_required {
        Decision::AskValue { required: true }
    } else {
        // Optional values are not asked for: the plan lists them.
        Decision::Answered(Answer::Omitted, Origin::Omitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kv(v: serde_json::Value) -> KeyValueInput {
        serde_json::from_value(v).unwrap()
    }
    fn arg(v: serde_json::Value) -> Argument {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn keys_name_what_the_user_sets() {
        let qs = questions(
            &[arg(
                json!({"type": "named", "name": "--mount", "value": "src={src}",
                         "variables": {"src": {"isRequired": true}}}),
            )],
            &[
                arg(json!({"type": "named", "name": "--port"})),
                arg(json!({"type": "positional", "valueHint": "dir"})),
                arg(json!({"type": "positional", "value": "serve"})),
            ],
            &[kv(json!({"name": "API_KEY", "isSecret": true}))],
            &[kv(json!({"name": "X-Region", "default": "eu"}))],
            &BTreeMap::new(),
        );
        let keys: Vec<&str> = qs.iter().map(|q| q.key.as_str()).collect();
        assert_eq!(
            keys,
            ["mount", "port", "dir", "arg3", "API_KEY", "X-Region", "src"]
        );
        assert!(qs[0].is_template());
    }

    #[test]
    fn set_then_value_then_default_then_asked() {
        let qs = questions(
            &[],
            &[],
            &[
                kv(json!({"name": "A", "default": "d"})),
                kv(json!({"name": "B", "value": "fixed"})),
                kv(json!({"name": "C", "isRequired": true})),
                kv(json!({"name": "D"})),
                kv(json!({"name": "S", "isSecret": true, "isRequired": true})),
            ],
            &[],
            &BTreeMap::new(),
        );
        let mut given = Given {
            interactive: true,
            ..Given::default()
        };
        given.set.insert("A".into(), vec!["mine".into()]);
        let d = decide(&qs, &given, &|k| format!("srv.{k}")).unwrap();
        assert_eq!(
            d[0].1,
            Decision::Answered(Answer::Values(vec!["mine".into()]), Origin::Given)
        );
        assert_eq!(
            d[1].1,
            Decision::Answered(Answer::Template("fixed".into()), Origin::Publisher)
        );
        assert_eq!(d[2].1, Decision::AskValue { required: true });
        assert_eq!(d[3].1, Decision::Answered(Answer::Omitted, Origin::Omitted));
        assert_eq!(
            d[4].1,
            Decision::AskSecret {
                name: "srv.S".into(),
                required: true
            }
        );
        // Not interactive: the required ones are an error naming them.
        given.interactive = false;
        let err = decide(&qs, &given, &|k| format!("srv.{k}")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("C (environment variable)") && text.contains("S (environment"),
            "{text}"
        );
        assert!(
            text.contains("--set KEY=VALUE") && text.contains("--secrets-stdin"),
            "{text}"
        );
        // A secret read from stdin, or already stored, needs no one.
        given.set.insert("C".into(), vec!["c".into()]);
        given.secret_values.insert("S".into());
        let d = decide(&qs, &given, &|k| format!("srv.{k}")).unwrap();
        assert_eq!(
            d[4].1,
            Decision::Answered(Answer::Secret("srv.S".into()), Origin::Asked)
        );
        given.secret_values.clear();
        given.stored.insert("srv.S".into());
        let d = decide(&qs, &given, &|k| format!("srv.{k}")).unwrap();
        assert_eq!(
            d[4].1,
            Decision::Answered(Answer::Secret("srv.S".into()), Origin::Stored)
        );
    }

    #[test]
    fn wrong_values_are_refused_before_anything_else() {
        let qs = questions(
            &[],
            &[arg(
                json!({"type": "named", "name": "--mode", "choices": ["a", "b"]}),
            )],
            &[
                kv(json!({"name": "N", "format": "number"})),
                kv(json!({"name": "S", "isSecret": true})),
            ],
            &[],
            &BTreeMap::new(),
        );
        let given = |k: &str, v: &str| {
            let mut g = Given::default();
            g.set.insert(k.into(), vec![v.into()]);
            g
        };
        let name = |k: &str| k.to_owned();
        assert!(matches!(
            decide(&qs, &given("mode", "c"), &name),
            Err(InputError::Invalid { .. })
        ));
        assert!(matches!(
            decide(&qs, &given("N", "x"), &name),
            Err(InputError::Invalid { .. })
        ));
        assert!(decide(&qs, &given("N", "8080"), &name).is_ok());
        assert!(matches!(
            decide(&qs, &given("S", "x"), &name),
            Err(InputError::SecretOnCommandLine { .. })
        ));
        assert!(matches!(
            decide(&qs, &given("nope", "x"), &name),
            Err(InputError::UnknownKey { .. })
        ));
        let mut two = given("mode", "a");
        two.set.get_mut("mode").unwrap().push("b".into());
        assert!(matches!(
            decide(&qs, &two, &name),
            Err(InputError::NotRepeated { .. })
        ));
    }

    #[test]
    fn template_variables_are_asked_only_when_their_template_is_used() {
        let qs = questions(
            &[],
            &[],
            &[],
            &[kv(
                json!({"name": "Authorization", "value": "Bearer {token}",
                        "variables": {"token": {"isSecret": true, "isRequired": true}}}),
            )],
            &BTreeMap::new(),
        );
        let given = Given {
            interactive: true,
            ..Given::default()
        };
        let d = decide(&qs, &given, &|k| format!("x.{k}")).unwrap();
        assert_eq!(d.len(), 2);
        assert!(matches!(d[1].1, Decision::AskSecret { .. }));
        let mut given = given;
        given
            .set
            .insert("Authorization".into(), vec!["Basic abc".into()]);
        let d = decide(&qs, &given, &|k| format!("x.{k}")).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
    }

    #[test]
    fn substitution_replaces_known_names_only() {
        let vals = |n: &str| (n == "a").then(|| "1".to_owned());
        assert_eq!(substitute("x{a}y{b}{", &vals), "x1y{b}{");
        assert_eq!(substitute("{{a}}", &vals), "{1}");
    }
}
