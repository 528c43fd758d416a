"""The real clients end to end: Claude Code and Codex, each driving git-code-intel.

Each client is the pinned npm release (tests/clients/versions.env), run offline against the
scripted model of scripted.py, in a repository set up by `git code-intel init`. The agent below
plays a whole session through the client's own tools: its MCP client calls our tools, its hook
runner runs our hooks, and what the hooks decide is what the client does. Every tool call the
agent makes is an observation (client, phase, action, outcome) checked against what the phase
allows; the table of them is printed at the end.

Usage: python3 tests/clients/suite.py BIN_DIR [claude|codex ...]
BIN_DIR holds the git-code-intel binary under test; the clients come from
CODE_INTEL_CLIENTS_DIR (scripts/clients.sh installs them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import traceback
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scripted import Call, Say, Turn  # noqa: E402

CALC = textwrap.dedent(
    '''\
    """A small calculator."""


    def add(a, b):
        return a + b


    def sub(a, b):
        return a - b
    '''
)

TESTS = textwrap.dedent(
    '''\
    import unittest

    from app.calc import add, mul


    class CalcTest(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(2, 3), 5)

        def test_mul(self):
            self.assertEqual(mul(4, 5), 20)


    if __name__ == "__main__":
        unittest.main()
    '''
)

REQUEST = "Add a mul(a, b) function to app/calc.py that multiplies two numbers"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def make_repo(bin_dir: Path) -> Path:
    """A small Python project with a failing test for the feature, set up by init."""
    repo = Path(tempfile.mkdtemp(prefix="gci-client-")) / "calc"
    (repo / "app").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "app/__init__.py").write_text("")
    (repo / "tests/__init__.py").write_text("")
    (repo / "app/calc.py").write_text(CALC)
    (repo / "tests/test_calc.py").write_text(TESTS)
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": ["1 + 1"], "outputs": [], "execution_count": None}
    (repo / "notes.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (repo / "README.md").write_text("# calc\n\nRun the tests with `python3 -m unittest -q`.\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(["git-code-intel", "init"], cwd=repo, env=env, check=True, capture_output=True)
    # init installed the pre-commit hook, which runs git-code-intel by name.
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "calc"], cwd=repo, env=env, check=True)
    return repo


# A project's own test runners, run through the client's shell before READY (a baseline):
# each must pass under the kernel sandbox, writing only what git ignores and temporary files.
RUNNERS = [
    # The baseline fails for the feature still to come, and says why (not the sandbox's doing).
    ("python3 -m unittest (baseline)", "python3 -m unittest -q", "cannot import name 'mul'"),
    ("pytest with tmp_path", "python3 -m pytest -q -p no:cacheprovider tests/test_tmp.py", "1 passed"),
    ("cargo test (writes target/)", "cargo test --offline -q 2>&1", "test result: ok"),
    ("npm test (vitest)", "npm test --silent 2>&1", "1 passed"),
]


def make_runner_repo(bin_dir: Path) -> Path:
    """The calculator with a Rust crate, a pytest test using tmp_path and a vitest suite beside
    it, vitest from the client cache (scripts/clients.sh installs it), set up by init."""
    repo = make_repo(bin_dir)
    (repo / "Cargo.toml").write_text('[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n\n[lib]\npath = "src/lib.rs"\n')
    (repo / "src").mkdir()
    (repo / "src/lib.rs").write_text("pub fn mul(a: i32, b: i32) -> i32 { a * b }\n#[test]\nfn mul_works() { assert_eq!(mul(4, 5), 20); }\n")
    (repo / "tests/test_tmp.py").write_text(
        "def test_tmp(tmp_path):\n    (tmp_path / 'x').write_text('1')\n    assert (tmp_path / 'x').read_text() == '1'\n"
    )
    (repo / "package.json").write_text(json.dumps({"name": "calc", "private": True, "type": "module", "scripts": {"test": "vitest run"}}))
    (repo / "calc.test.js").write_text("import { test, expect } from 'vitest';\ntest('mul', () => { expect(4 * 5).toBe(20); });\n")
    with open(repo / ".gitignore", "a") as f:
        f.write("target/\nnode_modules/\n")
    vitest = Path(os.environ.get("CODE_INTEL_CLIENTS_DIR") or Path.home() / ".cache/git-code-intel/clients") / "vitest/node_modules"
    if vitest.is_dir():
        shutil.copytree(vitest, repo / "node_modules", symlinks=True)
    subprocess.run(["cargo", "generate-lockfile", "--offline"], cwd=repo, check=True, capture_output=True)
    # init's pre-commit hook runs git-code-intel by name.
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    done = subprocess.run(["git", "commit", "-q", "-m", "runners"], cwd=repo, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"committing the runners' project failed: {done.stdout}{done.stderr}")
    return repo


@dataclass
class Observation:
    client: str
    phase: str
    action: str
    expected: str  # "blocked" | "confined" | "allowed" | "ok"
    outcome: str = "not reached"
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.outcome == self.expected


@dataclass
class Report:
    observations: list[Observation] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.failures.append(what)


def result_json(turn: Turn) -> dict:
    """The JSON answer of the last tool result (our MCP tools answer JSON text)."""
    text = turn.results[-1].text if turn.results else ""
    start = text.find("{")
    try:
        return json.loads(text[start:]) if start >= 0 else {}
    except ValueError:
        return {}


class SessionAgent:
    """A whole git-code-intel session, through one client's tools.

    `ops` is the client module (claude.py or codex.py): it maps the neutral operations (mcp,
    shell, write_file, edit_file, …) onto that client's own tools.
    """

    def __init__(self, name: str, ops, repo: Path, report: Report):
        self.name, self.ops, self.repo, self.report = name, ops, repo, report
        self.phase = ""
        self.response: dict = {}

    def path(self, rel: str) -> str:
        return self.ops.path_for(self.repo, rel)

    def observe(self, turn: Turn, action: str, expected: str, file_unchanged: tuple[str, str] | None = None):
        """Records what the client did with the last call; a block is a result that carries the
        hook's reason (and, for a write, a file left as it was)."""
        last = turn.results[-1] if turn.results else None
        text = last.text if last else ""
        blocked = self.ops.was_blocked(last) if last else False
        outcome = "blocked" if blocked else ("allowed" if expected in ("allowed", "blocked") else "ok")
        if expected == "confined" and not blocked:
            # The hook let the shell command run, rewritten into the kernel sandbox, which
            # refused the write and said so (docs/SECURITY.md).
            outcome = "confined" if "kernel sandbox of phase" in text else "ran unconfined"
        if file_unchanged is not None:
            rel, before = file_unchanged
            now = (self.repo / rel).read_text() if (self.repo / rel).exists() else None
            if now != before and outcome in ("blocked", "confined"):
                outcome = f"{outcome} but written"
        obs = Observation(self.name, self.phase, action, expected, outcome, text[:300])
        self.report.observations.append(obs)
        return obs

    def submit(self, data: dict):
        turn = yield self.ops.mcp("submit_phase", {"data": data})
        self.response = result_json(turn)
        return turn

    def writes_refused_before_ready(self):
        """Every way this client writes a file, in a phase before READY: each one blocked."""
        calc = (self.repo / "app/calc.py").read_text()
        for label, call in self.ops.write_attempts(self.repo):
            turn = yield call
            # File tools are judged by the hook; shell commands run, confined by the kernel.
            expected = "confined" if label.startswith(("Bash", "shell")) else "blocked"
            self.observe(turn, label, expected, ("app/calc.py", calc))
        turn = yield self.ops.shell("git status --short")
        self.observe(turn, "shell: git status (read-only)", "allowed")

    def run(self):
        ops = self.ops
        turn = yield ops.mcp(
            "start_session", {"intent": "IMPLEMENT", "query": REQUEST, "no_doc_research": True, "repo_path": "."}
        )
        self.response = result_json(turn)
        self.phase = self.response.get("phase", "?")
        self.report.check(self.phase == "QUERY_FRAME", f"{self.name}: start_session led to {self.phase}: {self.response}")
        yield from self.writes_refused_before_ready()

        turn = yield from self.submit({"action_type": "implement", "target_symbols": ["add"], "tools_used": [], "summary": "frame"})
        self.phase = self.response.get("phase", "?")
        turn = yield ops.mcp("get_symbols", {"path": "app/calc.py"})
        turn = yield ops.mcp("find_definitions", {"symbol": "add"})
        turn = yield from self.submit(
            {
                "explored_files": ["app/calc.py"],
                "findings": ["add and sub live in app/calc.py"],
                "tools_used": ["get_symbols", "find_definitions"],
                "summary": "the calculator's functions are in app/calc.py",
            }
        )
        for gate in (
            {"needs_more_information": False, "reason": "exploration found the code"},
            {"has_unverified_hypotheses": False, "reason": "nothing left unverified"},
            {"needs_impact_analysis": False, "reason": "a new function changes nothing else"},
        ):
            self.phase = self.response.get("phase", "?")
            if self.phase not in ("Q1", "Q2", "Q3"):
                break
            turn = yield from self.submit({**gate, "tools_used": [], "summary": self.phase.lower()})
        self.phase = self.response.get("ready_substep") or self.response.get("phase", "?")
        self.report.check(self.phase == "READY_PLAN", f"{self.name}: expected READY_PLAN, got {self.response}")
        turn = yield from self.submit(
            {
                "tasks": [
                    {
                        "id": "t1",
                        "description": "add mul(a, b)",
                        "status": "pending",
                        "checklist": [{"item": "mul in app/calc.py", "status": "pending"}],
                    }
                ],
                "tools_used": [],
                "summary": "one task",
            }
        )
        self.phase = self.response.get("ready_substep") or self.response.get("phase", "?")
        # READY: an unexplored file stays closed, the explored one opens.
        readme = (self.repo / "README.md").read_text()
        turn = yield ops.write_file(self.path("README.md"), readme + "more\n")
        self.observe(turn, "write an unexplored file (README.md)", "blocked", ("README.md", readme))
        turn = yield ops.mcp("check_write_target", {"file_path": "app/calc.py"})
        calc = (self.repo / "app/calc.py").read_text()
        new_calc = calc + "\n\ndef mul(a, b):\n    return a * b\n"
        for call in ops.edit_calls(self.repo, "app/calc.py", calc, new_calc):
            turn = yield call
        self.observe(turn, "edit an explored file (app/calc.py)", "allowed")
        written = (self.repo / "app/calc.py").read_text()
        self.report.check("def mul" in written, f"{self.name}: the edit in READY did not reach app/calc.py")
        line = written.splitlines().index("def mul(a, b):") + 1
        turn = yield from self.submit(
            {
                "task_id": "t1",
                "checklist": [{"item": "mul in app/calc.py", "status": "done", "evidence": f"app/calc.py:{line}-{line + 1}"}],
                "tools_used": ["check_write_target"],
                "summary": "mul added",
            }
        )
        turn = yield from self.submit({"summary": "all tasks done"})
        self.phase = self.response.get("phase", "?")
        self.report.check(self.phase == "POST_IMPL_VERIFY", f"{self.name}: expected POST_IMPL_VERIFY, got {self.response}")
        instruction = self.response.get("instruction", "")
        self.report.check(
            "python3 -m unittest" in instruction, f"{self.name}: the verify instruction names no test command: {instruction}"
        )
        # Verification: the project's tests run; writes still do not.
        turn = yield ops.shell("python3 -m unittest -q")
        obs = self.observe(turn, "shell: python3 -m unittest -q", "allowed")
        self.report.check("OK" in obs.detail or "Ran 2 tests" in obs.detail, f"{self.name}: the tests did not run: {obs.detail}")
        calc = (self.repo / "app/calc.py").read_text()
        turn = yield ops.shell("echo '# x' >> app/calc.py")
        self.observe(turn, "shell: echo >> app/calc.py", "confined", ("app/calc.py", calc))
        turn = yield ops.shell("python3 -c \"open('app/calc.py','a').write('# x')\"")
        self.observe(turn, "shell: python3 -c (interpreter)", "confined", ("app/calc.py", calc))
        # The test runner writes what it may (a cache, a temporary file) and nothing tracked.
        turn = yield ops.shell("python3 -c \"import tempfile; tempfile.mkstemp()\" && python3 -m unittest -q")
        obs = self.observe(turn, "shell: a run that writes a temporary file", "allowed")
        self.report.check("OK" in obs.detail, f"{self.name}: a test run writing a temporary file failed: {obs.detail}")
        # The server runs the tests itself and keeps what it saw: the verdict is a witnessed one.
        turn = yield ops.mcp("run_check", {"command": "python3 -m unittest"})
        run = result_json(turn)
        self.report.check(
            run.get("exit_code") == 0 and run.get("recorded") is True and run.get("runner") == "unittest" and run.get("failed") == 0,
            f"{self.name}: run_check did not witness a green run: {run}",
        )
        turn = yield from self.submit(
            {"verifier_used": ".code-intel/verifiers/tests.md", "passed": True, "details": "2 tests OK", "tools_used": ["run_check"], "summary": "tests pass"}
        )
        self.phase = self.response.get("phase", "?")
        # PRE_COMMIT: commands run, confined as everywhere; file tools are refused.
        calc = (self.repo / "app/calc.py").read_text()
        turn = yield ops.shell("python3 -m unittest -q")
        obs = self.observe(turn, "shell: python3 -m unittest -q", "allowed")
        self.report.check("OK" in obs.detail, f"{self.name}: the tests did not run in PRE_COMMIT: {obs.detail}")
        turn = yield ops.shell("git commit -qam sneak")
        self.observe(turn, "shell: git commit -am", "confined", ("app/calc.py", calc))
        turn = yield ops.edit_calls(self.repo, "app/calc.py", calc, calc + "# late\n")[-1]
        self.observe(turn, "edit app/calc.py", "blocked", ("app/calc.py", calc))
        turn = yield ops.mcp("review_changes", {})
        files = [f.get("file") for f in result_json(turn).get("files", [])]
        turn = yield from self.submit(
            {
                "review_prompt_used": ".code-intel/review_prompts/garbage_detection.md",
                "reviewed_files": [{"file": f, "decision": "keep", "reason": "the feature"} for f in files],
                "commit_message": "Add mul(a, b)",
                "tools_used": ["review_changes"],
                "summary": "one clean change",
            }
        )
        self.phase = self.response.get("phase", "?")
        turn = yield from self.submit({"quality_score": "9/10", "issues": [], "tools_used": [], "summary": "fine"})
        self.phase = self.response.get("phase", "?")
        turn = yield from self.submit({"summary": "merge mul"})
        self.phase = self.response.get("phase", "?")
        self.report.check(self.phase == "SESSION_COMPLETE", f"{self.name}: the session ended in {self.response}")
        yield Say("Done: mul(a, b) is merged.")


def session_start_seen(client, server, phase: str) -> bool:
    """Whether the model saw the SessionStart hook's text naming `phase`."""
    return any(phase in (client.session_start_text(t) or "") for t in server.turns)


def run_client(name: str, bin_dir: Path, report: Report) -> None:
    ops = __import__(name)
    repo = make_repo(bin_dir)
    ops.prepare(repo)
    agent = SessionAgent(name, ops, repo, report)
    run = ops.run(repo, ops.procedure_prompt("code", REQUEST), agent.run(), bin_dir=bin_dir)
    report.check(run.server.error is None, f"{name}: {run.server.error}")
    report.check(run.returncode == 0, f"{name}: exit {run.returncode}: {run.stderr[-2000:]}")
    # The procedure reached the model as its text, with the request in it.
    first = json.dumps(run.server.turns[0].request) if run.server.turns else ""
    expanded = "start_session" in first and REQUEST in first and "CRITICAL RULES" in first
    report.observations.append(
        Observation(name, "-", f"{ops.procedure_prompt('code', '…')} expands to the procedure", "ok", "ok" if expanded else "failed")
    )
    report.check("unknown format" not in run.stderr, f"{name}: schema warnings: {run.stderr[-1000:]}")
    merged = git(repo, "show", "main:app/calc.py")
    report.check("def mul" in merged, f"{name}: main has no mul after MERGE")
    tests = subprocess.run(["python3", "-m", "unittest", "-q"], cwd=repo, capture_output=True, text=True)
    report.check(tests.returncode == 0, f"{name}: the merged tests fail: {tests.stderr[-500:]}")

    # SessionStart: a new client session, a resumed one (and a compaction, where the client
    # can be made to compact) put the active phase in front of the model.
    repo2 = make_repo(bin_dir)
    ops.prepare(repo2)

    def start_only():
        turn = yield ops.mcp("start_session", {"intent": "IMPLEMENT", "query": REQUEST, "no_doc_research": True, "repo_path": "."})
        yield Say("started")

    first_run = ops.run(repo2, "start a session", start_only(), bin_dir=bin_dir)
    report.check(first_run.returncode == 0, f"{name}: start-only run failed: {first_run.stderr[-1000:]}")

    def just_say(prelude):
        for call in prelude:
            yield call
        yield Say("ok")

    report.observations.append(
        Observation(
            name,
            "QUERY_FRAME",
            "SessionStart (startup)",
            "ok",
            "ok" if session_start_seen(ops, ops.run(repo2, "where are we?", just_say([]), bin_dir=bin_dir).server, "QUERY_FRAME") else "missing",
        )
    )
    for source, kwargs, prelude in ops.session_start_variants(first_run):
        again = ops.run(repo2, "where are we?", just_say(prelude), bin_dir=bin_dir, **kwargs)
        seen = session_start_seen(ops, again.server, "QUERY_FRAME")
        report.observations.append(
            Observation(name, "QUERY_FRAME", f"SessionStart ({source})", "ok", "ok" if seen else "missing", "")
        )

    # The project's test runners, through the client's shell, in the kernel sandbox.
    runners = make_runner_repo(bin_dir)
    ops.prepare(runners)
    before = git(runners, "status", "--porcelain", "--untracked-files=no") + git(runners, "rev-parse", "HEAD")
    runner_agent = SessionAgent(name, ops, runners, report)

    def run_runners():
        turn = yield ops.mcp("start_session", {"intent": "IMPLEMENT", "query": REQUEST, "no_doc_research": True, "repo_path": "."})
        runner_agent.phase = result_json(turn).get("phase", "?")
        for label, command, marker in RUNNERS:
            turn = yield ops.shell(command)
            obs = runner_agent.observe(turn, f"shell: {label}", "allowed")
            text = turn.results[-1].text if turn.results else ""
            if marker not in text:
                obs.outcome = "failed"
                obs.detail = text[-300:]
        yield Say("the tests ran")

    # Claude Code's runs use a home of their own: the toolchain is found through these.
    env = {k: os.environ.get(k, str(Path.home() / d)) for k, d in (("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo"))}
    ran = ops.run(runners, "run the tests", run_runners(), bin_dir=bin_dir, env=env)
    report.check(ran.returncode == 0, f"{name}: the runners' run failed: {ran.stderr[-1000:]}")
    after = git(runners, "status", "--porcelain", "--untracked-files=no") + git(runners, "rev-parse", "HEAD")
    report.check(before == after, f"{name}: the test runs changed tracked files: {before!r} -> {after!r}")

    # A hook this binary does not know (hooks from a newer init): the tool still runs.
    hooks_file = repo / ops.HOOKS_FILE
    original = hooks_file.read_text()
    hooks_file.write_text(original.replace("pre-tool-use\"", "future-pre-tool-use\""))

    def shell_runs():
        turn = yield ops.shell("echo still-runs")
        yield Say(turn.results[-1].text if turn.results else "")

    unknown = ops.run(repo, "say hello", shell_runs(), bin_dir=bin_dir)
    last = unknown.server.turns[-1].results[-1] if unknown.server.turns and unknown.server.turns[-1].results else None
    runs = last is not None and not ops.was_blocked(last) and "still-runs" in last.text
    report.observations.append(
        Observation(name, "SESSION_COMPLETE", "shell under an unknown hook name", "allowed", "allowed" if runs else "blocked", last.text[:200] if last else "")
    )
    hooks_file.write_text(original)

    # /outcome and $outcome: the procedure expands and record_outcome answers.
    def outcome():
        turn = yield ops.mcp("record_outcome", {"outcome": "success", "note": "mul merged"})
        yield Say("recorded")

    out = ops.run(repo, ops.procedure_prompt("outcome", "success"), outcome(), bin_dir=bin_dir)
    first = json.dumps(out.server.turns[0].request) if out.server.turns else ""
    answer = json.dumps(result_json(out.server.turns[-1])) if out.server.turns else ""
    ok = "record_outcome" in first and '"outcome": "success"' in answer and '"logged"' in answer
    report.observations.append(Observation(name, "SESSION_COMPLETE", "outcome procedure → record_outcome", "ok", "ok" if ok else "failed", answer[:200]))
    # The requests each client sent are logged beside its repository: kept when something failed,
    # or always with CODE_INTEL_KEEP_CLIENT_LOGS=1 (to read what the model would see).
    keep = os.environ.get("CODE_INTEL_KEEP_CLIENT_LOGS") == "1"
    if keep or report.failures or any(not o.passed for o in report.observations if o.client == name):
        print(f"{name}: the repositories and the requests the client sent are in {repo.parent} and {repo2.parent}")
    else:
        shutil.rmtree(repo.parent, ignore_errors=True)
        shutil.rmtree(repo2.parent, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    bin_dir = Path(argv[1]).resolve()
    clients = argv[2:] or ["claude", "codex"]
    # The projects the clients test build into their own target/, as a user's do (the test
    # command's CARGO_TARGET_DIR is ours).
    os.environ.pop("CARGO_TARGET_DIR", None)
    report = Report()
    for name in clients:
        try:
            run_client(name, bin_dir, report)
        except Exception:
            report.failures.append(f"{name}: {traceback.format_exc()}")
    print(f"\n{'client':<8} {'phase':<18} {'action':<48} {'expected':<9} outcome")
    for o in report.observations:
        mark = "" if o.passed else "   <-- " + o.detail[:200].replace("\n", " ")
        print(f"{o.client:<8} {o.phase:<18} {o.action:<48} {o.expected:<9} {o.outcome}{mark}")
    failed_obs = [o for o in report.observations if not o.passed]
    for f in report.failures:
        print(f"FAIL {f}")
    passed = sum(o.passed for o in report.observations)
    failed = len(failed_obs) + len(report.failures)
    print(f"clients: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
