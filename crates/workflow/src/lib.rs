//! The workflow, as pure functions: the phase contract ([`contract`]: every message an agent
//! reads, and its lint) and the engine ([`engine`]: phases, flow, state, payload validation,
//! evidence, task orchestration, `submit`).
//!
//! This crate does no I/O and knows neither git, MCP nor JSON-RPC: the caller reads the
//! session, gathers the [`engine::submit::Facts`] (which tools were called, what the cited files say),
//! gives the clock and fresh ids, and carries out the [`engine::submit::Effect`]s it gets back. It must
//! not depend on any other crate of this workspace.

// What this crate exports is its contract with the layers above: nothing public by accident.
#![warn(unreachable_pub)]

pub mod contract;
pub mod engine;
