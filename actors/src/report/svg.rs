//! A small SVG writer for the report's plots: marks, axes with round ticks (linear or log) and
//! legends. Every mark carries a class and data attributes naming what it shows (the tests count
//! them against the journal) and a `<title>` that a browser shows on hover. plotters' SVG backend
//! writes bare shapes with neither (its tag writer is private and takes fixed attributes), so
//! the plots are drawn here.

use std::fmt::{Display, Write as _};

/// Text made safe for an attribute or an element's content. Control characters, which XML
/// cannot carry and a failure's reason might, become U+FFFD.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// One SVG element: its tag, attributes, and a hover title or text content.
pub(super) struct Mark {
    tag: &'static str,
    attributes: String,
    title: Option<String>,
    text: Option<String>,
    /// Where a click on it leads (a candidate's folder, relative to the report).
    link: Option<String>,
}

impl Mark {
    pub(super) fn new(tag: &'static str) -> Mark {
        Mark {
            tag,
            attributes: String::new(),
            title: None,
            text: None,
            link: None,
        }
    }

    pub(super) fn link(mut self, href: impl Into<String>) -> Mark {
        self.link = Some(href.into());
        self
    }

    pub(super) fn attr(mut self, name: &str, value: impl Display) -> Mark {
        let _ = write!(
            self.attributes,
            " {name}=\"{}\"",
            escape(&value.to_string())
        );
        self
    }

    /// A coordinate or a length in pixels, to a hundredth.
    pub(super) fn px(self, name: &str, value: f64) -> Mark {
        self.attr(name, format_args!("{value:.2}"))
    }

    pub(super) fn title(mut self, title: impl Into<String>) -> Mark {
        self.title = Some(title.into());
        self
    }

    pub(super) fn text(mut self, text: impl Into<String>) -> Mark {
        self.text = Some(text.into());
        self
    }
}

/// An SVG document being written.
pub(super) struct Svg {
    out: String,
}

impl Svg {
    pub(super) fn new(width: f64, height: f64, class: &str, label: &str) -> Svg {
        let mut out = String::new();
        let _ = write!(
            out,
            "<svg class=\"{}\" role=\"img\" aria-label=\"{}\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">",
            escape(class),
            escape(label)
        );
        Svg { out }
    }

    pub(super) fn add(&mut self, mark: Mark) {
        if let Some(href) = &mark.link {
            let _ = write!(self.out, "<a href=\"{}\">", escape(href));
        }
        let _ = write!(self.out, "<{}{}", mark.tag, mark.attributes);
        match (mark.title, mark.text) {
            (None, None) => self.out.push_str("/>"),
            (title, text) => {
                self.out.push('>');
                if let Some(title) = title {
                    let _ = write!(self.out, "<title>{}</title>", escape(&title));
                }
                if let Some(text) = text {
                    self.out.push_str(&escape(&text));
                }
                let _ = write!(self.out, "</{}>", mark.tag);
            }
        }
        if mark.link.is_some() {
            self.out.push_str("</a>");
        }
    }

    /// A line of text; `anchor` is SVG's text-anchor (`start`, `middle`, `end`).
    pub(super) fn label(&mut self, x: f64, y: f64, anchor: &str, text: &str) {
        self.add(
            Mark::new("text")
                .px("x", x)
                .px("y", y)
                .attr("text-anchor", anchor)
                .text(text),
        );
    }

    pub(super) fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// A number as a tick shows it: about four significant digits, no trailing zeros.
pub(super) fn tick_label(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return "0".into();
    }
    let magnitude = value.abs().log10().floor();
    if !(-3.0..6.0).contains(&magnitude) {
        return format!("{value:.0e}");
    }
    let decimals = (3.0 - magnitude).max(0.0) as usize;
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// 1, 2 or 5 times a power of ten, the smallest at least `raw`.
fn round_step(raw: f64) -> f64 {
    let power = 10f64.powf(raw.log10().floor());
    let fraction = raw / power;
    let nice = if fraction <= 1.0 {
        1.0
    } else if fraction <= 2.0 {
        2.0
    } else if fraction <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * power
}

/// A value axis mapped onto pixels: `from` is where `min` is drawn, `to` where `max` is (a y
/// axis runs upwards, so there `to` < `from`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Axis {
    log: bool,
    min: f64,
    max: f64,
    from: f64,
    to: f64,
}

impl Axis {
    /// A linear axis over the values' range; a range of one value is widened around it.
    pub(super) fn linear(min: f64, max: f64, from: f64, to: f64) -> Axis {
        let (min, max) = if min.is_finite() && max.is_finite() && max > min {
            (min, max)
        } else if min.is_finite() {
            let pad = if min == 0.0 { 1.0 } else { min.abs() / 10.0 };
            (min - pad, min + pad)
        } else {
            (0.0, 1.0)
        };
        Axis {
            log: false,
            min,
            max,
            from,
            to,
        }
    }

    /// A log axis over positive values (times that differ by orders of magnitude); without
    /// such values, a linear one.
    pub(super) fn log(min: f64, max: f64, from: f64, to: f64) -> Axis {
        if !(min > 0.0 && max.is_finite() && min.is_finite()) {
            return Axis::linear(min, max, from, to);
        }
        let (min, max) = if max > min {
            (min, max)
        } else {
            (min / 2.0, min * 2.0)
        };
        Axis {
            log: true,
            min,
            max,
            from,
            to,
        }
    }

    fn position(&self, value: f64) -> f64 {
        if self.log { value.log10() } else { value }
    }

    /// The pixel of a value; values outside the axis (or not numbers) are drawn at its ends.
    pub(super) fn at(&self, value: f64) -> f64 {
        let value = if value.is_nan() {
            self.min
        } else {
            value.clamp(self.min, self.max)
        };
        let (low, high) = (self.position(self.min), self.position(self.max));
        self.from + (self.position(value) - low) / (high - low) * (self.to - self.from)
    }

    /// Round values within the axis to mark: about five on a linear axis; 1, 2 and 5 of each
    /// power of ten on a log axis (only the powers when they span more than two, the linear
    /// ticks when fewer than three would show).
    pub(super) fn ticks(&self) -> Vec<f64> {
        if self.log {
            let low = self.min.log10().floor() as i32;
            let high = self.max.log10().ceil() as i32;
            let spread = high - low;
            let multiples: &[f64] = if spread <= 2 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            let stride = (spread / 8 + 1) as usize;
            let ticks: Vec<f64> = (low..=high)
                .step_by(stride)
                .flat_map(|power| multiples.iter().map(move |m| m * 10f64.powi(power)))
                .filter(|value| (self.min..=self.max).contains(value))
                .collect();
            // Within about one power of ten the linear ticks say more, and sit as well.
            if ticks.len() >= 3 {
                return ticks;
            }
        }
        let step = round_step((self.max - self.min) / 5.0);
        if !(step.is_finite() && step > 0.0) {
            return vec![self.min];
        }
        let first = (self.min / step).ceil();
        (0..12)
            .map(|i| (first + f64::from(i)) * step)
            .take_while(|value| *value <= self.max + step * 1e-9)
            .collect()
    }
}

/// What a legend entry shows beside its label.
pub(super) enum Swatch<'a> {
    Line { colour: &'a str, dashed: bool },
    Dot { colour: &'a str },
    Ring,
    Cross { colour: &'a str },
    Block { colour: &'a str },
}

/// A row of legend entries from (x, y), wrapping before `right`.
pub(super) fn legend(svg: &mut Svg, x: f64, y: f64, right: f64, entries: &[(Swatch, String)]) {
    let (mut left, mut baseline) = (x, y);
    for (swatch, label) in entries {
        let width = 24.0 + 6.5 * label.chars().count() as f64 + 16.0;
        if left + width > right && left > x {
            left = x;
            baseline += 18.0;
        }
        let middle = baseline - 4.0;
        let mark = match swatch {
            Swatch::Line { colour, dashed } => {
                let line = Mark::new("line")
                    .px("x1", left)
                    .px("y1", middle)
                    .px("x2", left + 18.0)
                    .px("y2", middle)
                    .attr("stroke", colour)
                    .attr("stroke-width", 2);
                if *dashed {
                    line.attr("stroke-dasharray", "6 3")
                } else {
                    line
                }
            }
            Swatch::Dot { colour } => Mark::new("circle")
                .px("cx", left + 9.0)
                .px("cy", middle)
                .attr("r", 4)
                .attr("fill", colour),
            Swatch::Ring => Mark::new("circle")
                .px("cx", left + 9.0)
                .px("cy", middle)
                .attr("r", 6)
                .attr("fill", "none")
                .attr("stroke", "#000")
                .attr("stroke-width", 1.5),
            Swatch::Cross { colour } => Mark::new("path")
                .attr("d", cross(left + 9.0, middle, 4.0))
                .attr("stroke", colour)
                .attr("stroke-width", 2),
            Swatch::Block { colour } => Mark::new("rect")
                .px("x", left)
                .px("y", middle - 6.0)
                .attr("width", 18)
                .attr("height", 12)
                .attr("fill", colour),
        };
        svg.add(mark.attr("class", "legend"));
        svg.label(left + 24.0, baseline, "start", label);
        left += width;
    }
}

/// An × of half-width `r` centred on (x, y), as a path.
pub(super) fn cross(x: f64, y: f64, r: f64) -> String {
    format!(
        "M{:.2} {:.2}L{:.2} {:.2}M{:.2} {:.2}L{:.2} {:.2}",
        x - r,
        y - r,
        x + r,
        y + r,
        x - r,
        y + r,
        x + r,
        y - r
    )
}

/// A plot area's horizontal axis along its bottom edge: ticks, labels, grid lines up to `top`
/// and the axis' title.
pub(super) fn x_axis(svg: &mut Svg, ticks: &[(f64, String)], bottom: f64, top: f64, title: &str) {
    for (x, label) in ticks {
        svg.add(
            Mark::new("line")
                .px("x1", *x)
                .px("y1", top)
                .px("x2", *x)
                .px("y2", bottom + 4.0)
                .attr("stroke", "#ddd")
                .attr("class", "grid"),
        );
        svg.label(*x, bottom + 18.0, "middle", label);
    }
    let (first, last) = match (ticks.first(), ticks.last()) {
        (Some(first), Some(last)) => (first.0, last.0),
        _ => (0.0, 0.0),
    };
    svg.label((first + last) / 2.0, bottom + 36.0, "middle", title);
}

/// A plot area's vertical axis along its left edge: ticks, labels, grid lines across to `right`
/// and the axis' title, written upwards.
pub(super) fn y_axis(svg: &mut Svg, ticks: &[(f64, String)], left: f64, right: f64, title: &str) {
    for (y, label) in ticks {
        svg.add(
            Mark::new("line")
                .px("x1", left - 4.0)
                .px("y1", *y)
                .px("x2", right)
                .px("y2", *y)
                .attr("stroke", "#ddd")
                .attr("class", "grid"),
        );
        svg.label(left - 8.0, y + 4.0, "end", label);
    }
    let middle = match (ticks.first(), ticks.last()) {
        (Some(first), Some(last)) => (first.0 + last.0) / 2.0,
        _ => 0.0,
    };
    svg.add(
        Mark::new("text")
            .attr(
                "transform",
                format_args!("translate(14 {middle:.2}) rotate(-90)"),
            )
            .attr("text-anchor", "middle")
            .text(title),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_numbers_inside_the_axis() {
        assert_eq!(
            Axis::linear(0.0, 9.5, 0.0, 100.0).ticks(),
            vec![0.0, 2.0, 4.0, 6.0, 8.0]
        );
        assert_eq!(Axis::log(0.3, 4.0, 0.0, 100.0).ticks(), vec![0.5, 1.0, 2.0]);
        assert_eq!(
            Axis::log(0.3, 400.0, 0.0, 100.0).ticks(),
            vec![1.0, 10.0, 100.0]
        );
        assert_eq!(Axis::log(0.9, 2.4, 0.0, 100.0).ticks(), vec![1.0, 1.5, 2.0]);
        let one_value = Axis::linear(3.0, 3.0, 0.0, 100.0);
        assert!(one_value.ticks().len() >= 2, "{:?}", one_value.ticks());
    }

    #[test]
    fn values_outside_an_axis_are_drawn_at_its_ends() {
        let axis = Axis::log(1.0, 100.0, 200.0, 0.0);
        assert_eq!(axis.at(10.0), 100.0);
        assert_eq!(axis.at(0.0), 200.0);
        assert_eq!(axis.at(f64::NAN), 200.0);
        assert_eq!(axis.at(1e300), 0.0);
    }

    #[test]
    fn tick_labels_drop_trailing_zeros() {
        assert_eq!(tick_label(0.25), "0.25");
        assert_eq!(tick_label(1.5), "1.5");
        assert_eq!(tick_label(120.0), "120");
        assert_eq!(tick_label(0.0001), "1e-4");
    }

    #[test]
    fn text_that_could_break_the_markup_is_escaped() {
        let mut svg = Svg::new(10.0, 10.0, "test", "a \"test\"");
        svg.add(
            Mark::new("circle")
                .attr("data-reason", "x\" onload=\"alert(1)")
                .title("<script>alert(1)</script>\u{1b}"),
        );
        let text = svg.finish();
        assert!(!text.contains("<script"), "{text}");
        assert!(text.contains("data-reason=\"x&quot; onload=&quot;alert(1)\""));
        assert!(text.contains("&lt;script&gt;alert(1)&lt;/script&gt;\u{FFFD}"));
    }
}
