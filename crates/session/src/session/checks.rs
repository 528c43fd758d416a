//! `run_check`: the server runs one of the project's verify commands itself, in the work tree
//! under the phase's kernel sandbox (through the sandbox runner, with a time limit), reads the
//! counts and failing tests from its output, and records the run in the active session. What
//! the verification phase then accepts is decided against these runs, not the agent's word.
//!
//! Only a verify command (declared or derived: [`code_intel_codebase::verify`]) runs this way,
//! exactly as listed, with at most one selector (a test file or test name) the server checks
//! and quotes; never other text from the agent.

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use code_intel_codebase::test_summary;
use code_intel_workflow::contract::catalogue as msg;
use code_intel_workflow::engine::state::{MAX_WITNESSED_RUNS, WitnessedRun};
use schemars::JsonSchema;
use serde::Serialize;

use super::replies::{contract_error, store_error};
use super::{SessionResult, Sessions};
use crate::workspace::Workspace;

/// How long one witnessed run may take.
const TIME_LIMIT: Duration = Duration::from_secs(600);

/// The most output kept from a run (its end: the summary lines are there).
const KEPT_OUTPUT: usize = 256 * 1024;

/// The end of the output shown in the answer and kept in the session.
const TAIL_CHARS: usize = 3000;

/// How the sandbox runner is run: its program, and the arguments before `--repo` (empty for
/// `git-code-intel-sandbox`, `sandbox` after it for `git-code-intel` itself).
#[derive(Debug, Clone)]
pub struct Runner {
    pub program: PathBuf,
    /// Whether the program is `git-code-intel` (then `sandbox` comes after `--repo ROOT`).
    pub subcommand: bool,
}

/// run_check's answer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckReply {
    pub success: bool,
    /// Kept in the active session (false: no session is active, the run is only shown).
    pub recorded: bool,
    /// The run's number in the session.
    pub run: u32,
    /// The command line run.
    pub command: String,
    pub exit_code: i32,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The runner whose summary was read (`pytest`, `cargo test`, …), when one was.
    pub runner: Option<String>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub skipped: Option<u64>,
    pub failing: Vec<String>,
    /// The end of the output (stdout and stderr together).
    pub tail: String,
}

/// The verify commands `run_check` can run now while a session is active: none where no kernel
/// sandbox confines them (it then refuses to run anything).
pub(super) fn runnable(ws: &Workspace) -> Vec<String> {
    match code_intel_sandbox::support() {
        code_intel_sandbox::Support::Advisory { .. } => Vec::new(),
        _ => ws.verify_commands().commands,
    }
}

impl Sessions {
    pub fn run_check(
        &self,
        ws: &Workspace,
        command: &str,
        selector: Option<&str>,
        runner: &Runner,
    ) -> SessionResult<CheckReply> {
        let verify = ws.verify_commands();
        if verify.commands.is_empty() {
            return Err(contract_error(ws, &msg::RUN_CHECK_NO_VERIFY_COMMANDS, &[]));
        }
        let wanted = command.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some(verify_command) = verify.commands.iter().find(|c| **c == wanted).cloned() else {
            let listed: Vec<String> = verify.commands.iter().map(|c| format!("`{c}`")).collect();
            return Err(contract_error(
                ws,
                &msg::RUN_CHECK_NOT_A_VERIFY_COMMAND,
                &[("command", command), ("commands", &listed.join(", "))],
            ));
        };
        let line = match selector.map(str::trim).filter(|s| !s.is_empty()) {
            Some(s) if valid_selector(s) => format!("{verify_command} '{s}'"),
            Some(s) => return Err(contract_error(ws, &msg::RUN_CHECK_BAD_SELECTOR, &[("selector", s)])),
            None => verify_command.clone(),
        };
        // Where the session stood when the run began: its code is the code run.
        let before = self.active(ws)?.filter(|s| !s.checkpoint.orchestrator_state.is_complete());
        let at = before.as_ref().map(|s| {
            let st = &s.checkpoint.orchestrator_state;
            (st.phase().name().to_owned(), st.ready_visits)
        });
        // While a session is active the runner confines the command or runs nothing: where the
        // kernel cannot confine, there is no run to witness (and a refusal is no failing run).
        if before.is_some()
            && let code_intel_sandbox::Support::Advisory { why } = code_intel_sandbox::support()
        {
            let why = format!(
                "no kernel sandbox on this machine ({why}), and a session is active: run it in your shell; a verdict is then your word, and the report says so"
            );
            return Err(contract_error(ws, &msg::RUN_CHECK_CANNOT_RUN, &[("command", &line), ("why", &why)]));
        }
        let started = Instant::now();
        let (exit_code, output) = run(ws, runner, &line)
            .map_err(|why| contract_error(ws, &msg::RUN_CHECK_CANNOT_RUN, &[("command", &line), ("why", &why)]))?;
        let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let text = String::from_utf8_lossy(&output);
        let summary = test_summary::read(&text);
        let mut run = WitnessedRun {
            id: 0,
            verify_command,
            command: line,
            phase: at.as_ref().map_or_else(String::new, |(p, _)| p.clone()),
            after_ready_visits: at.as_ref().map_or(0, |(_, v)| *v),
            exit_code,
            timed_out: exit_code == code_intel_sandbox::TIMED_OUT,
            duration_ms,
            runner: summary.runner,
            passed: summary.passed,
            failed: summary.failed,
            skipped: summary.skipped,
            failing: summary.failing,
            tail: tail(&text),
        };
        let recorded = match before {
            Some(_) => self.record_run(ws, &mut run)?,
            None => false,
        };
        Ok(CheckReply {
            success: true,
            recorded,
            run: run.id,
            command: run.command,
            exit_code: run.exit_code,
            timed_out: run.timed_out,
            duration_ms: run.duration_ms,
            runner: run.runner,
            passed: run.passed,
            failed: run.failed,
            skipped: run.skipped,
            failing: run.failing,
            tail: run.tail,
        })
    }

    /// Adds `run` (numbered here) to the active session. False: the session ended meanwhile.
    fn record_run(&self, ws: &Workspace, run: &mut WitnessedRun) -> SessionResult<bool> {
        let _lock = self.lock(ws)?;
        let Some(stored) = self.active(ws)?.filter(|s| !s.checkpoint.orchestrator_state.is_complete()) else {
            return Ok(false);
        };
        let mut checkpoint = stored.checkpoint.clone();
        let runs = &mut checkpoint.orchestrator_state.witnessed_runs;
        run.id = runs.last().map_or(1, |r| r.id + 1);
        runs.push(run.clone());
        if runs.len() > MAX_WITNESSED_RUNS {
            let extra = runs.len() - MAX_WITNESSED_RUNS;
            runs.drain(..extra);
        }
        let store = self.store()?;
        store.save(stored.commit, &checkpoint, "witnessed run").map_err(|e| store_error(ws, e))?;
        Ok(true)
    }
}

/// A selector is one test file or test name: `tests/test_calc.py::test_div`,
/// `tests.test_calc`, `calc::divides`, `src/url.test.ts`, `-run`-free. Never an option, never
/// shell text.
fn valid_selector(s: &str) -> bool {
    s.len() <= 200 && !s.starts_with('-') && s.chars().all(|c| c.is_ascii_alphanumeric() || "_./:-[],=".contains(c))
}

/// Runs `line` through the sandbox runner in the work tree; its exit code and the end of its
/// output (stdout and stderr in the order written).
fn run(ws: &Workspace, runner: &Runner, line: &str) -> Result<(i32, Vec<u8>), String> {
    let (mut reader, writer) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
    let mut cmd = std::process::Command::new(&runner.program);
    cmd.arg("--repo").arg(ws.repo.root());
    if runner.subcommand {
        cmd.arg("sandbox");
    }
    cmd.arg("--timeout")
        .arg(TIME_LIMIT.as_secs().to_string())
        .arg("--")
        .arg(line)
        .current_dir(ws.repo.root())
        .stdin(std::process::Stdio::null())
        .stdout(writer.try_clone().map_err(|e| format!("cannot share the pipe: {e}"))?)
        .stderr(writer);
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", runner.program.display()))?;
    // The command's own copies of the pipe go with `cmd`; the read ends when the last writer
    // (the command and whatever it started) is gone.
    drop(cmd);
    let mut kept: Vec<u8> = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => {
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > KEPT_OUTPUT * 2 {
                    kept.drain(..kept.len() - KEPT_OUTPUT);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read its output: {e}")),
        }
    }
    let status = child.wait().map_err(|e| format!("cannot wait for it: {e}"))?;
    if kept.len() > KEPT_OUTPUT {
        kept.drain(..kept.len() - KEPT_OUTPUT);
    }
    Ok((status.code().unwrap_or(-1), kept))
}

/// The last [`TAIL_CHARS`] characters of `text`, from a line start where there is one.
fn tail(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= TAIL_CHARS {
        return text.to_owned();
    }
    let end: String = chars[chars.len() - TAIL_CHARS..].iter().collect();
    match end.find('\n') {
        Some(i) => format!("…\n{}", &end[i + 1..]),
        None => format!("…{end}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_a_test_name_or_path_never_an_option_or_shell_text() {
        for ok in ["tests/test_calc.py::test_div", "tests.test_calc", "calc::divides", "src/url.test.ts", "t[1-2]"] {
            assert!(valid_selector(ok), "{ok}");
        }
        for bad in ["--junitxml=app/calc.py", "-k x", "a; rm -rf .", "$(id)", "a b", "x'y", "`id`", "a|b", ""] {
            assert!(!valid_selector(bad) || bad.is_empty(), "{bad}");
        }
        assert!(!valid_selector(&"a".repeat(201)));
    }

    #[test]
    fn the_tail_starts_at_a_line() {
        let text: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        let t = tail(&text);
        assert!(t.starts_with("…\nline ") && t.ends_with("line 1999\n"), "{}", &t[..20]);
        assert_eq!(tail("short\n"), "short\n");
    }
}
