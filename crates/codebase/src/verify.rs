//! The commands that verify a change: the project's tests, type checks and linters.
//!
//! A project declares them in `.code-intel/config.json` (`verify_commands`); a project that
//! declares none gets them derived from what it says of itself ([`derive_commands`]): the scripts of
//! `package.json`, run with the package manager its lock file names; pytest where a Python
//! project configures or depends on it, else unittest, and only the linters it configures; the
//! Cargo, Go, Maven, Gradle, Ruby, PHP and .NET conventions; a Makefile's `test`, `check` and
//! `lint` targets. Each derived command says why, and whether its program is installed here;
//! only installed ones are offered to the agent. `init` and `doctor` print them.
//!
//! Outside READY, where no kernel sandbox confines the shell, the PreToolUse hooks let only
//! read-only shell commands run; in the verification phases these run too. A command is a
//! prefix of words: `python3 -m unittest` lets `python3 -m unittest -q tests.test_calc` run,
//! not `python3 -c …` or `python3 script.py`. Options that make a runner rewrite source files
//! ([`REWRITING_OPTIONS`]) are refused whatever the prefix.

use std::path::Path;

/// Where the commands came from, for the prompts and `doctor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `verify_commands` in `.code-intel/config.json`.
    Declared,
    /// Derived from the project's own files ([`derive_commands`]).
    Detected,
}

/// The verification commands of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyCommands {
    /// What the agent is told to run (and, without a kernel sandbox, what the hooks let run in
    /// the verification phases): the declared commands, or the derived ones whose program is
    /// installed.
    pub commands: Vec<String>,
    pub source: Source,
    /// Every derived command with why (empty when declared), the ones not installed among them.
    pub derived: Vec<Derived>,
}

/// A command derived from the project, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Derived {
    pub command: String,
    /// What in the project says so (`package.json` script `test`, `pnpm-lock.yaml`).
    pub because: String,
    /// Its program is on `PATH` (or in the project, for `./gradlew`).
    pub installed: bool,
}

/// Options with which a test runner, formatter or linter rewrites the files it checks.
pub const REWRITING_OPTIONS: &[&str] =
    &["--fix", "--fix-only", "--write", "--in-place", "--bless", "--update-snapshots", "--allow-dirty"];

/// The project's verification commands: the declared ones, or else the derived ones.
pub fn commands(root: &Path, declared: &[String]) -> VerifyCommands {
    let declared: Vec<String> = declared.iter().map(|c| normalize(c)).filter(|c| !c.is_empty()).collect();
    if !declared.is_empty() {
        return VerifyCommands { commands: declared, source: Source::Declared, derived: Vec::new() };
    }
    let derived = derive_commands(root, &|program| on_path(program));
    let mut commands: Vec<String> = Vec::new();
    for d in derived.iter().filter(|d| d.installed) {
        if !commands.contains(&d.command) {
            commands.push(d.command.clone());
        }
    }
    VerifyCommands { commands, source: Source::Detected, derived }
}

/// The checks the files at `root` say the project runs, tests first; `installed` answers
/// whether a program is on `PATH`.
pub fn derive_commands(root: &Path, installed: &dyn Fn(&str) -> bool) -> Vec<Derived> {
    let mut out = Vec::new();
    let mut add = |command: String, because: String| {
        let program = command.split_whitespace().next().unwrap_or_default().to_owned();
        let present = if program.starts_with("./") || program.contains('/') {
            root.join(&program).is_file()
        } else {
            installed(&program)
        };
        out.push(Derived { command, because, installed: present });
    };
    let read = |name: &str| std::fs::read_to_string(root.join(name)).unwrap_or_default();
    let exists = |name: &str| root.join(name).exists();

    // JavaScript and TypeScript: the package's own scripts, with its package manager.
    if let Ok(package) = serde_json::from_str::<serde_json::Value>(&read("package.json")) {
        let (manager, why) = package_manager(root, &package, installed);
        let scripts = package.get("scripts").and_then(|s| s.as_object());
        for script in ["test", "typecheck", "type-check", "lint", "check"] {
            let Some(body) = scripts.and_then(|s| s.get(script)).and_then(|b| b.as_str()) else { continue };
            // npm init's placeholder, which only fails.
            if script == "test" && body.contains("no test specified") {
                continue;
            }
            let command = match (manager, script) {
                ("npm", "test") => "npm test".to_owned(),
                ("bun", _) => format!("bun run {script}"),
                (_, "test") => format!("{manager} test"),
                _ => format!("{manager} run {script}"),
            };
            add(command, format!("`package.json` script `{script}` ({why})"));
        }
    }

    // Python: pytest where the project configures or depends on it, else unittest; only the
    // linters it configures.
    let pyproject = read("pyproject.toml");
    let setup_cfg = read("setup.cfg");
    let tox = read("tox.ini");
    let python_project = !pyproject.is_empty()
        || exists("setup.py")
        || !setup_cfg.is_empty()
        || exists("requirements.txt")
        || has_python(root);
    if python_project {
        let python = if installed("python3") || !installed("python") { "python3" } else { "python" };
        let requirements: String = [
            "requirements.txt",
            "requirements-dev.txt",
            "requirements_dev.txt",
            "dev-requirements.txt",
            "requirements-test.txt",
            "Pipfile",
        ]
        .iter()
        .map(|f| read(f))
        .collect();
        let pytest_why = if pyproject.contains("[tool.pytest") {
            Some("`[tool.pytest.ini_options]` in `pyproject.toml`")
        } else if exists("pytest.ini") {
            Some("`pytest.ini`")
        } else if setup_cfg.contains("[tool:pytest]") {
            Some("`[tool:pytest]` in `setup.cfg`")
        } else if tox.contains("[pytest]") {
            Some("`[pytest]` in `tox.ini`")
        } else if exists("conftest.py") || exists("tests/conftest.py") {
            Some("`conftest.py`")
        } else if mentions(&pyproject, "pytest") || mentions(&requirements, "pytest") || mentions(&setup_cfg, "pytest")
        {
            Some("pytest among the project's dependencies")
        } else if pytest_style_tests(root) {
            Some("test functions in pytest's style (`def test_…` outside a `unittest.TestCase`)")
        } else {
            None
        };
        match pytest_why {
            Some(why) => add(format!("{python} -m pytest"), why.to_owned()),
            None => add(
                format!("{python} -m unittest"),
                "Python code without a pytest configuration or dependency".to_owned(),
            ),
        }
        if pyproject.contains("[tool.ruff") || exists("ruff.toml") || exists(".ruff.toml") {
            add("ruff check".to_owned(), "ruff configured (`[tool.ruff]`, `ruff.toml`)".to_owned());
        }
        if pyproject.contains("[tool.mypy]")
            || exists("mypy.ini")
            || exists(".mypy.ini")
            || setup_cfg.contains("[mypy]")
        {
            add("mypy .".to_owned(), "mypy configured (`[tool.mypy]`, `mypy.ini`, `[mypy]` in `setup.cfg`)".to_owned());
        }
        if exists(".flake8") || setup_cfg.contains("[flake8]") || tox.contains("[flake8]") {
            add("flake8".to_owned(), "flake8 configured (`.flake8`, `[flake8]`)".to_owned());
        }
    }

    if exists("Cargo.toml") {
        for command in ["cargo test", "cargo clippy", "cargo fmt --check"] {
            add(command.to_owned(), "`Cargo.toml`".to_owned());
        }
    }
    if exists("go.mod") {
        for command in ["go test ./...", "go vet ./..."] {
            add(command.to_owned(), "`go.mod`".to_owned());
        }
    }
    if exists("pom.xml") {
        let mvn = if exists("mvnw") { "./mvnw" } else { "mvn" };
        add(format!("{mvn} test"), "`pom.xml`".to_owned());
    }
    if exists("build.gradle") || exists("build.gradle.kts") {
        let gradle = if exists("gradlew") { "./gradlew" } else { "gradle" };
        add(format!("{gradle} test"), "`build.gradle`".to_owned());
    }
    if exists("Gemfile") {
        if exists("spec") {
            add("bundle exec rspec".to_owned(), "`Gemfile` and `spec/`".to_owned());
        } else if exists("Rakefile") && exists("test") {
            add("bundle exec rake test".to_owned(), "`Gemfile`, `Rakefile` and `test/`".to_owned());
        }
    }
    if let Ok(composer) = serde_json::from_str::<serde_json::Value>(&read("composer.json")) {
        if composer.pointer("/scripts/test").is_some() {
            add("composer test".to_owned(), "`composer.json` script `test`".to_owned());
        } else if exists("phpunit.xml") || exists("phpunit.xml.dist") {
            add("vendor/bin/phpunit".to_owned(), "`phpunit.xml`".to_owned());
        }
    }
    if has_extension(root, &[".sln", ".csproj", ".fsproj"]) {
        add("dotnet test".to_owned(), "a `.sln` or project file".to_owned());
    }
    let makefile = ["Makefile", "makefile", "GNUmakefile"].iter().map(|f| read(f)).find(|t| !t.is_empty());
    if let Some(makefile) = makefile {
        for target in ["test", "check", "lint"] {
            if makefile.lines().any(|l| l.starts_with(&format!("{target}:")) || l.starts_with(&format!("{target} :"))) {
                // Not `make` alone: a prefix would let every target run (`make install`).
                add(format!("make {target}"), format!("the Makefile's `{target}` target"));
            }
        }
    }
    out
}

/// The package manager of a JavaScript project: the one its lock file names, when installed;
/// else the one `packageManager` names; else npm, which runs any package's scripts. With why.
fn package_manager(
    root: &Path,
    package: &serde_json::Value,
    installed: &dyn Fn(&str) -> bool,
) -> (&'static str, String) {
    const LOCKS: &[(&str, &str)] = &[
        ("pnpm-lock.yaml", "pnpm"),
        ("yarn.lock", "yarn"),
        ("bun.lockb", "bun"),
        ("bun.lock", "bun"),
        ("package-lock.json", "npm"),
        ("npm-shrinkwrap.json", "npm"),
    ];
    let named = package.get("packageManager").and_then(|m| m.as_str()).map(|m| m.split('@').next().unwrap_or(m));
    let wanted = LOCKS
        .iter()
        .find(|(lock, _)| root.join(lock).is_file())
        .map(|(lock, manager)| (*manager, format!("`{lock}`")))
        .or_else(|| {
            let manager = ["pnpm", "yarn", "bun", "npm"].into_iter().find(|m| Some(*m) == named)?;
            Some((manager, format!("`packageManager` {manager}")))
        });
    match wanted {
        Some((manager, why)) if installed(manager) => (manager, why),
        Some((manager, why)) => ("npm", format!("{why}, but {manager} is not installed: npm runs the same scripts")),
        None => ("npm", "no lock file".to_owned()),
    }
}

/// Whether the project's test files hold plain `def test_…` functions and none of them uses
/// `unittest`: tests only pytest collects (unittest would run none of them).
fn pytest_style_tests(root: &Path) -> bool {
    let mut files = Vec::new();
    for dir in [root.to_path_buf(), root.join("tests"), root.join("test")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py")) {
                files.push(e.path());
            }
        }
    }
    let texts: Vec<String> = files.iter().take(50).filter_map(|f| std::fs::read_to_string(f).ok()).collect();
    !texts.is_empty()
        && texts.iter().all(|t| !t.contains("unittest"))
        && texts.iter().any(|t| t.lines().any(|l| l.starts_with("def test_")))
}

/// Whether `text` names `word` as a whole word (a dependency list, a requirements file).
fn mentions(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-');
        !part(before) && !part(after)
    })
}

/// Whether a file at the root ends with one of `extensions`.
fn has_extension(root: &Path, extensions: &[&str]) -> bool {
    std::fs::read_dir(root).is_ok_and(|entries| {
        entries.flatten().any(|e| extensions.iter().any(|x| e.file_name().to_string_lossy().ends_with(x)))
    })
}

/// Python files at the root or a level down (`app/`, `tests/`).
fn has_python(root: &Path) -> bool {
    if has_extension(root, &[".py"]) {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(root) else { return false };
    entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).any(|dir| {
        if dir.file_name().to_string_lossy().starts_with('.') {
            return false;
        }
        std::fs::read_dir(dir.path())
            .map(|inner| inner.flatten().any(|f| f.file_name().to_string_lossy().ends_with(".py")))
            .unwrap_or(false)
    })
}

/// Whether `program` is an executable file in a directory of `PATH`.
pub fn on_path(program: &str) -> bool {
    let Some(path) = std::env::var_os("PATH") else { return false };
    std::env::split_paths(&path).any(|dir| {
        let candidate = dir.join(program);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(&candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        }
        #[cfg(not(unix))]
        {
            candidate.is_file() || dir.join(format!("{program}.exe")).is_file()
        }
    })
}

fn normalize(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether the simple command `name words…` is one of `commands`: its words start with a
/// command's words, and it uses none of the [`REWRITING_OPTIONS`]. Returns the command matched.
pub fn matching<'a>(commands: &'a [String], name: &str, words: &[String]) -> Option<&'a str> {
    if words.iter().any(|w| REWRITING_OPTIONS.iter().any(|o| w == o || w.starts_with(&format!("{o}=")))) {
        return None;
    }
    commands
        .iter()
        .find(|c| {
            let mut parts = c.split_whitespace();
            parts.next() == Some(name) && parts.enumerate().all(|(i, p)| words.get(i).is_some_and(|w| w == p))
        })
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn a_prefix_of_words_matches_and_nothing_else() {
        let cmds = vec!["python3 -m unittest".to_owned(), "cargo fmt --check".to_owned(), "make".to_owned()];
        assert_eq!(matching(&cmds, "python3", &words("-m unittest -q")), Some("python3 -m unittest"));
        assert_eq!(matching(&cmds, "python3", &words("-c print(1)")), None);
        assert_eq!(matching(&cmds, "python3", &words("script.py")), None);
        assert_eq!(matching(&cmds, "cargo", &words("fmt")), None, "cargo fmt without --check writes");
        assert_eq!(matching(&cmds, "cargo", &words("fmt --check")), Some("cargo fmt --check"));
        assert_eq!(matching(&cmds, "make", &words("test")), Some("make"));
        assert_eq!(matching(&cmds, "make", &words("lint --fix")), None, "a rewriting option is refused");
    }

    #[test]
    fn declared_commands_replace_the_derived_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
        let derived = commands(dir.path(), &[]);
        assert_eq!(derived.source, Source::Detected);
        assert_eq!(derived.derived[0].command, "cargo test");
        let declared = commands(dir.path(), &["  just   test ".to_owned()]);
        let expected =
            VerifyCommands { commands: vec!["just test".into()], source: Source::Declared, derived: Vec::new() };
        assert_eq!(declared, expected);
    }

    /// The project at `files` (path, text), and what is derived with `installed` on PATH.
    fn derived(files: &[(&str, &str)], installed: &[&str]) -> Vec<(String, bool)> {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        derive_commands(dir.path(), &|p| installed.contains(&p)).into_iter().map(|d| (d.command, d.installed)).collect()
    }

    fn commands_of(found: &[(String, bool)]) -> Vec<&str> {
        found.iter().map(|(c, _)| c.as_str()).collect()
    }

    #[test]
    fn a_package_runs_its_own_scripts_with_the_manager_of_its_lock_file() {
        let package =
            r#"{"scripts": {"test": "vitest run", "lint": "eslint .", "build": "tsc", "typecheck": "tsc --noEmit"}}"#;
        let npm = derived(&[("package.json", package), ("package-lock.json", "{}")], &["npm", "node"]);
        assert_eq!(commands_of(&npm), ["npm test", "npm run typecheck", "npm run lint"], "no build: it is not a check");
        let pnpm = derived(&[("package.json", package), ("pnpm-lock.yaml", "")], &["npm", "pnpm"]);
        assert_eq!(commands_of(&pnpm), ["pnpm test", "pnpm run typecheck", "pnpm run lint"]);
        // The lock file's manager is not installed: npm runs the same scripts.
        let no_pnpm = derived(&[("package.json", package), ("pnpm-lock.yaml", "")], &["npm"]);
        assert_eq!(commands_of(&no_pnpm), ["npm test", "npm run typecheck", "npm run lint"]);
        let yarn = derived(&[("package.json", package), ("yarn.lock", "")], &["yarn"]);
        assert_eq!(commands_of(&yarn)[..2], ["yarn test", "yarn run typecheck"]);
        let bun = derived(&[("package.json", r#"{"scripts": {"test": "bun test"}}"#), ("bun.lock", "")], &["bun"]);
        assert_eq!(commands_of(&bun), ["bun run test"]);
        // npm init's placeholder is no test.
        let placeholder = r#"{"scripts": {"test": "echo "Error: no test specified" && exit 1"}}"#;
        assert!(derived(&[("package.json", placeholder)], &["npm"]).is_empty());
    }

    #[test]
    fn python_runs_pytest_where_configured_else_unittest_and_only_configured_linters() {
        let plain = derived(&[("app/calc.py", "x = 1\n"), ("tests/test_calc.py", "")], &["python3"]);
        assert_eq!(plain, [("python3 -m unittest".to_owned(), true)]);
        let unittest = "import unittest\n\nclass T(unittest.TestCase):\n    def test_x(self):\n        pass\n";
        let classes = derived(&[("tests/test_calc.py", unittest)], &["python3"]);
        assert_eq!(commands_of(&classes), ["python3 -m unittest"]);
        // Plain test functions: only pytest runs them.
        let functions = "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n";
        assert_eq!(commands_of(&derived(&[("tests/test_calc.py", functions)], &["python3"])), ["python3 -m pytest"]);
        for (file, text) in [
            ("pyproject.toml", "[tool.pytest.ini_options]\naddopts = \"-q\"\n"),
            ("pytest.ini", "[pytest]\n"),
            ("setup.cfg", "[tool:pytest]\n"),
            ("tox.ini", "[pytest]\n"),
            ("conftest.py", ""),
            ("requirements-dev.txt", "pytest==8.3.4\n"),
            ("pyproject.toml", "[project.optional-dependencies]\ntest = [\"pytest>=8\"]\n"),
        ] {
            let found = derived(&[(file, text), ("pkg/mod.py", "")], &["python3"]);
            assert_eq!(commands_of(&found), ["python3 -m pytest"], "{file}: {text}");
        }
        // A dependency whose name only contains the word is not pytest.
        let found = derived(&[("requirements.txt", "mypytestlib\nfoo_pytest\n")], &["python3"]);
        assert_eq!(commands_of(&found), ["python3 -m unittest"]);
        let linted = derived(
            &[
                ("pyproject.toml", "[tool.ruff]\nline-length = 100\n[tool.mypy]\nstrict = true\n"),
                (".flake8", "[flake8]\n"),
            ],
            &["python3", "ruff"],
        );
        assert_eq!(
            linted,
            [
                ("python3 -m unittest".to_owned(), true),
                ("ruff check".to_owned(), true),
                ("mypy .".to_owned(), false),
                ("flake8".to_owned(), false),
            ]
        );
    }

    #[test]
    fn the_other_ecosystems_follow_their_conventions() {
        let rust = derived(&[("Cargo.toml", "[package]\n")], &["cargo"]);
        assert_eq!(commands_of(&rust), ["cargo test", "cargo clippy", "cargo fmt --check"]);
        let go = derived(&[("go.mod", "module x\n")], &[]);
        assert_eq!(go, [("go test ./...".to_owned(), false), ("go vet ./...".to_owned(), false)]);
        let maven = derived(&[("pom.xml", "<project/>"), ("mvnw", "#!/bin/sh\n")], &[]);
        assert_eq!(maven, [("./mvnw test".to_owned(), true)]);
        let gradle = derived(&[("build.gradle.kts", "")], &["gradle"]);
        assert_eq!(commands_of(&gradle), ["gradle test"]);
        let ruby = derived(&[("Gemfile", ""), ("spec/x_spec.rb", "")], &["bundle"]);
        assert_eq!(commands_of(&ruby), ["bundle exec rspec"]);
        let php = derived(&[("composer.json", r#"{"scripts": {"test": "phpunit"}}"#)], &["composer"]);
        assert_eq!(commands_of(&php), ["composer test"]);
        let dotnet = derived(&[("App.sln", "")], &["dotnet"]);
        assert_eq!(commands_of(&dotnet), ["dotnet test"]);
        let make = derived(&[("Makefile", "all: build\ntest: all\n\tpytest\nlint :\n\truff\n")], &["make"]);
        assert_eq!(commands_of(&make), ["make test", "make lint"], "targets of the Makefile, never `make` alone");
        assert!(derived(&[("README.md", "hi")], &["npm", "cargo"]).is_empty(), "nothing says what to run");
    }

    #[test]
    fn only_installed_commands_are_offered() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("go.mod"), "module x\n").unwrap();
        std::fs::write(dir.path().join("Makefile"), "test:\n\tgo test ./...\n").unwrap();
        let found = commands(dir.path(), &[]);
        assert_eq!(found.derived.len(), 3);
        let go = on_path("go");
        assert_eq!(found.commands.iter().any(|c| c.starts_with("go ")), go);
        assert_eq!(found.commands.contains(&"make test".to_owned()), on_path("make"));
    }
}
