//! `steward validate`: every problem as `path:line:col: message (at /ptr)`
//! on stdout (warnings as `path:line:col: warning: message`), exit 1 when
//! there is an error, 0 for warnings alone; format chosen from the file name.

use steward_tests::harness::Env;

use crate::common;

/// One broken file per kind of problem, in the workspace.
fn broken_files(sb: &Env) -> Vec<&'static str> {
    sb.write(
        "syntax.mcp.json",
        "{\n  \"mcpServers\": {\n    \"a\": { \"command\": \"x\", },\n  }\n}\n",
    );
    sb.write(
        "types/settings.json",
        r#"{
  "mcp": { "allowed": "alpha" },
  "mcpServers": { "t": { "command": "x", "timeout": "soon" } }
}"#,
    );
    sb.write(
        "transport.mcp.json",
        r#"{ "mcpServers": { "ws": { "type": "websocket", "url": "wss://x.example" } } }"#,
    );
    sb.write(
        "transport.lsp.json",
        r#"{ "go": { "command": "gopls", "transport": "pipe" } }"#,
    );
    sb.write(
        "env.mcp.json",
        r#"{
  "mcpServers": {
    "needs-token": {
      "command": "srv",
      "env": { "TOKEN": "${STEWARD_TEST_UNSET_TOKEN}", "MODE": "${MODE:-fast}" }
    }
  }
}"#,
    );
    sb.write(
        "folder.lsp.json",
        r#"{ "ts": { "command": "tsserver", "workspaceFolder": "../elsewhere" } }"#,
    );
    sb.write(
        "socket.lsp.json",
        r#"{
  "go": { "command": "gopls", "transport": "tcp", "socket": { "host": "localhost", "port": "eighty" } },
  "zig": { "command": "zls", "socket": 42 }
}"#,
    );
    vec![
        "syntax.mcp.json",
        "types/settings.json",
        "transport.mcp.json",
        "transport.lsp.json",
        "env.mcp.json",
        "folder.lsp.json",
        "socket.lsp.json",
    ]
}

#[test]
fn validate_broken_files_snapshot() {
    let sb = Env::new();
    let files = broken_files(&sb);
    let mut args = vec!["validate"];
    args.extend(files.iter().copied());
    let run = sb.run(&args);
    assert_eq!(run.code, 1, "{}", run.stderr);
    common::insta_settings(&sb).bind(|| {
        insta::assert_snapshot!(
            "validate_broken_files",
            format!("--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr)
        );
    });
}

#[test]
fn every_problem_line_is_path_line_col() {
    let sb = Env::new();
    let files = broken_files(&sb);
    for file in files {
        let run = sb.run(&["validate", file]);
        // Errors exit 1; what Qwen Code tolerates is a warning (exit 0).
        let errors = run.stdout.lines().any(|l| !l.contains(": warning: "));
        assert_eq!(run.code, i32::from(errors), "{file}: {}", run.stdout);
        assert!(!run.stdout.is_empty(), "{file}");
        for line in run.stdout.lines() {
            let rest = line
                .strip_prefix(&format!("{file}:"))
                .unwrap_or_else(|| panic!("not prefixed by the path: {line}"));
            let mut parts = rest.splitn(3, ':');
            let (l, c) = (parts.next().unwrap(), parts.next().unwrap());
            assert!(
                l.parse::<u32>().is_ok() && c.parse::<u32>().is_ok(),
                "no line:col in {line}"
            );
        }
    }
}

#[test]
fn unset_variable_names_variable_file_and_key() {
    let sb = Env::new();
    broken_files(&sb);
    let run = sb.run(&["validate", "env.mcp.json"]);
    // Qwen Code leaves it literal: a warning, not an error.
    assert_eq!(run.code, 0);
    let line = run.stdout.trim();
    assert!(line.starts_with("env.mcp.json:"), "{line}");
    assert!(line.contains(": warning: "), "{line}");
    assert!(line.contains("STEWARD_TEST_UNSET_TOKEN"), "{line}");
    assert!(line.contains("/mcpServers/needs-token/env/TOKEN"), "{line}");
    // A variable with a default is fine.
    assert!(!line.contains("MODE"), "{line}");
}

#[test]
fn workspace_validation_checks_every_source() {
    let sb = Env::new();
    // Nothing at all: every source absent, which is fine.
    let run = sb.run(&["validate"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.is_empty());
    assert_eq!(run.stderr, "ok: 9 sources checked, 9 absent\n");

    sb.write(
        ".mcp.json",
        r#"{ "mcpServers": { "a": { "command": "x" } } }"#,
    );
    sb.write_home(
        "extensions/e/qwen-extension.json",
        r#"{ "name": "e", "mcpServers": { "b": { "url": "not a url" } } }"#,
    );
    sb.write_home("trustedFolders.json", r#"{ "/x": "TRUST_EVERYTHING" }"#);
    let run = sb.run(&[
        "validate",
        "--mcp-config",
        r#"{"mcpServers": {"c": {"command": ""}}}"#,
    ]);
    assert_eq!(run.code, 1);
    common::insta_settings(&sb).bind(|| {
        insta::assert_snapshot!(
            "validate_workspace",
            format!("--- stdout\n{}--- stderr\n{}", run.stdout, run.stderr)
        );
    });
}

#[test]
fn valid_files_pass_with_a_summary() {
    let sb = Env::new();
    sb.write(
        ".mcp.json",
        "// comments are fine\n{ \"mcpServers\": { \"a\": { \"command\": \"x\" } } }",
    );
    sb.write(".lsp.json", r#"{ "rust": { "command": "rust-analyzer" } }"#);
    let run = sb.run(&["validate", ".mcp.json", ".lsp.json"]);
    assert_eq!((run.code, run.stdout.as_str()), (0, ""), "{}", run.stderr);
    assert_eq!(run.stderr, "ok: 2 files checked\n");
}

#[test]
fn a_named_file_that_does_not_exist_is_an_error() {
    let sb = Env::new();
    let run = sb.run(&["validate", "missing.mcp.json"]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "missing.mcp.json: the file does not exist\n");
}

#[test]
fn an_unknown_file_name_is_a_usage_error() {
    let sb = Env::new();
    sb.write("package.json", "{}");
    let run = sb.run(&["validate", "package.json"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("cannot tell the format of package.json"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("qwen-extension.json"), "{}", run.stderr);
}

/// A `workspaceFolder` that leaves the workspace through a symlink is
/// outside it: the workspace root is used, with a warning.
#[test]
fn workspace_folder_through_a_symlink_out_of_the_workspace_is_outside() {
    let sb = Env::new();
    let elsewhere = sb.root.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, sb.ws.join("out")).unwrap();
    std::fs::create_dir_all(sb.ws.join("inside")).unwrap();
    sb.write(
        ".lsp.json",
        r#"{ "a": { "command": "x", "workspaceFolder": "out" },
             "b": { "command": "x", "workspaceFolder": "inside" } }"#,
    );
    let run = sb.run(&["validate"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("workspaceFolder \"out\" resolves to")
            && run.stdout.contains("outside the workspace"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("\"inside\""), "{}", run.stdout);
    let v = sb.status_json(&[]);
    let folder = |name: &str| {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"] == name)
            .unwrap()["spec"]["workspaceFolder"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(folder("a"), sb.ws.to_string_lossy());
    assert_eq!(folder("b"), sb.ws.join("inside").to_string_lossy());
}
