//! A scripted browser for sign-in tests (`BROWSER=follow-redirects`): GETs
//! the URL it is given and follows every redirect — the authorization
//! server's to Steward's loopback callback included — as a browser whose
//! user approves at once would. Exits 0 when the last page answered 2xx.
//!
//! `FOLLOW_REDIRECTS_LOG`, when set, is a file the final URL and status
//! are appended to (what the "browser" ended up showing).

use std::io::Write as _;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: follow-redirects URL");
        return std::process::ExitCode::from(2);
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(20))
        .build()
        .expect("a client");
    let (status, last) = match client.get(&url).send().await {
        Ok(response) => (response.status().as_u16(), response.url().to_string()),
        Err(e) => {
            eprintln!("follow-redirects: {e}");
            (0, url.clone())
        }
    };
    if let Ok(path) = std::env::var("FOLLOW_REDIRECTS_LOG")
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    {
        let _ = writeln!(file, "{status} {last}");
    }
    if (200..300).contains(&status) {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
