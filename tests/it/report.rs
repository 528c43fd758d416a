//! `git code-intel report`: a whole session through the real server, then its report from the
//! CLI — in Markdown, JSON and HTML (rendered by headless Chromium, and the screenshot looked at),
//! from this clone and from a fresh clone that fetched the shared refs; a cleaned session and
//! one in progress say so; the evidence quoted is the committed code.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::mcp_client::{Client, connect, err, ok, submit};
use crate::common::{committed_project, git, git_with_input, run_cli};

/// A MODIFY session on the project fixture, through every phase to MERGE: a QueryFrame with
/// quotes, exploration, a hypothesis verified, the impact analysed, one task with evidence, a
/// refused submission, verification, review and quality review. Returns the session id.
async fn whole_session(client: &Client, root: &Path) -> String {
    let query = "Add a logout function to the auth module so that a session can be ended";
    let started =
        ok(client, "start_session", json!({"intent": "MODIFY", "query": query, "no_doc_research": true})).await;
    let id = started["session_id"].as_str().unwrap().to_owned();
    submit(
        client,
        json!({"action_type": "modify", "target_symbols": ["login"], "scope": "src/auth.py",
               "slots": {"target_feature": {"value": "logout", "quote": "a logout function"},
                         "desired_action": {"value": "end a session", "quote": "a session can be ended"}},
               "tools_used": [], "summary": "logout next to login in the auth module"}),
    )
    .await;
    ok(client, "find_definitions", json!({"symbol": "login"})).await;
    ok(client, "search_text", json!({"pattern": "validate_token"})).await;
    ok(client, "get_symbols", json!({"path": "src"})).await;
    submit(
        client,
        json!({"explored_files": ["src/auth.py"], "findings": ["login is defined in src/auth.py and keeps the user on the session",
                                                             "an agent's text is shown, never run: <script>alert(1)</script>"],
               "tools_used": ["find_definitions", "search_text"], "summary": "login and Session found in src/auth.py"}),
    )
    .await;
    submit(client, json!({"needs_more_information": false, "reason": "exploration found the code", "tools_used": [], "summary": "q1"})).await;
    submit(client, json!({"has_unverified_hypotheses": true, "reason": "whether login sets session.user is unverified", "tools_used": [], "summary": "q2"})).await;
    ok(client, "find_references", json!({"symbol": "login"})).await;
    let at = crate::common::line_of(&root.join("src/auth.py"), "def login");
    submit(
        client,
        json!({"hypotheses_verified": [{"hypothesis": "login keeps the user on the session", "result": true,
                                        "evidence": format!("src/auth.py:{at}")}],
               "tools_used": ["find_references"], "summary": "login keeps the user"}),
    )
    .await;
    submit(client, json!({"needs_impact_analysis": true, "reason": "callers of the auth module may care", "tools_used": [], "summary": "q3"})).await;
    ok(client, "analyze_impact", json!({"target_files": ["src/auth.py"]})).await;
    submit(
        client,
        json!({"impact_summary": {"must_verify": ["src/auth.py: login and logout share the session"], "should_verify": []},
               "tools_used": ["analyze_impact"], "summary": "only auth.py"}),
    )
    .await;
    submit(
        client,
        json!({"tasks": [{"id": "t1", "description": "add logout", "status": "pending",
                          "checklist": [{"item": "logout in auth.py", "status": "pending"}]}],
               "tools_used": [], "summary": "plan: one task"}),
    )
    .await;
    ok(client, "check_write_target", json!({"file_path": "src/auth.py"})).await;
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 3;
    text.push_str("\n\ndef logout(session):\n    session.user = None\n    return True\n");
    std::fs::write(&path, text).unwrap();
    // Refused (the line is past the end): the report shows the refusal among the step's calls.
    let refused = err(
        client,
        "submit_phase",
        json!({"data": {"task_id": "t1", "checklist": [{"item": "logout in auth.py", "status": "done", "evidence": "src/auth.py:4000"}],
                        "tools_used": ["check_write_target"], "summary": "bad evidence"}}),
    )
    .await;
    assert!(refused["error"].is_string(), "{refused}");
    submit(
        client,
        json!({"task_id": "t1", "checklist": [{"item": "logout in auth.py", "status": "done",
                                               "evidence": format!("./src/auth.py:{start}-{}", start + 2)}],
               "tools_used": ["check_write_target"], "summary": "logout added"}),
    )
    .await;
    submit(client, json!({"summary": "all done"})).await;
    crate::common::mcp_client::witness_tests(client).await;
    submit(
        client,
        // A flag given as text, as the engine accepts it: the report reads it so too.
        json!({"verifier_used": "tests.md", "passed": "true", "details": "python3 -m pytest: 3 passed", "tools_used": [], "summary": "verified"}),
    )
    .await;
    ok(client, "review_changes", json!({})).await;
    submit(
        client,
        json!({"review_prompt_used": "garbage_detection.md", "commit_message": "Add logout()",
               // The aliases and spelling the engine accepts.
               "reviewed_files": [{"path": "./src/auth.py", "action": " keep", "reason": "the task's change"}],
               "tools_used": ["review_changes"], "summary": "reviewed"}),
    )
    .await;
    submit(
        client,
        json!({"quality_prompt_used": "quality_review.md", "quality_score": "9/10", "issues": [], "tools_used": [], "summary": "fine"}),
    )
    .await;
    let done = submit(client, json!({"summary": "merge it"})).await;
    assert_eq!(done["phase"], "SESSION_COMPLETE", "{done}");
    id
}

fn report_json(root: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json", "report"];
    all.extend_from_slice(args);
    let (code, out, errors) = run_cli(root, &all, "");
    assert_eq!(code, 0, "report {args:?}: {errors}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_session_reports_what_it_researched_proved_changed_and_tested() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let id = whole_session(&client, root).await;
    ok(&client, "record_outcome", json!({"outcome": "partial", "note": "logout does not clear the token yet"})).await;
    client.cancel().await.unwrap();

    let r = report_json(root, &[]);
    assert_eq!(r["report_version"], 1);
    assert_eq!(r["session_id"], id.as_str(), "the default is the last finished session");
    assert_eq!(r["ended"], "completed");
    assert_eq!(r["recorded_by"], "this_clone");
    let outcome = r["outcome"].as_str().unwrap();
    assert!(outcome.starts_with("Merged into"), "{outcome}");
    assert_eq!(r["user_outcomes"][0]["outcome"], "partial");
    // The QueryFrame with its quotes, the hypothesis, the impact set, the review decision.
    assert_eq!(r["query_frame"]["slots"]["target_feature"]["quote"], "a logout function");
    assert_eq!(r["hypotheses"][0]["hypothesis"], "login keeps the user on the session");
    assert_eq!(r["hypotheses"][0]["evidence_kind"], "code", "its evidence is a line of code that exists");
    assert_eq!(r["impact"]["must_verify"][0], "src/auth.py: login and logout share the session");
    assert_eq!(r["reviews"][0]["reviewed_files"][0]["action"], " keep");
    assert_eq!(r["verification"][0]["passed"], "true");
    // Tool calls per step, with their arguments; the refused submission among them.
    let steps = r["steps"].as_array().unwrap();
    let exploration = steps.iter().find(|s| s["phase"] == "EXPLORATION").unwrap();
    let tools: Vec<&str> =
        exploration["calls"].as_array().unwrap().iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(tools, ["find_definitions", "search_text", "get_symbols"]);
    assert!(exploration["calls"][0]["args"].as_str().unwrap().contains("login"), "{exploration}");
    let implementation = steps
        .iter()
        .find(|s| s["task"] == "t1")
        .unwrap_or_else(|| panic!("{:?}", steps.iter().map(|s| (&s["step"], &s["task"])).collect::<Vec<_>>()));
    let refusal = implementation["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == "submit_phase")
        .unwrap_or_else(|| panic!("{implementation:#}"));
    assert!(refusal["error"].is_string(), "{implementation}");
    assert!(refusal["detail"].as_str().is_some_and(|d| !d.is_empty()), "{refusal}");
    assert!(refusal["args"].as_str().unwrap().contains("src/auth.py:4000"), "the refused payload: {refusal}");
    // 3 in EXPLORATION, 1 each in VERIFICATION and IMPACT_ANALYSIS, 1 in the task, 1 run_check
    // in POST_IMPL_VERIFY, 1 in PRE_COMMIT; every accepted submission is a step, the refused one
    // a call.
    assert_eq!(r["tool_calls"], 8);
    assert_eq!(r["refused_submissions"], 1);
    assert_eq!(r["submissions"].as_u64().unwrap() as usize, steps.len());
    // Every phase has its time, and the times add up.
    let phases: Vec<&str> = r["time"].as_array().unwrap().iter().map(|p| p["phase"].as_str().unwrap()).collect();
    for p in [
        "QUERY_FRAME",
        "EXPLORATION",
        "VERIFICATION",
        "IMPACT_ANALYSIS",
        "READY_PLAN",
        "READY_IMPL",
        "PRE_COMMIT",
        "MERGE",
    ] {
        assert!(phases.contains(&p), "{p} in {phases:?}");
    }
    let sum: u64 = steps.iter().map(|s| s["ms"].as_u64().unwrap()).sum();
    assert_eq!(sum, r["total_ms"].as_u64().unwrap());

    // The evidence lines are the committed code: the quote is what the task commit holds.
    let task_commit = r["git"]["task_commit"].as_str().unwrap().to_owned();
    let committed = git(root, &["show", &format!("{task_commit}:src/auth.py")]);
    let quote = &r["tasks"][0]["items"][0]["quote"];
    let cited: Vec<(usize, String)> = quote["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["cited"] == true)
        .map(|l| (l["number"].as_u64().unwrap() as usize, l["text"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(cited.len(), 3, "{quote}");
    for (n, text) in &cited {
        assert_eq!(committed.lines().nth(n - 1).unwrap(), text, "line {n}");
    }
    assert_eq!(cited[0].1, "def logout(session):");
    assert!(quote["problem"].is_null(), "{quote}");
    // The diff, the merge, and the note that names this command.
    assert_eq!(r["diff"][0]["path"], "src/auth.py");
    assert_eq!(r["diff"][0]["additions"], 5);
    let merge = r["git"]["merge_commit"].as_str().unwrap().to_owned();
    assert_eq!(git(root, &["rev-parse", "HEAD"]), merge);
    let note = git(root, &["notes", "--ref=code-intel", "show", &merge]);
    assert!(note.contains(&format!("git code-intel report {id}")), "{note}");
    assert!(r["git"]["note"].as_str().unwrap().contains(&id));

    // By commit: the session whose merge note is on it.
    assert_eq!(report_json(root, &["HEAD"])["session_id"], id.as_str());
    assert_eq!(report_json(root, &[&id])["session_id"], id.as_str());

    // Markdown: the sections a reviewer reads, the evidence quoted.
    let (code, md, _) = run_cli(root, &["report", &id], "");
    assert_eq!(code, 0);
    for section in [
        "## Request",
        "### QueryFrame",
        "## Exploration",
        "## Hypotheses",
        "## Impact",
        "## Plan and tasks",
        "## Verification",
        "## Review",
        "## Commit and merge",
        "## Steps",
    ] {
        assert!(md.contains(section), "{section} in\n{md}");
    }
    assert!(md.contains("“a logout function”"), "{md}");
    assert!(md.contains("- **confirmed** (code): login keeps the user on the session"), "{md}");
    assert!(md.contains(&format!("{:>5}  def logout(session):", cited[0].0)), "{md}");
    assert!(md.contains("**partial** logout does not clear the token yet"), "{md}");
    assert!(md.contains("- **passed**, as the agent reported"), "{md}");
    assert!(md.contains("| `src/auth.py` | keep | the task's change |"), "{md}");
    // The agent's text cannot add HTML to a pull request's description.
    assert!(md.contains("never run: &lt;script&gt;alert(1)&lt;/script&gt;"), "{md}");
    assert!(!md.contains("<script"), "{md}");

    // HTML: one self-contained page.
    let page = root.join("report.html");
    let (code, _, errors) = run_cli(root, &["report", &id, "--html", page.to_str().unwrap()], "");
    assert_eq!(code, 0, "{errors}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    for external in ["http://", "https://", "src=", "<script", "<link", "url("] {
        assert!(!html.contains(external), "{external} in the page");
    }
    assert!(html.contains("<svg") && html.contains("def logout(session):"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "the agent's text escaped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_clone_reports_a_teammates_session_after_fetching_the_shared_refs() {
    let origin = committed_project();
    let client = connect(origin.path()).await;
    let id = whole_session(&client, origin.path()).await;
    client.cancel().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let clone = dir.path().join("clone");
    git(dir.path(), &["clone", "-q", origin.path().to_str().unwrap(), clone.to_str().unwrap()]);
    // Before the fetch: nothing to report, said plainly.
    let (code, _, errors) = run_cli(&clone, &["report"], "");
    assert_eq!(code, 2);
    assert!(errors.contains("no finished session"), "{errors}");
    let (code, _, errors) = run_cli(&clone, &["share", "pull"], "");
    assert_eq!(code, 0, "{errors}");

    let r = report_json(&clone, &[&id]);
    assert_eq!(r["recorded_by"], "another_clone");
    assert_eq!(r["ended"], "completed");
    let quote = &r["tasks"][0]["items"][0]["quote"];
    assert!(quote["problem"].is_null(), "the commit came with the clone: {quote}");
    assert_eq!(
        quote["lines"].as_array().unwrap().iter().find(|l| l["cited"] == true).unwrap()["text"],
        "def logout(session):"
    );
    // The note came with the shared refs: the merge commit names the session.
    assert_eq!(report_json(&clone, &["HEAD"])["session_id"], id.as_str());
    // Nobody's uncommitted files travel with it.
    let shared = git(&clone, &["log", "-1", "--format=%H", "refs/code-intel/history"]);
    let data = git(&clone, &["show", &format!("{shared}:report.json")]);
    assert!(!data.contains("\"user_changes\":{\""), "{data}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cleaned_session_and_one_in_progress_say_so() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let started = ok(
        &client,
        "start_session",
        json!({"intent": "INVESTIGATE", "query": "how does login work", "no_doc_research": true}),
    )
    .await;
    let id = started["session_id"].as_str().unwrap().to_owned();
    submit(&client, json!({"action_type": "investigate", "tools_used": [], "summary": "frame"})).await;
    ok(&client, "find_definitions", json!({"symbol": "login"})).await;
    client.cancel().await.unwrap();

    let r = report_json(root, &[&id]);
    assert_eq!(r["ended"], "in_progress");
    assert_eq!(r["recorded_by"], "this_work_tree");
    assert_eq!(r["phase_at_end"], "EXPLORATION");
    let current = r["steps"].as_array().unwrap().last().unwrap();
    assert_eq!(current["phase"], "EXPLORATION");
    assert!(current["summary"].as_str().unwrap().starts_with("(in progress"), "{current}");
    assert_eq!(current["calls"].as_array().unwrap().len(), 0, "calls not yet submitted live in the server's memory");

    let (code, _, errors) = run_cli(root, &["clean"], "");
    assert_eq!(code, 0, "{errors}");
    let r = report_json(root, &[&id]);
    assert_eq!(r["ended"], "cleaned");
    assert_eq!(r["phase_at_end"], "EXPLORATION");
    assert!(r["outcome"].as_str().unwrap().starts_with("Cleaned"), "{}", r["outcome"]);
    // The step it was cleaned in is not timed up to the clean (which may be days later).
    let last = r["steps"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["ms"], 0, "{last}");
    assert!(last["summary"].as_str().unwrap().contains("cleaned in this step"), "{last}");
    let (_, md, _) = run_cli(root, &["report", &id], "");
    assert!(md.contains("> **Cleaned"), "{md}");
    // A cleaned session is no finished one to record an outcome for.
    assert!(crate::common::git(root, &["for-each-ref", "refs/worktree/code-intel/"]).is_empty());
}

#[test]
fn unknown_targets_and_tampered_report_data_are_refused_plainly() {
    let repo = committed_project();
    let root = repo.path();
    let (code, _, errors) = run_cli(root, &["report"], "");
    assert_eq!(code, 2);
    assert!(errors.contains("no finished session"), "{errors}");
    let (code, _, errors) = run_cli(root, &["report", "no-such-session"], "");
    assert_eq!(code, 2);
    assert!(errors.contains("'no-such-session' is neither a session"), "{errors}");
    let (code, _, errors) = run_cli(root, &["report", "HEAD"], "");
    assert_eq!(code, 2);
    assert!(errors.contains("has no git-code-intel note"), "{errors}");

    // A history record from another clone whose report.json is not the one it names, and one
    // of a newer version: refused with the reason, nothing else read from them.
    for (name, data, named, expected) in [
        (
            "swapped",
            json!({"report_version": 1}),
            "0000000000000000000000000000000000000000",
            "is not the report its record names",
        ),
        ("newer", json!({"report_version": 99}), "", "is version 99"),
    ] {
        let data = serde_json::to_vec(&data).unwrap();
        let blob = git_with_input(root, &["hash-object", "-w", "--stdin"], &data);
        let named = if named.is_empty() { blob.clone() } else { named.to_owned() };
        let record = serde_json::to_vec(&json!({"session_id": name, "report": named})).unwrap();
        let record_blob = git_with_input(root, &["hash-object", "-w", "--stdin"], &record);
        let tree = git_with_input(
            root,
            &["mktree"],
            format!("100644 blob {blob}\treport.json\n100644 blob {record_blob}\tsession.json\n").as_bytes(),
        );
        let parent = std::process::Command::new("git")
            .args(["rev-parse", "-q", "--verify", "refs/code-intel/history"])
            .current_dir(root)
            .output()
            .unwrap();
        let parent = String::from_utf8_lossy(&parent.stdout).trim().to_owned();
        let mut args = vec!["commit-tree", tree.as_str(), "-m", "teammate"];
        if !parent.is_empty() {
            args.extend(["-p", parent.as_str()]);
        }
        let commit = git(root, &args);
        git(root, &["update-ref", "refs/code-intel/history", &commit]);
        let (code, out, errors) = run_cli(root, &["report", name], "");
        assert_eq!(code, 1, "{out}");
        assert!(errors.contains(expected), "{errors}");
    }
}

/// The HTML report in a real browser: Debian's Chromium, headless, renders the page to a PNG;
/// the timeline and the time chart are drawn (their phase colours are on the screen) and the
/// page is not blank. `CODE_INTEL_SCREENSHOT` names a file to keep the screenshot in, to look at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_report_renders_in_headless_chromium() {
    let repo = committed_project();
    let root = repo.path();
    let client = connect(root).await;
    let id = whole_session(&client, root).await;
    client.cancel().await.unwrap();
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("report.html");
    let (code, _, errors) = run_cli(root, &["report", &id, "--html", page.to_str().unwrap()], "");
    assert_eq!(code, 0, "{errors}");

    let shot = out.path().join("report.png");
    let profile = out.path().join("profile");
    let (width, height) = (1280u32, 2400u32);
    let browser = std::process::Command::new("chromium")
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run"])
        .args(["--disable-extensions", "--disable-background-networking", "--disable-dev-shm-usage", "--log-level=3"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium (Debian's package; scripts/setup.sh installs it)");
    assert!(browser.status.success(), "chromium: {}", String::from_utf8_lossy(&browser.stderr));
    if let Some(keep) = std::env::var_os("CODE_INTEL_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }

    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut pixels).unwrap();
    assert_eq!((info.width, info.height), (width, height));
    let channels = info.color_type.samples();
    let colours: Vec<[u8; 3]> = pixels[..info.buffer_size()].chunks(channels).map(|p| [p[0], p[1], p[2]]).collect();
    let count = |rgb: [u8; 3]| colours.iter().filter(|c| **c == rgb).count();
    // The first two phases' colours (QUERY_FRAME, EXPLORATION) fill timeline and chart bars.
    assert!(count([0x2b, 0x6c, 0xb0]) > 500, "no QUERY_FRAME bar on the screen");
    assert!(count([0xdd, 0x6b, 0x20]) > 500, "no EXPLORATION bar on the screen");
    // Text and tables: far from a blank page.
    let inked = colours.iter().filter(|c| c.iter().map(|v| u32::from(*v)).sum::<u32>() < 300).count();
    assert!(inked > 5_000, "only {inked} dark pixels: the page did not render its text");
}
