//! Lateness per rank and size as a heatmap (issue #53): for a run taken
//! with `--arrival`, each out-of-place row's per-rank lateness (median
//! over iterations of its entry after the first rank's), one column per
//! size, one row per rank. White is on time; the darker the red, the
//! later, on a scale from 0 to the largest lateness of the chart, so a
//! straggler reads as one dark row. The Markdown report draws the same
//! grid as a table whose cells carry a shade (` `, `░`, `▒`, `▓`, `█`)
//! beside the figure.

use super::Run;
use crate::units;
use collbench_core::Record;
use plotters::prelude::*;

/// One op's lateness grid from a record: sizes (columns), ranks (rows),
/// `lateness_us[rank][size]` (NaN where a row has no figure for the
/// rank). `None` when no row of `op` carries arrival figures.
#[derive(Debug, Clone, PartialEq)]
pub struct LatenessGrid {
    pub sizes: Vec<u64>,
    pub ranks: usize,
    pub lateness_us: Vec<Vec<f64>>,
}

/// The grid of `op`'s out-of-place rows of `record`.
pub fn grid(record: &Record, op: &str) -> Option<LatenessGrid> {
    let rows: Vec<(u64, &Vec<f64>)> = record
        .op_results(op)
        .filter_map(|r| {
            let a = r.out_of_place.as_ref()?.arrival.as_ref()?;
            Some((r.size_bytes, &a.lateness_us))
        })
        .collect();
    let ranks = rows.iter().map(|r| r.1.len()).max().filter(|&n| n > 0)?;
    let lateness_us = (0..ranks)
        .map(|k| {
            rows.iter()
                .map(|r| r.1.get(k).copied().unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    Some(LatenessGrid {
        sizes: rows.iter().map(|r| r.0).collect(),
        ranks,
        lateness_us,
    })
}

/// One heatmap per run of `runs` taken with `--arrival`, for `op`.
pub fn heatmaps(runs: &[Run], op: &str) -> Vec<String> {
    runs.iter()
        .filter_map(|run| {
            let g = grid(run.record, op)?;
            let title = format!("{} — {op}: lateness per rank (us)", run.label);
            Some(heatmap_svg(&title, &g))
        })
        .collect()
}

/// The shade of a cell at `t` of the darkest (0..=1), in five steps.
fn shade(t: f64) -> char {
    const SHADES: [char; 5] = [' ', '░', '▒', '▓', '█'];
    SHADES[((t.clamp(0.0, 1.0) * 4.0).round()) as usize]
}

/// The grid as a Markdown table under a one-line caption: one row per
/// rank, one column per size, each cell its lateness in us after its
/// shade (relative to the grid's largest); `-` where a row has no figure.
pub fn heatmap_markdown(title: &str, g: &LatenessGrid) -> String {
    let worst = g
        .lateness_us
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let mut out = format!("{title} (blank 0, █ {} us)\n\n| rank |", units::us(worst));
    for &b in &g.sizes {
        out.push_str(&format!(" {} |", units::bytes_short(b as f64)));
    }
    out.push_str("\n| ---: |");
    out.push_str(&" ---: |".repeat(g.sizes.len()));
    out.push('\n');
    for (rank, row) in g.lateness_us.iter().enumerate() {
        out.push_str(&format!("| {rank} |"));
        for v in row {
            let cell = match (v.is_finite(), worst > 0.0) {
                (false, _) => "-".to_string(),
                (true, true) => format!("{} {}", shade(v / worst), units::us(*v)),
                (true, false) => format!("{} {}", shade(0.0), units::us(*v)),
            };
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

/// White (0) to dark red (1).
fn heat(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    RGBColor(lerp(255.0, 150.0), lerp(255.0, 0.0), lerp(255.0, 20.0))
}

/// The grid as an SVG heatmap titled `title`, each cell labelled with its
/// lateness in us when there is room; cells without a figure are grey.
pub fn heatmap_svg(title: &str, g: &LatenessGrid) -> String {
    let (cols, rows) = (g.sizes.len().max(1), g.ranks.max(1));
    let cell_w = (720 / cols as u32).clamp(24, 72);
    let cell_h = (480 / rows as u32).clamp(10, 32);
    let worst = g
        .lateness_us
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let mut svg = String::new();
    {
        let size = (cell_w * cols as u32 + 140, cell_h * rows as u32 + 120);
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        let _ = draw(&root, title, g, worst, (cell_w, cell_h));
        let _ = root.present();
    }
    svg
}

fn draw(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    title: &str,
    g: &LatenessGrid,
    worst: f64,
    (cell_w, cell_h): (u32, u32),
) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let (cols, rows) = (g.sizes.len().max(1), g.ranks.max(1));
    let caption = format!("{title} (white 0, darkest {} us)", units::us(worst));
    let mut chart = ChartBuilder::on(root)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0..cols, 0..rows)?;
    let size_label = |i: &usize| g.sizes.get(*i).map(|&b| units::bytes_short(b as f64));
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("size")
        .y_desc("rank")
        .x_labels(cols)
        .y_labels(rows)
        .x_label_offset(cell_w as i32 / 2)
        .y_label_offset(-(cell_h as i32) / 2)
        .x_label_formatter(&|i| size_label(i).unwrap_or_default())
        .y_label_formatter(&|i| match *i < rows {
            true => (rows - 1 - *i).to_string(),
            false => String::new(),
        })
        .draw()?;
    for (k, row) in g.lateness_us.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            let y = rows - 1 - k;
            let fill = match (v.is_finite(), worst > 0.0) {
                (false, _) => RGBColor(200, 200, 200),
                (true, true) => heat(v / worst),
                (true, false) => heat(0.0),
            };
            chart.draw_series(std::iter::once(Rectangle::new(
                [(c, y), (c + 1, y + 1)],
                fill.filled(),
            )))?;
            if v.is_finite() && cell_w >= 48 && cell_h >= 16 {
                let dark = worst > 0.0 && v / worst > 0.5;
                let style =
                    ("sans-serif", 10)
                        .into_font()
                        .color(if dark { &WHITE } else { &BLACK });
                let (px, py) = chart.backend_coord(&(c, y + 1));
                root.draw(&Text::new(units::us(*v), (px + 3, py + 3), style))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use collbench_core::arrival::Arrival;
    use collbench_core::{CaseResult, Placement};

    fn row(size: u64, lateness: Option<Vec<f64>>) -> CaseResult {
        CaseResult {
            op: "all_reduce".into(),
            size_bytes: size,
            out_of_place: Some(Placement {
                arrival: lateness.map(|lateness_us| {
                    Box::new(Arrival {
                        lateness_us,
                        ..Arrival::default()
                    })
                }),
                ..Placement::default()
            }),
            ..CaseResult::default()
        }
    }

    #[test]
    fn the_grid_has_a_row_per_rank_and_a_column_per_size_with_figures() {
        let mut r = Record::new("collbench");
        r.results = vec![
            row(1024, Some(vec![0.0, 2.0, 1000.0])),
            row(2048, None),
            row(4096, Some(vec![0.5, 1.0, 990.0])),
        ];
        let g = grid(&r, "all_reduce").unwrap();
        assert_eq!((g.sizes.clone(), g.ranks), (vec![1024, 4096], 3));
        assert_eq!(g.lateness_us[2], [1000.0, 990.0]);
        let svg = heatmap_svg("all_reduce: lateness per rank (us)", &g);
        assert!(
            svg.contains("<svg") && svg.contains("darkest 1000.00 us"),
            "{svg}"
        );
        // The straggler's cells are the darkest red, the on-time ones white.
        assert!(
            svg.contains("#960014") || svg.contains("rgb(150,0,20)"),
            "{svg}"
        );
        assert!(grid(&r, "all_gather").is_none());
        r.results = vec![row(8, None)];
        assert!(grid(&r, "all_reduce").is_none());
    }

    #[test]
    fn the_markdown_heatmap_shades_the_straggler_darkest() {
        let mut r = Record::new("collbench");
        r.results = vec![
            row(1024, Some(vec![0.0, 2.0, 1000.0, 260.0])),
            row(65536, Some(vec![0.25, 480.0, 990.0])),
            row(1 << 20, Some(vec![0.5, 1.0, 1010.0, 740.0])),
        ];
        let g = grid(&r, "all_reduce").unwrap();
        let md = heatmap_markdown("all_reduce: lateness per rank (us)", &g);
        insta::assert_snapshot!(md);
        let none = LatenessGrid {
            sizes: vec![8],
            ranks: 2,
            lateness_us: vec![vec![0.0], vec![0.0]],
        };
        assert!(heatmap_markdown("t", &none).contains("| 1 |   0.00 |"));
    }
}
