//! Print a bare bus's figures (`fieldhub_bench::bare_fan_out`: a bus
//! thread and client threads with nothing between them but wake-ups) as
//! JSON:
//!
//! - `cargo run --release -p fieldhub-bench --example bare_fan_out -- [CLIENTS] [ROUNDS]`:
//!   the round trip of a probe and an echo among CLIENTS client threads
//!   (defaults: 64, as `bench scaling --clients 64`; 2,000 rounds);
//! - `... -- paced [RECEIVERS] [SECONDS]`: the CPU of one sender at a loaded
//!   500 kbit/s bus's frame rate and RECEIVERS receivers (defaults: 2, as
//!   `bench cpu`'s three clients; 5 s).
//!
//! Run it under the bench lock.

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    let paced = args.next_if(|a| a == "paced").is_some();
    let mut number = |what: &str, default: usize| match args.next() {
        None => default,
        Some(text) => text.parse().unwrap_or_else(|_| {
            eprintln!("bare_fan_out: {what} must be a whole number, not {text:?}");
            std::process::exit(2)
        }),
    };
    let figures = if paced {
        let receivers = number("RECEIVERS", 2);
        let seconds = number("SECONDS", 5);
        fieldhub_bench::bare_fan_out::paced(receivers, fieldhub_bench::cpu::frame_rate(), seconds as f64)
            .map(|bare| serde_json::to_string_pretty(&bare))
    } else {
        let clients = number("CLIENTS", 64);
        let rounds = number("ROUNDS", 2000);
        fieldhub_bench::bare_fan_out::measure(clients, rounds).map(|bare| serde_json::to_string_pretty(&bare))
    };
    match figures {
        Ok(json) => println!("{}", json.expect("plain figures serialise")),
        Err(e) => {
            eprintln!("bare_fan_out: {e}");
            std::process::exit(1)
        }
    }
}
