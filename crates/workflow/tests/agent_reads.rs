//! What the agent reads on the paths issue 25 found wanting: the git work the server announces,
//! a DOCUMENT_RESEARCH with nothing to read, SEMANTIC skipped for want of a model, the failure
//! path that says why and how many failures are left, evidence re-checked at READY's end, the
//! end that asks for record_outcome, and the checkpoint's size cap. Each test fails without
//! its rule.

mod harness;

use code_intel_workflow::engine::cap::{self, CHECKPOINT_LIMIT};
use code_intel_workflow::engine::evidence::EvidenceFile;
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::state::{Intent, TaskStatus};
use code_intel_workflow::engine::submit::DocumentFacts;
use harness::{Session, auth_py, flags};
use serde_json::json;

fn instruction(r: &serde_json::Value) -> &str {
    r["instruction"].as_str().unwrap_or_default()
}

#[test]
fn the_server_announces_its_git_work_before_each_submit_that_does_it() {
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    s.through_exploration();
    let plan = s.message(&["session_messages", "git_creates_task_branch"], &[("session_id", "s1")]);
    let status = serde_json::to_value(code_intel_workflow::engine::response::for_phase(&s.contract, &s.cp)).unwrap();
    assert!(instruction(&status).contains(&plan), "{status}");
    assert!(plan.contains("llm_task_s1_from_"));
    s.implement(&["t1"]);
    let r = s.post(true);
    assert_eq!(r["phase"], "PRE_COMMIT");
    assert!(instruction(&r).contains("the server commits the task's changes on llm_task_s1"), "{r}");
    assert!(
        r["expected_payload_schema"]["properties"]["commit_message"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("the server makes"))
    );
    let r = s.pre_commit();
    let quality = instruction(&r);
    assert!(quality.contains("Files are not edited in this phase"), "{r}");
    assert!(quality.contains("anything still uncommitted on llm_task_s1"), "{r}");
    assert!(!quality.contains("fixes you made during it"), "no promise of edits the hooks block: {r}");
    let r = s.quality(&[]);
    assert_eq!(r["phase"], "MERGE");
    let merge = instruction(&r);
    assert!(
        merge.contains("the server merges llm_task_s1 into main, checks out main and deletes llm_task_s1"),
        "{merge}"
    );
    assert!(!merge.contains("execute the merge"), "{merge}");
    let done = s.merge();
    assert_eq!(done["call"], "record_outcome", "{done}");
    assert!(instruction(&done).contains("record_outcome"), "{done}");
}

#[test]
fn quick_says_there_is_no_task_branch() {
    let mut s = Session::new(Intent::Modify, flags(|f| f.quick = true));
    s.doc();
    let r = s.frame();
    assert_eq!(r["phase"], "READY");
    assert!(instruction(&r).contains(&s.message(&["session_messages", "git_no_task_branch"], &[])), "{r}");
}

#[test]
fn document_research_with_nothing_required_accepts_an_empty_list() {
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    let empty = json!({"documents_reviewed": [], "tools_used": [], "summary": "no document bears on this"});
    s.facts.documents = Some(DocumentFacts { missing: vec![], must_read: vec!["docs/auth.md".into()] });
    s.err(empty.clone(), "payload_mismatch");
    // Every document named is skipped with a reason: nothing is left to read.
    let mut skipped = Session::new(Intent::Modify, flags(|_| {}));
    skipped.facts.documents = Some(DocumentFacts { missing: vec![], must_read: vec!["docs/auth.md".into()] });
    let r = skipped.ok(json!({"documents_reviewed": [], "tools_used": [], "summary": "no document bears on this",
                              "skipped_documents": [{"file": "docs/auth.md", "reason": "about the login form, not tokens"}]}));
    assert_eq!(r["phase"], "QUERY_FRAME");
    s.facts.documents = Some(DocumentFacts { missing: vec![], must_read: vec![] });
    let r = s.ok(empty);
    assert_eq!(r["phase"], "QUERY_FRAME");
    // The schema no longer asks for one document where none is required.
    assert!(r["expected_payload_schema"].is_object());
}

#[test]
fn semantic_asked_for_without_a_model_says_it_is_skipped() {
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    s.facts.semantic_available = false;
    s.doc();
    s.frame();
    s.explore();
    let r = s.gate("needs_more_information", true);
    assert_eq!(r["phase"], "Q2");
    assert_eq!(r["warning"], s.message(&["session_messages", "semantic_unavailable_skipped"], &[]), "{r}");
    // Not asked for: nothing to say.
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    s.facts.semantic_available = false;
    s.doc();
    s.frame();
    s.explore();
    assert!(s.gate("needs_more_information", false).get("warning").is_none());
}

#[test]
fn a_failed_verification_says_why_and_how_many_failures_are_left() {
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    s.through_exploration();
    s.implement(&["t1"]);
    let r = s.ok(json!({"verifier_used": "tests.md", "passed": false, "details": "test_logout fails.", "tools_used": [], "summary": "v"}));
    assert_eq!(r["phase"], "READY");
    let text = instruction(&r);
    assert!(text.contains("test_logout fails"), "{text}");
    assert!(!text.contains(".."), "no doubled full stop: {text}");
    assert!(text.contains("2 more before an intervention"), "{text}");
    s.ok(json!({"tasks": [
        {"id": "t1", "description": "do t1", "status": "completed"},
        {"id": "fix_1", "description": "fix the failure", "status": "pending", "checklist": [{"item": "fix_1 code", "status": "pending"}]}
    ], "tools_used": [], "summary": "replan"}));
    s.complete("fix_1");
    s.finish();
    let r = s.ok(
        json!({"verifier_used": "tests.md", "passed": false, "details": "still", "tools_used": [], "summary": "v"}),
    );
    assert!(instruction(&r).contains("1 more before an intervention"), "{r}");
}

/// Two tasks planned and done, t2 rewriting the lines t1 cited (src/auth.py:2-3); READY's
/// completion answer (which reopens t1) and the session.
fn t1_reopened_by_t2() -> (Session, serde_json::Value) {
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    s.through_exploration();
    s.plan(&["t1", "t2"]);
    s.complete("t1");
    let mut rewritten = auth_py();
    rewritten.insert(0, "import store".into());
    s.facts.evidence.insert("src/auth.py".into(), EvidenceFile::Lines(rewritten));
    s.called(&["check_write_target"]);
    s.ok(json!({"task_id": "t2", "checklist": [{"item": "t2 code", "status": "done", "evidence": "src/auth.py:1-4"}],
                "tools_used": ["check_write_target"], "summary": "t2 done"}));
    let r = s.finish();
    (s, r)
}

#[test]
fn evidence_a_later_task_rewrote_reopens_its_task() {
    let (mut s, r) = t1_reopened_by_t2();
    assert_eq!(r["phase"], "READY");
    assert_eq!(r["ready_substep"], "READY_IMPL", "{r}");
    assert!(r["warning"].as_str().is_some_and(|w| w.contains("t1 (src/auth.py:2-3")), "{r}");
    let t1 = &s.cp.orchestrator_state.tasks[0];
    assert_eq!((t1.status, t1.reopened), (TaskStatus::Pending, true));
    assert_eq!(s.cp.orchestrator_state.tasks[1].status, TaskStatus::Completed);
    // Its code is written: reporting it anew asks for no check_write_target, and says so.
    assert!(r["warning"].as_str().is_some_and(|w| w.contains("needs no check_write_target")), "{r}");
    assert!(r["expected_payload_schema"]["properties"]["tools_used"].get("contains").is_none(), "{r}");
    // Reported again where the code is now, it completes.
    s.ok(json!({"task_id": "t1", "checklist": [{"item": "t1 code", "status": "done", "evidence": "src/auth.py:3-4"}],
                "tools_used": [], "summary": "t1 again"}));
    assert!(!s.cp.orchestrator_state.tasks[0].reopened);
    assert_eq!(s.finish()["phase"], "POST_IMPL_VERIFY");
}

#[test]
fn the_checkpoint_cap_holds_at_the_limit() {
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    s.doc();
    s.frame();
    // A summary that puts the checkpoint exactly at the limit is kept as it is.
    let mut probe = s.cp.clone();
    probe.phase_payloads.insert(
        "step_05_EXPLORATION".into(),
        code_intel_workflow::engine::state::SummaryRecord { summary: String::new() },
    );
    probe.orchestrator_state.enter(Phase::Q1, None);
    probe.orchestrator_state.explored_files.insert("src/auth.py".into());
    let base = cap::size(&probe);
    let exact = "a".repeat(CHECKPOINT_LIMIT - base);
    let mut at_limit = Session { cp: s.cp.clone(), ..Session::new(Intent::Modify, flags(|_| {})) };
    at_limit.called(&["find_definitions", "search_text"]);
    let r = at_limit.ok(json!({"explored_files": ["src/auth.py"], "findings": ["Auth at src/auth.py:1"],
                               "tools_used": ["find_definitions", "search_text"], "summary": exact}));
    assert!(r.get("warning").is_none(), "{r}");
    assert_eq!(cap::size(&at_limit.cp), CHECKPOINT_LIMIT);
    // One byte more: the summaries are shortened, keeping the places they cite.
    let over = format!("{exact}b src/auth.py:1");
    s.called(&["find_definitions", "search_text"]);
    let r = s.ok(json!({"explored_files": ["src/auth.py"], "findings": ["Auth at src/auth.py:1"],
                        "tools_used": ["find_definitions", "search_text"], "summary": over}));
    assert!(r["warning"].as_str().is_some_and(|w| w.contains("256 KB")), "{r}");
    assert!(cap::size(&s.cp) <= CHECKPOINT_LIMIT);
    let kept = &s.cp.phase_payloads["step_05_EXPLORATION"].summary;
    assert!(kept.ends_with("[shortened; cites src/auth.py:1]"), "{}", &kept[kept.len() - 60..]);
    // What summaries cannot make up for is refused, and nothing changes.
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", false);
    s.gate("needs_impact_analysis", false);
    let huge = "z".repeat(CHECKPOINT_LIMIT);
    let r = s.err(
        json!({"tasks": [{"id": "t1", "description": huge, "status": "pending", "checklist": [{"item": "x", "status": "pending"}]}],
               "tools_used": [], "summary": "plan"}),
        "payload_mismatch",
    );
    assert!(r["message"].as_str().is_some_and(|m| m.contains("cap")), "{r}");
}

#[test]
fn the_last_quality_review_says_it_is_the_last_and_commits_its_fixes() {
    let mut s = Session::new(Intent::Modify, flags(|_| {}));
    s.through_exploration();
    s.implement(&["t1"]);
    s.post(true);
    for review in 1..=3 {
        let r = s.pre_commit();
        assert_eq!(r["phase"], "QUALITY_REVIEW");
        let last = s.message(&["session_messages", "git_commits_last_review_fixes"], &[("task_branch", "llm_task_s1")]);
        assert_eq!(instruction(&r).contains(&last), review == 3, "review {review}: {r}");
        let r = s.quality(&["dead code left in auth.py"]);
        if review < 3 {
            assert_eq!(r["phase"], "READY");
            assert!(instruction(&r).contains(&format!("review {review} of 3")), "{r}");
            s.plan(&["t1"]);
            s.cp.orchestrator_state.tasks[0].status = TaskStatus::Pending;
            s.complete("t1");
            s.finish();
            s.post(true);
        } else {
            assert_eq!(r["phase"], "MERGE");
            assert!(
                matches!(
                    &s.last_effect,
                    Some(code_intel_workflow::engine::submit::Effect::Commit { gated: false, .. })
                ),
                "the last review's fixes are committed: {:?}",
                s.last_effect
            );
        }
    }
}

#[test]
fn a_reopened_task_resent_with_new_work_needs_its_writes_checked_again() {
    let (mut s, _) = t1_reopened_by_t2();
    assert!(s.cp.orchestrator_state.tasks[0].reopened);
    // Resent as it was: still reopened.
    s.ok(json!({"tasks": [
        {"id": "t1", "description": "do t1", "status": "pending", "checklist": [{"item": "t1 code", "status": "pending"}]},
        {"id": "t2", "description": "do t2", "status": "completed"}], "tools_used": [], "summary": "replan"}));
    assert!(s.cp.orchestrator_state.tasks[0].reopened);
    // Resent with new work: the writes it needs are checked again.
    s.ok(json!({"tasks": [
        {"id": "t1", "description": "do t1", "status": "pending", "checklist": [{"item": "t1 code", "status": "pending"},
                                                                                   {"item": "t1 more code", "status": "pending"}]},
        {"id": "t2", "description": "do t2", "status": "completed"}], "tools_used": [], "summary": "replan"}));
    assert!(!s.cp.orchestrator_state.tasks[0].reopened);
    s.err(json!({"task_id": "t1", "checklist": [{"item": "t1 code", "status": "done", "evidence": "src/auth.py:3-4"},
                                                {"item": "t1 more code", "status": "done", "evidence": "src/auth.py:3-4"}],
                 "tools_used": [], "summary": "t1 again"}), "payload_mismatch");
}
