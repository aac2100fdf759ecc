//! Requests by method name. async-lsp sends only `Request` types, whose
//! method is a compile-time constant, so every method we can send is listed
//! here (the LSP 3.17 client→server requests), with raw JSON params and
//! results; any other method goes through async-lsp's `forward` Service.

use std::future::Future;
use std::pin::Pin;

use async_lsp::ServerSocket;
use lsp_types::request::Request;
use serde_json::Value;

pub(super) type Answer = Pin<Box<dyn Future<Output = async_lsp::Result<Value>> + Send>>;

fn send<R: Request<Params = Value, Result = Value>>(
    socket: &ServerSocket,
    params: Value,
) -> Answer {
    let socket = socket.clone();
    Box::pin(async move { socket.request::<R>(params).await })
}

/// Any other method (extensions such as clangd's), through async-lsp's
/// `forward` Service impl; the main loop assigns the id.
fn any(socket: &ServerSocket, method: &str, params: Value) -> Option<Answer> {
    let request: async_lsp::AnyRequest =
        serde_json::from_value(serde_json::json!({ "id": 0, "method": method, "params": params }))
            .ok()?;
    let mut socket = socket.clone();
    Some(Box::pin(async move {
        tower_service::Service::call(&mut socket, request)
            .await
            .map_err(async_lsp::Error::from)
    }))
}

macro_rules! requests {
    ($($ty:ident => $method:literal,)*) => {
        $(
            pub(super) enum $ty {}
            impl Request for $ty {
                type Params = Value;
                type Result = Value;
                const METHOD: &'static str = $method;
            }
        )*

        /// Sends `method` (`None`: not a method async-lsp can send).
        pub(super) fn request(socket: &ServerSocket, method: &str, params: Value) -> Option<Answer> {
            match method {
                $($method => Some(send::<$ty>(socket, params)),)*
                _ => any(socket, method, params),
            }
        }
    };
}

requests! {
    Initialize => "initialize",
    Shutdown => "shutdown",
    Hover => "textDocument/hover",
    Definition => "textDocument/definition",
    Declaration => "textDocument/declaration",
    TypeDefinition => "textDocument/typeDefinition",
    Implementation => "textDocument/implementation",
    References => "textDocument/references",
    DocumentSymbol => "textDocument/documentSymbol",
    DocumentHighlight => "textDocument/documentHighlight",
    Completion => "textDocument/completion",
    CompletionResolve => "completionItem/resolve",
    SignatureHelp => "textDocument/signatureHelp",
    CodeAction => "textDocument/codeAction",
    CodeActionResolve => "codeAction/resolve",
    CodeLens => "textDocument/codeLens",
    CodeLensResolve => "codeLens/resolve",
    DocumentLink => "textDocument/documentLink",
    DocumentLinkResolve => "documentLink/resolve",
    DocumentColor => "textDocument/documentColor",
    ColorPresentation => "textDocument/colorPresentation",
    Formatting => "textDocument/formatting",
    RangeFormatting => "textDocument/rangeFormatting",
    OnTypeFormatting => "textDocument/onTypeFormatting",
    Rename => "textDocument/rename",
    PrepareRename => "textDocument/prepareRename",
    FoldingRange => "textDocument/foldingRange",
    SelectionRange => "textDocument/selectionRange",
    LinkedEditingRange => "textDocument/linkedEditingRange",
    Moniker => "textDocument/moniker",
    SemanticTokensFull => "textDocument/semanticTokens/full",
    SemanticTokensFullDelta => "textDocument/semanticTokens/full/delta",
    SemanticTokensRange => "textDocument/semanticTokens/range",
    InlayHint => "textDocument/inlayHint",
    InlayHintResolve => "inlayHint/resolve",
    InlineValue => "textDocument/inlineValue",
    DocumentDiagnostic => "textDocument/diagnostic",
    WillSaveWaitUntil => "textDocument/willSaveWaitUntil",
    PrepareCallHierarchy => "textDocument/prepareCallHierarchy",
    IncomingCalls => "callHierarchy/incomingCalls",
    OutgoingCalls => "callHierarchy/outgoingCalls",
    PrepareTypeHierarchy => "textDocument/prepareTypeHierarchy",
    Supertypes => "typeHierarchy/supertypes",
    Subtypes => "typeHierarchy/subtypes",
    WorkspaceSymbol => "workspace/symbol",
    WorkspaceSymbolResolve => "workspaceSymbol/resolve",
    WorkspaceDiagnostic => "workspace/diagnostic",
    ExecuteCommand => "workspace/executeCommand",
    WillCreateFiles => "workspace/willCreateFiles",
    WillRenameFiles => "workspace/willRenameFiles",
    WillDeleteFiles => "workspace/willDeleteFiles",
}
