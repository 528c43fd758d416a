//! Shared test helpers: fixture repositories copied into temporary directories.
#![allow(dead_code)]

#[path = "../../../crates/workflow/tests/harness/mod.rs"]
pub mod engine_harness;
pub mod flows;
pub mod mcp_client;
pub mod schema_gen;

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Copies `tests/fixtures/<name>` into a fresh temporary directory and makes it a git repository.
pub fn fixture_repo(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&fixtures().join(name), dir.path());
    let ok =
        Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().map(|s| s.success()).unwrap_or(false);
    assert!(ok, "git init failed");
    dir
}

/// The project fixture with one commit on `main`.
pub fn committed_project() -> tempfile::TempDir {
    let dir = fixture_repo("project");
    git(dir.path(), &["checkout", "-q", "-b", "main"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "initial"]);
    dir
}

/// Asserts `git fsck --full --strict` finds nothing wrong.
pub fn fsck_clean(root: &Path) {
    let out = Command::new("git").args(["fsck", "--full", "--strict"]).current_dir(root).output().expect("git fsck");
    assert!(out.status.success(), "git fsck: {}", String::from_utf8_lossy(&out.stderr));
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The 1-based number of the first line of `file` containing `needle`.
pub fn line_of(file: &Path, needle: &str) -> u32 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .position(|l| l.contains(needle))
        .map(|i| i as u32 + 1)
        .unwrap_or_else(|| panic!("{needle} not in {}", file.display()))
}

/// Runs git in `root` (with a fixed identity), asserts it succeeded, and returns its trimmed
/// stdout.
pub fn git(root: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(root)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Runs git in `root` with `input` on its standard input, asserts it succeeded, and returns its
/// trimmed stdout.
pub fn git_with_input(root: &Path, args: &[&str], input: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("git")
        .args(args)
        .current_dir(root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git");
    child.stdin.take().expect("stdin").write_all(input).expect("write to git");
    let out = child.wait_with_output().expect("git");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The `seal` this clone (the repository at `root`) puts beside a checkpoint of `content`, so a
/// test can stand in for an earlier version or a corrupted store that this clone still wrote.
pub fn checkpoint_seal(root: &Path, content: &[u8]) -> String {
    let key = code_intel_gitstate::CloneKey::load_or_create(&root.join(".git")).unwrap();
    key.seal(code_intel_session::session::store::CHECKPOINT_SEAL, content)
}

/// Points the session `id` of the work tree at `root` at a checkpoint commit of `content`,
/// sealed by this clone when `sealed` (else as another clone's, or a hand edit, would be).
pub fn write_checkpoint(root: &Path, id: &str, content: &str, sealed: bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("checkpoint.json");
    std::fs::write(&file, content).unwrap();
    let blob = git(root, &["hash-object", "-w", file.to_str().unwrap()]);
    let mut listing = format!("100644 blob {blob}\tcheckpoint.json\n");
    if sealed {
        let seal_file = dir.path().join("seal");
        std::fs::write(&seal_file, checkpoint_seal(root, content.as_bytes())).unwrap();
        let seal = git(root, &["hash-object", "-w", seal_file.to_str().unwrap()]);
        listing.push_str(&format!("100644 blob {seal}\tseal\n"));
    }
    std::fs::write(dir.path().join("tree"), &listing).unwrap();
    let tree = Command::new("git")
        .args(["mktree"])
        .current_dir(root)
        .stdin(std::fs::File::open(dir.path().join("tree")).unwrap())
        .output()
        .unwrap();
    assert!(tree.status.success());
    let tree = String::from_utf8_lossy(&tree.stdout).trim().to_owned();
    let commit = git(root, &["commit-tree", &tree, "-m", "tampered"]);
    git(root, &["update-ref", &format!("refs/worktree/code-intel/sessions/{id}"), &commit]);
}

/// Runs the binary with `args` in `root`, `stdin` on its standard input; returns (exit code,
/// stdout, stderr).
pub fn run_cli(root: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    run_cli_env(root, args, stdin, &[])
}

/// [`run_cli`] with `env` added to the program's environment.
pub fn run_cli_env(root: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    run_cli_bytes(root, args, stdin.as_bytes(), env)
}

/// [`run_cli_env`] with any bytes on standard input. A program that stops reading early (a
/// size cap) breaks the pipe: that is its answer, told by its exit code, not a failure here.
pub fn run_cli_bytes(root: &Path, args: &[&str], stdin: &[u8], env: &[(&str, &str)]) -> (i32, String, String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(mcp_client::BIN)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).ok();
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Removes the file at `path` when it is there; anything but "not there" fails the test.
pub fn remove_if_present(path: impl AsRef<Path>) {
    let path = path.as_ref();
    if let Err(e) = std::fs::remove_file(path) {
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "cannot remove {}: {e}", path.display());
    }
}

/// Removes the directory tree at `path` when it is there; anything but "not there" fails the
/// test.
pub fn remove_dir_if_present(path: impl AsRef<Path>) {
    let path = path.as_ref();
    if let Err(e) = std::fs::remove_dir_all(path) {
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "cannot remove {}: {e}", path.display());
    }
}

/// Ends a child process that may have ended already, and reaps it.
pub fn end(child: &mut std::process::Child) {
    // `kill` fails only when the child was reaped already; `wait` then has nothing to do.
    if child.kill().is_ok() {
        child.wait().expect("reap the child");
    }
}

/// Whether `program` is an executable file in a directory of PATH.
pub fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

/// Whether `python3 -m pytest` runs here (scripts/test.sh installs it).
pub fn pytest_installed() -> bool {
    Command::new("python3").args(["-m", "pytest", "--version"]).output().is_ok_and(|o| o.status.success())
}
