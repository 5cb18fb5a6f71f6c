//! Running one test in a test process of its own, for a test that changes
//! what is process-wide (its environment) or counts what is (its threads),
//! while the other tests of its binary run in parallel threads.
//!
//! [`in_own_process`] runs the test binary again with only that test
//! selected (`--exact`) and marked to run its body; the calling test passes
//! or fails with it.

use std::ffi::OsStr;
use std::process::Command;

/// Set, in the process [`in_own_process`] starts, to the name of the test
/// whose body runs there.
const CHILD: &str = "FIELDHUB_TESTKIT_OWN_PROCESS";

/// Run `body` alone in a new process of this test binary, with `env` in its
/// environment (a `None` value removes the variable), and fail if it fails.
/// `test` is the test's path as `module_path!()` and the function name give
/// it (`concat!(module_path!(), "::name")`). In that process, `body` runs.
pub fn in_own_process(test: &str, env: &[(&str, Option<&OsStr>)], body: impl FnOnce()) {
    // libtest names a test by its path below the crate.
    let name = test.split_once("::").map_or(test, |(_, below_the_crate)| below_the_crate);
    if std::env::var(CHILD).is_ok_and(|running| running == name) {
        return body();
    }
    let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
    command.args([name, "--exact", "--nocapture", "--test-threads", "1"]).env(CHILD, name);
    for (var, value) in env {
        match value {
            Some(value) => command.env(var, value),
            None => command.env_remove(var),
        };
    }
    let out = command.output().expect("run the test binary again");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{name} failed in its own process:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{name} did not run in its own process:\n{stdout}\n{stderr}");
}
