"""The real Codex CLI (npm `@openai/codex` 0.169) against the scripted model of scripted.py.

Codex talks to its model provider over the OpenAI Responses API: `POST {base_url}/responses`
with `stream: true`, answered as server-sent events. `run()` points an isolated CODEX_HOME at a
provider whose base_url is our ModelServer, so Codex runs fully offline and every request it
sends is one the scripted agent answers (or a side request we answer ourselves).

What Codex 0.169 offers the model (model `gpt-5.5`: the one bundled model that is not
"code_mode_only", so its tools are plain function tools):
  - the shell is the function tool `exec_command` {"cmd": "..."} (unified exec);
  - `apply_patch` is a freeform (`custom`) tool: the call carries the raw patch text;
  - MCP tools are not in `tools` at first: they are deferred behind the built-in `tool_search`,
    whose output loads them as a namespace `mcp__<server>` (made model-safe: `code-intel` ->
    `mcp__code_intel`) of function tools. `mcp()` calls search first when needed (see
    CodexAdapter), so an agent just calls `mcp("start_session", {...})`.

Hook facts (docs/CLIENTS.md): hooks live in `<repo>/.codex/hooks.json`; a SessionStart
hook's stdout becomes a `developer` message in the new input (`session_start_context`); a
PreToolUse block replaces the blocked call's output text (`block_reason`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

try:  # run as tests/clients/codex.py or imported as a package module
    from .scripted import Action, Call, ModelServer, Reply, Say, ToolResult, Turn
except ImportError:  # pragma: no cover
    from scripted import Action, Call, ModelServer, Reply, Say, ToolResult, Turn

# The pinned release scripts/clients.sh installs (it exports CODE_INTEL_CODEX).
CODEX = Path(os.environ.get("CODE_INTEL_CODEX") or Path(
    os.environ.get("CODE_INTEL_CLIENTS_DIR") or Path.home() / ".cache/git-code-intel/clients")
    / "codex/node_modules/.bin/codex")
MODEL = "gpt-5.5"
PROVIDER = "scripted"
API_KEY_ENV = "SCRIPTED_API_KEY"

# A compaction request ends with this prompt; the adapter answers it with the summary.
COMPACTION_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION"
COMPACTION_SUMMARY = "Scripted compaction summary: the work so far is in the repository."
# After a compaction Codex rebuilds the history; the summary comes as a user message starting so.
SUMMARY_PREFIX = "Another language model started to solve this problem"

# Items the model produced in an earlier turn (Codex replays them in `input`), and the results.
_MODEL_ITEMS = {"function_call", "custom_tool_call", "reasoning", "local_shell_call", "tool_search_call"}
_OUTPUT_ITEMS = {"function_call_output", "custom_tool_call_output", "tool_search_output"}


# --- neutral operations -------------------------------------------------------------------

def mcp(tool: str, args: dict, server: str = "code-intel") -> Call:
    """An MCP tool call. The adapter finds the tool as the request offers it (`mcp__code_intel__…`),
    loading it with a hidden tool_search first if it is still deferred."""
    return Call(f"mcp__{server}__{tool}", args)


def tool_search(query: str, limit: int = 8) -> Call:
    """Codex's built-in `tool_search`, which loads deferred (MCP) tools; the Turn after it has a
    ToolResult named "tool_search" (the found tools as JSON) and `tool_schema()` sees them."""
    return Call("tool_search", {"query": query, "limit": limit})


def shell(cmd: str) -> Call:
    """A shell command through Codex's `exec_command` (unified exec, a PTY)."""
    return Call("exec_command", {"cmd": cmd, "yield_time_ms": 10000})


def apply_patch(text: str) -> Call:
    """A raw `*** Begin Patch` ... `*** End Patch` text for the freeform apply_patch tool."""
    if not text.endswith("\n"):
        text += "\n"
    return Call("apply_patch", text)


def _patch(*hunks: str) -> Call:
    return apply_patch("*** Begin Patch\n" + "".join(hunks) + "*** End Patch\n")


def _lines(prefix: str, text: str) -> str:
    return "".join(f"{prefix}{line}\n" for line in text.splitlines())


def write_file(path: str, content: str) -> Call:
    return _patch(f"*** Add File: {path}\n" + _lines("+", content))


def edit_file(path: str, old: str, new: str) -> Call:
    """Replace the lines `old` with `new` (whole lines; apply_patch finds `old` by content)."""
    return _patch(f"*** Update File: {path}\n@@\n" + _lines("-", old) + _lines("+", new))


def delete_file(path: str) -> Call:
    return _patch(f"*** Delete File: {path}\n")


def move_file(path: str, to: str, old: str, new: str) -> Call:
    return _patch(f"*** Update File: {path}\n*** Move to: {to}\n@@\n" + _lines("-", old) + _lines("+", new))


# --- the wire format ----------------------------------------------------------------------

def _text_of(content) -> str:
    """Text of a message content / tool output: a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else json.dumps(content)


def _joined(namespace: str, member: str) -> str:
    """`mcp__code-intel` + `start_session` -> `mcp__code-intel__start_session`."""
    return namespace + member if namespace.endswith("_") else f"{namespace}__{member}"


def _norm(name: str) -> str:
    """Codex makes MCP names model-safe: server `code-intel` becomes namespace `mcp__code_intel`."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _lookup(offered: dict, name: str) -> Optional[str]:
    """The offered tool name `name` refers to, exactly or once made model-safe."""
    if name in offered:
        return name
    return next((k for k in offered if _norm(k) == _norm(name)), None)


def _offered(req: dict) -> dict[str, Optional[tuple[str, str]]]:
    """Every tool the model may call in this request: full name -> (namespace, member) or None.

    That is the request's `tools` plus what earlier `tool_search` calls loaded: Codex 0.169
    defers MCP tools behind `tool_search` and replays the found ones in `tool_search_output`
    items, as namespaces (`mcp__<server>`) of function tools."""
    out: dict[str, Optional[tuple[str, str]]] = {}
    found = [t for it in req.get("input", []) if it.get("type") == "tool_search_output" for t in it.get("tools", [])]
    for t in req.get("tools", []) + found:
        if t.get("type") == "namespace":
            for sub in t.get("tools", []):
                out[_joined(t["name"], sub["name"])] = (t["name"], sub["name"])
        else:
            out[t.get("name") or t.get("type", "?")] = None  # web_search, tool_search have no name
    return out


def tool_schema(turn: Turn, name: str) -> Optional[dict]:
    """The JSON schema of tool `name` (full name, e.g. `mcp__code-intel__start_session`) as
    this request offers it, directly or as loaded by an earlier tool_search; None if absent."""
    req = turn.request
    found = [t for it in req.get("input", []) if it.get("type") == "tool_search_output" for t in it.get("tools", [])]
    for t in req.get("tools", []) + found:
        for sub in t.get("tools", []) if t.get("type") == "namespace" else []:
            if _norm(_joined(t["name"], sub["name"])) == _norm(name):
                return sub.get("parameters")
        if t.get("name") and _norm(t["name"]) == _norm(name):
            return t.get("parameters")
    return None


def request_kind(headers: dict) -> str:
    """Codex labels each request in `x-codex-turn-metadata` ("turn", or e.g. a compaction)."""
    raw = {k.lower(): v for k, v in headers.items()}.get("x-codex-turn-metadata", "")
    try:
        return json.loads(raw).get("request_kind", "")
    except ValueError:
        return ""


def _sse(events: list[dict]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


class CodexAdapter:
    """Reads Codex's Responses requests into Turns and renders Actions as an SSE response.

    Side requests, answered here without the agent:
      - anything but `POST .../responses` (e.g. `GET /v1/models`): an empty JSON list;
      - a compaction (`x-codex-turn-metadata` says `"request_kind":"compaction"`; no tools; its
        last user message is Codex's "You are performing a CONTEXT CHECKPOINT COMPACTION..."):
        answered with a fixed summary, counted in `compactions`;
      - the request that brings back a `tool_search` this adapter issued on the agent's behalf:
        when the agent calls an MCP tool that is deferred (not in `tools`), we first answer with
        a `tool_search_call` for it, and on the follow-up request send the agent's real call
        (now loaded) — the agent never sees the search round trip.
    """

    def __init__(self):
        self.side: list[str] = []  # what was answered without the agent, for the test's log
        self._search: Optional[tuple[str, Call]] = None  # (tool_search call_id, the agent's call)
        self._tokens = 0  # the `usage` we report: about a token per 4 bytes of the request
        self.compactions = 0

    def handle(self, method: str, path: str, headers: dict, body: bytes):
        if method != "POST" or not path.rstrip("/").endswith("/responses"):
            self.side.append(f"{method} {path}")
            return (200, {"Content-Type": "application/json"}, b'{"object":"list","data":[],"models":[]}')
        req = json.loads(body)
        self._tokens = len(body) // 4
        turn = self._turn(req)
        if request_kind(headers) == "compaction" or COMPACTION_PROMPT in turn.user_text:
            self.compactions += 1
            self.side.append("compaction")
            return self.render(turn, Say(COMPACTION_SUMMARY))
        if self._search and any(it.get("type") == "tool_search_output" and it.get("call_id") == self._search[0]
                                for it in req.get("input", [])):
            call, self._search = self._search[1], None
            self.side.append(f"tool_search for {call.name}: sent the call")
            # Sent even if the search did not load it: Codex then answers "unsupported call".
            return self.render(turn, call, searched=True)
        return turn

    def _turn(self, req: dict) -> Turn:
        items = req.get("input", [])
        # The system prompt: the developer messages Codex puts first (base instructions,
        # permissions, skills list).
        n_system = 0
        while n_system < len(items) and items[n_system].get("type") == "message" \
                and items[n_system].get("role") == "developer":
            n_system += 1
        # Everything after the model's last output is new to it: tool results, and the
        # user/developer messages of a new turn (the prompt, AGENTS.md, hook context).
        last_model = max((i for i, it in enumerate(items) if it.get("type") in _MODEL_ITEMS
                          or (it.get("type") == "message" and it.get("role") == "assistant")), default=-1)
        names = {it.get("call_id"): _joined(it["namespace"], it.get("name", "")) if it.get("namespace")
                 else it.get("name", "tool_search" if it["type"] == "tool_search_call" else "")
                 for it in items if it.get("type") in _MODEL_ITEMS}
        results, texts = [], []
        for it in items[max(last_model + 1, n_system):]:
            kind = it.get("type")
            if kind in ("function_call_output", "custom_tool_call_output"):
                text = _text_of(it.get("output"))
                results.append(ToolResult(it.get("call_id", ""), names.get(it.get("call_id"), ""), text,
                                          _looks_failed(text)))
            elif kind == "tool_search_output":
                results.append(ToolResult(it.get("call_id", ""), "tool_search", json.dumps(it.get("tools", [])), False))
            elif kind == "message" and it.get("role") in ("user", "developer"):
                texts.append(_text_of(it.get("content")))
        return Turn(tools=list(_offered(req)), results=results, user_text="\n\n".join(texts),
                    system="\n\n".join(_text_of(it.get("content")) for it in items[:n_system]), request=req)

    def render(self, turn: Turn, action: Action, searched: bool = False) -> Reply:
        if isinstance(action, Say):
            item = {"type": "message", "role": "assistant", "id": "msg_" + uuid.uuid4().hex[:12],
                    "content": [{"type": "output_text", "text": action.text, "annotations": []}]}
        else:
            item = self._call_item(turn, action, searched)
        rid = "resp_" + uuid.uuid4().hex[:12]
        events = [
            {"type": "response.created", "response": {"id": rid}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {"id": rid, "usage": {
                "input_tokens": self._tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self._tokens + 10}}},
        ]
        return (200, {"Content-Type": "text/event-stream"}, _sse(events))

    def _call_item(self, turn: Turn, call: Call, searched: bool) -> dict:
        call_id = "call_" + uuid.uuid4().hex[:12]
        if isinstance(call.input, str):  # a freeform tool (apply_patch)
            return {"type": "custom_tool_call", "id": "ctc_" + call_id, "call_id": call_id,
                    "name": call.name, "input": call.input, "status": "completed"}
        if call.name == "tool_search":
            return {"type": "tool_search_call", "id": "tsc_" + call_id, "call_id": call_id, "execution": "client",
                    "status": "completed", "arguments": call.input}
        offered = _offered(turn.request)
        name = _lookup(offered, call.name) or call.name
        if name not in offered and name.startswith("mcp__") and "tool_search" in offered and not searched:
            # A deferred MCP tool: search for it first (see the class doc).
            self._search = (call_id, call)
            query = call.name.split("__", 2)[-1] + " " + call.name.split("__")[1]
            return {"type": "tool_search_call", "id": "tsc_" + call_id, "call_id": call_id, "execution": "client",
                    "status": "completed", "arguments": {"query": query, "limit": 8}}
        item = {"type": "function_call", "id": "fc_" + call_id, "call_id": call_id, "name": name,
                "arguments": json.dumps(call.input), "status": "completed"}
        if offered.get(name):  # a namespace member: the call names the namespace and the member
            item["namespace"], item["name"] = offered[name]
        return item


def _looks_failed(text: str) -> bool:
    """Codex sends no error flag on tool outputs (not even for an MCP `isError` result), so this
    reads the text: a non-zero exit, a hook block, an unknown tool, or git-code-intel's
    `{"success":false,...}` answer."""
    low = text.lower()
    return ("process exited with code" in low and "process exited with code 0" not in low) or \
        "blocked by pretooluse hook" in low or low.startswith(("error", "unsupported call")) or \
        '"success":false' in low.replace(" ", "")


# --- what the model saw -------------------------------------------------------------------

def session_start_context(turn: Turn) -> list[str]:
    """Texts SessionStart hooks added for this request (their plain stdout, or their JSON
    `hookSpecificOutput.additionalContext`), each a `developer` message Codex puts among the new
    input: before the prompt at startup, before the new prompt after a resume, after the
    summary after a compaction (Codex then reorders the rest of the history, so only what follows
    the summary counts). Developer messages after a tool output (a PreToolUse/PostToolUse
    additionalContext) are not counted."""
    items = turn.request.get("input", [])
    start = 0
    while start < len(items) and items[start].get("type") == "message" and items[start].get("role") == "developer":
        start += 1  # the system block
    for i, it in enumerate(items):
        if it.get("type") in _MODEL_ITEMS or (it.get("type") == "message" and it.get("role") == "assistant") \
                or (it.get("role") == "user" and _text_of(it.get("content")).startswith(SUMMARY_PREFIX)):
            start = max(start, i + 1)
    out = []
    for it in items[start:]:
        if it.get("type") in _OUTPUT_ITEMS:
            break
        if it.get("type") == "message" and it.get("role") == "developer":
            out.append(_text_of(it.get("content")))
    return out


def block_reason(result: ToolResult) -> Optional[str]:
    """The reason, when a tool result is Codex's report of a PreToolUse hook block, else None.

    Codex 0.169 replaces the blocked call's output with
      `Command blocked by PreToolUse hook: <reason>. Command: <command or patch text>` (shell,
      apply_patch) or `Tool call blocked by PreToolUse hook: <reason>. Tool: <mcp__server__tool>`."""
    for head, tail in (("Command blocked by PreToolUse hook: ", ". Command: "),
                       ("Tool call blocked by PreToolUse hook: ", ". Tool: ")):
        if result.text.startswith(head):
            rest = result.text[len(head):]
            # The command may contain anything, a tool name cannot: split where that is safe.
            cut = rest.find(tail) if tail == ". Command: " else rest.rfind(tail)
            return rest[:cut] if cut >= 0 else rest
    return None


def session_start_text(turn: Turn) -> Optional[str]:
    """All SessionStart text the model sees in this request, joined; None if there is none.
    (Codex does not label the source: after a resume plus a compaction both texts are here.)"""
    texts = [t for t in session_start_context(turn) if t.strip()]
    return "\n\n".join(texts) if texts else None


def was_blocked(result: ToolResult) -> bool:
    return block_reason(result) is not None


# --- what suite.py asks of a client module -------------------------------------------------

# Where `git code-intel init` puts this client's hooks.
HOOKS_FILE = ".codex/hooks.json"

def prepare(repo: Path) -> None:
    """Nothing beyond `git code-intel init`: run() trusts the project in its CODEX_HOME, and
    the hooks in .codex/hooks.json run under --dangerously-bypass-hook-trust."""


def path_for(repo: Path, rel: str) -> str:
    """apply_patch takes paths relative to the session's cwd (the repo)."""
    return rel


def procedure_prompt(name: str, text: str) -> str:
    """A project skill (.agents/skills/<name>/SKILL.md) invoked as the user types it: Codex adds
    the SKILL.md body as a user message after the prompt."""
    return f"${name} {text}"


def edit_calls(repo: Path, rel: str, old: str, new: str) -> list[Call]:
    """One apply_patch that turns the file's content `old` into `new`."""
    return [edit_file(rel, old, new)]


def write_attempts(repo: Path) -> list[tuple[str, Call]]:
    """Every way this client writes app/calc.py (or a file beside it), for a phase where writes
    are refused."""
    calc = (Path(repo) / "app/calc.py").read_text()
    first = calc.splitlines()[0]
    return [
        ("apply_patch: update app/calc.py", edit_file("app/calc.py", first, first + "  # x")),
        ("apply_patch: add app/extra.py", write_file("app/extra.py", "X = 1\n")),
        ("apply_patch: delete app/calc.py", delete_file("app/calc.py")),
        ("apply_patch: move app/calc.py", move_file("app/calc.py", "app/calc2.py", first, first)),
        # Codex reads a header after trimming its line: one indented by a space is still applied.
        ("apply_patch: indented header", _patch(f" *** Update File: app/calc.py\n@@\n-{first}\n+{first}  # x\n")),
        ("apply_patch: delete, indented by a tab", _patch("\t*** Delete File: app/calc.py\n")),
        ("shell: echo >> app/calc.py", shell("echo '# x' >> app/calc.py")),
        ("shell: sed -i app/calc.py", shell("sed -i 's/a + b/b + a/' app/calc.py")),
        ("shell: python3 -c (interpreter)", shell("python3 -c \"open('app/calc.py','a').write('# x')\"")),
    ]


def session_start_variants(first_run: "RunResult") -> list[tuple[str, dict, list]]:
    """run() keyword arguments that make SessionStart run again in the same repo, by source.
    With `compact_above` below what the earlier run used, Codex compacts before the resumed
    turn's first request (then both the resume and the compact text are in that request)."""
    return [("resume", {"resume": True}, []), ("compact", {"resume": True, "compact_above": 5000}, [])]


# --- running Codex ------------------------------------------------------------------------

@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    server: ModelServer

    def events(self) -> list[dict]:
        """The `--json` event stream (thread.started, item.completed, turn.completed, ...)."""
        out = []
        for line in self.stdout.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out


def codex_home_for(repo: Path) -> Path:
    """One CODEX_HOME per test repo, beside it, so a later `resume=True` run finds the session."""
    return repo.parent / f".codex-home-{repo.name}"


def write_config(home: Path, repo: Path, base_url: str, extra_toml: str = "") -> None:
    """The user config: our provider, the trusted repo, nothing that reaches the network."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f"""\
model = "{MODEL}"
model_provider = "{PROVIDER}"
check_for_update_on_startup = false

[model_providers.{PROVIDER}]
name = "{PROVIDER}"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "{API_KEY_ENV}"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[projects."{repo.resolve()}"]
trust_level = "trusted"
{extra_toml}""")


def run(repo: Path, prompt: str, agent, *, bin_dir: Path, env: dict | None = None, resume: bool = False,
        timeout: float = 240, home: Path | None = None, log_dir: Path | None = None,
        compact_above: int | None = None, extra_args: tuple = (), extra_toml: str = "") -> RunResult:
    """Run `codex exec` (or `codex exec resume --last`) in `repo` against the scripted `agent`.

    Hooks in `<repo>/.codex/hooks.json` run without per-hook trust (`--dangerously-bypass-hook-
    trust`); shell commands run unsandboxed so they can reach git and git-code-intel.
    `compact_above`: Codex auto-compacts once a response reports more tokens than this (the
    adapter reports about a token per 4 bytes of the request; Codex's first request is ~10000),
    before its next request in the turn: the compaction request is answered by the adapter, then
    SessionStart runs again with source "compact".
    """
    repo = Path(repo).resolve()
    home = home or codex_home_for(repo)
    log_dir = log_dir or home / "requests" / uuid.uuid4().hex[:8]
    server = ModelServer(CodexAdapter(), agent, log_dir).start()
    try:
        write_config(home, repo, server.base_url, extra_toml)
        full_env = dict(os.environ)
        full_env.update({"CODEX_HOME": str(home), API_KEY_ENV: "scripted",
                         "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
                         "NO_COLOR": "1", "RUST_LOG": os.environ.get("RUST_LOG", "error")})
        full_env.update(env or {})
        flags = ["--json", "--dangerously-bypass-approvals-and-sandbox", "--dangerously-bypass-hook-trust",
                 "--skip-git-repo-check", *extra_args]
        if compact_above is not None:
            flags += ["-c", f"model_auto_compact_token_limit={compact_above}"]
        cmd = [str(CODEX), "exec", *(["resume", "--last"] if resume else []), *flags, prompt]
        # Its own process group, so a timeout also ends the MCP servers and shells Codex started.
        p = subprocess.Popen(cmd, cwd=repo, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
            return RunResult(p.returncode, out, err, server)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            return RunResult(-1, out, err + f"\n[codex timed out after {timeout}s]", server)
    finally:
        server.stop()
