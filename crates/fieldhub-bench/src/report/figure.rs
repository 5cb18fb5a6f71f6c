//! The report's plots as SVG documents, drawn with `plotters` (SVG backend
//! only, no font files: text is left to the browser): line charts over a
//! linear or logarithmic x axis, and the curves the sections draw on them —
//! cumulative distributions and log-binned histograms of time samples.

use std::ops::Range;

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;

use super::ReportError;

/// One curve: a legend label and its points.
#[derive(Debug)]
pub struct Curve {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed-looking (thinner, lighter): a model, not a measurement.
    pub model: bool,
}

/// A chart's frame: its title, axis descriptions and x scale.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub log_x: bool,
}

const SIZE: (u32, u32) = (860, 480);
/// Points drawn per curve at most: enough for the eye, small files.
const POINTS: usize = 400;
/// Bins per decade of [`log_histogram`].
const BINS_PER_DECADE: f64 = 25.0;

/// An SVG document with `curves` on `chart`.
pub fn line_chart(chart: &Chart<'_>, curves: &[Curve]) -> Result<String, ReportError> {
    let xs = || curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let ys = || curves.iter().flat_map(|c| c.points.iter().map(|p| p.1));
    let (mut x_lo, mut x_hi) = (xs().fold(f64::INFINITY, f64::min), xs().fold(f64::NEG_INFINITY, f64::max));
    if !x_lo.is_finite() {
        (x_lo, x_hi) = (1.0, 10.0);
    }
    let y_hi = ys().fold(0.0, f64::max).max(1e-9) * 1.05;
    let mut svg = String::new();
    let drawn = if chart.log_x {
        let x_lo = x_lo.max(1e-3);
        draw(&mut svg, chart, (x_lo * 0.9..x_hi.max(x_lo * 10.0) * 1.1).log_scale(), 0.0..y_hi, curves)
    } else {
        let pad = ((x_hi - x_lo) * 0.02).max(1e-9);
        draw(&mut svg, chart, x_lo - pad..x_hi + pad, 0.0..y_hi, curves)
    };
    drawn.map_err(|message| ReportError::Plot { figure: chart.title.to_owned(), message })?;
    Ok(svg)
}

fn draw<X>(svg: &mut String, chart: &Chart<'_>, x: X, y: Range<f64>, curves: &[Curve]) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut ctx = ChartBuilder::on(&root)
        .caption(chart.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    ctx.configure_mesh().x_desc(chart.x_desc).y_desc(chart.y_desc).draw().map_err(|e| e.to_string())?;
    for (i, curve) in curves.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let style = if curve.model { colour.mix(0.7).stroke_width(1) } else { colour.stroke_width(2) };
        ctx.draw_series(LineSeries::new(curve.points.iter().copied(), style))
            .map_err(|e| e.to_string())?
            .label(curve.label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    ctx.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// The cumulative distribution of ascending `sorted_ns`: (µs, fraction ≤).
pub fn cdf_points(sorted_ns: &[u64]) -> Vec<(f64, f64)> {
    let n = sorted_ns.len();
    let step = n.div_ceil(POINTS).max(1);
    (0..n)
        .step_by(step)
        .chain((n > 0).then_some(n - 1))
        .map(|k| (sorted_ns[k] as f64 / 1e3, (k + 1) as f64 / n as f64))
        .collect()
}

/// A histogram of `sorted_ns` on a log time axis (25 bins a decade), as a
/// step curve: (µs, share of the samples in the bin). Two populations show
/// as two hills however far apart they lie.
pub fn log_histogram(sorted_ns: &[u64]) -> Vec<(f64, f64)> {
    let Some((&lo, &hi)) = sorted_ns.first().zip(sorted_ns.last()) else { return Vec::new() };
    let lo = (lo.max(1) as f64).log10();
    let bins = (((hi.max(1) as f64).log10() - lo) * BINS_PER_DECADE).floor() as usize + 1;
    let mut counts = vec![0u64; bins];
    for &s in sorted_ns {
        counts[(((s.max(1) as f64).log10() - lo) * BINS_PER_DECADE) as usize] += 1;
    }
    let edge = |i: usize| 10f64.powf(lo + i as f64 / BINS_PER_DECADE) / 1e3;
    let n = sorted_ns.len() as f64;
    let mut points = vec![(edge(0), 0.0)];
    for (i, &c) in counts.iter().enumerate() {
        points.push((edge(i), c as f64 / n));
        points.push((edge(i + 1), c as f64 / n));
    }
    points.push((edge(bins), 0.0));
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_one_svg_document_with_its_title_and_legend() {
        let samples: Vec<u64> = (1..=1000).map(|i| i * 100).collect();
        let curves = [
            Curve { label: "measured".into(), points: cdf_points(&samples), model: false },
            Curve { label: "model".into(), points: vec![(1.0, 0.0), (100.0, 1.0)], model: true },
        ];
        let chart = Chart { title: "round trips", x_desc: "µs", y_desc: "fraction", log_x: true };
        let svg = line_chart(&chart, &curves).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(svg.contains("round trips") && svg.contains("measured") && svg.contains("model"));
        assert!(svg.matches("<polyline").count() >= 2);
    }

    #[test]
    fn cdf_and_histogram_points_cover_the_sample() {
        let samples: Vec<u64> = (1..=10).map(|i| i * 1000).collect();
        let cdf = cdf_points(&samples);
        assert_eq!((cdf[0], *cdf.last().unwrap()), ((1.0, 0.1), (10.0, 1.0)));
        let hist = log_histogram(&samples);
        let shares: f64 = hist[1..hist.len() - 1].iter().step_by(2).map(|p| p.1).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{shares}");
    }
}
