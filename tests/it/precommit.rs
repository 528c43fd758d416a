//! The pre-commit garbage hook, installed by init and run by a real `git commit`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::mcp_client::BIN;

/// PATH with the built binary first, as after `cargo install`.
fn path_env() -> String {
    let bin_dir = PathBuf::from(BIN).parent().unwrap().to_path_buf();
    format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default())
}

fn git(root: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .env("PATH", path_env())
        .current_dir(root)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn setup() -> tempfile::TempDir {
    let dir = crate::common::fixture_repo("project");
    let root = dir.path();
    assert!(git(root, &["add", "-A"]).0);
    assert!(git(root, &["commit", "-q", "-m", "initial"]).0);
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(out.status.success());
    assert!(git(root, &["add", "-A"]).0);
    assert!(git(root, &["commit", "-q", "-m", "code-intel init"]).0, "the init files themselves are clean");
    dir
}

fn commit_with(root: &Path, file: &str, content: &[u8]) -> (bool, String) {
    std::fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
    std::fs::write(root.join(file), content).unwrap();
    assert!(git(root, &["add", file]).0);
    git(root, &["commit", "-q", "-m", "change"])
}

#[test]
fn each_garbage_kind_blocks_the_commit() {
    let cases: &[(&str, &[u8], &str)] = &[
        ("src/app.py", b"def run():\n    print('debug')\n    return 1\n", "src/app.py:2"),
        ("web/app.js", b"export function f() {\n  console.log('x');\n  return 1;\n}\n", "web/app.js:2"),
        ("src/lib.rs", b"pub fn f() -> u32 {\n    dbg!(1)\n}\n", "src/lib.rs:2"),
        ("src/auth.py.orig", b"old\n", "src/auth.py.orig"),
        ("notes.txt", b"<<<<<<< HEAD\na\n=======\nb\n>>>>>>> other\n", "notes.txt:1"),
        ("src/todo.py", b"def later():\n    # TODO: write this\n    return None\n", "src/todo.py:2"),
        ("src/stub.py", b"def later():\n    pass\n", "src/stub.py:1"),
        ("id_rsa", b"-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n", "id_rsa:1"),
        ("ci.env", b"GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n", "ci.env:1"),
    ];
    for (file, content, expected) in cases {
        let dir = setup();
        let root = dir.path();
        let (ok, out) = commit_with(root, file, content);
        assert!(!ok, "{file}: the commit should be blocked");
        assert!(out.contains(expected), "{file}: {out}");
        let (ok, _) = git(root, &["commit", "-q", "--no-verify", "-m", "forced"]);
        assert!(ok, "--no-verify bypasses the hook");
    }
}

#[test]
fn large_binaries_are_blocked_and_the_limit_is_configurable() {
    let dir = setup();
    let root = dir.path();
    let mut blob = vec![0u8; 2 << 20];
    blob[0] = 1;
    let (ok, out) = commit_with(root, "assets/big.bin", &blob);
    assert!(!ok && out.contains("assets/big.bin: binary file of"), "{out}");
    let config = root.join(".code-intel/config.json");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("\"max_binary_bytes\": 1048576", "\"max_binary_bytes\": 4194304");
    std::fs::write(&config, text).unwrap();
    assert!(git(root, &["add", "-A"]).0);
    let (ok, out) = git(root, &["commit", "-q", "-m", "big but allowed"]);
    assert!(ok, "{out}");
}

#[test]
fn a_clean_commit_passes_and_an_existing_hook_still_runs() {
    let dir = crate::common::fixture_repo("project");
    let root = dir.path();
    assert!(git(root, &["add", "-A"]).0);
    assert!(git(root, &["commit", "-q", "-m", "initial"]).0);
    let hooks = root.join(".git/hooks");
    std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\necho previous-hook-ran\nexit 0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(hooks.join("pre-commit"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(out.status.success());
    assert!(hooks.join("pre-commit.before-code-intel").exists());
    assert!(git(root, &["add", "-A"]).0);
    let (ok, out) = git(root, &["commit", "-m", "clean"]);
    assert!(ok, "{out}");
    assert!(out.contains("previous-hook-ran"), "{out}");
    let (ok, out) = commit_with(root, "src/extra.py", b"def double(x):\n    return 2 * x\n");
    assert!(ok, "{out}");
    // init again: the hook is ours already, nothing changes.
    let again = Command::new(BIN).args(["--json", "init"]).current_dir(root).output().unwrap();
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    let hook = report.as_array().unwrap().iter().find(|r| r["path"] == ".git/hooks/pre-commit").unwrap();
    assert_eq!(hook["action"], "unchanged");
}
