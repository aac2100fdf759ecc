//! The endpoint's `initialize` instructions: Steward's own paragraph, then
//! one short paragraph per Ready server that gave instructions, in server
//! name order, the whole within [`BUDGET`] bytes (Claude Code cuts server
//! instructions at 2 KB). A server's text that does not fit its share is
//! trimmed with a note naming the resource that holds it whole,
//! `steward://instructions/<server>`.

/// The most bytes the combined instructions take.
pub const BUDGET: usize = 2048;
/// The scheme and host of the instruction resources.
pub const URI_PREFIX: &str = "steward://instructions/";

/// The resource URI of `server`'s full instructions.
pub fn uri(server: &str) -> String {
    format!("{URI_PREFIX}{server}")
}

/// The server whose instructions `uri` names.
pub fn server_of(uri: &str) -> Option<&str> {
    uri.strip_prefix(URI_PREFIX).filter(|s| !s.is_empty())
}

/// `own`, then each `(server, text)` (already in order) as a paragraph, the
/// whole within `budget` bytes. Servers share what `own` leaves evenly; one
/// that needs less leaves the rest to the others.
pub fn combine(own: &str, servers: &[(String, String)], budget: usize) -> String {
    let paragraphs: Vec<(String, &str, String)> = servers
        .iter()
        .map(|(server, text)| {
            let head = format!("\n\n{server}: ");
            let note = format!(" … (trimmed; whole text: {})", uri(server));
            (head, text.trim(), note)
        })
        .filter(|(_, text, _)| !text.is_empty())
        .collect();
    let mut out = own.to_owned();
    let mut left = budget.saturating_sub(out.len());
    // Smallest first, so each leftover goes to the ones still to come.
    let mut order: Vec<usize> = (0..paragraphs.len()).collect();
    order.sort_by_key(|i| paragraphs[*i].0.len() + paragraphs[*i].1.len());
    let mut parts: Vec<Option<String>> = vec![None; paragraphs.len()];
    for (done, i) in order.iter().enumerate() {
        let (head, text, note) = &paragraphs[*i];
        let share = left / (paragraphs.len() - done);
        let whole = head.len() + text.len();
        let part = if whole <= share {
            format!("{head}{text}")
        } else if share >= head.len() + note.len() + 16 {
            let room = share - head.len() - note.len();
            format!("{head}{}{note}", cut(text, room))
        } else {
            // Not even a line: the resource still has it.
            continue;
        };
        left -= part.len();
        parts[*i] = Some(part);
    }
    for part in parts.into_iter().flatten() {
        out.push_str(&part);
    }
    out
}

/// The longest prefix of `text` of at most `max` bytes, cut at a char
/// boundary (at a space when one is near).
fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let prefix = &text[..end];
    match prefix.rfind(char::is_whitespace) {
        Some(space) if space + 40 >= end => prefix[..space].trim_end(),
        _ => prefix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(server: &str, text: &str) -> (String, String) {
        (server.to_owned(), text.to_owned())
    }

    #[test]
    fn short_instructions_are_kept_whole_in_order() {
        let text = combine(
            "Own.",
            &[
                pair("a", "Use a for A."),
                pair("b", "  "),
                pair("c", "C stuff."),
            ],
            BUDGET,
        );
        assert_eq!(text, "Own.\n\na: Use a for A.\n\nc: C stuff.");
    }

    #[test]
    fn long_instructions_are_trimmed_within_the_budget_with_a_note() {
        let long = "word ".repeat(1000);
        let text = combine(
            "Own paragraph.",
            &[
                pair("big", &long),
                pair("huge", &long),
                pair("small", "Short."),
            ],
            BUDGET,
        );
        assert!(text.len() <= BUDGET, "{}", text.len());
        assert!(text.contains("\n\nsmall: Short."), "the short one is whole");
        assert!(text.contains("trimmed; whole text: steward://instructions/big"));
        assert!(text.contains("trimmed; whole text: steward://instructions/huge"));
        // The two long ones share what is left about evenly.
        let big = text.find("\n\nbig: ").unwrap();
        let huge = text.find("\n\nhuge: ").unwrap();
        let small = text.find("\n\nsmall: ").unwrap();
        assert!(
            big < huge && huge < small,
            "the order given: {big} {huge} {small}"
        );
        let (a, b) = (huge - big, small - huge);
        assert!(a.abs_diff(b) < 50, "{a} vs {b}");
    }

    #[test]
    fn cuts_respect_characters() {
        let text = combine("", &[pair("x", &"é".repeat(3000))], 200);
        assert!(text.len() <= 200);
        assert!(text.contains("trimmed"));
    }

    #[test]
    fn uris_name_the_server() {
        assert_eq!(server_of(&uri("git")), Some("git"));
        assert_eq!(server_of("steward://instructions/"), None);
        assert_eq!(server_of("file:///x"), None);
    }
}
