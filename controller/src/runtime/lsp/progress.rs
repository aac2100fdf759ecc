//! Work-done progress a server reports (`$/progress` with `begin`, `report`
//! and `end` for a token it created with `window/workDoneProgress/create`):
//! what it is busy with — indexing, loading the project — kept per token in
//! the order begun, until the token ends or the connection closes.
//!
//! This is a protocol fact; what it means to a query (wait, or say the
//! server is still indexing) is the caller's to decide.

use serde_json::Value;

/// At most this many unfinished tokens are kept; a `begin` beyond them is
/// ignored, so a server that never ends its tokens cannot grow the
/// connection without bound.
const MAX_UNFINISHED: usize = 64;

/// One work-done progress a server has begun and not ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The `begin`'s title ("indexing", "Loading workspace").
    pub title: String,
    /// The latest message, if any (`begin` or a later `report`).
    pub message: Option<String>,
    /// The latest percentage (0–100), when the server reports one.
    pub percentage: Option<u32>,
}

/// The unfinished progress of one connection, oldest first.
#[derive(Debug, Default)]
pub(super) struct Unfinished {
    /// `(token, progress)`, in the order begun.
    tokens: Vec<(Value, Progress)>,
    /// The connection closed: nothing is unfinished, nothing more counts.
    closed: bool,
}

impl Unfinished {
    /// Applies one `$/progress` notification's params. Returns whether
    /// anything changed. A `report` or `end` for a token never begun is
    /// ignored, as is what is not work-done progress (partial results).
    pub(super) fn apply(&mut self, params: &Value) -> bool {
        if self.closed {
            return false;
        }
        let token = &params["token"];
        if !(token.is_string() || token.is_number()) {
            return false;
        }
        let value = &params["value"];
        let text = |key: &str| value[key].as_str().map(str::to_owned);
        let percentage = || {
            value["percentage"]
                .as_f64()
                .filter(|p| p.is_finite())
                .map(|p| p.clamp(0.0, 100.0).round() as u32)
        };
        let at = self.tokens.iter().position(|(t, _)| t == token);
        match (value["kind"].as_str(), at) {
            (Some("begin"), at) => {
                let progress = Progress {
                    title: text("title").unwrap_or_default(),
                    message: text("message"),
                    percentage: percentage(),
                };
                match at {
                    // A token begun twice: the second begin restarts it.
                    Some(at) => self.tokens[at].1 = progress,
                    None if self.tokens.len() >= MAX_UNFINISHED => return false,
                    None => self.tokens.push((token.clone(), progress)),
                }
                true
            }
            (Some("report"), Some(at)) => {
                let progress = &mut self.tokens[at].1;
                let before = progress.clone();
                if let Some(message) = text("message") {
                    progress.message = Some(message);
                }
                if let Some(percentage) = percentage() {
                    progress.percentage = Some(percentage);
                }
                *progress != before
            }
            (Some("end"), Some(at)) => {
                self.tokens.remove(at);
                true
            }
            _ => false,
        }
    }

    /// The oldest unfinished progress.
    pub(super) fn oldest(&self) -> Option<&Progress> {
        self.tokens.first().map(|(_, progress)| progress)
    }

    /// The connection closed: no work is in progress on it any more.
    /// Returns whether anything changed.
    pub(super) fn close(&mut self) -> bool {
        let changed = !self.closed;
        self.closed = true;
        self.tokens.clear();
        changed
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn apply(unfinished: &mut Unfinished, token: Value, value: Value) -> bool {
        unfinished.apply(&json!({ "token": token, "value": value }))
    }

    fn progress(title: &str, message: Option<&str>, percentage: Option<u32>) -> Progress {
        Progress {
            title: title.to_owned(),
            message: message.map(str::to_owned),
            percentage,
        }
    }

    #[test]
    fn begin_report_and_end_follow_one_token() {
        let mut u = Unfinished::default();
        assert_eq!(u.oldest(), None);
        assert!(apply(
            &mut u,
            json!("idx"),
            json!({"kind": "begin", "title": "indexing", "percentage": 0})
        ));
        assert_eq!(u.oldest(), Some(&progress("indexing", None, Some(0))));
        assert!(apply(
            &mut u,
            json!("idx"),
            json!({"kind": "report", "message": "4/10 files", "percentage": 40})
        ));
        assert_eq!(
            u.oldest(),
            Some(&progress("indexing", Some("4/10 files"), Some(40)))
        );
        // A report that only repeats changes nothing; one without a
        // percentage keeps the last one.
        assert!(!apply(
            &mut u,
            json!("idx"),
            json!({"kind": "report", "percentage": 40})
        ));
        assert!(apply(
            &mut u,
            json!("idx"),
            json!({"kind": "report", "message": "5/10 files"})
        ));
        assert_eq!(
            u.oldest(),
            Some(&progress("indexing", Some("5/10 files"), Some(40)))
        );
        assert!(apply(
            &mut u,
            json!("idx"),
            json!({"kind": "end", "message": "done"})
        ));
        assert_eq!(u.oldest(), None);
    }

    #[test]
    fn a_token_never_begun_is_ignored() {
        let mut u = Unfinished::default();
        assert!(!apply(&mut u, json!(7), json!({"kind": "end"})));
        assert!(!apply(
            &mut u,
            json!(7),
            json!({"kind": "report", "percentage": 10})
        ));
        assert_eq!(u.oldest(), None);
        // Partial results and malformed params are not work-done progress.
        assert!(!apply(&mut u, json!(7), json!([{"uri": "file:///a"}])));
        assert!(!u.apply(&json!({"value": {"kind": "begin", "title": "x"}})));
        assert!(!apply(
            &mut u,
            json!({"not": "a token"}),
            json!({"kind": "begin", "title": "x"})
        ));
        assert_eq!(u.oldest(), None);
    }

    #[test]
    fn several_tokens_show_the_oldest_unfinished() {
        let mut u = Unfinished::default();
        apply(
            &mut u,
            json!("load"),
            json!({"kind": "begin", "title": "loading"}),
        );
        apply(
            &mut u,
            json!(1),
            json!({"kind": "begin", "title": "indexing", "percentage": 12.6}),
        );
        // Tokens are compared as sent: the number 1 is not the string "1".
        assert!(!apply(&mut u, json!("1"), json!({"kind": "end"})));
        assert_eq!(u.oldest().unwrap().title, "loading");
        apply(&mut u, json!("load"), json!({"kind": "end"}));
        assert_eq!(
            u.oldest(),
            Some(&progress("indexing", None, Some(13))),
            "rounded"
        );
        apply(
            &mut u,
            json!(1),
            json!({"kind": "report", "percentage": 250}),
        );
        assert_eq!(u.oldest().unwrap().percentage, Some(100), "clamped");
        apply(&mut u, json!(1), json!({"kind": "end"}));
        assert_eq!(u.oldest(), None);
    }

    #[test]
    fn unfinished_tokens_are_bounded_and_closing_ends_them_all() {
        let mut u = Unfinished::default();
        for n in 0..MAX_UNFINISHED + 5 {
            apply(
                &mut u,
                json!(n),
                json!({"kind": "begin", "title": format!("t{n}")}),
            );
        }
        assert_eq!(u.tokens.len(), MAX_UNFINISHED);
        assert!(u.close());
        assert_eq!(u.oldest(), None);
        assert!(!u.close(), "closed once");
        assert!(!apply(
            &mut u,
            json!("late"),
            json!({"kind": "begin", "title": "late"})
        ));
        assert_eq!(u.oldest(), None, "nothing counts after the close");
    }
}
