//! `git code-intel init`: what it writes, what it merges, and that it is idempotent and never
//! overwrites the user's edits without --force.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_git-code-intel");

fn init(root: &Path, args: &[&str]) -> Vec<Value> {
    let out = Command::new(BIN).args(["--json", "init"]).args(args).current_dir(root).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn action<'a>(report: &'a [Value], path: &str) -> &'a str {
    report.iter().find(|r| r["path"] == path).and_then(|r| r["action"].as_str()).unwrap_or("missing")
}

/// Every file under the repository (outside .git) with its content.
fn snapshot(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(root).unwrap().display().to_string(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn writes_everything_and_merges_what_the_user_has() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::write(root.join(".mcp.json"), r#"{"mcpServers": {"other": {"command": "other-server"}}}"#).unwrap();
    std::fs::create_dir_all(root.join(".claude")).unwrap();
    std::fs::write(
        root.join(".claude/settings.json"),
        r#"{"permissions": {"allow": ["Bash(ls:*)"]}, "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-check"}]}]}}"#,
    )
    .unwrap();
    std::fs::write(root.join("AGENTS.md"), "# Agents\n\nBe nice.\n").unwrap();
    let before_gitignore = std::fs::read_to_string(root.join(".gitignore")).unwrap();

    let report = init(root, &[]);
    for path in [
        ".code-intel/config.json",
        ".code-intel/context.yml",
        ".code-intel/phase_contract.yml",
        ".code-intel/task_planning.md",
        ".code-intel/user_escalation.md",
        ".code-intel/verifiers/tests.md",
        ".code-intel/interventions/step_back.md",
        ".code-intel/review_prompts/garbage_detection.md",
        ".code-intel/review_prompts/quality_review.md",
        ".code-intel/doc_research/default.md",
        ".claude/commands/code.md",
        ".claude/commands/outcome.md",
        ".agents/skills/code/SKILL.md",
        ".agents/skills/outcome/SKILL.md",
    ] {
        assert_eq!(action(&report, path), "created", "{path}");
        assert!(root.join(path).is_file(), "{path}");
    }
    let mcp: Value = serde_json::from_str(&std::fs::read_to_string(root.join(".mcp.json")).unwrap()).unwrap();
    assert_eq!(mcp["mcpServers"]["other"]["command"], "other-server");
    assert_eq!(mcp["mcpServers"]["code-intel"], json!({"command": "git-code-intel", "args": ["serve"]}));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".claude/settings.json")).unwrap()).unwrap();
    assert_eq!(settings["permissions"]["allow"][0], "Bash(ls:*)");
    let pre = settings["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "the user's hook stays");
    assert!(pre.iter().any(|g| g["hooks"][0]["command"] == "git-code-intel hook claude-pre-tool-use"));
    assert_eq!(settings["hooks"]["SessionStart"][0]["hooks"][0]["command"], "git-code-intel hook claude-session-start");
    let agents = std::fs::read_to_string(root.join("AGENTS.md")).unwrap();
    assert!(agents.starts_with("# Agents\n\nBe nice.\n") && agents.contains("## git-code-intel"), "{agents}");
    let codex = std::fs::read_to_string(root.join(".codex/config.toml")).unwrap();
    assert!(codex.contains("[mcp_servers.code-intel]") && codex.contains("command = \"git-code-intel\""));
    assert_eq!(action(&report, ".codex/hooks.json"), "created");
    let hooks: Value = serde_json::from_str(&std::fs::read_to_string(root.join(".codex/hooks.json")).unwrap()).unwrap();
    assert_eq!(hooks["hooks"]["PreToolUse"][0]["matcher"], "Bash|apply_patch");
    assert_eq!(hooks["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "git-code-intel hook codex-pre-tool-use");
    assert_eq!(hooks["hooks"]["SessionStart"][0]["hooks"][0]["command"], "git-code-intel hook codex-session-start");
    let gitignore = std::fs::read_to_string(root.join(".gitignore")).unwrap();
    assert!(gitignore.starts_with(&before_gitignore) && gitignore.contains(".code-intel/index/"));
    let skill = std::fs::read_to_string(root.join(".claude/commands/code.md")).unwrap();
    for must in [
        "CRITICAL RULES",
        "submit_phase",
        "get_session_status",
        "--quick",
        "INVESTIGATE",
        "compaction_count",
        "Recovery",
    ] {
        assert!(skill.contains(must), "code.md lacks {must}");
    }
    // The contract init wrote is the one the server loads, without warnings.
    let out =
        Command::new(BIN).args(["--json", "find-definitions", "--symbol", "login"]).current_dir(root).output().unwrap();
    assert!(out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("phase_contract"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn running_twice_changes_nothing() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    init(root, &[]);
    let first = snapshot(root);
    let report = init(root, &[]);
    assert!(report.iter().all(|r| r["action"] == "unchanged"), "{report:?}");
    assert_eq!(snapshot(root), first);
}

#[test]
fn edited_files_are_kept_unless_forced() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    init(root, &[]);
    let planning = root.join(".code-intel/task_planning.md");
    std::fs::write(&planning, "# Our own planning rules\n").unwrap();
    std::fs::write(root.join(".claude/commands/code.md"), "custom skill\n").unwrap();
    let report = init(root, &[]);
    assert_eq!(action(&report, ".code-intel/task_planning.md"), "kept_edited");
    assert_eq!(std::fs::read_to_string(&planning).unwrap(), "# Our own planning rules\n");
    // Still kept on a third run: an edit is never taken over silently.
    let report = init(root, &[]);
    assert_eq!(action(&report, ".claude/commands/code.md"), "kept_edited");
    let report = init(root, &["--force"]);
    assert_eq!(action(&report, ".code-intel/task_planning.md"), "updated");
    assert!(std::fs::read_to_string(&planning).unwrap().starts_with("# Task planning"));
}

#[test]
fn a_file_init_did_not_write_is_not_replaced() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(root.join(".code-intel/context.yml"), "project_rules:\n  source: RULES.md\n").unwrap();
    let report = init(root, &[]);
    assert_eq!(action(&report, ".code-intel/context.yml"), "kept_edited");
    assert!(std::fs::read_to_string(root.join(".code-intel/context.yml")).unwrap().contains("RULES.md"));
}

#[test]
fn broken_json_is_reported_not_overwritten() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::write(root.join(".mcp.json"), "{ not json").unwrap();
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(".mcp.json is not valid JSON"));
    assert_eq!(std::fs::read_to_string(root.join(".mcp.json")).unwrap(), "{ not json");
}

/// `init --share` makes a plain `git fetch` stage the remote's shared refs (never writing this
/// clone's own, never carrying sessions), replaces the refspecs earlier versions set, and leaves
/// what a plain `git push` does alone.
#[test]
fn share_stages_shared_refs_and_leaves_push_alone() {
    let remote = tempfile::tempdir().unwrap();
    crate::common::git(remote.path(), &["init", "-q", "--bare"]);
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    crate::common::git(root, &["checkout", "-q", "-b", "main"]);
    crate::common::git(root, &["add", "-A"]);
    crate::common::git(root, &["commit", "-q", "-m", "initial"]);
    crate::common::git(root, &["remote", "add", "origin", remote.path().to_str().unwrap()]);
    // What an earlier `init --share` configured, one refspec in a second section of the remote
    // (git reads them as one).
    let config = root.join(".git/config");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[remote \"origin\"]\n\tfetch = +refs/code-intel/*:refs/code-intel/*\n");
    std::fs::write(&config, text).unwrap();
    for (key, value) in [
        ("remote.origin.fetch", "+refs/notes/code-intel*:refs/notes/code-intel*"),
        ("remote.origin.push", "HEAD"),
        ("remote.origin.push", "refs/code-intel/*:refs/code-intel/*"),
        ("remote.origin.push", "refs/notes/code-intel*:refs/notes/code-intel*"),
    ] {
        crate::common::git(root, &["config", "--add", key, value]);
    }
    let report = init(root, &["--share"]);
    assert_eq!(action(&report, ".git/config"), "merged");
    let fetch = crate::common::git(root, &["config", "--get-all", "remote.origin.fetch"]);
    assert_eq!(
        fetch.lines().collect::<Vec<_>>(),
        [
            "+refs/heads/*:refs/remotes/origin/*",
            "+refs/code-intel/map*:refs/code-intel-remotes/origin/code-intel/map*",
            "+refs/code-intel/history*:refs/code-intel-remotes/origin/code-intel/history*",
            "+refs/code-intel/logs/outcomes*:refs/code-intel-remotes/origin/code-intel/logs/outcomes*",
            "+refs/code-intel/forest*:refs/code-intel-remotes/origin/code-intel/forest*",
            "+refs/notes/code-intel*:refs/code-intel-remotes/origin/notes/code-intel*"
        ]
    );
    // The legacy push refspecs are gone; `HEAD` may be the user's own: kept, and named.
    assert_eq!(crate::common::git(root, &["config", "--get-all", "remote.origin.push"]), "HEAD");
    let config = report.iter().find(|r| r["path"] == ".git/config").unwrap();
    assert!(config["note"].as_str().unwrap().contains("git config --unset remote.origin.push HEAD"), "{config}");
    assert_eq!(action(&init(root, &["--share"]), ".git/config"), "unchanged", "idempotent");

    // The remote has a shared history, and (pushed by an old version) a session and its claim.
    let head = crate::common::git(root, &["rev-parse", "HEAD"]);
    crate::common::git(root, &["push", "-q", "origin", "main"]);
    for r in ["refs/code-intel/history", "refs/code-intel/sessions/x", "refs/code-intel/active"] {
        crate::common::git(remote.path(), &["update-ref", r, &head]);
    }
    let clone = tempfile::tempdir().unwrap();
    crate::common::git(clone.path(), &["clone", "-q", remote.path().to_str().unwrap(), "."]);
    init(clone.path(), &["--share"]);
    crate::common::git(clone.path(), &["fetch", "-q"]);
    // Staged, not written over this clone's refs; the session is inert there.
    assert_eq!(
        crate::common::git(clone.path(), &["rev-parse", "refs/code-intel-remotes/origin/code-intel/history"]),
        head
    );
    let own = crate::common::git(
        clone.path(),
        &["for-each-ref", "--format=%(refname)", "refs/code-intel/", "refs/worktree/"],
    );
    assert_eq!(own, "", "a fetch writes none of this clone's refs");
    // A plain `git push` pushes the branch as before, and nothing of ours.
    crate::common::git(clone.path(), &["checkout", "-q", "-b", "topic"]);
    crate::common::git(clone.path(), &["commit", "-q", "--no-verify", "--allow-empty", "-m", "topic"]);
    crate::common::git(clone.path(), &["push", "-q", "origin", "topic"]);
    let on_remote = crate::common::git(remote.path(), &["for-each-ref", "--format=%(refname)", "refs/heads/"]);
    assert_eq!(on_remote.lines().collect::<Vec<_>>(), ["refs/heads/main", "refs/heads/topic"]);
}

#[test]
fn share_without_a_remote_says_so() {
    let repo = crate::common::fixture_repo("project");
    let out = Command::new(BIN).args(["init", "--share"]).current_dir(repo.path()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--share needs a remote"));
}

#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    use std::io::Read;
    let repo = crate::common::fixture_repo("project");
    // More output than a pipe buffers, so the writer is still writing when the reader leaves.
    let lines: String = (0..5000).map(|i| format!("let e{i} = {i};\n")).collect();
    std::fs::write(repo.path().join("many.rs"), lines).unwrap();
    let mut child = Command::new(BIN)
        .args(["search-text", "--pattern", "e", "--max-results", "100000"])
        .current_dir(repo.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then hang up, like `| head -c1`.
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    // The command may end before writing a byte; either way the pipe is hung up below.
    let read = stdout.read(&mut byte);
    assert!(read.is_ok(), "{read:?}");
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A project whose `.code-intel/phase_contract.yml` is the whole contract an earlier version
/// copied in (with its "complete_task" instruction): the server ignores that copy instead of
/// serving the old wording, `init` replaces it with the overrides file, and `contract` prints
/// the contract in effect, lint-clean.
#[test]
fn an_old_full_copy_of_the_contract_is_ignored_and_replaced() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    let old = std::fs::read(crate::common::fixtures().join("contracts/shipped-before-typed-payloads.yml")).unwrap();
    std::fs::write(root.join(".code-intel/phase_contract.yml"), old).unwrap();
    let out = Command::new(BIN).args(["contract"]).current_dir(root).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("unedited copy"), "{stderr}");
    assert!(!stdout.contains("complete_task("), "the old wording is not served");
    assert!(stdout.contains("Submit via submit_phase with task_id"), "{stdout}");
    let report = init(root, &["--force"]);
    assert_eq!(action(&report, ".code-intel/phase_contract.yml"), "updated");
    let file = std::fs::read_to_string(root.join(".code-intel/phase_contract.yml")).unwrap();
    assert!(file.lines().all(|l| l.trim().is_empty() || l.starts_with('#')), "only comments: {file}");
}

/// An override that names a tool the server does not serve is reported by `contract`.
#[test]
fn the_contract_command_reports_what_the_lint_finds() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::create_dir_all(root.join(".code-intel")).unwrap();
    std::fs::write(
        root.join(".code-intel/phase_contract.yml"),
        "phases:\n  MERGE:\n    instruction: \"Call finish_merge() when done.\"\n",
    )
    .unwrap();
    let out = Command::new(BIN).args(["contract"]).current_dir(root).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("phases.MERGE.instruction") && stderr.contains("finish_merge"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Call finish_merge() when done."));
}

/// The lines of a procedure that carry its flags (`| --flag |` table rows) and its steps
/// (numbered and table rows of the flow), with the client's invocation sigil made neutral.
fn flags_and_steps(text: &str, sigil: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            l.starts_with("| `-")
                || l.starts_with("| ") && l.chars().nth(2).is_some_and(|c| c.is_ascii_digit())
                || l.trim_start().starts_with(|c: char| c.is_ascii_digit())
        })
        .map(|l| {
            l.replace("`$ARGUMENTS`", "<arguments>")
                .replace(&format!("{sigil}code"), "<code>")
                .replace(&format!("{sigil}outcome"), "<outcome>")
                .replace("the user's message after `<code>`", "<arguments>")
                .replace("the user's message after `<outcome>`", "<arguments>")
        })
        .collect()
}

#[test]
fn codex_and_claude_code_get_the_same_procedures() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("$code (.agents/skills/code/SKILL.md)")
            && said.contains("/outcome (.claude/commands/outcome.md)"),
        "init says where: {said}"
    );
    for name in ["code", "outcome"] {
        let claude = std::fs::read_to_string(root.join(format!(".claude/commands/{name}.md"))).unwrap();
        let codex = std::fs::read_to_string(root.join(format!(".agents/skills/{name}/SKILL.md"))).unwrap();
        // Each in its client's format: Claude Code's command frontmatter, Codex's skill
        // frontmatter (name and description are what Codex requires).
        assert!(claude.starts_with("---\ndescription: ") && claude.contains("argument-hint: "), "{claude}");
        assert!(codex.starts_with(&format!("---\nname: {name}\ndescription: ")), "{codex}");
        assert!(claude.contains("$ARGUMENTS") && !codex.contains("$ARGUMENTS"), "arguments arrive differently");
        let (a, b) = (flags_and_steps(&claude, "/"), flags_and_steps(&codex, "$"));
        assert!(!a.is_empty());
        assert_eq!(a, b, "{name}: the same flags and steps");
        // Nothing of one client leaks into the other.
        assert!(!codex.contains(&format!("/{name} ")) && !claude.contains(&format!("${name} ")), "{name}");
    }
    let code = std::fs::read_to_string(root.join(".agents/skills/code/SKILL.md")).unwrap();
    for must in ["--quick", "--no-doc-research", "--resume", "INVESTIGATE", "Recovery", "update_context", "$outcome"] {
        assert!(code.contains(must), "the Codex procedure lacks {must}");
    }
    let outcome = std::fs::read_to_string(root.join(".claude/commands/outcome.md")).unwrap();
    assert!(outcome.contains("record_outcome") && outcome.contains("success"), "{outcome}");
    // Every flag of the seeds, each with what is possible: --rebuild through a served tool,
    // --clean through the user (the hooks block it from the agent's shell).
    let rebuild = code.lines().find(|l| l.starts_with("| `--rebuild`")).expect("--rebuild in the flag table");
    assert!(rebuild.contains("sync_index(force: true)"), "{rebuild}");
    let clean = code.lines().find(|l| l.starts_with("| `--clean`")).expect("--clean in the flag table");
    assert!(clean.contains("their own terminal"), "{clean}");
    // The escalation asks in a way both clients have.
    let escalation = std::fs::read_to_string(root.join(".code-intel/user_escalation.md")).unwrap();
    assert!(escalation.contains("end your turn with the question"), "{escalation}");
}

/// init ends with the one-time step each client needs from the user, and `doctor` checks each
/// client's set-up: what init wrote is there, what only the user can do is named with its fix.
#[test]
fn init_names_the_first_run_steps_and_doctor_checks_them() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    let home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(args)
            .current_dir(root)
            .env("HOME", home.path())
            .env_remove("CODEX_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (code, out) = run(&["doctor"]);
    assert_eq!(code, 1, "nothing set up yet: {out}");
    assert!(out.contains("missing") && out.contains("run `git code-intel init`"), "{out}");
    let (code, out) = run(&["init"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Once, before the tools appear in a client:"), "{out}");
    assert!(
        out.contains("Claude Code: approve the project's MCP server") && out.contains("enabledMcpjsonServers"),
        "{out}"
    );
    assert!(out.contains("Codex: then open Codex here and trust the git-code-intel hooks in `/hooks`"), "{out}");
    assert!(out.contains("Codex: trust this project") && out.contains("trust_level = \"trusted\""), "{out}");
    let (_, out) = run(&["--json", "doctor"]);
    let checks: Value = serde_json::from_str(&out).unwrap();
    let status = |client: &str, what: &str| -> String {
        checks
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["client"] == client && c["what"].as_str().unwrap().contains(what))
            .unwrap_or_else(|| panic!("no check {client} {what}: {checks}"))["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(status("claude-code", ".mcp.json"), "ok");
    assert_eq!(status("claude-code", "hooks"), "ok");
    assert_eq!(status("codex", "hooks.json"), "ok");
    assert_eq!(status("codex", "config.toml"), "ok");
    assert_eq!(status("claude-code", "approved"), "todo");
    assert_eq!(status("codex", "project trusted"), "todo");
    assert_eq!(status("codex", "hooks reviewed"), "todo");
    // The user's one-time steps, where doctor can see them.
    std::fs::write(root.join(".claude/settings.local.json"), r#"{"enabledMcpjsonServers": ["code-intel"]}"#).unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();
    let canonical = root.canonicalize().unwrap();
    std::fs::write(
        home.path().join(".codex/config.toml"),
        format!(
            "[projects.\"{root}\"]\ntrust_level = \"trusted\"\n\n[hooks.state.\"{root}/.codex/hooks.json:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:x\"\n\n[hooks.state.\"{root}/.codex/hooks.json:session_start:0:0\"]\ntrusted_hash = \"sha256:y\"\n",
            root = canonical.display()
        ),
    )
    .unwrap();
    let (_, out) = run(&["--json", "doctor"]);
    let checks: Value = serde_json::from_str(&out).unwrap();
    for c in checks.as_array().unwrap() {
        if c["client"] != "both" {
            assert_eq!(c["status"], "ok", "{c}");
        }
    }
}

/// A file init merges into but cannot read as text, or a path it owns that is not a file: init
/// stops and names it, and nothing is overwritten (it used to be taken as absent and replaced).
#[test]
fn a_file_init_cannot_read_is_reported_not_overwritten() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    let latin1 = b"{\"note\": \"caf\xe9\"}\n".to_vec();
    std::fs::write(root.join(".mcp.json"), &latin1).unwrap();
    let before = snapshot(root);
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(".mcp.json is not UTF-8 text"), "{stderr}");
    assert_eq!(std::fs::read(root.join(".mcp.json")).unwrap(), latin1);
    // What init wrote before stopping is its own files; nothing of the user's changed.
    for (path, bytes) in &before {
        assert_eq!(std::fs::read(root.join(path)).ok().as_ref(), Some(bytes), "{path} changed");
    }

    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::write(root.join("AGENTS.md"), b"# Agents\n\xff\xfe\n").unwrap();
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("AGENTS.md is not UTF-8 text"));
    assert_eq!(std::fs::read(root.join("AGENTS.md")).unwrap(), b"# Agents\n\xff\xfe\n");

    // A directory where init keeps a file of its own.
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::create_dir_all(root.join(".code-intel/context.yml/inside")).unwrap();
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot read") && stderr.contains("context.yml"), "{stderr}");
    assert!(root.join(".code-intel/context.yml/inside").is_dir());
}

/// A pre-commit hook that is a program (not UTF-8 text) is kept and chained like a script, not
/// replaced; and when a kept hook exists already, a second foreign hook is not moved over it.
#[test]
fn a_binary_pre_commit_hook_is_chained_not_replaced() {
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    let hooks = root.join(".git/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let program = b"\x7fELF\x02\x01\x01\x00\xff\xfe not a script".to_vec();
    std::fs::write(hooks.join("pre-commit"), &program).unwrap();
    let report = init(root, &[]);
    assert_eq!(action(&report, ".git/hooks/pre-commit"), "merged");
    assert_eq!(std::fs::read(hooks.join("pre-commit.before-code-intel")).unwrap(), program);
    assert!(std::fs::read_to_string(hooks.join("pre-commit")).unwrap().contains("git-code-intel pre-commit hook"));

    // Someone puts another hook in place of ours: moving it would lose the kept one. Init says
    // so and fails, and still does the rest: `--share` sets the remote's refspecs.
    std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\necho another\n").unwrap();
    let remote = tempfile::tempdir().unwrap();
    let bare = Command::new("git").args(["init", "-q", "--bare"]).arg(remote.path()).status().unwrap();
    assert!(bare.success());
    let added = Command::new("git").args(["remote", "add", "origin"]).arg(remote.path()).current_dir(root).status();
    assert!(added.unwrap().success());
    let out = Command::new(BIN).args(["--json", "init", "--share"]).current_dir(root).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("merge them by hand"), "{stderr}");
    let report: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(action(&report, ".git/hooks/pre-commit"), "refused");
    assert_eq!(action(&report, ".git/config"), "merged", "{report:?}");
    assert_eq!(std::fs::read_to_string(hooks.join("pre-commit")).unwrap(), "#!/bin/sh\necho another\n");
    assert_eq!(std::fs::read(hooks.join("pre-commit.before-code-intel")).unwrap(), program);
}

/// A file init merges into that is a symbolic link (AGENTS.md pointing at CLAUDE.md, say) stays a
/// link, the file it names gets the block; a merged file keeps its mode; a link that does not
/// resolve is reported and left alone.
#[cfg(unix)]
#[test]
fn a_merged_file_keeps_its_link_and_its_mode() {
    use std::os::unix::fs::PermissionsExt;
    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::fs::write(root.join("CLAUDE.md"), "# Shared rules\n").unwrap();
    std::os::unix::fs::symlink("CLAUDE.md", root.join("AGENTS.md")).unwrap();
    std::fs::write(root.join(".mcp.json"), "{}\n").unwrap();
    std::fs::set_permissions(root.join(".mcp.json"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let report = init(root, &[]);
    assert_eq!(action(&report, "AGENTS.md"), "merged");
    assert!(std::fs::symlink_metadata(root.join("AGENTS.md")).unwrap().file_type().is_symlink());
    let shared = std::fs::read_to_string(root.join("CLAUDE.md")).unwrap();
    assert!(shared.starts_with("# Shared rules\n") && shared.contains("git-code-intel"), "{shared}");
    let mode = std::fs::metadata(root.join(".mcp.json")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(std::fs::read_to_string(root.join(".mcp.json")).unwrap().contains("code-intel"));

    let repo = crate::common::fixture_repo("project");
    let root = repo.path();
    std::os::unix::fs::symlink("nowhere/AGENTS.md", root.join("AGENTS.md")).unwrap();
    let out = Command::new(BIN).arg("init").current_dir(root).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("AGENTS.md is a symbolic link that does not resolve"), "{stderr}");
    assert_eq!(std::fs::read_link(root.join("AGENTS.md")).unwrap(), std::path::Path::new("nowhere/AGENTS.md"));
}

/// A hook group an earlier version wrote keeps its tools and gains the ones added since (Read):
/// doctor names the old matcher, and init widens it.
#[test]
fn an_old_hook_matcher_is_named_by_doctor_and_widened_by_init() {
    let repo = crate::common::committed_project();
    let root = repo.path();
    init(root, &[]);
    let path = root.join(".claude/settings.json");
    let mut settings: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for group in settings["hooks"]["PreToolUse"].as_array_mut().unwrap() {
        group["matcher"] = json!("Edit|Write|MultiEdit|NotebookEdit|Bash|Task");
    }
    std::fs::write(&path, serde_json::to_string_pretty(&settings).unwrap()).unwrap();
    let hooks_check = |root: &Path| {
        let (_, out, _) = crate::common::run_cli(root, &["--json", "doctor"], "");
        let checks: Value = serde_json::from_str(&out).unwrap();
        let found = checks.as_array().unwrap().iter().find(|c| {
            c["what"]
                .as_str()
                .unwrap_or_default()
                .contains("PreToolUse and SessionStart hooks in .claude/settings.json")
        });
        found.cloned().unwrap_or_else(|| panic!("{checks}"))
    };
    assert_ne!(hooks_check(root)["status"], "ok", "the matcher lacks Read");
    init(root, &[]);
    let settings: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let matchers: Vec<&str> =
        settings["hooks"]["PreToolUse"].as_array().unwrap().iter().filter_map(|g| g["matcher"].as_str()).collect();
    assert_eq!(matchers, ["Edit|Write|MultiEdit|NotebookEdit|Bash|Task|Read"], "the user's Task kept, Read added");
    assert_eq!(hooks_check(root)["status"], "ok");
}
