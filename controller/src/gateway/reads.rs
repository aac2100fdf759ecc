//! `prompts/get` and `resources/read`: routed to their server (by exposed
//! prompt name or by URI), the client's `_meta` passed on, and — being
//! reads, which may run twice — forwarded once more when the connection
//! closed under them in a restart or an idle stop. The arguments are owned
//! so that a request of a 2026-07-28 agent can run through the bridge
//! ([`super::bridge`]).

use std::future::Future;
use std::sync::Arc;

use rmcp::model::{
    ClientRequest, ErrorData, GetPromptRequest, GetPromptRequestParams, ReadResourceRequest,
    ReadResourceRequestParams, ServerResult,
};

use super::Gateway;
use super::call::{Origin, call_error, forward, native, stale_state, unexpected, upstream_meta};
use super::profile::Profile;
use super::registry::Upstream;
use super::route::{Kind, Refusal};
use crate::runtime::mcp::CallError;

impl Gateway {
    /// `prompts/get` of `request` (its name as `profile` names prompts) for
    /// `origin`: the server's `GetPromptResult`, or its `input_required`.
    pub async fn get_prompt(
        self: Arc<Self>,
        request: GetPromptRequestParams,
        profile: Profile,
        origin: Origin,
    ) -> Result<ServerResult, ErrorData> {
        let gateway = self.clone();
        let who = origin.clone();
        let resolve = move || {
            let (gateway, request, profile, who) = (
                gateway.clone(),
                request.clone(),
                profile.clone(),
                who.clone(),
            );
            async move {
                let (up, original) = gateway
                    .resolve(Kind::Prompt, &request.name, profile.naming())
                    .await
                    .map_err(
                        |(Refusal::Unavailable { why, .. } | Refusal::Unknown(why))| {
                            ErrorData::invalid_params(why, None)
                        },
                    )?;
                if request.request_state.is_some() && !native(&who.meta, &up) {
                    return Err(stale_state());
                }
                let mut upstream = request;
                upstream.name = original;
                upstream.meta = upstream_meta(&who, native(&who.meta, &up));
                let upstream = ClientRequest::GetPromptRequest(GetPromptRequest::new(upstream));
                Ok((up, upstream))
            }
        };
        let (up, answer) = self.forward_once_more(&origin, resolve).await?;
        match answer {
            Ok(
                result @ (ServerResult::GetPromptResult(_) | ServerResult::InputRequiredResult(_)),
            ) => Ok(result),
            Ok(_) => Err(unexpected(&up.server, "prompts/get")),
            Err(e) => Err(call_error(&up.server, e)),
        }
    }

    /// `resources/read` of `request` (to the server `profile` sees it at)
    /// for `origin`: the server's `ReadResourceResult`, or its
    /// `input_required`.
    pub async fn read_resource(
        self: Arc<Self>,
        request: ReadResourceRequestParams,
        profile: Profile,
        origin: Origin,
    ) -> Result<ServerResult, ErrorData> {
        let gateway = self.clone();
        let who = origin.clone();
        let resolve = move || {
            let (gateway, request, profile, who) = (
                gateway.clone(),
                request.clone(),
                profile.clone(),
                who.clone(),
            );
            async move {
                let up = gateway
                    .resource_upstream(&request.uri, profile.naming())
                    .await?;
                if request.request_state.is_some() && !native(&who.meta, &up) {
                    return Err(stale_state());
                }
                let mut upstream = request;
                upstream.meta = upstream_meta(&who, native(&who.meta, &up));
                let upstream =
                    ClientRequest::ReadResourceRequest(ReadResourceRequest::new(upstream));
                Ok((up, upstream))
            }
        };
        let (up, answer) = self.forward_once_more(&origin, resolve).await?;
        match answer {
            Ok(
                result @ (ServerResult::ReadResourceResult(_)
                | ServerResult::InputRequiredResult(_)),
            ) => Ok(result),
            Ok(_) => Err(unexpected(&up.server, "resources/read")),
            Err(e) => Err(call_error(&up.server, e)),
        }
    }

    /// Forward the request `resolve` makes (with the connection of its
    /// server); when that connection closed under it in a restart or an
    /// idle stop, resolve and forward it once more
    /// ([`Gateway::worth_another_try`]): only for reads, which may run
    /// twice.
    async fn forward_once_more<F, Fut>(
        &self,
        origin: &Origin,
        mut resolve: F,
    ) -> Result<(Arc<Upstream>, Result<ServerResult, CallError>), ErrorData>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<(Arc<Upstream>, ClientRequest), ErrorData>>,
    {
        let progress = origin.meta.get_progress_token();
        let mut retried = false;
        loop {
            let (up, request) = resolve().await?;
            match forward(&up, request, origin, progress.clone(), None).await {
                Err(CallError::Closed | CallError::NotSent)
                    if !retried && self.worth_another_try(&up) =>
                {
                    retried = true
                }
                answer => return Ok((up, answer)),
            }
        }
    }
}
