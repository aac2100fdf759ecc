//! Installing Steward and living with it (product.md §13), as CLI tests:
//! `--version`, the completion scripts and man pages generated from the
//! command line, `steward doctor`, and `steward schema --editor vscode`'s
//! files (the language server itself uses them in `editor_schemas.rs`).

use std::collections::BTreeSet;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use steward_schema::resource::{Item, Phase};
use steward_tests::fake_mcp::FakeMcpConfig;
use steward_tests::harness::{Env, Run, bin};

#[test]
fn version_names_the_commit_and_the_protocol_versions() {
    let sb = Env::new();
    let run = sb.run(&["--version"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[0],
        format!("steward {}", env!("CARGO_PKG_VERSION")),
        "{}",
        run.stdout
    );
    // The commit of this checkout (the build script reads it again after
    // every commit), or `unknown` where there is no git.
    let git = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_owned());
    let commit = git.unwrap_or_else(|| "unknown".to_owned());
    assert_eq!(lines[1], format!("commit {commit}"), "{}", run.stdout);
    let versions = steward::cli::version::mcp_protocol_versions();
    assert!(versions.contains(&"2025-11-25"), "{versions:?}");
    assert_eq!(
        lines[2],
        format!(
            "MCP protocol versions (steward mcp): {}",
            versions.join(", ")
        )
    );
    let short = sb.run(&["-V"]);
    assert_eq!(
        short.stdout.trim(),
        format!("steward {} ({commit})", env!("CARGO_PKG_VERSION"))
    );
}

/// Bash completes steward's subcommands with the script `steward
/// completions bash` prints, sourced as a completion directory's file is.
#[test]
fn bash_completes_subcommands_and_their_options() {
    let sb = Env::new();
    let run = sb.run(&["completions", "bash"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let script = sb.root.path().join("steward.bash");
    std::fs::write(&script, &run.stdout).unwrap();
    let complete = |words: &str| {
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; complete -p steward; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
                 _steward steward \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .expect("bash runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let out = complete("steward doc");
    assert!(
        out.lines().next().unwrap().ends_with("-F _steward steward"),
        "{out}"
    );
    assert!(out.lines().any(|l| l == "doctor"), "{out}");
    let out = complete("steward doctor --");
    assert!(out.lines().any(|l| l == "--output"), "{out}");
    let out = complete("steward completions ''");
    for shell in ["bash", "zsh", "fish"] {
        assert!(out.lines().any(|l| l == shell), "{shell}: {out}");
    }
    for shell in ["zsh", "fish"] {
        let run = sb.run(&["completions", shell]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(run.stdout.contains("doctor"), "{shell}: {}", run.stdout);
    }
}

/// `steward man --out DIR`: steward.1 and one page per visible command,
/// subcommands of subcommands included, each titled with its name.
#[test]
fn man_writes_a_page_per_command() {
    let sb = Env::new();
    let dir = sb.root.path().join("man1");
    let run = sb.run(&["man", "--out", dir.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let mut want = BTreeSet::new();
    let mut root = steward::cli::version::command().disable_help_subcommand(true);
    root.build();
    let mut pending = vec![root];
    while let Some(cmd) = pending.pop() {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name());
        want.insert(format!("{name}.1"));
        pending.extend(cmd.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    }
    let have: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(have, want);
    for page in [
        "steward.1",
        "steward-doctor.1",
        "steward-lsp-hover.1",
        "steward-run.1",
    ] {
        assert!(have.contains(page), "{page} missing: {have:?}");
    }
    let doctor = std::fs::read_to_string(dir.join("steward-doctor.1")).unwrap();
    assert!(doctor.contains(".TH steward-doctor 1 "), "{doctor}");
    assert!(doctor.contains("Landlock"), "the long help is the page");
    // Without --out: steward(1) on stdout.
    let page = sb.run(&["man"]);
    assert!(page.stdout.contains(".SH NAME"), "{}", page.stdout);
}

/// A directory for PATH holding the given commands (shell scripts that
/// exit 0) and `steward` itself.
fn path_dir(sb: &Env, commands: &[&str]) -> PathBuf {
    let dir = sb.root.path().join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    for command in commands {
        let path = dir.join(command);
        std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    symlink(bin("steward"), dir.join("steward")).unwrap();
    dir
}

fn doctor(sb: &Env, path: &Path, args: &[&str]) -> Run {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    Run::from(sb.cli(&all).env("PATH", path).output().unwrap())
}

fn check<'a>(report: &'a Value, check: &str, subject: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == check && c["subject"] == subject)
        .unwrap_or_else(|| panic!("no {check} check of {subject}: {report:#}"))
}

#[test]
fn doctor_on_a_healthy_workspace_exits_0() {
    let sb = Env::new();
    let path = path_dir(&sb, &["qwen", "claude"]);
    // A user server (runs without approval) and Steward registered with
    // Qwen Code in the same file, as `qwen mcp add` writes it.
    let mut servers = json!({"clock": sb.fake_mcp("clock", FakeMcpConfig::default())});
    servers["steward"] = json!({"command": "steward", "args": ["mcp", "--workspace", sb.ws]});
    sb.write_home("settings.json", &json!({"mcpServers": servers}).to_string());
    // A language server found by name on PATH, in a file with comments.
    std::fs::copy(bin("fake-lsp-server"), path.join("fake-lsp")).unwrap();
    let mut fake = sb.fake_lsp("fake", Default::default(), &[".x"]);
    fake["command"] = json!("fake-lsp");
    sb.write(
        ".lsp.json",
        &format!(
            "// language servers
{}",
            json!({"fake": fake})
        ),
    );
    let path_var = format!(
        "{}:{}",
        path.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let log = sb.root.path().join("controller.log");
    let controller = sb.start_logging_to(
        &[],
        std::fs::File::create(&log).unwrap().into(),
        &[("PATH", &path_var)],
        log,
    );
    controller.wait_for("clock and fake Ready", |s| {
        ["clock", "fake"].iter().all(|name| {
            s.items.iter().any(|i| {
                let phase = match i {
                    Item::McpServer(m) => m.status.phase,
                    Item::LspServer(l) => l.status.phase,
                };
                i.name() == *name && phase == Phase::Ready
            })
        })
    });

    let run = doctor(&sb, &path, &["-o", "json"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(report["kind"], "DoctorReport");
    assert_eq!(report["healthy"], true);
    let statuses: BTreeSet<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    assert!(!statuses.contains("error"), "{report:#}");

    assert_eq!(check(&report, "steward", "PATH")["status"], "ok");
    assert_eq!(
        check(&report, "homeDir", &sb.home.display().to_string())["status"],
        "ok"
    );
    let lsp_json = format!("{} (LspJson)", sb.ws.join(".lsp.json").display());
    assert_eq!(check(&report, "source", &lsp_json)["status"], "ok");
    let ctl = check(
        &report,
        "controller",
        &sb.paths().socket_path().display().to_string(),
    );
    assert_eq!(ctl["status"], "ok");
    assert_eq!(ctl["message"], format!("running, pid {}", controller.pid()));
    assert_eq!(check(&report, "server", "mcp/clock")["status"], "ok");
    assert_eq!(check(&report, "server", "lsp/fake")["status"], "ok");
    let qwen = check(&report, "agent", "qwen");
    assert_eq!(qwen["status"], "ok", "{qwen}");
    assert!(
        qwen["message"].as_str().unwrap().contains("user scope"),
        "{qwen}"
    );
    // Installed but Steward not registered: a warning saying how.
    let claude = check(&report, "agent", "claude");
    assert_eq!(claude["status"], "warning");
    assert!(
        claude["fix"]
            .as_str()
            .unwrap()
            .starts_with("claude mcp add --scope user steward -- steward mcp --workspace "),
        "{claude}"
    );
    assert_eq!(check(&report, "agent", "gemini")["status"], "info");
    assert_eq!(check(&report, "sandbox", "Landlock")["check"], "sandbox");

    // The text form says the same, and that nothing needs the user.
    let text = doctor(&sb, &path, &[]);
    assert_eq!(text.code, 0);
    assert!(text.stdout.contains("Nothing needs you"), "{}", text.stdout);
}

#[test]
fn doctor_names_a_missing_command_and_an_invalid_source_with_what_to_do() {
    let sb = Env::new();
    let path = path_dir(&sb, &[]);
    sb.write(
        ".mcp.json",
        r#"{"mcpServers": {"github": {"command": "github-mcp-server-not-installed"}}}"#,
    );
    let lsp = sb.write(".lsp.json", "{ \"clangd\": { \"command\": \"clangd\", } }");

    let run = doctor(&sb, &path, &[]);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.starts_with("error") && l.contains(needle))
            .unwrap_or_else(|| panic!("no error line with {needle}:\n{}", run.stdout))
    };
    let server = at("mcp/github");
    assert!(
        lines[server].contains("github-mcp-server-not-installed"),
        "{}",
        run.stdout
    );
    assert!(
        lines[server + 1].contains("→ install github-mcp-server-not-installed"),
        "{}",
        run.stdout
    );
    let source = at(&lsp.display().to_string());
    assert!(lines[source].contains("invalid"), "{}", run.stdout);
    assert!(
        lines[source + 1].contains(&format!("steward validate {}", lsp.display())),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("2 errors need you"), "{}", run.stdout);

    let json = doctor(&sb, &path, &["-o", "json"]);
    assert_eq!(json.code, 1);
    let report: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(report["healthy"], false);
    assert_eq!(check(&report, "server", "mcp/github")["status"], "error");
}

/// A registration whose command cannot start is an error even when the
/// agent itself is not installed here; Codex's TOML is read too.
#[test]
fn doctor_reads_codex_and_flags_a_registration_that_cannot_start() {
    let sb = Env::new();
    let path = path_dir(&sb, &["codex"]);
    let codex = sb.root.path().join("codex-home");
    std::fs::create_dir_all(&codex).unwrap();
    std::fs::write(
        codex.join("config.toml"),
        "[mcp_servers.steward]\ncommand = \"steward\"\nargs = [\"mcp\"]\n",
    )
    .unwrap();
    sb.write_home(
        ".gemini/settings.json",
        r#"{"mcpServers": {"st": {"command": "/nonexistent/steward", "args": ["mcp"]}}}"#,
    );
    let run = Run::from(
        sb.cli(&["doctor", "-o", "json"])
            .env("PATH", &path)
            .env("CODEX_HOME", &codex)
            .output()
            .unwrap(),
    );
    let report: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(run.code, 1, "{report:#}");
    let codex = check(&report, "agent", "codex");
    assert_eq!(codex["status"], "ok", "{codex}");
    let gemini: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["subject"] == "gemini")
        .collect();
    assert!(
        gemini.iter().any(|c| c["status"] == "error"
            && c["message"]
                .as_str()
                .unwrap()
                .contains("/nonexistent/steward")),
        "{gemini:#?}"
    );
}

#[test]
fn schema_editor_writes_schemas_once_per_build_and_merges_settings() {
    let sb = Env::new();
    let run = sb.run(&["schema", "--editor", "vscode"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let printed: Value = serde_json::from_str(&run.stdout).unwrap();
    let dir = sb.home.join("steward/schemas");
    let entries = printed["json.schemas"].as_array().unwrap();
    let by_url = |file: &str| {
        let url = format!("file://{}", dir.join(file).display());
        entries
            .iter()
            .find(|e| e["url"] == url.as_str())
            .unwrap_or_else(|| panic!("no {url}: {printed:#}"))
            .clone()
    };
    assert_eq!(
        by_url("mcp-json.schema.json")["fileMatch"],
        json!([".mcp.json"])
    );
    assert_eq!(
        by_url("lsp-json.schema.json")["fileMatch"],
        json!([".lsp.json"])
    );
    let settings = by_url("settings.schema.json")["fileMatch"].clone();
    assert_eq!(settings[0], ".qwen/settings.json");
    assert_eq!(
        settings[1],
        sb.home.join("settings.json").display().to_string()
    );
    assert!(
        by_url("approvals.schema.json")["fileMatch"]
            .as_array()
            .unwrap()
            .contains(&json!(
                sb.home.join("mcpApprovals.json").display().to_string()
            ))
    );
    by_url("trusted-folders.schema.json");
    by_url("extension.schema.json");
    // Each file is the schema `steward schema NAME` prints.
    let written = std::fs::read_to_string(dir.join("mcp-json.schema.json")).unwrap();
    assert_eq!(written, sb.run(&["schema", "mcp-json"]).stdout);
    assert!(run.stderr.contains("wrote the schemas"), "{}", run.stderr);

    // The same build does not write them again; another build does.
    let again = sb.run(&["schema", "--editor", "vscode"]);
    assert!(!again.stderr.contains("wrote"), "{}", again.stderr);
    std::fs::write(
        dir.join("steward-build.txt"),
        "steward 0.0.1 0123456789ab\n",
    )
    .unwrap();
    std::fs::write(dir.join("mcp-json.schema.json"), "{}").unwrap();
    let upgraded = sb.run(&["schema", "--editor", "vscode"]);
    assert!(upgraded.stderr.contains("wrote"), "{}", upgraded.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.join("mcp-json.schema.json")).unwrap(),
        written
    );

    // --write: merged into .vscode/settings.json, comments and the rest kept.
    let vscode = sb.write(
        ".vscode/settings.json",
        "{\n  // team settings\n  \"editor.tabSize\": 2,\n  \"json.schemas\": [\n    {\"fileMatch\": [\"x.json\"], \"url\": \"./x.schema.json\"}, // ours\n  ],\n}\n",
    );
    std::fs::set_permissions(&vscode, std::fs::Permissions::from_mode(0o664)).unwrap();
    for _ in 0..2 {
        let run = sb.run(&["schema", "--editor", "vscode", "--write"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.stdout.trim(), vscode.display().to_string());
    }
    let text = std::fs::read_to_string(&vscode).unwrap();
    for kept in [
        "// team settings",
        "\"editor.tabSize\": 2",
        "./x.schema.json",
        "// ours",
    ] {
        assert!(text.contains(kept), "{kept} lost:\n{text}");
    }
    assert_eq!(text.matches("mcp-json.schema.json").count(), 1, "{text}");
    let mode = std::fs::metadata(&vscode).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o664);

    // A settings file that is not JSON is left alone, with what to do.
    sb.write(".vscode/settings.json", "{ \"a\": }");
    let bad = sb.run(&["schema", "--editor", "vscode", "--write"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.starts_with("steward: failed to merge into "),
        "{}",
        bad.stderr
    );
}

/// An upgrade reaches the editor: `steward run` writes the editor schemas
/// again when another build wrote them (and never installs them itself).
#[test]
fn steward_run_refreshes_the_editor_schemas_another_build_wrote() {
    let sb = Env::new();
    let dir = sb.home.join("steward/schemas");
    {
        let _controller = sb.start(&[]);
        assert!(!dir.exists(), "run installed editor schemas unasked");
    }
    assert_eq!(sb.run(&["schema", "--editor", "vscode"]).code, 0);
    let stamp = dir.join("steward-build.txt");
    let current = std::fs::read_to_string(&stamp).unwrap();
    std::fs::write(&stamp, "steward 0.0.1 0123456789ab\n").unwrap();
    std::fs::write(dir.join("lsp-json.schema.json"), "{}").unwrap();
    let _controller = sb.start(&[]);
    // The controller answered: the refresh, before it started, is done.
    assert_eq!(std::fs::read_to_string(&stamp).unwrap(), current);
    assert_eq!(
        std::fs::read_to_string(dir.join("lsp-json.schema.json")).unwrap(),
        sb.run(&["schema", "lsp-json"]).stdout
    );
}
