"""A scripted model on 127.0.0.1 for the real clients (Claude Code, Codex).

The client under test sends its model requests here instead of to a provider. Each request the
agent must answer becomes a `Turn` (the tools offered, the tool results that came back, the
latest user text); a client adapter (claude.py, codex.py) parses the wire format and renders the
agent's next `Action` back in it. The agent is a generator written client-neutrally: it yields an
Action and receives the next Turn, so a test reads as the session an agent would have.

Every request, side ones included, is kept (and written to log_dir) so a test can read what the
model would have seen.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Generator, Protocol, Union


@dataclass
class ToolResult:
    call_id: str
    name: str
    text: str
    is_error: bool


@dataclass
class Turn:
    """One model request as the agent sees it."""

    tools: list[str]
    results: list[ToolResult]
    user_text: str
    system: str
    request: dict = field(repr=False)


@dataclass
class Call:
    """A tool call. `input` is a dict for a function tool, a string for a freeform one."""

    name: str
    input: Union[dict, str]


@dataclass
class Say:
    """A final text answer: it ends the client's turn."""

    text: str


Action = Union[Call, Say]
Reply = tuple  # (status: int, headers: dict[str, str], body: bytes)
Agent = Generator[Action, Turn, None]


class Adapter(Protocol):
    def handle(self, method: str, path: str, headers: dict, body: bytes) -> Union[Turn, Reply]:
        """A Turn for a request the agent answers; a Reply for side requests."""

    def render(self, turn: Turn, action: Action) -> Reply: ...


class ModelServer:
    """Answers a client's model requests with the agent's actions, one request at a time."""

    def __init__(self, adapter: Adapter, agent: Agent, log_dir: Path):
        self.adapter = adapter
        self.agent = agent
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.turns: list[Turn] = []
        self.requests: list[tuple[str, dict]] = []
        self.error: str | None = None
        self._started = False
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self.base_url = ""

    def start(self) -> "ModelServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # the test's output stays readable
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, payload = server._answer(self.command, self.path, dict(self.headers), body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = _serve
            do_POST = _serve
            do_HEAD = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd:
            self._httpd.shutdown()
            self._httpd.server_close()

    def _answer(self, method: str, path: str, headers: dict, body: bytes) -> Reply:
        # One request at a time: a client may race side requests against the main one, and the
        # agent's script must see its turns in order.
        with self._lock:
            try:
                parsed = json.loads(body) if body else {}
            except ValueError:
                parsed = {"raw": body.decode("utf-8", "replace")}
            n = len(self.requests)
            self.requests.append((path, parsed))
            (self.log_dir / f"{n:03d}.json").write_text(json.dumps({"method": method, "path": path, "body": parsed}, indent=1))
            try:
                got = self.adapter.handle(method, path, headers, body)
            except Exception as e:  # a request the adapter cannot read is the test's failure
                self.error = f"adapter could not read {method} {path}: {e!r}"
                return (500, {"Content-Type": "application/json"}, json.dumps({"error": self.error}).encode())
            if not isinstance(got, Turn):
                return got
            self.turns.append(got)
            return self.adapter.render(got, self._next_action(got))

    def _next_action(self, turn: Turn) -> Action:
        if self.error:
            return Say("scripted agent ended")
        try:
            if not self._started:
                self._started = True
                action = next(self.agent)
            else:
                action = self.agent.send(turn)
        except StopIteration:
            self.error = "the scripted agent ended while the client still asked"
            return Say("scripted agent ended")
        except Exception as e:
            self.error = f"the scripted agent failed: {e!r}"
            return Say("scripted agent ended")
        return action


def last_result(turn: Turn, name_part: str = "") -> ToolResult | None:
    """The latest tool result in `turn` whose tool name contains `name_part`."""
    for r in reversed(turn.results):
        if name_part in r.name:
            return r
    return None
