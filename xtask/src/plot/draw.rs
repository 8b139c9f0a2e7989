//! The SVG plot of a benchmark run: grouped bars with whiskers, drawn with plotters.

use super::rows::{rows, unit, Mode, Row};
use anyhow::Result;
use plotters::prelude::*;
use std::path::Path;

/// Draws `rows` as grouped bars with whiskers into an SVG file. The axis is logarithmic (TCG's
/// tails are long, and ratios read as distances); groups are numbered on the axis and named in a
/// key below it.
pub fn svg(path: &Path, title: &str, axis: &str, rows: &[Row]) -> Result<()> {
    let mut groups: Vec<String> = Vec::new();
    let mut settings: Vec<String> = Vec::new();
    for r in rows {
        let g = format!("{}: {}", r.machine, r.group);
        if !groups.contains(&g) {
            groups.push(g);
        }
        if !settings.contains(&r.setting) {
            settings.push(r.setting.clone());
        }
    }
    anyhow::ensure!(!rows.is_empty(), "nothing to plot");
    let positive = |v: f64| if v > 0.0 { Some(v) } else { None };
    let ymax = rows.iter().map(|r| r.hi.unwrap_or(r.median).max(r.median)).fold(1.0f64, f64::max) * 4.0;
    let ymin = rows.iter().filter_map(|r| positive(r.lo.unwrap_or(r.median).min(r.median))).fold(ymax, f64::min) / 2.0;
    let ymin = ymin.max(ymax / 1e9).min(ymax / 10.0);
    let width = (groups.len() as u32 * (settings.len() as u32 * 22 + 24)).clamp(640, 2400) + 160;
    let key_h = 18 * groups.len() as u32 + 30;
    let height = 520 + key_h;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    let e = |x: &dyn std::fmt::Display| anyhow::anyhow!("drawing {}: {x}", path.display());
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (plot_area, key_area) = root.split_vertically(520);
    let n = groups.len() as f64;
    let mut chart = ChartBuilder::on(&plot_area)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5f64..n - 0.5, (ymin..ymax).log_scale())
        .map_err(|x| e(&x))?;
    let label_of = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < groups.len() {
            format!("G{}", i as usize + 1)
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .y_labels(12)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc(format!("{axis} (log scale)"))
        .draw()
        .map_err(|x| e(&x))?;
    let k = settings.len() as f64;
    let bar = 0.8 / k;
    for (si, setting) in settings.iter().enumerate() {
        let colour = Palette99::pick(si).to_rgba();
        let mine: Vec<(f64, &Row)> = rows
            .iter()
            .filter(|r| &r.setting == setting)
            .filter_map(|r| {
                let g = groups.iter().position(|g| *g == format!("{}: {}", r.machine, r.group))?;
                Some((g as f64 - 0.4 + bar * si as f64, r))
            })
            .collect();
        chart
            .draw_series(
                mine.iter()
                    .map(|(x, r)| Rectangle::new([(*x, ymin), (*x + bar * 0.9, r.median.max(ymin))], colour.filled())),
            )
            .map_err(|x| e(&x))?
            .label(setting.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        chart
            .draw_series(mine.iter().filter_map(|(x, r)| {
                let (lo, hi) = (r.lo?.max(ymin), r.hi?.max(ymin));
                Some(ErrorBar::new_vertical(*x + bar * 0.45, lo, r.median.max(ymin), hi, BLACK.stroke_width(1), 6))
            }))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
        .map_err(|x| e(&x))?;
    let font = ("sans-serif", 13).into_font().color(&BLACK);
    key_area
        .draw(&Text::new("whiskers: p10 to p90 (none for exact counts)", (20, 4), font.clone()))
        .map_err(|x| e(&x))?;
    for (i, g) in groups.iter().enumerate() {
        key_area
            .draw(&Text::new(format!("G{} = {g}", i + 1), (20, 24 + 18 * i as i32), font.clone()))
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Draws every figure against its goal into an SVG file: a bar per (figure, machine) of the
/// figure as a share of its goal (1.0 is the goal, a line across; green at or below it: met),
/// bars numbered on the axis and named in a key below it.
pub fn goals_svg(path: &Path, bars: &[(String, f64, bool)]) -> Result<()> {
    anyhow::ensure!(!bars.is_empty(), "nothing to plot");
    let e = |x: &dyn std::fmt::Display| anyhow::anyhow!("drawing {}: {x}", path.display());
    let width = (bars.len() as u32 * 28).clamp(640, 2400) + 160;
    let key_h = 18 * bars.len() as u32 + 30;
    let root = SVGBackend::new(path, (width, 520 + key_h)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let (plot_area, key_area) = root.split_vertically(520);
    let top = bars.iter().map(|b| b.1).filter(|v| v.is_finite()).fold(1.0f64, f64::max) * 1.15;
    let n = bars.len() as f64;
    let mut chart = ChartBuilder::on(&plot_area)
        .caption("figures against their goals (cargo xtask bench summary)", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..top)
        .map_err(|x| e(&x))?;
    let label_of = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < bars.len() {
            format!("F{}", i as usize + 1)
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(bars.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .y_desc("figure / goal (at most 1.0: met)")
        .draw()
        .map_err(|x| e(&x))?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v, met))| {
            let colour = if *met { GREEN.mix(0.7) } else { RED.mix(0.7) };
            let x = i as f64;
            Rectangle::new([(x - 0.35, 0.0), (x + 0.35, v.min(top))], colour.filled())
        }))
        .map_err(|x| e(&x))?;
    chart
        .draw_series(std::iter::once(PathElement::new(vec![(-0.5, 1.0), (n - 0.5, 1.0)], BLACK.stroke_width(2))))
        .map_err(|x| e(&x))?;
    let font = ("sans-serif", 13).into_font().color(&BLACK);
    key_area
        .draw(&Text::new("green: goal met; red: not yet; the line: the goal", (20, 4), font.clone()))
        .map_err(|x| e(&x))?;
    for (i, (name, v, _)) in bars.iter().enumerate() {
        key_area
            .draw(&Text::new(
                format!("F{} = {name} ({v:.2} of the goal)", i + 1),
                (20, 24 + 18 * i as i32),
                font.clone(),
            ))
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// Draws the plot of a saved benchmark run; returns its path.
pub fn bench_svg(dir: &Path, bench: &str, stem: &str, jsonl: &str, mode: Mode) -> Result<std::path::PathBuf> {
    let rows = rows(bench, jsonl, mode)?;
    let path = dir.join(format!("{stem}.svg"));
    let title = format!("cargo xtask bench {bench}{}", if mode == Mode::Icount { " --icount" } else { "" });
    svg(&path, &title, &Mode::axis(mode, unit(bench, mode)), &rows)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_is_an_svg_with_a_bar_per_row_and_the_mode_on_its_axis() {
        let dir = std::env::temp_dir().join(format!("xtask-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let jsonl = "{\"machine\":\"max\",\"case\":\"convert (fold), with TLBI\",\"median_ns\":1000,\"p10_ns\":900,\"p90_ns\":1300,\"spread\":0.4}\n\
                     {\"machine\":\"max\",\"case\":\"convert (fold), no TLBI (BBML2)\",\"median_ns\":300,\"p10_ns\":250,\"p90_ns\":400,\"spread\":0.5}\n";
        let p = bench_svg(&dir, "contpte", "contpte", jsonl, Mode::Wall).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50]);
        assert!(svg.contains("wall clock under QEMU TCG"));
        assert!(svg.contains("no TLBI (BBML2)") && svg.contains("with TLBI"), "legend");
        assert!(svg.contains("G1 = max: convert (fold)"), "key");
        assert!(svg.matches("<rect").count() >= 4, "a bar per row (and the legend and frame)");
        let p = bench_svg(&dir, "contpte", "contpte-icount", &jsonl.replace("median_ns", "median_insns"), Mode::Icount)
            .unwrap();
        assert!(std::fs::read_to_string(p).unwrap().contains("instructions, QEMU -icount"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
