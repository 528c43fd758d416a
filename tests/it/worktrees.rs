//! Parallel agents, one per work tree: two `git worktree`s of one repository (on `main` and on
//! `feature`), a server in each at the same time, each session driven to MERGE in interleaved
//! order. Each merges into its own base, both reach the one shared history, the hooks in each
//! work tree judge by that work tree's session, and `clean` in one leaves the other alone.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common::mcp_client::{BIN, Client, connect, err, ok, submit};
use crate::common::{fsck_clean, git};

/// The hook's verdict on writing `file` in the work tree at `root`: its exit code.
fn hook(root: &Path, file: &str) -> i32 {
    let input = json!({"tool_name": "Edit", "tool_input": {"file_path": root.join(file)}, "cwd": root}).to_string();
    crate::common::run_cli(root, &["hook", "claude-pre-tool-use"], &input).0
}

/// One work tree with its server and the function its session adds.
struct Tree {
    root: PathBuf,
    client: Client,
    function: &'static str,
    base: &'static str,
}

/// Starts a MODIFY session that adds `function` to src/auth.py; leaves it in QUERY_FRAME.
async fn start(t: &Tree) -> Value {
    ok(
        &t.client,
        "start_session",
        json!({"intent": "MODIFY", "query": format!("add {}", t.function), "no_doc_research": true, "no_verify": true}),
    )
    .await
}

/// From QUERY_FRAME to READY's plan: the task branch is made here.
async fn plan(t: &Tree) -> Value {
    submit(&t.client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    ok(&t.client, "find_definitions", json!({"symbol": "login"})).await;
    ok(&t.client, "search_text", json!({"pattern": "Session"})).await;
    submit(
        &t.client,
        json!({"explored_files": ["src/auth.py"], "findings": ["login in src/auth.py"],
               "tools_used": ["find_definitions", "search_text"], "summary": "explored"}),
    )
    .await;
    for (field, reason) in [
        ("needs_more_information", "enough found"),
        ("has_unverified_hypotheses", "all verified"),
        ("needs_impact_analysis", "one function only"),
    ] {
        submit(&t.client, json!({field: false, "reason": reason, "tools_used": [], "summary": "gate"})).await;
    }
    let item = format!("{} in auth.py", t.function);
    submit(
        &t.client,
        json!({"tasks": [{"id": "t1", "description": format!("add {}", t.function), "status": "pending",
               "checklist": [{"item": item, "status": "pending"}]}], "tools_used": [], "summary": "plan"}),
    )
    .await
}

/// Writes the function and completes the task: on to PRE_COMMIT.
async fn implement(t: &Tree) -> Value {
    ok(&t.client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let path = t.root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 3;
    text.push_str(&format!("\n\ndef {}(session):\n    session.touched = True\n    return session\n", t.function));
    std::fs::write(&path, text).unwrap();
    let item = format!("{} in auth.py", t.function);
    submit(&t.client, json!({"task_id": "t1", "checklist": [{"item": item, "status": "done",
        "evidence": format!("src/auth.py:{start}-{}", start + 2)}], "tools_used": ["check_write_target"], "summary": "added"}))
    .await;
    submit(&t.client, json!({"summary": "all done"})).await
}

/// PRE_COMMIT: the review and the commit.
async fn pre_commit(t: &Tree) -> Value {
    ok(&t.client, "review_changes", json!({})).await;
    submit(
        &t.client,
        json!({"review_prompt_used": "garbage_detection.md", "commit_message": format!("Add {}()", t.function),
               "reviewed_files": [{"file": "src/auth.py", "decision": "keep"}], "tools_used": ["review_changes"],
               "summary": "reviewed"}),
    )
    .await
}

/// PRE_COMMIT and QUALITY_REVIEW: on to MERGE.
async fn commit(t: &Tree) -> Value {
    pre_commit(t).await;
    submit(
        &t.client,
        json!({"quality_prompt_used": "quality_review.md", "quality_score": "9/10", "issues": [], "tools_used": [],
               "summary": "fine"}),
    )
    .await
}

/// Two work trees of a new repository, on `main` and `feature`, each with its server.
async fn two_trees() -> (tempfile::TempDir, tempfile::TempDir, Tree, Tree) {
    let repo = crate::common::committed_project();
    let main_root = repo.path().to_path_buf();
    git(&main_root, &["branch", "feature"]);
    let other = tempfile::tempdir().unwrap();
    let feature_root = other.path().join("feature-wt");
    git(&main_root, &["worktree", "add", "-q", feature_root.to_str().unwrap(), "feature"]);
    let (a, b) = tokio::join!(connect(&main_root), connect(&feature_root));
    let a = Tree { root: main_root, client: a, function: "sign_out_everywhere", base: "main" };
    let b = Tree { root: feature_root, client: b, function: "touch_feature_session", base: "feature" };
    (repo, other, a, b)
}

/// The repository's own pre-commit hook, run by the server before its commit, takes as long as
/// it likes in one work tree (here: until the test says so): the other work tree's agent
/// commits meanwhile. The hook runs without the operation lock every work tree waits on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_pre_commit_hook_in_one_work_tree_holds_up_no_other() {
    let (_repo, _other, a, b) = two_trees().await;
    let (started, release) = (b.root.join("hook-started"), b.root.join("hook-release"));
    let hook = a.root.join(".git/hooks/pre-commit");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\nif [ \"$(pwd)\" = \"{}\" ]; then\n  touch {}\n  while [ ! -e {} ]; do sleep 0.05; done\nfi\nexit 0\n",
            b.root.display(),
            started.display(),
            release.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for t in [&a, &b] {
        start(t).await;
        plan(t).await;
        implement(t).await;
    }
    let b_commit = tokio::spawn(async move {
        let r = pre_commit(&b).await;
        (b, r)
    });
    while !started.exists() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let a_done = tokio::time::timeout(std::time::Duration::from_secs(60), pre_commit(&a)).await;
    let a_done = a_done.expect("a's commit waited for b's hook");
    assert_eq!(a_done["phase"], "QUALITY_REVIEW", "{a_done}");
    assert!(!b_commit.is_finished(), "b's hook is still running");
    std::fs::write(&release, "").unwrap();
    let (b, b_done) = b_commit.await.unwrap();
    assert_eq!(b_done["phase"], "QUALITY_REVIEW", "{b_done}");
    for t in [&a, &b] {
        assert_eq!(git(&t.root, &["log", "-1", "--format=%s"]), format!("Add {}()", t.function));
    }
    fsck_clean(&a.root);
    a.client.cancel().await.unwrap();
    b.client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_in_two_work_trees_each_finish_their_own_session() {
    let (_repo, other, a, b) = two_trees().await;
    let main_root = a.root.clone();

    // a starts and makes its task branch; b starts after: it neither sees a's session (to
    // recover) nor takes a's task branch for a stale one.
    let sa = start(&a).await;
    let ida = sa["session_id"].as_str().unwrap().to_owned();
    assert_eq!(sa["phase"], "QUERY_FRAME", "{sa}");
    let pa = plan(&a).await;
    let branch_a = pa["task_branch"].as_str().unwrap_or_else(|| panic!("{pa}")).to_owned();
    assert!(branch_a.ends_with("_from_main"), "{pa}");
    let sb = start(&b).await;
    let idb = sb["session_id"].as_str().unwrap().to_owned();
    assert_ne!(ida, idb);
    assert_eq!(sb["phase"], "QUERY_FRAME", "a's live task branch is not stale here: {sb}");
    assert!(sb.get("stale_branches").is_none_or(Value::is_null), "{sb}");
    for (t, id) in [(&a, &ida), (&b, &idb)] {
        let status = ok(&t.client, "get_session_status", json!({})).await;
        assert_eq!(status["session_id"], json!(id));
        let cli = crate::common::run_cli(&t.root, &["--json", "status"], "");
        let cli: Value = serde_json::from_str(&cli.1).unwrap();
        assert_eq!(cli["session_id"], json!(id), "`status` in {}", t.root.display());
    }
    let pb = plan(&b).await;
    let branch_b = pb["task_branch"].as_str().unwrap_or_else(|| panic!("{pb}")).to_owned();
    assert!(branch_b.ends_with("_from_feature"), "{pb}");
    assert_eq!(git(&a.root, &["symbolic-ref", "--short", "HEAD"]), branch_a);
    assert_eq!(git(&b.root, &["symbolic-ref", "--short", "HEAD"]), branch_b);
    // `clean` of stale branches in b leaves a's live task branch alone, and says why.
    let cleaned = ok(&b.client, "cleanup_stale_branches", json!({"action": "delete", "confirm": true})).await;
    assert_eq!(cleaned["deleted"], json!([]), "{cleaned}");
    assert!(cleaned["kept"][0]["reason"].as_str().unwrap().contains("checked out in the work tree at"), "{cleaned}");
    assert_eq!(git(&a.root, &["rev-parse", "--verify", "-q", &branch_a]).len(), 40);

    // The hooks judge by each work tree's own session: READY allows an explored file here.
    assert_eq!(hook(&a.root, "src/auth.py"), 0);
    assert_eq!(hook(&b.root, "src/auth.py"), 0);
    assert_eq!(hook(&b.root, "README.md"), 2, "not explored in b's session");

    implement(&b).await;
    implement(&a).await;
    // a is past READY: writes are blocked there, and still allowed in b (in PRE_COMMIT? no:
    // b is in PRE_COMMIT too); b's hook reads b's session, whatever a's phase.
    assert_eq!(hook(&a.root, "src/auth.py"), 2);
    let ma = commit(&a).await;
    assert_eq!(ma["phase"], "MERGE", "{ma}");
    let mb = commit(&b).await;
    assert_eq!(mb["phase"], "MERGE", "{mb}");
    // b's base is checked out in a third work tree meanwhile: the merge says so and changes
    // nothing; once that work tree leaves it, the merge goes through.
    let third = other.path().join("third-wt");
    git(&main_root, &["worktree", "add", "-q", third.to_str().unwrap(), "feature"]);
    let refused = err(&b.client, "submit_phase", json!({"data": {"summary": "merge it"}})).await;
    assert_eq!(refused["error"], "merge_failed", "{refused}");
    assert!(refused["details"].as_str().unwrap().contains("is checked out in the work tree at"), "{refused}");
    assert_eq!(git(&b.root, &["symbolic-ref", "--short", "HEAD"]), branch_b, "nothing moved");
    git(&main_root, &["worktree", "remove", "--force", third.to_str().unwrap()]);
    let done_b = submit(&b.client, json!({"summary": "merge it"})).await;
    assert_eq!(done_b["phase"], "SESSION_COMPLETE", "{done_b}");
    // a's session is still there after b merged.
    assert_eq!(ok(&a.client, "get_session_status", json!({})).await["phase"], "MERGE");
    let done_a = submit(&a.client, json!({"summary": "merge it"})).await;
    assert_eq!(done_a["phase"], "SESSION_COMPLETE", "{done_a}");

    for t in [&a, &b] {
        assert_eq!(git(&t.root, &["symbolic-ref", "--short", "HEAD"]), t.base);
        assert_eq!(git(&t.root, &["log", "-1", "--format=%s", t.base]), format!("Add {}()", t.function));
    }
    let graph = git(&a.root, &["log", "--graph", "--all", "--format=%h %s %d", "--stat"]);
    assert!(
        !git(&a.root, &["show", "main:src/auth.py"]).contains("def touch_feature_session"),
        "b's work stayed on feature: {graph}"
    );
    assert!(
        !git(&a.root, &["show", "feature:src/auth.py"]).contains("def sign_out_everywhere"),
        "a's work stayed on main"
    );
    let history = git(&a.root, &["log", "--format=%s", "refs/code-intel/history"]);
    for id in [&ida, &idb] {
        assert!(history.contains(&format!("completed session {id}")), "{history}");
    }

    // `clean` in one work tree leaves the other's session alone.
    start(&a).await;
    start(&b).await;
    let (code, out, _) = crate::common::run_cli(&a.root, &["clean"], "");
    assert_eq!(code, 0, "{out}");
    assert_eq!(ok(&a.client, "get_session_status", json!({})).await["active"], false);
    assert_eq!(ok(&b.client, "get_session_status", json!({})).await["phase"], "QUERY_FRAME");
    let r = err(&a.client, "submit_phase", json!({"data": {"summary": "x"}})).await;
    assert_eq!(r["error"], "no_active_session", "{r}");
    fsck_clean(&a.root);
    let _ = BIN;
    a.client.cancel().await.unwrap();
    b.client.cancel().await.unwrap();
}

/// A work tree inside the checkout (as Claude Code makes them, under `.claude/worktrees/`, or
/// `git worktree add wt` at the root) is another repository: the main checkout's session never
/// lists, commits or discards its files, and paths into it are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_tree_nested_in_the_checkout_is_not_part_of_it() {
    let repo = crate::common::committed_project();
    let root = repo.path().to_path_buf();
    git(&root, &["branch", "feature"]);
    git(&root, &["worktree", "add", "-q", "wt", "feature"]);
    // The nested tree's agent at work: a change and a new file.
    std::fs::write(root.join("wt/docs/auth.md"), "# Auth\n\nThe other agent's draft.\n").unwrap();
    std::fs::write(root.join("wt/new_feature.py"), "def new_feature():\n    return 1\n").unwrap();
    let client = connect(&root).await;
    let a = Tree { root: root.clone(), client, function: "sign_out_everywhere", base: "main" };
    start(&a).await;
    plan(&a).await;
    let refused = err(&a.client, "check_write_target", json!({"file_path": "wt/new_feature.py"})).await;
    assert!(refused["message"].as_str().unwrap_or_default().contains("outside"), "{refused}");
    let found = ok(&a.client, "search_files", json!({"pattern": "**/new_feature.py"})).await;
    assert_eq!(found["files"], json!([]), "{found}");
    implement(&a).await;
    let review = ok(&a.client, "review_changes", json!({})).await;
    let files: Vec<&str> = review["files"].as_array().unwrap().iter().filter_map(|f| f["file"].as_str()).collect();
    assert_eq!(files, ["src/auth.py"], "{review}");
    let merged = commit(&a).await;
    assert_eq!(merged["phase"], "MERGE", "{merged}");
    assert!(!git(&root, &["show", "--stat", "--format=", "HEAD"]).contains("wt/"));
    assert_eq!(std::fs::read_to_string(root.join("wt/new_feature.py")).unwrap(), "def new_feature():\n    return 1\n");
    assert_eq!(std::fs::read_to_string(root.join("wt/docs/auth.md")).unwrap(), "# Auth\n\nThe other agent's draft.\n");
    a.client.cancel().await.unwrap();
}

/// The other work tree's agent left its task branch for a moment (a detached HEAD, as a rebase
/// or a bisect leaves it): its session still names the branch, so a cleanup here keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_branch_its_session_still_names_is_kept_while_head_is_elsewhere() {
    let (_repo, _other, a, b) = two_trees().await;
    start(&b).await;
    let planned = plan(&b).await;
    let branch_b = planned["task_branch"].as_str().unwrap().to_owned();
    git(&b.root, &["checkout", "-q", "--detach"]);
    let (code, out, err_text) = crate::common::run_cli(&a.root, &["--json", "clean", "--confirm"], "");
    assert_eq!(code, 0, "{out}{err_text}");
    let cleaned: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(cleaned["deleted_branches"], json!([]), "{cleaned}");
    let kept = cleaned["kept_branches"].to_string();
    assert!(kept.contains(&branch_b) && kept.contains("the task branch of the session"), "{kept}");
    assert_eq!(git(&a.root, &["rev-parse", "--verify", "-q", &branch_b]).len(), 40);
    a.client.cancel().await.unwrap();
    b.client.cancel().await.unwrap();
}
