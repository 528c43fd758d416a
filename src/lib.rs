//! git-code-intel: code intelligence for coding agents. See `docs/ARCHITECTURE.md` for the map.

pub mod branches;
pub mod cli;
pub mod config;
pub mod context;
pub mod contract;
pub mod derived;
pub mod engine;
pub mod garbage;
pub mod gitlog;
pub mod gitstore;
pub mod hooks;
pub mod index;
pub mod init;
pub mod journal;
pub mod lang;
pub mod manual;
pub mod mcp;
pub mod repo;
pub mod semantic;
pub mod session;
pub mod shell_guard;
pub mod syntax;
pub mod tools;
pub mod walk;
pub mod watch;
pub mod workspace;
