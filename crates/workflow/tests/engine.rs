//! The phase engine against the seeds' test plan (seed 001: TestSubmitPhaseDispatch through
//! TestEndToEnd) and the v1.16 checklist cases. The engine is pure, so these drive it directly;
//! `mcp_workflow.rs` drives the same flows through the real server.

mod harness;

use code_intel_workflow::contract::catalogue;
use code_intel_workflow::engine::evidence::EvidenceFile;
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::state::{EvidenceKind, Flags, GateLevel, Intent, TaskStatus, WitnessedRun};
use code_intel_workflow::engine::submit::{BranchChoice, Effect};
use harness::{Session, flags};
use serde_json::{Value, json};

// ---- TestSubmitPhaseDispatch

#[test]
fn document_research_payload() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    assert_eq!((s.phase(), s.step()), (Phase::DocumentResearch, 3));
    s.err(json!({"documents_reviewed": [], "tools_used": [], "summary": "x"}), "payload_mismatch");
    let r = s.doc();
    assert_eq!((r["phase"].as_str(), r["step"].as_u64()), (Some("QUERY_FRAME"), Some(4)));
}

#[test]
fn query_frame_payload() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    let r = s.frame();
    assert_eq!(r["phase"], "EXPLORATION");
    assert!(r.get("query_frame_hints").is_none(), "all four slots were given");
}

#[test]
fn query_frame_quotes_must_come_from_the_query() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    let r = s.err(
        json!({"slots": {"target_feature": {"value": "x", "quote": "rewrite the database layer"}}, "tools_used": [], "summary": "s"}),
        "payload_mismatch",
    );
    assert!(r["message"].as_str().unwrap().contains("target_feature"));
    // Missing slots are allowed, each with its hint.
    let r = s
        .ok(json!({"action_type": "implement", "slots": {"target_feature": "Auth"}, "tools_used": [], "summary": "s"}));
    let hints: Vec<String> = serde_json::from_value(r["query_frame_hints"].clone()).unwrap();
    for slot in ["trigger_condition", "observed_issue", "desired_action"] {
        let expected = s.message(&["query_frame_hints", &format!("{slot}_missing")], &[]);
        assert!(hints.contains(&expected), "{slot}: {hints:?}");
    }
    assert_eq!(hints.len(), 3);
}

#[test]
fn exploration_payload() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    s.called(&["find_definitions", "search_text"]);
    s.err(
        json!({"explored_files": [], "findings": [], "tools_used": ["search_text"], "summary": "x"}),
        "payload_mismatch",
    );
    let r = s.explore();
    assert_eq!(r["phase"], "Q1");
    assert!(s.cp.orchestrator_state.explored_files.contains("src/auth.py"));
}

#[test]
fn payload_mismatch_returns_error() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    let r = s.err(json!({"hypotheses_verified": [], "tools_used": [], "summary": "x"}), "payload_mismatch");
    assert_eq!(r["current_phase"], "EXPLORATION");
    assert_eq!(r["step"], 5);
    assert_eq!(
        r["message"],
        s.message(
            &["common_failures", "payload_mismatch"],
            &[("phase", "EXPLORATION"), ("other_phase", "VERIFICATION")]
        )
    );
}

#[test]
fn response_contains_expected_payload() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    for r in [s.doc(), s.frame(), s.explore()] {
        assert!(r["expected_payload"].as_object().is_some_and(|o| o.contains_key("summary")), "{r}");
        assert_eq!(r["call"], "submit_phase");
        assert!(r.get("compaction_count").is_some());
        assert_eq!(r["session_id"], "s1");
    }
}

// ---- TestQGates

fn at_q1() -> Session {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    s.explore();
    s
}

#[test]
fn q1_true_enters_semantic() {
    let mut s = at_q1();
    assert_eq!(s.gate("needs_more_information", true)["phase"], "SEMANTIC");
}

#[test]
fn q1_false_proceeds_to_q2() {
    let mut s = at_q1();
    assert_eq!(s.gate("needs_more_information", false)["phase"], "Q2");
}

#[test]
fn q2_true_enters_verification() {
    let mut s = at_q1();
    s.gate("needs_more_information", false);
    assert_eq!(s.gate("has_unverified_hypotheses", true)["phase"], "VERIFICATION");
}

#[test]
fn q2_false_proceeds_to_q3() {
    let mut s = at_q1();
    s.gate("needs_more_information", false);
    assert_eq!(s.gate("has_unverified_hypotheses", false)["phase"], "Q3");
}

#[test]
fn q3_true_enters_impact() {
    let mut s = at_q1();
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", false);
    assert_eq!(s.gate("needs_impact_analysis", true)["phase"], "IMPACT_ANALYSIS");
}

#[test]
fn q3_false_proceeds_to_ready() {
    let mut s = at_q1();
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", false);
    let r = s.gate("needs_impact_analysis", false);
    assert_eq!((r["phase"].as_str(), r["step"].as_u64()), (Some("READY"), Some(12)));
}

#[test]
fn gate_level_full_forces_all() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.gate_level = GateLevel::Full));
    s.doc();
    s.frame();
    s.explore();
    assert_eq!(s.gate("needs_more_information", false)["phase"], "SEMANTIC");
    s.semantic();
    assert_eq!(s.gate("has_unverified_hypotheses", false)["phase"], "VERIFICATION");
    s.verify_hypotheses();
    assert_eq!(s.gate("needs_impact_analysis", false)["phase"], "IMPACT_ANALYSIS");
    assert_eq!(s.impact()["phase"], "READY");
}

#[test]
fn semantic_is_skipped_while_semantic_search_is_unavailable() {
    let mut s = at_q1();
    s.facts.semantic_available = false;
    assert_eq!(s.gate("needs_more_information", true)["phase"], "Q2");
}

#[test]
fn gates_need_a_bool_and_a_reason_of_ten_characters() {
    let mut s = at_q1();
    let cases = [
        (
            json!({"reason": "long enough reason", "summary": "s", "tools_used": []}),
            "semantic_needs_more_information_required",
        ),
        (
            json!({"needs_more_information": "yes", "reason": "long enough reason", "summary": "s", "tools_used": []}),
            "semantic_needs_more_information_type",
        ),
        (json!({"needs_more_information": true, "summary": "s", "tools_used": []}), "semantic_reason_required"),
        (
            json!({"needs_more_information": true, "reason": "short", "summary": "s", "tools_used": []}),
            "semantic_reason_length",
        ),
    ];
    for (data, key) in cases {
        let r = s.err(data, "validation_error");
        assert_eq!(r["message"], s.message(&["tool_errors", "check_phase_necessity", key], &[]));
    }
    s.gate("needs_more_information", false);
    let r = s.err(
        json!({"has_unverified_hypotheses": 1, "reason": "long enough reason", "summary": "s", "tools_used": []}),
        "validation_error",
    );
    assert_eq!(
        r["message"],
        s.message(&["tool_errors", "check_phase_necessity", "verification_has_unverified_type"], &[])
    );
    s.gate("has_unverified_hypotheses", false);
    let r = s.err(
        json!({"needs_impact_analysis": true, "reason": "tiny", "summary": "s", "tools_used": []}),
        "validation_error",
    );
    assert_eq!(r["message"], s.message(&["tool_errors", "check_phase_necessity", "impact_reason_length"], &[]));
}

#[test]
fn a_gate_answer_is_accepted_only_in_its_own_phase() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    s.called(&["find_definitions", "search_text"]);
    // Q3 during EXPLORATION: rejected even next to a valid exploration payload.
    let r = s.err(
        json!({"needs_impact_analysis": false, "reason": "nothing to analyze here", "explored_files": ["a"], "findings": ["b"],
               "tools_used": ["find_definitions", "search_text"], "summary": "s"}),
        "payload_mismatch",
    );
    assert_eq!(r["current_phase"], "EXPLORATION");
    s.err(
        json!({"needs_impact_analysis": false, "reason": "nothing to analyze here", "tools_used": [], "summary": "s"}),
        "payload_mismatch",
    );
}

// ---- common validation and tool use

#[test]
fn summary_and_tools_used_are_required() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    let r = s.err(json!({"documents_reviewed": ["a.md"], "tools_used": []}), "payload_mismatch");
    assert_eq!(r["message"], s.message(&["common_failures", "summary_required"], &[]));
    let r = s.err(json!({"documents_reviewed": ["a.md"], "summary": "s"}), "payload_mismatch");
    assert_eq!(r["message"], s.message(&["common_failures", "tools_used_invalid"], &[]));
    s.err(json!({"documents_reviewed": ["a.md"], "summary": "s", "tools_used": "search_text"}), "payload_mismatch");
    s.err(json!({"documents_reviewed": ["a.md"], "summary": "s", "tools_used": [3]}), "payload_mismatch");
}

#[test]
fn claiming_tools_that_were_never_called_fails() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    s.called(&["search_text"]);
    let r = s.err(
        json!({"explored_files": ["src/auth.py"], "findings": ["f"], "tools_used": ["search_text", "find_definitions"], "summary": "s"}),
        "payload_mismatch",
    );
    assert_eq!(r["message"], s.message(&["common_failures", "tools_not_called"], &[("tools", "find_definitions")]));
}

#[test]
fn exploration_needs_two_distinct_tools_really_called() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    s.called(&["search_text", "check_write_target"]);
    let r = s.err(
        json!({"explored_files": ["src/auth.py"], "findings": ["f"], "tools_used": ["search_text", "Read"], "summary": "s"}),
        "payload_mismatch",
    );
    assert_eq!(r["message"], s.message(&["common_failures", "exploration_min_tools"], &[]));
}

#[test]
fn tools_called_in_an_earlier_phase_do_not_count() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.called(&["find_definitions", "search_text"]);
    s.doc();
    s.frame();
    s.err(
        json!({"explored_files": ["src/auth.py"], "findings": ["f"], "tools_used": ["find_definitions", "search_text"], "summary": "s"}),
        "payload_mismatch",
    );
}

#[test]
fn required_tools_must_be_called_and_reported() {
    let mut s = at_q1();
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", false);
    s.gate("needs_impact_analysis", true);
    let data = json!({"impact_summary": {"x": 1}, "tools_used": [], "summary": "s"});
    let r = s.err(data.clone(), "payload_mismatch");
    assert_eq!(
        r["message"],
        s.message(&["common_failures", "required_tools_not_used"], &[("missing_list", "analyze_impact")])
    );
    s.called(&["analyze_impact"]);
    let r = s.err(data, "payload_mismatch");
    assert_eq!(
        r["message"],
        s.message(&["common_failures", "required_tools_not_reported"], &[("missing_reported", "analyze_impact")])
    );
    let r = s.err(json!({"impact_summary": {}, "tools_used": ["analyze_impact"], "summary": "s"}), "payload_mismatch");
    assert_eq!(r["message"], s.message(&["failures", "IMPACT_ANALYSIS", "empty_impact_summary"], &[]));
}

#[test]
fn semantic_and_verification_failures() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.gate_level = GateLevel::Full));
    s.doc();
    s.frame();
    s.explore();
    s.gate("needs_more_information", true);
    s.called(&["semantic_search"]);
    let r = s.err(json!({"search_results": [], "tools_used": ["semantic_search"], "summary": "s"}), "payload_mismatch");
    assert_eq!(r["message"], s.message(&["failures", "SEMANTIC", "empty_search_results"], &[]));
    s.semantic();
    s.gate("has_unverified_hypotheses", true);
    let r = s.err(json!({"hypotheses_verified": [], "tools_used": [], "summary": "s"}), "payload_mismatch");
    assert_eq!(r["message"], s.message(&["failures", "VERIFICATION", "empty_hypotheses"], &[]));
    let r = s.err(
        json!({"hypotheses_verified": [{"hypothesis": "h", "result": false, "evidence": "none"}], "tools_used": [], "summary": "s"}),
        "payload_mismatch",
    );
    assert_eq!(r["message"], s.message(&["failures", "VERIFICATION", "result_false_exists"], &[]));
}

#[test]
fn a_hypothesis_is_kept_with_what_its_evidence_is() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    s.explore();
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", true);
    let verify = |evidence: Value| {
        json!({"hypotheses_verified": [{"hypothesis": "login checks the store", "result": true, "evidence": evidence}],
               "tools_used": [], "summary": "s"})
    };
    // A run the server never made, or code that is not there: refused, naming it.
    let r = s.err(verify(json!("run:3")), "payload_mismatch");
    assert_eq!(
        r["message"],
        s.message(
            &["failures", "VERIFICATION", "hypothesis_run_unknown"],
            &[("index", "0"), ("run", "3"), ("runs", "none yet")]
        )
    );
    let r = s.err(verify(json!(["src/auth.py:40"])), "payload_mismatch");
    assert_eq!(
        r["message"],
        s.message(
            &["failures", "VERIFICATION", "hypothesis_evidence_invalid"],
            &[("index", "0"), ("evidence", "src/auth.py:40")]
        )
    );
    s.cp.orchestrator_state.witnessed_runs.push(passing_run(3, "VERIFICATION", 0));
    let payload = json!({"hypotheses_verified": [
        {"hypothesis": "login checks the store", "result": true, "evidence": "src/auth.py:2-3"},
        {"hypothesis": "the store is asked once", "result": true, "evidence": "run:3, src/auth.py:3"},
        {"hypothesis": "nothing else calls it", "result": true, "evidence": "only login is public"}],
        "tools_used": [], "summary": "s"});
    s.ok(payload);
    let kinds: Vec<(EvidenceKind, Vec<u32>)> =
        s.cp.orchestrator_state.hypotheses.iter().map(|h| (h.kind, h.runs.clone())).collect();
    assert_eq!(
        kinds,
        [(EvidenceKind::Code, vec![]), (EvidenceKind::WitnessedRun, vec![3]), (EvidenceKind::Reasoning, vec![])]
    );
}

// ---- TestTaskOrchestration

#[test]
fn register_tasks() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    let r = s.plan(&["task_1", "task_2"]);
    assert_eq!((r["step"].as_u64(), r["ready_substep"].as_str()), (Some(13), Some("READY_IMPL")));
    assert_eq!(r["task_progress"]["total"], 2);
    assert_eq!(r["task_progress"]["next_task"]["id"], "task_1");
    assert_eq!(s.last_effect, Some(Effect::CreateTaskBranch));
    // Idempotent: the same plan again gives the same tasks.
    let before = s.cp.orchestrator_state.tasks.clone();
    s.plan(&["task_1", "task_2"]);
    assert_eq!(s.cp.orchestrator_state.tasks, before);
    assert_eq!(s.last_effect, None, "the branch exists already");
}

#[test]
fn plan_validation() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    let fail = |s: &mut Session, tasks: Value, key: &str, vars: &[(&str, &str)]| {
        let r = s.err(
            json!({"tasks": tasks, "tools_used": [], "summary": "p"}),
            &s.contract.error(&catalogue::find(&["failures", "READY", key]).unwrap(), vars).error.clone(),
        );
        assert_eq!(r["message"], s.message(&["failures", "READY", key], vars));
    };
    fail(&mut s, json!([]), "empty_tasks", &[]);
    let t =
        json!({"id": "a", "description": "d", "status": "pending", "checklist": [{"item": "i", "status": "pending"}]});
    fail(&mut s, json!([t.clone(), t.clone()]), "duplicate_task_ids", &[]);
    fail(
        &mut s,
        json!([{"id": "a", "description": "d", "status": "pending", "checklist": []}]),
        "checklist_required",
        &[("task_id", "a")],
    );
    // A plan cannot declare a task completed that was never completed with evidence.
    fail(
        &mut s,
        json!([{"id": "a", "description": "d", "status": "completed", "checklist": [{"item": "i", "status": "pending"}]}]),
        "completed_unknown_task",
        &[("task_id", "a")],
    );
}

#[test]
fn complete_task_in_order() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.plan(&["task_1", "task_2"]);
    let r = s.complete("task_1");
    assert_eq!(r["task_progress"]["completed"], 1);
    assert_eq!(r["task_progress"]["next_task"]["id"], "task_2");
    let r = s.complete("task_2");
    assert_eq!(r["all_complete"], true);
    assert_eq!((r["step"].as_u64(), r["ready_substep"].as_str()), (Some(14), Some("READY_COMPLETE")));
}

#[test]
fn reject_wrong_order_unknown_and_already_completed() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.plan(&["task_1", "task_2"]);
    s.called(&["check_write_target"]);
    let done = |id: &str| json!({"task_id": id, "checklist": [{"item": format!("{id} code"), "status": "done", "evidence": "src/auth.py:3"}], "tools_used": ["check_write_target"], "summary": "s"});
    let r = s.err(done("task_2"), "wrong_order");
    assert_eq!(
        r["message"],
        s.message(&["failures", "READY", "wrong_order"], &[("expected_task", "task_1"), ("task_id", "task_2")])
    );
    s.err(done("task_9"), "unknown_task");
    s.complete("task_1");
    s.called(&["check_write_target"]);
    s.err(done("task_1"), "already_completed");
}

#[test]
fn each_task_needs_check_write_target_called_for_it() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.plan(&["task_1", "task_2"]);
    s.complete("task_1");
    let r = s.err(
        json!({"task_id": "task_2", "checklist": [{"item": "task_2 code", "status": "done", "evidence": "src/auth.py:3"}], "tools_used": ["check_write_target"], "summary": "s"}),
        "payload_mismatch",
    );
    assert_eq!(r["message"], s.message(&["common_failures", "tools_not_called"], &[("tools", "check_write_target")]));
}

#[test]
fn block_incomplete_implementation() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.err(json!({"summary": "done?"}), "no_tasks");
    s.plan(&["task_1", "task_2"]);
    s.complete("task_1");
    let r = s.err(json!({"summary": "done?"}), "incomplete_tasks");
    assert_eq!(r["message"], s.message(&["failures", "READY", "incomplete_tasks"], &[("count", "1")]));
}

#[test]
fn allow_complete_implementation() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.plan(&["task_1"]);
    s.complete("task_1");
    assert_eq!(s.finish()["phase"], "POST_IMPL_VERIFY");
}

// ---- v1.16 checklist

fn at_impl() -> Session {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.plan(&["t"]);
    s.called(&["check_write_target"]);
    s
}

fn checklist(s: &mut Session, items: Value, key: &str, vars: &[(&str, &str)]) {
    let r = s.err(
        json!({"task_id": "t", "checklist": items, "tools_used": ["check_write_target"], "summary": "s"}),
        "payload_mismatch",
    );
    assert_eq!(r["message"], s.message(&["failures", "READY", key], vars), "{r}");
}

#[test]
fn checklist_must_report_every_registered_item() {
    let mut s = at_impl();
    checklist(&mut s, json!([]), "checklist_items_mismatch", &[]);
    checklist(
        &mut s,
        json!([{"item": "other", "status": "done", "evidence": "src/auth.py:3"}]),
        "checklist_items_mismatch",
        &[],
    );
    checklist(
        &mut s,
        json!([{"item": "t code", "status": "pending"}]),
        "checklist_item_pending",
        &[("item", "t code")],
    );
    checklist(
        &mut s,
        json!([{"item": "t code", "status": "skipped", "reason": "too short"}]),
        "checklist_reason_required",
        &[("item", "t code")],
    );
    checklist(
        &mut s,
        json!([{"item": "t code", "status": "done"}]),
        "checklist_evidence_required",
        &[("item", "t code")],
    );
}

#[test]
fn evidence_must_point_at_real_code_inside_the_repository() {
    let mut s = at_impl();
    let done = |e: &str| json!([{"item": "t code", "status": "done", "evidence": e}]);
    checklist(&mut s, done("auth.py line 3"), "checklist_evidence_format_invalid", &[("evidence", "auth.py line 3")]);
    checklist(&mut s, done("src/auth.py:3-2"), "checklist_evidence_range_reversed", &[("evidence", "src/auth.py:3-2")]);
    checklist(&mut s, done("../outside.py:1"), "checklist_evidence_outside_repo", &[("file_path", "../outside.py")]);
    checklist(
        &mut s,
        done("src/missing.py:1"),
        "checklist_evidence_file_not_found",
        &[("file_path", "src/missing.py")],
    );
    checklist(
        &mut s,
        done("src/auth.py:3-40"),
        "checklist_evidence_line_out_of_range",
        &[("line", "40"), ("total", "4")],
    );
    checklist(&mut s, done("src/stub.py:1-2"), "checklist_evidence_empty_impl", &[("evidence", "src/stub.py:1-2")]);
    s.ok(json!({"task_id": "t", "checklist": done("src/auth.py:2-3"), "tools_used": ["check_write_target"], "summary": "s"}));
}

#[test]
fn lines_without_code_are_evidence_when_the_session_wrote_them() {
    let mut s = at_impl();
    let done = |e: &str| json!([{"item": "t code", "status": "done", "evidence": e}]);
    // A docstring or a signature alone: evidence when this session wrote it; a stub (`pass`)
    // never is.
    s.facts.changed_lines.insert("src/stub.py".into(), [1].into());
    checklist(&mut s, done("src/stub.py:1-2"), "checklist_evidence_empty_impl", &[("evidence", "src/stub.py:1-2")]);
    s.facts.evidence.insert(
        "src/doc.py".into(),
        EvidenceFile::Lines(vec!["def f():".into(), "    \"\"\"Says what f does.\"\"\"".into()]),
    );
    s.facts.changed_lines.insert("src/doc.py".into(), [2].into());
    s.ok(json!({"task_id": "t", "checklist": done("src/doc.py:1-2"), "tools_used": ["check_write_target"], "summary": "s"}));
}

#[test]
fn readys_completion_flags_done_items_citing_lines_the_session_did_not_change() {
    let mut s = at_impl();
    s.facts.changed_lines.insert("src/auth.py".into(), [1].into());
    let items = json!([
        {"item": "t code", "status": "done", "evidence": "src/auth.py:2-3"},
    ]);
    s.ok(json!({"task_id": "t", "checklist": items, "tools_used": ["check_write_target"], "summary": "s"}));
    let r = s.finish();
    assert_eq!(r["phase"], "POST_IMPL_VERIFY", "a flag, not a refusal: {r}");
    let warning = r["warning"].as_str().unwrap_or_default();
    assert_eq!(warning, s.message(&["session_messages", "evidence_unchanged"], &[("items", "t: src/auth.py:2-3")]));
    assert!(s.cp.orchestrator_state.tasks[0].checklist[0].unchanged);
}

#[test]
fn an_item_that_says_its_code_was_already_right_is_not_flagged() {
    let mut s = at_impl();
    s.facts.changed_lines.insert("src/auth.py".into(), [].into());
    let items = json!([{"item": "t code", "status": "done", "evidence": "src/auth.py:2-3",
                        "already_right": "login already checks the store"}]);
    s.ok(json!({"task_id": "t", "checklist": items, "tools_used": ["check_write_target"], "summary": "s"}));
    let r = s.finish();
    assert!(r.get("warning").is_none_or(Value::is_null), "{r}");
    let item = &s.cp.orchestrator_state.tasks[0].checklist[0];
    assert!(!item.unchanged && item.already_right.as_deref() == Some("login already checks the store"));
}

#[test]
fn skipped_with_a_reason_completes_the_task() {
    let mut s = at_impl();
    s.ok(json!({"task_id": "t", "checklist": [{"item": "t code", "status": "skipped", "reason": "already handled by the base class"}],
                "tools_used": ["check_write_target"], "summary": "s"}));
    assert_eq!(s.cp.orchestrator_state.tasks[0].status, TaskStatus::Completed);
}

// ---- TestPostImplVerify

fn at_verify(f: Flags) -> Session {
    let mut s = Session::new(Intent::Implement, f);
    s.through_exploration();
    s.implement(&["task_1"]);
    s
}

#[test]
fn passed_to_pre_commit() {
    let mut s = at_verify(Flags::default());
    assert_eq!(s.post(true)["phase"], "PRE_COMMIT");
}

#[test]
fn a_claimed_pass_needs_a_witnessed_run_where_a_check_can_run() {
    let mut s = at_verify(Flags::default());
    s.facts.runnable_checks = vec!["python3 -m unittest".into()];
    let verdict =
        json!({"verifier_used": "tests.md", "passed": true, "details": "ok", "tools_used": [], "summary": "v"});
    let r = s.err(verdict.clone(), "verification_unwitnessed");
    assert!(r["message"].as_str().unwrap_or_default().contains("`python3 -m unittest`"), "{r}");
    // A baseline (before READY) does not speak for the changed code; a run after the change does.
    let st = &mut s.cp.orchestrator_state;
    let run = |id: u32, after_ready_visits: u32| passing_run(id, "POST_IMPL_VERIFY", after_ready_visits);
    st.witnessed_runs.push(run(1, 0));
    s.err(verdict.clone(), "verification_unwitnessed");
    let visits = s.cp.orchestrator_state.ready_visits;
    s.cp.orchestrator_state.witnessed_runs.push(run(2, visits));
    assert_eq!(s.ok(verdict)["phase"], "PRE_COMMIT");
}

#[test]
fn a_claimed_pass_stands_where_no_check_can_run() {
    let mut s = at_verify(Flags::default());
    s.facts.runnable_checks = Vec::new();
    assert_eq!(s.post(true)["phase"], "PRE_COMMIT");
}

#[test]
fn passed_quick_to_complete() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.quick = true));
    s.doc();
    s.frame();
    s.implement(&["task_1"]);
    assert_eq!(s.last_effect, None, "quick has no task branch");
    let r = s.post(true);
    assert_eq!(r["phase"], "SESSION_COMPLETE");
    assert_eq!(r["message"], s.message(&["success", "POST_IMPL_VERIFY", "session_complete_quick"], &[]));
}

#[test]
fn failed_to_ready() {
    let mut s = at_verify(Flags::default());
    let r = s.post(false);
    assert_eq!((r["phase"].as_str(), r["step"].as_u64()), (Some("READY"), Some(12)));
    assert!(r["instruction"].as_str().unwrap().contains("pytest"), "the revert reason is in the instruction");
    assert_eq!(s.cp.orchestrator_state.tasks[0].failure_count, 1);
    let instruction = r["instruction"].as_str().unwrap();
    assert!(instruction.contains("task_1 (Completed, failed verification 1x)"), "{instruction}");
}

#[test]
fn intervention_after_3() {
    let mut s = at_verify(Flags::default());
    for round in 1..=3 {
        let r = s.post(false);
        if round < 3 {
            assert_eq!(r["phase"], "READY");
            // Revert: the completed task stays, a fix task is added.
            let fix = format!("fix_{round}");
            s.ok(json!({"tasks": [
                {"id": "task_1", "description": "do task_1", "status": "completed"},
                {"id": fix, "description": "fix", "status": "pending", "checklist": [{"item": format!("{fix} code"), "status": "pending"}]}
            ], "tools_used": [], "summary": "replan"}));
            s.complete(&fix);
            s.finish();
        } else {
            assert_eq!(r["phase"], "VERIFY_INTERVENTION");
        }
    }
}

// ---- TestBranchIntervention

#[test]
fn stale_branch_detected() {
    let s = Session::with_stale(Intent::Implement, Flags::default(), true);
    assert_eq!((s.phase(), s.step()), (Phase::BranchIntervention, 2));
}

#[test]
fn no_stale_branch_skips() {
    let s = Session::new(Intent::Implement, Flags::default());
    assert_eq!(s.phase(), Phase::DocumentResearch);
}

#[test]
fn choices_delete_merge_continue() {
    for (choice, chosen) in [("delete", BranchChoice::Delete), (" merge ", BranchChoice::Merge)] {
        let mut s = Session::with_stale(Intent::Implement, Flags::default(), true);
        let r = s.ok(json!({"choice": choice, "tools_used": [], "summary": "user chose"}));
        assert_eq!(r["phase"], "DOCUMENT_RESEARCH");
        assert_eq!(s.last_effect, Some(Effect::BranchChoice(chosen)));
    }
    let mut s = Session::with_stale(Intent::Implement, flags(|f| f.no_doc_research = true), true);
    s.ok(json!({"choice": "continue", "tools_used": [], "summary": "stay"}));
    assert_eq!(s.phase(), Phase::QueryFrame);
    assert_eq!(s.cp.orchestrator_state.branch_policy.as_deref(), Some("continue"));
    let mut s = Session::with_stale(Intent::Implement, Flags::default(), true);
    let r = s.err(json!({"choice": "rebase", "tools_used": [], "summary": "x"}), "payload_mismatch");
    assert_eq!(r["message"], s.message(&["failures", "BRANCH_INTERVENTION", "invalid_choice"], &[]));
}

#[test]
fn continue_without_a_task_branch_makes_one_at_ready() {
    // The effect adopts the branch HEAD is on; with none adopted (HEAD on the base), READY
    // creates a task branch as a fresh session would, so PRE_COMMIT has one.
    let mut s = Session::with_stale(Intent::Implement, flags(|f| f.fast = true), true);
    s.ok(json!({"choice": "continue", "tools_used": [], "summary": "stay"}));
    assert_eq!(s.last_effect, Some(Effect::BranchChoice(BranchChoice::Continue)));
    assert_eq!(s.cp.orchestrator_state.branch_policy.as_deref(), Some("continue"));
    s.doc();
    s.frame();
    s.plan(&["t"]);
    assert_eq!(s.last_effect, Some(Effect::CreateTaskBranch));
}

// ---- TestVerifyIntervention and TestLoopSafetyValves

fn fail_three_times(s: &mut Session) {
    for round in 0..3 {
        s.post(false);
        if round < 2 {
            s.plan(&["task_1"]);
            s.cp.orchestrator_state.tasks[0].status = TaskStatus::Pending;
            s.complete("task_1");
            s.finish();
        }
    }
}

#[test]
fn task_failure_count_triggers_intervention_and_intervention_resets_it() {
    let mut s = at_verify(Flags::default());
    fail_three_times(&mut s);
    assert_eq!(s.phase(), Phase::VerifyIntervention);
    let r = s.intervene();
    assert_eq!((r["phase"].as_str(), r["step"].as_u64()), (Some("READY"), Some(12)));
    assert_eq!(s.cp.orchestrator_state.counters.intervention_count, 1);
    assert!(s.cp.orchestrator_state.tasks.iter().all(|t| t.failure_count == 0));
    assert_eq!(s.cp.orchestrator_state.counters.verification_failure_count, 0);
}

#[test]
fn no_intervention_flag_skips() {
    let mut s = at_verify(flags(|f| f.no_intervention = true));
    fail_three_times(&mut s);
    assert_eq!(s.phase(), Phase::Ready);
}

#[test]
fn user_escalation_after_2_interventions() {
    let mut s = at_verify(Flags::default());
    for _ in 0..2 {
        fail_three_times(&mut s);
        assert_eq!(s.phase(), Phase::VerifyIntervention);
        s.intervene();
        s.plan(&["task_1"]);
        s.cp.orchestrator_state.tasks[0].status = TaskStatus::Pending;
        s.complete("task_1");
        s.finish();
    }
    fail_three_times(&mut s);
    let r = serde_json::to_value(code_intel_workflow::engine::response::status(&s.contract, &s.cp)).unwrap();
    let instruction = r["instruction"].as_str().unwrap();
    assert!(instruction.contains(&s.message(&["failures", "VERIFY_INTERVENTION", "user_escalation"], &[])));
    assert!(
        instruction.contains(&s.message(&["failures", "VERIFY_INTERVENTION", "escalation_count"], &[("count", "2")]))
    );
    s.intervene();
    assert_eq!(s.cp.orchestrator_state.counters.intervention_count, 3);
}

#[test]
fn quality_revert_count_increments_and_forces_completion_at_3() {
    let mut s = at_verify(Flags::default());
    s.post(true);
    s.pre_commit();
    for round in 1..=3 {
        let r = s.quality(&["naming is inconsistent"]);
        assert_eq!(s.cp.orchestrator_state.counters.quality_revert_count, round);
        if round < 3 {
            assert_eq!(r["phase"], "READY");
            s.plan(&["task_1"]);
            s.cp.orchestrator_state.tasks[0].status = TaskStatus::Pending;
            s.complete("task_1");
            s.finish();
            s.post(true);
            s.pre_commit();
        } else {
            assert_eq!(r["phase"], "MERGE");
            assert_eq!(r["warning"], s.message(&["failures", "QUALITY_REVIEW", "quality_forced_completion"], &[]));
        }
    }
    let r = s.merge();
    assert_eq!(r["phase"], "SESSION_COMPLETE");
}

#[test]
fn intervention_count_increments() {
    let mut s = at_verify(Flags::default());
    fail_three_times(&mut s);
    s.err(json!({"prompt_used": "p.md", "tools_used": [], "summary": "s"}), "payload_mismatch");
    s.intervene();
    assert_eq!(s.cp.orchestrator_state.counters.intervention_count, 1);
}

// ---- TestCompactionResilience

#[test]
fn compaction_mismatch_returns_summaries_and_adopts_the_count() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    s.frame();
    s.called(&["find_definitions", "search_text"]);
    let r = s.ok(
        json!({"explored_files": ["src/auth.py"], "findings": ["f"], "tools_used": ["find_definitions", "search_text"],
                         "summary": "explored", "compaction_count": 1}),
    );
    assert_eq!(r["compaction_count"], 1);
    let summaries = &r["phase_summaries"];
    assert_eq!(summaries["step_03_DOCUMENT_RESEARCH"], "auth rules read");
    assert_eq!(summaries["step_04_QUERY_FRAME"], "add logout to Auth");
    let r = s.ok(json!({"needs_more_information": false, "reason": "nothing more needed", "tools_used": [], "summary": "g", "compaction_count": 1}));
    assert!(r.get("phase_summaries").is_none(), "summaries come back once per mismatch");
}

#[test]
fn get_session_status_returns_expected_payload() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    let r = serde_json::to_value(code_intel_workflow::engine::response::status(&s.contract, &s.cp)).unwrap();
    assert_eq!(r["phase"], "QUERY_FRAME");
    assert!(r["expected_payload"].as_object().is_some_and(|o| o.contains_key("target_symbols")));
    assert_eq!(r["completed_steps"], json!([1, 3]));
}

#[test]
fn only_summaries_are_stored() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.doc();
    let stored = serde_json::to_string(&s.cp).unwrap();
    assert!(stored.contains("auth rules read"));
    assert!(!stored.contains("docs/auth.md"), "documents_reviewed is not persisted");
}

// ---- TestEndToEnd

#[test]
fn default_full_flow() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.implement(&["task_1", "task_2"]);
    s.post(true);
    s.pre_commit();
    assert!(matches!(s.last_effect, Some(Effect::Commit { .. })));
    s.quality(&[]);
    let r = s.merge();
    assert_eq!(s.last_effect, Some(Effect::Merge));
    assert_eq!(
        r["message"],
        s.message(&["success", "MERGE", "merge_success"], &[("from_branch", "llm_task_s1"), ("to_branch", "main")])
    );
    assert_eq!(r["call"], "record_outcome");
    s.err(json!({"summary": "more?"}), "no_active_session");
}

#[test]
fn quick_flow() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.quick = true));
    s.doc();
    assert_eq!(s.frame()["phase"], "READY");
    s.implement(&["t"]);
    assert_eq!(s.post(true)["phase"], "SESSION_COMPLETE");
}

#[test]
fn quick_no_verify_flow() {
    let mut s = Session::new(
        Intent::Implement,
        flags(|f| {
            f.quick = true;
            f.no_verify = true
        }),
    );
    s.doc();
    s.frame();
    s.plan(&["t"]);
    s.complete("t");
    let r = s.finish();
    assert_eq!(r["phase"], "SESSION_COMPLETE");
    assert_eq!(r["message"], s.message(&["success", "READY", "session_complete_no_verify_quick"], &[]));
}

#[test]
fn fast_flow() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.fast = true));
    s.doc();
    assert_eq!(s.frame()["phase"], "READY");
    s.implement(&["t"]);
    s.post(true);
    assert_eq!(s.pre_commit()["phase"], "MERGE", "fast skips QUALITY_REVIEW");
    assert_eq!(s.merge()["phase"], "SESSION_COMPLETE");
}

#[test]
fn no_verify_flow() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.no_verify = true));
    s.through_exploration();
    s.plan(&["t"]);
    s.complete("t");
    assert_eq!(s.finish()["phase"], "PRE_COMMIT");
}

/// A session of `intent` brought to Q3 (no to Q1 and Q2), with the answer that enters it.
fn at_q3(intent: Intent) -> (Session, serde_json::Value) {
    let mut s = Session::new(intent, Flags::default());
    s.doc();
    s.frame();
    s.explore();
    s.gate("needs_more_information", false);
    let q3 = s.gate("has_unverified_hypotheses", false);
    (s, q3)
}

#[test]
fn investigation_flow() {
    let (mut s, q3) = at_q3(Intent::Investigate);
    // Q3 speaks of "the modification": an investigation is told how to read it.
    let reading = s.message(&["session_messages", "investigation_reading"], &[]);
    assert!(q3["instruction"].as_str().unwrap().contains(&reading), "{q3}");
    let r = s.gate("needs_impact_analysis", false);
    assert_eq!(r["phase"], "SESSION_COMPLETE");
    assert_eq!(r["message"], s.message(&["success", "Q3", "investigation_complete"], &[]));
    let mut s = Session::new(Intent::Question, flags(|f| f.no_doc_research = true));
    s.frame();
    s.explore();
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", false);
    let impact = s.gate("needs_impact_analysis", true);
    assert!(impact["instruction"].as_str().unwrap().contains(&reading), "{impact}");
    let r = s.impact();
    assert_eq!(r["message"], s.message(&["success", "IMPACT_ANALYSIS", "investigation_complete"], &[]));
}

#[test]
fn only_explore_ends_after_exploration() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.only_explore = true));
    s.doc();
    s.frame();
    s.explore();
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", false);
    assert_eq!(s.gate("needs_impact_analysis", false)["phase"], "SESSION_COMPLETE");
}

#[test]
fn only_verify_runs_verification_alone() {
    let mut s = Session::new(Intent::Implement, flags(|f| f.only_verify = true));
    assert_eq!(s.phase(), Phase::PostImplVerify);
    assert_eq!(s.post(true)["phase"], "SESSION_COMPLETE");
    let mut s = Session::new(Intent::Implement, flags(|f| f.only_verify = true));
    let r = s.post(false);
    assert_eq!(r["message"], s.message(&["session_messages", "verification_failed_only_verify"], &[]));
}

#[test]
fn exploration_all_skip_to_ready() {
    let mut s = at_q1();
    s.gate("needs_more_information", false);
    s.gate("has_unverified_hypotheses", false);
    assert_eq!(s.gate("needs_impact_analysis", false)["phase"], "READY");
}

#[test]
fn verification_failure_revert_and_retry() {
    let mut s = at_verify(Flags::default());
    s.post(false);
    s.ok(json!({"tasks": [
        {"id": "task_1", "description": "do task_1", "status": "completed"},
        {"id": "fix_1", "description": "fix the failure", "status": "pending", "checklist": [{"item": "fix_1 code", "status": "pending"}]}
    ], "tools_used": [], "summary": "replan"}));
    assert_eq!(s.cp.orchestrator_state.tasks[0].status, TaskStatus::Completed);
    s.complete("fix_1");
    s.finish();
    assert_eq!(s.post(true)["phase"], "PRE_COMMIT");
}

#[test]
fn quality_review_revert_flow() {
    let mut s = at_verify(Flags::default());
    s.post(true);
    s.pre_commit();
    assert_eq!(s.quality(&["dead code left in auth.py"])["phase"], "READY");
    s.plan(&["task_1"]);
    s.cp.orchestrator_state.tasks[0].status = TaskStatus::Pending;
    s.complete("task_1");
    s.finish();
    s.post(true);
    s.pre_commit();
    assert_eq!(s.quality(&[])["phase"], "MERGE");
}

#[test]
fn pre_commit_requires_a_branch_a_message_and_reasons() {
    let mut s = at_verify(Flags::default());
    s.post(true);
    // A checkpoint written by an earlier version after `continue` has no task branch.
    s.cp.orchestrator_state.task_branch = None;
    s.called(&["review_changes"]);
    let r = s.err(json!({"review_prompt_used": "g.md", "reviewed_files": [], "commit_message": "c", "tools_used": ["review_changes"], "summary": "s"}), "branch_manager_not_found");
    assert_eq!(r["requires_user_intervention"], true);
    s.cp.orchestrator_state.task_branch = Some("llm_task_s1".into());
    s.err(json!({"review_prompt_used": "g.md", "reviewed_files": [], "commit_message": " ", "tools_used": ["review_changes"], "summary": "s"}), "missing_commit_message");
    s.err(json!({"review_prompt_used": "g.md", "reviewed_files": [{"file": "junk.txt", "decision": "discard"}], "commit_message": "c", "tools_used": ["review_changes"], "summary": "s"}), "review_failed");
}

#[test]
fn merge_follows_the_review_and_merges_the_task_branch() {
    let mut s = at_verify(Flags::default());
    s.post(true);
    s.pre_commit();
    assert_eq!(s.phase(), Phase::QualityReview);
    s.quality(&[]);
    assert_eq!(s.phase(), Phase::Merge);
    let r = s.merge();
    assert_eq!(s.last_effect, Some(Effect::Merge));
    assert_eq!(
        r["message"],
        s.message(&["success", "MERGE", "merge_success"], &[("from_branch", "llm_task_s1"), ("to_branch", "main")])
    );
    // A task branch lost from the checkpoint is refused, never merged into a guess.
    let mut s = at_verify(flags(|f| f.no_quality = true));
    s.post(true);
    s.pre_commit();
    s.cp.orchestrator_state.task_branch = None;
    s.err(json!({"summary": "merge"}), "branch_manager_not_found");
}

#[test]
fn non_object_data_is_invalid() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    let r = s.err(json!("just text"), "invalid_data");
    assert!(r["message"].as_str().unwrap().contains("JSON object"));
}

#[test]
fn every_task_keeps_its_own_implementation_summary() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    s.implement(&["t1", "t2"]);
    let summaries = s.cp.summaries();
    assert_eq!(summaries.get("step_13_READY_IMPL#t1").map(String::as_str), Some("t1 done"), "{summaries:?}");
    assert_eq!(summaries.get("step_13_READY_IMPL#t2").map(String::as_str), Some("t2 done"), "{summaries:?}");
    assert!(!summaries.contains_key("step_13_READY_IMPL"), "{summaries:?}");
    assert_eq!(summaries.get("step_14_READY_COMPLETE").map(String::as_str), Some("all tasks done"));
}

#[test]
fn a_task_schema_says_what_each_checklist_field_means_once() {
    let mut s = Session::new(Intent::Implement, Flags::default());
    s.through_exploration();
    let r = s.ok(json!({"tasks": [{"id": "t1", "description": "do it", "status": "pending", "checklist": [
        {"item": "first", "status": "pending"}, {"item": "second", "status": "pending"}, {"item": "third", "status": "pending"}
    ]}], "tools_used": [], "summary": "plan"}));
    let prefix = r["expected_payload_schema"]["properties"]["checklist"]["prefixItems"].as_array().unwrap().clone();
    assert_eq!(prefix.len(), 3);
    let described = |item: &serde_json::Value| item["properties"]["evidence"].get("description").is_some();
    assert!(described(&prefix[0]), "{}", prefix[0]);
    assert!(!described(&prefix[1]) && !described(&prefix[2]), "{}", prefix[1]);
    assert_eq!(prefix[2]["properties"]["item"]["const"], "third");
    assert_eq!(prefix[1]["anyOf"], prefix[0]["anyOf"], "the rules stay on every item");
}

#[test]
fn an_implementation_is_not_told_it_modifies_nothing() {
    let (s, q3) = at_q3(Intent::Implement);
    let reading = s.message(&["session_messages", "investigation_reading"], &[]);
    assert_eq!(q3["phase"], "Q3");
    assert!(!q3["instruction"].as_str().unwrap().contains(&reading), "{q3}");
}

/// A passing run of the fixture's verify command, as the server records one.
fn passing_run(id: u32, phase: &str, after_ready_visits: u32) -> WitnessedRun {
    WitnessedRun {
        id,
        verify_command: "python3 -m unittest".into(),
        command: "python3 -m unittest".into(),
        phase: phase.into(),
        after_ready_visits,
        exit_code: 0,
        timed_out: false,
        duration_ms: 1,
        runner: None,
        passed: None,
        failed: None,
        skipped: None,
        failing: Vec::new(),
        tail: String::new(),
    }
}
