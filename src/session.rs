//! The session adapter: runs the pure [`crate::engine`] against the git-stored session.
//!
//! Every operation reads the active session from `refs/code-intel/*` ([`crate::gitstore`]),
//! gathers the facts the engine needs (the tools this process served in the current phase,
//! the evidence files, the work tree), calls the engine, carries out its effect, and writes the
//! next checkpoint with a compare-and-swap. The git ref is the source of truth, so a restarted
//! server resumes where the last one stopped and two servers cannot both advance a session.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use crate::branches;
use crate::engine::evidence::EvidenceFile;
use crate::engine::phase::{self, Phase};
use crate::engine::state::{Checkpoint, Flags, GateLevel, Intent};
use crate::engine::submit::{self, Effect, Facts, StartParams};
use crate::engine::{self as engine_api, WriteAllowed};
use crate::gitstore::{SessionStore, StoreError, Stored};
use crate::repo::PathError;
use crate::workspace::Workspace;

/// A failed effect: the contract path of its failure message, the placeholders, and details.
type EffectFailure = (Vec<&'static str>, Vec<(&'static str, String)>, String);

/// A session tool's answer: the JSON object for `structuredContent`, success or error.
pub type SessionResult = Result<Value, Value>;

/// The tools this process served, and the files they returned, in one phase of one session.
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
        Sessions { store, record: Mutex::new(ToolRecord::default()) }
    }

    fn store(&self, ws: &Workspace) -> Result<&SessionStore, Value> {
        self.store.as_ref().map_err(|e| error(ws, "git_required", &format!("Sessions are stored in git: {e}")))
    }

    fn active(&self, ws: &Workspace) -> Result<Option<Stored>, Value> {
        match self.store(ws)?.active() {
            Ok(s) => Ok(s),
            Err(StoreError::Corrupt(e)) => {
                tracing::warn!("checkpoint unreadable: {e}");
                Err(session_message(ws, "checkpoint_restore_failed", &[]))
            }
            Err(StoreError::UnknownPhase(phase)) => {
                let m = ws.contract.error(&["common_failures", "unknown_phase"], &[("phase", &phase)]);
                Err(json!({"success": false, "error": m.error, "message": m.message}))
            }
            Err(e) => Err(error(ws, "git_error", &e.to_string())),
        }
    }

    fn require_active(&self, ws: &Workspace) -> Result<Stored, Value> {
        self.active(ws)?.ok_or_else(|| session_message(ws, "no_active_session", &[]))
    }

    pub fn start(&self, ws: &Workspace, req: StartRequest) -> SessionResult {
        let store = self.store(ws)?;
        let Some(intent) = Intent::parse(&req.intent) else {
            return Err(ws_invalid(ws, "intent", "expected IMPLEMENT, MODIFY, INVESTIGATE or QUESTION"));
        };
        if req.query.trim().is_empty() {
            return Err(ws_invalid(ws, "query", "the user's request is required"));
        }
        let mut flags = req.flags;
        flags.gate_level = match req.gate_level.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            None => GateLevel::Auto,
            Some(g) => {
                GateLevel::parse(g).ok_or_else(|| ws_invalid(ws, "gate_level", "expected auto (a) or full (f)"))?
            }
        };
        check_repo_path(ws, req.repo_path.as_deref())?;
        if let Some(existing) = self.active(ws)? {
            let st = &existing.checkpoint.orchestrator_state;
            let mut body = session_message(ws, "checkpoint_recovery", &[]);
            if let Some(o) = body.as_object_mut() {
                o.insert("error".into(), json!("recovery_available"));
                o.insert("recovery_available".into(), json!(true));
                o.insert("session_id".into(), json!(st.session_id));
                o.insert("phase".into(), json!(st.phase().name()));
                o.insert("step".into(), json!(st.phase_state.step));
            }
            return Err(body);
        }
        let stale = match store.task_branches() {
            Ok(b) => !b.is_empty(),
            Err(e) => {
                let m = ws.contract.error(&["tool_errors", "start_session", "branch_setup_failed"], &[]);
                return Err(
                    json!({"success": false, "error": m.error, "message": format!("Cannot read the task branches: {e}")}),
                );
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
        let mut response = response;
        if stale && let Some(o) = response.as_object_mut() {
            o.insert("stale_branches".into(), json!(branches::stale::list(ws.repo.root()).unwrap_or_default()));
        }
        match store.create(&checkpoint) {
            Ok(_) => {
                self.reset_record(&checkpoint);
                Ok(response)
            }
            Err(StoreError::Busy(other)) => Err(session_message(ws, "session_active", &[("session_id", &other)])),
            Err(e) => Err(error(ws, "git_error", &e.to_string())),
        }
    }

    pub fn submit(&self, ws: &Workspace, data: Value) -> SessionResult {
        let data = match data {
            Value::String(text) => serde_json::from_str::<Value>(&text)
                .map_err(|e| session_message(ws, "invalid_data", &[("error", &e.to_string())]))?,
            other => other,
        };
        let stored = self.require_active(ws)?;
        let mut checkpoint = stored.checkpoint.clone();
        self.merge_record(&mut checkpoint);
        let facts = Facts { evidence: evidence_facts(ws, &data), semantic_available: ws.semantic.available() };
        let accepted = submit::submit(&ws.contract, &checkpoint, &data, &facts).map_err(|r| r.response)?;
        let old_phase = checkpoint.orchestrator_state.phase();
        let mut next = accepted.session;
        if matches!(old_phase, Phase::Verification | Phase::ImpactAnalysis) {
            add_cited_files(ws, &data, &mut next);
        }
        if let Some(effect) = &accepted.effect {
            self.apply_effect(ws, effect, old_phase, &mut next).map_err(|(path, vars, details)| {
                let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let mut response = submit::reject(&ws.contract, &checkpoint, &path, &vars).response;
                if !details.is_empty()
                    && let Some(o) = response.as_object_mut()
                {
                    o.insert("details".into(), json!(details));
                }
                response
            })?;
        }
        let store = self.store(ws)?;
        let result = if next.orchestrator_state.is_complete() {
            store.finish(stored.commit, &next)
        } else {
            let message = format!(
                "{} -> {}",
                phase::summary_key(old_phase, checkpoint.orchestrator_state.ready_step()),
                phase::summary_key(next.orchestrator_state.phase(), next.orchestrator_state.ready_step())
            );
            store.save(stored.commit, &next, &message).map(|_| ())
        };
        match result {
            Ok(()) => {
                self.reset_record(&next);
                let mut response = accepted.response;
                if let Some(o) = response.as_object_mut()
                    && let Some(branch) = &next.orchestrator_state.task_branch
                {
                    o.insert("task_branch".into(), json!(branch));
                }
                Ok(response)
            }
            Err(StoreError::Conflict) => Err(session_message(ws, "checkpoint_conflict", &[])),
            Err(e) => Err(error(ws, "git_error", &e.to_string())),
        }
    }

    pub fn status(&self, ws: &Workspace, repo_path: Option<&str>, discard_active: bool) -> SessionResult {
        check_repo_path(ws, repo_path)?;
        if discard_active {
            *self.record.lock().unwrap_or_else(|p| p.into_inner()) = ToolRecord::default();
        }
        let Some(stored) = self.active(ws)? else {
            let mut body = session_message(ws, "no_active_session_short", &[]);
            if let Some(o) = body.as_object_mut() {
                o.remove("error");
                o.insert("success".into(), json!(true));
                o.insert("active".into(), json!(false));
            }
            return Ok(body);
        };
        let mut checkpoint = stored.checkpoint;
        self.merge_record(&mut checkpoint);
        let mut body = submit::status(&ws.contract, &checkpoint);
        if let Some(o) = body.as_object_mut() {
            o.insert("active".into(), json!(true));
            o.insert("phase_summaries".into(), json!(checkpoint.summaries()));
            o.insert("checkpoint".into(), json!(stored.commit.to_string()));
        }
        Ok(body)
    }

    pub fn check_write_target(&self, ws: &Workspace, file_path: &str, allow_new_files: bool) -> SessionResult {
        let stored = self.require_active(ws)?;
        let (rel, exists) = resolve_target(ws, file_path)?;
        let mut checkpoint = stored.checkpoint;
        self.merge_record(&mut checkpoint);
        match engine_api::check_write(&ws.contract, &checkpoint.orchestrator_state, &rel, exists, allow_new_files) {
            Ok(why) => Ok(json!({
                "success": true,
                "allowed": true,
                "file": rel,
                "exists": exists,
                "reason": match why {
                    WriteAllowed::Explored => "explored",
                    WriteAllowed::NewFileInExploredDirectory => "new file in an explored directory",
                },
            })),
            Err(m) => Err(json!({
                "success": false,
                "allowed": false,
                "error": m.error,
                "message": m.message,
                "file": rel,
                "phase": checkpoint.orchestrator_state.phase().name(),
                "hint": ws.contract.message(&["hints", "phase_blocked_hint"], &[]),
            })),
        }
    }

    pub fn add_explored_files(&self, ws: &Workspace, files: &[String]) -> SessionResult {
        let stored = self.require_active(ws)?;
        let mut checkpoint = stored.checkpoint.clone();
        engine_api::check_add_explored(&ws.contract, &checkpoint.orchestrator_state, files)
            .map_err(|m| json!({"success": false, "error": m.error, "message": m.message}))?;
        let mut added = Vec::new();
        for f in files.iter().filter(|f| !f.trim().is_empty()) {
            let (rel, _) = resolve_target(ws, f)?;
            if checkpoint.orchestrator_state.explored_files.insert(rel.clone()) {
                added.push(rel);
            }
        }
        let store = self.store(ws)?;
        match store.save(stored.commit, &checkpoint, "add explored files") {
            Ok(_) => Ok(json!({
                "success": true,
                "added": added,
                "explored_files": checkpoint.orchestrator_state.explored_files.len(),
            })),
            Err(StoreError::Conflict) => Err(session_message(ws, "checkpoint_conflict", &[])),
            Err(e) => Err(error(ws, "git_error", &e.to_string())),
        }
    }

    /// Notes that `tool` was served, and which files its output named, for the active session's
    /// current phase. Without an active session there is nothing to record.
    pub fn record_tool(&self, ws: &Workspace, tool: &str, output: Option<&Value>) {
        let Ok(store) = &self.store else { return };
        let Ok(Some(stored)) = store.active() else { return };
        let st = &stored.checkpoint.orchestrator_state;
        let key = phase::summary_key(st.phase(), st.ready_step());
        let mut record = self.record.lock().unwrap_or_else(|p| p.into_inner());
        if record.session_id != st.session_id || record.step_key != key {
            *record = ToolRecord { session_id: st.session_id.clone(), step_key: key, ..ToolRecord::default() };
        }
        record.tools.insert(tool.to_owned());
        if let Some(output) = output
            && st.phase() != Phase::Ready
        {
            let mut found = Vec::new();
            collect_files(output, None, &mut found);
            for f in found {
                if ws.repo.root().join(&f).is_file() {
                    record.files.insert(f);
                }
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

    /// Carries out the engine's git work. On failure returns the contract path of the failure,
    /// its placeholders, and what went wrong.
    fn apply_effect(
        &self,
        ws: &Workspace,
        effect: &Effect,
        old_phase: Phase,
        next: &mut Checkpoint,
    ) -> Result<(), EffectFailure> {
        let root = ws.repo.root();
        let st = &mut next.orchestrator_state;
        match effect {
            Effect::CreateTaskBranch => match branches::create_task_branch(root, &st.session_id) {
                Ok(b) => {
                    st.task_branch = Some(b.name);
                    st.base_branch = Some(b.base);
                    st.base_commit = Some(b.base_commit.to_string());
                    st.user_changes =
                        b.user_changes.into_iter().map(|(p, id)| (p, id.map(|i| i.to_string()))).collect();
                    Ok(())
                }
                Err(e) => Err((vec!["failures", "READY", "branch_creation_failed"], vec![], e)),
            },
            Effect::BranchChoice(choice) => {
                let fail = |e: String| {
                    (
                        vec!["failures", "BRANCH_INTERVENTION", "branch_operation_failed"],
                        vec![("choice", choice.clone()), ("errors", e)],
                        String::new(),
                    )
                };
                let stale = branches::stale::list(root).map_err(fail)?;
                let current = stale.iter().find(|b| b.current).cloned();
                match choice.as_str() {
                    "delete" => {
                        let names: Vec<String> = stale.iter().map(|b| b.branch.clone()).collect();
                        branches::stale::delete_branches(root, &names).map_err(fail)
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
                        let note = json!({"merged_stale_branch": cur.branch, "by_session": st.session_id}).to_string();
                        branches::merge::merge_task(root, &cur.branch, &base, &note)
                            .map_err(|e| fail(e.to_string()))?;
                        let others: Vec<String> =
                            stale.iter().filter(|b| b.branch != cur.branch).map(|b| b.branch.clone()).collect();
                        branches::stale::delete_branches(root, &others).map_err(fail)
                    }
                    _ => {
                        // continue: keep working on the current task branch, if HEAD is on one.
                        if let Some(cur) = current
                            && let Some(base) = cur.base.clone()
                        {
                            let adopted = branches::adopt(root, &cur.branch, &base).map_err(fail)?;
                            st.task_branch = Some(adopted.name);
                            st.base_branch = Some(adopted.base);
                            st.base_commit = Some(adopted.base_commit.to_string());
                            st.user_changes = adopted
                                .user_changes
                                .into_iter()
                                .map(|(p, id)| (p, id.map(|i| i.to_string())))
                                .collect();
                        }
                        Ok(())
                    }
                }
            }
            Effect::Commit { message, discard } => {
                let failure = match old_phase {
                    Phase::QualityReview => vec!["failures", "QUALITY_REVIEW", "commit_execution_failed"],
                    _ => vec!["failures", "PRE_COMMIT", "finalize_failed"],
                };
                let fail = |e: String| (failure.clone(), vec![], e);
                let (Some(task), Some(base)) = (st.task_branch.clone(), st.base_commit.clone()) else {
                    return Err((vec!["failures", "PRE_COMMIT", "branch_manager_not_found"], vec![], String::new()));
                };
                let base = gix::ObjectId::from_hex(base.as_bytes()).map_err(|e| fail(e.to_string()))?;
                let user_changes = user_changes_of(st);
                branches::commit::commit_task(root, &task, base, message, discard, &user_changes)
                    .map(|_| ())
                    .map_err(fail)
            }
            Effect::Merge => {
                let (Some(task), Some(base)) = (st.task_branch.clone(), st.base_branch.clone()) else {
                    return Err((vec!["failures", "MERGE", "branch_manager_not_found"], vec![], String::new()));
                };
                let exists = branches::open(root)
                    .ok()
                    .and_then(|r| branches::ref_id(&r, &format!("refs/heads/{task}")).ok().flatten());
                if exists.is_none() {
                    return Err((
                        vec!["failures", "MERGE", "branch_manager_not_found"],
                        vec![],
                        format!("{task} is missing"),
                    ));
                }
                let note = session_note(next);
                match branches::merge::merge_task(root, &task, &base, &note) {
                    Ok(_) => Ok(()),
                    Err(e) => Err((vec!["failures", "MERGE", "merge_failed"], vec![], e.to_string())),
                }
            }
        }
    }

    /// `review_changes`: PRE_COMMIT only; every change from the base commit to the work tree.
    pub fn review_changes(&self, ws: &Workspace) -> SessionResult {
        let stored = self.require_active(ws)?;
        let st = &stored.checkpoint.orchestrator_state;
        let tool_error = |key: &str, vars: &[(&str, &str)]| {
            let m = ws.contract.error(&["tool_errors", "review_changes", key], vars);
            json!({"success": false, "error": m.error, "message": m.message})
        };
        if st.phase() != Phase::PreCommit {
            return Err(tool_error("phase_blocked", &[("phase", st.phase().name())]));
        }
        let Some(task) = st.task_branch.clone() else { return Err(tool_error("task_branch_not_enabled", &[])) };
        let (Some(base), Some(base_commit)) = (st.base_branch.clone(), st.base_commit.clone()) else {
            return Err(tool_error("branch_manager_not_found", &[]));
        };
        let base_commit =
            gix::ObjectId::from_hex(base_commit.as_bytes()).map_err(|_| tool_error("branch_manager_not_found", &[]))?;
        let user_changes = user_changes_of(st);
        let review =
            branches::review::review(ws.repo.root(), base_commit, &base, &task, &ws.config.garbage, &user_changes)
                .map_err(|e| error(ws, "review_failed", &e))?;
        let mut value = serde_json::to_value(review).map_err(|e| error(ws, "internal_error", &e.to_string()))?;
        if let Some(o) = value.as_object_mut() {
            o.insert("success".into(), json!(true));
        }
        Ok(value)
    }
}

impl Sessions {
    /// `cleanup_stale_branches`: merged task branches are deleted; unmerged ones only with
    /// `confirm`, after a call without it has listed them. `merge` first merges the current task
    /// branch into its base. The active session's own branch is never touched.
    pub fn cleanup_stale_branches(&self, ws: &Workspace, action: &str, confirm: bool) -> SessionResult {
        let root = ws.repo.root();
        if !matches!(action, "delete" | "merge") {
            return Err(ws_invalid(ws, "action", "expected \"delete\" or \"merge\""));
        }
        let own = self.active(ws).ok().flatten().and_then(|s| s.checkpoint.orchestrator_state.task_branch);
        let stale: Vec<branches::stale::StaleBranch> = branches::stale::list(root)
            .map_err(|e| error(ws, "git_error", &e))?
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
                .ok_or_else(|| error(ws, "merge_failed", &format!("the base of {} is unknown", cur.branch)))?;
            let note = json!({"merged_stale_branch": cur.branch}).to_string();
            branches::merge::merge_task(root, &cur.branch, &base, &note).map_err(|e| {
                let m = ws.contract.error(&["failures", "MERGE", "merge_failed"], &[]);
                json!({"success": false, "error": m.error, "message": m.message, "details": e.to_string()})
            })?;
            merged.push(cur.branch.clone());
        }
        for b in stale.iter().filter(|b| !merged.contains(&b.branch)) {
            if b.ahead == 0 || confirm {
                to_delete.push(b.branch.clone());
            } else {
                kept.push(json!({"branch": b.branch, "base": b.base, "ahead": b.ahead,
                    "reason": format!("unmerged: {} commit(s) not on its base; call again with confirm: true to delete them", b.ahead)}));
            }
        }
        branches::stale::delete_branches(root, &to_delete).map_err(|e| error(ws, "git_error", &e))?;
        Ok(json!({"success": true, "action": action, "merged": merged, "deleted": to_delete, "kept": kept}))
    }
}

/// The checkpoint's record of the user's own changes, with blob ids parsed.
fn user_changes_of(
    st: &crate::engine::state::SessionState,
) -> std::collections::BTreeMap<String, Option<gix::ObjectId>> {
    st.user_changes
        .iter()
        .map(|(p, id)| (p.clone(), id.as_ref().and_then(|i| gix::ObjectId::from_hex(i.as_bytes()).ok())))
        .collect()
}

/// What the merge note records: the request, the tasks, the outcome and the phase summaries.
fn session_note(cp: &Checkpoint) -> String {
    let st = &cp.orchestrator_state;
    let note = json!({
        "session_id": st.session_id,
        "query": st.query,
        "intent": st.intent,
        "tasks": st.tasks.iter().map(|t| json!({"id": t.id, "description": t.description, "status": t.status,
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

fn check_repo_path(ws: &Workspace, repo_path: Option<&str>) -> Result<(), Value> {
    let Some(p) = repo_path.map(str::trim).filter(|p| !p.is_empty() && *p != ".") else { return Ok(()) };
    match ws.repo.resolve_relative(p) {
        Ok(rel) if rel.is_empty() => Ok(()),
        _ => Err(ws_invalid(ws, "repo_path", &format!("this server serves {}; use \".\"", ws.repo.root().display()))),
    }
}

fn resolve_target(ws: &Workspace, file_path: &str) -> Result<(String, bool), Value> {
    if file_path.trim().is_empty() {
        let m = ws.contract.error(&["tool_errors", "query", "no_file_path"], &[]);
        return Err(json!({"success": false, "error": m.error, "message": m.message}));
    }
    ws.repo.resolve_maybe_new(file_path).map_err(|e| {
        let (key, path) = match &e {
            PathError::OutsideRepo { path } => ("path_outside_repo", path.clone()),
            PathError::NotFound { path } => ("path_not_found", path.clone()),
        };
        let root = ws.repo.root().display().to_string();
        let m = ws.contract.error(&["tool_errors", "query", key], &[("path", &path), ("root", &root)]);
        json!({"success": false, "error": m.error, "message": m.message})
    })
}

/// Reads the files the payload's evidence names, confined to the repository.
fn evidence_facts(ws: &Workspace, data: &Value) -> std::collections::BTreeMap<String, EvidenceFile> {
    let mut out = std::collections::BTreeMap::new();
    for path in submit::evidence_paths(data) {
        let fact = match ws.repo.resolve(&path) {
            Err(PathError::OutsideRepo { .. }) => EvidenceFile::Outside,
            Err(PathError::NotFound { .. }) => EvidenceFile::Missing,
            Ok(abs) if !abs.is_file() => EvidenceFile::Missing,
            Ok(abs) => match std::fs::read(&abs) {
                Ok(bytes) if !crate::walk::looks_binary(&bytes) => {
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
fn add_cited_files(ws: &Workspace, data: &Value, next: &mut Checkpoint) {
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

fn collect_strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| collect_strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect_strings(x, out)),
        _ => {}
    }
}

/// Strings under keys named `file`/`path`, or in arrays under `files`.
fn collect_files(v: &Value, key: Option<&str>, out: &mut Vec<String>) {
    match v {
        Value::String(s) if matches!(key, Some("file" | "path" | "files")) => out.push(submit::normalize_rel(s)),
        Value::Array(a) => a.iter().for_each(|x| collect_files(x, key, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| collect_files(x, Some(k.as_str()), out)),
        _ => {}
    }
}

fn session_message(ws: &Workspace, key: &str, vars: &[(&str, &str)]) -> Value {
    let m = ws.contract.error(&["session_messages", key], vars);
    json!({"success": false, "error": m.error, "message": m.message})
}

fn error(_ws: &Workspace, code: &str, message: &str) -> Value {
    json!({"success": false, "error": code, "message": message})
}

fn ws_invalid(ws: &Workspace, name: &str, why: &str) -> Value {
    let m = ws.contract.error(&["tool_errors", "query", "invalid_argument"], &[("name", name), ("error", why)]);
    let mut o = Map::new();
    o.insert("success".into(), json!(false));
    o.insert("error".into(), json!(m.error));
    o.insert("message".into(), json!(m.message));
    Value::Object(o)
}
