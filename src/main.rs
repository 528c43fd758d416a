// The binary prints what a CLI command answers; in server mode stdout belongs to the MCP
// transport, which is why the library denies printing everywhere but `cli` and `hooks`.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use clap::Parser;
use clap::error::ErrorKind;
use code_intel_session::workspace::Workspace;
use git_code_intel::cli::{self, Cli, Command};
use git_code_intel::mcp;

fn main() -> ExitCode {
    code_intel_semantic::quiet_blas_threads();
    // ONNX Runtime is loaded at run time from ORT_DYLIB_PATH; default to where scripts/model.sh
    // puts it.
    if std::env::var_os("ORT_DYLIB_PATH").is_none()
        && let Some(lib) = code_intel_semantic::embed::bundled_runtime()
    {
        // SAFETY: nothing else runs yet (no threads have been started), so no one reads the
        // environment concurrently.
        unsafe { std::env::set_var("ORT_DYLIB_PATH", lib) };
    }
    cli::init_logging();
    let hook = hook_invocation();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A client runs hooks on every tool call, and treats exit 2 as "block": a usage text
        // with clap's exit 2 would block every tool. An unknown hook (a newer `init` than this
        // binary) says what to do and does not block.
        Err(e) if hook.is_some() && !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            eprintln!(
                "git-code-intel {}: cannot run `hook {}` ({}). The hooks were written by another version of git-code-intel: install the same version, or run `git code-intel init` with this one, then `git code-intel doctor`. This tool call is not checked.",
                env!("CARGO_PKG_VERSION"),
                hook.as_deref().unwrap_or(""),
                e.kind()
            );
            return ExitCode::from(HOOK_CANNOT_RUN);
        }
        Err(e) => e.exit(),
    };
    // What needs no repository.
    if matches!(cli.command, Command::Man { .. } | Command::Completions { .. }) {
        quiet_sigpipe();
    }
    match &cli.command {
        Command::Man { install, dir } => return manual(*install, dir.clone()),
        Command::Completions { shell } => {
            git_code_intel::manual::completions(*shell, &mut std::io::stdout());
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let start = match &cli.repo {
        Some(p) => p.clone(),
        None => match std::env::current_dir() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("error: cannot read the current directory: {e}");
                return ExitCode::from(2);
            }
        },
    };
    // The PreToolUse hooks find the session from the event's directory, and the sandbox runner
    // needs none of a workspace's indexes: neither opens one here.
    if matches!(cli.command, Command::Hook(_)) {
        quiet_sigpipe();
    }
    if let Some(code) = cli::run_without_workspace(&cli.command, &start) {
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let serving = matches!(cli.command, Command::Serve);
    if !serving {
        quiet_sigpipe();
    }
    let ws = match Workspace::open(&start, serving) {
        Ok(mut ws) => {
            if let Ok(exe) = std::env::current_exe() {
                ws.compact_with(exe);
            }
            ws
        }
        // Outside a repository there is no session to guard: an agent's hook lets the tool run
        // (the pre-commit hook is only ever run by git, inside one).
        Err(_) if matches!(cli.command, Command::Hook(_)) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot open repository at {}: {e}", start.display());
            return ExitCode::from(2);
        }
    };
    if serving {
        let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("error: cannot start the async runtime: {e}");
                return ExitCode::from(2);
            }
        };
        let code = match runtime.block_on(mcp::serve_stdio(ws)) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("error: MCP server stopped: {e}");
                1
            }
        };
        // End now: tool calls still running are abandoned (waiting for them is what kept a
        // closed server alive for seconds), and the ONNX runtime's exit handlers, which
        // complain about threads still running, are skipped.
        #[cfg(unix)]
        // SAFETY: ends the process; nothing runs afterwards.
        unsafe {
            libc::_exit(code)
        }
        #[cfg(not(unix))]
        return ExitCode::from(code as u8);
    }
    ExitCode::from(cli::run_tool(&ws, cli.command, cli.json) as u8)
}

/// The exit code of a hook that cannot run: an error both clients show without blocking the
/// tool (2 blocks).
const HOOK_CANNOT_RUN: u8 = 1;

/// The hook name when the command line is `[--repo DIR] [--json] hook NAME …`.
fn hook_invocation() -> Option<String> {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--repo" => {
                args.next();
            }
            a if a.starts_with("--repo=") || a == "--json" => {}
            "hook" => return Some(args.next().unwrap_or_default()),
            _ => return None,
        }
    }
    None
}

/// `git code-intel man [--install [--dir DIR]]`.
fn manual(install: bool, dir: Option<std::path::PathBuf>) -> ExitCode {
    use git_code_intel::manual;
    if !install {
        return match manual::render(&mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        };
    }
    match dir.map_or_else(manual::default_dir, Ok).and_then(|d| manual::install(&d)) {
        Ok(page) => {
            println!("installed {}: `git code-intel --help` and `man git-code-intel` show it", page.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot install the manual: {e}");
            ExitCode::from(1)
        }
    }
}

/// Like other command-line tools, end quietly when the reader of our output goes away
/// (`git code-intel … | head`) instead of failing to print. Never in server mode.
fn quiet_sigpipe() {
    #[cfg(unix)]
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
