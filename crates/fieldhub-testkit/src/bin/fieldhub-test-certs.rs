//! `fieldhub-test-certs DIR`: write the TLS tests' certificates
//! (`fieldhub_testkit::certs::FILES`) into DIR, for the Python TLS tests,
//! which have no certificate library of their own.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir] = args.as_slice() else {
        eprintln!("usage: fieldhub-test-certs DIR");
        return ExitCode::from(2);
    };
    let dir = std::path::Path::new(dir);
    match std::fs::create_dir_all(dir).and_then(|()| fieldhub_testkit::certs::write(dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fieldhub-test-certs: cannot write the certificates into {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}
