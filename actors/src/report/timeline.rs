//! report.html's third plot: each device's timeline, its steps, idle stretches and the
//! stretches no process ran (between a death and its resume) as coloured spans.

use super::clock::merged;
use super::plots::{LEGEND, RIGHT, TimeUnit, WIDTH, step_colour, time_axis, time_x_axis};
use super::svg::{Axis, Mark, Svg, Swatch, legend};
use super::{DeviceTime, RunSummary, step_key};
use crate::journal::Step;
use crate::model::DeviceId;

const ROW: f64 = 22.0;
const IDLE: &str = "#e8e8e8";
const DOWN: &str = "#9e9e9e";
/// The most steps a device's row draws one span each: past it, the row is columns of the
/// wall time, each stacked with the share of it that each step, idle and down took, so that
/// report.html stays small and quick at 100,000 candidates (issue 24).
const SPANS_LIMIT: usize = 1_000;
const SHARE_COLUMNS: usize = 240;

/// Seconds of each of `columns` equal stretches of [0, end] that the intervals cover.
fn column_seconds(intervals: &[(f64, f64)], end: f64, columns: usize) -> Vec<f64> {
    let mut seconds = vec![0.0; columns];
    if end <= 0.0 {
        return seconds;
    }
    let width = end / columns as f64;
    for &(start, stop) in intervals {
        let (start, stop) = (start.clamp(0.0, end), stop.clamp(0.0, end));
        if stop <= start {
            continue;
        }
        let first = ((start / width) as usize).min(columns - 1);
        let last = ((stop / width) as usize).min(columns - 1);
        for (column, covered) in seconds.iter_mut().enumerate().take(last + 1).skip(first) {
            let (from, to) = (column as f64 * width, (column + 1) as f64 * width);
            *covered += stop.min(to) - start.max(from);
        }
    }
    seconds
}

/// The stretches of [0, end] outside the given intervals (sorted, merged).
fn idle_gaps(busy: &[(f64, f64)], end: f64) -> Vec<(f64, f64)> {
    let mut gaps = Vec::new();
    let mut cursor = 0.0;
    for (start, stop) in busy {
        if *start > cursor {
            gaps.push((cursor, *start));
        }
        cursor = f64::max(cursor, *stop);
    }
    if end > cursor {
        gaps.push((cursor, end));
    }
    gaps
}

/// Each device's timeline: its steps (verify, time, profile, reference) and its idle stretches as
/// coloured spans, with its busy fraction.
pub(super) fn device_timelines(summary: &RunSummary) -> String {
    const GAP: f64 = 8.0;
    const LABELS: f64 = 190.0;
    let top = 48.0;
    let rows = summary.devices.len().max(1) as f64;
    let bottom = top + rows * (ROW + GAP);
    let height = bottom + 48.0;
    let (x, unit) = time_axis(summary, LABELS);
    let end = summary.end_seconds();
    let fractions = summary.busy_fractions();
    let down = summary.down_intervals();
    let mut svg = Svg::new(
        WIDTH,
        height,
        "plot devices",
        "Each device's timeline: verify, time, profile and idle spans, with its busy fraction",
    );
    time_x_axis(&mut svg, &x, &unit, bottom, top);
    let span = |svg: &mut Svg, row_top: f64, start: f64, stop: f64, colour: &str, mark: Mark| {
        let left = x.at(start / unit.seconds);
        let width = (x.at(stop / unit.seconds) - left).max(0.0);
        svg.add(
            mark.attr("class", "span")
                .attr("data-start", format_args!("{start:.3}"))
                .attr("data-end", format_args!("{stop:.3}"))
                .px("x", left)
                .px("y", row_top)
                .px("width", width)
                .px("height", ROW)
                .attr("fill", colour),
        );
    };
    for (row, (device, time)) in summary.devices.iter().enumerate() {
        let row_top = top + row as f64 * (ROW + GAP);
        let fraction = fractions.get(device).copied().unwrap_or(0.0);
        svg.add(
            Mark::new("text")
                .attr("class", "busy")
                .attr("data-device", device)
                .attr("data-fraction", format_args!("{fraction:.4}"))
                .px("x", LABELS - 8.0)
                .px("y", row_top + ROW / 2.0 + 4.0)
                .attr("text-anchor", "end")
                .title(time.name.clone())
                .text(format!("device {device}: {:.1}% busy", fraction * 100.0)),
        );
        let mut occupied = summary.busy_intervals(time);
        occupied.extend(down.iter().copied());
        let idle = idle_gaps(&merged(occupied), end);
        if time.spans.len() > SPANS_LIMIT {
            let layers = share_layers(summary, time, &idle, &down);
            draw_shares(&mut svg, *device, &layers, row_top, (&x, &unit), end);
            continue;
        }
        for &(start, stop) in &down {
            let mark = Mark::new("rect")
                .attr("data-device", device)
                .attr("data-step", "down")
                .title(format!(
                    "no kactors process ran, {start:.1}–{stop:.1} s: between a death and its resume"
                ));
            span(&mut svg, row_top, start, stop, DOWN, mark);
        }
        for &(start, stop) in &idle {
            let mark = Mark::new("rect")
                .attr("data-device", device)
                .attr("data-step", "idle")
                .title(format!("device {device} idle, {start:.1}–{stop:.1} s"));
            span(&mut svg, row_top, start, stop, IDLE, mark);
        }
        for step in &time.spans {
            let start = summary.seconds_since_start(step.start);
            let stop = step
                .end
                .map_or(end, |t| summary.seconds_since_start(t))
                .max(start);
            let still = if step.end.is_none() {
                " (still running at the journal's end)"
            } else {
                ""
            };
            let mut mark = Mark::new("rect")
                .attr("data-device", device)
                .attr("data-step", step_key(step.step))
                .attr("data-candidate", step.candidate)
                .title(format!(
                    "device {device}: {} candidate {}, {start:.1}–{stop:.1} s{still}",
                    step_key(step.step),
                    step.candidate
                ));
            if step.end.is_none() {
                mark = mark.attr("data-open", "true");
            }
            span(&mut svg, row_top, start, stop, step_colour(step.step), mark);
        }
    }
    let entries: Vec<(Swatch, String)> = [Step::Verify, Step::Time, Step::Profile, Step::Reference]
        .into_iter()
        .map(|step| {
            (
                Swatch::Block {
                    colour: step_colour(step),
                },
                step_key(step).to_string(),
            )
        })
        .chain([(Swatch::Block { colour: IDLE }, "idle".to_string())])
        // Only a resumed run had stretches when no process ran.
        .chain((!down.is_empty()).then(|| {
            (
                Swatch::Block { colour: DOWN },
                "down (killed, not yet resumed)".to_string(),
            )
        }))
        .collect();
    legend(&mut svg, LABELS, LEGEND, RIGHT, &entries);
    svg.finish()
}

/// What a column of a device's row past [`SPANS_LIMIT`] steps is made of: per step (and idle,
/// down), its key, colour and the seconds it took in each column of the wall time.
type Layer = (&'static str, &'static str, Vec<f64>);

fn share_layers(
    summary: &RunSummary,
    time: &DeviceTime,
    idle: &[(f64, f64)],
    down: &[(f64, f64)],
) -> Vec<Layer> {
    let end = summary.end_seconds();
    let spans_of = |step: Step| -> Vec<(f64, f64)> {
        time.spans
            .iter()
            .filter(|span| span.step == step)
            .map(|span| {
                let start = summary.seconds_since_start(span.start);
                let stop = span.end.map_or(end, |t| summary.seconds_since_start(t));
                (start, stop.max(start))
            })
            .collect()
    };
    [Step::Verify, Step::Time, Step::Profile, Step::Reference]
        .into_iter()
        .map(|step| {
            let seconds = column_seconds(&spans_of(step), end, SHARE_COLUMNS);
            (step_key(step), step_colour(step), seconds)
        })
        .chain([
            ("idle", IDLE, column_seconds(idle, end, SHARE_COLUMNS)),
            ("down", DOWN, column_seconds(down, end, SHARE_COLUMNS)),
        ])
        .collect()
}

/// A device's row as columns, each a stack of the shares its layers took.
fn draw_shares(
    svg: &mut Svg,
    device: DeviceId,
    layers: &[Layer],
    row_top: f64,
    (x, unit): (&Axis, &TimeUnit),
    end: f64,
) {
    let width = end / SHARE_COLUMNS as f64;
    for column in 0..SHARE_COLUMNS {
        let (from, to) = (column as f64 * width, (column + 1) as f64 * width);
        let left = x.at(from / unit.seconds);
        let right = x.at(to / unit.seconds);
        // Steps on one device can overlap (a profile beside a run): the stack is of shares.
        let total: f64 = layers.iter().map(|(_, _, seconds)| seconds[column]).sum();
        let mut bottom = row_top + ROW;
        for (step, colour, seconds) in layers {
            let covered = seconds[column];
            if covered <= 0.0 || total <= 0.0 {
                continue;
            }
            let height = ROW * covered / total;
            bottom -= height;
            svg.add(
                Mark::new("rect")
                    .attr("class", "span-share")
                    .attr("data-device", device)
                    .attr("data-step", step)
                    .attr("data-start", format_args!("{from:.3}"))
                    .attr("data-end", format_args!("{to:.3}"))
                    .attr("data-seconds", format_args!("{covered:.3}"))
                    .px("x", left)
                    .px("y", bottom)
                    .px("width", (right - left).max(0.0))
                    .px("height", height)
                    .attr("fill", *colour)
                    .title(format!(
                        "device {device}, {from:.1}–{to:.1} s: {step} {:.0}%",
                        100.0 * covered / (to - from)
                    )),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_gaps_fill_what_the_busy_intervals_leave() {
        assert_eq!(
            idle_gaps(&[(1.0, 2.0), (2.0, 3.0), (5.0, 6.0)], 8.0),
            vec![(0.0, 1.0), (3.0, 5.0), (6.0, 8.0)]
        );
        assert_eq!(idle_gaps(&[(0.0, 8.0)], 8.0), Vec::new());
    }
}
