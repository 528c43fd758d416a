//! The workflow end to end: the real binary as an MCP stdio server, driven by rmcp's client,
//! against real git repositories in temporary directories. Session state is read back from
//! `refs/code-intel/*` with git itself, and `git fsck` must be clean after every test.

use crate::common::git;

use crate::common::flows::{explore, front, gates_no};
use crate::common::mcp_client::{Client, call, connect, err, ok, structured, submit};

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{committed_project as repo, fsck_clean};

async fn reject(client: &Client, data: Value, error: &str) -> Value {
    let before = ok(client, "get_session_status", json!({})).await;
    let r = err(client, "submit_phase", json!({"data": data})).await;
    assert_eq!(r["error"], error, "{r}");
    let after = ok(client, "get_session_status", json!({})).await;
    assert_eq!(before["checkpoint"], after["checkpoint"], "a rejection must not write a checkpoint");
    assert_eq!((before["phase"].clone(), before["step"].clone()), (after["phase"].clone(), after["step"].clone()));
    r
}

async fn start(client: &Client, intent: &str, extra: Value) -> Value {
    let mut args = json!({"intent": intent, "query": "Make login() refresh the Session token before it expires"});
    if let (Some(a), Some(e)) = (args.as_object_mut(), extra.as_object()) {
        a.extend(e.clone());
    }
    ok(client, "start_session", args).await
}

/// Every ref of ours: the work tree's sessions and the shared ones.
fn session_refs(root: &Path) -> String {
    git(root, &["for-each-ref", "--format=%(refname)", "refs/worktree/code-intel/", "refs/code-intel/"])
}

/// Writes a real implementation into src/auth.py and returns its line range.
fn implement_refresh(root: &Path) -> (usize, usize) {
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 2;
    text.push_str(
        "\n\ndef refresh_token(session):\n    session.token = issue_token(session.user)\n    return session.token\n",
    );
    std::fs::write(&path, text).unwrap();
    (start, start + 2)
}

async fn plan_and_implement(client: &Client, root: &Path) -> Value {
    submit(
        client,
        json!({"tasks": [{"id": "t1", "description": "add refresh_token", "status": "pending",
                                      "checklist": [{"item": "refresh_token in auth.py", "status": "pending"}]}],
                          "tools_used": [], "summary": "one task"}),
    )
    .await;
    let allowed = ok(client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    assert_eq!(allowed["allowed"], true);
    let (a, b) = implement_refresh(root);
    submit(client, json!({"task_id": "t1", "checklist": [{"item": "refresh_token in auth.py", "status": "done", "evidence": format!("src/auth.py:{a}-{b}")}],
                          "tools_used": ["check_write_target"], "summary": "refresh_token added"})).await;
    submit(client, json!({"summary": "all tasks done"})).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn investigation_flow_to_session_complete() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    let r = start(&client, "INVESTIGATE", json!({})).await;
    assert_eq!((r["phase"].as_str(), r["step"].as_u64()), (Some("DOCUMENT_RESEARCH"), Some(3)));
    let id = r["session_id"].as_str().unwrap().to_owned();
    assert!(session_refs(root).contains(&format!("refs/worktree/code-intel/sessions/{id}")));
    assert_eq!(
        git(root, &["symbolic-ref", "refs/worktree/code-intel/active"]),
        format!("refs/worktree/code-intel/sessions/{id}")
    );
    front(&client).await;
    explore(&client).await;
    let r = gates_no(&client).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE");
    assert_eq!(r["message"], "Exploration complete. Ending session.");
    let refs = session_refs(root);
    assert!(!refs.contains("sessions/"), "the session ref is removed on completion: {refs}");
    assert!(!refs.contains("active"));
    let record = git(root, &["show", "refs/code-intel/history:session.json"]);
    assert!(record.contains(&id), "{record}");
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["active"], false);
    fsck_clean(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_flow_with_real_evidence() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    start(&client, "MODIFY", json!({"quick": true})).await;
    // Writes are refused before READY.
    let r = err(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    assert_eq!(r["error"], "write_phase_blocked");
    front(&client).await;
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["phase"], "READY");
    submit(
        &client,
        json!({"tasks": [{"id": "t1", "description": "add refresh_token", "status": "pending",
                                        "checklist": [{"item": "refresh_token in auth.py", "status": "pending"}]}],
                            "tools_used": [], "summary": "plan"}),
    )
    .await;
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "main", "quick has no task branch");
    // quick skipped exploration: nothing is explored yet, so writes need add_explored_files.
    let r = err(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    assert_eq!(r["error"], "write_blocked");
    // Explored means shown: the file is looked at first.
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    assert_eq!(ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await["allowed"], true);
    let new = ok(&client, "check_write_target", json!({"file_path": "src/auth_tokens.py"})).await;
    assert_eq!(new["reason"], "new file in an explored directory");
    err(&client, "check_write_target", json!({"file_path": "tests/new_test.py"})).await;
    let r = err(&client, "check_write_target", json!({"file_path": "../outside.py"})).await;
    assert_eq!(r["error"], "path_outside_repo");

    // Cheating with evidence fails, and changes nothing.
    let item = "refresh_token in auth.py";
    for (evidence, error_text) in [
        ("../outside.py:1", "outside the repository"),
        ("src/missing.py:1", "not found"),
        ("src/auth.py:4000", "exceeds file length"),
    ] {
        let r = reject(
            &client,
            json!({"task_id": "t1", "checklist": [{"item": item, "status": "done", "evidence": evidence}],
                                       "tools_used": ["check_write_target"], "summary": "s"}),
            "payload_mismatch",
        )
        .await;
        assert!(r["message"].as_str().unwrap().contains(error_text), "{evidence}: {r}");
    }
    std::fs::write(root.join("src/stub.py"), "def refresh_token(session):\n    todo = 1\n    pass\n").unwrap();
    std::fs::write(root.join("src/stub.rs"), "fn refresh() {\n    todo!()\n}\n").unwrap();
    let r = reject(
        &client,
        json!({"task_id": "t1", "checklist": [{"item": item, "status": "done", "evidence": "src/stub.rs:1-3"}],
                                   "tools_used": ["check_write_target"], "summary": "s"}),
        "payload_mismatch",
    )
    .await;
    assert!(r["message"].as_str().unwrap().contains("Empty implementation"), "{r}");

    let (a, b) = implement_refresh(root);
    let r = submit(&client, json!({"task_id": "t1", "checklist": [{"item": item, "status": "done", "evidence": format!("src/auth.py:{a}-{b}")}],
                                   "tools_used": ["check_write_target"], "summary": "done"})).await;
    assert_eq!(r["all_complete"], true);
    assert_eq!(submit(&client, json!({"summary": "complete"})).await["phase"], "POST_IMPL_VERIFY");
    // passed: true needs a run the server witnessed.
    let unwitnessed = json!({"verifier_used": "verifiers/tests.md", "passed": true, "details": "pytest ok", "tools_used": [], "summary": "ok"});
    let r = crate::common::mcp_client::err(&client, "submit_phase", json!({"data": unwitnessed})).await;
    assert_eq!(r["error"], "verification_unwitnessed", "{r}");
    assert!(r["message"].as_str().unwrap_or_default().contains("`python3 -m pytest`"), "{r}");
    crate::common::mcp_client::witness_tests(&client).await;
    let r = submit(&client, json!({"verifier_used": "verifiers/tests.md", "passed": true, "details": "pytest ok", "tools_used": ["run_check"], "summary": "ok"})).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE");
    assert_eq!(r["message"], "Verification passed. Session ending (--quick).");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_verify_flow_creates_the_task_branch_and_keeps_uncommitted_work() {
    let repo = repo();
    let root = repo.path();
    std::fs::write(root.join("notes.txt"), "uncommitted user work\n").unwrap();
    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"no_verify": true, "no_doc_research": true})).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    explore(&client).await;
    assert_eq!(gates_no(&client).await["phase"], "READY");
    let r = plan_and_implement(&client, root).await;
    assert_eq!(r["phase"], "PRE_COMMIT");
    let branch = git(root, &["symbolic-ref", "--short", "HEAD"]);
    assert!(branch.starts_with("llm_task_"), "{branch}");
    assert_eq!(r["task_branch"], branch);
    assert_eq!(std::fs::read_to_string(root.join("notes.txt")).unwrap(), "uncommitted user work\n");
    assert!(git(root, &["status", "--porcelain"]).contains("notes.txt"));
    fsck_clean(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gate_full_runs_every_phase() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"gate_level": "f", "quick": true, "only_explore": true})).await;
    front(&client).await;
    explore(&client).await;
    // Full runs SEMANTIC although Q1 said no; it requires a real semantic_search call.
    let r = submit(&client, json!({"needs_more_information": false, "reason": "exploration found the code", "tools_used": [], "summary": "q1"})).await;
    assert_eq!(r["phase"], "SEMANTIC", "{r}");
    let r = reject(
        &client,
        json!({"search_query": "token refresh", "search_results": ["src/auth.py#Session.refresh#1"], "tools_used": ["semantic_search"], "summary": "s"}),
        "payload_mismatch",
    )
    .await;
    assert!(r["message"].as_str().unwrap().contains("semantic_search"), "{r}");
    let found = ok(&client, "semantic_search", json!({"query": "refresh the session token", "n_results": 3})).await;
    let hit = found["forest_hits"][0]["chunk_id"].as_str().unwrap().to_owned();
    assert!(hit.starts_with("src/auth.py#"), "{found}");
    let detail = ok(&client, "fetch_chunk_detail", json!({"chunk_id": hit})).await;
    assert!(detail["text"].as_str().unwrap().contains("def "), "{detail}");
    reject(
        &client,
        json!({"search_query": "token refresh", "search_results": [], "tools_used": ["semantic_search"], "summary": "s"}),
        "payload_mismatch",
    )
    .await;
    let r = submit(
        &client,
        json!({"search_query": "refresh the session token", "search_results": [hit],
               "tools_used": ["semantic_search", "fetch_chunk_detail"], "summary": "refresh lives in auth.py"}),
    )
    .await;
    assert_eq!(r["phase"], "Q2");
    let r = submit(&client, json!({"has_unverified_hypotheses": false, "reason": "nothing left unverified", "tools_used": [], "summary": "q2"})).await;
    assert_eq!(r["phase"], "VERIFICATION", "full runs VERIFICATION although Q2 said no");
    ok(&client, "find_references", json!({"symbol": "validate_token"})).await;
    submit(&client, json!({"hypotheses_verified": [{"hypothesis": "login builds a Session", "result": true, "evidence": "src/app.py:1"}],
                           "tools_used": ["find_references"], "summary": "verified"})).await;
    let r = submit(
        &client,
        json!({"needs_impact_analysis": false, "reason": "single function changes", "tools_used": [], "summary": "q3"}),
    )
    .await;
    assert_eq!(r["phase"], "IMPACT_ANALYSIS");
    let r = reject(
        &client,
        json!({"impact_summary": {"files": 1}, "tools_used": ["analyze_impact"], "summary": "i"}),
        "payload_mismatch",
    )
    .await;
    assert!(r["message"].as_str().unwrap().contains("not called"), "{r}");
    ok(&client, "analyze_impact", json!({"target_files": ["src/auth.py"]})).await;
    let r = submit(
        &client,
        json!({"impact_summary": {"must_verify": ["src/app.py"]}, "tools_used": ["analyze_impact"], "summary": "i"}),
    )
    .await;
    assert_eq!(r["phase"], "SESSION_COMPLETE");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_failures_lead_to_intervention_then_escalation() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"fast": true, "no_doc_research": true})).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    ok(&client, "get_session_status", json!({})).await;
    submit(&client, json!({"tasks": [{"id": "t1", "description": "add refresh_token", "status": "pending",
                                      "checklist": [{"item": "refresh_token", "status": "pending"}]}], "tools_used": [], "summary": "plan"})).await;
    // Explored means shown: the file is looked at first.
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    let (a, b) = implement_refresh(root);
    let evidence = format!("src/auth.py:{a}-{b}");
    ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    submit(
        &client,
        json!({"task_id": "t1", "checklist": [{"item": "refresh_token", "status": "done", "evidence": evidence}],
                           "tools_used": ["check_write_target"], "summary": "done"}),
    )
    .await;
    submit(&client, json!({"summary": "complete"})).await;
    let fail = json!({"verifier_used": "tests.md", "passed": false, "failed_tasks": [], "details": "test_refresh fails", "tools_used": [], "summary": "failed"});
    let mut round = 0;
    let mut interventions = 0;
    loop {
        round += 1;
        let r = submit(&client, fail.clone()).await;
        if r["phase"] == "VERIFY_INTERVENTION" {
            interventions += 1;
            let instruction = r["instruction"].as_str().unwrap().to_owned();
            if interventions == 3 {
                assert!(instruction.contains("user_escalation.md"), "{instruction}");
                assert!(instruction.contains("Intervention executed 2 times"), "{instruction}");
                break;
            }
            assert!(instruction.contains("interventions/*.md"), "{instruction}");
            // reproduce_first runs the failing test alone: the project's test command runs here.
            assert!(instruction.contains("`python3 -m pytest`"), "{instruction}");
            assert_eq!(hook(root, "Bash", json!({"command": "python3 -m pytest tests/test_auth.py -v"})).0, 0);
            assert_eq!(hook(root, "Bash", json!({"command": "echo x >> src/auth.py"})).0, 2);
            submit(&client, json!({"prompt_used": "interventions/step_back.md", "action_taken": "re-read the test", "tools_used": [], "summary": "i"})).await;
        } else {
            assert_eq!(r["phase"], "READY");
        }
        assert!(round < 20, "never reached escalation");
        let fix = format!("fix_{round}");
        submit(
            &client,
            json!({"tasks": [
            {"id": "t1", "description": "add refresh_token", "status": "completed"},
            {"id": fix, "description": "fix", "status": "pending", "checklist": [{"item": "fix", "status": "pending"}]}
        ], "tools_used": [], "summary": "replan"}),
        )
        .await;
        // Tasks completed before the revert stay completed; earlier fixes too.
        ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
        submit(
            &client,
            json!({"task_id": fix, "checklist": [{"item": "fix", "status": "done", "evidence": evidence}],
                               "tools_used": ["check_write_target"], "summary": "fixed"}),
        )
        .await;
        submit(&client, json!({"summary": "complete"})).await;
    }
    assert_eq!(round, 9, "3 failures per intervention");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_mismatch_returns_summaries() {
    let repo = repo();
    let client = connect(repo.path()).await;
    start(&client, "INVESTIGATE", json!({})).await;
    submit(&client, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs read", "compaction_count": 0})).await;
    let r = submit(
        &client,
        json!({"action_type": "investigate", "tools_used": [], "summary": "frame", "compaction_count": 1}),
    )
    .await;
    assert_eq!(r["compaction_count"], 1);
    assert_eq!(r["phase_summaries"]["step_03_DOCUMENT_RESEARCH"], "docs read");
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["compaction_count"], 1);
    fsck_clean(repo.path());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_resumes_from_the_checkpoint_ref() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    let id = start(&client, "IMPLEMENT", json!({})).await["session_id"].as_str().unwrap().to_owned();
    front(&client).await;
    explore(&client).await;
    let before = ok(&client, "get_session_status", json!({})).await;
    assert_eq!((before["phase"].as_str(), before["step"].as_u64()), (Some("Q1"), Some(6)));
    drop(client); // kills the child process
    let client = connect(root).await;
    let r = err(&client, "start_session", json!({"intent": "IMPLEMENT", "query": "something else"})).await;
    assert_eq!(r["error"], "recovery_available");
    assert_eq!(r["session_id"], id);
    let status = ok(&client, "get_session_status", json!({"discard_active": true, "repo_path": "."})).await;
    assert_eq!((status["phase"].as_str(), status["step"].as_u64()), (Some("Q1"), Some(6)));
    assert_eq!(status["session_id"], id);
    assert_eq!(status["phase_summaries"]["step_05_EXPLORATION"], "login and Session found in src/auth.py");
    assert_eq!(submit(&client, json!({"needs_more_information": false, "reason": "exploration found the code", "tools_used": [], "summary": "q1"})).await["phase"], "Q2");
    // The checkpoint history is a chain of commits, each sealed by this clone.
    let chain = git(root, &["rev-list", &format!("refs/worktree/code-intel/sessions/{id}")]);
    assert!(chain.lines().count() >= 5, "{chain}");
    let tree = git(root, &["ls-tree", "--name-only", &format!("refs/worktree/code-intel/sessions/{id}")]);
    assert_eq!(tree.lines().collect::<Vec<_>>(), ["checkpoint.json", "seal"]);
    fsck_clean(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_racing_hold_one_session() {
    let repo = repo();
    let root = repo.path();
    let (a, b) = tokio::join!(connect(root), connect(root));
    let args = json!({"intent": "INVESTIGATE", "query": "how does login work"});
    let (ra, rb) = tokio::join!(call(&a, "start_session", args.clone()), call(&b, "start_session", args));
    let wins = [&ra, &rb].iter().filter(|r| r.is_error != Some(true)).count();
    assert_eq!(wins, 1, "exactly one server may start the session");
    let loser = if ra.is_error == Some(true) { &ra } else { &rb };
    let e = structured(loser);
    assert!(matches!(e["error"].as_str(), Some("recovery_available" | "session_active")), "{e}");
    let sessions: Vec<String> =
        session_refs(root).lines().filter(|l| l.contains("/sessions/")).map(str::to_owned).collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    // Both servers see the same session; an advance by one is seen by the other.
    let (winner, other) = if ra.is_error == Some(true) { (&b, &a) } else { (&a, &b) };
    submit(winner, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs"})).await;
    assert_eq!(ok(other, "get_session_status", json!({})).await["phase"], "QUERY_FRAME");
    fsck_clean(root);
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cheating_fails_and_changes_nothing() {
    let repo = repo();
    let client = connect(repo.path()).await;
    start(&client, "IMPLEMENT", json!({"no_doc_research": true})).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    // Q3 from EXPLORATION: the old Q-gate shortcut to implementation.
    reject(
        &client,
        json!({"needs_impact_analysis": false, "reason": "skip straight to coding", "tools_used": [], "summary": "x"}),
        "payload_mismatch",
    )
    .await;
    // Claiming tools never called.
    let r = reject(&client, json!({"explored_files": ["src/auth.py"], "findings": ["x"], "tools_used": ["find_definitions", "search_text"], "summary": "x"}), "payload_mismatch").await;
    assert!(r["message"].as_str().unwrap().contains("not called"), "{r}");
    // Malformed data.
    let r = err(&client, "submit_phase", json!({"data": "{not json"})).await;
    assert_eq!(r["error"], "invalid_data");
    assert!(r["message"].as_str().unwrap().starts_with("Failed to parse data JSON"));
    let status = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(status["phase"], "EXPLORATION");
    // A JSON string holding the object is accepted.
    ok(&client, "find_definitions", json!({"symbol": "login"})).await;
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    let data = json!({"explored_files": ["src/auth.py"], "findings": ["x"], "tools_used": ["find_definitions", "get_symbols"], "summary": "x"}).to_string();
    assert_eq!(ok(&client, "submit_phase", json!({"data": data})).await["phase"], "Q1");
    fsck_clean(repo.path());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_tools_without_a_session() {
    let repo = repo();
    let client = connect(repo.path()).await;
    let r = err(&client, "submit_phase", json!({"data": {"summary": "x"}})).await;
    assert_eq!(r["message"], "No active session. Use start_session first.");
    let r = ok(&client, "get_session_status", json!({})).await;
    assert_eq!((r["active"].as_bool(), r["message"].as_str()), (Some(false), Some("No active session.")));
    err(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let r = err(&client, "start_session", json!({"intent": "DANCE", "query": "q"})).await;
    assert_eq!(r["error"], "invalid_argument");
    let r =
        err(&client, "start_session", json!({"intent": "IMPLEMENT", "query": "q", "gate_level": "sometimes"})).await;
    assert_eq!(r["error"], "invalid_argument");
    fsck_clean(repo.path());
    client.cancel().await.unwrap();
}

/// Runs the binary with `args`, feeding `stdin`; returns (exit code, stdout, stderr).
use crate::common::run_cli as cli;

/// The Claude Code hook as it judges where no kernel sandbox exists (its text guard, the
/// fallback): tests/it/sandbox.rs has the kernel's side.
fn hook(root: &Path, tool: &str, input: Value) -> (i32, String) {
    let event = json!({"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "cwd": root});
    let (code, _, err) = crate::common::run_cli_env(
        root,
        &["hook", "claude-pre-tool-use"],
        &event.to_string(),
        &[("CODE_INTEL_NO_SANDBOX", "1")],
    );
    (code, err)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_status_and_clean_follow_the_session() {
    let repo = repo();
    let root = repo.path();
    // No session: everything is allowed, and status says so.
    assert_eq!(hook(root, "Edit", json!({"file_path": "src/auth.py"})).0, 0);
    assert_eq!(hook(root, "Bash", json!({"command": "rm -rf src"})).0, 0);
    assert_eq!(cli(root, &["status"], "").1.trim(), "No active session.");
    assert_eq!(cli(root, &["hook", "claude-session-start"], "").1, "");
    assert_eq!(cli(root, &["hook", "claude-pre-tool-use"], "not json").0, 0, "no session: nothing to guard");

    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"quick": true, "no_doc_research": true})).await;
    let (code, reason) = hook(root, "Edit", json!({"file_path": "src/auth.py"}));
    assert_eq!(code, 2);
    assert!(reason.contains("Write not allowed in phase QUERY_FRAME"), "{reason}");
    assert_eq!(hook(root, "Write", json!({"file_path": root.join("src/new.py")})).0, 2);
    assert_eq!(hook(root, "NotebookEdit", json!({"notebook_path": "nb.ipynb"})).0, 2);
    let (code, reason) = hook(root, "Bash", json!({"command": "echo x > src/auth.py"}));
    assert_eq!(code, 2);
    assert!(reason.contains("QUERY_FRAME"), "{reason}");
    assert_eq!(hook(root, "Bash", json!({"command": "git commit -am wip"})).0, 2);
    assert_eq!(hook(root, "Bash", json!({"command": "git status && ls src"})).0, 0);
    // Reading is allowed, and what the client's Read opens counts as explored (below, in READY).
    assert_eq!(hook(root, "Read", json!({"file_path": "src/app.py"})).0, 0);
    let (_, start_text, _) = cli(root, &["hook", "claude-session-start"], "");
    assert!(start_text.contains("phase QUERY_FRAME (step 4)"), "{start_text}");
    // Input that cannot be judged while a session is active is blocked, with the fix named.
    let (code, _, why) = cli(root, &["hook", "claude-pre-tool-use"], "not json");
    assert_eq!(code, 2, "input that is not a hook event is blocked");
    assert!(why.contains("could not read this tool call") && why.contains("git code-intel doctor"), "{why}");

    let (_, text, _) = cli(root, &["status"], "");
    assert!(text.contains("QUERY_FRAME (step 4)") && text.contains("quick"), "{text}");
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    submit(&client, json!({"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i", "status": "pending"}]}],
                           "tools_used": [], "summary": "plan"})).await;
    let (_, json_text, _) = cli(root, &["status", "--json"], "");
    let status: Value = serde_json::from_str(&json_text).unwrap();
    assert_eq!(status["phase"], "READY");
    assert_eq!(status["task_progress"]["total"], 1);
    let (_, text, _) = cli(root, &["status"], "");
    assert!(text.contains("t1") && text.contains("checklist 0/1"), "{text}");

    // READY: explored files may be edited, others not; shell writes are allowed.
    assert_eq!(hook(root, "Edit", json!({"file_path": "src/auth.py"})).0, 2);
    // Explored means shown: the file is looked at first.
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    assert_eq!(hook(root, "Edit", json!({"file_path": "src/auth.py"})).0, 0);
    assert_eq!(hook(root, "MultiEdit", json!({"file_path": root.join("src/auth.py")})).0, 0);
    let (code, reason) = hook(root, "Edit", json!({"file_path": "docs/auth.md"}));
    assert_eq!(code, 2);
    assert!(reason.contains("write_blocked"), "{reason}");
    assert_eq!(hook(root, "Edit", json!({"file_path": "/etc/passwd"})).0, 2);
    assert_eq!(hook(root, "Bash", json!({"command": "echo x > notes.txt"})).0, 0);
    assert_eq!(hook(root, "Edit", json!({"file_path": "src/app.py"})).0, 0, "read through the client's Read");

    // clean: checkpoints gone, state reset, hooks allow again.
    let (code, out, _) = cli(root, &["clean"], "");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Removed 1 session"), "{out}");
    assert!(!session_refs(root).contains("/sessions/"));
    assert_eq!(ok(&client, "get_session_status", json!({})).await["active"], false);
    assert_eq!(hook(root, "Edit", json!({"file_path": "docs/auth.md"})).0, 0);
    start(&client, "INVESTIGATE", json!({})).await;
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// A leftover task branch while HEAD is on `main` (the user switched back after an aborted
/// session): `continue` keeps the old branch and gives this session a task branch of its own,
/// so PRE_COMMIT and MERGE work without the user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_from_the_base_branch_reaches_merge() {
    let repo = repo();
    let root = repo.path();
    git(root, &["checkout", "-q", "-b", "llm_task_20260101_000000_deadbeef_from_main"]);
    std::fs::write(root.join("docs/old.md"), "work of an aborted session\n").unwrap();
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "aborted work"]);
    git(root, &["checkout", "-q", "main"]);
    let client = connect(root).await;
    let r = start(&client, "IMPLEMENT", json!({"no_verify": true, "no_quality": true, "no_doc_research": true})).await;
    assert_eq!(r["phase"], "BRANCH_INTERVENTION");
    assert_eq!(r["stale_branches"][0]["current"], false);
    submit(&client, json!({"choice": "continue", "tools_used": [], "summary": "keep the old branch"})).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    explore(&client).await;
    gates_no(&client).await;
    let r = plan_and_implement(&client, root).await;
    assert_eq!(r["phase"], "PRE_COMMIT", "{r}");
    let branch = r["task_branch"].as_str().unwrap().to_owned();
    assert!(branch.starts_with("llm_task_") && branch.ends_with("_from_main") && !branch.contains("deadbeef"));
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), branch);
    ok(&client, "review_changes", json!({})).await;
    let r = submit(&client, json!({"review_prompt_used": "garbage_detection.md", "reviewed_files": [{"file": "src/auth.py", "decision": "keep"}],
                                   "commit_message": "Add refresh_token", "tools_used": ["review_changes"], "summary": "reviewed"})).await;
    assert_eq!(r["phase"], "MERGE");
    let r = submit(&client, json!({"summary": "merge it"})).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE", "{r}");
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert!(std::fs::read_to_string(root.join("src/auth.py")).unwrap().contains("def refresh_token"));
    let branches = git(root, &["branch", "--format=%(refname:short)"]);
    assert!(branches.contains("deadbeef"), "the old branch is kept: {branches}");
    assert!(!branches.contains(&branch), "the session's branch is merged and gone: {branches}");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// Only files the agent saw the content or symbols of may be written: listing every file with
/// search_files explores none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_listing_is_not_exploring() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"no_doc_research": true})).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    let listed = ok(&client, "search_files", json!({"pattern": "**/*"})).await;
    assert!(listed["files"].as_array().unwrap().len() >= 4, "{listed}");
    let defs = ok(&client, "find_definitions", json!({"symbol": "validate_token"})).await;
    assert_eq!(defs["definitions"][0]["file"], "src/auth.py");
    // Naming a file only listed is refused: it was never shown.
    let named = json!({"explored_files": ["src/app.py"], "findings": ["validate_token at src/auth.py:12"],
                       "tools_used": ["search_files", "find_definitions"], "summary": "explored"});
    let r = err(&client, "submit_phase", json!({"data": named})).await;
    assert_eq!(r["error"], "payload_mismatch", "{r}");
    assert!(
        r["message"].as_str().unwrap_or_default().contains("no tool showed you in this session: src/app.py"),
        "{r}"
    );
    submit(
        &client,
        json!({"explored_files": ["src/auth.py"], "findings": ["validate_token at src/auth.py:12"],
               "tools_used": ["search_files", "find_definitions"], "summary": "explored"}),
    )
    .await;
    gates_no(&client).await;
    submit(
        &client,
        json!({"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i"}]}],
                           "tools_used": [], "summary": "plan"}),
    )
    .await;
    let allowed = |file: &str| {
        let client = &client;
        let file = file.to_owned();
        async move { call(client, "check_write_target", json!({"file_path": file})).await.is_error != Some(true) }
    };
    assert!(allowed("src/auth.py").await, "shown by find_definitions");
    assert!(!allowed("src/app.py").await, "named, never shown");
    assert!(!allowed("tests/test_auth.py").await, "only listed by search_files");
    assert!(!allowed("config.yaml").await, "only listed by search_files");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// An agent that lost its context sends compaction_count + 1; when that first payload is
/// refused, the refusal carries the summaries too, and nothing is adopted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_submit_after_a_compaction_returns_the_summaries() {
    let repo = repo();
    let client = connect(repo.path()).await;
    start(&client, "INVESTIGATE", json!({})).await;
    submit(&client, json!({"documents_reviewed": ["docs/auth.md"], "tools_used": [], "summary": "docs read"})).await;
    let r = reject(
        &client,
        json!({"slots": {}, "tools_used": [], "summary": "", "compaction_count": 1}),
        "payload_mismatch",
    )
    .await;
    assert_eq!(r["phase_summaries"]["step_03_DOCUMENT_RESEARCH"], "docs read", "{r}");
    assert_eq!(r["compaction_count"], 0, "a refusal adopts nothing");
    // A payload of the wrong shape gets them too.
    let r = reject(&client, json!({"tasks": "x", "compaction_count": 1}), "phase_mismatch").await;
    assert_eq!(r["phase_summaries"]["step_03_DOCUMENT_RESEARCH"], "docs read", "{r}");
    // Echoing the current count: no summaries.
    let r = reject(
        &client,
        json!({"slots": {}, "tools_used": [], "summary": "", "compaction_count": 0}),
        "payload_mismatch",
    )
    .await;
    assert!(r.get("phase_summaries").is_none(), "{r}");
    let r = submit(&client, json!({"slots": {}, "tools_used": [], "summary": "frame", "compaction_count": 1})).await;
    assert_eq!(r["compaction_count"], 1);
    assert_eq!(r["phase_summaries"]["step_03_DOCUMENT_RESEARCH"], "docs read");
    fsck_clean(repo.path());
    client.cancel().await.unwrap();
}

/// The Codex hook with its text guard (no kernel sandbox), as [`hook`].
fn codex_hook(root: &Path, tool: &str, input: Value) -> (i32, String) {
    let event = json!({"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": input, "cwd": root, "session_id": "s"});
    let (code, _, err) = crate::common::run_cli_env(
        root,
        &["hook", "codex-pre-tool-use"],
        &event.to_string(),
        &[("CODE_INTEL_NO_SANDBOX", "1")],
    );
    (code, err)
}

/// Codex's shell and apply_patch calls are judged as Claude Code's are: every path a patch
/// adds, updates, deletes or moves, and every shell command outside READY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_hooks_judge_patches_and_shell_commands() {
    let repo = repo();
    let root = repo.path();
    let update =
        "*** Begin Patch\n*** Update File: src/auth.py\n@@\n-import hashlib\n+import hashlib  # x\n*** End Patch\n";
    assert_eq!(codex_hook(root, "apply_patch", json!({"command": update})).0, 0, "no session: allowed");
    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"quick": true, "no_doc_research": true})).await;
    let (code, why) = codex_hook(root, "apply_patch", json!({"command": update}));
    assert_eq!(code, 2);
    assert!(why.contains("Write not allowed in phase QUERY_FRAME") && why.contains("src/auth.py"), "{why}");
    for patch in [
        "*** Begin Patch\n*** Add File: src/new.py\n+x = 1\n*** End Patch\n",
        "*** Begin Patch\n*** Delete File: src/app.py\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: docs/auth.md\n*** Move to: docs/login.md\n@@\n-a\n+b\n*** End Patch\n",
    ] {
        assert_eq!(codex_hook(root, "apply_patch", json!({"command": patch})).0, 2, "{patch}");
    }
    for command in
        [json!("echo x >> src/auth.py"), json!(["bash", "-lc", "echo x > src/auth.py"]), json!("python3 -c 'print(1)'")]
    {
        let (code, why) = codex_hook(root, "Bash", json!({"command": command}));
        assert_eq!(code, 2, "{command}");
        assert!(why.contains("QUERY_FRAME"), "{why}");
    }
    assert_eq!(codex_hook(root, "Bash", json!({"command": "git status && ls src"})).0, 0);
    assert_eq!(codex_hook(root, "mcp__code-intel__get_symbols", json!({"path": "src/auth.py"})).0, 0);

    // READY: a patch may touch explored files only, every one of them.
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    submit(&client, json!({"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i", "status": "pending"}]}],
                           "tools_used": [], "summary": "plan"})).await;
    // Explored means shown: the file is looked at first.
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    assert_eq!(codex_hook(root, "apply_patch", json!({"command": update})).0, 0);
    let both = "*** Begin Patch\n*** Update File: src/auth.py\n@@\n-a\n+b\n*** Update File: docs/auth.md\n@@\n-a\n+b\n*** End Patch\n";
    let (code, why) = codex_hook(root, "apply_patch", json!({"command": both}));
    assert_eq!(code, 2, "one unexplored file blocks the patch");
    assert!(why.contains("docs/auth.md"), "{why}");
    assert_eq!(codex_hook(root, "Bash", json!({"command": "echo x > notes.txt"})).0, 0, "READY: shell writes run");
    // A session started in a subdirectory names files relative to it.
    let below = json!({"hook_event_name": "PreToolUse", "tool_name": "apply_patch", "cwd": root.join("src"),
        "tool_input": {"command": "*** Begin Patch\n*** Update File: auth.py\n@@\n-a\n+b\n*** End Patch\n"}});
    assert_eq!(cli(root, &["hook", "codex-pre-tool-use"], &below.to_string()).0, 0, "src/auth.py is explored");
    let below = json!({"hook_event_name": "PreToolUse", "tool_name": "apply_patch", "cwd": root.join("docs"),
        "tool_input": {"command": "*** Begin Patch\n*** Update File: auth.md\n@@\n-a\n+b\n*** End Patch\n"}});
    assert_eq!(cli(root, &["hook", "codex-pre-tool-use"], &below.to_string()).0, 2, "docs/auth.md is not");
    let (_, start_text, _) = cli(root, &["hook", "codex-session-start"], "{}");
    assert!(start_text.contains("phase READY"), "{start_text}");
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// In the verification phases the project's test commands run under both clients' hooks (the
/// detected ones, or the declared ones instead), and the instruction names them; writes do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_runs_the_projects_tests() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"quick": true, "no_doc_research": true})).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    submit(&client, json!({"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i", "status": "pending"}]}],
                           "tools_used": [], "summary": "plan"})).await;
    // Explored means shown: the file is looked at first.
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let (a, b) = implement_refresh(root);
    submit(&client, json!({"task_id": "t1", "checklist": [{"item": "i", "status": "done", "evidence": format!("src/auth.py:{a}-{b}")}],
                           "tools_used": ["check_write_target"], "summary": "done"})).await;
    let r = submit(&client, json!({"summary": "complete"})).await;
    assert_eq!(r["phase"], "POST_IMPL_VERIFY", "{r}");
    let instruction = r["instruction"].as_str().unwrap();
    // Derived from the project: its tests are pytest-style functions, which unittest would not
    // run, so pytest is named, and only pytest (no generic list of runners it may not have).
    assert!(instruction.contains("`python3 -m pytest`") && !instruction.contains("unittest`"), "{instruction}");
    for command in ["python3 -m pytest -q", "python3 -m pytest -x tests/test_auth.py 2>&1 | tail -5"] {
        assert_eq!(hook(root, "Bash", json!({"command": command})), (0, String::new()), "{command}");
        assert_eq!(codex_hook(root, "Bash", json!({"command": command})).0, 0, "{command}");
    }
    for command in [
        "python3 -c 'open(\"src/auth.py\",\"w\")'",
        "python3 -m pytest > report.txt",
        "echo x >> src/auth.py",
        "cargo test",
        "python3 -m unittest",
    ] {
        let (code, why) = hook(root, "Bash", json!({"command": command}));
        assert_eq!(code, 2, "{command}");
        assert!(why.contains("`python3 -m pytest`"), "the refusal lists the commands that run: {why}");
    }
    assert_eq!(hook(root, "Edit", json!({"file_path": "src/auth.py"})).0, 2, "source files change in READY");
    // Declared commands replace the derived ones, read when the hook runs.
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(root.join(".code-intel/config.json"), r#"{"verify_commands": ["make check"]}"#).unwrap();
    assert_eq!(hook(root, "Bash", json!({"command": "make check"})).0, 0);
    assert_eq!(hook(root, "Bash", json!({"command": "python3 -m pytest"})).0, 2);
    std::fs::remove_file(root.join(".code-intel/config.json")).unwrap();
    fsck_clean(root);
    client.cancel().await.unwrap();
}

/// A hook that cannot run says why and does not block every tool: an unknown hook name (hooks
/// from a newer `init`) exits 1 with the fix, never clap's usage text with the blocking 2; a
/// hook run outside a repository lets the tool run.
#[test]
fn a_hook_that_cannot_run_fails_open_and_says_why() {
    let repo = repo();
    let root = repo.path();
    // (Empty input: a hook that exits before reading must not fail the test's own write.)
    let (code, out, err) = cli(root, &["hook", "cursor-pre-tool-use"], "");
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("hook cursor-pre-tool-use") && err.contains("git code-intel init"), "{err}");
    assert!(!err.contains("Usage"), "{err}");
    let (code, _, err) = cli(root, &["hook", "claude-pre-tool-use", "--bogus"], "");
    assert_eq!(code, 1, "{err}");
    let outside = tempfile::tempdir().unwrap();
    let (code, out, err) = cli(outside.path(), &["hook", "claude-pre-tool-use"], "");
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let (code, _, _) = cli(outside.path(), &["hook", "codex-session-start"], "");
    assert_eq!(code, 0);
    // Anything else that does not parse is still an error with the usage text.
    assert_eq!(cli(root, &["no-such-command"], "").0, 2);
}

/// SessionStart stays under Claude Code's 10,000-character limit on hook output (over it, the
/// client shows a file path and a preview): long phase summaries are shortened, and say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_start_fits_the_clients_limit() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    start(&client, "IMPLEMENT", json!({"quick": true, "no_doc_research": true})).await;
    let long = "the frame of this request, in far too many words. ".repeat(400);
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": long})).await;
    let (code, text, _) = cli(root, &["hook", "claude-session-start"], "");
    assert_eq!(code, 0);
    assert!(text.chars().count() < 10_000, "{} characters", text.chars().count());
    assert!(text.contains("phase READY") && text.contains("QUERY_FRAME: the frame of this request"), "{text}");
    assert!(text.contains("get_session_status returns them whole"), "{text}");
    client.cancel().await.unwrap();
}

/// check_write_target is needed for every task: one call for the first task does not carry over
/// to the second (the record of served tools follows the task, as the engine's does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_write_target_is_needed_per_task() {
    let repo = repo();
    let root = repo.path();
    let client = connect(root).await;
    start(&client, "MODIFY", json!({"quick": true})).await;
    front(&client).await;
    let item = |n: &str| json!([{"item": format!("{n} in auth.py"), "status": "pending"}]);
    submit(
        &client,
        json!({"tasks": [{"id": "t1", "description": "first", "status": "pending", "checklist": item("first")},
                         {"id": "t2", "description": "second", "status": "pending", "checklist": item("second")}],
               "tools_used": [], "summary": "two tasks"}),
    )
    .await;
    // Explored means shown: the file is looked at first.
    ok(&client, "get_symbols", json!({"path": "src/auth.py"})).await;
    ok(&client, "add_explored_files", json!({"files": ["src/auth.py"]})).await;
    ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let (a, b) = implement_refresh(root);
    let done = |id: &str, n: &str| {
        json!({"task_id": id, "checklist": [{"item": format!("{n} in auth.py"), "status": "done", "evidence": format!("src/auth.py:{a}-{b}")}],
               "tools_used": ["check_write_target"], "summary": format!("{n} done")})
    };
    let r = submit(&client, done("t1", "first")).await;
    assert_eq!(r["task_progress"]["next_task"]["id"], "t2", "{r}");
    let r = reject(&client, done("t2", "second"), "payload_mismatch").await;
    assert!(r["message"].as_str().unwrap().contains("check_write_target"), "{r}");
    ok(&client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let r = submit(&client, done("t2", "second")).await;
    assert_eq!(r["all_complete"], true, "{r}");
    fsck_clean(root);
    client.cancel().await.unwrap();
}
