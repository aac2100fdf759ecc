//! The command line itself: `steward schema`, help that teaches, and the
//! exit-code contract (0 ok, 1 error or invalid input, 2 usage).

use serde_json::Value;
use steward_schema::schemas::NAMES;
use steward_tests::harness::Env;

#[test]
fn schema_prints_valid_json_for_every_name() {
    let sb = Env::new();
    for (name, _) in NAMES {
        let run = sb.run(&["schema", name]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr);
        let v: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            v["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{name}"
        );
        assert_eq!(v, steward_schema::schemas::by_name(name).unwrap(), "{name}");
    }
}

#[test]
fn schema_all_is_one_object_keyed_by_name() {
    let sb = Env::new();
    for args in [&["schema"][..], &["schema", "all"][..]] {
        let run = sb.run(args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut names: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
        keys.sort();
        names.sort();
        assert_eq!(keys, names);
    }
}

#[test]
fn schema_out_writes_files_and_prints_their_paths() {
    let sb = Env::new();
    let out = sb.root.path().join("out").join("nested");
    let run = sb.run(&["schema", "all", "--out", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let printed: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(printed.len(), NAMES.len());
    for (name, file) in NAMES {
        let path = out.join(file);
        assert!(printed.contains(&path.to_str().unwrap()), "{name}");
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v, steward_schema::schemas::by_name(name).unwrap());
    }
    // One name with --out writes just that file.
    let single = sb.root.path().join("single");
    let run = sb.run(&["schema", "lsp-json", "--out", single.to_str().unwrap()]);
    assert_eq!(run.code, 0);
    assert_eq!(std::fs::read_dir(&single).unwrap().count(), 1);
}

#[test]
fn unknown_schema_is_a_usage_error_listing_the_names() {
    let sb = Env::new();
    let run = sb.run(&["schema", "nope"]);
    assert_eq!(run.code, 2);
    for (name, _) in NAMES {
        assert!(
            run.stderr.contains(name),
            "{name} missing from: {}",
            run.stderr
        );
    }
    assert!(run.stdout.is_empty());
}

#[test]
fn exit_codes() {
    let sb = Env::new();
    // 0: ok.
    assert_eq!(sb.run(&["validate"]).code, 0);
    assert_eq!(sb.run(&["status", "--offline"]).code, 0);
    assert_eq!(sb.run(&["--help"]).code, 0);
    assert_eq!(sb.run(&["--version"]).code, 0);
    // 1: invalid input, or an error.
    sb.write(".mcp.json", "{ nope }");
    assert_eq!(sb.run(&["validate"]).code, 1);
    let run = sb.run(&["status", "--workspace", "/nonexistent/steward/ws"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("steward: failed to resolve the workspace /nonexistent/steward/ws: "),
        "{}",
        run.stderr
    );
    // 2: usage.
    for args in [
        &["frobnicate"][..],
        &["status", "--bogus"][..],
        &["status", "-o", "xml"][..],
        &["approve"][..],
        &["approve", "a", "--all"][..],
        &["schema", "nope"][..],
        &[][..],
    ] {
        let run = sb.run(args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
}

#[test]
fn invalid_steward_now_is_an_error() {
    let sb = Env::new();
    sb.set_var("STEWARD_NOW", "yesterday");
    let run = sb.run(&["status", "--offline"]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr
            .starts_with("steward: failed to read STEWARD_NOW="),
        "{}",
        run.stderr
    );
}

#[test]
fn help_teaches_files_environment_exit_codes_and_examples() {
    let sb = Env::new();
    let top = sb.run(&["--help"]).stdout;
    for needle in [
        "QWEN_HOME",
        "HOME_DIR/settings.json",
        "WS/.mcp.json",
        "WS/.lsp.json",
        "qwen-extension.json",
        "trustedFolders.json",
        "mcpApprovals.json",
        "STEWARD_NOW",
        "Exit codes",
        "2  usage",
    ] {
        assert!(top.contains(needle), "top-level help lacks {needle:?}");
    }
    for sub in ["schema", "validate", "status", "approve", "reject"] {
        let help = sb.run(&[sub, "--help"]);
        assert_eq!(help.code, 0);
        assert!(
            help.stdout.contains("Examples:"),
            "{sub} --help has no example"
        );
        assert!(
            help.stdout.contains("--workspace"),
            "{sub} --help lacks --workspace"
        );
    }
    let status = sb.run(&["status", "--help"]).stdout;
    for flag in [
        "--offline",
        "--mcp-config",
        "--allowed-mcp-server-names",
        "--allowed-lsp-server-names",
        "--no-lsp",
        "table",
        "yaml",
    ] {
        assert!(status.contains(flag), "status --help lacks {flag}");
    }
}

#[test]
fn closed_stdout_is_not_an_error() {
    use std::process::Stdio;
    let sb = Env::new();
    let mut child = sb
        .cli(&["schema", "all"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before steward writes its (large) output.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty());
}
