//! Hostile input, as an adversary would send it, against the real binary over stdio and real
//! git repositories: each test here failed before the hardening it is named after.

use std::path::Path;
use std::process::Stdio;

use crate::common::mcp_client::{BIN, Client, call, connect, err, ok, structured};
use crate::common::{committed_project, fsck_clean, git};
use serde_json::{Value, json};

/// Runs the PreToolUse hook with a tool call; returns (exit code, stderr).
fn hook(root: &Path, tool: &str, input: Value) -> (i32, String) {
    use std::io::Write;
    let event = json!({"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "cwd": root});
    let mut child = std::process::Command::new(BIN)
        .args(["hook", "claude-pre-tool-use"])
        .current_dir(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(event.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A session in READY (quick: no exploration) with `src/auth.py` explored.
async fn in_ready(client: &Client) {
    ok(client, "start_session", json!({"intent": "MODIFY", "query": "q", "quick": true, "no_doc_research": true}))
        .await;
    ok(client, "submit_phase", json!({"data": {"slots": {}, "tools_used": [], "summary": "frame"}})).await;
    ok(
        client,
        "submit_phase",
        json!({"data": {"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i"}]}],
                        "tools_used": [], "summary": "plan"}}),
    )
    .await;
    // Explored means shown: the file is looked at first.
    ok(client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
}

/// Failure 1: a symlink at an explored place whose target does not exist yet, outside the repository:
/// writing through it would create a file outside. check_write_target and the hook refuse it,
/// for a file link and for a directory link.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dangling_symlinks_do_not_let_writes_out() {
    let outside = tempfile::tempdir().unwrap();
    let repo = committed_project();
    let root = repo.path();
    std::os::unix::fs::symlink(outside.path().join("new.py"), root.join("src/evil.py")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("missing_dir"), root.join("src/evil_dir")).unwrap();
    let client = connect(root).await;
    in_ready(&client).await;
    // A new file beside an explored one is allowed; through the links it is not.
    assert_eq!(ok(&client, "check_write_target", json!({"file_path": "src/fresh.py"})).await["allowed"], true);
    for path in ["src/evil.py", "src/evil_dir/new.py"] {
        let r = err(&client, "check_write_target", json!({"file_path": path})).await;
        assert_eq!(r["error"], "path_outside_repo", "{path}: {r}");
        let (code, reason) = hook(root, "Write", json!({"file_path": path, "content": "x"}));
        assert_eq!(code, 2, "{path}: {reason}");
        assert!(reason.contains("outside the repository"), "{reason}");
    }
    // Nothing was created outside.
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Failure 9: `.git/` is never searched, listed or written: its config can carry credentials, its
/// hooks run code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_directory_is_out_of_reach() {
    let repo = committed_project();
    let root = repo.path();
    git(root, &["config", "remote.origin.url", "https://user:secret-token@example.com/r.git"]);
    let client = connect(root).await;
    let r = err(&client, "search_text", json!({"pattern": "secret-token", "path": ".git"})).await;
    assert_eq!(r["error"], "path_outside_repo", "{r}");
    let r = ok(&client, "search_text", json!({"pattern": "secret-token"})).await;
    assert_eq!(r["matches"], json!([]));
    let r = ok(&client, "search_text", json!({"pattern": "secret-token", "hidden": true})).await;
    assert_eq!(r["matches"], json!([]), "hidden files are searched, .git never");
    let r = ok(&client, "search_files", json!({"pattern": "config", "hidden": true})).await;
    assert_eq!(r["files"], json!([]), "{r}");
    err(&client, "search_files", json!({"pattern": "*", "path": ".git"})).await;
    err(&client, "get_symbols", json!({"path": ".git/hooks"})).await;
    err(&client, "analyze_structure", json!({"file_path": ".git/config"})).await;
    in_ready(&client).await;
    let r = err(&client, "check_write_target", json!({"file_path": ".git/hooks/pre-commit"})).await;
    assert_eq!(r["error"], "path_outside_repo", "{r}");
    assert_eq!(hook(root, "Write", json!({"file_path": ".git/hooks/pre-commit", "content": "x"})).0, 2);
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Failure 2: nested definitions made the output grow with the square of the input: 80 KB of inline
/// Rust gave 302 MB. Nesting is bounded (with a note), and every answer stays under 256 KB,
/// paged with next_offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_definitions_give_bounded_answers() {
    let repo = committed_project();
    let root = repo.path();
    let n = 10_000;
    let nested = format!("{}{}", "fn a(){".repeat(n), "}".repeat(n));
    let client = connect(root).await;
    let r = call(&client, "analyze_structure", json!({"code": nested, "language": "rust"})).await;
    let bytes = serde_json::to_vec(&r.structured_content).unwrap().len();
    let out = structured(&r);
    assert!(bytes < 300 * 1024, "{bytes} bytes");
    assert!(out["note"].as_str().unwrap().contains("nested deeper than 64"), "{}", out["note"]);
    assert_eq!(out["summary"]["functions"], 64);
    // The same as a 200 KB file: the index stays small, and the tools answer within bounds.
    let deep = format!("{}{}", "fn a(){".repeat(25_000), "}".repeat(25_000));
    std::fs::write(root.join("src/deep.rs"), &deep).unwrap();
    let defs = ok(&client, "find_definitions", json!({"symbol": "a"})).await;
    assert_eq!(defs["total"], 64);
    let symbols = ok(&client, "get_symbols", json!({"path": "src/deep.rs"})).await;
    assert!(symbols["note"].as_str().unwrap().contains("left out"), "{symbols}");
    // The server builds the index in the background; wait for it.
    let stored = root.join(".code-intel/index/symbols.idx");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !stored.exists() {
        assert!(std::time::Instant::now() < deadline, "the index was never stored");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let index = std::fs::metadata(&stored).unwrap().len();
    assert!(index < 4 * 1024 * 1024, "the index is {index} bytes");
    // Wide instead of deep: many definitions page through next_offset under the cap.
    let wide: String = (0..6_000).map(|i| format!("fn function_number_{i}() {{ let x = {i}; }}\n")).collect();
    std::fs::write(root.join("src/wide.rs"), &wide).unwrap();
    let mut offset = 0;
    let mut seen = 0;
    for _ in 0..100 {
        let r = call(&client, "analyze_structure", json!({"file_path": "src/wide.rs", "offset": offset})).await;
        assert!(serde_json::to_vec(&r.structured_content).unwrap().len() < 260 * 1024);
        let out = structured(&r);
        seen += out["functions"].as_array().unwrap().len();
        match out["next_offset"].as_u64() {
            Some(next) => offset = next as usize,
            None => break,
        }
    }
    assert_eq!(seen, 6_000, "every function, across the pages");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Found by the tool fuzz (tests/tool_fuzz.rs): arguments of the wrong type got serde's text,
/// which names no argument and quoted a 400 KB value whole; an argument echoed back could push
/// an answer past 256 KB; a glob of nested `{}` made globset panic; a broken source took
/// tree-sitter's error recovery 14 s. Each now gets a bounded, named answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_arguments_get_bounded_named_answers() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let size = |r: &rmcp::model::CallToolResult| serde_json::to_vec(&r.structured_content).unwrap().len();

    let r =
        call(&client, "check_write_target", json!({"file_path": "x.py", "allow_new_files": "y".repeat(400_000)})).await;
    assert!(size(&r) < 1024, "{} bytes", size(&r));
    let e = structured(&r);
    assert_eq!(e["error"], "invalid_argument");
    assert_eq!(
        e["message"],
        "Invalid argument 'allow_new_files': expected a boolean or null, got a string of 400000 bytes"
    );
    let e = err(&client, "add_explored_files", json!({})).await;
    assert_eq!(e["message"], "Invalid argument 'files': required");
    let e = err(&client, "search_text", json!({"pattern": "x", "max_results": -1})).await;
    assert_eq!(
        e["message"],
        "Invalid argument 'max_results': expected a non-negative integer or null, got the integer -1"
    );

    let r = call(&client, "find_definitions", json!({"symbol": "s".repeat(300_000)})).await;
    assert!(size(&r) < 1024, "{} bytes", size(&r));
    let e = structured(&r);
    assert_eq!(e["error"], "response_too_large", "{e}");
    assert!(e["message"].as_str().unwrap().starts_with("The answer of find_definitions would be 3"), "{e}");
    let r = call(&client, "query", json!({"symbol": "s".repeat(100_000)})).await;
    assert!(size(&r) <= 256 * 1024, "{} bytes", size(&r));

    let nested = format!("{}{}", "{a,".repeat(40), "}".repeat(40));
    let e = err(&client, "search_files", json!({"pattern": nested})).await;
    assert_eq!(e["message"], "Invalid argument 'pattern': `{…}` nested 40 deep; at most 16");

    let broken = format!("{}{}", "class A { m() {".repeat(12_500), "}}".repeat(12_500));
    let started = std::time::Instant::now();
    let out = ok(&client, "analyze_structure", json!({"code": broken, "language": "python"})).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    assert!(out["note"].as_str().unwrap().starts_with("parsing stopped after 2 s"), "{out}");
    client.cancel().await.unwrap();
}

/// Failure 4: a lock file a killed process left under refs/code-intel/ blocked every submit
/// ("checkpoint_conflict", which was not true) and made `clean` exit 1. Our own stale locks are
/// removed; a lock on a ref we share with git (HEAD) is named, with what to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_locks_are_cleared_or_named() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let started = ok(&client, "start_session", json!({"intent": "INVESTIGATE", "query": "q"})).await;
    let id = started["session_id"].as_str().unwrap();
    let lock = root.join(format!(".git/refs/worktree/code-intel/sessions/{id}.lock"));
    std::fs::write(&lock, "").unwrap();
    let r = ok(
        &client,
        "submit_phase",
        json!({"data": {"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs"}}),
    )
    .await;
    assert_eq!(r["phase"], "QUERY_FRAME");
    assert!(!lock.exists(), "the dead process's lock is gone");
    std::fs::write(root.join(".git/refs/worktree/code-intel/active.lock"), "").unwrap();
    std::fs::write(root.join(format!(".git/refs/worktree/code-intel/sessions/{id}.lock")), "").unwrap();
    let out = std::process::Command::new(BIN).arg("clean").current_dir(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(ok(&client, "get_session_status", json!({})).await["active"], false);

    // A lock held on HEAD (a git command running, or killed): the merge is refused, naming
    // the file and what to do, and nothing changes.
    ok(
        &client,
        "start_session",
        json!({"intent": "IMPLEMENT", "query": "q", "fast": true, "no_doc_research": true, "no_verify": true}),
    )
    .await;
    ok(&client, "submit_phase", json!({"data": {"slots": {}, "tools_used": [], "summary": "frame"}})).await;
    ok(
        &client,
        "submit_phase",
        json!({"data": {"tasks": [{"id": "t1", "description": "d", "status": "pending",
        "checklist": [{"item": "i"}]}], "tools_used": [], "summary": "plan"}}),
    )
    .await;
    // Explored means shown: the file is looked at first.
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().count() + 3;
    text.push_str("\n\ndef logout(session):\n    session.user = None\n    return True\n");
    std::fs::write(&path, text).unwrap();
    ok(&client, "submit_phase", json!({"data": {"task_id": "t1", "checklist": [{"item": "i", "status": "done",
        "evidence": format!("src/auth.py:{line}-{}", line + 2)}], "tools_used": ["check_write_target"], "summary": "done"}}))
        .await;
    ok(&client, "submit_phase", json!({"data": {"summary": "complete"}})).await;
    ok(&client, "review_changes", json!({})).await;
    ok(
        &client,
        "submit_phase",
        json!({"data": {"reviewed_files": [{"file": "src/auth.py", "decision": "keep"}], "commit_message": "Add logout",
                        "tools_used": ["review_changes"], "summary": "s"}}),
    )
    .await;
    let head_lock = root.join(".git/HEAD.lock");
    std::fs::write(&head_lock, "").unwrap();
    let before = git(root, &["for-each-ref", "--format=%(refname) %(objectname)"]);
    let r = err(&client, "submit_phase", json!({"data": {"summary": "merge"}})).await;
    assert_eq!(r["error"], "merge_failed", "{r}");
    let details = r["details"].as_str().unwrap();
    assert!(details.contains("HEAD.lock") && details.contains("delete that file"), "{details}");
    assert_eq!(git(root, &["for-each-ref", "--format=%(refname) %(objectname)"]), before, "nothing changed");
    std::fs::remove_file(&head_lock).unwrap();
    let r = ok(&client, "submit_phase", json!({"data": {"summary": "merge"}})).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE", "{r}");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Spawns `git-code-intel serve` with piped stdio.
fn spawn_server(root: &Path) -> std::process::Child {
    std::process::Command::new(BIN)
        .arg("serve")
        .current_dir(root)
        .env("CODE_INTEL_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn initialize(stdin: &mut impl std::io::Write) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
}

/// How long the child takes to exit, at most `limit`.
fn exit_time(child: &mut std::process::Child, limit: std::time::Duration) -> Option<std::time::Duration> {
    let started = std::time::Instant::now();
    while started.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(started.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    crate::common::end(child);
    None
}

/// Failure 6: closing stdin with a tool call in flight took about 5 s, and a client that
/// stopped reading stdout kept the server alive forever. The server's own budget after stdin
/// closes is 1.8 s (0.5 s for quick answers, 1.1 s for a sync to stop, 0.2 s to write); the
/// bound here is 3 s, so that a loaded 2-core machine (the whole suite beside it: 2.53 s once)
/// tells a hang from a slow scheduler. How fast it really is belongs to the benchmark.
#[test]
fn the_server_exits_promptly_once_stdin_closes() {
    use std::io::Write;
    let repo = committed_project();
    let root = repo.path();
    // A call in flight: submit_phase waits for the operation lock another process holds.
    let mut child = spawn_server(root);
    let mut stdin = child.stdin.take().unwrap();
    initialize(&mut stdin);
    let start = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "start_session", "arguments": {"intent": "INVESTIGATE", "query": "q"}}});
    writeln!(stdin, "{start}").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::create_dir_all(root.join(".git/code-intel")).unwrap();
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join(".git/code-intel/operation.lock"))
        .unwrap();
    lock.lock().unwrap();
    let submit = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "submit_phase", "arguments": {"data": {"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "s"}}}});
    writeln!(stdin, "{submit}").unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    drop(stdin);
    let took = exit_time(&mut child, std::time::Duration::from_secs(10));
    assert!(took.is_some_and(|t| t < std::time::Duration::from_secs(3)), "exit after stdin closed: {took:?}");
    drop(lock);

    // A client that stops reading stdout: the answers pile up in the pipe.
    let mut child = spawn_server(root);
    let mut stdin = child.stdin.take().unwrap();
    initialize(&mut stdin);
    for id in 1..200 {
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})).unwrap();
    }
    stdin.flush().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    drop(stdin);
    let took = exit_time(&mut child, std::time::Duration::from_secs(10));
    assert!(took.is_some_and(|t| t < std::time::Duration::from_secs(3)), "exit with stdout unread: {took:?}");
    fsck_clean(root);
}

/// Found by the tool fuzz: rmcp drops a pending read when an answer is ready to go, and the
/// transport threw away the part of a request it had read, so a large request arriving while
/// answers were written lost its head, got a parse error with id null, and its client waited
/// forever. Now every one of many large pipelined requests is answered under its own id.
#[test]
fn large_requests_arriving_while_answers_are_written_are_read_whole() {
    use std::io::{BufRead, BufReader, Write};
    let repo = committed_project();
    let mut child = spawn_server(repo.path());
    let mut stdin = child.stdin.take().unwrap();
    initialize(&mut stdin);
    let n = 60u64;
    let writer = std::thread::spawn(move || {
        for id in 1..=n {
            let pad = "p".repeat(if id % 2 == 0 { 1_500_000 } else { 10 });
            let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                              "params": {"name": "search_files", "arguments": {"pattern": "*.py", "pad": pad}}});
            writeln!(stdin, "{call}").unwrap();
        }
        stdin.flush().unwrap();
        stdin
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ids = Vec::new();
    while ids.len() < n as usize {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let msg: Value = serde_json::from_str(&line).unwrap();
        assert!(msg.get("error").is_none(), "{msg}");
        if let Some(id) = msg["id"].as_u64().filter(|&id| id != 0) {
            ids.push(id);
        }
    }
    drop(writer.join().unwrap());
    ids.sort_unstable();
    assert_eq!(ids, (1..=n).collect::<Vec<_>>());
    let _ = exit_time(&mut child, std::time::Duration::from_secs(5));
}

/// Failure 7: requests that cannot be read got no answer, so the client waited for its own
/// timeout. Now a parse error (-32700, id null) answers what is not UTF-8 or JSON (lone
/// surrogates included), an invalid-request error (-32600) answers JSON that is no message or
/// nests deeper than 128 (under its own id when one can be found), and the server goes on
/// serving.
#[test]
fn unreadable_requests_get_a_json_rpc_error() {
    use std::io::{BufRead, BufReader, Write};
    let repo = committed_project();
    let mut child = spawn_server(repo.path());
    let mut stdin = child.stdin.take().unwrap();
    initialize(&mut stdin);
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    // Too deep to parse, but its id can be found: the answer goes to it.
    let deep_call = format!(
        r#"{{"jsonrpc": "2.0", "method": "tools/call", "params": {{"name": "search_text", "arguments": {{"note": "a \"[{{\" in a string", "pattern": {deep}}}}}, "id": 8}}"#
    );
    let bad: Vec<Vec<u8>> = vec![
        b"this is not json".to_vec(),
        b"{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \xff}".to_vec(),
        br#"{"jsonrpc": "2.0", "id": 6, "method": "\ud800"}"#.to_vec(),
        deep.into_bytes(),
        deep_call.into_bytes(),
        b"{\"jsonrpc\": \"2.0\", \"id\": 9, \"no_method\": true}".to_vec(),
    ];
    for line in &bad {
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
    }
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list"})).unwrap();
    stdin.flush().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    while answers.iter().all(|a: &Value| a["id"] != 10) {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        let msg: Value = serde_json::from_str(&line).unwrap();
        if msg.get("id").is_some() && msg["id"] != 0 {
            answers.push(msg);
        }
    }
    drop(stdin);
    let codes: Vec<(Value, Value)> = answers.iter().map(|a| (a["id"].clone(), a["error"]["code"].clone())).collect();
    assert_eq!(
        codes,
        vec![
            (Value::Null, json!(-32700)),
            (Value::Null, json!(-32700)),
            (Value::Null, json!(-32700)),
            (Value::Null, json!(-32600)),
            (json!(8), json!(-32600)),
            (json!(9), json!(-32600)),
            (json!(10), Value::Null),
        ],
        "{answers:?}"
    );
    assert!(answers.last().unwrap()["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()));
    let _ = exit_time(&mut child, std::time::Duration::from_secs(5));
}

/// Drives a fast, no-verify IMPLEMENT session to PRE_COMMIT after `work` changed the tree.
async fn to_pre_commit(client: &Client, root: &Path, work: impl FnOnce(&Path)) {
    ok(
        client,
        "start_session",
        json!({"intent": "IMPLEMENT", "query": "q", "fast": true, "no_doc_research": true, "no_verify": true}),
    )
    .await;
    ok(client, "submit_phase", json!({"data": {"slots": {}, "tools_used": [], "summary": "frame"}})).await;
    ok(
        client,
        "submit_phase",
        json!({"data": {"tasks": [{"id": "t1", "description": "d", "status": "pending",
        "checklist": [{"item": "i"}]}], "tools_used": [], "summary": "plan"}}),
    )
    .await;
    // Explored means shown: the file is looked at first.
    ok(client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    ok(client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().count() + 3;
    text.push_str("\n\ndef logout(session):\n    session.user = None\n    return True\n");
    std::fs::write(&path, text).unwrap();
    work(root);
    ok(client, "submit_phase", json!({"data": {"task_id": "t1", "checklist": [{"item": "i", "status": "done",
        "evidence": format!("src/auth.py:{line}-{}", line + 2)}], "tools_used": ["check_write_target"], "summary": "done"}}))
        .await;
    ok(client, "submit_phase", json!({"data": {"summary": "complete"}})).await;
    ok(client, "review_changes", json!({})).await;
}

/// Failure 9: PRE_COMMIT accepted `reviewed_files` of any type and then committed every
/// change unreviewed, and the commit (made through gix) was gated neither by the garbage check
/// nor by the repository's own pre-commit hook. Now every changed file needs a decision, garbage
/// blocks unless kept with a reason, and the hook runs against exactly the tree to commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_commit_is_reviewed_and_gated() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    to_pre_commit(&client, root, |root| {
        std::fs::write(root.join("src/debug_dump.py"), "def dump(x):\n    print(x)\n    return x\n").unwrap();
    })
    .await;
    let submit = |files: Value| {
        json!({"data": {"reviewed_files": files, "commit_message": "Add logout",
        "tools_used": ["review_changes"], "summary": "reviewed"}})
    };
    for bad in [json!("x"), json!(-1), json!({})] {
        let r = err(&client, "submit_phase", submit(bad.clone())).await;
        assert!(r["message"].as_str().unwrap().contains("expected_payload_schema"), "{bad}: {r}");
    }
    let r = err(&client, "submit_phase", submit(json!([{"file": "src/auth.py", "decision": "keep"}]))).await;
    assert!(r["message"].as_str().unwrap().contains("missing: src/debug_dump.py"), "{r}");
    // Both reviewed: the debug print is garbage and blocks the commit.
    let both = json!([{"file": "src/auth.py", "decision": "keep"}, {"file": "src/debug_dump.py", "decision": "keep"}]);
    let r = err(&client, "submit_phase", submit(both)).await;
    assert!(
        r["message"].as_str().unwrap().contains("would add garbage")
            && r["message"].as_str().unwrap().contains("debug_dump.py"),
        "{r}"
    );
    assert!(r.get("requires_user_intervention").is_none(), "the agent can fix this itself: {r}");
    // The repository's own hook runs against the tree about to be committed.
    let hook = root.join(".git/hooks/pre-commit");
    std::fs::write(
        &hook,
        "#!/bin/sh\nif git diff --cached --name-only | grep -q debug_dump; then echo 'no dumps here' >&2; exit 1; fi\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let kept = json!([{"file": "src/auth.py", "decision": "keep"},
                      {"file": "src/debug_dump.py", "decision": "keep", "reason": "the user asked for the dump helper"}]);
    let r = err(&client, "submit_phase", submit(kept)).await;
    assert!(r["message"].as_str().unwrap().contains("pre-commit hook"), "{r}");
    assert!(r["details"].as_str().unwrap().contains("no dumps here"), "{r}");
    // Discarded, the file is gone and the commit passes both.
    let discarded = json!([{"file": "src/auth.py", "decision": "keep"},
                           {"file": "src/debug_dump.py", "decision": "discard", "reason": "debug output"}]);
    let r = ok(&client, "submit_phase", submit(discarded)).await;
    assert_eq!(r["phase"], "MERGE", "{r}");
    assert!(!root.join("src/debug_dump.py").exists());
    let branch = r["task_branch"].as_str().unwrap().to_owned();
    assert!(git(root, &["show", &format!("{branch}:src/auth.py")]).contains("def logout"));
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Failure 9: a 1 GB untracked file was read whole into memory when the task branch was
/// created, and by review_changes. Files over max_file_size are hashed and stored as streams,
/// and reviewed without a diff, with a note (RSS is measured by the benchmark).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_are_streamed_and_reviewed_without_a_diff() {
    let repo = committed_project();
    let root = repo.path();
    let big = "x".repeat(3 * 1024 * 1024);
    std::fs::write(root.join("user_data.bin"), &big).unwrap();
    let client = connect(root).await;
    to_pre_commit(&client, root, |root| {
        std::fs::write(root.join("src/generated_table.py"), format!("TABLE = '{}'\n", "y".repeat(2 * 1024 * 1024)))
            .unwrap();
    })
    .await;
    let review = ok(&client, "review_changes", json!({})).await;
    let files = review["files"].as_array().unwrap();
    let generated = files.iter().find(|f| f["file"] == "src/generated_table.py").expect("listed");
    assert!(generated["note"].as_str().unwrap().contains("no diff"), "{generated}");
    assert_eq!(generated["diff"], "");
    let user = files.iter().find(|f| f["file"] == "user_data.bin").expect("listed");
    assert_eq!(user["pre_existing"], true);
    let r = ok(
        &client,
        "submit_phase",
        json!({"data": {"reviewed_files": [{"file": "src/auth.py", "decision": "keep"},
                                           {"file": "src/generated_table.py", "decision": "keep", "reason": "a generated lookup table"}],
                        "commit_message": "Add logout and the table", "tools_used": ["review_changes"], "summary": "s"}}),
    )
    .await;
    let branch = r["task_branch"].as_str().unwrap().to_owned();
    let size = git(root, &["cat-file", "-s", &format!("{branch}:src/generated_table.py")]);
    assert_eq!(size, (2 * 1024 * 1024 + 11).to_string(), "the large file is committed whole");
    assert_eq!(std::fs::read_to_string(root.join("user_data.bin")).unwrap(), big, "the user's file is untouched");
    assert!(git(root, &["status", "--porcelain"]).contains("user_data.bin"));
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// `clean` removes the sessions even when a leftover task branch cannot be deleted, but says so
/// and exits non-zero, so a script does not take a half-done cleanup for done.
#[test]
fn clean_fails_when_a_branch_cannot_be_deleted() {
    let repo = committed_project();
    let root = repo.path();
    let branch = "llm_task_20261122_070000_ab12cd34_from_main";
    git(root, &["branch", branch]);
    let lock = root.join(format!(".git/refs/heads/{branch}.lock"));
    std::fs::write(&lock, "").unwrap();
    let out = std::process::Command::new(BIN).arg("clean").current_dir(root).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stdout: {}\nstderr: {stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(stderr.contains("were not cleaned up") && stderr.contains(".lock"), "{stderr}");
    assert!(git(root, &["branch", "--list", branch]).contains(branch), "the branch is still there");
    let out = std::process::Command::new(BIN).args(["--json", "clean"]).current_dir(root).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(answer["branch_cleanup_error"]["message"].as_str().is_some_and(|m| m.contains(".lock")), "{answer}");
    std::fs::remove_file(&lock).unwrap();
    let out = std::process::Command::new(BIN).arg("clean").current_dir(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(git(root, &["branch", "--list", branch]), "", "deleted once the lock is gone");
}
