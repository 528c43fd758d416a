//! The session report (`git code-intel report`): a whole MODIFY session of 50 tool calls through
//! the server on the project fixture, then the report in Markdown, JSON and HTML, each timed
//! against `git show --notes=code-intel <merge commit>` (the commit, its diff and its note: what a
//! reviewer reads without the report) in the same run. Target: under 200 ms.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::server::Server;

/// Tool calls the session makes, besides its submissions.
const CALLS: usize = 50;

pub fn run(bin: &Path) {
    let work = std::env::temp_dir().join("code-intel-bench-report");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).unwrap();
    let root = work.as_path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/project");
    git(root, &["init", "-q", "-b", "main"]);
    let copied = Command::new("cp").arg("-r").arg(fixture.join(".")).arg(root).status().unwrap();
    assert!(copied.success());
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "initial"]);

    let mut s = Server::start(bin, root, &[]);
    let mut calls = 0;
    let mut call = |s: &mut Server, tool: &str, args: Value| {
        calls += 1;
        s.call(tool, args)
    };
    let id = s.call(
        "start_session",
        json!({"intent": "MODIFY", "query": "add a logout function to the auth module", "no_doc_research": true}),
    )["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    submit(
        &mut s,
        json!({"action_type": "modify", "target_symbols": ["login"], "scope": "src/auth.py", "tools_used": [], "summary": "frame"}),
    );
    // Exploration: most of the calls, as an agent reading its way around makes them.
    let patterns = ["login", "Session", "validate_token", "user", "return", "def ", "class ", "import"];
    for n in 0..CALLS - 6 {
        match n % 4 {
            0 => call(&mut s, "find_definitions", json!({"symbol": "login"})),
            1 => call(&mut s, "search_text", json!({"pattern": patterns[n % patterns.len()]})),
            2 => call(&mut s, "get_symbols", json!({"path": "src"})),
            _ => call(&mut s, "find_references", json!({"symbol": "login"})),
        };
    }
    submit(
        &mut s,
        json!({"explored_files": ["src/auth.py"], "findings": ["login in src/auth.py"], "tools_used": ["find_definitions", "search_text"], "summary": "explored"}),
    );
    submit(
        &mut s,
        json!({"needs_more_information": false, "reason": "exploration found the code", "tools_used": [], "summary": "q1"}),
    );
    submit(
        &mut s,
        json!({"has_unverified_hypotheses": false, "reason": "nothing left unverified", "tools_used": [], "summary": "q2"}),
    );
    call(&mut s, "analyze_impact", json!({"target_files": ["src/auth.py"]}));
    call(&mut s, "analyze_impact", json!({"target_files": ["src/app.py"]}));
    submit(
        &mut s,
        json!({"needs_impact_analysis": false, "reason": "one function only", "tools_used": [], "summary": "q3"}),
    );
    submit(
        &mut s,
        json!({"tasks": [{"id": "t1", "description": "add logout", "status": "pending", "checklist": [{"item": "logout in auth.py", "status": "pending"}]}],
               "tools_used": [], "summary": "plan"}),
    );
    call(&mut s, "check_write_target", json!({"file_path": "src/auth.py"}));
    let path = root.join("src/auth.py");
    let mut text = std::fs::read_to_string(&path).unwrap();
    let start = text.lines().count() + 3;
    text.push_str("\n\ndef logout(session):\n    session.user = None\n    return True\n");
    std::fs::write(&path, text).unwrap();
    submit(
        &mut s,
        json!({"task_id": "t1", "checklist": [{"item": "logout in auth.py", "status": "done", "evidence": format!("src/auth.py:{start}-{}", start + 2)}],
               "tools_used": ["check_write_target"], "summary": "logout added"}),
    );
    submit(&mut s, json!({"summary": "all done"}));
    submit(
        &mut s,
        json!({"verifier_used": "tests.md", "passed": true, "details": "ok", "tools_used": [], "summary": "verified"}),
    );
    call(&mut s, "review_changes", json!({}));
    call(&mut s, "get_session_status", json!({}));
    call(&mut s, "review_changes", json!({}));
    submit(
        &mut s,
        json!({"review_prompt_used": "garbage_detection.md", "commit_message": "Add logout()", "reviewed_files": [{"file": "src/auth.py", "decision": "keep"}],
               "tools_used": ["review_changes"], "summary": "reviewed"}),
    );
    submit(
        &mut s,
        json!({"quality_prompt_used": "quality_review.md", "quality_score": "9/10", "issues": [], "tools_used": [], "summary": "fine"}),
    );
    let done = submit(&mut s, json!({"summary": "merge it"}));
    assert_eq!(done["phase"], "SESSION_COMPLETE", "{done}");
    drop(s);
    let merge = git(root, &["rev-parse", "HEAD"]);

    let report = |args: &[&str]| {
        time(Command::new(bin).current_dir(root).args(args).stdout(Stdio::null()).stderr(Stdio::null()))
    };
    let page = root.join(".git/report.html");
    let page = page.to_str().unwrap();
    let md = median(|| report(&["report", &id]));
    let json = median(|| report(&["--json", "report", &id]));
    let html = median(|| report(&["report", &id, "--html", page]));
    let by_commit = median(|| report(&["report", "HEAD"]));
    let reference = median(|| {
        time(Command::new("git").current_dir(root).args(["show", "--notes=code-intel", &merge]).stdout(Stdio::null()))
    });
    let recorded: Value = serde_json::from_slice(
        &Command::new(bin).current_dir(root).args(["--json", "report", &id]).output().unwrap().stdout,
    )
    .unwrap();
    println!("\n## report: a session of {} tool calls ({calls} made), median of 11", recorded["tool_calls"]);
    println!("| What | Time | `git show --notes=code-intel` (same run) | Ratio | Target |");
    println!("|---|---|---|---|---|");
    for (what, d) in [("Markdown", md), ("--json", json), ("--html", html), ("by commit (HEAD), Markdown", by_commit)] {
        println!(
            "| {what} | {:.1} ms | {:.1} ms | {:.2}× | < 200 ms: {} |",
            ms(d),
            ms(reference),
            ms(d) / ms(reference),
            if ms(d) < 200.0 { "met" } else { "NOT met" }
        );
    }
}

fn submit(s: &mut Server, data: Value) -> Value {
    s.call("submit_phase", json!({"data": data}))
}

fn git(root: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@example.com"])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn time(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let status = cmd.status().unwrap();
    assert!(status.success(), "{cmd:?}");
    t.elapsed()
}

fn median(mut f: impl FnMut() -> Duration) -> Duration {
    f();
    let mut v: Vec<Duration> = (0..11).map(|_| f()).collect();
    v.sort();
    v[5]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
