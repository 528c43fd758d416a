//! What a test runner's output says: how many tests passed, failed and were skipped, and the
//! names of the failing ones, read from the summary lines of the runners we know (cargo test,
//! pytest, unittest, vitest, jest, go test, mocha, rspec). The server reads the output of the
//! runs it witnesses with it; an output none of them wrote gives no counts, and the run is
//! judged by its exit status alone.

use std::sync::LazyLock;

use regex::Regex;

/// The counts and failing tests one run's output shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// The runner whose summary was read (`cargo test`, `pytest`, …); None: none was.
    pub runner: Option<String>,
    pub passed: Option<u64>,
    pub failed: Option<u64>,
    pub skipped: Option<u64>,
    /// The failing tests' names as the runner prints them, each once, at most [`MAX_NAMES`].
    pub failing: Vec<String>,
}

/// The most failing tests' names kept from one run.
pub const MAX_NAMES: usize = 50;

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this file, checked by its tests.
    Regex::new(pattern).unwrap_or_else(|e| panic!("test_summary pattern {pattern:?}: {e}"))
}

static CARGO_RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored"));
static CARGO_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^test (\S+) \.\.\. FAILED$"));
static PYTEST_RESULT: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?m)^=*\s*((?:\d+ (?:passed|failed|skipped|errors?|xfailed|xpassed|deselected|warnings?)(?:, )?)+) in [\d.]+s")
});
static PYTEST_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^(?:FAILED|ERROR) (\S+)"));
static UNITTEST_RAN: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^Ran (\d+) tests? in [\d.]+s"));
static UNITTEST_FAILED: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^FAILED \((?:failures=(\d+))?(?:, )?(?:errors=(\d+))?(?:, )?(?:skipped=(\d+))?"));
static UNITTEST_OK_SKIPPED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^OK \(skipped=(\d+)\)"));
static UNITTEST_NAME: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^(?:FAIL|ERROR): (\S+ \([^)]+\))"));
static VITEST_RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^\s*Tests\s+((?:\d+ (?:failed|passed|skipped|todo)(?: \| )?)+)\s*\(\d+\)"));
static VITEST_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*(?:FAIL|×|✗)\s+(\S.*?)\s*(?:\d+ms)?$"));
static JEST_RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^Tests:\s+((?:\d+ (?:failed|passed|skipped|todo|total)(?:, )?)+)"));
static JEST_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*● (.+?)\s*$"));
static GO_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*--- FAIL: (\S+)"));
static GO_PASSED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s*--- PASS: (\S+)"));
static GO_PACKAGE: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^(?:ok|FAIL)\s+\S+\s+[\d.]+s"));
static MOCHA_PASSING: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s+(\d+) passing \("));
static MOCHA_FAILING: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s+(\d+) failing$"));
static MOCHA_PENDING: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^\s+(\d+) pending$"));
static RSPEC_RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?m)^(\d+) examples?, (\d+) failures?(?:, (\d+) pending)?"));
static RSPEC_FAILED: LazyLock<Regex> = LazyLock::new(|| re(r"(?m)^rspec (\S+) # (.+)$"));

/// Reads `output` (stdout and stderr together).
pub fn read(output: &str) -> Summary {
    let mut s = Summary::default();
    let names = |re: &Regex, group: usize| -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in re.captures_iter(output) {
            if let Some(m) = c.get(group) {
                let name = m.as_str().trim().to_owned();
                if !name.is_empty() && !out.contains(&name) && out.len() < MAX_NAMES {
                    out.push(name);
                }
            }
        }
        out
    };
    let num = |c: &regex::Captures, i: usize| c.get(i).and_then(|m| m.as_str().parse::<u64>().ok());
    // Counts written as "3 failed, 10 passed" (pytest, vitest, jest).
    let counted = |text: &str, word: &str| -> Option<u64> {
        text.split([',', '|'])
            .filter_map(|part| {
                let mut words = part.split_whitespace();
                let n = words.next()?.parse::<u64>().ok()?;
                (words.next()?.trim_end_matches('s') == word.trim_end_matches('s')).then_some(n)
            })
            .reduce(|a, b| a + b)
    };
    if CARGO_RESULT.is_match(output) {
        let (mut p, mut f, mut i) = (0, 0, 0);
        for c in CARGO_RESULT.captures_iter(output) {
            p += num(&c, 1).unwrap_or(0);
            f += num(&c, 2).unwrap_or(0);
            i += num(&c, 3).unwrap_or(0);
        }
        s.runner = Some("cargo test".into());
        (s.passed, s.failed, s.skipped) = (Some(p), Some(f), Some(i));
        s.failing = names(&CARGO_FAILED, 1);
    } else if let Some(c) = PYTEST_RESULT.captures_iter(output).last() {
        let text = c.get(1).map_or("", |m| m.as_str());
        s.runner = Some("pytest".into());
        s.passed = Some(counted(text, "passed").unwrap_or(0));
        s.failed = Some(counted(text, "failed").unwrap_or(0) + counted(text, "error").unwrap_or(0));
        s.skipped = Some(counted(text, "skipped").unwrap_or(0));
        s.failing = names(&PYTEST_FAILED, 1);
    } else if let Some(c) = UNITTEST_RAN.captures_iter(output).last() {
        let ran = num(&c, 1).unwrap_or(0);
        let (failures, errors, skipped) = match UNITTEST_FAILED.captures_iter(output).last() {
            Some(f) => (num(&f, 1).unwrap_or(0), num(&f, 2).unwrap_or(0), num(&f, 3).unwrap_or(0)),
            None => (0, 0, UNITTEST_OK_SKIPPED.captures(output).and_then(|c| num(&c, 1)).unwrap_or(0)),
        };
        s.runner = Some("unittest".into());
        s.failed = Some(failures + errors);
        s.skipped = Some(skipped);
        s.passed = Some(ran.saturating_sub(failures + errors + skipped));
        s.failing = names(&UNITTEST_NAME, 1);
    } else if let Some(c) = VITEST_RESULT.captures_iter(output).last() {
        let text = c.get(1).map_or("", |m| m.as_str());
        s.runner = Some("vitest".into());
        s.passed = Some(counted(text, "passed").unwrap_or(0));
        s.failed = Some(counted(text, "failed").unwrap_or(0));
        s.skipped = Some(counted(text, "skipped").unwrap_or(0) + counted(text, "todo").unwrap_or(0));
        s.failing = names(&VITEST_FAILED, 1);
    } else if let Some(c) = JEST_RESULT.captures_iter(output).last() {
        let text = c.get(1).map_or("", |m| m.as_str());
        s.runner = Some("jest".into());
        s.passed = Some(counted(text, "passed").unwrap_or(0));
        s.failed = Some(counted(text, "failed").unwrap_or(0));
        s.skipped = Some(counted(text, "skipped").unwrap_or(0) + counted(text, "todo").unwrap_or(0));
        s.failing = names(&JEST_FAILED, 1);
    } else if RSPEC_RESULT.is_match(output) {
        let c = RSPEC_RESULT.captures_iter(output).last();
        let get = |i| c.as_ref().and_then(|c| num(c, i));
        let (examples, failures) = (get(1).unwrap_or(0), get(2).unwrap_or(0));
        let pending = get(3).unwrap_or(0);
        s.runner = Some("rspec".into());
        (s.failed, s.skipped) = (Some(failures), Some(pending));
        s.passed = Some(examples.saturating_sub(failures + pending));
        s.failing = names(&RSPEC_FAILED, 1);
    } else if MOCHA_PASSING.is_match(output) || MOCHA_FAILING.is_match(output) {
        let first = |re: &Regex| re.captures(output).and_then(|c| num(&c, 1));
        s.runner = Some("mocha".into());
        s.passed = Some(first(&MOCHA_PASSING).unwrap_or(0));
        s.failed = Some(first(&MOCHA_FAILING).unwrap_or(0));
        s.skipped = Some(first(&MOCHA_PENDING).unwrap_or(0));
    } else if GO_PACKAGE.is_match(output) || GO_FAILED.is_match(output) {
        s.runner = Some("go test".into());
        s.failing = names(&GO_FAILED, 1);
        s.failed = Some(s.failing.len() as u64);
        // Without -v go test names only what failed: the passes are counted only when listed.
        let passed = GO_PASSED.captures_iter(output).count() as u64;
        s.passed = (passed > 0).then_some(passed);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(s: &Summary) -> (Option<&str>, Option<u64>, Option<u64>, Option<u64>) {
        (s.runner.as_deref(), s.passed, s.failed, s.skipped)
    }

    #[test]
    fn cargo_test_sums_every_test_binary() {
        let out = "running 3 tests\ntest calc::adds ... ok\ntest calc::divides ... FAILED\ntest calc::skip ... ignored\n\n\
                   test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s\n\n\
                   running 2 tests\ntest result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
        let s = read(out);
        assert_eq!(counts(&s), (Some("cargo test"), Some(3), Some(1), Some(1)));
        assert_eq!(s.failing, ["calc::divides"]);
    }

    #[test]
    fn pytest_in_either_verbosity() {
        let out = "FAILED tests/test_calc.py::test_div - ZeroDivisionError\nERROR tests/test_io.py::test_read\n\
                   ==== 1 failed, 4 passed, 2 skipped, 1 error in 0.12s ====\n";
        let s = read(out);
        assert_eq!(counts(&s), (Some("pytest"), Some(4), Some(2), Some(2)));
        assert_eq!(s.failing, ["tests/test_calc.py::test_div", "tests/test_io.py::test_read"]);
        assert_eq!(counts(&read("..\n2 passed in 0.01s\n")), (Some("pytest"), Some(2), Some(0), Some(0)));
    }

    #[test]
    fn unittest_counts_what_ran_less_what_failed() {
        let out = "F.E\n======\nFAIL: test_mul (tests.test_calc.CalcTest.test_mul)\n------\nERROR: test_div (tests.test_calc.CalcTest.test_div)\n\
                   ----------------------------------------------------------------------\nRan 3 tests in 0.001s\n\nFAILED (failures=1, errors=1)\n";
        let s = read(out);
        assert_eq!(counts(&s), (Some("unittest"), Some(1), Some(2), Some(0)));
        assert_eq!(
            s.failing,
            ["test_mul (tests.test_calc.CalcTest.test_mul)", "test_div (tests.test_calc.CalcTest.test_div)"]
        );
        assert_eq!(
            counts(&read("Ran 4 tests in 0.1s\n\nOK (skipped=1)\n")),
            (Some("unittest"), Some(3), Some(0), Some(1))
        );
        assert_eq!(counts(&read("Ran 2 tests in 0.0s\n\nOK\n")), (Some("unittest"), Some(2), Some(0), Some(0)));
    }

    #[test]
    fn vitest_jest_mocha_rspec_and_go() {
        let vitest = " FAIL  src/url.test.ts > withFragment > keeps the query\n Test Files  1 failed | 2 passed (3)\n      Tests  1 failed | 14 passed | 1 skipped (16)\n";
        let s = read(vitest);
        assert_eq!(counts(&s), (Some("vitest"), Some(14), Some(1), Some(1)));
        assert_eq!(s.failing, ["src/url.test.ts > withFragment > keeps the query"]);
        let jest = "  ● math › divides by zero\n\nTests:       1 failed, 9 passed, 10 total\n";
        let s = read(jest);
        assert_eq!(counts(&s), (Some("jest"), Some(9), Some(1), Some(0)));
        assert_eq!(s.failing, ["math › divides by zero"]);
        assert_eq!(
            counts(&read("\n  12 passing (30ms)\n  2 pending\n  1 failing\n")),
            (Some("mocha"), Some(12), Some(1), Some(2))
        );
        let rspec = "5 examples, 1 failure, 1 pending\n\nFailed examples:\n\nrspec ./spec/calc_spec.rb:4 # Calc adds\n";
        let s = read(rspec);
        assert_eq!(counts(&s), (Some("rspec"), Some(3), Some(1), Some(1)));
        assert_eq!(s.failing, ["./spec/calc_spec.rb:4"]);
        let go = "--- FAIL: TestDiv (0.00s)\n    calc_test.go:9: want 2\nFAIL\nFAIL\texample.com/calc\t0.002s\nok  \texample.com/util\t0.001s\n";
        let s = read(go);
        assert_eq!(counts(&s), (Some("go test"), None, Some(1), None));
        assert_eq!(s.failing, ["TestDiv"]);
    }

    #[test]
    fn an_output_no_runner_wrote_gives_no_counts() {
        assert_eq!(read("All good!\nbuilt in 2s\n"), Summary::default());
    }
}
