//! The facts the engine is given: evidence files, cited files, the documents of
//! DOCUMENT_RESEARCH; and the checks of paths an agent names.

use std::collections::{BTreeMap, BTreeSet};

use super::lessons;
use super::replies::{SessionResult, contract_error, invalid};
use crate::context::docs::DocumentResearch;
use crate::context::{self, ProjectContext};
use crate::workspace::Workspace;
use code_intel_codebase::repo::PathError;
use code_intel_workflow::contract::catalogue as msg;
use code_intel_workflow::engine::evidence::EvidenceFile;
use code_intel_workflow::engine::payload::{Body, Payload};
use code_intel_workflow::engine::phase::Phase;
use code_intel_workflow::engine::response::PhaseResponse;
use code_intel_workflow::engine::state::SessionState;
use code_intel_workflow::engine::submit::{self, DocumentFacts};

pub(super) fn check_repo_path(ws: &Workspace, repo_path: Option<&str>) -> SessionResult<()> {
    let Some(p) = repo_path.map(str::trim).filter(|p| !p.is_empty() && *p != ".") else { return Ok(()) };
    match ws.repo.resolve_relative(p) {
        Ok(rel) if rel.is_empty() => Ok(()),
        _ => Err(invalid(ws, "repo_path", &format!("this server serves {}; use \".\"", ws.repo.root().display()))),
    }
}

pub(super) fn resolve_target(ws: &Workspace, file_path: &str) -> SessionResult<(String, bool)> {
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
pub(super) fn evidence_facts(
    ws: &Workspace,
    state: &SessionState,
    payload: &Payload,
) -> BTreeMap<String, EvidenceFile> {
    let mut out = BTreeMap::new();
    for path in submit::evidence_paths(state, payload) {
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

/// READY: for each evidence file, the lines of it as it is that differ from the session's base
/// (the task branch's base commit; without a task branch, HEAD): the lines the session wrote
/// (or the user had changed before it). A file the base lacks is all new. Nothing where the base
/// cannot be read: then no item is flagged, and the empty-implementation rule holds as before.
pub(super) fn changed_lines(
    ws: &Workspace,
    state: &SessionState,
    evidence: &BTreeMap<String, EvidenceFile>,
) -> BTreeMap<String, BTreeSet<usize>> {
    let mut out = BTreeMap::new();
    if state.phase() != Phase::Ready || evidence.is_empty() {
        return out;
    }
    let Ok(repo) = gix::open(ws.repo.root()) else { return out };
    let base = match state.base_commit.as_deref() {
        Some(hex) => gix::ObjectId::from_hex(hex.as_bytes()).ok(),
        None => repo.head_id().ok().map(gix::Id::detach),
    };
    let Some(tree) = base.and_then(|id| code_intel_gitstate::refs::tree_of(&repo, id).ok()) else { return out };
    let Ok(tree) = repo.find_tree(tree) else { return out };
    for (path, fact) in evidence {
        let EvidenceFile::Lines(now) = fact else { continue };
        let before = match tree.lookup_entry_by_path(path) {
            Ok(Some(entry)) => match entry.object() {
                Ok(object) => String::from_utf8_lossy(&object.data).into_owned(),
                Err(_) => continue,
            },
            Ok(None) => String::new(),
            Err(_) => continue,
        };
        let before: Vec<&str> = before.lines().collect();
        let now: Vec<&str> = now.iter().map(String::as_str).collect();
        let mut written = BTreeSet::new();
        for op in similar::capture_diff_slices(similar::Algorithm::Myers, &before, &now) {
            if let similar::DiffOp::Insert { new_index, new_len, .. }
            | similar::DiffOp::Replace { new_index, new_len, .. } = op
            {
                written.extend(new_index + 1..=new_index + new_len);
            }
        }
        out.insert(path.clone(), written);
    }
    out
}

/// The documents to read, when `response` is DOCUMENT_RESEARCH's.
pub(super) fn documents_for(ws: &Workspace, response: &PhaseResponse, query: &str) -> Option<DocumentResearch> {
    (response.phase == Phase::DocumentResearch.name()).then(|| {
        let mut documents = research(ws, query);
        if documents.must_read.is_empty() {
            documents.note = Some(ws.contract.message(&msg::DOC_RESEARCH_NONE_REQUIRED, &[]));
        }
        documents
    })
}

/// The cosine under which a named symbol reads as far from the request (all-MiniLM-L6-v2:
/// names the request is about score 0.29 and more against it, sibling functions about 0.21,
/// wrong ones 0.13 or less; the measurements are in docs/PROTOCOL.md).
pub(super) const SYMBOL_RELEVANCE_FLOOR: f32 = 0.18;

/// A symbol's name as words: `Auth.refreshToken` and `refresh_token` read as "auth refresh
/// token" and "refresh token".
fn symbol_words(symbol: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in symbol.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && prev_lower {
                out.push(' ');
            }
            out.extend(c.to_lowercase());
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
        } else {
            if !out.ends_with(' ') && !out.is_empty() {
                out.push(' ');
            }
            prev_lower = false;
        }
    }
    out.trim().to_owned()
}

/// Vectors for `texts`: the first embedded as a query, the others as what a query finds (a
/// model with prefixes gives each its own).
fn query_then_documents(ws: &Workspace, texts: &[String]) -> Option<Vec<Vec<f32>>> {
    let (query, rest) = texts.split_first()?;
    let mut vectors = vec![ws.semantic.embed_one(query).ok()?];
    vectors.extend(ws.semantic.embed_texts(rest).ok()?);
    Some(vectors)
}

/// QUERY_FRAME's target_symbols that read far from the request, by the embedding model; none
/// without a model.
pub(super) fn far_symbols(ws: &Workspace, payload: &Payload, query: &str) -> Vec<String> {
    let Body::QueryFrame(p) = &payload.body else { return Vec::new() };
    let symbols: Vec<&String> =
        p.target_symbols.iter().flatten().filter(|s| !symbol_words(s).is_empty()).take(20).collect();
    if symbols.is_empty() || !ws.semantic.available() {
        return Vec::new();
    }
    let mut texts = vec![query.to_owned()];
    texts.extend(symbols.iter().map(|s| symbol_words(s)));
    let Some(vectors) = query_then_documents(ws, &texts) else { return Vec::new() };
    symbols
        .iter()
        .zip(vectors.iter().skip(1))
        .filter(|(_, v)| code_intel_semantic::embed::cosine(&vectors[0], v) < SYMBOL_RELEVANCE_FLOOR)
        .map(|(s, _)| (*s).clone())
        .collect()
}

/// In EXPLORATION: the recorded failures whose request is close to this one, if any.
pub(super) fn past_failures_for(
    ws: &Workspace,
    response: &PhaseResponse,
    query: &str,
) -> Option<lessons::PastFailures> {
    if response.phase != Phase::Exploration.name() {
        return None;
    }
    let repo = gix::open(ws.repo.root()).ok()?;
    let outcomes = lessons::close_to(&repo, query);
    (!outcomes.is_empty())
        .then(|| lessons::PastFailures { note: ws.contract.message(&msg::PAST_FAILURES, &[]), outcomes })
}

/// DOCUMENT_RESEARCH's ranking: BM25, plus the embedding model when one is installed.
fn research(ws: &Workspace, query: &str) -> DocumentResearch {
    let embed = |texts: &[String]| query_then_documents(ws, texts);
    let embed: Option<context::docs::Embed> = ws.semantic.available().then_some(&embed);
    context::docs::research(&ws.repo, &ws.config, &ProjectContext::load(ws.repo.root()), query, embed)
}

/// DOCUMENT_RESEARCH's facts: which reviewed documents do not exist, and what must_read named.
pub(super) fn document_facts(ws: &Workspace, payload: &Payload, query: &str) -> Option<DocumentFacts> {
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
