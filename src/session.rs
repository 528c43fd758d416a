//! The session adapter: runs the pure [`code_intel_workflow::engine`] against the git-stored session.
//!
//! Every operation reads the active session from `refs/code-intel/*` ([`crate::session_store`]),
//! gathers the facts the engine needs (the tools this process served in the current phase,
//! the evidence files, the work tree), calls the engine, carries out its effect, and writes the
//! next checkpoint with a compare-and-swap. The git ref is the source of truth, so a restarted
//! server resumes where the last one stopped and two servers cannot both advance a session.
//!
//! Answers are typed; the MCP server and the CLI serialize them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::Serialize;

use crate::branches;
use crate::context::docs::DocumentResearch;
use crate::context::{self, CONTEXT_FILE, ProjectContext, ProjectRules};
use crate::session_store::{SessionStore, StoreError, Stored};
use crate::workspace::Workspace;
use code_intel_codebase::repo::PathError;
use code_intel_workflow::contract::catalogue::{self as msg, Msg};
use code_intel_workflow::engine::evidence::EvidenceFile;
use code_intel_workflow::engine::payload::{self, Body, Payload};
use code_intel_workflow::engine::phase::{self, Phase};
use code_intel_workflow::engine::response::{self, PhaseResponse, Refusal, SessionStatus};
use code_intel_workflow::engine::state::{Checkpoint, Flags, GateLevel, Intent, SessionState};
use code_intel_workflow::engine::submit::{self, DocumentFacts, Effect, Facts, StartParams};
use code_intel_workflow::engine::{self as engine_api, WriteAllowed};

/// A failed effect: the contract message of its failure, the placeholders, and details.
type EffectFailure = (Msg, Vec<(&'static str, String)>, String);

/// Why a session tool did not do what was asked.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum SessionError {
    /// A refused submit, with the re-instruction for the unchanged phase.
    Refused(Box<Refusal>),
    Plain(Box<ErrorBody>),
}

/// A session tool's error: a code and a message from the contract, and what else the agent
/// needs to act on it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
pub struct ErrorBody {
    pub success: bool,
    pub error: String,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<String>,
    /// A stored session can be resumed (start_session while one is active).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery_available: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<u8>,
    /// check_write_target: the write is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl SessionError {
    /// The error code and message, whatever the kind.
    pub fn code_and_message(&self) -> (&str, &str) {
        match self {
            SessionError::Refused(r) => (&r.error, &r.message),
            SessionError::Plain(e) => (&e.error, &e.message),
        }
    }
}

pub type SessionResult<T> = Result<T, SessionError>;

/// start_session and submit_phase: the phase response, and what the adapter adds to it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionReply {
    #[serde(flatten)]
    pub response: PhaseResponse,
    /// The llm_task_* branches earlier sessions left (start_session, when there are any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_branches: Option<Vec<branches::stale::StaleBranch>>,
    /// The session's task branch, once it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_branch: Option<String>,
    /// An operation a killed process left, finished or dropped before this answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<String>,
    /// The project's DO/DON'T rules (start_session): keep to them for the whole session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project_rules: Option<ProjectRules>,
    /// In DOCUMENT_RESEARCH: the documents to read (`must_read`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents: Option<DocumentResearch>,
    /// What the server decided about this session from the project's context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// get_session_status.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum StatusReply {
    Active(Box<ActiveStatus>),
    Inactive(InactiveStatus),
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ActiveStatus {
    #[serde(flatten)]
    pub status: SessionStatus,
    pub active: bool,
    /// The checkpoint commit the status was read from.
    pub checkpoint: String,
    /// The project's DO/DON'T rules: keep to them for the whole session.
    pub project_rules: ProjectRules,
    /// In DOCUMENT_RESEARCH: the documents to read (`must_read`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub documents: Option<DocumentResearch>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InactiveStatus {
    pub success: bool,
    pub active: bool,
    pub message: String,
}

/// check_write_target's yes.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct WriteCheck {
    pub success: bool,
    pub allowed: bool,
    pub file: String,
    pub exists: bool,
    pub reason: &'static str,
}

/// add_explored_files's answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ExploredAdded {
    pub success: bool,
    /// The files that were not explored before.
    pub added: Vec<String>,
    /// How many files are explored now.
    pub explored_files: usize,
}

/// review_changes's answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReviewReply {
    pub success: bool,
    #[serde(flatten)]
    pub review: branches::review::ReviewOutput,
}

/// cleanup_stale_branches's answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CleanupReply {
    pub success: bool,
    pub action: String,
    pub merged: Vec<String>,
    pub deleted: Vec<String>,
    pub kept: Vec<KeptBranch>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct KeptBranch {
    pub branch: String,
    pub base: Option<String>,
    pub ahead: usize,
    pub reason: String,
}

/// The tools this process served, and the files their answers showed, in one phase of one
/// session.
#[derive(Debug, Default)]
struct ToolRecord {
    session_id: String,
    step_key: String,
    tools: BTreeSet<String>,
    files: BTreeSet<String>,
}

pub struct Sessions {
    store: Result<SessionStore, String>,
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
        let store = SessionStore::open(ws.repo.root()).map_err(|e| e.to_string());
        Sessions { store, record: Mutex::new(ToolRecord::default()), recovered: Mutex::new(None) }
    }

    fn store(&self) -> SessionResult<&SessionStore> {
        self.store.as_ref().map_err(|e| plain("git_required", &format!("Sessions are stored in git: {e}")))
    }

    fn active(&self, ws: &Workspace) -> SessionResult<Option<Stored>> {
        match self.store()?.active() {
            Ok(s) => Ok(s),
            Err(StoreError::Corrupt(e)) => {
                tracing::warn!("checkpoint unreadable: {e}");
                Err(contract_error(ws, &msg::CHECKPOINT_RESTORE_FAILED, &[]))
            }
            Err(StoreError::UnknownPhase(phase)) => Err(contract_error(ws, &msg::UNKNOWN_PHASE, &[("phase", &phase)])),
            Err(e) => Err(plain("git_error", &e.to_string())),
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
                notes.push(
                    ws.contract
                        .message(&msg::DOC_RESEARCH_NO_DOCUMENTS, &[("docs_path", &docs_path), ("path", CONTEXT_FILE)]),
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
        let stale = match store.task_branches() {
            Ok(b) => !b.is_empty(),
            Err(e) => {
                let code = ws.contract.error_code(&msg::BRANCH_SETUP_FAILED);
                return Err(plain(&code, &format!("Cannot read the task branches: {e}")));
            }
        };
        let (checkpoint, response) = submit::start(
            &ws.contract,
            StartParams {
                session_id: new_session_id(),
                intent,
                query: req.query.trim().to_owned(),
                flags,
                created_at: chrono::Utc::now().to_rfc3339(),
                stale_branches: stale,
            },
        );
        let stale_branches = stale.then(|| branches::stale::list(ws.repo.root()).unwrap_or_default());
        match store.create(&checkpoint) {
            Ok(_) => {
                self.reset_record(&checkpoint);
                let documents = documents_for(ws, &response, &checkpoint.orchestrator_state.query);
                Ok(SessionReply {
                    response,
                    stale_branches,
                    task_branch: None,
                    recovered: self.take_recovered(),
                    project_rules: Some(context::project_rules(ws.repo.root(), &ws.contract)),
                    documents,
                    notes,
                })
            }
            Err(StoreError::Busy(other)) => Err(contract_error(ws, &msg::SESSION_ACTIVE, &[("session_id", &other)])),
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
        let _lock = self.lock(ws)?;
        let stored = self.require_active(ws)?;
        let mut checkpoint = stored.checkpoint.clone();
        self.merge_record(&mut checkpoint);
        let refused = SessionError::Refused;
        // Decoding first tells which evidence files to read; a payload that does not decode is
        // refused by submit_value with the same rules.
        let changed_files = (checkpoint.orchestrator_state.phase() == Phase::PreCommit)
            .then(|| task_changes(ws, &checkpoint.orchestrator_state))
            .flatten();
        let facts = |payload: Option<&Payload>| Facts {
            evidence: payload.map(|p| evidence_facts(ws, p)).unwrap_or_default(),
            semantic_available: ws.semantic.available(),
            changed_files: changed_files.clone(),
            documents: payload.and_then(|p| document_facts(ws, p, &checkpoint.orchestrator_state.query)),
        };
        let decoded = payload::decode(checkpoint.orchestrator_state.phase(), &data).ok();
        let accepted = match (&decoded, checkpoint.orchestrator_state.is_complete()) {
            (Some(p), false) => submit::submit(&ws.contract, &checkpoint, p, &facts(Some(p))),
            _ => submit::submit_value(&ws.contract, &checkpoint, &data, &facts(None)),
        }
        .map_err(refused)?;
        let old_phase = checkpoint.orchestrator_state.phase();
        let mut next = accepted.session;
        if matches!(old_phase, Phase::Verification | Phase::ImpactAnalysis) {
            add_cited_files(ws, &data, &mut next);
        }
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
        let result = match &accepted.effect {
            // Git work and the checkpoint that records it are one journaled operation.
            Some(effect) => {
                let step = SessionStep {
                    previous: stored.commit.to_string(),
                    checkpoint: next.clone(),
                    finish: next.orchestrator_state.is_complete(),
                    message,
                };
                match self.apply_effect(ws, effect, old_phase, step) {
                    Ok(done) => {
                        next = done;
                        Ok(())
                    }
                    Err((key, vars, details)) => {
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
                store.finish(stored.commit, &next, &history_record(&next, stored.commit))
            }
            None => store.save(stored.commit, &next, &message).map(|_| ()),
        };
        match result {
            Ok(()) => {
                self.reset_record(&next);
                let documents = documents_for(ws, &accepted.response, &next.orchestrator_state.query);
                Ok(SessionReply {
                    response: accepted.response,
                    stale_branches: None,
                    task_branch: next.orchestrator_state.task_branch.clone(),
                    recovered: self.take_recovered(),
                    project_rules: None,
                    documents,
                    notes: Vec::new(),
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
            .map_err(|e| plain("git_required", &format!("Sessions are stored in git: {e}")))?;
        let lock = code_intel_gitstate::lock::OperationLock::acquire(repo.git_dir())
            .map_err(|e| plain("git_error", &e.to_string()))?;
        let store = self.store()?;
        match code_intel_gitstate::journal::recover(&repo, ws.repo.root(), &session_writer(store)) {
            Ok(Some(report)) => self.note_recovered(report),
            Ok(None) => {}
            Err(e) => return Err(plain("git_error", &format!("an interrupted operation could not be finished: {e}"))),
        }
        Ok(lock)
    }

    /// Finishes an operation a dead process left, if any (server start, CLI commands).
    pub fn recover(&self, ws: &Workspace) -> Option<String> {
        drop(self.lock(ws).ok()?);
        self.recovered.lock().unwrap_or_else(|p| p.into_inner()).clone()
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
        Ok(StatusReply::Active(Box::new(ActiveStatus {
            status,
            active: true,
            checkpoint: stored.commit.to_string(),
            project_rules: context::project_rules(ws.repo.root(), &ws.contract),
            documents,
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
        let mut checkpoint = stored.checkpoint;
        self.merge_record(&mut checkpoint);
        match engine_api::check_write(&ws.contract, &checkpoint.orchestrator_state, &rel, exists, allow_new_files) {
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

    pub fn add_explored_files(&self, ws: &Workspace, files: &[String]) -> SessionResult<ExploredAdded> {
        let _lock = self.lock(ws)?;
        let stored = self.require_active(ws)?;
        let mut checkpoint = stored.checkpoint.clone();
        engine_api::check_add_explored(&ws.contract, &checkpoint.orchestrator_state, files)
            .map_err(|m| plain(&m.error, &m.message))?;
        let mut added = Vec::new();
        for f in files.iter().filter(|f| !f.trim().is_empty()) {
            let (rel, _) = resolve_target(ws, f)?;
            if checkpoint.orchestrator_state.explored_files.insert(rel.clone()) {
                added.push(rel);
            }
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
    pub fn record_tool(&self, ws: &Workspace, tool: &str, revealed: Vec<String>) {
        let Ok(store) = &self.store else { return };
        let Ok(Some(stored)) = store.active() else { return };
        let st = &stored.checkpoint.orchestrator_state;
        let key = phase::summary_key(st.phase(), st.ready_step());
        let mut record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        if record.session_id != st.session_id || record.step_key != key {
            *record = ToolRecord { session_id: st.session_id.clone(), step_key: key, ..ToolRecord::default() };
        }
        record.tools.insert(tool.to_owned());
        for f in revealed {
            let rel = submit::normalize_rel(&f);
            if !rel.is_empty() && ws.repo.root().join(&rel).is_file() {
                record.files.insert(rel);
            }
        }
    }

    fn merge_record(&self, checkpoint: &mut Checkpoint) {
        let st = &mut checkpoint.orchestrator_state;
        let key = phase::summary_key(st.phase(), st.ready_step());
        let record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        if record.session_id == st.session_id && record.step_key == key {
            st.tools_called.extend(record.tools.iter().cloned());
            st.explored_files.extend(record.files.iter().cloned());
        }
    }

    fn reset_record(&self, checkpoint: &Checkpoint) {
        let st = &checkpoint.orchestrator_state;
        let mut record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        let key = phase::summary_key(st.phase(), st.ready_step());
        if record.session_id != st.session_id || record.step_key != key {
            *record = ToolRecord { session_id: st.session_id.clone(), step_key: key, ..ToolRecord::default() };
        }
    }

    /// Carries out the engine's git work together with the checkpoint `step` carries, as one
    /// journaled operation (see [`code_intel_gitstate::journal`]); returns the checkpoint as written. On
    /// failure returns the contract message of the failure, its placeholders, and what went
    /// wrong; nothing changed then.
    fn apply_effect(
        &self,
        ws: &Workspace,
        effect: &Effect,
        old_phase: Phase,
        mut step: SessionStep,
    ) -> Result<Checkpoint, EffectFailure> {
        let root = ws.repo.root();
        let store = self.store().map_err(|e| (msg::FINALIZE_FAILED, vec![], e.code_and_message().1.to_owned()))?;
        let writer = session_writer(store);
        let operate = |plan: &mut dyn FnMut(
            &gix::Repository,
            &mut SessionStep,
        ) -> Result<code_intel_gitstate::journal::Journal, String>,
                       step: &mut SessionStep| {
            let result = code_intel_gitstate::journal::operate(root, &writer, |repo| {
                let mut journal = plan(repo, step)?;
                journal.session = Some(serde_json::to_value(&*step).map_err(|e| e.to_string())?);
                Ok(((), journal))
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
                let fail = |e: String| {
                    (msg::BRANCH_OPERATION_FAILED, vec![("choice", choice.clone()), ("errors", e)], String::new())
                };
                let stale = branches::stale::list(root).map_err(fail)?;
                let current = stale.iter().find(|b| b.current).cloned();
                match choice.as_str() {
                    "delete" => {
                        let names: Vec<String> = stale.iter().map(|b| b.branch.clone()).collect();
                        operate(&mut |repo, _| Ok(branches::stale::plan_delete(repo, root, &names)?.1), &mut step)
                            .map_err(fail)?;
                    }
                    "merge" => {
                        let Some(cur) = current else {
                            return Err(fail(
                                "HEAD is not on an llm_task_* branch, so there is no current task branch to merge"
                                    .into(),
                            ));
                        };
                        let Some(base) = cur.base.clone() else {
                            return Err(fail(format!("the base of {} is unknown", cur.branch)));
                        };
                        let id = step.checkpoint.orchestrator_state.session_id.clone();
                        let note = serde_json::json!({"merged_stale_branch": cur.branch, "by_session": id}).to_string();
                        let others: Vec<String> =
                            stale.iter().filter(|b| b.branch != cur.branch).map(|b| b.branch.clone()).collect();
                        operate(
                            &mut |repo, _| {
                                let planned =
                                    branches::merge::plan_merge(repo, root, &cur.branch, &base, &note, &others);
                                planned.map(|(_, journal)| journal).map_err(|e| e.to_string())
                            },
                            &mut step,
                        )
                        .map_err(fail)?;
                    }
                    _ => {
                        // continue: keep working on the task branch HEAD is on. On no task
                        // branch, READY makes a new one, as in a fresh session. Nothing moves,
                        // so the checkpoint is written as any other.
                        let st = &mut step.checkpoint.orchestrator_state;
                        if let Some(cur) = current
                            && let Some(base) = cur.base.clone()
                        {
                            adopt_into(st, branches::adopt(root, &cur.branch, &base).map_err(fail)?);
                        }
                        writer(&serde_json::to_value(&step).map_err(|e| fail(e.to_string()))?).map_err(fail)?;
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
                    return Err((msg::PRE_COMMIT_NO_TASK_BRANCH, vec![], String::new()));
                };
                let base = gix::ObjectId::from_hex(base.as_bytes()).map_err(|e| (failure, vec![], e.to_string()))?;
                let user_changes = user_changes_of(st);
                let kept: std::collections::BTreeSet<String> = keep_with_reason.iter().cloned().collect();
                let gate = branches::gate::CommitGate {
                    rules: &ws.config.garbage,
                    kept_with_reason: &kept,
                    max_file_size: ws.config.max_file_size,
                };
                let refused: std::cell::RefCell<Option<branches::gate::GateRefusal>> = std::cell::RefCell::new(None);
                let result = operate(
                    &mut |repo, _| {
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
                            Ok((_, journal)) => Ok(journal),
                            Err(branches::commit::CommitError::Gate(g)) => {
                                let text = branches::commit::CommitError::Gate(g.clone()).to_string();
                                *refused.borrow_mut() = Some(g);
                                Err(text)
                            }
                            Err(e) => Err(e.to_string()),
                        }
                    },
                    &mut step,
                );
                if let Err(e) = result {
                    return Err(match refused.into_inner() {
                        Some(branches::gate::GateRefusal::Garbage(lines)) => {
                            (msg::GARBAGE_IN_COMMIT, vec![("findings", lines.join("; "))], String::new())
                        }
                        Some(branches::gate::GateRefusal::Hook { hook, output }) => {
                            (msg::PRE_COMMIT_HOOK_FAILED, vec![("hook", hook)], output)
                        }
                        _ => (failure, vec![], e),
                    });
                }
            }
            Effect::Merge => {
                let st = &step.checkpoint.orchestrator_state;
                let (Some(task), Some(base)) = (st.task_branch.clone(), st.base_branch.clone()) else {
                    return Err((msg::MERGE_NO_TASK_BRANCH, vec![], String::new()));
                };
                let exists = branches::open(root)
                    .ok()
                    .and_then(|r| branches::ref_id(&r, &format!("refs/heads/{task}")).ok().flatten());
                if exists.is_none() {
                    return Err((msg::MERGE_NO_TASK_BRANCH, vec![], format!("{task} is missing")));
                }
                let note = session_note(&step.checkpoint);
                operate(
                    &mut |repo, _| {
                        let planned = branches::merge::plan_merge(repo, root, &task, &base, &note, &[]);
                        planned.map(|(_, journal)| journal).map_err(|e| e.to_string())
                    },
                    &mut step,
                )
                .map_err(|e| (msg::MERGE_FAILED, vec![], e))?;
            }
        }
        Ok(step.checkpoint)
    }

    /// `review_changes`: PRE_COMMIT only; every change from the base commit to the work tree.
    pub fn review_changes(&self, ws: &Workspace) -> SessionResult<ReviewReply> {
        let stored = self.require_active(ws)?;
        let st = &stored.checkpoint.orchestrator_state;
        if st.phase() != Phase::PreCommit {
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
        .map_err(|e| plain("review_failed", &e))?;
        Ok(ReviewReply { success: true, review })
    }

    /// `cleanup_stale_branches`: merged task branches are deleted; unmerged ones only with
    /// `confirm`, after a call without it has listed them. `merge` first merges the current task
    /// branch into its base. The active session's own branch is never touched.
    pub fn cleanup_stale_branches(&self, ws: &Workspace, action: &str, confirm: bool) -> SessionResult<CleanupReply> {
        let root = ws.repo.root();
        if !matches!(action, "delete" | "merge") {
            return Err(invalid(ws, "action", "expected \"delete\" or \"merge\""));
        }
        let own = self.active(ws).ok().flatten().and_then(|s| s.checkpoint.orchestrator_state.task_branch);
        let stale: Vec<branches::stale::StaleBranch> = branches::stale::list(root)
            .map_err(|e| plain("git_error", &e))?
            .into_iter()
            .filter(|b| own.as_deref() != Some(b.branch.as_str()))
            .collect();
        let mut merged = Vec::new();
        let mut kept = Vec::new();
        let mut to_delete = Vec::new();
        if action == "merge"
            && let Some(cur) = stale.iter().find(|b| b.current)
        {
            let base = cur
                .base
                .clone()
                .ok_or_else(|| plain("merge_failed", &format!("the base of {} is unknown", cur.branch)))?;
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
                        "unmerged: {} commit(s) not on its base; call again with confirm: true to delete them",
                        b.ahead
                    ),
                });
            }
        }
        branches::stale::delete_branches(root, &to_delete).map_err(|e| plain("git_error", &e))?;
        Ok(CleanupReply { success: true, action: action.to_owned(), merged, deleted: to_delete, kept })
    }
}

/// The checkpoint a journaled operation writes as its last step: on top of `previous`, or (with
/// `finish`) ending the session.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct SessionStep {
    previous: String,
    checkpoint: Checkpoint,
    finish: bool,
    message: String,
}

/// Writes a journal's session step; does nothing when the session has moved on already (the
/// step was written before a kill, or another process advanced the session).
fn session_writer(store: &SessionStore) -> impl Fn(&serde_json::Value) -> Result<(), String> + '_ {
    move |value| {
        let step: SessionStep = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        let previous = gix::ObjectId::from_hex(step.previous.as_bytes()).map_err(|e| e.to_string())?;
        let record = step.finish.then(|| history_record(&step.checkpoint, previous));
        store.advance(previous, &step.checkpoint, record.as_ref(), &step.message).map_err(|e| e.to_string())
    }
}

/// What `refs/code-intel/history` keeps of a finished session: its query, flags, tasks and
/// counters, what it learned, and the evidence the Map learns from.
fn history_record(checkpoint: &Checkpoint, last_checkpoint: gix::ObjectId) -> serde_json::Value {
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
        "evidence": code_intel_semantic::learning::evidence_of(state),
        "last_checkpoint": last_checkpoint.to_string(),
    })
}

/// A store error as the agent reads it.
fn store_error(ws: &Workspace, e: StoreError) -> SessionError {
    match e {
        StoreError::Conflict => contract_error(ws, &msg::CHECKPOINT_CONFLICT, &[]),
        StoreError::Locked(path) => contract_error(ws, &msg::LOCK_IN_THE_WAY, &[("path", &path)]),
        e => plain("git_error", &e.to_string()),
    }
}

/// The files the session's task changed (for PRE_COMMIT's review check); None when the session
/// has no task branch or the work tree cannot be read (then the check is left to the commit).
fn task_changes(ws: &Workspace, st: &SessionState) -> Option<Vec<String>> {
    let base = gix::ObjectId::from_hex(st.base_commit.as_deref()?.as_bytes()).ok()?;
    branches::review::task_changes(ws.repo.root(), base, &user_changes_of(st)).ok()
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
    });
    serde_json::to_string_pretty(&note).unwrap_or_default()
}

/// `YYYYMMDD_HHMMSS_` plus 8 hex digits of a hash of the time, the process and a counter, so
/// two servers starting in the same second still differ (and creation is compare-and-swap).
fn new_session_id() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = chrono::Utc::now();
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = format!("{}:{}:{n}", now.timestamp_nanos_opt().unwrap_or(0), std::process::id());
    let hash = blake3::hash(seed.as_bytes()).to_hex();
    format!("{}_{}", now.format("%Y%m%d_%H%M%S"), &hash.as_str()[..8])
}

fn check_repo_path(ws: &Workspace, repo_path: Option<&str>) -> SessionResult<()> {
    let Some(p) = repo_path.map(str::trim).filter(|p| !p.is_empty() && *p != ".") else { return Ok(()) };
    match ws.repo.resolve_relative(p) {
        Ok(rel) if rel.is_empty() => Ok(()),
        _ => Err(invalid(ws, "repo_path", &format!("this server serves {}; use \".\"", ws.repo.root().display()))),
    }
}

fn resolve_target(ws: &Workspace, file_path: &str) -> SessionResult<(String, bool)> {
    if file_path.trim().is_empty() {
        return Err(contract_error(ws, &msg::NO_FILE_PATH, &[]));
    }
    ws.repo.resolve_maybe_new(file_path).map_err(|e| match &e {
        PathError::OutsideRepo { path } => {
            let root = ws.repo.root().display().to_string();
            contract_error(ws, &msg::PATH_OUTSIDE_REPO, &[("path", path), ("root", &root)])
        }
        PathError::GitDir { path } => contract_error(ws, &msg::PATH_IN_GIT_DIR, &[("path", path)]),
        PathError::NotFound { path } => contract_error(ws, &msg::PATH_NOT_FOUND, &[("path", path)]),
    })
}

/// Reads the files the payload's evidence names, confined to the repository.
fn evidence_facts(ws: &Workspace, payload: &Payload) -> BTreeMap<String, EvidenceFile> {
    let mut out = BTreeMap::new();
    for path in submit::evidence_paths(payload) {
        let fact = match ws.repo.resolve(&path) {
            Err(PathError::OutsideRepo { .. } | PathError::GitDir { .. }) => EvidenceFile::Outside,
            Err(PathError::NotFound { .. }) => EvidenceFile::Missing,
            Ok(abs) if !abs.is_file() => EvidenceFile::Missing,
            Ok(abs) => match std::fs::read(&abs) {
                Ok(bytes) if !code_intel_codebase::walk::looks_binary(&bytes) => {
                    EvidenceFile::Lines(String::from_utf8_lossy(&bytes).lines().map(str::to_owned).collect())
                }
                _ => EvidenceFile::Missing,
            },
        };
        out.insert(path, fact);
    }
    out
}

/// Files named in VERIFICATION's evidence or IMPACT_ANALYSIS's summary join the explored set.
fn add_cited_files(ws: &Workspace, data: &serde_json::Value, next: &mut Checkpoint) {
    let mut strings = Vec::new();
    collect_strings(data, &mut strings);
    for s in strings {
        for word in s.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')') {
            let candidate = submit::normalize_rel(word.trim_matches(|c| c == '`' || c == '\'' || c == '"'));
            if candidate.is_empty() || candidate.starts_with('/') || candidate.contains("..") {
                continue;
            }
            if ws.repo.root().join(&candidate).is_file() {
                next.orchestrator_state.explored_files.insert(candidate);
            }
        }
    }
}

fn collect_strings<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match v {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

fn contract_error(ws: &Workspace, key: &Msg, vars: &[(&str, &str)]) -> SessionError {
    let m = ws.contract.error(key, vars);
    plain(&m.error, &m.message)
}

fn plain(code: &str, message: &str) -> SessionError {
    SessionError::Plain(Box::new(ErrorBody {
        error: code.to_owned(),
        message: message.to_owned(),
        ..ErrorBody::default()
    }))
}

fn invalid(ws: &Workspace, name: &str, why: &str) -> SessionError {
    contract_error(ws, &msg::INVALID_ARGUMENT, &[("name", name), ("error", why)])
}

/// The documents to read, when `response` is DOCUMENT_RESEARCH's.
fn documents_for(ws: &Workspace, response: &PhaseResponse, query: &str) -> Option<DocumentResearch> {
    (response.phase == Phase::DocumentResearch.name()).then(|| research(ws, query))
}

/// DOCUMENT_RESEARCH's ranking: BM25, plus the embedding model when one is installed.
fn research(ws: &Workspace, query: &str) -> DocumentResearch {
    let embed = |texts: &[String]| ws.semantic.embed_texts(texts).ok();
    let embed: Option<context::docs::Embed> = ws.semantic.available().then_some(&embed);
    context::docs::research(&ws.repo, &ws.config, &ProjectContext::load(ws.repo.root()), query, embed)
}

/// DOCUMENT_RESEARCH's facts: which reviewed documents do not exist, and what must_read named.
fn document_facts(ws: &Workspace, payload: &Payload, query: &str) -> Option<DocumentFacts> {
    let Body::DocumentResearch(p) = &payload.body else { return None };
    let missing = p
        .documents_reviewed
        .iter()
        .flatten()
        .filter(|d| {
            let path = code_intel_workflow::engine::submit::document_path(d);
            path.is_empty() || !ws.repo.resolve(&path).is_ok_and(|abs| abs.is_file())
        })
        .cloned()
        .collect();
    let research = research(ws, query);
    Some(DocumentFacts { missing, must_read: research.must_read.into_iter().map(|m| m.path).collect() })
}
