//! `fieldhub bench report --quick`: one run writes a report whose JSON has
//! every section with its figures as numbers with units, whose HTML — read
//! with an HTML parser — is complete (every figure an inline SVG plot, every
//! number in a table a unit, the same figures as the JSON) and whose
//! Markdown links every plot. Like every benchmark test it asserts the
//! report's shape, never how fast anything was.

use std::path::Path;

use crate::FIELDHUB;
use scraper::{Html, Selector};
use serde_json::Value;

/// The sections, in order, each with the data the methodology promises.
const SECTIONS: [&str; 9] =
    ["round_trips", "throughput", "cpu", "call_times", "footprint", "jitter", "models", "paths", "machine"];

fn run_report(out: &Path, remote: &str) -> String {
    let run = FIELDHUB
        .command()
        .args(["bench", "report", "--quick", "--out"])
        .arg(out)
        .args(["--hub", remote, "--hub-channel", "can0"])
        .output()
        .expect("run fieldhub bench report");
    assert!(run.status.success(), "bench report failed: {}", String::from_utf8_lossy(&run.stderr));
    String::from_utf8(run.stdout).expect("stdout is text")
}

/// Every quantity cell of every table, in order: (value, unit).
fn quantities(section: &Value) -> Vec<(f64, String)> {
    let mut found = Vec::new();
    for table in section["tables"].as_array().expect("tables") {
        let columns = table["columns"].as_array().expect("columns").len();
        for row in table["rows"].as_array().expect("rows") {
            let row = row.as_array().expect("a row is a list of cells");
            assert_eq!(row.len(), columns, "{}: {row:?}", table["caption"]);
            for cell in row {
                if let Some(text) = cell.as_str() {
                    assert!(text.parse::<f64>().is_err(), "a bare number without a unit: {text:?}");
                    continue;
                }
                let value = cell["value"].as_f64().unwrap_or_else(|| panic!("not a number: {cell}"));
                let unit = cell["unit"].as_str().unwrap_or_else(|| panic!("no unit: {cell}"));
                assert!(value.is_finite() && !unit.is_empty(), "{cell}");
                found.push((value, unit.to_owned()));
            }
        }
    }
    found
}

fn check_json(report: &Value) {
    let sections = report["sections"].as_array().expect("sections");
    let ids: Vec<&str> = sections.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, SECTIONS);
    for section in sections {
        assert!(!section["method"].as_str().unwrap().is_empty(), "{} says what it reproduces", section["id"]);
        assert!(!quantities(section).is_empty(), "{} has figures", section["id"]);
        assert!(!section["data"].is_null(), "{} has its data", section["id"]);
    }
    let data = |id: &str| &sections[SECTIONS.iter().position(|s| *s == id).unwrap()]["data"];

    // 1: each local transport through the hub and raw, and the remote path.
    let paths: Vec<(&str, &str)> = data("round_trips")
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["path"].as_str().unwrap(), p["kind"].as_str().unwrap()))
        .collect();
    for expected in ["hub shm", "hub unix", "hub tcp"] {
        assert!(paths.contains(&(expected, "hub")), "{paths:?}");
    }
    assert_eq!(paths.iter().filter(|p| p.1 == "raw").count(), 3, "a raw primitive per transport: {paths:?}");
    assert!(paths.iter().any(|p| p.0.starts_with("remote tcp://")), "{paths:?}");
    for path in data("round_trips").as_array().unwrap() {
        let d = &path["round_trip"];
        let at = |k: &str| d[k].as_f64().unwrap();
        assert_eq!(d["samples"], 2000);
        let ordered = ["min_us", "p50_us", "p80_us", "p95_us", "p99_us", "p999_us", "max_us"].map(at);
        assert!(ordered.windows(2).all(|w| w[0] <= w[1]), "{d}");
        assert!(path["bimodality_coefficient"].as_f64().unwrap() >= 0.0);
        assert!(!path["modes"].as_array().unwrap().is_empty(), "every sample has a mode: {path}");
    }
    // 2: 8- and 64-byte frames, 1 and 3 receivers, a value per second, payload and bus bit rates.
    let throughput = data("throughput").as_array().unwrap();
    let shape: Vec<(u64, u64)> =
        throughput.iter().map(|s| (s["payload_bytes"].as_u64().unwrap(), s["receivers"].as_u64().unwrap())).collect();
    assert_eq!(shape, [(8, 1), (8, 3), (64, 1), (64, 3)]);
    for s in throughput {
        let seconds = s["hub"]["per_second"].as_array().unwrap().len();
        assert!(seconds > 0);
        assert_eq!(s["payload_mbit_per_s_each_second"].as_array().unwrap().len(), seconds);
        assert_eq!(s["bus_mbit_per_s_each_second"].as_array().unwrap().len(), seconds);
        assert!(s["bus_bits_per_frame"].as_u64().unwrap() > 8 * s["payload_bytes"].as_u64().unwrap());
    }
    // 3: idle and 500 kbit/s, 1 and 3 clients, shm and tcp.
    let phases: Vec<(&str, &str, u64)> = data("cpu")
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["transport"].as_str().unwrap(), p["load"].as_str().unwrap(), p["clients"].as_u64().unwrap()))
        .collect();
    for transport in ["shm", "tcp"] {
        for (load, clients) in [("idle", 1), ("500kbit/s", 1), ("idle", 3), ("500kbit/s", 3)] {
            assert!(phases.contains(&(transport, load, clients)), "{phases:?}");
        }
    }
    // 4: send and recv call times, small and large frames, every transport; they add up to the round trip.
    let calls = data("call_times").as_array().unwrap();
    assert_eq!(calls.len(), 6);
    for c in calls {
        let mean = |call: &str| c[call]["mean_us"].as_f64().unwrap();
        assert!((mean("send") + mean("recv") - mean("round_trip")).abs() < 1e-6 * mean("round_trip").max(1.0), "{c}");
        assert!(c["send"]["std_us"].as_f64().unwrap() >= 0.0);
    }
    // 5: a point per to-client ring size, ring slots growing, memory of both processes.
    let points = data("footprint").as_array().unwrap();
    let slots: Vec<u64> = points.iter().map(|p| p["ring_slots"].as_u64().unwrap()).collect();
    assert!(slots.len() >= 2 && slots.windows(2).all(|w| w[0] < w[1]), "{slots:?}");
    let rings: Vec<u64> = points.iter().map(|p| p["to_client_slots"].as_u64().unwrap()).collect();
    assert!(rings.windows(2).all(|w| w[0] < w[1]), "{rings:?}");
    for p in points {
        assert!(p["hub"]["rss_kib"].as_u64().unwrap() > 0 && p["client_process"]["rss_kib"].as_u64().unwrap() > 0);
        for size in ["small", "large"] {
            let d = &p[size];
            assert!(d["min_us"].as_f64().unwrap() <= d["mean_us"].as_f64().unwrap());
            assert!(d["mean_us"].as_f64().unwrap() <= d["max_us"].as_f64().unwrap());
        }
    }
    // 6: three cycle-time classes over shm and tcp, every frame sent counted.
    let series = data("jitter").as_array().unwrap();
    let periods: Vec<f64> = series.iter().map(|s| s["at_receiver"]["period_us"].as_f64().unwrap()).collect();
    assert_eq!(periods, [100.0, 1000.0, 10000.0, 100.0, 1000.0, 10000.0]);
    for s in series {
        assert!(s["received"].as_u64().unwrap() <= s["sent"].as_u64().unwrap());
    }
    // 7: exact frame lengths and measured next to modelled distributions.
    let models = data("models");
    assert_eq!(models["nominal_bit_per_s"], 500_000);
    let frame = &models["frames"][0];
    let bits = frame["bits"].as_f64().unwrap();
    assert!((frame["duration_us"].as_f64().unwrap() - bits * 2.0).abs() < 1e-9, "{frame}");
    let names: Vec<&str> = models["rows"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names.iter().filter(|n| n.starts_with("measured")).count(), 3, "{names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("model")).count(), 4, "{names:?}");
    // 8: a row per line of issue 35's table, each with figures or the reason it has none.
    let rows = data("paths")["rows"].as_array().unwrap();
    let paths: Vec<&str> = rows.iter().map(|r| r["path"].as_str().unwrap()).collect();
    for prefix in
        ["federation round trip", "federation throughput", "SIL Kit participant", "8 clients", "CPU", "shm throughput"]
    {
        assert!(paths.iter().any(|p| p.starts_with(prefix)), "no row for {prefix}: {paths:?}");
    }
    for row in rows {
        match row["not_measured"].as_str() {
            Some(why) => assert!(row["hub"].is_null() && !why.is_empty(), "{row}"),
            None => {
                let (hub, target) = (row["hub"].as_f64().unwrap(), row["target"].as_f64().unwrap());
                let met = if row["higher_is_better"] == true { hub >= target } else { hub <= target };
                assert_eq!(row["met"].as_bool(), Some(met), "{row}");
                assert!(row["baseline"].as_f64().unwrap() > 0.0, "a same-run baseline: {row}");
            }
        }
    }
    // 8's floors count the sleeps the kernel saw the run's threads take: the
    // readers of the fan-out (each waiting in recv between frames) and the
    // paced sender (asleep until each frame is due) took some.
    let figures = &data("paths")["figures"];
    let per_event = |sleeps: &Value, who: &str| {
        let events = sleeps["events"].as_f64().unwrap();
        assert!(events > 0.0, "a window with events: {sleeps}");
        sleeps[who].as_f64().unwrap() / events
    };
    let trips = &figures["fan_out"]["sleeps"];
    assert!(per_event(trips, "clients") > 0.0, "the readers slept between round trips: {trips}");
    // The fan-out's rows are bounded by the same round trips with nothing
    // but their wake-ups, measured in the run.
    let bare = figures["fan_out"]["bare"]["p50_us"].as_f64().unwrap();
    assert!(bare > 0.0, "{}", figures["fan_out"]);
    let bare = &figures["cpu"]["bare"];
    assert!(bare["bus_cpu_percent"].as_f64().unwrap() > 0.0 && bare["frames"].as_u64().unwrap() > 0, "{bare}");
    let frames = &figures["cpu"]["hub"]["sleeps"];
    assert!(per_event(frames, "clients") >= 0.5, "the paced sender sleeps before most frames: {frames}");
    assert!(per_event(frames, "hub_bus") > 0.0, "the hub's bus thread sleeps between paced frames: {frames}");
    let wake = &figures["floors"]["wake"];
    assert!(wake["cpu_us"].as_f64().unwrap() > 0.0 && wake["sleeps_per_round"].as_f64().unwrap() > 0.5, "{wake}");
    let counted = sections[SECTIONS.iter().position(|s| *s == "paths").unwrap()]["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["caption"].as_str().unwrap().starts_with("The sleeps the run's threads took"))
        .expect("a table of the sleeps the floors count");
    let units: Vec<&str> = counted["rows"].as_array().unwrap().iter().map(|r| r[5]["unit"].as_str().unwrap()).collect();
    // The federation's round trips lead when the report could measure them (as root).
    assert!(units.ends_with(&["sleeps/round trip", "sleeps/frame"]), "{units:?}");
    // The federation's flood, measured (as root), is bounded by the same flood
    // through two hubs chained without Zenoh, and its CPU a frame is set out
    // relayed, chained and on one hub.
    let flood = rows.iter().find(|r| r["path"].as_str().unwrap().starts_with("federation throughput")).unwrap();
    if flood["not_measured"].is_null() {
        assert!(flood["bound"].as_f64().unwrap() > 0.0, "the chained hubs' rate: {flood}");
        let cpu = sections[SECTIONS.iter().position(|s| *s == "paths").unwrap()]["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["caption"].as_str().unwrap().starts_with("The federation flood's CPU a frame"))
            .expect("a table of the floods' CPU a frame");
        let floods = cpu["rows"].as_array().unwrap();
        assert_eq!(floods.len(), 3, "relayed, chained, one hub: {cpu}");
        for flood in floods {
            assert!(flood[2]["value"].as_f64().unwrap() > 0.0, "CPU spent on every frame: {flood}");
        }
    }
    // 9: the machine.
    let machine = data("machine");
    assert!(machine["logical_cpus"].as_u64().unwrap() >= 1);
    for key in ["cpu_model", "kernel", "virtualisation"] {
        assert!(!machine[key].as_str().unwrap().is_empty(), "{key}");
    }
}

/// The page holds every section, every figure is an inline SVG plot, every
/// number in a table carries its unit, and they are the JSON's figures.
fn check_html(html: &str, report: &Value) {
    let page = Html::parse_document(html);
    let select = |css: &str| Selector::parse(css).unwrap();
    let ids: Vec<&str> = page.select(&select("section")).filter_map(|s| s.value().attr("id")).collect();
    assert_eq!(ids, SECTIONS);
    let figures: Vec<_> = page.select(&select("figure")).collect();
    let listed: usize =
        report["sections"].as_array().unwrap().iter().map(|s| s["figures"].as_array().unwrap().len()).sum();
    assert!(figures.len() >= SECTIONS.len(), "{} figures", figures.len());
    assert_eq!(figures.len(), listed, "a figure in the page for each one in the JSON");
    for figure in &figures {
        let svg = figure
            .select(&select("svg"))
            .next()
            .unwrap_or_else(|| panic!("a figure without a plot: {}", figure.html()));
        assert!(
            svg.select(&select("polyline, path")).next().is_some(),
            "an empty plot in {:?}",
            figure.value().attr("id")
        );
        let caption = figure.select(&select("figcaption")).next().expect("a caption");
        assert!(!caption.text().collect::<String>().trim().is_empty());
    }
    for section in page.select(&select("section")) {
        let id = section.value().attr("id").unwrap();
        let json = report["sections"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap();
        let mut shown = Vec::new();
        for cell in section.select(&select("td")) {
            let text: String = cell.text().collect();
            match cell.value().attr("data-unit") {
                Some(unit) => {
                    let (number, shown_unit) =
                        text.split_once('\u{202f}').unwrap_or_else(|| panic!("{text:?} has no unit"));
                    assert_eq!(shown_unit, unit, "{text:?}");
                    let value: f64 = number.parse().unwrap_or_else(|_| panic!("{text:?} is not a number with a unit"));
                    shown.push((value, unit.to_owned()));
                }
                None => assert!(text.trim().parse::<f64>().is_err(), "{id}: a number without a unit: {text:?}"),
            }
        }
        let expected = quantities(json);
        assert_eq!(shown.len(), expected.len(), "{id}: the page shows the JSON's figures");
        for ((value, unit), (json_value, json_unit)) in shown.iter().zip(&expected) {
            assert_eq!(unit, json_unit);
            let tolerance = json_value.abs() * 0.006 + 0.0001;
            assert!((value - json_value).abs() <= tolerance, "{id}: page {value} {unit}, JSON {json_value}");
        }
    }
}

#[test]
fn a_quick_report_has_every_section_with_plots_and_units_in_html_json_and_markdown() {
    let remote = crate::FIELDHUB.start();
    let out = std::env::temp_dir().join(format!("fieldhub-report-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let stdout = run_report(&out, &remote.url);
    for name in ["report.html", "report.json", "report.md"] {
        assert!(stdout.contains(name), "{stdout}");
    }
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).expect("JSON");
    assert_eq!(report["quick"], true);
    check_json(&report);
    check_html(&std::fs::read_to_string(out.join("report.html")).unwrap(), &report);
    let markdown = std::fs::read_to_string(out.join("report.md")).unwrap();
    for section in report["sections"].as_array().unwrap() {
        assert!(markdown.contains(&format!("## {}", section["title"].as_str().unwrap())));
        for figure in section["figures"].as_array().unwrap() {
            let file = figure["file"].as_str().unwrap();
            assert!(markdown.contains(&format!("]({file})")), "{file} is linked");
            let svg = std::fs::read_to_string(out.join(file)).unwrap();
            assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"), "{file}");
        }
    }
    let _ = std::fs::remove_dir_all(&out);
}
