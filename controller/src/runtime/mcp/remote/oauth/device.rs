//! The device authorization grant (RFC 8628), for machines where no browser
//! can reach a loopback callback: Steward asks the authorization server for
//! a user code, shows where to enter it (on any device), and polls the token
//! endpoint at the interval the server sets until the user approves, denies,
//! or the code expires. The requests carry the `resource` (RFC 8707) and the
//! client's registered authentication, as the code flow's do.

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::flow::{Prepared, SignInError, granted_from};
use super::http::{ClientAuth, post_form, token_request};
use super::register::DEVICE_GRANT;
use super::store::{OAuthStore, TokenRecord};

/// The interval when the server names none (RFC 8628 §3.2).
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// What `slow_down` adds to the interval (RFC 8628 §3.5).
const SLOW_DOWN: Duration = Duration::from_secs(5);

/// What the user is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCode {
    pub user_code: String,
    pub verification_uri: String,
    /// The URI with the code in it, when the server gives one.
    pub verification_uri_complete: Option<String>,
    /// How long the code is good for.
    pub expires_in: Duration,
}

/// Signs in with a device code: `show` tells the user where to go; returns
/// once the token is stored.
pub async fn sign_in(
    prepared: &Prepared,
    store: &OAuthStore,
    show: impl FnOnce(&DeviceCode),
) -> Result<TokenRecord, SignInError> {
    let endpoint = prepared.device_endpoint()?;
    let auth = ClientAuth {
        client_id: &prepared.client.client_id,
        client_secret: prepared.client.client_secret.as_deref(),
        method: prepared.client.method,
    };
    let scope = prepared.scopes.join(" ");
    let mut form = vec![("resource", prepared.resource.as_str())];
    if !scope.is_empty() {
        form.push(("scope", scope.as_str()));
    }
    let answer = post_form(prepared.http(), &endpoint, &form, auth)
        .await
        .map_err(SignInError::DeviceHttp)?;
    let text = |key: &str| {
        answer
            .get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let number = |key: &str| answer.get(key).and_then(Value::as_u64);
    let missing = |key: &str| SignInError::Device(format!("the answer has no {key}"));
    let device_code = text("device_code").ok_or_else(|| missing("device_code"))?;
    let code = DeviceCode {
        user_code: text("user_code").ok_or_else(|| missing("user_code"))?,
        verification_uri: text("verification_uri")
            .or_else(|| text("verification_url"))
            .ok_or_else(|| missing("verification_uri"))?,
        verification_uri_complete: text("verification_uri_complete"),
        expires_in: Duration::from_secs(number("expires_in").unwrap_or(600)),
    };
    let mut interval = number("interval").map_or(DEFAULT_INTERVAL, Duration::from_secs);
    let deadline = Instant::now() + code.expires_in;
    show(&code);
    let poll = [
        ("grant_type", DEVICE_GRANT),
        ("device_code", device_code.as_str()),
        ("resource", prepared.resource.as_str()),
    ];
    loop {
        if Instant::now() + interval > deadline {
            return Err(SignInError::Device(format!(
                "the code expired after {} before it was approved; run the command again",
                humantime::format_duration(code.expires_in)
            )));
        }
        // The server's own pace (RFC 8628 §3.5), not a guess.
        tokio::time::sleep(interval).await;
        match token_request(
            prepared.http(),
            &prepared.metadata.token_endpoint,
            &poll,
            auth,
        )
        .await
        {
            Ok(answer) => {
                let granted = granted_from(answer.scope.as_deref(), &prepared.scopes);
                let record = prepared.record(
                    answer.access_token,
                    answer.token_type,
                    answer.refresh_token,
                    answer.expires_in,
                    granted,
                );
                store.save_sign_in(&record).await?;
                return Ok(record);
            }
            Err(error) => match error.code() {
                Some("authorization_pending") => {}
                Some("slow_down") => interval += SLOW_DOWN,
                Some("access_denied") => {
                    return Err(SignInError::Device(
                        "the sign-in was denied at the authorization server".to_owned(),
                    ));
                }
                Some("expired_token") => {
                    return Err(SignInError::Device(
                        "the code expired before it was approved; run the command again".to_owned(),
                    ));
                }
                _ => return Err(SignInError::DeviceHttp(error)),
            },
        }
    }
}
