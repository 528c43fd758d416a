//! Hostile tool arguments, as an adversary would send them, through the real binary over stdio:
//! 10,000 argument sets across every tool that takes arguments and changes nothing outside the
//! session (the code-intelligence tools, `check_write_target`, `add_explored_files`,
//! `review_changes`, `get_session_status`), while a background thread flips symlinks between
//! inside and outside the repository.
//!
//! Values are wrong types, huge, deeply nested, full of NUL and control characters, path
//! traversals, absolute paths, `.git/`, dangling, looping and flipping symlinks, and
//! catastrophic regexes. Every call must be answered (a result or a JSON-RPC error) within 5 s,
//! no answer may exceed the 256 KB response limit, no byte of a file outside the repository (or of
//! `.git/config`) may come back, check_write_target never allows a path that leaves the
//! repository, nothing outside is written, and the server never panics.
//!
//! `CODE_INTEL_TOOL_FUZZ_CALLS` and `CODE_INTEL_TOOL_FUZZ_SEED` change the defaults (10,000, 1).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::mcp_client::{BIN, Client, call, structured};
use crate::common::{committed_project, fsck_clean, git};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value, json};

/// In a file outside the repository; it must never appear in an answer.
const OUTSIDE_MARKER: &str = "7c1e-OUTSIDE-SECRET-b09d";
/// In `.git/config`; it must never appear in an answer either.
const GIT_MARKER: &str = "9f2a-GIT-CONFIG-SECRET-44e0";
/// The response limit every tool pages under.
const MAX_RESPONSE: usize = 256 * 1024;
/// No call may take longer.
const MAX_CALL: Duration = Duration::from_secs(5);

/// Tools left out: they change state beyond the session's own refs (submit_phase, fuzzed
/// through its schema in payload_schema.rs; start_session; record_outcome; sync_index;
/// cleanup_stale_branches).
const LEFT_OUT: &[&str] = &["submit_phase", "start_session", "record_outcome", "sync_index", "cleanup_stale_branches"];

struct World {
    repo: tempfile::TempDir,
    outside: tempfile::TempDir,
    /// The outside directory's name, for `../<name>/…` traversals.
    outside_name: String,
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// The project fixture, plus awkward files and symlinks of every kind, and a directory outside
/// holding a secret.
fn world() -> World {
    let repo = committed_project();
    let root = repo.path();
    let outside = tempfile::tempdir().unwrap();
    let outside_name = outside.path().file_name().unwrap().to_string_lossy().into_owned();
    write(&outside.path().join("secret.txt"), format!("token = {OUTSIDE_MARKER}\n"));
    write(&outside.path().join("secret.py"), format!("def leaked():\n    return '{OUTSIDE_MARKER}'\n"));
    write(&outside.path().join("dir/deep.rs"), format!("fn leaked() {{ let s = \"{OUTSIDE_MARKER}\"; }}\n"));
    git(root, &["config", "remote.origin.url", &format!("https://user:{GIT_MARKER}@example.com/r.git")]);

    let n = 3000;
    write(&root.join("src/deep.rs"), format!("{}{}", "fn a(){".repeat(n), "}".repeat(n)));
    write(&root.join("src/long_line.js"), format!("var x = \"{}\";\n", "y".repeat(2_000_000)));
    write(&root.join("src/nul.py"), b"def a():\n    return '\0\0'\n".as_slice());
    write(&root.join("big.txt"), "def login(): pass\n".repeat(200_000));
    write(&root.join("bin.dat"), (0..=255u8).cycle().take(100_000).collect::<Vec<u8>>());
    write(&root.join("src/many.py"), (0..5_000).map(|i| format!("def f{i}(): login()\n")).collect::<String>());
    write(&root.join("é/字.py"), "def unicode_name(): pass\n");

    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        let out = outside.path();
        symlink(out.join("secret.txt"), root.join("leak.txt")).unwrap();
        symlink(out.join("secret.py"), root.join("src/leak.py")).unwrap();
        symlink(out, root.join("leakdir")).unwrap();
        symlink(format!("../{outside_name}/new.py"), root.join("dangling.py")).unwrap();
        symlink(out.join("nodir"), root.join("dangdir")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        symlink("loop2b", root.join("loop2a")).unwrap();
        symlink("loop2a", root.join("loop2b")).unwrap();
        symlink("src", root.join("flip")).unwrap();
        symlink("src/auth.py", root.join("flip.py")).unwrap();
    }
    World { repo, outside, outside_name }
}

/// Flips `flip` (a directory link) and `flip.py` (a file link) between inside and outside until
/// told to stop, each by an atomic rename.
#[cfg(unix)]
fn flipper(root: PathBuf, outside: PathBuf, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        use std::os::unix::fs::symlink;
        let mut flips = 0u64;
        let links: [(&str, PathBuf, PathBuf); 2] = [
            ("flip", PathBuf::from("src"), outside.clone()),
            ("flip.py", PathBuf::from("src/auth.py"), outside.join("secret.py")),
        ];
        while !stop.load(Ordering::Relaxed) {
            for (name, inside, out) in &links {
                let target = if flips.is_multiple_of(2) { out } else { inside };
                let tmp = root.join(format!(".{name}.flipping"));
                crate::common::remove_if_present(&tmp);
                if symlink(target, &tmp).is_ok() {
                    // Racing the server's reads on purpose: a rename that fails leaves the link
                    // as it was, and the next flip tries again.
                    std::fs::rename(&tmp, root.join(name)).unwrap_or_default();
                }
            }
            flips += 1;
            std::thread::sleep(Duration::from_micros(200));
        }
        flips
    })
}

/// Paths that leave the repository (or reach into `.git/`) whatever the flipper is doing.
fn escaping_paths(w: &World) -> Vec<String> {
    let o = &w.outside_name;
    let abs = w.outside.path().display().to_string();
    vec![
        "..".into(),
        "../".into(),
        "../..".into(),
        "/".into(),
        "/etc/passwd".into(),
        "/tmp".into(),
        format!("{abs}/secret.txt"),
        format!("{abs}/new.py"),
        abs.clone(),
        format!("../{o}/secret.txt"),
        format!("../{o}/new.py"),
        format!("src/../../{o}/secret.py"),
        format!("./src/./../../{o}"),
        "leak.txt".into(),
        "src/leak.py".into(),
        "leakdir".into(),
        "leakdir/secret.txt".into(),
        "leakdir/new.py".into(),
        "leakdir/dir/deep.rs".into(),
        "dangling.py".into(),
        "dangdir".into(),
        "dangdir/x.py".into(),
        "loop".into(),
        "loop/x.py".into(),
        "loop2a/x".into(),
        ".git".into(),
        ".git/config".into(),
        "./.git/config".into(),
        "src/../.git/config".into(),
        ".git/hooks/pre-commit".into(),
        "src/../../../../../../../../etc/passwd".into(),
    ]
}

/// Paths inside, awkward ones, and ones that flip.
fn other_paths() -> Vec<String> {
    vec![
        "".into(),
        ".".into(),
        "./".into(),
        "src".into(),
        "src/".into(),
        "src/auth.py".into(),
        "src/app.py".into(),
        "./src/../src/app.py".into(),
        "src/deep.rs".into(),
        "src/long_line.js".into(),
        "src/nul.py".into(),
        "src/many.py".into(),
        "big.txt".into(),
        "bin.dat".into(),
        "é/字.py".into(),
        "docs/auth.md".into(),
        "config.yaml".into(),
        "src/new_file.py".into(),
        "new_dir/new.py".into(),
        "flip".into(),
        "flip/auth.py".into(),
        "flip/secret.py".into(),
        "flip/new.py".into(),
        "flip.py".into(),
        ".GIT/config".into(),
        "src\\..\\..\\x".into(),
        "%2e%2e/secret.txt".into(),
        "src/auth.py\0../../x".into(),
        "a\0b".into(),
        "\u{1}\u{7}\u{1b}[31m\u{7f}".into(),
        "\u{202e}yp.htua/crs".into(),
        "~/.ssh/id_rsa".into(),
        "$HOME/.bashrc".into(),
        "$(touch /tmp/pwned)".into(),
        "`id`".into(),
        "*".into(),
        "**/*.py".into(),
        "src/*".into(),
        "x".repeat(300),
        "a/".repeat(3000),
        "é".repeat(10_000),
    ]
}

fn patterns() -> Vec<String> {
    vec![
        "def".into(),
        "login".into(),
        "refresh_token".into(),
        "OUTSIDE".into(),
        "SECRET".into(),
        "token".into(),
        "leaked".into(),
        "example.com".into(),
        "(a+)+$".into(),
        "(".into(),
        "[".into(),
        "\\".into(),
        ".*".into(),
        "^".into(),
        "$".into(),
        "a{1000000}".into(),
        "(?i)DEF".into(),
        "\\p{L}+".into(),
        "x*".repeat(2000),
        "".into(),
        " ".into(),
        "\0".into(),
        "\u{1b}[2J".into(),
        "y".repeat(100_000),
        "*.py".into(),
        "**".into(),
        "{a,b".into(),
        "[!".into(),
        "App".into(),
        "a.b::c".into(),
        "é字".into(),
    ]
}

fn languages() -> Vec<String> {
    ["rust", "python", "py", "RUST", "javascript", "typescript", "go", "cobol", "", "../x", "\0"]
        .map(String::from)
        .to_vec()
}

struct Fuzz {
    rng: fastrand::Rng,
    /// This call's values are ordinary (real files, flipping links, plain words), so that the
    /// tools' success paths run too, with the links flipping under them.
    benign: bool,
    escaping: Vec<String>,
    paths: Vec<String>,
    patterns: Vec<String>,
    languages: Vec<String>,
}

impl Fuzz {
    fn pick(&mut self, pool: &[String]) -> String {
        pool[self.rng.usize(..pool.len())].clone()
    }

    fn path(&mut self) -> String {
        if self.benign {
            const BENIGN: &[&str] = &[
                "src/auth.py",
                "src/app.py",
                "src",
                "",
                "flip",
                "flip.py",
                "flip/auth.py",
                "docs/auth.md",
                "src/many.py",
            ];
            return BENIGN[self.rng.usize(..BENIGN.len())].to_owned();
        }
        if self.rng.u8(..3) == 0 {
            let p = self.escaping.clone();
            self.pick(&p)
        } else {
            let p = self.paths.clone();
            self.pick(&p)
        }
    }

    /// A plausible count or line most of the time; an edge (negative, huge, fractional, not a
    /// number) otherwise.
    fn number(&mut self) -> Value {
        if self.benign || self.rng.u8(..10) < 7 {
            return json!(if self.rng.bool() { self.rng.u64(0..50) } else { self.rng.u64(0..100_000) });
        }
        match self.rng.u8(..14) {
            0 => json!(-1),
            1 => json!(0),
            2 => json!(1),
            3 => json!(self.rng.i64(1..40)),
            4 => json!(self.rng.i64(1..100_000)),
            5 => json!(i64::MAX),
            6 => json!(i64::MIN),
            7 => json!(u64::MAX),
            8 => json!(1.5),
            9 => json!(-0.0),
            10 => json!(1e308),
            11 => json!("3"),
            12 => json!(true),
            _ => json!(1_000_000_000),
        }
    }

    /// Source code for `analyze_structure`: nested definitions, deep indentation, garbage.
    fn code(&mut self) -> String {
        let n = if self.rng.u8(..50) == 0 { self.rng.usize(1..25_000) } else { self.rng.usize(1..500) };
        match self.rng.u8(..6) {
            0 => format!("{}{}", "fn a(){".repeat(n), "}".repeat(n)),
            // Indentation grows with the square of the depth: 300 levels is 180 KB.
            1 => (0..n.min(300)).map(|i| format!("{}def f{i}():\n", "    ".repeat(i))).collect(),
            2 => format!("{}{}", "class A { m() {".repeat(n), "}}".repeat(n)),
            3 => (0..n).map(|_| char::from(self.rng.u8(..128))).collect(),
            4 => format!("{}{}", "(".repeat(n), ")".repeat(n)),
            _ => "def login():\n    return 1\n".into(),
        }
    }

    /// Any JSON value, nested up to `depth` (at most 100 levels, so the request stays under
    /// the transport's 128).
    fn any(&mut self, depth: u32) -> Value {
        match self.rng.u8(..if depth == 0 { 6 } else { 9 }) {
            0 => Value::Null,
            1 => json!(self.rng.bool()),
            2 => self.number(),
            3 => json!(self.path()),
            4 => {
                let p = self.patterns.clone();
                json!(self.pick(&p))
            }
            5 => json!(self.code()),
            6 => Value::Array((0..self.rng.usize(0..5)).map(|_| self.any(depth - 1)).collect()),
            7 => {
                let mut v = Value::Null;
                for _ in 0..self.rng.usize(1..100) {
                    v = json!([v]);
                }
                v
            }
            _ => {
                let mut m = Map::new();
                for i in 0..self.rng.usize(0..4) {
                    m.insert(format!("k{i}"), self.any(depth - 1));
                }
                Value::Object(m)
            }
        }
    }

    /// A value of the right type for `name` (with hostile contents), most of the time.
    fn typed(&mut self, name: &str, schema: &Value) -> Value {
        let ty = schema_type(schema);
        if ty.contains(&"array") {
            let n = match self.rng.u8(..20) {
                0 => self.rng.usize(500..5000),
                _ => self.rng.usize(0..6),
            };
            return Value::Array((0..n).map(|_| json!(self.path())).collect());
        }
        if ty.contains(&"integer") || ty.contains(&"number") {
            return self.number();
        }
        if ty.contains(&"boolean") {
            return json!(self.rng.bool());
        }
        let p = if self.benign {
            ["def", "login", "token", "refresh_token", "App", "auth"].map(String::from).to_vec()
        } else {
            self.patterns.clone()
        };
        let l = if self.benign { vec!["python".to_owned(), "rust".to_owned()] } else { self.languages.clone() };
        match name {
            "code" if self.benign => json!("def login():\n    return refresh_token()\n"),
            "code" => json!(self.code()),
            "language" | "file_type" => json!(self.pick(&l)),
            "pattern" | "symbol" | "query" | "change_description" | "target_feature" => {
                if name == "pattern" && self.rng.u8(..4) == 0 {
                    json!((0..self.rng.usize(0..4)).map(|_| self.pick(&p)).collect::<Vec<_>>())
                } else {
                    json!(self.pick(&p))
                }
            }
            "target_files" if self.rng.bool() => {
                json!((0..self.rng.usize(0..40)).map(|_| self.path()).collect::<Vec<_>>())
            }
            "collection" => json!(["auto", "map", "forest", "", "x"][self.rng.usize(..5)]),
            "chunk_id" => json!(["src/auth.py:1", "../x:1", "", "src/auth.py:-1", "leak.txt:1"][self.rng.usize(..5)]),
            _ => json!(self.path()),
        }
    }

    fn arguments(&mut self, schema: &Value) -> Map<String, Value> {
        let mut args = Map::new();
        let props = schema.get("properties").and_then(Value::as_object).cloned().unwrap_or_default();
        self.benign = self.rng.u8(..10) < 3;
        for (name, prop) in &props {
            if self.rng.u8(..10) < 7 {
                let v = if self.benign || self.rng.u8(..10) < 9 { self.typed(name, prop) } else { self.any(3) };
                args.insert(name.clone(), v);
            }
        }
        if !self.benign && self.rng.u8(..10) == 0 {
            args.insert(format!("unknown_{}", self.rng.u8(..3)), self.any(2));
        }
        args
    }
}

/// The `type`s a property schema allows (through `anyOf`/`oneOf` too).
fn schema_type(schema: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => out.push(t.as_str()),
        Some(Value::Array(ts)) => out.extend(ts.iter().filter_map(Value::as_str)),
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        for s in schema.get(key).and_then(Value::as_array).into_iter().flatten() {
            out.extend(schema_type(s));
        }
    }
    out
}

/// Every file below `dir` with its bytes (symlinks listed, not followed).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let t = e.file_type().unwrap();
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_symlink() {
                out.push((e.path(), std::fs::read_link(e.path()).unwrap().into_os_string().into_encoded_bytes()));
            } else {
                out.push((e.path(), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

async fn connect(root: &Path, stderr: &Path) -> Client {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("serve").current_dir(root);
    if std::env::var_os("CODE_INTEL_LOG").is_none() {
        cmd.env("CODE_INTEL_LOG", "warn");
    }
    let log = std::fs::File::create(stderr).unwrap();
    let transport = TokioChildProcess::builder(cmd).stderr(Stdio::from(log)).spawn().expect("spawn server").0;
    ().serve(transport).await.expect("initialize")
}

async fn in_ready(client: &Client) {
    for (tool, args) in [
        ("start_session", json!({"intent": "MODIFY", "query": "q", "quick": true, "no_doc_research": true})),
        ("submit_phase", json!({"data": {"slots": {}, "tools_used": [], "summary": "frame"}})),
        (
            "submit_phase",
            json!({"data": {"tasks": [{"id": "t1", "description": "d", "status": "pending", "checklist": [{"item": "i"}]}],
                            "tools_used": [], "summary": "plan"}}),
        ),
        ("get_symbols", json!({"path": "src/auth.py"})),
        ("get_symbols", json!({"path": "src/app.py"})),
        ("add_explored_files", json!({"files": ["src/auth.py", "src/app.py"]})),
    ] {
        let r = call(client, tool, args).await;
        assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.structured_content);
    }
    let s = structured(&call(client, "get_session_status", json!({})).await);
    assert_eq!(s["phase"], "READY", "{s}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_hostile_argument_sets_are_answered_safely() {
    let calls: usize = std::env::var("CODE_INTEL_TOOL_FUZZ_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let seed: u64 = std::env::var("CODE_INTEL_TOOL_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let w = world();
    let root = w.repo.path().to_path_buf();
    let logs = tempfile::tempdir().unwrap();
    let stderr =
        std::env::var_os("CODE_INTEL_TOOL_FUZZ_LOG").map_or_else(|| logs.path().join("server.stderr"), PathBuf::from);
    let client = connect(&root, &stderr).await;
    in_ready(&client).await;

    let tools: Vec<(String, Value)> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| !LEFT_OUT.contains(&t.name.as_ref()))
        .map(|t| (t.name.to_string(), Value::Object((*t.input_schema).clone())))
        .collect();
    assert!(tools.len() >= 14, "{:?}", tools.iter().map(|t| &t.0).collect::<Vec<_>>());

    let outside_before = snapshot(w.outside.path());
    let tracked_before = git(&root, &["status", "--porcelain", "--untracked-files=no"]);
    let heads_before = git(&root, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/", "refs/tags/"]);
    let stop = Arc::new(AtomicBool::new(false));
    let flips = flipper(root.clone(), w.outside.path().to_path_buf(), stop.clone());

    let escaping = escaping_paths(&w);
    let mut fuzz = Fuzz {
        rng: fastrand::Rng::with_seed(seed),
        benign: false,
        escaping,
        paths: other_paths(),
        patterns: patterns(),
        languages: languages(),
    };
    let (mut answered, mut refused, mut rpc_errors) = (0usize, 0usize, 0usize);
    let mut slowest = (Duration::ZERO, String::new());
    let mut outcomes: std::collections::BTreeMap<(String, String), usize> = Default::default();
    for i in 0..calls {
        let (tool, schema) = &tools[fuzz.rng.usize(..tools.len())];
        let args = fuzz.arguments(schema);
        let shown = {
            let s = Value::Object(args.clone()).to_string();
            if s.len() > 300 { format!("{}… ({} bytes)", &s[..s.floor_char_boundary(300)], s.len()) } else { s }
        };
        let started = Instant::now();
        let request = CallToolRequestParams::new(tool.clone()).with_arguments(args.clone());
        let result = tokio::time::timeout(MAX_CALL * 4, client.call_tool(request))
            .await
            .unwrap_or_else(|_| panic!("call {i}: {tool} {shown} hung"));
        let took = started.elapsed();
        assert!(took < MAX_CALL, "call {i}: {tool} {shown} took {took:?}");
        if took > slowest.0 {
            slowest = (took, format!("{tool} {shown}"));
        }
        let Ok(result) = result else {
            // A JSON-RPC error: the server must still be there, which the next call shows.
            rpc_errors += 1;
            continue;
        };
        if result.is_error == Some(true) {
            refused += 1;
        } else {
            answered += 1;
        }
        let code = result.structured_content.as_ref().and_then(|v| v["error"].as_str()).unwrap_or("ok").to_owned();
        *outcomes.entry((tool.clone(), code)).or_default() += 1;
        let text = result.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
        assert!(text.len() <= MAX_RESPONSE, "call {i}: {tool} {shown} answered {} bytes", text.len());
        assert!(!text.contains(OUTSIDE_MARKER), "call {i}: {tool} {shown} leaked a file outside: {text}");
        assert!(!text.contains(GIT_MARKER), "call {i}: {tool} {shown} leaked .git/config: {text}");
        if tool == "check_write_target" && result.is_error != Some(true) {
            let v: Value = serde_json::from_str(&text).unwrap();
            let path = args.get("file_path").and_then(Value::as_str).unwrap_or_default();
            if fuzz.escaping.iter().any(|e| e == path) {
                assert_ne!(v["allowed"], true, "call {i}: check_write_target allowed {path:?}: {v}");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flips.join().unwrap();

    // Still serving, and nothing outside the session changed.
    let s = structured(&call(&client, "get_session_status", json!({})).await);
    assert_eq!(s["phase"], "READY", "{s}");
    client.cancel().await.unwrap();
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
    assert_eq!(snapshot(w.outside.path()), outside_before, "something was written outside the repository");
    assert_eq!(git(&root, &["status", "--porcelain", "--untracked-files=no"]), tracked_before);
    assert_eq!(
        git(&root, &["for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/", "refs/tags/"]),
        heads_before
    );
    fsck_clean(&root);
    for ((tool, code), n) in &outcomes {
        eprintln!("{tool:>22} {code:<20} {n}");
    }
    eprintln!(
        "{calls} calls: {answered} answered, {refused} refused with a tool error, {rpc_errors} JSON-RPC errors; {flips} symlink flips; slowest {:?}: {}",
        slowest.0, slowest.1
    );
}
