//! What an accepted payload does: the next phase from the flow, the counters, the gates, and the
//! effect the adapter carries out.

use serde_json::Value;

use super::{BranchChoice, Effect, MIN_REASON_CHARS, Outcome, Step, normalize_rel, tasks};
use crate::contract::catalogue::{self as msg, Msg};
use crate::engine::evidence::{self, EvidenceFile};
use crate::engine::flow::{self, Next};
use crate::engine::payload::{self, Body};
use crate::engine::phase::{Phase, ReadyStep};
use crate::engine::response::Refused;
use crate::engine::state::{Checkpoint, EvidenceKind, GateLevel, SessionState, VerifiedHypothesis};

impl Step<'_> {
    /// The phase's own checks and effects on `next`; returns where the session goes.
    pub(super) fn apply(&self, next: &mut Checkpoint, out: &mut Outcome) -> Result<Next, Refused> {
        let state = &self.session.orchestrator_state;
        let flags = &state.flags;
        let st = &mut next.orchestrator_state;
        Ok(match &self.payload.body {
            Body::BranchIntervention(p) => {
                let Some(choice) = p.choice.as_deref().and_then(BranchChoice::parse) else {
                    return Err(self.refuse(msg::INVALID_CHOICE, &[]));
                };
                if choice == BranchChoice::Continue {
                    st.branch_policy = Some(choice.as_str().into());
                }
                out.effect = Some(Effect::BranchChoice(choice));
                Next::Phase(flow::after_branch_intervention(flags), None)
            }
            Body::DocumentResearch(p) => {
                let Some(reviewed) = &p.documents_reviewed else {
                    return Err(self.field_required("documents_reviewed"));
                };
                // Nothing read is an answer only when nothing named is left to read.
                if reviewed.is_empty() && !self.nothing_left_to_read(p) {
                    return Err(self.refuse(msg::EMPTY_DOCUMENTS, &[]));
                }
                self.check_documents(p)?;
                Next::Phase(Phase::QueryFrame, None)
            }
            Body::QueryFrame(p) => {
                out.hints = self.check_query_frame(p)?;
                // A warning, not a refusal: a name can be right and still read far from the words.
                if !self.facts.far_symbols.is_empty() {
                    let symbols = self.facts.far_symbols.join(", ");
                    out.warning = Some(self.contract.message(&msg::SYMBOLS_FAR_FROM_REQUEST, &[("symbols", &symbols)]));
                }
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
                // Explored means shown: the adapter has put in what the tools showed and what
                // the client's Read opened; naming a file adds nothing.
                let unseen: Vec<String> = files
                    .iter()
                    .map(|f| normalize_rel(f))
                    .filter(|rel| !rel.is_empty() && !state.explored_files.contains(rel))
                    .collect();
                if !unseen.is_empty() {
                    return Err(self.refuse(msg::EXPLORED_NOT_SHOWN, &[("files", &unseen.join(", "))]));
                }
                Next::Phase(Phase::Q1, None)
            }
            Body::Q1(p) => {
                let next = self.gate(Phase::Q1, p.needs_more_information.as_ref(), p.reason.as_ref())?;
                // SEMANTIC asked for (or required by gate full) but impossible: say so.
                let asked = p.needs_more_information == Some(Value::Bool(true)) || flags.gate_level == GateLevel::Full;
                if asked && !self.facts.semantic_available {
                    out.warning = Some(self.contract.message(&msg::SEMANTIC_UNAVAILABLE_SKIPPED, &[]));
                }
                next
            }
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
                let mut judged = Vec::new();
                for (i, h) in list.iter().enumerate() {
                    judged.push(self.judge_hypothesis(i, h, state)?);
                }
                st.hypotheses.extend(judged);
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
                let reopened = tasks::reopen_stale(self.contract, self.session, st, self.facts);
                if reopened.is_empty() {
                    let unchanged = tasks::flag_unchanged(st, self.facts);
                    if !unchanged.is_empty() {
                        out.warning =
                            Some(self.contract.message(&msg::EVIDENCE_UNCHANGED, &[("items", &unchanged.join("; "))]));
                    }
                    flow::after_ready(flags)
                } else {
                    let list: Vec<String> =
                        reopened.iter().map(|(task, evidence, why)| format!("{task} ({evidence}: {why})")).collect();
                    out.warning = Some(self.contract.message(&msg::EVIDENCE_REOPENED, &[("tasks", &list.join("; "))]));
                    Next::Phase(Phase::Ready, Some(ReadyStep::Impl))
                }
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
                let action = p.action_taken.as_deref().unwrap_or("").trim();
                st.revert_reason = Some(self.contract.message(&msg::REVERT_AFTER_INTERVENTION, &[("action", action)]));
                Next::Phase(Phase::Ready, Some(ReadyStep::Plan))
            }
            Body::PreCommit(p) => {
                let message = p.commit_message.as_deref().unwrap_or("").trim().to_owned();
                if message.is_empty() {
                    return Err(self.refuse(msg::MISSING_COMMIT_MESSAGE, &[]));
                }
                let discard = self.discarded_files(p)?;
                let fixes = self.fixed_files(p)?;
                self.check_every_file_reviewed(p)?;
                if state.task_branch.is_none() {
                    return Err(self.refuse(msg::PRE_COMMIT_NO_TASK_BRANCH, &[]));
                }
                if !fixes.is_empty() {
                    // Nothing is committed: back to planning, where the files can be written
                    // (they are the task's own changes, so they count as explored).
                    let listed: Vec<String> = fixes.iter().map(|(f, why)| format!("{f} ({why})")).collect();
                    st.explored_files.extend(fixes.into_iter().map(|(f, _)| f).filter(|f| !f.is_empty()));
                    let reason = self.contract.message(&msg::FIX_BEFORE_COMMIT, &[("fixes", &listed.join("; "))]);
                    st.revert_reason = Some(reason);
                    return Ok(Next::Phase(Phase::Ready, Some(ReadyStep::Plan)));
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
                        out.effect = Some(review_fixes_commit());
                    }
                    Next::Phase(Phase::Merge, None)
                } else {
                    st.counters.quality_revert_count += 1;
                    if st.counters.quality_revert_count >= flow::QUALITY_REVERTS_BEFORE_FORCED_COMPLETION {
                        st.forced_completion = true;
                        // What was fixed during the last review is committed as on a pass, so
                        // nothing reviewed is left uncommitted at MERGE.
                        if st.task_branch.is_some() {
                            out.effect = Some(review_fixes_commit());
                        }
                        out.warning = Some(self.contract.message(&msg::QUALITY_FORCED_COMPLETION, &[]));
                        out.unresolved_issues = Some(issues);
                        Next::Phase(Phase::Merge, None)
                    } else {
                        let (count, limit) = (
                            st.counters.quality_revert_count.to_string(),
                            flow::QUALITY_REVERTS_BEFORE_FORCED_COMPLETION.to_string(),
                        );
                        st.revert_reason = Some(self.contract.message(
                            &msg::REVERT_QUALITY_ISSUES,
                            &[("issues", &issues.join("; ")), ("count", &count), ("limit", &limit)],
                        ));
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

    /// A gate's answer: a bool and a reason of at least [`MIN_REASON_CHARS`].
    /// A confirmed hypothesis's evidence, judged: `run:N` must name a run the server
    /// witnessed, `path:line` code that exists; words alone make it reasoning only.
    fn judge_hypothesis(
        &self,
        index: usize,
        h: &payload::Hypothesis,
        state: &SessionState,
    ) -> Result<VerifiedHypothesis, Refused> {
        let items = h.evidence_items();
        let (mut runs, mut code) = (Vec::new(), false);
        for item in &items {
            if let Some(run) = payload::cited_run(item) {
                if !state.witnessed_runs.iter().any(|r| r.id == run) {
                    let known: Vec<String> = state.witnessed_runs.iter().map(|r| format!("run:{}", r.id)).collect();
                    let known = if known.is_empty() { "none yet".to_owned() } else { known.join(", ") };
                    return Err(self.refuse(
                        msg::HYPOTHESIS_RUN_UNKNOWN,
                        &[("index", &index.to_string()), ("run", &run.to_string()), ("runs", &known)],
                    ));
                }
                runs.push(run);
            } else if let Some(r) = evidence::parse(item) {
                let real = matches!(self.facts.evidence.get(&r.path), Some(EvidenceFile::Lines(lines)) if r.end <= lines.len());
                if !real {
                    return Err(self.refuse(
                        msg::HYPOTHESIS_EVIDENCE_INVALID,
                        &[("index", &index.to_string()), ("evidence", item)],
                    ));
                }
                code = true;
            }
        }
        let kind = if !runs.is_empty() {
            EvidenceKind::WitnessedRun
        } else if code {
            EvidenceKind::Code
        } else {
            EvidenceKind::Reasoning
        };
        let hypothesis = h.hypothesis.as_deref().unwrap_or_default().trim().to_owned();
        Ok(VerifiedHypothesis { hypothesis, evidence: items, kind, runs })
    }

    pub(super) fn gate(&self, gate: Phase, answer: Option<&Value>, reason: Option<&Value>) -> Result<Next, Refused> {
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
    pub(super) fn post_impl_verify(
        &self,
        p: &payload::PostImplVerifyPayload,
        st: &mut SessionState,
    ) -> Result<Next, Refused> {
        let Some(passed) = p.passed else { return Err(self.field_required("passed")) };
        if passed.0 {
            // The agent's word does not stand against what the server saw itself.
            // A test that already failed in the baseline is not the change's doing.
            if let Some((run, new)) = st.regression() {
                let mut outcome = run.outcome();
                if let Some(base) = st.baseline_for(&run.verify_command).filter(|b| !b.succeeded()) {
                    let new = if new.is_empty() { "unknown by name".to_owned() } else { new.join(", ") };
                    outcome.push_str(&format!("; failing now and not in the baseline (run {}): {new}", base.id));
                }
                return Err(self.refuse(
                    msg::VERIFY_PASSED_CONTRADICTS_RUN,
                    &[("command", &run.command), ("run", &run.id.to_string()), ("outcome", &outcome)],
                ));
            }
            // Without a witnessed run the agent's word stands only where the server could not
            // have run a check itself.
            if st.current_runs().is_empty() && !self.facts.runnable_checks.is_empty() {
                let listed: Vec<String> = self.facts.runnable_checks.iter().map(|c| format!("`{c}`")).collect();
                return Err(self.refuse(msg::VERIFY_PASSED_UNWITNESSED, &[("commands", &listed.join(", "))]));
            }
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
        let details = if details.is_empty() { "(no details given)".to_owned() } else { details };
        let limit = flow::FAILURES_BEFORE_INTERVENTION;
        let count = worst.max(st.counters.verification_failure_count);
        let next_step = if !flow::intervention_enabled(&st.flags) {
            self.contract.message(&msg::FAILURES_NO_INTERVENTION, &[])
        } else {
            let left = limit.saturating_sub(count).to_string();
            self.contract.message(&msg::FAILURES_BEFORE_INTERVENTION, &[("left", &left), ("limit", &limit.to_string())])
        };
        st.revert_reason = Some(self.contract.message(
            &msg::REVERT_VERIFICATION_FAILED,
            &[("details", &details), ("count", &count.to_string()), ("next_step", &next_step)],
        ));
        if over && flow::intervention_enabled(&st.flags) {
            Ok(Next::Phase(Phase::VerifyIntervention, None))
        } else {
            Ok(Next::Phase(Phase::Ready, Some(ReadyStep::Plan)))
        }
    }
}

/// QUALITY_REVIEW's commit of the fixes made during the review (ungated: PRE_COMMIT judged the
/// task's changes already).
fn review_fixes_commit() -> Effect {
    Effect::Commit {
        message: "Quality review fixes".into(),
        discard: Vec::new(),
        keep_with_reason: Vec::new(),
        gated: false,
    }
}

/// Files the review keeps with a reason (their garbage findings do not block the commit).
pub(super) fn kept_with_reason(p: &payload::PreCommitPayload) -> Vec<String> {
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

/// A gate's four messages: answer missing, reason missing, answer not a bool, reason too short.
pub(super) fn gate_messages(gate: Phase) -> [Msg; 4] {
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

/// The target QUERY_FRAME named: the `target_feature` slot's value and the `target_symbols`.
pub(super) fn learned_from_query_frame(p: &payload::QueryFramePayload) -> crate::engine::state::Learned {
    let feature = p.slots.as_ref().and_then(|s| s.target_feature.as_ref()).map(|s| s.value().to_owned());
    let symbols = p.target_symbols.iter().flatten().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect();
    crate::engine::state::Learned { target_feature: feature.unwrap_or_default(), target_symbols: symbols }
}
