//! `start_session` and `submit_phase`: the session in, the payload and the adapter's facts in,
//! the new session and the response out. Nothing here touches the disk or git.
//!
//! `Step::run` reads the payload against the phase: the shape and the claimed tools here, the
//! phase-specific checks in `checks`, the transition and its effect in `transition`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::cap;
use super::decode::{self, Violation};
use super::evidence::{self, EvidenceFile};
use super::flow::{self, Next};
use super::payload::{Body, Payload};
use super::phase::{self, Phase, ReadyStep};
use super::response::{self, PhaseResponse, Refused};
use super::schema;
use super::state::{Checkpoint, Counters, Flags, Intent, PhaseState, SessionState, SummaryRecord};
use crate::contract::Contract;
use crate::contract::catalogue::{self as msg, Msg};

mod checks;
mod tasks;
mod transition;

use checks::body_fits;

/// Minimum length of a gate's reason and of a skipped checklist item's reason.
pub const MIN_REASON_CHARS: usize = 10;

/// What the adapter learned outside the engine for this submit.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// What each evidence path of the payload (see [`evidence_paths`]) points at.
    pub evidence: BTreeMap<String, EvidenceFile>,
    /// Whether `semantic_search` can run (a model is installed).
    pub semantic_available: bool,
    /// PRE_COMMIT: the files the task changed (what review_changes lists, the user's own
    /// earlier changes aside). None when not looked at.
    pub changed_files: Option<Vec<String>>,
    /// DOCUMENT_RESEARCH: what the adapter found about the documents. None when not looked at.
    pub documents: Option<DocumentFacts>,
    /// QUERY_FRAME: the target_symbols whose words are far in meaning from the request (by
    /// the embedding model); empty when none is, or when no model is installed.
    pub far_symbols: Vec<String>,
    /// POST_IMPL_VERIFY: the verify commands `run_check` can run now (empty: the project has
    /// none, or no kernel sandbox can confine them). With any, `passed: true` needs a witnessed
    /// run.
    pub runnable_checks: Vec<String>,
    /// READY: for each evidence path, the lines (1-based, of the file as it is) that differ
    /// from the session's base: what the session wrote. A path missing here was not compared.
    pub changed_lines: BTreeMap<String, BTreeSet<usize>>,
}

/// DOCUMENT_RESEARCH's checks, made by the adapter against the repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentFacts {
    /// Entries of `documents_reviewed` that name no file of the repository.
    pub missing: Vec<String>,
    /// The documents the server named in `must_read`.
    pub must_read: Vec<String>,
}

/// What the user chose at BRANCH_INTERVENTION (the payload's `choice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BranchChoice {
    /// Delete the task branches earlier sessions left.
    Delete,
    /// Merge the task branch HEAD is on into its base (the others are deleted).
    Merge,
    /// Keep working on the task branch HEAD is on.
    Continue,
}

impl BranchChoice {
    /// The choice a payload names (`delete`, `merge`, `continue`), or None.
    pub fn parse(text: &str) -> Option<BranchChoice> {
        match text.trim() {
            "delete" => Some(BranchChoice::Delete),
            "merge" => Some(BranchChoice::Merge),
            "continue" => Some(BranchChoice::Continue),
            _ => None,
        }
    }

    /// The word the payload used, as messages name it.
    pub fn as_str(self) -> &'static str {
        match self {
            BranchChoice::Delete => "delete",
            BranchChoice::Merge => "merge",
            BranchChoice::Continue => "continue",
        }
    }
}

/// Git work the adapter must do for an accepted submit before the new state counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// READY planning: create the `llm_task_*` branch and switch to it.
    CreateTaskBranch,
    /// BRANCH_INTERVENTION: what the user chose to do with the task branches earlier sessions
    /// left.
    BranchChoice(BranchChoice),
    /// PRE_COMMIT: commit the task branch's changes, leaving out the discarded files. The
    /// commit is gated (garbage, the repository's pre-commit hook) unless `gated` is false;
    /// files kept with a reason pass the garbage check.
    Commit { message: String, discard: Vec<String>, keep_with_reason: Vec<String>, gated: bool },
    /// MERGE: merge the task branch into its base.
    Merge,
}

#[derive(Debug, Clone)]
pub struct Accepted {
    pub session: Checkpoint,
    pub response: PhaseResponse,
    pub effect: Option<Effect>,
}

pub struct StartParams {
    pub session_id: String,
    pub intent: Intent,
    pub query: String,
    pub flags: Flags,
    pub created_at: String,
    /// `llm_task_*` branches left from earlier sessions.
    pub stale_branches: bool,
    /// The project's verification commands, for the instructions.
    pub verify_commands: Vec<String>,
}

pub fn start(contract: &Contract, p: StartParams) -> (Checkpoint, PhaseResponse) {
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
        verify_commands: p.verify_commands,
        ready_visits: 0,
        witnessed_runs: Vec::new(),
        hypotheses: Vec::new(),
    };
    let session = Checkpoint { orchestrator_state: state, phase_payloads: BTreeMap::new(), trail: Vec::new() };
    let response = response::for_phase(contract, &session);
    (session, response)
}

/// Decodes `data` for the session's phase and submits it. A refusal made while the agent's
/// compaction_count disagrees with the session's carries the phase summaries too, so an agent
/// that lost its context gets them back even when its first payload is refused.
pub fn submit_value(
    contract: &Contract,
    session: &Checkpoint,
    data: &Value,
    facts: &Facts,
) -> Result<Accepted, Refused> {
    submit(contract, session, &decode_payload(contract, session, data)?, facts)
}

/// Reads `data` as the payload of the session's phase, once: what the adapter gathers its
/// Facts from and hands to [`submit`]. A payload that does not decode is refused with the
/// contract's message (and the phase summaries when the compaction count disagrees).
pub fn decode_payload(contract: &Contract, session: &Checkpoint, data: &Value) -> Result<Payload, Refused> {
    let state = &session.orchestrator_state;
    if state.is_complete() {
        return Err(response::refusal(contract, session, msg::NO_ACTIVE_SESSION, &[]));
    }
    decode::decode(state.phase(), data).map_err(|v| {
        let mut r = refuse(contract, session, v);
        let claimed = data.get("compaction_count").and_then(Value::as_u64);
        if claimed.is_some_and(|c| c != state.compaction_count) {
            r.phase_summaries = Some(session.summaries());
        }
        r
    })
}

fn refuse(contract: &Contract, session: &Checkpoint, v: Violation) -> Refused {
    let vars: Vec<(&str, &str)> = v.vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    response::refusal(contract, session, v.key, &vars)
}

/// The evidence paths of a READY implementation payload, for the adapter to look up.
pub fn evidence_paths(state: &SessionState, payload: &Payload) -> Vec<String> {
    match &payload.body {
        // READY's completion re-checks the evidence every completed task was accepted with.
        Body::ReadyComplete => state
            .tasks
            .iter()
            .flat_map(|t| &t.checklist)
            .filter_map(|item| item.evidence.as_deref())
            .filter_map(evidence::parse_any_order)
            .map(|e| e.path)
            .collect(),
        Body::Verification(p) => p
            .hypotheses_verified
            .iter()
            .flatten()
            .flat_map(|h| h.evidence_items())
            .filter_map(|e| evidence::parse_any_order(&e))
            .map(|e| e.path)
            .collect(),
        Body::ReadyImpl(p) => p
            .checklist
            .iter()
            .flatten()
            .filter_map(|item| item.evidence.as_deref())
            .filter_map(evidence::parse_any_order)
            .map(|e| e.path)
            .collect(),
        _ => Vec::new(),
    }
}

/// Validates `payload` against the current phase and moves the session on.
pub fn submit(
    contract: &Contract,
    session: &Checkpoint,
    payload: &Payload,
    facts: &Facts,
) -> Result<Accepted, Refused> {
    let count = payload.common.compaction_count;
    let mismatch = count.is_some_and(|c| c != session.orchestrator_state.compaction_count);
    let mut accepted = Step { contract, session, payload, facts }.run().map_err(|mut r| {
        if mismatch {
            r.phase_summaries = Some(session.summaries());
        }
        r
    })?;
    if mismatch {
        accepted.response.phase_summaries = Some(session.summaries());
    }
    Ok(accepted)
}

/// One submit in progress: what it reads.
struct Step<'a> {
    contract: &'a Contract,
    session: &'a Checkpoint,
    payload: &'a Payload,
    facts: &'a Facts,
}

/// What an accepted phase decided, before the session moves on.
#[derive(Default)]
struct Outcome {
    effect: Option<Effect>,
    hints: Vec<String>,
    all_complete: bool,
    warning: Option<String>,
    unresolved_issues: Option<Vec<String>>,
}

impl<'a> Step<'a> {
    fn refuse(&self, key: Msg, vars: &[(&str, &str)]) -> Refused {
        response::refusal(self.contract, self.session, key, vars)
    }

    fn field_required(&self, field: &str) -> Refused {
        self.refuse(msg::FIELD_REQUIRED, &[("field", field)])
    }

    fn run(&self) -> Result<Accepted, Refused> {
        let state = &self.session.orchestrator_state;
        let (phase, ready) = (state.phase(), self.ready_step());
        let key = phase::contract_key(phase, ready);
        if !body_fits(phase, &self.payload.body) {
            return Err(self.refuse(msg::UNKNOWN_PHASE, &[("phase", phase.name())]));
        }
        if self.payload.summary().is_empty() {
            return Err(self.refuse(msg::SUMMARY_REQUIRED, &[]));
        }
        if schema::asks_tools_used(key) && self.payload.tools_used.is_none() {
            return Err(self.refuse(msg::TOOLS_USED_INVALID, &[]));
        }
        self.check_tools(key)?;

        let mut next = self.session.clone();
        if let Some(count) = self.payload.common.compaction_count {
            next.orchestrator_state.compaction_count = count;
        }
        let mut out = Outcome::default();
        let to = self.apply(&mut next, &mut out)?;
        let summary = self.payload.summary().to_owned();
        // One summary per phase; READY's implementation keeps one per task (`…#t1`, `…#t2`), so a
        // resuming agent and the merge note see what every task did, not only the last.
        let mut key = phase::summary_key(phase, ready);
        if let Body::ReadyImpl(p) = &self.payload.body
            && let Some(task) = p.task_id.as_ref().map(|t| t.0.trim()).filter(|t| !t.is_empty())
        {
            key = format!("{key}#{task}");
        }
        next.phase_payloads.insert(key, SummaryRecord { summary });
        let mut message = None;
        match to {
            Next::Phase(p, r) => next.orchestrator_state.enter(p, r),
            Next::Complete(key) => {
                next.orchestrator_state.enter(Phase::SessionComplete, None);
                let st = &next.orchestrator_state;
                let from = st.task_branch.clone().unwrap_or_default();
                let to = st.base_branch.clone().unwrap_or_default();
                message = Some(match key {
                    k if k == msg::MERGE_SUCCESS => {
                        self.contract.message(&k, &[("from_branch", &from), ("to_branch", &to)])
                    }
                    k => self.contract.message(&k, &[]),
                });
            }
        }
        let mut warning = out.warning;
        match cap::fit(&mut next, cap::CHECKPOINT_LIMIT) {
            Ok(cap::Fit::AsItWas) => {}
            Ok(cap::Fit::SummariesShortened) => {
                let note = self.contract.message(&msg::CHECKPOINT_SUMMARIES_SHORTENED, &[]);
                warning = Some(warning.map_or(note.clone(), |w| format!("{w}\n{note}")));
            }
            Err(size) => {
                let (size, limit) = (size.to_string(), cap::CHECKPOINT_LIMIT.to_string());
                return Err(self.refuse(msg::CHECKPOINT_TOO_LARGE, &[("size", &size), ("limit", &limit)]));
            }
        }
        let mut response = response::for_phase(self.contract, &next);
        response.message = message;
        response.all_complete = out.all_complete.then_some(true);
        response.warning = warning;
        response.unresolved_issues = out.unresolved_issues;
        response.query_frame_hints = (!out.hints.is_empty()).then_some(out.hints);
        Ok(Accepted { session: next, response, effect: out.effect })
    }

    /// The READY substep this payload is for (its keys decide: a plan, a task, or the end).
    fn ready_step(&self) -> Option<ReadyStep> {
        match &self.payload.body {
            Body::ReadyPlan(_) => Some(ReadyStep::Plan),
            Body::ReadyImpl(_) => Some(ReadyStep::Impl),
            Body::ReadyComplete => Some(ReadyStep::Complete),
            _ => self.session.orchestrator_state.ready_step(),
        }
    }
}

fn normalize_text(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// `./a/b` → `a/b`, `a\b` → `a/b`.
/// A document named in DOCUMENT_RESEARCH, as a repository-relative path: `docs/a.md:10-20`
/// and `docs/a.md#setup` name `docs/a.md`.
pub fn document_path(path: &str) -> String {
    let p = normalize_rel(path);
    p.split('#').next().unwrap_or(&p).to_owned()
}

pub fn normalize_rel(path: &str) -> String {
    let p = path.trim().replace('\\', "/");
    let p = p.trim_start_matches("./");
    p.split(':').next().unwrap_or(p).trim_end_matches('/').to_owned()
}
