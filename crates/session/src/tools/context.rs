//! `update_context`: the agent's new DO/DON'T summary of the project's rules, recorded in
//! `.code-intel/context.yml` with the blake3 of each source it was made from.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ToolError, ToolResult};
use crate::context::{self, ContextUpdate, ProjectRules};
use crate::workspace::Workspace;
use code_intel_workflow::contract::catalogue as msg;

/// What `init` writes when the file does not exist yet.
const TEMPLATE: &str = include_str!("../../../../templates/init/context.yml");

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct UpdateContextParams {
    /// The project's rules for changing code, as a short list: `DO:` lines, then `DON'T:`
    /// lines (at most 4000 characters).
    #[arg(long, required = true)]
    pub summary: Option<String>,
    /// The files the summary was made from, relative to the repository root (default: the
    /// sources project_rules names, else those of CLAUDE.md, .claude/CLAUDE.md and AGENTS.md
    /// that exist).
    #[arg(long = "source")]
    pub sources: Option<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UpdateContextOutput {
    #[serde(flatten)]
    pub update: ContextUpdate,
    /// The rules as the next session will see them.
    pub project_rules: ProjectRules,
}

pub fn update_context(ws: &Workspace, params: UpdateContextParams) -> ToolResult<UpdateContextOutput> {
    let summary = params.summary.unwrap_or_default();
    let root = ws.repo.root();
    let update = context::update_context(root, &summary, params.sources, TEMPLATE).map_err(|e| -> ToolError {
        match e {
            crate::Error::Argument(name, why) => ws.invalid_argument(name, &why),
            // A file that cannot be read, parsed or written, with what to do.
            other => ws.tool_error(&msg::CONTEXT_UPDATE_FAILED, &[("error", &other.to_string())]).into(),
        }
    })?;
    Ok(UpdateContextOutput { update, project_rules: context::project_rules(root, &ws.contract) })
}
