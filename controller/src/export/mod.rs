//! Exporting the workspace's MCP servers to another runtime. A consumer at
//! the end of the flow, beside `status`: it reads the desired state (and,
//! when a controller runs, the tool lists it observed) and writes documents;
//! it decides nothing the controller decides.
//!
//! - [`toolhive`]: the pure mapping from normalized specs to ToolHive
//!   operator resources (`toolhive.stacklok.dev/v1beta1`), with the servers
//!   it refuses and why;
//! - [`check`]: validation of such manifests against the CRDs' structural
//!   schemas, as the API server applies them;
//! - `keyring`: `${secret:NAME}` references as Secret stubs named after NAME.
pub mod check;
mod keyring;
pub mod toolhive;
