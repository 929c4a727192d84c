//! `--plot OUT.svg`: one SVG with three panels — a roofline (achieved GFLOP/s against
//! arithmetic intensity under the measured memory roof, and the compute roof when a suite
//! measured one), each workload's efficiency against its floor, and kiln / peer time
//! ratios. plotters' SVG backend writes text as `<text>` elements, so no font is needed
//! where the chart is drawn (the viewer renders it).

use crate::schema::Report;
use crate::{Error, Result};
use plotters::prelude::*;
use std::path::Path;

/// Check the path is one this can write (before a long run starts).
pub fn check_path(path: &Path) -> kiln::Result<()> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("svg") => Ok(()),
        _ => Err(kiln::Error::invalid(
            "bench --plot",
            format!("{}: only SVG output is supported (name it *.svg)", path.display()),
        )),
    }
}

const W: u32 = 1100;
const PANEL_H: u32 = 520;

/// plotters' error as text (its backend error type is generic over the backend).
fn msg(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The error for a failure in `panel` (`None`: on the whole canvas).
fn plot_error(panel: Option<&'static str>) -> impl Fn(String) -> Error {
    move |message| Error::Plot { panel, message }
}

/// Draw the three panels into `path`.
pub fn draw(r: &Report, path: &Path) -> Result<()> {
    check_path(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let eff: Vec<(String, f64)> = r
        .results
        .iter()
        .filter_map(|x| Some((format!("{} {}", x.workload, x.size), x.efficiency?)))
        .collect();
    let ratios: Vec<(String, f64)> = r
        .peers
        .iter()
        .map(|p| (format!("{} {} / {}", p.workload, p.size, p.peer), p.ratio))
        .collect();
    let bars_h = |n: usize| (n as u32 * 22 + 110).max(240);
    let h = PANEL_H + bars_h(eff.len()) + bars_h(ratios.len());
    let root = SVGBackend::new(path, (W, h)).into_drawing_area();
    root.fill(&WHITE).map_err(msg).map_err(plot_error(None))?;
    let (top, rest) = root.split_vertically(PANEL_H);
    let (mid, bottom) = rest.split_vertically(bars_h(eff.len()));
    let title = format!(
        "kiln bench on {} ({}), kiln {} @ {}",
        r.device_name, r.device, r.kiln_version, r.git_commit
    );
    roofline(r, &top, &title).map_err(plot_error(Some("roofline")))?;
    bars(
        &mid,
        "efficiency: floor time / median time (1.0 = at the measured ceiling)",
        &eff,
        Some(1.0),
        &BLUE,
    )
    .map_err(plot_error(Some("efficiency")))?;
    if ratios.is_empty() {
        bottom
            .draw(&Text::new(
                "kiln / peer: no peer results merged (run with --peers PEERS.json)",
                (20, 30),
                ("sans-serif", 16),
            ))
            .map_err(msg)
            .map_err(plot_error(None))?;
    } else {
        bars(
            &bottom,
            "kiln time / peer time (< 1: kiln is faster), same run",
            &ratios,
            Some(1.0),
            &RED,
        )
        .map_err(plot_error(Some("peers")))?;
    }
    root.present().map_err(msg).map_err(plot_error(None))?;
    Ok(())
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

fn roofline(r: &Report, area: &Area, title: &str) -> Result<(), String> {
    let pts: Vec<(String, f64, f64)> = r
        .results
        .iter()
        .filter(|x| x.flops > 0.0 && x.bytes > 0.0 && x.floor_basis.as_deref() != Some("h2d_pinned"))
        .map(|x| (x.workload.clone(), x.flops / x.bytes, x.flops / x.median_ms / 1e6))
        .collect();
    let mem_gbps = r
        .ceilings
        .iter()
        .find(|c| c.name == "device_copy" || c.name == "host_copy")
        .and_then(|c| c.gbps);
    let peak_gflops = r
        .ceilings
        .iter()
        .filter_map(|c| c.tflops)
        .fold(None, |m: Option<f64>, t| Some(m.map_or(t, |m| m.max(t))))
        .map(|t| t * 1e3);
    let (mut x0, mut x1) = (0.05f64, 100.0f64);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for (_, ai, g) in &pts {
        x0 = x0.min(ai / 2.0);
        x1 = x1.max(ai * 2.0);
        y0 = y0.min(*g);
        y1 = y1.max(*g);
    }
    if let Some(bw) = mem_gbps {
        y0 = y0.min(bw * x0);
        y1 = y1.max(bw * x1);
    }
    if let Some(p) = peak_gflops {
        y1 = y1.max(p);
    }
    if y0 > y1 {
        (y0, y1) = (1.0, 1e3);
    }
    let (y0, y1) = ((y0 / 3.0).max(1e-3), y1 * 3.0);
    let mut c = ChartBuilder::on(area)
        .caption(format!("{title}: roofline"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(msg)?;
    c.configure_mesh()
        .x_desc("arithmetic intensity (FLOP / byte moved)")
        .y_desc("GFLOP/s")
        .draw()
        .map_err(msg)?;
    if let Some(bw) = mem_gbps {
        let knee = peak_gflops.map_or(x1, |p| (p / bw).min(x1));
        c.draw_series(LineSeries::new(
            vec![(x0, bw * x0), (knee, bw * knee)],
            BLUE.stroke_width(2),
        ))
        .map_err(msg)?
        .label(format!("memory roof {bw:.0} GB/s"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
        if let Some(p) = peak_gflops {
            c.draw_series(LineSeries::new(vec![(knee, p), (x1, p)], GREEN.stroke_width(2)))
                .map_err(msg)?
                .label(format!("compute roof {:.1} TFLOP/s", p / 1e3))
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], GREEN));
        }
    }
    c.draw_series(
        pts.iter()
            .map(|(_, ai, g)| Circle::new((*ai, *g), 5, RED.filled())),
    )
    .map_err(msg)?
    .label("kiln (median)")
    .legend(|(x, y)| Circle::new((x + 10, y), 5, RED.filled()));
    c.draw_series(
        pts.iter()
            .map(|(n, ai, g)| Text::new(n.clone(), (*ai * 1.08, *g), ("sans-serif", 12))),
    )
    .map_err(msg)?;
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(msg)?;
    if pts.is_empty() {
        area.draw(&Text::new(
            "no workload with both flops and bytes in this run",
            (100, 60),
            ("sans-serif", 14),
        ))
        .map_err(msg)?;
    }
    Ok(())
}

/// Horizontal bars, one per (label, value), with a reference line at `mark`.
fn bars(
    area: &Area,
    caption: &str,
    data: &[(String, f64)],
    mark: Option<f64>,
    color: &RGBColor,
) -> Result<(), String> {
    if data.is_empty() {
        area.draw(&Text::new(
            format!("{caption}: nothing to show"),
            (20, 30),
            ("sans-serif", 16),
        ))
        .map_err(msg)?;
        return Ok(());
    }
    // plotters' integer ranges are inclusive (0..n is n + 1 segments, the top one empty);
    // 0..n-1 would be degenerate for one bar
    let n = data.len();
    let xmax = data
        .iter()
        .map(|d| d.1)
        .chain(mark)
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max)
        * 1.15;
    let labels: Vec<String> = data.iter().map(|d| d.0.clone()).collect();
    let mut c = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..xmax.max(0.1), (0..n).into_segmented())
        .map_err(msg)?;
    c.configure_mesh()
        .disable_y_mesh()
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_style(("sans-serif", 12))
        .draw()
        .map_err(msg)?;
    c.draw_series(
        Histogram::horizontal(&c)
            .style(color.mix(0.7).filled())
            .margin(4)
            .data(data.iter().enumerate().map(|(i, d)| (i, d.1))),
    )
    .map_err(msg)?;
    c.draw_series(data.iter().enumerate().map(|(i, d)| {
        Text::new(
            format!("{:.3}", d.1),
            (d.1, SegmentValue::CenterOf(i)),
            ("sans-serif", 11),
        )
    }))
    .map_err(msg)?;
    if let Some(m) = mark {
        c.draw_series(LineSeries::new(
            vec![(m, SegmentValue::Exact(0)), (m, SegmentValue::Last)],
            BLACK.stroke_width(1),
        ))
        .map_err(msg)?;
    }
    Ok(())
}
