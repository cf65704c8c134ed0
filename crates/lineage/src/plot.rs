//! The best-so-far curve of a search as SVG.

use crate::graph::Lineage;
use plotters::prelude::*;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PlotError {
    #[error("no candidate passed GREEN, so there is no best-so-far curve to plot")]
    Empty,
    #[error("{path}: cannot draw the plot: {message}")]
    Draw {
        path: std::path::PathBuf,
        message: String,
    },
}

/// Draws best objective (µs) against the number of evaluations to an SVG file.
pub fn plot_best_so_far(lineage: &Lineage, path: &Path) -> Result<(), PlotError> {
    let points = lineage.best_so_far();
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return Err(PlotError::Empty);
    };
    let draw_err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let x_max = last.0.max(2);
    let y_max = first.1 * 1.05;
    let y_min = last.1 * 0.95;
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| draw_err(&e))?;
    let caption = if lineage.meta.title.is_empty() {
        "best so far".to_string()
    } else {
        format!("best so far: {}", lineage.meta.title)
    };
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(1usize..x_max, y_min..y_max)
        .map_err(|e| draw_err(&e))?;
    chart
        .configure_mesh()
        .x_desc("evaluations")
        .y_desc("best latency (µs)")
        .draw()
        .map_err(|e| draw_err(&e))?;
    // A step curve: the best stays flat until an evaluation improves it.
    let mut steps = Vec::with_capacity(points.len() * 2);
    for w in points.windows(2) {
        steps.push(w[0]);
        steps.push((w[1].0, w[0].1));
    }
    steps.push(*last);
    chart
        .draw_series(LineSeries::new(steps, &BLUE))
        .map_err(|e| draw_err(&e))?;
    root.present().map_err(|e| draw_err(&e))?;
    Ok(())
}
