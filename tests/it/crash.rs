//! Kills at random points, with the user's staged, unstaged and untracked changes present.
//!
//! A first run of the flow (task branch, commit, fast-forward or 3-way MERGE, and every
//! checkpoint write between) records every fault-injection point it passes
//! (`CODE_INTEL_FAILPOINT_TRACE`). Then, for each kill, a server is told to SIGKILL itself at
//! one of those points chosen at random (`CODE_INTEL_FAILPOINT=point#n`); a new server resumes
//! the session to its end. After each: `git fsck --full --strict` is clean, every user change
//! is intact, `git status` shows only the user's own changes, the task's change is merged, no
//! journal, lock or temporary file is left, and the session is recorded once.
//!
//! Every other run has a second work tree (`git worktree`) with a session of its own, a task
//! branch checked out and work in progress: it must come out of every kill and resume exactly
//! as it was.
//!
//! 50 kills by default; `CODE_INTEL_CRASH_KILLS=1000 cargo test --test crash` (scripts/crash.sh)
//! runs more and prints the figures.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::common::mcp_client::{Client, connect_with_env};
use crate::common::{fsck_clean, git};
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const QUERY: &str = "Make login() refresh the Session token before it expires";
const CHANGE: &str =
    "\n\ndef refresh_token(session):\n    session.token = issue_token(session.user)\n    return session.token\n";
const USER_STAGED: &str = "docs/auth.md";
const USER_UNSTAGED: &str = "tests/test_auth.py";
const USER_UNTRACKED: &str = "notes.txt";
const AGENT_SCRATCH: &str = "\n# the agent's scratch line, discarded at PRE_COMMIT\n";

#[derive(Clone, Copy, Debug)]
enum Merge {
    FastForward,
    ThreeWay,
}

/// The project on `main` with the user's own uncommitted work of every kind.
fn repo() -> tempfile::TempDir {
    let dir = crate::common::committed_project();
    let root = dir.path();
    append(root, USER_STAGED, "\nThe user's staged note.\n");
    git(root, &["add", USER_STAGED]);
    append(root, USER_UNSTAGED, "\n# the user's unstaged comment\n");
    std::fs::write(root.join(USER_UNTRACKED), "the user's untracked notes\n").unwrap();
    dir
}

fn append(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    let mut body = std::fs::read_to_string(&path).unwrap();
    body.push_str(text);
    std::fs::write(path, body).unwrap();
}

fn user_files(root: &Path) -> Vec<(String, String)> {
    [USER_STAGED, USER_UNSTAGED, USER_UNTRACKED]
        .iter()
        .map(|p| ((*p).to_owned(), std::fs::read_to_string(root.join(p)).unwrap_or_default()))
        .collect()
}

/// A call that reports a dead server instead of panicking.
async fn try_call(client: &Client, tool: &str, args: Value) -> Option<(bool, Value)> {
    let Value::Object(map) = args else { unreachable!() };
    let call = client.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(map));
    match tokio::time::timeout(Duration::from_secs(20), call).await {
        Ok(Ok(r)) => Some((r.is_error == Some(true), r.structured_content.unwrap_or(Value::Null))),
        Ok(Err(_)) => None,
        Err(_) => panic!("{tool}: no answer in 20 s"),
    }
}

/// Drives the session to its end. Returns false when the server died on the way.
async fn drive(client: &Client, root: &Path, merge: Merge) -> bool {
    macro_rules! call {
        ($tool:expr, $args:expr) => {
            match try_call(client, $tool, $args).await {
                Some(r) => r,
                None => return false,
            }
        };
    }
    for _ in 0..40 {
        let (_, status) = call!("get_session_status", json!({}));
        if status["active"] != true {
            if git(root, &["show", "main:src/auth.py"]).contains("def refresh_token") {
                return true;
            }
            let (error, r) = call!(
                "start_session",
                json!({"intent": "IMPLEMENT", "query": QUERY, "fast": true, "no_doc_research": true})
            );
            assert!(!error || r["error"] == "recovery_available", "start_session: {r}");
            continue;
        }
        let phase = status["ready_substep"].as_str().or(status["phase"].as_str()).unwrap_or("").to_owned();
        let submit = |data: Value| json!({"data": data});
        let (error, r) = match phase.as_str() {
            "QUERY_FRAME" => call!("submit_phase", submit(json!({"slots": {}, "tools_used": [], "summary": "frame"}))),
            "READY_PLAN" => call!(
                "submit_phase",
                submit(json!({"tasks": [{"id": "t1", "description": "add refresh_token", "status": "pending",
                                         "checklist": [{"item": "refresh_token in auth.py"}]}],
                              "tools_used": [], "summary": "plan"}))
            ),
            "READY_IMPL" => {
                for file in ["src/auth.py", USER_UNSTAGED] {
                    call!("get_symbols", json!({"path": file}));
                }
                call!("add_explored_files", json!({"files": ["src/auth.py", USER_UNSTAGED]}));
                for file in ["src/auth.py", USER_UNSTAGED] {
                    let (e, w) = call!("check_write_target", json!({"file_path": file}));
                    assert!(!e, "check_write_target: {w}");
                }
                let text = std::fs::read_to_string(root.join("src/auth.py")).unwrap();
                if !text.contains("def refresh_token") {
                    append(root, "src/auth.py", CHANGE);
                    // A scratch edit of a file the user had changed too; PRE_COMMIT discards it,
                    // which must bring back the user's version whole.
                    append(root, USER_UNSTAGED, AGENT_SCRATCH);
                }
                let text = std::fs::read_to_string(root.join("src/auth.py")).unwrap();
                let line = text.lines().position(|l| l.starts_with("def refresh_token")).unwrap() + 1;
                call!(
                    "submit_phase",
                    submit(
                        json!({"task_id": "t1", "checklist": [{"item": "refresh_token in auth.py", "status": "done",
                                   "evidence": format!("src/auth.py:{line}-{}", line + 2)}],
                                  "tools_used": ["check_write_target"], "summary": "done"})
                    )
                )
            }
            "READY_COMPLETE" | "MERGE" => {
                if phase == "MERGE" && matches!(merge, Merge::ThreeWay) {
                    advance_main(root);
                }
                call!("submit_phase", submit(json!({"summary": "next"})))
            }
            "POST_IMPL_VERIFY" => {
                // passed: true needs a run the server witnessed; a kill may land in it too.
                call!("run_check", json!({"command": "python3 -m pytest"}));
                call!(
                    "submit_phase",
                    submit(json!({"passed": true, "tools_used": ["run_check"], "summary": "tests pass"}))
                )
            }
            "PRE_COMMIT" => {
                call!("review_changes", json!({}));
                call!(
                    "submit_phase",
                    submit(json!({"reviewed_files": [{"file": "src/auth.py", "decision": "keep"},
                                                     {"file": USER_UNSTAGED, "decision": "discard", "reason": "scratch edit"}],
                                  "commit_message": "Add refresh_token",
                                  "tools_used": ["review_changes"], "summary": "reviewed"}))
                )
            }
            other => panic!("unexpected phase {other}: {status}"),
        };
        assert!(!error, "{phase}: {r}");
    }
    panic!("the session did not end");
}

/// Upstream work on `main` while the task runs, in a file the task does not touch, so the
/// MERGE is a 3-way one. Once; the work tree (on the task branch) is not touched.
fn advance_main(root: &Path) {
    let main = git(root, &["rev-parse", "main"]);
    if git(root, &["log", "--format=%s", "-1", &main]) == "upstream work" {
        return;
    }
    let mut text = git(root, &["show", "main:src/app.py"]);
    text.push_str("\n\n\ndef upstream():\n    return 'upstream'\n");
    let source = root.join(".git/upstream-app.py");
    std::fs::write(&source, text).unwrap();
    let blob = run_git(root, &["hash-object", "-w", source.to_str().unwrap()], &[]);
    crate::common::remove_if_present(&source);
    // A temporary index holds main's tree with src/app.py replaced.
    let index = root.join(".git/upstream-index");
    let env = [("GIT_INDEX_FILE", index.to_str().unwrap())];
    run_git(root, &["read-tree", "main"], &env);
    run_git(root, &["update-index", "--cacheinfo", &format!("100644,{blob},src/app.py")], &env);
    let tree = run_git(root, &["write-tree"], &env);
    crate::common::remove_if_present(index);
    let commit = run_git(
        root,
        &[
            "-c",
            "user.name=up",
            "-c",
            "user.email=up@example.com",
            "commit-tree",
            &tree,
            "-p",
            &main,
            "-m",
            "upstream work",
        ],
        &[],
    );
    git(root, &["update-ref", "refs/heads/main", &commit, &main]);
}

fn run_git(root: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out =
        std::process::Command::new("git").args(args).envs(env.iter().copied()).current_dir(root).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

const QUIET: (&str, &str) = ("CODE_INTEL_MODEL_DIR", "/nonexistent/model");

/// The points a full run passes, each as `point#n`.
async fn trace(merge: Merge) -> Vec<String> {
    let repo = repo();
    let file = repo.path().join(".git/failpoint-trace");
    let client = connect_with_env(repo.path(), &[QUIET, ("CODE_INTEL_FAILPOINT_TRACE", file.to_str().unwrap())]).await;
    assert!(drive(&client, repo.path(), merge).await);
    client.cancel().await.unwrap();
    let mut seen = std::collections::BTreeMap::new();
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|p| {
            let n = seen.entry(p.to_owned()).or_insert(0);
            *n += 1;
            format!("{p}#{n}")
        })
        .collect()
}

/// The branch another work tree of the repository has checked out, with a live session there
/// (issue 24: a kill in one work tree never disturbs another).
const OTHER_BRANCH: &str = "llm_task_20260101_000000_deadbeef_from_main";

/// What must stay as it is in the other work tree: its session's checkpoint, HEAD, its branch's
/// tip, and its files (an uncommitted change among them).
#[derive(Debug, PartialEq, Eq)]
struct OtherTree {
    checkpoint: String,
    head: String,
    tip: String,
    files: Vec<(String, String)>,
}

/// A second work tree beside `root` on [`OTHER_BRANCH`], with an uncommitted change and a
/// session of its own (started in process, in QUERY_FRAME).
fn other_tree(root: &Path) -> (std::path::PathBuf, OtherTree) {
    let other = root.parent().unwrap().join(format!("{}-other", root.file_name().unwrap().to_string_lossy()));
    git(root, &["worktree", "add", "-q", "-b", OTHER_BRANCH, other.to_str().unwrap(), "main"]);
    append(&other, "src/auth.py", "\n# the other agent's work in progress\n");
    let ws = code_intel_session::workspace::Workspace::open(&other, false).unwrap();
    let sessions = code_intel_session::session::Sessions::open(&ws);
    let start = code_intel_session::session::StartRequest {
        intent: "INVESTIGATE".into(),
        query: "how does the other agent's task work".into(),
        flags: code_intel_workflow::engine::state::Flags { no_doc_research: true, ..Default::default() },
        ..Default::default()
    };
    assert!(sessions.start(&ws, start).is_ok(), "the other work tree's session");
    let snapshot = snapshot_of(&other);
    (other, snapshot)
}

fn snapshot_of(other: &Path) -> OtherTree {
    OtherTree {
        checkpoint: git(other, &["rev-parse", "refs/worktree/code-intel/active"]),
        head: git(other, &["symbolic-ref", "HEAD"]),
        tip: git(other, &["rev-parse", OTHER_BRANCH]),
        files: ["src/auth.py", "src/app.py"]
            .iter()
            .map(|p| ((*p).to_owned(), std::fs::read_to_string(other.join(p)).unwrap_or_default()))
            .collect(),
    }
}

/// Everything that must hold after a kill and the resumed run.
fn check(root: &Path, before: &[(String, String)], merge: Merge, point: &str) {
    fsck_clean(root);
    assert_eq!(user_files(root), before, "{point}: the user's changes");
    let status: BTreeSet<String> = git(root, &["status", "--porcelain", "--untracked-files=all"])
        .lines()
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect();
    let expected: BTreeSet<String> =
        [USER_STAGED, USER_UNSTAGED, USER_UNTRACKED].iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(status, expected, "{point}: git status shows more than the user's changes");
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "main", "{point}");
    assert!(git(root, &["show", "main:src/auth.py"]).contains("def refresh_token"), "{point}");
    if matches!(merge, Merge::ThreeWay) {
        assert!(std::fs::read_to_string(root.join("src/app.py")).unwrap().contains("def upstream"), "{point}");
    }
    assert!(!root.join(".git/code-intel/operation.json").exists(), "{point}: a journal is left");
    let locks =
        std::process::Command::new("find").args([".git", "-name", "*.lock"]).current_dir(root).output().unwrap();
    let locks = String::from_utf8_lossy(&locks.stdout).into_owned();
    assert!(locks.lines().all(|l| l.ends_with("code-intel/operation.lock")), "{point}: lock files left: {locks}");
    assert!(
        git(root, &["branch", "--format=%(refname:short)"])
            .lines()
            .all(|b| !b.starts_with("llm_task_") || b == OTHER_BRANCH),
        "{point}: a task branch is left, or the other work tree's is gone"
    );
    assert_eq!(
        git(root, &["rev-list", "--count", "refs/code-intel/history"]),
        "1",
        "{point}: the session is recorded once"
    );
    let tmp =
        std::process::Command::new("find").args([".", "-name", "*.code-intel-tmp"]).current_dir(root).output().unwrap();
    assert!(tmp.stdout.is_empty(), "{point}: temporary files left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_at_random_points_lose_nothing_and_block_nothing() {
    let kills: usize = std::env::var("CODE_INTEL_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let seed: u64 = std::env::var("CODE_INTEL_CRASH_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(20261122);
    let traces =
        [(Merge::FastForward, trace(Merge::FastForward).await), (Merge::ThreeWay, trace(Merge::ThreeWay).await)];
    assert!(
        traces.iter().all(|(_, t)| t.len() > 40),
        "too few points: {:?}",
        traces.iter().map(|t| t.1.len()).collect::<Vec<_>>()
    );
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut by_point: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    let mut resumed_servers = 0;
    for i in 0..kills {
        let (merge, points) = &traces[i % 2];
        let point = &points[rng.usize(..points.len())];
        let repo = repo();
        let root = repo.path();
        let before = user_files(root);
        // Every other run, a second work tree with its own session and work in progress.
        let other = (i % 4 < 2).then(|| other_tree(root));
        let killer = connect_with_env(root, &[QUIET, ("CODE_INTEL_FAILPOINT", point)]).await;
        let finished = drive(&killer, root, *merge).await;
        assert!(!finished, "kill {i} at {point} ({merge:?}): the server was not killed");
        drop(killer);
        // A new server resumes; it may meet the interrupted operation first.
        let client = connect_with_env(root, &[QUIET]).await;
        resumed_servers += 1;
        assert!(drive(&client, root, *merge).await, "kill {i} at {point}: the resumed server died");
        client.cancel().await.unwrap();
        check(root, &before, *merge, point);
        if let Some((other, snapshot)) = &other {
            assert_eq!(&snapshot_of(other), snapshot, "kill {i} at {point}: the other work tree was disturbed");
            crate::common::remove_dir_if_present(other);
        }
        *by_point.entry(point.split('#').next().unwrap_or("").to_owned()).or_default() += 1;
    }
    eprintln!("{kills} kills, {resumed_servers} resumed to the end; by point: {by_point:?}");
}

/// An operation journal that cannot be read, and cannot be moved aside either (something is in
/// the way): recovery says so, at the server's start and to the agent on the next change to a
/// session, instead of reporting it moved while leaving it in place.
#[tokio::test]
async fn an_unreadable_journal_that_cannot_be_moved_aside_is_reported() {
    let dir = crate::common::committed_project();
    let root = dir.path();
    let journal = root.join(".git/code-intel/operation.json");
    std::fs::create_dir_all(journal.parent().unwrap()).unwrap();
    std::fs::write(&journal, "{ torn").unwrap();
    // Where recovery moves an unreadable journal: a directory that is not empty.
    // (Every name it may take: a second unreadable journal does not replace the first.)
    for name in std::iter::once("operation.unreadable.json".to_owned())
        .chain((1..10).map(|n| format!("operation.unreadable.{n}.json")))
    {
        std::fs::create_dir_all(root.join(".git/code-intel").join(name).join("kept")).unwrap();
    }

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_git-code-intel"))
        .arg("serve")
        .current_dir(root)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("could not be moved aside") && stderr.contains("operation.json"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&journal).unwrap(), "{ torn");

    let client = connect_with_env(root, &[]).await;
    let r =
        crate::common::mcp_client::err(&client, "start_session", json!({"intent": "IMPLEMENT", "query": QUERY})).await;
    assert_eq!(r["error"], "git_error", "{r}");
    let message = r["message"].as_str().unwrap_or_default();
    assert!(message.contains("could not be moved aside") && message.contains("move or delete it"), "{r}");
    drop(client);

    // Once a person clears the way, the next change moves it aside and goes on.
    std::fs::remove_dir_all(root.join(".git/code-intel/operation.unreadable.json")).unwrap();
    let client = connect_with_env(root, &[]).await;
    let r =
        crate::common::mcp_client::ok(&client, "start_session", json!({"intent": "IMPLEMENT", "query": QUERY})).await;
    assert!(r["recovered"].as_str().unwrap_or_default().contains("moved to"), "{r}");
    assert!(!journal.exists());
}
