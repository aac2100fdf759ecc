//! How a stdio server is launched in a container: its image and arguments
//! from `docker run …`, a package runner (`npx`, `uvx`, …) with `--image`, or
//! a local program (refused: a cluster cannot run a file of this machine).

use super::*;

/// Container image and args of a stdio server, or why there are none.
pub(super) struct Launch {
    pub(super) image: String,
    pub(super) args: Vec<String>,
    /// `docker run -e NAME[=VALUE]` entries: VALUE as written, none when the
    /// host's variable is passed through.
    pub(super) docker_env: Vec<(String, Option<String>)>,
    pub(super) dropped_options: Vec<String>,
    /// What `--image` replaced, said in a comment.
    pub(super) replaced: Option<String>,
}

/// `docker run` options that take a value (as the next argument).
pub(super) const DOCKER_VALUE_OPTIONS: [&str; 34] = [
    "-e",
    "--env",
    "--env-file",
    "-v",
    "--volume",
    "--name",
    "--network",
    "--net",
    "-p",
    "--publish",
    "-u",
    "--user",
    "-w",
    "--workdir",
    "--entrypoint",
    "--mount",
    "-l",
    "--label",
    "--platform",
    "--pull",
    "-m",
    "--memory",
    "--cpus",
    "--add-host",
    "--dns",
    "-h",
    "--hostname",
    "--restart",
    "--security-opt",
    "--tmpfs",
    "--cap-add",
    "--cap-drop",
    "--device",
    "--shm-size",
];

pub(super) fn docker_launch(server: &Server<'_>, args: &[String]) -> Result<Launch, Refusal> {
    let mut it = args.iter();
    if it.next().map(String::as_str) != Some("run") {
        return Err(refuse(
            server,
            "a docker command other than `docker run` has no container to export",
            "write the entry as `docker run [OPTIONS] IMAGE [ARGS]`",
        ));
    }
    let mut launch = Launch {
        image: String::new(),
        args: Vec::new(),
        docker_env: Vec::new(),
        dropped_options: Vec::new(),
        replaced: None,
    };
    while let Some(arg) = it.next() {
        if !arg.starts_with('-') {
            launch.image = arg.clone();
            launch.args = it.cloned().collect();
            return Ok(launch);
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let value = if DOCKER_VALUE_OPTIONS.contains(&flag) && inline.is_none() {
            it.next().cloned()
        } else {
            inline
        };
        if matches!(flag, "-e" | "--env") {
            let value = value.unwrap_or_default();
            match value.split_once('=') {
                Some((name, v)) => launch
                    .docker_env
                    .push((name.to_owned(), Some(v.to_owned()))),
                None => launch.docker_env.push((value, None)),
            }
        } else if !matches!(
            flag,
            "-i" | "--interactive" | "--rm" | "-t" | "--tty" | "-it"
        ) {
            launch.dropped_options.push(flag.to_owned());
        }
    }
    Err(refuse(
        server,
        "its `docker run` names no image",
        "write the entry as `docker run [OPTIONS] IMAGE [ARGS]`",
    ))
}

/// `(package, version)` of an npm package spec (`@scope/pkg@1.2.3`).
pub(super) fn npm_version(package: &str) -> (&str, Option<&str>) {
    let at = package[1..].rfind('@').map(|i| i + 1);
    match at {
        Some(i) => (
            &package[..i],
            Some(&package[i + 1..]).filter(|v| !v.is_empty()),
        ),
        None => (package, None),
    }
}

/// `(package, version)` of a Python requirement (`pkg==1.2` or `pkg@1.2`).
pub(super) fn py_version(package: &str) -> (&str, Option<&str>) {
    match package.split_once("==").or_else(|| package.split_once('@')) {
        Some((p, v)) if !v.is_empty() => (p, Some(v)),
        _ => (package, None),
    }
}

/// A package runner's package, its version, and the args after it.
pub(super) fn runner_package(
    args: &[String],
    value_flags: &[&str],
) -> Option<(String, Vec<String>, Option<String>)> {
    let mut it = args.iter();
    let mut from = None;
    while let Some(arg) = it.next() {
        if arg == "--from" || arg == "-p" || arg == "--package" {
            from = it.next().cloned();
            continue;
        }
        if value_flags.contains(&arg.as_str()) {
            it.next();
            continue;
        }
        if arg.starts_with('-') {
            continue;
        }
        let rest: Vec<String> = it.cloned().collect();
        return Some((arg.clone(), rest, from));
    }
    None
}

pub(super) fn runner_launch(
    server: &Server<'_>,
    runner: &str,
    args: &[String],
    image: Option<&String>,
) -> Result<Launch, Refusal> {
    let npx = runner == "npx";
    let Some((command, rest, from)) =
        runner_package(args, &["--with", "--python", "--index-url", "--registry"])
    else {
        return Err(refuse(
            server,
            format!("its `{runner}` command names no package"),
            "name the package and its version",
        ));
    };
    let package = from.unwrap_or(command);
    if let Some(image) = image {
        return Ok(Launch {
            image: image.clone(),
            args: rest,
            docker_env: Vec::new(),
            dropped_options: Vec::new(),
            replaced: Some(format!("`{runner} {package}`")),
        });
    }
    let (name, version) = if npx {
        npm_version(&package)
    } else {
        py_version(&package)
    };
    let Some(version) = version.filter(|v| !matches!(*v, "latest" | "next")) else {
        return Err(refuse(
            server,
            format!(
                "`{runner} {package}` is not pinned to a version, so no reproducible image can be built"
            ),
            format!(
                "pin a version ({runner} {name}{}1.2.3), or pass --image {}=REF",
                if npx { "@" } else { "==" },
                server.name
            ),
        ));
    };
    Err(refuse(
        server,
        format!(
            "{} `{runner}` server needs a container image, and none was given",
            if npx { "an" } else { "a" }
        ),
        format!(
            "build one with `thv build --tag REF {runner}://{name}@{version}` and pass --image {}=REF",
            server.name
        ),
    ))
}

/// Interpreters whose first argument may be a local script.
pub(super) const INTERPRETERS: [&str; 10] = [
    "node", "python", "python3", "bun", "deno", "sh", "bash", "ruby", "perl", "php",
];

pub(super) fn looks_local(path: &str) -> bool {
    path.starts_with('/')
        || path.starts_with("./")
        || path.starts_with("../")
        || path.starts_with('~')
}

/// What an interpreter runs: the index of its program operand and whether
/// that is a file (a script) rather than a module (`python -m pkg.mod`);
/// none for inline code (`-c`, `-e`) or no operand.
pub(super) fn program(args: &[String]) -> Option<(usize, bool)> {
    let mut it = args.iter().enumerate();
    while let Some((i, arg)) = it.next() {
        match arg.as_str() {
            "-m" => return it.next().map(|(j, _)| (j, false)),
            "-c" | "-e" | "--eval" => return None,
            a if a.starts_with('-') => continue,
            _ => return Some((i, true)),
        }
    }
    None
}

/// The image and args of a stdio server that is neither `docker run` nor a
/// package runner: `--image` stands for the command (with an
/// interpreter's program); without it, the refusal says what is missing.
pub(super) fn launch(
    server: &Server<'_>,
    args: &[String],
    options: &Options,
) -> Result<Launch, Refusal> {
    let command = server.spec.command.as_deref().unwrap_or_default();
    let image = options.images.get(server.name);
    let base = command.rsplit('/').next().unwrap_or(command);
    match base {
        "docker" | "podman" => {
            let mut l = docker_launch(server, args)?;
            if let Some(image) = image {
                l.replaced = Some(format!("the image {}", l.image));
                l.image = image.clone();
            }
            return Ok(l);
        }
        "npx" | "uvx" => return runner_launch(server, base, args, image),
        _ => {}
    }
    let interpreted = if INTERPRETERS.contains(&base) {
        program(args)
    } else {
        None
    };
    if let Some(image) = image {
        let (stands_for, rest) = match interpreted {
            Some((i, _)) => (
                std::iter::once(command)
                    .chain(args[..=i].iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                args[i + 1..].to_vec(),
            ),
            None => (command.to_owned(), args.to_vec()),
        };
        return Ok(Launch {
            image: image.clone(),
            args: rest,
            docker_env: Vec::new(),
            dropped_options: Vec::new(),
            replaced: Some(format!("`{stands_for}`")),
        });
    }
    let fix = format!(
        "package the server as an image and pass --image {}=REF, or publish it to npm/PyPI and use npx/uvx",
        server.name
    );
    if looks_local(command) || command.contains('/') {
        return Err(refuse(
            server,
            format!("it runs the local executable {command}, which no container image holds"),
            fix,
        ));
    }
    if let Some((i, true)) = interpreted {
        let script = &args[i];
        if looks_local(script) || script.contains('/') || script.contains('.') {
            return Err(refuse(
                server,
                format!(
                    "it runs the local script {script} with {base}, which no container image holds"
                ),
                fix,
            ));
        }
    }
    Err(refuse(
        server,
        format!("the command {command} needs a container image, and none was given"),
        format!(
            "build an image that runs it and pass --image {}=REF",
            server.name
        ),
    ))
}
