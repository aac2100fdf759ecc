//! What one agent client asked to be shown: which tools are listed
//! (`--expose`) and how long an exposed name may be (`--max-name-len`).
//!
//! Every client shares the same servers and the same union; a profile only
//! changes the view: the names (assigned per length, see [`super::names`])
//! and whether the catalog is listed whole, behind `search_tools` /
//! `call_tool`, behind `describe_tools` / `run_code` (code mode), or any
//! combination of these. `steward mcp` passes its profile to a running
//! controller when it attaches ([`Profile::encode`]); an HTTP client gives
//! it in the endpoint's query string (`/mcp?expose=search&maxNameLen=50`).

use std::fmt;
use std::str::FromStr;

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
    #[error("read the query parameter {0:?}: only expose and maxNameLen are known")]
    Unknown(String),
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Profile {
    pub expose: Expose,
    pub max_name_len: usize,
}

impl Default for Profile {
    fn default() -> Self {
        Profile {
            expose: Expose::default(),
            max_name_len: names::MAX_LEN,
        }
    }
}

/// The wire form of a profile (camelCase, every field optional).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Wire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expose: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_name_len: Option<usize>,
}

/// `--max-name-len`'s value, checked.
pub fn parse_name_len(text: &str) -> Result<usize, ProfileError> {
    text.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| (MIN_NAME_LEN..=MAX_NAME_LEN).contains(n))
        .ok_or_else(|| ProfileError::NameLen(text.to_owned()))
}

impl Profile {
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
        Ok(profile)
    }

    /// The profile of an HTTP request's query string
    /// (`expose=search&maxNameLen=50`); other parameters are refused so that
    /// a typo does not silently mean the default.
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
                _ => return Err(ProfileError::Unknown(key.to_owned())),
            }
        }
        Ok(profile)
    }
}

/// `%2C` and `+` in a query value (the only escapes a profile needs).
fn percent_decode(value: &str) -> String {
    value
        .replace("%2C", ",")
        .replace("%2c", ",")
        .replace('+', " ")
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
}
