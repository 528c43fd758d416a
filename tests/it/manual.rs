//! `git code-intel --help` shows the manual once it is installed the README's way (`git
//! code-intel man --install` beside the binary), and completions exist for three shells.

use std::process::Command;

use crate::common::mcp_client::BIN;

#[test]
fn git_help_shows_the_manual_installed_beside_the_binary() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(BIN, bin.join("git-code-intel")).unwrap();
    let installed = Command::new(bin.join("git-code-intel")).args(["man", "--install"]).output().unwrap();
    assert!(installed.status.success(), "{}", String::from_utf8_lossy(&installed.stderr));
    let page = root.path().join("share/man/man1/git-code-intel.1");
    assert!(page.is_file(), "{}", String::from_utf8_lossy(&installed.stdout));
    assert!(root.path().join("share/man/man1/git-code-intel-search-text.1").is_file(), "one page per subcommand");

    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let help = Command::new("git")
        .args(["code-intel", "--help"])
        .env("PATH", &path)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .env_remove("MANPATH")
        .output()
        .expect("git");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.status.success() && text.contains("Code intelligence for coding agents") && text.contains("search-text"),
        "git code-intel --help (is man-db installed? scripts/setup.sh installs it): {}{}",
        text,
        String::from_utf8_lossy(&help.stderr)
    );
}

#[test]
fn completions_are_generated_for_bash_zsh_and_fish() {
    for (shell, marker) in
        [("bash", "complete -F"), ("zsh", "#compdef git-code-intel"), ("fish", "complete -c git-code-intel")]
    {
        let out = Command::new(BIN).args(["completions", shell]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains(marker), "{shell}: {text}");
        assert!(text.contains("search-text") && text.contains("update-context"), "{shell} knows the subcommands");
    }
    let bad = Command::new(BIN).args(["completions", "tcsh"]).output().unwrap();
    assert!(!bad.status.success());
}
