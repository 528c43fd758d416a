//! The commands that verify a change: the project's tests, builds and linters.
//!
//! Outside READY the PreToolUse hooks let only read-only shell commands run; in the verification
//! phases (POST_IMPL_VERIFY, VERIFY_INTERVENTION) these run too, so an agent can do what the
//! verifier prompts ask. A project declares them in `.code-intel/config.json`
//! (`verify_commands`); a project that declares none gets the usual runners of the ecosystems
//! found at the repository root (a `Cargo.toml` gives `cargo test`, `cargo build`, …).
//!
//! A command is a prefix of words: `python3 -m unittest` lets `python3 -m unittest -q
//! tests.test_calc` run, not `python3 -c …` or `python3 script.py`. Options that make a runner
//! rewrite source files ([`REWRITING_OPTIONS`]) are refused whatever the prefix.

use std::path::Path;

/// Where the commands came from, for the prompts and `doctor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `verify_commands` in `.code-intel/config.json`.
    Declared,
    /// Detected from the files at the repository root.
    Detected,
}

/// The verification commands of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyCommands {
    pub commands: Vec<String>,
    pub source: Source,
}

/// Options with which a test runner, formatter or linter rewrites the files it checks.
pub const REWRITING_OPTIONS: &[&str] =
    &["--fix", "--fix-only", "--write", "--in-place", "--bless", "--update-snapshots", "--allow-dirty"];

/// What the usual runners of an ecosystem are, keyed by a file at the repository root (a name,
/// or a `*.ext` suffix for files such as `*.csproj`).
const ECOSYSTEMS: &[(&[&str], &[&str])] = &[
    (
        &["Cargo.toml"],
        &["cargo test", "cargo build", "cargo check", "cargo clippy", "cargo fmt --check", "cargo nextest run"],
    ),
    (
        &["pyproject.toml", "setup.py", "setup.cfg", "pytest.ini", "tox.ini", "requirements.txt", "*.py"],
        &[
            "python -m pytest",
            "python3 -m pytest",
            "pytest",
            "python -m unittest",
            "python3 -m unittest",
            "ruff check",
            "mypy",
            "flake8",
            "pylint",
        ],
    ),
    (
        &["package.json"],
        &[
            "npm test",
            "npm run test",
            "npm run build",
            "npm run lint",
            "npm run typecheck",
            "yarn test",
            "yarn build",
            "yarn lint",
            "pnpm test",
            "pnpm build",
            "pnpm lint",
            "npx tsc --noEmit",
            "npx jest",
            "npx vitest run",
            "npx eslint",
        ],
    ),
    (&["go.mod"], &["go test", "go build", "go vet"]),
    (&["pom.xml"], &["mvn test", "mvn verify", "mvn compile", "mvn -q test"]),
    (&["build.gradle", "build.gradle.kts"], &["gradle test", "gradle build", "./gradlew test", "./gradlew build"]),
    // Not `make` alone: a prefix would let every target run (`make install`, `make clean`).
    (&["Makefile", "makefile", "GNUmakefile"], &["make test", "make check", "make lint", "make build"]),
    (&["CMakeLists.txt"], &["cmake --build", "ctest"]),
    (&["Gemfile", "Rakefile"], &["bundle exec rspec", "bundle exec rake test", "rspec", "rake test"]),
    (&["composer.json"], &["composer test", "vendor/bin/phpunit", "phpunit"]),
    (&["*.csproj", "*.sln"], &["dotnet test", "dotnet build"]),
];

/// The project's verification commands: the declared ones, or else the detected ones.
pub fn commands(root: &Path, declared: &[String]) -> VerifyCommands {
    let declared: Vec<String> = declared.iter().map(|c| normalize(c)).filter(|c| !c.is_empty()).collect();
    if !declared.is_empty() {
        return VerifyCommands { commands: declared, source: Source::Declared };
    }
    let names: Vec<String> = std::fs::read_dir(root)
        .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let present = |marker: &str| match marker.strip_prefix('*') {
        Some(ext) => names.iter().any(|n| n.ends_with(ext)) || (ext == ".py" && has_python_below(root)),
        None => names.iter().any(|n| n == marker),
    };
    let mut commands: Vec<String> = Vec::new();
    for (markers, runners) in ECOSYSTEMS {
        if markers.iter().any(|m| present(m)) {
            commands.extend(runners.iter().map(|r| (*r).to_owned()));
        }
    }
    commands.dedup();
    VerifyCommands { commands, source: Source::Detected }
}

/// A Python project often keeps its code a level down (`app/`, `src/pkg/`, `tests/`).
fn has_python_below(root: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(root) else { return false };
    entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).any(|dir| {
        let name = dir.file_name();
        if name.to_string_lossy().starts_with('.') {
            return false;
        }
        std::fs::read_dir(dir.path())
            .map(|inner| inner.flatten().any(|f| f.file_name().to_string_lossy().ends_with(".py")))
            .unwrap_or(false)
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
    fn declared_commands_replace_the_detected_ones() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\n").unwrap();
        let detected = commands(dir.path(), &[]);
        assert_eq!(detected.source, Source::Detected);
        assert!(detected.commands.contains(&"cargo test".to_owned()));
        assert!(!detected.commands.iter().any(|c| c.starts_with("pytest")));
        let declared = commands(dir.path(), &["  just   test ".to_owned()]);
        assert_eq!(declared, VerifyCommands { commands: vec!["just test".into()], source: Source::Declared });
    }

    #[test]
    fn python_code_one_level_down_is_a_python_project() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("app")).unwrap();
        std::fs::write(dir.path().join("app/calc.py"), "x = 1\n").unwrap();
        let found = commands(dir.path(), &[]);
        assert!(found.commands.contains(&"python3 -m unittest".to_owned()), "{found:?}");
        assert!(found.commands.contains(&"pytest".to_owned()));
    }
}
