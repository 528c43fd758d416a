//! What a file is for, by its path alone: a test, documentation, configuration or source. The
//! impact report groups what depends on a target by it, and reference search tells tests apart.

/// `"test"`, `"doc"`, `"config"` or `"source"`.
pub(crate) fn category(rel: &str) -> &'static str {
    let lower = rel.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    let ext = name.rsplit('.').next().unwrap_or("");
    if lower.split('/').any(|c| matches!(c, "test" | "tests" | "spec" | "specs" | "__tests__" | "testing"))
        || name.starts_with("test_")
        || name.contains("_test.")
        || name.contains(".test.")
        || name.contains(".spec.")
        || name.contains("_spec.")
        || name.ends_with("test.java")
        || name.ends_with("tests.cs")
    {
        "test"
    } else if matches!(ext, "md" | "rst" | "txt" | "adoc") {
        "doc"
    } else if matches!(ext, "json" | "yaml" | "yml" | "toml" | "ini" | "cfg" | "conf" | "xml" | "properties" | "env")
        || name == "dockerfile"
        || name == "makefile"
    {
        "config"
    } else {
        "source"
    }
}
