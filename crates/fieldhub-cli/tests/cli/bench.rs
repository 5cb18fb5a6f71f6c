//! `fieldhub bench`: each command runs briefly and reports in the promised
//! shape — hub, baseline and ratio per scenario, ratios that are hub divided
//! by baseline, ordered percentiles, a plot that is an SVG document.
//! Benchmarks assert nothing about speed, and neither do these tests.

use std::path::PathBuf;

use crate::FIELDHUB;
use serde_json::Value;

fn bench(args: &[&str]) -> std::process::Output {
    FIELDHUB.command().arg("bench").args(args).output().expect("run fieldhub bench")
}

/// Run a benchmark with `--json` and return its scenarios.
fn bench_json(args: &[&str]) -> Vec<Value> {
    let out = bench(&[args, &["--json"]].concat());
    assert!(out.status.success(), "fieldhub bench {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    json.as_array().expect("a list of scenarios").clone()
}

fn number(v: &Value, path: &[&str]) -> f64 {
    let mut at = v;
    for key in path {
        at = &at[key];
    }
    at.as_f64().unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

fn assert_close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0), "{what}: {a} != {b}");
}

/// The latency shape, percentiles in order, ratios = hub / baseline.
fn check_latency(scenario: &Value, samples: u64) {
    for side in ["hub", "baseline"] {
        for key in ["p50_us", "p80_us", "p95_us", "p99_us", "p999_us", "max_us", "mean_us", "std_us"] {
            number(scenario, &[side, key]);
        }
        assert_eq!(scenario[side]["samples"], samples, "{side} sample count");
        let (p50, p99, max) = (
            number(scenario, &[side, "p50_us"]),
            number(scenario, &[side, "p99_us"]),
            number(scenario, &[side, "max_us"]),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{side}: p50 {p50}, p99 {p99}, max {max}");
    }
    for (ratio, key) in [("p50", "p50_us"), ("p99", "p99_us"), ("max", "max_us"), ("mean", "mean_us")] {
        assert_close(
            number(scenario, &["ratio", ratio]),
            number(scenario, &["hub", key]) / number(scenario, &["baseline", key]),
            ratio,
        );
    }
}

fn temp_svg(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("fieldhub-bench-test-{}-{name}.svg", std::process::id()))
}

#[test]
fn shm_latency_reports_both_frame_sizes_against_the_futex_ping_pong_and_plots_them() {
    let plot = temp_svg("shm");
    let scenarios = bench_json(&["latency", "--transport", "shm", "--samples", "50", "--plot", plot.to_str().unwrap()]);
    assert_eq!(scenarios.len(), 2, "8-byte and 64-byte scenarios by default");
    for (scenario, payload) in scenarios.iter().zip([8, 64]) {
        check_latency(scenario, 50);
        assert_eq!(scenario["payload_bytes"], payload);
        assert_eq!(scenario["transport"], "shm");
        assert!(scenario["baseline_kind"].as_str().unwrap().contains("futex"), "{scenario}");
    }
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    std::fs::remove_file(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "not an SVG document");
    assert_eq!(svg.matches("<polyline").count(), 4, "hub and baseline of each scenario");
}

#[test]
fn tcp_latency_is_measured_against_the_tcp_ping_pong() {
    let scenarios = bench_json(&["latency", "--transport", "tcp", "--can", "--samples", "50"]);
    assert_eq!(scenarios.len(), 1);
    check_latency(&scenarios[0], 50);
    assert_eq!(scenarios[0]["transport"], "tcp");
    assert_eq!(scenarios[0]["payload_bytes"], 8);
    assert!(scenarios[0]["baseline_kind"].as_str().unwrap().contains("TCP"));
}

#[test]
fn busy_poll_latency_is_measured_against_the_spin_ping_pong() {
    let scenarios = bench_json(&["latency", "--busy-poll", "--fd", "--samples", "20"]);
    assert_eq!(scenarios.len(), 1);
    check_latency(&scenarios[0], 20);
    assert_eq!(scenarios[0]["busy_poll"], true);
    assert_eq!(scenarios[0]["payload_bytes"], 64);
    assert!(scenarios[0]["baseline_kind"].as_str().unwrap().contains("spin"));
}

#[test]
fn extra_clients_on_the_channel_see_every_frame_in_order() {
    for idle in [false, true] {
        let mut args = vec!["latency", "--clients", "4", "--can", "--samples", "30"];
        if idle {
            args.push("--idle-clients");
        }
        let scenarios = bench_json(&args);
        check_latency(&scenarios[0], 30);
        let extra = &scenarios[0]["extra_clients"];
        assert_eq!(scenarios[0]["clients"], 6);
        assert_eq!(extra["count"], 4);
        assert_eq!(extra["idle"], idle);
        assert_eq!(extra["order_kept"], true, "{extra}");
        // The same hub with the probe and the echo alone, same run.
        let two = &scenarios[0]["two_clients"];
        assert_eq!(two["hub"]["samples"], 30);
        assert_close(
            number(two, &["ratio", "p99"]),
            number(&scenarios[0], &["hub", "p99_us"]) / number(two, &["hub", "p99_us"]),
            "p99 against two clients",
        );
        // Warm-up and counted round trips, a request and an answer each.
        assert!(number(extra, &["min_frames_received"]) >= 2.0 * 30.0, "{extra}");
    }
}

#[test]
fn latency_prints_a_table_with_the_ratio_without_json() {
    let out = bench(&["latency", "--transport", "tcp", "--can", "--samples", "20"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for expected in ["p50", "p99.9", "std", "hub", "TCP_NODELAY ping-pong", "ratio hub/baseline"] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn busy_poll_is_refused_for_tcp() {
    let out = bench(&["latency", "--transport", "tcp", "--busy-poll", "--samples", "10"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("busy-poll"));
}

#[test]
fn scaling_measures_each_series_against_its_first_point() {
    // 34 channels: the background needs a second pair of clients past a
    // client's 32 ports.
    let points = bench_json(&["scaling", "--clients", "2,4", "--channels", "1,34", "--samples", "30"]);
    let shape: Vec<(&str, u64, u64)> = points
        .iter()
        .map(|p| (p["series"].as_str().unwrap(), p["clients"].as_u64().unwrap(), p["channels"].as_u64().unwrap()))
        .collect();
    assert_eq!(shape, [("clients", 2, 1), ("clients", 4, 1), ("channels", 2, 1), ("channels", 2, 34)]);
    for point in &points {
        assert_eq!(point["hub"]["samples"], 30);
        let (p50, p99, max) =
            (number(point, &["hub", "p50_us"]), number(point, &["hub", "p99_us"]), number(point, &["hub", "max_us"]));
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{point}");
        let first = points.iter().find(|p| p["series"] == point["series"]).unwrap();
        for (ratio, key) in [("p50", "p50_us"), ("p99", "p99_us")] {
            assert_close(
                number(point, &["ratio", ratio]),
                number(point, &["hub", key]) / number(first, &["hub", key]),
                ratio,
            );
        }
    }
    for first in [&points[0], &points[2]] {
        assert!(first.get("extra_clients").is_none() && first.get("background").is_none(), "{first}");
    }
    let extra = &points[1]["extra_clients"];
    assert_eq!((extra["count"].as_u64(), extra["order_kept"].as_bool()), (Some(2), Some(true)), "{extra}");
    // Warm-up and counted round trips, a request and an answer each.
    assert!(number(extra, &["min_frames_received"]) >= 2.0 * 30.0, "{extra}");
    let background = &points[3]["background"];
    assert_eq!(background["channels"], 33);
    let (sent, received) = (number(background, &["frames_sent"]), number(background, &["frames_received"]));
    assert!(received + number(background, &["frames_dropped"]) <= sent, "{background}");
}

#[test]
fn scaling_runs_only_the_series_asked_for_and_prints_a_table() {
    let out = bench(&["scaling", "--channels", "1,2", "--samples", "20"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    for expected in ["round trip by channels on the hub", "p50", "p99", "ratio p50", "ratio p99", "frames received"] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("by clients"), "only the channels series was asked for:\n{text}");
}

#[test]
fn scaling_refuses_a_point_without_the_probe_and_the_echo_or_a_background_without_frames() {
    for (args, expected) in [
        (&["--clients", "1"][..], "at least the probe and the echo"),
        (&["--channels", "1,2", "--background-rate", "0"][..], "background rate must be a positive number"),
    ] {
        let out = bench(&[&["scaling", "--samples", "10"][..], args].concat());
        assert!(!out.status.success(), "{args:?} was accepted");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

/// The throughput shape, with the ratio = hub / baseline.
fn check_throughput(scenario: &Value) {
    let (hub, baseline) = (number(scenario, &["hub", "frames_per_s"]), number(scenario, &["baseline", "frames_per_s"]));
    assert!(hub > 0.0 && baseline > 0.0, "{scenario}");
    assert_close(number(scenario, &["ratio"]), hub / baseline, "ratio");
    number(scenario, &["hub", "payload_mbit_per_s"]);
    number(scenario, &["baseline", "payload_mbit_per_s"]);
    let per_second = scenario["hub"]["per_second"].as_array().expect("per-second figures");
    assert!(!per_second.is_empty());
    let frames = number(scenario, &["hub", "frames"]);
    assert!(per_second.iter().map(|n| n.as_f64().unwrap()).sum::<f64>() <= frames, "{scenario}");
}

#[test]
fn shm_throughput_reports_each_receiver_count_against_the_ring_stream() {
    let scenarios = bench_json(&["throughput", "--seconds", "1", "--can", "--receivers", "1,2"]);
    assert_eq!(scenarios.len(), 2);
    for (scenario, receivers) in scenarios.iter().zip([1, 2]) {
        check_throughput(scenario);
        assert_eq!(scenario["receivers"], receivers);
        assert_eq!(scenario["payload_bytes"], 8);
        assert!(scenario["baseline"]["kind"].as_str().unwrap().contains("SPSC ring"));
    }
}

#[test]
fn can_xl_throughput_moves_2048_byte_frames_on_a_canxl_channel_against_a_ring_stream_of_the_same() {
    let scenarios = bench_json(&["throughput", "--seconds", "1", "--xl", "--receivers", "2"]);
    assert_eq!(scenarios.len(), 1);
    check_throughput(&scenarios[0]);
    assert_eq!(scenarios[0]["payload_bytes"], 2048);
    assert_eq!(scenarios[0]["scenario"], "shm, 2048-byte CAN XL, 2 receiver(s)");
    assert!(scenarios[0]["baseline"]["kind"].as_str().unwrap().contains("SPSC ring"));
}

#[test]
fn tcp_throughput_is_measured_against_the_tcp_stream() {
    let scenarios = bench_json(&["throughput", "--transport", "tcp", "--seconds", "1", "--fd", "--receivers", "1"]);
    assert_eq!(scenarios.len(), 1);
    check_throughput(&scenarios[0]);
    assert_eq!(scenarios[0]["payload_bytes"], 64);
    assert!(scenarios[0]["baseline"]["kind"].as_str().unwrap().contains("TCP stream"));
}

#[test]
fn cpu_reports_idle_and_loaded_phases_with_one_and_three_clients() {
    let phases = bench_json(&["cpu", "--seconds", "0.5"]);
    let shape: Vec<(&str, u64)> =
        phases.iter().map(|p| (p["load"].as_str().unwrap(), p["clients"].as_u64().unwrap())).collect();
    assert_eq!(shape, [("idle", 1), ("500kbit/s", 1), ("idle", 3), ("500kbit/s", 3)]);
    for phase in &phases {
        for process in ["hub", "client_process"] {
            assert!(number(phase, &[process, "cpu_percent"]) >= 0.0, "{phase}");
        }
    }
    for loaded in phases.iter().filter(|p| p["load"] == "500kbit/s") {
        // 500 kbit/s of 8-byte frames: about 4,000 frames/s (exact bits).
        let target = number(loaded, &["target_frames_per_s"]);
        assert!((3500.0..4500.0).contains(&target), "{loaded}");
        assert!(number(loaded, &["frames_per_s"]) > 0.0);
    }
}

#[test]
fn virtual_time_runs_its_bus_time_and_reports_the_real_time_factor_of_it() {
    let out = bench(&["virtual-time", "--participants", "3", "--seconds", "0.2", "--period-ms", "5", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let result: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_close(number(&result, &["bus_seconds"]), 0.2, "bus time run");
    assert_eq!((result["advances"].as_u64(), result["frames_sent"].as_u64()), (Some(40), Some(120)));
    assert_eq!(result["frames_received"], result["frames_sent"], "the observer got every frame");
    let factor = number(&result, &["bus_seconds"]) / number(&result, &["wall_seconds"]);
    assert_close(number(&result, &["real_time_factor"]), factor, "bus time per wall-clock time");
}

#[test]
fn ping_times_round_trips_to_an_echo_on_a_running_hub_and_reports_ordered_percentiles() {
    let hub = crate::FIELDHUB.start();
    let mut echo = FIELDHUB
        .command()
        .args(["bench", "echo", "--hub", &hub.url, "--channel", "can1"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start bench echo");
    hub.wait_for_log("bench-echo");
    // The echo may still be setting its filter: a first ping can go unheard.
    let ping = |samples: &str| bench(&["ping", "--hub", &hub.url, "--channel", "can1", "--samples", samples, "--json"]);
    let out =
        (0..20).map(|_| ping("300")).find(|out| out.status.success()).expect("a ping is answered once the echo is up");
    let _ = echo.kill();
    let _ = echo.wait();
    let json: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!((json["channel"].as_str(), json["payload_bytes"].as_u64()), (Some("can1"), Some(8)));
    assert_eq!(json["round_trip"]["samples"], 300);
    let (p50, p99, max) = (
        number(&json, &["round_trip", "p50_us"]),
        number(&json, &["round_trip", "p99_us"]),
        number(&json, &["round_trip", "max_us"]),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "p50 {p50}, p99 {p99}, max {max}");
    let unanswered = bench(&["ping", "--hub", &hub.url, "--channel", "can0", "--samples", "5"]);
    assert!(!unanswered.status.success());
    let stderr = String::from_utf8_lossy(&unanswered.stderr);
    assert!(stderr.contains("no answer to round trip 0; is an echo on the channel?"), "{stderr}");
}

#[test]
fn echo_and_ping_present_the_token_from_the_environment() {
    let hub = crate::FIELDHUB.start_with_token("sesame");
    let fieldhub = || {
        let mut command = FIELDHUB.command();
        command.arg("bench").env("FIELDHUB_TOKEN", "sesame");
        command
    };
    let mut echo = fieldhub()
        .args(["echo", "--hub", &hub.url, "--channel", "can1"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start bench echo");
    hub.wait_for_log("bench-echo");
    let ping =
        || fieldhub().args(["ping", "--hub", &hub.url, "--channel", "can1", "--samples", "50"]).output().unwrap();
    let answered = (0..20).map(|_| ping()).find(|out| out.status.success());
    let _ = echo.kill();
    let _ = echo.wait();
    assert!(answered.is_some(), "a ping with the token is answered by an echo with the token");
    let refused = fieldhub()
        .env_remove("FIELDHUB_TOKEN")
        .args(["ping", "--hub", &hub.url, "--channel", "can1", "--samples", "5"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("this hub requires a token"), "{stderr}");
}

#[test]
fn a_brief_soak_run_with_killed_clients_keeps_one_gap_free_order_and_gives_back_the_hubs_resources() {
    let out = bench(&["soak", "--frames", "3000", "--clients", "12", "--kills", "6", "--seed", "7", "--json"]);
    let report: Value = serde_json::from_slice(&out.stdout).expect("the soak report is JSON");
    assert!(out.status.success(), "{report:#}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(report["problems"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["kills"], 6);
    assert_eq!(report["frames"], 3000, "two senders, 1500 numbered frames each");
    assert!(report["frames_per_receiver"].as_u64().unwrap() >= 3000, "{report:#}");
    assert_eq!(report["before"]["descriptors"], report["after"]["descriptors"], "{report:#}");
    assert_eq!(report["before"]["threads"], report["after"]["threads"], "{report:#}");
}

#[test]
fn a_soak_run_refuses_too_few_clients() {
    let out = bench(&["soak", "--clients", "3"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--clients 3") && stderr.contains("at least"), "{stderr}");
}

#[test]
fn cannelloni_puts_a_tcp_and_a_udp_peer_next_to_a_native_tcp_client() {
    let out = bench(&["cannelloni", "--samples", "50", "--frames", "2000", "--json"]);
    assert!(out.status.success(), "fieldhub bench cannelloni failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let paths = |list: &str| -> Vec<String> {
        report[list].as_array().unwrap().iter().map(|p| p["path"].as_str().unwrap().to_owned()).collect()
    };
    let expected = ["native tcp", "cannelloni tcp", "cannelloni udp"];
    assert_eq!(paths("round_trips"), expected);
    assert_eq!(paths("throughput"), expected);
    let native = &report["round_trips"][0];
    for path in report["round_trips"].as_array().unwrap() {
        assert_eq!(path["round_trip"]["samples"], 50);
        let ratio = number(&path["round_trip"], &["p50_us"]) / number(&native["round_trip"], &["p50_us"]);
        assert_close(number(path, &["p50_ratio"]), ratio, "p50 ratio to the native client");
    }
    for (i, path) in report["throughput"].as_array().unwrap().iter().enumerate() {
        assert_eq!(path["sent"], 2000);
        let received = path["received"].as_u64().unwrap();
        // TCP loses nothing; UDP reports what it lost.
        assert!(if i < 2 { received == 2000 } else { received <= 2000 }, "{path}");
    }
}

#[test]
fn rbs_compares_each_real_time_cycle_with_the_same_cycle_in_virtual_time_and_reports_the_floor() {
    let out = bench(&["rbs", "--messages", "30", "--seconds", "4", "--json"]);
    assert!(out.status.success(), "fieldhub bench rbs failed: {}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let exact = report["against_exact"].as_array().expect("the comparison per cycle class");
    let cycles: Vec<u64> = exact.iter().map(|c| c["cycle_ms"].as_u64().unwrap()).collect();
    assert_eq!(cycles, [10, 20, 50, 100, 200, 500, 1000], "30 messages take every cycle class");
    for class in exact {
        // The 10 ms class's one message has cycles due from 1 s (the warm-up)
        // to a period before the end: about 290; the 1 s class's four, 1-2 each.
        assert!(number(class, &["matched"]) >= 1.0, "{class}");
        let (p50, p99, max) = (
            number(class, &["deviation", "p50_us"]),
            number(class, &["deviation", "p99_us"]),
            number(class, &["deviation", "max_us"]),
        );
        assert!(p50 <= p99 && p99 <= max, "{class}");
        assert_close(number(class, &["max_frames"]), max / number(&report, &["frame_time_us"]), "max in frame times");
        let within = number(class, &["within_one_frame"]);
        assert!((0.0..=1.0).contains(&within), "{class}");
    }
    let ten = &exact[0];
    assert!(number(ten, &["matched"]) + number(ten, &["unmatched"]) >= 250.0, "{ten}");
    // A wake-up a millisecond for the 3 s after the warm-up, fewer if late.
    assert!(number(&report, &["floor", "samples"]) >= 1000.0, "{}", report["floor"]);
}
