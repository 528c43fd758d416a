//! The session adapter: runs the pure [`code_intel_workflow::engine`] against the git-stored session.
//!
//! Every operation reads the active session from `refs/code-intel/*` ([`crate::session::store`]),
//! gathers the facts the engine needs (the tools this process served in the current phase,
//! the evidence files, the work tree), calls the engine, carries out its effect, and writes the
//! next checkpoint with a compare-and-swap. The git ref is the source of truth, so a restarted
//! server resumes where the last one stopped and two servers cannot both advance a session.
//!
//! Answers are typed; the MCP server and the CLI serialize them.

use std::collections::BTreeSet;
use std::sync::Mutex;

use crate::Error;
use crate::branches;
use crate::context::{self, CONTEXT_FILE, ProjectContext};
use crate::session::store::{SessionStore, Stored};
use crate::workspace::Workspace;
use code_intel_workflow::contract::catalogue::{self as msg};
use code_intel_workflow::engine::phase::{self, Phase, ReadyStep};
use code_intel_workflow::engine::response::{self, PhaseResponse};
use code_intel_workflow::engine::state::{Checkpoint, Flags, GateLevel, Intent, ServedCall, SessionState, TrailStep};
use code_intel_workflow::engine::submit::{self, Effect, Facts, StartParams};
use code_intel_workflow::engine::{self as engine_api, WriteAllowed};

mod checks;
mod effects;
mod facts;
pub mod lessons;
pub mod procedures;
mod replies;
pub mod store;
pub mod trail;

pub use checks::{CheckReply, Runner};
pub use effects::cleaned_ending;
use effects::{
    EffectFailure, SessionStep, history_record, new_session_id, report_record, session_writer, task_changes,
};
use facts::{
    changed_lines, check_repo_path, document_facts, documents_for, evidence_facts, far_symbols, past_failures_for,
    resolve_target,
};
pub use replies::{
    ActiveStatus, CleanupReply, ErrorBody, ExploredAdded, InactiveStatus, KeptBranch, ReviewReply, SessionError,
    SessionReply, SessionResult, StatusReply, WriteCheck,
};
use replies::{contract_error, invalid, plain, store_error};

/// What a [`ToolRecord`] belongs to: the phase, and in READY's implementation the task at hand,
/// so a `check_write_target` called for one task never counts for the next (the engine clears
/// the tools it holds per task; this record must follow it).
pub(crate) fn record_key(st: &SessionState) -> String {
    let key = phase::summary_key(st.phase(), st.ready_step());
    match (st.ready_step(), st.pending_tasks().next()) {
        (Some(ReadyStep::Impl), Some(task)) => format!("{key}#{}", task.id),
        _ => key,
    }
}

/// The most tool calls one step of a trail keeps.
const MAX_CALLS_PER_STEP: usize = 400;

/// The tools this process served, and the files their answers showed, in one phase of one
/// session (one task, in READY's implementation).
#[derive(Debug, Default)]
struct ToolRecord {
    session_id: String,
    step_key: String,
    tools: BTreeSet<String>,
    files: BTreeSet<String>,
    /// Each call, in order, for the session's trail (its report), and how many more were made
    /// than a step keeps.
    calls: Vec<ServedCall>,
    calls_not_kept: usize,
}

impl ToolRecord {
    /// Whether this record belongs to the step the session `st` is in.
    fn is_for(&self, st: &SessionState) -> bool {
        self.session_id == st.session_id && self.step_key == record_key(st)
    }

    /// Makes this the record of the step `st` is in, empty, unless it is already.
    fn follow(&mut self, st: &SessionState) {
        if !self.is_for(st) {
            *self = ToolRecord { session_id: st.session_id.clone(), step_key: record_key(st), ..ToolRecord::default() };
        }
    }
}

pub struct Sessions {
    store: Result<SessionStore, SessionError>,
    record: Mutex<ToolRecord>,
    /// What the last recovery did, until an answer reports it.
    recovered: Mutex<Option<String>>,
}

#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    pub intent: String,
    pub query: String,
    pub repo_path: Option<String>,
    pub gate_level: Option<String>,
    pub flags: Flags,
}

impl Sessions {
    pub fn open(ws: &Workspace) -> Sessions {
        let store = SessionStore::open(ws.repo.root())
            .map_err(|e| contract_error(ws, &msg::GIT_REQUIRED, &[("error", &e.to_string())]));
        Sessions { store, record: Mutex::new(ToolRecord::default()), recovered: Mutex::new(None) }
    }

    fn store(&self) -> SessionResult<&SessionStore> {
        self.store.as_ref().map_err(Clone::clone)
    }

    fn active(&self, ws: &Workspace) -> SessionResult<Option<Stored>> {
        match self.store()?.active() {
            Ok(s) => Ok(s),
            Err(Error::Corrupt(e)) => {
                tracing::warn!("checkpoint unreadable: {e}");
                Err(contract_error(ws, &msg::CHECKPOINT_RESTORE_FAILED, &[]))
            }
            Err(Error::UnknownPhase(phase)) => Err(contract_error(ws, &msg::UNKNOWN_PHASE, &[("phase", &phase)])),
            Err(Error::Foreign(reference)) => {
                tracing::warn!("{reference} does not carry this clone's seal: ignored");
                Err(contract_error(ws, &msg::CHECKPOINT_NOT_OURS, &[("ref", &reference)]))
            }
            Err(e) => Err(contract_error(ws, &msg::GIT_FAILED, &[("error", &e.to_string())])),
        }
    }

    fn require_active(&self, ws: &Workspace) -> SessionResult<Stored> {
        self.active(ws)?.ok_or_else(|| contract_error(ws, &msg::NO_ACTIVE_SESSION, &[]))
    }

    pub fn start(&self, ws: &Workspace, req: StartRequest) -> SessionResult<SessionReply> {
        let store = self.store()?;
        let _lock = self.lock(ws)?;
        let Some(intent) = Intent::parse(&req.intent) else {
            return Err(invalid(ws, "intent", "expected IMPLEMENT, MODIFY, INVESTIGATE or QUESTION"));
        };
        if req.query.trim().is_empty() {
            return Err(invalid(ws, "query", "the user's request is required"));
        }
        let mut flags = req.flags;
        flags.gate_level = match req.gate_level.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            None => GateLevel::Auto,
            Some(g) => GateLevel::parse(g).ok_or_else(|| invalid(ws, "gate_level", "expected auto (a) or full (f)"))?,
        };
        check_repo_path(ws, req.repo_path.as_deref())?;
        let mut notes = Vec::new();
        let context = ProjectContext::load(ws.repo.root());
        if !flags.no_doc_research {
            if !context.doc_research_enabled {
                flags.no_doc_research = true;
                notes.push(ws.contract.message(&msg::DOC_RESEARCH_DISABLED, &[("path", CONTEXT_FILE)]));
            } else if context::docs::candidates(&ws.repo, &ws.config, &context).is_empty() {
                flags.no_doc_research = true;
                let docs_path = context.docs_path.join(", ");
                // Name the file only where it is: without it the defaults apply.
                let path = if ws.repo.root().join(CONTEXT_FILE).is_file() {
                    CONTEXT_FILE.to_owned()
                } else {
                    format!("its defaults ({CONTEXT_FILE} does not exist; `git code-intel init` writes one to edit)")
                };
                notes.push(
                    ws.contract.message(&msg::DOC_RESEARCH_NO_DOCUMENTS, &[("docs_path", &docs_path), ("path", &path)]),
                );
            }
        }
        if let Some(existing) = self.active(ws)? {
            let st = &existing.checkpoint.orchestrator_state;
            let m = ws.contract.error(&msg::CHECKPOINT_RECOVERY, &[]);
            return Err(SessionError::Plain(Box::new(ErrorBody {
                error: "recovery_available".into(),
                message: m.message,
                recovery_available: Some(true),
                session_id: Some(st.session_id.clone()),
                phase: Some(st.phase().name()),
                step: Some(st.phase_state.step),
                ..ErrorBody::default()
            })));
        }
        // Task branches left by earlier sessions of this work tree (another work tree's are its
        // own session's, and not stale).
        let listed = match branches::stale::list(ws.repo.root()) {
            Ok(b) => b,
            Err(e) => {
                return Err(contract_error(ws, &msg::TASK_BRANCHES_UNREADABLE, &[("error", &e.to_string())]));
            }
        };
        let stale = !listed.is_empty();
        let (checkpoint, response) = submit::start(
            &ws.contract,
            StartParams {
                session_id: new_session_id(),
                intent,
                query: req.query.trim().to_owned(),
                flags,
                created_at: chrono::Utc::now().to_rfc3339(),
                stale_branches: stale,
                verify_commands: ws.verify_commands().commands,
            },
        );
        let stale_branches = stale.then_some(listed);
        match store.create(&checkpoint) {
            Ok(_) => {
                self.reset_record(&checkpoint);
                let documents = documents_for(ws, &response, &checkpoint.orchestrator_state.query);
                let past_failures = past_failures_for(ws, &response, &checkpoint.orchestrator_state.query);
                let procedures = procedures::for_answer(ws, response_texts(&response));
                Ok(SessionReply {
                    past_failures,
                    procedures,
                    response,
                    stale_branches,
                    task_branch: None,
                    recovered: self.take_recovered(),
                    project_rules: Some(context::project_rules(ws.repo.root(), &ws.contract)),
                    documents,
                    notes,
                })
            }
            Err(Error::Busy(other)) => Err(contract_error(ws, &msg::SESSION_ACTIVE, &[("session_id", &other)])),
            Err(e) => Err(store_error(ws, e)),
        }
    }

    /// submit_phase. `data` is the payload object, or a string holding one.
    pub fn submit(&self, ws: &Workspace, data: serde_json::Value) -> SessionResult<SessionReply> {
        let data = match data {
            serde_json::Value::String(text) => serde_json::from_str::<serde_json::Value>(&text)
                .map_err(|e| contract_error(ws, &msg::INVALID_DATA, &[("error", &e.to_string())]))?,
            other => other,
        };
        // One submit at a time per repository, across processes; an operation a dead process
        // left is finished (or dropped) first.
        let mut lock = Some(self.lock(ws)?);
        let stored = self.require_active(ws)?;
        let mut checkpoint = stored.checkpoint.clone();
        self.merge_record(&mut checkpoint);
        let refused = SessionError::Refused;
        // Decoded once: the typed payload tells which evidence files to read, and is what the
        // engine checks.
        let payload = submit::decode_payload(&ws.contract, &checkpoint, &data).map_err(refused)?;
        let state = &checkpoint.orchestrator_state;
        let evidence = evidence_facts(ws, state, &payload);
        let facts = Facts {
            changed_lines: changed_lines(ws, state, &evidence),
            evidence,
            semantic_available: ws.semantic.available(),
            changed_files: (state.phase() == Phase::PreCommit).then(|| task_changes(ws, state)).flatten(),
            documents: document_facts(ws, &payload, &state.query),
            far_symbols: far_symbols(ws, &payload, &state.query),
            runnable_checks: if state.phase() == Phase::PostImplVerify { checks::runnable(ws) } else { Vec::new() },
        };
        let accepted = submit::submit(&ws.contract, &checkpoint, &payload, &facts).map_err(refused)?;
        let old_phase = checkpoint.orchestrator_state.phase();
        let mut next = accepted.session;
        let (calls, calls_not_kept) = self.recorded_calls(&checkpoint);
        let taken = calls.len();
        next.trail.push(TrailStep {
            step: record_key(&checkpoint.orchestrator_state),
            submitted_at: now(),
            calls,
            calls_not_kept,
            payload: trail::kept_payload(&data),
            commit: None,
        });
        trail::bound_trail(&mut next.trail);
        let store = self.store()?;
        let message = if next.orchestrator_state.is_complete() {
            "finish".to_owned()
        } else {
            format!(
                "{} -> {}",
                phase::summary_key(old_phase, checkpoint.orchestrator_state.ready_step()),
                phase::summary_key(next.orchestrator_state.phase(), next.orchestrator_state.ready_step())
            )
        };
        let mut effect_notes = Vec::new();
        let result = match &accepted.effect {
            // Git work and the checkpoint that records it are one journaled operation.
            Some(effect) => {
                let step = SessionStep {
                    previous: stored.commit.to_string(),
                    checkpoint: next.clone(),
                    finish: next.orchestrator_state.is_complete(),
                    message,
                };
                // A gated commit is checked with the lock released (a repository's hook may run
                // for minutes, and every work tree waits on this lock); then the session must
                // still be where it was read.
                let gate_refusal = |failure: EffectFailure| {
                    let EffectFailure { message: key, vars, details } = failure;
                    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    let mut r = response::refusal(&ws.contract, &checkpoint, key, &vars);
                    if !details.is_empty() {
                        r.details = Some(details);
                    }
                    refused(r)
                };
                let mut passed = None;
                if matches!(effect, Effect::Commit { gated: true, .. }) {
                    drop(lock.take());
                    let gated = self.pre_gate(ws, effect, &next.orchestrator_state);
                    lock = Some(self.lock(ws)?);
                    debug_assert!(lock.is_some(), "held to the end of the submit");
                    if self.active(ws)?.map(|s| s.commit) != Some(stored.commit) {
                        return Err(store_error(ws, Error::Conflict));
                    }
                    passed = gated.map_err(gate_refusal)?;
                }
                match self.apply_effect(ws, effect, old_phase, step, passed) {
                    Ok(done) => {
                        next = done.checkpoint;
                        effect_notes = done.notes;
                        Ok(())
                    }
                    Err(EffectFailure { message: key, vars, details }) => {
                        let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
                        let mut r = response::refusal(&ws.contract, &checkpoint, key, &vars);
                        if !details.is_empty() {
                            r.details = Some(details);
                        }
                        return Err(refused(r));
                    }
                }
            }
            None if next.orchestrator_state.is_complete() => {
                store.finish(stored.commit, &next, &history_record(&next, stored.commit), &report_record(&next))
            }
            None => store.save(stored.commit, &next, &message).map(|_| ()),
        };
        match result {
            Ok(()) => {
                // The calls went into the trail step just written.
                self.calls_written(&checkpoint, taken);
                self.reset_record(&next);
                let documents = documents_for(ws, &accepted.response, &next.orchestrator_state.query);
                let past_failures = past_failures_for(ws, &accepted.response, &next.orchestrator_state.query);
                let procedures = procedures::for_answer(ws, response_texts(&accepted.response));
                Ok(SessionReply {
                    past_failures,
                    procedures,
                    response: accepted.response,
                    stale_branches: None,
                    // After the merge the task branch is gone: naming it would point at nothing.
                    task_branch: next
                        .orchestrator_state
                        .task_branch
                        .clone()
                        .filter(|_| !matches!(accepted.effect, Some(Effect::Merge))),
                    recovered: self.take_recovered(),
                    project_rules: None,
                    documents,
                    notes: effect_notes,
                })
            }
            Err(e) => Err(store_error(ws, e)),
        }
    }

    /// Takes the operation lock for a change to the session or the repository, after finishing
    /// (or dropping) an operation a dead process left; what was done is reported with the next
    /// answer.
    fn lock(&self, ws: &Workspace) -> SessionResult<code_intel_gitstate::lock::OperationLock> {
        let repo = gix::open(ws.repo.root())
            .map_err(|e| contract_error(ws, &msg::GIT_REQUIRED, &[("error", &e.to_string())]))?;
        let lock = code_intel_gitstate::lock::acquire(&repo)
            .map_err(|e| contract_error(ws, &msg::GIT_FAILED, &[("error", &e.to_string())]))?;
        let store = self.store()?;
        match code_intel_gitstate::journal::recover(&repo, ws.repo.root(), &session_writer(store)) {
            Ok(Some(report)) => self.note_recovered(report),
            Ok(None) => {}
            Err(e) => return Err(contract_error(ws, &msg::RECOVERY_FAILED, &[("error", &e.to_string())])),
        }
        Ok(lock)
    }

    /// Finishes an operation a dead process left, if any (server start): what was done, or why
    /// it could not be (the error every change to a session then answers with).
    pub fn recover(&self, ws: &Workspace) -> SessionResult<Option<String>> {
        drop(self.lock(ws)?);
        Ok(self.recovered.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    fn note_recovered(&self, report: String) {
        let mut r = self.recovered.lock().unwrap_or_else(|p| p.into_inner());
        *r = Some(match r.take() {
            Some(earlier) => format!("{earlier}; {report}"),
            None => report,
        });
    }

    fn take_recovered(&self) -> Option<String> {
        self.recovered.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    pub fn status(&self, ws: &Workspace, repo_path: Option<&str>, discard_active: bool) -> SessionResult<StatusReply> {
        check_repo_path(ws, repo_path)?;
        // A resumed agent starts here: finish what a killed process left first.
        drop(self.lock(ws)?);
        if discard_active {
            *self.record.lock().unwrap_or_else(|p| p.into_inner()) = ToolRecord::default();
        }
        let Some(stored) = self.active(ws)? else {
            return Ok(StatusReply::Inactive(InactiveStatus {
                success: true,
                active: false,
                message: ws.contract.message(&msg::NO_ACTIVE_SESSION_SHORT, &[]),
            }));
        };
        let mut checkpoint = stored.checkpoint;
        self.merge_record(&mut checkpoint);
        let status = response::status(&ws.contract, &checkpoint);
        let documents = documents_for(ws, &status.response, &checkpoint.orchestrator_state.query);
        let past_failures = past_failures_for(ws, &status.response, &checkpoint.orchestrator_state.query);
        let procedures = procedures::for_answer(ws, response_texts(&status.response));
        Ok(StatusReply::Active(Box::new(ActiveStatus {
            procedures,
            status,
            active: true,
            checkpoint: stored.commit.to_string(),
            project_rules: context::project_rules(ws.repo.root(), &ws.contract),
            documents,
            past_failures,
        })))
    }

    pub fn check_write_target(
        &self,
        ws: &Workspace,
        file_path: &str,
        allow_new_files: bool,
    ) -> SessionResult<WriteCheck> {
        let stored = self.require_active(ws)?;
        let (rel, exists) = resolve_target(ws, file_path)?;
        let mut checkpoint = stored.checkpoint.clone();
        self.merge_record(&mut checkpoint);
        let allowed =
            engine_api::check_write(&ws.contract, &checkpoint.orchestrator_state, &rel, exists, allow_new_files);
        if allowed.is_ok()
            && checkpoint.orchestrator_state.explored_files != stored.checkpoint.orchestrator_state.explored_files
        {
            // The hooks and the sandbox judge by the stored session: files a tool showed since
            // it was last saved go into it now, or the client's write of this one is refused
            // there although it is allowed here.
            self.save_explored(ws)?;
        }
        match allowed {
            Ok(why) => Ok(WriteCheck {
                success: true,
                allowed: true,
                file: rel,
                exists,
                reason: match why {
                    WriteAllowed::Explored => "explored",
                    WriteAllowed::NewFileInExploredDirectory => "new file in an explored directory",
                },
            }),
            Err(m) => Err(SessionError::Plain(Box::new(ErrorBody {
                error: m.error,
                message: m.message,
                allowed: Some(false),
                file: Some(rel),
                phase: Some(checkpoint.orchestrator_state.phase().name()),
                hint: Some(ws.contract.message(&msg::PHASE_BLOCKED_HINT, &[])),
                ..ErrorBody::default()
            }))),
        }
    }

    /// Saves the files the tools showed (and the tools called) since the session was last
    /// saved, under the operation lock.
    fn save_explored(&self, ws: &Workspace) -> SessionResult<()> {
        let _lock = self.lock(ws)?;
        let stored = self.require_active(ws)?;
        let mut checkpoint = stored.checkpoint.clone();
        self.merge_record(&mut checkpoint);
        if checkpoint.orchestrator_state == stored.checkpoint.orchestrator_state {
            return Ok(());
        }
        let store = self.store()?;
        store.save(stored.commit, &checkpoint, "explored files").map(|_| ()).map_err(|e| store_error(ws, e))
    }

    pub fn add_explored_files(&self, ws: &Workspace, files: &[String]) -> SessionResult<ExploredAdded> {
        let _lock = self.lock(ws)?;
        let stored = self.require_active(ws)?;
        let mut checkpoint = stored.checkpoint.clone();
        engine_api::check_add_explored(&ws.contract, &checkpoint.orchestrator_state, files)
            .map_err(|m| plain(&m.error, &m.message))?;
        // Only what a tool showed or the client's Read opened counts: naming is not exploring.
        self.merge_record(&mut checkpoint);
        let (mut added, mut unseen) = (Vec::new(), Vec::new());
        for f in files.iter().filter(|f| !f.trim().is_empty()) {
            let (rel, _) = resolve_target(ws, f)?;
            if !checkpoint.orchestrator_state.explored_files.contains(&rel) {
                unseen.push(rel);
            } else if !stored.checkpoint.orchestrator_state.explored_files.contains(&rel) {
                added.push(rel);
            }
        }
        if !unseen.is_empty() {
            return Err(contract_error(ws, &msg::ADD_EXPLORED_NOT_SHOWN, &[("files", &unseen.join(", "))]));
        }
        let store = self.store()?;
        match store.save(stored.commit, &checkpoint, "add explored files") {
            Ok(_) => Ok(ExploredAdded {
                success: true,
                added,
                explored_files: checkpoint.orchestrator_state.explored_files.len(),
            }),
            Err(e) => Err(store_error(ws, e)),
        }
    }

    /// Notes that `tool` was served for the active session's current phase, and the files its
    /// answer showed the content or symbols of (see [`code_intel_workflow::engine::registry`]): they count as
    /// explored. Without an active session there is nothing to record.
    /// `call`, when given, is kept for the session's trail (what its report shows).
    pub fn record_tool(&self, ws: &Workspace, tool: &str, revealed: Vec<String>, call: Option<ServedCall>) {
        let Ok(store) = &self.store else { return };
        let Ok(Some(stored)) = store.active() else { return };
        let mut record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        record.follow(&stored.checkpoint.orchestrator_state);
        record.tools.insert(tool.to_owned());
        if let Some(mut call) = call {
            call.files = revealed.len();
            // A step of a few hundred calls is already more than a reader follows: the rest
            // are counted.
            if record.calls.len() < MAX_CALLS_PER_STEP {
                record.calls.push(call);
            } else {
                record.calls_not_kept += 1;
            }
        }
        for f in revealed {
            let rel = submit::normalize_rel(&f);
            if !rel.is_empty() && ws.repo.root().join(&rel).is_file() {
                record.files.insert(rel);
            }
        }
    }

    fn merge_record(&self, checkpoint: &mut Checkpoint) {
        let st = &mut checkpoint.orchestrator_state;
        let record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        if record.is_for(st) {
            st.tools_called.extend(record.tools.iter().cloned());
            st.explored_files.extend(record.files.iter().cloned());
        }
        drop(record);
        // What the client's own tools read, as the hooks saw it, counts as shown too.
        if let Ok(store) = &self.store {
            let repo = store.repository();
            if let Some(root) = repo.workdir() {
                for rel in crate::hook_log::reads(repo.git_dir(), &st.session_id) {
                    if root.join(&rel).is_file() {
                        st.explored_files.insert(rel);
                    }
                }
            }
        }
    }

    /// The calls recorded for the step `checkpoint` is in (taken by the trail step that
    /// answers it).
    fn recorded_calls(&self, checkpoint: &Checkpoint) -> (Vec<ServedCall>, usize) {
        let record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        if record.is_for(&checkpoint.orchestrator_state) {
            (record.calls.clone(), record.calls_not_kept)
        } else {
            (Vec::new(), 0)
        }
    }

    /// After the step `answered` was written with its first `taken` calls: those leave the
    /// record (a call made while the submission ran stays for the step it was made in).
    fn calls_written(&self, answered: &Checkpoint, taken: usize) {
        let mut record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        if record.is_for(&answered.orchestrator_state) {
            let taken = taken.min(record.calls.len());
            record.calls.drain(..taken);
            record.calls_not_kept = 0;
        }
    }

    fn reset_record(&self, checkpoint: &Checkpoint) {
        self.record.lock().unwrap_or_else(|p| p.into_inner()).follow(&checkpoint.orchestrator_state);
    }
}

/// Now, as the trail writes times: RFC 3339 in UTC, to the millisecond.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The texts of a phase response that may name procedure files: its instruction, and the
/// message and warning a transition adds (user escalation names one).
fn response_texts(response: &PhaseResponse) -> impl Iterator<Item = &str> {
    [Some(response.instruction.as_str()), response.message.as_deref(), response.warning.as_deref()]
        .into_iter()
        .flatten()
}
