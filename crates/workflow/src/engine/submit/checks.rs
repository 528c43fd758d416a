//! The phase-specific checks of a payload: the tools it claims against those served, the query
//! frame, the documents read, the files reviewed and discarded.

use std::collections::BTreeSet;

use super::{MIN_REASON_CHARS, Step, document_path, normalize_rel, normalize_text};
use crate::contract::catalogue::{self as msg, Msg};
use crate::engine::payload::{self, Body};
use crate::engine::phase::Phase;
use crate::engine::response::Refused;
use crate::engine::{registry, schema};

impl Step<'_> {
    /// `tools_used` against what the server really served in this phase.
    pub(super) fn check_tools(&self, key: &str) -> Result<(), Refused> {
        let called = &self.session.orchestrator_state.tools_called;
        let reported: BTreeSet<&str> = self.payload.tools_used.iter().flatten().map(String::as_str).collect();
        let never_called: Vec<&str> =
            reported.iter().copied().filter(|t| registry::is_served(t) && !called.contains(*t)).collect();
        if !never_called.is_empty() {
            return Err(self.refuse(msg::TOOLS_NOT_CALLED, &[("tools", &never_called.join(", "))]));
        }
        let required = schema::required_tools_now(key, &self.session.orchestrator_state);
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

    /// Slots with quotes: every quote must be in the user's query (whitespace and case aside).
    /// Returns the hints for the slots left empty.
    pub(super) fn check_query_frame(&self, p: &payload::QueryFramePayload) -> Result<Vec<String>, Refused> {
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

    /// Whether an empty `documents_reviewed` is an answer: the server named nothing to read,
    /// or every document it named is skipped with a reason.
    pub(super) fn nothing_left_to_read(&self, p: &payload::DocumentResearchPayload) -> bool {
        let Some(docs) = &self.facts.documents else { return false };
        let skipped = skipped_with_reason(p);
        docs.must_read.iter().all(|d| skipped.contains(d))
    }

    /// `documents_reviewed` names real files, and covers `must_read` (a document skipped with
    /// a reason of at least 10 characters counts as covered).
    pub(super) fn check_documents(&self, p: &payload::DocumentResearchPayload) -> Result<(), Refused> {
        let Some(docs) = &self.facts.documents else { return Ok(()) };
        if !docs.missing.is_empty() {
            return Err(self.refuse(msg::DOCUMENTS_NOT_FOUND, &[("files", &docs.missing.join(", "))]));
        }
        let reviewed: BTreeSet<String> = p.documents_reviewed.iter().flatten().map(|d| document_path(d)).collect();
        let skipped = skipped_with_reason(p);
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
    pub(super) fn check_every_file_reviewed(&self, p: &payload::PreCommitPayload) -> Result<(), Refused> {
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

    /// Files the review sends back to READY to fix, with what to change; each needs a reason.
    pub(super) fn fixed_files(&self, p: &payload::PreCommitPayload) -> Result<Vec<(String, String)>, Refused> {
        let mut fixes = Vec::new();
        let mut unexplained = Vec::new();
        for entry in p.reviewed_files.iter().flatten() {
            let payload::ReviewedFile::Decision(f) = entry else { continue };
            if f.decision.as_deref().map(str::trim) != Some("fix") {
                continue;
            }
            let file = normalize_rel(f.file.as_deref().unwrap_or(""));
            match f.reason.as_deref().map(str::trim) {
                Some(reason) if !reason.is_empty() => fixes.push((file, reason.to_owned())),
                _ => unexplained.push(file),
            }
        }
        if unexplained.is_empty() {
            Ok(fixes)
        } else {
            Err(self.refuse(msg::FIX_REASON_REQUIRED, &[("files", &unexplained.join(", "))]))
        }
    }

    /// Files the review decided to discard; each needs a reason.
    pub(super) fn discarded_files(&self, p: &payload::PreCommitPayload) -> Result<Vec<String>, Refused> {
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

/// Whether a decoded body belongs to `phase` (the adapter decodes with the phase it read).
pub(super) fn body_fits(phase: Phase, body: &Body) -> bool {
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

fn slot_hint(slot: &str) -> Msg {
    match slot {
        "target_feature" => msg::TARGET_FEATURE_MISSING,
        "trigger_condition" => msg::TRIGGER_CONDITION_MISSING,
        "observed_issue" => msg::OBSERVED_ISSUE_MISSING,
        _ => msg::DESIRED_ACTION_MISSING,
    }
}

/// The documents `skipped_documents` names with a reason of at least [`MIN_REASON_CHARS`].
fn skipped_with_reason(p: &payload::DocumentResearchPayload) -> BTreeSet<String> {
    p.skipped_documents
        .iter()
        .flatten()
        .filter(|s| s.reason.as_deref().is_some_and(|r| r.trim().chars().count() >= MIN_REASON_CHARS))
        .filter_map(|s| s.file.as_deref().map(document_path))
        .collect()
}
