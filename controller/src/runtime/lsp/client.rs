//! The client side of the protocol: the answers to the requests a server
//! sends to its client (`workspace/configuration` from the spec's settings,
//! `workspace/workspaceFolders`, registrations, progress tokens), the
//! notifications it sends (diagnostics and work-done progress are kept; none
//! ends the session), and the event that ends the main loop.

use std::ops::ControlFlow;
use std::sync::Arc;

use async_lsp::router::Router;
use async_lsp::{AnyNotification, AnyRequest, ErrorCode, ResponseError};
use serde_json::Value;

use super::session::Shared;

/// Ends the main loop (after what is queued before it is written).
pub(super) struct Stop;

pub(super) struct ClientState {
    pub(super) shared: Arc<Shared>,
    pub(super) settings: Option<Value>,
    pub(super) folders: Value,
}

impl ClientState {
    /// The answer to a request the server sends to the client.
    fn answer(&self, method: &str, params: &Value) -> Result<Value, ResponseError> {
        tracing::debug!(server = %self.shared.name, method, "language server request");
        match method {
            "workspace/configuration" => {
                let items = params["items"].as_array().map_or(&[][..], Vec::as_slice);
                Ok(Value::Array(
                    items
                        .iter()
                        .map(|item| {
                            configuration_section(self.settings.as_ref(), item["section"].as_str())
                        })
                        .collect(),
                ))
            }
            "workspace/workspaceFolders" => Ok(self.folders.clone()),
            "client/registerCapability"
            | "client/unregisterCapability"
            | "window/workDoneProgress/create"
            | "window/showMessageRequest" => Ok(Value::Null),
            _ => Err(ResponseError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: {method}"),
            )),
        }
    }

    /// Every notification is accepted; none ends the session.
    fn notification(&self, notification: AnyNotification) {
        match notification.method.as_str() {
            "textDocument/publishDiagnostics" => self.shared.publish(notification.params),
            "$/progress" => self.shared.progress(&notification.params),
            "window/logMessage" | "window/showMessage" => tracing::debug!(
                server = %self.shared.name,
                kind = %notification.method,
                level = %notification.params["type"],
                message = %notification.params["message"].as_str().unwrap_or_default(),
                "language server message"
            ),
            method => tracing::trace!(server = %self.shared.name, method, "lsp notification"),
        }
    }
}

pub(super) fn client_router(state: ClientState) -> Router<ClientState> {
    let mut router = Router::new(state);
    router
        .unhandled_request(|state, request: AnyRequest| {
            std::future::ready(state.answer(&request.method, &request.params))
        })
        .unhandled_notification(|state, notification| {
            state.notification(notification);
            ControlFlow::Continue(())
        })
        .event(|_, Stop| ControlFlow::Break(Ok(())));
    router
}

/// `workspace/configuration` for one item: `section` as a dotted path into
/// the settings (`python.analysis` → `settings.python.analysis`), else as a
/// literal key (`{"python.analysis": …}`); no section → all the settings;
/// nothing there → null.
fn configuration_section(settings: Option<&Value>, section: Option<&str>) -> Value {
    let Some(settings) = settings else {
        return Value::Null;
    };
    let Some(section) = section.filter(|section| !section.is_empty()) else {
        return settings.clone();
    };
    section
        .split('.')
        .try_fold(settings, |value, key| value.get(key))
        .or_else(|| settings.get(section))
        .cloned()
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn configuration_sections_are_dotted_paths_into_the_settings() {
        let settings = json!({
            "python": { "analysis": { "typeCheckingMode": "basic" } },
            "flat.key": 1,
        });
        let section = |name| configuration_section(Some(&settings), name);
        assert_eq!(
            section(Some("python.analysis")),
            json!({ "typeCheckingMode": "basic" })
        );
        assert_eq!(section(Some("python.analysis.typeCheckingMode")), "basic");
        assert_eq!(section(None), settings, "no section: everything");
        assert_eq!(section(Some("")), settings);
        assert_eq!(section(Some("python.missing")), Value::Null);
        assert_eq!(section(Some("flat.key")), 1, "a literal dotted key");
        assert_eq!(configuration_section(None, Some("python")), Value::Null);
    }
}
