//! `start_session` and `submit_phase`: the session in, the payload and the adapter's facts in,
//! the new session and the response out. Nothing here touches the disk or git.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::evidence::{self, EvidenceFile};
use super::flow::{self, Next};
use super::phase::{self, Phase, ReadyStep};
use super::state::{
    ChecklistItem, Checkpoint, Counters, Flags, Intent, ItemStatus, PhaseState, SessionState, SummaryRecord, Task,
    TaskStatus,
};
use crate::contract::Contract;

/// The code-intelligence tools: what EXPLORATION's "two distinct tools" counts.
pub const CODE_INTEL_TOOLS: &[&str] = &[
    "search_text",
    "search_files",
    "find_definitions",
    "find_references",
    "get_symbols",
    "analyze_structure",
    "get_function_at_line",
    "analyze_impact",
    "query",
    "semantic_search",
    "fetch_chunk_detail",
];

/// The workflow tools this server serves besides the code-intelligence ones.
pub const SESSION_TOOLS: &[&str] = &[
    "check_write_target",
    "add_explored_files",
    "review_changes",
    "cleanup_stale_branches",
    "get_session_status",
    "start_session",
    "sync_index",
    "record_outcome",
];

/// Whether `tool` is served by this server, so that its use can be checked.
pub fn is_server_tool(tool: &str) -> bool {
    CODE_INTEL_TOOLS.contains(&tool) || SESSION_TOOLS.contains(&tool)
}

/// The slots QUERY_FRAME asks for, each with its hint in `query_frame_hints`.
pub const QUERY_FRAME_SLOTS: &[&str] = &["target_feature", "trigger_condition", "observed_issue", "desired_action"];

/// Minimum length of a gate's reason and of a skipped checklist item's reason.
pub const MIN_REASON_CHARS: usize = 10;

/// What the adapter learned outside the engine for this submit.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// What each evidence path of the payload (see [`evidence_paths`]) points at.
    pub evidence: BTreeMap<String, EvidenceFile>,
    /// Whether `semantic_search` can run (a Forest index exists).
    pub semantic_available: bool,
}

/// Git work the adapter must do for an accepted submit before the new state counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// READY planning: create the `llm_task_*` branch and switch to it.
    CreateTaskBranch,
    /// BRANCH_INTERVENTION `delete` or `merge`.
    BranchChoice(String),
    /// PRE_COMMIT: commit the task branch's changes, leaving out the discarded files.
    Commit { message: String, discard: Vec<String> },
    /// MERGE: merge the task branch into its base.
    Merge,
}

#[derive(Debug, Clone)]
pub struct Accepted {
    pub session: Checkpoint,
    pub response: Value,
    pub effect: Option<Effect>,
}

/// A refused submit: the response to send (`isError`). The session is unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub response: Value,
}

pub struct StartParams {
    pub session_id: String,
    pub intent: Intent,
    pub query: String,
    pub flags: Flags,
    pub created_at: String,
    /// `llm_task_*` branches left from earlier sessions.
    pub stale_branches: bool,
}

pub fn start(contract: &Contract, p: StartParams) -> (Checkpoint, Value) {
    let first = flow::first(p.intent, &p.flags, p.stale_branches);
    let state = SessionState {
        session_id: p.session_id,
        intent: p.intent,
        query: p.query,
        flags: p.flags,
        phase_state: PhaseState { current_phase: first, step: phase::step(first, None), ready_substep: None },
        branch_policy: None,
        task_branch: None,
        base_branch: None,
        base_commit: None,
        user_changes: BTreeMap::new(),
        counters: Counters::default(),
        compaction_count: 0,
        tasks: Vec::new(),
        completed_steps: vec![1],
        explored_files: BTreeSet::new(),
        tools_called: BTreeSet::new(),
        revert_reason: None,
        quality_review_passed: false,
        forced_completion: false,
        created_at: p.created_at,
        learned: Default::default(),
    };
    let session = Checkpoint { orchestrator_state: state, phase_payloads: BTreeMap::new() };
    let response = success(contract, &session, Map::new());
    (session, response)
}

/// The response describing where a session is: what `get_session_status` returns, and the body
/// of every success.
pub fn status(contract: &Contract, session: &Checkpoint) -> Value {
    let mut extra = Map::new();
    extra.insert("completed_steps".into(), json!(session.orchestrator_state.completed_steps));
    extra.insert("intent".into(), json!(session.orchestrator_state.intent));
    extra.insert("flags".into(), json!(session.orchestrator_state.flags));
    extra.insert("counters".into(), json!(session.orchestrator_state.counters));
    extra.insert("explored_files".into(), json!(session.orchestrator_state.explored_files.len()));
    extra.insert("task_branch".into(), json!(session.orchestrator_state.task_branch));
    extra.insert("base_branch".into(), json!(session.orchestrator_state.base_branch));
    success(contract, session, extra)
}

/// A success response for the session's current phase, with `extra` fields merged in.
fn success(contract: &Contract, session: &Checkpoint, extra: Map<String, Value>) -> Value {
    let state = &session.orchestrator_state;
    let (phase, ready) = (state.phase(), state.ready_step());
    let mut body = Map::new();
    body.insert("success".into(), json!(true));
    body.insert("session_id".into(), json!(state.session_id));
    body.insert("phase".into(), json!(phase.name()));
    body.insert("step".into(), json!(phase::step(phase, ready)));
    if phase == Phase::Ready {
        body.insert("ready_substep".into(), json!(phase::contract_key(phase, ready)));
    }
    body.insert("instruction".into(), json!(instruction(contract, state)));
    body.insert("expected_payload".into(), expected_payload(contract, state));
    body.insert("call".into(), json!(if state.is_complete() { "start_session" } else { "submit_phase" }));
    body.insert("compaction_count".into(), json!(state.compaction_count));
    if phase == Phase::Ready {
        body.insert("task_progress".into(), task_progress(state));
    }
    for (k, v) in extra {
        body.insert(k, v);
    }
    Value::Object(body)
}

fn instruction(contract: &Contract, state: &SessionState) -> String {
    let (phase, ready) = (state.phase(), state.ready_step());
    if phase == Phase::SessionComplete {
        return contract.message(&["session_messages", "session_complete"], &[]);
    }
    if phase == Phase::VerifyIntervention && state.counters.intervention_count >= flow::INTERVENTIONS_BEFORE_ESCALATION
    {
        let count = state.counters.intervention_count.to_string();
        return format!(
            "{}\n{}",
            contract.message(&["failures", "VERIFY_INTERVENTION", "escalation_count"], &[("count", &count)]),
            contract.message(&["failures", "VERIFY_INTERVENTION", "user_escalation"], &[])
        );
    }
    let key = phase::contract_key(phase, ready);
    let mut text = contract
        .get(&["phases", key, "instruction"])
        .and_then(serde_yaml::Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("(missing contract instruction: phases.{key})"));
    if key == "READY_PLAN"
        && let Some(reason) = &state.revert_reason
    {
        let tasks: Vec<String> = state.tasks.iter().map(|t| format!("{} ({:?})", t.id, t.status)).collect();
        let note = contract
            .message(&["session_messages", "revert_to_planning"], &[("reason", reason), ("tasks", &tasks.join(", "))]);
        text = format!("{note}\n{text}");
    }
    text
}

fn expected_payload(contract: &Contract, state: &SessionState) -> Value {
    if state.is_complete() {
        return json!({});
    }
    let key = phase::contract_key(state.phase(), state.ready_step());
    contract
        .get(&["phases", key, "expected_payload"])
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or_else(|| json!({}))
}

fn task_progress(state: &SessionState) -> Value {
    let completed = state.tasks.iter().filter(|t| t.status == TaskStatus::Completed).count();
    let next = state.pending_tasks().next();
    json!({
        "total": state.tasks.len(),
        "completed": completed,
        "pending": state.tasks.len() - completed,
        "next_task": next.map(|t| json!({
            "id": t.id,
            "description": t.description,
            "checklist": t.checklist.iter().map(|c| c.item.clone()).collect::<Vec<_>>(),
        })),
        "tasks": state.tasks.iter().map(|t| json!({
            "id": t.id,
            "status": t.status,
            "checklist_total": t.checklist.len(),
            "checklist_done": t.checklist.iter().filter(|c| c.status != ItemStatus::Pending).count(),
            "failure_count": t.failure_count,
        })).collect::<Vec<_>>(),
    })
}

/// A refusal carrying the contract's `{error, message}` at `path` and the re-instruction.
pub fn reject(contract: &Contract, session: &Checkpoint, path: &[&str], vars: &[(&str, &str)]) -> Rejected {
    let msg = contract.error(path, vars);
    let mut extra = Map::new();
    if contract.get(path).and_then(|n| n.get("requires_user_intervention")).and_then(serde_yaml::Value::as_bool)
        == Some(true)
    {
        extra.insert("requires_user_intervention".into(), json!(true));
    }
    if let Some(instr) = contract.get(path).and_then(|n| n.get("instruction")).and_then(serde_yaml::Value::as_str) {
        extra.insert("user_instruction".into(), json!(instr));
    }
    rejection(contract, session, msg.error, msg.message, extra)
}

fn rejection(
    contract: &Contract,
    session: &Checkpoint,
    error: String,
    message: String,
    extra: Map<String, Value>,
) -> Rejected {
    let state = &session.orchestrator_state;
    let (phase, ready) = (state.phase(), state.ready_step());
    let mut body = Map::new();
    body.insert("success".into(), json!(false));
    body.insert("error".into(), json!(error));
    body.insert("message".into(), json!(message));
    body.insert("session_id".into(), json!(state.session_id));
    body.insert("current_phase".into(), json!(phase.name()));
    body.insert("step".into(), json!(phase::step(phase, ready)));
    body.insert("instruction".into(), json!(instruction(contract, state)));
    body.insert("expected_payload".into(), expected_payload(contract, state));
    body.insert("call".into(), json!("submit_phase"));
    body.insert("compaction_count".into(), json!(state.compaction_count));
    body.insert("hint".into(), json!(contract.message(&["hints", "phase_blocked_hint"], &[])));
    for (k, v) in extra {
        body.insert(k, v);
    }
    Rejected { response: Value::Object(body) }
}

/// Keys that identify each phase's payload, for telling a payload meant for another phase.
fn own_keys(phase: Phase, ready: Option<ReadyStep>) -> &'static [&'static str] {
    match (phase, ready) {
        (Phase::BranchIntervention, _) => &["choice"],
        (Phase::DocumentResearch, _) => &["documents_reviewed"],
        (Phase::QueryFrame, _) => &[
            "action_type",
            "target_symbols",
            "scope",
            "constraints",
            "slots",
            "target_feature",
            "trigger_condition",
            "observed_issue",
            "desired_action",
        ],
        (Phase::Exploration, _) => &["explored_files", "findings"],
        (Phase::Q1, _) => &["needs_more_information"],
        (Phase::Semantic, _) => &["search_results", "search_query"],
        (Phase::Q2, _) => &["has_unverified_hypotheses"],
        (Phase::Verification, _) => &["hypotheses_verified"],
        (Phase::Q3, _) => &["needs_impact_analysis"],
        (Phase::ImpactAnalysis, _) => &["impact_summary"],
        (Phase::Ready, _) => &["tasks", "task_id", "checklist"],
        (Phase::PostImplVerify, _) => &["passed", "failed_tasks", "verifier_used", "details"],
        (Phase::VerifyIntervention, _) => &["prompt_used", "action_taken"],
        (Phase::PreCommit, _) => &["commit_message", "reviewed_files", "review_prompt_used"],
        (Phase::QualityReview, _) => &["quality_score", "issues", "quality_prompt_used"],
        (Phase::Merge, _) | (Phase::SessionComplete, _) => &[],
    }
}

const GATE_KEYS: &[(&str, Phase)] = &[
    ("needs_more_information", Phase::Q1),
    ("has_unverified_hypotheses", Phase::Q2),
    ("needs_impact_analysis", Phase::Q3),
];

/// The evidence strings of a READY implementation payload, for the adapter to look up.
pub fn evidence_paths(data: &Value) -> Vec<String> {
    data.get("checklist")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("evidence").and_then(Value::as_str))
        .filter_map(evidence::parse)
        .map(|e| e.path)
        .collect()
}

/// Validates `data` against the current phase and moves the session on.
pub fn submit(contract: &Contract, session: &Checkpoint, data: &Value, facts: &Facts) -> Result<Accepted, Rejected> {
    let state = &session.orchestrator_state;
    let (phase, ready) = (state.phase(), state.ready_step());
    let Some(data) = data.as_object() else {
        return Err(reject(
            contract,
            session,
            &["session_messages", "invalid_data"],
            &[("error", "data must be a JSON object")],
        ));
    };
    if phase == Phase::SessionComplete {
        return Err(reject(contract, session, &["session_messages", "no_active_session"], &[]));
    }
    let mut response_extra = Map::new();
    let mut session = session.clone();
    // compaction_count: a different value means the agent lost its context.
    if let Some(count) = data.get("compaction_count").and_then(Value::as_u64)
        && count != state.compaction_count
    {
        response_extra.insert("phase_summaries".into(), json!(session.summaries()));
        session.orchestrator_state.compaction_count = count;
    }

    // In READY the payload says which substep it is for: a plan (again), a task, or the end.
    let ready = match (phase, ready_action(data)) {
        (Phase::Ready, ReadyAction::Plan) => Some(ReadyStep::Plan),
        (Phase::Ready, ReadyAction::Complete(_)) => Some(ReadyStep::Impl),
        (Phase::Ready, ReadyAction::Finish) => Some(ReadyStep::Complete),
        _ => ready,
    };
    check_payload_shape(contract, &session, phase, ready, data)?;
    check_tools(contract, &session, phase, ready, data)?;

    let summary = data.get("summary").and_then(Value::as_str).unwrap_or("").trim().to_owned();
    let summary_key = phase::summary_key(phase, ready);
    let mut effect = None;
    let next: Next = match phase {
        Phase::BranchIntervention => {
            let choice = data.get("choice").and_then(Value::as_str).unwrap_or("");
            match choice {
                "continue" => {
                    session.orchestrator_state.branch_policy = Some("continue".into());
                    effect = Some(Effect::BranchChoice("continue".into()));
                }
                "delete" | "merge" => effect = Some(Effect::BranchChoice(choice.to_owned())),
                _ => {
                    return Err(reject(
                        contract,
                        &session,
                        &["failures", "BRANCH_INTERVENTION", "invalid_choice"],
                        &[],
                    ));
                }
            }
            Next::Phase(flow::after_branch_intervention(&state.flags), None)
        }
        Phase::DocumentResearch => {
            if non_empty_list(data, "documents_reviewed").is_none() {
                return Err(reject(contract, &session, &["failures", "DOCUMENT_RESEARCH", "empty_documents"], &[]));
            }
            Next::Phase(Phase::QueryFrame, None)
        }
        Phase::QueryFrame => {
            let hints = check_query_frame(contract, &session, data)?;
            session.orchestrator_state.learned = learned_from_query_frame(data);
            if !hints.is_empty() {
                response_extra.insert("query_frame_hints".into(), json!(hints));
            }
            flow::after_query_frame(state.intent, &state.flags)
        }
        Phase::Exploration => {
            let files = non_empty_list(data, "explored_files");
            let findings = non_empty_list(data, "findings");
            let (Some(files), Some(_)) = (files, findings) else {
                return Err(reject(contract, &session, &["failures", "EXPLORATION", "empty_result"], &[]));
            };
            for f in files.iter().filter_map(Value::as_str) {
                session.orchestrator_state.explored_files.insert(normalize_rel(f));
            }
            Next::Phase(Phase::Q1, None)
        }
        Phase::Q1 | Phase::Q2 | Phase::Q3 => {
            let answer = check_gate(contract, &session, phase, data)?;
            flow::after_gate(phase, answer, &state.flags, state.intent, facts.semantic_available)
        }
        Phase::Semantic => {
            if non_empty_list(data, "search_results").is_none() {
                return Err(reject(contract, &session, &["failures", "SEMANTIC", "empty_search_results"], &[]));
            }
            Next::Phase(Phase::Q2, None)
        }
        Phase::Verification => {
            let Some(list) = non_empty_list(data, "hypotheses_verified") else {
                return Err(reject(contract, &session, &["failures", "VERIFICATION", "empty_hypotheses"], &[]));
            };
            if list.iter().any(|h| h.get("result").is_some_and(|r| r == &json!(false) || r == &json!("false"))) {
                return Err(reject(contract, &session, &["failures", "VERIFICATION", "result_false_exists"], &[]));
            }
            Next::Phase(Phase::Q3, None)
        }
        Phase::ImpactAnalysis => {
            let empty = match data.get("impact_summary") {
                Some(Value::Object(m)) => m.is_empty(),
                Some(Value::String(s)) => s.trim().is_empty(),
                Some(Value::Array(a)) => a.is_empty(),
                _ => true,
            };
            if empty {
                return Err(reject(contract, &session, &["failures", "IMPACT_ANALYSIS", "empty_impact_summary"], &[]));
            }
            flow::end_of_exploration(state.intent, &state.flags)
        }
        Phase::Ready => match ready_action(data) {
            ReadyAction::Plan => {
                let tasks = plan_tasks(contract, &session, data)?;
                let st = &mut session.orchestrator_state;
                st.tasks = tasks;
                st.revert_reason = None;
                if st.task_branch.is_none() && flow::uses_task_branch(&st.flags, st.branch_policy.as_deref()) {
                    effect = Some(Effect::CreateTaskBranch);
                }
                Next::Phase(Phase::Ready, Some(ReadyStep::Impl))
            }
            ReadyAction::Complete(task_id) => {
                complete_task(contract, &mut session, &task_id, data, facts)?;
                let all_done = session.orchestrator_state.pending_tasks().next().is_none();
                if all_done {
                    response_extra.insert("all_complete".into(), json!(true));
                    Next::Phase(Phase::Ready, Some(ReadyStep::Complete))
                } else {
                    Next::Phase(Phase::Ready, Some(ReadyStep::Impl))
                }
            }
            ReadyAction::Finish => {
                let st = &session.orchestrator_state;
                // In planning (first time, or after a revert) a plan is due before completion.
                if st.tasks.is_empty() || state.ready_step() == Some(ReadyStep::Plan) {
                    return Err(reject(contract, &session, &["failures", "READY", "no_tasks_registered"], &[]));
                }
                let pending = st.pending_tasks().count();
                if pending > 0 {
                    let count = pending.to_string();
                    return Err(reject(
                        contract,
                        &session,
                        &["failures", "READY", "incomplete_tasks"],
                        &[("count", &count)],
                    ));
                }
                flow::after_ready(&st.flags)
            }
        },
        Phase::PostImplVerify => post_impl_verify(contract, &mut session, data)?,
        Phase::VerifyIntervention => {
            for key in ["prompt_used", "action_taken"] {
                if data.get(key).and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
                    return Err(reject(contract, &session, &["common_failures", "field_required"], &[("field", key)]));
                }
            }
            let st = &mut session.orchestrator_state;
            st.counters.intervention_count += 1;
            st.counters.verification_failure_count = 0;
            for t in &mut st.tasks {
                t.failure_count = 0;
            }
            let action = data.get("action_taken").and_then(Value::as_str).unwrap_or("").to_owned();
            st.revert_reason = Some(action);
            Next::Phase(Phase::Ready, Some(ReadyStep::Plan))
        }
        Phase::PreCommit => {
            let st = &session.orchestrator_state;
            let message = data.get("commit_message").and_then(Value::as_str).unwrap_or("").trim().to_owned();
            if message.is_empty() {
                return Err(reject(contract, &session, &["failures", "PRE_COMMIT", "missing_commit_message"], &[]));
            }
            let discard = discarded_files(contract, &session, data)?;
            if st.task_branch.is_none() {
                return Err(reject(contract, &session, &["failures", "PRE_COMMIT", "branch_manager_not_found"], &[]));
            }
            effect = Some(Effect::Commit { message, discard });
            Next::Phase(flow::after_pre_commit(&st.flags), None)
        }
        Phase::QualityReview => {
            if data.get("quality_score").is_none_or(Value::is_null) {
                return Err(reject(
                    contract,
                    &session,
                    &["common_failures", "field_required"],
                    &[("field", "quality_score")],
                ));
            }
            let issues: Vec<String> = data
                .get("issues")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(|i| i.as_str().map(str::to_owned).unwrap_or_else(|| i.to_string())).collect())
                .unwrap_or_default();
            let st = &mut session.orchestrator_state;
            if issues.is_empty() {
                st.quality_review_passed = true;
                // Fixes made during the review are committed too, so nothing reviewed is left
                // uncommitted when the branch is merged.
                if st.task_branch.is_some() {
                    effect = Some(Effect::Commit { message: "Quality review fixes".into(), discard: Vec::new() });
                }
                Next::Phase(Phase::Merge, None)
            } else {
                st.counters.quality_revert_count += 1;
                if st.counters.quality_revert_count >= flow::QUALITY_REVERTS_BEFORE_FORCED_COMPLETION {
                    st.forced_completion = true;
                    let warning = contract.message(&["failures", "QUALITY_REVIEW", "quality_forced_completion"], &[]);
                    response_extra.insert("warning".into(), json!(warning));
                    response_extra.insert("unresolved_issues".into(), json!(issues));
                    Next::Phase(Phase::Merge, None)
                } else {
                    st.revert_reason = Some(issues.join("; "));
                    Next::Phase(Phase::Ready, Some(ReadyStep::Plan))
                }
            }
        }
        Phase::Merge => {
            let st = &session.orchestrator_state;
            let review_needed = !(st.flags.no_quality || st.flags.fast);
            if review_needed && !st.quality_review_passed && !st.forced_completion {
                return Err(reject(contract, &session, &["failures", "MERGE", "quality_review_required"], &[]));
            }
            match &st.task_branch {
                Some(_) => {
                    effect = Some(Effect::Merge);
                    Next::Complete(&["success", "MERGE", "merge_success"])
                }
                None => Next::Complete(&["success", "MERGE", "no_task_branch_complete"]),
            }
        }
        Phase::SessionComplete => unreachable_phase(contract, &session)?,
    };

    if !summary.is_empty() {
        session.phase_payloads.insert(summary_key, SummaryRecord { summary });
    }
    match next {
        Next::Phase(p, r) => session.orchestrator_state.enter(p, r),
        Next::Complete(path) => {
            session.orchestrator_state.enter(Phase::SessionComplete, None);
            let st = &session.orchestrator_state;
            let (from, to) = (st.task_branch.clone().unwrap_or_default(), st.base_branch.clone().unwrap_or_default());
            let message = contract.message(path, &[("from_branch", &from), ("to_branch", &to)]);
            response_extra.insert("message".into(), json!(message));
        }
    }
    let response = success(contract, &session, response_extra);
    Ok(Accepted { session, response, effect })
}

fn unreachable_phase(contract: &Contract, session: &Checkpoint) -> Result<Next, Rejected> {
    let phase = session.orchestrator_state.phase().name();
    Err(reject(contract, session, &["common_failures", "unknown_phase"], &[("phase", phase)]))
}

/// Payload-level checks shared by every phase: a payload for another phase, the summary, and
/// the shape of `tools_used`.
fn check_payload_shape(
    contract: &Contract,
    session: &Checkpoint,
    phase: Phase,
    ready: Option<ReadyStep>,
    data: &Map<String, Value>,
) -> Result<(), Rejected> {
    let own = own_keys(phase, ready);
    if phase != Phase::Ready {
        if data.contains_key("tasks") {
            return Err(reject(contract, session, &["failures", "READY", "phase_mismatch_register"], &[]));
        }
        if data.contains_key("task_id") {
            return Err(reject(contract, session, &["failures", "READY", "phase_mismatch_complete"], &[]));
        }
    }
    for (key, gate) in GATE_KEYS {
        if *gate != phase && data.contains_key(*key) {
            return Err(mismatch(contract, session, gate.name()));
        }
    }
    if !own.iter().any(|k| data.contains_key(*k)) {
        let foreign = Phase::ALL
            .iter()
            .filter(|p| **p != phase)
            .find(|p| own_keys(**p, None).iter().any(|k| data.contains_key(*k) && !own.contains(k)));
        if let Some(other) = foreign {
            return Err(mismatch(contract, session, other.name()));
        }
    }
    if data.get("summary").and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
        return Err(reject(contract, session, &["common_failures", "summary_required"], &[]));
    }
    let tools_ok = match data.get("tools_used") {
        Some(Value::Array(a)) => a.iter().all(Value::is_string),
        None => phase.summary_only(ready),
        _ => false,
    };
    if !tools_ok {
        return Err(reject(contract, session, &["common_failures", "tools_used_invalid"], &[]));
    }
    Ok(())
}

fn mismatch(contract: &Contract, session: &Checkpoint, other: &str) -> Rejected {
    let phase = session.orchestrator_state.phase().name();
    reject(contract, session, &["common_failures", "payload_mismatch"], &[("phase", phase), ("other_phase", other)])
}

/// `tools_used` against what the server really served in this phase.
fn check_tools(
    contract: &Contract,
    session: &Checkpoint,
    phase: Phase,
    ready: Option<ReadyStep>,
    data: &Map<String, Value>,
) -> Result<(), Rejected> {
    let called = &session.orchestrator_state.tools_called;
    let reported: BTreeSet<&str> =
        data.get("tools_used").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    let never_called: Vec<&str> =
        reported.iter().copied().filter(|t| is_server_tool(t) && !called.contains(*t)).collect();
    if !never_called.is_empty() {
        return Err(reject(
            contract,
            session,
            &["common_failures", "tools_not_called"],
            &[("tools", &never_called.join(", "))],
        ));
    }
    let key = phase::contract_key(phase, ready);
    let required: Vec<String> = contract
        .get(&["phases", key, "required_tools"])
        .and_then(serde_yaml::Value::as_sequence)
        .map(|s| s.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    let missing: Vec<&str> = required.iter().map(String::as_str).filter(|t| !called.contains(*t)).collect();
    if !missing.is_empty() {
        return Err(reject(
            contract,
            session,
            &["common_failures", "required_tools_not_used"],
            &[("missing_list", &missing.join(", "))],
        ));
    }
    let unreported: Vec<&str> = required.iter().map(String::as_str).filter(|t| !reported.contains(t)).collect();
    if !unreported.is_empty() {
        return Err(reject(
            contract,
            session,
            &["common_failures", "required_tools_not_reported"],
            &[("missing_reported", &unreported.join(", "))],
        ));
    }
    if phase == Phase::Exploration {
        let distinct = called.iter().filter(|t| CODE_INTEL_TOOLS.contains(&t.as_str())).count();
        if distinct < 2 {
            return Err(reject(contract, session, &["common_failures", "exploration_min_tools"], &[]));
        }
    }
    Ok(())
}

fn non_empty_list<'a>(data: &'a Map<String, Value>, key: &str) -> Option<&'a Vec<Value>> {
    data.get(key).and_then(Value::as_array).filter(|a| !a.is_empty())
}

/// Slots with quotes: every quote must be in the user's query (whitespace and case aside).
/// Returns the hints for the slots left empty.
fn check_query_frame(
    contract: &Contract,
    session: &Checkpoint,
    data: &Map<String, Value>,
) -> Result<Vec<String>, Rejected> {
    let query = normalize_text(&session.orchestrator_state.query);
    let slots = data.get("slots").and_then(Value::as_object);
    let mut hints = Vec::new();
    for slot in QUERY_FRAME_SLOTS {
        let value = slots.and_then(|s| s.get(*slot)).or_else(|| data.get(*slot));
        let (text, quote) = match value {
            Some(Value::String(s)) => (s.trim().to_owned(), None),
            Some(Value::Object(o)) => (
                o.get("value").and_then(Value::as_str).unwrap_or("").trim().to_owned(),
                o.get("quote").and_then(Value::as_str).map(str::to_owned),
            ),
            _ => (String::new(), None),
        };
        if let Some(quote) = quote.filter(|q| !q.trim().is_empty())
            && !query.contains(&normalize_text(&quote))
        {
            return Err(reject(
                contract,
                session,
                &["failures", "QUERY_FRAME", "quote_not_in_query"],
                &[("slot", slot), ("quote", &quote)],
            ));
        }
        if text.is_empty() {
            hints.push(contract.message(&["query_frame_hints", &format!("{slot}_missing")], &[]));
        }
    }
    Ok(hints)
}

/// The target QUERY_FRAME named: the `target_feature` slot's value and the `target_symbols`.
fn learned_from_query_frame(data: &Map<String, Value>) -> crate::engine::state::Learned {
    let slots = data.get("slots").and_then(Value::as_object);
    let feature = match slots.and_then(|s| s.get("target_feature")).or_else(|| data.get("target_feature")) {
        Some(Value::String(s)) => s.trim().to_owned(),
        Some(Value::Object(o)) => o.get("value").and_then(Value::as_str).unwrap_or("").trim().to_owned(),
        _ => String::new(),
    };
    let symbols = data
        .get("target_symbols")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    crate::engine::state::Learned { target_feature: feature, target_symbols: symbols }
}

fn normalize_text(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// A gate's answer: a bool and a reason of at least [`MIN_REASON_CHARS`].
fn check_gate(
    contract: &Contract,
    session: &Checkpoint,
    gate: Phase,
    data: &Map<String, Value>,
) -> Result<bool, Rejected> {
    let (field, prefix) = match gate {
        Phase::Q1 => ("needs_more_information", "semantic"),
        Phase::Q2 => ("has_unverified_hypotheses", "verification"),
        _ => ("needs_impact_analysis", "impact"),
    };
    let base = ["tool_errors", "check_phase_necessity"];
    let key = |suffix: &str| -> String {
        match (prefix, suffix) {
            ("semantic", "value") => "semantic_needs_more_information".into(),
            ("verification", "value") => "verification_has_unverified".into(),
            ("impact", "value") => "impact_needs_analysis".into(),
            (p, s) => format!("{p}_{s}"),
        }
    };
    let answer = match data.get(field) {
        None | Some(Value::Null) => {
            let k = format!("{}_required", key("value"));
            return Err(reject(contract, session, &[base[0], base[1], &k], &[]));
        }
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            let k = format!("{}_type", key("value"));
            return Err(reject(contract, session, &[base[0], base[1], &k], &[]));
        }
    };
    let reason = data.get("reason").or_else(|| data.get(&format!("{field}_reason"))).and_then(Value::as_str);
    match reason.map(str::trim) {
        None | Some("") => Err(reject(contract, session, &[base[0], base[1], &key("reason_required")], &[])),
        Some(r) if r.chars().count() < MIN_REASON_CHARS => {
            Err(reject(contract, session, &[base[0], base[1], &key("reason_length")], &[]))
        }
        Some(_) => Ok(answer),
    }
}

enum ReadyAction {
    Plan,
    Complete(String),
    Finish,
}

fn ready_action(data: &Map<String, Value>) -> ReadyAction {
    if data.contains_key("tasks") {
        return ReadyAction::Plan;
    }
    if let Some(id) = data.get("task_id") {
        return ReadyAction::Complete(id.as_str().map(str::to_owned).unwrap_or_else(|| id.to_string()));
    }
    ReadyAction::Finish
}

/// Step 12: the complete task list, accepted idempotently. The server keeps its own failure
/// counts and completion records: a plan cannot reset the one or forge the other.
fn plan_tasks(contract: &Contract, session: &Checkpoint, data: &Map<String, Value>) -> Result<Vec<Task>, Rejected> {
    let ready_fail = |key: &str, vars: &[(&str, &str)]| reject(contract, session, &["failures", "READY", key], vars);
    let Some(list) = data.get("tasks").and_then(Value::as_array) else {
        return Err(ready_fail("empty_tasks", &[]));
    };
    if list.is_empty() {
        return Err(ready_fail("empty_tasks", &[]));
    }
    let known: BTreeMap<&str, &Task> = session.orchestrator_state.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut seen = BTreeSet::new();
    let mut tasks = Vec::new();
    for raw in list {
        let id = raw.get("id").and_then(Value::as_str).unwrap_or("").trim().to_owned();
        let description = raw.get("description").and_then(Value::as_str).unwrap_or("").trim().to_owned();
        if id.is_empty() || description.is_empty() {
            return Err(ready_fail("task_fields_required", &[]));
        }
        if !seen.insert(id.clone()) {
            return Err(ready_fail("duplicate_task_ids", &[]));
        }
        let completed = raw.get("status").and_then(Value::as_str) == Some("completed");
        let previous = known.get(id.as_str());
        if completed && previous.is_none_or(|t| t.status != TaskStatus::Completed) {
            return Err(ready_fail("completed_unknown_task", &[("task_id", &id)]));
        }
        let checklist: Vec<ChecklistItem> = match previous.filter(|_| completed) {
            Some(t) => t.checklist.clone(),
            None => raw
                .get("checklist")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|c| c.get("item").and_then(Value::as_str).or_else(|| c.as_str()))
                .map(|item| ChecklistItem {
                    item: item.trim().to_owned(),
                    status: ItemStatus::Pending,
                    evidence: None,
                    reason: None,
                })
                .collect(),
        };
        if !completed && checklist.is_empty() {
            return Err(ready_fail("checklist_required", &[("task_id", &id)]));
        }
        tasks.push(Task {
            id: id.clone(),
            description,
            status: if completed { TaskStatus::Completed } else { TaskStatus::Pending },
            checklist,
            failure_count: previous.map_or(0, |t| t.failure_count),
            revert_reason: previous.map(|t| t.revert_reason.clone()).unwrap_or_default(),
        });
    }
    if !tasks.iter().any(|t| t.status == TaskStatus::Pending) {
        return Err(ready_fail("no_pending_tasks", &[]));
    }
    Ok(tasks)
}

/// Step 13: one task reported done, in registration order, with its whole checklist.
fn complete_task(
    contract: &Contract,
    session: &mut Checkpoint,
    task_id: &str,
    data: &Map<String, Value>,
    facts: &Facts,
) -> Result<(), Rejected> {
    let snapshot = session.clone();
    let fail = |key: &str, vars: &[(&str, &str)]| reject(contract, &snapshot, &["failures", "READY", key], vars);
    let state = &session.orchestrator_state;
    if state.tasks.is_empty() {
        return Err(fail("no_tasks", &[]));
    }
    let Some(index) = state.tasks.iter().position(|t| t.id == task_id) else {
        return Err(fail("unknown_task", &[("task_id", task_id)]));
    };
    if state.tasks[index].status == TaskStatus::Completed {
        return Err(fail("already_completed", &[("task_id", task_id)]));
    }
    if let Some(expected) = state.pending_tasks().next()
        && expected.id != task_id
    {
        return Err(fail("wrong_order", &[("expected_task", &expected.id), ("task_id", task_id)]));
    }
    let reported: Vec<&Map<String, Value>> =
        data.get("checklist").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object).collect();
    let registered = &state.tasks[index].checklist;
    let reported_items: BTreeSet<&str> =
        reported.iter().filter_map(|c| c.get("item").and_then(Value::as_str)).map(str::trim).collect();
    let registered_items: BTreeSet<&str> = registered.iter().map(|c| c.item.as_str()).collect();
    if reported_items != registered_items || reported.len() != registered.len() {
        return Err(fail("checklist_items_mismatch", &[]));
    }
    let mut checked = Vec::new();
    for item in &reported {
        let name = item.get("item").and_then(Value::as_str).unwrap_or("").trim().to_owned();
        let status = item.get("status").and_then(Value::as_str).unwrap_or("pending");
        match status {
            "done" => {
                let Some(evidence) = item.get("evidence").and_then(Value::as_str).filter(|e| !e.trim().is_empty())
                else {
                    return Err(fail("checklist_evidence_required", &[("item", &name)]));
                };
                check_evidence(&fail, evidence, facts)?;
                checked.push(ChecklistItem {
                    item: name,
                    status: ItemStatus::Done,
                    evidence: Some(evidence.trim().to_owned()),
                    reason: None,
                });
            }
            "skipped" => {
                let reason = item.get("reason").and_then(Value::as_str).map(str::trim).unwrap_or("");
                if reason.chars().count() < MIN_REASON_CHARS {
                    return Err(fail("checklist_reason_required", &[("item", &name)]));
                }
                checked.push(ChecklistItem {
                    item: name,
                    status: ItemStatus::Skipped,
                    evidence: None,
                    reason: Some(reason.to_owned()),
                });
            }
            _ => return Err(fail("checklist_item_pending", &[("item", &name)])),
        }
    }
    let task = &mut session.orchestrator_state.tasks[index];
    task.checklist = checked;
    task.status = TaskStatus::Completed;
    Ok(())
}

/// Builds the rejection for a READY failure key and its placeholders.
type ReadyFailure<'a> = dyn Fn(&str, &[(&str, &str)]) -> Rejected + 'a;

fn check_evidence(fail: &ReadyFailure, evidence: &str, facts: &Facts) -> Result<(), Rejected> {
    let Some(r) = evidence::parse(evidence) else {
        return Err(fail("checklist_evidence_format_invalid", &[("evidence", evidence)]));
    };
    match facts.evidence.get(&r.path) {
        Some(EvidenceFile::Outside) => Err(fail("checklist_evidence_outside_repo", &[("file_path", &r.path)])),
        None | Some(EvidenceFile::Missing) => Err(fail("checklist_evidence_file_not_found", &[("file_path", &r.path)])),
        Some(EvidenceFile::Lines(lines)) => {
            let total = lines.len();
            if r.end > total {
                let (line, total) = (r.end.to_string(), total.to_string());
                return Err(fail("checklist_evidence_line_out_of_range", &[("line", &line), ("total", &total)]));
            }
            if evidence::is_empty_implementation(&r.path, &lines[r.start - 1..r.end]) {
                return Err(fail("checklist_evidence_empty_impl", &[("evidence", evidence)]));
            }
            Ok(())
        }
    }
}

/// Step 15. A failure counts against the named tasks (all tasks when none are named, so the
/// safety valve cannot be dodged by naming none).
fn post_impl_verify(
    contract: &Contract,
    session: &mut Checkpoint,
    data: &Map<String, Value>,
) -> Result<Next, Rejected> {
    let Some(passed) = data.get("passed").and_then(Value::as_bool) else {
        return Err(reject(contract, session, &["common_failures", "field_required"], &[("field", "passed (bool)")]));
    };
    let st = &session.orchestrator_state;
    if passed {
        return Ok(flow::after_verify_passed(&st.flags));
    }
    let details = data.get("details").and_then(Value::as_str).unwrap_or("").trim().to_owned();
    let named: Vec<String> = data
        .get("failed_tasks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    if let Some(unknown) = named.iter().find(|id| !st.tasks.iter().any(|t| &t.id == *id)) {
        return Err(reject(contract, session, &["failures", "READY", "unknown_task"], &[("task_id", unknown)]));
    }
    if st.flags.only_verify {
        return Ok(Next::Complete(&["session_messages", "verification_failed_only_verify"]));
    }
    let st = &mut session.orchestrator_state;
    st.counters.verification_failure_count += 1;
    for t in &mut st.tasks {
        if named.is_empty() || named.contains(&t.id) {
            t.failure_count += 1;
            t.revert_reason = details.clone();
        }
    }
    let worst = st.tasks.iter().map(|t| t.failure_count).max().unwrap_or(0);
    let over = worst.max(st.counters.verification_failure_count) >= flow::FAILURES_BEFORE_INTERVENTION;
    st.revert_reason = Some(if details.is_empty() { "verification failed".into() } else { details });
    if over && flow::intervention_enabled(&st.flags) {
        Ok(Next::Phase(Phase::VerifyIntervention, None))
    } else {
        Ok(Next::Phase(Phase::Ready, Some(ReadyStep::Plan)))
    }
}

/// Files the review decided to discard; each needs a reason.
fn discarded_files(
    contract: &Contract,
    session: &Checkpoint,
    data: &Map<String, Value>,
) -> Result<Vec<String>, Rejected> {
    let mut out = Vec::new();
    for entry in data.get("reviewed_files").and_then(Value::as_array).into_iter().flatten() {
        let Some(obj) = entry.as_object() else { continue };
        let decision = obj.get("decision").or_else(|| obj.get("action")).and_then(Value::as_str).unwrap_or("keep");
        if decision == "discard" {
            let reason = obj.get("reason").and_then(Value::as_str).map(str::trim).unwrap_or("");
            if reason.is_empty() {
                return Err(reject(contract, session, &["failures", "PRE_COMMIT", "review_failed"], &[]));
            }
            if let Some(file) = obj.get("file").or_else(|| obj.get("path")).and_then(Value::as_str) {
                out.push(normalize_rel(file));
            }
        }
    }
    Ok(out)
}

/// `./a/b` → `a/b`, `a\b` → `a/b`.
pub fn normalize_rel(path: &str) -> String {
    let p = path.trim().replace('\\', "/");
    let p = p.trim_start_matches("./");
    p.split(':').next().unwrap_or(p).trim_end_matches('/').to_owned()
}
