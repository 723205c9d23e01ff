//! Charts as inline SVG, drawn on the server (and identically in the browser): daily bars,
//! the budget burn-down with its forecast, and ranked horizontal bars. Pure functions from
//! numbers to markup, so they are tested without a browser.

use crate::i18n::{Language, breakdown_label, tr, trf};
use crate::model::{MonthBudget, ProjectCost, UsageBreakdownTop};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 180.0;
/// The narrowest left margin; a wider y-axis label widens it (see [`left_margin`]).
const LEFT: f64 = 40.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `1234567` → `1,234,567`.
pub fn group_digits(value: i64) -> String {
    let digits = value.unsigned_abs().to_string();
    let mut grouped = String::new();
    for (position, digit) in digits.chars().enumerate() {
        if position > 0 && (digits.len() - position).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if value < 0 {
        format!("-{grouped}")
    } else {
        grouped
    }
}

/// Width of one character of an 11px chart label, rounded up (digits and capitals of the
/// console's sans-serif are at most ~0.62 em): what keeps a label inside its chart.
const CHAR_WIDTH: f64 = 7.0;

/// How wide `text` is drawn in a chart's 11px labels, at most.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * CHAR_WIDTH
}

/// A left margin wide enough for the y-axis labels, drawn right-aligned 6 units left of the
/// axis, with 4 to spare.
fn left_margin(labels: &[&str]) -> f64 {
    labels
        .iter()
        .map(|label| text_width(label) + 10.0)
        .fold(LEFT, f64::max)
}

/// The decimals a currency's amounts are written with at least (ISO 4217 minor units).
pub fn minor_units(currency: &str) -> usize {
    match currency {
        "JPY" | "KRW" | "VND" | "CLP" | "ISK" | "PYG" | "UGX" | "XAF" | "XOF" => 0,
        "BHD" | "KWD" | "OMR" | "JOD" | "TND" | "LYD" | "IQD" => 3,
        _ => 2,
    }
}

/// Micros of a currency as `12.34 USD`: the currency's own decimals at least (`1,234 JPY`),
/// more only when the amount has them (`0.0015 EUR`, `0.000001 USD`), so small prices stay
/// visible and nothing is rounded away; thousands grouped.
pub fn money(micros: i64, currency: &str) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let whole = micros.unsigned_abs() / 1_000_000;
    let fraction = format!("{:06}", micros.unsigned_abs() % 1_000_000);
    money_parts(sign, &group_digits(whole as i64), &fraction, currency)
}

/// An exact decimal amount (`"0.00000006"`, as statements and prices carry them) written
/// like [`money`].
pub fn money_text(amount: &str, currency: &str) -> String {
    let (sign, amount) = match amount.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", amount),
    };
    let (whole, fraction) = amount.split_once('.').unwrap_or((amount, ""));
    let whole = whole
        .parse::<i64>()
        .map(group_digits)
        .unwrap_or_else(|_| whole.to_string());
    money_parts(sign, &whole, fraction, currency)
}

fn money_parts(sign: &str, whole: &str, fraction: &str, currency: &str) -> String {
    let minimum = minor_units(currency);
    let mut decimals = fraction.trim_end_matches('0').to_string();
    while decimals.len() < minimum {
        decimals.push('0');
    }
    let number = if decimals.is_empty() {
        whole.to_string()
    } else {
        format!("{whole}.{decimals}")
    };
    // Chinese writes the currency's sign before the amount (US$12.34, ¥12.34, €12.34), as
    // zh-CN number formatting does; a currency without a known sign keeps its code after.
    if Language::current() == Language::Chinese
        && let Some(symbol) = chinese_currency_sign(currency)
    {
        return format!("{sign}{symbol}{number}");
    }
    format!("{sign}{number} {currency}")
}

/// The sign zh-CN writes before an amount of `currency`.
fn chinese_currency_sign(currency: &str) -> Option<&'static str> {
    Some(match currency {
        "USD" => "US$",
        "CNY" => "¥",
        "EUR" => "€",
        "GBP" => "£",
        "JPY" => "JP¥",
        "HKD" => "HK$",
        _ => return None,
    })
}

/// A vertical bar per day. `labels` and `values` have the same length.
pub fn daily_bars(
    test_id: &str,
    caption: &str,
    labels: &[String],
    values: &[i64],
    color: &str,
    format_value: &dyn Fn(i64) -> String,
) -> String {
    let maximum = values.iter().copied().max().unwrap_or(0).max(1) as f64;
    let maximum_label = format_value(maximum as i64);
    let left = left_margin(&[&maximum_label]);
    let plot_width = WIDTH - left - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let slot = plot_width / labels.len().max(1) as f64;
    let bar_width = (slot * 0.7).max(1.0);
    let mut svg = format!(
        r#"<svg class="chart" data-testid="{id}" role="img" aria-label="{caption}" viewBox="0 0 {WIDTH} {HEIGHT}">"#,
        id = escape(test_id),
        caption = escape(caption),
    );
    svg.push_str(&axes(&maximum_label, left));
    for (index, (label, value)) in labels.iter().zip(values).enumerate() {
        let height = (*value as f64 / maximum) * plot_height;
        let x = left + index as f64 * slot + (slot - bar_width) / 2.0;
        let y = TOP + plot_height - height;
        svg.push_str(&format!(
            r#"<rect class="bar" data-day="{day}" data-value="{value}" x="{x:.1}" y="{y:.1}" width="{bar_width:.1}" height="{height:.1}" fill="{color}"><title>{day}: {shown}</title></rect>"#,
            day = escape(label),
            shown = escape(&format_value(*value)),
        ));
    }
    if let (Some(first), Some(last)) = (labels.first(), labels.last()) {
        svg.push_str(&format!(
            r#"<text class="tick" x="{left}" y="{y}">{first}</text><text class="tick" text-anchor="end" x="{x}" y="{y}">{last}</text>"#,
            y = HEIGHT - 8.0,
            x = WIDTH - RIGHT,
            first = escape(first),
            last = escape(last),
        ));
    }
    svg.push_str("</svg>");
    svg
}

/// The two axes from `left`, labelled with the top value and 0.
fn axes(maximum_label: &str, left: f64) -> String {
    format!(
        r#"<line class="axis" x1="{left}" y1="{TOP}" x2="{left}" y2="{bottom}" /><line class="axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" /><text class="tick" text-anchor="end" x="{label_x}" y="{label_y}">{maximum_label}</text><text class="tick" text-anchor="end" x="{label_x}" y="{bottom}">0</text>"#,
        bottom = HEIGHT - BOTTOM,
        right = WIDTH - RIGHT,
        label_x = left - 6.0,
        label_y = TOP + 10.0,
        maximum_label = escape(maximum_label),
    )
}

/// Cost to date per day of the month (solid), the forecast from today to the month's end
/// (dashed) and the budget (a horizontal line), on one scale.
pub fn burn_down(month: &MonthBudget, currency: &str) -> String {
    let days = month.days_in_month.max(1) as f64;
    let top_value = [
        month.budget_micros.unwrap_or(0),
        month.forecast_micros,
        month.spent_micros,
        month.cumulative_micros.iter().copied().max().unwrap_or(0),
    ]
    .into_iter()
    .max()
    .unwrap_or(0)
    .max(1) as f64
        * 1.1;
    let maximum_label = money(top_value as i64, currency);
    let left = left_margin(&[&maximum_label]);
    let plot_width = WIDTH - left - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let x_of = |day: f64| left + (day / days) * plot_width;
    let y_of = |micros: i64| TOP + plot_height - (micros as f64 / top_value) * plot_height;
    let mut svg = format!(
        r#"<svg class="chart" data-testid="chart-burn-down" role="img" aria-label="{caption}" viewBox="0 0 {WIDTH} {HEIGHT}">"#,
        caption = escape(tr("Cost this month against the budget")),
    );
    svg.push_str(&axes(&maximum_label, left));
    let mut points = format!("{:.1},{:.1}", x_of(0.0), y_of(0));
    for (index, cumulative) in month.cumulative_micros.iter().enumerate() {
        points.push_str(&format!(
            " {:.1},{:.1}",
            x_of(index as f64 + 1.0),
            y_of(*cumulative)
        ));
    }
    svg.push_str(&format!(
        r##"<polyline data-testid="burn-actual" data-points="{count}" points="{points}" fill="none" stroke="#2563eb" stroke-width="2" />"##,
        count = month.cumulative_micros.len(),
    ));
    svg.push_str(&format!(
        r##"<line data-testid="burn-forecast" data-value="{forecast}" x1="{x1:.1}" y1="{y1:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="#2563eb" stroke-width="2" stroke-dasharray="6 4" opacity="0.6"><title>{forecast_label}{shown}</title></line>"##,
        forecast = month.forecast_micros,
        x1 = x_of(f64::from(month.day_of_month)),
        y1 = y_of(month.spent_micros),
        x2 = x_of(days),
        y2 = y_of(month.forecast_micros),
        shown = escape(&money(month.forecast_micros, currency)),
        forecast_label = escape(tr("Forecast: ")),
    ));
    if let Some(budget) = month.budget_micros {
        svg.push_str(&format!(
            r##"<line data-testid="burn-budget" data-value="{budget}" x1="{left}" y1="{y:.1}" x2="{x2}" y2="{y:.1}" stroke="#dc2626" stroke-width="1.5"><title>{budget_label}{shown}</title></line><text class="tick" x="{label_x}" y="{label_y:.1}" fill="#dc2626">{budget_word}</text>"##,
            budget_label = escape(tr("Budget: ")),
            budget_word = escape(tr("budget")),
            y = y_of(budget),
            x2 = WIDTH - RIGHT,
            label_x = left + 4.0,
            label_y = y_of(budget) - 4.0,
            shown = escape(&money(budget, currency)),
        ));
    }
    svg.push_str(&format!(
        r#"<text class="tick" x="{left}" y="{y}">{first_day}</text><text class="tick" text-anchor="end" x="{x}" y="{y}">{last_day}</text></svg>"#,
        first_day = escape(&trf("day {}", &[&1])),
        last_day = escape(&trf("day {}", &[&month.days_in_month])),
        y = HEIGHT - 8.0,
        x = WIDTH - RIGHT,
    ));
    svg
}

/// One horizontal bar per project, longest first; `current` is drawn darker.
pub fn ranked_bars(projects: &[ProjectCost], currency: &str, current: &str) -> String {
    let bars: Vec<RankedBar> = projects
        .iter()
        .map(|project| RankedBar {
            key: ("project", &project.project_id),
            label: &project.name,
            value: project.cost_micros,
            emphasized: project.project_id == current,
        })
        .collect();
    ranked(
        "chart-top-projects",
        tr("Projects by cost this month"),
        &bars,
        currency,
    )
}

/// One horizontal bar per entry of a usage breakdown (keys, end-users, agents, channels),
/// in the order given (highest cost first).
pub fn breakdown_bars(breakdown: &UsageBreakdownTop, title: &str, currency: &str) -> String {
    let shown: Vec<String> = breakdown
        .entries
        .iter()
        .map(|entry| breakdown_label(&entry.label))
        .collect();
    let bars: Vec<RankedBar> = breakdown
        .entries
        .iter()
        .zip(&shown)
        .map(|(entry, shown)| RankedBar {
            key: ("entry", &entry.label),
            label: shown,
            value: entry.cost_micros,
            emphasized: false,
        })
        .collect();
    ranked(
        &format!("chart-by-{}", breakdown.by),
        title,
        &bars,
        currency,
    )
}

struct RankedBar<'a> {
    /// The `data-<name>` attribute that identifies the bar, and its value.
    key: (&'static str, &'a str),
    label: &'a str,
    value: i64,
    emphasized: bool,
}

fn ranked(test_id: &str, caption: &str, bars: &[RankedBar], currency: &str) -> String {
    let row_height = 26.0;
    let height = (bars.len().max(1) as f64) * row_height + 8.0;
    let label_width = 180.0;
    let maximum = bars.iter().map(|bar| bar.value).max().unwrap_or(0).max(1) as f64;
    // The longest amount, written after its bar, must still end inside the chart.
    let amount_room = bars
        .iter()
        .map(|bar| text_width(&money(bar.value, currency)))
        .fold(0.0, f64::max);
    let bar_room = (WIDTH - label_width - amount_room - 14.0).max(40.0);
    let mut svg = format!(
        r#"<svg class="chart" data-testid="{id}" role="img" aria-label="{caption}" viewBox="0 0 {WIDTH} {height}">"#,
        id = escape(test_id),
        caption = escape(caption),
    );
    for (index, bar) in bars.iter().enumerate() {
        let y = 4.0 + index as f64 * row_height;
        let width = (bar.value as f64 / maximum * bar_room).max(1.0);
        let color = if bar.emphasized { "#1d4ed8" } else { "#93c5fd" };
        // Long ids are cut for the label; the full id is in the bar's attribute and title.
        let shown: String = if bar.label.chars().count() > 24 {
            bar.label.chars().take(23).chain(['…']).collect()
        } else {
            bar.label.to_string()
        };
        svg.push_str(&format!(
            r#"<text class="label" x="{label_x}" y="{text_y:.1}" text-anchor="end" translate="no">{name}</text><rect class="bar" data-{attribute}="{id}" data-value="{value}" x="{label_width}" y="{y:.1}" width="{width:.1}" height="18" fill="{color}"><title translate="no">{full}: {amount}</title></rect><text class="tick" x="{amount_x:.1}" y="{text_y:.1}">{amount}</text>"#,
            label_x = label_width - 8.0,
            text_y = y + 13.0,
            name = escape(&shown),
            attribute = bar.key.0,
            id = escape(bar.key.1),
            full = escape(bar.label),
            value = bar.value,
            amount_x = label_width + width + 6.0,
            amount = escape(&money(bar.value, currency)),
        ));
    }
    svg.push_str("</svg>");
    svg
}

/// One line per series over shared x labels (gaps where a value is missing), with a legend;
/// points whose index is in `marked` get a red ring (a flagged regression, say).
/// `axis_top`: the value the y-axis ends at, for measures with a fixed range (a score on
/// 0–1, a share on 0–100 %); `None` scales to the largest value.
pub fn line_chart(
    test_id: &str,
    caption: &str,
    labels: &[String],
    series: &[(&str, &str, Vec<Option<f64>>)],
    format_value: &dyn Fn(f64) -> String,
    marked: &[usize],
    axis_top: Option<f64>,
) -> String {
    let largest = series
        .iter()
        .flat_map(|(_, _, values)| values.iter().flatten().copied())
        .fold(0.0_f64, f64::max);
    let maximum = axis_top
        .map_or(largest, |top| top.max(largest))
        .max(f64::MIN_POSITIVE);
    let maximum_label = format_value(maximum);
    let left = left_margin(&[&maximum_label]);
    let plot_width = WIDTH - left - RIGHT;
    let plot_height = HEIGHT - TOP - BOTTOM;
    let step = if labels.len() > 1 {
        plot_width / (labels.len() - 1) as f64
    } else {
        0.0
    };
    let x_of = |index: usize| {
        if labels.len() > 1 {
            left + index as f64 * step
        } else {
            left + plot_width / 2.0
        }
    };
    let y_of = |value: f64| TOP + plot_height - (value / maximum) * plot_height;
    let mut svg = format!(
        r#"<svg class="chart" data-testid="{id}" role="img" aria-label="{caption}" viewBox="0 0 {WIDTH} {HEIGHT}">"#,
        id = escape(test_id),
        caption = escape(caption),
    );
    svg.push_str(&axes(&maximum_label, left));
    for (series_index, (name, color, values)) in series.iter().enumerate() {
        // Consecutive known values form one polyline; a gap starts the next.
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for (index, value) in values.iter().enumerate() {
            match value {
                Some(value) => {
                    if let Some(segment) = segments.last_mut() {
                        segment.push((x_of(index), y_of(*value)));
                    }
                }
                None => segments.push(Vec::new()),
            }
        }
        let known = values.iter().flatten().count();
        for segment in segments.iter().filter(|segment| !segment.is_empty()) {
            let points: Vec<String> = segment
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            svg.push_str(&format!(
                r#"<polyline class="series" data-series="{name}" data-points="{known}" points="{points}" fill="none" stroke="{color}" stroke-width="2" />"#,
                name = escape(name),
                points = points.join(" "),
            ));
        }
        for (index, value) in values.iter().enumerate() {
            if let Some(value) = value {
                let label = labels.get(index).map(String::as_str).unwrap_or_default();
                svg.push_str(&format!(
                    r#"<circle class="point" data-series="{name}" data-label="{label}" data-value="{value}" cx="{x:.1}" cy="{y:.1}" r="3" fill="{color}"><title>{label} · {name}: {shown}</title></circle>"#,
                    name = escape(name),
                    label = escape(label),
                    x = x_of(index),
                    y = y_of(*value),
                    shown = escape(&format_value(*value)),
                ));
            }
        }
        svg.push_str(&format!(
            r#"<text class="legend" x="{x:.1}" y="{y}" fill="{color}">{name}</text>"#,
            x = left + 8.0 + series_index as f64 * 90.0,
            y = TOP + 10.0,
            name = escape(name),
        ));
    }
    for index in marked {
        if let Some((_, _, values)) = series.first()
            && let Some(Some(value)) = values.get(*index)
        {
            svg.push_str(&format!(
                r##"<circle class="marked" data-testid="{id}-marked" cx="{x:.1}" cy="{y:.1}" r="7" fill="none" stroke="#dc2626" stroke-width="2"><title>{regression}</title></circle>"##,
                id = escape(test_id),
                regression = escape(tr("regression")),
                x = x_of(*index),
                y = y_of(*value),
            ));
        }
    }
    if let (Some(first), Some(last)) = (labels.first(), labels.last()) {
        svg.push_str(&format!(
            r#"<text class="tick" x="{left}" y="{y}">{first}</text><text class="tick" text-anchor="end" x="{x}" y="{y}">{last}</text>"#,
            y = HEIGHT - 8.0,
            x = WIDTH - RIGHT,
            first = escape(first),
            last = escape(last),
        ));
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped_and_money_keeps_small_prices_visible() {
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(group_digits(999), "999");
        assert_eq!(money(12_340_000, "USD"), "12.34 USD");
        assert_eq!(money(1_500, "EUR"), "0.0015 EUR");
        assert_eq!(money(50_000, "USD"), "0.05 USD");
        assert_eq!(money(1_234_000_000, "USD"), "1,234.00 USD");
        assert_eq!(money(-2_500_000, "USD"), "-2.50 USD");
    }

    #[test]
    fn daily_bars_draw_one_bar_per_day_scaled_to_the_largest() {
        let labels = vec!["2026-11-01".to_string(), "2026-11-02".to_string()];
        let svg = daily_bars("chart-x", "x", &labels, &[5, 10], "#000", &|v| {
            v.to_string()
        });
        assert_eq!(svg.matches("<rect class=\"bar\"").count(), 2);
        assert!(svg.contains(r#"data-value="10" x="#));
        assert!(svg.contains(&format!("height=\"{:.1}\"", HEIGHT - TOP - BOTTOM)));
    }

    #[test]
    fn the_burn_down_shows_budget_forecast_and_one_point_per_elapsed_day() {
        let month = MonthBudget {
            month: "2026-11".to_string(),
            days_in_month: 30,
            day_of_month: 3,
            cumulative_micros: vec![100, 250, 300],
            spent_micros: 300,
            forecast_micros: 3_000,
            budget_micros: Some(2_000),
            ..MonthBudget::default()
        };
        let svg = burn_down(&month, "USD");
        assert!(svg.contains(r#"data-testid="burn-actual" data-points="3""#));
        assert!(svg.contains(r#"data-testid="burn-budget" data-value="2000""#));
        assert!(svg.contains(r#"data-testid="burn-forecast" data-value="3000""#));
    }

    #[test]
    fn line_charts_break_at_gaps_and_mark_points() {
        let labels: Vec<String> = ["a", "b", "c", "d"].iter().map(|l| l.to_string()).collect();
        let svg = line_chart(
            "chart-latency",
            "latency",
            &labels,
            &[("p50", "#000", vec![Some(1.0), Some(2.0), None, Some(4.0)])],
            &|value| format!("{value:.0} ms"),
            &[3],
            None,
        );
        assert_eq!(svg.matches("<polyline").count(), 2, "a gap splits the line");
        assert_eq!(svg.matches(r#"<circle class="point""#).count(), 3);
        assert_eq!(svg.matches("chart-latency-marked").count(), 1);
        assert!(svg.contains(r#"data-value="4""#));
    }

    #[test]
    fn amounts_keep_the_currencys_decimals_and_every_digit_they_have() {
        assert_eq!(money(1, "USD"), "0.000001 USD");
        assert_eq!(money(1_234_000_000, "JPY"), "1,234 JPY");
        assert_eq!(money(1_500_000, "KWD"), "1.500 KWD");
        assert_eq!(money_text("0.00000006", "USD"), "0.00000006 USD");
        assert_eq!(money_text("1234567.50", "EUR"), "1,234,567.50 EUR");
    }

    /// Every label's box, at the widest a character is drawn, lies inside the chart.
    #[test]
    fn a_long_axis_label_widens_the_margin_instead_of_leaving_the_chart() {
        let labels = vec!["2026-11-01".to_string(), "2026-11-02".to_string()];
        let svg = daily_bars("chart-x", "x", &labels, &[1, 3], "#000", &|v| {
            money(v, "USD")
        });
        let left = left_margin(&["0.000003 USD"]);
        assert!(left - 6.0 - text_width("0.000003 USD") >= 0.0);
        assert!(svg.contains(&format!(r#"x1="{left}""#)), "{svg}");
    }

    #[test]
    fn scores_are_drawn_on_their_whole_range() {
        let labels: Vec<String> = ["a", "b"].iter().map(|l| l.to_string()).collect();
        let svg = line_chart(
            "chart-eval",
            "eval",
            &labels,
            &[("hit", "#000", vec![Some(0.25), Some(0.5)])],
            &|value| format!("{value:.2}"),
            &[],
            Some(1.0),
        );
        assert!(svg.contains(">1.00</text>"), "the axis ends at 1: {svg}");
        let plot_height = HEIGHT - TOP - BOTTOM;
        let y_half = TOP + plot_height - 0.5 * plot_height;
        assert!(svg.contains(r#"data-value="0.5" cx="#));
        assert!(
            svg.contains(&format!("cy=\"{y_half:.1}\"")),
            "0.5 is half-way up: {svg}"
        );
    }

    #[test]
    fn names_are_escaped() {
        let projects = vec![ProjectCost {
            project_id: "p".to_string(),
            name: "<script>".to_string(),
            cost_micros: 1,
        }];
        assert!(ranked_bars(&projects, "USD", "p").contains("&lt;script&gt;"));
    }
}
