//! `start_session` and `submit_phase`: the session in, the payload and the adapter's facts in,
//! the new session and the response out. Nothing here touches the disk or git.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::evidence::{self, EvidenceFile};
use super::flow::{self, Next};
use super::payload::{self, Body, Payload, Violation};
use super::phase::{self, Phase, ReadyStep};
use super::registry;
use super::response::{self, PhaseResponse, Refused};
use super::schema;
use super::state::{Checkpoint, Counters, Flags, Intent, PhaseState, SessionState, SummaryRecord};
use super::tasks;
use crate::contract::Contract;
use crate::contract::catalogue::{self as msg, Msg};

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
}

/// DOCUMENT_RESEARCH's checks, made by the adapter against the repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentFacts {
    /// Entries of `documents_reviewed` that name no file of the repository.
    pub missing: Vec<String>,
    /// The documents the server named in `must_read`.
    pub must_read: Vec<String>,
}

/// Git work the adapter must do for an accepted submit before the new state counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// READY planning: create the `llm_task_*` branch and switch to it.
    CreateTaskBranch,
    /// BRANCH_INTERVENTION `delete`, `merge` or `continue`.
    BranchChoice(String),
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
    };
    let session = Checkpoint { orchestrator_state: state, phase_payloads: BTreeMap::new() };
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
    let state = &session.orchestrator_state;
    if state.is_complete() {
        return Err(response::refusal(contract, session, msg::NO_ACTIVE_SESSION, &[]));
    }
    let payload = payload::decode(state.phase(), data).map_err(|v| {
        let mut r = refuse(contract, session, v);
        let claimed = data.get("compaction_count").and_then(Value::as_u64);
        if claimed.is_some_and(|c| c != state.compaction_count) {
            r.phase_summaries = Some(session.summaries());
        }
        r
    })?;
    submit(contract, session, &payload, facts)
}

fn refuse(contract: &Contract, session: &Checkpoint, v: Violation) -> Refused {
    let vars: Vec<(&str, &str)> = v.vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    response::refusal(contract, session, v.key, &vars)
}

/// The evidence paths of a READY implementation payload, for the adapter to look up.
pub fn evidence_paths(payload: &Payload) -> Vec<String> {
    match &payload.body {
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
        next.phase_payloads.insert(phase::summary_key(phase, ready), SummaryRecord { summary });
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
        let mut response = response::for_phase(self.contract, &next);
        response.message = message;
        response.all_complete = out.all_complete.then_some(true);
        response.warning = out.warning;
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

    /// `tools_used` against what the server really served in this phase.
    fn check_tools(&self, key: &str) -> Result<(), Refused> {
        let called = &self.session.orchestrator_state.tools_called;
        let reported: BTreeSet<&str> = self.payload.tools_used.iter().flatten().map(String::as_str).collect();
        let never_called: Vec<&str> =
            reported.iter().copied().filter(|t| registry::is_served(t) && !called.contains(*t)).collect();
        if !never_called.is_empty() {
            return Err(self.refuse(msg::TOOLS_NOT_CALLED, &[("tools", &never_called.join(", "))]));
        }
        let required = schema::required_tools(key);
        let missing: Vec<&str> = required.iter().copied().filter(|t| !called.contains(*t)).collect();
        if !missing.is_empty() {
            return Err(self.refuse(msg::REQUIRED_TOOLS_NOT_USED, &[("missing_list", &missing.join(", "))]));
        }
        let unreported: Vec<&str> = required.iter().copied().filter(|t| !reported.contains(t)).collect();
        if !unreported.is_empty() {
            return Err(self.refuse(msg::REQUIRED_TOOLS_NOT_REPORTED, &[("missing_reported", &unreported.join(", "))]));
        }
        if key == "EXPLORATION" {
            let distinct = called.iter().filter(|t| registry::is_code_intelligence(t)).count();
            if distinct < schema::EXPLORATION_MIN_TOOLS {
                return Err(self.refuse(msg::EXPLORATION_MIN_TOOLS, &[]));
            }
        }
        Ok(())
    }

    /// The phase's own checks and effects on `next`; returns where the session goes.
    fn apply(&self, next: &mut Checkpoint, out: &mut Outcome) -> Result<Next, Refused> {
        let state = &self.session.orchestrator_state;
        let flags = &state.flags;
        let st = &mut next.orchestrator_state;
        Ok(match &self.payload.body {
            Body::BranchIntervention(p) => {
                let choice = p.choice.as_deref().map(str::trim).unwrap_or("");
                if !matches!(choice, "delete" | "merge" | "continue") {
                    return Err(self.refuse(msg::INVALID_CHOICE, &[]));
                }
                if choice == "continue" {
                    st.branch_policy = Some("continue".into());
                }
                out.effect = Some(Effect::BranchChoice(choice.to_owned()));
                Next::Phase(flow::after_branch_intervention(flags), None)
            }
            Body::DocumentResearch(p) => {
                if p.documents_reviewed.as_ref().is_none_or(Vec::is_empty) {
                    return Err(self.refuse(msg::EMPTY_DOCUMENTS, &[]));
                }
                self.check_documents(p)?;
                Next::Phase(Phase::QueryFrame, None)
            }
            Body::QueryFrame(p) => {
                out.hints = self.check_query_frame(p)?;
                st.learned = learned_from_query_frame(p);
                flow::after_query_frame(state.intent, flags)
            }
            Body::Exploration(p) => {
                let (Some(files), Some(findings)) = (&p.explored_files, &p.findings) else {
                    return Err(self.refuse(msg::EMPTY_RESULT, &[]));
                };
                if files.is_empty() || findings.is_empty() {
                    return Err(self.refuse(msg::EMPTY_RESULT, &[]));
                }
                for f in files {
                    let rel = normalize_rel(f);
                    if !rel.is_empty() {
                        st.explored_files.insert(rel);
                    }
                }
                Next::Phase(Phase::Q1, None)
            }
            Body::Q1(p) => self.gate(Phase::Q1, p.needs_more_information.as_ref(), p.reason.as_ref())?,
            Body::Q2(p) => self.gate(Phase::Q2, p.has_unverified_hypotheses.as_ref(), p.reason.as_ref())?,
            Body::Q3(p) => self.gate(Phase::Q3, p.needs_impact_analysis.as_ref(), p.reason.as_ref())?,
            Body::Semantic(p) => {
                if p.search_results.as_ref().is_none_or(Vec::is_empty) {
                    return Err(self.refuse(msg::EMPTY_SEARCH_RESULTS, &[]));
                }
                Next::Phase(Phase::Q2, None)
            }
            Body::Verification(p) => {
                let list = p.hypotheses_verified.as_deref().unwrap_or_default();
                if list.is_empty() {
                    return Err(self.refuse(msg::EMPTY_HYPOTHESES, &[]));
                }
                for (i, h) in list.iter().enumerate() {
                    if h.hypothesis.as_deref().is_none_or(|s| s.trim().is_empty()) {
                        return Err(self.field_required(&format!("hypotheses_verified[{i}].hypothesis")));
                    }
                    if h.result.is_none() {
                        return Err(self.field_required(&format!("hypotheses_verified[{i}].result")));
                    }
                }
                if list.iter().any(|h| h.result.is_some_and(|r| !r.0)) {
                    return Err(self.refuse(msg::RESULT_FALSE_EXISTS, &[]));
                }
                Next::Phase(Phase::Q3, None)
            }
            Body::ImpactAnalysis(p) => {
                let empty = match &p.impact_summary {
                    Some(Value::Object(m)) => m.is_empty(),
                    Some(Value::String(s)) => s.trim().is_empty(),
                    Some(Value::Array(a)) => a.is_empty(),
                    _ => true,
                };
                if empty {
                    return Err(self.refuse(msg::EMPTY_IMPACT_SUMMARY, &[]));
                }
                flow::end_of_exploration(state.intent, flags, Phase::ImpactAnalysis)
            }
            Body::ReadyPlan(p) => {
                st.tasks = tasks::plan(self.contract, self.session, p)?;
                st.revert_reason = None;
                // A task branch unless `quick`; after `continue` the adopted branch is kept,
                // and with none adopted a new one is made, as in a fresh session.
                if st.task_branch.is_none() && flow::uses_task_branch(&st.flags) {
                    out.effect = Some(Effect::CreateTaskBranch);
                }
                Next::Phase(Phase::Ready, Some(ReadyStep::Impl))
            }
            Body::ReadyImpl(p) => {
                tasks::complete(self.contract, self.session, st, p, self.facts)?;
                if st.pending_tasks().next().is_none() {
                    out.all_complete = true;
                    Next::Phase(Phase::Ready, Some(ReadyStep::Complete))
                } else {
                    Next::Phase(Phase::Ready, Some(ReadyStep::Impl))
                }
            }
            Body::ReadyComplete => {
                // In planning (first time, or after a revert) a plan is due before completion.
                if state.tasks.is_empty() || state.ready_step() == Some(ReadyStep::Plan) {
                    return Err(self.refuse(msg::NO_TASKS_REGISTERED, &[]));
                }
                let pending = state.pending_tasks().count();
                if pending > 0 {
                    return Err(self.refuse(msg::INCOMPLETE_TASKS, &[("count", &pending.to_string())]));
                }
                flow::after_ready(flags)
            }
            Body::PostImplVerify(p) => self.post_impl_verify(p, st)?,
            Body::VerifyIntervention(p) => {
                for (field, value) in [("prompt_used", &p.prompt_used), ("action_taken", &p.action_taken)] {
                    if value.as_deref().is_none_or(|s| s.trim().is_empty()) {
                        return Err(self.field_required(field));
                    }
                }
                st.counters.intervention_count += 1;
                st.counters.verification_failure_count = 0;
                for t in &mut st.tasks {
                    t.failure_count = 0;
                }
                st.revert_reason = Some(p.action_taken.as_deref().unwrap_or("").trim().to_owned());
                Next::Phase(Phase::Ready, Some(ReadyStep::Plan))
            }
            Body::PreCommit(p) => {
                let message = p.commit_message.as_deref().unwrap_or("").trim().to_owned();
                if message.is_empty() {
                    return Err(self.refuse(msg::MISSING_COMMIT_MESSAGE, &[]));
                }
                let discard = self.discarded_files(p)?;
                self.check_every_file_reviewed(p)?;
                if state.task_branch.is_none() {
                    return Err(self.refuse(msg::PRE_COMMIT_NO_TASK_BRANCH, &[]));
                }
                let keep_with_reason = kept_with_reason(p);
                out.effect = Some(Effect::Commit { message, discard, keep_with_reason, gated: true });
                Next::Phase(flow::after_pre_commit(flags), None)
            }
            Body::QualityReview(p) => {
                if p.quality_score.is_none() {
                    return Err(self.field_required("quality_score"));
                }
                let issues: Vec<String> = p.issues.iter().flatten().map(|i| i.0.clone()).collect();
                if issues.is_empty() {
                    st.quality_review_passed = true;
                    // Fixes made during the review are committed too, so nothing reviewed is left
                    // uncommitted when the branch is merged.
                    if st.task_branch.is_some() {
                        out.effect = Some(Effect::Commit {
                            message: "Quality review fixes".into(),
                            discard: Vec::new(),
                            keep_with_reason: Vec::new(),
                            gated: false,
                        });
                    }
                    Next::Phase(Phase::Merge, None)
                } else {
                    st.counters.quality_revert_count += 1;
                    if st.counters.quality_revert_count >= flow::QUALITY_REVERTS_BEFORE_FORCED_COMPLETION {
                        st.forced_completion = true;
                        out.warning = Some(self.contract.message(&msg::QUALITY_FORCED_COMPLETION, &[]));
                        out.unresolved_issues = Some(issues);
                        Next::Phase(Phase::Merge, None)
                    } else {
                        st.revert_reason = Some(issues.join("; "));
                        Next::Phase(Phase::Ready, Some(ReadyStep::Plan))
                    }
                }
            }
            Body::Merge => {
                // Every flow that reaches MERGE passed PRE_COMMIT, which needs the task branch.
                if state.task_branch.is_none() {
                    return Err(self.refuse(msg::MERGE_NO_TASK_BRANCH, &[]));
                }
                out.effect = Some(Effect::Merge);
                Next::Complete(msg::MERGE_SUCCESS)
            }
        })
    }

    /// Slots with quotes: every quote must be in the user's query (whitespace and case aside).
    /// Returns the hints for the slots left empty.
    fn check_query_frame(&self, p: &payload::QueryFramePayload) -> Result<Vec<String>, Refused> {
        let query = normalize_text(&self.session.orchestrator_state.query);
        let slots = p.slots.clone().unwrap_or_default();
        let mut hints = Vec::new();
        for (name, slot) in slots.named() {
            if let Some(quote) = slot.and_then(payload::Slot::quote)
                && !query.contains(&normalize_text(quote))
            {
                return Err(self.refuse(msg::QUOTE_NOT_IN_QUERY, &[("slot", name), ("quote", quote)]));
            }
            if slot.is_none_or(|s| s.value().is_empty()) {
                hints.push(self.contract.message(&slot_hint(name), &[]));
            }
        }
        Ok(hints)
    }

    /// A gate's answer: a bool and a reason of at least [`MIN_REASON_CHARS`].
    fn gate(&self, gate: Phase, answer: Option<&Value>, reason: Option<&Value>) -> Result<Next, Refused> {
        let [required, reason_required, wrong_type, reason_length] = gate_messages(gate);
        let answer = match answer {
            None | Some(Value::Null) => return Err(self.refuse(required, &[])),
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(self.refuse(wrong_type, &[])),
        };
        match reason.and_then(Value::as_str) {
            None => Err(self.refuse(reason_required, &[])),
            Some(r) if r.trim().is_empty() => Err(self.refuse(reason_required, &[])),
            Some(r) if r.chars().count() < MIN_REASON_CHARS => Err(self.refuse(reason_length, &[])),
            Some(_) => {
                let st = &self.session.orchestrator_state;
                Ok(flow::after_gate(gate, answer, &st.flags, st.intent, self.facts.semantic_available))
            }
        }
    }

    /// Step 15. A failure counts against the named tasks (all tasks when none are named, so the
    /// safety valve cannot be dodged by naming none).
    fn post_impl_verify(&self, p: &payload::PostImplVerifyPayload, st: &mut SessionState) -> Result<Next, Refused> {
        let Some(passed) = p.passed else { return Err(self.field_required("passed")) };
        if passed.0 {
            return Ok(flow::after_verify_passed(&st.flags));
        }
        let details = p.details.as_deref().unwrap_or("").trim().to_owned();
        let named: Vec<String> = p.failed_tasks.iter().flatten().map(|t| t.trimmed().to_owned()).collect();
        if let Some(unknown) = named.iter().find(|id| !st.tasks.iter().any(|t| &t.id == *id)) {
            return Err(self.refuse(msg::UNKNOWN_TASK, &[("task_id", unknown)]));
        }
        if st.flags.only_verify {
            return Ok(Next::Complete(msg::VERIFICATION_FAILED_ONLY_VERIFY));
        }
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

    /// `documents_reviewed` names real files, and covers `must_read` (a document skipped with
    /// a reason of at least 10 characters counts as covered).
    fn check_documents(&self, p: &payload::DocumentResearchPayload) -> Result<(), Refused> {
        let Some(docs) = &self.facts.documents else { return Ok(()) };
        if !docs.missing.is_empty() {
            return Err(self.refuse(msg::DOCUMENTS_NOT_FOUND, &[("files", &docs.missing.join(", "))]));
        }
        let reviewed: BTreeSet<String> = p.documents_reviewed.iter().flatten().map(|d| document_path(d)).collect();
        let skipped: BTreeSet<String> = p
            .skipped_documents
            .iter()
            .flatten()
            .filter(|s| s.reason.as_deref().is_some_and(|r| r.trim().chars().count() >= MIN_REASON_CHARS))
            .filter_map(|s| s.file.as_deref().map(document_path))
            .collect();
        let unread: Vec<&str> = docs
            .must_read
            .iter()
            .map(String::as_str)
            .filter(|d| !reviewed.contains(*d) && !skipped.contains(*d))
            .collect();
        if unread.is_empty() {
            Ok(())
        } else {
            Err(self.refuse(msg::MUST_READ_NOT_REVIEWED, &[("files", &unread.join(", "))]))
        }
    }

    /// Every file the task changed has a decision (keep or discard): nothing is committed
    /// unreviewed.
    fn check_every_file_reviewed(&self, p: &payload::PreCommitPayload) -> Result<(), Refused> {
        let Some(changed) = &self.facts.changed_files else { return Ok(()) };
        let reviewed: BTreeSet<String> = p
            .reviewed_files
            .iter()
            .flatten()
            .filter_map(|f| match f {
                payload::ReviewedFile::Path(path) => Some(normalize_rel(path)),
                payload::ReviewedFile::Decision(d) => d.file.as_deref().map(normalize_rel),
            })
            .collect();
        let missing: Vec<&str> = changed.iter().map(String::as_str).filter(|f| !reviewed.contains(*f)).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(self.refuse(msg::REVIEW_INCOMPLETE, &[("files", &missing.join(", "))]))
        }
    }

    /// Files the review decided to discard; each needs a reason.
    fn discarded_files(&self, p: &payload::PreCommitPayload) -> Result<Vec<String>, Refused> {
        let mut out = Vec::new();
        for entry in p.reviewed_files.iter().flatten() {
            let payload::ReviewedFile::Decision(f) = entry else { continue };
            if f.decision.as_deref().map(str::trim) != Some("discard") {
                continue;
            }
            if f.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
                return Err(self.refuse(msg::REVIEW_FAILED, &[]));
            }
            // A name that is no path (empty, "/") names no file to discard.
            let file = normalize_rel(f.file.as_deref().unwrap_or(""));
            if !file.is_empty() {
                out.push(file);
            }
        }
        Ok(out)
    }
}

/// Files the review keeps with a reason (their garbage findings do not block the commit).
fn kept_with_reason(p: &payload::PreCommitPayload) -> Vec<String> {
    p.reviewed_files
        .iter()
        .flatten()
        .filter_map(|f| match f {
            payload::ReviewedFile::Decision(d)
                if d.decision.as_deref().map(str::trim) == Some("keep")
                    && d.reason.as_deref().is_some_and(|r| !r.trim().is_empty()) =>
            {
                d.file.as_deref().map(normalize_rel)
            }
            _ => None,
        })
        .collect()
}

/// Whether a decoded body belongs to `phase` (the adapter decodes with the phase it read).
fn body_fits(phase: Phase, body: &Body) -> bool {
    matches!(
        (phase, body),
        (Phase::BranchIntervention, Body::BranchIntervention(_))
            | (Phase::DocumentResearch, Body::DocumentResearch(_))
            | (Phase::QueryFrame, Body::QueryFrame(_))
            | (Phase::Exploration, Body::Exploration(_))
            | (Phase::Q1, Body::Q1(_))
            | (Phase::Semantic, Body::Semantic(_))
            | (Phase::Q2, Body::Q2(_))
            | (Phase::Verification, Body::Verification(_))
            | (Phase::Q3, Body::Q3(_))
            | (Phase::ImpactAnalysis, Body::ImpactAnalysis(_))
            | (Phase::Ready, Body::ReadyPlan(_) | Body::ReadyImpl(_) | Body::ReadyComplete)
            | (Phase::PostImplVerify, Body::PostImplVerify(_))
            | (Phase::VerifyIntervention, Body::VerifyIntervention(_))
            | (Phase::PreCommit, Body::PreCommit(_))
            | (Phase::QualityReview, Body::QualityReview(_))
            | (Phase::Merge, Body::Merge)
    )
}

/// A gate's four messages: answer missing, reason missing, answer not a bool, reason too short.
fn gate_messages(gate: Phase) -> [Msg; 4] {
    match gate {
        Phase::Q1 => [
            msg::SEMANTIC_GATE_REQUIRED,
            msg::SEMANTIC_GATE_REASON_REQUIRED,
            msg::SEMANTIC_GATE_TYPE,
            msg::SEMANTIC_GATE_REASON_LENGTH,
        ],
        Phase::Q2 => [
            msg::VERIFICATION_GATE_REQUIRED,
            msg::VERIFICATION_GATE_REASON_REQUIRED,
            msg::VERIFICATION_GATE_TYPE,
            msg::VERIFICATION_GATE_REASON_LENGTH,
        ],
        _ => [
            msg::IMPACT_GATE_REQUIRED,
            msg::IMPACT_GATE_REASON_REQUIRED,
            msg::IMPACT_GATE_TYPE,
            msg::IMPACT_GATE_REASON_LENGTH,
        ],
    }
}

fn slot_hint(slot: &str) -> Msg {
    match slot {
        "target_feature" => msg::TARGET_FEATURE_MISSING,
        "trigger_condition" => msg::TRIGGER_CONDITION_MISSING,
        "observed_issue" => msg::OBSERVED_ISSUE_MISSING,
        _ => msg::DESIRED_ACTION_MISSING,
    }
}

/// The target QUERY_FRAME named: the `target_feature` slot's value and the `target_symbols`.
fn learned_from_query_frame(p: &payload::QueryFramePayload) -> super::state::Learned {
    let feature = p.slots.as_ref().and_then(|s| s.target_feature.as_ref()).map(|s| s.value().to_owned());
    let symbols = p.target_symbols.iter().flatten().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    super::state::Learned { target_feature: feature.unwrap_or_default(), target_symbols: symbols }
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
