//! A moment as people read it: rendered in UTC with its zone (and its date unless it is today's),
//! then, once the page runs in the browser, in the browser's local time, with UTC on hover.

use crate::{calendar, workloads::sentences::moment};
use leptos::prelude::*;

/// `14:02:05 UTC+01:00` (or with its date, `2026-12-04 14:02:05 UTC+01:00`) in a zone
/// `offset_min` minutes east of UTC; `UTC` itself when the offset is 0.
pub fn local_moment(epoch_s: i64, now: i64, offset_min: i64) -> String {
    if offset_min == 0 {
        return moment(epoch_s, now);
    }
    let shift = offset_min * 60;
    let (sign, abs) = if offset_min < 0 {
        ('-', -offset_min)
    } else {
        ('+', offset_min)
    };
    let zone = format!("UTC{sign}{:02}:{:02}", abs / 60, abs % 60);
    let local = epoch_s + shift;
    let time = calendar::clock(local);
    if calendar::same_day(local, now + shift) {
        format!("{time} {zone}")
    } else {
        format!("{} {time} {zone}", calendar::format_date(local))
    }
}

/// The browser's offset east of UTC at `epoch_s`, in minutes (0 while rendering on the server).
fn browser_offset_min(_epoch_s: i64) -> i64 {
    #[cfg(feature = "hydrate")]
    {
        let date = web_sys::js_sys::Date::new(&(_epoch_s as f64 * 1000.0).into());
        -(date.get_timezone_offset() as i64)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        0
    }
}

#[component]
pub fn Moment(at: i64, now: i64) -> impl IntoView {
    let text = RwSignal::new(moment(at, now));
    // After hydration (the first render matches the server's), the browser's own zone.
    Effect::new(move || text.set(local_moment(at, now, browser_offset_min(at))));
    view! {
        <time datetime=calendar::iso(at) title=format!("{} {} UTC", calendar::format_date(at), calendar::clock(at))>
            {move || text.get()}
        </time>
    }
}

#[cfg(test)]
mod tests {
    use super::local_moment;

    #[test]
    fn a_moment_in_the_browsers_zone_names_the_zone_and_its_own_date() {
        let now = 1_796_083_199; // 2026-11-30 23:59:59 UTC
        assert_eq!(local_moment(now, now, 0), "23:59:59 UTC");
        assert_eq!(local_moment(now, now, 60), "00:59:59 UTC+01:00");
        // An hour earlier is yesterday there.
        assert_eq!(
            local_moment(now - 3600, now, 60),
            "2026-11-30 23:59:59 UTC+01:00"
        );
        assert_eq!(
            local_moment(now - 86_400, now, -330),
            "2026-11-29 18:29:59 UTC-05:30"
        );
    }
}
