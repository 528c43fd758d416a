//! `git code-intel report`: a session as the person reviewing its change wants it — the request
//! and its QueryFrame, what was explored with which tools, the hypotheses, the impact set, the
//! plan and each task's evidence quoted from the commit, verification, the review decisions, the
//! commit and the merge, the counters, and where the time went.
//!
//! What a report is made from is kept with the session: each accepted submission adds a
//! [`TrailStep`] to the checkpoint (the tools served in the step, the payload, the commit its git
//! work made), and when the session ends the history record gets the report data beside it
//! ([`crate::session::trail::kept`], `report.json`), so a fresh clone that fetched the shared history can report it. A
//! teammate's report data is another clone's writing: read bounded, parsed into these types or
//! refused, and only ever shown to a person (escaped in HTML), never sent to an agent.
//!
//! [`load`] finds a session and assembles its [`Report`]; [`markdown()`] and [`html()`] render it;
//! the JSON form is the [`Report`] itself, versioned by [`REPORT_VERSION`].

use std::path::Path;

use serde::Serialize;

use code_intel_workflow::engine::state::{
    Checkpoint, Counters, Flags, ServedCall, TaskStatus, TrailStep, WitnessedRun,
};

/// Appends formatted text to a `String` (which cannot fail, unlike `write!`'s `Result` says).
macro_rules! put {
    ($out:expr, $($arg:tt)*) => {
        $out.push_str(&format!($($arg)*))
    };
}

/// [`put!`] and a newline.
macro_rules! putln {
    ($out:expr, $($arg:tt)*) => {{
        $out.push_str(&format!($($arg)*));
        $out.push('\n');
    }};
}

mod code;
mod html;
mod markdown;
mod text;

pub use crate::session::trail::{Ended, Kept, REPORT_VERSION};
pub use html::html;
pub use markdown::markdown;

/// The longest a step counts for (a year): times are data another clone may have written.
const MAX_STEP_MS: u64 = 365 * 24 * 3_600_000;
/// The most evidence a report quotes (each reads a file of the commit).
const MAX_QUOTES: usize = 500;
/// How many history records a search for a session looks at.
const HISTORY_SEARCH: usize = 2_000;

/// Why no report was made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing by that name, or nothing finished yet; the text says what was looked for.
    #[error("{0}")]
    NotFound(String),
    /// The report data was written by a newer version.
    #[error("the report data of {session} is version {found}; this build reads up to {REPORT_VERSION}")]
    Version { session: String, found: u64 },
    /// The stored data could not be read (the source says why).
    #[error("{what}: {source}")]
    Unreadable {
        what: String,
        #[source]
        source: crate::Error,
    },
}

/// Who wrote the data a report is made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// This work tree's session, still in progress.
    ThisWorkTree,
    /// A finished session of this clone (its record carries this clone's seal).
    ThisClone,
    /// A finished session another clone recorded, fetched with the shared history.
    AnotherClone,
}

/// A session's report: everything the renderers show, and the JSON form.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub report_version: u32,
    pub session_id: String,
    pub intent: String,
    pub query: String,
    pub flags: Flags,
    pub created_at: String,
    pub ended: Ended,
    pub ended_at: String,
    /// The phase the session was in when it ended (or is in).
    pub phase_at_end: String,
    /// One line: how it ended.
    pub outcome: String,
    pub recorded_by: Provenance,
    /// What the user said about the result (`record_outcome`), newest first.
    pub user_outcomes: Vec<UserOutcome>,
    /// The QUERY_FRAME payload: the slots, each with its quote of the request.
    pub query_frame: Option<serde_json::Value>,
    pub steps: Vec<Step>,
    pub explored_files: Vec<String>,
    /// Each VERIFICATION hypothesis with its result and evidence.
    pub hypotheses: Vec<serde_json::Value>,
    /// IMPACT_ANALYSIS's `impact_summary`.
    pub impact: Option<serde_json::Value>,
    pub tasks: Vec<TaskReport>,
    /// POST_IMPL_VERIFY's verdicts, in order.
    pub verification: Vec<serde_json::Value>,
    /// PRE_COMMIT's reviews (the decision on each file, the commit message), in order.
    pub reviews: Vec<serde_json::Value>,
    /// QUALITY_REVIEW's scores and issues, in order.
    pub quality_reviews: Vec<serde_json::Value>,
    pub verify_commands: Vec<String>,
    /// The checks the server ran itself (`run_check`), oldest first: what verification is
    /// judged against.
    pub witnessed_runs: Vec<WitnessedRun>,
    /// What the hooks refused during the session, as logged in this clone
    /// ([`crate::hook_log`]).
    pub hook_refusals: Vec<crate::hook_log::HookRefusal>,
    pub git: GitFacts,
    pub diff: Vec<code::FileDiff>,
    pub counters: Counters,
    pub compaction_count: u64,
    pub forced_completion: bool,
    /// Calls of the tools other than `submit_phase` (`start_session` is not counted).
    pub tool_calls: usize,
    /// Accepted submissions (one a step), and refused ones (among each step's `calls`).
    pub submissions: usize,
    pub refused_submissions: usize,
    /// Where the time went, by phase, in the order the phases first ran.
    pub time: Vec<PhaseTime>,
    pub total_ms: u64,
    /// What could not be shown, and why (a commit missing from this clone, data cut short).
    pub notes: Vec<String>,
}

/// One accepted submission: the step, its time, the tools served in it.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// The summary key (`step_05_EXPLORATION`).
    pub step: String,
    pub phase: String,
    /// The task, in READY's implementation.
    pub task: Option<String>,
    pub started_at: String,
    pub submitted_at: String,
    pub ms: u64,
    pub summary: String,
    pub calls: Vec<ServedCall>,
    pub payload: serde_json::Value,
    pub commit: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseTime {
    pub phase: String,
    pub ms: u64,
    pub calls: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct UserOutcome {
    pub outcome: String,
    pub note: String,
    pub recorded_at: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub id: String,
    pub description: String,
    pub status: String,
    pub failure_count: u32,
    pub revert_reason: String,
    pub items: Vec<ItemReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ItemReport {
    pub item: String,
    pub status: String,
    pub evidence: Option<String>,
    pub reason: Option<String>,
    /// Done, citing lines the session did not change (seen at READY's completion).
    pub unchanged: bool,
    /// Done, with code the agent says was already right: why (its word).
    pub already_right: Option<String>,
    /// The evidence lines, read from the commit the session made.
    pub quote: Option<code::Quote>,
}

/// The session's branches and commits.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GitFacts {
    pub task_branch: Option<String>,
    pub base_branch: Option<String>,
    pub base_commit: Option<String>,
    /// The last commit the session made on its task branch.
    pub task_commit: Option<String>,
    /// What the merge made (the task commit itself when it was a fast-forward).
    pub merge_commit: Option<String>,
    /// The merge moved the base to the task commit: no merge commit of its own.
    pub fast_forward: bool,
    /// The note `refs/notes/code-intel` holds on the merge commit.
    pub note: Option<String>,
}

/// Finds the session `target` names (a session id, or a commit whose code-intel note names
/// one; none: the last finished session) and makes its report.
pub fn load(root: &Path, target: Option<&str>) -> Result<Report, Error> {
    let store = crate::session::store::SessionStore::open(root)
        .map_err(|source| Error::Unreadable { what: "the repository".into(), source })?;
    let unreadable = |what: &str| {
        let what = what.to_owned();
        move |source| Error::Unreadable { what, source }
    };
    let (kept, provenance) = match target.map(str::trim).filter(|t| !t.is_empty()) {
        None => {
            let finished = store.last_finished().map_err(unreadable("the session history"))?.ok_or_else(|| {
                Error::NotFound(
                    "no finished session in refs/code-intel/history: finish one, or fetch the team's with `git code-intel share pull`"
                        .into(),
                )
            })?;
            from_history(&store, &finished)?
        }
        Some(target) => {
            // A target that cannot be a session's ref name (`HEAD~2`) is not one; a session
            // this work tree cannot read is said so.
            let unfinished = match store.unfinished(target) {
                Ok(found) => found,
                Err(crate::Error::Git(_)) => None,
                Err(source) => return Err(Error::Unreadable { what: format!("session {target}"), source }),
            };
            match unfinished {
                Some(stored) => (
                    Kept {
                        report_version: REPORT_VERSION,
                        ended: Ended::InProgress,
                        ended_at: crate::session::now(),
                        session: stored.checkpoint,
                    },
                    Provenance::ThisWorkTree,
                ),
                None => {
                    let found =
                        store.find_finished(target, HISTORY_SEARCH).map_err(unreadable("the session history"))?;
                    let finished = match found {
                        Some(finished) => finished,
                        None => {
                            let session_id = session_of_commit(root, target)?;
                            store
                                .find_finished(&session_id, HISTORY_SEARCH)
                                .map_err(unreadable("the session history"))?
                                .ok_or_else(|| {
                                    Error::NotFound(format!(
                                        "the note on {target} names session {session_id}, which is not in refs/code-intel/history: fetch it with `git code-intel share pull`"
                                    ))
                                })?
                        }
                    };
                    from_history(&store, &finished)?
                }
            }
        }
    };
    assemble(root, (kept, provenance))
}

/// The report data kept beside a history record.
fn from_history(
    store: &crate::session::store::SessionStore,
    finished: &crate::session::store::Finished,
) -> Result<(Kept, Provenance), Error> {
    let id = finished.record["session_id"].as_str().unwrap_or("?").to_owned();
    let data = store
        .report_of(finished)
        .map_err(|source| Error::Unreadable { what: format!("the report data of session {id}"), source })?
        .ok_or_else(|| {
            Error::NotFound(format!("session {id} finished before git-code-intel kept report data: no report"))
        })?;
    let version = data["report_version"].as_u64().unwrap_or(0);
    if version > u64::from(REPORT_VERSION) {
        return Err(Error::Version { session: id, found: version });
    }
    let kept: Kept = serde_json::from_value(data).map_err(|e| Error::Unreadable {
        what: format!("the report data of session {id}"),
        source: crate::Error::Corrupt(e.to_string()),
    })?;
    Ok((kept, if finished.here { Provenance::ThisClone } else { Provenance::AnotherClone }))
}

/// The session named by the code-intel note on commit `target`.
fn session_of_commit(root: &Path, target: &str) -> Result<String, Error> {
    let not_found = || {
        Error::NotFound(format!(
            "'{target}' is neither a session in refs/code-intel/history nor a commit with a git-code-intel note"
        ))
    };
    let repo = gix::open(root)
        .map_err(|e| Error::Unreadable { what: "the repository".into(), source: crate::error::git(e) })?;
    let commit = repo
        .rev_parse_single(target)
        .ok()
        .and_then(|id| id.object().ok())
        .and_then(|o| o.peel_to_commit().ok())
        .ok_or_else(not_found)?;
    let note = code_intel_gitstate::notes::note_on(&repo, commit.id)
        .map_err(|e| Error::Unreadable { what: format!("the note on {target}"), source: crate::Error::from(e) })?
        .ok_or_else(|| {
            Error::NotFound(format!("commit {} has no git-code-intel note (refs/notes/code-intel)", commit.id))
        })?;
    let value: serde_json::Value = serde_json::from_str(&note).unwrap_or_default();
    value["session_id"]
        .as_str()
        .or_else(|| value["by_session"].as_str())
        .map(ToOwned::to_owned)
        .ok_or_else(|| Error::NotFound(format!("the note on {} names no session", commit.id)))
}

/// Everything the report shows, from the kept data and the repository.
fn assemble(root: &Path, (kept, provenance): (Kept, Provenance)) -> Result<Report, Error> {
    let Kept { ended, ended_at, session, .. } = kept;
    let st = &session.orchestrator_state;
    let mut notes = Vec::new();
    let steps = steps_of(&session, ended, &ended_at);
    let payloads = |phase: &str| -> Vec<&serde_json::Value> {
        steps.iter().filter(|s| s.phase == phase).map(|s| &s.payload).collect()
    };
    let last = |phase: &str| payloads(phase).last().map(|p| (*p).clone());
    // As the server judged them (what the evidence is); a session from before that, as sent.
    let hypotheses = if st.hypotheses.is_empty() {
        payloads("VERIFICATION")
            .into_iter()
            .flat_map(|p| p["hypotheses_verified"].as_array().cloned().unwrap_or_default())
            .collect()
    } else {
        st.hypotheses
            .iter()
            .map(|h| {
                serde_json::json!({"hypothesis": h.hypothesis, "result": true, "evidence": h.evidence.join(", "),
                                   "evidence_kind": h.kind, "runs": h.runs})
            })
            .collect()
    };
    let mut git = GitFacts {
        task_branch: st.task_branch.clone(),
        base_branch: st.base_branch.clone(),
        base_commit: st.base_commit.clone(),
        task_commit: steps
            .iter()
            .filter(|s| matches!(s.phase.as_str(), "PRE_COMMIT" | "QUALITY_REVIEW"))
            .filter_map(|s| s.commit.clone())
            .next_back(),
        merge_commit: steps.iter().filter(|s| s.phase == "MERGE").filter_map(|s| s.commit.clone()).next_back(),
        fast_forward: false,
        note: None,
    };
    let repo = gix::open(root).ok();
    git.fast_forward = git.merge_commit.is_some() && git.merge_commit == git.task_commit;
    let code_commit = git.task_commit.clone().or_else(|| git.merge_commit.clone());
    let mut diff = Vec::new();
    if let Some(repo) = &repo {
        if let Some(merge) = git.merge_commit.as_deref().and_then(|c| gix::ObjectId::from_hex(c.as_bytes()).ok()) {
            git.note = code_intel_gitstate::notes::note_on(repo, merge).ok().flatten();
        }
        if let (Some(base), Some(tip)) = (git.base_commit.as_deref(), code_commit.as_deref()) {
            match code::diff(repo, base, tip) {
                Ok(d) => diff = d,
                Err(e) => notes.push(format!("no diff: {e}")),
            }
        }
    }
    let mut quotes = 0usize;
    let tasks = st
        .tasks
        .iter()
        .map(|t| TaskReport {
            id: t.id.clone(),
            description: t.description.clone(),
            status: match t.status {
                TaskStatus::Pending => "pending".into(),
                TaskStatus::Completed => "completed".into(),
            },
            failure_count: t.failure_count,
            revert_reason: t.revert_reason.clone(),
            items: t
                .checklist
                .iter()
                .map(|i| ItemReport {
                    item: i.item.clone(),
                    status: serde_json::to_value(&i.status)
                        .ok()
                        .and_then(|v| v.as_str().map(ToOwned::to_owned))
                        .unwrap_or_default(),
                    evidence: i.evidence.clone(),
                    reason: i.reason.clone(),
                    unchanged: i.unchanged,
                    already_right: i.already_right.clone(),
                    quote: i.evidence.as_deref().and_then(|e| {
                        let (repo, commit) = (repo.as_ref()?, code_commit.as_deref()?);
                        quotes += 1;
                        (quotes <= MAX_QUOTES).then(|| code::quote(repo, root, commit, e)).flatten()
                    }),
                })
                .collect(),
        })
        .collect();
    for s in &steps {
        if s.payload.get("omitted").is_some() {
            notes.push(format!("the payload of {} was not kept ({})", s.step, text::text(&s.payload["omitted"])));
        }
    }
    let not_kept: usize = session.trail.iter().map(|t| t.calls_not_kept).sum();
    if not_kept > 0 {
        notes.push(format!("{not_kept} tool call(s) beyond what a step keeps are counted, not listed"));
    }
    if quotes > MAX_QUOTES {
        notes.push(format!("only the first {MAX_QUOTES} of {quotes} evidence items are quoted"));
    }
    if let (Some(repo), Some(commit)) = (&repo, code_commit.as_deref())
        && !code::has_commit(repo, commit)
    {
        notes.push(format!(
            "commit {commit} is not in this clone: fetch the branch that holds it to see the evidence and the diff"
        ));
    }
    let outcome = outcome_line(ended, &session, &git);
    let time = time_by_phase(&steps);
    let total_ms = steps.iter().fold(0u64, |sum, s| sum.saturating_add(s.ms));
    Ok(Report {
        report_version: REPORT_VERSION,
        session_id: st.session_id.clone(),
        intent: serde_json::to_value(st.intent)
            .ok()
            .and_then(|v| v.as_str().map(ToOwned::to_owned))
            .unwrap_or_default(),
        query: st.query.clone(),
        flags: st.flags,
        created_at: st.created_at.clone(),
        ended,
        ended_at,
        phase_at_end: st.phase().name().to_owned(),
        outcome,
        recorded_by: provenance,
        user_outcomes: repo.as_ref().map(|r| user_outcomes(r, &st.session_id)).unwrap_or_default(),
        query_frame: last("QUERY_FRAME"),
        explored_files: st.explored_files.iter().cloned().collect(),
        hypotheses,
        impact: last("IMPACT_ANALYSIS").map(|p| p["impact_summary"].clone()),
        tasks,
        verification: payloads("POST_IMPL_VERIFY").into_iter().cloned().collect(),
        reviews: payloads("PRE_COMMIT").into_iter().cloned().collect(),
        quality_reviews: payloads("QUALITY_REVIEW").into_iter().cloned().collect(),
        verify_commands: st.verify_commands.clone(),
        witnessed_runs: st.witnessed_runs.clone(),
        hook_refusals: repo.as_ref().map(|r| crate::hook_log::read(r.git_dir(), &st.session_id)).unwrap_or_default(),
        git,
        diff,
        counters: st.counters,
        compaction_count: st.compaction_count,
        forced_completion: st.forced_completion,
        tool_calls: steps.iter().flat_map(|s| &s.calls).filter(|c| c.tool != "submit_phase").count(),
        submissions: session.trail.len(),
        refused_submissions: steps.iter().flat_map(|s| &s.calls).filter(|c| c.tool == "submit_phase").count(),
        time,
        total_ms,
        notes,
        steps,
    })
}

/// The trail as steps, each timed from the step before it (the first from the session's start).
fn steps_of(session: &Checkpoint, ended: Ended, ended_at: &str) -> Vec<Step> {
    let mut started = session.orchestrator_state.created_at.clone();
    let mut out: Vec<Step> = session.trail.iter().map(|t| step_of(t, &mut started)).collect();
    // An unfinished session's current step: in progress, from its last submission to now; a
    // cleaned one's is not timed (when the work in it stopped is not known, only when it was
    // cleaned, which may be days later).
    let st = &session.orchestrator_state;
    if !st.is_complete() {
        let until = if ended == Ended::InProgress { ended_at.to_owned() } else { started.clone() };
        let current = TrailStep { step: crate::session::record_key(st), submitted_at: until, ..TrailStep::default() };
        let mut step = step_of(&current, &mut started);
        step.summary = match ended {
            Ended::InProgress => "(in progress: not submitted yet)".into(),
            _ => "(not submitted: the session was cleaned in this step)".into(),
        };
        out.push(step);
    }
    out
}

fn step_of(t: &TrailStep, started: &mut String) -> Step {
    let (key, task) = match t.step.split_once('#') {
        Some((k, task)) => (k.to_owned(), Some(task.to_owned())),
        None => (t.step.clone(), None),
    };
    // step_05_EXPLORATION → EXPLORATION
    let phase = key
        .strip_prefix("step_")
        .and_then(|rest| rest.split_once('_'))
        .map_or_else(|| key.clone(), |(_, name)| name.to_owned());
    let step = Step {
        step: key,
        phase,
        task,
        started_at: started.clone(),
        submitted_at: t.submitted_at.clone(),
        ms: millis_between(started, &t.submitted_at),
        summary: t.payload["summary"].as_str().unwrap_or_default().to_owned(),
        calls: t.calls.clone(),
        payload: t.payload.clone(),
        commit: t.commit.clone(),
    };
    started.clone_from(&t.submitted_at);
    step
}

fn millis_between(from: &str, to: &str) -> u64 {
    let parse = |s: &str| chrono::DateTime::parse_from_rfc3339(s).ok();
    match (parse(from), parse(to)) {
        // A span another clone wrote cannot make the sums overflow: a year at most.
        (Some(a), Some(b)) => u64::try_from((b - a).num_milliseconds()).unwrap_or(0).min(MAX_STEP_MS),
        _ => 0,
    }
}

fn time_by_phase(steps: &[Step]) -> Vec<PhaseTime> {
    let mut out: Vec<PhaseTime> = Vec::new();
    for s in steps {
        match out.iter_mut().find(|p| p.phase == s.phase) {
            Some(p) => {
                p.ms = p.ms.saturating_add(s.ms);
                p.calls += s.calls.len();
            }
            None => out.push(PhaseTime { phase: s.phase.clone(), ms: s.ms, calls: s.calls.len() }),
        }
    }
    out
}

fn outcome_line(ended: Ended, session: &Checkpoint, git: &GitFacts) -> String {
    let st = &session.orchestrator_state;
    let base = st.base_branch.as_deref().unwrap_or("its base");
    match ended {
        Ended::Cleaned => format!(
            "Cleaned: `git code-intel clean` removed the session in {} before it finished; nothing was merged by it.",
            st.phase().name()
        ),
        Ended::InProgress => format!("In progress: the session is in {}.", st.phase().name()),
        Ended::Completed => match (&git.merge_commit, st.forced_completion) {
            (Some(c), true) => format!(
                "Merged into {base} as {} with unresolved quality issues (the quality review failed too often).",
                short(c)
            ),
            (Some(c), false) => format!("Merged into {base} as {}.", short(c)),
            (None, _) if st.flags.only_explore || st.flags.quick || st.task_branch.is_none() => {
                "Completed without a task branch: no commit, nothing merged.".into()
            }
            (None, _) => "Completed; no merge is recorded.".into(),
        },
    }
}

pub(crate) fn short(commit: &str) -> &str {
    commit.get(..10).unwrap_or(commit)
}

/// What the user said about the session (`record_outcome`), from the outcome log.
fn user_outcomes(repo: &gix::Repository, session_id: &str) -> Vec<UserOutcome> {
    let Ok(read) = code_intel_gitstate::log::records(repo, code_intel_gitstate::log::OUTCOME_LOG, "record.json", 500)
    else {
        return Vec::new();
    };
    read.records
        .iter()
        .filter(|r| r.value["session_id"].as_str() == Some(session_id))
        .map(|r| UserOutcome {
            outcome: r.value["outcome"].as_str().unwrap_or_default().to_owned(),
            note: r.value["note"].as_str().unwrap_or_default().to_owned(),
            recorded_at: r.value["recorded_at"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Checkpoint {
        code_intel_workflow::engine::submit::start(
            &code_intel_workflow::contract::Contract::builtin(),
            code_intel_workflow::engine::submit::StartParams {
                session_id: "s".into(),
                intent: code_intel_workflow::engine::state::Intent::Modify,
                query: "q".into(),
                flags: Flags::default(),
                created_at: "2026-11-27T08:00:00Z".into(),
                stale_branches: false,
                verify_commands: Vec::new(),
            },
        )
        .0
    }

    #[test]
    fn the_outcome_says_how_the_session_ended_failures_included() {
        let mut cp = session();
        cp.orchestrator_state.base_branch = Some("main".into());
        cp.orchestrator_state.task_branch = Some("llm_task_s_from_main".into());
        let merged = GitFacts { merge_commit: Some("0123456789abcdef".into()), ..GitFacts::default() };
        assert_eq!(outcome_line(Ended::Completed, &cp, &merged), "Merged into main as 0123456789.");
        cp.orchestrator_state.forced_completion = true;
        assert!(outcome_line(Ended::Completed, &cp, &merged).contains("with unresolved quality issues"));
        let cleaned = outcome_line(Ended::Cleaned, &cp, &GitFacts::default());
        assert!(cleaned.starts_with("Cleaned:") && cleaned.contains("DOCUMENT_RESEARCH"), "{cleaned}");
        assert!(outcome_line(Ended::InProgress, &cp, &GitFacts::default()).starts_with("In progress"));
        cp.orchestrator_state.task_branch = None;
        assert!(outcome_line(Ended::Completed, &cp, &GitFacts::default()).contains("without a task branch"));
    }
}
