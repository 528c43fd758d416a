//! What the engine answers, as types: a phase response (success, and the body of
//! `get_session_status`), and a refusal. The MCP edge serializes them; nothing here is JSON
//! text.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Map, Value};

use super::flow;
use super::phase::{self, Phase};
use super::schema;
use super::state::{Checkpoint, Counters, Flags, Intent, ItemStatus, SessionState, TaskStatus};
use crate::contract::Contract;
use crate::contract::catalogue::{self as msg, Msg};

/// Where the session is and what to send next.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PhaseResponse {
    pub success: bool,
    pub session_id: String,
    pub phase: &'static str,
    /// The phase's fixed number (1-19, and 20 once complete): Q1-Q3 count within 6-11, and
    /// phases a flow skips leave their numbers unused, so steps may jump.
    pub step: u8,
    /// READY_PLAN, READY_IMPL or READY_COMPLETE while in READY.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_substep: Option<&'static str>,
    pub instruction: String,
    /// An outline of the payload: each field with its type and whether it is required. What
    /// each field is for is in expected_payload_schema's descriptions.
    pub expected_payload: Map<String, Value>,
    /// The JSON Schema (draft 2020-12) a payload for this phase must satisfy.
    #[schemars(schema_with = "crate::engine::schema::free_object")]
    pub expected_payload_schema: Value,
    /// The tool to call next.
    pub call: &'static str,
    pub compaction_count: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_progress: Option<TaskProgress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_complete: Option<bool>,
    /// How the session ended, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unresolved_issues: Option<Vec<String>>,
    /// Slots of the query frame left empty: what is still unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query_frame_hints: Option<Vec<String>>,
    /// The summaries of the phases so far, after a compaction_count mismatch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_summaries: Option<BTreeMap<String, String>>,
}

/// `get_session_status`: the phase response plus the session's bookkeeping.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SessionStatus {
    #[serde(flatten)]
    pub response: PhaseResponse,
    pub completed_steps: Vec<u8>,
    pub intent: Intent,
    pub flags: Flags,
    pub counters: Counters,
    /// How many files may be written in READY.
    pub explored_files: usize,
    pub task_branch: Option<String>,
    pub base_branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct TaskProgress {
    pub total: usize,
    pub completed: usize,
    pub pending: usize,
    pub next_task: Option<NextTask>,
    pub tasks: Vec<TaskLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct NextTask {
    pub id: String,
    pub description: String,
    pub checklist: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct TaskLine {
    pub id: String,
    pub status: TaskStatus,
    pub checklist_total: usize,
    pub checklist_done: usize,
    pub failure_count: u32,
}

/// A refused submit (sent with `isError`). The session did not change.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Refusal {
    /// The contract message this refusal carries.
    #[serde(skip)]
    #[schemars(skip)]
    pub key: Msg,
    pub success: bool,
    pub error: String,
    pub message: String,
    pub session_id: String,
    pub current_phase: &'static str,
    pub step: u8,
    pub instruction: String,
    pub expected_payload: Map<String, Value>,
    #[schemars(schema_with = "crate::engine::schema::free_object")]
    pub expected_payload_schema: Value,
    pub call: &'static str,
    pub compaction_count: u64,
    pub hint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires_user_intervention: Option<bool>,
    /// What to tell the user, when the failure needs them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_instruction: Option<String>,
    /// What went wrong, when git work failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    /// The summaries of the phases so far, when compaction_count did not match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase_summaries: Option<BTreeMap<String, String>>,
}

/// The response for the session's current phase.
pub fn for_phase(contract: &Contract, session: &Checkpoint) -> PhaseResponse {
    let state = &session.orchestrator_state;
    let (phase, ready) = (state.phase(), state.ready_step());
    let (expected_payload, expected_payload_schema) = expected(state);
    PhaseResponse {
        success: true,
        session_id: state.session_id.clone(),
        phase: phase.name(),
        step: phase::step(phase, ready),
        ready_substep: (phase == Phase::Ready).then(|| phase::contract_key(phase, ready)),
        instruction: instruction(contract, state),
        expected_payload,
        expected_payload_schema,
        call: if state.is_complete() { "record_outcome" } else { "submit_phase" },
        compaction_count: state.compaction_count,
        task_progress: (phase == Phase::Ready).then(|| task_progress(state)),
        all_complete: None,
        message: None,
        warning: None,
        unresolved_issues: None,
        query_frame_hints: None,
        phase_summaries: None,
    }
}

/// `get_session_status`'s body.
pub fn status(contract: &Contract, session: &Checkpoint) -> SessionStatus {
    let st = &session.orchestrator_state;
    let mut response = for_phase(contract, session);
    response.phase_summaries = Some(session.summaries());
    SessionStatus {
        response,
        completed_steps: st.completed_steps.clone(),
        intent: st.intent,
        flags: st.flags,
        counters: st.counters,
        explored_files: st.explored_files.len(),
        task_branch: st.task_branch.clone(),
        base_branch: st.base_branch.clone(),
    }
}

/// A refusal, boxed: it is large, and it travels up through every check.
pub type Refused = Box<Refusal>;

/// A refusal carrying `key` and the re-instruction for the unchanged session.
pub fn refusal(contract: &Contract, session: &Checkpoint, key: Msg, vars: &[(&str, &str)]) -> Refused {
    let state = &session.orchestrator_state;
    let (phase, ready) = (state.phase(), state.ready_step());
    let m = contract.error(&key, vars);
    let (expected_payload, expected_payload_schema) = expected(state);
    Box::new(Refusal {
        key,
        success: false,
        error: m.error,
        message: m.message,
        session_id: state.session_id.clone(),
        current_phase: phase.name(),
        step: phase::step(phase, ready),
        instruction: instruction(contract, state),
        expected_payload,
        expected_payload_schema,
        call: "submit_phase",
        compaction_count: state.compaction_count,
        hint: contract.message(&msg::PHASE_BLOCKED_HINT, &[]),
        requires_user_intervention: contract.requires_user(&key).then_some(true),
        user_instruction: contract.user_instruction(&key),
        details: None,
        phase_summaries: None,
    })
}

fn expected(state: &SessionState) -> (Map<String, Value>, Value) {
    if state.is_complete() {
        return (Map::new(), Value::Object(Map::new()));
    }
    let schema = schema::for_state(schema::key_for(state), state);
    (schema::describe(&schema), schema)
}

/// The phase's instruction from the contract, with what the session adds to it: the request
/// to quote (QUERY_FRAME), the task at hand (READY), why planning came back (after a revert),
/// and the escalation after repeated interventions.
pub fn instruction(contract: &Contract, state: &SessionState) -> String {
    let (phase, ready) = (state.phase(), state.ready_step());
    if phase == Phase::SessionComplete {
        return contract.message(&msg::SESSION_COMPLETE, &[]);
    }
    if phase == Phase::VerifyIntervention && state.counters.intervention_count >= flow::INTERVENTIONS_BEFORE_ESCALATION
    {
        let count = state.counters.intervention_count.to_string();
        return format!(
            "{}\n{}",
            contract.message(&msg::ESCALATION_COUNT, &[("count", &count)]),
            contract.message(&msg::USER_ESCALATION, &[])
        );
    }
    let key = phase::contract_key(phase, ready);
    let mut text = match key {
        "QUERY_FRAME" => contract.instruction(key, &[("query", &state.query)]),
        "READY_IMPL" => {
            let next = state.pending_tasks().next().map(|t| t.id.as_str()).unwrap_or("");
            contract.instruction(key, &[("task_id", next)])
        }
        "POST_IMPL_VERIFY" | "VERIFY_INTERVENTION" => {
            let commands = if state.verify_commands.is_empty() {
                contract.message(&msg::NO_VERIFY_COMMANDS, &[])
            } else {
                state.verify_commands.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ")
            };
            contract.instruction(key, &[("verify_commands", &commands)])
        }
        _ => contract.instruction(key, &[]),
    };
    // Before any change, the project's checks once: the baseline a later failure is compared with.
    if key == "QUERY_FRAME"
        && matches!(state.intent, Intent::Implement | Intent::Modify)
        && !state.verify_commands.is_empty()
    {
        let commands = state.verify_commands.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
        text.push('\n');
        text.push_str(&contract.message(&msg::BASELINE_INVITE, &[("verify_commands", &commands)]));
    }
    if key == "READY_PLAN"
        && let Some(reason) = &state.revert_reason
    {
        // A task that failed verification is still Completed (its code is there): say it failed.
        let tasks: Vec<String> = state
            .tasks
            .iter()
            .map(|t| match t.failure_count {
                0 => format!("{} ({:?})", t.id, t.status),
                n => format!("{} ({:?}, failed verification {n}x)", t.id, t.status),
            })
            .collect();
        // The reason often ends a sentence of the agent's own; the message ends it once.
        let reason = reason.trim_end().trim_end_matches('.');
        let note = contract.message(&msg::REVERT_TO_PLANNING, &[("reason", reason), ("tasks", &tasks.join(", "))]);
        text = format!("{note}\n{text}");
    }
    if let Some(note) = git_action(contract, state, key) {
        text = format!("{text}\n{note}");
    }
    // Q3 and IMPACT_ANALYSIS speak of "the modification": an investigation modifies nothing.
    if matches!(key, "Q3" | "IMPACT_ANALYSIS") && flow::investigates(state.intent, &state.flags) {
        text = format!("{text}\n{}", contract.message(&msg::INVESTIGATION_READING, &[]));
    }
    text
}

/// What the server will do in git on the next accepted submit of phase `key`, and what the
/// agent must leave to it: the task branch it creates (READY planning), the commit (PRE_COMMIT,
/// QUALITY_REVIEW) and the merge (MERGE).
fn git_action(contract: &Contract, state: &SessionState, key: &str) -> Option<String> {
    let base = state.base_branch.as_deref().unwrap_or("its base branch");
    match (key, state.task_branch.as_deref()) {
        ("READY_PLAN", None) if flow::uses_task_branch(&state.flags) => {
            Some(contract.message(&msg::GIT_CREATES_TASK_BRANCH, &[("session_id", &state.session_id)]))
        }
        ("READY_PLAN", None) => Some(contract.message(&msg::GIT_NO_TASK_BRANCH, &[])),
        ("READY_PLAN", Some(branch)) => {
            Some(contract.message(&msg::GIT_ON_TASK_BRANCH, &[("task_branch", branch), ("base_branch", base)]))
        }
        ("PRE_COMMIT", Some(branch)) => Some(contract.message(&msg::GIT_COMMITS_TASK, &[("task_branch", branch)])),
        ("QUALITY_REVIEW", Some(branch)) => {
            let last = state.counters.quality_revert_count + 1 >= flow::QUALITY_REVERTS_BEFORE_FORCED_COMPLETION;
            let key = if last { msg::GIT_COMMITS_LAST_REVIEW_FIXES } else { msg::GIT_COMMITS_REVIEW_FIXES };
            Some(contract.message(&key, &[("task_branch", branch)]))
        }
        ("MERGE", Some(branch)) => {
            Some(contract.message(&msg::GIT_MERGES, &[("task_branch", branch), ("base_branch", base)]))
        }
        _ => None,
    }
}

fn task_progress(state: &SessionState) -> TaskProgress {
    let completed = state.tasks.iter().filter(|t| t.status == TaskStatus::Completed).count();
    TaskProgress {
        total: state.tasks.len(),
        completed,
        pending: state.tasks.len() - completed,
        next_task: state.pending_tasks().next().map(|t| NextTask {
            id: t.id.clone(),
            description: t.description.clone(),
            checklist: t.checklist.iter().map(|c| c.item.clone()).collect(),
        }),
        tasks: state
            .tasks
            .iter()
            .map(|t| TaskLine {
                id: t.id.clone(),
                status: t.status,
                checklist_total: t.checklist.len(),
                checklist_done: t.checklist.iter().filter(|c| c.status != ItemStatus::Pending).count(),
                failure_count: t.failure_count,
            })
            .collect(),
    }
}
