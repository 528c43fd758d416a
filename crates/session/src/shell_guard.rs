//! Which shell commands may run outside READY: only read-only ones, judged on an allow list
//! after parsing the command line with a real shell grammar (tree-sitter-bash), so quoting,
//! backslashes, `sh -c`, `eval`, substitutions and redirections are seen for what they are.
//!
//! A command line passes when every command in it (in pipelines, lists, subshells, conditions,
//! loops, and command or process substitutions) is on the list and uses none of its writing
//! options, or is one of the verification commands the caller allows (the project's tests,
//! builds and linters, [`code_intel_codebase::verify`]), and every output redirection goes to
//! `/dev/null` or another descriptor. Anything the
//! guard does not understand is refused, with the reason: a command name computed at run time,
//! a function definition, an environment assignment, a syntax error.

use tree_sitter::{Node, Parser};

/// One allowed command and what it may not do.
struct Rule {
    name: &'static str,
    /// Options that make it write (or run other programs): exact, or `--opt=` prefixes.
    forbidden: &'static [&'static str],
    /// At most this many operands (arguments that are not options), when it writes to a
    /// trailing one (`uniq in out`).
    max_operands: Option<usize>,
}

const fn rule(name: &'static str) -> Rule {
    Rule { name, forbidden: &[], max_operands: None }
}

const fn forbid(name: &'static str, forbidden: &'static [&'static str]) -> Rule {
    Rule { name, forbidden, max_operands: None }
}

/// The read-only commands allowed by default. `git` is judged by its subcommand, see
/// [`GIT_READ_ONLY`].
const DEFAULTS: &[Rule] = &[
    rule("ls"),
    rule("cat"),
    rule("head"),
    rule("tail"),
    rule("wc"),
    rule("grep"),
    rule("egrep"),
    rule("fgrep"),
    forbid("rg", &["--pre", "--pre-glob"]),
    forbid("find", &["-delete", "-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"]),
    forbid("fd", &["-x", "--exec", "-X", "--exec-batch"]),
    rule("tree"),
    rule("file"),
    rule("stat"),
    rule("du"),
    rule("df"),
    rule("pwd"),
    rule("cd"),
    rule("echo"),
    rule("printf"),
    rule("true"),
    rule("false"),
    rule("test"),
    rule("["),
    rule(":"),
    rule("which"),
    rule("type"),
    rule("basename"),
    rule("dirname"),
    rule("realpath"),
    rule("readlink"),
    rule("cut"),
    rule("tr"),
    forbid("diff", &["--output"]),
    rule("cmp"),
    forbid("sort", &["-o", "--output"]),
    Rule { name: "uniq", forbidden: &[], max_operands: Some(1) },
    rule("nl"),
    rule("jq"),
    rule("date"),
    rule("whoami"),
    rule("uname"),
    rule("id"),
    rule("column"),
    rule("comm"),
    rule("tac"),
    rule("rev"),
    rule("fold"),
    rule("od"),
    rule("hexdump"),
    Rule { name: "xxd", forbidden: &["-r", "-revert"], max_operands: Some(1) },
    rule("md5sum"),
    rule("sha1sum"),
    rule("sha256sum"),
    rule("b3sum"),
    rule("cksum"),
    rule("seq"),
    rule("ps"),
    Rule { name: "command", forbidden: &[], max_operands: None },
];

/// git subcommands that only read, each with the options that would make it write.
const GIT_READ_ONLY: &[(&str, &[&str])] = &[
    ("status", &[]),
    ("log", &["--output"]),
    ("show", &["--output"]),
    ("diff", &["--output"]),
    ("blame", &[]),
    ("grep", &["-O", "--open-files-in-pager"]),
    ("ls-files", &[]),
    ("ls-tree", &[]),
    ("rev-parse", &[]),
    ("rev-list", &[]),
    ("cat-file", &[]),
    ("describe", &[]),
    ("shortlog", &[]),
    ("merge-base", &[]),
    ("show-ref", &[]),
    ("for-each-ref", &[]),
    ("name-rev", &[]),
    ("count-objects", &[]),
    ("version", &[]),
    ("help", &[]),
];

/// Why a command line is refused.
pub type Refusal = String;

/// Judges `command`: Ok when it only reads, else why not. `extra` holds the project's own
/// additions (`read_only_commands` in `.code-intel/config.json`): a command name (`make`), or
/// a name and its first operand (`cargo metadata`). `verify` holds the verification commands
/// that may run too (empty outside the verification phases).
pub fn check(command: &str, extra: &[String], verify: &[String]) -> Result<(), Refusal> {
    let mut parser = Parser::new();
    parser.set_language(&tree_sitter_bash::LANGUAGE.into()).map_err(|e| format!("no shell grammar: {e}"))?;
    let tree = parser.parse(command, None).ok_or("the command could not be parsed")?;
    let root = tree.root_node();
    if root.has_error() {
        return Err("the command could not be parsed as shell syntax".into());
    }
    Judge { src: command.as_bytes(), extra, verify }.node(root)
}

struct Judge<'a> {
    src: &'a [u8],
    extra: &'a [String],
    verify: &'a [String],
}

impl Judge<'_> {
    fn text(&self, n: Node) -> String {
        String::from_utf8_lossy(&self.src[n.start_byte()..n.end_byte()]).into_owned()
    }

    fn children(&self, n: Node) -> Result<(), Refusal> {
        let mut cursor = n.walk();
        for child in n.named_children(&mut cursor) {
            self.node(child)?;
        }
        Ok(())
    }

    fn node(&self, n: Node) -> Result<(), Refusal> {
        match n.kind() {
            "program"
            | "list"
            | "pipeline"
            | "subshell"
            | "compound_statement"
            | "negated_command"
            | "do_group"
            | "if_statement"
            | "elif_clause"
            | "else_clause"
            | "while_statement"
            | "for_statement"
            | "c_style_for_statement"
            | "case_statement"
            | "case_item"
            | "test_command"
            | "unset_command" => self.children(n),
            // Values: harmless themselves, but a substitution inside runs commands.
            "word"
            | "string"
            | "raw_string"
            | "ansi_c_string"
            | "translated_string"
            | "concatenation"
            | "number"
            | "simple_expansion"
            | "expansion"
            | "arithmetic_expansion"
            | "brace_expression"
            | "array"
            | "string_content"
            | "variable_name"
            | "special_variable_name"
            | "comment"
            | "regex"
            | "extglob_pattern"
            | "binary_expression"
            | "unary_expression"
            | "ternary_expression"
            | "postfix_expression"
            | "parenthesized_expression"
            | "subscript"
            | "test_operator"
            | "file_descriptor"
            | "heredoc_body"
            | "heredoc_content"
            | "heredoc_start"
            | "heredoc_end" => self.children(n),
            "command_substitution" | "process_substitution" => self.children(n),
            // `x=value`: a shell variable; the value may hold a substitution.
            "variable_assignment" | "variable_assignments" => self.children(n),
            "redirected_statement" => self.redirected(n),
            "command" => self.command(n),
            "declaration_command" => Err(format!("`{}` changes the environment of later commands", self.head(n))),
            "function_definition" => Err("it defines a function".into()),
            other => Err(format!("`{other}` is not something the read-only guard understands")),
        }
    }

    fn head(&self, n: Node) -> String {
        self.text(n).split_whitespace().next().unwrap_or("").to_owned()
    }

    fn redirected(&self, n: Node) -> Result<(), Refusal> {
        let mut cursor = n.walk();
        for child in n.named_children(&mut cursor) {
            match child.kind() {
                "file_redirect" => self.file_redirect(child)?,
                "heredoc_redirect" => {
                    // Input from the text below; redirections and commands after it still count.
                    let mut c = child.walk();
                    for part in child.named_children(&mut c) {
                        match part.kind() {
                            "file_redirect" => self.file_redirect(part)?,
                            "heredoc_body" | "heredoc_start" | "heredoc_end" | "herestring_redirect" => {}
                            _ => self.node(part)?,
                        }
                    }
                }
                "herestring_redirect" => self.children(child)?,
                _ => self.node(child)?,
            }
        }
        Ok(())
    }

    /// Output may go to /dev/null or to another descriptor (`2>&1`) only.
    fn file_redirect(&self, n: Node) -> Result<(), Refusal> {
        let text = self.text(n);
        let operator: String = {
            let mut c = n.walk();
            n.children(&mut c).filter(|ch| !ch.is_named()).map(|ch| self.text(ch)).collect()
        };
        let destination = n.child_by_field_name("destination");
        let dest_text = destination.map(|d| literal(self, d).unwrap_or_else(|| self.text(d))).unwrap_or_default();
        if let Some(d) = destination {
            self.node(d)?;
        }
        let output = operator.contains('>');
        if !output || dest_text == "/dev/null" {
            return Ok(());
        }
        if operator.ends_with('&') && (dest_text.chars().all(|c| c.is_ascii_digit()) || dest_text == "-") {
            return Ok(());
        }
        Err(format!("`{text}` writes to a file"))
    }

    fn command(&self, n: Node) -> Result<(), Refusal> {
        let mut cursor = n.walk();
        let mut args: Vec<Node> = Vec::new();
        let mut name_node = None;
        for child in n.named_children(&mut cursor) {
            match child.kind() {
                "command_name" => name_node = Some(child),
                "variable_assignment" => {
                    return Err(format!(
                        "`{}` sets the environment of the command; not allowed outside READY",
                        self.text(child)
                    ));
                }
                "file_redirect" => self.file_redirect(child)?,
                "herestring_redirect" => self.children(child)?,
                _ => args.push(child),
            }
        }
        let Some(name_node) = name_node else { return Ok(()) };
        let Some(name) = name_node.named_child(0).and_then(|c| literal(self, c)) else {
            return Err(format!("the command name `{}` is computed at run time", self.text(name_node)));
        };
        for a in &args {
            self.node(*a)?;
        }
        let words: Vec<String> = args.iter().map(|a| literal(self, *a).unwrap_or_else(|| self.text(*a))).collect();
        // A verification command is named as the project runs it, path and all (`./gradlew`).
        if code_intel_codebase::verify::matching(self.verify, &name, &words).is_some() {
            return Ok(());
        }
        let base = match name.rsplit_once('/') {
            Some(("/bin" | "/usr/bin" | "/usr/local/bin", base)) => base.to_owned(),
            Some(_) => {
                return Err(format!("`{name}` runs a program by its path; outside READY only listed commands run"));
            }
            None => name,
        };
        self.allowed(&base, &words)
    }

    fn allowed(&self, name: &str, words: &[String]) -> Result<(), Refusal> {
        let operands: Vec<&String> = words.iter().filter(|w| !w.starts_with('-')).collect();
        if self.extra.iter().any(|e| {
            let mut parts = e.split_whitespace();
            parts.next() == Some(name) && parts.next().is_none_or(|sub| operands.first().is_some_and(|o| *o == sub))
        }) {
            return Ok(());
        }
        if name == "git" {
            return git(words);
        }
        if name == "command" && !words.iter().any(|w| w == "-v" || w == "-V") {
            return Err("`command` without -v runs another command".into());
        }
        let Some(rule) = DEFAULTS.iter().find(|r| r.name == name) else {
            return Err(format!(
                "`{name}` is not on the read-only list (read_only_commands in .code-intel/config.json)"
            ));
        };
        if let Some(flag) = words.iter().find(|w| forbidden(w, rule.forbidden)) {
            return Err(format!("`{name} {flag}` writes or runs other programs"));
        }
        if let Some(max) = rule.max_operands
            && operands.len() > max
        {
            return Err(format!("`{name}` with {} operands writes to the last one", operands.len()));
        }
        Ok(())
    }
}

/// Whether `word` is one of `forbidden`: the option itself, its `--opt=` form, or (for a
/// one-letter option) bundled with others (`-no` holds `-o`).
fn forbidden(word: &str, forbidden: &[&str]) -> bool {
    forbidden.iter().any(|f| {
        word == *f
            || (f.starts_with("--") && word.starts_with(&format!("{f}=")))
            || (f.len() == 2
                && f.starts_with('-')
                && word.starts_with('-')
                && !word.starts_with("--")
                && !f.starts_with("--")
                && word[1..].contains(&f[1..]))
    })
}

/// git: global options that only select the repository, then a read-only subcommand.
fn git(words: &[String]) -> Result<(), Refusal> {
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        match w {
            "-C" | "--git-dir" | "--work-tree" => i += 2,
            "--no-pager" | "-P" | "--no-replace-objects" | "--literal-pathspecs" | "--version" | "--help" => i += 1,
            w if w.starts_with("--git-dir=") || w.starts_with("--work-tree=") => i += 1,
            w if w.starts_with('-') => return Err(format!("`git {w}` can change what git runs or writes")),
            _ => break,
        }
    }
    let Some(sub) = words.get(i) else { return Ok(()) };
    let rest = &words[i + 1..];
    let no_operands = |flags_ok: &[&str]| -> Result<(), Refusal> {
        match rest.iter().find(|w| !flags_ok.contains(&w.as_str())) {
            None => Ok(()),
            Some(w) => Err(format!("`git {sub} {w}` writes")),
        }
    };
    match sub.as_str() {
        "branch" => no_operands(&[
            "-a",
            "--all",
            "-r",
            "--remotes",
            "-v",
            "-vv",
            "--list",
            "-l",
            "--show-current",
            "--merged",
            "--no-merged",
            "--contains",
        ]),
        "tag" => no_operands(&["-l", "--list", "-n"]),
        "remote" => no_operands(&["-v", "--verbose", "show", "get-url"]).or_else(|_| {
            if rest.first().is_some_and(|w| w == "show" || w == "get-url") {
                Ok(())
            } else {
                Err(format!("`git remote {}` writes", rest.join(" ")))
            }
        }),
        "config" => {
            let reads =
                ["--get", "--get-all", "--get-regexp", "--list", "-l", "--show-origin", "--show-scope", "get", "list"];
            if rest.first().is_some_and(|w| reads.contains(&w.as_str())) {
                Ok(())
            } else {
                Err("`git config` without --get or --list writes".into())
            }
        }
        "reflog" => match rest.first().map(String::as_str) {
            None | Some("show") => Ok(()),
            Some(w) if w.starts_with('-') => Ok(()),
            Some(w) => Err(format!("`git reflog {w}` writes")),
        },
        "stash" => match rest.first().map(String::as_str) {
            Some("list") | Some("show") => Ok(()),
            _ => Err("`git stash` changes the work tree".into()),
        },
        _ => match GIT_READ_ONLY.iter().find(|(s, _)| s == sub) {
            None => Err(format!("`git {sub}` is not a read-only git command")),
            Some((_, bad)) => match rest.iter().find(|w| forbidden(w, bad)) {
                Some(w) => Err(format!("`git {sub} {w}` writes or runs other programs")),
                None => Ok(()),
            },
        },
    }
}

/// The value of a word that holds no expansion: quotes and backslashes resolved. None when
/// part of it is computed at run time.
fn literal(judge: &Judge, n: Node) -> Option<String> {
    match n.kind() {
        "word" | "number" => {
            let text = judge.text(n);
            let mut out = String::new();
            let mut chars = text.chars();
            while let Some(c) = chars.next() {
                if c == '\\' {
                    out.extend(chars.next());
                } else {
                    out.push(c);
                }
            }
            Some(out)
        }
        "raw_string" => {
            let t = judge.text(n);
            Some(t.trim_start_matches('\'').trim_end_matches('\'').to_owned())
        }
        "string" => {
            let mut out = String::new();
            let mut cursor = n.walk();
            for c in n.named_children(&mut cursor) {
                if c.kind() != "string_content" {
                    return None;
                }
                out.push_str(&judge.text(c));
            }
            Some(out)
        }
        "concatenation" => {
            let mut out = String::new();
            let mut cursor = n.walk();
            for c in n.named_children(&mut cursor) {
                out.push_str(&literal(judge, c)?);
            }
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commands that write (or could), and must be refused outside READY.
    const WRITING: &[&str] = &[
        "echo x > f",
        "echo x >> notes.md",
        "echo x > \"f\"",
        "echo x >'f'",
        "cat <<'EOF' >> \"notes.md\"\nhello\nEOF",
        "cat <<EOF > out.txt\n$HOME\nEOF",
        "printf 'a' &> log.txt",
        "ls >| listing",
        "ls 2> errors.txt",
        "exec 3> fd.txt",
        "python -c \"open('x','w').write('y')\"",
        "python3 script.py",
        "node -e \"require('fs').writeFileSync('x','y')\"",
        "perl -e 'open F, \">x\"'",
        "perl -pi -e 's/a/b/' f",
        "ruby -e 'File.write(\"x\",\"y\")'",
        "awk 'BEGIN { print \"x\" > \"f\" }'",
        "awk '{print}' f",
        "sh -c 'rm x'",
        "bash -c 'echo x > f'",
        "zsh -c 'touch x'",
        "eval 'rm x'",
        "eval \"$CMD\"",
        "/bin/rm x",
        "\\rm x",
        "\"rm\" x",
        "'rm' x",
        "$'\\x72m' x",
        "$CMD x",
        "$(echo rm) x",
        "`echo rm` x",
        "rm -rf build",
        "rm x",
        "rmdir d",
        "mv a b",
        "cp a b",
        "mkdir d",
        "touch f",
        "truncate -s 0 f",
        "ln -s a b",
        "chmod +x f",
        "chown u f",
        "dd if=a of=b",
        "install a b",
        "rsync a b",
        "unzip a.zip",
        "tar -xf a.tar",
        "tar -cf a.tar src",
        "patch -p1 < fix.diff",
        "tee out.txt",
        "ls | tee out.txt",
        "sed -i 's/a/b/' f.py",
        "sed --in-place 's/a/b/' f.py",
        "sed -E -i.bak 's/a/b/' f.py",
        "sed -n 'w out' f",
        "find . -delete",
        "find . -name '*.pyc' -exec rm {} \\;",
        "find . -fprint out.txt",
        "curl -o page.html https://example.com",
        "wget https://example.com",
        "sort -o sorted.txt f",
        "sort --output=sorted.txt f",
        "uniq in.txt out.txt",
        "xxd -r dump.txt",
        "make",
        "make install",
        "cargo build",
        "npm install",
        "pip install x",
        "xargs rm < files.txt",
        "env FOO=1 ls",
        "FOO=1 ls",
        "GIT_EXTERNAL_DIFF=./x git diff",
        "export GIT_DIR=/tmp",
        "f() { rm x; }; f",
        "ls && rm x",
        "ls; rm x",
        "ls || touch x",
        "(cd src && rm x)",
        "{ echo a; } > f",
        "if true; then rm x; fi",
        "for f in *.py; do rm \"$f\"; done",
        "while true; do touch x; done",
        "echo $(rm x)",
        "echo `touch x`",
        "diff <(ls) >(tee out)",
        "cat f | sh",
        "git commit -am wip",
        "git checkout main",
        "git switch main",
        "git reset --hard",
        "git restore f",
        "git merge x",
        "git rebase main",
        "git stash",
        "git stash pop",
        "git apply fix.diff",
        "git clean -fd",
        "git add .",
        "git rm f",
        "git mv a b",
        "git pull",
        "git push . HEAD:main",
        "git branch -D x",
        "git branch -f main HEAD~1",
        "git branch newbranch",
        "git tag v1",
        "git update-ref refs/heads/main HEAD",
        "git read-tree -u HEAD",
        "git checkout-index -f -a",
        "git worktree add ../w",
        "git config core.hooksPath /tmp",
        "git -c core.pager=evil log",
        "git log --output=out.txt",
        "git diff --output=out.txt",
        "git grep -O x",
        "git remote add o url",
        "git reflog expire --all",
        "git notes add -m x",
        "git gc",
        "git fetch",
        "./scripts/build.sh",
        "bin/cat f",
        "rg --pre ./x pattern",
        "fd -x rm",
        "command rm x",
        "ls &&",
        "echo 'unterminated",
    ];

    /// Commands that only read, and must run.
    const READ_ONLY: &[&str] = &[
        "ls",
        "ls -la src",
        "cat src/auth.py",
        "head -n 20 README.md",
        "tail -f /dev/null",
        "wc -l src/*.py",
        "grep -rn login src",
        "rg -n 'fn main' --type rust",
        "rg login | head -5",
        "find . -name '*.py'",
        "find src -type f -newer README.md",
        "tree -L 2",
        "git status",
        "git log --oneline -5",
        "git show HEAD:src/auth.py",
        "git diff HEAD~1",
        "git blame src/auth.py",
        "git grep login",
        "git ls-files",
        "git rev-parse HEAD",
        "git -C sub log",
        "git --no-pager log",
        "git branch",
        "git branch -a",
        "git branch --show-current",
        "git remote -v",
        "git config --get user.name",
        "git stash list",
        "git reflog",
        "git cat-file -p HEAD",
        "git ls-tree -r HEAD",
        "echo hello",
        "echo x > /dev/null",
        "ls 2>&1",
        "ls 2>/dev/null | head",
        "pwd",
        "cd src && ls",
        "sort f | uniq -c",
        "diff a.txt b.txt",
        "stat f",
        "du -sh .",
        "which python",
        "command -v git",
        "jq .name package.json",
        "cat <<EOF\nhello\nEOF",
        "grep x <<< \"text\"",
        "wc -l < f",
        "echo \"$(git rev-parse HEAD)\"",
        "x=$(ls); echo $x",
        "if [ -f f ]; then cat f; fi",
        "for f in *.py; do wc -l \"$f\"; done",
        "sha256sum f",
        "test -d src",
        "[ -e x ] && echo yes",
    ];

    #[test]
    fn writing_commands_are_refused() {
        for cmd in WRITING {
            assert!(check(cmd, &[], &[]).is_err(), "allowed: {cmd}");
        }
    }

    #[test]
    fn read_only_commands_run() {
        for cmd in READ_ONLY {
            assert_eq!(check(cmd, &[], &[]), Ok(()), "refused: {cmd}");
        }
    }

    #[test]
    fn the_table_is_large_enough() {
        assert!(WRITING.len() + READ_ONLY.len() >= 115);
    }

    #[test]
    fn a_project_may_add_commands() {
        assert!(check("make -n", &[], &[]).is_err());
        assert_eq!(check("make -n", &["make".into()], &[]), Ok(()));
        assert_eq!(check("cargo metadata --format-version 1", &["cargo metadata".into()], &[]), Ok(()));
        assert!(check("cargo build", &["cargo metadata".into()], &[]).is_err());
    }

    #[test]
    fn verification_commands_run_and_writes_around_them_do_not() {
        let verify: Vec<String> = ["python3 -m unittest", "pytest", "cargo test", "npm test", "make", "./gradlew test"]
            .map(String::from)
            .to_vec();
        for ok in [
            "python3 -m unittest -q",
            "python3 -m unittest tests.test_calc -v 2>&1 | tail -20",
            "pytest -x tests/",
            "cd app && pytest",
            "cargo test --locked",
            "npm test",
            "make check",
            "./gradlew test",
        ] {
            assert_eq!(check(ok, &[], &verify), Ok(()), "refused: {ok}");
        }
        for refused in [
            "python3 -c \"open('app/calc.py','w')\"",
            "python3 script.py",
            "pytest > out.txt",
            "cargo test && echo x >> src/lib.rs",
            "make lint --fix",
            "npm install",
            "./gradlew clean",
        ] {
            assert!(check(refused, &[], &verify).is_err(), "allowed: {refused}");
        }
        // Outside the verification phases the same commands stay refused.
        assert!(check("python3 -m unittest -q", &[], &[]).is_err());
    }

    #[test]
    fn refusals_say_why() {
        let why = check("echo x > notes.md", &[], &[]).unwrap_err();
        assert!(why.contains("writes to a file"), "{why}");
        let why = check("sh -c 'rm x'", &[], &[]).unwrap_err();
        assert!(why.contains("`sh` is not on the read-only list"), "{why}");
        let why = check("$CMD x", &[], &[]).unwrap_err();
        assert!(why.contains("computed at run time"), "{why}");
    }
}
