//! Print the round trip of a probe and an echo among N client threads on a
//! bus that is nothing but its wake-ups (`fieldhub_bench::bare_fan_out`),
//! as JSON:
//!
//! `cargo run --release -p fieldhub-bench --example bare_fan_out -- [CLIENTS] [ROUNDS]`
//! (defaults: 64 clients, as `bench scaling --clients 64`; 2,000 rounds).
//! Run it under the bench lock.

fn main() {
    let mut args = std::env::args().skip(1);
    let mut number = |what: &str, default: usize| match args.next() {
        None => default,
        Some(text) => text.parse().unwrap_or_else(|_| {
            eprintln!("bare_fan_out: {what} must be a whole number, not {text:?}");
            std::process::exit(2)
        }),
    };
    let clients = number("CLIENTS", 64);
    let rounds = number("ROUNDS", 2000);
    match fieldhub_bench::bare_fan_out::measure(clients, rounds) {
        Ok(bare) => println!("{}", serde_json::to_string_pretty(&bare).expect("plain figures serialise")),
        Err(e) => {
            eprintln!("bare_fan_out: {e}");
            std::process::exit(1)
        }
    }
}
