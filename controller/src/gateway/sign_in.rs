//! A call that needs a sign-in: the server refused its credentials before
//! running it (HTTP 401 after a refresh, or 403 `insufficient_scope`). The
//! agent is told what the user runs, and the call can be made again after.

use crate::runtime::mcp::remote::SignInNeed;

/// The tool error's text for a call to `server` refused for `need`.
pub fn needed(server: &str, need: &SignInNeed) -> String {
    let what = match need {
        SignInNeed::SignIn => "sign in",
        SignInNeed::MoreScope(_) => "sign in again (for more scope)",
    };
    format!(
        "server \"{server}\" did not run this call: {need}; {what} with `steward auth login {server}`, then call again"
    )
}
