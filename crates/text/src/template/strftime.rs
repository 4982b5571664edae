//! `strftime_now` for templates (Llama 3.x prints today's date). UTC; the common directives.

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];

pub fn format_utc_now(format: &str) -> String {
    format_unix(format, shardgate_util::time::unix_time_s() as i64)
}

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn format_unix(format: &str, t: i64) -> String {
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&format!("{day:02}")),
            Some('-') => match chars.next() {
                Some('d') => out.push_str(&day.to_string()),
                Some('m') => out.push_str(&month.to_string()),
                Some(o) => {
                    out.push_str("%-");
                    out.push(o);
                }
                None => out.push_str("%-"),
            },
            Some('m') => out.push_str(&format!("{month:02}")),
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&format!("{:02}", year.rem_euclid(100))),
            Some('b') => out.push_str(&MONTHS[month as usize - 1][..3]),
            Some('B') => out.push_str(MONTHS[month as usize - 1]),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('H') => out.push_str(&format!("{:02}", secs / 3600)),
            Some('M') => out.push_str(&format!("{:02}", secs % 3600 / 60)),
            Some('S') => out.push_str(&format!("{:02}", secs % 60)),
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        // 2024-07-26 12:34:56 UTC was a Friday.
        let t = 1_721_997_296;
        assert_eq!(format_unix("%d %b %Y", t), "26 Jul 2024");
        assert_eq!(format_unix("%Y-%m-%d %H:%M:%S %A %B %-d %y %%", t), "2024-07-26 12:34:56 Friday July 26 24 %");
        assert_eq!(format_unix("%d %b %Y", 0), "01 Jan 1970");
        assert_eq!(format_unix("%a", 951_782_400), "Tue"); // 2000-02-29
    }
}
