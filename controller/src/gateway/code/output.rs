//! `run_code`'s answer: `{result, logs, calls, error?, truncated?}`, as JSON
//! text and as `structuredContent`, within a byte budget for the result and
//! the logs together; what was cut is said in `truncated`.

use serde_json::{Value, json};

use super::engine::Outcome;

/// The most bytes of an error message.
const ERROR_BYTES: usize = 4 << 10;
/// The logs keep at least this share of the budget when both are too long.
const LOGS_SHARE: usize = 4;

/// The answer of one run, its result and logs within `budget` bytes.
pub fn report(outcome: &Outcome, budget: usize) -> Value {
    let result = outcome.result.clone().unwrap_or(Value::Null);
    let result_text = result.to_string();
    // A line costs its JSON string and a separator.
    let line_cost = |line: &String| Value::String(line.clone()).to_string().len() + 1;
    let logs_len: usize = outcome.logs.iter().map(line_cost).sum();
    let mut notes = Vec::new();
    let (result, logs) = if result_text.len() + logs_len <= budget {
        (result, outcome.logs.clone())
    } else {
        let logs_budget =
            logs_len.min((budget / LOGS_SHARE).max(budget.saturating_sub(result_text.len())));
        let result_budget = budget - logs_budget;
        let result = if result_text.len() > result_budget {
            notes.push(format!(
                "the result was {} bytes of JSON: its first {} are given as a string",
                result_text.len(),
                result_budget
            ));
            Value::String(prefix(&result_text, result_budget).to_owned())
        } else {
            result
        };
        let mut kept = Vec::new();
        let mut used = 0;
        for line in &outcome.logs {
            let cost = line_cost(line);
            if used + cost > logs_budget {
                break;
            }
            used += cost;
            kept.push(line.clone());
        }
        if kept.len() < outcome.logs.len() {
            notes.push(format!(
                "the first {} of {} log lines are given",
                kept.len(),
                outcome.logs.len() + outcome.logs_dropped
            ));
        }
        (result, kept)
    };
    if outcome.logs_dropped > 0 && notes.iter().all(|n| !n.contains("log lines")) {
        notes.push(format!(
            "the first {} of {} log lines are given",
            outcome.logs.len(),
            outcome.logs.len() + outcome.logs_dropped
        ));
    }
    let mut answer = json!({"result": result, "logs": logs, "calls": outcome.calls});
    if let Some(error) = &outcome.error {
        answer["error"] = Value::String(prefix(&error.message(), ERROR_BYTES).to_owned());
    }
    if !notes.is_empty() {
        answer["truncated"] = Value::String(notes.join("; "));
    }
    answer
}

/// The longest prefix of `text` within `bytes` that ends on a character.
fn prefix(text: &str, bytes: usize) -> &str {
    if text.len() <= bytes {
        return text;
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::super::engine::Failure;
    use super::*;

    fn outcome(result: Value, logs: Vec<String>) -> Outcome {
        Outcome {
            result: Some(result),
            logs,
            calls: 3,
            ..Outcome::default()
        }
    }

    #[test]
    fn a_small_answer_is_whole() {
        let answer = report(&outcome(json!({"a": 1}), vec!["hi".into()]), 16 << 10);
        assert_eq!(
            answer,
            json!({"result": {"a": 1}, "logs": ["hi"], "calls": 3})
        );
    }

    #[test]
    fn a_large_result_and_many_logs_are_cut_within_the_budget_saying_so() {
        let big = json!({"rows": vec!["é".repeat(10); 2000]});
        let logs: Vec<String> = (0..500).map(|i| format!("line {i}")).collect();
        let answer = report(&outcome(big, logs), 16 << 10);
        let result = answer["result"].as_str().unwrap();
        let logs = answer["logs"].as_array().unwrap();
        let logs_len: usize = logs.iter().map(|l| l.to_string().len() + 1).sum();
        assert!(
            result.len() + logs_len <= 16 << 10,
            "{} + {logs_len}",
            result.len()
        );
        assert!(result.starts_with("{\"rows\":[\"éé"));
        assert!(logs.len() > 100, "the logs keep a share: {}", logs.len());
        let truncated = answer["truncated"].as_str().unwrap();
        assert!(truncated.contains("the result was"), "{truncated}");
        assert!(truncated.contains("of 500 log lines"), "{truncated}");
    }

    #[test]
    fn an_error_is_said() {
        let mut o = outcome(Value::Null, vec![]);
        o.result = None;
        o.error = Some(Failure::Memory(64 << 20));
        let answer = report(&o, 16 << 10);
        assert_eq!(answer["result"], Value::Null);
        assert_eq!(
            answer["error"],
            "the program ran out of memory: its limit is 64 MiB"
        );
    }
}
