//! SVG plots of a run, written by hand (no plotting dependency): latency CDFs, TTFT and
//! inter-chunk gaps over time, and throughput over time. Scatter plots keep at most
//! `DOTS_MAX` points (every n-th) so a 100k-request run still opens in a browser.

use std::fmt::Write as _;

use super::analysis::Analysis;
use super::metrics::RequestMetrics;
use super::record::RequestRecord;
use super::window::Bucket;

const PANEL_WIDTH: f64 = 860.0;
const PANEL_HEIGHT: f64 = 320.0;
const MARGIN_LEFT: f64 = 72.0;
const MARGIN_RIGHT: f64 = 24.0;
const MARGIN_TOP: f64 = 32.0;
const MARGIN_BOTTOM: f64 = 46.0;
const DOTS_MAX: usize = 20_000;
const CDF_POINTS: usize = 400;
/// Log axes cannot show 0: smaller values are drawn here (1 µs).
const LOG_FLOOR_MS: f64 = 1e-3;
const COLORS: [&str; 5] = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd"];

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dots: bool,
}

pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub series: Vec<Series>,
}

/// Panels stacked vertically in one SVG document.
pub fn svg(panels: &[Panel]) -> String {
    let height = PANEL_HEIGHT * panels.len() as f64;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{PANEL_WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    out.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, p) in panels.iter().enumerate() {
        let _ = write!(out, r#"<g transform="translate(0,{})">"#, i as f64 * PANEL_HEIGHT);
        panel(&mut out, p);
        out.push_str("</g>");
    }
    out.push_str("</svg>\n");
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// About six round ticks covering [lo, hi].
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / 6.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step =
        [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| span / s <= 7.0).unwrap_or(10.0 * magnitude);
    let first = (lo / step).ceil() as i64;
    // The epsilon keeps a tick that lands on `hi` despite rounding (0.7 / 0.1 = 6.999...).
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

fn label_of(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e5 || v.abs() < 1e-2) {
        format!("{v:.0e}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A panel's data ranges and the mapping from data to pixels.
struct Frame {
    log_x: bool,
    x_lo: f64,
    x_hi: f64,
    y_hi: f64,
    plot_w: f64,
    plot_h: f64,
}

impl Frame {
    fn of(p: &Panel) -> Frame {
        let tx = |x: f64| if p.log_x { x.max(LOG_FLOOR_MS).log10() } else { x };
        let (mut x_lo, mut x_hi, mut y_hi) = (f64::INFINITY, f64::NEG_INFINITY, 0f64);
        for &(x, y) in p.series.iter().flat_map(|s| s.points.iter()) {
            x_lo = x_lo.min(tx(x));
            x_hi = x_hi.max(tx(x));
            y_hi = y_hi.max(y);
        }
        if !x_lo.is_finite() {
            (x_lo, x_hi) = (0.0, 1.0);
        }
        if p.log_x {
            (x_lo, x_hi) = (x_lo.floor(), x_hi.ceil().max(x_lo.floor() + 1.0));
        } else {
            // Time axes start at the run's origin.
            x_lo = x_lo.min(0.0);
            x_hi = x_hi.max(x_lo + 1.0);
        }
        Frame {
            log_x: p.log_x,
            x_lo,
            x_hi,
            y_hi: if y_hi > 0.0 { y_hi * 1.05 } else { 1.0 },
            plot_w: PANEL_WIDTH - MARGIN_LEFT - MARGIN_RIGHT,
            plot_h: PANEL_HEIGHT - MARGIN_TOP - MARGIN_BOTTOM,
        }
    }

    fn sx(&self, x: f64) -> f64 {
        let x = if self.log_x { x.max(LOG_FLOOR_MS).log10() } else { x };
        MARGIN_LEFT + (x - self.x_lo) / (self.x_hi - self.x_lo) * self.plot_w
    }

    fn sy(&self, y: f64) -> f64 {
        MARGIN_TOP + self.plot_h - y / self.y_hi * self.plot_h
    }

    fn x_ticks(&self) -> Vec<f64> {
        if self.log_x {
            (self.x_lo as i64..=self.x_hi as i64).map(|e| 10f64.powi(e as i32)).collect()
        } else {
            ticks(self.x_lo, self.x_hi)
        }
    }
}

fn panel(out: &mut String, p: &Panel) {
    let f = Frame::of(p);
    axes(out, p, &f);
    for (i, s) in p.series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        if s.dots {
            for &(x, y) in &s.points {
                let _ = write!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="{color}" fill-opacity="0.45"/>"#,
                    f.sx(x),
                    f.sy(y)
                );
            }
        } else if !s.points.is_empty() {
            let _ = write!(out, r#"<polyline fill="none" stroke="{color}" stroke-width="1.6" points=""#);
            for &(x, y) in &s.points {
                let _ = write!(out, "{:.1},{:.1} ", f.sx(x), f.sy(y));
            }
            out.push_str(r#""/>"#);
        }
        // Legend bottom right: CDFs end top right, and time series rarely sit there.
        let ly = MARGIN_TOP + f.plot_h - 10.0 - 16.0 * (p.series.len() - 1 - i) as f64;
        let lx = MARGIN_LEFT + f.plot_w - 190.0;
        let _ = write!(
            out,
            r#"<rect x="{lx:.1}" y="{:.1}" width="12" height="4" fill="{color}"/><text x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 6.0,
            lx + 18.0,
            escape(&s.name)
        );
    }
}

/// Title, frame, grid, tick labels and axis labels.
fn axes(out: &mut String, p: &Panel, f: &Frame) {
    let (plot_w, plot_h) = (f.plot_w, f.plot_h);
    let _ = write!(
        out,
        r##"<text x="{MARGIN_LEFT}" y="20" font-size="14" font-weight="bold">{}</text><rect x="{MARGIN_LEFT}" y="{MARGIN_TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>"##,
        escape(&p.title)
    );
    for x in f.x_ticks() {
        let px = f.sx(x);
        let _ = write!(
            out,
            r##"<line x1="{px:.1}" y1="{MARGIN_TOP}" x2="{px:.1}" y2="{:.1}" stroke="#eee"/><text x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            MARGIN_TOP + plot_h,
            MARGIN_TOP + plot_h + 16.0,
            label_of(x)
        );
    }
    for y in ticks(0.0, f.y_hi) {
        let py = f.sy(y);
        let _ = write!(
            out,
            r##"<line x1="{MARGIN_LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            MARGIN_LEFT + plot_w,
            MARGIN_LEFT - 6.0,
            py + 4.0,
            label_of(y)
        );
    }
    let _ = write!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(16,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        MARGIN_LEFT + plot_w / 2.0,
        PANEL_HEIGHT - 10.0,
        escape(&p.x_label),
        MARGIN_TOP + plot_h / 2.0,
        escape(&p.y_label)
    );
}

/// Empirical CDF of `values` (ms) as about `CDF_POINTS` points.
fn cdf(name: &str, mut values: Vec<f64>) -> Series {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let points = if n == 0 {
        Vec::new()
    } else {
        (0..=CDF_POINTS)
            .map(|k| {
                let i = (k * (n - 1)) / CDF_POINTS;
                (values[i], (i + 1) as f64 / n as f64)
            })
            .collect()
    };
    Series { name: name.into(), points, dots: false }
}

fn thin(points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let stride = points.len().div_ceil(DOTS_MAX).max(1);
    points.into_iter().step_by(stride).collect()
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn s(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn over_time(title: &str, y_label: &str, series: Vec<Series>) -> Panel {
    Panel { title: title.into(), x_label: "seconds since start".into(), y_label: y_label.into(), log_x: false, series }
}

fn dots(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series { name: name.into(), points: thin(points), dots: true }
}

/// (file stem suffix, SVG) for every plot of a run.
pub fn run_plots(records: &[RequestRecord], a: &Analysis) -> Vec<(&'static str, String)> {
    let ok: Vec<(&RequestRecord, &RequestMetrics)> =
        records.iter().zip(&a.metrics).filter_map(|(r, m)| m.as_ref().map(|m| (r, m))).collect();
    let gaps: Vec<(f64, f64)> = ok
        .iter()
        .flat_map(|(r, _)| r.chunks.windows(2).map(|w| (s(w[1].time_ns), ms(w[1].time_ns - w[0].time_ns))))
        .collect();
    let cdfs = Panel {
        title: "Latency CDFs (log scale; values under 1 us drawn at 1 us)".into(),
        x_label: "milliseconds".into(),
        y_label: "fraction of samples".into(),
        log_x: true,
        series: vec![
            cdf("TTFT", ok.iter().map(|(_, m)| ms(m.ttft_ns)).collect()),
            cdf("E2EL", ok.iter().map(|(_, m)| ms(m.e2el_ns)).collect()),
            cdf("TPOT", ok.iter().filter_map(|(_, m)| m.tpot_ns.map(|t| t / 1e6)).collect()),
            cdf("ITL (per chunk)", gaps.iter().map(|g| g.1).collect()),
        ],
    };
    let mut ttft = vec![dots("TTFT (from send)", ok.iter().map(|(r, m)| (s(r.send_ns), ms(m.ttft_ns))).collect())];
    // Queueing shows only against the schedule of a paced run.
    if a.pacing.offered_rate_per_s.is_some() && ok.iter().any(|(_, m)| m.client_queue_time_ns > 100_000) {
        let points = ok.iter().map(|(r, m)| (s(r.scheduled_ns), ms(m.ttft_from_schedule_ns))).collect();
        ttft.push(dots("TTFT from schedule", points));
    }
    vec![
        ("latency_cdf", svg(&[cdfs])),
        ("ttft_over_time", svg(&[over_time("TTFT by send time", "ms", ttft)])),
        (
            "itl_over_time",
            svg(&[over_time("Inter-chunk gaps by arrival time", "ms", vec![dots("gap before chunk", gaps)])]),
        ),
        ("throughput_over_time", throughput_svg(&a.buckets)),
    ]
}

/// Output tokens and requests per second, each second's value held across that second.
fn throughput_svg(buckets: &[Bucket]) -> String {
    let per_s = |f: fn(&Bucket) -> u64| -> Vec<(f64, f64)> {
        buckets.iter().enumerate().flat_map(|(i, b)| [(i as f64, f(b) as f64), (i as f64 + 1.0, f(b) as f64)]).collect()
    };
    let line = |name: &str, points| Series { name: name.into(), points, dots: false };
    svg(&[
        over_time("Output tokens per second", "tokens/s", vec![line("output tokens", per_s(|b| b.output_tokens))]),
        over_time(
            "Requests per second",
            "requests/s",
            vec![
                line("sent", per_s(|b| b.sent)),
                line("completed", per_s(|b| b.completed)),
                line("failed", per_s(|b| b.failed)),
            ],
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(0.0, 0.7);
        assert_eq!(t.len(), 8);
        assert!((t[7] - 0.7).abs() < 1e-9);
        assert_eq!(ticks(0.0, 3000.0).len(), 7);
    }

    #[test]
    fn svg_is_well_formed_and_escaped() {
        let p = Panel {
            title: "a < b & c".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: true,
            series: vec![
                cdf("v", vec![0.0, 0.5, 2.0, 40.0]),
                Series { name: "d".into(), points: vec![(1.0, 1.0)], dots: true },
            ],
        };
        let doc = svg(&[p]);
        assert!(doc.starts_with("<svg") && doc.ends_with("</svg>\n"));
        assert!(doc.contains("a &lt; b &amp; c"));
        assert_eq!(doc.matches("<polyline").count(), 1);
        assert_eq!(doc.matches("<circle").count(), 1);
        assert!(!doc.contains("NaN") && !doc.contains("inf"));
    }
}
