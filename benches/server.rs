//! A git-code-intel MCP server driven over stdio by the benchmarks: spawned, initialized, asked
//! for tools, and either closed (to read its peak memory) or killed when dropped.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

pub struct Server {
    pub root: PathBuf,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

/// The first 300 characters of `s`, for log lines.
pub fn cut(s: &str) -> String {
    s.chars().take(300).collect()
}

impl Server {
    /// Spawns `bin serve` in `root` with `env` added (logs at error level), and initializes it.
    pub fn start(bin: &Path, root: &Path, env: &[(&str, &str)]) -> Server {
        let mut child = Command::new(bin)
            .arg("serve")
            .current_dir(root)
            .env("CODE_INTEL_LOG", "error")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server { root: root.to_path_buf(), child: Some(child), stdin, stdout, next_id: 0 };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}});
        server.send(&init);
        let mut line = String::new();
        server.stdout.read_line(&mut line).unwrap();
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("the server is open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Calls a tool and returns its structured answer (or the JSON-RPC error).
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}));
        loop {
            let mut line = String::new();
            assert!(self.stdout.read_line(&mut line).unwrap() > 0, "the server ended during {tool}");
            let Ok(answer) = serde_json::from_str::<Value>(&line) else { continue };
            if answer["id"] == id {
                let result = &answer["result"];
                if result["isError"] == true {
                    println!("  {tool}: {}", cut(&result["structuredContent"].to_string()));
                }
                if std::env::var_os("CODE_INTEL_BENCH_TRACE").is_some() {
                    println!("  > {tool}: {}", cut(&result["structuredContent"].to_string()));
                }
                return if result.is_null() { answer["error"].clone() } else { result["structuredContent"].clone() };
            }
        }
    }

    /// A `tools/list` round trip, then a pause long enough for the Forest sync to load its model.
    pub fn list(&mut self) {
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/list"}));
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        std::thread::sleep(std::time::Duration::from_secs(3));
    }

    /// Closes stdin (the server then exits by itself) and hands over the process to wait for.
    pub fn close(mut self) -> Child {
        self.stdin = None;
        self.child.take().expect("the server is open")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
