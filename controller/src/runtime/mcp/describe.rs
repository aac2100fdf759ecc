//! How errors and URLs read in our messages and logs: an error with its
//! causes (including the ones rmcp's HTTP transport hides from `source()`),
//! without rmcp's transport type names, and every URL without its user
//! info, query or fragment, which may carry credentials.

/// Finds the cause an error hides from `source()` (rmcp's HTTP transport
/// wraps reqwest's error without exposing it: see `remote::dig`).
pub(super) type Dig = for<'a> fn(&'a DynError) -> Option<&'a DynError>;
pub(super) type DynError = dyn std::error::Error + 'static;

pub(super) fn dig_nothing(_: &DynError) -> Option<&DynError> {
    None
}

/// An error and its causes, `: `-separated, without rmcp's transport type
/// names and with every URL shown as [`redact_url`] does (reqwest's messages
/// carry the full URL).
pub(super) fn describe(error: &DynError, dig: Dig) -> String {
    let mut text = String::new();
    let mut node = Some(error);
    while let Some(current) = node {
        let part = strip_transport_names(&current.to_string());
        if !part.is_empty() && !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
        node = dig(current).or_else(|| current.source());
    }
    redact_urls(&text)
}

/// Removes rmcp's `Transport [<type name>] error: ` prefixes.
fn strip_transport_names(text: &str) -> String {
    let mut text = text.to_owned();
    while let Some(start) = text.find("Transport [") {
        let Some(end) = text[start..].find("] error: ") else {
            break;
        };
        text.replace_range(start..start + end + "] error: ".len(), "");
    }
    text
}

/// Every `http://` / `https://` URL in `text` as [`redact_url`] shows it.
pub(super) fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()
    {
        out.push_str(&rest[..start]);
        let url = &rest[start..];
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | ',' | '"' | '\'' | '>'))
            .unwrap_or(url.len());
        out.push_str(&redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

/// `url` without user info, query or fragment (they may carry credentials).
pub(super) fn redact_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or_default();
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority
                .rsplit_once('@')
                .map_or(authority, |(_, host)| host);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_credentials_and_queries_in_messages() {
        assert_eq!(
            redact_url("http://user:pw@host:8080/mcp?key=secret#x"),
            "http://host:8080/mcp"
        );
        assert_eq!(redact_url("http://host"), "http://host");
        assert_eq!(redact_url("not a url?x"), "not a url");
    }
}
