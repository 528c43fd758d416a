//! The integration tests, as one binary: each module drives the real `git-code-intel` binary
//! (over MCP stdio, or as the CLI and the git hooks) or the library, against real git
//! repositories in temporary directories. Shared helpers are in [`common`].

mod agent_reads;
mod cli_parity;
mod common;
mod context;
mod contract_lint;
mod contract_messages;
mod crash;
mod embeddings;
mod hardening;
mod hostile_remote;
mod import_fuzz;
mod index_overlay;
mod init;
mod languages;
mod manual;
mod mcp_branches;
mod mcp_e2e;
mod mcp_workflow;
mod payload_schema;
mod precommit;
mod report;
mod retrieval_quality;
mod sandbox;
mod schema_agent;
mod semantic;
mod team;
mod tool_fuzz;
mod transcript;
mod witness;
mod worktrees;
