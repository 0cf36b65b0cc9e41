//! `ibprobe sweep --plot FILE.svg`: a size x rate grid as an SVG heatmap,
//! one column per rate, one row per size (row 0 at the bottom), each cell
//! coloured by its value and labelled with it: where the latency changes
//! (the MTU, the inline limit, the rate where the pacer misses steps) shows
//! at a glance, as a table of numbers does not. The colour scale is
//! logarithmic (one sweep often spans a decade), light yellow (fast) to
//! dark purple (slow), with a colour bar; cells without a value are grey,
//! "n/a".

use super::plot::{save, svg, Canvas, Drawn};
use super::ReportError;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// The axes' descriptions (public so tests can find them in the SVG).
pub const X_DESC: &str = "rate [messages/s]";
pub const Y_DESC: &str = "message size [B]";

/// A grid to draw: plain labels for the columns and rows and one optional
/// value per cell, whatever the sweep and the statistic.
#[derive(Clone, Debug, Default)]
pub struct Grid {
    /// Title above the plot, e.g. "ibprobe sweep: shm one-way p50 [us]".
    pub title: String,
    /// Labels of the columns (rates), left to right, and of the rows
    /// (sizes), bottom to top.
    pub columns: Vec<String>,
    pub rows: Vec<String>,
    /// `values[row][column]` (ns, or messages/s with [`Unit::PerSecond`]);
    /// `None`: not measured.
    pub values: Vec<Vec<Option<u64>>>,
    /// What the columns are (default: [`X_DESC`], rates).
    pub x_desc: Option<String>,
    /// What a value is, under the colour bar (default: "p50 [us]").
    pub value_desc: Option<String>,
    pub unit: Unit,
}

/// How a grid's values print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds, printed in us.
    #[default]
    Nanos,
    /// Messages per second, printed in millions (M/s).
    PerSecond,
}

impl Unit {
    fn text(self, v: f64) -> String {
        match self {
            Unit::Nanos => format!("{:.3}", v / 1000.0),
            Unit::PerSecond => format!("{:.3}M", v / 1e6),
        }
    }
}

impl Grid {
    /// The values of a grid: `f` of each row and column.
    pub fn values<R, C>(
        rows: &[R],
        columns: &[C],
        f: impl Fn(&R, &C) -> Option<u64>,
    ) -> Vec<Vec<Option<u64>>> {
        rows.iter()
            .map(|r| columns.iter().map(|c| f(r, c)).collect())
            .collect()
    }

    fn value(&self, row: usize, col: usize) -> Option<u64> {
        *self.values.get(row)?.get(col)?
    }

    fn range(&self) -> Option<(u64, u64)> {
        let vals = self.values.iter().flatten().flatten().copied();
        Some((vals.clone().min()?, vals.max()?))
    }
}

/// Draws `grid` to the SVG file `path`: the entry point of `sweep --plot`
/// (an empty grid still gives a file, titled "no samples", so scripts do
/// not trip on a missing plot).
pub fn write_svg(path: &Path, grid: &Grid) -> Result<(), ReportError> {
    save(path, render(grid))
}

/// The SVG text of [`write_svg`], for callers that embed it (e.g. an HTML
/// page) instead of writing a file.
pub fn render_svg(grid: &Grid) -> Result<String, ReportError> {
    render(grid).map_err(|message| ReportError::Plot {
        path: format!("(in memory: {})", grid.title),
        message,
    })
}

/// Light yellow -> orange -> red -> purple -> dark blue, for t in 0..=1.
const STOPS: [(u8, u8, u8); 5] = [
    (255, 255, 178),
    (254, 178, 76),
    (240, 59, 32),
    (150, 30, 110),
    (40, 20, 80),
];

/// The colour of `v` on the log scale from `lo` to `hi`.
fn colour(v: u64, lo: u64, hi: u64) -> RGBColor {
    let l = |x: u64| (x.max(1) as f64).ln();
    let t = if hi > lo {
        ((l(v) - l(lo)) / (l(hi) - l(lo))).clamp(0.0, 1.0)
    } else {
        0.0
    };
    ramp(t)
}

fn ramp(t: f64) -> RGBColor {
    let x = t * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let mix = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * f).round() as u8;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Black text on light cells, white on dark ones.
fn text_colour(c: RGBColor) -> RGBColor {
    let lum = 0.299 * c.0 as f64 + 0.587 * c.1 as f64 + 0.114 * c.2 as f64;
    if lum > 140.0 {
        BLACK
    } else {
        WHITE
    }
}

fn render(grid: &Grid) -> Result<String, String> {
    let (ncol, nrow) = (grid.columns.len() as u32, grid.rows.len() as u32);
    let width = (240 + 110 * ncol).clamp(640, 2400);
    let height = (150 + 44 * nrow).clamp(360, 2400);
    svg((width, height), |root| draw(root, grid, width))
}

fn draw(root: &Canvas, grid: &Grid, width: u32) -> Drawn {
    use SegmentValue::{CenterOf, Exact};
    let (ncol, nrow) = (grid.columns.len(), grid.rows.len());
    let Some((lo, hi)) = grid.range() else {
        root.titled(&format!("{}: no samples", grid.title), ("sans-serif", 22))?;
        return Ok(());
    };
    let (main, bar) = root.split_horizontally(width - 110);
    let xs = (0..ncol as i32 - 1).into_segmented();
    let ys = (0..nrow as i32 - 1).into_segmented();
    let mut chart = ChartBuilder::on(&main)
        .caption(&grid.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(xs, ys)?;
    let label = |names: &[String], v: &SegmentValue<i32>| match v {
        CenterOf(i) => names.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(grid.x_desc.as_deref().unwrap_or(X_DESC))
        .y_desc(Y_DESC)
        .x_labels(ncol)
        .y_labels(nrow)
        .x_label_formatter(&|v| label(&grid.columns, v))
        .y_label_formatter(&|v| label(&grid.rows, v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 17))
        .draw()?;
    for r in 0..nrow {
        for c in 0..ncol {
            let (x, y) = (c as i32, r as i32);
            let v = grid.value(r, c);
            let fill = v.map_or(RGBColor(210, 210, 210), |v| colour(v, lo, hi));
            let cell = [(Exact(x), Exact(y)), (Exact(x + 1), Exact(y + 1))];
            chart.draw_series(std::iter::once(Rectangle::new(cell, fill.filled())))?;
            let text = v.map_or("n/a".to_string(), |v| grid.unit.text(v as f64));
            let style = ("sans-serif", 15)
                .into_font()
                .color(&text_colour(fill))
                .pos(Pos::new(HPos::Center, VPos::Center));
            let centre = (CenterOf(x), CenterOf(y));
            chart.draw_series(std::iter::once(Text::new(text, centre, style)))?;
        }
    }

    // The colour bar: the scale from the smallest to the largest median.
    let (l0, l1) = ((lo.max(1) as f64).ln(), (hi.max(1) as f64).ln());
    let top = if l1 > l0 { l1 } else { l0 + 1.0 };
    let mut cb = ChartBuilder::on(&bar)
        .margin_top(46)
        .margin_bottom(60)
        .margin_right(8)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..1f64, l0..top)?;
    cb.configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(5)
        .y_label_formatter(&|v| grid.unit.text(v.exp()))
        .y_desc(grid.value_desc.as_deref().unwrap_or("p50 [us]"))
        .label_style(("sans-serif", 13))
        .draw()?;
    let steps = 64;
    cb.draw_series((0..steps).map(|i| {
        let a = l0 + (top - l0) * i as f64 / steps as f64;
        let b = l0 + (top - l0) * (i + 1) as f64 / steps as f64;
        let t = i as f64 / (steps - 1) as f64;
        Rectangle::new([(0.0, a), (1.0, b)], ramp(t).filled())
    }))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_light_to_dark() {
        assert_eq!(colour(100, 100, 10_000), RGBColor(255, 255, 178));
        assert_eq!(colour(10_000, 100, 10_000), RGBColor(40, 20, 80));
        assert_eq!(text_colour(colour(100, 100, 10_000)), BLACK);
        assert_eq!(text_colour(colour(10_000, 100, 10_000)), WHITE);
        // One value only: the light end, no division by zero.
        assert_eq!(colour(7, 7, 7), RGBColor(255, 255, 178));
    }
}
