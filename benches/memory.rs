//! Peak memory (issue 11): the installed binary's peak RSS, read from `wait4`, on input built to
//! exhaust memory:
//! - a 200 KB file of 25,000 nested definitions (`fn a(){` × N then `}` × N), through the index
//!   build, `analyze_structure` on the file and on the same code inline, `get_symbols` and
//!   `find_definitions`, in one server;
//! - a repository with a 1 GB untracked text file, through a whole session: task branch creation
//!   (which snapshots the user's changes), `search_text`, `review_changes`, the PRE_COMMIT
//!   commit and the MERGE; and the CLI's `status`, `review-changes` and `index`.
//!
//! Target: under 500 MB each. `code-intel-bench <binary> <corpus> memory` runs only this part (the
//! corpus is not used).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::server::{Server, cut};

use serde_json::json;

const TARGET_MB: f64 = 500.0;

pub fn run(bin: &Path) {
    println!("\n## peak RSS on hostile input (target < {TARGET_MB} MB each)");
    let dir = std::env::temp_dir().join("code-intel-bench-memory");
    let _ = std::fs::remove_dir_all(&dir);

    let nested = project(&dir.join("nested"));
    let n = 25_000;
    let deep = format!("{}{}", "fn a(){".repeat(n), "}".repeat(n));
    std::fs::write(nested.join("src/deep.rs"), &deep).unwrap();
    report("index build, 200 KB of nested definitions", cli(bin, &nested, &["index", "--symbols-only"]));
    let inline = format!("{}{}", "fn a(){".repeat(10_000), "}".repeat(10_000));
    // What the server holds before any call: the symbol index, and the embedding model once the
    // Forest sync has started (when a model is installed).
    report("server: idle, one tools/list", serve(bin, &nested, |s| s.list()));
    let calls = [
        ("analyze_structure", json!({"file_path": "src/deep.rs"})),
        ("analyze_structure", json!({"code": inline, "language": "rust"})),
        ("get_symbols", json!({"path": "src/deep.rs"})),
        ("find_definitions", json!({"symbol": "a"})),
        ("find_references", json!({"symbol": "a"})),
    ];
    for (tool, arguments) in calls {
        let what = format!("server: {tool} {}", cut(&arguments.to_string()).chars().take(40).collect::<String>());
        report(&what, serve(bin, &nested, |s| drop(s.call(tool, arguments))));
    }

    // The Forest build on ordinary code: this crate's own sources (long functions, so the
    // model sees full-length sequences). Without a model it is the symbol index alone.
    let own = dir.join("own");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    copy(&manifest.join("src"), &own.join("src"));
    copy(&manifest.join("crates"), &own.join("crates"));
    commit_all(&own);
    report("index build with the Forest, this workspace's src/ and crates/", cli(bin, &own, &["index"]));

    let big = project(&dir.join("big"));
    write_big(&big.join("big.log"), 1 << 30);
    let peak = serve(bin, &big, |s| {
        let started = s.call(
            "start_session",
            json!({"intent": "IMPLEMENT", "query": "q", "fast": true, "no_doc_research": true, "no_verify": true}),
        );
        if started["success"] != true {
            println!("  start_session: {}", cut(&started.to_string()));
        }
        s.call("search_text", json!({"pattern": "refresh"}));
        s.call("submit_phase", json!({"data": {"slots": {}, "tools_used": [], "summary": "frame"}}));
        s.call(
            "submit_phase",
            json!({"data": {"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i"}]}],
                            "tools_used": [], "summary": "plan"}}),
        );
        s.call("add_explored_files", json!({"files": ["src/auth.py"]}));
        s.call("check_write_target", json!({"file_path": "src/auth.py"}));
        let path = s.root.join("src/auth.py");
        let mut text = std::fs::read_to_string(&path).unwrap();
        let line = text.lines().count() + 3;
        text.push_str("\n\ndef logout(session):\n    session.user = None\n    return True\n");
        std::fs::write(&path, text).unwrap();
        s.call(
            "submit_phase",
            json!({"data": {"task_id": "t1", "checklist": [{"item": "i", "status": "done",
                   "evidence": format!("src/auth.py:{line}-{}", line + 2)}], "tools_used": ["check_write_target"], "summary": "done"}}),
        );
        s.call("submit_phase", json!({"data": {"summary": "complete"}}));
        s.call("review_changes", json!({}));
        s.call(
            "submit_phase",
            json!({"data": {"reviewed_files": [{"file": "src/auth.py", "decision": "keep"}],
                            "commit_message": "Add logout", "tools_used": ["review_changes"], "summary": "s"}}),
        );
        // `fast` skips QUALITY_REVIEW: PRE_COMMIT leads to MERGE.
        let merged = s.call("submit_phase", json!({"data": {"summary": "merge"}}));
        if merged["phase"] != "SESSION_COMPLETE" {
            println!("  (the session did not reach the end: {})", cut(&merged.to_string()));
        }
    });
    report("server: a session with a 1 GB untracked file (branch, search, review, commit, merge)", peak);
    report("CLI status, 1 GB untracked file", cli(bin, &big, &["status"]));
    report("CLI index, 1 GB untracked file", cli(bin, &big, &["index", "--symbols-only"]));
    let _ = std::fs::remove_dir_all(&dir);
}

fn report(what: &str, peak_mb: f64) {
    let verdict = if peak_mb < TARGET_MB { "met" } else { "NOT MET" };
    println!("{what:<90} {peak_mb:>7.1} MB   {verdict}");
}

/// The project fixture, committed on `main`.
pub fn project(root: &Path) -> PathBuf {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/project");
    copy(&fixture, root);
    commit_all(root);
    root.to_path_buf()
}

/// `git init` and a first commit of everything in `root`.
fn commit_all(root: &Path) {
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "-A"],
        &["-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-q", "-m", "initial"],
    ] {
        let ok = Command::new("git").args(args).current_dir(root).status().is_ok_and(|s| s.success());
        assert!(ok, "git {args:?}");
    }
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// `size` bytes of log lines (text, so nothing takes it for binary).
fn write_big(path: &Path, size: usize) {
    let line = b"2026-11-22T10:00:00Z INFO request served in 12 ms from cache shard 7 of the frontend pool\n";
    let block: Vec<u8> = line.iter().copied().cycle().take(1 << 20).collect();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for _ in 0..size / block.len() {
        f.write_all(&block).unwrap();
    }
    f.flush().unwrap();
}

/// Waits for `child` and returns its peak RSS in MB.
pub fn peak_of(child: Child) -> f64 {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own child, not yet waited for; the pointers are to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    drop(child);
    usage.ru_maxrss as f64 / 1024.0
}

fn cli(bin: &Path, root: &Path, args: &[&str]) -> f64 {
    let child =
        Command::new(bin).args(args).current_dir(root).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    peak_of(child)
}

/// Runs `work` against a server in `root`, closes its stdin, and returns the server's peak RSS.
fn serve(bin: &Path, root: &Path, work: impl FnOnce(&mut Server)) -> f64 {
    let mut server = Server::start(bin, root, &[]);
    work(&mut server);
    peak_of(server.close())
}
