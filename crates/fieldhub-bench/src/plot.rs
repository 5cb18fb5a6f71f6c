//! The latency distributions as an SVG: one cumulative distribution per
//! series (hub and baseline of each scenario) over a logarithmic time axis,
//! so a 0.1 µs spin and a 100 µs hub round trip fit one picture.
//!
//! Written by hand — a few hundred bytes of markup do not justify a
//! plotting library in the build.

use std::fmt::Write;

/// One curve: a label and its samples in ns, sorted ascending.
pub struct Series<'a> {
    pub label: String,
    pub sorted_ns: &'a [u64],
}

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 540.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLOURS: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
/// Points drawn per curve at most: enough for the eye, small files.
const POINTS: usize = 400;

/// An SVG document plotting `series` under `title`.
pub fn latency_cdf(title: &str, series: &[Series<'_>]) -> String {
    let all = || series.iter().flat_map(|s| s.sorted_ns.iter().copied());
    let lo_us = all().min().unwrap_or(1).max(1) as f64 / 1e3;
    let hi_us = (all().max().unwrap_or(1) as f64 / 1e3).max(lo_us * 10.0);
    let (lo_decade, hi_decade) = (lo_us.log10().floor() as i32, hi_us.log10().ceil() as i32);
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |us: f64| LEFT + (us.max(1e-9).log10() - f64::from(lo_decade)) / f64::from(hi_decade - lo_decade) * plot_w;
    let y = |fraction: f64| TOP + (1.0 - fraction) * plot_h;

    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        WIDTH / 2.0,
        escape(title)
    );
    for decade in lo_decade..=hi_decade {
        let at = x(10f64.powi(decade));
        let label =
            if decade < 0 { format!("{}", 10f64.powi(decade)) } else { format!("{}", 10u64.pow(decade as u32)) };
        let _ = writeln!(
            svg,
            "<line x1=\"{at:.1}\" y1=\"{TOP}\" x2=\"{at:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{at:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{label}</text>",
            TOP + plot_h,
            TOP + plot_h + 16.0
        );
    }
    for tenth in 0..=10 {
        let fraction = f64::from(tenth) / 10.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{0:.1}\" x2=\"{1:.1}\" y2=\"{0:.1}\" stroke=\"#eee\"/>\
             <text x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"end\">{fraction:.1}</text>",
            y(fraction),
            LEFT + plot_w,
            LEFT - 6.0,
            y(fraction) + 4.0
        );
    }
    let _ = writeln!(
        svg,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"black\"/>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">round trip (µs, log scale)</text>\n\
         <text x=\"16\" y=\"{:.1}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {:.1})\">fraction of round trips ≤ x</text>",
        LEFT + plot_w / 2.0,
        HEIGHT - 14.0,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let dash = if i % 2 == 1 { " stroke-dasharray=\"6 3\"" } else { "" };
        let n = s.sorted_ns.len();
        let step = n.div_ceil(POINTS).max(1);
        let mut points = String::new();
        for k in (0..n).step_by(step).chain((n > 0).then_some(n - 1)) {
            let _ = write!(points, "{:.1},{:.1} ", x(s.sorted_ns[k] as f64 / 1e3), y((k + 1) as f64 / n as f64));
        }
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.8\"{dash} points=\"{}\"/>\n\
             <line x1=\"{:.1}\" y1=\"{2:.1}\" x2=\"{3:.1}\" y2=\"{2:.1}\" stroke=\"{colour}\" stroke-width=\"1.8\"{dash}/>\
             <text x=\"{4:.1}\" y=\"{5:.1}\">{6}</text>",
            points.trim_end(),
            LEFT + 10.0,
            TOP + 14.0 + 16.0 * i as f64,
            LEFT + 40.0,
            LEFT + 46.0,
            TOP + 18.0 + 16.0 * i as f64,
            escape(&s.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_is_one_svg_document_with_a_curve_per_series() {
        let (a, b): (Vec<u64>, Vec<u64>) = ((1..=1000).map(|i| i * 100).collect(), vec![50_000; 3]);
        let svg = latency_cdf(
            "t <1>",
            &[Series { label: "hub".into(), sorted_ns: &a }, Series { label: "raw".into(), sorted_ns: &b }],
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("t &lt;1&gt;"));
    }
}
