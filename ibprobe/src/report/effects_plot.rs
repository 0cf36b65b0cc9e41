//! `ibprobe compare --plot FILE.svg`: each value's effect against the
//! baseline as a point (the ratio) with its 95% interval, one group per
//! metric, on a log scale around 1 (no effect). An interval that does not
//! cross the line at 1 is an effect; its colour is the value's.

use super::compare::{CompareReport, METRICS};
use super::plot::{svg, Canvas, Drawn};
use super::ReportError;
use plotters::prelude::*;
use std::path::Path;

/// The y axis's description (public so tests can find it in the SVG).
pub const Y_DESC: &str = "ratio to the baseline (log scale; 1 = no effect)";

/// Draws the effects of `r` to `path`.
pub fn write_svg(path: &Path, r: &CompareReport) -> Result<(), ReportError> {
    super::plot::save(path, render(r))
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

fn render(r: &CompareReport) -> Result<String, String> {
    // The metrics some variant has an effect on, in report order.
    let metrics: Vec<&str> = METRICS
        .iter()
        .map(|m| m.name)
        .filter(|m| {
            r.variants
                .iter()
                .any(|v| v.effects.iter().any(|(k, _)| k == m))
        })
        .collect();
    let groups = metrics.len().max(1);
    svg((160 + 140 * groups as u32, 420), |root| {
        draw(root, r, &metrics)
    })
}

fn draw(root: &Canvas, r: &CompareReport, metrics: &[&str]) -> Drawn {
    let groups = metrics.len().max(1);
    let points: Vec<(usize, usize, f64, f64, f64)> = r
        .variants
        .iter()
        .enumerate()
        .skip(1)
        .flat_map(|(v, vr)| {
            // A ratio at the clock's resolution compares clock steps: not drawn.
            let drawn = vr.effects.iter().filter(|(_, ef)| !ef.at_clock_resolution);
            drawn.filter_map(move |(k, ef)| {
                let m = metrics.iter().position(|x| x == k)?;
                Some((v, m, ef.ratio, ef.ci[0], ef.ci[1]))
            })
        })
        .collect();
    let xs = points.iter().flat_map(|&(_, _, ratio, a, b)| [ratio, a, b]);
    let xs = xs.filter(|x| x.is_finite() && *x > 0.0);
    let (lo, hi) = xs.fold((1.0f64, 1.0f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (lo, hi) = (lo / 1.15, hi * 1.15);
    let per = (r.variants.len().max(2) - 1) as f64;
    let title = format!("ibprobe compare: --{} ({} rounds)", r.option, r.rounds);
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..groups as f64, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Key points every half group; only the middles are named.
        .x_labels(groups * 2 + 1)
        .x_label_formatter(&|x| {
            let middle = (x - x.floor() - 0.5).abs() < 1e-6;
            let name = metrics.get(x.floor() as usize).filter(|_| middle);
            name.map_or(String::new(), |s| s.to_string())
        })
        .y_desc(Y_DESC)
        .draw()?;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(0.0, 1.0), (groups as f64, 1.0)],
        BLACK.stroke_width(1),
    )))?;
    // Each value's legend entry comes with its first point drawn (its
    // p50 may be left out, at the clock's resolution).
    let mut labelled = vec![false; r.variants.len()];
    for &(v, m, ratio, a, b) in &points {
        let colour = COLOURS[(v - 1) % COLOURS.len()];
        let x = m as f64 + (v as f64 - 0.5) / per * 0.6 + 0.2;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, a.max(lo)), (x, b.min(hi))],
            colour.stroke_width(2),
        )))?;
        let series =
            chart.draw_series(std::iter::once(Circle::new((x, ratio), 4, colour.filled())))?;
        if !std::mem::replace(&mut labelled[v], true) {
            series
                .label(r.variants[v].value.clone())
                .legend(move |(px, py)| Circle::new((px, py), 4, colour.filled()));
        }
    }
    if !points.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::RoundValues;

    #[test]
    fn draws_every_value_and_the_axis() {
        let round = |x: f64| -> RoundValues {
            [Some(x), Some(2.0 * x), Some(3.0 * x), Some(9.0 * x), None]
        };
        let a: Vec<RoundValues> = (0..8).map(|i| round(100.0 + f64::from(i))).collect();
        let b: Vec<RoundValues> = (0..8).map(|i| round(150.0 + f64::from(i))).collect();
        let c: Vec<RoundValues> = (0..8).map(|i| round(90.0 + f64::from(i) * 3.0)).collect();
        let r = CompareReport::new(
            vec!["loopback".into()],
            "size".into(),
            3,
            ibstats::schedule(3, 8, 3),
            &["32".into(), "256".into(), "1024".into()],
            &[a, b, c],
        );
        let svg = render(&r).unwrap();
        assert!(svg.contains(Y_DESC));
        assert!(svg.contains("256") && svg.contains("1024"));
        assert!(svg.contains("p99") && svg.contains("max"));
        let all = svg.matches("<circle").count();
        assert!(all >= 8, "4 metrics x 2 values + legend");
        // 15 ns steps: the baseline's p50 (100-107 ns) is at the clock's
        // resolution, its p99 (200-214 ns) is not: the two p50 points go.
        let mut marked = r.clone();
        marked.mark_clock_resolution(&[Some(15.0), Some(15.0), Some(15.0)]);
        let svg = render(&marked).unwrap();
        assert_eq!(svg.matches("<circle").count(), all - 2);
    }
}
