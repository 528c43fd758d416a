//! READY's tasks: the plan (step 12) and each task's completion with `file:line` evidence
//! (step 13). The server keeps its own failure counts and completion records: a plan cannot
//! reset the one or forge the other.

use std::collections::{BTreeMap, BTreeSet};

use super::{Facts, MIN_REASON_CHARS};
use crate::contract::Contract;
use crate::contract::catalogue::{self as msg, Msg};
use crate::engine::evidence::{self, EvidenceFile};
use crate::engine::payload::{ReadyImplPayload, ReadyPlanPayload};
use crate::engine::response::{self, Refused};
use crate::engine::state::{ChecklistItem, Checkpoint, ItemStatus, SessionState, Task, TaskStatus};

/// Step 12: the complete task list, accepted idempotently.
pub(super) fn plan(contract: &Contract, session: &Checkpoint, p: &ReadyPlanPayload) -> Result<Vec<Task>, Refused> {
    let fail = |key: Msg, vars: &[(&str, &str)]| response::refusal(contract, session, key, vars);
    let list = p.tasks.as_deref().unwrap_or_default();
    if list.is_empty() {
        return Err(fail(msg::EMPTY_TASKS, &[]));
    }
    let known: BTreeMap<&str, &Task> = session.orchestrator_state.tasks.iter().map(|t| (t.id.as_str(), t)).collect();
    let mut seen = BTreeSet::new();
    let mut tasks = Vec::new();
    for raw in list {
        let id = raw.id.as_ref().map(|t| t.trimmed()).unwrap_or("").to_owned();
        let description = raw.description.as_ref().map(|t| t.trimmed()).unwrap_or("").to_owned();
        if id.is_empty() || description.is_empty() {
            return Err(fail(msg::TASK_FIELDS_REQUIRED, &[]));
        }
        if !seen.insert(id.clone()) {
            return Err(fail(msg::DUPLICATE_TASK_IDS, &[]));
        }
        let completed = raw.status.as_deref().map(str::trim) == Some("completed");
        let previous = known.get(id.as_str());
        if completed && previous.is_none_or(|t| t.status != TaskStatus::Completed) {
            return Err(fail(msg::COMPLETED_UNKNOWN_TASK, &[("task_id", &id)]));
        }
        let checklist: Vec<ChecklistItem> = match previous.filter(|_| completed) {
            Some(t) => t.checklist.clone(),
            None => {
                let items: Vec<&str> = raw.checklist.iter().flatten().map(|c| c.text()).collect();
                if items.iter().any(|i| i.is_empty()) {
                    return Err(fail(msg::CHECKLIST_REQUIRED, &[("task_id", &id)]));
                }
                items
                    .into_iter()
                    .map(|item| ChecklistItem {
                        item: item.to_owned(),
                        status: ItemStatus::Pending,
                        evidence: None,
                        reason: None,
                        evidence_hash: None,
                        already_right: None,
                        unchanged: false,
                    })
                    .collect()
            }
        };
        if !completed && checklist.is_empty() {
            return Err(fail(msg::CHECKLIST_REQUIRED, &[("task_id", &id)]));
        }
        // A reopened task resent as it was stays reopened (its code is written); with another
        // description or checklist it is new work, which needs its writes checked.
        let reopened = !completed
            && previous.is_some_and(|t| {
                t.reopened
                    && t.description == description
                    && t.checklist.iter().map(|c| &c.item).eq(checklist.iter().map(|c| &c.item))
            });
        tasks.push(Task {
            id: id.clone(),
            description,
            status: if completed { TaskStatus::Completed } else { TaskStatus::Pending },
            checklist,
            failure_count: previous.map_or(0, |t| t.failure_count),
            revert_reason: previous.map(|t| t.revert_reason.clone()).unwrap_or_default(),
            reopened,
        });
    }
    if !tasks.iter().any(|t| t.status == TaskStatus::Pending) {
        return Err(fail(msg::NO_PENDING_TASKS, &[]));
    }
    Ok(tasks)
}

/// Step 13: one task reported done, in registration order, with its whole checklist. Marks it
/// completed in `next`.
pub(super) fn complete(
    contract: &Contract,
    session: &Checkpoint,
    next: &mut SessionState,
    p: &ReadyImplPayload,
    facts: &Facts,
) -> Result<(), Refused> {
    let fail = |key: Msg, vars: &[(&str, &str)]| response::refusal(contract, session, key, vars);
    let state = &session.orchestrator_state;
    let task_id = p.task_id.as_ref().map(|t| t.trimmed()).unwrap_or("");
    if state.tasks.is_empty() {
        return Err(fail(msg::NO_TASKS, &[]));
    }
    let Some(index) = state.tasks.iter().position(|t| t.id == task_id) else {
        return Err(fail(msg::UNKNOWN_TASK, &[("task_id", task_id)]));
    };
    if state.tasks[index].status == TaskStatus::Completed {
        return Err(fail(msg::ALREADY_COMPLETED, &[("task_id", task_id)]));
    }
    if let Some(expected) = state.pending_tasks().next()
        && expected.id != task_id
    {
        return Err(fail(msg::WRONG_ORDER, &[("expected_task", &expected.id), ("task_id", task_id)]));
    }
    let reported = p.checklist.as_deref().unwrap_or_default();
    let registered = &state.tasks[index].checklist;
    let reported_items: BTreeSet<&str> = reported.iter().filter_map(|c| c.item.as_deref()).map(str::trim).collect();
    let registered_items: BTreeSet<&str> = registered.iter().map(|c| c.item.as_str()).collect();
    if reported_items != registered_items || reported.len() != registered.len() {
        return Err(fail(msg::CHECKLIST_ITEMS_MISMATCH, &[]));
    }
    let mut checked = Vec::new();
    for item in reported {
        let name = item.item.as_deref().unwrap_or("").trim().to_owned();
        match item.status.as_deref().map(str::trim) {
            Some("done") => {
                let Some(evidence) = item.evidence.as_deref().filter(|e| !e.trim().is_empty()) else {
                    return Err(fail(msg::CHECKLIST_EVIDENCE_REQUIRED, &[("item", &name)]));
                };
                let lines = check_evidence(&fail, evidence, facts)?;
                let already_right = item.already_right.as_deref().map(str::trim).filter(|r| !r.is_empty());
                if already_right.is_some_and(|r| r.chars().count() < MIN_REASON_CHARS) {
                    return Err(fail(msg::CHECKLIST_REASON_REQUIRED, &[("item", &name)]));
                }
                checked.push(ChecklistItem {
                    item: name,
                    status: ItemStatus::Done,
                    evidence: Some(evidence.trim().to_owned()),
                    reason: None,
                    evidence_hash: Some(lines_hash(lines)),
                    already_right: already_right.map(str::to_owned),
                    unchanged: false,
                });
            }
            Some("skipped") => {
                let reason = item.reason.as_deref().unwrap_or("");
                if reason.trim().is_empty() || reason.chars().count() < MIN_REASON_CHARS {
                    return Err(fail(msg::CHECKLIST_REASON_REQUIRED, &[("item", &name)]));
                }
                checked.push(ChecklistItem {
                    item: name,
                    status: ItemStatus::Skipped,
                    evidence: None,
                    reason: Some(reason.trim().to_owned()),
                    evidence_hash: None,
                    already_right: None,
                    unchanged: false,
                });
            }
            _ => return Err(fail(msg::CHECKLIST_ITEM_PENDING, &[("item", &name)])),
        }
    }
    let task = &mut next.tasks[index];
    task.checklist = checked;
    task.status = TaskStatus::Completed;
    task.reopened = false;
    Ok(())
}

/// Builds the refusal for a READY failure and its placeholders.
type Fail<'a> = dyn Fn(Msg, &[(&str, &str)]) -> Refused + 'a;

/// The evidence's lines, checked: a `file:line` or `file:start-end` inside the repository, in
/// range, and not an empty implementation.
fn check_evidence<'f>(fail: &Fail, evidence: &str, facts: &'f Facts) -> Result<&'f [String], Refused> {
    let Some(r) = evidence::parse_any_order(evidence) else {
        return Err(fail(msg::CHECKLIST_EVIDENCE_FORMAT_INVALID, &[("evidence", evidence)]));
    };
    if r.start > r.end {
        return Err(fail(msg::CHECKLIST_EVIDENCE_RANGE_REVERSED, &[("evidence", evidence)]));
    }
    match facts.evidence.get(&r.path) {
        Some(EvidenceFile::Outside) => Err(fail(msg::CHECKLIST_EVIDENCE_OUTSIDE_REPO, &[("file_path", &r.path)])),
        None | Some(EvidenceFile::Missing) => {
            Err(fail(msg::CHECKLIST_EVIDENCE_FILE_NOT_FOUND, &[("file_path", &r.path)]))
        }
        Some(EvidenceFile::Lines(lines)) => {
            let total = lines.len();
            if r.end > total {
                let (line, total) = (r.end.to_string(), total.to_string());
                return Err(fail(msg::CHECKLIST_EVIDENCE_LINE_OUT_OF_RANGE, &[("line", &line), ("total", &total)]));
            }
            let cited = &lines[r.start - 1..r.end];
            // Lines with no code beyond a signature, comments or a docstring are real work when
            // the session wrote them (a doc comment, a changed signature) and stub nothing;
            // cited unchanged, they prove nothing.
            let written = facts.changed_lines.get(&r.path).is_some_and(|c| c.range(r.start..=r.end).next().is_some());
            let documented = written && !evidence::has_stub_marker(cited);
            if !documented && evidence::is_empty_implementation(&r.path, cited) {
                return Err(fail(msg::CHECKLIST_EVIDENCE_EMPTY_IMPL, &[("evidence", evidence)]));
            }
            Ok(cited)
        }
    }
}

/// What evidence lines are remembered as: their blake3, line by line.
fn lines_hash(lines: &[String]) -> String {
    let mut hasher = blake3::Hasher::new();
    for line in lines {
        hasher.update(line.trim_end().as_bytes());
        hasher.update(b"\n");
    }
    hasher.finalize().to_hex().to_string()
}

/// READY's completion: every completed task's accepted evidence, re-checked against the files
/// as they are now. A task whose evidence a later task moved, rewrote or removed is pending
/// again (its checklist to report anew); returns `(task, evidence, why)` for each.
pub(super) fn reopen_stale(
    contract: &Contract,
    session: &Checkpoint,
    next: &mut SessionState,
    facts: &Facts,
) -> Vec<(String, String, String)> {
    let fail = |key: Msg, vars: &[(&str, &str)]| response::refusal(contract, session, key, vars);
    let mut reopened = Vec::new();
    for task in next.tasks.iter_mut().filter(|t| t.status == TaskStatus::Completed) {
        let stale = task.checklist.iter().find_map(|item| {
            let (evidence, hash) = (item.evidence.as_deref()?, item.evidence_hash.as_deref()?);
            match check_evidence(&fail, evidence, facts) {
                Ok(lines) if lines_hash(lines) == hash => None,
                Ok(_) => Some((evidence.to_owned(), contract.message(&msg::EVIDENCE_LINES_CHANGED, &[]))),
                Err(refusal) => Some((evidence.to_owned(), refusal.message.clone())),
            }
        });
        if let Some((evidence, why)) = stale {
            task.status = TaskStatus::Pending;
            task.reopened = true;
            for item in &mut task.checklist {
                *item = ChecklistItem {
                    item: std::mem::take(&mut item.item),
                    status: ItemStatus::Pending,
                    evidence: None,
                    reason: None,
                    evidence_hash: None,
                    already_right: None,
                    unchanged: false,
                };
            }
            reopened.push((task.id.clone(), evidence, why));
        }
    }
    reopened
}

/// READY's completion: marks each done item whose cited lines the session did not change
/// (where that was compared) and that does not say the code was already right; returns
/// `task: evidence` for each.
pub(super) fn flag_unchanged(next: &mut SessionState, facts: &Facts) -> Vec<String> {
    let mut flagged = Vec::new();
    for task in next.tasks.iter_mut().filter(|t| t.status == TaskStatus::Completed) {
        for item in task.checklist.iter_mut().filter(|i| i.status == ItemStatus::Done) {
            let Some(r) = item.evidence.as_deref().and_then(evidence::parse_any_order) else { continue };
            let Some(changed) = facts.changed_lines.get(&r.path) else { continue };
            item.unchanged = item.already_right.is_none() && changed.range(r.start..=r.end).next().is_none();
            if item.unchanged {
                flagged.push(format!("{}: {}", task.id, item.evidence.as_deref().unwrap_or_default()));
            }
        }
    }
    flagged
}
