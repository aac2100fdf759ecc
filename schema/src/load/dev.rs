//! Building the `dev` block of an MCP or LSP entry: every glob of
//! `dev.watch` parsed (an invalid one is an error at its place, so the
//! source is invalid with file:line:col), and `dev.cwd` resolved to an
//! absolute directory.

use std::path::Path;

use super::entries::expand_field;
use super::paths::{absolute_in, normalize_lexically};
use crate::expand::Vars;
use crate::formats::{DevEntry, DevWatch};
use crate::memo::FieldErrors;
use crate::pathglob::PathGlob;
use crate::resource::DevSpec;

/// `dev` normalized: globs checked, `dev.cwd` made absolute (relative to
/// the workspace; absent: `default_cwd`, the directory the server runs
/// in). Problems go to `errors`.
pub(super) fn build_dev(
    dev: Option<&DevEntry>,
    default_cwd: &Path,
    workspace: &Path,
    vars: &Vars<'_>,
    warnings: &mut FieldErrors,
    errors: &mut FieldErrors,
) -> Option<DevSpec> {
    let dev = dev?;
    let watch = dev.watch.globs();
    let place = |i: usize| match dev.watch {
        DevWatch::One(_) => "/dev/watch".to_owned(),
        DevWatch::Many(_) => format!("/dev/watch/{i}"),
    };
    if watch.is_empty() {
        errors.push((
            "/dev/watch".to_owned(),
            "dev.watch lists no glob: name the files whose change reloads the server".to_owned(),
        ));
    }
    for (i, glob) in watch.iter().enumerate() {
        if let Err(e) = PathGlob::parse(glob) {
            errors.push((place(i), format!("invalid glob: {e}")));
        }
    }
    let cwd = match expand_field(&dev.cwd, "/dev/cwd", vars, warnings) {
        Some(cwd) if !cwd.trim().is_empty() => normalize_lexically(&absolute_in(workspace, &cwd)),
        _ => default_cwd.to_path_buf(),
    };
    let build = dev.build.clone().filter(|b| !b.trim().is_empty());
    Some(DevSpec {
        watch,
        build,
        cwd: cwd.to_string_lossy().into_owned(),
    })
}
