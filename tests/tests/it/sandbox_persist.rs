//! Envtest: the sandbox holds over time (product.md §9, "Nothing planted
//! for later"). A hostile fake server tries to leave behind code that runs
//! later *outside* its sandbox — as the user's shell, login session,
//! editor, git, package runners or agents — and every attempt must fail,
//! under `standard` and under a custom profile that writes all of `~` and
//! the workspace; the workspace's ordinary files stay writable.

use std::path::Path;

use serde_json::{Value, json};
use steward_tests::harness::mcp;

use crate::sandbox::{Hostile, Victim, allowed, attempt, p};

/// Makes what the user's machine would have: a git repository with a
/// nested one, editor and hook directories, an `.envrc`.
fn furnish(v: &Victim) {
    let ws = &v.env.ws;
    for dir in [
        ".git/hooks",
        ".git/info",
        "sub/.git/hooks",
        ".vscode",
        ".husky/_",
        ".github",
        "src",
    ] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(ws.join("sub/.git/config"), "[core]\n").unwrap();
    std::fs::write(ws.join(".vscode/settings.json"), "{}").unwrap();
    std::fs::write(ws.join(".envrc"), "use flake\n").unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    for dir in [
        ".local/share/nvim",
        ".local/share/bash-completion/completions",
        ".local/share/systemd/user",
        ".local/share/fish",
        ".local/share/applications",
        ".config/systemd/user",
    ] {
        std::fs::create_dir_all(v.home.join(dir)).unwrap();
    }
    std::fs::create_dir_all(v.home.join(".npm/_cacache")).unwrap();
    std::fs::create_dir_all(v.home.join(".cache/uv")).unwrap();
    std::fs::create_dir_all(v.home.join(".config")).unwrap();
}

/// One try at planting something: the attempts, in order (a `mkdir` of a
/// parent first where the vector needs one), and what it plants.
struct Vector {
    what: &'static str,
    steps: Vec<Value>,
}

fn plant(what: &'static str, path: &Path) -> Vector {
    Vector {
        what,
        steps: vec![
            json!({"mkdir": p(path.parent().unwrap())}),
            json!({"write": p(path)}),
        ],
    }
}

fn step(what: &'static str, attempt: Value) -> Vector {
    Vector {
        what,
        steps: vec![attempt],
    }
}

/// Everything a server could plant for later, in the user's home and in
/// the workspace.
fn vectors(v: &Victim) -> Vec<Vector> {
    let h = |rel: &str| v.home.join(rel);
    let w = |rel: &str| v.env.ws.join(rel);
    let evil_dir = v.env.ws.join("src");
    vec![
        plant(
            "a bash completion",
            &h(".local/share/bash-completion/completions/git"),
        ),
        plant(
            "a systemd user unit",
            &h(".local/share/systemd/user/pipewire.service"),
        ),
        plant(
            "a systemd user unit in .config",
            &h(".config/systemd/user/x.service"),
        ),
        plant("a neovim plugin", &h(".local/share/nvim/site/plugin/x.lua")),
        plant(
            "a fish snippet",
            &h(".local/share/fish/vendor_conf.d/x.fish"),
        ),
        plant(
            "a desktop entry",
            &h(".local/share/applications/firefox.desktop"),
        ),
        plant("an autostart entry", &h(".config/autostart/x.desktop")),
        plant("a program on PATH", &h(".local/bin/git")),
        plant(
            "a package in npx's cache",
            &h(".npm/_npx/0123456789abcdef/node_modules/x/index.js"),
        ),
        plant(
            "a .pth in uv's cache",
            &h(".cache/uv/archive-v0/x/evil.pth"),
        ),
        plant("a uv tool", &h(".local/share/uv/tools/x/bin/x")),
        plant("a pipx venv", &h(".local/pipx/venvs/x/bin/x")),
        plant("a pre-commit hook repo", &h(".cache/pre-commit/repo/x")),
        step("the bash start-up file", json!({"write": p(&h(".bashrc"))})),
        step(
            "a new .bash_profile",
            json!({"write": p(&h(".bash_profile"))}),
        ),
        step("a new .profile", json!({"write": p(&h(".profile"))})),
        step("a new .zshrc", json!({"write": p(&h(".zshrc"))})),
        step("git's user config", json!({"write": p(&h(".gitconfig"))})),
        plant("git's XDG config", &h(".config/git/config")),
        plant("fish's config", &h(".config/fish/config.fish")),
        plant("an authorized key", &h(".ssh/authorized_keys")),
        plant("Claude Code's settings", &h(".claude/settings.json")),
        step(
            "Qwen Code's settings (HOME_DIR)",
            json!({"write": p(&v.env.home.join("settings.json"))}),
        ),
        // The workspace.
        step(
            "renaming .git away",
            json!({"rename": [p(&w(".git")), p(&w(".g"))]}),
        ),
        step("git's commondir", json!({"write": p(&w(".git/commondir"))})),
        step(
            "a git hook",
            json!({"write": p(&w(".git/hooks/pre-commit"))}),
        ),
        step("git's config", json!({"write": p(&w(".git/config"))})),
        step(
            "git's info/attributes",
            json!({"write": p(&w(".git/info/attributes"))}),
        ),
        step(
            "a hook of a nested repository",
            json!({"write": p(&w("sub/.git/hooks/post-checkout"))}),
        ),
        step(
            "VS Code tasks",
            json!({"write": p(&w(".vscode/tasks.json"))}),
        ),
        step(
            "renaming .vscode away",
            json!({"rename": [p(&w(".vscode")), p(&w(".vscode-old"))]}),
        ),
        plant("a new .idea", &w(".idea/workspace.xml")),
        step(
            "a symlinked .idea",
            json!({"symlink": [p(&evil_dir), p(&w(".idea"))]}),
        ),
        step(
            "a directory renamed to .cursor",
            json!({"rename": [p(&evil_dir), p(&w(".cursor"))]}),
        ),
        plant("Claude Code's project hooks", &w(".claude/settings.json")),
        step("a husky hook", json!({"write": p(&w(".husky/pre-commit"))})),
        plant("a CI workflow", &w(".github/workflows/x.yml")),
        step("the .envrc", json!({"write": p(&w(".envrc"))})),
    ]
}

/// Tries every vector; the ones that planted something.
fn planted(v: &Victim, client: &Hostile<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for vector in vectors(v) {
        let mut last = Err(String::new());
        for step in &vector.steps {
            last = attempt(client, step.clone());
        }
        if last.is_ok() {
            out.push(vector.what.to_owned());
        }
    }
    out
}

/// What every profile must leave writable: the workspace's ordinary files.
fn ordinary_files_stay_writable(v: &Victim, client: &Hostile<'_>) {
    let w = |rel: &str| p(&v.env.ws.join(rel));
    allowed(client, json!({"write": w("new-file.txt")}));
    allowed(client, json!({"write": w("src/main.rs")}));
    allowed(client, json!({"mkdir": w("src/generated/deep")}));
    allowed(client, json!({"write": w("src/generated/deep/out.rs")}));
    allowed(
        client,
        json!({"rename": [w("src/generated/deep/out.rs"), w("src/out.rs")]}),
    );
    allowed(client, json!({"write": w(".git/../README.md")}));
}

fn assert_nothing_planted(v: &Victim, client: &Hostile<'_>, profile: &str) {
    let planted = planted(v, client);
    assert!(
        planted.is_empty(),
        "under {profile}, a server planted: {}",
        planted.join("; ")
    );
    ordinary_files_stay_writable(v, client);
    assert_eq!(
        std::fs::read_to_string(v.home.join(".bashrc")).unwrap(),
        "# bashrc\n"
    );
    assert!(v.env.ws.join(".git/HEAD").is_file(), ".git is where it was");
}

#[test]
fn standard_lets_a_server_plant_nothing_that_runs_later() {
    let v = Victim::new();
    furnish(&v);
    let (_c, client) = v.start(None, json!({}));
    assert_nothing_planted(&v, &client, "standard");
}

#[test]
fn a_profile_that_writes_home_and_workspace_still_plants_nothing() {
    let v = Victim::new();
    furnish(&v);
    let (c, client) = v.start(
        Some(json!("wide")),
        json!({"sandbox": {"profiles": {"wide": {"read": ["/"], "write": ["~", "."]}}}}),
    );
    assert_nothing_planted(&v, &client, "a profile writing ~ and .");
    // What it lists is writable where nothing runs from it.
    allowed(&client, json!({"write": p(&v.home.join("notes.txt"))}));
    let notes = mcp(&c.status(), "evil")
        .unwrap()
        .status
        .sandbox
        .clone()
        .unwrap()
        .notes;
    assert!(
        notes.iter().any(|n| n.contains("stays read-only")),
        "{notes:?}"
    );
}

#[test]
fn git_init_in_a_workspace_without_git_is_refused() {
    let v = Victim::new();
    std::fs::remove_dir_all(v.env.ws.join(".git")).unwrap();
    let (_c, client) = v.start(None, json!({}));
    let init = attempt(
        &client,
        json!({"exec": ["git", "-C", p(&v.env.ws), "init", "-q"]}),
    );
    assert!(init.is_err(), "git init planted a repository: {init:?}");
    assert!(!v.env.ws.join(".git/hooks").exists());
    // git still finds no repository there.
    let status = attempt(
        &client,
        json!({"exec": ["git", "-C", p(&v.env.ws), "rev-parse", "--git-dir"]}),
    );
    assert!(
        status
            .as_ref()
            .is_err_and(|e| e.contains("not a git repository")),
        "{status:?}"
    );
}
