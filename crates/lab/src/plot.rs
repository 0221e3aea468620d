//! The `compare --plot` figure: utilisation, SLO violations and cost over time, side by side,
//! one line per policy. The font is embedded (DejaVu Sans, see `assets/`) so plotting needs
//! nothing installed.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::FontStyle;
use plotters_backend::DrawingErrorKind;
use plotters_bitmap::BitMapBackendError;

use crate::LabError;
use crate::evaluate::Evaluation;
use crate::score::Series;

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

/// A drawing error as one line. Writing the file is the one thing that fails in practice (a
/// read-only or vanished directory, a full disk): that reads `PATH: cannot write: REASON`, not
/// plotters' Debug dump of the I/O error inside its and `image`'s wrappers.
fn draw_error(path: &Path, e: DrawingAreaErrorKind<BitMapBackendError>) -> LabError {
    let reason = match e {
        DrawingAreaErrorKind::BackendError(DrawingErrorKind::DrawingError(backend)) => match backend {
            BitMapBackendError::IOError(io) => return LabError::io(path, format!("cannot write: {io}")),
            // `image` words an I/O error as the error itself, an encoding one as what failed.
            BitMapBackendError::ImageError(image) => return LabError::io(path, format!("cannot write: {image}")),
            other => format!("{other:?}"),
        },
        DrawingAreaErrorKind::BackendError(DrawingErrorKind::FontError(font)) => format!("font: {font}"),
        other => other.to_string(),
    };
    LabError::Plot { path: path.to_path_buf(), reason }
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
    let labels: Vec<String> = runs.iter().map(|r| r.policy.to_string()).collect();
    let series: Vec<(&str, &Series)> = labels.iter().map(String::as_str).zip(runs.iter().map(|r| &r.series)).collect();
    timeline(path, &series, None, interval_s)
}

/// Labelled lines of one panel.
type Lines = Vec<(String, Vec<f64>)>;

/// How many applications were in each lifecycle stage after every interval, for one run.
pub struct StageCounts<'a> {
    /// The run's label (`aware`).
    pub label: &'a str,
    /// Stage names, in the order of `counts`.
    pub names: &'a [&'a str],
    /// `counts[stage][interval]`.
    pub counts: Vec<Vec<f64>>,
}

/// Utilisation, cumulative SLO violations and reserved CPU over time, one line per run, and —
/// with `stages` — a fourth panel with the applications in each lifecycle stage.
pub fn timeline(path: &Path, runs: &[(&str, &Series)], stages: Option<&StageCounts>, interval_s: f64) -> Result<()> {
    register_font()?;
    let err = |e| draw_error(path, e);
    let panels_n = if stages.is_some() { 4 } else { 3 };
    let root = BitMapBackend::new(path, (600 * panels_n as u32, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((1, panels_n));
    let steps = runs.first().map_or(0, |r| r.1.cpu_utilisation.len());
    let hours = steps as f64 * interval_s / 3600.0;
    let cumulative = |v: &[u64]| -> Vec<f64> {
        v.iter()
            .scan(0.0, |acc, &x| {
                *acc += x as f64;
                Some(*acc)
            })
            .collect()
    };
    let mut specs: Vec<(String, &str, Lines)> = vec![
        (
            "Mean CPU utilisation".into(),
            "utilisation",
            runs.iter().map(|(l, s)| (l.to_string(), s.cpu_utilisation.clone())).collect(),
        ),
        (
            "Cumulative SLO violations".into(),
            "app-intervals over SLO",
            runs.iter().map(|(l, s)| (l.to_string(), cumulative(&s.slo_violations))).collect(),
        ),
        (
            "Cost: reserved CPU".into(),
            "cores",
            runs.iter().map(|(l, s)| (l.to_string(), s.reserved_cores.clone())).collect(),
        ),
    ];
    if let Some(st) = stages {
        specs.push((
            format!("Lifecycle stage ({})", st.label),
            "applications",
            st.names.iter().zip(&st.counts).map(|(n, c)| (n.to_string(), c.clone())).collect(),
        ));
    }
    for (panel, (title, y_label, lines)) in panels.iter().zip(specs) {
        line_panel(panel, &title, y_label, &lines, hours, interval_s).map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

fn line_panel<DB: DrawingBackend>(
    panel: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_label: &str,
    lines: &[(String, Vec<f64>)],
    hours: f64,
    interval_s: f64,
) -> std::result::Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let y_max = lines.iter().flat_map(|l| &l.1).cloned().fold(0.0f64, f64::max).max(1e-9) * 1.05;
    let mut chart = ChartBuilder::on(panel)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(85)
        .build_cartesian_2d(0.0..hours.max(1e-9), 0.0..y_max)?;
    let whole = y_max > 20.0;
    chart
        .configure_mesh()
        .x_desc("hours")
        .y_desc(y_label)
        .y_label_formatter(&|v| if whole { format!("{v:.0}") } else { format!("{v:.2}") })
        .label_style(("sans-serif", 14))
        .draw()?;
    for (k, (label, ys)) in lines.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let points = ys.iter().enumerate().map(|(i, &y)| ((i + 1) as f64 * interval_s / 3600.0, y));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    Ok(())
}

/// Where a plot may go: a `.png` path, not a directory, whose directory exists, and that can be
/// opened for writing. Checked before a long run, so a typo or an unwritable place costs
/// nothing; the error names the path and the reason.
pub fn check_path(path: &Path) -> std::result::Result<(), String> {
    if path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() != Some("png") {
        return Err(format!("{} must end in .png", path.display()));
    }
    if path.is_dir() {
        return Err(format!("{} is a directory", path.display()));
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(format!("directory {} does not exist", parent.display()));
    }
    check_writable(path).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// Opens `path` for writing as drawing will, changing nothing: a file already there is not
/// truncated, and one created here is removed again.
fn check_writable(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        // A link to nothing yet: writing creates its target, which is left to the drawing.
        Ok(_) if !path.exists() => Ok(()),
        // Only a regular file is opened (a FIFO would block the open until a reader came).
        Ok(_) if !std::fs::metadata(path)?.is_file() => {
            Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"))
        }
        Ok(_) => std::fs::OpenOptions::new().write(true).open(path).map(drop),
        Err(_) => {
            std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
            std::fs::remove_file(path)
        }
    }
}

/// Episode reward over episodes for `train`.
pub fn learning_curve(path: &Path, label: &str, points: &[(f64, f64)]) -> Result<()> {
    curves(
        path,
        &format!("Learning curve: {label}"),
        ("episode", "mean episode reward"),
        &[(label.into(), points.to_vec())],
        &[],
    )
}

/// Labelled lines over a shared x axis, with labelled vertical `markers` (events such as
/// agents joining), and a legend.
pub fn curves(
    path: &Path,
    title: &str,
    axes: (&str, &str),
    series: &[(String, Vec<(f64, f64)>)],
    markers: &[(f64, String)],
) -> Result<()> {
    register_font()?;
    let err = |e| draw_error(path, e);
    let root = BitMapBackend::new(path, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let points = || series.iter().flat_map(|(_, p)| p.iter()).filter(|p| p.0.is_finite() && p.1.is_finite());
    let x_max = points().map(|p| p.0).fold(1.0, f64::max);
    let (lo, hi) = points().fold((f64::MAX, f64::MIN), |(l, h), p| (l.min(p.1), h.max(p.1)));
    let (lo, hi) = if lo > hi { (0.0, 1.0) } else { (lo, hi) };
    let pad = ((hi - lo).abs() * 0.05).max(1e-6);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, (lo - pad)..(hi + pad))
        .map_err(err)?;
    chart.configure_mesh().x_desc(axes.0).y_desc(axes.1).label_style(("sans-serif", 14)).draw().map_err(err)?;
    for (x, label) in markers {
        let grey = COLORS[7];
        chart.draw_series(LineSeries::new([(*x, lo - pad), (*x, hi + pad)], grey.stroke_width(1))).map_err(err)?;
        chart
            .draw_series([Text::new(label.clone(), (*x, hi + pad), ("sans-serif", 14).into_font().color(&grey))])
            .map_err(err)?;
    }
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let finite = pts.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite());
        chart
            .draw_series(LineSeries::new(finite, color.stroke_width(2)))
            .map_err(err)?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// A scatter plot of labelled 2-D points, one colour per group (in order of first appearance),
/// with a legend.
pub fn scatter(path: &Path, title: &str, axes: (&str, &str), points: &[(String, f64, f64)]) -> Result<()> {
    register_font()?;
    let err = |e| draw_error(path, e);
    let root = BitMapBackend::new(path, (900, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let range = |f: fn(&(String, f64, f64)) -> f64| {
        let (lo, hi) = points.iter().map(f).fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
        let (lo, hi) = if lo > hi { (-1.0, 1.0) } else { (lo, hi) };
        let pad = ((hi - lo) * 0.08).max(1e-6);
        (lo - pad)..(hi + pad)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(range(|p| p.1), range(|p| p.2))
        .map_err(err)?;
    chart.configure_mesh().x_desc(axes.0).y_desc(axes.1).label_style(("sans-serif", 14)).draw().map_err(err)?;
    let mut groups: Vec<&str> = Vec::new();
    for p in points {
        if !groups.contains(&p.0.as_str()) {
            groups.push(&p.0);
        }
    }
    for (g, name) in groups.iter().enumerate() {
        let color = COLORS[g % COLORS.len()];
        let members = points.iter().filter(|p| p.0 == *name).map(|p| Circle::new((p.1, p.2), 5, color.filled()));
        chart
            .draw_series(members)
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_paths_must_be_png_in_an_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_path(&dir.path().join("a.png")).is_ok());
        assert!(check_path(&dir.path().join("a.PNG")).is_ok());
        let wrong = check_path(&dir.path().join("a.svg")).unwrap_err();
        assert!(wrong.contains("must end in .png"), "{wrong}");
        let missing = check_path(&dir.path().join("nope/a.png")).unwrap_err();
        assert!(missing.contains("does not exist") && missing.contains("nope"), "{missing}");
    }

    /// A place the PNG cannot be written is refused up front, and the check leaves nothing
    /// behind: no new file, an existing one as it was.
    #[test]
    fn plot_paths_must_be_writable_and_checking_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("new.png");
        check_path(&new).unwrap();
        assert!(!new.exists(), "the check removes the file it created");
        let old = dir.path().join("old.png");
        std::fs::write(&old, "kept").unwrap();
        check_path(&old).unwrap();
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept");
        let sub = dir.path().join("d.png");
        std::fs::create_dir(&sub).unwrap();
        let e = check_path(&sub).unwrap_err();
        assert!(e.ends_with("d.png is a directory"), "{e}");
        #[cfg(target_os = "linux")]
        for place in ["/proc/aware-plot.png", "/sys/aware-plot.png"] {
            let e = check_path(Path::new(place)).unwrap_err();
            assert!(e.starts_with(&format!("{place}: cannot write: ")) && !e.contains("Os {"), "{e}");
        }
    }

    /// A failed write after drawing is one line naming the file and the I/O reason, not
    /// plotters' Debug dump (`ImageError(IoError(Os { code: 13, .. }))`).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_write_is_one_line() {
        let points = [("a".to_string(), vec![(0.0, 1.0), (1.0, 2.0)])];
        let e = curves(Path::new("/proc/aware-plot.png"), "t", ("x", "y"), &points, &[]).unwrap_err();
        assert!(matches!(e, LabError::Io { .. }), "{e:?}");
        let e = e.to_string();
        assert!(e.starts_with("/proc/aware-plot.png: cannot write: "), "{e}");
        assert!(!e.contains('\n') && !e.contains("Os {") && !e.contains("Error("), "{e}");
    }

    #[test]
    fn curves_with_markers_write_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("curves.png");
        let line = |k: f64| (0..50).map(|e| (e as f64, (e as f64 * k).sin())).collect::<Vec<_>>();
        let series = [("a".to_string(), line(0.1)), ("b".to_string(), line(0.2))];
        curves(&path, "t", ("episode", "reward"), &series, &[(20.0, "+5 agents".into())]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert!(bytes.len() > 1_000 && bytes.starts_with(b"\x89PNG"), "{} bytes", bytes.len());
        // Nothing to draw still writes a (blank) figure rather than failing on an empty range.
        curves(&path, "t", ("x", "y"), &[("none".into(), Vec::new())], &[]).unwrap();
    }
}
