//! Print what waking N sleeping threads costs the waker, a futex word each
//! against one word for all (`fieldhub_bench::wake_word`), as JSON:
//!
//! `cargo run --release -p fieldhub-bench --example wake_word -- [SLEEPERS] [ROUNDS]`
//! (defaults: 62 sleepers, as the 64-client fan-out has readers besides the
//! probe and the echo; 2,000 rounds). Run it under the bench lock.

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |what: &str, default: usize| match args.next() {
        None => default,
        Some(text) => text.parse().unwrap_or_else(|_| {
            eprintln!("wake_word: {what} must be a whole number, not {text:?}");
            std::process::exit(2)
        }),
    };
    let sleepers = number("SLEEPERS", 62);
    let rounds = number("ROUNDS", 2000);
    match fieldhub_bench::wake_word::measure(sleepers, rounds) {
        Ok(cost) => println!("{}", serde_json::to_string_pretty(&cost).expect("plain figures serialise")),
        Err(e) => {
            eprintln!("wake_word: {e}");
            std::process::exit(1)
        }
    }
}
