"""The real Claude Code CLI (npm `@anthropic-ai/claude-code` 2.1.330) against the scripted model.

Claude Code talks to the Anthropic Messages API: `POST {ANTHROPIC_BASE_URL}/v1/messages?beta=true`
with `stream: true`, answered as server-sent events (message_start, content_block_start/delta/
stop, message_delta, message_stop). `run()` gives it an isolated HOME and CLAUDE_CONFIG_DIR, a
dummy API key and our ModelServer as the base URL: it then connects to nothing else (checked
with strace: its only socket is to the ModelServer).

What 2.1.330 shows the model (model `claude-opus-5-5`):
  - `tools`: Agent, Bash, Edit, ListAgents, Read, ReportFindings, ScheduleWakeup, Skill,
    ToolSearch, Workflow, Write, DeferredToolPlaceholder (no MultiEdit);
  - deferred tools (NotebookEdit, WebFetch, ..., and every MCP tool `mcp__<server>__<tool>`) are
    only named in a `role: "system"` message after the user's prompt, which also carries the
    environment and the SessionStart hook output. A deferred tool becomes callable once a
    `ToolSearch {"query": "select:<name>", "max_results": N}` returned a `tool_reference` for it;
    the adapter makes that call itself (see ClaudeAdapter), so agents just call the tool.
  - a project command `/code <request>` becomes two user text blocks: "<command-message>code
    </command-message>\n<command-name>/code</command-name>\n<command-args><request></command-args>"
    and the body of .claude/commands/code.md (front matter dropped, $ARGUMENTS filled in).

Where the hooks' words end up: session_start_texts() and blocked() / block_reason() below.
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

try:  # run as tests/clients/claude.py or imported as a package module
    from .scripted import Action, Call, ModelServer, Reply, Say, ToolResult, Turn
except ImportError:  # pragma: no cover
    from scripted import Action, Call, ModelServer, Reply, Say, ToolResult, Turn

# scripts/clients.sh installs the pinned release and names it here.
CLAUDE = Path(os.environ.get("CODE_INTEL_CLAUDE")
              or Path.home() / ".cache/git-code-intel/clients/claude-code/node_modules/.bin/claude")
SERVER = "code-intel"


# --- neutral operations -------------------------------------------------------------------

def mcp(tool: str, args: dict, server: str = SERVER) -> Call:
    """An MCP tool call; the adapter loads it through ToolSearch first when it is deferred."""
    return Call(f"mcp__{server}__{tool}", args)


def shell(cmd: str) -> Call:
    return Call("Bash", {"command": cmd, "description": "scripted command"})


def write_file(path: str, content: str) -> Call:
    """Write. A repo-relative path is made absolute by the adapter, as the model is told to
    (2.1.330 accepts a relative one too, and hands it to the PreToolUse hook as given)."""
    return Call("Write", {"file_path": path, "content": content})


def edit_file(path: str, old: str, new: str) -> Call:
    """Edit (path as for write_file). The adapter Reads the file first, invisibly: see
    ClaudeAdapter for why."""
    return Call("Edit", {"file_path": path, "old_string": old, "new_string": new})


def read_file(path: str) -> Call:
    return Call("Read", {"file_path": path})


def notebook_edit(path: str, cell_source: str, cell_id: Optional[str] = None, mode: str = "replace") -> Call:
    """NotebookEdit of an existing .ipynb: replace cell `cell_id`, or with mode="insert" add a
    code cell after it. Deferred and read-first: the adapter sends ToolSearch and Read first."""
    args = {"notebook_path": path, "new_source": cell_source, "edit_mode": mode}
    if cell_id is not None:
        args["cell_id"] = cell_id
    if mode == "insert":
        args["cell_type"] = "code"
    return Call("NotebookEdit", args)


# --- the wire format ----------------------------------------------------------------------

def _text_of(content) -> str:
    """Text of a message / tool_result content: a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "" if content is None else json.dumps(content)


def _blocks(message: dict) -> list:
    c = message.get("content")
    return [{"type": "text", "text": c}] if isinstance(c, str) else (c or [])


def _json(status: int, obj) -> Reply:
    return (status, {"Content-Type": "application/json"}, json.dumps(obj).encode())


def _sse(events: list[dict]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def message_reply(request: dict, content: list[dict], input_tokens: int = 100) -> Reply:
    """A complete assistant message with `content` (text / tool_use blocks), streamed as SSE
    when the request asked for a stream, one JSON body otherwise."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    usage = {"input_tokens": input_tokens, "output_tokens": 10, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    msg = {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
           "model": request.get("model", "claude"), "content": content, "stop_reason": stop,
           "stop_sequence": None, "usage": usage}
    if not request.get("stream"):
        return _json(200, msg)
    events = [{"type": "message_start", "message": {**msg, "content": [], "stop_reason": None,
                                                    "usage": {**usage, "output_tokens": 1}}}]
    for i, block in enumerate(content):
        if block["type"] == "text":
            events += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": block["text"]}}]
        else:  # tool_use: the input arrives as JSON text in deltas
            events += [{"type": "content_block_start", "index": i,
                        "content_block": {**block, "input": {}}},
                       {"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}}]
        events.append({"type": "content_block_stop", "index": i})
    events += [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10}},
               {"type": "message_stop"}]
    return (200, {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}, _sse(events))


# Claude Code asks for a summary when it compacts (`/compact`, or auto-compaction when the last
# response's usage says the context is nearly full). The request is the main conversation plus a
# last user message with this instruction (2.1.330 has three variants: "of the conversation so
# far", "of this conversation", "of the RECENT portion"); `tools` are still sent, so they cannot
# tell it apart.
_COMPACT_MARK = "Your task is to create a detailed summary of"
# Text Claude Code puts beside a ToolSearch result; it belongs to the adapter's hidden call.
_TOOL_LOADED = "Tool loaded."
# Usage reported with the reply before which the agent asked for a compaction: over the
# auto-compact threshold of the 1M-token window of claude-opus-5-5 (967k in 2.1.330, as its
# debug log says), but not so far that it warns "compaction cannot help".
COMPACT_TOKENS = 970_000
COMPACT = "__compact__"
DEFAULT_SUMMARY = ("<analysis>scripted</analysis>\n<summary>SCRIPTED SUMMARY: the session so far was driven "
                   "by a scripted agent.</summary>")


def compact() -> Call:
    """Make Claude Code compact its context before its next model request, within the run.

    The adapter answers with a hidden ToolSearch whose usage reports COMPACT_TOKENS; Claude Code
    then auto-compacts (a summary request, answered by the adapter with `summary`), runs the
    SessionStart hooks with source "compact", and sends the compacted conversation: that request
    is the Turn the agent gets back (see session_start_texts())."""
    return Call(COMPACT, {})


def side_request(req: dict) -> Optional[str]:
    """Why `req` is a side request the adapter answers itself, or None for an agent turn.

    In `-p` mode 2.1.330 sends no title, topic or quota requests at all (checked: a plain run
    is one request per model turn). What remains:
      - "compaction": the summary request (see _COMPACT_MARK), told by its last user message;
      - "tool-less": a request without `tools`: every agent turn offers tools, while Claude
        Code's helper queries (titles, summaries, ...) in other modes send none.
    """
    msgs = req.get("messages") or []
    if msgs and msgs[-1].get("role") == "user" and _COMPACT_MARK in _text_of(msgs[-1].get("content")):
        return "compaction"
    if not req.get("tools"):
        return "tool-less"
    return None


class ClaudeAdapter:
    """Reads Claude Code's Messages requests into Turns and renders Actions as SSE messages.

    Some calls the agent never sees:
      - a ToolSearch that loads a deferred tool the agent called (MCP tools, NotebookEdit);
      - a Read before an Edit, Write or NotebookEdit of an existing file. NotebookEdit refuses a
        file not Read in the session ("File has not been read yet. Read it first before writing
        to it.", before any PreToolUse hook runs). Edit and Write have the same rule behind
        feature flags that are off in this offline set-up (both worked unread here), and the
        model is told to Read first: reading first keeps the runs independent of those flags
        and like a real model's.
    The adapter sends the helper first with the agent's call pending, answers the next request
    with the call without asking the agent, and leaves the helper's result out of what the
    agent gets. Results and text that arrive with a hidden result or with a compaction request
    are carried into the agent's next Turn.
    """

    def __init__(self, repo: Path, summary: str = DEFAULT_SUMMARY):
        self.repo = Path(repo).resolve()
        self.summary = summary                  # the answer to compaction requests
        self.side: list[tuple[str, str]] = []   # (method path, why) of requests answered here
        self.compactions: list[dict] = []       # the compaction requests answered
        self.session_ids: list[str] = []        # X-Claude-Code-Session-Id headers seen
        self._pending: Optional[Call] = None    # the agent's call, waiting for its helpers
        self._helped: set[str] = set()          # helpers already sent for the pending call
        self._hidden: set[str] = set()          # tool_use ids of the adapter's own calls
        self._carry_results: list[ToolResult] = []
        self._carry_text: list[str] = []
        self._delivered: set[str] = set()       # tool_use ids whose results the agent had
        self._compacted = False                 # a compaction was answered since the last Turn

    # - reading -

    def handle(self, method: str, path: str, headers: dict, body: bytes):
        route = path.split("?")[0].rstrip("/")
        sid = {k.lower(): v for k, v in headers.items()}.get("x-claude-code-session-id")
        if sid and sid not in self.session_ids:
            self.session_ids.append(sid)
        if method == "POST" and route.endswith("/v1/messages/count_tokens"):
            self.side.append((f"{method} {path}", "token count"))
            return _json(200, {"input_tokens": 1000})
        if method != "POST" or not route.endswith("/v1/messages"):
            self.side.append((f"{method} {path}", "not a model request"))
            return _json(200, {"data": [], "has_more": False})
        req = json.loads(body)
        kind = side_request(req)
        if kind == "compaction":
            # Results it carries that the agent has not had (a call made just before) are in no
            # later request: the compacted conversation replaces them with the summary.
            self._carry_results += self._turn(req).results
            self.compactions.append(req)
            self._compacted = True
        if kind:
            self.side.append((f"{method} {path}", kind))
            return message_reply(req, [{"type": "text", "text": self.summary if kind == "compaction" else "ok"}])
        turn = self._turn(req, whole=self._compacted)
        if self._pending:  # the agent's call waits for a helper's result: send the next step
            self._compacted = False  # what this request showed is carried from here on
            self._carry_results += turn.results
            self._carry_text += [turn.user_text] if turn.user_text else []
            call, helper = self._pending, self._helper(turn, self._pending)
            if helper:
                return self._emit(req, helper, hidden=True)
            self._pending = None
            return self._emit(req, call)
        turn.results = self._carry_results + turn.results
        turn.user_text = "\n\n".join([*self._carry_text, *([turn.user_text] if turn.user_text else [])])
        self._carry_results, self._carry_text, self._compacted = [], [], False
        self._delivered.update(r.call_id for r in turn.results)
        return turn

    def _turn(self, req: dict, whole: bool = False) -> Turn:
        """What is new to the model: everything after its last message (tool results, and the
        user-role and system-role messages: prompt, system-reminders, hook context); after a
        compaction the whole compacted conversation (summary, SessionStart context, restored
        files). Results the agent already had, and those of the adapter's own calls, are left
        out."""
        msgs = req.get("messages", [])
        last_model = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
        names = {b.get("id"): b.get("name", "") for m in msgs if m.get("role") == "assistant"
                 for b in _blocks(m) if b.get("type") == "tool_use"}
        results, texts = [], []
        for m in msgs if whole else msgs[last_model + 1:]:
            if m.get("role") == "assistant":
                continue
            helper_result = False
            for b in _blocks(m):
                if b.get("type") == "tool_result":
                    call_id = b.get("tool_use_id", "")
                    helper_result = call_id in self._hidden
                    if not helper_result and call_id not in self._delivered:
                        results.append(ToolResult(call_id, names.get(call_id, ""), _text_of(b.get("content")),
                                                  bool(b.get("is_error"))))
                elif b.get("type") == "text" and b.get("text", "").strip() and \
                        not (helper_result and b["text"].strip() == _TOOL_LOADED):
                    texts.append(b["text"])
        return Turn(tools=[t.get("name", t.get("type", "?")) for t in req.get("tools", [])], results=results,
                    user_text="\n\n".join(texts), system=_text_of(req.get("system", "")), request=req)

    # - rendering -

    def render(self, turn: Turn, action: Action) -> Reply:
        if isinstance(action, Say):
            return message_reply(turn.request, [{"type": "text", "text": action.text}])
        if action.name == COMPACT:
            return self._emit(turn.request, Call("ToolSearch", {"query": "select:Read", "max_results": 1}),
                              hidden=True, input_tokens=COMPACT_TOKENS)
        call, self._helped = self._absolute(action), set()
        helper = self._helper(turn, call)
        if helper:
            self._pending = call
            return self._emit(turn.request, helper, hidden=True)
        return self._emit(turn.request, call)

    def _emit(self, req: dict, call: Call, hidden: bool = False, input_tokens: int = 100) -> Reply:
        call_id = "toolu_" + uuid.uuid4().hex[:24]
        if hidden:
            self._hidden.add(call_id)
        return message_reply(req, [{"type": "tool_use", "id": call_id, "name": call.name, "input": call.input}],
                             input_tokens)

    def _helper(self, turn: Turn, call: Call) -> Optional[Call]:
        """The next hidden call `call` needs in this request, each kind at most once per call
        (a tool that ToolSearch cannot load is then called anyway: the agent sees the error)."""
        if "search" not in self._helped and call.name not in loaded_tools(turn.request):
            self._helped.add("search")
            return Call("ToolSearch", {"query": f"select:{call.name}", "max_results": 5})
        path = call.input.get("file_path") or call.input.get("notebook_path") if isinstance(call.input, dict) else None
        if "read" not in self._helped and call.name in ("Edit", "Write", "NotebookEdit") and path \
                and Path(path).is_file():
            # Read every time rather than tracking Claude Code's read state: a Bash command or a
            # hook may have changed the file since, which makes Claude Code refuse it again.
            self._helped.add("read")
            return Call("Read", {"file_path": path})
        return None

    def _absolute(self, call: Call) -> Call:
        """File tools require absolute paths (a relative one is refused by input validation):
        the agents' repo-relative paths are made absolute against the repo."""
        if not isinstance(call.input, dict):
            return call
        args = dict(call.input)
        for key in ("file_path", "notebook_path"):
            if isinstance(args.get(key), str) and not os.path.isabs(args[key]):
                args[key] = str(self.repo / args[key])
        return Call(call.name, args)


def loaded_tools(request: dict) -> set[str]:
    """Tools the model may call in `request`. A deferred tool (an MCP tool, NotebookEdit, ...)
    is only named in a system-role message until a ToolSearch loads it; from then on Claude Code
    lists it in `tools` with `defer_loading: true`, and the API shows the model its schema
    because a `tool_reference` block for it (ToolSearch's result) is in the conversation. A
    compaction drops those references (Claude Code logs "Filtering out tool_reference for
    unavailable tool"), so the tool must be searched for again."""
    referenced = {c.get("tool_name") for m in request.get("messages", []) for b in _blocks(m)
                  if b.get("type") == "tool_result" and isinstance(b.get("content"), list)
                  for c in b["content"] if isinstance(c, dict) and c.get("type") == "tool_reference"}
    return {t.get("name") for t in request.get("tools", [])
            if not t.get("defer_loading") or t.get("name") in referenced}


# --- what the model saw -------------------------------------------------------------------

# A SessionStart hook's plain stdout reaches the model as "SessionStart:<source> hook success:
# <stdout>" at the start of a text block of a `role: "system"` message (the one after the user's
# prompt at startup/resume, the one after the summary after a compaction). Claude Code joins
# its other context into the same block with blank lines: these are the starts of those seen
# in 2.1.330 (a hook output with a blank line followed by one of them would be cut there). Two
# more facts: an output identical to one still in the conversation is not added again (a resume
# right after a compaction with the same phase text shows only the "compact" one), and an
# output over 10,000 characters is replaced by "<persisted-output>Output too large (…KB). Full
# output saved to: <file>" and a 2 KB preview.
_HARNESS_SECTIONS = ("\n\n# Environment\n", "\n\nThe following deferred tools are now available",
                     "\n\nAvailable agent types for the Agent tool", "\n\nThe following skills are available",
                     "\n\nWhile bypass permissions mode is active", "\n\nToday's date is ", "\n\nSessionStart:")
_SESSION_START = re.compile(r"SessionStart:(startup|resume|clear|compact) hook success: ")


def session_start_texts(turn_or_request) -> dict[str, str]:
    """{source: text} of every SessionStart hook output the model sees in this request (source
    is startup, resume, clear or compact); the text is the hook's stdout, stripped. A hook that
    printed nothing adds nothing."""
    req = turn_or_request.request if isinstance(turn_or_request, Turn) else turn_or_request
    out = {}
    for m in req.get("messages", []):
        for b in _blocks(m):
            text = b.get("text", "") if b.get("type") == "text" else ""
            for hit in _SESSION_START.finditer(text):
                rest = text[hit.end():]
                ends = [i for i in (rest.find(s) for s in _HARNESS_SECTIONS) if i >= 0]
                out[hit.group(1)] = rest[:min(ends)].strip() if ends else rest.strip()
    return out


def session_start_text(turn_or_request, source: Optional[str] = None) -> Optional[str]:
    """The SessionStart text of `source` (any source when None) the model sees, or None."""
    texts = session_start_texts(turn_or_request)
    if source:
        return texts.get(source)
    return next(iter(texts.values()), None)


# A PreToolUse hook that exits 2 makes the call's tool_result (is_error: true) read
# "PreToolUse:<Tool> hook error: [<hook command>]: <the hook's stderr>\n" (with "No stderr output"
# for an empty stderr). The label's pattern is Claude Code's own, without its check that no "]: "
# follows (which a reason naming a path in brackets would fail).
_BLOCK = re.compile(r"^PreToolUse:\S+ hook error: \[(?:[^[\]]|\[[^[\]]*\])*\]: ")


def blocked(result: ToolResult) -> bool:
    """Whether `result` is Claude Code's report of a PreToolUse hook block."""
    return result.is_error and bool(_BLOCK.match(result.text))


def block_reason(result: ToolResult) -> Optional[str]:
    """The blocking hook's stderr, as the model got it; None when `result` is no block."""
    m = _BLOCK.match(result.text)
    return result.text[m.end():].strip() if m and result.is_error else None


# --- running Claude Code ------------------------------------------------------------------

@dataclass
class RunResult:
    returncode: int
    stdout: str
    stderr: str
    session_id: Optional[str]
    server: ModelServer
    debug_log: Optional[Path] = None  # Claude Code's --debug-file: hooks, MCP, warnings

    def result(self) -> dict:
        """The `--output-format json` result object (empty when Claude Code printed none)."""
        for line in reversed(self.stdout.splitlines()):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and obj.get("type") == "result":
                return obj
        return {}

    def debug(self) -> str:
        return self.debug_log.read_text(errors="replace") if self.debug_log and self.debug_log.exists() else ""


def home_for(repo: Path) -> Path:
    """One HOME (with CLAUDE_CONFIG_DIR inside) per test repo, beside it, so that a later
    `resume=` run finds the session transcript under it."""
    return repo.parent / f".claude-home-{repo.name}"


def approve_mcp(repo: Path, servers=(SERVER,)) -> None:
    """Approve the project's .mcp.json servers in .claude/settings.local.json, as the trust
    dialog does. (In `-p` mode 2.1.330 also starts a server that is neither approved nor
    rejected; one in `disabledMcpjsonServers` it does not start.)"""
    path = Path(repo) / ".claude/settings.local.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings["enabledMcpjsonServers"] = sorted(set(settings.get("enabledMcpjsonServers", [])) | set(servers))
    path.write_text(json.dumps(settings, indent=2) + "\n")


def claude_env(home: Path, base_url: str, bin_dir: Optional[Path]) -> dict:
    """The machine's environment without anything of Claude's or Anthropic's, plus ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE", "OTEL_"))}
    path = os.environ.get("PATH", "")
    env.update({
        "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-ant-scripted",
        "IS_SANDBOX": "1",  # --dangerously-skip-permissions refuses to run as root otherwise
        # Nothing but model requests leaves the process: no update checks, telemetry, error
        # reports, surveys.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        # A request the adapter cannot answer (HTTP 500) fails the run at once instead of after
        # minutes of retries with back-off.
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "PATH": f"{bin_dir}{os.pathsep}{path}" if bin_dir else path,
        "NO_COLOR": "1",
    })
    return env


def run(repo: Path, prompt: str, agent, *, bin_dir: Optional[Path], env: dict | None = None,
        resume: str | None = None, timeout: float = 240, home: Path | None = None,
        log_dir: Path | None = None, summary: str = DEFAULT_SUMMARY, extra_args: tuple = ()) -> RunResult:
    """Run `claude -p <prompt>` in `repo` against the scripted `agent`.

    `resume`: a session id (RunResult.session_id of an earlier run with the same `home`); the
    SessionStart hook then runs with source "resume". `prompt="/compact"` with `resume` compacts
    the session and ends: one compaction request (answered with `summary`), no agent turn; the
    SessionStart "compact" text is in the conversation the next resumed run sends. Within a run,
    the agent yields compact() instead. A project command is run as its prompt ("/code ...").
    """
    repo = Path(repo).resolve()
    home = Path(home or home_for(repo))
    (home / ".claude").mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex[:8]
    log_dir = Path(log_dir or home / "requests" / run_id)
    debug_log = home / f"debug-{run_id}.log"
    server = ModelServer(ClaudeAdapter(repo, summary), agent, log_dir).start()
    try:
        full_env = claude_env(home, server.base_url, bin_dir)
        full_env.update(env or {})
        cmd = [str(CLAUDE), "-p", prompt, "--dangerously-skip-permissions", "--output-format", "json",
               "--debug-file", str(debug_log), *(["--resume", resume] if resume else []), *extra_args]
        # Its own process group, so that a timeout also ends the MCP server and hooks it started.
        p = subprocess.Popen(cmd, cwd=repo, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
            code = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            err += f"\n[claude timed out after {timeout}s]"
            code = -1
        r = RunResult(code, out, err, None, server, debug_log)
        # The result line names the session; a run that died before printing it still sent it
        # in every request's X-Claude-Code-Session-Id.
        r.session_id = r.result().get("session_id") or next(iter(server.adapter.session_ids[-1:]), None)
        return r
    finally:
        server.stop()


# --- what suite.py asks of a client module -------------------------------------------------

# Where `git code-intel init` puts this client's hooks.
HOOKS_FILE = ".claude/settings.json"

def prepare(repo: Path) -> None:
    """The user's one-time step: the project's MCP server approved."""
    approve_mcp(repo)


def path_for(repo: Path, rel: str) -> str:
    """Claude Code's file tools are told to take absolute paths."""
    return str(Path(repo).resolve() / rel)


def procedure_prompt(name: str, text: str) -> str:
    """A project command (.claude/commands/<name>.md) as the user types it."""
    return f"/{name} {text}"


def edit_calls(repo: Path, rel: str, old: str, new: str) -> list[Call]:
    """One Edit that turns the file's content `old` into `new` (the adapter reads it first)."""
    return [edit_file(path_for(repo, rel), old, new)]


def write_attempts(repo: Path) -> list[tuple[str, Call]]:
    """Every way this client writes app/calc.py (or a file beside it), for a phase where writes
    are refused."""
    calc = (Path(repo) / "app/calc.py").read_text()
    first = calc.splitlines()[0]
    return [
        ("Edit app/calc.py", edit_file(path_for(repo, "app/calc.py"), first, first + "  # x")),
        ("Write app/calc.py", write_file(path_for(repo, "app/calc.py"), calc + "# x\n")),
        ("Write app/extra.py (new)", write_file(path_for(repo, "app/extra.py"), "X = 1\n")),
        ("NotebookEdit notes.ipynb", notebook_edit(path_for(repo, "notes.ipynb"), "print(1)", mode="insert")),
        ("Bash: echo >> app/calc.py", shell("echo '# x' >> app/calc.py")),
        ("Bash: sed -i app/calc.py", shell("sed -i 's/a + b/b + a/' app/calc.py")),
        ("Bash: python3 -c (interpreter)", shell("python3 -c \"open('app/calc.py','a').write('# x')\"")),
    ]


def session_start_variants(first_run: "RunResult") -> list[tuple[str, dict, list]]:
    """(source, run() keyword arguments, calls the agent makes first) that make SessionStart run
    again in the first run's session: a resume, and a compaction within a resumed run."""
    return [("resume", {"resume": first_run.session_id}, []), ("compact", {"resume": first_run.session_id}, [compact()])]


was_blocked = blocked
