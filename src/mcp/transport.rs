//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout.
//!
//! Unlike rmcp's own, it answers what it cannot read: a line that is not UTF-8, not JSON, or
//! nested too deeply gets a JSON-RPC parse error (`-32700`, id null), and JSON that is not a
//! request gets an invalid-request error (`-32600`), so a client never waits for an answer
//! that will not come. Writing goes through a queue drained by a task of its own: a client that
//! stops reading stdout blocks that task, never the reading of stdin, so closing stdin still
//! ends the server.

use std::io;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Lines longer than this are answered with a parse error and skipped.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

pub struct Stdio {
    input: BufReader<tokio::io::Stdin>,
    /// The line being read; it survives a cancelled `receive`.
    line: Vec<u8>,
    /// Dropping the rest of a line that was too long.
    skipping: bool,
    output: mpsc::UnboundedSender<Vec<u8>>,
    closed: tokio::sync::watch::Sender<bool>,
}

/// The transport; the task writing stdout (it ends once every message queued is written); and
/// a signal that turns true when stdin is closed.
pub fn stdio() -> (Stdio, tokio::task::JoinHandle<()>, tokio::sync::watch::Receiver<bool>) {
    let (closed, on_close) = tokio::sync::watch::channel(false);
    let (output, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = queue.recv().await {
            if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                // The client went away; there is no one to answer.
                break;
            }
        }
    });
    (
        Stdio { input: BufReader::new(tokio::io::stdin()), line: Vec::new(), skipping: false, output, closed },
        writer,
        on_close,
    )
}

impl Stdio {
    fn queue(&self, message: &Value) {
        let mut line = serde_json::to_vec(message).unwrap_or_default();
        line.push(b'\n');
        // The writer is gone only when the server is shutting down: nobody is left to answer.
        if self.output.send(line).is_err() {
            tracing::debug!("stdout writer gone; a message was dropped");
        }
    }

    /// Answers a line that is not a message it can take.
    fn refuse(&self, code: i64, why: &str, id: Value) {
        tracing::warn!("answered an unreadable message with {code}: {why}");
        self.queue(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": why}}));
    }
}

/// What a line holds.
enum Line {
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    Blank,
    /// Not UTF-8 or not JSON: a parse error.
    Unparsable(String),
    /// JSON, but not a message: an invalid request, answered with its id when it has one.
    Invalid(String, Value),
}

fn read_line(bytes: &[u8]) -> Line {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Line::Blank;
    }
    if let Err(e) = std::str::from_utf8(bytes) {
        return Line::Unparsable(format!("Parse error: not UTF-8 ({e})"));
    }
    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(bytes) {
        Ok(m) => Line::Message(Box::new(m)),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => Line::Invalid(
            format!("Invalid request: nested deeper than {MAX_DEPTH} levels ({e})"),
            top_level_id(bytes).unwrap_or(Value::Null),
        ),
        Err(e) if matches!(e.classify(), serde_json::error::Category::Syntax | serde_json::error::Category::Eof) => {
            Line::Unparsable(format!("Parse error: {e}"))
        }
        Err(e) => {
            let id = serde_json::from_slice::<Value>(bytes)
                .ok()
                .and_then(|v| v.get("id").filter(|id| id.is_string() || id.is_number()).cloned())
                .unwrap_or(Value::Null);
            Line::Invalid(format!("Invalid request: {e}"), id)
        }
    }
}

/// How deep a message may nest (serde_json's limit).
const MAX_DEPTH: usize = 128;

/// The `id` member of the top-level object, found by scanning rather than parsing, so that a
/// request nested too deeply to parse is still answered under its own id and its client does
/// not wait for an answer that would never come.
fn top_level_id(bytes: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < bytes.len() && bytes[j] != b'"' {
                    j += if bytes[j] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 && bytes.get(start..j) == Some(b"id".as_slice()) {
                    let rest = bytes.get(j + 1..)?;
                    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
                    if rest[colon] == b':' {
                        let value =
                            serde_json::Deserializer::from_slice(&rest[colon + 1..]).into_iter::<Value>().next();
                        return value.and_then(Result::ok).filter(|id| id.is_string() || id.is_number());
                    }
                }
                i = j + 1;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

impl Transport<RoleServer> for Stdio {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent = serde_json::to_vec(&item).map_err(io::Error::other).and_then(|mut line| {
            line.push(b'\n');
            self.output.send(line).map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed"))
        });
        std::future::ready(sent)
    }

    /// Cancel-safe: rmcp polls this in a `select!`, so a call can be dropped halfway through a
    /// line. What it read stays in `self.line` for the next call; nothing is cleared before a
    /// whole line has been taken.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let room = (MAX_LINE_BYTES + 1).saturating_sub(self.line.len()) as u64;
            let read = (&mut self.input).take(room).read_until(b'\n', &mut self.line).await;
            let n = match read {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!("cannot read stdin: {e}");
                    self.closed.send_replace(true);
                    return None;
                }
            };
            let complete = self.line.ends_with(b"\n");
            if !complete && self.line.len() > MAX_LINE_BYTES {
                // Too long: answer once, then drop the line up to its end.
                if !self.skipping {
                    self.skipping = true;
                    self.refuse(-32700, &format!("Parse error: a line over {MAX_LINE_BYTES} bytes"), Value::Null);
                }
                self.line.clear();
                continue;
            }
            if n == 0 && !complete && (self.line.is_empty() || self.skipping) {
                // End of input. (A last line without a newline is taken first, below.)
                self.closed.send_replace(true);
                return None;
            }
            let line = std::mem::take(&mut self.line);
            if std::mem::take(&mut self.skipping) {
                continue;
            }
            match read_line(&line) {
                Line::Message(m) => return Some(*m),
                Line::Blank => {}
                Line::Unparsable(why) => self.refuse(-32700, &why, Value::Null),
                Line::Invalid(why, id) => self.refuse(-32600, &why, id),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_sorted_into_messages_and_errors() {
        assert!(matches!(read_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"), Line::Message(_)));
        assert!(matches!(read_line(b"   \r\n"), Line::Blank));
        assert!(matches!(read_line(b"not json\n"), Line::Unparsable(_)));
        assert!(matches!(read_line(b"{\"a\": \xff}\n"), Line::Unparsable(_)));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(read_line(deep.as_bytes()), Line::Invalid(_, Value::Null)));
        let deep_call = format!(r#"{{"jsonrpc":"2.0","params":{{"s":"\"id\": 3 ]}}","a":{deep}}},"id":"k"}}"#);
        match read_line(deep_call.as_bytes()) {
            Line::Invalid(why, id) => {
                assert_eq!(id, json!("k"));
                assert!(why.contains("nested deeper than 128"), "{why}");
            }
            _ => panic!("expected an invalid request"),
        }
        assert!(matches!(read_line(b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"\\ud800\"}"), Line::Unparsable(_)));
        match read_line(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"nope\":true}") {
            Line::Invalid(_, id) => assert_eq!(id, json!(7)),
            _ => panic!("expected an invalid request"),
        }
    }
}
