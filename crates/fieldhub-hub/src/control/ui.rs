//! The web monitor's page and scripts, served at `/ui` from the hub's own
//! HTTP port.
//!
//! Every file is built into the binary (`include_str!` of
//! `crates/fieldhub-hub/ui/`): no CDN, no build step, the page works offline.
//! They are plain JavaScript modules that talk to the control API
//! (`/api/v1/...`) and the monitor's WebSocket (`/api/v1/monitor`). The
//! files hold no bus data, so they are served without the token; the page
//! takes the token from `/ui?token=…` and sends it with every request.

use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

/// (file name, content type, content) of every asset.
const ASSETS: &[(&str, &str, &str)] = &[
    ("index.html", "text/html; charset=utf-8", include_str!("../../ui/index.html")),
    ("style.css", "text/css; charset=utf-8", include_str!("../../ui/style.css")),
    ("app.js", "text/javascript; charset=utf-8", include_str!("../../ui/app.js")),
    ("api.js", "text/javascript; charset=utf-8", include_str!("../../ui/api.js")),
    ("trace.js", "text/javascript; charset=utf-8", include_str!("../../ui/trace.js")),
    ("overwrite.js", "text/javascript; charset=utf-8", include_str!("../../ui/overwrite.js")),
    ("wiring.js", "text/javascript; charset=utf-8", include_str!("../../ui/wiring.js")),
    ("load.js", "text/javascript; charset=utf-8", include_str!("../../ui/load.js")),
    ("send.js", "text/javascript; charset=utf-8", include_str!("../../ui/send.js")),
    ("signals.js", "text/javascript; charset=utf-8", include_str!("../../ui/signals.js")),
    ("sort.js", "text/javascript; charset=utf-8", include_str!("../../ui/sort.js")),
    ("plot.js", "text/javascript; charset=utf-8", include_str!("../../ui/plot.js")),
    ("recording.js", "text/javascript; charset=utf-8", include_str!("../../ui/recording.js")),
    ("time.js", "text/javascript; charset=utf-8", include_str!("../../ui/time.js")),
    ("federation.js", "text/javascript; charset=utf-8", include_str!("../../ui/federation.js")),
    ("rbs.js", "text/javascript; charset=utf-8", include_str!("../../ui/rbs.js")),
    // uPlot (https://github.com/leeoniya/uPlot, MIT), vendored as its npm
    // package's dist files: the version is in the names.
    ("uplot-1.6.32.min.js", "text/javascript; charset=utf-8", include_str!("../../ui/uplot-1.6.32.min.js")),
    ("uplot-1.6.32.min.css", "text/css; charset=utf-8", include_str!("../../ui/uplot-1.6.32.min.css")),
    ("uplot-1.6.32.LICENSE", "text/plain; charset=utf-8", include_str!("../../ui/uplot-1.6.32.LICENSE")),
];

/// The routes of the page, merged into the API's router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/ui", get(|| async { asset("index.html") }))
        // Relative script paths resolve under `/ui/`.
        .route("/ui/", get(|| async { Redirect::permanent("/ui") }))
        .route("/ui/{file}", get(|Path(file): Path<String>| async move { asset(&file) }))
}

fn asset(name: &str) -> Response {
    match ASSETS.iter().find(|(file, _, _)| *file == name) {
        Some((_, content_type, body)) => {
            ([("content-type", *content_type), ("cache-control", "no-cache")], *body).into_response()
        }
        None => (StatusCode::NOT_FOUND, format!("the monitor has no file '{name}'")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_page_imports_is_served() {
        for (name, _, body) in ASSETS {
            for line in body.lines().filter(|l| l.trim_start().starts_with("import ")) {
                let Some(start) = line.find("'./") else { continue };
                let file = &line[start + 3..];
                let file = &file[..file.find('\'').unwrap_or(file.len())];
                assert!(ASSETS.iter().any(|(n, _, _)| *n == file), "{name} imports {file}, which is not served");
            }
        }
        let index = ASSETS[0].2;
        assert!(index.contains("src=\"/ui/app.js\""), "the page loads its entry module");
        assert!(!index.contains("http://") && !index.contains("https://"), "no CDN");
    }
}
