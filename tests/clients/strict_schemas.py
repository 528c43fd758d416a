"""Every schema a client reads from us, compiled by a strict JSON Schema validator.

Ajv (the validator Claude Code uses) in strict mode, draft 2020-12, with no format plugins: an
unknown keyword, an unknown `format` ("uint8"), or anything else strict mode rejects fails the
compile. Checked: every tool's inputSchema and outputSchema from tools/list, and the
expected_payload_schema of the phase a fresh session starts in.

Usage: python3 tests/clients/strict_schemas.py <git-code-intel binary> <ajv package dir>
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = r"""
const Ajv2020 = require(process.argv[1] + "/node_modules/ajv/dist/2020").default;
const schemas = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
let failed = 0;
for (const [where, schema] of schemas) {
  const ajv = new Ajv2020({ strict: true, logger: { log() {}, warn(m) { throw new Error(m); }, error(m) { throw new Error(m); } } });
  try { ajv.compile(schema); } catch (e) { failed++; console.log(`${where}: ${e.message}`); }
}
console.log(`strict schemas: ${schemas.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
"""


def main(binary: str, ajv_dir: str) -> int:
    repo = Path(tempfile.mkdtemp(prefix="gci-schemas-"))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    proc = subprocess.Popen([binary, "serve", "--repo", str(repo)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def call(i, method, params=None):
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params or {}}) + "\n")
        proc.stdin.flush()
        while True:
            msg = json.loads(proc.stdout.readline())
            if msg.get("id") == i:
                return msg["result"]

    call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "strict", "version": "1"}})
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    schemas = []
    for tool in call(2, "tools/list")["tools"]:
        schemas.append((f"{tool['name']}.inputSchema", tool["inputSchema"]))
        if "outputSchema" in tool:
            schemas.append((f"{tool['name']}.outputSchema", tool["outputSchema"]))
    started = call(3, "tools/call", {"name": "start_session", "arguments": {"intent": "IMPLEMENT", "query": "add mul", "repo_path": "."}})
    expected = started.get("structuredContent", {}).get("expected_payload_schema")
    if expected:
        schemas.append(("start_session.expected_payload_schema", expected))
    proc.stdin.close()
    proc.wait(timeout=10)
    listing = repo / "schemas.json"
    listing.write_text(json.dumps(schemas))
    return subprocess.run(["node", "-e", CHECK, ajv_dir, str(listing)]).returncode


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
