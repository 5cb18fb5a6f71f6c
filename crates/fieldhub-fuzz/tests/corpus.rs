//! Every fuzz target over its committed corpus, then over inputs mutated
//! from it with a fixed seed: what the test command runs of the fuzzing.
//! A failure names the target and the input (hex) to add to the corpus once
//! fixed. Longer, coverage-guided runs: `fuzz/README.md`.

use std::path::Path;

use fieldhub_fuzz::mutate::{mutate, Rng};
use fieldhub_fuzz::TARGETS;

/// Mutated inputs per target in the test command.
const MUTATIONS: usize = 20_000;

fn corpus_of(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    entries.sort();
    entries.iter().map(|path| std::fs::read(path).unwrap()).collect()
}

fn hex(input: &[u8]) -> String {
    input.iter().map(|b| format!("{b:02x}")).collect()
}

fn run(name: &str, target: fn(&[u8]), input: &[u8]) {
    if std::panic::catch_unwind(|| target(input)).is_err() {
        panic!("fuzz target {name} failed on input {} ({} bytes)", hex(input), input.len());
    }
}

#[test]
fn every_target_survives_its_corpus_and_its_mutations() {
    for &(name, target) in TARGETS {
        let corpus = corpus_of(name);
        assert!(corpus.len() >= 3, "corpus/{name} needs seeds (at least 3, found {})", corpus.len());
        for input in &corpus {
            run(name, target, input);
        }
        let mut rng = Rng::new(0x00F1_E1D0 ^ name.len() as u64);
        for _ in 0..MUTATIONS {
            run(name, target, &mutate(&mut rng, &corpus));
        }
    }
}

#[test]
fn every_target_has_a_libfuzzer_entry_point_and_nothing_else_does() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut entry_points: Vec<String> = std::fs::read_dir(fuzz.join("fuzz_targets"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    entry_points.sort();
    let mut names: Vec<String> = TARGETS.iter().map(|(name, _)| name.to_string()).collect();
    names.sort();
    assert_eq!(entry_points, names, "fuzz/fuzz_targets/ and TARGETS differ");
    let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
    for name in &names {
        assert!(manifest.contains(&format!("name = \"{name}\"")), "fuzz/Cargo.toml lacks the [[bin]] {name}");
    }
}
