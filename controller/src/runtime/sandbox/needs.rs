//! What a command needs to run under a confined profile (`none`,
//! `network`, custom): its runtime — the program, its package directory and
//! its interpreter's (from the `#!` line) —, the files its command line
//! names, and, for a package runner (`npx`, `bunx`, `uvx`, `pipx run`),
//! the registry it fetches from.

use std::path::{Path, PathBuf};

/// Where a program's runtime lives: its own file and package, and its
/// interpreter's (from the `#!` line), resolved through symlinks.
pub fn runtime_of(program: &Path, env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut add = |p: &Path| {
        out.push(p.to_path_buf());
        out.extend(prefix_of(p));
        if let Ok(real) = std::fs::canonicalize(p) {
            out.extend(prefix_of(&real));
            out.push(real);
        }
    };
    add(program);
    if let Some(interpreter) = shebang(program) {
        let mut words = interpreter.split_whitespace();
        let first = words.next().unwrap_or_default();
        let interpreter = if Path::new(first).file_name().is_some_and(|n| n == "env") {
            words
                .find(|w| !w.starts_with('-'))
                .and_then(|name| on_path(name, env))
        } else {
            Some(PathBuf::from(first))
        };
        if let Some(i) = interpreter {
            add(&i);
        }
    }
    out
}

/// The directory a program's package lives in: `X` for `X/bin/prog`, the
/// outermost `node_modules` for a Node package, else its directory.
fn prefix_of(p: &Path) -> Option<PathBuf> {
    if let Some(modules) = p
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
    {
        return Some(modules.to_path_buf());
    }
    let dir = p.parent()?;
    if dir.file_name().is_some_and(|n| n == "bin") {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// The `#!` line of a script (without `#!`), if it is one.
fn shebang(program: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let head = head.get(..n)?.strip_prefix(b"#!")?;
    let line = head.split(|b| *b == b'\n').next()?;
    Some(String::from_utf8_lossy(line).trim().to_owned())
}

/// `name` looked up in the controller's `PATH` (as the spawn resolves
/// commands).
fn on_path(name: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let path = env("PATH").or_else(|| std::env::var("PATH").ok())?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The files a command line names (a script, a config file), and a
/// script's directory (its sibling modules).
pub fn named_files(args: &[String], cwd: &Path) -> Vec<PathBuf> {
    const SCRIPTS: [&str; 6] = ["py", "js", "mjs", "cjs", "ts", "rb"];
    let mut out = Vec::new();
    for arg in args {
        let value = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
        if value.is_empty() || value.starts_with('-') {
            continue;
        }
        let p = cwd.join(value);
        if !p.exists() {
            continue;
        }
        let script = p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SCRIPTS.contains(&e));
        if script && let Some(dir) = p.parent() {
            out.push(dir.to_path_buf());
        }
        out.push(p);
    }
    out
}

/// A package runner (`npx`, `bunx`, `uvx`, `pipx run`) and its registry's
/// hosts, when `program` is one.
pub fn package_runner(
    program: &Path,
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, Vec<String>)> {
    let name = program.file_name()?.to_str()?;
    let host_of = |url: String| {
        url::Url::parse(&url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
    };
    let npm = || {
        vec![
            env("npm_config_registry")
                .or_else(|| env("NPM_CONFIG_REGISTRY"))
                .and_then(host_of)
                .unwrap_or_else(|| "registry.npmjs.org".to_owned()),
        ]
    };
    let pypi = || match ["UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"]
        .iter()
        .find_map(|v| env(v).and_then(host_of))
    {
        Some(host) => vec![host],
        None => vec!["pypi.org".to_owned(), "files.pythonhosted.org".to_owned()],
    };
    let hosts = match name {
        "npx" | "bunx" => npm(),
        "uvx" => pypi(),
        "pipx" if args.first().is_some_and(|a| a == "run") => pypi(),
        _ => return None,
    };
    Some((name.to_owned(), hosts))
}
