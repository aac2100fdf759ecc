//! `steward auth login|status|logout`: signing in to remote servers that
//! need OAuth. `login` runs the flow in this process
//! ([`crate::runtime::mcp::remote::oauth`]) — whether or not `steward run`
//! runs — and then tells every running controller of this HOME_DIR, which
//! connects exactly the servers that waited for it.
//!
//! Three ways to finish: the browser (`$BROWSER`, else `xdg-open` when
//! there is a display) lands on a loopback callback; `--paste` prints the
//! authorization URL and reads back the address the browser was sent to
//! (SSH, headless); `--device` uses the device authorization grant. Without
//! a usable browser the command says which of the other two to use.

use std::collections::BTreeMap;
use std::io::{self, BufRead as _, IsTerminal as _};
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use clap::{Args, Subcommand};
use steward_schema::resource::McpTransport;

use super::auth_entry::{failed, kept_in, remote, tell_controllers};
use super::client::runtime;
use super::output::Format;
use super::{CommandError, Io};
use crate::runtime::mcp::remote::oauth::callback;
use crate::runtime::mcp::remote::oauth::flow::{self, Redirected, SignInError, Target};
use crate::runtime::mcp::remote::oauth::store::{OAuthStore, TokenRecord, now_secs};
use crate::runtime::mcp::remote::oauth::{device, http};
use crate::support::paths::Paths;

/// The long help of `steward auth`.
pub const ABOUT: &str = "\
Sign in to remote MCP servers (httpUrl, url) that answer 401: Steward runs the MCP \
authorization flow itself — discovery, PKCE, client registration, scopes, refresh — and keeps \
the tokens in the desktop keyring (Secret Service), else in HOME_DIR/steward/oauth.json (mode \
0600). Tokens belong to the user and serve every workspace whose entry has the same URL (and \
the same oauth.account, which tells two accounts of one service apart). `login` works with or \
without `steward run`: a running controller connects the server at once, and only that server.

`login` opens the authorization page with $BROWSER (else xdg-open) and waits on a loopback \
callback, http://127.0.0.1:PORT/callback, on a port that stays the same for the server and \
its authorization server (or the entry's oauth.redirectUri). On SSH or a headless machine, \
--paste prints the URL and reads back the address the browser is sent to; --device shows a \
code to enter on any device (when the server offers the device grant).

The client is the entry's oauth.clientId (oauth.clientSecret as ${secret:NAME}), else the one \
Steward registered there before, else a Client ID Metadata Document \
(steward.oauth.clientMetadataUrl in user or system settings), else Steward registers itself \
(Dynamic Client Registration), once per authorization server.

Examples:
  steward auth login github
  steward auth login github --paste          (over SSH)
  steward auth login linear --device
  steward auth status -o json
  steward auth logout github";

/// `steward auth`.
#[derive(Debug, Args)]
pub struct AuthArgs {
    #[command(subcommand)]
    pub action: AuthAction,
}

#[derive(Debug, Subcommand)]
pub enum AuthAction {
    /// Sign in to a remote server (browser, --paste or --device)
    Login {
        /// The server's name in this workspace
        name: String,
        /// Print the authorization URL and read back the address the
        /// browser lands on (for SSH and headless machines)
        #[arg(long, conflicts_with = "device")]
        paste: bool,
        /// Use the device authorization grant: enter a code on any device
        #[arg(long)]
        device: bool,
        /// How long to wait for the browser, the device or the pasted address
        #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
        timeout: Duration,
    },
    /// Show each remote server's sign-in: state, issuer, account, scopes,
    /// expiry, where the token is kept (never the token)
    Status {
        /// Output format
        #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
        output: Format,
    },
    /// Forget a remote server's tokens (its client registration is kept)
    Logout {
        /// The server's name in this workspace
        name: String,
    },
}

pub fn run(
    paths: &Paths,
    args: AuthArgs,
    env: &BTreeMap<String, String>,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let rt = runtime()?;
    match args.action {
        AuthAction::Login {
            name,
            paste,
            device,
            timeout,
        } => {
            let how = if device {
                How::Device
            } else if paste {
                How::Paste
            } else {
                How::Browser
            };
            login(&rt, paths, env, &name, how, timeout, io)
        }
        AuthAction::Status { output } => super::auth_status::status(&rt, paths, env, output, io),
        AuthAction::Logout { name } => super::auth_status::logout(&rt, paths, env, &name, io),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    Browser,
    Paste,
    Device,
}

fn sign_in_failed(e: SignInError) -> CommandError {
    failed(e.to_string())
}

fn login(
    rt: &tokio::runtime::Runtime,
    paths: &Paths,
    env: &BTreeMap<String, String>,
    name: &str,
    how: How,
    timeout: Duration,
    io: &mut Io<'_>,
) -> Result<ExitCode, CommandError> {
    let (remote, metadata_url) = remote(rt, paths, env, name)?;
    let store = rt.block_on(OAuthStore::open(&paths.home_dir));
    let http = rt
        .block_on(http::clients())
        .map_err(|e| failed(e.to_string()))?;
    let target = Target {
        server: remote.name.clone(),
        url: remote.url.clone(),
        sse: remote.spec.transport == McpTransport::Sse,
        oauth: remote.oauth.clone(),
        client_metadata_url: metadata_url,
        challenge: None,
    };
    let prepared = rt
        .block_on(flow::prepare(&store, http, target))
        .map_err(sign_in_failed)?;
    writeln!(
        io.err,
        "signing in to {name} at {} (client {})",
        prepared.issuer, prepared.client.client_id
    )?;
    let deadline = tokio::time::Instant::now() + timeout;
    let record = match how {
        How::Device => {
            let show = |code: &device::DeviceCode| {
                let _ = match &code.verification_uri_complete {
                    Some(complete) => writeln!(
                        io.err,
                        "open {complete} on any device (or {} and enter the code {}); waiting for the approval…",
                        code.verification_uri, code.user_code
                    ),
                    None => writeln!(
                        io.err,
                        "open {} on any device and enter the code {}; waiting for the approval…",
                        code.verification_uri, code.user_code
                    ),
                };
            };
            let signing = device::sign_in(&prepared, &store, show);
            rt.block_on(async { tokio::time::timeout_at(deadline, signing).await })
                .map_err(|_| sign_in_failed(SignInError::TimedOut))?
                .map_err(sign_in_failed)?
        }
        How::Paste => {
            writeln!(
                io.err,
                "open this URL in a browser on any machine and approve:\n\n  {}\n\n\
                 the browser then goes to {} (it will not load here); copy that address from its address bar and paste it below",
                prepared.authorization_url, prepared.redirect.uri
            )?;
            let pasted = read_pasted(io, timeout)?;
            match prepared.read_redirect(&pasted).map_err(sign_in_failed)? {
                Redirected::NotOurs => return Err(sign_in_failed(SignInError::WrongState)),
                Redirected::Code(callback) => rt
                    .block_on(prepared.finish(&store, &callback))
                    .map_err(sign_in_failed)?,
            }
        }
        How::Browser => rt.block_on(async {
            let mut listener = callback::listen(prepared.redirect.clone())
                .await
                .map_err(|e| sign_in_failed(e.into()))?;
            match open_browser(env, &prepared.authorization_url) {
                Ok(how) => {
                    let _ = writeln!(
                        io.err,
                        "opened the authorization page with {how}; waiting for the browser to come back to {}…",
                        prepared.redirect.uri
                    );
                }
                Err(why) => {
                    let device_hint = if prepared.device_endpoint().is_ok() {
                        format!(" or `steward auth login {name} --device` (this server offers it)")
                    } else {
                        String::new()
                    };
                    let _ = writeln!(
                        io.err,
                        "no browser can be opened here ({why}); run `steward auth login {name} --paste`{device_hint} instead, \
                         or open this URL in a browser that can reach {}:\n\n  {}\n",
                        prepared.redirect.uri, prepared.authorization_url
                    );
                }
            }
            flow::complete_on(&prepared, &store, &mut listener, deadline)
                .await
                .map_err(sign_in_failed)
        })?,
    };
    report(&record, &store, name, io)?;
    tell_controllers(rt, paths, &record.resource, &record.account, false, io)?;
    Ok(ExitCode::SUCCESS)
}

/// The address pasted on stdin (the first non-empty line), within `timeout`.
fn read_pasted(io: &mut Io<'_>, timeout: Duration) -> Result<String, CommandError> {
    if io::stdin().is_terminal() {
        write!(io.err, "redirected address: ")?;
        io.err.flush()?;
    }
    // Read on a thread of its own: a terminal left alone does not hold the
    // command past its --timeout.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in io::stdin().lock().lines() {
            match line {
                Ok(line) if line.trim().is_empty() => continue,
                Ok(line) => {
                    let _ = tx.send(Ok(line.trim().to_owned()));
                    return;
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
    });
    match rx.recv_timeout(timeout) {
        Ok(Ok(line)) => Ok(line),
        Ok(Err(e)) => Err(e.into()),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(failed(format!(
            "sign in: nothing was pasted within {} (--timeout)",
            humantime::format_duration(timeout)
        ))),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(failed(
            "sign in: nothing was pasted (stdin ended before an address)",
        )),
    }
}

fn report(
    record: &TokenRecord,
    store: &OAuthStore,
    name: &str,
    io: &mut Io<'_>,
) -> Result<(), CommandError> {
    let scopes = if record.scopes.is_empty() {
        "none named".to_owned()
    } else {
        record.scopes.join(" ")
    };
    let expiry = match record.remaining(now_secs()) {
        Some(left) if left > 0 => format!(
            "expires in {}",
            super::output::age(Duration::from_secs(left as u64))
        ),
        Some(_) => "already expired".to_owned(),
        None => "no expiry given".to_owned(),
    };
    let account = if record.account.is_empty() {
        String::new()
    } else {
        format!(" as account {}", record.account)
    };
    writeln!(
        io.out,
        "signed in to {name} at {}{account} (scopes: {scopes}; {expiry}{}); kept in {}",
        record.issuer,
        if record.refresh_token.is_some() {
            ", refreshable"
        } else {
            ""
        },
        kept_in(store)
    )?;
    Ok(())
}

/// Opens `url` with `$BROWSER` (each `:`-separated command in turn; `%s`
/// stands for the URL, else it is the last argument), else `xdg-open`
/// when there is a display. The command that opened it, or why none could.
fn open_browser(env: &BTreeMap<String, String>, url: &str) -> Result<String, String> {
    let spawn = |command: &str| {
        let script = if command.contains("%s") {
            command.replace("%s", "\"$1\"")
        } else {
            format!("{command} \"$1\"")
        };
        std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    };
    if let Some(browsers) = env.get("BROWSER").filter(|b| !b.trim().is_empty()) {
        for command in browsers.split(':').filter(|c| !c.trim().is_empty()) {
            if let Ok(child) = spawn(command) {
                reap_later(child);
                return Ok(format!("$BROWSER ({})", command.trim()));
            }
        }
        return Err("$BROWSER could not be run".to_owned());
    }
    let display = ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| env.get(*v).is_some_and(|d| !d.is_empty()));
    if !display {
        return Err("no $BROWSER and no display for xdg-open".to_owned());
    }
    let on_path = env
        .get("PATH")
        .is_some_and(|path| std::env::split_paths(path).any(|dir| dir.join("xdg-open").is_file()));
    if !on_path {
        return Err("no $BROWSER and no xdg-open".to_owned());
    }
    match spawn("xdg-open") {
        Ok(child) => {
            reap_later(child);
            Ok("xdg-open".to_owned())
        }
        Err(e) => Err(format!("xdg-open failed: {e}")),
    }
}

/// Waits for a browser command in the background (a browser may outlive
/// us: it is the user's).
fn reap_later(mut child: std::process::Child) {
    std::thread::spawn(move || {
        let _ = child.wait();
    });
}
