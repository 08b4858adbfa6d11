//! SVG charts drawn with plotters' SVG backend. Text is emitted as SVG
//! `<text>` elements, so no font files or fontconfig are involved (plotters
//! is built without its `ttf` feature).

use crate::units;
use plotters::coord::Shift;
use plotters::prelude::*;

/// One line on a chart: points of (size in bytes, value).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text (run and op).
    pub label: String,
    /// (bytes, value) pairs, in size order.
    pub points: Vec<(f64, f64)>,
}

/// Distinct, colour-blind-friendly colours (Okabe-Ito, then Tableau).
const COLORS: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

const SIZE: (u32, u32) = (860, 440);

/// A line chart of `series` against message size on a log2 x axis; the y
/// axis is log10 when `log_y` (times span decades) and linear otherwise
/// (bandwidth). Points with a non-positive size (or value, on a log axis)
/// cannot be placed and are left out.
pub fn line_chart_svg(title: &str, y_label: &str, series: &[Series], log_y: bool) -> String {
    overlay_chart_svg(title, y_label, series, &Overlay::default(), log_y)
}

/// How a marked point is drawn: what a comparison found at that size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A regression: a filled red circle.
    Regression,
    /// The rule cannot tell: a hollow amber triangle.
    CannotTell,
    /// An improvement: a hollow green circle.
    Improved,
}

impl Mark {
    /// The legend's words.
    pub fn label(self) -> &'static str {
        match self {
            Mark::Regression => "regression",
            Mark::CannotTell => "cannot tell",
            Mark::Improved => "improved",
        }
    }
}

/// What a chart draws over its lines (a comparison's findings).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overlay {
    /// Vertical error bars `(bytes, low, high)`, in the colour of series
    /// `bars_of` and named in the legend by `bars_label`.
    pub bars: Vec<(f64, f64, f64)>,
    pub bars_of: usize,
    pub bars_label: String,
    /// Points to mark `(bytes, value, how)`.
    pub marks: Vec<(f64, f64, Mark)>,
}

/// [`line_chart_svg`] with `overlay` drawn over the lines: error bars and
/// marked points, each kind named in the legend. Bars and marks that
/// cannot be placed are left out, as points are.
pub fn overlay_chart_svg(
    title: &str,
    y_label: &str,
    series: &[Series],
    overlay: &Overlay,
    log_y: bool,
) -> String {
    let series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            label: s.label.clone(),
            points: s
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| plottable(x, y, log_y))
                .collect(),
        })
        .collect();
    let overlay = Overlay {
        bars: (overlay.bars.iter().copied())
            .filter(|&(x, lo, hi)| plottable(x, lo, log_y) && plottable(x, hi, log_y))
            .collect(),
        marks: (overlay.marks.iter().copied())
            .filter(|&(x, y, _)| plottable(x, y, log_y))
            .collect(),
        ..overlay.clone()
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        // Drawing into a String cannot fail for I/O reasons; a failure here
        // would only mean a degenerate range, which we avoid below.
        let _ = draw_lines(&root, (title, y_label), &series, &overlay, log_y);
        let _ = root.present();
    }
    svg
}

/// Whether a point can be placed: a size of at least one byte and a finite
/// value within the range any benchmark produces. plotters' log-axis tick
/// loop never ends when a bound is infinite or underflows to zero, so such
/// points must not reach it.
fn plottable(x: f64, y: f64, log_y: bool) -> bool {
    const MAX: f64 = 1e15;
    (1.0..=MAX).contains(&x) && y.is_finite() && y.abs() <= MAX && (!log_y || y >= 1e-9)
}

fn draw_lines(
    root: &DrawingArea<SVGBackend, Shift>,
    (title, y_label): (&str, &str),
    series: &[Series],
    overlay: &Overlay,
    log_y: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let bar_ends = overlay
        .bars
        .iter()
        .flat_map(|&(x, lo, hi)| [(x, lo), (x, hi)]);
    let all = || {
        series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .chain(bar_ends.clone())
    };
    let (mut x_min, mut x_max) =
        all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (mut y_min, mut y_max) =
        all().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    if x_min > x_max {
        (x_min, x_max, y_min, y_max) = (1.0, 2.0, 1.0, 2.0);
    }
    if x_max <= x_min {
        x_max = x_min * 2.0;
    }
    if log_y {
        y_min /= 1.5;
        y_max *= 1.5;
    } else {
        y_min = y_min.min(0.0);
        y_max = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    }
    let mut chart = ChartBuilder::on(root);
    chart
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72);
    let x = (x_min..x_max).log_scale().base(2.0);
    let fmt_x = |v: &f64| units::bytes_short(*v);
    if log_y {
        let mut c = chart.build_cartesian_2d(x, (y_min..y_max).log_scale())?;
        c.configure_mesh()
            .x_desc("message size (bytes)")
            .y_desc(y_label)
            .x_label_formatter(&fmt_x)
            .y_label_formatter(&|v| format!("{v}"))
            .draw()?;
        series_with_legend(&mut c, series, overlay)?;
    } else {
        let mut c = chart.build_cartesian_2d(x, y_min..y_max)?;
        c.configure_mesh()
            .x_desc("message size (bytes)")
            .y_desc(y_label)
            .x_label_formatter(&fmt_x)
            .draw()?;
        series_with_legend(&mut c, series, overlay)?;
    }
    Ok(())
}

/// Draws each series as a line with a dot on every point, in its colour,
/// then the overlay and the legend, on either kind of y axis.
fn series_with_legend<'a, X, Y>(
    c: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    series: &[Series],
    overlay: &Overlay,
) -> Result<(), Box<dyn std::error::Error>>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    for (i, s) in series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.points.is_empty())
    {
        let color = COLORS[i % COLORS.len()];
        c.draw_series(LineSeries::new(
            s.points.iter().copied(),
            color.stroke_width(2),
        ))?
        .label(s.label.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        c.draw_series(s.points.iter().map(|p| Circle::new(*p, 2, color.filled())))?;
    }
    draw_overlay(c, overlay)?;
    legend(c)
}

/// Error bars (a vertical line with caps a few percent of the size wide)
/// and marked points, each kind once in the legend.
fn draw_overlay<'a, X, Y>(
    c: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
    overlay: &Overlay,
) -> Result<(), Box<dyn std::error::Error>>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    if !overlay.bars.is_empty() {
        let style = COLORS[overlay.bars_of % COLORS.len()]
            .mix(0.7)
            .stroke_width(1);
        let bar = move |&(x, lo, hi): &(f64, f64, f64)| {
            let (a, b) = (x / 1.08, x * 1.08);
            let path = vec![(a, lo), (b, lo), (x, lo), (x, hi), (a, hi), (b, hi)];
            PathElement::new(path, style)
        };
        c.draw_series(overlay.bars.iter().map(bar))?
            .label(overlay.bars_label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x + 9, y - 6), (x + 9, y + 6)], style));
    }
    for kind in [Mark::Regression, Mark::CannotTell, Mark::Improved] {
        let at: Vec<(f64, f64)> = (overlay.marks.iter())
            .filter(|m| m.2 == kind)
            .map(|m| (m.0, m.1))
            .collect();
        if at.is_empty() {
            continue;
        }
        c.draw_series(at.iter().map(|&p| mark_element(p, kind)))?
            .label(kind.label())
            .legend(move |(x, y)| mark_element((x + 9, y), kind));
    }
    Ok(())
}

/// One mark, at a point in data or pixel coordinates.
fn mark_element<DB: DrawingBackend, C: Clone + 'static>(
    at: C,
    kind: Mark,
) -> DynElement<'static, DB, C> {
    let amber = RGBColor(230, 159, 0);
    match kind {
        Mark::Regression => Circle::new(at, 6, RED.filled()).into_dyn(),
        Mark::CannotTell => TriangleMarker::new(at, 7, amber.stroke_width(2)).into_dyn(),
        Mark::Improved => Circle::new(at, 6, RGBColor(0, 158, 115).stroke_width(2)).into_dyn(),
    }
}

fn legend<'a, X, Y>(
    c: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
) -> Result<(), Box<dyn std::error::Error>>
where
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
{
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 13))
        .draw()?;
    Ok(())
}

/// Cells at or above this ratio to the matrix median get the best colour.
pub const HEATMAP_BEST_RATIO: f64 = 1.0;
/// Cells at or below this ratio to the matrix median get the worst colour.
pub const HEATMAP_WORST_RATIO: f64 = 0.5;
/// The line marked on the scale when the matrix carries no verdict cut.
pub const HEATMAP_FIXED_MARK: f64 = 0.9;

/// A rank x rank bandwidth matrix (GB/s) as an SVG heatmap: row = sender,
/// column = receiver, each cell labelled with its value when there is
/// room. The colour is the cell's ratio to the median of all measured
/// cells on a fixed scale ([`HEATMAP_WORST_RATIO`] and below darkest,
/// [`HEATMAP_BEST_RATIO`] and above brightest, log in between), so a quiet
/// job stays bright and only a real outlier is dark. `cut` is the check's
/// host verdict cut (a ratio to the job median) and is marked on the
/// scale; without one, a fixed [`HEATMAP_FIXED_MARK`] line is marked and
/// the legend says so. Missing or non-finite cells are drawn grey.
pub fn heatmap_svg(labels: &[String], matrix: &[Vec<f64>], cut: Option<f64>) -> String {
    let n = labels.len().max(matrix.len()).max(1);
    let mut values: Vec<f64> = matrix
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    values.sort_by(f64::total_cmp);
    let median = match values.len() {
        0 => None,
        k if k % 2 == 1 => Some(values[k / 2]),
        k => Some((values[k / 2 - 1] + values[k / 2]) / 2.0),
    };
    let cell = (560 / n as u32).clamp(12, 64);
    let side = cell * n as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (side + 360, side + 110)).into_drawing_area();
        let (grid, scale) = root.split_horizontally(side + 150);
        let _ = draw_heatmap(&grid, labels, matrix, n, median, cell);
        if let Some(median) = median {
            let _ = draw_scale(&scale, median, cut, side);
        }
        let _ = root.present();
    }
    svg
}

/// Where `gbps` sits on the fixed colour scale: 0 at or below
/// [`HEATMAP_WORST_RATIO`] of `median`, 1 at or above
/// [`HEATMAP_BEST_RATIO`], log in between.
fn ratio_position(gbps: f64, median: f64) -> f64 {
    ratio_to_position(gbps / median)
}

fn ratio_to_position(ratio: f64) -> f64 {
    let span = (HEATMAP_BEST_RATIO / HEATMAP_WORST_RATIO).ln();
    ((ratio / HEATMAP_WORST_RATIO).ln() / span).clamp(0.0, 1.0)
}

fn draw_heatmap(
    root: &DrawingArea<SVGBackend, Shift>,
    labels: &[String],
    matrix: &[Vec<f64>],
    n: usize,
    median: Option<f64>,
    cell: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let label = |i: usize| labels.get(i).cloned().unwrap_or_else(|| i.to_string());
    let mut chart = ChartBuilder::on(root)
        .caption("bandwidth matrix (GB/s)", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0..n, 0..n)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("to (rank or host)")
        .y_desc("from (rank or host)")
        .x_labels(n)
        .y_labels(n)
        .x_label_offset(cell as i32 / 2)
        .y_label_offset(-(cell as i32) / 2)
        .x_label_formatter(&|i| if *i < n { label(*i) } else { String::new() })
        .y_label_formatter(&|i| {
            if *i < n {
                label(n - 1 - *i)
            } else {
                String::new()
            }
        })
        .draw()?;
    for (r, row) in matrix.iter().enumerate().take(n) {
        for c in 0..n {
            let v = row.get(c).copied().unwrap_or(f64::NAN);
            // Row 0 at the top, as matrices are read.
            let y = n - 1 - r;
            let t = median
                .filter(|_| v.is_finite())
                .map(|m| ratio_position(v, m));
            let fill = t.map_or(RGBColor(200, 200, 200), ramp);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(c, y), (c + 1, y + 1)],
                fill.filled(),
            )))?;
            if let (Some(t), true) = (t, cell >= 36) {
                let text_color = if t < 0.5 { WHITE } else { BLACK };
                let style = ("sans-serif", 11).into_font().color(&text_color).pos(
                    plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Center,
                    ),
                );
                let (px, py) = chart.backend_coord(&(c, y + 1));
                root.draw(&Text::new(
                    units::gbps(v),
                    (px + cell as i32 / 2, py + cell as i32 / 2),
                    style,
                ))?;
            }
        }
    }
    Ok(())
}

/// The colour scale beside the heatmap, in ratios to the matrix median
/// (fixed ends, so two jobs' heatmaps read alike), with the median in
/// GB/s and the verdict's cut (or a fixed mark) as a red line.
fn draw_scale(
    area: &DrawingArea<SVGBackend, Shift>,
    median: f64,
    cut: Option<f64>,
    height: u32,
) -> Result<(), Box<dyn std::error::Error>> {
    const STEPS: i32 = 32;
    let (top, left, width) = (40i32, 10i32, 18i32);
    let h = height.max(96) as i32;
    for i in 0..STEPS {
        let t = 1.0 - (i as f64 + 0.5) / STEPS as f64;
        let (y0, y1) = (top + h * i / STEPS, top + h * (i + 1) / STEPS);
        area.draw(&Rectangle::new(
            [(left, y0), (left + width, y1)],
            ramp(t).filled(),
        ))?;
    }
    area.draw(&Rectangle::new(
        [(left, top), (left + width, top + h)],
        BLACK.mix(0.4),
    ))?;
    let font = ("sans-serif", 12).into_font();
    let y_of = |ratio: f64| top + (h as f64 * (1.0 - ratio_to_position(ratio))) as i32;
    let mid = (HEATMAP_BEST_RATIO * HEATMAP_WORST_RATIO).sqrt();
    for (ratio, text) in [
        (
            HEATMAP_BEST_RATIO,
            format!(">= {}x", units::ratio(HEATMAP_BEST_RATIO)),
        ),
        (mid, format!("{}x", units::ratio(mid))),
        (
            HEATMAP_WORST_RATIO,
            format!("<= {}x", units::ratio(HEATMAP_WORST_RATIO)),
        ),
    ] {
        area.draw(&Text::new(
            text,
            (left + width + 4, y_of(ratio) - 6),
            font.clone(),
        ))?;
    }
    let (mark, words) = match cut {
        Some(c) if c.is_finite() && c > 0.0 => (
            c,
            [
                format!("red: verdict cut {}x", units::ratio(c)),
                "(check's host verdict)".to_string(),
            ],
        ),
        _ => (
            HEATMAP_FIXED_MARK,
            [
                format!("red: {}x, a fixed mark", units::ratio(HEATMAP_FIXED_MARK)),
                "(the file has no verdict cut)".to_string(),
            ],
        ),
    };
    let y = y_of(mark);
    area.draw(&PathElement::new(
        vec![(left - 4, y), (left + width + 4, y)],
        RED.stroke_width(2),
    ))?;
    for (i, w) in words.into_iter().enumerate() {
        let at = (left, top + h + 8 + 15 * i as i32);
        area.draw(&Text::new(w, at, font.clone().color(&RED)))?;
    }
    let head = format!("ratio to the median ({} GB/s)", units::gbps(median));
    area.draw(&Text::new(head, (left, top - 18), font))?;
    Ok(())
}

/// Dark blue (slow) to yellow (fast), readable in grey scale too.
fn ramp(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    RGBColor(lerp(40.0, 250.0), lerp(30.0, 230.0), lerp(110.0, 60.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_chart_has_text_and_paths() {
        let s = Series {
            label: "run a".to_string(),
            points: vec![(8.0, 0.1), (1024.0, 5.0), (8.0 * 1024.0 * 1024.0, 300.0)],
        };
        let svg = line_chart_svg("busbw", "GB/s", &[s], false);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("<text") && svg.contains("run a") && svg.contains("<polyline"));
    }

    #[test]
    fn empty_and_degenerate_inputs_still_make_svg() {
        assert!(line_chart_svg("t", "us", &[], true).contains("<svg"));
        let one = Series {
            label: "x".into(),
            points: vec![(0.0, 0.0), (8.0, 1.0)],
        };
        assert!(line_chart_svg("t", "us", &[one], true).contains("<svg"));
        assert!(heatmap_svg(&[], &[], None).contains("<svg"));
    }

    #[test]
    fn tiny_sizes_are_dropped_instead_of_hanging() {
        let s = Series {
            label: "x".into(),
            points: vec![(1e-320, 1.0), (8.0, 1.0)],
        };
        assert!(line_chart_svg("t", "us", &[s], true).contains("<svg"));
    }

    #[test]
    fn heatmap_labels_cells() {
        let labels: Vec<String> = (0..2).map(|i| format!("r{i}")).collect();
        let svg = heatmap_svg(&labels, &[vec![0.0, 350.5], vec![349.0, f64::NAN]], None);
        assert!(svg.contains("350.50") && svg.contains("r1") && svg.contains("<rect"));
        // The colour scale is in ratios to the median, named in GB/s.
        assert!(svg.contains("ratio to the median (349.75 GB/s)"), "{svg}");
        assert!(
            svg.contains("&gt;= 1.000x") && svg.contains("&lt;= 0.500x"),
            "{svg}"
        );
        // No cut in the file: a fixed mark, and the legend says so.
        assert!(svg.contains("0.900x, a fixed mark") && svg.contains("no verdict cut"));
        let svg = heatmap_svg(&labels, &[vec![0.0, 350.5], vec![349.0, 1.0]], Some(0.8));
        assert!(svg.contains("verdict cut 0.800x") && !svg.contains("fixed mark"));
    }

    /// The colour scale is fixed, not the matrix's own range: in a quiet
    /// job (1.94-2.15 GB/s) a pair 10% under the rest stays bright, while
    /// a host 30x slower in a bad job is as dark as the scale goes.
    #[test]
    fn heatmap_colours_by_ratio_to_the_median_on_a_fixed_scale() {
        let median = 2.15;
        let quiet = ratio_position(1.94, median);
        let bad = ratio_position(2.15 / 30.0, median);
        assert!(quiet > 0.8, "{quiet}");
        assert_eq!(bad, 0.0);
        assert_eq!(ratio_position(median, median), 1.0);
        assert_eq!(ratio_position(3.0 * median, median), 1.0);
        assert!((ratio_to_position(0.5_f64.sqrt()) - 0.5).abs() < 1e-12);
        // The quiet job's slowest cell is not drawn in the darkest colour.
        let labels: Vec<String> = (0..3).map(|i| format!("h{i}")).collect();
        let m = vec![
            vec![f64::NAN, 2.15, 1.94],
            vec![2.15, f64::NAN, 2.12],
            vec![1.94, 2.12, f64::NAN],
        ];
        let darkest = ramp(0.0);
        let svg = heatmap_svg(&labels, &m, None);
        let dark = format!(
            "fill=\"#{:02X}{:02X}{:02X}\"",
            darkest.0, darkest.1, darkest.2
        );
        let cells = svg.matches(&dark).count();
        // Only the scale's own bottom step is darkest.
        assert!(cells <= 1, "{cells} darkest rects:\n{svg}");
    }
}
