//! Task branches through the real server: the default flow through PRE_COMMIT and MERGE, with
//! the result checked by the git CLI (status, log, notes, fsck).

use crate::common::git;

use std::path::Path;

use crate::common::mcp_client::{Client, call, connect, err, ok, structured, submit};
use serde_json::{Value, json};

fn repo(branch: &str) -> tempfile::TempDir {
    let dir = crate::common::fixture_repo("project");
    git(dir.path(), &["checkout", "-q", "-b", branch]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "initial"]);
    dir
}

fn fsck(root: &Path) {
    git(root, &["fsck", "--full", "--strict"]);
}

/// Commits `content` to `file` on `branch` without touching the index or the work tree (as a
/// teammate's push would move the base).
fn commit_on(root: &Path, branch: &str, file: &str, content: &str) {
    let blob = crate::common::git_with_input(root, &["hash-object", "-w", "--stdin"], content.as_bytes());
    let parent = git(root, &["rev-parse", branch]);
    let tmp_index = root.join(".git/tmp-index");
    let env = [("GIT_INDEX_FILE", tmp_index.to_str().unwrap())];
    run_env(root, &["read-tree", &parent], &env);
    run_env(root, &["update-index", "--add", "--cacheinfo", &format!("100644,{blob},{file}")], &env);
    let tree = run_env(root, &["write-tree"], &env);
    let commit = git(root, &["commit-tree", &tree, "-p", &parent, "-m", &format!("teammate changes {file}")]);
    git(root, &["update-ref", &format!("refs/heads/{branch}"), &commit]);
    crate::common::remove_if_present(tmp_index);
}

fn run_env(root: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// From start to PRE_COMMIT: one task that appends a function to src/auth.py, plus a junk file.
async fn to_pre_commit(client: &Client, root: &Path) {
    submit_start(client).await;
    submit(client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    ok(client, "find_definitions", json!({"symbol": "login"})).await;
    ok(client, "search_text", json!({"pattern": "Session"})).await;
    submit(
        client,
        json!({"explored_files": ["src/auth.py"], "findings": ["login in src/auth.py"],
                          "tools_used": ["find_definitions", "search_text"], "summary": "explored"}),
    )
    .await;
    for (field, reason) in [
        ("needs_more_information", "enough found"),
        ("has_unverified_hypotheses", "all verified"),
        ("needs_impact_analysis", "one function only"),
    ] {
        submit(client, json!({field: false, "reason": reason, "tools_used": [], "summary": "gate"})).await;
    }
    let r = submit(
        client,
        json!({"tasks": [{"id": "t1", "description": "add logout", "status": "pending",
        "checklist": [{"item": "logout in auth.py", "status": "pending"}]}], "tools_used": [], "summary": "plan"}),
    )
    .await;
    assert!(r["task_branch"].as_str().unwrap().starts_with("llm_task_"), "{r}");
    let early = err(client, "review_changes", json!({})).await;
    assert_eq!(early["message"], "review_changes is served in PRE_COMMIT and QUALITY_REVIEW only, current: READY.");
    ok(client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 3;
    text.push_str("\n\ndef logout(session):\n    session.user = None\n    return True\n");
    std::fs::write(&path, text).unwrap();
    std::fs::write(root.join("src/debug_dump.txt"), "scratch output\n").unwrap();
    submit(client, json!({"task_id": "t1", "checklist": [{"item": "logout in auth.py", "status": "done",
        "evidence": format!("src/auth.py:{start}-{}", start + 2)}], "tools_used": ["check_write_target"], "summary": "logout added"})).await;
    let verify = submit(client, json!({"summary": "all done"})).await;
    // The fixture never ran `git code-intel init`: the verifiers the instruction points at come
    // with the answer, as init would have written them.
    assert_eq!(verify["phase"], "POST_IMPL_VERIFY");
    assert_eq!(procedure_paths(&verify), [".code-intel/verifiers/tests.md", ".code-intel/verifiers/build_and_lint.md"]);
    crate::common::mcp_client::witness_tests(client).await;
    let r = submit(
        client,
        json!({"verifier_used": "tests.md", "passed": true, "details": "ok", "tools_used": [], "summary": "verified"}),
    )
    .await;
    assert_eq!(r["phase"], "PRE_COMMIT");
    assert_eq!(procedure_paths(&r), [".code-intel/review_prompts/garbage_detection.md"]);
    assert_eq!(
        r["procedures"]["files"][0]["text"],
        include_str!("../../templates/init/review_prompts/garbage_detection.md"),
        "init's own text"
    );
    assert!(r["procedures"]["note"].as_str().unwrap().contains("git code-intel init"), "{r}");
}

/// The paths of the default procedures an answer carries.
fn procedure_paths(answer: &Value) -> Vec<String> {
    answer["procedures"]["files"]
        .as_array()
        .map(|files| files.iter().filter_map(|f| f["path"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

async fn submit_start(client: &Client) {
    ok(client, "start_session", json!({"intent": "MODIFY", "query": "add logout", "no_doc_research": true})).await;
}

/// The files a review_changes answer lists as the task's (not the user's own earlier changes).
fn task_files(review: &Value) -> Vec<&str> {
    let files = review["files"].as_array().unwrap().iter();
    files.filter(|f| f["pre_existing"] == json!(false)).map(|f| f["file"].as_str().unwrap()).collect()
}

async fn commit_and_review(client: &Client) {
    let review = ok(client, "review_changes", json!({})).await;
    let mine = task_files(&review);
    assert_eq!(mine, vec!["src/auth.py", "src/debug_dump.txt"], "{review}");
    let auth = review["files"].as_array().unwrap().iter().find(|f| f["file"] == "src/auth.py").unwrap();
    assert_eq!(
        (auth["change"].as_str(), auth["additions"].as_u64(), auth["deletions"].as_u64()),
        (Some("modified"), Some(5), Some(0))
    );
    assert!(auth["diff"].as_str().unwrap().contains("+def logout(session):"));
    let dump = review["files"].as_array().unwrap().iter().find(|f| f["file"] == "src/debug_dump.txt").unwrap();
    assert_eq!(dump["change"], "added");
    assert_eq!(review["garbage"], json!([]), "the same checks as the pre-commit hook, and nothing found");
    submit(
        client,
        json!({"review_prompt_used": "garbage_detection.md", "commit_message": "Add logout()",
        "reviewed_files": [{"file": "src/auth.py", "decision": "keep"},
                           {"file": "src/debug_dump.txt", "decision": "discard", "reason": "scratch output"}],
        "tools_used": ["review_changes"], "summary": "reviewed"}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_flow_through_merge_fast_forward() {
    let repo = repo("main");
    let root = repo.path();
    // The user's uncommitted work from before the session: it must survive every step.
    std::fs::write(root.join("docs/auth.md"), "# Auth\n\nUser's draft, not committed.\n").unwrap();
    std::fs::write(root.join("scratch.txt"), "user's own notes\n").unwrap();
    let user_status = "M docs/auth.md\n?? scratch.txt";
    let client = connect(root).await;
    to_pre_commit(&client, root).await;
    let branch = git(root, &["symbolic-ref", "--short", "HEAD"]);
    assert!(branch.ends_with("_from_main"), "{branch}");
    let status =
        std::process::Command::new(crate::common::mcp_client::BIN).arg("status").current_dir(root).output().unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains(&format!("branch       {branch} (from main)")), "{status}");
    let cli = std::process::Command::new(crate::common::mcp_client::BIN)
        .args(["--json", "review-changes"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let review: Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert!(review["files"].as_array().unwrap().iter().any(|f| f["file"] == "src/auth.py"), "{review}");
    // The user's own change is listed with its counts, without a diff to review.
    let draft = review["files"].as_array().unwrap().iter().find(|f| f["file"] == "docs/auth.md").expect("listed");
    assert_eq!((draft["pre_existing"].as_bool(), draft["diff"].as_str()), (Some(true), Some("")), "{draft}");
    assert!(draft["additions"].as_u64().unwrap_or(0) > 0, "{draft}");
    commit_and_review(&client).await;
    // Committed on the task branch; the discarded new file is gone and never committed.
    assert_eq!(git(root, &["log", "-1", "--format=%s", &branch]), "Add logout()");
    assert!(!root.join("src/debug_dump.txt").exists());
    assert!(!git(root, &["log", "--all", "--format=", "--name-only"]).contains("debug_dump"));
    assert_eq!(git(root, &["status", "--porcelain"]), user_status, "only the user's own work is uncommitted");
    assert!(!git(root, &["show", "--stat", "--format=", &branch]).contains("docs/auth.md"));
    // QUALITY_REVIEW reads the whole change once more: the commit PRE_COMMIT made, and a fix
    // made during the review, with the discarded file gone.
    let quality = ok(&client, "get_session_status", json!({})).await;
    assert_eq!(quality["phase"], "QUALITY_REVIEW");
    assert_eq!(procedure_paths(&quality), [".code-intel/review_prompts/quality_review.md"]);
    assert!(quality["procedures"]["files"][0]["text"].as_str().unwrap().contains("review_changes"));
    // After a compaction the SessionStart hook repeats the instruction: it says where the
    // missing checklist's text is.
    let (code, hook, _) = crate::common::run_cli(
        root,
        &["hook", "claude-session-start"],
        r#"{"hook_event_name":"SessionStart","source":"compact"}"#,
    );
    assert_eq!(code, 0);
    assert!(
        hook.contains("This repository has no .code-intel/review_prompts/quality_review.md: get_session_status gives the default text"),
        "{hook}"
    );
    let mut auth = std::fs::read_to_string(root.join("src/auth.py")).unwrap();
    auth.push_str("\n# reviewed\n");
    std::fs::write(root.join("src/auth.py"), &auth).unwrap();
    let again = ok(&client, "review_changes", json!({})).await;
    let mine = task_files(&again);
    assert_eq!(mine, vec!["src/auth.py"], "{again}");
    let auth = again["files"].as_array().unwrap().iter().find(|f| f["file"] == "src/auth.py").unwrap();
    let diff = auth["diff"].as_str().unwrap();
    assert!(diff.contains("+def logout(session):") && diff.contains("+# reviewed"), "{again}");
    let r = submit(
        &client,
        json!({"quality_prompt_used": "quality_review.md", "quality_score": "9/10", "issues": [],
                                   "tools_used": ["review_changes"], "summary": "fine"}),
    )
    .await;
    assert_eq!(r["phase"], "MERGE");
    assert_eq!(git(root, &["log", "-1", "--format=%s", &branch]), "Quality review fixes", "the fix is committed");
    let merge_review = call(&client, "review_changes", json!({})).await;
    assert_eq!(structured(&merge_review)["error"], "phase_blocked", "not in MERGE");
    let r = submit(&client, json!({"summary": "merge it"})).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE");
    assert_eq!(r["message"], format!("Merged {branch} → main. Session complete."));
    assert!(r.get("task_branch").is_none(), "the merged branch is deleted, so it is not named: {r}");
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(git(root, &["log", "-1", "--format=%s"]), "Quality review fixes", "fast-forward: no merge commit");
    assert_eq!(git(root, &["branch", "--list", "llm_task_*"]), "", "the task branch is deleted");
    assert_eq!(git(root, &["status", "--porcelain"]), user_status);
    assert_eq!(std::fs::read_to_string(root.join("docs/auth.md")).unwrap(), "# Auth\n\nUser's draft, not committed.\n");
    let note = git(root, &["notes", "--ref=code-intel", "show", "HEAD"]);
    assert!(note.contains("add logout") && note.contains("step_05_EXPLORATION"), "{note}");
    fsck(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diverged_base_gets_a_three_way_merge_back_into_feature_x() {
    let repo = repo("feature/x");
    let root = repo.path();
    std::fs::write(root.join("scratch.txt"), "user's own notes\n").unwrap();
    let client = connect(root).await;
    to_pre_commit(&client, root).await;
    commit_and_review(&client).await;
    submit(&client, json!({"quality_prompt_used": "q.md", "quality_score": "ok", "issues": [], "tools_used": [], "summary": "fine"})).await;
    commit_on(root, "feature/x", "docs/auth.md", "# Auth\n\nUpdated by a teammate.\n");
    let r = submit(&client, json!({"summary": "merge it"})).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE", "{r}");
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "feature/x");
    let parents = git(root, &["log", "-1", "--format=%P"]);
    assert_eq!(parents.split_whitespace().count(), 2, "a real merge commit");
    assert!(std::fs::read_to_string(root.join("docs/auth.md")).unwrap().contains("teammate"));
    assert!(std::fs::read_to_string(root.join("src/auth.py")).unwrap().contains("def logout"));
    assert_eq!(git(root, &["status", "--porcelain"]), "?? scratch.txt", "only the user's untracked file");
    // The CLI view of the last review is gone with the session; the notes stay.
    assert!(git(root, &["notes", "--ref=code-intel", "list"]).lines().count() == 1);
    assert!(git(root, &["log", "--graph", "--oneline"]).contains("Merge llm_task_"));
    assert_eq!(git(root, &["branch", "--list", "main"]), "", "nothing merged into a guessed main");
    fsck(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicted_merge_leaves_everything_untouched() {
    let repo = repo("main");
    let root = repo.path();
    let client = connect(root).await;
    to_pre_commit(&client, root).await;
    commit_and_review(&client).await;
    submit(&client, json!({"quality_prompt_used": "q.md", "quality_score": "ok", "issues": [], "tools_used": [], "summary": "fine"})).await;
    let mut theirs = git(root, &["show", "main:src/auth.py"]);
    theirs.push_str("\n\ndef logout(session):\n    raise RuntimeError('no')\n");
    commit_on(root, "main", "src/auth.py", &theirs);
    let cli = std::process::Command::new(crate::common::mcp_client::BIN)
        .arg("review-changes")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(!cli.status.success(), "review-changes is for PRE_COMMIT and QUALITY_REVIEW only");
    assert!(String::from_utf8_lossy(&cli.stderr).contains("phase_blocked"));
    let refs_before = git(root, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/"]);
    let head_before = git(root, &["symbolic-ref", "HEAD"]);
    let file_before = std::fs::read_to_string(root.join("src/auth.py")).unwrap();
    let r = call(&client, "submit_phase", json!({"data": {"summary": "merge it"}})).await;
    assert_eq!(r.is_error, Some(true));
    let e = structured(&r);
    assert_eq!(e["error"], "merge_failed", "{e}");
    assert!(e["details"].as_str().unwrap().contains("src/auth.py"), "{e}");
    assert_eq!(git(root, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/"]), refs_before);
    assert_eq!(git(root, &["symbolic-ref", "HEAD"]), head_before);
    assert_eq!(std::fs::read_to_string(root.join("src/auth.py")).unwrap(), file_before);
    assert_eq!(git(root, &["status", "--porcelain"]), "");
    assert_eq!(ok(&client, "get_session_status", json!({})).await["phase"], "MERGE", "still in MERGE, can retry");
    fsck(root);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_changes_is_only_for_pre_commit_and_quality_review() {
    let repo = repo("main");
    let root = repo.path();
    let client = connect(root).await;
    submit_start(&client).await;
    let r = call(&client, "review_changes", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    let e = structured(&r);
    assert_eq!(e["error"], "phase_blocked");
    assert_eq!(e["message"], "review_changes is served in PRE_COMMIT and QUALITY_REVIEW only, current: QUERY_FRAME.");
    client.cancel().await.unwrap();
}

/// A leftover task branch from an earlier session, one commit ahead of main, with HEAD on it
/// when `checked_out`.
fn stale_branch(root: &Path, checked_out: bool) -> String {
    let name = "llm_task_20260101_000000_deadbeef_from_main".to_owned();
    git(root, &["checkout", "-q", "-b", &name]);
    std::fs::write(root.join("src/old_work.py"), "def old_work():\n    return 42\n").unwrap();
    git(root, &["add", "src/old_work.py"]);
    git(root, &["commit", "-q", "-m", "old session work"]);
    if !checked_out {
        git(root, &["checkout", "-q", "main"]);
    }
    name
}

async fn start_listing(client: &Client) -> Value {
    let r =
        ok(client, "start_session", json!({"intent": "MODIFY", "query": "add logout", "no_doc_research": true})).await;
    assert_eq!(r["phase"], "BRANCH_INTERVENTION");
    assert_eq!(r["stale_branches"][0]["base"], "main");
    assert_eq!(r["stale_branches"][0]["ahead"], 1);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_branch_delete_merge_and_continue() {
    // delete: HEAD back on its base; a branch with nothing of its own is gone, one with a
    // commit of its own is kept (only the user deletes work), and the answer says so.
    let repo = repo("main");
    let root = repo.path();
    let name = stale_branch(root, true);
    let empty = "llm_task_20260102_000000_cafebabe_from_main";
    git(root, &["branch", empty, "main"]);
    let client = connect(root).await;
    start_listing(&client).await;
    let r = submit(&client, json!({"choice": "delete", "tools_used": [], "summary": "user chose delete"})).await;
    assert_eq!(git(root, &["branch", "--list", "--format=%(refname:short)", "llm_task_*"]), name);
    assert_eq!(git(root, &["show", &format!("{name}:src/old_work.py")]).trim_end(), "def old_work():\n    return 42");
    let notes = r["notes"].to_string();
    assert!(notes.contains(&name) && notes.contains("git code-intel clean --confirm"), "{r}");
    assert!(!notes.contains(empty), "{r}");
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert!(!root.join("src/old_work.py").exists(), "the work tree follows HEAD back to main");
    assert_eq!(git(root, &["status", "--porcelain"]), "");
    fsck(root);
    client.cancel().await.unwrap();

    // merge: the current task branch goes into its recorded base; another with nothing of its
    // own is deleted, one with work of its own kept.
    let repo = repo_with_stale(true);
    let root = repo.path();
    let other = "llm_task_20260103_000000_0badf00d_from_main";
    let own_work = git(root, &["commit-tree", "main^{tree}", "-p", "main", "-m", "other work"]);
    git(root, &["branch", other, own_work.trim()]);
    git(root, &["branch", empty, "main"]);
    let client = connect(root).await;
    let r =
        ok(&client, "start_session", json!({"intent": "MODIFY", "query": "add logout", "no_doc_research": true})).await;
    assert_eq!(r["phase"], "BRANCH_INTERVENTION");
    let r = submit(&client, json!({"choice": "merge", "tools_used": [], "summary": "user chose merge"})).await;
    assert_eq!(git(root, &["symbolic-ref", "--short", "HEAD"]), "main");
    assert_eq!(git(root, &["log", "-1", "--format=%s", "main"]), "old session work");
    assert_eq!(git(root, &["branch", "--list", "--format=%(refname:short)", "llm_task_*"]), other);
    assert!(r["notes"].to_string().contains(other), "{r}");
    git(root, &["branch", "-D", other]);
    assert!(root.join("src/old_work.py").exists());
    fsck(root);
    client.cancel().await.unwrap();

    // continue: the session keeps working on the current task branch and merges it in the end.
    let repo = repo_with_stale(true);
    let root = repo.path();
    let client = connect(root).await;
    start_listing(&client).await;
    submit(&client, json!({"choice": "continue", "tools_used": [], "summary": "keep the branch"})).await;
    submit(&client, json!({"action_type": "modify", "tools_used": [], "summary": "frame"})).await;
    ok(&client, "find_definitions", json!({"symbol": "login"})).await;
    ok(&client, "search_text", json!({"pattern": "Session"})).await;
    submit(&client, json!({"explored_files": ["src/auth.py"], "findings": ["f"], "tools_used": ["find_definitions", "search_text"], "summary": "e"})).await;
    for field in ["needs_more_information", "has_unverified_hypotheses", "needs_impact_analysis"] {
        submit(&client, json!({field: false, "reason": "nothing more is needed", "tools_used": [], "summary": "g"}))
            .await;
    }
    let r = submit(
        &client,
        json!({"tasks": [{"id": "t", "description": "d", "status": "pending",
        "checklist": [{"item": "i", "status": "pending"}]}], "tools_used": [], "summary": "plan"}),
    )
    .await;
    assert_eq!(r["task_branch"], name, "no new branch: the current one is adopted");
    assert_eq!(git(root, &["branch", "--list", "llm_task_*"]).lines().count(), 1);
    fsck(root);
    client.cancel().await.unwrap();
}

fn repo_with_stale(checked_out: bool) -> tempfile::TempDir {
    let dir = repo("main");
    stale_branch(dir.path(), checked_out);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_keeps_unmerged_work_until_the_user_confirms_in_the_cli() {
    let repo = repo_with_stale(false);
    let root = repo.path();
    git(root, &["branch", "llm_task_20260102_000000_cafebabe_from_main", "main"]);
    let client = connect(root).await;
    let r = ok(&client, "cleanup_stale_branches", json!({"action": "delete"})).await;
    assert_eq!(r["deleted"], json!(["llm_task_20260102_000000_cafebabe_from_main"]), "merged (nothing ahead): deleted");
    assert_eq!(r["kept"][0]["branch"], "llm_task_20260101_000000_deadbeef_from_main");
    assert!(r["kept"][0]["reason"].as_str().unwrap().contains("git code-intel clean --confirm"), "{r}");
    assert_eq!(git(root, &["branch", "--list", "llm_task_*"]).lines().count(), 1);
    // The agent's word is not the user's: confirm: true from the agent deletes nothing.
    let r = ok(&client, "cleanup_stale_branches", json!({"action": "delete", "confirm": true})).await;
    assert_eq!(r["deleted"], json!([]), "{r}");
    assert_eq!(git(root, &["branch", "--list", "llm_task_*"]).lines().count(), 1);
    let (code, out, err) = crate::common::run_cli(root, &["--json", "clean", "--confirm"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(git(root, &["branch", "--list", "llm_task_*"]), "");
    let r = call(&client, "cleanup_stale_branches", json!({"action": "rebase"})).await;
    assert_eq!(r.is_error, Some(true));
    fsck(root);
    client.cancel().await.unwrap();
}

/// A garbage finding in PRE_COMMIT is no dead end: the refusal says how to go on, and `fix`
/// sends the session back to READY planning, where the file can be written again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_finding_goes_back_to_ready_to_fix() {
    let repo = repo("main");
    let root = repo.path();
    let client = connect(root).await;
    to_pre_commit(&client, root).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("    print(session)\n");
    std::fs::write(&path, text).unwrap();
    let keep_all = json!({"review_prompt_used": "garbage_detection.md", "commit_message": "Add logout()",
        "reviewed_files": [{"file": "src/auth.py", "decision": "keep"},
                           {"file": "src/debug_dump.txt", "decision": "discard", "reason": "scratch output"}],
        "tools_used": ["review_changes"], "summary": "reviewed"});
    ok(&client, "review_changes", json!({})).await;
    let refused = err(&client, "submit_phase", json!({"data": keep_all})).await;
    assert_eq!(refused["current_phase"], "PRE_COMMIT", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("src/auth.py") && message.contains("decision fix"), "{message}");
    // A fix without a reason says what is missing.
    let mut no_reason = keep_all.clone();
    no_reason["reviewed_files"][0] = json!({"file": "src/auth.py", "decision": "fix"});
    let r = err(&client, "submit_phase", json!({"data": no_reason})).await;
    assert_eq!(r["error"], "payload_mismatch", "{r}");
    let mut fix = keep_all.clone();
    fix["reviewed_files"][0] =
        json!({"file": "src/auth.py", "decision": "fix", "reason": "remove the print(session) debug line"});
    let r = submit(&client, fix).await;
    assert_eq!((r["phase"].as_str(), r["ready_substep"].as_str()), (Some("READY"), Some("READY_PLAN")), "{r}");
    let instruction = r["instruction"].as_str().unwrap();
    assert!(instruction.contains("src/auth.py (remove the print(session) debug line)"), "{instruction}");
    // Nothing was committed, and the file may be written again.
    let log = git(root, &["log", "--all", "--format=%s"]);
    assert!(!log.contains("Add logout()"), "{log}");
    let event =
        json!({"hook_event_name": "PreToolUse", "tool_name": "Edit", "tool_input": {"file_path": "src/auth.py"}});
    let (code, _, why) = crate::common::run_cli(root, &["hook", "claude-pre-tool-use"], &event.to_string());
    assert_eq!(code, 0, "{why}");
    fsck(root);
    client.cancel().await.unwrap();
}

/// A task branch git cannot read at MERGE is a failed merge that says why, not a missing
/// branch: the session stays in MERGE, and once the ref reads again the merge goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_task_branch_at_merge_is_reported_as_such() {
    let repo = repo("main");
    let root = repo.path();
    let client = connect(root).await;
    to_pre_commit(&client, root).await;
    commit_and_review(&client).await;
    submit(&client, json!({"quality_prompt_used": "q.md", "quality_score": "ok", "issues": [], "tools_used": [], "summary": "fine"})).await;
    let branch = git(root, &["symbolic-ref", "--short", "HEAD"]);
    git(root, &["pack-refs", "--no-prune"]);
    let loose = root.join(".git/refs/heads").join(&branch);
    let tip = std::fs::read_to_string(&loose).unwrap();
    std::fs::write(&loose, "this is not an object id\n").unwrap();
    let r = call(&client, "submit_phase", json!({"data": {"summary": "merge it"}})).await;
    assert_eq!(r.is_error, Some(true));
    let e = structured(&r);
    assert_eq!(e["error"], "merge_failed", "{e}");
    let details = e["details"].as_str().unwrap_or_default();
    assert!(details.contains("cannot read") && details.contains(&branch), "{e}");
    assert_eq!(ok(&client, "get_session_status", json!({})).await["phase"], "MERGE", "still in MERGE, can retry");
    std::fs::write(&loose, tip).unwrap();
    let r = submit(&client, json!({"summary": "merge it"})).await;
    assert_eq!(r["phase"], "SESSION_COMPLETE", "{r}");
    fsck(root);
    client.cancel().await.unwrap();
}
