//! The `compare --plot` figure: utilisation, SLO violations and cost over time, side by side,
//! one line per policy. The font is embedded (DejaVu Sans, see `assets/`) so plotting needs
//! nothing installed.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::LabError;
use crate::evaluate::Evaluation;

type Result<T> = std::result::Result<T, LabError>;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

fn register_font() -> Result<()> {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *ONCE.get_or_init(|| plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err(LabError::Plot { path: "DejaVuSans.ttf".into(), reason: "the embedded font could not be loaded".into() })
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Writes a PNG with three panels; `interval_s` converts steps to hours on the x axis.
pub fn comparison(path: &Path, runs: &[Evaluation], interval_s: f64) -> Result<()> {
    register_font()?;
    let err = |e: &dyn std::fmt::Display| LabError::Plot { path: path.to_path_buf(), reason: e.to_string() };
    let root = BitMapBackend::new(path, (1800, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let panels = root.split_evenly((1, 3));
    let steps = runs.first().map_or(0, |r| r.series.cpu_utilisation.len());
    let hours = steps as f64 * interval_s / 3600.0;
    type Extract = fn(&Evaluation) -> Vec<f64>;
    let specs: [(&str, &str, Extract); 3] = [
        ("Mean CPU utilisation", "utilisation", |r| r.series.cpu_utilisation.clone()),
        ("Cumulative SLO violations", "app-intervals over SLO", |r| {
            r.series
                .slo_violations
                .iter()
                .scan(0.0, |acc, &v| {
                    *acc += v as f64;
                    Some(*acc)
                })
                .collect()
        }),
        ("Cost: reserved CPU", "cores", |r| r.series.reserved_cores.clone()),
    ];
    for (panel, (title, y_label, extract)) in panels.iter().zip(specs) {
        let data: Vec<Vec<f64>> = runs.iter().map(extract).collect();
        let y_max = data.iter().flatten().cloned().fold(0.0f64, f64::max).max(1e-9) * 1.05;
        let mut chart = ChartBuilder::on(panel)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(85)
            .build_cartesian_2d(0.0..hours.max(1e-9), 0.0..y_max)
            .map_err(|e| err(&e))?;
        let whole = y_max > 20.0;
        chart
            .configure_mesh()
            .x_desc("hours")
            .y_desc(y_label)
            .y_label_formatter(&|v| if whole { format!("{v:.0}") } else { format!("{v:.2}") })
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(|e| err(&e))?;
        for (k, (run, ys)) in runs.iter().zip(&data).enumerate() {
            let color = COLORS[k % COLORS.len()];
            let points = ys.iter().enumerate().map(|(i, &y)| ((i + 1) as f64 * interval_s / 3600.0, y));
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(run.policy.to_string())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Episode reward over episodes for `train`.
pub fn learning_curve(path: &Path, label: &str, points: &[(f64, f64)]) -> Result<()> {
    register_font()?;
    let err = |e: &dyn std::fmt::Display| LabError::Plot { path: path.to_path_buf(), reason: e.to_string() };
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let x_max = points.iter().map(|p| p.0).fold(1.0, f64::max);
    let (lo, hi) = points.iter().fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.1), h.max(p.1)));
    let pad = ((hi - lo).abs() * 0.05).max(1e-6);
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("Learning curve: {label}"), ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, (lo - pad)..(hi + pad))
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("episode")
        .y_desc("mean episode reward")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(|e| err(&e))?;
    chart.draw_series(LineSeries::new(points.iter().cloned(), COLORS[0].stroke_width(2))).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
