//! What the session tools answer, and how they fail: the typed replies the MCP server and the
//! CLI serialize.

use schemars::JsonSchema;
use serde::Serialize;

use crate::Error;
use crate::branches;
use crate::context::ProjectRules;
use crate::context::docs::DocumentResearch;
use crate::workspace::Workspace;
use code_intel_workflow::contract::catalogue::{self as msg, Msg};
use code_intel_workflow::engine::response::{PhaseResponse, Refusal, SessionStatus};

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
    /// In EXPLORATION: earlier sessions with a close request that failed, quoted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub past_failures: Option<super::lessons::PastFailures>,
    /// The default text of the procedure files the instruction names and the repository lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub procedures: Option<super::procedures::DefaultProcedures>,
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
    /// In EXPLORATION: earlier sessions with a close request that failed, quoted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub past_failures: Option<super::lessons::PastFailures>,
    /// The default text of the procedure files the instruction names and the repository lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub procedures: Option<super::procedures::DefaultProcedures>,
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

pub(super) fn contract_error(ws: &Workspace, key: &Msg, vars: &[(&str, &str)]) -> SessionError {
    let m = ws.contract.error(key, vars);
    plain(&m.error, &m.message)
}

pub(super) fn plain(code: &str, message: &str) -> SessionError {
    SessionError::Plain(Box::new(ErrorBody {
        error: code.to_owned(),
        message: message.to_owned(),
        ..ErrorBody::default()
    }))
}

pub(super) fn invalid(ws: &Workspace, name: &str, why: &str) -> SessionError {
    contract_error(ws, &msg::INVALID_ARGUMENT, &[("name", name), ("error", why)])
}

/// A store error as the agent reads it.
pub(super) fn store_error(ws: &Workspace, e: Error) -> SessionError {
    match e {
        Error::Conflict => contract_error(ws, &msg::CHECKPOINT_CONFLICT, &[]),
        Error::Locked(path) => contract_error(ws, &msg::LOCK_IN_THE_WAY, &[("path", &path)]),
        e => contract_error(ws, &msg::GIT_FAILED, &[("error", &e.to_string())]),
    }
}
