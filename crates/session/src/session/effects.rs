//! The git work the engine asks for (task branch, commit, merge, stale branches), carried out
//! with the checkpoint as one journaled operation, and what the history keeps of a session.

use std::collections::BTreeMap;

use super::Sessions;
use super::replies::{
    CleanupReply, ErrorBody, KeptBranch, ReviewReply, SessionError, SessionResult, contract_error, invalid, plain,
};
use super::store::{Ending, SessionStore};
use crate::branches;
use crate::branches::stale::Unmerged;
use crate::workspace::Workspace;
use code_intel_gitstate::journal::WriterError;
use code_intel_workflow::contract::catalogue::{self as msg, Msg};
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::state::{Checkpoint, SessionState};
use code_intel_workflow::engine::submit::BranchChoice;
use code_intel_workflow::engine::submit::Effect;

/// A failed effect: nothing changed. The contract message of the failure, its placeholders,
/// and what went wrong (for `details`).
pub(super) struct EffectFailure {
    pub(super) message: Msg,
    pub(super) vars: Vec<(&'static str, String)>,
    pub(super) details: String,
}

/// The plans below say a failure as (message, placeholders, details); `?` makes it one.
impl From<(Msg, Vec<(&'static str, String)>, String)> for EffectFailure {
    fn from((message, vars, details): (Msg, Vec<(&'static str, String)>, String)) -> EffectFailure {
        EffectFailure { message, vars, details }
    }
}

/// An effect carried out: the checkpoint as written, and what the agent must pass on.
pub(super) struct Applied {
    pub(super) checkpoint: Checkpoint,
    pub(super) notes: Vec<String>,
}

impl Sessions {
    /// Carries out the engine's git work together with the checkpoint `step` carries, as one
    /// journaled operation (see [`code_intel_gitstate::journal`]); returns the checkpoint as written
    /// and what to tell the agent. On
    /// failure returns the contract message of the failure, its placeholders, and what went
    /// wrong; nothing changed then.
    pub(super) fn apply_effect(
        &self,
        ws: &Workspace,
        effect: &Effect,
        old_phase: Phase,
        mut step: SessionStep,
        passed: Option<gix::ObjectId>,
    ) -> Result<Applied, EffectFailure> {
        let root = ws.repo.root();
        // Task branches a choice of the agent's left in place because they hold work.
        let mut kept: Vec<String> = Vec::new();
        let store = self.store().map_err(|e| (msg::FINALIZE_FAILED, vec![], e.code_and_message().1.to_owned()))?;
        let writer = session_writer(store);
        let operate = |plan: &mut dyn FnMut(
            &gix::Repository,
            &mut SessionStep,
        ) -> Result<code_intel_gitstate::journal::Journal, crate::Error>,
                       step: &mut SessionStep| {
            let result = code_intel_gitstate::journal::operate(root, &writer, |repo| {
                let mut journal = plan(repo, step)?;
                journal.record = Some(serde_json::to_value(&*step).map_err(crate::error::git)?);
                Ok::<_, crate::Error>(((), journal))
            });
            match result {
                Ok(((), recovered)) => {
                    if let Some(r) = recovered {
                        self.note_recovered(r);
                    }
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        };
        match effect {
            Effect::CreateTaskBranch => {
                let id = step.checkpoint.orchestrator_state.session_id.clone();
                operate(
                    &mut |repo, step| {
                        let (branch, journal) = branches::plan_task_branch(repo, root, &id)?;
                        adopt_into(&mut step.checkpoint.orchestrator_state, branch);
                        Ok(journal)
                    },
                    &mut step,
                )
                .map_err(|e| (msg::BRANCH_CREATION_FAILED, vec![], e))?;
            }
            Effect::BranchChoice(choice) => {
                let fail = |e: String| -> EffectFailure {
                    (
                        msg::BRANCH_OPERATION_FAILED,
                        vec![("choice", choice.as_str().to_owned()), ("errors", e)],
                        String::new(),
                    )
                        .into()
                };
                let stale = branches::stale::list(root).map_err(|e| fail(e.to_string()))?;
                let current = stale.iter().find(|b| b.current).cloned();
                match choice {
                    BranchChoice::Delete => {
                        let names: Vec<String> = stale.iter().map(|b| b.branch.clone()).collect();
                        operate(
                            &mut |repo, _| {
                                let (deletion, journal) =
                                    branches::stale::plan_delete(repo, root, &names, Unmerged::Keep)?;
                                kept = deletion.kept_unmerged.into_iter().map(|b| b.branch).collect();
                                Ok(journal)
                            },
                            &mut step,
                        )
                        .map_err(fail)?;
                    }
                    BranchChoice::Merge => {
                        let Some(cur) = current else {
                            return Err(fail(
                                "HEAD is not on an llm_task_* branch, so there is no current task branch to merge"
                                    .into(),
                            ));
                        };
                        let Some(base) = cur.base.clone() else {
                            return Err(fail(
                                ws.contract.message(&msg::STALE_BASE_UNKNOWN, &[("branch", &cur.branch)]),
                            ));
                        };
                        let id = step.checkpoint.orchestrator_state.session_id.clone();
                        let note = serde_json::json!({"merged_stale_branch": cur.branch, "by_session": id}).to_string();
                        // The agent's choice deletes no work: another branch with commits of its
                        // own is kept (the journal deletes each only where it still points).
                        let (others, unmerged): (Vec<_>, Vec<_>) =
                            stale.iter().filter(|b| b.branch != cur.branch).partition(|b| b.ahead == 0);
                        let others: Vec<(String, gix::ObjectId)> =
                            others.into_iter().map(|b| (b.branch.clone(), b.tip)).collect();
                        kept = unmerged.into_iter().map(|b| b.branch.clone()).collect();
                        operate(
                            &mut |repo, _| {
                                let planned =
                                    branches::merge::plan_merge(repo, root, &cur.branch, &base, &note, &others);
                                planned.map(|(_, journal)| journal)
                            },
                            &mut step,
                        )
                        .map_err(fail)?;
                    }
                    BranchChoice::Continue => {
                        // Keep working on the task branch HEAD is on. On no task
                        // branch, READY makes a new one, as in a fresh session. Nothing moves,
                        // so the checkpoint is written as any other.
                        let st = &mut step.checkpoint.orchestrator_state;
                        if let Some(cur) = current
                            && let Some(base) = cur.base.clone()
                        {
                            adopt_into(st, branches::adopt(root, &cur.branch, &base).map_err(|e| fail(e.to_string()))?);
                        }
                        writer(&serde_json::to_value(&step).map_err(|e| fail(e.to_string()))?)
                            .map_err(|e| fail(e.to_string()))?;
                    }
                }
            }
            Effect::Commit { message, discard, keep_with_reason, gated } => {
                let failure = match old_phase {
                    Phase::QualityReview => msg::COMMIT_EXECUTION_FAILED,
                    _ => msg::FINALIZE_FAILED,
                };
                let st = &step.checkpoint.orchestrator_state;
                let (Some(task), Some(base)) = (st.task_branch.clone(), st.base_commit.clone()) else {
                    return Err((msg::PRE_COMMIT_NO_TASK_BRANCH, vec![], String::new()).into());
                };
                let base = gix::ObjectId::from_hex(base.as_bytes()).map_err(|e| (failure, vec![], e.to_string()))?;
                let user_changes = user_changes_of(st);
                let kept: std::collections::BTreeSet<String> = keep_with_reason.iter().cloned().collect();
                let gate = branches::gate::CommitGate {
                    rules: &ws.config.garbage,
                    kept_with_reason: &kept,
                    max_file_size: ws.config.max_file_size,
                    passed,
                };
                let refused: std::cell::RefCell<Option<branches::gate::GateRefusal>> = std::cell::RefCell::new(None);
                let result = {
                    operate(
                        &mut |repo, step| {
                            let planned = branches::commit::plan_commit(
                                repo,
                                root,
                                &task,
                                base,
                                message,
                                discard,
                                &user_changes,
                                gated.then_some(&gate),
                            );
                            match planned {
                                Ok((tip, journal)) => {
                                    note_commit(step, tip);
                                    Ok(journal)
                                }
                                Err(crate::Error::Gate(g)) => {
                                    *refused.borrow_mut() = Some(g.clone());
                                    Err(crate::Error::Gate(g))
                                }
                                Err(e) => Err(e),
                            }
                        },
                        &mut step,
                    )
                };
                if let Err(e) = result {
                    return Err(match refused.into_inner() {
                        Some(g) => gate_failure(g, failure, e),
                        None => (failure, vec![], e).into(),
                    });
                }
            }
            Effect::Merge => {
                let st = &step.checkpoint.orchestrator_state;
                let (Some(task), Some(base)) = (st.task_branch.clone(), st.base_branch.clone()) else {
                    return Err((msg::MERGE_NO_TASK_BRANCH, vec![], String::new()).into());
                };
                // A branch that is not there is one thing; a repository or ref git cannot read
                // is another, and says why.
                let exists = branches::open(root)
                    .map_err(|e| e.to_string())
                    .and_then(|r| branches::ref_id(&r, &format!("refs/heads/{task}")).map_err(|e| e.to_string()))
                    .map_err(|e| (msg::MERGE_FAILED, vec![], format!("cannot read refs/heads/{task}: {e}")))?;
                if exists.is_none() {
                    return Err((msg::MERGE_NO_TASK_BRANCH, vec![], format!("{task} is missing")).into());
                }
                let note = session_note(&step.checkpoint);
                operate(
                    &mut |repo, step| {
                        let planned = branches::merge::plan_merge(repo, root, &task, &base, &note, &[]);
                        planned.map(|(merged, journal)| {
                            note_commit(step, merged.commit);
                            journal
                        })
                    },
                    &mut step,
                )
                .map_err(|e| (msg::MERGE_FAILED, vec![], e))?;
            }
        }
        let mut notes = Vec::new();
        if !kept.is_empty() {
            notes.push(ws.contract.message(&msg::BRANCHES_KEPT_UNMERGED, &[("branches", &kept.join(", "))]));
        }
        Ok(Applied { checkpoint: step.checkpoint, notes })
    }

    /// `review_changes`: every change from the base commit to the work tree. PRE_COMMIT decides
    /// on it; QUALITY_REVIEW reads it once more (with the commit PRE_COMMIT made, and any fixes).
    pub fn review_changes(&self, ws: &Workspace) -> SessionResult<ReviewReply> {
        let stored = self.require_active(ws)?;
        let st = &stored.checkpoint.orchestrator_state;
        if !matches!(st.phase(), Phase::PreCommit | Phase::QualityReview) {
            return Err(contract_error(ws, &msg::REVIEW_PHASE_BLOCKED, &[("phase", st.phase().name())]));
        }
        let Some(task) = st.task_branch.clone() else {
            return Err(contract_error(ws, &msg::REVIEW_TASK_BRANCH_NOT_ENABLED, &[]));
        };
        let (Some(base), Some(base_commit)) = (st.base_branch.clone(), st.base_commit.clone()) else {
            return Err(contract_error(ws, &msg::REVIEW_NO_TASK_BRANCH, &[]));
        };
        let base_commit = gix::ObjectId::from_hex(base_commit.as_bytes())
            .map_err(|_| contract_error(ws, &msg::REVIEW_NO_TASK_BRANCH, &[]))?;
        let user_changes = user_changes_of(st);
        let review = branches::review::review(
            ws.repo.root(),
            base_commit,
            &base,
            &task,
            &ws.config.garbage,
            &user_changes,
            ws.config.max_file_size,
        )
        .map_err(|e| plain("review_failed", &e.to_string()))?;
        Ok(ReviewReply { success: true, review })
    }

    /// `cleanup_stale_branches`: merged task branches are deleted; unmerged ones only with
    /// `confirm`, which only the CLI (`clean --confirm`, the user) passes: the MCP tool never does. `merge` first merges the current task
    /// branch into its base. The active session's own branch is never touched.
    pub fn cleanup_stale_branches(&self, ws: &Workspace, action: &str, confirm: bool) -> SessionResult<CleanupReply> {
        let root = ws.repo.root();
        if !matches!(action, "delete" | "merge") {
            return Err(invalid(ws, "action", "expected \"delete\" or \"merge\""));
        }
        let own = self.active(ws).ok().flatten().and_then(|s| s.checkpoint.orchestrator_state.task_branch);
        let stale: Vec<branches::stale::StaleBranch> = branches::stale::list(root)
            .map_err(|e| contract_error(ws, &msg::GIT_FAILED, &[("error", &e.to_string())]))?
            .into_iter()
            .filter(|b| own.as_deref() != Some(b.branch.as_str()))
            .collect();
        let mut merged = Vec::new();
        // Another work tree's task branch is its session's: named, never touched.
        let mut kept: Vec<KeptBranch> = branches::stale::elsewhere(root)
            .map_err(|e| contract_error(ws, &msg::GIT_FAILED, &[("error", &e.to_string())]))?
            .into_iter()
            .map(|(b, path)| KeptBranch {
                branch: b.branch,
                base: b.base,
                ahead: b.ahead,
                reason: format!("{path}: left to it"),
            })
            .collect();
        let mut to_delete = Vec::new();
        if action == "merge"
            && let Some(cur) = stale.iter().find(|b| b.current)
        {
            let base = cur
                .base
                .clone()
                .ok_or_else(|| contract_error(ws, &msg::STALE_BASE_UNKNOWN, &[("branch", &cur.branch)]))?;
            let note = serde_json::json!({"merged_stale_branch": cur.branch}).to_string();
            branches::merge::merge_task(root, &cur.branch, &base, &note).map_err(|e| {
                let m = ws.contract.error(&msg::MERGE_FAILED, &[]);
                SessionError::Plain(Box::new(ErrorBody {
                    error: m.error,
                    message: m.message,
                    details: Some(e.to_string()),
                    ..ErrorBody::default()
                }))
            })?;
            merged.push(cur.branch.clone());
        }
        for b in stale.iter().filter(|b| !merged.contains(&b.branch)) {
            if b.ahead == 0 || confirm {
                to_delete.push(b.branch.clone());
            } else {
                kept.push(KeptBranch {
                    branch: b.branch.clone(),
                    base: b.base.clone(),
                    ahead: b.ahead,
                    reason: format!(
                        "unmerged: {} commit(s) not on its base; only the user deletes it, with `git code-intel clean --confirm` in their own terminal",
                        b.ahead
                    ),
                });
            }
        }
        let deleted = branches::stale::delete_branches(root, &to_delete)
            .map_err(|e| contract_error(ws, &msg::GIT_FAILED, &[("error", &e.to_string())]))?;
        // A branch that came into use between the listing and the deletion is left alone.
        for b in stale.iter().filter(|b| to_delete.contains(&b.branch) && !deleted.contains(&b.branch)) {
            kept.push(KeptBranch {
                branch: b.branch.clone(),
                base: b.base.clone(),
                ahead: b.ahead,
                reason: "came into use in a work tree while it was being cleaned up: left to it".into(),
            });
        }
        Ok(CleanupReply { success: true, action: action.to_owned(), merged, deleted, kept })
    }
}

/// What a gate refusal tells the agent (`error` is the operation's own text, for anything else).
fn gate_failure(refusal: branches::gate::GateRefusal, failure: Msg, error: String) -> EffectFailure {
    match refusal {
        branches::gate::GateRefusal::Garbage(lines) => {
            (msg::GARBAGE_IN_COMMIT, vec![("findings", lines.join("; "))], String::new()).into()
        }
        branches::gate::GateRefusal::Hook { hook, output } => {
            (msg::PRE_COMMIT_HOOK_FAILED, vec![("hook", hook)], output).into()
        }
        branches::gate::GateRefusal::Error(_) => (failure, vec![], error).into(),
    }
}

impl Sessions {
    /// For a commit the gate must pass (the garbage check and the repository's own pre-commit
    /// hook, which may run for minutes): plans it and runs the gate, to be called without the
    /// operation lock, so a slow hook never holds up the other work trees of the repository.
    /// Returns the tree that passed (the commit under the lock is planned again, and not gated
    /// twice when its tree is that one); None when there is nothing to gate, or when planning
    /// failed for another reason (met again, and reported, under the lock).
    pub(super) fn pre_gate(
        &self,
        ws: &Workspace,
        effect: &Effect,
        st: &SessionState,
    ) -> Result<Option<gix::ObjectId>, EffectFailure> {
        let Effect::Commit { message, discard, keep_with_reason, gated: true } = effect else { return Ok(None) };
        let root = ws.repo.root();
        let (Some(task), Some(base)) = (st.task_branch.clone(), st.base_commit.clone()) else { return Ok(None) };
        let Ok(base) = gix::ObjectId::from_hex(base.as_bytes()) else { return Ok(None) };
        let Ok(repo) = branches::open(root) else { return Ok(None) };
        let kept: std::collections::BTreeSet<String> = keep_with_reason.iter().cloned().collect();
        let gate = branches::gate::CommitGate {
            rules: &ws.config.garbage,
            kept_with_reason: &kept,
            max_file_size: ws.config.max_file_size,
            passed: None,
        };
        let failure = match st.phase() {
            Phase::QualityReview => msg::COMMIT_EXECUTION_FAILED,
            _ => msg::FINALIZE_FAILED,
        };
        match branches::commit::plan_commit(
            &repo,
            root,
            &task,
            base,
            message,
            discard,
            &user_changes_of(st),
            Some(&gate),
        ) {
            Ok((tip, _)) => Ok(branches::tree_of(&repo, tip).ok()),
            Err(crate::Error::Gate(g)) => Err(gate_failure(g.clone(), failure, crate::Error::Gate(g).to_string())),
            Err(_) => Ok(None),
        }
    }
}

/// The checkpoint a journaled operation writes as its last step: on top of `previous`, or (with
/// `finish`) ending the session.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct SessionStep {
    pub(super) previous: String,
    pub(super) checkpoint: Checkpoint,
    pub(super) finish: bool,
    pub(super) message: String,
}

/// Writes a journal's session step; does nothing when the session has moved on already (the
/// step was written before a kill, or another process advanced the session).
pub(super) fn session_writer(store: &SessionStore) -> impl Fn(&serde_json::Value) -> Result<(), WriterError> + '_ {
    move |value| {
        let step: SessionStep = serde_json::from_value(value.clone())?;
        let previous = gix::ObjectId::from_hex(step.previous.as_bytes())?;
        let ending = step.finish.then(|| (history_record(&step.checkpoint, previous), report_record(&step.checkpoint)));
        let ending = ending.as_ref().map(|(record, report)| Ending { record, report });
        Ok(store.advance(previous, &step.checkpoint, ending, &step.message)?)
    }
}

/// What `refs/code-intel/history` keeps of a finished session: its query, flags, tasks and
/// counters, what it learned, and the evidence the Map learns from.
pub(super) fn history_record(checkpoint: &Checkpoint, last_checkpoint: gix::ObjectId) -> serde_json::Value {
    let state = &checkpoint.orchestrator_state;
    serde_json::json!({
        "session_id": state.session_id,
        "intent": state.intent,
        "query": state.query,
        "flags": state.flags,
        "created_at": state.created_at,
        "completed_steps": state.completed_steps,
        "tasks": state.tasks.iter().map(|t| serde_json::json!({"id": t.id, "status": t.status})).collect::<Vec<_>>(),
        "counters": state.counters,
        "forced_completion": state.forced_completion,
        "learned": state.learned,
        "evidence": code_intel_semantic::evidence_of(state),
        "last_checkpoint": last_checkpoint.to_string(),
        "ended": "completed",
    })
}

/// What the history keeps for a finished session's report ([`super::trail::kept`]).
pub(super) fn report_record(checkpoint: &Checkpoint) -> serde_json::Value {
    let ended_at = checkpoint.trail.last().map_or_else(super::now, |s| s.submitted_at.clone());
    super::trail::kept(checkpoint, super::trail::Ended::Completed, &ended_at)
}

/// What `clean` appends to the history for a session it removes: the record (saying it was
/// cleaned, at which phase) and its report data.
pub fn cleaned_ending(
    checkpoint: &Checkpoint,
    last_checkpoint: gix::ObjectId,
) -> (serde_json::Value, serde_json::Value) {
    let mut record = history_record(checkpoint, last_checkpoint);
    record["ended"] = "cleaned".into();
    record["ended_phase"] = checkpoint.orchestrator_state.phase().name().into();
    (record, super::trail::kept(checkpoint, super::trail::Ended::Cleaned, &super::now()))
}

/// The files the session's task changed (for PRE_COMMIT's review check); None when the session
/// has no task branch or the work tree cannot be read (then the check is left to the commit).
pub(super) fn task_changes(ws: &Workspace, st: &SessionState) -> Option<Vec<String>> {
    let base = gix::ObjectId::from_hex(st.base_commit.as_deref()?.as_bytes()).ok()?;
    branches::review::task_changes(ws.repo.root(), base, &user_changes_of(st)).ok()
}

/// Records in the trail the commit the step's git work made, and stamps the step when that
/// work is done (a commit's gate, with the project's own hook, can take minutes: its time is the
/// step's, not the next one's).
fn note_commit(step: &mut SessionStep, commit: gix::ObjectId) {
    if let Some(last) = step.checkpoint.trail.last_mut() {
        last.commit = Some(commit.to_string());
        last.submitted_at = super::now();
    }
}

/// Records a task branch (created or adopted) in the session.
fn adopt_into(st: &mut SessionState, b: branches::TaskBranch) {
    st.task_branch = Some(b.name);
    st.base_branch = Some(b.base);
    st.base_commit = Some(b.base_commit.to_string());
    st.user_changes = b.user_changes.into_iter().map(|(p, id)| (p, id.map(|i| i.to_string()))).collect();
}

/// The checkpoint's record of the user's own changes, with blob ids parsed.
fn user_changes_of(st: &SessionState) -> BTreeMap<String, Option<gix::ObjectId>> {
    st.user_changes
        .iter()
        .map(|(p, id)| (p.clone(), id.as_ref().and_then(|i| gix::ObjectId::from_hex(i.as_bytes()).ok())))
        .collect()
}

/// What the merge note records: the request, the tasks, the outcome and the phase summaries.
fn session_note(cp: &Checkpoint) -> String {
    let st = &cp.orchestrator_state;
    let note = serde_json::json!({
        "session_id": st.session_id,
        "query": st.query,
        "intent": st.intent,
        "tasks": st.tasks.iter().map(|t| serde_json::json!({"id": t.id, "description": t.description, "status": t.status,
            "checklist": t.checklist})).collect::<Vec<_>>(),
        "outcome": if st.forced_completion { "merged with unresolved quality issues" } else { "merged" },
        "phase_summaries": cp.summaries(),
        "report": format!("git code-intel report {}", st.session_id),
    });
    serde_json::to_string_pretty(&note).unwrap_or_default()
}

/// `YYYYMMDD_HHMMSS_` plus 8 hex digits of a hash of the time, the process and a counter, so
/// two servers starting in the same second still differ (and creation is compare-and-swap).
pub(super) fn new_session_id() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = chrono::Utc::now();
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = format!("{}:{}:{n}", now.timestamp_nanos_opt().unwrap_or(0), std::process::id());
    let hash = blake3::hash(seed.as_bytes()).to_hex();
    format!("{}_{}", now.format("%Y%m%d_%H%M%S"), &hash.as_str()[..8])
}
