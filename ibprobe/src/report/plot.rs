//! `--plot FILE.svg`: the latency histogram as an SVG, which shows a
//! bimodal body or a lone far outlier that a row of percentiles hides:
//! counts per bucket (log y axis: the tail is thousands of times rarer than
//! the body) with markers at p50, p99, p99.9 and the max. The x axis is
//! linear from the min to about 1.25 x p99.9 (at least 2 x p50); a max
//! beyond it is drawn at the right edge, "(off scale)". Also the SVG
//! canvas every plot of the report is drawn on.

use super::{us, ReportError};
use ibstats::latency::LatencyHistogram;
use plotters::prelude::*;
use std::path::Path;

pub const BARS: usize = 120;

/// Draws `hist` to the SVG file `path`; `title` is e.g. "shm loopback,
/// 32 B, one-way". An empty histogram still produces a file (with a "no
/// samples" title) so scripts do not trip on a missing plot.
pub fn write_svg(path: &Path, title: &str, hist: &LatencyHistogram) -> Result<(), ReportError> {
    save(path, svg((1000, 560), |root| draw(root, title, hist)))
}

/// What a drawing returns: plotters' error, boxed, so `?` serves every call.
pub(super) type Drawn = Result<(), Box<dyn std::error::Error>>;

/// The area a drawing draws on.
pub(super) type Canvas<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// The SVG text of `draw` on a white canvas of `size` pixels, or the
/// drawing's error; every plot of the report is drawn through it.
pub(super) fn svg(size: (u32, u32), draw: impl FnOnce(&Canvas) -> Drawn) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let drawn: Drawn = (|| {
            root.fill(&WHITE)?;
            draw(&root)?;
            Ok(root.present()?)
        })();
        drawn.map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// A drawn SVG written to `path`, or `path` named in the drawing's error.
pub(super) fn save(path: &Path, svg: Result<String, String>) -> Result<(), ReportError> {
    let svg = svg.map_err(|message| ReportError::Plot {
        path: path.display().to_string(),
        message,
    })?;
    std::fs::write(path, svg).map_err(|source| ReportError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn draw(root: &Canvas, title: &str, hist: &LatencyHistogram) -> Drawn {
    let s = hist.summary();
    if s.count == 0 {
        root.titled(&format!("{title}: no samples"), ("sans-serif", 22))?;
        return Ok(());
    }
    let to_us = |ns: u64| ns as f64 / 1000.0;
    let lo_ns = s.min_ns;
    let hi_ns = (s.p999_ns + s.p999_ns / 4)
        .max(s.p50_ns * 2)
        .max(lo_ns + 2)
        .min(s.max_ns.max(lo_ns + 2));
    let width_ns = ((hi_ns - lo_ns) as f64 / BARS as f64).max(1.0);
    let mut bars = vec![0u64; BARS];
    let hdr = hist.to_hdr();
    for v in hdr.iter_recorded() {
        let value = hdr.median_equivalent(v.value_iterated_to());
        let value = value.clamp(lo_ns, hi_ns);
        let i = (((value - lo_ns) as f64 / width_ns) as usize).min(BARS - 1);
        bars[i] += v.count_at_value();
    }
    let ymax = bars.iter().copied().max().unwrap_or(1).max(1) as f64 * 3.0;
    let x0 = to_us(lo_ns);
    let x1 = to_us(hi_ns) + width_ns / 1000.0;

    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, (0.8f64..ymax).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("latency [us]")
        .y_desc("samples")
        .disable_x_mesh()
        .draw()?;
    chart.draw_series(
        bars.iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| {
                let a = x0 + i as f64 * width_ns / 1000.0;
                let b = a + width_ns / 1000.0;
                Rectangle::new([(a, 0.8), (b, c as f64)], BLUE.mix(0.6).filled())
            }),
    )?;

    let markers: [(&str, u64, RGBColor); 4] = [
        ("p50", s.p50_ns, GREEN),
        ("p99", s.p99_ns, RGBColor(230, 140, 0)),
        ("p99.9", s.p999_ns, RED),
        ("max", s.max_ns, BLACK),
    ];
    for (name, ns, color) in markers {
        let off_scale = ns > hi_ns;
        let x = if off_scale { x1 } else { to_us(ns) };
        let off = if off_scale { " (off scale)" } else { "" };
        let label = format!("{name} {} us{off}", us(ns));
        chart
            .draw_series(LineSeries::new(
                vec![(x, 0.8), (x, ymax)],
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 18, ly)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
