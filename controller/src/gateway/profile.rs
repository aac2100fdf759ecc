//! What one agent client asked to be shown: which tools are listed
//! (`--expose`), how long an exposed name may be (`--max-name-len`), or
//! one server alone under its own names (`--server`, the one-server view).
//!
//! Every client shares the same servers and the same union; a profile only
//! changes the view: the names (assigned per length, see [`super::names`])
//! and whether the catalog is listed whole, behind `search_tools` /
//! `call_tool`, behind `describe_tools` / `run_code` (code mode), or any
//! combination of these. `steward mcp` passes its profile to a running
//! controller when it attaches ([`Profile::encode`]); an HTTP client gives
//! it in the endpoint's query string (`/mcp?expose=search&maxNameLen=50`,
//! `/mcp?server=github`).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::names;

/// The shortest `--max-name-len`: room for a short name and its collision
/// suffix.
pub const MIN_NAME_LEN: usize = 16;
/// The longest: MCP allows 128 characters in a tool name.
pub const MAX_NAME_LEN: usize = 128;

/// How the catalog is listed (`--expose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Expose {
    /// Every tool is listed (`server__tool`).
    pub direct: bool,
    /// `search_tools` and `call_tool` are listed.
    pub search: bool,
    /// `describe_tools` and `run_code` are listed (code mode).
    pub code: bool,
}

impl Expose {
    pub const DIRECT: Expose = Expose {
        direct: true,
        search: false,
        code: false,
    };
}

impl Default for Expose {
    fn default() -> Self {
        Expose::DIRECT
    }
}

impl fmt::Display for Expose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let modes = [
            (self.direct, "direct"),
            (self.search, "search"),
            (self.code, "code"),
        ];
        let listed: Vec<&str> = modes
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, name)| *name)
            .collect();
        if listed.is_empty() {
            return f.write_str("direct");
        }
        f.write_str(&listed.join(","))
    }
}

/// A profile that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "read expose mode {0:?}: use direct, search, code, or several joined by commas (direct,code)"
    )]
    Expose(String),
    #[error("read max name length {0:?}: use a number from {MIN_NAME_LEN} to {MAX_NAME_LEN}")]
    NameLen(String),
    #[error("read the query parameter {0:?}: only expose, maxNameLen and server are known")]
    Unknown(String),
    #[error(
        "read the view: a one-server view (server) lists the server's own names, so expose and maxNameLen do not apply"
    )]
    ServerView,
    #[error("read the server name {0:?}: give the name of one MCP server of the workspace")]
    ServerName(String),
    #[error(
        "read the view: name the server once, in the path (/mcp/NAME) or the query (?server=NAME)"
    )]
    ServerTwice,
}

impl FromStr for Expose {
    type Err = ProfileError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut expose = Expose {
            direct: false,
            search: false,
            code: false,
        };
        for part in text.split(',').map(str::trim) {
            match part {
                "direct" => expose.direct = true,
                "search" => expose.search = true,
                "code" => expose.code = true,
                _ => return Err(ProfileError::Expose(text.to_owned())),
            }
        }
        Ok(expose)
    }
}

/// One client's view (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Profile {
    pub expose: Expose,
    pub max_name_len: usize,
    /// The one MCP server this client sees, under its own names; none:
    /// every server, named `server__tool`.
    pub server: Option<Arc<str>>,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            expose: Expose::default(),
            max_name_len: names::MAX_LEN,
            server: None,
        }
    }
}

/// How a client names the tools and prompts it calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming<'a> {
    /// `server__tool`, at most this many characters (the union).
    Prefixed(usize),
    /// The server's own names (the one-server view of this server).
    Own(&'a str),
}

/// The wire form of a profile (camelCase, every field optional).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Wire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_name_len: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    server: Option<String>,
}

/// `--max-name-len`'s value, checked.
pub fn parse_name_len(text: &str) -> Result<usize, ProfileError> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (MIN_NAME_LEN..=MAX_NAME_LEN).contains(n))
        .ok_or_else(|| ProfileError::NameLen(text.to_owned()))
}

/// A server name given for a one-server view, checked.
pub fn parse_server(text: &str) -> Result<Arc<str>, ProfileError> {
    let name = text.trim();
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(ProfileError::ServerName(text.to_owned()));
    }
    Ok(name.into())
}

impl Profile {
    /// The one-server view of `server`.
    pub fn one_server(server: Arc<str>) -> Profile {
        Profile {
            server: Some(server),
            ..Profile::default()
        }
    }

    /// How this client names what it calls.
    pub fn naming(&self) -> Naming<'_> {
        match &self.server {
            Some(server) => Naming::Own(server),
            None => Naming::Prefixed(self.max_name_len),
        }
    }

    /// A one-server view lists its server's own names: no other view
    /// option applies to it.
    fn checked(self) -> Result<Profile, ProfileError> {
        if self.server.is_some()
            && (self.expose != Expose::default() || self.max_name_len != names::MAX_LEN)
        {
            return Err(ProfileError::ServerView);
        }
        Ok(self)
    }

    /// The profile as `steward mcp` sends it to a running controller: empty
    /// for the default one, so that an older controller still takes the
    /// handover of a client that asked for nothing special.
    pub fn encode(&self) -> Vec<u8> {
        if *self == Profile::default() {
            return Vec::new();
        }
        let wire = Wire {
            expose: (self.expose != Expose::default()).then(|| self.expose.to_string()),
            max_name_len: (self.max_name_len != names::MAX_LEN).then_some(self.max_name_len),
            server: self.server.as_deref().map(str::to_owned),
        };
        serde_json::to_vec(&wire).expect("a profile serializes")
    }

    /// What [`Self::encode`] wrote (empty: the default profile).
    pub fn decode(bytes: &[u8]) -> Result<Profile, ProfileError> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Profile::default());
        }
        let wire: Wire =
            serde_json::from_slice(bytes).map_err(|e| ProfileError::Unknown(format!("{e}")))?;
        let mut profile = Profile::default();
        if let Some(expose) = wire.expose {
            profile.expose = expose.parse()?;
        }
        if let Some(len) = wire.max_name_len {
            profile.max_name_len = parse_name_len(&len.to_string())?;
        }
        if let Some(server) = wire.server {
            profile.server = Some(parse_server(&server)?);
        }
        profile.checked()
    }

    /// The profile of an HTTP request's query string
    /// (`expose=search&maxNameLen=50`, `server=github`); other parameters are
    /// refused so that a typo does not silently mean the default.
    pub fn from_query(query: Option<&str>) -> Result<Profile, ProfileError> {
        let mut profile = Profile::default();
        for pair in query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value);
            match key {
                "expose" => profile.expose = value.parse()?,
                "maxNameLen" | "max_name_len" | "max-name-len" => {
                    profile.max_name_len = parse_name_len(&value)?;
                }
                "server" => profile.server = Some(parse_server(&value)?),
                _ => return Err(ProfileError::Unknown(key.to_owned())),
            }
        }
        profile.checked()
    }
}

/// The path of the endpoint, and the one-server view's form of it
/// (`/mcp/NAME`, for clients that drop the query string).
const PATH: &str = "/mcp";

impl Profile {
    /// The view an HTTP request at `path` with `query` asks for: `None`
    /// when the path is not the endpoint's (`/mcp`, or `/mcp/NAME` for the
    /// one-server view of `NAME`).
    pub fn from_request(path: &str, query: Option<&str>) -> Option<Result<Profile, ProfileError>> {
        let named = match path.strip_prefix(PATH) {
            Some("") => None,
            Some(rest) => Some(
                rest.strip_prefix('/')
                    .filter(|n| !n.is_empty() && !n.contains('/'))?,
            ),
            None => return None,
        };
        let viewed = Profile::from_query(query).and_then(|mut profile| {
            if let Some(name) = named {
                if profile.server.is_some() {
                    return Err(ProfileError::ServerTwice);
                }
                profile.server = Some(parse_server(&percent_decode(name))?);
            }
            profile.checked()
        });
        Some(viewed)
    }
}

/// A query value: `+` is a space, `%XX` a byte (UTF-8 as a whole; a
/// malformed escape stays as written).
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expose_modes_read_and_print_back() {
        for text in [
            "direct",
            "search",
            "direct,search",
            "code",
            "direct,code",
            "search,code",
            "direct,search,code",
        ] {
            assert_eq!(text.parse::<Expose>().unwrap().to_string(), text);
        }
        assert_eq!(
            "code,direct".parse::<Expose>().unwrap().to_string(),
            "direct,code"
        );
        assert_eq!(
            "search,direct".parse::<Expose>().unwrap().to_string(),
            "direct,search"
        );
        assert!("everything".parse::<Expose>().is_err());
        assert!("".parse::<Expose>().is_err());
    }

    #[test]
    fn the_default_profile_encodes_to_nothing_and_others_round_trip() {
        assert!(Profile::default().encode().is_empty());
        assert_eq!(Profile::decode(b"").unwrap(), Profile::default());
        let profile = Profile {
            expose: "direct,search".parse().unwrap(),
            max_name_len: 50,
            server: None,
        };
        assert_eq!(Profile::decode(&profile.encode()).unwrap(), profile);
        assert!(Profile::decode(br#"{"color":"red"}"#).is_err());
    }

    #[test]
    fn query_strings_choose_the_view_and_refuse_typos() {
        let p = Profile::from_query(Some("expose=search&maxNameLen=50")).unwrap();
        assert_eq!(p.expose.to_string(), "search");
        assert_eq!(p.max_name_len, 50);
        let p = Profile::from_query(Some("expose=direct%2Csearch")).unwrap();
        assert_eq!(p.expose.to_string(), "direct,search");
        let p = Profile::from_query(Some("expose=search,code")).unwrap();
        assert!(p.expose.code && p.expose.search && !p.expose.direct);
        assert_eq!(Profile::from_query(None).unwrap(), Profile::default());
        assert!(Profile::from_query(Some("expos=search")).is_err());
        assert!(Profile::from_query(Some("maxNameLen=8")).is_err());
        assert!(Profile::from_query(Some("maxNameLen=500")).is_err());
    }

    #[test]
    fn the_one_server_view_is_also_a_path() {
        let p = Profile::from_request("/mcp/my%20server", None)
            .unwrap()
            .unwrap();
        assert_eq!(p.server.as_deref(), Some("my server"));
        assert_eq!(
            Profile::from_request("/mcp", None).unwrap().unwrap(),
            Profile::default()
        );
        assert!(Profile::from_request("/other", None).is_none());
        assert!(Profile::from_request("/mcp/a/b", None).is_none());
        assert!(Profile::from_request("/mcpx", None).is_none());
        assert!(matches!(
            Profile::from_request("/mcp/a", Some("server=b")),
            Some(Err(ProfileError::ServerTwice))
        ));
        assert!(matches!(
            Profile::from_request("/mcp/a", Some("expose=search")),
            Some(Err(ProfileError::ServerView))
        ));
    }

    #[test]
    fn a_one_server_view_names_its_server_and_takes_no_other_option() {
        let p = Profile::from_query(Some("server=my%20server")).unwrap();
        assert_eq!(p.server.as_deref(), Some("my server"));
        assert_eq!(p.naming(), Naming::Own("my server"));
        assert_eq!(Profile::decode(&p.encode()).unwrap(), p);
        assert!(matches!(
            Profile::from_query(Some("server=a&expose=search")),
            Err(ProfileError::ServerView)
        ));
        assert!(Profile::from_query(Some("server=a&maxNameLen=50")).is_err());
        assert!(Profile::from_query(Some("server=")).is_err());
        assert_eq!(
            Profile::default().naming(),
            Naming::Prefixed(names::MAX_LEN)
        );
        // A malformed escape stays as written.
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("a%zzb"), "a%zzb");
        assert_eq!(percent_decode("%E2%9C%93"), "\u{2713}");
    }
}
