//! The built site (`cargo leptos build`): which files the pages ask for, and how they are served.
//!
//! The build names the JS, wasm and CSS after their content (`hash-files`) and writes the names in
//! `hash.txt`, which `scripts/lib.sh` puts in the site root. Files whose name carries a hash never
//! change under that name, so browsers keep them for a year without asking again; the pages
//! themselves are asked for every time (`no-cache`). A release build also writes each file
//! brotli- and gzip-compressed beside it (`--precompress`): those are sent as they are to browsers
//! that accept them, so nothing is compressed per request but the pages and API answers.

use crate::ServerError;
use axum::{
    extract::Request,
    http::{header, HeaderValue, StatusCode},
    middleware::{self, Next},
    response::Response,
    Router,
};
use leptos::config::{Env, LeptosOptions};
use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
};
use tower_http::services::ServeDir;

/// The name cargo-leptos gives the site's JS, wasm and CSS files (`[[workspace.metadata.leptos]] name`).
pub const OUTPUT_NAME: &str = "hourglass";

/// The file listing the content-hashed names, in the site root.
pub const HASH_FILE: &str = "hash.txt";

/// Kept a year and never revalidated: the name changes when the content does.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Asked for on every visit (pages carry the signed-in person's data and the current file names).
const PAGE: &str = "no-cache, private";
/// The favicon has a fixed name; a day is long enough not to matter and short enough to change.
const FAVICON: &str = "public, max-age=86400";

/// The Leptos options for a site root: hashed names when the build left a `hash.txt` there.
pub fn leptos_options(site_root: &Path, addr: SocketAddr) -> Result<LeptosOptions, ServerError> {
    let root = site_root.to_str().ok_or_else(|| {
        ServerError::Config(format!(
            "the site root {} is not valid UTF-8",
            site_root.display()
        ))
    })?;
    let hash_file = hash_file(site_root);
    // Leptos looks for the hash file beside the executable; an absolute path replaces that.
    let hash_file_name = hash_file
        .as_deref()
        .and_then(Path::to_str)
        .unwrap_or(HASH_FILE)
        .to_string();
    Ok(LeptosOptions::builder()
        .output_name(OUTPUT_NAME)
        .site_root(root)
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .env(Env::PROD)
        .hash_files(hash_file.is_some())
        .hash_file(std::sync::Arc::<str>::from(hash_file_name))
        .build())
}

/// The site root's hash file, as an absolute path, when it has one.
fn hash_file(site_root: &Path) -> Option<PathBuf> {
    let file = site_root.join(HASH_FILE);
    if !file.is_file() {
        return None;
    }
    std::path::absolute(&file).ok()
}

/// The files a page loads (`pkg/…`), under the names the build gave them.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub js: String,
    pub wasm: String,
    pub css: String,
}

impl Bundle {
    /// Reads the names from the site root's `hash.txt` (`js: <hash>` lines), or the plain names
    /// when the build did not hash them.
    pub fn read(site_root: &Path) -> Result<Bundle, ServerError> {
        let Some(file) = hash_file(site_root) else {
            return Ok(Bundle::named(None, None, None));
        };
        let text = std::fs::read_to_string(&file).map_err(|error| {
            ServerError::Config(format!("cannot read {}: {error}", file.display()))
        })?;
        let hash = |kind: &str| {
            text.lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(name, _)| name.trim() == kind)
                .map(|(_, hash)| hash.trim().to_string())
        };
        match (hash("js"), hash("wasm"), hash("css")) {
            (Some(js), Some(wasm), Some(css)) => Ok(Bundle::named(Some(js), Some(wasm), Some(css))),
            _ => Err(ServerError::Config(format!(
                "{} should name the js, wasm and css files (`js: <hash>` lines); rebuild the site",
                file.display()
            ))),
        }
    }

    fn named(js: Option<String>, wasm: Option<String>, css: Option<String>) -> Bundle {
        let name = |hash: Option<String>, ext: &str| match hash {
            Some(hash) => format!("{OUTPUT_NAME}.{hash}.{ext}"),
            None => format!("{OUTPUT_NAME}.{ext}"),
        };
        Bundle {
            js: name(js, "js"),
            wasm: name(wasm, "wasm"),
            css: name(css, "css"),
        }
    }

    /// Without the built JS and wasm the pages would still answer 200 but never come alive; say so.
    pub fn check(&self, site_root: &Path) -> Result<(), ServerError> {
        for name in [&self.js, &self.wasm, &self.css] {
            let file = site_root.join("pkg").join(name);
            if !file.is_file() {
                // A build with `hash-files` names its files by content and lists the names in
                // the hash.txt it writes beside the binary; without that list here, the plain
                // names are looked for and not found.
                let hint = if hash_file(site_root).is_none() {
                    format!(
                        " (if the build named its files by content, copy the {HASH_FILE} it wrote \
                         beside the binary into the site root, as scripts/lib.sh does)"
                    )
                } else {
                    String::new()
                };
                return Err(ServerError::Config(format!(
                    "the site root {} has no built {}; build the site with `cargo leptos build --split` \
                     (or run scripts/run.sh) and point HOURGLASS_SITE_ROOT / --site-root at its folder{hint}",
                    site_root.display(),
                    file.display()
                )));
            }
        }
        Ok(())
    }
}

/// The site's files: `pkg/` (the build's output) and `assets/` (vendored, named by version), each
/// precompressed where the build compressed it, and the favicon.
pub fn files<S: Clone + Send + Sync + 'static>(site_root: &Path) -> Router<S> {
    let dir = |name: &str| {
        ServeDir::new(site_root.join(name))
            .precompressed_br()
            .precompressed_gzip()
    };
    Router::new()
        .nest_service("/pkg", dir("pkg"))
        .nest_service("/assets", dir("assets"))
        // A directory service for the one file: `ServeFile` would ignore the precompressed copies.
        .route_service("/favicon.ico", dir(""))
        .layer(middleware::from_fn(cache_files))
}

/// How long a browser may keep a file, by its path.
fn file_cache(path: &str) -> &'static str {
    let name = path.rsplit('/').next().unwrap_or("");
    if path == "/favicon.ico" {
        FAVICON
    } else if path.starts_with("/assets/") || has_content_hash(name) {
        IMMUTABLE
    } else {
        // A file of the build without a hash in its name (a build without `hash-files`).
        "no-cache"
    }
}

/// Whether a file name carries a hash of its content: a dot-separated part of exactly 22 URL-safe
/// base64 characters, as cargo-leptos writes an MD5 (`hourglass.x1Yz….wasm`, `chunk_44.moPA….wasm`;
/// a hash need not hold a digit), and not the splitter's placeholder of 22 underscores.
fn has_content_hash(name: &str) -> bool {
    name.split('.').any(|part| {
        part.len() == 22
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && part.bytes().any(|b| b != b'_')
    })
}

/// A file's headers: how long to keep it, that its type is not to be guessed (scripts), and that
/// its bytes depend on `Accept-Encoding` (shared caches keep one copy per encoding). A file kept
/// for good needs no `Last-Modified` (nobody revalidates it); the page-only headers (content
/// security policy, framing, referrer) mean nothing for a script or wasm module.
async fn cache_files(request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let mut response = next.run(request).await;
    let sent = matches!(
        response.status(),
        StatusCode::OK | StatusCode::NOT_MODIFIED | StatusCode::PARTIAL_CONTENT
    );
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if sent {
        let cache = file_cache(&path);
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        if cache == IMMUTABLE {
            headers.remove(header::LAST_MODIFIED);
        }
    }
    response
}

/// Pages (HTML) are asked for on every visit, unless the handler said otherwise.
pub async fn cache_pages(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let is_page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/html"));
    if is_page && !response.headers().contains_key(header::CACHE_CONTROL) {
        response
            .headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(PAGE));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_build_files_are_kept_a_year_and_plain_ones_revalidated() {
        assert_eq!(
            file_cache("/pkg/hourglass.Xy3_-abcdEFGH123456789.wasm"),
            IMMUTABLE
        );
        assert_eq!(file_cache("/pkg/hourglass.wasm"), "no-cache");
        // Hashes without a digit are hashes too (these were sent `no-cache` and fetched again).
        assert_eq!(
            file_cache("/pkg/chunk_44.moPAJKALJryfSsciwTIwzg.wasm"),
            IMMUTABLE
        );
        assert_eq!(
            file_cache("/pkg/__wasm_split.______________________.js"),
            "no-cache"
        );
        assert_eq!(file_cache("/pkg/hourglass.css"), "no-cache");
        assert_eq!(file_cache("/assets/echarts-5.6.0.min.js"), IMMUTABLE);
        assert_eq!(file_cache("/favicon.ico"), FAVICON);
    }

    #[test]
    fn every_vendored_asset_carries_its_version_in_its_name() {
        // `/assets/` is cached for a year: a file changed under the same name would never reach
        // browsers that have it. A version (or hash) in the name makes a change a new name.
        let assets = Path::new(env!("CARGO_MANIFEST_DIR")).join("../public/assets");
        for entry in std::fs::read_dir(assets).expect("public/assets") {
            let name = entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8");
            let versioned = name
                .split(['-', '.'])
                .any(|part| part.bytes().all(|b| b.is_ascii_digit()) && !part.is_empty());
            assert!(
                versioned || has_content_hash(&name),
                "{name} has no version in its name"
            );
        }
    }

    #[test]
    fn the_bundle_names_come_from_the_hash_file_when_the_build_wrote_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(
            Bundle::read(dir.path()).expect("plain").wasm,
            "hourglass.wasm"
        );
        let error = Bundle::read(dir.path())
            .unwrap()
            .check(dir.path())
            .expect_err("nothing built");
        assert!(error.to_string().contains("copy the hash.txt"), "{error}");
        std::fs::write(
            dir.path().join(HASH_FILE),
            "js: aaaaaaaaaaaaaaaaaaaaa1\nwasm: bbbbbbbbbbbbbbbbbbbbb2\ncss: ccccccccccccccccccccc3\n",
        )
        .expect("write");
        let bundle = Bundle::read(dir.path()).expect("hashed");
        assert_eq!(bundle.js, "hourglass.aaaaaaaaaaaaaaaaaaaaa1.js");
        assert_eq!(bundle.wasm, "hourglass.bbbbbbbbbbbbbbbbbbbbb2.wasm");
        assert_eq!(bundle.css, "hourglass.ccccccccccccccccccccc3.css");
        let error = bundle.check(dir.path()).expect_err("nothing built");
        assert!(
            error
                .to_string()
                .contains("hourglass.aaaaaaaaaaaaaaaaaaaaa1.js"),
            "{error}"
        );
        let options =
            leptos_options(dir.path(), "127.0.0.1:3000".parse().unwrap()).expect("options");
        assert!(options.hash_files);
        assert!(Path::new(options.hash_file.as_ref()).is_absolute());
    }
}
