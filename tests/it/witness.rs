//! Verification decided by what the server witnessed: `run_check` runs one of the project's
//! verify commands itself (in the work tree, under the phase's sandbox, with a time limit),
//! reads the counts and failing tests from its output and records the run in the session;
//! POST_IMPL_VERIFY refuses `passed: true` against a failing witnessed run of the code as it is.

use serde_json::{Value, json};

use crate::common::mcp_client::{Client, connect, err, ok, submit};
use crate::common::{committed_project, fsck_clean, git, pytest_installed, run_cli};

/// Starts a quick IMPLEMENT session; its first answer (QUERY_FRAME).
async fn start(client: &Client) -> Value {
    let args = json!({"intent": "IMPLEMENT", "query": "add refresh_token", "quick": true, "no_doc_research": true});
    ok(client, "start_session", args).await
}

/// From QUERY_FRAME to READY's implementation: one task `t1` with one item `i`.
async fn to_ready(client: &Client) {
    submit(client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    submit(client, json!({"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i", "status": "pending"}]}],
                          "tools_used": [], "summary": "plan"})).await;
}

/// From QUERY_FRAME to POST_IMPL_VERIFY: one task that adds `refresh_token` to src/auth.py.
/// Returns POST_IMPL_VERIFY's answer.
async fn implement_to_verify(client: &Client, root: &std::path::Path) -> Value {
    to_ready(client).await;
    // Explored means shown: the file is looked at first.
    ok(client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    ok(client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 3;
    text.push_str("\n\ndef refresh_token(session):\n    return session\n");
    std::fs::write(&path, text).unwrap();
    submit(client, json!({"task_id": "t1", "checklist": [{"item": "i", "status": "done", "evidence": format!("src/auth.py:{start}-{}", start + 1)}],
                          "tools_used": ["check_write_target"], "summary": "done"})).await;
    let r = submit(client, json!({"summary": "complete"})).await;
    assert_eq!(r["phase"], "POST_IMPL_VERIFY", "{r}");
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_pass_is_refused_while_the_servers_own_run_fails() {
    if !pytest_installed() {
        eprintln!("skipped: pytest is not installed (scripts/test.sh installs it)");
        return;
    }
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    start(&client).await;
    let r = implement_to_verify(&client, root).await;
    let instruction = r["instruction"].as_str().unwrap_or_default();
    assert!(instruction.contains("run_check") && instruction.contains("`python3 -m pytest`"), "{instruction}");

    // Only a verify command runs, and a selector is a test's name, never an option.
    let r = err(&client, "run_check", json!({"command": "python3 -c 'print(1)'"})).await;
    assert_eq!(r["error"], "not_a_verify_command", "{r}");
    assert!(r["message"].as_str().unwrap_or_default().contains("`python3 -m pytest`"), "{r}");
    let r =
        err(&client, "run_check", json!({"command": "python3 -m pytest", "selector": "--junitxml=src/auth.py"})).await;
    assert_eq!(r["error"], "bad_selector", "{r}");
    let r = err(&client, "run_check", json!({"command": "python3 -m pytest", "selector": "x; rm -rf src"})).await;
    assert_eq!(r["error"], "bad_selector", "{r}");

    // A test that fails (put there by this test, as a regression would be).
    std::fs::write(root.join("tests/test_broken.py"), "def test_broken():\n    assert 1 == 2\n").unwrap();
    let run = ok(&client, "run_check", json!({"command": "python3 -m pytest"})).await;
    assert_eq!(run["run"], 1, "{run}");
    assert_eq!((run["recorded"].clone(), run["runner"].clone()), (json!(true), json!("pytest")), "{run}");
    assert_ne!(run["exit_code"], 0, "{run}");
    assert_eq!((run["passed"].clone(), run["failed"].clone()), (json!(2), json!(1)), "{run}");
    assert_eq!(run["failing"], json!(["tests/test_broken.py::test_broken"]), "{run}");
    let verdict = json!({"verifier_used": "verifiers/tests.md", "passed": true, "details": "all green", "tools_used": ["run_check"], "summary": "ok"});
    let r = err(&client, "submit_phase", json!({"data": verdict})).await;
    assert_eq!(r["error"], "verification_contradicted", "{r}");
    let message = r["message"].as_str().unwrap_or_default();
    assert!(message.contains("tests/test_broken.py::test_broken") && message.contains("python3 -m pytest"), "{r}");

    // A passing run of one file does not answer the failing run of all.
    std::fs::remove_file(root.join("tests/test_broken.py")).unwrap();
    let one = ok(&client, "run_check", json!({"command": "python3 -m pytest", "selector": "tests/test_auth.py"})).await;
    assert_eq!((one["exit_code"].clone(), one["passed"].clone()), (json!(0), json!(2)), "{one}");
    let r = err(&client, "submit_phase", json!({"data": verdict})).await;
    assert_eq!(r["error"], "verification_contradicted", "{r}");
    // A passing run of all does.
    let all = ok(&client, "run_check", json!({"command": "python3 -m pytest"})).await;
    assert_eq!(
        (all["exit_code"].clone(), all["failed"].clone(), all["run"].clone()),
        (json!(0), json!(0), json!(3)),
        "{all}"
    );
    let r = submit(&client, verdict).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE", "{r}");

    // The report shows what the server saw beside what the agent said.
    let (code, report, _) = run_cli(root, &["report"], "");
    assert_eq!(code, 0);
    assert!(report.contains("Runs the server witnessed"), "{report}");
    let first = "| 1 | POST_IMPL_VERIFY | `python3 -m pytest` | exit 1, 2 passed, 1 failed, failing: tests/test_broken.py::test_broken |";
    assert!(report.contains(first), "{report}");
    assert!(report.contains("| 3 | POST_IMPL_VERIFY | `python3 -m pytest` | exit 0, 2 passed, 0 failed |"), "{report}");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Without a session a check still runs (and is not recorded); it never runs forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_outside_a_session_is_run_and_not_recorded() {
    let repo = committed_project();
    let root = repo.path();
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(root.join(".code-intel/config.json"), r#"{"verify_commands": ["sh -c 'echo 3 passed in 0.01s'"]}"#)
        .unwrap();
    let client = connect(root).await;
    let run = ok(&client, "run_check", json!({"command": "sh -c 'echo 3 passed in 0.01s'"})).await;
    assert_eq!(
        (run["recorded"].clone(), run["exit_code"].clone(), run["passed"].clone()),
        (json!(false), json!(0), json!(3)),
        "{run}"
    );
    assert_eq!(run["tail"], "3 passed in 0.01s\n", "{run}");
    client.cancel().await.unwrap();
}

/// `init` and `doctor` say which verify commands were derived, why, and which are missing.
#[test]
fn init_and_doctor_print_the_derived_commands_with_why() {
    let repo = committed_project();
    let root = repo.path();
    std::fs::write(root.join("pytest.ini"), "[pytest]\npythonpath = src\n").unwrap();
    std::fs::write(root.join("go.mod"), "module example.com/x\n").unwrap();
    let (code, out, err) = run_cli(root, &["init"], "");
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("`python3 -m pytest` (`pytest.ini`)"), "{out}");
    let go = crate::common::on_path("go");
    assert_eq!(out.contains("not installed here, so not offered: `go test ./...` (`go.mod`)"), !go, "{out}");
    let (_, json, _) = run_cli(root, &["--json", "doctor"], "");
    let checks: serde_json::Value = serde_json::from_str(&json).unwrap();
    let verify =
        checks.as_array().unwrap().iter().find(|c| c["what"].as_str().unwrap_or_default().contains("verify commands"));
    let verify = verify.unwrap_or_else(|| panic!("{checks}"));
    assert_eq!(verify["status"], "ok", "{verify}");
    assert!(verify["what"].as_str().unwrap_or_default().contains("`python3 -m pytest` (`pytest.ini`)"), "{verify}");
}

/// A test that already failed before the change (the baseline run in QUERY_FRAME) is
/// pre-existing: it does not refuse the verdict. A test that fails only after it does, named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_the_baseline_had_is_pre_existing_and_a_new_one_is_a_regression() {
    if !pytest_installed() {
        eprintln!("skipped: pytest is not installed (scripts/test.sh installs it)");
        return;
    }
    let repo = committed_project();
    let root = repo.path();
    std::fs::write(root.join("tests/test_old.py"), "def test_old_bug():\n    assert 'known' == 'fixed'\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "a test that fails already"]);
    let client = connect(root).await;
    let r = start(&client).await;
    let instruction = r["instruction"].as_str().unwrap_or_default();
    assert!(instruction.contains("baseline") && instruction.contains("`python3 -m pytest`"), "{instruction}");
    let base = ok(&client, "run_check", json!({"command": "python3 -m pytest"})).await;
    assert_eq!(base["failing"], json!(["tests/test_old.py::test_old_bug"]), "{base}");
    implement_to_verify(&client, root).await;
    let verdict = json!({"verifier_used": "verifiers/tests.md", "passed": true, "details": "only the old failure", "tools_used": ["run_check"], "summary": "ok"});

    // A regression beside the old failure: refused, and only the new test is blamed.
    std::fs::write(root.join("tests/test_new.py"), "def test_new_bug():\n    assert False\n").unwrap();
    ok(&client, "run_check", json!({"command": "python3 -m pytest"})).await;
    let r = err(&client, "submit_phase", json!({"data": verdict})).await;
    assert_eq!(r["error"], "verification_contradicted", "{r}");
    let message = r["message"].as_str().unwrap_or_default();
    assert!(message.contains("not in the baseline (run 1): tests/test_new.py::test_new_bug"), "{message}");

    // Only the old failure: pre-existing, the verdict stands.
    std::fs::remove_file(root.join("tests/test_new.py")).unwrap();
    let now = ok(&client, "run_check", json!({"command": "python3 -m pytest"})).await;
    assert_eq!(now["failing"], json!(["tests/test_old.py::test_old_bug"]), "{now}");
    let r = submit(&client, verdict).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE", "{r}");
    let (_, report, _) = run_cli(root, &["report"], "");
    assert!(report.contains("| 1 | QUERY_FRAME (baseline) | `python3 -m pytest` |"), "{report}");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Rust: `cargo test` derived from `Cargo.toml`, run by the server in a session, its counts
/// and failing test read from cargo's own output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_test_is_derived_run_and_read() {
    let repo = committed_project();
    let root = repo.path();
    std::fs::write(
        root.join("Cargo.toml"),
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(1, 2), 3); }\n    #[test]\n    fn wrong() { assert_eq!(super::add(1, 2), 4); }\n}\n",
    )
    .unwrap();
    std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
    // Cargo.lock is tracked, as an application's is: cargo then only reads it.
    let locked =
        std::process::Command::new("cargo").args(["generate-lockfile", "--offline"]).current_dir(root).status();
    assert!(locked.is_ok_and(|s| s.success()));
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "a crate"]);
    // The project's own target directory, not the one this test binary was built in (whose lock
    // the running `cargo test` holds).
    let target = tempfile::tempdir().unwrap();
    let target_dir = target.path().display().to_string();
    let client = crate::common::mcp_client::connect_with_env(root, &[("CARGO_TARGET_DIR", &target_dir)]).await;
    let r = ok(
        &client,
        "start_session",
        json!({"intent": "IMPLEMENT", "query": "fix add", "quick": true, "no_doc_research": true}),
    )
    .await;
    let instruction = r["instruction"].as_str().unwrap_or_default();
    assert!(instruction.contains("`cargo test`"), "{instruction}");
    let run = ok(&client, "run_check", json!({"command": "cargo test", "selector": "tests::"})).await;
    assert_eq!(run["runner"], "cargo test", "{run}");
    assert_eq!((run["passed"].clone(), run["failed"].clone()), (json!(1), json!(1)), "{run}");
    assert_eq!(run["failing"], json!(["tests::wrong"]), "{run}");
    assert_ne!(run["exit_code"], 0, "{run}");
    assert_eq!(run["recorded"], true, "the baseline, before READY: {run}");
    assert!(
        git(root, &["status", "--porcelain", "--untracked-files=no"]).is_empty(),
        "the run changed nothing tracked"
    );
    client.cancel().await.unwrap();
}

/// Where the kernel cannot confine (here: the off switch in the server's environment), a session
/// runs no check: run_check says why and records nothing, so no refusal of the runner is taken
/// for a failing run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_kernel_sandbox_a_session_runs_no_check_and_records_none() {
    let repo = committed_project();
    let root = repo.path();
    let client = crate::common::mcp_client::connect_with_env(root, &[("CODE_INTEL_NO_SANDBOX", "1")]).await;
    start(&client).await;
    let r = err(&client, "run_check", json!({"command": "python3 -m pytest"})).await;
    assert_eq!(r["error"], "cannot_run", "{r}");
    assert!(r["message"].as_str().unwrap_or_default().contains("no kernel sandbox"), "{r}");
    client.cancel().await.unwrap();
}

/// Evidence tied to the diff, on a real repository: a docstring the session wrote is evidence
/// (lines without code used to be refused as empty), and at READY's completion a done item
/// citing lines the session did not change is flagged, in the answer and in the report, unless
/// it says the code was already right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_is_read_against_what_the_session_changed() {
    if !pytest_installed() {
        eprintln!("skipped: pytest is not installed (scripts/test.sh installs it)");
        return;
    }
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    start(&client).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    let plan = json!({"tasks": [{"id": "t1", "description": "document login", "status": "pending",
                                  "checklist": [{"item": "docstring", "status": "pending"},
                                                {"item": "empty password refused", "status": "pending"},
                                                {"item": "session made", "status": "pending"}]}],
                      "tools_used": [], "summary": "plan"});
    submit(&client, plan).await;
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    // A docstring after login's signature: lines 17-18 hold no code beyond it.
    let path = root.join("src/auth.py");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace(
        "def login(user, password):\n",
        "def login(user, password):\n    \"\"\"Log `user` in; an empty password is refused.\"\"\"\n",
    );
    std::fs::write(&path, text).unwrap();
    let report = json!({"task_id": "t1", "checklist": [
        {"item": "docstring", "status": "done", "evidence": "src/auth.py:17-18"},
        {"item": "empty password refused", "status": "done", "evidence": "src/auth.py:19-20"},
        {"item": "session made", "status": "done", "evidence": "src/auth.py:21",
         "already_right": "login already returns a Session for the user"}],
        "tools_used": ["check_write_target"], "summary": "documented"});
    let r = submit(&client, report).await;
    assert_eq!(r["all_complete"], true, "a docstring the session wrote is evidence: {r}");
    let r = submit(&client, json!({"summary": "complete"})).await;
    assert_eq!(r["phase"], "POST_IMPL_VERIFY", "flagged, not refused: {r}");
    let warning = r["warning"].as_str().unwrap_or_default();
    assert!(warning.contains("t1: src/auth.py:19-20"), "{r}");
    assert!(!warning.contains("17-18") && !warning.contains("src/auth.py:21"), "{r}");
    crate::common::mcp_client::witness_tests(&client).await;
    let verdict = json!({"verifier_used": "verifiers/tests.md", "passed": true, "details": "green", "tools_used": ["run_check"], "summary": "ok"});
    assert_eq!(submit(&client, verdict).await["phase"], "SESSION_COMPLETE");
    client.cancel().await.unwrap();
    let (code, report, _) = run_cli(root, &["report"], "");
    assert_eq!(code, 0);
    assert!(report.contains("`src/auth.py:19-20` — **cites lines this session did not change**"), "{report}");
    assert!(report.contains("already right, claimed: login already returns a Session for the user"), "{report}");
}

/// The hooks' refusals are the session's too: each is logged in the git directory and the
/// report lists them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_lists_what_the_hooks_refused() {
    if !pytest_installed() {
        eprintln!("skipped: pytest is not installed (scripts/test.sh installs it)");
        return;
    }
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    start(&client).await;
    // Before READY: a write through Claude Code's Write tool is refused.
    let event = json!({"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": root,
                       "tool_input": {"file_path": root.join("src/auth.py"), "content": "x"}});
    let (code, _, why) = run_cli(root, &["hook", "claude-pre-tool-use"], &event.to_string());
    assert_eq!(code, 2, "{why}");
    implement_to_verify(&client, root).await;
    crate::common::mcp_client::witness_tests(&client).await;
    let verdict = json!({"verifier_used": "verifiers/tests.md", "passed": true, "details": "green", "tools_used": ["run_check"], "summary": "ok"});
    assert_eq!(submit(&client, verdict).await["phase"], "SESSION_COMPLETE");
    client.cancel().await.unwrap();
    let (code, out, err) = run_cli(root, &["--json", "report"], "");
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    let refusals = report["hook_refusals"].as_array().unwrap_or_else(|| panic!("{report}"));
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert_eq!((refusals[0]["client"].as_str(), refusals[0]["tool"].as_str()), (Some("claude"), Some("Write")));
    assert!(refusals[0]["input"].as_str().unwrap_or_default().ends_with("src/auth.py"), "{refusals:?}");
    assert_eq!(refusals[0]["reason"].as_str(), why.lines().next(), "{refusals:?}");
    let (_, md, _) = run_cli(root, &["report"], "");
    assert!(md.contains("## Hook refusals") && md.contains("| claude | Write |"), "{md}");
}

/// A file a tool showed in READY is writable through the client's own tools too: the hooks
/// judge by the stored session, which takes in what the tools showed when check_write_target
/// allows the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_a_tool_showed_in_ready_passes_the_hook_as_it_passed_check_write_target() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    start(&client).await;
    to_ready(&client).await;
    let write = json!({"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": root,
                       "tool_input": {"file_path": root.join("src/app.py"), "content": "x = 1\n"}});
    let (code, _, why) = run_cli(root, &["hook", "claude-pre-tool-use"], &write.to_string());
    assert_eq!(code, 2, "never shown: refused ({why})");
    ok(&client, "get_symbols", json!({"path": "src/app.py"})).await;
    let allowed = ok(&client, "check_write_target", json!({"file_path": "src/app.py"})).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    let (code, _, why) = run_cli(root, &["hook", "claude-pre-tool-use"], &write.to_string());
    assert_eq!(code, 0, "allowed by check_write_target, refused by the hook: {why}");
    client.cancel().await.unwrap();
}

/// A file the client's own tools read (Claude Code's Read, a plain `sed -n`/`cat` of either
/// client's shell) counts as shown: the hooks note the read, and the file is explored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_the_clients_read_tool_opened_counts_as_explored() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    start(&client).await;
    to_ready(&client).await;
    let r = err(&client, "check_write_target", json!({"file_path": "src/app.py"})).await;
    assert_eq!(r["error"], "write_blocked", "{r}");
    let read = json!({"hook_event_name": "PreToolUse", "tool_name": "Read", "cwd": root,
                      "tool_input": {"file_path": root.join("src/app.py")}});
    let (code, _, why) = run_cli(root, &["hook", "claude-pre-tool-use"], &read.to_string());
    assert_eq!(code, 0, "{why}");
    let allowed = ok(&client, "check_write_target", json!({"file_path": "src/app.py"})).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    // Codex reads through its shell; a plain reader command of a file counts the same.
    let shell = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": root, "session_id": "s", "turn_id": "t",
                       "tool_input": {"command": "sed -n '1,40p' tests/test_auth.py"}});
    let (code, _, why) = run_cli(root, &["hook", "codex-pre-tool-use"], &shell.to_string());
    assert_eq!(code, 0, "{why}");
    let allowed = ok(&client, "check_write_target", json!({"file_path": "tests/test_auth.py"})).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    // Named in a command that only lists it: not read.
    let listing = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": root, "session_id": "s", "turn_id": "t",
                         "tool_input": {"command": "ls docs/auth.md"}});
    run_cli(root, &["hook", "codex-pre-tool-use"], &listing.to_string());
    let r = err(&client, "check_write_target", json!({"file_path": "docs/auth.md"})).await;
    assert_eq!(r["error"], "write_blocked", "{r}");
    client.cancel().await.unwrap();
}
